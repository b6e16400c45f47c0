/* SPDX-License-Identifier: ISC */
/* etrelay-tcpload: TLS clients for an SNI relay, without TLS. Every
 * connection sends one canned ClientHello (built once, with the server name
 * to route by) and then, by mode: reads the backend's answer to its end and
 * closes (new connections per second), streams bytes through (bulk), or
 * holds the connection idle (memory per connection). For bench/compare-sni,
 * with etrelay-tcpback as the backend. One thread, epoll, non-blocking. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "bench.h"
#include "hello.h"
#include "hist.h"

#define TL_EVENTS      256
#define TL_CONNS_MAX   100000
#define TL_BUF	       (256 * 1024) /* bulk send buffer; receive buffer */
#define TL_TURN_BYTES  (1 << 20)    /* bulk: bytes per connection per wake-up */
#define TL_SCAN_NS     (50 * BENCH_NS_PER_MS)
#define TL_MAX_WAIT_NS (10 * BENCH_NS_PER_MS)
#define TL_SIGNAL_TAG  UINT32_MAX

enum tl_mode { TL_CONN, TL_BULK, TL_IDLE };
enum tl_dir { TL_UP = 1, TL_DOWN = 2, TL_BOTH = 3 };

#define PROG "etrelay-tcpload"

static const char *const mode_names[] = {"conn", "bulk", "idle"};
static const char *const dir_names[] = {"", "up", "down", "both"};

static const char usage[] =
    "usage: etrelay-tcpload --target ADDR:PORT [options]\n"
    "\n"
    "TLS clients for an SNI relay (no TLS beyond the ClientHello): connection\n"
    "rate, bulk throughput or idle connections, with etrelay-tcpback behind.\n"
    "\n"
    "  -t, --target ADDR:PORT   the relay (or etrelay-tcpback itself)\n"
    "  -m, --mode M             conn: C connections at once, each sends the\n"
    "                           hello, reads the answer to EOF and closes, a new\n"
    "                           one in its place (default);\n"
    "                           bulk: C connections stream bytes for the whole\n"
    "                           run (backend --sink for up, --source for down);\n"
    "                           idle: open C connections, each reads --expect\n"
    "                           bytes, then hold them until --duration ends or\n"
    "                           SIGTERM\n"
    "  -c, --conns C            connections at once (1..100000; 100)\n"
    "  -n, --sni NAME           server name in the hello (svc1.example.com)\n"
    "  --hello-size B           handshake message bytes (1800, like a browser\n"
    "                           with a post-quantum key share; 160..65536)\n"
    "  --record B               TLS record payload at most B bytes (16384)\n"
    "  -e, --expect N           conn: answer bytes each connection must read\n"
    "                           before EOF (1024); idle: bytes to read before\n"
    "                           it counts as open (1)\n"
    "  --dir D                  bulk: up, down or both (up)\n"
    "  -g, --opening-max G      idle: at most G connections opening at once (256)\n"
    "  -d, --duration DUR       measured time; idle: how long to hold (5s)\n"
    "  --warmup DUR             traffic before measuring (1s)\n"
    "  --drain DUR              conn: wait for the last ones after (1s)\n"
    "  --timeout DUR            a connection that makes no progress for DUR\n"
    "                           fails (5s)\n"
    "  --source-ips N           IPv4 loopback target: connection i comes from\n"
    "                           127.0.0.1 + (i mod N) (1..65536; 1)\n"
    "  -j, --json               one JSON object instead of the summary\n"
    "  -q, --quiet              nothing on stderr but errors and marks\n"
    "  --marks                  say on stderr when measuring starts and ends\n"
    "                           (idle: when all are open)\n"
    "  -h, --help               this text\n"
    "\n"
    "DUR is seconds, or a number with us, ms, s or m.\n";

struct tl_opts {
	union bench_sockaddr target;
	enum tl_mode mode;
	enum tl_dir dir;
	unsigned conns, opening_max, source_ips;
	size_t hello_size, record, expect;
	const char *sni;
	uint64_t duration, warmup, drain, timeout;
	bool json, quiet, marks;
};

enum tc_state { TC_FREE, TC_CONNECTING, TC_HELLO, TC_READ, TC_HOLD, TC_BULK };

struct tconn {
	int fd;
	enum tc_state state;
	bool out_armed;
	size_t sent;	   /* hello bytes sent */
	size_t got;	   /* answer bytes read */
	uint64_t t0, seen; /* started; last progress */
};

struct tl_count {
	uint64_t completed, fail_connect, fail_reset, fail_short, fail_timeout;
	uint64_t bytes_up, bytes_down;
};

struct tl {
	struct tl_opts o;
	struct tconn *c;
	uint32_t *freeq; /* conn: free slots */
	unsigned nfree;
	int ep, sfd;
	uint8_t hello[HELLO_MAX + 5 * 16];
	size_t hello_len;
	uint8_t *buf;
	uint64_t t0, m0, m1, end, next_scan;
	bool measuring, sending, stop;
	unsigned started, opening, holding; /* idle: opened so far, in progress, done */
	unsigned live;			    /* connections open */
	struct tl_count all, m;		    /* the whole run; the measured window */
	struct hist h;			    /* conn: connect to EOF, measured window */
	uint64_t t_all_open;		    /* idle: when the last one was open */
};

static void fail(struct tl *l, struct tconn *c, uint64_t *all_ctr, uint64_t *m_ctr);

static void close_conn(struct tl *l, struct tconn *c)
{
	close(c->fd);
	c->fd = -1;
	if (c->state == TC_HOLD && l->holding)
		l->holding--;
	if ((c->state == TC_CONNECTING || c->state == TC_HELLO || c->state == TC_READ) &&
	    l->o.mode == TL_IDLE && l->opening)
		l->opening--;
	c->state = TC_FREE;
	l->live--;
	if (l->o.mode == TL_CONN)
		l->freeq[l->nfree++] = (uint32_t)(c - l->c);
}

static void set_events(struct tl *l, struct tconn *c, bool out)
{
	struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0u)};

	if (c->out_armed == out)
		return;
	ev.data.u32 = (uint32_t)(c - l->c);
	epoll_ctl(l->ep, EPOLL_CTL_MOD, c->fd, &ev);
	c->out_armed = out;
}

static void fail(struct tl *l, struct tconn *c, uint64_t *all_ctr, uint64_t *m_ctr)
{
	(*all_ctr)++;
	if (l->measuring && l->sending)
		(*m_ctr)++;
	close_conn(l, c);
}

#define FAIL(l, c, what) fail(l, c, &(l)->all.what, &(l)->m.what)

/* The hello is out: read the answer, or stream. */
static void hello_sent(struct tl *l, struct tconn *c)
{
	if (l->o.mode == TL_BULK) {
		c->state = TC_BULK;
		set_events(l, c, l->o.dir & TL_UP);
	} else {
		c->state = TC_READ;
		set_events(l, c, false);
	}
}

static void send_hello(struct tl *l, struct tconn *c)
{
	while (c->sent < l->hello_len) {
		ssize_t n = send(c->fd, l->hello + c->sent, l->hello_len - c->sent, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN) {
				/* Still connecting, or the buffer is full. */
				set_events(l, c, true);
				return;
			}
			if (c->state == TC_CONNECTING)
				FAIL(l, c, fail_connect);
			else
				FAIL(l, c, fail_reset);
			return;
		}
		c->state = TC_HELLO;
		c->sent += (size_t)n;
		c->seen = bench_now();
	}
	hello_sent(l, c);
}

static int open_conn(struct tl *l, uint32_t i)
{
	struct tconn *c = &l->c[i];
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT};
	int fd = socket(l->o.target.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (l->o.source_ips > 1) {
		union bench_sockaddr src = {.in = {.sin_family = AF_INET}};
		int one = 1;

		src.in.sin_addr.s_addr = htonl(0x7f000001u + (l->started % l->o.source_ips));
		/* The port is picked at connect, per destination: no exhaustion. */
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		if (bind(fd, &src.sa, sizeof(src.in)) < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
	}
	l->started++;
	c->fd = fd;
	c->state = TC_CONNECTING;
	c->out_armed = true;
	c->sent = c->got = 0;
	c->t0 = c->seen = bench_now();
	l->live++;
	if (l->o.mode == TL_IDLE)
		l->opening++;
	ev.data.u32 = i;
	if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		FAIL(l, c, fail_connect);
		return 0;
	}
	if (connect(fd, &l->o.target.sa, bench_addr_len(&l->o.target)) < 0 &&
	    errno != EINPROGRESS) {
		FAIL(l, c, fail_connect);
		return 0;
	}
	send_hello(l, c);
	return 0;
}

static void on_read(struct tl *l, struct tconn *c, uint64_t now)
{
	for (size_t turn = 0; turn < TL_TURN_BYTES;) {
		/* Bulk bytes are dropped in the kernel, not copied. */
		ssize_t n = recv(c->fd, l->buf, TL_BUF, c->state == TC_BULK ? MSG_TRUNC : 0);

		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			FAIL(l, c, fail_reset);
			return;
		}
		if (n == 0) {
			if (c->state == TC_READ && l->o.mode == TL_CONN && c->got == l->o.expect) {
				l->all.completed++;
				if (l->measuring && l->sending) {
					l->m.completed++;
					hist_add(&l->h, now - c->t0);
				}
				close_conn(l, c);
			} else if (c->state == TC_READ || c->state == TC_HELLO ||
				   c->state == TC_CONNECTING) {
				FAIL(l, c, fail_short);
			} else {
				FAIL(l, c, fail_reset); /* bulk or idle: closed under us */
			}
			return;
		}
		turn += (size_t)n;
		c->seen = now;
		if (c->state == TC_BULK) {
			l->all.bytes_down += (uint64_t)n;
			if (l->measuring && l->sending)
				l->m.bytes_down += (uint64_t)n;
			continue;
		}
		c->got += (size_t)n;
		if (c->got > l->o.expect) {
			FAIL(l, c, fail_short); /* more than the backend should send */
			return;
		}
		if (l->o.mode == TL_IDLE && c->state == TC_READ && c->got == l->o.expect) {
			c->state = TC_HOLD;
			l->opening--;
			if (++l->holding == l->o.conns)
				l->t_all_open = now;
		}
	}
}

static void on_write(struct tl *l, struct tconn *c)
{
	if (c->state != TC_BULK) {
		if (c->state == TC_CONNECTING) {
			int err = 0;
			socklen_t len = sizeof(err);

			getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
			if (err) {
				FAIL(l, c, fail_connect);
				return;
			}
		}
		send_hello(l, c);
		return;
	}
	for (size_t turn = 0; turn < TL_TURN_BYTES;) {
		ssize_t n = send(c->fd, l->buf, TL_BUF, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno != EAGAIN)
				FAIL(l, c, fail_reset);
			return;
		}
		turn += (size_t)n;
		l->all.bytes_up += (uint64_t)n;
		if (l->measuring && l->sending)
			l->m.bytes_up += (uint64_t)n;
	}
}

static void scan_timeouts(struct tl *l, uint64_t now)
{
	if (now < l->next_scan)
		return;
	l->next_scan = now + TL_SCAN_NS;
	for (unsigned i = 0; i < l->o.conns; i++) {
		struct tconn *c = &l->c[i];

		if (c->state == TC_FREE || c->state == TC_HOLD || c->state == TC_BULK)
			continue;
		if (now - c->seen > l->o.timeout)
			FAIL(l, c, fail_timeout);
	}
}

static void open_more(struct tl *l)
{
	if (l->o.mode == TL_CONN) {
		/* A slot that fails at once comes back: once per turn. */
		for (unsigned k = l->nfree; l->sending && k && l->nfree; k--) {
			uint32_t i = l->freeq[--l->nfree];

			if (open_conn(l, i) < 0) {
				l->freeq[l->nfree++] = i; /* out of descriptors: next turn */
				break;
			}
		}
	} else if (l->o.mode == TL_IDLE) {
		while (l->started < l->o.conns && l->opening < l->o.opening_max)
			if (open_conn(l, l->started) < 0) {
				l->all.fail_connect++;
				l->started++;
			}
	}
}

static bool finished(struct tl *l, uint64_t now)
{
	if (l->stop || now >= l->end)
		return true;
	if (l->o.mode == TL_CONN)
		return !l->sending && l->live == 0;
	if (l->o.mode == TL_IDLE)
		return l->started == l->o.conns && l->opening == 0 && l->live == 0;
	return false;
}

static void run(struct tl *l)
{
	struct epoll_event ev[TL_EVENTS];

	l->t0 = bench_now();
	l->m0 = l->t0 + l->o.warmup;
	l->m1 = l->m0 + l->o.duration;
	l->end = l->m1 + l->o.drain;
	l->sending = true;
	l->next_scan = l->t0 + TL_SCAN_NS;
	if (l->o.mode == TL_BULK)
		for (unsigned i = 0; i < l->o.conns; i++)
			if (open_conn(l, i) < 0)
				l->all.fail_connect++;
	for (;;) {
		uint64_t now = bench_now(), w = TL_MAX_WAIT_NS;
		struct timespec ts;
		int n;

		if (l->o.mode == TL_IDLE) {
			/* Measuring is holding: the marks bracket it. */
			if (!l->measuring && l->started == l->o.conns && l->opening == 0) {
				l->measuring = true;
				l->m0 = now;
				l->m1 = now + l->o.duration;
				l->end = l->m1;
				if (l->o.marks)
					fprintf(stderr, "etrelay-tcpload: holding %u\n",
						l->holding);
			}
		} else if (!l->measuring && now >= l->m0) {
			l->measuring = true;
			l->m = (struct tl_count){0};
			if (l->o.marks)
				fputs("etrelay-tcpload: measuring\n", stderr);
		}
		if (l->sending && l->measuring && now >= l->m1) {
			l->sending = false;
			if (l->o.marks && l->o.mode != TL_IDLE)
				fputs("etrelay-tcpload: measured\n", stderr);
			if (l->o.mode != TL_CONN)
				break;
		}
		if (finished(l, now))
			break;
		scan_timeouts(l, now);
		open_more(l);
		if (!l->measuring && l->m0 > now && l->m0 - now < w)
			w = l->m0 - now;
		if (l->sending && l->measuring && l->m1 > now && l->m1 - now < w)
			w = l->m1 - now;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)w;
		n = epoll_pwait2(l->ep, ev, TL_EVENTS, &ts, NULL);
		now = bench_now();
		for (int i = 0; i < n; i++) {
			uint32_t tag = ev[i].data.u32;
			struct tconn *c;

			if (tag == TL_SIGNAL_TAG) {
				l->stop = true;
				continue;
			}
			c = &l->c[tag];
			if (c->state == TC_FREE)
				continue;
			if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR) &&
			    c->state != TC_CONNECTING) {
				on_read(l, c, now);
				if (c->state == TC_FREE)
					continue;
			}
			if (ev[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP) && c->out_armed)
				on_write(l, c);
		}
	}
}

static void report(const struct tl *l)
{
	const struct tl_opts *o = &l->o;
	const struct tl_count *m = &l->m;
	double secs = (double)o->duration / 1e9;
	uint64_t fails = m->fail_connect + m->fail_reset + m->fail_short + m->fail_timeout;
	uint64_t fails_all =
	    l->all.fail_connect + l->all.fail_reset + l->all.fail_short + l->all.fail_timeout;
	double gb = (double)(m->bytes_up + m->bytes_down) / 1e9;
	char a[BENCH_ADDR_STRLEN];

	bench_addr_str(&o->target.sa, a);
	if (o->json) {
		printf("{\"mode\":\"%s\",\"target\":\"%s\",\"conns\":%u,\"sni\":\"%s\","
		       "\"hello_bytes\":%zu,\"expect\":%zu,\"warmup_s\":%.3f,\"duration_s\":%.3f,"
		       "\"completed\":%llu,\"conn_per_s\":%.1f,\"failures\":%llu,"
		       "\"failures_run\":%llu,\"fail_connect\":%llu,\"fail_reset\":%llu,"
		       "\"fail_short\":%llu,\"fail_timeout\":%llu,"
		       "\"latency_us\":{\"p50\":%.1f,\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f},"
		       "\"dir\":\"%s\",\"bytes_up\":%llu,\"bytes_down\":%llu,\"gb_per_s\":%.4f,"
		       "\"holding\":%u,\"open_s\":%.3f,\"source_ips\":%u}\n",
		       mode_names[o->mode], a, o->conns, o->sni, l->hello_len, o->expect,
		       (double)o->warmup / 1e9, secs, (unsigned long long)m->completed,
		       (double)m->completed / secs, (unsigned long long)fails,
		       (unsigned long long)fails_all, (unsigned long long)l->all.fail_connect,
		       (unsigned long long)l->all.fail_reset, (unsigned long long)l->all.fail_short,
		       (unsigned long long)l->all.fail_timeout,
		       (double)hist_quantile(&l->h, 0.5) / 1e3,
		       (double)hist_quantile(&l->h, 0.99) / 1e3,
		       (double)hist_quantile(&l->h, 0.999) / 1e3, (double)l->h.max / 1e3,
		       o->mode == TL_BULK ? dir_names[o->dir] : "", (unsigned long long)m->bytes_up,
		       (unsigned long long)m->bytes_down, o->mode == TL_BULK ? gb / secs : 0.0,
		       l->holding, l->t_all_open ? (double)(l->t_all_open - l->t0) / 1e9 : 0.0,
		       o->source_ips ? o->source_ips : 1);
		return;
	}
	printf("etrelay-tcpload: %s, %u connection%s to %s, hello %zu B for %s\n",
	       mode_names[o->mode], o->conns, o->conns == 1 ? "" : "s", a, l->hello_len, o->sni);
	if (o->mode == TL_CONN)
		printf("  completed   %llu in %.2f s: %.0f conn/s\n"
		       "  latency     p50 %.1f us, p99 %.1f us, max %.1f us\n",
		       (unsigned long long)m->completed, secs, (double)m->completed / secs,
		       (double)hist_quantile(&l->h, 0.5) / 1e3,
		       (double)hist_quantile(&l->h, 0.99) / 1e3, (double)l->h.max / 1e3);
	else if (o->mode == TL_BULK)
		printf("  bytes       up %llu, down %llu in %.2f s: %.3f GB/s\n",
		       (unsigned long long)m->bytes_up, (unsigned long long)m->bytes_down, secs,
		       gb / secs);
	else
		printf("  holding     %u of %u (all open after %.2f s)\n", l->holding, o->conns,
		       l->t_all_open ? (double)(l->t_all_open - l->t0) / 1e9 : 0.0);
	printf("  failures    %llu measured, %llu in all: connect %llu, reset %llu, short %llu, "
	       "timeout %llu\n",
	       (unsigned long long)fails, (unsigned long long)fails_all,
	       (unsigned long long)l->all.fail_connect, (unsigned long long)l->all.fail_reset,
	       (unsigned long long)l->all.fail_short, (unsigned long long)l->all.fail_timeout);
}

static int parse_args(struct tl_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"target", required_argument, NULL, 't'},
	    {"mode", required_argument, NULL, 'm'},
	    {"conns", required_argument, NULL, 'c'},
	    {"sni", required_argument, NULL, 'n'},
	    {"hello-size", required_argument, NULL, 'Z'},
	    {"record", required_argument, NULL, 'R'},
	    {"expect", required_argument, NULL, 'e'},
	    {"dir", required_argument, NULL, 'X'},
	    {"opening-max", required_argument, NULL, 'g'},
	    {"duration", required_argument, NULL, 'd'},
	    {"warmup", required_argument, NULL, 'W'},
	    {"drain", required_argument, NULL, 'D'},
	    {"timeout", required_argument, NULL, 'T'},
	    {"source-ips", required_argument, NULL, 'S'},
	    {"json", no_argument, NULL, 'j'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"marks", no_argument, NULL, 'M'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	bool have_target = false, have_expect = false;
	/* in the order of enum tl_mode and of enum tl_dir */
	static const char *const modes[] = {"conn", "bulk", "idle", NULL};
	static const char *const dirs[] = {"up", "down", "both", NULL};
	unsigned long v;
	int c, k;

	memset(o, 0, sizeof(*o));
	o->mode = TL_CONN;
	o->dir = TL_UP;
	o->conns = 100;
	o->opening_max = 256;
	o->sni = "svc1.example.com";
	o->hello_size = 1800;
	o->record = 16384;
	o->expect = 1024;
	o->duration = 5 * BENCH_NS_PER_SEC;
	o->warmup = BENCH_NS_PER_SEC;
	o->drain = BENCH_NS_PER_SEC;
	o->timeout = 5 * BENCH_NS_PER_SEC;
	while ((c = getopt_long(argc, argv, "t:m:c:n:e:g:d:jqh", opts, NULL)) != -1) {
		int bad = 0;

		switch (c) {
		case 't':
			if (bench_opt_addr(PROG, "target", optarg, &o->target) < 0)
				return -1;
			have_target = true;
			break;
		case 'm':
			if ((k = bench_opt_choice(PROG, "mode", optarg, modes)) < 0)
				return -1;
			o->mode = (enum tl_mode)k;
			break;
		case 'X':
			if ((k = bench_opt_choice(PROG, "dir", optarg, dirs)) < 0)
				return -1;
			o->dir = (enum tl_dir)(k + 1);
			break;
		case 'c':
			bad = bench_opt_uint(PROG, "conns", optarg, 1, TL_CONNS_MAX, &v);
			o->conns = (unsigned)v;
			break;
		case 'n':
			if (strlen(optarg) == 0 || strlen(optarg) > HELLO_NAME_MAX) {
				fprintf(stderr, "etrelay-tcpload: --sni: 1 to %d characters\n",
					HELLO_NAME_MAX);
				return -1;
			}
			o->sni = optarg;
			break;
		case 'Z':
			bad = bench_opt_uint(PROG, "hello-size", optarg, HELLO_MIN, HELLO_MAX, &v);
			o->hello_size = v;
			break;
		case 'R':
			bad = bench_opt_uint(PROG, "record", optarg, 64, 16384, &v);
			o->record = v;
			break;
		case 'e':
			bad = bench_opt_uint(PROG, "expect", optarg, 0, 1ul << 30, &v);
			o->expect = v;
			have_expect = true;
			break;
		case 'g':
			bad = bench_opt_uint(PROG, "opening-max", optarg, 1, TL_CONNS_MAX, &v);
			o->opening_max = (unsigned)v;
			break;
		case 'd':
			bad = bench_opt_dur(PROG, "duration", optarg, &o->duration);
			break;
		case 'W':
			bad = bench_opt_dur(PROG, "warmup", optarg, &o->warmup);
			break;
		case 'D':
			bad = bench_opt_dur(PROG, "drain", optarg, &o->drain);
			break;
		case 'T':
			bad = bench_opt_dur(PROG, "timeout", optarg, &o->timeout);
			break;
		case 'S':
			bad = bench_opt_uint(PROG, "source-ips", optarg, 1, 65536, &v);
			o->source_ips = (unsigned)v;
			break;
		case 'j':
			o->json = true;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'M':
			o->marks = true;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(0);
		default:
			fputs(usage, stderr);
			return -1;
		}
		if (bad)
			return -1;
	}
	if (!have_target || optind != argc) {
		fputs(usage, stderr);
		return -1;
	}
	if (o->duration == 0) {
		fprintf(stderr, "etrelay-tcpload: --duration must be more than 0\n");
		return -1;
	}
	if (o->mode == TL_IDLE && !have_expect)
		o->expect = 1;
	if (o->source_ips > 1 && (o->target.sa.sa_family != AF_INET ||
				  (ntohl(o->target.in.sin_addr.s_addr) >> 24) != 127)) {
		fprintf(stderr, "etrelay-tcpload: --source-ips wants an IPv4 loopback target "
				"(127.0.0.0/8)\n");
		return -1;
	}
	return 0;
}

static int setup(struct tl *l)
{
	struct epoll_event ev = {.events = EPOLLIN};
	sigset_t set;
	int err;

	l->hello_len =
	    hello_build(l->hello, sizeof(l->hello), l->o.sni, l->o.hello_size, l->o.record);
	if (!l->hello_len) {
		fprintf(stderr, "etrelay-tcpload: no hello of %zu bytes for %s\n", l->o.hello_size,
			l->o.sni);
		return -1;
	}
	err = bench_raise_nofile(l->o.conns + 64);
	if (err < 0) {
		fprintf(stderr, "etrelay-tcpload: %u connections need %u descriptors: %s\n",
			l->o.conns, l->o.conns + 64, strerror(-err));
		return -1;
	}
	l->c = calloc(l->o.conns, sizeof(*l->c));
	l->freeq = calloc(l->o.conns, sizeof(*l->freeq));
	l->buf = malloc(TL_BUF);
	if (!l->c || !l->freeq || !l->buf)
		return -1;
	for (size_t i = 0; i < TL_BUF; i++)
		l->buf[i] = (uint8_t)('A' + i % 26);
	for (unsigned i = 0; i < l->o.conns; i++) {
		l->c[i].fd = -1;
		l->freeq[l->nfree++] = l->o.conns - 1 - i;
	}
	hist_reset(&l->h);
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	if (l->ep < 0)
		return -1;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	l->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	ev.data.u32 = TL_SIGNAL_TAG;
	if (l->sfd < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, l->sfd, &ev) < 0)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct tl *l = calloc(1, sizeof(*l));
	int rc = 0;

	if (!l)
		return 1;
	l->ep = l->sfd = -1;
	if (parse_args(&l->o, argc, argv) < 0) {
		rc = 2;
		goto out;
	}
	prctl(PR_SET_TIMERSLACK, 1UL);
	if (setup(l) < 0) {
		rc = 1;
		goto out;
	}
	run(l);
	report(l);
out:
	for (unsigned i = 0; l->c && i < l->o.conns; i++)
		if (l->c[i].fd >= 0)
			close(l->c[i].fd);
	if (l->ep >= 0)
		close(l->ep);
	if (l->sfd >= 0)
		close(l->sfd);
	free(l->c);
	free(l->freeq);
	free(l->buf);
	free(l);
	return rc;
}
