/* SPDX-License-Identifier: ISC */
/* What the SNI listeners' workers share, and what other threads read: one
 * struct sni_shared per process holds, per listener, the route table in
 * force (the config file's routes and the control plane's, swapped whole),
 * the caps shared by the workers, and their counters; names of results for
 * logs and metrics. sni.h is one worker's listener over it. */
#ifndef ETR_SNI_SHARED_H
#define ETR_SNI_SHARED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "config.h"
#include "sni_pin.h"
#include "sni_routes.h"
#include "srctab.h"
#include "tls_hello.h"

/* How a connection ended up: spliced, or refused (closed without a byte)
 * and why. One count per connection. */
enum sni_result {
	SNI_SPLICED,	      /* connected to its upstream, bytes on their way */
	SNI_UNKNOWN_NAME,     /* no route for its server name */
	SNI_NO_SNI,	      /* a ClientHello without a host_name */
	SNI_NOT_TLS,	      /* not a TLS handshake (HTTP, SSLv2...) */
	SNI_NOT_CLIENT_HELLO, /* a handshake, but not a ClientHello */
	SNI_BAD_NAME,	      /* a host_name no route could match */
	SNI_MALFORMED,	      /* lengths that do not add up */
	SNI_TOO_BIG,	      /* a ClientHello over 16 KiB */
	SNI_PREREAD_TIMEOUT,  /* no whole ClientHello within preread-timeout */
	SNI_PREREAD_CLOSED,   /* the client left before its ClientHello ended */
	SNI_CAP_CONNECTIONS,  /* max-connections reached */
	SNI_CAP_PER_IP,	      /* max-connections-per-ip reached (/64, /56, /48) */
	SNI_CAP_PREREAD,      /* max-preread reached, this worker prereading none */
	SNI_PREREAD_EVICTED,  /* closed at max-preread to admit a newcomer */
	SNI_DRAINING,	      /* the process is draining */
	SNI_CONNECT_FAILED,   /* the upstream refused or could not be reached */
	SNI_CONNECT_TIMEOUT,  /* ... within connect-timeout */
	SNI_ROUTE_GONE,	      /* its route went away before the connect ended */
	SNI_NO_RESOURCES,     /* out of memory, sockets or connection slots */
	SNI_BANNED,	      /* its source is in ban-file: closed at accept */
	SNI_TUNNEL,	      /* the tunnel's name: handed to rung 3 (sni_tunnel) */
	SNI_RESULTS
};

/* How a spliced connection ended. */
enum sni_end {
	SNI_END_DONE,	  /* both sides closed their half */
	SNI_END_IDLE,	  /* no byte either way for idle-timeout */
	SNI_END_RESET,	  /* a side reset or a send failed: both closed */
	SNI_END_REVOKED,  /* its route was removed or changed */
	SNI_END_SHUTDOWN, /* the process left */
	SNI_END_BANNED,	  /* a ban-file reload banned its source */
	SNI_END_STALLED,  /* a side took no spliced byte for send-timeout: both reset */
	SNI_ENDS
};

/* A short fixed name, for logs and metric labels. */
const char *sni_result_name(enum sni_result r);
const char *sni_end_name(enum sni_end e);

/* The preread histogram (etrelay_sni_preread_seconds): bucket b counts
 * the prereads that took at most sni_preread_bound_ns[b] and more than the
 * bound before; bucket SNI_PREREAD_BUCKETS the rest. */
#define SNI_PREREAD_BUCKETS 8
extern const uint64_t sni_preread_bound_ns[SNI_PREREAD_BUCKETS];
unsigned sni_preread_bucket(uint64_t ns);

/* A worker's counters for one listener: written by its thread, read by the
 * ops thread (stats.h rules); the ops plane sums the workers. */
struct sni_stats {
	_Atomic uint64_t result[SNI_RESULTS];
	_Atomic uint64_t ended[SNI_ENDS];
	_Atomic uint64_t bytes_in;		    /* client to upstream */
	_Atomic uint64_t bytes_out;		    /* upstream to client */
	_Atomic uint64_t preread_ns, preread_count; /* accept to the hello's answer */
	_Atomic uint64_t preread_hist[SNI_PREREAD_BUCKETS + 1];
	_Atomic uint64_t deferred; /* bulk reads put off: their source held its cap of chunks */
	/* Spliced bytes (after the preread) by path: [0] copied through the
	 * chunk pool, [1] spliced through pipes (splice yes). */
	_Atomic uint64_t relayed[2];
	_Atomic uint32_t pipes;	    /* pipes open (2 per spliced connection) */
	_Atomic int64_t memory;	    /* bytes held: preread buffers, chunks in flight
				     * (at most 2 of 64 KiB per direction) */
	_Atomic uint32_t active;    /* connections, refused ones lingering excluded */
	_Atomic uint32_t preread;   /* of them still reading their ClientHello */
	_Atomic uint32_t lingering; /* refused, draining the client's bytes */
};

/* Refused connections that may linger at once, across a listener's
 * workers: a quarter of max-connections. Past it a refusal closes at once
 * (a client that sent bytes then reads a reset). With the caps across the
 * workers this bounds the listener's sockets: 2 per connection and 1 per
 * lingering one, whatever the number of workers. */
#define SNI_LINGER_MAX(max_connections) ((max_connections) / 4)

/* Host addresses kept for the loop check. */
#define SNI_LOCAL_MAX 64

/* How many retired route tables may wait for a worker to let go. */
#define SNI_RETIRED_MAX 16

/* One listener's part of sni_shared. */
struct sni_lshared {
	const struct sni_conf *conf;
	pthread_mutex_t lock;	      /* everything below but the atomics */
	struct sni_route *file, *ctl; /* the config file's and the control plane's */
	size_t nfile, nctl;
	struct sni_routes *cur; /* in force */
	uint64_t gen;		/* of cur */
	struct {
		struct sni_routes *t;
		uint64_t gen; /* replaced when this generation came */
	} retired[SNI_RETIRED_MAX];
	unsigned nretired;
	_Atomic uint64_t taken[CONF_WORKERS_MAX]; /* the generation each worker uses */
	_Atomic uint32_t nroutes;
	/* Caps across the workers. */
	_Atomic uint32_t active, preread;
	_Atomic uint32_t lingering; /* refused connections lingering (SNI_LINGER_MAX) */
	_Atomic uint32_t spliced;   /* connections with pipes (max-spliced) */
	struct srctab ips;	    /* open connections per source (max-connections-per-ip) */
	struct sni_stats *stats[CONF_WORKERS_MAX]; /* each worker's */
};

/* Rung 3 of the tunnel (issue 25): the one name the SNI listeners do not
 * splice but hand over, with the bytes read, to the tunnel's instance on
 * the same worker (which terminates its TLS). sni/ sees neither tls/ nor
 * tun/: the daemon sets the hook, the control thread the name (the
 * tunnel certificate's, when one is taken). The name is exact (never a
 * wildcard) and checked before the route table. */
struct sni_tunnel {
	pthread_mutex_t lock;	     /* name, len (initialized with listener 0) */
	char name[TLS_NAME_MAX + 1]; /* lower case; "" none */
	size_t len;
	_Atomic uint64_t gen; /* bumped at each change: workers copy anew */
	/* On worker's thread, inside the listener's callback: connection fd
	 * (accepted from peer, on that worker's loop, no operation pending on
	 * it) whose first bytes are pre[0..len) (its ClientHello and whatever
	 * came with it; valid during the call only). 0: fd is the hook's now (its loop ops with its
	 * own ids, its del_socket and close); -1: not taken, the listener refuses it
	 * (no_resources). NULL: no tunnel (nothing is handed over). Set, with arg, before the
	 * workers start. */
	int (*take)(void *arg, unsigned worker, int fd, const union etr_sockaddr *peer,
		    const uint8_t *pre, size_t len);
	void *arg;
};

struct sni_shared {
	unsigned n, nworkers;
	struct sni_tunnel tunnel;
	struct sni_lshared l[CONF_SNI_MAX];
	/* The process's lifecycle (enum stats_lifecycle): anything but 0
	 * (active) refuses new connections. */
	const _Atomic int *lifecycle;
	/* Called (any thread) after a new table is in force: wake every
	 * worker to take it (sni_listener_take_routes). */
	void (*publish)(struct sni_shared *sh);
	void *arg;
	/* The host's addresses (net_local_addrs at start): a control-plane
	 * route to one of them on a wildcard listener's port is a loop. */
	union etr_sockaddr local[SNI_LOCAL_MAX];
	size_t nlocal;
};

/* Whether upstream up would loop back to one of sh's listeners: its
 * index, or -1. */
int sni_shared_loop(const struct sni_shared *sh, const union etr_sockaddr *up);

/* Set up listener i of sh from c with the config file's routes (resolved:
 * n of them). Returns 0, or -1 with why in err (a bad or duplicate route). */
int sni_shared_init(struct sni_shared *sh, unsigned i, const struct sni_conf *c,
		    const struct sni_route *file, size_t n, unsigned nworkers, char *err,
		    size_t errlen);

/* Replace the control plane's routes of every listener with list (n
 * routes, at most SNI_CONTROL_ROUTES_MAX; none back to a listener; a name
 * the config file routes too stays the file's, logged once the set is in
 * force). The set in force again (same routes, same order) changes nothing:
 * no build, no swap, no publish. From one
 * thread at a time (the control thread): the tables are built outside the
 * lock the workers take, and swapped under it. Returns 0, or -1 with why
 * in err (nothing changed then). */
int sni_set_control_routes(struct sni_shared *sh, const struct sni_route *list, size_t n, char *err,
			   size_t errlen);

/* For other threads (heartbeat, /lifecycle): listener i's connections open
 * now, its max-connections, and its routes in force. */
void sni_listener_info(struct sni_shared *sh, unsigned i, uint32_t *active, uint32_t *capacity,
		       uint32_t *routes);

/* Listener i's counters summed over its workers (any thread). */
struct sni_totals {
	uint64_t result[SNI_RESULTS], ended[SNI_ENDS];
	uint64_t bytes_in, bytes_out;
	uint64_t preread_ns, preread_count, preread_hist[SNI_PREREAD_BUCKETS + 1];
	uint64_t deferred;
	uint64_t relayed[2];
	uint32_t pipes;
	int64_t memory;
	uint32_t active, preread, lingering;
};
void sni_listener_totals(const struct sni_shared *sh, unsigned i, struct sni_totals *t);

/* Connections open on every listener (for the drain). */
uint32_t sni_active_total(const struct sni_shared *sh);

void sni_shared_free(struct sni_shared *sh);

/* The tunnel's name from now on (any thread but the workers; the control
 * thread): name (len bytes, any case; 0: none, nothing is handed over).
 * Returns 0, or -1: no SNI listener, or not a name a ClientHello can carry
 * (empty label, over TLS_NAME_MAX, a wildcard). */
int sni_tunnel_set_name(struct sni_shared *sh, const char *name, size_t len);

/* A worker's copy of the tunnel's name, taken anew when it changed. */
struct sni_tunnel_seen {
	uint64_t gen;
	size_t len;
	char name[TLS_NAME_MAX + 1];
};

/* On a worker's thread: whether name (len bytes, lower case, as
 * tls_hello gives it) is the tunnel's, exactly, and a hook takes it. */
bool sni_tunnel_match(struct sni_shared *sh, struct sni_tunnel_seen *seen, const char *name,
		      size_t len);

/* For the listener's files, on a worker's thread: the table in force now
 * (its generation in *gen, marked as taken by worker); and the per-source
 * counts (srctab: IPv4 address, IPv6 /64 at max-connections-per-ip, /56
 * and /48 at its multiples), under the listener's lock: take one unless a
 * level is at its cap, give one back. */
const struct sni_routes *sni_shared_take(struct sni_shared *sh, struct sni_lshared *l,
					 unsigned worker, uint64_t *gen);
bool sni_shared_ip_take(struct sni_lshared *l, const union etr_sockaddr *a);
void sni_shared_ip_put(struct sni_lshared *l, const union etr_sockaddr *a);

#endif
