/* SPDX-License-Identifier: ISC */
/* One relay as configured: the forwarder (public socket, sessions), the
 * Quake 3 policy it asks, and the masters, composed; the counters of
 * everything they decide. */
#ifndef ETR_RELAY_H
#define ETR_RELAY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "banlist.h"
#include "config.h"
#include "endpoint.h"
#include "loop.h"
#include "masters.h"
#include "q3policy.h"
#include "stats.h"
#include "udprelay.h"

struct relay {
	const struct relay_conf *conf;
	unsigned index; /* in the daemon's list */
	struct etr_stats *global; /* lifecycle state, shared with the ops plane */
	union etr_sockaddr upstream;
	uint16_t port_next; /* next session port to try in the range */
	struct udprelay fwd; /* the public socket and the sessions */
	struct q3policy policy; /* what a datagram may do */
	struct masters masters; /* heartbeats, DNS, the probe */
	struct relay_stats stats;
};

/* Endpoints one relay registers (relay_attach). */
#define RELAY_ENDPOINTS (UDPRELAY_ENDPOINTS + MASTERS_ENDPOINTS)

/* Bind the public socket, open the probe socket and the resolver; upstream
 * is resolved already. Logs what failed. Returns 0 or -errno. */
int relay_open(struct relay *r, unsigned index, const struct relay_conf *conf,
	       const union etr_sockaddr *upstream, struct etr_stats *global);

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

/* One line of counters for the log. */
void relay_log_stats(const struct relay *r);

#endif
