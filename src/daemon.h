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
#include "endpoint.h"
#include "loop.h"
#include "relay.h"
#include "stats.h"

struct ops;

/* Endpoints of the daemon's own: the signalfd and the ops plane's call. */
#define DAEMON_ENDPOINTS 2

/* Every relay and the daemon find a slot in the endpoint table. */
_Static_assert(CONF_RELAYS_MAX * RELAY_ENDPOINTS + DAEMON_ENDPOINTS <= ENDPOINT_MAX,
	       "CONF_RELAYS_MAX relays do not fit the endpoint table");

struct daemon {
	const struct etr_conf *conf;
	const struct loop_ops *ops;
	struct loop *loop;
	struct relay relays[CONF_RELAYS_MAX];
	unsigned nrelays;
	struct endpoint_table ep; /* what every loop id names */
	struct etr_stats stats;
	struct ops *ops_plane;
	struct banlist bans; /* from ban-file; empty without one */
	/* GET /sessions: the ops thread asks, the loop renders. */
	struct {
		pthread_mutex_t lock;
		pthread_cond_t done_cond;
		int efd;
		bool pending, done;
		char *buf;
		size_t len;
	} call;
	int sig_fd;
	int exit_signal;          /* the signal that asked us to leave */
	bool leaving;             /* draining on the way out */
	uint64_t leave_deadline;  /* ns; exit then even with sessions left */
	uint64_t leave_check;     /* ns; next look for the last session */
	uint64_t watchdog_period; /* ns, 0 without a systemd watchdog */
	uint64_t next_notify;     /* next WATCHDOG=1 / STATUS= update */
	struct timer timer;       /* next_notify or leave_check, whichever is first */
};

/* Open every relay (upstreams resolved, one per relay), create the loop on
 * the configured backend (auto: io_uring, else epoll with a log line), start
 * the ops plane. Returns 0, or the exit status to leave with. */
int daemon_open(struct daemon *d, const struct etr_conf *conf,
		const union etr_sockaddr *upstreams);

/* Serve until a signal says leave and the drain is over. Returns the exit
 * status. */
int daemon_run(struct daemon *d);

void daemon_close(struct daemon *d);

#endif
