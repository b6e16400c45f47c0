/* SPDX-License-Identifier: ISC */
/* What both backends do the same way: the state every loop starts with
 * (handler, fd table, counters, timers), handing a received buffer up as
 * the datagrams it holds, the wake-up deadline, the timers that are due at
 * the end of a turn, and what a refused GSO train teaches a socket. Only
 * loop_uring.c and loop_epoll.c include it. */
#ifndef ETR_LOOP_COMMON_H
#define ETR_LOOP_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop.h"
#include "loop_fdtab.h"
#include "loop_gso.h"
#include "stats.h"
#include "timers.h"

/* The first member of each backend's struct loop. */
struct loop_base {
	struct loop_handler h;
	struct fdtab fds;
	struct timers timers;
	struct loop_stats st;
	uint64_t armed; /* the wake-up the backend has set, UINT64_MAX for none */
	bool stop;
	bool taken; /* the datagram in on_dgram was forwarded */
	bool gro;   /* --gso and a kernel with it: trains both ways */
};

static inline struct loop_base *loop_base(struct loop *l)
{
	return (struct loop_base *)(void *)l;
}

/* Fill b for handler h and conf c. Returns 0 or -ENOMEM. */
int loop_base_init(struct loop_base *b, const struct loop_handler *h, const struct loop_conf *c);
void loop_base_free(struct loop_base *b);

/* Hand up the buffer d describes (data, len, headroom in front of it,
 * from, truncated, bid, now): one datagram, or with a GRO size seg the
 * datagrams the train was made of. Only the first has d->headroom: the
 * bytes in front of a later one are its predecessor's, which may be queued
 * for sending already. Returns false when the socket was deleted meanwhile
 * (the rest of the train is dropped). */
bool loop_deliver(struct loop_base *b, int fd, uint32_t id, const struct loop_dgram *d,
		  size_t seg);

/* The earliest timer, to wake up at, when it is earlier than the one armed
 * (the backend arms it and sets b->armed), else false. Deadlines that move
 * later are not re-armed: an early wake-up costs one idle turn, re-arming
 * on every packet a syscall or two SQEs each. */
bool loop_wake_earlier(struct loop_base *b, uint64_t *at);

/* The end of a loop turn: every timer due, in deadline order (at most as
 * many as were armed: one re-armed into the past may wait for the next
 * turn). */
void loop_turn_end(struct loop_base *b);

/* A train of segment size seg on fd was refused with -err: count it and
 * lower what the socket's trains may carry (gso_refused). */
void loop_train_refused(struct loop_base *b, int fd, uint16_t seg, int err);

/* A train of n > 1 datagrams is leaving. */
static inline void loop_train_counted(struct loop_base *b, unsigned n)
{
	STAT_ADD(b->st.gso_trains, 1);
	STAT_ADD(b->st.gso_datagrams, n);
}

/* Can a send of len copied bytes be taken at all? 0 or -EMSGSIZE. */
static inline int loop_copy_check(size_t len)
{
	return len > LOOP_MAX_DGRAM ? -EMSGSIZE : 0;
}

/* The ops every backend shares. */
int loop_common_timer_set(struct loop *l, struct timer *t, uint64_t at);
void loop_common_timer_cancel(struct loop *l, struct timer *t);
const struct loop_stats *loop_common_stats(const struct loop *l);
void loop_common_stop(struct loop *l);

#endif
