/* SPDX-License-Identifier: ISC */
/* The PRBE echo decision: a gateway tests a UDP path to the relay without
 * touching its live tunnel by sending a datagram that starts with the four
 * bytes "PRBE"; the relay sends it back unchanged. Pure: the caller owns
 * the socket and passes `now` (CLOCK_MONOTONIC ns) in.
 *
 * An echo port is a reflector, so it is hardened as one (the old UDP
 * echo/chargen storms, CVE-1999-0103): the reply is the datagram itself,
 * never larger; nothing goes to a source port below 1024 (a forged source
 * aimed at a system service), nor to a source port that is one of the echo
 * ports (two echoers would bounce a probe between them forever) or a
 * well-known reflector's or echo port (prbe_reflector_port), nor to a
 * source that cannot be real (addrclass_bogon); datagrams over a size cap
 * are dropped; each source IP (an IPv6 /64) has a token bucket (rl_table),
 * and the listener one for every source together (prbe_budget: forged
 * sources each have a fresh bucket). Two echoers on ports neither knows of
 * the other still bounce a forged probe: the same bytes coming back from
 * the address they were echoed to within PRBE_BOUNCE_NS are dropped, so a
 * loop ends after one round. The checks run cheapest first and the buckets
 * last, so junk spends no token. A datagram that does not start with "PRBE" is not a probe: the
 * port may be shared with a game relay or a TURN listener, whose first
 * bytes differ (0x50 'P' is neither STUN, ChannelData, DTLS, RTP,
 * WireGuard nor a Quake 3 out-of-band packet). */
#ifndef ETR_PRBE_H
#define ETR_PRBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "ratelimit.h"

/* The first bytes of a probe. */
#define PRBE_MAGIC     "PRBE"
#define PRBE_MAGIC_LEN 4

/* Most echo ports one decision knows (the seed uses 443, 51820, 51821). */
#define PRBE_PORTS_MAX 8

/* The default size cap: a full Ethernet frame's IPv4 UDP payload, enough
 * for a gateway to test the path MTU its tunnel needs. */
#define PRBE_LEN_MAX_DEFAULT 1472

/* Echoes remembered per decision to spot one that comes back (a power of
 * two: 16 bytes each), and for how long. An echoer's bounce comes back
 * within its round trip; a gateway that sends the very same bytes again
 * from the same port within that time gets no second echo (a probe that
 * carries a sequence number or a nonce always does). */
#define PRBE_RECENT    512
#define PRBE_BOUNCE_NS 500000000ull

/* An echo sent: a keyed hash of its destination and bytes (0: none), and
 * when (ns). */
struct prbe_echo {
	uint64_t tag, when;
};

/* What to do with a datagram. */
enum prbe_verdict {
	PRBE_ECHO,	     /* send it back, unchanged, to its source */
	PRBE_NOT_PROBE,	     /* no "PRBE" at its start: not for this module */
	PRBE_DROP_SOURCE,    /* a source that cannot be real */
	PRBE_DROP_PORT,	     /* source port below 1024 */
	PRBE_DROP_LOOP,	     /* source port is an echo port */
	PRBE_DROP_SIZE,	     /* over the size cap */
	PRBE_DROP_RATE,	     /* over the source's rate */
	PRBE_DROP_REFLECTOR, /* source port is a well-known reflector's or echo port */
	PRBE_DROP_BUDGET,    /* over the listener's rate, every source together */
	PRBE_DROP_BOUNCE,    /* the bytes just echoed to this source, back again */
	PRBE_VERDICTS
};

/* One echo listener's rules and counters. The counters have one writer,
 * the loop thread that owns the socket; the ops plane gets copies. */
struct prbe {
	struct rl_table *rl; /* per-source buckets, the caller's */
	uint16_t len_max;
	uint16_t nports;
	uint16_t ports[PRBE_PORTS_MAX];	      /* host order */
	bool listener_loopback;		      /* loopback sources are real here */
	bool budget_on;			      /* prbe_budget was called */
	struct rl_bucket budget;	      /* every source together */
	struct prbe_echo recent[PRBE_RECENT]; /* by tag: to spot a bounce */
	uint64_t count[PRBE_VERDICTS];
};

/* Set up p: the caller's rate table rl, a size cap len_max
 * (PRBE_MAGIC_LEN..65535; 0 means PRBE_LEN_MAX_DEFAULT), the echo ports,
 * and whether the listener is on loopback. Returns 0, or -EINVAL. */
int prbe_init(struct prbe *p, struct rl_table *rl, uint16_t len_max, const uint16_t *ports,
	      unsigned nports, bool listener_loopback);

/* Bound the echoes of every source together: `burst` at once, then
 * `per_sec` a second (this decision's part of its listener's). Without
 * it, only each source's bucket bounds them. */
void prbe_budget(struct prbe *p, unsigned burst, unsigned per_sec);

/* Whether no probe is echoed to source port `port`: a well-known UDP
 * reflector's above 1023 (MS-SQL browser 1434, SSDP 1900, Apple Remote
 * Desktop 3283, WS-Discovery 3702, mDNS 5353, CoAP 5683, Ubiquiti
 * discovery 10001, memcached 11211) or the echo ports of the seed's fleet
 * (WireGuard's 51820, steered to the echo, and 51821); below 1024 is
 * refused anyway (echo 7, chargen 19, DNS 53, NTP 123, 443...). */
bool prbe_reflector_port(uint16_t port);

/* Decide about a datagram of len bytes from src at `now`, and count it.
 * *reply_len is what to send back from the same bytes: len for PRBE_ECHO,
 * else 0. */
enum prbe_verdict prbe_check(struct prbe *p, const union etr_sockaddr *src, const uint8_t *data,
			     size_t len, uint64_t now, size_t *reply_len);

/* A short fixed name for a verdict, for logs and metric labels. */
const char *prbe_verdict_name(enum prbe_verdict v);

#endif
