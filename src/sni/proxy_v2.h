/* SPDX-License-Identifier: ISC */
/* The PROXY protocol version 2 header (HAProxy's doc/proxy-protocol.txt,
 * section 2.2) that the SNI relay may send to an upstream before the
 * client's bytes, so the backend learns the real client address. Pure.
 *
 * Only what the relay needs is built: the PROXY command (0x21), TCP over
 * IPv4 (0x11, 12 address bytes) or over IPv6 (0x21, 36 bytes), no TLVs.
 * An IPv4 client seen on a dual-stack socket (::ffff:a.b.c.d) is sent as
 * TCP over IPv4 when the local address is IPv4 too, so a backend's IPv4
 * allow-lists keep working; a pair of one IPv4 and one real IPv6 address
 * is sent as IPv6 with the IPv4 one mapped. Any other family is refused:
 * the relay never sends UNSPEC or LOCAL headers for a spliced client. */
#ifndef ETR_PROXY_V2_H
#define ETR_PROXY_V2_H

#include <stddef.h>
#include <stdint.h>

#include "addr.h"

/* The 12-byte signature that starts every v2 header. */
#define PROXY_V2_SIG	 "\r\n\r\n\0\r\nQUIT\n"
#define PROXY_V2_SIG_LEN 12

/* Header lengths: 16 fixed bytes, then the addresses. */
#define PROXY_V2_LEN_TCP4 (16 + 12)
#define PROXY_V2_LEN_TCP6 (16 + 36)
#define PROXY_V2_MAX	  PROXY_V2_LEN_TCP6

/* Write the header for a connection from `client` to the relay's `local`
 * address into buf. Returns its length (PROXY_V2_LEN_TCP4 or _TCP6), or -1
 * when an address is of another family or buf is shorter than that. */
int proxy_v2_build(uint8_t *buf, size_t cap, const union etr_sockaddr *client,
		   const union etr_sockaddr *local);

#endif
