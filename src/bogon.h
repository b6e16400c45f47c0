/* SPDX-License-Identifier: ISC */
/* Source addresses no real client can have: drop them before any state is
 * spent on them. Pure: looks at the address, nothing else. */
#ifndef ETR_BOGON_H
#define ETR_BOGON_H

#include <stdbool.h>

#include "addr.h"

/* True when src cannot be a real sender: an unknown family, port 0,
 * 0.0.0.0/8, 127.0.0.0/8 (unless the listener itself is on loopback),
 * 224.0.0.0/4 multicast, 240.0.0.0/4 reserved and broadcast, ::, ::1 (unless
 * on loopback), ff00::/8 multicast, and the IPv4-mapped (::ffff:a.b.c.d)
 * forms of the IPv4 ranges. */
bool bogon_source(const union etr_sockaddr *src, bool listener_loopback);

#endif
