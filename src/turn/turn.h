/* SPDX-License-Identifier: ISC */
/* The TURN listener (RFC 8656): per worker a UDP socket in the port's
 * reuseport group (and a TCP listener), the relayed sockets of its
 * allocations, and the handlers that glue the codec (stun.h), the
 * credentials (turn_auth.h), the allocation table (turn_alloc.h) and the
 * peer policy (turn_peer.h) to the loop (turn_listener.c and the files turn_int.h
 * lists). What the workers share (secrets, the allocation cap, counters) is
 * struct turn_shared. */
#ifndef ETR_TURN_H
#define ETR_TURN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "addr.h"
#include "banlist.h"
#include "config.h"
#include "endpoint.h"
#include "loop.h"
#include "ratelimit.h"
#include "srctab.h"
#include "tls_reload.h"
#include "tls_server.h"
#include "turn_alloc.h"
#include "turn_auth.h"
#include "turn_peer.h"

_Static_assert(REF_FITS(TURN_ALLOC_IDX_BITS, TURN_ALLOC_GEN_BITS, ENDPOINT_REF_BITS),
	       "allocation refs are endpoint refs");

/* Why an Allocate was refused (etrelay_turn_allocations_rejected_total). */
enum turn_reject {
	TURN_REJ_CAP,	  /* max-allocations reached (508) */
	TURN_REJ_QUOTA,	  /* user-quota reached (486) */
	TURN_REJ_DRAIN,	  /* the process is draining (403) */
	TURN_REJ_PORTS,	  /* no relayed port left or bindable (508) */
	TURN_REJ_EXISTS,  /* the 5-tuple has one (437) */
	TURN_REJ_REQUEST, /* 400, 420, 440, 442 */
	TURN_REJECTS
};

/* Authentication failures (etrelay_turn_auth_failures_total). */
enum turn_authf {
	TURN_AF_BAD_INTEGRITY, /* no secret makes the MAC match (401) */
	TURN_AF_BAD_USERNAME,  /* not "<expiry>:<userid>" (401) */
	TURN_AF_EXPIRED,       /* an expired credential for a new allocation, or
				* any request under strict-expiry (401) */
	TURN_AF_STALE_NONCE,   /* a nonce of ours past nonce-lifetime (438) */
	TURN_AF_WRONG_USER,    /* another USERNAME than the allocation's (441) */
	TURN_AF_MISSING,       /* MI without USERNAME, REALM or NONCE (400) */
	TURN_AF_BAD_NONCE,     /* a nonce this process never made (438) */
	TURN_AUTHFS
};

/* Datagrams dropped without an answer (etrelay_turn_dropped_total). */
enum turn_drop {
	TURN_DROP_NOT_TURN,	   /* neither STUN nor ChannelData */
	TURN_DROP_MALFORMED,	   /* STUN that does not parse, bad ChannelData */
	TURN_DROP_NO_ALLOCATION,   /* indication or ChannelData, no allocation */
	TURN_DROP_NO_PERMISSION,   /* to or from a peer without a permission */
	TURN_DROP_NO_CHANNEL,	   /* ChannelData on an unbound channel */
	TURN_DROP_PEER_REFUSED,	   /* Send or ChannelData to a peer the policy refuses */
	TURN_DROP_SEND_FAILED,	   /* the loop had no room, or the send failed */
	TURN_DROP_THROTTLED,	   /* an unauthenticated answer withheld by the per-IP rate */
	TURN_DROP_UNEXPECTED,	   /* a response or an unknown indication */
	TURN_DROP_TRUNCATED,	   /* over LOOP_MAX_DGRAM */
	TURN_DROP_CLIENT_SLOW,	   /* a TCP or TLS client's send queue is full */
	TURN_DROP_THROTTLED_TOTAL, /* ... withheld by the listener's total rate */
	TURN_DROP_OVERSIZE,	   /* data (over TCP) larger than a UDP datagram carries */
	TURN_DROP_BANNED,	   /* from a ban-file source (a client, or a peer to a relayed
				    * port), or a Send or ChannelData to a banned peer */
	TURN_DROP_AUTH_RATE_IP,	   /* a signed request over its source's auth-fail-ip-rate (UDP) */
	TURN_DROP_AUTH_RATE,	   /* ... over the listener's auth-fail-rate, its key not kept */
	TURN_DROPS
};

/* TCP (and TLS) connections refused at accept, or closed for memory or
 * before they authenticated. */
enum turn_tcp_drop {
	TURN_TCP_PER_IP,	 /* tcp-max-per-ip from its IPv4 address or IPv6 /64 */
	TURN_TCP_FULL,		 /* tcp-max-connections, every one holding an allocation */
	TURN_TCP_FRAME_MEMORY,	 /* the worker's frame assembly memory spent */
	TURN_TCP_EVICTED,	 /* the oldest without an allocation, gave way to a new one */
	TURN_TCP_AUTH_TIMEOUT,	 /* no authenticated request within tcp-auth-timeout */
	TURN_TCP_BANNED,	 /* its source is in ban-file (at accept, or at a reload) */
	TURN_TCP_TLS_RATE_IP,	 /* a TLS connection over its source's tls-handshake-ip-rate */
	TURN_TCP_TLS_RATE,	 /* ... over the listener's tls-handshake-rate */
	TURN_TCP_UNAUTH_CHANNEL, /* ChannelData before an authenticated request */
	TURN_TCP_UNAUTH_LARGE,	 /* a frame over TURN_CONN_UNAUTH_FRAME before one */
	TURN_TCP_AUTH_RATE_IP,	 /* a signed request over its source's auth-fail-ip-rate */
	TURN_TCP_AUTH_RATE,	 /* ... over the listener's auth-fail-rate, its key not kept */
	TURN_TCP_UNAUTH_RATE_IP, /* an unauthenticated request over unauth-ip-rate */
	TURN_TCP_UNAUTH_RATE,	 /* ... over the listener's unauth-rate */
	TURN_TCP_DROPS
};

/* The error codes answered, each counted (etrelay_turn_errors_total). */
#define TURN_ERROR_CODES 13
extern const uint16_t turn_error_codes[TURN_ERROR_CODES];
/* code's index in turn_error_codes; the last (0: any other) if absent. */
unsigned turn_error_index(int code);

const char *turn_reject_name(enum turn_reject r);
const char *turn_tcp_drop_name(enum turn_tcp_drop d);
const char *turn_authf_name(enum turn_authf a);
const char *turn_drop_name(enum turn_drop d);

/* One worker's counters of one listener (written by its thread). */
struct turn_stats {
	_Atomic uint64_t allocations; /* granted */
	_Atomic uint64_t rejected[TURN_REJECTS];
	_Atomic uint64_t auth_failures[TURN_AUTHFS];
	_Atomic uint64_t challenges;	/* 401s with REALM and NONCE sent */
	_Atomic uint64_t peer_rejected; /* CreatePermission/ChannelBind 403 */
	_Atomic uint64_t dropped[TURN_DROPS];
	_Atomic uint64_t bytes_to_peer, bytes_to_client;
	_Atomic uint64_t dgrams_to_peer, dgrams_to_client;
	_Atomic uint64_t bindings;   /* Binding requests answered */
	_Atomic uint64_t expired;    /* allocations ended by their lifetime */
	_Atomic uint64_t conns_idle; /* TCP connections closed without an allocation */
	_Atomic uint64_t tls_failed; /* TLS connections ended before their handshake
				      * finished, or by a record error */
	_Atomic uint64_t tcp_dropped[TURN_TCP_DROPS];
	/* Gauges: TCP [0] and TLS [1] connections open, and of them those
	 * without an authenticated request yet. */
	_Atomic uint64_t conns_open[2], conns_unauth;
	_Atomic uint64_t errors[TURN_ERROR_CODES]; /* error answers by code */
};

/* Connection slots per listener and worker for tcp-max-connections (cap)
 * open ones: a closed one keeps its slot until its last send returns. */
#define TURN_CONN_SLOTS(cap) ((cap) + (cap) / 4 + 16)
/* Bytes of frames cut by a chunk's end, per listener and worker: a frame is
 * 65539 bytes at most, its buffer exists only while it is incomplete (up
 * to TURN_CONN_RX_KEEP stays) and grows with the bytes that came (at most
 * twice them, 512 at least: the length a header announces costs nothing
 * until its bytes arrive), and a connection that would go past this total
 * is closed (tcp_dropped frame_memory). */
#define TURN_CONN_RX_TOTAL (16u << 20)
#define TURN_CONN_RX_KEEP  2048u
/* The largest frame of a connection without an authenticated request: a
 * STUN request before authentication is a few hundred bytes (an Allocate
 * with USERNAME, REALM, NONCE, SOFTWARE and integrity); ChannelData then
 * has no channel to go to. Either closes it (tcp_dropped unauth_large,
 * unauth_channel), so a silent connection holds at most this. */
#define TURN_CONN_UNAUTH_FRAME 1500u
/* TCP send blocks: frames up to TURN_TX_SMALL bytes reuse blocks kept per
 * listener and worker, at most TURN_TX_CACHE of them (2 MiB). */
#define TURN_TX_SMALL 2000u
#define TURN_TX_CACHE 1024u

/* Sources tracked for the rate of unauthenticated answers (unauth-ip-rate),
 * per listener and worker. */
#define TURN_RL_ENTRIES 4096
/* How long a failed authentication marks its network (IPv4 /24, IPv6 /48)
 * as one whose requests wait for auth-fail-rate (ns). */
#define TURN_AUTHF_NET_TTL (60ull * 1000000000ull)
/* Usernames whose long-term keys are kept, per listener and worker. */
#define TURN_KEY_CACHE 4096

/* The secrets, replaced on SIGHUP under the lock (requests read them). */
struct turn_secret_set {
	uint8_t s[TURN_SECRETS_MAX][1024];
	size_t len[TURN_SECRETS_MAX];
};

/* Allocations per userid of one listener, counted for all its workers
 * (user-quota): the reuseport program spreads one user's client addresses
 * over the workers, so a count per worker would let workers x quota in.
 * A linear-probing hash of userids over cap entries (max-allocations: an
 * entry lives while an allocation holds it, so a flood of userids cannot
 * grow it), under a mutex taken once per Allocate and once per
 * allocation's end, never per datagram. turn_shared.c. */
struct turn_quota_entry {
	uint32_t count; /* 0: free */
	uint32_t next_free;
	uint8_t len;
	char userid[TURN_USERNAME_MAX];
};

struct turn_quota {
	pthread_mutex_t lock;
	struct turn_quota_entry *e; /* cap entries */
	uint32_t *slot;		    /* userid hash: entry index + 1, 0: empty */
	uint32_t cap, mask, quota, free_head, used;
	uint8_t key[16];
};

/* Count up to quota allocations per userid for at most cap userids at
 * once; key keys the hash. 0, -EINVAL or -ENOMEM. */
int turn_quota_init(struct turn_quota *q, uint32_t cap, uint32_t quota, const uint8_t key[16]);
void turn_quota_free(struct turn_quota *q);

/* Count one more allocation of userid: TURN_OK with its entry in *entry
 * (for turn_quota_put), TURN_E_QUOTA when it holds quota already,
 * TURN_E_USERNAME when longer than TURN_USERNAME_MAX, TURN_E_FULL when cap
 * userids hold allocations (never while each take is covered by a place
 * under the same cap, as Allocate's is). */
enum turn_alloc_err turn_quota_take(struct turn_quota *q, const char *userid, size_t len,
				    uint32_t *entry);

/* Give back one allocation counted under entry (TURN_ALLOC_NONE: none). */
void turn_quota_put(struct turn_quota *q, uint32_t entry);

/* Allocations counted for userid now. */
uint32_t turn_quota_count(struct turn_quota *q, const char *userid, size_t len);

/* One listener, across the workers. */
struct turn_lshared {
	const struct turn_conf *conf;
	struct turn_peer_policy policy;
	struct turn_nonce_key nonce_key;
	_Atomic uint32_t active; /* allocations, every worker (the cap) */
	struct turn_quota quota; /* allocations per userid, every worker */
	_Atomic uint64_t
	    log_at[7]; /* ms: next log line of a kind (turn_int.h: 508s, TLS, full, auth) */
	/* Its relayed ports with a live allocation, every worker's: own
	 * addresses are peers on those alone (policy.live points here). */
	_Atomic uint64_t live_ports[TURN_PEER_LIVE_WORDS];
	struct turn_stats *stats[CONF_WORKERS_MAX];
	uint16_t worker_min[CONF_WORKERS_MAX], worker_max[CONF_WORKERS_MAX];
	/* tls-listen: the context new sessions take, and its reload (checked
	 * by worker 0 every tls-reload-interval; the counts are the metric). */
	bool tls_on;
	struct tls_server tls;
	struct tls_reload reload;
};

/* Listener i's counters summed over the workers, into t (the ops thread). */
static inline void turn_listener_totals(const struct turn_lshared *l, unsigned nworkers,
					struct turn_stats *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned w = 0; w < nworkers && w < CONF_WORKERS_MAX; w++) {
		const _Atomic uint64_t *from = (const _Atomic uint64_t *)(const void *)l->stats[w];
		_Atomic uint64_t *to = (_Atomic uint64_t *)(void *)t;

		if (!from)
			continue;
		for (size_t k = 0; k < sizeof(*t) / sizeof(uint64_t); k++)
			to[k] += atomic_load_explicit(&from[k], memory_order_relaxed);
	}
}

struct turn_shared {
	unsigned n, nworkers;
	struct turn_lshared l[CONF_TURN_MAX];
	pthread_rwlock_t lock; /* secrets */
	struct turn_secret_set secrets;
	uint64_t secrets_gen;	      /* under lock: one more at each reload (keys kept go) */
	const _Atomic int *lifecycle; /* anything but 0 refuses Allocate */
};

/* Read ETRELAY_TURN_SECRET and ETRELAY_TURN_SECRET_NEXT (or their _FILE
 * forms) into out: at least one, each of CONF_TURN_SECRET_MIN bytes or
 * more. Returns 0, or -1 with a message naming the variable in err. */
int turn_secrets_read(struct turn_secret_set *out, char *err, size_t errlen);

/* Is c's relay-address an address of this host (bound on port 0)? 0, or
 * -1 with "relay-address X: not an address of this host" in err: every
 * Allocate would get 508 otherwise. */
int turn_relay_addr_check(const struct turn_conf *c, char *err, size_t errlen);

/* Set up the shared part of listener i (policy, nonce key). 0 or -1. */
int turn_shared_init(struct turn_shared *sh, unsigned i, const struct turn_conf *c,
		     unsigned nworkers, char *err, size_t errlen);

/* SIGHUP: read the secrets again; the old ones stay on a failure. Returns
 * how many are set, or -1 with err. */
int turn_shared_reload(struct turn_shared *sh, char *err, size_t errlen);

/* SIGHUP, on worker 0 (the thread of the tls-reload-interval check): read
 * each TLS pair again now, as that check does, and log one line per
 * listener: reloaded, unchanged, or failed with the old pair kept. */
void turn_shared_reload_tls(struct turn_shared *sh, uint64_t now);

/* Allocations of every listener and worker (the ops thread reads it). */
static inline uint32_t turn_active_total(const struct turn_shared *sh)
{
	uint32_t n = 0;

	for (unsigned i = 0; i < sh->n; i++)
		n += atomic_load_explicit(&sh->l[i].active, memory_order_relaxed);
	return n;
}

void turn_shared_free(struct turn_shared *sh);

struct turn_conn;
struct turn_tx;

/* A listener on one worker. */
struct turn_listener {
	struct turn_shared *all;
	struct turn_lshared *sh;
	unsigned index, worker;
	int fd, tcp_fd;
	const struct loop_ops *ops;
	struct loop *loop;
	struct endpoint_table *ep;
	unsigned slot_udp, slot_relay, slot_tcp, slot_conn;
	bool attached;
	struct turn_alloc_table t;
	uint8_t *scratch; /* a message built by copy (turn_data.c) */
	/* Data indications' transaction ids: a random base drawn at open,
	 * the count of indications sent mixed into it (no getrandom(2) per
	 * datagram). */
	uint64_t tid_base[2], tid_seq;
	int *relay_fd;		 /* per allocation index, -1: none */
	uint32_t *relay_conn;	 /* per allocation index: TCP conn + 1, 0: UDP */
	struct turn_conn *conns; /* TCP connections */
	uint32_t nconns, conn_free;
	uint32_t nopen;	  /* connections open, at most tcp_cap */
	uint32_t tcp_cap; /* this worker's share of tcp-max-connections */
	/* Open connections without an authenticated request, oldest first:
	 * the auth timeout's order, and the head gives way when nopen is at
	 * the cap (turn_conn.c). */
	uint32_t ua_head, ua_tail;
	/* Open connections authenticated but without an allocation (a 486,
	 * 508 or 403, a Refresh to 0, an expiry), in the order they became
	 * so: evictable as the unauthenticated are (turn_conn.c). */
	uint32_t na_head, na_tail;
	struct srctab ips;	  /* open connections per source (tcp-max-per-ip) */
	size_t rx_bytes;	  /* frame assembly buffers, all connections */
	struct turn_tx *tx_cache; /* free send blocks of TURN_TX_SMALL (turn_conn.c) */
	uint32_t tx_ncache;
	uint64_t sweep_at; /* ns: next look for idle connections */
	struct timer timer;
	uint64_t timer_at;
	/* tls-listen: its socket, its endpoint (whose timer is the reload on
	 * worker 0), plaintext read from a session and a frame gathered for
	 * one. */
	int tls_fd;
	unsigned slot_tls;
	uint8_t *tls_rx, *tls_tx;
	bool send_full; /* the last conn_send failed on a full queue */
	struct timer reload_timer;
	/* Unauthenticated answers per source IP and in all (this worker's
	 * part), [0] over UDP, [1] over TCP and TLS: a TCP source is proven,
	 * so forged UDP in its name cannot spend its buckets. */
	struct rl_table rl401[2];
	struct rl_bucket unauth_rl[2];
	const struct banlist *bans; /* the daemon's current list, NULL: none */
	struct rl_table tls_ip_rl;  /* TLS handshakes per source IP (tls-listen only) */
	struct rl_bucket tls_rl;    /* ... and in all (this worker's part) */
	/* Failed authentication per source (auth-fail-ip-rate) and in all
	 * (auth-fail-rate, this worker's part): over either, no HMAC work. */
	struct rl_table authf_ip_rl;
	struct rl_bucket authf_rl;
	/* Networks (IPv4 /24, IPv6 /48) with a failure in the last
	 * TURN_AUTHF_NET_TTL: past auth-fail-rate, a request from any other
	 * is still checked, so that sources failing at their own rate do not
	 * shut every new credential out. */
	struct rl_stamps authf_net;
	struct turn_key_cache keys; /* long-term keys of usernames that passed */
	/* This worker's copy of the peer policy, whose host addresses it
	 * reads again at most every TURN_HOSTS_EVERY_MS (hosts_at: ns). */
	struct turn_peer_policy policy;
	uint64_t hosts_at;
	struct turn_stats stats;
};

/* Endpoints a listener registers: its UDP socket, its relayed sockets, its
 * TCP listener, its TLS listener and its connections (TCP and TLS). */
#define TURN_ENDPOINTS 5

/* Open listener i's sockets for worker w (with reuseport when there are
 * several workers) and its table. Returns 0 or -1 (logged). */
int turn_listener_open(struct turn_listener *l, struct turn_shared *all, unsigned i, unsigned w,
		       bool reuseport);

/* Register its endpoints and sockets with the worker's loop. 0 or -errno. */
int turn_listener_attach(struct turn_listener *l, const struct loop_ops *ops, struct loop *loop,
			 struct endpoint_table *ep);

/* The UDP socket's fd (worker 0's carries the reuseport program). */
static inline int turn_listener_fd(const struct turn_listener *l)
{
	return l->fd;
}

/* The TCP listener's fd, -1: none (worker 0's carries the reuseport
 * program too: one client address, one worker, for tcp-max-per-ip). */
static inline int turn_listener_tcp_fd(const struct turn_listener *l)
{
	return l->tcp_fd;
}

static inline int turn_listener_tls_fd(const struct turn_listener *l)
{
	return l->tls_fd;
}

/* On the worker's thread: use ban list b (NULL: none) for new datagrams,
 * connections and peers; close the TCP and TLS connections (tcp_dropped
 * banned) and end the UDP allocations of the clients it bans. Permissions
 * and channels to a peer it bans stay until they lapse (a refresh is
 * refused), but nothing is relayed to or from the peer from the next
 * datagram on (turn_data.c judges each). */
void turn_listener_take_bans(struct turn_listener *l, const struct banlist *b);

/* Its live allocations as JSON objects for GET /sessions, each preceded
 * by "\n" (",\n" after the first of the whole list: *first); now is
 * loop_now(). On the worker's thread, which alone touches its table. */
void turn_allocations_json(const struct turn_listener *l, FILE *f, uint64_t now, bool *first);

/* Close every allocation (on the worker's thread, on the way out). */
void turn_listener_shutdown(struct turn_listener *l);

/* Close its sockets and free its table (after the loop is destroyed). */
void turn_listener_free(struct turn_listener *l);

#endif
