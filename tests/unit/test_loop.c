/* SPDX-License-Identifier: ISC */
/* The loop backends with real sockets on loopback: copied sends keep their
 * place among forwards, headroom takes a prepended header, timers fire in
 * order, a send without a buffer is refused and counted, flush sends on the
 * way out; TCP streams: accept, connect, echo, EOF, a relay under
 * back-pressure, short writes, cancels, an empty pool. argv[1] picks the
 * backend; no io_uring here is a skip (77). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
	int a;		       /* the loop's socket */
	int x, y;	       /* plain sockets: a sender, a receiver */
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
	struct timeval tv = {.tv_sec = 1};
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
	const struct loop_conf c = {.max_sockets = 16, .gso = false};
	struct sockaddr_in aa;
	char why[256];

	memset(&f, 0, sizeof(f));
	assert_int_equal(ops->create(&f.l, &h, &c, why, sizeof(why)), 0);
	f.a = udp_on_loopback(&aa);
	f.x = udp_on_loopback(&f.xa);
	f.y = udp_on_loopback(&f.ya);
	assert_int_equal(connect(f.x, (struct sockaddr *)&aa, sizeof(aa)), 0);
	assert_int_equal(ops->add_socket(f.l, f.a, ID_A), 0);
	/* Every test ends within 10 s, by itself or by this (2 s failed
	 * once on a loaded machine: the whole run took 14 s instead of 2). */
	timer_init(&f.watchdog, ID_WATCHDOG);
	assert_int_equal(ops->timer_set(f.l, &f.watchdog, loop_now() + 10 * NS_PER_SEC), 0);
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
	assert_int_equal(
	    ops->forward(f->l, f->a, (const struct sockaddr *)&f->ya, sizeof(f->ya), d, ID_A), 0);
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

/* Streams. Each test runs the loop in this thread; the plain sockets on
 * the far side are driven before run, from timers, or from a thread. */
enum { SID_LISTEN = 1, SID_A, SID_B, SID_C, SID_WATCH = 200, SID_TICK, SID_DEL };

struct sfix {
	struct loop *l;
	struct timer watchdog, tick, del;
	unsigned timeouts;
	int accepted[8];
	unsigned naccepted;
	int conn_res;
	unsigned nconnected;
	unsigned nstreams, eofs, recv_errors, after_del;
	unsigned sent, sent_ok, sent_cancelled;
	int sent_res[16];
	bool deleted;
	uint64_t chunks_max; /* the most stream_chunks any callback saw */
	/* The test's own plot. */
	void (*accept_cb)(struct sfix *f, int fd);
	void (*connected_cb)(struct sfix *f, uint32_t id, int res);
	void (*stream_cb)(struct sfix *f, uint32_t id, struct loop_dgram *d);
	void (*sent_cb)(struct sfix *f, uint32_t id, int res);
	void (*tick_cb)(struct sfix *f);
	void (*del_cb)(struct sfix *f);
	void (*dgram_cb)(struct sfix *f, uint32_t id, struct loop_dgram *d);
	int fd[8]; /* whatever sockets the test needs */
	size_t n[4];
	struct sockaddr_in sa;
};

static void s_watch_chunks(struct sfix *f)
{
	uint64_t n = STAT_GET(ops->stats(f->l)->stream_chunks);

	if (n > f->chunks_max)
		f->chunks_max = n;
}

static void sh_dgram(void *arg, uint32_t id, struct loop_dgram *d)
{
	struct sfix *f = arg;

	if (!f->dgram_cb)
		fail_msg("a datagram in a stream test");
	f->dgram_cb(f, id, d);
}

static void sh_recv_error(void *arg, uint32_t id, int err)
{
	struct sfix *f = arg;

	(void)id;
	(void)err;
	f->recv_errors++;
	if (f->deleted)
		f->after_del++;
}

static void sh_sent(void *arg, uint32_t id, int res)
{
	struct sfix *f = arg;

	if (f->sent < 16)
		f->sent_res[f->sent] = res;
	f->sent++;
	if (res == -ECANCELED)
		f->sent_cancelled++;
	else if (res > 0)
		f->sent_ok++;
	s_watch_chunks(f);
	if (f->sent_cb)
		f->sent_cb(f, id, res);
}

static void sh_readable(void *arg, uint32_t id)
{
	(void)arg;
	(void)id;
}

static void sh_timer(void *arg, uint32_t id, uint64_t now)
{
	struct sfix *f = arg;

	if (id == SID_WATCH) {
		f->timeouts++;
		ops->stop(f->l);
	} else if (id == SID_TICK) {
		f->tick_cb(f);
		ops->timer_set(f->l, &f->tick, now + 10 * NS_PER_MS);
	} else if (id == SID_DEL) {
		f->del_cb(f);
	}
}

static void sh_accept(void *arg, uint32_t id, int fd)
{
	struct sfix *f = arg;

	assert_int_equal(id, SID_LISTEN);
	if (fd >= 0 && f->naccepted < 8)
		f->accepted[f->naccepted++] = fd;
	if (f->accept_cb)
		f->accept_cb(f, fd);
}

static void sh_connected(void *arg, uint32_t id, int res)
{
	struct sfix *f = arg;

	f->nconnected++;
	f->conn_res = res;
	if (f->deleted)
		f->after_del++;
	if (f->connected_cb)
		f->connected_cb(f, id, res);
}

static void sh_stream(void *arg, uint32_t id, struct loop_dgram *d)
{
	struct sfix *f = arg;

	assert_null(d->from);
	assert_true(d->len <= LOOP_STREAM_CHUNK);
	f->nstreams++;
	if (d->len == 0)
		f->eofs++;
	if (f->deleted)
		f->after_del++;
	s_watch_chunks(f);
	if (f->stream_cb)
		f->stream_cb(f, id, d);
}

static struct sfix *s_setup(unsigned chunks, unsigned seconds)
{
	static struct sfix f;
	const struct loop_handler h = {
	    .arg = &f,
	    .on_dgram = sh_dgram,
	    .on_recv_error = sh_recv_error,
	    .on_sent = sh_sent,
	    .on_readable = sh_readable,
	    .on_timer = sh_timer,
	    .on_accept = sh_accept,
	    .on_connected = sh_connected,
	    .on_stream = sh_stream,
	};
	const struct loop_conf c = {.max_sockets = 16, .stream_chunks = chunks};
	char why[256];

	memset(&f, 0, sizeof(f));
	for (unsigned i = 0; i < 8; i++)
		f.fd[i] = -1;
	assert_int_equal(ops->create(&f.l, &h, &c, why, sizeof(why)), 0);
	timer_init(&f.watchdog, SID_WATCH);
	timer_init(&f.tick, SID_TICK);
	timer_init(&f.del, SID_DEL);
	assert_int_equal(ops->timer_set(f.l, &f.watchdog, loop_now() + seconds * NS_PER_SEC), 0);
	return &f;
}

static void s_teardown(struct sfix *f)
{
	ops->timer_cancel(f->l, &f->watchdog);
	ops->timer_cancel(f->l, &f->tick);
	ops->timer_cancel(f->l, &f->del);
	ops->destroy(f->l);
	for (unsigned i = 0; i < f->naccepted; i++)
		close(f->accepted[i]);
	for (unsigned i = 0; i < 8; i++)
		if (f->fd[i] >= 0)
			close(f->fd[i]);
}

static void set_nonblock(int fd)
{
	assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

static void set_bufs(int fd, int snd, int rcv)
{
	if (snd)
		assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd)), 0);
	if (rcv)
		assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv)), 0);
}

/* A TCP listener on 127.0.0.1, its address in sa. */
static int tcp_listener(struct sockaddr_in *sa, bool nonblock)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	socklen_t len = sizeof(*sa);
	int one = 1;

	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)sa, sizeof(*sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)sa, &len), 0);
	assert_int_equal(listen(fd, 16), 0);
	if (nonblock)
		set_nonblock(fd);
	return fd;
}

/* A blocking client connected to sa (buffers set before the handshake). */
static int tcp_client(const struct sockaddr_in *sa, int snd, int rcv)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = {.tv_sec = 5};

	assert_true(fd >= 0);
	set_bufs(fd, snd, rcv);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* Say why when it fails (once in a fresh-check run, while other
	 * tests loaded loopback: -1, errno not known then). A connect that
	 * waits (a full backlog) is cut short by io_uring's task work on this
	 * thread (EINTR, with SO_SNDTIMEO set): it goes on in the kernel;
	 * wait for it. */
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int err = errno, n = 0;
		socklen_t len = sizeof(err);

		for (int i = 0; err == EINTR && i < 50 && n <= 0; i++)
			n = poll(&p, 1, 100);
		if (n == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
			return fd;
		fail_msg("connect to 127.0.0.1:%u: %s", ntohs(sa->sin_port), strerror(err));
	}
	return fd;
}

/* A connected pair: the loop's end (non-blocking, send buffer snd) and a
 * plain far end (receive buffer rcv). 0 leaves a buffer as it is. */
static void tcp_pair(int *loop_end, int *far_end, int snd, int rcv)
{
	struct sockaddr_in sa;
	int ls = tcp_listener(&sa, false);
	struct timeval tv = {.tv_sec = 5};

	set_bufs(ls, 0, rcv); /* the far end is the listener's child */
	*loop_end = tcp_client(&sa, snd, 0);
	*far_end = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	assert_true(*far_end >= 0);
	setsockopt(*far_end, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	set_nonblock(*loop_end);
	close(ls);
}

static void stop_at_accepts(struct sfix *f, int fd)
{
	(void)fd;
	if (f->naccepted == 3)
		ops->stop(f->l);
}

/* A listener takes every connection waiting and those that come later. */
static void test_stream_listen_accepts_several_connections(void **state)
{
	struct sfix *f = s_setup(0, 3);
	int c[3];

	(void)state;
	f->fd[0] = tcp_listener(&f->sa, true);
	c[0] = tcp_client(&f->sa, 0, 0);
	c[1] = tcp_client(&f->sa, 0, 0);
	assert_int_equal(ops->listen(f->l, f->fd[0], SID_LISTEN), 0);
	c[2] = tcp_client(&f->sa, 0, 0);
	f->accept_cb = stop_at_accepts;
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->naccepted, 3);
	for (unsigned i = 0; i < 3; i++) {
		int fl = fcntl(f->accepted[i], F_GETFL);

		assert_true(fl & O_NONBLOCK);
		assert_true(fcntl(f->accepted[i], F_GETFD) & FD_CLOEXEC);
		close(c[i]);
	}
	ops->del_socket(f->l, f->fd[0], SID_LISTEN);
	s_teardown(f);
}

static unsigned accept_errors;
static uint64_t fds_back_at;
static struct rlimit nofile_was;

static void count_accept_errors(struct sfix *f, int fd)
{
	if (fd < 0) {
		assert_true(fd == -EMFILE);
		accept_errors++;
	} else {
		ops->stop(f->l);
	}
}

static void give_fds_back(struct sfix *f)
{
	(void)f;
	if (fds_back_at && loop_now() >= fds_back_at) {
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &nofile_was), 0);
		fds_back_at = 0;
	}
}

/* Out of fds, a listener pauses (LOOP_ACCEPT_PAUSE_MS) instead of
 * retrying at once, every turn; it takes the waiting connection once fds
 * are back. */
static void test_stream_an_accept_out_of_fds_pauses_then_resumes(void **state)
{
	struct sfix *f = s_setup(0, 3);
	struct rlimit low;
	int c, lowest;

	(void)state;
	f->fd[0] = tcp_listener(&f->sa, true);
	c = tcp_client(&f->sa, 0, 0);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &nofile_was), 0);
	lowest = dup(c);
	assert_true(lowest >= 0);
	close(lowest);
	low = nofile_was;
	low.rlim_cur = (rlim_t)lowest; /* no fd free below the limit */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	accept_errors = 0;
	fds_back_at = loop_now() + 350 * NS_PER_MS;
	f->accept_cb = count_accept_errors;
	f->tick_cb = give_fds_back;
	assert_int_equal(ops->timer_set(f->l, &f->tick, loop_now() + 10 * NS_PER_MS), 0);
	assert_int_equal(ops->listen(f->l, f->fd[0], SID_LISTEN), 0);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &nofile_was), 0);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->naccepted, 1);
	/* 350 ms out of fds: one try per 100 ms pause, not one per turn (a
	 * starved host may run fewer turns, so at least one; the bound that
	 * matters is the upper one: 337,319 tries before the pause). */
	assert_in_range(accept_errors, 1, 6);
	assert_int_equal(STAT_GET(ops->stats(f->l)->accept_pauses), accept_errors);
	close(c);
	ops->del_socket(f->l, f->fd[0], SID_LISTEN);
	s_teardown(f);
}

static void stop_at_two_connects(struct sfix *f, uint32_t id, int res)
{
	if (id == SID_A)
		f->n[0] = (size_t)-res;
	else
		f->n[1] = (size_t)-res;
	if (f->nconnected == 2)
		ops->stop(f->l);
}

/* connect: on_connected(0) for a listener, -ECONNREFUSED for a port with
 * none. */
static void test_stream_connect_succeeds_and_is_refused(void **state)
{
	struct sfix *f = s_setup(0, 3);
	struct sockaddr_in dead;

	(void)state;
	f->fd[0] = tcp_listener(&f->sa, false);
	f->fd[1] = tcp_listener(&dead, false);
	close(f->fd[1]); /* nobody listens on dead's port now */
	f->fd[1] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	f->fd[2] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	f->connected_cb = stop_at_two_connects;
	f->n[0] = f->n[1] = 1000;
	assert_int_equal(
	    ops->connect(f->l, f->fd[1], (struct sockaddr *)&f->sa, sizeof(f->sa), SID_A), 0);
	assert_int_equal(
	    ops->connect(f->l, f->fd[2], (struct sockaddr *)&dead, sizeof(dead), SID_B), 0);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->n[0], 0);
	assert_int_equal(f->n[1], ECONNREFUSED);
	ops->del_socket(f->l, f->fd[1], SID_A);
	ops->del_socket(f->l, f->fd[2], SID_B);
	s_teardown(f);
}

/* Echo: what comes in on fd[1] goes back out of it. */
static void echo_stream(struct sfix *f, uint32_t id, struct loop_dgram *d)
{
	assert_int_equal(id, SID_A);
	if (d->len == 0) {
		if (f->sent == f->n[1])
			ops->stop(f->l);
		return;
	}
	f->n[0] += d->len;
	f->n[1]++;
	assert_int_equal(ops->stream_forward(f->l, f->fd[1], d, SID_A), 0);
}

static void echo_sent(struct sfix *f, uint32_t id, int res)
{
	(void)id;
	assert_true(res > 0);
	if (f->eofs)
		ops->stop(f->l);
	else
		assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), 0);
}

/* stream_read + stream_forward echo the bytes back; after the peer's
 * shutdown the read answers with len 0 (EOF). */
static void test_stream_echo_and_eof_after_the_peers_shutdown(void **state)
{
	struct sfix *f = s_setup(0, 3);
	static const char msg[] = "hello, stream";
	char buf[64];

	(void)state;
	f->fd[0] = tcp_listener(&f->sa, false);
	f->fd[2] = tcp_client(&f->sa, 0, 0);
	f->fd[1] = accept4(f->fd[0], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	assert_true(f->fd[1] >= 0);
	assert_int_equal(send(f->fd[2], msg, sizeof(msg), 0), sizeof(msg));
	assert_int_equal(shutdown(f->fd[2], SHUT_WR), 0);
	f->stream_cb = echo_stream;
	f->sent_cb = echo_sent;
	assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), 0);
	assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), -EALREADY);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->eofs, 1);
	assert_int_equal(f->n[0], sizeof(msg));
	assert_int_equal(f->sent_ok, f->n[1]);
	assert_int_equal(recv(f->fd[2], buf, sizeof(buf), MSG_WAITALL), sizeof(msg));
	assert_memory_equal(buf, msg, sizeof(msg));
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_rx_bytes), sizeof(msg));
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_tx_bytes), sizeof(msg));
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_chunks), 0);
	ops->del_socket(f->l, f->fd[1], SID_A);
	s_teardown(f);
}

/* The relay: client -> [A: loop] -> [B: loop] -> server, 4 MiB, with the
 * server reading slowly. */
#define RELAY_BYTES (4u << 20)
#define SMALL_BUF   16384

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 13));
}

struct relay_io {
	int client, server;
	/* written: what the writer may have handed to the kernel so far, an
	 * upper bound, stored before each send (see relay_writer). */
	_Atomic size_t written, read;
	size_t max_gap;	 /* most bytes written but not yet read, seen by the reader */
	unsigned behind; /* times the reader saw written < read: must stay 0 */
	bool exact;
};

static void *relay_writer(void *arg)
{
	struct relay_io *io = arg;
	uint8_t buf[8192];

	for (size_t at = 0; at < RELAY_BYTES;) {
		size_t n = sizeof(buf);
		ssize_t w;

		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(at + i);
		/* Publish before the send, not after: once send() has the
		 * bytes, they can cross the relay and reach the reader before
		 * this thread runs again (on a loaded machine it is preempted
		 * right there), and a written stored afterwards would lag the
		 * reader's count; written - read then wraps (size_t) to ~2^64
		 * and looks like a huge gap. Stored first, written is an upper
		 * bound (at most one send ahead), so the gap is never
		 * understated either. */
		atomic_store(&io->written, at + n);
		w = send(io->client, buf, n, MSG_NOSIGNAL);
		if (w <= 0)
			break;
		/* A short send: the rest again from there. */
		at += (size_t)w;
		atomic_store(&io->written, at);
	}
	shutdown(io->client, SHUT_WR);
	return NULL;
}

static void *relay_reader(void *arg)
{
	struct relay_io *io = arg;
	uint8_t buf[SMALL_BUF];
	size_t at = 0;
	unsigned turns = 0;
	int fd = accept(io->server, NULL, NULL);

	io->exact = fd >= 0;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		size_t gap, written;

		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != pattern(at + (size_t)i))
				io->exact = false;
		at += (size_t)n;
		atomic_store(&io->read, at);
		written = atomic_load(&io->written);
		gap = written - at;
		if (written < at)
			io->behind++; /* a broken measurement, not a gap */
		else if (gap > io->max_gap)
			io->max_gap = gap;
		/* Slow for the first MiB: the writer must be held back. */
		if (at < (1u << 20) && ++turns)
			usleep(2000);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void relay_accept(struct sfix *f, int fd)
{
	f->fd[4] = fd; /* A */
	assert_int_equal(
	    ops->connect(f->l, f->fd[5], (struct sockaddr *)&f->sa, sizeof(f->sa), SID_B), 0);
}

static void relay_connected(struct sfix *f, uint32_t id, int res)
{
	assert_int_equal(id, SID_B);
	assert_int_equal(res, 0);
	assert_int_equal(ops->stream_read(f->l, f->fd[4], SID_A), 0);
}

static void relay_stream(struct sfix *f, uint32_t id, struct loop_dgram *d)
{
	assert_int_equal(id, SID_A);
	/* One chunk in flight per direction, this one. */
	assert_true(STAT_GET(ops->stats(f->l)->stream_chunks) <= 2);
	if (d->len == 0) {
		shutdown(f->fd[5], SHUT_WR); /* nothing is queued: the last send is back */
		ops->stop(f->l);
		return;
	}
	assert_int_equal(ops->stream_forward(f->l, f->fd[5], d, SID_B), 0);
}

static void relay_sent(struct sfix *f, uint32_t id, int res)
{
	assert_int_equal(id, SID_B);
	assert_true(res > 0);
	f->n[0] += (size_t)res;
	assert_int_equal(ops->stream_read(f->l, f->fd[4], SID_A), 0);
}

/* 4 MiB through a relay pair arrive byte-exact at a slow reader: the loop
 * holds at most one chunk of the connection at a time and the writer is
 * held back (what was written but not read stays within the socket
 * buffers and one chunk). */
static void test_stream_relay_4mib_to_a_slow_reader_under_back_pressure(void **state)
{
	struct sfix *f = s_setup(0, 20);
	struct relay_io io = {0};
	struct sockaddr_in front;
	pthread_t wr, rd;
	int srv;

	(void)state;
	f->fd[0] = tcp_listener(&front, true);	  /* the loop's listener */
	set_bufs(f->fd[0], SMALL_BUF, SMALL_BUF); /* A inherits them */
	srv = tcp_listener(&f->sa, false);
	set_bufs(srv, SMALL_BUF, SMALL_BUF); /* the server's end too */
	f->fd[5] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0); /* B */
	set_bufs(f->fd[5], SMALL_BUF, SMALL_BUF);
	f->accept_cb = relay_accept;
	f->connected_cb = relay_connected;
	f->stream_cb = relay_stream;
	f->sent_cb = relay_sent;
	assert_int_equal(ops->listen(f->l, f->fd[0], SID_LISTEN), 0);
	io.client = tcp_client(&front, SMALL_BUF, SMALL_BUF);
	io.server = srv; /* the reader accepts, then reads */
	assert_int_equal(pthread_create(&rd, NULL, relay_reader, &io), 0);
	assert_int_equal(pthread_create(&wr, NULL, relay_writer, &io), 0);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	pthread_join(wr, NULL);
	pthread_join(rd, NULL);
	close(io.client);
	close(srv);
	assert_int_equal(atomic_load(&io.read), RELAY_BYTES);
	assert_true(io.exact);
	assert_int_equal(f->n[0], RELAY_BYTES);
	/* Back-pressure: never more than the buffers and a chunk on the way
	 * (without it the loop would read the client dry into memory). */
	assert_int_equal(io.behind, 0);
	assert_true(io.max_gap < (1u << 20));
	assert_true(f->chunks_max <= 2);
	assert_true(STAT_GET(ops->stats(f->l)->stream_chunks_peak) <= 2);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_rx_bytes), RELAY_BYTES);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_tx_bytes), RELAY_BYTES);
	ops->del_socket(f->l, f->fd[4], SID_A);
	ops->del_socket(f->l, f->fd[5], SID_B);
	ops->del_socket(f->l, f->fd[0], SID_LISTEN);
	s_teardown(f);
}

/* The same relay with splice: A's bytes through a pipe to B. */
static int splice_pipe[2];

static void splice_connected(struct sfix *f, uint32_t id, int res)
{
	assert_int_equal(id, SID_B);
	assert_int_equal(res, 0);
	assert_int_equal(ops->stream_splice_in(f->l, f->fd[4], splice_pipe[1], 65536, SID_A), 0);
}

static void splice_stream(struct sfix *f, uint32_t id, struct loop_dgram *d)
{
	assert_int_equal(id, SID_A);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_chunks), 0);
	if (d->len == 0) {
		shutdown(f->fd[5], SHUT_WR);
		ops->stop(f->l);
		return;
	}
	assert_true(d->len <= 65536);
	/* d holds no chunk: it cannot be forwarded. */
	assert_int_equal(ops->stream_forward(f->l, f->fd[5], d, SID_B), -EINVAL);
	assert_int_equal(ops->stream_splice_out(f->l, f->fd[5], splice_pipe[0], d->len, SID_B), 0);
}

static void splice_sent(struct sfix *f, uint32_t id, int res)
{
	assert_int_equal(id, SID_B);
	assert_true(res > 0);
	f->n[0] += (size_t)res;
	assert_int_equal(ops->stream_splice_in(f->l, f->fd[4], splice_pipe[1], 65536, SID_A), 0);
}

/* 4 MiB spliced (socket, pipe, socket) arrive byte-exact at a slow
 * reader, one pipe's worth at a time, without a chunk of the pool, and the
 * writer is held back; the EOF comes after the last byte. A backend
 * without the splice ops skips. */
static void test_stream_splice_4mib_to_a_slow_reader_without_a_chunk(void **state)
{
	struct sfix *f;
	struct relay_io io = {0};
	struct sockaddr_in front;
	pthread_t wr, rd;
	int srv;

	(void)state;
	if (!ops->stream_splice_in || !ops->stream_splice_out)
		skip();
	f = s_setup(0, 20);
	assert_int_equal(pipe2(splice_pipe, O_NONBLOCK | O_CLOEXEC), 0);
	f->fd[0] = tcp_listener(&front, true);
	set_bufs(f->fd[0], SMALL_BUF, SMALL_BUF);
	srv = tcp_listener(&f->sa, false);
	set_bufs(srv, SMALL_BUF, SMALL_BUF);
	f->fd[5] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	set_bufs(f->fd[5], SMALL_BUF, SMALL_BUF);
	f->accept_cb = relay_accept;
	f->connected_cb = splice_connected;
	f->stream_cb = splice_stream;
	f->sent_cb = splice_sent;
	assert_int_equal(ops->listen(f->l, f->fd[0], SID_LISTEN), 0);
	io.client = tcp_client(&front, SMALL_BUF, SMALL_BUF);
	io.server = srv;
	assert_int_equal(pthread_create(&rd, NULL, relay_reader, &io), 0);
	assert_int_equal(pthread_create(&wr, NULL, relay_writer, &io), 0);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	pthread_join(wr, NULL);
	pthread_join(rd, NULL);
	close(io.client);
	close(srv);
	assert_int_equal(atomic_load(&io.read), RELAY_BYTES);
	assert_true(io.exact);
	assert_int_equal(f->n[0], RELAY_BYTES);
	assert_int_equal(io.behind, 0);
	assert_true(io.max_gap < (1u << 20));
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_chunks_peak), 0);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_spliced), RELAY_BYTES);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_tx_bytes), RELAY_BYTES);
	ops->del_socket(f->l, f->fd[4], SID_A);
	ops->del_socket(f->l, f->fd[5], SID_B);
	ops->del_socket(f->l, f->fd[0], SID_LISTEN);
	close(splice_pipe[0]);
	close(splice_pipe[1]);
	s_teardown(f);
}

#define NSENDS 8

static void fill_send(uint8_t *buf, unsigned k)
{
	for (size_t i = 0; i < LOOP_STREAM_CHUNK; i++)
		buf[i] = pattern((size_t)k * LOOP_STREAM_CHUNK + i);
}

struct slow_read {
	int fd;
	size_t got;
	bool exact;
};

static void *read_late(void *arg)
{
	struct slow_read *r = arg;
	uint8_t buf[4096];
	ssize_t n;

	usleep(100 * 1000);
	r->exact = true;
	while (r->got < NSENDS * LOOP_STREAM_CHUNK && (n = recv(r->fd, buf, sizeof(buf), 0)) > 0) {
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != pattern(r->got + (size_t)i))
				r->exact = false;
		r->got += (size_t)n;
	}
	return NULL;
}

static void stop_at_nsends(struct sfix *f, uint32_t id, int res)
{
	(void)id;
	(void)res;
	if (f->sent == NSENDS)
		ops->stop(f->l);
}

/* Sends queued on a socket with a small buffer and a late reader: each is
 * written in pieces, the tails go before the next send, all arrive whole
 * and in order, each with one on_sent of its full length. */
static void test_stream_sends_with_short_writes_arrive_whole_and_in_order(void **state)
{
	struct sfix *f = s_setup(0, 5);
	struct slow_read r = {0};
	/* The loop sends from these: each stays until its on_sent. */
	static uint8_t buf[NSENDS][LOOP_STREAM_CHUNK];
	pthread_t t;

	(void)state;
	tcp_pair(&f->fd[1], &f->fd[2], 4096, 4096);
	r.fd = f->fd[2];
	for (unsigned k = 0; k < NSENDS; k++) {
		fill_send(buf[k], k);
		assert_int_equal(ops->stream_send(f->l, f->fd[1], buf[k], sizeof(buf[k]), SID_A),
				 0);
	}
	assert_int_equal(ops->stream_send(f->l, f->fd[1], buf[0], (size_t)INT_MAX + 1, SID_A),
			 -EMSGSIZE);
	f->sent_cb = stop_at_nsends;
	assert_int_equal(pthread_create(&t, NULL, read_late, &r), 0);
	assert_int_equal(ops->run(f->l), 0);
	pthread_join(t, NULL);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->sent, NSENDS);
	for (unsigned k = 0; k < NSENDS; k++)
		assert_int_equal(f->sent_res[k], LOOP_STREAM_CHUNK);
	assert_int_equal(r.got, NSENDS * LOOP_STREAM_CHUNK);
	assert_true(r.exact);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_tx_bytes), NSENDS * LOOP_STREAM_CHUNK);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_chunks), 0);
	ops->del_socket(f->l, f->fd[1], SID_A);
	s_teardown(f);
}

static void del_now(struct sfix *f)
{
	ops->del_socket(f->l, f->fd[1], SID_A);
	close(f->fd[1]);
	f->fd[1] = -1;
	f->deleted = true;
	f->n[0] = f->sent; /* on_sent before the del */
	assert_int_equal(ops->timer_set(f->l, &f->tick, loop_now() + 10 * NS_PER_MS), 0);
}

static void stop_late(struct sfix *f)
{
	if (++f->n[1] == 20)
		ops->stop(f->l);
}

/* del_socket while sends wait and a read is armed: every send still gets
 * exactly one on_sent (its length if it got out whole, else -ECANCELED),
 * nothing else comes, and every chunk is back. */
static void test_stream_del_socket_with_sends_pending_answers_each_once(void **state)
{
	struct sfix *f = s_setup(0, 5);
	static uint8_t buf[NSENDS][LOOP_STREAM_CHUNK];
	bool cancelled = false;

	(void)state;
	tcp_pair(&f->fd[1], &f->fd[2], 4096, 4096);
	for (unsigned k = 0; k < NSENDS; k++) {
		fill_send(buf[k], k);
		assert_int_equal(ops->stream_send(f->l, f->fd[1], buf[k], sizeof(buf[k]), SID_A),
				 0);
	}
	assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), 0);
	f->del_cb = del_now;
	f->tick_cb = stop_late;
	assert_int_equal(ops->timer_set(f->l, &f->del, loop_now() + 100 * NS_PER_MS), 0);
	assert_int_equal(ops->run(f->l), 0);
	/* The far end speaks after the close: nobody may hear it. */
	assert_int_equal(f->timeouts, 0);
	assert_true(f->deleted);
	assert_int_equal(f->sent, NSENDS);
	assert_true(f->n[0] < NSENDS); /* some were still waiting at the del */
	for (unsigned k = 0; k < NSENDS; k++) {
		if (f->sent_res[k] == -ECANCELED)
			cancelled = true;
		else
			assert_false(cancelled); /* in order: none done after a cancel */
		assert_true(f->sent_res[k] == LOOP_STREAM_CHUNK || f->sent_res[k] == -ECANCELED);
	}
	assert_true(f->sent_cancelled > 0);
	assert_int_equal(f->after_del, 0);
	assert_int_equal(f->nstreams, 0);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_chunks), 0);
	s_teardown(f);
}

#define NMANY	 200
#define MANY_LEN 2000
#define BIG_LEN	 (2 * LOOP_STREAM_CHUNK + 100)

static void stop_at_nmany(struct sfix *f, uint32_t id, int res)
{
	(void)id;
	(void)res;
	if (f->sent == NMANY + 1)
		ops->stop(f->l);
}

/* 200 connections each with a send of its own bytes pending at once, and
 * one send larger than a chunk: every send is taken (the loop once copied
 * them into 64 chunks and refused the rest with -ENOBUFS), each answers
 * with its length, the bytes arrive, and no chunk of the pool is used. */
static void test_stream_many_sends_pending_at_once_are_all_taken(void **state)
{
	struct sfix *f = s_setup(0, 5);
	static uint8_t buf[NMANY][MANY_LEN], big[BIG_LEN], got[BIG_LEN];
	int sv[NMANY][2];
	unsigned ok = 0;

	(void)state;
	for (unsigned k = 0; k < NMANY; k++) {
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[k]), 0);
		set_nonblock(sv[k][0]);
		memset(buf[k], (int)(k & 0xff), MANY_LEN);
		buf[k][0] = (uint8_t)(k >> 8);
	}
	for (size_t i = 0; i < BIG_LEN; i++)
		big[i] = pattern(i);
	for (unsigned k = 0; k < NMANY; k++)
		assert_int_equal(ops->stream_send(f->l, sv[k][0], buf[k], MANY_LEN, SID_A), 0);
	assert_int_equal(ops->stream_send(f->l, sv[0][0], big, BIG_LEN, SID_B), 0);
	f->sent_cb = stop_at_nmany;
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->sent, NMANY + 1);
	assert_int_equal(f->sent_ok, NMANY + 1);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_chunks_peak), 0);
	assert_int_equal(STAT_GET(ops->stats(f->l)->send_nobufs), 0);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_tx_bytes),
			 (uint64_t)NMANY * MANY_LEN + BIG_LEN);
	for (unsigned k = 0; k < NMANY; k++) {
		uint8_t b[MANY_LEN];

		if (recv(sv[k][1], b, sizeof(b), MSG_WAITALL) == MANY_LEN &&
		    memcmp(b, buf[k], MANY_LEN) == 0)
			ok++;
	}
	assert_int_equal(ok, NMANY);
	assert_int_equal(recv(sv[0][1], got, BIG_LEN, MSG_WAITALL), BIG_LEN);
	assert_memory_equal(got, big, BIG_LEN);
	for (unsigned k = 0; k < NMANY; k++) {
		ops->del_socket(f->l, sv[k][0], SID_A);
		close(sv[k][0]);
		close(sv[k][1]);
	}
	s_teardown(f);
}

/* P's chunk is forwarded back to P, whose far end does not read; Q's read
 * is asked for then. */
static void hold_the_chunk(struct sfix *f, uint32_t id, struct loop_dgram *d)
{
	if (id == SID_A) {
		assert_true(d->len > 8192);
		assert_int_equal(ops->stream_forward(f->l, f->fd[1], d, SID_A), 0);
		assert_int_equal(ops->stream_read(f->l, f->fd[3], SID_B), 0);
		return;
	}
	assert_int_equal(id, SID_B);
	assert_int_equal(d->len, 4);
	assert_memory_equal(d->data, "late", 4);
	/* Only after the far end of P took the bytes did the chunk come back. */
	assert_true(f->n[0] > 0);
	ops->stop(f->l);
}

static void drain_p_when_q_stalls(struct sfix *f)
{
	uint8_t buf[4096];
	ssize_t n;

	if (STAT_GET(ops->stats(f->l)->stream_stalls) == 0)
		return;
	while ((n = recv(f->fd[2], buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		f->n[0] += (size_t)n;
}

#define ASKED_READS 5

static void stop_now(struct sfix *f)
{
	ops->stop(f->l);
}

/* Reads asked again from on_stream while bytes wait (epoll tries those at
 * once, before its next wait): the bytes in order, and a read is asked
 * again the moment its chunk came; after the last one nothing more. */
static void read_again_while_asked(struct sfix *f, uint32_t id, struct loop_dgram *d)
{
	assert_int_equal(id, SID_A);
	assert_true(d->len > 0);
	for (size_t i = 0; i < d->len; i++)
		if (d->data[i] != pattern(f->n[0] + i))
			fail_msg("byte %zu out of order", f->n[0] + i);
	f->n[0] += d->len;
	if (d->len == LOOP_STREAM_CHUNK)
		f->n[1]++;
	if (f->nstreams < ASKED_READS) {
		assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), 0);
		assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), -EALREADY);
	} else {
		f->del_cb = stop_now; /* a while, for a read nobody asked for */
		assert_int_equal(ops->timer_set(f->l, &f->del, loop_now() + 100 * NS_PER_MS), 0);
	}
}

/* A socket with many chunks' worth waiting, each read asked from the
 * last one's on_stream: one on_stream per stream_read, exactly, bytes in
 * order, and the rest stays in the socket. */
static void test_stream_reads_asked_while_bytes_wait_answer_once_each(void **state)
{
	struct sfix *f = s_setup(0, 5);
	static uint8_t buf[16 * LOOP_STREAM_CHUNK];
	size_t queued = 0;
	ssize_t n;

	(void)state;
	tcp_pair(&f->fd[1], &f->fd[2], 0, 0);
	set_bufs(f->fd[1], 0, 4 << 20);
	set_bufs(f->fd[2], 4 << 20, 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = pattern(i);
	while (queued < sizeof(buf) &&
	       (n = send(f->fd[2], buf + queued, sizeof(buf) - queued, MSG_DONTWAIT)) > 0)
		queued += (size_t)n;
	assert_true(queued >= (ASKED_READS + 2) * LOOP_STREAM_CHUNK);
	usleep(10 * 1000); /* in the loop's socket */
	f->stream_cb = read_again_while_asked;
	assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), 0);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->nstreams, ASKED_READS);
	assert_true(f->n[1] >= 1); /* full chunks, more behind them */
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_rx_bytes), f->n[0]);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_chunks), 0);
	/* What was not asked for is still in the socket, in order. */
	n = recv(f->fd[1], buf, LOOP_STREAM_CHUNK, MSG_DONTWAIT);
	assert_true(n > 0);
	for (ssize_t i = 0; i < n; i++)
		assert_int_equal(buf[i], pattern(f->n[0] + (size_t)i));
	ops->del_socket(f->l, f->fd[1], SID_A);
	s_teardown(f);
}

/* A pool of one chunk: while it waits in a send, a read on another
 * connection stalls (counted) and resumes once the send gives it back. */
static void test_stream_reads_wait_for_an_empty_pool_and_resume(void **state)
{
	struct sfix *f = s_setup(1, 5);
	uint8_t buf[LOOP_STREAM_CHUNK];

	(void)state;
	tcp_pair(&f->fd[1], &f->fd[2], 4096, 4096); /* P */
	tcp_pair(&f->fd[3], &f->fd[4], 0, 0);	    /* Q */
	fill_send(buf, 0);
	assert_int_equal(send(f->fd[2], buf, sizeof(buf), 0), sizeof(buf));
	assert_int_equal(send(f->fd[4], "late", 4, 0), 4);
	usleep(10 * 1000); /* both in the loop's sockets */
	f->stream_cb = hold_the_chunk;
	f->tick_cb = drain_p_when_q_stalls;
	assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), 0);
	assert_int_equal(ops->timer_set(f->l, &f->tick, loop_now() + 10 * NS_PER_MS), 0);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_true(STAT_GET(ops->stats(f->l)->stream_stalls) >= 1);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_chunks_peak), 1);
	assert_int_equal(f->nstreams, 2);
	ops->del_socket(f->l, f->fd[1], SID_A);
	ops->del_socket(f->l, f->fd[3], SID_B);
	assert_true(f->sent <= 1);
	s_teardown(f);
}

/* P's chunks go to a sink whose far end never reads (they stay queued
 * there), each bulk read asked again; Q's plain read is asked once only
 * the reserve is free. */
static void pin_the_pool(struct sfix *f, uint32_t id, struct loop_dgram *d)
{
	if (id == SID_A) {
		assert_true(d->len > 0);
		assert_int_equal(ops->stream_forward(f->l, f->fd[5], d, SID_C), 0);
		assert_int_equal(ops->stream_read_bulk(f->l, f->fd[1], SID_A), 0);
		return;
	}
	assert_int_equal(id, SID_B);
	assert_int_equal(d->len, 4);
	assert_memory_equal(d->data, "late", 4);
	f->n[0]++;
	ops->stop(f->l);
}

static void ask_q_at_the_reserve(struct sfix *f)
{
	if (f->n[1] || STAT_GET(ops->stats(f->l)->stream_reserve_waits) == 0)
		return;
	f->n[1] = 1;
	assert_int_equal(ops->stream_read(f->l, f->fd[3], SID_B), 0);
}

/* A pool of 8 chunks keeps 1 (LOOP_STREAM_RESERVE): bulk reads whose
 * chunks are pinned by a sink that does not read take 7, then wait
 * (counted); a plain read still gets the eighth. */
static void test_stream_bulk_reads_leave_the_reserve_to_plain_reads(void **state)
{
	struct sfix *f = s_setup(8, 5);
	static uint8_t buf[16 * LOOP_STREAM_CHUNK];
	size_t queued = 0;
	ssize_t n;

	(void)state;
	assert_int_equal(LOOP_STREAM_RESERVE(8), 1);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_pool), 8);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_reserve), 1);
	tcp_pair(&f->fd[1], &f->fd[2], 0, 0); /* P */
	set_bufs(f->fd[1], 0, 4 << 20);
	set_bufs(f->fd[2], 4 << 20, 0);
	tcp_pair(&f->fd[3], &f->fd[4], 0, 0);	    /* Q */
	tcp_pair(&f->fd[5], &f->fd[6], 4096, 4096); /* the sink */
	memset(buf, 'p', sizeof(buf));
	while (queued < sizeof(buf) &&
	       (n = send(f->fd[2], buf + queued, sizeof(buf) - queued, MSG_DONTWAIT)) > 0)
		queued += (size_t)n;
	assert_true(queued >= 9 * LOOP_STREAM_CHUNK);
	assert_int_equal(send(f->fd[4], "late", 4, 0), 4);
	usleep(10 * 1000); /* in the loop's sockets */
	f->stream_cb = pin_the_pool;
	f->tick_cb = ask_q_at_the_reserve;
	assert_int_equal(ops->stream_read_bulk(f->l, f->fd[1], SID_A), 0);
	assert_int_equal(ops->timer_set(f->l, &f->tick, loop_now() + 10 * NS_PER_MS), 0);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->n[0], 1); /* Q's bytes came */
	assert_true(STAT_GET(ops->stats(f->l)->stream_reserve_waits) >= 1);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_chunks_peak), 8);
	ops->del_socket(f->l, f->fd[1], SID_A);
	ops->del_socket(f->l, f->fd[3], SID_B);
	ops->del_socket(f->l, f->fd[5], SID_C);
	s_teardown(f);
}

/* Reads asked from each on_stream until EOF; f->n[0] counts the bytes,
 * which must follow pattern(). */
static void read_to_eof(struct sfix *f, uint32_t id, struct loop_dgram *d)
{
	assert_int_equal(id, SID_A);
	if (d->len == 0) {
		ops->stop(f->l);
		return;
	}
	for (size_t i = 0; i < d->len; i++)
		if (d->data[i] != pattern(f->n[0] + i))
			fail_msg("byte %zu out of order", f->n[0] + i);
	f->n[0] += d->len;
	assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), 0);
}

#define FIN_BYTES (2 * LOOP_STREAM_CHUNK + 1000)

/* The peer's FIN (EPOLLRDHUP) came with more than a chunk still queued:
 * every byte in order, then one EOF. */
static void test_stream_eof_after_the_peers_fin_with_chunks_queued(void **state)
{
	struct sfix *f = s_setup(0, 5);
	static uint8_t buf[FIN_BYTES];

	(void)state;
	tcp_pair(&f->fd[1], &f->fd[2], 0, 0);
	set_bufs(f->fd[1], 0, 1 << 20);
	set_bufs(f->fd[2], 1 << 20, 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = pattern(i);
	assert_int_equal(send(f->fd[2], buf, sizeof(buf), 0), sizeof(buf));
	assert_int_equal(shutdown(f->fd[2], SHUT_WR), 0);
	usleep(10 * 1000); /* all of it and the FIN in the loop's socket */
	f->stream_cb = read_to_eof;
	assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), 0);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->n[0], FIN_BYTES);
	assert_int_equal(f->eofs, 1);
	assert_int_equal(STAT_GET(ops->stats(f->l)->stream_chunks), 0);
	ops->del_socket(f->l, f->fd[1], SID_A);
	s_teardown(f);
}

/* Urgent data before the peer's FIN: a read stops short at its mark, with
 * bytes still behind it; those come before the EOF (epoll knew the socket
 * empty after a short read once the FIN was in: not here). */
static void test_stream_urgent_data_before_the_fin_does_not_cut_the_stream(void **state)
{
	struct sfix *f = s_setup(0, 5);
	uint8_t buf[3000];

	(void)state;
	tcp_pair(&f->fd[1], &f->fd[2], 0, 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = pattern(i);
	assert_int_equal(send(f->fd[2], buf, 1000, 0), 1000);
	assert_int_equal(send(f->fd[2], "!", 1, MSG_OOB), 1); /* not inline: skipped */
	assert_int_equal(send(f->fd[2], buf + 1000, 2000, 0), 2000);
	assert_int_equal(shutdown(f->fd[2], SHUT_WR), 0);
	usleep(10 * 1000);
	f->stream_cb = read_to_eof;
	assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), 0);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->n[0], sizeof(buf));
	assert_int_equal(f->eofs, 1);
	ops->del_socket(f->l, f->fd[1], SID_A);
	s_teardown(f);
}

static void read_once(struct sfix *f, uint32_t id, struct loop_dgram *d)
{
	assert_int_equal(id, SID_A);
	assert_true(f->nstreams == 1);
	assert_int_equal(d->len, 10);
	/* Not asked again: the owner holds back (back-pressure); then bytes
	 * and the FIN come. */
	assert_int_equal(send(f->fd[2], "more bytes", 10, 0), 10);
	assert_int_equal(shutdown(f->fd[2], SHUT_WR), 0);
	f->del_cb = stop_now;
	assert_int_equal(ops->timer_set(f->l, &f->del, loop_now() + 300 * NS_PER_MS), 0);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* A read no longer asked for: bytes and the FIN arriving then are not
 * read (nothing comes), stay in the socket, and do not keep the loop
 * awake (an EPOLLIN left registered must go when it fires). */
static void test_stream_bytes_nobody_asked_for_neither_read_nor_spin(void **state)
{
	struct sfix *f = s_setup(0, 5);
	char buf[32];
	uint64_t cpu;

	(void)state;
	tcp_pair(&f->fd[1], &f->fd[2], 0, 0);
	assert_int_equal(send(f->fd[2], "first ten!", 10, 0), 10);
	usleep(10 * 1000);
	f->stream_cb = read_once;
	assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), 0);
	cpu = thread_cpu_ns();
	assert_int_equal(ops->run(f->l), 0);
	cpu = thread_cpu_ns() - cpu;
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->nstreams, 1);
	/* 300 ms asleep: a spinning loop would burn most of it. */
	if (cpu > 100 * NS_PER_MS)
		fail_msg("the loop used %llu ms of CPU while nothing was asked",
			 (unsigned long long)(cpu / NS_PER_MS));
	assert_int_equal(recv(f->fd[1], buf, sizeof(buf), 0), 10);
	assert_memory_equal(buf, "more bytes", 10);
	assert_int_equal(recv(f->fd[1], buf, sizeof(buf), 0), 0);
	ops->del_socket(f->l, f->fd[1], SID_A);
	s_teardown(f);
}

/* Two connections readable in one turn: the first one's on_stream
 * deletes and closes the other, opens a socket (which takes its fd number
 * and, in the loop, its slot) and asks a read on it. The event the
 * closed one left in the turn reaches nobody. */
static void del_the_other_and_reuse(struct sfix *f, uint32_t id, struct loop_dgram *d)
{
	int other = id == SID_A ? 3 : 1;
	int far;

	assert_true(d->len > 0);
	if (f->deleted) {
		f->after_del++;
		return;
	}
	f->n[0] = id;
	ops->del_socket(f->l, f->fd[other], id == SID_A ? SID_B : SID_A);
	close(f->fd[other]);
	f->deleted = true;
	tcp_pair(&f->fd[other], &far, 0, 0);
	f->fd[5] = far;
	assert_int_equal(ops->stream_read(f->l, f->fd[other], SID_C), 0);
	f->del_cb = stop_now;
	assert_int_equal(ops->timer_set(f->l, &f->del, loop_now() + 100 * NS_PER_MS), 0);
}

static void test_stream_an_event_of_a_connection_closed_in_its_turn_is_dropped(void **state)
{
	struct sfix *f = s_setup(0, 5);

	(void)state;
	tcp_pair(&f->fd[1], &f->fd[2], 0, 0); /* P */
	tcp_pair(&f->fd[3], &f->fd[4], 0, 0); /* Q */
	assert_int_equal(send(f->fd[2], "to P", 4, 0), 4);
	assert_int_equal(send(f->fd[4], "to Q", 4, 0), 4);
	usleep(10 * 1000);
	f->stream_cb = del_the_other_and_reuse;
	assert_int_equal(ops->stream_read(f->l, f->fd[1], SID_A), 0);
	assert_int_equal(ops->stream_read(f->l, f->fd[3], SID_B), 0);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_true(f->deleted);
	/* One on_stream: the survivor's; none for the closed one, none for the
	 * new socket (nothing was sent on it). */
	assert_int_equal(f->nstreams, 1);
	assert_int_equal(f->after_del, 0);
	assert_int_equal(f->recv_errors, 0);
	ops->del_socket(f->l, f->fd[1], SID_A);
	ops->del_socket(f->l, f->fd[3], SID_B);
	s_teardown(f);
}

/* A turn's worth of stream reads, at most (EP_TURN_READS, UR_TURN_READS). */
#define TURN_READS 8
#define BUSY	   12

static void busy_dgram(struct sfix *f, uint32_t id, struct loop_dgram *d)
{
	assert_int_equal(id, SID_C);
	assert_int_equal(d->len, 4);
	f->n[0] = f->nstreams; /* the streams handed up before it */
	f->n[1] = 1;
	if (f->nstreams == BUSY)
		ops->stop(f->l);
}

static void busy_stream(struct sfix *f, uint32_t id, struct loop_dgram *d)
{
	(void)id;
	assert_int_equal(d->len, 1000);
	if (f->nstreams == BUSY && f->n[1])
		ops->stop(f->l);
}

/* Twelve streams with bytes waiting and a datagram behind them: the
 * datagram is handed up before a turn's worth of stream reads is spent
 * (epoll drains its datagram sockets before stream events; io_uring's
 * stream reads' completions wait behind the turn's datagrams, attack
 * round 15: bulk uploads lagged the game's players). */
static void test_stream_reads_leave_a_datagram_ahead_of_a_turns_worth(void **state)
{
	struct sfix *f = s_setup(0, 3);
	int le[BUSY], fe[BUSY], u[2];
	char buf[1000] = {0};

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, u), 0);
	set_nonblock(u[0]);
	f->dgram_cb = busy_dgram;
	f->stream_cb = busy_stream;
	for (unsigned i = 0; i < BUSY; i++) {
		tcp_pair(&le[i], &fe[i], 0, 0);
		assert_int_equal(send(fe[i], buf, sizeof(buf), 0), sizeof(buf));
		assert_int_equal(ops->stream_read(f->l, le[i], SID_A), 0);
	}
	/* Asked for after the reads: without a budget, its completion comes
	 * behind theirs. */
	assert_int_equal(send(u[1], "ping", 4, 0), 4);
	assert_int_equal(ops->add_socket(f->l, u[0], SID_C), 0);
	assert_int_equal(ops->run(f->l), 0);
	assert_int_equal(f->timeouts, 0);
	assert_int_equal(f->n[1], 1);
	assert_int_equal(f->nstreams, BUSY);
	assert_in_range(f->n[0], 0, TURN_READS);
	ops->del_socket(f->l, u[0], SID_C);
	for (unsigned i = 0; i < BUSY; i++) {
		ops->del_socket(f->l, le[i], SID_A);
		close(le[i]);
		close(fe[i]);
	}
	close(u[0]);
	close(u[1]);
	s_teardown(f);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
		test_loop_a_copy_leaves_after_the_forward_queued_before_it, setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_loop_a_header_prepended_in_the_headroom_is_forwarded, setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_loop_timers_fire_in_order_and_a_cancelled_one_never, setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_loop_sends_without_a_buffer_are_refused_and_counted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_loop_flush_sends_what_was_queued_after_run, setup,
					    teardown),
	    cmocka_unit_test(test_stream_listen_accepts_several_connections),
	    cmocka_unit_test(test_stream_an_accept_out_of_fds_pauses_then_resumes),
	    cmocka_unit_test(test_stream_connect_succeeds_and_is_refused),
	    cmocka_unit_test(test_stream_echo_and_eof_after_the_peers_shutdown),
	    cmocka_unit_test(test_stream_relay_4mib_to_a_slow_reader_under_back_pressure),
	    cmocka_unit_test(test_stream_splice_4mib_to_a_slow_reader_without_a_chunk),
	    cmocka_unit_test(test_stream_sends_with_short_writes_arrive_whole_and_in_order),
	    cmocka_unit_test(test_stream_del_socket_with_sends_pending_answers_each_once),
	    cmocka_unit_test(test_stream_many_sends_pending_at_once_are_all_taken),
	    cmocka_unit_test(test_stream_reads_wait_for_an_empty_pool_and_resume),
	    cmocka_unit_test(test_stream_bulk_reads_leave_the_reserve_to_plain_reads),
	    cmocka_unit_test(test_stream_reads_asked_while_bytes_wait_answer_once_each),
	    cmocka_unit_test(test_stream_eof_after_the_peers_fin_with_chunks_queued),
	    cmocka_unit_test(test_stream_urgent_data_before_the_fin_does_not_cut_the_stream),
	    cmocka_unit_test(test_stream_bytes_nobody_asked_for_neither_read_nor_spin),
	    cmocka_unit_test(test_stream_an_event_of_a_connection_closed_in_its_turn_is_dropped),
	    cmocka_unit_test(test_stream_reads_leave_a_datagram_ahead_of_a_turns_worth),
	};
	struct loop *l;
	const struct loop_handler h = {0};
	const struct loop_conf c = {.max_sockets = 4};
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
