/* SPDX-License-Identifier: ISC */
/* The process: one loop serving every relay, signals, drain and exit, the
 * ops plane, and systemd notifications. */
#ifndef ETR_DAEMON_H
#define ETR_DAEMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "banlist.h"
#include "config.h"
#include "control_stats.h"
#include "endpoint.h"
#include "kinds.h"
#include "loop.h"
#include "prbe_port.h"
#include "relay.h"
#include "sni.h"
#include "stats.h"
#include "turn.h"

struct control;
struct ops;
struct worker;

/* Endpoints of the daemon's own on worker 0 (the signalfd) and of every
 * worker (its control eventfd). */
#define DAEMON_ENDPOINTS 2

/* Every relay, SNI listener, echo-only port and the daemon find a slot in
 * each worker's endpoint table. */
_Static_assert(CONF_RELAYS_MAX *RELAY_ENDPOINTS + CONF_SNI_MAX +
		       CONF_PRBE_LISTEN_MAX * PRBE_PORT_ENDPOINTS + CONF_TURN_MAX * TURN_ENDPOINTS +
		       1 /* the tunnel's rung 3 */ + DAEMON_ENDPOINTS <=
		   ENDPOINT_MAX,
	       "the relays, SNI listeners and echo ports do not fit the endpoint table");

struct daemon {
	const struct etr_conf *conf;
	const struct loop_ops *ops; /* the backend every worker runs */
	/* Worker 0 runs in the main thread and owns the signals, the leave
	 * timer, and every relay's probe, heartbeats and masters. */
	struct worker *workers[CONF_WORKERS_MAX];
	unsigned nworkers;
	uint32_t reuseport_key; /* the reuseport program's hash key */
	struct etr_stats stats;
	struct ops *ops_plane;
	struct xdp *xdp; /* the XDP program on the xdp-interfaces; NULL: none (xdp.h) */
	/* From ban-file (empty without one): every worker's relays read the
	 * current list; the one before is freed once every worker took the
	 * new one (their bans_gen). */
	struct banlist *bans, *bans_old;
	uint64_t bans_gen;
	/* A SIGHUP came while bans_old was still read: reload once it is
	 * freed (worker 0 only). */
	bool bans_again;
	/* SIGHUP's "no ops tokens set" (or "nothing to reload") was logged
	 * and still holds: said once per change, not per signal. */
	bool hup_none_said;
	unsigned ep_signal;
	/* GET /sessions: the ops thread asks, every worker renders its part. */
	struct {
		pthread_mutex_t lock;
		pthread_cond_t done_cond;
		uint64_t gen;	  /* of the request under way, 0: none */
		unsigned pending; /* workers yet to answer it */
		bool busy;
		uint64_t last; /* monotonic ns the last render ended */
	} call;
	_Atomic bool failed; /* a worker's loop failed: leave */
	int sig_fd;
	int exit_signal;	  /* the signal that asked us to leave */
	bool leaving;		  /* draining on the way out */
	uint64_t leave_deadline;  /* ns; exit then even with sessions left */
	uint64_t leave_check;	  /* ns; next look for the last session */
	uint64_t watchdog_period; /* ns, 0 without a systemd watchdog */
	uint64_t next_notify;	  /* next WATCHDOG=1 / STATUS= update */
	struct timer timer;	  /* on worker 0: next_notify or leave_check, whichever
				   * is first */
	/* The control plane (control-url): its client, what it publishes, and
	 * the route set of its last good heartbeat. */
	struct control *control;
	struct control_stats control_stats;
	/* What each kind opened its listeners with (kinds.h), and what its
	 * instances share (kenv[k].shared: the control plane, SIGHUP and the
	 * ops plane reach it through struct kind's hooks); dials: every
	 * upstream the process connects to, for the TURN peer policy. */
	struct kind_env kenv[KINDS];
	union etr_sockaddr *dials;
};

/* The workers --workers asks for: the count given, or for auto the CPUs
 * in the process's affinity mask, at most CONF_WORKERS_MAX. */
unsigned daemon_workers_wanted(const struct etr_conf *conf);

/* Open every kind's listeners on every worker (resolved[k]: what kind k's
 * resolve gave, its kind_env.resolved: the game relays' upstreams, one per
 * relay; the SNI listeners' config routes), attach the reuseport
 * programs, create the loops on the configured backend (auto: io_uring,
 * else epoll with a log line), start the ops plane. Returns 0, or the exit
 * status to leave with. */
int daemon_open(struct daemon *d, const struct etr_conf *conf, const void *const *resolved);

/* Serve until a signal says leave and the drain is over. Returns the exit
 * status. */
int daemon_run(struct daemon *d);

void daemon_close(struct daemon *d);

#endif
