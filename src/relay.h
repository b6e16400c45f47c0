/* SPDX-License-Identifier: ISC */
/* One relay: a public socket in front of one game server, its sessions, its
 * heartbeats to the masters, and the counters of everything it decides. */
#ifndef ETR_RELAY_H
#define ETR_RELAY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "banlist.h"
#include "config.h"
#include "endpoint.h"
#include "heartbeat.h"
#include "loop.h"
#include "qcache.h"
#include "ratelimit.h"
#include "session.h"
#include "stats.h"

struct relay_master {
	char host[ADDR_HOSTLEN];
	uint16_t port;
	union etr_sockaddr addr; /* last good address */
	bool have_addr;
	bool numeric;       /* an address literal: never resolved */
	bool heartbeat_due; /* send once the running resolution ends */
	int last_err;       /* last resolution result, to log changes only */
	/* Its own allowance of queries to the game server (--master-queries
	 * per heartbeat interval): tokens left, and when the last came back. */
	uint32_t mq_tokens;
	uint64_t mq_last;
	bool wrong_family;  /* unreachable from the listener: reported once */
	bool v6only_said;   /* an IPv6-only listener refused its IPv4 address */
	struct hb_master health; /* its challenges, against our heartbeats */
};

struct resolver;

struct relay {
	const struct relay_conf *conf;
	unsigned index; /* in the daemon's list */
	const struct loop_ops *ops;
	struct loop *loop;
	/* Its endpoints in the loop's table: the public socket, the sessions
	 * (one multi endpoint, refs from session_ref), the probe socket, the
	 * resolver's fd. */
	struct endpoint_table *ep;
	unsigned ep_public, ep_sessions, ep_probe, ep_resolver;
	bool attached;
	/* Its next deadline (expiry, probe round, masters) in the loop's
	 * timers; the loop lets go of it when destroyed. */
	struct timer timer;
	struct etr_stats *global; /* lifecycle state, shared with the ops plane */
	int pub_fd;
	union etr_sockaddr upstream;
	int probe_fd;
	struct resolver *res;
	int res_fd;
	struct session_table st;
	struct hb hb;
	struct relay_master masters[CONF_MASTERS_MAX];
	unsigned nmasters;
	uint64_t session_timeout;   /* ns */
	uint64_t unassured_timeout; /* ns */
	uint16_t port_next;         /* next session port to try in the range */
	bool listener_loopback;     /* 127/8 and ::1 sources are real here */
	struct rl_table ip_rl;      /* per source IP: connectionless packets */
	struct rl_table ip_sess_rl; /* per source IP: new sessions */
	struct rl_bucket sess_rl;   /* new sessions, in all */
	struct rl_bucket decode_rl; /* connect userinfo decoded, in all */
	struct rl_budget budget;    /* the game server's query budget */
	struct rl_stamps player_nets; /* per /24, /48: the last player's token taken */
	struct rl_stamps proven;      /* per IP: last accepted as a player */
	struct rl_stamps proven_gap;  /* per IP: the last returning player's token */
	struct qcache cache;        /* its last getinfo/getstatus replies */
	struct rl_bucket cache_pkts, cache_bytes; /* answers from the cache */
	bool connect_counts;        /* the game server rate-limits connect */
	bool qport_rules;           /* the game's netchan has a qport (not DarkPlaces) */
	const struct banlist *bans; /* the daemon's current list, NULL: none */
	uint64_t qport_log_next;    /* ns: qport refusals are logged once a second */
	struct relay_stats stats;
};

/* Endpoints one relay registers (relay_attach). */
#define RELAY_ENDPOINTS 4

/* session.master holds 1 + a master's index. */
_Static_assert(CONF_MASTERS_MAX < UINT8_MAX, "a master index must fit session.master");

/* A session's ref must fit an endpoint ref. */
_Static_assert(SESSION_REF_BITS <= ENDPOINT_REF_BITS, "session refs are endpoint refs");

/* Bind the public socket, open the probe socket and the resolver; upstream
 * is resolved already. Logs what failed. Returns 0 or -errno. */
int relay_open(struct relay *r, unsigned index, const struct relay_conf *conf,
	       const union etr_sockaddr *upstream, struct etr_stats *global);

/* Register the relay's RELAY_ENDPOINTS endpoints in ep and its fds with
 * the loop; loop events then reach the relay through ep. Returns 0 or
 * -errno (-ENOSPC: the table is full). */
int relay_attach(struct relay *r, const struct loop_ops *ops, struct loop *l,
		 struct endpoint_table *ep);

/* The relay's deadlines: relay_on_tick runs what is due (its timer calls
 * it) and re-arms the timer. */
void relay_on_tick(struct relay *r, uint64_t now);
uint64_t relay_next_deadline(const struct relay *r);

/* Exiting: flatline if the server was up, close every session. */
void relay_shutdown(struct relay *r);

void relay_close(struct relay *r);

/* The live sessions as JSON objects, comma-separated (loop thread only):
 * the port the game server sees, the real client, age, packets, player. */
void relay_sessions_json(const struct relay *r, FILE *f, uint64_t now, bool *first);

/* One line of counters for the log. */
void relay_log_stats(const struct relay *r);

#endif
