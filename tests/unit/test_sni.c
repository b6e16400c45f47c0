/* SPDX-License-Identifier: ISC */
/* Unit tests for the SNI listener's connection state machine, over a fake
 * loop (tests/unit/fake_stream_loop.h): the test plays the loop's events.
 * The client sockets are real, on loopback, so that a refusal's "no byte,
 * then EOF" can be read. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "endpoint.h"
#include "loop.h"
#include "proxy_v2.h"
#include "sni.h"
#include "sni_conf.h"

#include "fake_stream_loop.h"

struct fx {
	struct sni_conf conf;
	struct sni_shared sh;
	struct sni_listener l;
	struct loop loop;
	struct endpoint_table ep;
	struct sni_route routes[2];
	int clients[16];
	unsigned nclients;
};

/* A minimal ClientHello for name (one record). */
static size_t hello(uint8_t *out, const char *name)
{
	size_t n = strlen(name), ext = 9 + n, body = 2 + 32 + 1 + 4 + 2 + 2 + ext;
	uint8_t *p = out;

	*p++ = 22, *p++ = 3, *p++ = 1;
	*p++ = (uint8_t)((body + 4) >> 8), *p++ = (uint8_t)(body + 4);
	*p++ = 1, *p++ = 0, *p++ = (uint8_t)(body >> 8), *p++ = (uint8_t)body;
	*p++ = 3, *p++ = 3;
	memset(p, 7, 32), p += 32;
	*p++ = 0;				   /* session id */
	*p++ = 0, *p++ = 2, *p++ = 0x13, *p++ = 1; /* one cipher suite */
	*p++ = 1, *p++ = 0;			   /* null compression */
	*p++ = (uint8_t)(ext >> 8), *p++ = (uint8_t)ext;
	*p++ = 0, *p++ = 0; /* server_name */
	*p++ = (uint8_t)((n + 5) >> 8), *p++ = (uint8_t)(n + 5);
	*p++ = (uint8_t)((n + 3) >> 8), *p++ = (uint8_t)(n + 3);
	*p++ = 0, *p++ = (uint8_t)(n >> 8), *p++ = (uint8_t)n;
	memcpy(p, name, n), p += n;
	return (size_t)(p - out);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	conf_sni_defaults(&f->conf);
	snprintf(f->conf.name, sizeof(f->conf.name), "t");
	/* Port 0: the kernel picks one (addr_parse_numeric refuses 0). */
	f->conf.listen.in.sin_family = AF_INET;
	f->conf.listen.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->conf.listen_set = true;
	f->conf.max_connections = 4;
	f->conf.max_per_ip = 4;
	f->conf.max_preread = 4;
	snprintf(f->routes[0].name, sizeof(f->routes[0].name), "a.test");
	addr_parse_numeric("127.0.0.1:9001", &f->routes[0].upstream);
	snprintf(f->routes[1].name, sizeof(f->routes[1].name), "*.p.test");
	addr_parse_numeric("127.0.0.1:9002", &f->routes[1].upstream);
	f->routes[1].proxy_v2 = true;
	*state = f;
	return 0;
}

/* Open and attach the listener with the fixture's conf (after a test's
 * changes to it). */
static struct fx *start(void **state)
{
	struct fx *f = *state;
	char err[256];

	assert_int_equal(sni_shared_init(&f->sh, 0, &f->conf, f->routes, 2, 1, err, sizeof(err)),
			 0);
	assert_int_equal(sni_listener_open(&f->l, &f->sh, 0, 0, false), 0);
	endpoint_table_init(&f->ep);
	assert_int_equal(sni_listener_attach(&f->l, &fake_stream_ops, &f->loop, &f->ep), 0);
	assert_int_equal(f->loop.nlistens, 1);
	return f;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	if (f->l.conns) {
		f->l.attached = true;
		sni_listener_shutdown(&f->l);
		sni_listener_close(&f->l);
		sni_shared_free(&f->sh);
	}
	for (unsigned i = 0; i < f->nclients; i++)
		close(f->clients[i]);
	free(f);
	return 0;
}

/* A real client connects; the loop hands the accepted fd over. Returns the
 * accepted fd. */
static int accept_from(struct fx *f, const char *src)
{
	union etr_sockaddr a;
	socklen_t len = sizeof(a);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), fd;

	assert_true(c >= 0);
	if (src) {
		struct sockaddr_in b = {.sin_family = AF_INET};

		assert_int_equal(inet_pton(AF_INET, src, &b.sin_addr), 1);
		assert_int_equal(bind(c, (struct sockaddr *)&b, sizeof(b)), 0);
	}
	assert_int_equal(getsockname(f->l.fd, &a.sa, &len), 0);
	assert_int_equal(connect(c, &a.sa, len), 0);
	fd = accept4(f->l.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	assert_true(fd >= 0);
	f->clients[f->nclients++] = c;
	assert_true(endpoint_accept(&f->ep, f->loop.listens[0].id, fd));
	return fd;
}

static int accept_one(struct fx *f)
{
	return accept_from(f, NULL);
}

static struct fake_call *last(struct fake_call *a, unsigned n)
{
	assert_true(n > 0);
	return &a[(n - 1) % FAKE_MAX];
}

/* The loop answers the last read on fd with len bytes of p (0: EOF). */
static void deliver(struct fx *f, int fd, const void *p, size_t len)
{
	uint8_t buf[LOOP_STREAM_CHUNK];
	struct loop_dgram d = {.data = buf, .len = len, .now = loop_now()};
	uint32_t id = 0;
	bool found = false;

	for (unsigned i = f->loop.nreads; i > 0 && !found; i--)
		if (f->loop.reads[(i - 1) % FAKE_MAX].fd == fd)
			id = f->loop.reads[(i - 1) % FAKE_MAX].id, found = true;
	assert_true(found);
	memcpy(buf, p, len);
	assert_true(endpoint_stream(&f->ep, id, &d));
}

/* What the client reads within 1 s: bytes (>0), 0 at EOF, -errno. */
static ssize_t client_read(int c, uint8_t *buf, size_t n)
{
	struct pollfd p = {.fd = c, .events = POLLIN};
	ssize_t r;

	if (poll(&p, 1, 1000) != 1)
		return -ETIMEDOUT;
	r = recv(c, buf, n, 0);
	return r < 0 ? -errno : r;
}

/* The client's connection is open, with nothing to read (no wait). */
static bool still_open(int c)
{
	struct pollfd p = {.fd = c, .events = POLLIN};

	return poll(&p, 1, 0) == 0;
}

static uint64_t result(struct fx *f, enum sni_result r)
{
	return atomic_load(&f->l.stats.result[r]);
}

static void test_sni_a_known_name_is_connected_sent_unchanged_and_spliced(void **state)
{
	struct fx *f = start(state);
	uint8_t h[512], buf[64];
	size_t n = hello(h, "A.test");
	int fd = accept_one(f), ufd;
	struct fake_call *s;
	unsigned reads;

	assert_int_equal(f->loop.nreads, 1);
	assert_int_equal(atomic_load(&f->l.stats.preread), 1);
	/* Split: the name is known only with the last byte. */
	deliver(f, fd, h, 10);
	assert_int_equal(f->loop.nconnects, 0);
	deliver(f, fd, h + 10, n - 10);
	assert_int_equal(f->loop.nconnects, 1);
	/* Connecting, it still counts under max-preread (what it read is
	 * held until the upstream answers); no longer once connected. */
	assert_int_equal(atomic_load(&f->l.stats.preread), 1);
	assert_int_equal(atomic_load(&f->l.stats.preread_count), 1);
	ufd = f->loop.connects[0].fd;
	assert_true(endpoint_connected(&f->ep, f->loop.connects[0].id, 0));
	assert_int_equal(atomic_load(&f->l.stats.preread), 0);
	assert_int_equal(atomic_load(&f->l.stats.preread_count), 1);
	assert_int_equal(result(f, SNI_SPLICED), 1);
	s = last(f->loop.sends, f->loop.nsends);
	assert_int_equal(s->fd, ufd);
	assert_int_equal(s->len, n);
	assert_memory_equal(s->data, h, n < sizeof(s->data) ? n : sizeof(s->data));
	/* The preread sent: both sides are read. */
	assert_true(endpoint_sent(&f->ep, s->id, (int)n));
	assert_int_equal(atomic_load(&f->l.stats.memory), 0);
	reads = f->loop.nreads;
	deliver(f, ufd, "server says", 11);
	s = last(f->loop.sends, f->loop.nsends);
	assert_int_equal(s->fd, fd);
	assert_int_equal(atomic_load(&f->l.stats.memory), 11);
	/* A read-ahead: the upstream is read again while its chunk is sent. */
	assert_int_equal(f->loop.nreads, reads + 1);
	assert_int_equal(last(f->loop.reads, f->loop.nreads)->fd, ufd);
	assert_true(endpoint_sent(&f->ep, s->id, 11));
	assert_int_equal(f->loop.nreads, reads + 1);
	assert_int_equal(atomic_load(&f->l.stats.memory), 0);
	assert_int_equal(atomic_load(&f->l.stats.bytes_out), 11);
	/* Half-closes both ways, then the end. */
	deliver(f, fd, "", 0);
	assert_int_equal(atomic_load(&f->l.stats.active), 1);
	deliver(f, ufd, "", 0);
	assert_int_equal(atomic_load(&f->l.stats.active), 0);
	assert_int_equal(atomic_load(&f->l.stats.ended[SNI_END_DONE]), 1);
	assert_int_equal(client_read(f->clients[0], buf, sizeof(buf)), 0);
}

/* The reads asked of fd so far. */
static unsigned reads_of(struct fx *f, int fd)
{
	unsigned n = 0;

	for (unsigned i = 0; i < f->loop.nreads && i < FAKE_MAX; i++)
		n += f->loop.reads[i].fd == fd;
	return n;
}

/* Connect a.test and send the preread: both sides are read. */
static int spliced(struct fx *f, int fd)
{
	uint8_t h[512];
	size_t n = hello(h, "a.test");
	struct fake_call *s;

	deliver(f, fd, h, n);
	assert_true(endpoint_connected(&f->ep, f->loop.connects[0].id, 0));
	s = last(f->loop.sends, f->loop.nsends);
	assert_true(endpoint_sent(&f->ep, s->id, (int)n));
	return f->loop.connects[0].fd;
}

/* At most two chunks of a direction in flight (a read-ahead of one): the
 * side is read again after the first, not after the second, and again
 * when one of the two was sent; its EOF is a shutdown only after every
 * queued chunk was sent. */
static void test_sni_a_direction_reads_one_chunk_ahead_and_shuts_after_it(void **state)
{
	struct fx *f = start(state);
	uint8_t buf[8];
	int fd = accept_one(f), ufd = spliced(f, fd);
	unsigned r0 = reads_of(f, ufd);
	struct fake_call *s1, *s2;

	deliver(f, ufd, "one", 3);
	s1 = last(f->loop.sends, f->loop.nsends);
	assert_int_equal(reads_of(f, ufd), r0 + 1);
	deliver(f, ufd, "two!", 4);
	s2 = last(f->loop.sends, f->loop.nsends);
	assert_int_equal(s2->fd, fd);
	/* Two in flight: no third read. */
	assert_int_equal(reads_of(f, ufd), r0 + 1);
	assert_int_equal(atomic_load(&f->l.stats.memory), 7);
	assert_true(endpoint_sent(&f->ep, s1->id, 3));
	assert_int_equal(reads_of(f, ufd), r0 + 2);
	assert_int_equal(atomic_load(&f->l.stats.memory), 4);
	/* EOF with a chunk still queued: the client's side is not shut yet. */
	deliver(f, ufd, "", 0);
	assert_int_equal(client_read(f->clients[0], buf, sizeof(buf)), -ETIMEDOUT);
	assert_true(endpoint_sent(&f->ep, s2->id, 4));
	assert_int_equal(client_read(f->clients[0], buf, sizeof(buf)), 0);
	assert_int_equal(atomic_load(&f->l.stats.memory), 0);
	assert_int_equal(reads_of(f, ufd), r0 + 2);
	assert_int_equal(atomic_load(&f->l.stats.active), 1);
	/* The other direction still splices, then ends the connection. */
	deliver(f, fd, "", 0);
	assert_int_equal(atomic_load(&f->l.stats.active), 0);
	assert_int_equal(atomic_load(&f->l.stats.ended[SNI_END_DONE]), 1);
}

/* A send that fails with chunks queued ends the connection once, and
 * what it held is given back. */
static void test_sni_a_failed_send_with_a_read_ahead_resets(void **state)
{
	struct fx *f = start(state);
	int fd = accept_one(f), ufd = spliced(f, fd);
	struct fake_call *s1, *s2;

	deliver(f, fd, "up1", 3);
	s1 = last(f->loop.sends, f->loop.nsends);
	deliver(f, fd, "up2", 3);
	s2 = last(f->loop.sends, f->loop.nsends);
	assert_int_equal(s2->fd, ufd);
	assert_int_equal(atomic_load(&f->l.stats.memory), 6);
	assert_true(endpoint_sent(&f->ep, s1->id, -EPIPE));
	assert_int_equal(atomic_load(&f->l.stats.ended[SNI_END_RESET]), 1);
	assert_int_equal(atomic_load(&f->l.stats.memory), 0);
	assert_int_equal(atomic_load(&f->l.stats.active), 0);
	/* The cancelled second send's on_sent finds nothing. */
	endpoint_sent(&f->ep, s2->id, -ECANCELED);
	assert_int_equal(atomic_load(&f->l.stats.memory), 0);
}

static void test_sni_a_proxy_v2_route_sends_the_header_first(void **state)
{
	struct fx *f = start(state);
	uint8_t h[512];
	size_t n = hello(h, "x.p.test");
	int fd = accept_one(f);
	struct fake_call *s;

	deliver(f, fd, h, n);
	assert_int_equal(f->loop.nconnects, 1);
	assert_true(endpoint_connected(&f->ep, f->loop.connects[0].id, 0));
	s = last(f->loop.sends, f->loop.nsends);
	assert_int_equal(s->len, PROXY_V2_LEN_TCP4 + n);
	assert_memory_equal(s->data, PROXY_V2_SIG, PROXY_V2_SIG_LEN);
	assert_memory_equal(s->data + PROXY_V2_LEN_TCP4, h, 64);
}

/* Each refusal: counted by reason, nothing sent, the client reads EOF. */
static void refused(struct fx *f, const void *p, size_t n, enum sni_result why)
{
	uint8_t buf[64];
	int fd = accept_one(f);

	deliver(f, fd, p, n);
	assert_int_equal(result(f, why), 1);
	assert_int_equal(f->loop.nconnects, 0);
	assert_int_equal(f->loop.nsends, 0);
	assert_int_equal(client_read(f->clients[f->nclients - 1], buf, sizeof(buf)), 0);
	assert_int_equal(atomic_load(&f->l.stats.active), 0);
	assert_int_equal(atomic_load(&f->l.stats.lingering), 1);
	/* The linger reads until the client's EOF, then closes. */
	assert_int_equal(last(f->loop.reads, f->loop.nreads)->fd, fd);
	deliver(f, fd, "", 0);
	assert_int_equal(atomic_load(&f->l.stats.lingering), 0);
	assert_int_equal(atomic_load(&f->l.stats.memory), 0);
}

static void test_sni_an_unknown_name_is_refused_without_a_byte(void **state)
{
	uint8_t h[512];
	size_t n = hello(h, "b.test");

	refused(start(state), h, n, SNI_UNKNOWN_NAME);
}

static void test_sni_the_wildcard_does_not_match_its_suffix(void **state)
{
	uint8_t h[512];
	size_t n = hello(h, "p.test");

	refused(start(state), h, n, SNI_UNKNOWN_NAME);
}

static void test_sni_plain_http_is_refused_as_not_tls(void **state)
{
	refused(start(state), "GET / HTTP/1.0\r\n\r\n", 18, SNI_NOT_TLS);
}

static void test_sni_a_preread_timeout_refuses(void **state)
{
	struct fx *f = start(state);
	uint8_t h[512];
	int fd = accept_one(f);

	hello(h, "a.test");
	deliver(f, fd, h, 7);
	/* The client's read is still out: the timer fires. */
	assert_true(endpoint_timer(&f->ep, endpoint_ref_id(f->l.slot_conns, 0), loop_now()));
	assert_int_equal(result(f, SNI_PREREAD_TIMEOUT), 1);
	assert_int_equal(atomic_load(&f->l.stats.preread), 0);
	assert_int_equal(atomic_load(&f->l.stats.lingering), 1);
}

static void test_sni_over_max_connections_is_refused(void **state)
{
	struct fx *f = *state;

	f->conf.max_connections = 2;
	start(state);
	accept_one(f);
	accept_one(f);
	accept_one(f);
	assert_int_equal(result(f, SNI_CAP_CONNECTIONS), 1);
	assert_int_equal(atomic_load(&f->l.stats.active), 2);
}

static void test_sni_over_max_connections_per_ip_is_refused(void **state)
{
	struct fx *f = *state;

	f->conf.max_per_ip = 1;
	start(state);
	accept_one(f);
	accept_one(f);
	assert_int_equal(result(f, SNI_CAP_PER_IP), 1);
	assert_int_equal(atomic_load(&f->l.stats.active), 1);
}

/* A refusal by a cap holds nothing: the client reads no byte and its
 * end at once, without a linger. */
static void test_sni_a_refusal_by_a_cap_closes_at_once(void **state)
{
	struct fx *f = *state;
	uint8_t buf[8];

	f->conf.max_per_ip = 1;
	start(state);
	accept_one(f);
	accept_one(f);
	assert_int_equal(result(f, SNI_CAP_PER_IP), 1);
	assert_int_equal(atomic_load(&f->l.stats.lingering), 0);
	assert_true(client_read(f->clients[1], buf, sizeof(buf)) <= 0);
	assert_true(client_read(f->clients[1], buf, sizeof(buf)) != -ETIMEDOUT);
}

/* A refused connection lingering still counts for its address: one
 * address cannot hold more sockets than max-connections-per-ip. */
static void test_sni_a_lingering_connection_counts_for_its_address(void **state)
{
	struct fx *f = *state;
	int fd;

	f->conf.max_per_ip = 1;
	start(state);
	fd = accept_one(f);
	deliver(f, fd, "GET / HTTP/1.0\r\n\r\n", 18);
	assert_int_equal(result(f, SNI_NOT_TLS), 1);
	assert_int_equal(atomic_load(&f->l.stats.lingering), 1);
	accept_one(f);
	assert_int_equal(result(f, SNI_CAP_PER_IP), 1);
	/* The linger ends: the address may connect again. */
	assert_true(endpoint_timer(&f->ep, endpoint_ref_id(f->l.slot_conns, 0), loop_now()));
	assert_int_equal(atomic_load(&f->l.stats.lingering), 0);
	accept_one(f);
	assert_int_equal(result(f, SNI_CAP_PER_IP), 1);
	assert_int_equal(atomic_load(&f->l.stats.preread), 1);
}

/* At most SNI_LINGER_MAX refused connections linger; past it a refusal
 * closes at once. */
static void test_sni_lingering_connections_are_capped(void **state)
{
	struct fx *f = *state;

	f->conf.max_connections = 8; /* SNI_LINGER_MAX: 2 */
	start(state);
	for (unsigned i = 0; i < 3; i++)
		deliver(f, accept_one(f), "GET / HTTP/1.0\r\n\r\n", 18);
	assert_int_equal(result(f, SNI_NOT_TLS), 3);
	assert_int_equal(atomic_load(&f->l.stats.lingering), SNI_LINGER_MAX(8));
	assert_int_equal(atomic_load(&f->sh.l[0].lingering), SNI_LINGER_MAX(8));
}

/* At max-preread the oldest preread connection of the address holding
 * the most gives way (closed without a byte); with none on this worker
 * (the others hold them all) the newcomer is refused. */
static void test_sni_over_max_preread_the_oldest_of_the_most_gives_way(void **state)
{
	struct fx *f = *state;
	uint8_t buf[8];
	int b;

	f->conf.max_preread = 3;
	f->conf.max_connections = 16;
	start(state);
	accept_from(f, "127.0.0.1");	 /* client 0: a real one, the oldest */
	accept_from(f, "127.0.0.2");	 /* 1 */
	b = accept_from(f, "127.0.0.2"); /* 2 */
	accept_from(f, "127.0.0.3");	 /* 3: 127.0.0.2 holds the most: 1 goes */
	assert_int_equal(result(f, SNI_PREREAD_EVICTED), 1);
	assert_int_equal(result(f, SNI_CAP_PREREAD), 0);
	assert_true(client_read(f->clients[1], buf, sizeof(buf)) <= 0);
	assert_true(client_read(f->clients[1], buf, sizeof(buf)) != -ETIMEDOUT);
	assert_true(still_open(f->clients[2]));
	assert_int_equal(atomic_load(&f->l.stats.preread), 3);
	assert_int_equal(atomic_load(&f->sh.l[0].preread), 3);
	assert_int_equal(atomic_load(&f->l.stats.active), 3);
	accept_from(f, "127.0.0.3"); /* 4: ties of one each: the oldest, 0 */
	assert_int_equal(result(f, SNI_PREREAD_EVICTED), 2);
	assert_true(client_read(f->clients[0], buf, sizeof(buf)) <= 0);
	/* 127.0.0.3 holds two now: its oldest goes, and not 2 (older). */
	accept_from(f, "127.0.0.4"); /* 5 */
	assert_int_equal(result(f, SNI_PREREAD_EVICTED), 3);
	assert_true(client_read(f->clients[3], buf, sizeof(buf)) <= 0);
	assert_true(still_open(f->clients[2]));
	/* The counts stay exact as prereads end otherwise. */
	deliver(f, b, "GET / HTTP/1.0\r\n\r\n", 18);
	assert_int_equal(result(f, SNI_NOT_TLS), 1);
	assert_int_equal(atomic_load(&f->l.stats.preread), 2);
	assert_int_equal(atomic_load(&f->sh.l[0].preread), 2);
	accept_from(f, "127.0.0.5");
	assert_int_equal(result(f, SNI_PREREAD_EVICTED), 3);
	assert_int_equal(atomic_load(&f->sh.l[0].preread), 3);
}

/* Attack round 11: one silent connection from each of many addresses made
 * a real client's parallel connections the heaviest at max-preread. A
 * preread that has had SNI_PREREAD_STALE (1 s) for its hello gives way
 * first, whoever holds the most; while all are younger, the heaviest's
 * oldest does. */
static void test_sni_over_max_preread_a_stale_preread_gives_way_first(void **state)
{
	struct fx *f = *state;
	uint8_t buf[8];

	f->conf.max_preread = 3;
	f->conf.max_connections = 16;
	start(state);
	accept_from(f, "127.0.0.1"); /* 0: silent, one of many addresses */
	/* 0 has its time (the loop's clock is the real one: a wait) */
	assert_int_equal(client_read(f->clients[0], buf, sizeof(buf)), -ETIMEDOUT);
	poll(NULL, 0, 150);
	accept_from(f, "127.0.0.2"); /* 1, 2: a browser's parallel hellos */
	accept_from(f, "127.0.0.2");
	accept_from(f, "127.0.0.3"); /* 3: the stale one goes, not 127.0.0.2's */
	assert_int_equal(result(f, SNI_PREREAD_EVICTED), 1);
	assert_true(client_read(f->clients[0], buf, sizeof(buf)) <= 0);
	assert_true(still_open(f->clients[1]));
	assert_true(still_open(f->clients[2]));
	accept_from(f, "127.0.0.4"); /* 4: all young: 127.0.0.2 holds the most */
	assert_int_equal(result(f, SNI_PREREAD_EVICTED), 2);
	assert_true(client_read(f->clients[1], buf, sizeof(buf)) <= 0);
	assert_true(still_open(f->clients[2]));
	assert_true(still_open(f->clients[3]));
}

/* Finding 9: a connection waiting for its upstream holds what it read
 * (up to a ClientHello and a chunk) for up to connect-timeout; it counts
 * under max-preread until the upstream answers, so max-preread bounds
 * that memory too, and a newcomer at the cap evicts one of them. */
static void test_sni_connecting_connections_count_under_max_preread(void **state)
{
	struct fx *f = *state;
	uint8_t h[512];
	size_t n = hello(h, "a.test");
	int a, b;
	int64_t mem;

	f->conf.max_preread = 2;
	f->conf.max_connections = 16;
	start(state);
	a = accept_from(f, "127.0.0.2");
	b = accept_from(f, "127.0.0.3");
	deliver(f, a, h, n);
	deliver(f, b, h, n);
	assert_int_equal(f->loop.nconnects, 2);
	assert_int_equal(atomic_load(&f->l.stats.preread), 2);
	mem = atomic_load(&f->l.stats.memory);
	assert_true(mem > 0 && mem <= 2 * (int64_t)(PROXY_V2_MAX + n));
	/* A third: one of the connecting ones gives way, its upstream
	 * socket closed; the memory stays that of max-preread connections. */
	accept_from(f, "127.0.0.4");
	assert_int_equal(result(f, SNI_PREREAD_EVICTED), 1);
	assert_int_equal(result(f, SNI_CAP_PREREAD), 0);
	assert_int_equal(atomic_load(&f->l.stats.preread), 2);
	assert_int_equal(atomic_load(&f->l.stats.active), 2);
	assert_true(atomic_load(&f->l.stats.memory) <= 2 * (int64_t)(PROXY_V2_MAX + n));
	assert_int_equal(atomic_load(&f->l.stats.preread_count), 2); /* timed once each */
}

static void test_sni_over_max_preread_none_here_is_refused(void **state)
{
	struct fx *f = *state;

	f->conf.max_preread = 1;
	start(state);
	atomic_fetch_add(&f->sh.l[0].preread, 1); /* another worker's */
	accept_one(f);
	assert_int_equal(result(f, SNI_CAP_PREREAD), 1);
	assert_int_equal(result(f, SNI_PREREAD_EVICTED), 0);
	assert_int_equal(atomic_load(&f->l.stats.active), 0);
	atomic_fetch_sub(&f->sh.l[0].preread, 1);
}

static void test_sni_draining_refuses_new_connections(void **state)
{
	struct fx *f = *state;
	static _Atomic int lifecycle = 1;

	f->sh.lifecycle = &lifecycle;
	start(state);
	f->sh.lifecycle = &lifecycle;
	accept_one(f);
	assert_int_equal(result(f, SNI_DRAINING), 1);
}

/* A drain that begins while the hello is read: refused, not spliced. */
static void test_sni_a_drain_during_the_preread_refuses(void **state)
{
	struct fx *f = start(state);
	static _Atomic int lifecycle = 0;
	uint8_t h[512];
	int a;

	f->sh.lifecycle = &lifecycle;
	a = accept_one(f);
	atomic_store(&lifecycle, 1);
	deliver(f, a, h, hello(h, "a.test"));
	assert_int_equal(result(f, SNI_DRAINING), 1);
	assert_int_equal(f->loop.nconnects, 0);
}

static void test_sni_a_failed_connect_refuses_without_a_byte(void **state)
{
	struct fx *f = start(state);
	uint8_t h[512], buf[8];
	size_t n = hello(h, "a.test");
	int fd = accept_one(f);

	deliver(f, fd, h, n);
	assert_true(endpoint_connected(&f->ep, f->loop.connects[0].id, -ECONNREFUSED));
	assert_int_equal(result(f, SNI_CONNECT_FAILED), 1);
	assert_int_equal(f->loop.nsends, 0);
	assert_int_equal(client_read(f->clients[0], buf, sizeof(buf)), 0);
}

static void test_sni_control_routes_swap_and_close_only_the_removed_routes(void **state)
{
	struct fx *f = start(state);
	struct sni_route ctl;
	uint8_t h[512];
	char err[256];
	int a, c;
	size_t n;

	memset(&ctl, 0, sizeof(ctl));
	snprintf(ctl.name, sizeof(ctl.name), "c.test");
	addr_parse_numeric("127.0.0.1:9003", &ctl.upstream);
	assert_int_equal(sni_set_control_routes(&f->sh, &ctl, 1, err, sizeof(err)), 0);
	sni_listener_take_routes(&f->l);
	assert_int_equal(atomic_load(&f->sh.l[0].nroutes), 3);
	a = accept_one(f);
	n = hello(h, "a.test");
	deliver(f, a, h, n);
	c = accept_one(f);
	n = hello(h, "c.test");
	deliver(f, c, h, n);
	assert_int_equal(f->loop.nconnects, 2);
	assert_true(endpoint_connected(&f->ep, f->loop.connects[0].id, 0));
	assert_true(endpoint_connected(&f->ep, f->loop.connects[1].id, 0));
	assert_int_equal(atomic_load(&f->l.stats.active), 2);
	/* The control plane's set no longer has c.test. */
	assert_int_equal(sni_set_control_routes(&f->sh, NULL, 0, err, sizeof(err)), 0);
	sni_listener_take_routes(&f->l);
	assert_int_equal(atomic_load(&f->l.stats.ended[SNI_END_REVOKED]), 1);
	assert_int_equal(atomic_load(&f->l.stats.active), 1);
	assert_int_equal(atomic_load(&f->sh.l[0].nroutes), 2);
	/* A bad set changes nothing. */
	snprintf(ctl.name, sizeof(ctl.name), "bad..name");
	assert_int_equal(sni_set_control_routes(&f->sh, &ctl, 1, err, sizeof(err)), -1);
	assert_int_equal(atomic_load(&f->sh.l[0].nroutes), 2);
}

static void test_sni_a_control_route_never_beats_the_files(void **state)
{
	struct fx *f = start(state);
	struct sni_route ctl;
	uint8_t h[512];
	char err[256];
	int a;

	memset(&ctl, 0, sizeof(ctl));
	snprintf(ctl.name, sizeof(ctl.name), "a.test");
	addr_parse_numeric("127.0.0.1:9999", &ctl.upstream);
	assert_int_equal(sni_set_control_routes(&f->sh, &ctl, 1, err, sizeof(err)), 0);
	sni_listener_take_routes(&f->l);
	a = accept_one(f);
	deliver(f, a, h, hello(h, "a.test"));
	assert_int_equal(f->loop.nconnects, 1);
	assert_int_equal(ntohs(((struct sockaddr_in *)(void *)f->loop.connects[0].data)->sin_port),
			 9001);
}

static unsigned publishes;

static void count_publish(struct sni_shared *sh)
{
	(void)sh;
	publishes++;
}

/* sni_set_control_routes with stderr in a file: its return, and in *lines
 * how many lines it logged that contain needle. */
static int logged(struct sni_shared *sh, const struct sni_route *list, size_t n, const char *needle,
		  unsigned *lines)
{
	char err[256], line[512];
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO), rc;

	assert_non_null(tmp);
	assert_true(saved >= 0);
	fflush(stderr);
	assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
	rc = sni_set_control_routes(sh, list, n, err, sizeof(err));
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	*lines = 0;
	while (fgets(line, sizeof(line), tmp))
		*lines += strstr(line, needle) != NULL;
	fclose(tmp);
	return rc;
}

/* A heartbeat answers the set in force: no table is built or swapped and
 * the workers are not told. The file's route winning over one of the set
 * is logged once, when the set is committed: not when a later listener
 * refuses the set (here: its workers still hold every older table) and
 * the control plane sends it again. */
static void test_sni_the_set_in_force_again_changes_nothing_and_logs_nothing(void **state)
{
	struct fx *f = start(state);
	static struct sni_conf other;
	const char *wins = "route a.test: the config file's route wins";
	struct sni_route ctl[2];
	struct sni_lshared *l1 = &f->sh.l[1];
	char err[256];
	unsigned lines;
	uint64_t gen0, gen1;

	other = f->conf;
	snprintf(other.name, sizeof(other.name), "u");
	assert_int_equal(sni_shared_init(&f->sh, 1, &other, NULL, 0, 1, err, sizeof(err)), 0);
	publishes = 0;
	f->sh.publish = count_publish;
	memset(ctl, 0, sizeof(ctl));
	snprintf(ctl[0].name, sizeof(ctl[0].name), "a.test"); /* the file's too */
	addr_parse_numeric("127.0.0.1:9999", &ctl[0].upstream);
	snprintf(ctl[1].name, sizeof(ctl[1].name), "c.test");
	addr_parse_numeric("127.0.0.1:9003", &ctl[1].upstream);

	/* Listener u refuses the set twice: nothing logged, nothing swapped. */
	for (unsigned j = 0; j < SNI_RETIRED_MAX; j++)
		l1->retired[j].gen = UINT64_MAX; /* no worker is done with it */
	l1->nretired = SNI_RETIRED_MAX;
	for (int k = 0; k < 2; k++) {
		assert_int_equal(logged(&f->sh, ctl, 2, wins, &lines), -1);
		assert_int_equal(lines, 0);
	}
	assert_int_equal(publishes, 0);
	l1->nretired = 0;

	/* Committed: logged once, for listener t only. */
	assert_int_equal(logged(&f->sh, ctl, 2, wins, &lines), 0);
	assert_int_equal(lines, 1);
	assert_int_equal(publishes, 1);
	gen0 = f->sh.l[0].gen, gen1 = l1->gen;

	/* The same set again, three times: no build, no swap, no publish. */
	for (int k = 0; k < 3; k++) {
		assert_int_equal(logged(&f->sh, ctl, 2, "sni ", &lines), 0);
		assert_int_equal(lines, 0);
	}
	assert_int_equal(publishes, 1);
	assert_int_equal(f->sh.l[0].gen, gen0);
	assert_int_equal(l1->gen, gen1);

	/* A change (c.test moves) is a new set; a.test was shadowed before. */
	addr_parse_numeric("127.0.0.1:9004", &ctl[1].upstream);
	assert_int_equal(logged(&f->sh, ctl, 2, wins, &lines), 0);
	assert_int_equal(lines, 0);
	assert_int_equal(publishes, 2);
	assert_true(f->sh.l[0].gen > gen0);
	assert_int_equal(atomic_load(&l1->nroutes), 2);
}

/* A control-plane set with a route back to the listener is refused whole:
 * the set before stays. */
static void test_sni_a_control_route_to_the_listener_itself_is_refused(void **state)
{
	struct fx *f = *state;
	struct sni_route ctl[2];
	char err[256];

	addr_parse_numeric("0.0.0.0:8443", &f->conf.listen);
	start(state);
	memset(ctl, 0, sizeof(ctl));
	snprintf(ctl[0].name, sizeof(ctl[0].name), "b.test");
	addr_parse_numeric("127.0.0.1:9999", &ctl[0].upstream);
	assert_int_equal(sni_set_control_routes(&f->sh, ctl, 1, err, sizeof(err)), 0);
	snprintf(ctl[1].name, sizeof(ctl[1].name), "c.test");
	addr_parse_numeric("127.0.0.7:8443", &ctl[1].upstream); /* the wildcard's port */
	snprintf(ctl[0].name, sizeof(ctl[0].name), "d.test");
	assert_int_equal(sni_set_control_routes(&f->sh, ctl, 2, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "route c.test: upstream 127.0.0.7:8443 is the SNI listener t"));
	sni_listener_take_routes(&f->l);
	assert_non_null(sni_routes_lookup(f->l.routes, "b.test", 6));
	assert_null(sni_routes_lookup(f->l.routes, "d.test", 6));
	/* Over SNI_CONTROL_ROUTES_MAX: refused whole too. */
	{
		struct sni_route *many = calloc(SNI_CONTROL_ROUTES_MAX + 1, sizeof(*many));

		for (unsigned i = 0; i <= SNI_CONTROL_ROUTES_MAX; i++) {
			snprintf(many[i].name, sizeof(many[i].name), "n%u.test", i);
			addr_parse_numeric("127.0.0.1:9999", &many[i].upstream);
		}
		assert_int_equal(sni_set_control_routes(&f->sh, many, SNI_CONTROL_ROUTES_MAX + 1,
							err, sizeof(err)),
				 -1);
		assert_non_null(strstr(err, "10001 routes, at most 10000"));
		assert_int_equal(
		    sni_set_control_routes(&f->sh, many, SNI_CONTROL_ROUTES_MAX, err, sizeof(err)),
		    0);
		free(many);
	}
	sni_listener_take_routes(&f->l);
	assert_non_null(sni_routes_lookup(f->l.routes, "n9999.test", 10));
}

static void test_sni_an_idle_splice_is_closed(void **state)
{
	struct fx *f = *state;
	uint8_t h[512];
	int fd;

	f->conf.idle_timeout_ms = 1000;
	start(state);
	fd = accept_one(f);
	deliver(f, fd, h, hello(h, "a.test"));
	assert_true(endpoint_connected(&f->ep, f->loop.connects[0].id, 0));
	/* Not yet: re-armed for last + idle. */
	assert_true(endpoint_timer(&f->ep, endpoint_ref_id(f->l.slot_conns, 0), loop_now()));
	assert_int_equal(atomic_load(&f->l.stats.active), 1);
	assert_true(endpoint_timer(&f->ep, endpoint_ref_id(f->l.slot_conns, 0),
				   loop_now() + 2 * NS_PER_SEC));
	assert_int_equal(atomic_load(&f->l.stats.ended[SNI_END_IDLE]), 1);
	assert_int_equal(atomic_load(&f->l.stats.active), 0);
}

/* A side that takes no spliced byte for send-timeout (its chunk's send
 * never ends: a client that stopped reading) gets both sides reset. */
static void test_sni_a_side_that_takes_nothing_for_send_timeout_is_reset(void **state)
{
	struct fx *f = *state;
	uint32_t timer = 0;
	int fd, ufd;

	f->conf.send_timeout_ms = 1000;
	start(state);
	fd = accept_one(f);
	ufd = spliced(f, fd);
	timer = endpoint_ref_id(f->l.slot_conns, 0);
	deliver(f, ufd, "download", 8); /* forwarded to fd, never sent */
	assert_true(endpoint_timer(&f->ep, timer, loop_now()));
	assert_int_equal(atomic_load(&f->l.stats.active), 1);
	assert_true(endpoint_timer(&f->ep, timer, loop_now() + 2 * NS_PER_SEC));
	assert_int_equal(atomic_load(&f->l.stats.ended[SNI_END_STALLED]), 1);
	assert_int_equal(atomic_load(&f->l.stats.active), 0);
	assert_int_equal(atomic_load(&f->l.stats.memory), 0);
}

/* While the worker's pool runs short (fewer than an eighth free outside
 * the reserve), a side that takes nothing is reset after 5 s, not after
 * send-timeout. */
static void test_sni_a_short_pool_resets_a_stalled_side_sooner(void **state)
{
	struct fx *f = *state;
	uint32_t timer;
	int fd, ufd;

	f->conf.send_timeout_ms = 60000;
	atomic_store(&f->loop.st.stream_pool, 256);
	atomic_store(&f->loop.st.stream_reserve, 32);
	start(state);
	fd = accept_one(f);
	ufd = spliced(f, fd);
	timer = endpoint_ref_id(f->l.slot_conns, 0);
	deliver(f, ufd, "download", 8);
	/* A pool with room: 6 s is not enough. */
	atomic_store(&f->loop.st.stream_chunks, 100);
	assert_true(endpoint_timer(&f->ep, timer, loop_now() + 6 * NS_PER_SEC));
	assert_int_equal(atomic_load(&f->l.stats.active), 1);
	/* 200 of 256 in use, 24 free outside the reserve: it is. */
	atomic_store(&f->loop.st.stream_chunks, 200);
	assert_true(endpoint_timer(&f->ep, timer, loop_now() + 6 * NS_PER_SEC));
	assert_int_equal(atomic_load(&f->l.stats.ended[SNI_END_STALLED]), 1);
	assert_int_equal(atomic_load(&f->l.stats.active), 0);
}

/* Connect a.test on the newest connection fd and send its preread. */
static int spliced_last(struct fx *f, int fd)
{
	uint8_t h[512];
	size_t n = hello(h, "a.test");
	struct fake_call *c, *s;

	deliver(f, fd, h, n);
	c = last(f->loop.connects, f->loop.nconnects);
	assert_true(endpoint_connected(&f->ep, c->id, 0));
	s = last(f->loop.sends, f->loop.nsends);
	assert_true(endpoint_sent(&f->ep, s->id, (int)n));
	return c->fd;
}

/* One source holds at most SNI_PIN_CAP of the pool's chunks (16 of the
 * default 256): 8 connections with 2 chunks each in flight (clients that
 * do not read), and the 9th's reads wait until one comes back. */
static void test_sni_a_source_at_its_cap_of_chunks_waits_for_one_back(void **state)
{
	struct fx *f = *state;
	int fd[9], ufd[9];
	struct fake_call *first = NULL;
	unsigned r;

	f->conf.max_connections = 16;
	f->conf.max_per_ip = 16;
	start(state);
	assert_int_equal(f->l.pin.cap, 16);
	for (int i = 0; i < 8; i++) {
		fd[i] = accept_one(f);
		ufd[i] = spliced_last(f, fd[i]);
		deliver(f, ufd[i], "one", 3);
		if (i == 0)
			first = last(f->loop.sends, f->loop.nsends);
		deliver(f, ufd[i], "two", 3);
	}
	assert_int_equal(atomic_load(&f->l.stats.deferred), 0);
	fd[8] = accept_one(f);
	r = f->loop.nreads;
	ufd[8] = spliced_last(f, fd[8]);
	assert_int_equal(f->loop.nreads, r); /* neither side read */
	assert_int_equal(atomic_load(&f->l.stats.deferred), 2);
	assert_int_equal(reads_of(f, ufd[8]), 0);
	/* The first connection's first chunk is sent: the 9th reads. */
	assert_true(endpoint_sent(&f->ep, first->id, 3));
	assert_int_equal(reads_of(f, ufd[8]), 1);
	assert_true(f->loop.nreads >= r + 2);
}

/* A read answered in the loop turn of its accept carries that turn's now,
 * read before the accept's own clock: the preread's time is still a small
 * one, in a finite bucket (it once wrapped to 1.8e10 s). */
static void test_sni_a_preread_ended_in_its_accepts_turn_is_timed_right(void **state)
{
	struct fx *f = start(state);
	uint8_t h[512], buf[LOOP_STREAM_CHUNK];
	size_t n = hello(h, "a.test");
	struct loop_dgram d = {.data = buf, .len = n};
	uint64_t turn = loop_now();
	int fd = accept_one(f);

	memcpy(buf, h, n);
	d.now = turn;
	assert_true(endpoint_stream(&f->ep, last(f->loop.reads, f->loop.nreads)->id, &d));
	(void)fd;
	assert_int_equal(atomic_load(&f->l.stats.preread_count), 1);
	assert_true(atomic_load(&f->l.stats.preread_ns) < NS_PER_SEC);
	assert_int_equal(atomic_load(&f->l.stats.preread_hist[SNI_PREREAD_BUCKETS]), 0);
}

/* The preread bytes go upstream in one send, from the connection's own
 * buffer: a connection closed while that send is out keeps the buffer
 * (and its slot) until the send's on_sent, which del_socket still gives. */
static void test_sni_a_closed_connection_keeps_its_preread_until_on_sent(void **state)
{
	struct fx *f = *state;
	uint8_t h[512];
	size_t n;
	int fd;
	struct fake_call *s;

	f->conf.idle_timeout_ms = 1000;
	start(state);
	fd = accept_one(f);
	n = hello(h, "a.test");
	deliver(f, fd, h, n);
	assert_true(endpoint_connected(&f->ep, f->loop.connects[0].id, 0));
	s = last(f->loop.sends, f->loop.nsends);
	assert_int_equal(s->len, n);
	assert_true(endpoint_timer(&f->ep, endpoint_ref_id(f->l.slot_conns, 0),
				   loop_now() + 2 * NS_PER_SEC));
	assert_int_equal(atomic_load(&f->l.stats.ended[SNI_END_IDLE]), 1);
	assert_int_equal(atomic_load(&f->l.stats.active), 0);
	/* Closed, but the loop may still read the bytes. */
	assert_memory_equal(s->ptr, h, n);
	assert_true(atomic_load(&f->l.stats.memory) > 0);
	assert_true(endpoint_sent(&f->ep, s->id, -ECANCELED));
	assert_int_equal(atomic_load(&f->l.stats.memory), 0);
	/* And the listener goes on. */
	fd = accept_one(f);
	assert_int_equal(atomic_load(&f->l.stats.active), 1);
}

/* The tunnel's hook (rung 3): what it was handed, and what it answers. */
struct taken {
	int rc;
	unsigned n, worker;
	int fd;
	union etr_sockaddr peer;
	uint8_t pre[1024];
	size_t len;
};

static int take(void *arg, unsigned worker, int fd, const union etr_sockaddr *peer,
		const uint8_t *pre, size_t len)
{
	struct taken *t = arg;

	t->n++;
	t->worker = worker;
	t->fd = fd;
	t->peer = *peer;
	t->len = len;
	memcpy(t->pre, pre, len < sizeof(t->pre) ? len : sizeof(t->pre));
	return t->rc;
}

/* refused() again on a listener that has seen others: the count-th of
 * why, no connect or send of its own, closed without a byte. */
static void refused_nth(struct fx *f, const void *p, size_t n, enum sni_result why, uint64_t count)
{
	unsigned connects = f->loop.nconnects, sends = f->loop.nsends;
	uint8_t buf[64];
	int fd = accept_one(f);

	deliver(f, fd, p, n);
	assert_int_equal(result(f, why), count);
	assert_int_equal(f->loop.nconnects, connects);
	assert_int_equal(f->loop.nsends, sends);
	assert_int_equal(client_read(f->clients[f->nclients - 1], buf, sizeof(buf)), 0);
	deliver(f, fd, "", 0);
	assert_int_equal(atomic_load(&f->l.stats.lingering), 0);
}

static struct fx *start_tunnel(void **state, struct taken *t, const char *name)
{
	struct fx *f = start(state);

	f->sh.tunnel.take = take;
	f->sh.tunnel.arg = t;
	assert_int_equal(sni_tunnel_set_name(&f->sh, name, strlen(name)), 0);
	return f;
}

/* The tunnel's name (any case, checked before the routes: a.test has
 * one) hands the connection over: its fd, not closed, no del_socket, and
 * every byte read; the slot, its counts and memory are free again. */
static void test_sni_the_tunnel_name_is_handed_over_before_the_routes(void **state)
{
	struct taken t = {.rc = 0};
	struct fx *f = start_tunnel(state, &t, "A.Test");
	uint8_t h[512];
	size_t n = hello(h, "a.TEST");
	int fd = accept_one(f);

	deliver(f, fd, h, 10);
	assert_int_equal(t.n, 0);
	memcpy(h + n, "early", 5);
	deliver(f, fd, h + 10, n + 5 - 10);
	assert_int_equal(t.n, 1);
	assert_int_equal(t.fd, fd);
	assert_int_equal(t.worker, 0);
	assert_int_equal(t.len, n + 5);
	assert_memory_equal(t.pre, h, n + 5);
	assert_int_equal(t.peer.sa.sa_family, AF_INET);
	assert_int_equal(result(f, SNI_TUNNEL), 1);
	assert_int_equal(f->loop.nconnects, 0);
	assert_int_equal(f->loop.nsends, 0);
	assert_int_equal(f->loop.ndels, 0);
	assert_int_equal(atomic_load(&f->l.stats.active), 0);
	assert_int_equal(atomic_load(&f->l.stats.preread), 0);
	assert_int_equal(atomic_load(&f->l.stats.memory), 0);
	assert_int_equal(atomic_load(&f->sh.l[0].active), 0);
	/* The fd is open (the hook's now): the client reads nothing yet. */
	assert_true(fcntl(fd, F_GETFD) >= 0);
	assert_true(still_open(f->clients[0]));
	close(fd);
}

/* Only that name: another is routed as ever, a name under a wildcard
 * tunnel name cannot be (a wildcard is refused), nor a suffix. */
static void test_sni_only_the_exact_tunnel_name_is_handed_over(void **state)
{
	struct taken t = {.rc = 0};
	struct fx *f = start_tunnel(state, &t, "tunnel.r1.test");
	uint8_t h[512];
	size_t n = hello(h, "a.test");
	int fd = accept_one(f);

	assert_int_equal(sni_tunnel_set_name(&f->sh, "*.r1.test", 9), -1);
	assert_int_equal(sni_tunnel_set_name(&f->sh, "a..test", 7), -1);
	assert_int_equal(sni_tunnel_set_name(&f->sh, "a.test.", 7), -1);
	deliver(f, fd, h, n);
	assert_int_equal(f->loop.nconnects, 1);
	assert_int_equal(t.n, 0);
	n = hello(h, "x.tunnel.r1.test");
	refused_nth(f, h, n, SNI_UNKNOWN_NAME, 1);
	n = hello(h, "r1.test");
	refused_nth(f, h, n, SNI_UNKNOWN_NAME, 2);
	assert_int_equal(t.n, 0);
}

/* A new name is in force for the next hello; none (length 0) hands
 * nothing over; nor does a name without a hook. */
static void test_sni_the_tunnel_name_changes_and_goes(void **state)
{
	struct taken t = {.rc = 0};
	struct fx *f = start_tunnel(state, &t, "old.test");
	uint8_t h[512];
	size_t n = hello(h, "new.test");

	refused(f, h, n, SNI_UNKNOWN_NAME);
	assert_int_equal(sni_tunnel_set_name(&f->sh, "new.test", 8), 0);
	deliver(f, accept_one(f), h, n);
	assert_int_equal(t.n, 1);
	close(t.fd);
	assert_int_equal(sni_tunnel_set_name(&f->sh, "", 0), 0);
	refused_nth(f, h, n, SNI_UNKNOWN_NAME, 2);
	assert_int_equal(t.n, 1);
	assert_int_equal(sni_tunnel_set_name(&f->sh, "new.test", 8), 0);
	f->sh.tunnel.take = NULL;
	refused_nth(f, h, n, SNI_UNKNOWN_NAME, 3);
	assert_int_equal(t.n, 1);
}

/* A hook that cannot take it: refused without a byte. */
static void test_sni_a_tunnel_hook_that_refuses_closes_without_a_byte(void **state)
{
	struct taken t = {.rc = -1};
	struct fx *f = start_tunnel(state, &t, "tunnel.r1.test");
	uint8_t h[512];
	size_t n = hello(h, "tunnel.r1.test");

	refused(f, h, n, SNI_NO_RESOURCES);
	assert_int_equal(t.n, 1);
	assert_int_equal(result(f, SNI_TUNNEL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	    T(test_sni_a_known_name_is_connected_sent_unchanged_and_spliced),
	    T(test_sni_a_direction_reads_one_chunk_ahead_and_shuts_after_it),
	    T(test_sni_a_failed_send_with_a_read_ahead_resets),
	    T(test_sni_a_proxy_v2_route_sends_the_header_first),
	    T(test_sni_an_unknown_name_is_refused_without_a_byte),
	    T(test_sni_the_wildcard_does_not_match_its_suffix),
	    T(test_sni_plain_http_is_refused_as_not_tls),
	    T(test_sni_a_preread_timeout_refuses),
	    T(test_sni_over_max_connections_is_refused),
	    T(test_sni_over_max_connections_per_ip_is_refused),
	    T(test_sni_a_refusal_by_a_cap_closes_at_once),
	    T(test_sni_a_lingering_connection_counts_for_its_address),
	    T(test_sni_lingering_connections_are_capped),
	    T(test_sni_over_max_preread_the_oldest_of_the_most_gives_way),
	    T(test_sni_over_max_preread_a_stale_preread_gives_way_first),
	    T(test_sni_over_max_preread_none_here_is_refused),
	    T(test_sni_connecting_connections_count_under_max_preread),
	    T(test_sni_a_control_route_to_the_listener_itself_is_refused),
	    T(test_sni_a_drain_during_the_preread_refuses),
	    T(test_sni_draining_refuses_new_connections),
	    T(test_sni_a_failed_connect_refuses_without_a_byte),
	    T(test_sni_control_routes_swap_and_close_only_the_removed_routes),
	    T(test_sni_a_control_route_never_beats_the_files),
	    T(test_sni_the_set_in_force_again_changes_nothing_and_logs_nothing),
	    T(test_sni_an_idle_splice_is_closed),
	    T(test_sni_a_side_that_takes_nothing_for_send_timeout_is_reset),
	    T(test_sni_a_short_pool_resets_a_stalled_side_sooner),
	    T(test_sni_a_source_at_its_cap_of_chunks_waits_for_one_back),
	    T(test_sni_a_closed_connection_keeps_its_preread_until_on_sent),
	    T(test_sni_a_preread_ended_in_its_accepts_turn_is_timed_right),
	    T(test_sni_the_tunnel_name_is_handed_over_before_the_routes),
	    T(test_sni_only_the_exact_tunnel_name_is_handed_over),
	    T(test_sni_the_tunnel_name_changes_and_goes),
	    T(test_sni_a_tunnel_hook_that_refuses_closes_without_a_byte),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
