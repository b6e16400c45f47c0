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
#include "ratelimit.h"
#include "srctab.h"
#include "tls_server.h"
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
/* The ciphertext a connection may hold for a slow client before a
 * datagram from WireGuard is dropped: at most the TLS session's own bound
 * (TLS_CONN_OUT_MAX), at least a few records. */
#define TUN_R3_BACKLOG	   TLS_CONN_OUT_MAX
#define TUN_R3_BACKLOG_MIN 4096
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
/* Handshakes begun: a hello replayed at no cost is a few tenths of a ms
 * of the worker's crypto (the worker that moves the game's packets), so
 * each costs a token of its source's bucket and of the relay's (each
 * worker its share), as TURN's TLS (tls-handshake-ip-rate): per second
 * and at once. A gateway reconnects a few times a minute. */
#define TUN_R3_HS_RATE	   200
#define TUN_R3_HS_BURST	   100
#define TUN_R3_HS_IP_RATE  20
#define TUN_R3_HS_IP_BURST 40
#define TUN_R3_HS_MAX	   1000000
/* A new connection finding all rung3-max-connections held ends the oldest
 * one not upgraded yet, if it has had this long (connections opened and
 * left half done, 30 a second from 40 sources, kept every gateway out:
 * attack round 16); a gateway's own has at least as long as the
 * connections before it take to age out. */
#define TUN_R3_EVICT_AGE (1 * NS_PER_SEC)
/* A line about refused handshakes at most this often (ms, per worker). */
#define TUN_R3_LOG_EVERY_MS (60 * 1000)
/* Sources a worker's handshake table keeps (32 bytes each). */
#define TUN_R3_RL_ENTRIES 4096

/* The defaults (tun_conf's, the tests'). */
static inline void tun_r3_limits_default(struct tun_r3_limits *l)
{
	*l = (struct tun_r3_limits){.conns = TUN_R3_CONNS,
				    .per_source = TUN_R3_PER_SOURCE,
				    .per_token = TUN_R3_PER_TOKEN,
				    .max_msg = TUN_R3_MSG,
				    .backlog = TUN_R3_BACKLOG,
				    .handshake_ms = TUN_R3_UPGRADE_MS,
				    .idle_ms = TUN_R3_IDLE_MS,
				    .hs_rate = TUN_R3_HS_RATE,
				    .hs_burst = TUN_R3_HS_BURST,
				    .hs_ip_rate = TUN_R3_HS_IP_RATE,
				    .hs_ip_burst = TUN_R3_HS_IP_BURST};
}

/* What became of a connection handed over, counted once each
 * (etrelay_tunnel_rung3_connections_total{result}). */
enum tun_r3_result {
	TUN_R3_UPGRADED,     /* let in: its token in the set, its socket to WireGuard */
	TUN_R3_NO_CERT,	     /* refused at the hand-over: no certificate in force */
	TUN_R3_LIMIT_TOTAL,  /* refused at the hand-over: rung3-max-connections held */
	TUN_R3_LIMIT_SOURCE, /* refused at the hand-over: its source holds rung3-max-per-source */
	TUN_R3_RATE_SOURCE,  /* refused at the hand-over: over rung3-handshake-ip-rate */
	TUN_R3_RATE_TOTAL,   /* refused at the hand-over: over rung3-handshake-rate */
	TUN_R3_LIMIT_TOKEN,  /* closed after the upgrade (1008): its token holds rung3-max-per-token
			      */
	TUN_R3_BAD_UPGRADE,  /* the upgrade refused: 400, 404, 426, 431 */
	TUN_R3_NO_TOKEN,     /* 401: no Authorization: Bearer, or a malformed one */
	TUN_R3_BAD_TOKEN,    /* 403: a token not in the set */
	TUN_R3_TLS_FAILED,   /* TLS failed: a bad handshake or record */
	TUN_R3_TIMEOUT,	     /* TLS and the upgrade not done in rung3-handshake-timeout */
	TUN_R3_CLOSED,	 /* ended before its upgrade otherwise: the client left, a ban, the exit */
	TUN_R3_EVICTED,	 /* ended before its upgrade: the oldest such, for a new one (all held) */
	TUN_R3_INTERNAL, /* no socket to WireGuard (1011) */
	TUN_R3_RESULTS
};

/* Why a connection taken ended, counted once each
 * (etrelay_tunnel_rung3_connections_ended_total{reason}). */
enum tun_r3_end {
	TUN_R3_END_CLIENT,    /* the gateway's close frame, close_notify or EOF */
	TUN_R3_END_REFUSED,   /* the upgrade refused, or its token's limit */
	TUN_R3_END_HANDSHAKE, /* rung3-handshake-timeout */
	TUN_R3_END_IDLE,      /* rung3-idle-timeout (1001) */
	TUN_R3_END_TOKEN,     /* its token left the set (1008) */
	TUN_R3_END_TOO_BIG,   /* a message over rung3-max-message (1009) */
	TUN_R3_END_ERROR,     /* TLS or WebSocket broken, a reset, a failed read or send */
	TUN_R3_END_BANNED,    /* a ban list in force holds its source */
	TUN_R3_END_SHUTDOWN,  /* the relay's exit */
	TUN_R3_END_EVICTED,   /* not upgraded yet, the oldest, when all were held */
	TUN_R3_ENDS
};

/* Datagrams not carried (etrelay_tunnel_rung3_dropped_total{reason}). */
enum tun_r3_drop {
	TUN_R3_DROP_WG_SEND,	/* to WireGuard: no copy buffer, nor room in its socket */
	TUN_R3_DROP_WG_REFUSED, /* to WireGuard: its port refused one (not up: ICMP) */
	TUN_R3_DROP_BACKLOG,	/* to the client: its backlog (rung3-max-backlog) is full */
	TUN_R3_DROP_TOO_BIG,	/* to the client: over rung3-max-message */
	TUN_R3_DROP_CLOSING,	/* to the client: its connection is closing */
	TUN_R3_DROPS
};

/* Names for logs and metric labels. */
const char *tun_r3_result_name(enum tun_r3_result r);
const char *tun_r3_end_name(enum tun_r3_end e);
const char *tun_r3_drop_name(enum tun_r3_drop d);

/* A worker's counters, written by its thread, read by the ops thread
 * (stats.h's rules): every field an _Atomic uint64_t, so that
 * tun_r3_totals sums them as one array. */
struct tun_r3_stats {
	_Atomic uint64_t result[TUN_R3_RESULTS];
	_Atomic uint64_t ended[TUN_R3_ENDS];
	_Atomic uint64_t dropped[TUN_R3_DROPS];
	_Atomic uint64_t dgrams[2]; /* [0] to WireGuard, [1] to the client */
	_Atomic uint64_t bytes[2];  /* their payload (no WebSocket or TLS framing) */
	_Atomic uint64_t open;	    /* connections taken and not ended */
};

/* Every worker's counters of st (struct tun_stats's r3[]) summed into
 * out. */
struct tun_stats;
void tun_r3_totals(const struct tun_stats *st, struct tun_r3_stats *out);

/* A connection's slot. */
struct tun_r3_slot {
	uint8_t state, gen;
	uint8_t end; /* why it ends (enum tun_r3_end), TUN_R3_ENDS: not yet known */
	bool reading, sending, closing, admitted;
	bool counted; /* its result counted */
	int fd, ufd;  /* the client's stream; the socket to WireGuard, -1 */
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
	struct rl_table hs_ip; /* handshakes begun, by source */
	struct rl_bucket hs;   /* and in all, this worker's share */
	uint64_t hs_log_at;    /* ms: the next line about them, not before */
	struct tun_r3_limits lim;
	uint64_t upgrade_ns, idle_ns;
	struct tun_r3_slot *conns;
	uint32_t nconns, free_head, live;
	struct tun_r3_stats st; /* struct tun_stats's r3[] points here */
};

/* A worker's rung 3 on cert's context and names, tokens' set, the
 * WireGuard port wg_port on loopback, within lim (copied; hs_rate and
 * hs_burst are this worker's share). 0, or -EINVAL for a limit out of its
 * bounds, -ENOMEM. */
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
