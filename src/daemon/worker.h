/* SPDX-License-Identifier: ISC */
/* One worker: a packet loop in a thread of its own, its endpoint table, and
 * its own instance of every listener, by kind (kinds.h: a game relay's
 * public socket in the port's reuseport group, sessions, per-IP tables,
 * counters; an SNI or TURN listener's sockets and connections). Other
 * threads reach it only through worker_post. */
#ifndef ETR_WORKER_H
#define ETR_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "endpoint.h"
#include "kinds.h"
#include "loop.h"
#include "stats.h"

struct worker;

/* What a worker asks of whoever owns it (the daemon), on the worker's own
 * thread: the worker knows the owner through these only. */
struct worker_host {
	void (*take_bans)(void *owner, struct worker *w);	/* WORKER_BANS */
	void (*bans_taken)(void *owner);			/* WORKER_BANS_TAKEN */
	void (*render_sessions)(void *owner, struct worker *w); /* WORKER_SESSIONS */
	void (*failed)(void *owner); /* its loop failed: take the process down */
};

/* Requests a worker takes from other threads (worker_post). */
#define WORKER_STOP	  1u /* leave the loop */
#define WORKER_SESSIONS	  2u /* render its part of GET /sessions */
#define WORKER_BANS	  4u /* take the daemon's current ban list */
#define WORKER_BANS_TAKEN 8u /* to worker 0: a worker took the new list */
/* Kind k's news: every instance of it takes them (struct kind's poke): a
 * relay's owner about its game server, the SNI route tables in force. */
#define WORKER_POKE(k) (16u << (k))

struct worker {
	unsigned index;
	const struct etr_conf *conf;
	const struct worker_host *host;
	void *owner;
	const struct loop_ops *ops;
	struct loop *loop;
	struct endpoint_table ep; /* what its loop ids name */
	/* Its instance of every listener, by kind (kinds.h): an array of
	 * kinds[k]->count(conf) instances; n of them opened so far. */
	struct {
		void *inst;
		unsigned n;
	} kind[KINDS];
	int ctl_fd; /* eventfd: worker_post wakes the loop */
	pthread_t thread;
	bool thread_started;
	int run_rc;
	/* A worker thread sets up its own loop (an io_uring ring belongs to
	 * the thread that made it) and says how that went. */
	struct {
		pthread_mutex_t lock;
		pthread_cond_t cond;
		bool done;
		int rc;
		const struct loop_ops *ops;
		unsigned max_sockets;
		int (*attach)(struct worker *w);
	} boot;
	/* Its part of GET /sessions, by kind (struct kind's sessions), under
	 * the daemon's call lock. */
	char *call_buf[KINDS];
	size_t call_len[KINDS];
	uint64_t call_gen; /* of the request it answered */
	/* The ban list generation its relays use (worker 0 frees the old list
	 * once every worker took the new one). */
	_Atomic uint64_t bans_gen;
	/* Written by other threads: a cache line of its own. */
	_Alignas(64) _Atomic unsigned ctl; /* WORKER_* pending */
	char pad_[64 - sizeof(unsigned)];
};

/* A worker (cache-line aligned, so that no counter shares a line with
 * another worker's), its control eventfd open, nothing else yet. NULL on
 * failure (logged). */
struct worker *worker_new(const struct etr_conf *conf, const struct worker_host *host, void *owner,
			  unsigned index);

/* Create its loop on ops (NULL: the configured backend, with the fallback
 * from io_uring to epoll) and register its control eventfd. Returns 0, or
 * the exit status to leave with (logged). */
int worker_create_loop(struct worker *w, const struct loop_ops *ops, unsigned max_sockets);

/* Ask the worker's loop for `what` (WORKER_*); safe from any thread. */
void worker_post(struct worker *w, unsigned what);

/* Workers 1..: a thread that creates the loop on ops (worker_create_loop),
 * calls attach(w) to register its endpoints, and runs. Returns once the
 * loop is set up: 0, or the exit status (logged; the thread has ended). */
int worker_spawn(struct worker *w, const struct loop_ops *ops, unsigned max_sockets,
		 int (*attach)(struct worker *w));

/* Worker 0: run the loop in this thread. Returns 0 or -errno. */
int worker_run(struct worker *w);
/* After its loop left, on the worker's own thread (an io_uring ring takes
 * submissions from the thread that made it): close its sessions (worker
 * 0: send the flatlines) and let what is queued leave. */
void worker_shutdown(struct worker *w);

/* Wait for the thread (after WORKER_STOP). */
void worker_join(struct worker *w);

/* Free its part of GET /sessions (under the daemon's call lock). */
void worker_call_clear(struct worker *w);

/* Close its relays, loop and fds, and free it. */
void worker_free(struct worker *w);

/* Instance i of kind k on worker w, typed for the daemon. */
static inline void *worker_inst(const struct worker *w, enum kind_id k, unsigned i)
{
	return (char *)w->kind[k].inst + (size_t)i * kinds[k]->size;
}
/* A game relay, for XDP's hookup of its known sessions (daemon.c). */
#define W_RELAY(w, i) ((struct relay *)worker_inst((w), KIND_RELAY, (i)))

/* Every opened instance of every kind, in the table's order. */
#define WORKER_EACH(w, k, i)                                                                       \
	for (unsigned k = 0; k < KINDS; k++)                                                       \
		for (unsigned i = 0; i < (w)->kind[k].n; i++)

#endif
