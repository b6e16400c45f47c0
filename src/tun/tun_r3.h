/* SPDX-License-Identifier: ISC */
/* Rung 3 on one worker (issue 25 item 4): the connections an SNI listener
 * of the same worker handed over (fd and the bytes read), each an r3conn
 * (TLS on the tunnel certificate's context, then udpws) with a connected
 * UDP socket of its own to the local WireGuard port, opened once its
 * token is let in. Limits: connections per worker, per source (srctab,
 * SipHash with a random key) and per token, the upgrade's and the idle
 * time, the ciphertext a slow client may hold (r3conn_send's -ENOBUFS).
 * Its loop work is one stream_read at a time per connection (a chunk in,
 * fed a TLS record's worth at a time, before the next is asked), and the
 * copied UDP sends of what that chunk carried. */
#ifndef ETR_TUN_R3_H
#define ETR_TUN_R3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "banlist.h"
#include "config.h"
#include "endpoint.h"
#include "loop.h"
#include "srctab.h"
#include "tun_tokens.h"

struct tun_cert;
struct r3conn;

/* The defaults of struct tun_r3_limits (config.h; the rung3-* keys of
 * [tunnel]) and their bounds. Connections a worker holds at once (at most
 * TUN_R3_CONNS_MAX: each may hold about 340 KiB and its message, see
 * man 5). Per worker: connections of one source (an IPv4 address, an IPv6
 * /64; srctab's multiples above it) and of one token (a gateway needs one;
 * a few more for a reconnect that overlaps the old connection's end). */
#define TUN_R3_CONNS	  256
#define TUN_R3_CONNS_MAX  4096
#define TUN_R3_PER_SOURCE 8
#define TUN_R3_PER_TOKEN  4
/* The largest message (one WireGuard datagram): an MTU of 2016 and
 * WireGuard's 32 bytes; WS_MSG_MIN to WS_MSG_MAX. */
#define TUN_R3_MSG 2048
/* TLS and the upgrade must be done within this; then a connection with
 * nothing from its client for the idle time ends (WireGuard drops a
 * session after 3 minutes without a handshake: a tunnel quiet that long
 * carries nothing). In ms, as the keys are. A closing connection's last
 * bytes wait at most TUN_R3_LINGER. */
#define TUN_R3_UPGRADE_MS     10000
#define TUN_R3_UPGRADE_MS_MIN 1000
#define TUN_R3_UPGRADE_MS_MAX 300000
#define TUN_R3_IDLE_MS	      180000
#define TUN_R3_IDLE_MS_MIN    10000
#define TUN_R3_IDLE_MS_MAX    86400000
#define TUN_R3_LINGER	      (2 * NS_PER_SEC)

/* The defaults (tun_conf's, the tests'). */
static inline void tun_r3_limits_default(struct tun_r3_limits *l)
{
	*l = (struct tun_r3_limits){TUN_R3_CONNS, TUN_R3_PER_SOURCE, TUN_R3_PER_TOKEN,
				    TUN_R3_MSG,	  TUN_R3_UPGRADE_MS, TUN_R3_IDLE_MS};
}

/* Why a hand-over or a connection was refused or a datagram dropped
 * (counted; /metrics does not show them yet). */
enum tun_r3_count {
	TUN_R3_TAKEN,	   /* connections taken over */
	TUN_R3_NO_CERT,	   /* refused: no certificate in force */
	TUN_R3_FULL,	   /* refused: rung3-max-connections held */
	TUN_R3_SOURCE,	   /* refused: its source holds rung3-max-per-source */
	TUN_R3_TOKEN_FULL, /* closed after the upgrade: its token holds rung3-max-per-token */
	TUN_R3_TOKEN_GONE, /* closed: its token left the set */
	TUN_R3_IDLE_END,   /* closed: the upgrade's or the idle time */
	TUN_R3_DG_IN,	   /* datagrams to WireGuard */
	TUN_R3_DG_OUT,	   /* datagrams from WireGuard to a client */
	TUN_R3_DROP_WG,	   /* to WireGuard: no copy buffer (the loop refused) */
	TUN_R3_DROP_SLOW,  /* from WireGuard: the client's backlog is full */
	TUN_R3_WG_ERROR,   /* a receive error on a WireGuard socket */
	TUN_R3_COUNTS
};

/* A connection's slot. */
struct tun_r3_slot {
	uint8_t state, gen;
	bool reading, sending, closing, admitted;
	int fd, ufd; /* the client's stream; the socket to WireGuard, -1 */
	uint32_t next_free;
	long token; /* its index in the worker's set, once admitted */
	union etr_sockaddr peer;
	struct timer timer;
	uint64_t start, last; /* taken; the client's last bytes */
	struct r3conn *c;     /* with its host name and message buffer */
};

struct tun_r3 {
	const struct loop_ops *ops;
	struct loop *loop;
	struct endpoint_table *ep;
	unsigned slot;
	bool attached;
	struct tun_cert *cert;
	struct tun_tokens *tokens;
	struct tun_tokset *set; /* the set in force as this worker took it */
	uint64_t gen;
	uint32_t *per_token;   /* connections by token of set */
	union etr_sockaddr wg; /* the local WireGuard port */
	struct srctab src;
	struct tun_r3_limits lim;
	uint64_t upgrade_ns, idle_ns;
	struct tun_r3_slot *conns;
	uint32_t nconns, free_head, live;
	uint64_t count[TUN_R3_COUNTS];
};

/* A worker's rung 3 on cert's context and names, tokens' set, the
 * WireGuard port wg_port on loopback, within lim (copied). 0, or -EINVAL
 * for a limit out of its bounds, -ENOMEM. */
int tun_r3_open(struct tun_r3 *w, struct tun_cert *cert, struct tun_tokens *tokens,
		uint16_t wg_port, const struct tun_r3_limits *lim);
int tun_r3_attach(struct tun_r3 *w, const struct loop_ops *ops, struct loop *loop,
		  struct endpoint_table *ep);

/* On the worker's thread: the connection fd (from peer, with the len bytes
 * already read from it at pre) is this worker's from now on. Returns 0, or
 * -errno when it is not taken (the caller closes fd). */
int tun_r3_take(struct tun_r3 *w, int fd, const union etr_sockaddr *peer, const uint8_t *pre,
		size_t len, uint64_t now);

/* The token set moved (the control thread's news): take it; a connection
 * whose token left it is closed with 1008. */
void tun_r3_tokens(struct tun_r3 *w);

/* A ban list in force: end what a banned source holds. */
void tun_r3_bans(struct tun_r3 *w, const struct banlist *b);

/* On the way out: end every connection. */
void tun_r3_shutdown(struct tun_r3 *w);
void tun_r3_close(struct tun_r3 *w);

#endif
