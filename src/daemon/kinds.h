/* SPDX-License-Identifier: ISC */
/* The table of listener kinds every worker walks (loop/kind.h). Adding a
 * kind: its folder defines a struct kind, and one line here and in
 * kinds.c names it. */
#ifndef ETR_KINDS_H
#define ETR_KINDS_H

#include "kind.h"

enum kind_id { KIND_RELAY, KIND_PRBE, KIND_SNI, KIND_TURN, KIND_TUN, KINDS };

extern const struct kind *const kinds[KINDS];

#endif
