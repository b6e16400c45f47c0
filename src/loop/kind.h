/* SPDX-License-Identifier: ISC */
/* A listener kind, as the workers see it: each worker holds, per kind, one
 * instance per configured listener of that kind (an array sized to the
 * configuration), and every step of their lives goes through this table,
 * in the same order for every kind. A kind's folder defines its struct
 * kind; daemon/kinds.c lists them. */
#ifndef ETR_KIND_H
#define ETR_KIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "banlist.h"
#include "config.h"
#include "endpoint.h"
#include "loop.h"

struct kind_env;

/* One listener as the control plane's heartbeat reports it. */
struct kind_listener {
	const char *name;
	uint32_t active, max;
};

struct kind {
	const char *name; /* for logs: "relay", "prbe-listen", "sni", "turn" */
	size_t size;	  /* one instance */
	/* Listeners of this kind the configuration asks for. */
	unsigned (*count)(const struct etr_conf *c);
	/* What all the workers' instances share (kind_env.shared): its size,
	 * zeroed by the daemon before open, whether listeners are configured
	 * or not, and freed after close (0: none, or open allocates its own).
	 * The control plane, SIGHUP and the ops plane reach it through the
	 * hooks below. */
	size_t shared_size;
	/* At a start (not -t), before the workers, blocking: resolve the
	 * names it connects to and refuse what the addresses make a loop;
	 * *out (resolved_free frees it, whatever the return) is what open
	 * and dials get as resolved. Called in table order, for a kind with
	 * listeners. Returns 0 or the exit status (said). NULL: nothing. */
	int (*resolve)(const struct etr_conf *c, void **out);
	void (*resolved_free)(void *resolved);
	/* Every address resolved names that the process connects to, into out
	 * (NULL: only counted); how many. NULL: none. */
	size_t (*dials)(const struct etr_conf *c, const void *resolved, union etr_sockaddr *out);
	/* At start: set up what the workers share (e->shared) and open each
	 * listener on every worker (kind_env_inst), in order, saying how far
	 * it got (kind_env_opened) so that a failure closes what opened.
	 * Returns 0 or the exit status to leave with (logged). */
	int (*open)(struct kind_env *e);
	/* Free what open set up in e->shared, after every instance closed
	 * (whether open went through, failed half way or was not called for
	 * want of listeners; NULL: nothing). */
	void (*shared_free)(struct kind_env *e);
	/* Descriptors they may hold at once, across all the workers; what
	 * for ("the relays' sessions") and the setting that lowers it (NULL:
	 * none), for the message when the limit is too low. */
	uint64_t (*fds)(const struct etr_conf *c, unsigned workers);
	const char *(*fds_what)(const struct etr_conf *c);
	const char *fds_knob;
	/* Register with the worker's loop, on its thread. 0 or -errno. */
	int (*attach)(void *inst, const struct loop_ops *ops, struct loop *loop,
		      struct endpoint_table *ep);
	/* Another thread posted news for the kind (worker_post); NULL: none. */
	void (*poke)(void *inst);
	/* Use ban list b for what comes next; once attached, also end what a
	 * newly banned source holds. */
	void (*take_bans)(void *inst, const struct banlist *b);
	/* On the way out, on the worker's thread; NULL: nothing to say. */
	void (*shutdown)(void *inst);
	/* Close its sockets and free what it holds (not inst itself). */
	void (*close)(void *inst);

	/* Worker 0's thread, SIGHUP: read again what it reads from files,
	 * saying so in the log; NULL: nothing. */
	void (*reload)(struct kind_env *e);
	/* The log: once the loops run, each listener, backend the loops'
	 * name; at a clean exit (the instances shut down), what each served
	 * and refused, summed over the workers. NULL: nothing said. */
	void (*log_start)(const struct kind_env *e, const char *backend);
	void (*log_stats)(const struct kind_env *e);
	/* GET /sessions: its array's key ("sessions"), always present, and
	 * on the worker's thread what instance inst holds, each entry
	 * "\n{...}", a comma before unless *first. NULL: not listed. */
	const char *sessions_key;
	void (*sessions)(const void *inst, FILE *f, uint64_t now, bool *first);
	/* The control plane's heartbeat: listener i as it runs (the control
	 * plane knows the kind by its name); NULL: not reported. */
	void (*listener)(const struct kind_env *e, unsigned i, struct kind_listener *out);

	/* The ops plane (/readyz, /lifecycle) and the control plane's
	 * heartbeat (its health), any thread, from e->stats (atomics, or
	 * what the open set before either thread started). running: how
	 * many of its listeners run (none: not opened, or none configured;
	 * the process is "no relay yet" while no kind runs one); ready: why
	 * running listener i is not ready, in buf (returned), NULL: ready;
	 * those past the reasons' room are counted in ready_more_one/_many
	 * words ("relay whose game server is not up"). NULL: always ready. */
	unsigned (*running)(const struct kind_env *e);
	const char *(*ready)(const struct kind_env *e, unsigned i, char *buf, size_t len);
	const char *ready_more_one, *ready_more_many;
	/* GET /lifecycle: its members of "details" (a comma before unless
	 * *first), then its members of the document (a comma before each),
	 * in table order. NULL: none. */
	void (*lifecycle_details)(const struct kind_env *e, FILE *f, bool *first);
	void (*lifecycle)(const struct kind_env *e, FILE *f);

	/* -t: what a start here (workers: as many as it would run) refuses,
	 * said on stderr: EXIT_CONFIG, else 0; NULL: nothing. Then its
	 * listeners, one line each on stdout (report), and with --probe what
	 * they name, reached (probe: 1 when something failed). The summary
	 * counts them as summary_one/_many (always: even with none). */
	int (*check)(const struct etr_conf *c, unsigned workers);
	void (*report)(const struct etr_conf *c);
	int (*probe)(const struct etr_conf *c);
	const char *summary_one, *summary_many;
	bool summary_always;

	/* What all workers' instances share (the daemon keeps it: shared, n
	 * listeners): the work a drain waits for, any thread (atomics), and
	 * its name ("session", "sessions"); NULL: none. */
	uint32_t (*active)(const void *shared, unsigned n);
	const char *active_one, *active_many;
};

/* What the daemon gives a kind to open its listeners with. */
struct kind_env {
	const struct etr_conf *conf;
	struct etr_stats *stats;
	unsigned nworkers;
	uint32_t reuseport_key; /* the workers' program's (net_attach_plan) */
	/* What the workers share (struct kind's shared_size), NULL: none. */
	void *shared;
	/* What the kind's resolve gave before the start, NULL: nothing; and
	 * every address the process connects to, whatever the kind (its
	 * dials; the TURN peer policy refuses them). */
	const void *resolved;
	const union etr_sockaddr *dials;
	size_t ndials;
	/* Worker w's instance i of this kind; that w opened n of them. */
	void *(*inst)(const struct kind_env *e, unsigned w, unsigned i);
	void (*opened)(const struct kind_env *e, unsigned w, unsigned n);
	/* Another thread: the kind has news for worker w's instances
	 * (struct kind's poke). */
	void (*post)(const struct kind_env *e, unsigned w);
	void *daemon;
	unsigned id; /* the kind's index in the table */
};

#endif
