/* SPDX-License-Identifier: ISC */
/* The loop backends with real sockets on loopback: copied sends keep their
 * place among forwards, headroom takes a prepended header, timers fire in
 * order, a send without a buffer is refused and counted, flush sends on the
 * way out. argv[1] picks the backend; no io_uring here is a skip (77). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "loop.h"
#include "stats.h"

static const struct loop_ops *ops;

/* Ids this test gives the loop. */
enum { ID_A = 1, ID_WATCHDOG = 100, ID_T1, ID_T2, ID_T3 };

struct fixture {
	struct loop *l;
	int a;                 /* the loop's socket */
	int x, y;              /* plain sockets: a sender, a receiver */
	struct sockaddr_in ya; /* y's address */
	struct sockaddr_in xa;
	struct timer watchdog;
	unsigned dgrams, sent, sent_failed, timeouts;
	uint32_t fired[8];
	unsigned nfired;
	void (*on_dgram)(struct fixture *f, struct loop_dgram *d);
	unsigned stop_after_sent; /* stop once this many on_sent came */
	size_t headroom_seen;
	bool from_intact;
};

static void h_dgram(void *arg, uint32_t id, struct loop_dgram *d)
{
	struct fixture *f = arg;

	assert_int_equal(id, ID_A);
	f->dgrams++;
	f->on_dgram(f, d);
}

static void h_recv_error(void *arg, uint32_t id, int err)
{
	(void)arg;
	(void)id;
	(void)err;
}

static void h_sent(void *arg, uint32_t id, int res)
{
	struct fixture *f = arg;

	(void)id;
	f->sent++;
	if (res < 0)
		f->sent_failed++;
	if (f->stop_after_sent && f->sent == f->stop_after_sent)
		ops->stop(f->l);
}

static void h_readable(void *arg, uint32_t id)
{
	(void)arg;
	(void)id;
}

static void h_timer(void *arg, uint32_t id, uint64_t now)
{
	struct fixture *f = arg;

	(void)now;
	if (id == ID_WATCHDOG) {
		f->timeouts++;
		ops->stop(f->l);
		return;
	}
	if (f->nfired < 8)
		f->fired[f->nfired++] = id;
	if (id == ID_T1)
		ops->stop(f->l);
}

static int udp_on_loopback(struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	socklen_t len = sizeof(*sa);
	struct timeval tv = { .tv_sec = 1 };
	int big = 1 << 20;

	assert_true(fd >= 0);
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)sa, sizeof(*sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)sa, &len), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	return fd;
}

static int setup(void **state)
{
	static struct fixture f;
	const struct loop_handler h = {
		.arg = &f,
		.on_dgram = h_dgram,
		.on_recv_error = h_recv_error,
		.on_sent = h_sent,
		.on_readable = h_readable,
		.on_timer = h_timer,
	};
	const struct loop_conf c = { .max_sockets = 16, .gso = false };
	struct sockaddr_in aa;
	char why[256];

	memset(&f, 0, sizeof(f));
	assert_int_equal(ops->create(&f.l, &h, &c, why, sizeof(why)), 0);
	f.a = udp_on_loopback(&aa);
	f.x = udp_on_loopback(&f.xa);
	f.y = udp_on_loopback(&f.ya);
	assert_int_equal(connect(f.x, (struct sockaddr *)&aa, sizeof(aa)), 0);
	assert_int_equal(ops->add_socket(f.l, f.a, ID_A), 0);
	/* Every test ends within 2 s, by itself or by this. */
	timer_init(&f.watchdog, ID_WATCHDOG);
	assert_int_equal(ops->timer_set(f.l, &f.watchdog, loop_now() + 2 * NS_PER_SEC), 0);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ops->del_socket(f->l, f->a, ID_A);
	ops->timer_cancel(f->l, &f->watchdog);
	ops->destroy(f->l);
	close(f->a);
	close(f->x);
	close(f->y);
	return 0;
}

/* The next datagram y receives, NUL-terminated; its length or -1. */
static ssize_t recv_y(struct fixture *f, char *buf, size_t cap)
{
	ssize_t n = recv(f->y, buf, cap - 1, 0);

	if (n >= 0)
		buf[n] = '\0';
	return n;
}

static void forward_then_copy(struct fixture *f, struct loop_dgram *d)
{
	const struct sockaddr *y = (const struct sockaddr *)&f->ya;

	assert_int_equal(ops->forward(f->l, f->a, y, sizeof(f->ya), d, ID_A), 0);
	assert_int_equal(ops->send(f->l, f->a, y, sizeof(f->ya), "copy", 4, ID_A), 0);
}

/* A copy queued after a forward in the same turn leaves after it (a plain
 * sendto from the handler would overtake it on epoll). */
static void test_loop_a_copy_leaves_after_the_forward_queued_before_it(void **state)
{
	struct fixture *f = *state;
	char buf[64];

	f->on_dgram = forward_then_copy;
	f->stop_after_sent = 2;
	assert_int_equal(send(f->x, "forwarded", 9, 0), 9);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->sent, 2);
	assert_int_equal(f->sent_failed, 0);
	assert_int_equal(recv_y(f, buf, sizeof(buf)), 9);
	assert_string_equal(buf, "forwarded");
	assert_int_equal(recv_y(f, buf, sizeof(buf)), 4);
	assert_string_equal(buf, "copy");
	assert_int_equal(STAT_GET(ops->stats(f->l)->copies), 1);
}

static void prepend_and_forward(struct fixture *f, struct loop_dgram *d)
{
	const struct sockaddr_in *from = (const struct sockaddr_in *)d->from;
	uint8_t *p;

	f->headroom_seen = d->headroom;
	p = loop_dgram_prepend(d, 4);
	assert_non_null(p);
	memcpy(p, "\x40\x00\x00\x05", 4); /* a ChannelData header */
	/* Writing the headroom left the source address alone. */
	f->from_intact = from && from->sin_port == f->xa.sin_port &&
			 from->sin_addr.s_addr == f->xa.sin_addr.s_addr;
	assert_null(loop_dgram_prepend(d, d->headroom + 1));
	assert_int_equal(ops->forward(f->l, f->a, (const struct sockaddr *)&f->ya,
				      sizeof(f->ya), d, ID_A),
			 0);
}

/* Every received datagram has LOOP_HEADROOM bytes in front of it: 4 bytes
 * prepended there leave with it, no copy. */
static void test_loop_a_header_prepended_in_the_headroom_is_forwarded(void **state)
{
	struct fixture *f = *state;
	char buf[64];

	f->on_dgram = prepend_and_forward;
	f->stop_after_sent = 1;
	assert_int_equal(send(f->x, "hello", 5, 0), 5);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_true(f->headroom_seen >= LOOP_HEADROOM);
	assert_true(f->from_intact);
	assert_int_equal(recv_y(f, buf, sizeof(buf)), 9);
	assert_memory_equal(buf, "\x40\x00\x00\x05hello", 9);
}

/* Timers fire in deadline order, a cancelled one never, and not early. */
static void test_loop_timers_fire_in_order_and_a_cancelled_one_never(void **state)
{
	struct fixture *f = *state;
	struct timer t1, t2, t3;
	uint64_t start = loop_now();

	timer_init(&t1, ID_T1);
	timer_init(&t2, ID_T2);
	timer_init(&t3, ID_T3);
	assert_int_equal(ops->timer_set(f->l, &t1, start + 30 * NS_PER_MS), 0);
	assert_int_equal(ops->timer_set(f->l, &t2, start + 10 * NS_PER_MS), 0);
	assert_int_equal(ops->timer_set(f->l, &t3, start + 20 * NS_PER_MS), 0);
	ops->timer_cancel(f->l, &t3);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_true(loop_now() - start >= 30 * NS_PER_MS);
	assert_int_equal(f->nfired, 2);
	assert_int_equal(f->fired[0], ID_T2);
	assert_int_equal(f->fired[1], ID_T1);
}

enum { MANY = 200 };
static unsigned refused;

static void send_many(struct fixture *f, struct loop_dgram *d)
{
	(void)d;
	for (unsigned i = 0; i < MANY; i++) {
		char b[16];
		int n = snprintf(b, sizeof(b), "%u", i);
		int err = ops->send(f->l, f->a, (const struct sockaddr *)&f->ya, sizeof(f->ya), b,
				    (size_t)n, ID_A);

		if (err == -ENOBUFS)
			refused++;
		else
			assert_int_equal(err, 0);
	}
	f->stop_after_sent = MANY - refused;
}

/* More copies in one turn than the loop has buffers: io_uring refuses the
 * rest with -ENOBUFS and counts them; epoll sends early and refuses none.
 * Either way every accepted send arrives, in order, with one on_sent. */
static void test_loop_sends_without_a_buffer_are_refused_and_counted(void **state)
{
	struct fixture *f = *state;
	const struct loop_stats *st = ops->stats(f->l);
	char buf[64];
	unsigned got = 0;

	refused = 0;
	f->on_dgram = send_many;
	assert_int_equal(send(f->x, "go", 2, 0), 2);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(STAT_GET(st->send_nobufs), refused);
	assert_int_equal(STAT_GET(st->copies), MANY - refused);
	assert_int_equal(f->sent, MANY - refused);
	if (ops == &loop_epoll_ops)
		assert_int_equal(refused, 0);
	else
		assert_true(refused > 0);
	for (unsigned i = 0; i < MANY - refused; i++) {
		char want[16];

		snprintf(want, sizeof(want), "%u", i);
		if (recv_y(f, buf, sizeof(buf)) < 0)
			break;
		assert_string_equal(buf, want);
		got++;
	}
	assert_int_equal(got, MANY - refused);
}

/* After run returns (on the way out), flush sends what was queued. */
static void test_loop_flush_sends_what_was_queued_after_run(void **state)
{
	struct fixture *f = *state;
	char buf[64];

	assert_int_equal(ops->send(f->l, f->a, (const struct sockaddr *)&f->ya, sizeof(f->ya),
				   "flatline", 8, ID_A),
			 0);
	ops->flush(f->l);
	assert_int_equal(f->sent, 1);
	assert_int_equal(recv_y(f, buf, sizeof(buf)), 8);
	assert_string_equal(buf, "flatline");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_loop_a_copy_leaves_after_the_forward_queued_before_it,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_loop_a_header_prepended_in_the_headroom_is_forwarded,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_loop_timers_fire_in_order_and_a_cancelled_one_never,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_loop_sends_without_a_buffer_are_refused_and_counted,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_loop_flush_sends_what_was_queued_after_run, setup,
					    teardown),
	};
	struct loop *l;
	const struct loop_handler h = { 0 };
	const struct loop_conf c = { .max_sockets = 4 };
	char why[256];

	if (argc < 2 || (strcmp(argv[1], "io_uring") && strcmp(argv[1], "epoll"))) {
		fprintf(stderr, "usage: test_loop io_uring|epoll\n");
		return 2;
	}
	ops = strcmp(argv[1], "epoll") == 0 ? &loop_epoll_ops : &loop_uring_ops;
	if (ops->create(&l, &h, &c, why, sizeof(why)) < 0) {
		fprintf(stderr, "%s unavailable: %s\n", argv[1], why);
		return 77;
	}
	ops->destroy(l);
	return cmocka_run_group_tests_name(argv[1], tests, NULL, NULL);
}
