/* SPDX-License-Identifier: ISC */
/* What kind of address a sender is: the key a client is counted under
 * (IPv4 and IPv4-mapped IPv6 as one, IPv6 cut to its /64), bogons and
 * private ranges. The one place these rules are written. Pure. */
#ifndef ETR_ADDRCLASS_H
#define ETR_ADDRCLASS_H

#include <stdbool.h>
#include <stdint.h>

#include "addr.h"

/* IPv6 clients are counted per /64, the smallest block a subscriber gets:
 * one host can use any address of its /64. */
#define ADDRCLASS_V6_PREFIX 64

/* A network, for rules shared by neighbours: an IPv4 /24 or an IPv6 /48
 * (a site: its /56 and /64 subnets are one network). */
#define ADDRCLASS_NET_V4_BITS 24
#define ADDRCLASS_NET_V6_BITS 48

/* Bytes of a client key (an IPv6 address). */
#define ADDRCLASS_KEY_LEN 16

/* The IPv4 address (host byte order) of an AF_INET address or an
 * IPv4-mapped IPv6 one (::ffff:a.b.c.d); false for anything else. */
bool addrclass_v4(const union etr_sockaddr *a, uint32_t *v4);

/* The key a client is counted under, for every per-IP rule: IPv4 and
 * IPv4-mapped IPv6 as ::ffff:a.b.c.d (so an IPv4 client counts the same on
 * an IPv4 and on a dual-stack IPv6 socket), other IPv6 with all but its
 * first ADDRCLASS_V6_PREFIX bits zero. Port and scope play no part. False
 * (key zeroed) for another family. */
bool addrclass_key(const union etr_sockaddr *a, uint8_t key[ADDRCLASS_KEY_LEN]);

/* The key of a's prefix: as addrclass_key, with an IPv4 address cut to its
 * first v4_bits (1..32) and other IPv6 to its first v6_bits (1..128).
 * addrclass_key is addrclass_prefix(a, 32, ADDRCLASS_V6_PREFIX, key). */
bool addrclass_prefix(const union etr_sockaddr *a, unsigned v4_bits, unsigned v6_bits,
		      uint8_t key[ADDRCLASS_KEY_LEN]);

/* True when a key came from an IPv4 (or IPv4-mapped) address. */
bool addrclass_key_is_v4(const uint8_t key[ADDRCLASS_KEY_LEN]);

/* Rewrite an AF_INET address as the IPv4-mapped AF_INET6 address a
 * dual-stack IPv6 socket sees, port kept. Other families are left alone. */
void addrclass_map_v4(union etr_sockaddr *a);

/* True when src cannot be a real sender: an unknown family, port 0,
 * 0.0.0.0/8, 127.0.0.0/8 (unless the listener itself is on loopback),
 * 224.0.0.0/4 multicast, 240.0.0.0/4 reserved and broadcast, ::, ::1 (unless
 * on loopback), ff00::/8 multicast, and the IPv4-mapped forms of the IPv4
 * ranges. Private ranges are not bogons: a relay on a LAN or a tunnel sees
 * them. */
bool addrclass_bogon(const union etr_sockaddr *src, bool listener_loopback);

/* True for a loopback address: 127.0.0.0/8, ::1, ::ffff:127.0.0.0/104. */
bool addrclass_loopback(const union etr_sockaddr *a);

/* True for loopback, RFC 1918, CGNAT (100.64/10), ULA (fc00::/7),
 * link-local (169.254/16, fe80::/10), and IPv4-mapped forms of these. The
 * unspecified addresses (0.0.0.0, ::) are not: they include public ones. */
bool addrclass_private(const union etr_sockaddr *a);

/* The IPv4 address (host byte order) an IPv6 address stands for: the
 * IPv4-mapped ::ffff:0:0/96, IPv4-translated ::ffff:0:0:0/96 (SIIT),
 * IPv4-compatible ::a.b.c.d (any but :: and ::1), NAT64 64:ff9b::/96, the
 * local-use NAT64 64:ff9b:1::/48 read as translators use it (a /96 of it,
 * the IPv4 in the last 32 bits, bits 64-71 zero) and 6to4
 * 2002:aabb:ccdd::/48 forms, or AF_INET itself. False for other
 * addresses. A relay reduces a peer this way before it judges it: each
 * form reaches that IPv4 address. */
bool addrclass_v4_embedded(const union etr_sockaddr *a, uint32_t *v4);

/* a's address as 16 bytes, every IPv4 form (addrclass_v4_embedded) as
 * ::ffff:a.b.c.d, for tables of addresses and blocks in one family. False
 * for another family. */
bool addrclass_reduce(const union etr_sockaddr *a, uint8_t ip[16]);

/* True for an address that is not globally reachable unicast: the bogon
 * ranges above (0/8, 127/8, 224/4, 240/4, ::, ::1, ff00::/8), the private
 * ones (RFC 1918, CGNAT, link-local, ULA), IETF protocol assignments
 * 192.0.0/24, documentation 192.0.2/24, 198.51.100/24, 203.0.113/24 and
 * 2001:db8::/32, the 6to4 relay anycast 192.88.99/24, benchmarking
 * 198.18/15, Azure's WireServer 168.63.129.16 (a metadata service, as
 * 169.254.169.254 elsewhere), local-use NAT64 64:ff9b:1::/48 (where it
 * leads is the local translator's choice), Teredo 2001::/32 (a relay
 * carries it to whatever IPv4 it names), discard-only 100::/64 and
 * site-local fec0::/10. IPv4-mapped addresses are judged as IPv4; other
 * embedded forms are not reduced here (addrclass_v4_embedded does that).
 * Port and scope play no part. */
bool addrclass_reserved(const union etr_sockaddr *a);

/* True when a connection to upstream up would come back to a listener
 * bound to listen: the same port, and the same address, or listen is a
 * wildcard (0.0.0.0, ::) and up an address of this host (loopback,
 * unspecified, or one of local[0..nlocal), the host's interfaces). A route
 * that loops would chain connections until the caps run out. */
bool addrclass_loops(const union etr_sockaddr *up, const union etr_sockaddr *listen,
		     const union etr_sockaddr *local, size_t nlocal);

/* A network: an address as addrclass_key makes it (IPv4 mapped) and a
 * prefix length counted in those 128 bits. */
struct addr_cidr {
	uint8_t net[16];
	uint8_t bits; /* 0..128 */
};

/* True when c holds the 16-byte address ip (IPv4 as ::ffff:a.b.c.d). */
bool addr_cidr_match(const struct addr_cidr *c, const uint8_t ip[16]);

#endif
