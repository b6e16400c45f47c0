/* SPDX-License-Identifier: ISC */
/* The SNI listener (struct sni_listener) as a listener kind. */
#ifndef ETR_SNI_KIND_H
#define ETR_SNI_KIND_H

#include "kind.h"

struct sni_route;

extern const struct kind sni_kind;

/* A route whose upstream is one of the SNI listeners (or, on a wildcard
 * listener's port, an address of this host) would chain connections until
 * the caps run out, and one to the ops listener would publish it: refused,
 * naming its line. Without resolved (-t, and before the names are
 * resolved) only numeric upstreams are checked, else resolved[i][j] is
 * listener i's route j. Returns 0 or -1 (written to stderr). */
int sni_kind_loops(const struct etr_conf *c, struct sni_route *const *resolved);

#endif
