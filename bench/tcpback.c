/* SPDX-License-Identifier: ISC */
/* etrelay-tcpback: the TLS service behind an SNI relay, for benchmarks. It
 * reads the ClientHello a relay forwards (to its last byte, across records)
 * and then, by mode: answers N bytes and closes (new connections per
 * second), answers N bytes and holds the connection (idle memory), reads
 * and discards everything (bulk sink) or sends without end (bulk source).
 * One thread, epoll, non-blocking sockets. */
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

#define BACK_EVENTS	256
#define BACK_ACCEPTS	64	     /* accept4 calls per wake-up */
#define BACK_BUF	(256 * 1024) /* receive and send buffer */
#define BACK_TURN_BYTES (1 << 20)    /* bytes per connection per wake-up */
#define BACK_CONNS_MAX	200000
#define BACK_LISTEN_TAG UINT32_MAX
#define BACK_SIGNAL_TAG (UINT32_MAX - 1)

enum back_mode { BACK_ANSWER, BACK_SINK, BACK_SOURCE };

static const char usage[] =
    "usage: etrelay-tcpback --listen ADDR:PORT [options]\n"
    "\n"
    "A TLS service stand-in behind an SNI relay: reads the ClientHello, then\n"
    "answers, sinks or sources bytes. For etrelay-tcpload and bench/compare-sni.\n"
    "\n"
    "  -l, --listen ADDR:PORT   address to serve (IPv4 or [IPv6])\n"
    "  -a, --answer N           after the hello, send N bytes and close (1024)\n"
    "  --hold                   with --answer: keep the connection open after\n"
    "                           the answer until the peer closes (idle clients)\n"
    "  --sink                   after the hello, read and discard until the peer\n"
    "                           closes\n"
    "  --source                 after the hello, send without end (and discard\n"
    "                           what comes) until the peer closes\n"
    "  -d, --duration DUR       exit after DUR (0 or none: at SIGTERM/SIGINT)\n"
    "  -q, --quiet              no statistics at exit\n"
    "  -h, --help               this text\n";

enum conn_state { CONN_FREE, CONN_HELLO, CONN_ANSWER, CONN_HOLD, CONN_SINK, CONN_SOURCE };

struct conn {
	enum conn_state state;
	bool out_armed; /* EPOLLOUT asked for */
	size_t left;	/* answer bytes still to send */
	struct hello_end he;
};

struct back {
	int lfd, ep, sfd;
	enum back_mode mode;
	bool hold, quiet;
	size_t answer;
	uint64_t deadline;
	struct conn *c; /* by fd */
	unsigned nc;
	uint8_t *buf;
	uint64_t accepted, hellos, bad, resets, answered, bytes_in, bytes_out, open, open_max;
};

static void conn_close(struct back *b, int fd)
{
	b->c[fd].state = CONN_FREE;
	b->open--;
	close(fd);
}

static void arm_out(struct back *b, int fd, bool on)
{
	struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0u)};

	if (b->c[fd].out_armed == on)
		return;
	ev.data.u32 = (uint32_t)fd;
	epoll_ctl(b->ep, EPOLL_CTL_MOD, fd, &ev);
	b->c[fd].out_armed = on;
}

/* Send what this connection owes; false when it was closed. */
static bool do_send(struct back *b, int fd)
{
	struct conn *c = &b->c[fd];
	size_t turn = 0;

	while (c->state == CONN_SOURCE || c->left) {
		size_t k = c->state == CONN_SOURCE ? BACK_BUF : c->left;
		ssize_t n;

		if (k > BACK_BUF)
			k = BACK_BUF;
		n = send(fd, b->buf, k, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN) {
				arm_out(b, fd, true);
				return true;
			}
			b->resets++;
			conn_close(b, fd);
			return false;
		}
		b->bytes_out += (uint64_t)n;
		turn += (size_t)n;
		if (c->state != CONN_SOURCE)
			c->left -= (size_t)n;
		if (turn >= BACK_TURN_BYTES) {
			arm_out(b, fd, true); /* more next turn: others get a say */
			return true;
		}
	}
	arm_out(b, fd, false);
	if (c->state == CONN_ANSWER) {
		b->answered++;
		if (!b->hold) {
			conn_close(b, fd);
			return false;
		}
		c->state = CONN_HOLD;
	}
	return true;
}

static void hello_done(struct back *b, int fd)
{
	struct conn *c = &b->c[fd];

	b->hellos++;
	if (b->mode == BACK_SINK) {
		c->state = CONN_SINK;
		return;
	}
	if (b->mode == BACK_SOURCE) {
		c->state = CONN_SOURCE;
	} else {
		c->state = CONN_ANSWER;
		c->left = b->answer;
	}
	do_send(b, fd);
}

static void on_readable(struct back *b, int fd)
{
	size_t turn = 0;

	while (turn < BACK_TURN_BYTES && b->c[fd].state != CONN_FREE) {
		struct conn *c = &b->c[fd];
		/* Past the hello, the payload is dropped in the kernel. */
		int flags = c->state == CONN_HELLO ? 0 : MSG_TRUNC;
		ssize_t n = recv(fd, b->buf, BACK_BUF, flags);

		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			if (n < 0)
				b->resets++;
			conn_close(b, fd);
			return;
		}
		b->bytes_in += (uint64_t)n;
		turn += (size_t)n;
		if (c->state == CONN_HELLO) {
			hello_end_feed(&c->he, b->buf, (size_t)n);
			if (c->he.bad) {
				b->bad++;
				conn_close(b, fd);
				return;
			}
			if (c->he.done)
				hello_done(b, fd);
		}
	}
}

static void on_accept(struct back *b)
{
	for (int i = 0; i < BACK_ACCEPTS; i++) {
		struct epoll_event ev = {.events = EPOLLIN};
		int fd = accept4(b->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		if ((unsigned)fd >= b->nc) {
			close(fd);
			continue;
		}
		memset(&b->c[fd], 0, sizeof(b->c[fd]));
		b->c[fd].state = CONN_HELLO;
		ev.data.u32 = (uint32_t)fd;
		if (epoll_ctl(b->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			continue;
		}
		b->accepted++;
		if (++b->open > b->open_max)
			b->open_max = b->open;
	}
}

static int setup(struct back *b, const union bench_sockaddr *addr)
{
	struct epoll_event ev = {.events = EPOLLIN};
	sigset_t set;
	int one = 1;

	bench_raise_nofile(BACK_CONNS_MAX);
	b->nc = BACK_CONNS_MAX;
	b->c = calloc(b->nc, sizeof(*b->c));
	b->buf = calloc(1, BACK_BUF);
	if (!b->c || !b->buf)
		return -ENOMEM;
	for (size_t i = 0; i < BACK_BUF; i++)
		b->buf[i] = (uint8_t)('a' + i % 26);
	b->lfd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (b->lfd < 0)
		return -errno;
	setsockopt(b->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(b->lfd, &addr->sa, bench_addr_len(addr)) < 0 || listen(b->lfd, 4096) < 0)
		return -errno;
	b->ep = epoll_create1(EPOLL_CLOEXEC);
	if (b->ep < 0)
		return -errno;
	ev.data.u32 = BACK_LISTEN_TAG;
	if (epoll_ctl(b->ep, EPOLL_CTL_ADD, b->lfd, &ev) < 0)
		return -errno;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	b->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (b->sfd < 0)
		return -errno;
	ev.data.u32 = BACK_SIGNAL_TAG;
	if (epoll_ctl(b->ep, EPOLL_CTL_ADD, b->sfd, &ev) < 0)
		return -errno;
	return 0;
}

static void run(struct back *b)
{
	struct epoll_event ev[BACK_EVENTS];

	for (;;) {
		uint64_t now = bench_now();
		int timeout = -1, n;

		if (b->deadline) {
			if (now >= b->deadline)
				return;
			timeout = (int)((b->deadline - now) / BENCH_NS_PER_MS) + 1;
		}
		n = epoll_wait(b->ep, ev, BACK_EVENTS, timeout);
		if (n < 0 && errno != EINTR)
			return;
		for (int i = 0; i < n; i++) {
			uint32_t tag = ev[i].data.u32;

			if (tag == BACK_LISTEN_TAG) {
				on_accept(b);
				continue;
			}
			if (tag == BACK_SIGNAL_TAG)
				return;
			if (b->c[tag].state == CONN_FREE)
				continue; /* closed earlier in this batch */
			if (ev[i].events & EPOLLOUT && !do_send(b, (int)tag))
				continue;
			if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				on_readable(b, (int)tag);
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"answer", required_argument, NULL, 'a'},
	    {"hold", no_argument, NULL, 'H'},
	    {"sink", no_argument, NULL, 'S'},
	    {"source", no_argument, NULL, 'O'},
	    {"duration", required_argument, NULL, 'd'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct back *b = calloc(1, sizeof(*b));
	union bench_sockaddr listen;
	bool have_listen = false;
	char a[BENCH_ADDR_STRLEN];
	unsigned long v;
	uint64_t dur = 0;
	int c, err, rc = 0;

	if (!b)
		return 1;
	b->lfd = b->ep = b->sfd = -1;
	b->answer = 1024;
	while ((c = getopt_long(argc, argv, "l:a:d:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (bench_opt_addr("etrelay-tcpback", "listen", optarg, &listen) < 0)
				return 2;
			have_listen = true;
			break;
		case 'a':
			if (bench_opt_uint("etrelay-tcpback", "answer", optarg, 0, 1u << 30, &v) <
			    0)
				return 2;
			b->answer = v;
			break;
		case 'H':
			b->hold = true;
			break;
		case 'S':
			b->mode = BACK_SINK;
			break;
		case 'O':
			b->mode = BACK_SOURCE;
			break;
		case 'd':
			if (bench_opt_dur("etrelay-tcpback", "duration", optarg, &dur) < 0)
				return 2;
			break;
		case 'q':
			b->quiet = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (!have_listen || optind != argc) {
		fputs(usage, stderr);
		return 2;
	}
	prctl(PR_SET_TIMERSLACK, 1UL);
	err = setup(b, &listen);
	if (err < 0) {
		fprintf(stderr, "etrelay-tcpback: %s: %s\n", bench_addr_str(&listen.sa, a),
			strerror(-err));
		rc = 1;
		goto out;
	}
	if (dur)
		b->deadline = bench_now() + dur;
	run(b);
	if (!b->quiet)
		fprintf(stderr,
			"etrelay-tcpback: accepted %llu, hellos %llu, not a hello %llu, answered "
			"%llu, resets %llu, bytes in %llu, out %llu, open %llu (at most %llu)\n",
			(unsigned long long)b->accepted, (unsigned long long)b->hellos,
			(unsigned long long)b->bad, (unsigned long long)b->answered,
			(unsigned long long)b->resets, (unsigned long long)b->bytes_in,
			(unsigned long long)b->bytes_out, (unsigned long long)b->open,
			(unsigned long long)b->open_max);
out:
	for (unsigned i = 0; b->c && i < b->nc; i++)
		if (b->c[i].state != CONN_FREE)
			close((int)i);
	if (b->lfd >= 0)
		close(b->lfd);
	if (b->ep >= 0)
		close(b->ep);
	if (b->sfd >= 0)
		close(b->sfd);
	free(b->c);
	free(b->buf);
	free(b);
	return rc;
}
