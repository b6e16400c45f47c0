/* SPDX-License-Identifier: ISC */
/* Unit tests for rung 3 on a worker (tun/tun_r3.c) over a fake loop
 * (tests/unit/fake_stream_loop.h, with datagram sockets and sends added
 * here): the test plays the loop, an OpenSSL client in memory plays the
 * gateway. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"

#include "fake_stream_loop.h"
#include "r3conn.h"
#include "stats.h"
#include "tls_peer.h"
#include "tun_cert.h"
#include "tun_r3.h"

#define HOST "tunnel.r1.example.net"

/* The worker's counters (struct tun_r3_stats). */
#define RESULT(r)  STAT_GET(f->w.st.result[r])
#define ENDED(e)   STAT_GET(f->w.st.ended[e])
#define DROPPED(d) STAT_GET(f->w.st.dropped[d])
#define DGRAMS(k)  STAT_GET(f->w.st.dgrams[k])

/* The datagram side the stream fake lacks: sockets added, sends. */
static struct fake_call dg_adds[FAKE_MAX], dg_sends[FAKE_MAX];
static unsigned ndg_adds, ndg_sends;

static int fake_add_socket(struct loop *l, int fd, uint32_t id)
{
	(void)l;
	fake_rec(dg_adds, &ndg_adds, fd, id, NULL, 0);
	return 0;
}

/* True: the loop has no copy buffer left (io_uring past UR_COPY sends in
 * a turn), every send refused. */
static bool fake_nobufs;

static int fake_send(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		     const void *buf, size_t len, uint32_t id)
{
	(void)l, (void)dst, (void)dstlen;
	if (fake_nobufs)
		return -ENOBUFS;
	fake_rec(dg_sends, &ndg_sends, fd, id, buf, len);
	return 0;
}

static struct loop_ops ops;

struct fx {
	struct test_cert tc;
	struct tun_cert cert;
	struct tun_tokens tokens;
	struct tun_r3 w;
	struct loop loop;
	struct endpoint_table ep;
	struct test_client cl, cl2; /* a second gateway for the per-token limit */
	struct test_client *cur;    /* the one connect_tls, upgrade and to_worker use */
	int cur_fd, fd2;	    /* the worker's end of cur's, of cl2's connection */
	unsigned sends_seen;
	int peers[16];
	unsigned npeers;
	uint64_t now;
};

static char *tok_ab[] = {"tok-a", "tok-b"};
static char *tok_a[] = {"tok-a"};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct tun_r3_limits lim;

	assert_non_null(f);
	ops = fake_stream_ops;
	ops.add_socket = fake_add_socket;
	ops.send = fake_send;
	ndg_adds = ndg_sends = 0;
	fake_nobufs = false;
	test_cert_make(&f->tc, HOST);
	assert_int_equal(tun_cert_init(&f->cert), 0);
	tls_server_set_ctx(&f->cert.tls, test_server_ctx(&f->tc));
	snprintf(f->cert.name, sizeof(f->cert.name), "%s", HOST);
	f->cert.not_after = (int64_t)time(NULL) + 3600;
	assert_int_equal(tun_tokens_init(&f->tokens), 0);
	assert_int_equal(tun_tokens_set(&f->tokens, tok_ab, 2), 1);
	tun_r3_limits_default(&lim);
	lim.conns = 16;
	assert_int_equal(tun_r3_open(&f->w, &f->cert, &f->tokens, 27999, &lim), 0);
	endpoint_table_init(&f->ep);
	assert_int_equal(tun_r3_attach(&f->w, &ops, &f->loop, &f->ep), 0);
	test_client_new(&f->cl, 0);
	test_client_new(&f->cl2, 0);
	f->cur = &f->cl;
	f->cur_fd = f->fd2 = -1;
	f->now = 1000 * NS_PER_SEC;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	tun_r3_shutdown(&f->w);
	tun_r3_close(&f->w);
	tun_tokens_free(&f->tokens);
	tun_cert_free(&f->cert);
	test_client_free(&f->cl);
	test_client_free(&f->cl2);
	test_cert_free(&f->tc);
	for (unsigned i = 0; i < f->npeers; i++)
		close(f->peers[i]);
	free(f);
	return 0;
}

/* A connected stream socket for the worker (the other end kept). */
static int stream_fd(struct fx *f)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	f->peers[f->npeers++] = sv[1];
	return sv[0];
}

static union etr_sockaddr src(const char *ip)
{
	union etr_sockaddr a;

	memset(&a, 0, sizeof(a));
	a.in.sin_family = AF_INET;
	a.in.sin_port = htons(30000);
	assert_int_equal(inet_pton(AF_INET, ip, &a.in.sin_addr), 1);
	return a;
}

/* The loop's part: every send the worker queued reaches its client (by
 * the stream it went to) and completes (a completion may queue the next). */
static void deliver(struct fx *f)
{
	for (int round = 0; round < 100 && f->sends_seen < f->loop.nsends; round++) {
		struct fake_call *c = &f->loop.sends[f->sends_seen++ % FAKE_MAX];
		struct test_client *cl = c->fd == f->fd2 ? &f->cl2 : &f->cl;

		assert_int_equal(BIO_write(cl->rbio, c->ptr, (int)c->len), (int)c->len);
		endpoint_sent(&f->ep, c->id, (int)c->len);
	}
}

/* What the current client wrote reaches the worker as the answer to the
 * last read asked on its stream. */
static void to_worker(struct fx *f)
{
	uint8_t buf[16384];
	int n = BIO_read(f->cur->wbio, buf, sizeof(buf));
	struct loop_dgram d = {.data = buf, .now = f->now};
	unsigned k = f->loop.nreads;

	assert_true(n > 0);
	/* Bounded: the reads the fake keeps. */
	while (k > 0 && k + FAKE_MAX > f->loop.nreads &&
	       f->loop.reads[(k - 1) % FAKE_MAX].fd != f->cur_fd)
		k--;
	assert_true(k > 0 && k + FAKE_MAX > f->loop.nreads);
	d.len = (size_t)n;
	assert_true(endpoint_stream(&f->ep, f->loop.reads[(k - 1) % FAKE_MAX].id, &d));
	deliver(f);
}

/* Hand the current client's connection over with its ClientHello, and
 * finish TLS. */
static void connect_tls(struct fx *f)
{
	uint8_t hello[4096];
	union etr_sockaddr a = src("192.0.2.1");
	int n;

	assert_int_equal(SSL_do_handshake(f->cur->ssl), -1);
	n = BIO_read(f->cur->wbio, hello, sizeof(hello));
	assert_true(n > 0);
	f->cur_fd = stream_fd(f);
	if (f->cur == &f->cl2)
		f->fd2 = f->cur_fd;
	assert_int_equal(tun_r3_take(&f->w, f->cur_fd, &a, hello, (size_t)n, f->now), 0);
	deliver(f);
	assert_int_equal(SSL_do_handshake(f->cur->ssl), 1);
	to_worker(f);
}

static void upgrade(struct fx *f, const char *path, const char *token)
{
	char req[1024];
	int n = snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: " HOST "\r\nUpgrade: websocket\r\n"
			 "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
			 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
			 "Authorization: Bearer %s\r\n\r\n",
			 path, token);

	assert_int_equal(SSL_write(f->cur->ssl, req, n), n);
	to_worker(f);
}

/* What the current client reads now (bounded). */
static size_t client_read(struct fx *f, uint8_t *buf, size_t cap)
{
	size_t got = 0;

	for (int i = 0; i < 100 && got < cap; i++) {
		int r = SSL_read(f->cur->ssl, buf + got, (int)(cap - got));

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* A masked binary frame from the client. */
static void client_datagram(struct fx *f, const char *p)
{
	uint8_t fr[256];
	size_t n = strlen(p);

	fr[0] = 0x82;
	fr[1] = 0x80 | (uint8_t)n;
	memset(fr + 2, 0x5a, 4);
	for (size_t i = 0; i < n; i++)
		fr[6 + i] = (uint8_t)p[i] ^ 0x5a;
	assert_int_equal(SSL_write(f->cur->ssl, fr, (int)(6 + n)), (int)(6 + n));
	to_worker(f);
}

/* The worker again, within lim (the old one shut and closed). */
static void reopen(struct fx *f, const struct tun_r3_limits *lim)
{
	tun_r3_shutdown(&f->w);
	tun_r3_close(&f->w);
	assert_int_equal(tun_r3_open(&f->w, &f->cert, &f->tokens, 27999, lim), 0);
	assert_int_equal(tun_r3_attach(&f->w, &ops, &f->loop, &f->ep), 0);
}

/* A masked binary frame of n bytes (126..65535: the 16-bit length). */
static void client_big_datagram(struct fx *f, size_t n)
{
	static uint8_t fr[4 + 4 + WS_MSG_MAX];

	assert_true(n >= 126 && n <= WS_MSG_MAX);
	fr[0] = 0x82;
	fr[1] = 0x80 | 126;
	fr[2] = (uint8_t)(n >> 8);
	fr[3] = (uint8_t)n;
	memset(fr + 4, 0, 4 + n); /* mask 0: the payload as is */
	assert_int_equal(SSL_write(f->cur->ssl, fr, (int)(8 + n)), (int)(8 + n));
	/* Bounded: a record at a time, the worker reads as the loop would. */
	for (int i = 0; i < 16 && BIO_ctrl_pending(f->cur->wbio) > 0 && f->w.live; i++)
		to_worker(f);
}

/* The close frame after what the client read at buf (got bytes): its
 * code, or -1 for none. The upgrade's answer, if there, comes first. */
static int close_code(const uint8_t *buf, size_t got)
{
	const uint8_t *p = buf, *end = buf + got;
	const char *hdr = memmem(buf, got, "\r\n\r\n", 4);

	if (hdr)
		p = (const uint8_t *)hdr + 4;
	if (end - p < 4 || p[0] != 0x88)
		return -1;
	return p[2] << 8 | p[3];
}

/* The id of the last read asked on the worker's end fd. */
static uint32_t read_id(struct fx *f, int fd)
{
	for (unsigned k = f->loop.nreads; k > 0 && k + FAKE_MAX > f->loop.nreads; k--)
		if (f->loop.reads[(k - 1) % FAKE_MAX].fd == fd)
			return f->loop.reads[(k - 1) % FAKE_MAX].id;
	fail_msg("no read on fd %d", fd);
	return 0;
}

static void test_tun_r3_carries_datagrams_both_ways_until_its_token_leaves(void **state)
{
	struct fx *f = *state;
	uint8_t buf[2048];
	size_t got;
	struct loop_dgram d = {.data = (uint8_t *)"from-wg", .len = 7};
	union etr_sockaddr a;

	connect_tls(f);
	upgrade(f, "/t", "tok-b");
	got = client_read(f, buf, sizeof(buf) - 1);
	buf[got] = '\0';
	assert_non_null(strstr((char *)buf, "HTTP/1.1 101"));
	assert_int_equal(f->w.live, 1);
	assert_int_equal(ndg_adds, 1); /* its socket to WireGuard, after the token */

	client_datagram(f, "wg-datagram-1");
	assert_int_equal(ndg_sends, 1);
	assert_int_equal(dg_sends[0].fd, dg_adds[0].fd);
	assert_int_equal(dg_sends[0].len, 13);
	assert_memory_equal(dg_sends[0].data, "wg-datagram-1", 13);
	assert_int_equal(DGRAMS(0), 1);
	assert_int_equal(STAT_GET(f->w.st.bytes[0]), 13);

	/* WireGuard's answer, as one binary message. */
	assert_true(endpoint_dgram(&f->ep, dg_adds[0].id, &d));
	deliver(f);
	got = client_read(f, buf, sizeof(buf));
	assert_int_equal(got, 9);
	assert_int_equal(buf[0], 0x82);
	assert_int_equal(buf[1], 7);
	assert_memory_equal(buf + 2, "from-wg", 7);

	/* The set without tok-b: closed with 1008, then the sockets. */
	assert_int_equal(tun_tokens_set(&f->tokens, tok_a, 1), 1);
	tun_r3_tokens(&f->w);
	deliver(f);
	got = client_read(f, buf, sizeof(buf));
	assert_true(got >= 4);
	assert_int_equal(buf[0], 0x88);
	assert_int_equal(buf[2] << 8 | buf[3], 1008);
	assert_int_equal(ENDED(TUN_R3_END_TOKEN), 1);
	assert_int_equal(f->w.live, 0);
	assert_int_equal(f->loop.ndels, 2); /* the stream and the WireGuard socket */
	a = src("192.0.2.1");
	assert_int_equal(srctab_count(&f->w.src, &a, SRCTAB_ADDR), 0);
}

/* The loop out of copy buffers (a client's chunk of 350 small messages on
 * io_uring, bench/tunnel): each datagram still reaches WireGuard, sent at
 * once on the connected socket, none dropped. */
static void test_tun_r3_datagrams_past_the_loops_copies_still_reach_wireguard(void **state)
{
	struct fx *f = *state;
	struct sockaddr_in wg = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct tun_r3_limits lim;
	uint8_t buf[256];
	uint16_t port = 0;
	int u = socket(AF_INET, SOCK_DGRAM, 0);

	assert_true(u >= 0);
	/* WireGuard's port: a free one below the ephemeral range. */
	for (uint16_t p = 27990; p < 28010 && !port; p++) {
		wg.sin_port = htons(p);
		if (bind(u, (struct sockaddr *)&wg, sizeof(wg)) == 0)
			port = p;
	}
	assert_true(port != 0);
	tun_r3_limits_default(&lim);
	lim.conns = 16;
	tun_r3_shutdown(&f->w);
	tun_r3_close(&f->w);
	assert_int_equal(tun_r3_open(&f->w, &f->cert, &f->tokens, port, &lim), 0);
	assert_int_equal(tun_r3_attach(&f->w, &ops, &f->loop, &f->ep), 0);
	connect_tls(f);
	upgrade(f, "/t", "tok-a");
	client_read(f, buf, sizeof(buf));
	assert_int_equal(f->w.live, 1);

	fake_nobufs = true;
	client_datagram(f, "past-the-copies");
	assert_int_equal(ndg_sends, 0);
	assert_int_equal(recv(u, buf, sizeof(buf), MSG_DONTWAIT), 15); /* loopback: there at once */
	assert_memory_equal(buf, "past-the-copies", 15);
	assert_int_equal(DGRAMS(0), 1);
	assert_int_equal(DROPPED(TUN_R3_DROP_WG_SEND), 0);
	close(u);
}

static void test_tun_r3_wrong_token_is_403_and_closed_without_a_socket(void **state)
{
	struct fx *f = *state;
	uint8_t buf[2048];
	size_t got;

	connect_tls(f);
	upgrade(f, "/t", "tok-nope");
	got = client_read(f, buf, sizeof(buf) - 1);
	buf[got] = '\0';
	assert_non_null(strstr((char *)buf, "HTTP/1.1 403"));
	assert_int_equal(ndg_adds, 0);
	assert_int_equal(f->w.live, 0);
	assert_int_equal(f->loop.ndels, 1);
}

static void test_tun_r3_wrong_path_is_refused(void **state)
{
	struct fx *f = *state;
	uint8_t buf[2048];
	size_t got;

	connect_tls(f);
	upgrade(f, "/x", "tok-a");
	got = client_read(f, buf, sizeof(buf) - 1);
	buf[got] = '\0';
	assert_non_null(strstr((char *)buf, "HTTP/1.1 4"));
	assert_int_equal(ndg_adds, 0);
	assert_int_equal(f->w.live, 0);
}

static void test_tun_r3_source_holds_at_most_its_share(void **state)
{
	struct fx *f = *state;
	union etr_sockaddr a = src("192.0.2.7"), b = src("192.0.2.8");
	int fd;

	for (unsigned i = 0; i < TUN_R3_PER_SOURCE; i++)
		assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &a, NULL, 0, f->now), 0);
	fd = stream_fd(f);
	assert_int_equal(tun_r3_take(&f->w, fd, &a, NULL, 0, f->now), -EBUSY);
	close(fd); /* refused: still the caller's */
	assert_int_equal(RESULT(TUN_R3_LIMIT_SOURCE), 1);
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &b, NULL, 0, f->now), 0);
	assert_int_equal(f->w.live, TUN_R3_PER_SOURCE + 1);
}

/* Handshakes begun, per source and in all (attack round 16: 895 a second
 * from one source, each a worker's crypto, moved the game's median 11x):
 * past either burst a connection is refused at the hand-over, counted,
 * still the caller's. */
static void test_tun_r3_handshake_rates_refuse_at_the_hand_over(void **state)
{
	struct fx *f = *state;
	union etr_sockaddr a = src("192.0.2.7"), b = src("192.0.2.8"), c = src("192.0.2.9");
	struct tun_r3_limits lim;
	int fd;

	tun_r3_limits_default(&lim);
	lim.hs_ip_burst = 2;
	lim.hs_ip_rate = 1;
	lim.hs_burst = 3;
	lim.hs_rate = 1;
	reopen(f, &lim);
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &a, NULL, 0, f->now), 0);
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &a, NULL, 0, f->now), 0);
	fd = stream_fd(f);
	assert_int_equal(tun_r3_take(&f->w, fd, &a, NULL, 0, f->now), -EAGAIN);
	close(fd);
	assert_int_equal(RESULT(TUN_R3_RATE_SOURCE), 1);
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &b, NULL, 0, f->now), 0);
	fd = stream_fd(f);
	assert_int_equal(tun_r3_take(&f->w, fd, &c, NULL, 0, f->now), -EAGAIN);
	close(fd);
	assert_int_equal(RESULT(TUN_R3_RATE_TOTAL), 1);
	assert_int_equal(f->w.live, 3);
	/* Out of bounds: refused at the open, as the keys are at their line. */
	tun_r3_shutdown(&f->w);
	tun_r3_close(&f->w);
	lim.hs_ip_rate = 0;
	assert_int_equal(tun_r3_open(&f->w, &f->cert, &f->tokens, 27999, &lim), -EINVAL);
	lim.hs_ip_rate = 1;
	assert_int_equal(tun_r3_open(&f->w, &f->cert, &f->tokens, 27999, &lim), 0);
	assert_int_equal(tun_r3_attach(&f->w, &ops, &f->loop, &f->ep), 0);
}

static void test_tun_r3_refused_without_a_certificate(void **state)
{
	struct fx *f = *state;
	union etr_sockaddr a = src("192.0.2.9");
	int fd = stream_fd(f);

	f->cert.name[0] = '\0';
	assert_int_equal(tun_r3_take(&f->w, fd, &a, NULL, 0, f->now), -ENOENT);
	assert_int_equal(RESULT(TUN_R3_NO_CERT), 1);
	assert_int_equal(f->w.live, 0);
	/* Its source was given back: the fd is open and the caller's. */
	assert_int_equal(close(fd), 0);
	f->cert.name[0] = 't';
}

static void test_tun_r3_upgrade_not_done_in_time_ends_it(void **state)
{
	struct fx *f = *state;
	union etr_sockaddr a = src("192.0.2.10");
	struct tun_r3_slot *s;

	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &a, NULL, 0, f->now), 0);
	s = &f->w.conns[0];
	assert_int_equal(s->timer.at, f->now + TUN_R3_UPGRADE_MS * NS_PER_MS);
	assert_true(endpoint_timer(&f->ep, s->timer.id, s->timer.at - 1));
	assert_int_equal(f->w.live, 1); /* not yet: armed again */
	assert_true(endpoint_timer(&f->ep, s->timer.id, f->now + TUN_R3_UPGRADE_MS * NS_PER_MS));
	deliver(f);
	assert_int_equal(ENDED(TUN_R3_END_HANDSHAKE), 1);
	assert_int_equal(RESULT(TUN_R3_TIMEOUT), 1);
	assert_int_equal(f->w.live, 0);
}

static void test_tun_r3_lowered_limits_refuse_the_next_connection(void **state)
{
	struct fx *f = *state;
	union etr_sockaddr a = src("192.0.2.20"), b = src("192.0.2.21"), c = src("192.0.2.22");
	struct tun_r3_limits lim;
	int fd;

	tun_r3_limits_default(&lim);
	lim.conns = 3;
	lim.per_source = 2;
	reopen(f, &lim);
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &a, NULL, 0, f->now), 0);
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &a, NULL, 0, f->now), 0);
	fd = stream_fd(f);
	assert_int_equal(tun_r3_take(&f->w, fd, &a, NULL, 0, f->now), -EBUSY);
	assert_int_equal(close(fd), 0); /* refused: still the caller's */
	assert_int_equal(RESULT(TUN_R3_LIMIT_SOURCE), 1);
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &b, NULL, 0, f->now), 0);
	fd = stream_fd(f);
	assert_int_equal(tun_r3_take(&f->w, fd, &c, NULL, 0, f->now), -ENOSPC);
	assert_int_equal(close(fd), 0);
	assert_int_equal(RESULT(TUN_R3_LIMIT_TOTAL), 1);
	assert_int_equal(f->w.live, 3);
}

/* attack16 M1: connections left half done (a hello, then nothing) held
 * every place for their 10 s, 30 new ones a second from 40 sources, and
 * no gateway got in. All held, a new one ends the oldest not upgraded yet
 * once it is TUN_R3_EVICT_AGE old; an upgraded one is never taken. */
static void test_tun_r3_a_new_connection_evicts_the_oldest_half_done(void **state)
{
	struct fx *f = *state;
	union etr_sockaddr a = src("192.0.2.30"), b = src("192.0.2.31"), c = src("192.0.2.32");
	struct tun_r3_limits lim;
	uint8_t buf[256];
	int fd;

	tun_r3_limits_default(&lim);
	lim.conns = 3;
	reopen(f, &lim);
	connect_tls(f); /* an upgraded gateway: never evicted */
	upgrade(f, "/t", "tok-a");
	client_read(f, buf, sizeof(buf));
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &a, NULL, 0, f->now), 0);
	f->now += NS_PER_SEC / 2;
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &b, NULL, 0, f->now), 0);
	/* Too young to make room: refused as before. */
	fd = stream_fd(f);
	assert_int_equal(tun_r3_take(&f->w, fd, &c, NULL, 0, f->now), -ENOSPC);
	assert_int_equal(close(fd), 0);
	assert_int_equal(RESULT(TUN_R3_LIMIT_TOTAL), 1);
	/* a's is a second old: it goes, c comes in; then b's. */
	f->now += NS_PER_SEC / 2;
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &c, NULL, 0, f->now), 0);
	assert_int_equal(RESULT(TUN_R3_EVICTED), 1);
	assert_int_equal(ENDED(TUN_R3_END_EVICTED), 1);
	assert_int_equal(read(f->peers[f->npeers - 4], buf, sizeof(buf)), 0); /* a's: closed */
	f->now += NS_PER_SEC / 2;
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &a, NULL, 0, f->now), 0);
	assert_int_equal(RESULT(TUN_R3_EVICTED), 2);
	assert_int_equal(f->w.live, 3);
	/* Only the upgraded one and two young ones: nothing to evict. */
	fd = stream_fd(f);
	assert_int_equal(tun_r3_take(&f->w, fd, &b, NULL, 0, f->now), -ENOSPC);
	assert_int_equal(close(fd), 0);
	assert_int_equal(RESULT(TUN_R3_UPGRADED), 1);
}

static void test_tun_r3_lowered_per_token_limit_closes_the_next_upgrade(void **state)
{
	struct fx *f = *state;
	struct tun_r3_limits lim;
	uint8_t buf[2048];
	size_t got;

	tun_r3_limits_default(&lim);
	lim.per_token = 1;
	reopen(f, &lim);
	connect_tls(f);
	upgrade(f, "/t", "tok-a");
	got = client_read(f, buf, sizeof(buf) - 1);
	buf[got] = '\0';
	assert_non_null(strstr((char *)buf, "HTTP/1.1 101"));
	assert_int_equal(close_code(buf, got), -1);

	/* A second gateway with the same token: let in by the upgrade, then
	 * closed (1008) before it has a socket to WireGuard. */
	f->cur = &f->cl2;
	connect_tls(f);
	upgrade(f, "/t", "tok-a");
	got = client_read(f, buf, sizeof(buf) - 1);
	assert_int_equal(close_code(buf, got), 1008);
	assert_int_equal(RESULT(TUN_R3_LIMIT_TOKEN), 1);
	assert_int_equal(RESULT(TUN_R3_UPGRADED), 1);
	assert_int_equal(ENDED(TUN_R3_END_REFUSED), 1);
	assert_int_equal(ndg_adds, 1);
	assert_int_equal(f->w.live, 1);
}

static void test_tun_r3_lowered_timeouts_end_it_sooner(void **state)
{
	struct fx *f = *state;
	union etr_sockaddr a = src("192.0.2.23");
	struct tun_r3_limits lim;
	struct tun_r3_slot *s;
	uint8_t buf[2048];

	tun_r3_limits_default(&lim);
	lim.handshake_ms = 2000;
	lim.idle_ms = 20000;
	reopen(f, &lim);
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &a, NULL, 0, f->now), 0);
	s = &f->w.conns[0];
	assert_int_equal(s->timer.at, f->now + 2 * NS_PER_SEC);
	assert_true(endpoint_timer(&f->ep, s->timer.id, f->now + 2 * NS_PER_SEC));
	deliver(f);
	assert_int_equal(ENDED(TUN_R3_END_HANDSHAKE), 1);
	assert_int_equal(f->w.live, 0);

	connect_tls(f);
	upgrade(f, "/t", "tok-a");
	client_read(f, buf, sizeof(buf));
	s = &f->w.conns[f->w.free_head == 0 ? 1 : 0];
	assert_int_equal(s->state, 1); /* open */
	assert_int_equal(s->timer.at, s->last + 20 * NS_PER_SEC);
	assert_true(endpoint_timer(&f->ep, s->timer.id, s->last + 20 * NS_PER_SEC));
	deliver(f);
	assert_int_equal(close_code(buf, client_read(f, buf, sizeof(buf))), 1001);
	assert_int_equal(ENDED(TUN_R3_END_IDLE), 1);
}

static void test_tun_r3_message_over_the_lowered_max_closes_with_1009(void **state)
{
	struct fx *f = *state;
	struct tun_r3_limits lim;
	uint8_t buf[2048];

	tun_r3_limits_default(&lim);
	lim.max_msg = WS_MSG_MIN;
	reopen(f, &lim);
	connect_tls(f);
	upgrade(f, "/t", "tok-a");
	client_read(f, buf, sizeof(buf));
	client_big_datagram(f, WS_MSG_MIN);
	assert_int_equal(ndg_sends, 1); /* at the bound: carried */
	client_big_datagram(f, WS_MSG_MIN + 1);
	assert_int_equal(ndg_sends, 1);
	assert_int_equal(close_code(buf, client_read(f, buf, sizeof(buf))), 1009);
}

/* A client that takes nothing (the loop's part held back): datagrams
 * from WireGuard wait as ciphertext up to rung3-max-backlog, then are
 * dropped and counted; the default holds the same burst whole. */
static unsigned burst_to_a_stalled_client(struct fx *f, uint32_t backlog)
{
	struct tun_r3_limits lim;
	uint8_t buf[2048], dg[1000];
	struct loop_dgram d = {.data = dg, .len = sizeof(dg)};

	tun_r3_limits_default(&lim);
	lim.backlog = backlog;
	reopen(f, &lim);
	connect_tls(f);
	upgrade(f, "/t", "tok-a");
	client_read(f, buf, sizeof(buf));
	memset(dg, 'w', sizeof(dg));
	for (int i = 0; i < 16; i++)
		assert_true(endpoint_dgram(&f->ep, dg_adds[ndg_adds - 1].id, &d));
	return (unsigned)DROPPED(TUN_R3_DROP_BACKLOG);
}

static void test_tun_r3_lowered_backlog_drops_for_a_stalled_client(void **state)
{
	struct fx *f = *state;
	unsigned dropped = burst_to_a_stalled_client(f, TUN_R3_BACKLOG_MIN);

	/* 4 KiB: four 1000-byte datagrams (a record each, about 1030 bytes
	 * of ciphertext) wait; the fifth finds the backlog full. */
	assert_in_range(dropped, 10, 13);
	assert_int_equal(DGRAMS(1) + dropped, 16);
	assert_int_equal(f->w.live, 1);
}

static void test_tun_r3_default_backlog_holds_the_same_burst(void **state)
{
	struct fx *f = *state;

	assert_int_equal(burst_to_a_stalled_client(f, TUN_R3_BACKLOG), 0);
	assert_int_equal(DGRAMS(1), 16);
}

static void test_tun_r3_limits_out_of_bounds_are_refused(void **state)
{
	struct fx *f = *state;
	struct tun_r3 w;
	struct tun_r3_limits ok, lim;

	tun_r3_limits_default(&ok);
	lim = ok, lim.conns = 0;
	assert_int_equal(tun_r3_open(&w, &f->cert, &f->tokens, 27999, &lim), -EINVAL);
	lim = ok, lim.conns = TUN_R3_CONNS_MAX + 1;
	assert_int_equal(tun_r3_open(&w, &f->cert, &f->tokens, 27999, &lim), -EINVAL);
	lim = ok, lim.per_source = 0;
	assert_int_equal(tun_r3_open(&w, &f->cert, &f->tokens, 27999, &lim), -EINVAL);
	lim = ok, lim.per_token = 0;
	assert_int_equal(tun_r3_open(&w, &f->cert, &f->tokens, 27999, &lim), -EINVAL);
	lim = ok, lim.max_msg = WS_MSG_MIN - 1;
	assert_int_equal(tun_r3_open(&w, &f->cert, &f->tokens, 27999, &lim), -EINVAL);
	lim = ok, lim.max_msg = WS_MSG_MAX + 1;
	assert_int_equal(tun_r3_open(&w, &f->cert, &f->tokens, 27999, &lim), -EINVAL);
	lim = ok, lim.backlog = TUN_R3_BACKLOG_MIN - 1;
	assert_int_equal(tun_r3_open(&w, &f->cert, &f->tokens, 27999, &lim), -EINVAL);
	lim = ok, lim.backlog = TLS_CONN_OUT_MAX + 1;
	assert_int_equal(tun_r3_open(&w, &f->cert, &f->tokens, 27999, &lim), -EINVAL);
	lim = ok, lim.handshake_ms = 0;
	assert_int_equal(tun_r3_open(&w, &f->cert, &f->tokens, 27999, &lim), -EINVAL);
	lim = ok, lim.idle_ms = TUN_R3_IDLE_MS_MAX + 1;
	assert_int_equal(tun_r3_open(&w, &f->cert, &f->tokens, 27999, &lim), -EINVAL);
	lim = ok, lim.conns = TUN_R3_CONNS_MAX;
	assert_int_equal(tun_r3_open(&w, &f->cert, &f->tokens, 27999, &lim), 0);
	tun_r3_close(&w);
}

/* Sum of a family's counters. */
static uint64_t total(const _Atomic uint64_t *v, unsigned n)
{
	uint64_t t = 0;

	for (unsigned k = 0; k < n; k++)
		t += STAT_GET(v[k]);
	return t;
}

/* A connection's life in /metrics' counters: one result, one end, the
 * gauge back to 0; datagrams and their bytes each way, and each drop of a
 * datagram from WireGuard by its reason. */
static void test_tun_r3_counts_a_connection_once_and_its_datagrams_each_way(void **state)
{
	struct fx *f = *state;
	uint8_t big[WS_MSG_MAX], buf[2048];
	struct loop_dgram d = {.data = (uint8_t *)"from-wg", .len = 7};

	connect_tls(f);
	assert_int_equal(STAT_GET(f->w.st.open), 1);
	assert_int_equal(total(f->w.st.result, TUN_R3_RESULTS), 0); /* not known yet */
	upgrade(f, "/t", "tok-a");
	client_read(f, buf, sizeof(buf));
	assert_int_equal(RESULT(TUN_R3_UPGRADED), 1);
	client_datagram(f, "abc");
	client_datagram(f, "defgh");
	assert_int_equal(DGRAMS(0), 2);
	assert_int_equal(STAT_GET(f->w.st.bytes[0]), 8);
	assert_true(endpoint_dgram(&f->ep, dg_adds[0].id, &d));
	deliver(f);
	assert_int_equal(DGRAMS(1), 1);
	assert_int_equal(STAT_GET(f->w.st.bytes[1]), 7);

	/* From WireGuard: over rung3-max-message, truncated; WireGuard's
	 * port refusing one of ours. */
	memset(big, 'x', sizeof(big));
	d = (struct loop_dgram){.data = big, .len = TUN_R3_MSG + 1};
	assert_true(endpoint_dgram(&f->ep, dg_adds[0].id, &d));
	d = (struct loop_dgram){.data = big, .len = 100, .truncated = true};
	assert_true(endpoint_dgram(&f->ep, dg_adds[0].id, &d));
	assert_int_equal(DROPPED(TUN_R3_DROP_TOO_BIG), 2);
	assert_true(endpoint_recv_error(&f->ep, dg_adds[0].id, ECONNREFUSED));
	assert_int_equal(DROPPED(TUN_R3_DROP_WG_REFUSED), 1);
	assert_int_equal(DGRAMS(1), 1);
	assert_int_equal(f->w.live, 1); /* none of them ends it */

	/* The gateway's close frame: the answer queued, not yet sent (the
	 * loop's part held back), then one more datagram from WireGuard. */
	{
		uint8_t fr[] = {0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8};
		struct loop_dgram in = {.data = buf, .now = f->now};
		int n;

		assert_int_equal(SSL_write(f->cur->ssl, fr, sizeof(fr)), (int)sizeof(fr));
		n = BIO_read(f->cur->wbio, buf, sizeof(buf));
		assert_true(n > 0);
		in.len = (size_t)n;
		assert_true(endpoint_stream(&f->ep, read_id(f, f->cur_fd), &in));
	}
	assert_true(f->w.conns[0].closing);
	assert_int_equal(f->w.live, 1);
	d = (struct loop_dgram){.data = (uint8_t *)"late", .len = 4};
	assert_true(endpoint_dgram(&f->ep, dg_adds[0].id, &d));
	assert_int_equal(DROPPED(TUN_R3_DROP_CLOSING), 1);
	deliver(f);
	assert_int_equal(f->w.live, 0);
	assert_int_equal(ENDED(TUN_R3_END_CLIENT), 1);
	assert_int_equal(total(f->w.st.ended, TUN_R3_ENDS), 1);
	assert_int_equal(total(f->w.st.result, TUN_R3_RESULTS), 1);
	assert_int_equal(STAT_GET(f->w.st.open), 0);
	assert_int_equal(total(f->w.st.dropped, TUN_R3_DROPS), 4);
}

/* A refused upgrade counts its result by the status answered and ends as
 * refused; one gone before its upgrade counts as closed, or tls_failed
 * for bytes that are no TLS; every connection one result and one end. */
static void test_tun_r3_counts_refused_upgrades_by_their_status(void **state)
{
	struct fx *f = *state;
	uint8_t buf[2048];
	union etr_sockaddr a = src("192.0.2.30");
	struct loop_dgram eof = {.data = buf, .len = 0, .now = f->now};
	static const uint8_t junk[] = "\x16\x03\x01\x00\x05hello";
	int fd;

	connect_tls(f);
	upgrade(f, "/t", "tok-nope");
	client_read(f, buf, sizeof(buf));
	assert_int_equal(RESULT(TUN_R3_BAD_TOKEN), 1);
	assert_int_equal(ENDED(TUN_R3_END_REFUSED), 1);
	assert_int_equal(f->w.live, 0);

	f->cur = &f->cl2;
	connect_tls(f);
	upgrade(f, "/elsewhere", "tok-a");
	client_read(f, buf, sizeof(buf));
	assert_int_equal(RESULT(TUN_R3_BAD_UPGRADE), 1);
	assert_int_equal(ENDED(TUN_R3_END_REFUSED), 2);
	assert_int_equal(f->w.live, 0);

	/* Taken, then the client's EOF before a byte. */
	fd = stream_fd(f);
	assert_int_equal(tun_r3_take(&f->w, fd, &a, NULL, 0, f->now), 0);
	assert_true(endpoint_stream(&f->ep, read_id(f, fd), &eof));
	assert_int_equal(RESULT(TUN_R3_CLOSED), 1);
	assert_int_equal(ENDED(TUN_R3_END_CLIENT), 1);

	/* Bytes that are no TLS. */
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &a, junk, sizeof(junk) - 1, f->now), 0);
	deliver(f);
	assert_int_equal(RESULT(TUN_R3_TLS_FAILED), 1);
	assert_int_equal(ENDED(TUN_R3_END_ERROR), 1);
	assert_int_equal(f->w.live, 0);

	/* Open at the exit. */
	assert_int_equal(tun_r3_take(&f->w, stream_fd(f), &a, NULL, 0, f->now), 0);
	tun_r3_shutdown(&f->w);
	assert_int_equal(RESULT(TUN_R3_CLOSED), 2);
	assert_int_equal(ENDED(TUN_R3_END_SHUTDOWN), 1);
	assert_int_equal(total(f->w.st.result, TUN_R3_RESULTS), 5);
	assert_int_equal(total(f->w.st.ended, TUN_R3_ENDS), 5);
	assert_int_equal(STAT_GET(f->w.st.open), 0);
}

/* The ops plane's sum: every worker's counters, field by field. */
static void test_tun_r3_totals_sum_every_worker(void **state)
{
	static struct tun_r3_stats w0, w1, sum;
	static struct tun_stats st;

	(void)state;
	STAT_SET(w0.result[TUN_R3_UPGRADED], 3);
	STAT_SET(w1.result[TUN_R3_UPGRADED], 4);
	STAT_SET(w1.ended[TUN_R3_END_SHUTDOWN], 5);
	STAT_SET(w0.dropped[TUN_R3_DROP_CLOSING], 6);
	STAT_SET(w0.bytes[1], 7);
	STAT_SET(w1.bytes[1], 8);
	STAT_SET(w0.open, 1);
	STAT_SET(w1.open, 2);
	st.r3[0] = &w0;
	st.r3[STATS_WORKERS_MAX - 1] = &w1;
	tun_r3_totals(&st, &sum);
	assert_int_equal(STAT_GET(sum.result[TUN_R3_UPGRADED]), 7);
	assert_int_equal(STAT_GET(sum.ended[TUN_R3_END_SHUTDOWN]), 5);
	assert_int_equal(STAT_GET(sum.dropped[TUN_R3_DROP_CLOSING]), 6);
	assert_int_equal(STAT_GET(sum.bytes[1]), 15);
	assert_int_equal(STAT_GET(sum.open), 3);
	assert_int_equal(STAT_GET(sum.dgrams[0]), 0);
	assert_string_equal(tun_r3_result_name(TUN_R3_LIMIT_SOURCE), "limit_source");
	assert_string_equal(tun_r3_end_name(TUN_R3_END_HANDSHAKE), "handshake_timeout");
	assert_string_equal(tun_r3_drop_name(TUN_R3_DROP_BACKLOG), "backlog_full");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
		test_tun_r3_carries_datagrams_both_ways_until_its_token_leaves, setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_tun_r3_datagrams_past_the_loops_copies_still_reach_wireguard, setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_tun_r3_wrong_token_is_403_and_closed_without_a_socket, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tun_r3_wrong_path_is_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tun_r3_source_holds_at_most_its_share, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_tun_r3_handshake_rates_refuse_at_the_hand_over,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tun_r3_refused_without_a_certificate, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_tun_r3_upgrade_not_done_in_time_ends_it, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_tun_r3_lowered_limits_refuse_the_next_connection,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_tun_r3_a_new_connection_evicts_the_oldest_half_done, setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_tun_r3_lowered_per_token_limit_closes_the_next_upgrade, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tun_r3_lowered_timeouts_end_it_sooner, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(
		test_tun_r3_message_over_the_lowered_max_closes_with_1009, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tun_r3_limits_out_of_bounds_are_refused, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_tun_r3_lowered_backlog_drops_for_a_stalled_client,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tun_r3_default_backlog_holds_the_same_burst, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(
		test_tun_r3_counts_a_connection_once_and_its_datagrams_each_way, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tun_r3_counts_refused_upgrades_by_their_status,
					    setup, teardown),
	    cmocka_unit_test(test_tun_r3_totals_sum_every_worker),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
