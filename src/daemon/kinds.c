/* SPDX-License-Identifier: ISC */
/* The listener kinds, in the order a worker attaches, shuts down and
 * closes them. */
#include "kinds.h"

#include "prbe_kind.h"
#include "relay_kind.h"
#include "sni_kind.h"
#include "tun_kind.h"
#include "turn_kind.h"

const struct kind *const kinds[KINDS] = {
    [KIND_RELAY] = &relay_kind, /* game/ */
    [KIND_PRBE] = &prbe_kind,	/* fwd/ */
    [KIND_SNI] = &sni_kind,	/* sni/ */
    [KIND_TURN] = &turn_kind,	/* turn/ */
    [KIND_TUN] = &tun_kind,	/* tun/ */
};
