/* SPDX-License-Identifier: ISC */
/* The SNI listener (struct sni_listener) as a listener kind. */
#ifndef ETR_SNI_KIND_H
#define ETR_SNI_KIND_H

#include "kind.h"

extern const struct kind sni_kind;

#endif
