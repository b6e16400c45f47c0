/* SPDX-License-Identifier: ISC */
/* An echo-only PRBE port (struct prbe_port) as a listener kind. */
#ifndef ETR_PRBE_KIND_H
#define ETR_PRBE_KIND_H

#include "kind.h"

extern const struct kind prbe_kind;

#endif
