/* SPDX-License-Identifier: ISC */
/* The TURN listener (struct turn_listener) as a listener kind. */
#ifndef ETR_TURN_KIND_H
#define ETR_TURN_KIND_H

#include "kind.h"

extern const struct kind turn_kind;

#endif
