/* SPDX-License-Identifier: ISC */
/* A fake loop and a fake socket factory for the forwarder's unit tests:
 * they record what is asked of them and open nothing. Include after
 * cmocka.h and loop.h (the factory after udprelay.h only: the TURN
 * listener's tests, below the forwarder's layer, use the loop alone). */
#ifndef ETR_TEST_FAKE_LOOP_H
#define ETR_TEST_FAKE_LOOP_H

#define PUB_FD	3
#define FD_BASE 100

/* The fake loop: what the forwarder asked of it. */
struct loop {
	struct {
		int fd;
		uint32_t id;
	} added[64], deleted[64];
	unsigned nadded, ndeleted;
	struct {
		int fd;
		bool to_client;
		union etr_sockaddr dst;
		uint32_t id;
		size_t len;
	} fwd[64];
	unsigned nfwd;
	int forward_result; /* what forward and send return */
	/* Copies sent (send): how many, the last one's bytes, fd and id. */
	unsigned nsent;
	uint8_t last[2048];
	size_t last_len;
	int last_fd;
	uint32_t last_id;
	/* The last timer armed, and when for. */
	struct timer *timer;
	uint64_t timer_at;
	unsigned timer_sets, timer_cancels;
};

static int fake_add_socket(struct loop *l, int fd, uint32_t id)
{
	l->added[l->nadded].fd = fd;
	l->added[l->nadded++].id = id;
	return 0;
}

static void fake_del_socket(struct loop *l, int fd, uint32_t id)
{
	l->deleted[l->ndeleted].fd = fd;
	l->deleted[l->ndeleted++].id = id;
}

static int fake_forward(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
			struct loop_dgram *d, uint32_t id)
{
	if (l->forward_result)
		return l->forward_result;
	l->fwd[l->nfwd].fd = fd;
	l->fwd[l->nfwd].to_client = dst != NULL;
	memset(&l->fwd[l->nfwd].dst, 0, sizeof(l->fwd[l->nfwd].dst));
	if (dst)
		assert_true(addr_from(&l->fwd[l->nfwd].dst, dst, dstlen));
	l->fwd[l->nfwd].id = id;
	l->fwd[l->nfwd++].len = d->len;
	return 0;
}

static int fake_send(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		     const void *buf, size_t len, uint32_t id)
{
	(void)dst, (void)dstlen;
	if (l->forward_result)
		return l->forward_result;
	l->nsent++;
	l->last_len = len < sizeof(l->last) ? len : sizeof(l->last);
	memcpy(l->last, buf, l->last_len);
	l->last_fd = fd;
	l->last_id = id;
	return 0;
}

static int fake_timer_set(struct loop *l, struct timer *t, uint64_t at)
{
	t->at = at;
	t->pos = 0; /* armed */
	l->timer = t;
	l->timer_at = at;
	l->timer_sets++;
	return 0;
}

static void fake_timer_cancel(struct loop *l, struct timer *t)
{
	t->pos = TIMER_IDLE;
	l->timer_cancels++;
}

static const struct loop_ops fake_loop_ops = {
    .name = "fake",
    .add_socket = fake_add_socket,
    .del_socket = fake_del_socket,
    .forward = fake_forward,
    .send = fake_send,
    .timer_set = fake_timer_set,
    .timer_cancel = fake_timer_cancel,
};

#ifdef ETR_UDPRELAY_H
/* The fake socket factory: fds FD_BASE, FD_BASE + 1... */
struct fake_sock {
	int next_fd;
	int fail_next; /* -errno for the next open, 0: none */
	unsigned opened, closed;
	int last_closed;
};

static int fake_open(void *arg)
{
	struct fake_sock *s = arg;

	if (s->fail_next) {
		int err = s->fail_next;

		s->fail_next = 0;
		return err;
	}
	s->opened++;
	return s->next_fd++;
}

static void fake_close(void *arg, int fd)
{
	struct fake_sock *s = arg;

	s->closed++;
	s->last_closed = fd;
}

static const struct udprelay_sockops fake_sockops = {
    .open = fake_open,
    .close = fake_close,
};
#endif

#endif
