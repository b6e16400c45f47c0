/* SPDX-License-Identifier: ISC */
/* The game relay (struct relay) as a listener kind. */
#ifndef ETR_RELAY_KIND_H
#define ETR_RELAY_KIND_H

#include "kind.h"

extern const struct kind relay_kind;

#endif
