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

#include "banlist.h"
#include "config.h"
#include "endpoint.h"
#include "loop.h"

struct kind {
	const char *name; /* for logs: "relay", "prbe-listen", "sni", "turn" */
	size_t size;	  /* one instance */
	/* Listeners of this kind the configuration asks for. */
	unsigned (*count)(const struct etr_conf *c);
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

#endif
