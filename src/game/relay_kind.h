/* SPDX-License-Identifier: ISC */
/* The game relay (struct relay) as a listener kind. */
#ifndef ETR_RELAY_KIND_H
#define ETR_RELAY_KIND_H

#include "kind.h"

extern const struct kind relay_kind;

/* A relay whose upstream is itself (conf_relay_loops), with the host's
 * addresses: up NULL checks the numeric upstreams (-t, before resolving),
 * else up[i] is relay i's resolved. Returns 0 or -1 (written to stderr). */
int relay_kind_loops(const struct etr_conf *c, const union etr_sockaddr *up);

#endif
