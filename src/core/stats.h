/* SPDX-License-Identifier: ISC */
/* What the packet loop publishes and the ops plane reads. Counters have one
 * writer, the loop thread: relaxed atomic loads and stores, plain moves on
 * x86-64, no lock on the packet path. Master status changes a few times per
 * heartbeat round and sits behind a mutex. */
#ifndef ETR_STATS_H
#define ETR_STATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "config.h"
#include "prbe.h"

/* The limits are the configuration's, named there once. */
#define STATS_RELAYS_MAX  CONF_RELAYS_MAX
#define STATS_MASTERS_MAX CONF_MASTERS_MAX
#define STATS_WORKERS_MAX CONF_WORKERS_MAX

/* Single-writer increment: no read-modify-write bus lock. */
#define STAT_ADD(field, n)                                                                         \
	atomic_store_explicit(&(field),                                                            \
			      atomic_load_explicit(&(field), memory_order_relaxed) + (n),          \
			      memory_order_relaxed)
#define STAT_SET(field, v) atomic_store_explicit(&(field), (v), memory_order_relaxed)
#define STAT_GET(field)	   atomic_load_explicit(&(field), memory_order_relaxed)

/* Why a datagram was not forwarded. */
enum stats_drop {
	DROP_QUEUE_FULL,      /* SESSION_QUEUE_MAX already in flight */
	DROP_TRUNCATED,	      /* larger than the receive buffer */
	DROP_TABLE_FULL,      /* --max-sessions reached */
	DROP_DRAINING,	      /* new client while draining */
	DROP_SOCKET,	      /* could not open a session socket */
	DROP_SEND_ERROR,      /* the kernel refused the send */
	DROP_BAD_SOURCE,      /* source address of an unknown family */
	DROP_BOGON,	      /* a source that cannot be real (0/8, multicast, port 0...) */
	DROP_BANNED,	      /* in the ban list */
	DROP_IP_RATE,	      /* the source IP's query bucket is empty */
	DROP_SERVER_RATE,     /* the game server's query budget is spent */
	DROP_IP_SESSIONS,     /* the source IP has its most sessions */
	DROP_MASTER_RATE,     /* a master's address past its own allowance */
	DROP_IP_SESSION_RATE, /* the source IP opened its most sessions this second */
	DROP_SESSION_RATE,    /* the relay opened its most sessions this second */
	DROP_CACHE_RATE,      /* the budget for answers from the query cache is spent */
	DROP_NET_RATE,	      /* a player's network took a token lately; the last is kept */
	DROP_QPORT_MISMATCH,  /* in-game packet with another qport than its session's */
	DROP_QPORT_OWNED,     /* its qport belongs to another session heard from just now */
	DROP_CONNECT_UNREAD,  /* a connect whose qport could not be read (or not within budget) */
	DROP_CONNECT_UNCHALLENGED, /* a connect on a session never sent a challenge */
	DROP_PRBE, /* a PRBE probe not echoed (etrelay_prbe_packets_total says why) */
	DROP_COUNT
};

/* Why a session ended. */
enum stats_close {
	CLOSE_IDLE,	 /* no packet either way for the timeout */
	CLOSE_SHUTDOWN,	 /* relay exiting */
	CLOSE_ERROR,	 /* its socket failed for good */
	CLOSE_UNASSURED, /* the game server never answered it in time */
	CLOSE_EVICTED,	 /* unassured, made room for a new client in a full table */
	CLOSE_COUNT
};

/* Stopping is the drain of a SIGTERM: shown as draining, but final. */
enum stats_lifecycle { LIFECYCLE_ACTIVE, LIFECYCLE_DRAINING, LIFECYCLE_STOPPING };

/* Game server as the last probe round saw it (values of enum hb_server). */
enum stats_server { SERVER_UNKNOWN, SERVER_UP, SERVER_DOWN };

/* Result of the last heartbeat to one master. */
enum stats_hb_result {
	HB_RESULT_NONE,		/* none sent yet */
	HB_RESULT_SENT,		/* handed to the kernel */
	HB_RESULT_SEND_ERROR,	/* sendto failed */
	HB_RESULT_UNRESOLVED,	/* no address for the name */
	HB_RESULT_WRONG_FAMILY, /* only addresses the listener cannot reach */
	HB_RESULT_COUNT
};

/* One echo port's PRBE results: each verdict of prbe_check, except that an
 * echo counts as echoed once the kernel took it, and as send_error
 * (STATS_PRBE_SEND_ERROR) when it did not; and banned (STATS_PRBE_BANNED):
 * a datagram from a ban-file source on an echo-only port, never decided. */
#define STATS_PRBE_SEND_ERROR PRBE_VERDICTS
#define STATS_PRBE_BANNED     (PRBE_VERDICTS + 1)
#define STATS_PRBE_RESULTS    (PRBE_VERDICTS + 2)
struct prbe_stats {
	char port[ADDR_STRLEN]; /* the listener's address: the metric's label */
	_Atomic uint64_t result[STATS_PRBE_RESULTS];
};

struct master_status {
	char name[ADDR_HOSTLEN + 8]; /* "host:port" as configured */
	char addr[ADDR_STRLEN];	     /* last good address, "" if none */
	uint64_t last_heartbeat;     /* unix seconds, 0 = never */
	enum stats_hb_result last_result;
	bool listing_confirmed;	 /* it challenged within two heartbeat intervals, and
				  * the answer left from the public socket */
	bool quiet;		 /* heartbeats for two intervals, no challenge */
	uint64_t last_confirmed; /* unix seconds of its last challenge answered, 0 = never */
	uint64_t heartbeats[HB_RESULT_COUNT];
};

struct relay_stats {
	/* Set once before the ops plane starts; constant afterwards. */
	char name[32];
	char public_addr[ADDR_STRLEN];
	char upstream[ADDR_STRLEN];
	char game[8];
	unsigned nmasters;

	_Atomic uint64_t up_pkts, up_bytes;	/* client -> game server */
	_Atomic uint64_t down_pkts, down_bytes; /* game server -> client */
	_Atomic uint64_t drops[DROP_COUNT];
	_Atomic uint64_t refused;	   /* ECONNREFUSED: game server port closed */
	_Atomic uint64_t cache_answers;	   /* getinfo/getstatus answered by the relay */
	_Atomic uint64_t qport_collisions; /* two live sessions, one qport */
	_Atomic uint64_t sessions_opened;
	_Atomic uint64_t sessions_closed[CLOSE_COUNT];
	_Atomic uint32_t sessions_active;
	_Atomic uint64_t probes_sent;
	_Atomic uint64_t probe_rounds_ok, probe_rounds_failed;
	_Atomic uint64_t flatlines;
	_Atomic int server; /* enum stats_server */
	bool prbe_on;	    /* prbe yes: the echo's results below */
	struct prbe_stats prbe;

	pthread_mutex_t lock; /* guards masters[] */
	struct master_status masters[STATS_MASTERS_MAX];
};

struct loop_stats;
struct sni_shared;
struct turn_shared;
struct control_stats; /* control_stats.h */

/* The tunnel's (tun_kind.c, written on the control thread with atomics):
 * peers on the interface after the last good reconcile, reconciles by
 * result (ok, failed); and from the interface's peers as the last
 * reconcile read them (when, unix seconds, 0: never): how long ago each
 * last completed a handshake, as a histogram (bucket b: up to the b-th
 * bound, the last the rest; the sum in ns and the count), and how many
 * never did. */
#define STATS_TUN_AGE_BUCKETS 9
struct tun_r3_stats; /* tun_r3.h */
struct tun_stats {
	uint64_t peers;
	uint64_t reconciles[2];
	uint64_t restores; /* the interface lost the relay's key and port */
	uint64_t age_hist[STATS_TUN_AGE_BUCKETS + 1];
	uint64_t age_sum_ns, age_count;
	uint64_t no_handshake;
	uint64_t ages_read;
	/* Rung 3's counters, each worker's (set at open, before the ops
	 * plane starts; NULL: none), and whether it serves (an SNI listener
	 * hands connections over). */
	const struct tun_r3_stats *r3[STATS_WORKERS_MAX];
	bool r3_on;
};

/* Every worker keeps its own counters (its relays', its loop's), written
 * by its thread alone, on cache lines no other worker writes; the ops
 * plane sums them. relay[i] and loop are worker 0's: the owner's, which
 * also holds what only it knows (the game server's state, probes, the
 * masters). */
struct etr_stats {
	_Atomic int lifecycle;	       /* enum stats_lifecycle; the ops thread may write it */
	const char *backend;	       /* "io_uring" or "epoll" */
	const struct loop_stats *loop; /* the backend's counters; NULL in tests */
	const char *version;
	uint64_t started_unix;
	unsigned nrelays;
	struct relay_stats *relay[STATS_RELAYS_MAX];
	/* Workers 1.. (0: one worker, relay[] and loop alone). */
	unsigned nworkers;
	struct relay_stats *worker_relay[STATS_WORKERS_MAX][STATS_RELAYS_MAX];
	const struct loop_stats *worker_loop[STATS_WORKERS_MAX];
	/* The echo-only ports (prbe-listen), each worker's. */
	unsigned nprbe_ports;
	struct prbe_stats *prbe_port[STATS_WORKERS_MAX][CONF_PRBE_LISTEN_MAX];
	/* The SNI listeners (sni.h: their counters, per worker), NULL: none. */
	struct sni_shared *sni;
	/* The TURN listeners (turn.h), NULL: none. */
	struct turn_shared *turn;
	struct control_stats *control; /* the control-plane client's; NULL without one */
	struct tun_stats *tunnel;      /* the tunnel's; NULL without one */
	/* The XDP program (xdp.h), NULL: not attached; xdp_counts(xdp, out)
	 * fills out[XDP_COUNTS] with its counters. */
	struct xdp *xdp;
	void (*xdp_counts)(struct xdp *x, uint64_t *out);
	/* With xdp-interface: "native", "generic" or "mixed", or why it is
	 * off; "" without. Set before the ops plane starts. */
	char xdp_mode[192];
};

/* Workers whose counters st holds (1 when nworkers is 0). */
static inline unsigned stats_workers(const struct etr_stats *st)
{
	return st->nworkers ? st->nworkers : 1;
}

/* Relay i's counters on worker w; NULL when there are none. */
static inline struct relay_stats *stats_relay_of(const struct etr_stats *st, unsigned w, unsigned i)
{
	return w == 0 ? st->relay[i] : st->worker_relay[w][i];
}

/* Worker w's loop counters; NULL when there are none. */
static inline const struct loop_stats *stats_loop_of(const struct etr_stats *st, unsigned w)
{
	return w == 0 ? st->loop : st->worker_loop[w];
}

/* The counter at off (an _Atomic uint64_t in struct relay_stats) of relay
 * i, summed over the workers. */
uint64_t stats_relay_sum(const struct etr_stats *st, unsigned i, size_t off);

/* Relay i's open sessions, on every worker. */
uint32_t stats_sessions_active(const struct etr_stats *st, unsigned i);

/* Copy relay r's masters' status under its lock; returns how many. */
unsigned stats_relay_masters(struct relay_stats *r, struct master_status out[STATS_MASTERS_MAX]);

/* Add the counters of `from` to `to` (for a relay's one line at exit). */
void stats_relay_add(struct relay_stats *to, const struct relay_stats *from);

/* For a listener's line at exit: " (name n, ...)" of the non-zero
 * counters among v[0..n) but v[skip], written at buf + o; returns the new
 * length. */
size_t stats_list(char *buf, size_t size, size_t o, const uint64_t *v, unsigned n,
		  const char *(*name)(unsigned), unsigned skip);

const char *stats_drop_name(enum stats_drop d);
const char *stats_close_name(enum stats_close c);
const char *stats_hb_result_name(enum stats_hb_result r);
/* prbe_verdict_name, "send_error" for STATS_PRBE_SEND_ERROR and "banned"
 * for STATS_PRBE_BANNED. */
const char *stats_prbe_result_name(unsigned r);

#endif
