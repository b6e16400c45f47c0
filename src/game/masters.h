/* SPDX-License-Identifier: ISC */
/* A relay's masters and its game server's health: master resolution (off
 * the loop), heartbeat and flatline I/O from the public socket, the probe
 * socket and server up/down (heartbeat.c's state machine), master health
 * and listing confirmation. */
#ifndef ETR_MASTERS_H
#define ETR_MASTERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "config.h"
#include "endpoint.h"
#include "heartbeat.h"
#include "loop.h"
#include "stats.h"

struct resolver;
struct udprelay;

struct master {
	char host[ADDR_HOSTLEN];
	uint16_t port;
	union etr_sockaddr addr; /* last good address */
	bool have_addr;
	bool numeric;		 /* an address literal: never resolved */
	bool heartbeat_due;	 /* send once the running resolution ends */
	int last_err;		 /* last resolution result, to log changes only */
	bool wrong_family;	 /* unreachable from the listener: reported once */
	bool v6only_said;	 /* an IPv6-only listener refused its IPv4 address */
	struct hb_master health; /* its challenges, against our heartbeats */
};

/* What the masters tell the game's policy (its query cache and budget);
 * any may be NULL. Called on the loop thread, never per client packet. */
struct masters_events {
	/* A probe leaves for the game server (it spends from its budget). */
	void (*probe_sent)(void *arg, uint64_t now);
	/* The game server answered the probe with this infoResponse. */
	void (*probe_answer)(void *arg, const uint8_t *data, size_t len, uint64_t now);
	/* A probe round failed: what the server said before is stale. */
	void (*round_failed)(void *arg);
	/* A heartbeat left for master i: it will query us. */
	void (*invited)(void *arg, unsigned i);
};

/* News a worker's instance of a relay has for the owner's probe rounds. */
#define MASTERS_NEWS_HEARD   1u /* the game server answered a session */
#define MASTERS_NEWS_REFUSED 2u /* a send to it was refused (ECONNREFUSED) */

/* What the masters of one relay's instances on every worker share: the
 * owner's (worker 0's) probe rounds publish the server's state, the others
 * pass it their news. */
struct masters_shared {
	_Atomic int server;    /* enum hb_server, as the owner last found it */
	_Atomic unsigned news; /* MASTERS_NEWS_*, for the owner */
};

/* The daemon's part (any may be NULL): wake_owner (another worker's
 * thread) asks the owner's loop to take the news (masters_take_news);
 * moved (the owner's) says a master resolved to a new address, whose
 * challenges must reach the owner. */
struct masters_hooks {
	void (*wake_owner)(void *arg);
	void (*moved)(void *arg);
};

struct masters {
	const struct relay_conf *conf;
	struct relay_stats *stats;
	const struct etr_stats *global; /* lifecycle: a draining relay heartbeats no more */
	struct udprelay *fwd;		/* heartbeats leave from its public socket */
	union etr_sockaddr upstream;
	int probe_fd;
	struct resolver *res;
	int res_fd;
	struct hb hb;
	struct master m[CONF_MASTERS_MAX];
	unsigned n;
	const struct masters_events *ev;
	void *ev_arg;
	const struct loop_ops *ops;
	struct loop *loop;
	struct endpoint_table *ep;
	unsigned ep_probe, ep_resolver;
	bool attached;
	/* Its next deadline (probe round, master health) in the loop's
	 * timers (id: the probe endpoint's MASTERS_REF_PROBE). */
	struct timer timer;
	/* Workers: only the owner probes, heartbeats and resolves; the others
	 * have no master, no socket and no timer (masters_share). */
	bool owner;
	struct masters_shared *sh; /* NULL: one worker */
	const struct masters_hooks *hooks;
	void *hooks_arg;
};

/* Endpoints the masters register (masters_attach): probe, resolver. */
#define MASTERS_ENDPOINTS 2

/* Refs under the probe endpoint (a multi endpoint, the masters' for their
 * life): the probe socket and the masters' timer; a heartbeat or a
 * flatline to master m (ref kind << 8 | m), sent from the public socket,
 * so that its on_sent tells what became of it. */
enum { MASTERS_REF_PROBE, MASTERS_REF_HEARTBEAT, MASTERS_REF_FLATLINE };

/* The masters and the probe state of one relay; no socket yet (pure). */
void masters_init(struct masters *ms, const struct relay_conf *conf,
		  const union etr_sockaddr *upstream, struct relay_stats *stats,
		  const struct etr_stats *global);

/* One relay's instance on a worker: the owner (owner) or another, with
 * what they share and the daemon's hooks (arg: theirs). After init, before
 * open. */
void masters_share(struct masters *ms, struct masters_shared *sh, bool owner,
		   const struct masters_hooks *hooks, void *arg);

/* The owner: act on the other workers' news (sh->news). */
void masters_take_news(struct masters *ms, uint64_t now);

/* The masters' addresses known now (at most CONF_MASTERS_MAX): those the
 * reuseport program steers to the owner. Returns the count. */
unsigned masters_addrs(const struct masters *ms, union etr_sockaddr *out);

/* Who hears of the probes and heartbeats, and whose public socket sends. */
void masters_set_events(struct masters *ms, const struct masters_events *ev, void *arg,
			struct udprelay *fwd);

/* Open the probe socket and the resolver (the owner's alone). Logs what
 * failed; 0 or -errno. */
int masters_open(struct masters *ms);

/* Register the MASTERS_ENDPOINTS endpoints and their fds with the loop. */
int masters_attach(struct masters *ms, const struct loop_ops *ops, struct loop *l,
		   struct endpoint_table *ep);

/* Probe rounds, heartbeats, master health, at their deadline; then arm the
 * timer for the next, exactly (its timer calls it). */
void masters_on_tick(struct masters *ms, uint64_t now);
uint64_t masters_next_deadline(const struct masters *ms);

/* Exiting: flatline if the server was up. */
void masters_shutdown(struct masters *ms);

void masters_close(struct masters *ms);

/* Which master, if any, this client is: 1 + its index, or 0. Masters
 * challenge from the address and port the heartbeat went to (dpmaster and
 * etmaster answer from their listening socket), so anything else is not a
 * master. */
uint8_t masters_of(const struct masters *ms, const union etr_sockaddr *client);

/* The last probe round (the owner's) found the game server up. */
static inline bool masters_server_up(const struct masters *ms)
{
	if (ms->owner || !ms->sh)
		return ms->hb.server == HB_UP;
	return atomic_load_explicit(&ms->sh->server, memory_order_relaxed) == HB_UP;
}

/* Master i's challenge was answered from the public socket: the listing
 * loop is closed for that master. */
void masters_confirm_listing(struct masters *ms, unsigned i, uint64_t now);

/* The game server sent something (while not up: probe it now; another
 * worker's instance tells the owner). */
void masters_heard(struct masters *ms, uint64_t now);

/* The game server refused a datagram (its port is closed; the same). */
void masters_refused(struct masters *ms, uint64_t now);

#endif
