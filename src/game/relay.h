/* SPDX-License-Identifier: ISC */
/* One relay as configured: the forwarder (public socket, sessions), the
 * Quake 3 policy it asks, and the masters, composed; the counters of
 * everything they decide. */
#ifndef ETR_RELAY_H
#define ETR_RELAY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "banlist.h"
#include "config.h"
#include "endpoint.h"
#include "loop.h"
#include "masters.h"
#include "prbe.h"
#include "q3policy.h"
#include "stats.h"
#include "udprelay.h"

struct relay;

/* What one relay's instances on every worker share (one per relay; the
 * daemon sets it up with relay_shared_init). With one worker it is there
 * all the same, and nothing is locked. */
struct relay_shared {
	unsigned workers;
	unsigned index; /* the relay's, in the daemon's list */
	/* Sessions open on every worker together: --max-sessions is a total
	 * (the forwarders' shared count). */
	_Atomic uint32_t sessions;
	struct q3p_shared q3;	  /* the query budget, the cache, the qports */
	struct masters_shared ms; /* the owner's probe rounds, the others' news */
	/* The daemon's: wake the owner's loop for news; steer the masters'
	 * addresses (resolved anew) to the owner's socket. */
	void (*wake_owner)(struct relay_shared *sh);
	void (*masters_moved)(struct relay_shared *sh, const struct relay *owner);
	void *arg;
	const struct conf_prbe *prbe; /* the echo's rules, for prbe yes */
};

struct relay {
	const struct relay_conf *conf;
	unsigned index; /* in the daemon's list */
	/* Workers: this instance runs on worker `worker`; the owner (worker
	 * 0) alone probes the game server, heartbeats and resolves masters. */
	struct relay_shared *shared;
	unsigned worker;
	struct etr_stats *global; /* lifecycle state, shared with the ops plane */
	union etr_sockaddr upstream;
	uint16_t port_next;	/* next session port to try in the range */
	struct udprelay fwd;	/* the public socket and the sessions */
	struct q3policy policy; /* what a datagram may do */
	struct masters masters; /* heartbeats, DNS, the probe */
	struct relay_stats stats;
	/* prbe yes: the echo on the public socket. */
	struct prbe prbe;
	struct rl_table prbe_rl;
};

/* Endpoints one relay registers (relay_attach). */
#define RELAY_ENDPOINTS (UDPRELAY_ENDPOINTS + MASTERS_ENDPOINTS)

/* What every worker's instance of relay conf shares, for `workers`
 * workers. Returns 0 or -errno (logged). */
int relay_shared_init(struct relay_shared *sh, const struct relay_conf *conf, unsigned workers,
		      unsigned index);
void relay_shared_free(struct relay_shared *sh);

/* Bind the public socket (in the port's SO_REUSEPORT group with more than
 * one worker); on the owner, worker 0, open the probe socket and the
 * resolver too; upstream is resolved already. Logs what failed. Returns 0
 * or -errno. */
int relay_open(struct relay *r, unsigned index, const struct relay_conf *conf,
	       const union etr_sockaddr *upstream, struct etr_stats *global,
	       struct relay_shared *shared, unsigned worker);

/* The owner: act on the other workers' news about the game server. */
void relay_take_news(struct relay *r, uint64_t now);

/* The masters' addresses known now (at most CONF_MASTERS_MAX), for the
 * reuseport program that steers them to the owner. Returns the count. */
unsigned relay_master_addrs(const struct relay *r, union etr_sockaddr *out);

/* Register the relay's RELAY_ENDPOINTS endpoints in ep and its fds with
 * the loop; loop events then reach the relay through ep. Returns 0 or
 * -errno (-ENOSPC: the table is full). */
int relay_attach(struct relay *r, const struct loop_ops *ops, struct loop *l,
		 struct endpoint_table *ep);

/* The daemon's ban list changed (NULL: none). */
void relay_set_bans(struct relay *r, const struct banlist *bans);

/* Exiting: flatline if the server was up, close every session. */
void relay_shutdown(struct relay *r);

void relay_close(struct relay *r);

/* The live sessions as JSON objects, comma-separated (loop thread only):
 * the port the game server sees, the real client, age, packets, player. */
void relay_sessions_json(const struct relay *r, FILE *f, uint64_t now, bool *first);

/* One line of counters for the log (s: every worker's summed). */
void relay_log_stats(const char *name, const struct relay_stats *s);

#endif
