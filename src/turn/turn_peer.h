/* SPDX-License-Identifier: ISC */
/* Which peers a TURN relay sends to on a client's behalf: the default
 * refused set (addrclass_reserved, after IPv4 embeddings are reduced), the
 * operator's turn-deny-peer and turn-allow-peer CIDR lists, the relay's
 * own public addresses (open on the relayed ports of live allocations
 * only: client to client),
 * the host's other addresses (closed unless allow-peer names one alone) and
 * the daemon's own sockets (closed, whatever allow-peer says). Pure. */
#ifndef ETR_TURN_PEER_H
#define ETR_TURN_PEER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "addrclass.h"

/* Entries per list (turn-allow-peer, turn-deny-peer) and own addresses. */
#define TURN_PEER_LIST_MAX 64
#define TURN_PEER_OWN_MAX  16
/* The host's interface addresses, and the daemon's own sockets. */
#define TURN_PEER_HOST_MAX  64
#define TURN_PEER_PLUMB_MAX 256

/* A CIDR block over 128 bits: IPv4 as ::ffff:a.b.c.d with bits + 96. */
struct turn_peer_policy {
	struct addr_cidr allow[TURN_PEER_LIST_MAX];
	struct addr_cidr deny[TURN_PEER_LIST_MAX];
	uint8_t own[TURN_PEER_OWN_MAX][16]; /* as in addr_cidr, reduced */
	uint8_t host[TURN_PEER_HOST_MAX][16];
	struct {
		uint8_t ip[16]; /* all zero: any address of the host */
		uint16_t port;	/* host order */
	} plumb[TURN_PEER_PLUMB_MAX];
	uint16_t port_min, port_max; /* the relayed ports; 0-0: none */
	/* The relayed ports with a live allocation, a bit each (65536 bits,
	 * written by the workers that own them); NULL: every relayed port
	 * counts as live. */
	const _Atomic uint64_t *live;
	unsigned nallow, ndeny, nown, nhost, nplumb;
};

/* Why a peer is allowed or not. */
enum turn_peer_why {
	TURN_PEER_OK = 0,   /* the default: a global unicast address */
	TURN_PEER_ALLOWED,  /* in a turn-allow-peer block */
	TURN_PEER_OWN,	    /* a live relayed port of the relay's own address */
	TURN_PEER_DENIED,   /* in a turn-deny-peer block */
	TURN_PEER_HOST,	    /* the host itself, outside the relayed ports */
	TURN_PEER_PLUMBING, /* one of the daemon's own sockets */
	TURN_PEER_RESERVED, /* in the default refused set */
	TURN_PEER_PORT,	    /* port 0 */
	TURN_PEER_FAMILY,   /* neither IPv4 nor IPv6 */
};

/* True for the verdicts that let the peer through. */
static inline bool turn_peer_ok(enum turn_peer_why w)
{
	return w == TURN_PEER_OK || w == TURN_PEER_ALLOWED || w == TURN_PEER_OWN;
}

/* A short lowercase name of w, for logs and metric labels. */
const char *turn_peer_why_str(enum turn_peer_why w);

/* An empty policy: the default refused set alone. */
void turn_peer_init(struct turn_peer_policy *p);

/* Parse "ADDR" or "ADDR/BITS" (IPv4 or IPv6; an address alone is a /32 or
 * /128) into c. Returns 0, or -1 with err set to "KEY: 'TEXT': reason"
 * (e.g. "turn-allow-peer: '10.0.0.0/33': prefix longer than 32"; host bits
 * set are an error that names the block meant). key names the option. */
int turn_cidr_parse(const char *key, const char *text, struct addr_cidr *c, char *err,
		    size_t errlen);

/* Add a block to the allow or deny list. Returns 0, or -ENOSPC past
 * TURN_PEER_LIST_MAX. */
int turn_peer_allow(struct turn_peer_policy *p, const struct addr_cidr *c);
int turn_peer_deny(struct turn_peer_policy *p, const struct addr_cidr *c);

/* Add one of the relay's own public addresses (port ignored): its ports
 * in turn_peer_ports' range are open. Returns 0, -EAFNOSUPPORT, or
 * -ENOSPC past TURN_PEER_OWN_MAX. */
int turn_peer_own(struct turn_peer_policy *p, const union etr_sockaddr *a);

/* The relayed ports of the own addresses: [min, max]. */
void turn_peer_ports(struct turn_peer_policy *p, uint16_t min, uint16_t max);

/* Relayed ports: own addresses are open on those with a live allocation,
 * as bitmap live (TURN_PEER_LIVE_WORDS words, shared by the workers) says.
 * Without one (NULL, the default) on every port of the range. */
#define TURN_PEER_LIVE_WORDS (65536 / 64)
void turn_peer_live_ports(struct turn_peer_policy *p, _Atomic uint64_t *live);

/* Mark port live (on) or not in a bitmap of TURN_PEER_LIVE_WORDS words:
 * an allocation made or ended on it. Any thread. */
void turn_peer_port_set(_Atomic uint64_t *live, uint16_t port, bool on);

/* Whether own-address peers may use port: its bit in the live bitmap. */
bool turn_peer_port_live(const struct turn_peer_policy *p, uint16_t port);

/* Whether peer is an own address on a relayed port without a live
 * allocation: what a channel bound while that port's allocation lived
 * must no longer reach (cheap enough for each ChannelData: the own
 * addresses are one or two). */
bool turn_peer_own_dead(const struct turn_peer_policy *p, const union etr_sockaddr *peer);

/* Forget the host's addresses, before they are added again as the host
 * has them now (an address added or removed at run time). */
void turn_peer_hosts_clear(struct turn_peer_policy *p);

/* Add an address of the host (port ignored; loopback, 0.0.0.0 and :: are
 * the host without being added). Returns 0, -EAFNOSUPPORT, or -ENOSPC past
 * TURN_PEER_HOST_MAX. */
int turn_peer_host(struct turn_peer_policy *p, const union etr_sockaddr *a);

/* Add one of the daemon's own sockets, address and port: a listener, a
 * game server, an SNI backend, the ops plane. A wildcard address stands
 * for every address of the host. Returns 0, -EAFNOSUPPORT, or -ENOSPC
 * past TURN_PEER_PLUMB_MAX. */
int turn_peer_plumbing(struct turn_peer_policy *p, const union etr_sockaddr *a);

/* Judge peer, in this order: family, then port 0 (unless ip_only: a
 * CreatePermission's port is ignored, RFC 8656 §9.1); then IPv4-mapped,
 * IPv4-compatible, NAT64 and 6to4 forms are reduced to their IPv4 address;
 * a turn-deny-peer block holding the address (as sent or reduced) refuses;
 * one of the daemon's sockets refuses (PLUMBING; not for ip_only); an own
 * address on a relayed port with a live allocation (any port for ip_only)
 * allows; any other
 * address of the host refuses (HOST) unless a turn-allow-peer entry is
 * that address alone (/32, /128); a turn-allow-peer block holding the
 * reduced address allows; else the default refused set decides. */
enum turn_peer_why turn_peer_check(const struct turn_peer_policy *p, const union etr_sockaddr *peer,
				   bool ip_only);

/* turn_peer_ok(turn_peer_check(p, peer, false)). */
bool turn_peer_allowed(const struct turn_peer_policy *p, const union etr_sockaddr *peer);

#endif
