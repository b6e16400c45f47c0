/* SPDX-License-Identifier: ISC */
/* Timers: the heap's sift up and down, each timer knowing its slot so that
 * moving or cancelling one costs no search. */
#include "timers.h"

#include <errno.h>
#include <stdlib.h>

void timers_init(struct timers *q)
{
	q->h = NULL;
	q->n = q->cap = 0;
}

void timers_free(struct timers *q)
{
	for (uint32_t i = 0; i < q->n; i++)
		q->h[i]->pos = TIMER_IDLE;
	free(q->h);
	timers_init(q);
}

void timer_init(struct timer *t, uint32_t id)
{
	t->at = UINT64_MAX;
	t->id = id;
	t->pos = TIMER_IDLE;
}

static void place(struct timers *q, uint32_t i, struct timer *t)
{
	q->h[i] = t;
	t->pos = i;
}

static void sift_up(struct timers *q, uint32_t i)
{
	struct timer *t = q->h[i];

	while (i > 0) {
		uint32_t p = (i - 1) / 2;

		if (q->h[p]->at <= t->at)
			break;
		place(q, i, q->h[p]);
		i = p;
	}
	place(q, i, t);
}

static void sift_down(struct timers *q, uint32_t i)
{
	struct timer *t = q->h[i];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= q->n)
			break;
		if (c + 1 < q->n && q->h[c + 1]->at < q->h[c]->at)
			c++;
		if (t->at <= q->h[c]->at)
			break;
		place(q, i, q->h[c]);
		i = c;
	}
	place(q, i, t);
}

int timers_set(struct timers *q, struct timer *t, uint64_t at)
{
	uint64_t was = t->at;

	if (timer_armed(t)) {
		t->at = at;
		if (at < was)
			sift_up(q, t->pos);
		else if (at > was)
			sift_down(q, t->pos);
		return 0;
	}
	if (q->n == q->cap) {
		uint32_t cap = q->cap ? 2 * q->cap : 16;
		struct timer **h = realloc(q->h, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		q->h = h;
		q->cap = cap;
	}
	t->at = at;
	place(q, q->n++, t);
	sift_up(q, t->pos);
	return 0;
}

void timers_cancel(struct timers *q, struct timer *t)
{
	uint32_t i = t->pos;
	struct timer *last;

	if (!timer_armed(t))
		return;
	t->pos = TIMER_IDLE;
	last = q->h[--q->n];
	if (i == q->n)
		return;
	/* The last one fills the hole and goes whichever way it must. */
	place(q, i, last);
	if (i > 0 && q->h[(i - 1) / 2]->at > last->at)
		sift_up(q, i);
	else
		sift_down(q, i);
}

struct timer *timers_pop(struct timers *q, uint64_t now)
{
	struct timer *t;

	if (q->n == 0 || q->h[0]->at > now)
		return NULL;
	t = q->h[0];
	timers_cancel(q, t);
	return t;
}
