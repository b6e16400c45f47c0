/* SPDX-License-Identifier: ISC */
/* The backends' shared code: delivery, wake-up, timers, GSO lowering. */
#include "loop_common.h"

#include <string.h>

int loop_base_init(struct loop_base *b, const struct loop_handler *h, const struct loop_conf *c)
{
	b->h = *h;
	b->armed = UINT64_MAX;
	b->gro = c->gso && gso_supported();
	timers_init(&b->timers);
	return fdtab_init(&b->fds, c->max_sockets, b->gro ? GSO_ANY : 0);
}

void loop_base_free(struct loop_base *b)
{
	fdtab_free(&b->fds);
	timers_free(&b->timers);
}

bool loop_deliver(struct loop_base *b, int fd, uint32_t id, const struct loop_dgram *d,
		  size_t seg)
{
	size_t off = 0;

	do {
		struct loop_dgram one = *d;

		one.data = d->data + off;
		one.len = gro_segment(d->len, seg, off);
		one.headroom = off ? 0 : d->headroom;
		b->taken = false;
		b->h.on_dgram(b->h.arg, id, &one);
		/* A handler may close the socket, and its number may be
		 * another socket's by now. */
		if (!fdtab_is(&b->fds, fd, id))
			return false;
		off += gro_segment(d->len, seg, off);
	} while (off < d->len);
	return true;
}

bool loop_wake_earlier(struct loop_base *b, uint64_t *at)
{
	*at = timers_next(&b->timers);
	return *at < b->armed;
}

void loop_turn_end(struct loop_base *b)
{
	uint64_t now = loop_now();
	struct timer *t;

	if (b->stop)
		return;
	for (uint32_t n = b->timers.n; n > 0 && !b->stop; n--) {
		if (!(t = timers_pop(&b->timers, now)))
			break;
		if (b->h.on_timer)
			b->h.on_timer(b->h.arg, t->id, now);
	}
}

void loop_train_refused(struct loop_base *b, int fd, uint16_t seg, int err)
{
	STAT_ADD(b->st.gso_refused, 1);
	fdtab_set_gso(&b->fds, fd, gso_refused(fdtab_gso(&b->fds, fd), seg, err));
}

int loop_common_timer_set(struct loop *l, struct timer *t, uint64_t at)
{
	return timers_set(&loop_base(l)->timers, t, at);
}

void loop_common_timer_cancel(struct loop *l, struct timer *t)
{
	timers_cancel(&loop_base(l)->timers, t);
}

const struct loop_stats *loop_common_stats(const struct loop *l)
{
	return &((const struct loop_base *)(const void *)l)->st;
}

void loop_common_stop(struct loop *l)
{
	loop_base(l)->stop = true;
}
