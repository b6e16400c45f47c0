/* SPDX-License-Identifier: ISC */
/* A fake loop for stream users (the SNI listener): it records listen,
 * connect, reads, sends, cancels and timers, and does none of them. The
 * test plays the loop's part by dispatching events through the endpoint
 * table. Include after cmocka.h and loop.h. */
#ifndef ETR_TEST_FAKE_STREAM_LOOP_H
#define ETR_TEST_FAKE_STREAM_LOOP_H

#include <string.h>

#define FAKE_MAX 64

struct fake_call {
	int fd;
	uint32_t id;
	size_t len;
	uint8_t data[256]; /* the first bytes of a send */
	const void *ptr;   /* a send's bytes, which the sender keeps until on_sent */
};

struct loop {
	struct fake_call listens[FAKE_MAX], connects[FAKE_MAX], reads[FAKE_MAX], sends[FAKE_MAX],
	    dels[FAKE_MAX];
	unsigned nlistens, nconnects, nreads, nsends, ndels;
	int result; /* what the stream calls return */
	unsigned timer_sets;
	struct loop_stats st; /* what a test sets: the stream pool's counts */
};

static void fake_rec(struct fake_call *a, unsigned *n, int fd, uint32_t id, const void *p,
		     size_t len)
{
	struct fake_call *c = &a[*n % FAKE_MAX];

	c->fd = fd;
	c->id = id;
	c->len = len;
	memset(c->data, 0, sizeof(c->data));
	if (p)
		memcpy(c->data, p, len < sizeof(c->data) ? len : sizeof(c->data));
	(*n)++;
}

static int fake_listen(struct loop *l, int fd, uint32_t id)
{
	fake_rec(l->listens, &l->nlistens, fd, id, NULL, 0);
	return l->result;
}

static int fake_connect(struct loop *l, int fd, const struct sockaddr *dst, socklen_t len,
			uint32_t id)
{
	fake_rec(l->connects, &l->nconnects, fd, id, dst, len);
	return l->result;
}

static int fake_stream_read(struct loop *l, int fd, uint32_t id)
{
	fake_rec(l->reads, &l->nreads, fd, id, NULL, 0);
	return l->result;
}

static int fake_stream_forward(struct loop *l, int fd, struct loop_dgram *d, uint32_t id)
{
	if (l->result)
		return l->result;
	fake_rec(l->sends, &l->nsends, fd, id, d->data, d->len);
	return 0;
}

static int fake_stream_send(struct loop *l, int fd, const void *buf, size_t len, uint32_t id)
{
	if (l->result)
		return l->result;
	fake_rec(l->sends, &l->nsends, fd, id, buf, len);
	l->sends[(l->nsends - 1) % FAKE_MAX].ptr = buf;
	return 0;
}

static void fake_del_socket(struct loop *l, int fd, uint32_t id)
{
	fake_rec(l->dels, &l->ndels, fd, id, NULL, 0);
}

static int fake_timer_set(struct loop *l, struct timer *t, uint64_t at)
{
	t->at = at;
	t->pos = 0; /* armed */
	l->timer_sets++;
	return 0;
}

static void fake_timer_cancel(struct loop *l, struct timer *t)
{
	(void)l;
	t->pos = TIMER_IDLE;
}

static const struct loop_stats *fake_stats(const struct loop *l)
{
	return &l->st;
}

static const struct loop_ops fake_stream_ops = {
    .stats = fake_stats,
    .name = "fake",
    .del_socket = fake_del_socket,
    .timer_set = fake_timer_set,
    .timer_cancel = fake_timer_cancel,
    .listen = fake_listen,
    .connect = fake_connect,
    .stream_read = fake_stream_read,
    .stream_read_bulk = fake_stream_read,
    .stream_forward = fake_stream_forward,
    .stream_send = fake_stream_send,
};

#endif
