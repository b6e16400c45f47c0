/* SPDX-License-Identifier: ISC */
/* Timers: a binary min-heap of deadlines that their owners keep inside
 * their own objects (intrusive: no allocation to set or move one). The loop
 * sleeps until the earliest; an owner sets, moves or cancels its own in
 * O(log n). Pure: no clock, `now` is passed in. */
#ifndef ETR_TIMERS_H
#define ETR_TIMERS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* pos value of a timer that is not in a heap. */
#define TIMER_IDLE UINT32_MAX

/* One deadline, owned by whoever embeds it. id is the owner's (the loop
 * hands it back on expiry); at and pos belong to the heap. */
struct timer {
	uint64_t at; /* CLOCK_MONOTONIC ns */
	uint32_t id;
	uint32_t pos; /* index in the heap, TIMER_IDLE when not armed */
};

struct timers {
	struct timer **h; /* h[0] is the earliest */
	uint32_t n, cap;
};

void timers_init(struct timers *q);

/* Frees the heap, not the timers (their owners hold them). */
void timers_free(struct timers *q);

/* An idle timer that will be handed back with id. */
void timer_init(struct timer *t, uint32_t id);

static inline bool timer_armed(const struct timer *t)
{
	return t->pos != TIMER_IDLE;
}

/* Whether arming t for at would wake its owner sooner than it is armed
 * (an owner whose deadline moved later lets the timer fire early once and
 * re-arms it exactly then, so nothing is recomputed per packet). */
static inline bool timer_sooner(const struct timer *t, uint64_t at)
{
	return at != UINT64_MAX && (!timer_armed(t) || at < t->at);
}

/* Arm t for at, or move it there if armed. Returns 0, or -ENOMEM when the
 * heap had to grow and could not (t stays as it was). */
int timers_set(struct timers *q, struct timer *t, uint64_t at);

/* Disarm t; nothing if it is idle. */
void timers_cancel(struct timers *q, struct timer *t);

/* The earliest deadline, UINT64_MAX with none armed. */
static inline uint64_t timers_next(const struct timers *q)
{
	return q->n ? q->h[0]->at : UINT64_MAX;
}

/* The earliest timer due at now (at <= now), disarmed; NULL if none. */
struct timer *timers_pop(struct timers *q, uint64_t now);

#define NS_PER_SEC 1000000000ull
#define NS_PER_MS  1000000ull

/* CLOCK_MONOTONIC in nanoseconds: the one clock of every deadline, rate
 * and timer (the loop's loop_now is this clock too). */
static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

#endif
