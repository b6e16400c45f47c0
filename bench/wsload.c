/* SPDX-License-Identifier: ISC */
/* etrelay-wsload: rung-3 clients for bench/tunnel. Each connection is TLS
 * (the tunnel's name as SNI) and a WebSocket upgrade GET PATH with
 * "Authorization: Bearer TOKEN", then sends datagrams (etrelay-load's
 * layout) as masked binary messages, one TLS record each, and counts the
 * binary messages echoed back. --udp sends the same datagrams from
 * connected UDP sockets instead (rung 1's kernel path). At a fixed total
 * rate, or each connection keeping --window datagrams in flight. One
 * thread, epoll, non-blocking after a blocking setup. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "bench.h"
#include "hist.h"

#define PROG	     "etrelay-wsload"
#define WL_CONNS_MAX 1000
#define WL_OUT_CAP   (256 * 1024) /* frames not yet taken by TLS, per connection */
#define WL_IN_CAP    (256 * 1024) /* plaintext not yet parsed, per connection */
#define WL_SIZE_MIN  BENCH_HDR
#define WL_SIZE_MAX  1400
#define WL_FRAME_MAX (WL_SIZE_MAX + 8) /* 2 + 2 (length) + 4 (mask) */
#define WL_EVENTS    256
/* A rate turn sends what 2 ms of the rate owe at most: a generator that
 * was not scheduled for longer skips the rest (counted) rather than
 * sending it as one burst, which would measure its own stall. */
#define WL_CATCH_UP_NS (2 * BENCH_NS_PER_MS)
#define WL_STALL_NS    (200 * BENCH_NS_PER_MS)
#define WL_SETUP_TRIES 100 /* upgrade attempts of the first connection, 100 ms apart */
#define WL_TIMEOUT_S   5

static const char usage[] =
    "usage: etrelay-wsload --connect ADDR:PORT [options]\n"
    "\n"
    "Rung-3 clients: TLS, a WebSocket upgrade with a bearer token, then each\n"
    "datagram a masked binary message, counted when it comes back.\n"
    "\n"
    "  --connect ADDR:PORT   the relay's SNI listener (with --udp: the echo)\n"
    "  --udp                 plain UDP from connected sockets (rung 1's path)\n"
    "  -c, --conns N         connections (1..1000; 1)\n"
    "  --sni NAME            server name and Host (the tunnel's name)\n"
    "  --path PATH           the upgrade's path (/t)\n"
    "  --token-prefix P      connection i sends token P<i> (tok-)\n"
    "  --sources N           connection i binds 127.0.0.<1 + i mod N> (1..250; 250):\n"
    "                        the relay limits connections per source\n"
    "  -s, --size B          datagram bytes (16..1400; 160)\n"
    "  -r, --rate R          datagrams per second in all, round robin (0: --window)\n"
    "  -w, --window W        each connection keeps W datagrams in flight (16)\n"
    "  --warmup DUR          traffic before measuring (1s)\n"
    "  -d, --duration DUR    measured time (3s)\n"
    "  --drain DUR           waiting for the last answers (0.5s)\n"
    "  --marks               say on stderr when measuring starts and ends\n"
    "  -h, --help            this text\n"
    "\n"
    "One JSON object on stdout: what was sent and came back in the measured\n"
    "window (a datagram counts in it when it was sent in it), latency, and\n"
    "what the generator could not send (its TLS buffer full) or skipped (not\n"
    "scheduled for more than 2 ms: the rest of what that time owed).\n";

struct conn {
	int fd;
	SSL *ssl;
	uint32_t id, seq, inflight;
	uint64_t last_rx;
	bool out_armed, closed;
	uint16_t close_code;
	uint8_t *out, *in;
	size_t out_off, out_len, in_len;
};

struct opts {
	union bench_sockaddr to;
	bool udp, marks;
	unsigned long conns, sources, size, rate, window;
	const char *sni, *path, *prefix;
	uint64_t warmup, duration, drain;
};

struct wl {
	struct opts o;
	struct conn *c;
	int ep;
	size_t flen; /* one frame's bytes (--udp: the datagram's) */
	uint64_t t0, ta, tb, end;
	uint64_t sent, sent_in, recv_in, blocked_in, skipped_in, bad, misdelivered, stalls;
	struct hist lat;
	uint32_t rr;
	uint64_t rng;
};

static volatile sig_atomic_t stop_now;

static void on_signal(int sig)
{
	(void)sig;
	stop_now = 1;
}

static uint32_t rng_next(struct wl *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return (uint32_t)w->rng;
}

static void die_ssl(const char *what, unsigned long i)
{
	char buf[256];
	unsigned long e = ERR_get_error();

	ERR_error_string_n(e, buf, sizeof(buf));
	fprintf(stderr, PROG ": connection %lu: %s: %s\n", i, what, e ? buf : "closed");
	exit(1);
}

/* The upgrade on a blocking socket; the bytes after the answer's blank
 * line stay in c->in. 0, -1 (refused: the answer's first line on stderr
 * when loud) or exits. */
static int upgrade(struct wl *w, struct conn *c, unsigned long i, bool loud)
{
	char req[1024], key[25];
	static const char b64[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	int n;
	size_t got = 0;
	char *end;

	/* 16 bytes in base64: the 22nd digit carries 2 bits, the rest zero. */
	for (int k = 0; k < 21; k++)
		key[k] = b64[rng_next(w) % 64];
	key[21] = b64[(rng_next(w) % 4) << 4];
	memcpy(key + 22, "==", 3);
	n = snprintf(req, sizeof(req),
		     "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		     "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
		     "Authorization: Bearer %s%lu\r\n\r\n",
		     w->o.path, w->o.sni, key, w->o.prefix, i);
	if (SSL_write(c->ssl, req, n) != n)
		die_ssl("the upgrade request", i);
	for (;;) {
		int r = SSL_read(c->ssl, c->in + got, (int)(WL_IN_CAP - 1 - got));

		if (r <= 0) {
			if (loud)
				fprintf(stderr, PROG ": connection %lu: no answer to the upgrade\n",
					i);
			return -1;
		}
		got += (size_t)r;
		c->in[got] = 0;
		if ((end = strstr((char *)c->in, "\r\n\r\n")) != NULL)
			break;
		if (got >= 4096) {
			fprintf(stderr, PROG ": connection %lu: an upgrade answer past 4 KiB\n", i);
			exit(1);
		}
	}
	if (strncmp((char *)c->in, "HTTP/1.1 101", 12) != 0) {
		if (loud)
			fprintf(stderr, PROG ": connection %lu: %.*s\n", i,
				(int)strcspn((char *)c->in, "\r\n"), (char *)c->in);
		return -1;
	}
	end += 4;
	c->in_len = got - (size_t)((uint8_t *)end - c->in);
	memmove(c->in, end, c->in_len);
	return 0;
}

static int open_socket(struct wl *w, unsigned long i)
{
	struct sockaddr_in src = {.sin_family = AF_INET};
	struct timeval tv = {.tv_sec = WL_TIMEOUT_S};
	int fd = socket(AF_INET, w->o.udp ? SOCK_DGRAM : SOCK_STREAM, 0);

	if (fd < 0) {
		perror(PROG ": socket");
		exit(1);
	}
	src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)(i % w->o.sources));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
	    connect(fd, &w->o.to.sa, bench_addr_len(&w->o.to)) < 0) {
		fprintf(stderr, PROG ": connection %lu: %s\n", i, strerror(errno));
		exit(1);
	}
	if (w->o.udp)
		bench_set_bufs(fd, 4 << 20);
	return fd;
}

/* TLS and the upgrade; the first connection retries (the name may not be
 * served yet). */
static void open_conn(struct wl *w, SSL_CTX *ctx, unsigned long i)
{
	struct conn *c = &w->c[i];
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
	unsigned tries = i == 0 ? WL_SETUP_TRIES : 1;

	c->id = (uint32_t)i;
	c->in = malloc(WL_IN_CAP);
	c->out = malloc(WL_OUT_CAP);
	if (!c->in || !c->out) {
		fputs(PROG ": out of memory\n", stderr);
		exit(1);
	}
	for (unsigned t = 0;; t++) {
		c->fd = open_socket(w, i);
		if (w->o.udp)
			break;
		c->ssl = SSL_new(ctx);
		if (!c->ssl || !SSL_set_tlsext_host_name(c->ssl, w->o.sni) ||
		    !SSL_set_fd(c->ssl, c->fd))
			die_ssl("SSL_new", i);
		if (SSL_connect(c->ssl) == 1 && upgrade(w, c, i, t + 1 == tries) == 0)
			break;
		ERR_clear_error();
		SSL_free(c->ssl);
		close(c->fd);
		if (t + 1 == tries) {
			fprintf(stderr, PROG ": connection %lu: not upgraded (%u tries)\n", i,
				tries);
			exit(1);
		}
		usleep(100 * 1000);
	}
	if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0 ||
	    epoll_ctl(w->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
		perror(PROG ": epoll");
		exit(1);
	}
}

static void arm_out(struct wl *w, struct conn *c, bool on)
{
	struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.u32 = c->id};

	if (c->out_armed == on)
		return;
	c->out_armed = on;
	epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* The frames queued, one SSL_write (one record) each, until TLS waits. */
static void flush(struct wl *w, struct conn *c)
{
	while (!c->closed && c->out_off < c->out_len) {
		const uint8_t *f = c->out + c->out_off;
		/* A frame's length from its header: control frames are shorter. */
		size_t n = (f[1] & 0x7f) == 126 ? 8 + ((size_t)f[2] << 8 | f[3])
						: 6 + (size_t)(f[1] & 0x7f);
		int r;

		r = SSL_write(c->ssl, c->out + c->out_off, (int)n);
		if (r <= 0) {
			int e = SSL_get_error(c->ssl, r);

			if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
				arm_out(w, c, true);
				return;
			}
			ERR_clear_error();
			c->closed = true;
			return;
		}
		c->out_off += n;
	}
	c->out_off = c->out_len = 0;
	arm_out(w, c, false);
}

/* A masked client frame of opcode op around p[0..n) at the queue's end;
 * false when the queue has no room. */
static bool queue_frame(struct wl *w, struct conn *c, unsigned op, const uint8_t *p, size_t n)
{
	uint8_t *f;
	uint32_t mask = rng_next(w);
	uint8_t m[4];
	size_t h;

	if (c->out_len + n + 8 > WL_OUT_CAP && c->out_off) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	if (c->out_len + n + 8 > WL_OUT_CAP)
		return false;
	f = c->out + c->out_len;
	f[0] = (uint8_t)(0x80 | op);
	if (n < 126) {
		f[1] = (uint8_t)(0x80 | n);
		h = 2;
	} else {
		f[1] = 0x80 | 126;
		f[2] = (uint8_t)(n >> 8);
		f[3] = (uint8_t)n;
		h = 4;
	}
	memcpy(m, &mask, 4);
	memcpy(f + h, m, 4);
	for (size_t k = 0; k < n; k++)
		f[h + 4 + k] = p[k] ^ m[k & 3];
	c->out_len += h + 4 + n;
	return true;
}

/* One datagram from c; false when the generator could not send it. */
static bool send_one(struct wl *w, struct conn *c, uint64_t now)
{
	uint8_t d[WL_SIZE_MAX];

	if (c->closed)
		return false;
	memset(d + BENCH_HDR, 0xa5, w->o.size - BENCH_HDR);
	bench_hdr_put(d, BENCH_ECHO, c->id, c->seq, now);
	if (w->o.udp) {
		if (send(c->fd, d, w->o.size, 0) != (ssize_t)w->o.size)
			return false;
	} else if (!queue_frame(w, c, 2, d, w->o.size)) {
		return false;
	}
	c->seq++;
	c->inflight++;
	return true;
}

static void count(struct wl *w, struct conn *c, const uint8_t *p, size_t n, uint64_t now)
{
	struct bench_hdr h;

	if (!bench_hdr_get(p, n, &h) || n != w->o.size || h.kind != BENCH_ECHO) {
		w->bad++;
		return;
	}
	if (h.id != c->id) {
		w->misdelivered++;
		return;
	}
	if (c->inflight)
		c->inflight--;
	c->last_rx = now;
	if (h.ts >= w->ta && h.ts < w->tb) { /* sent in the window */
		w->recv_in++;
		hist_add(&w->lat, now - h.ts);
	}
}

/* The server's frames in c->in: binary ones counted, pings answered. */
static void parse(struct wl *w, struct conn *c, uint64_t now)
{
	size_t off = 0;

	while (c->in_len - off >= 2) {
		const uint8_t *f = c->in + off;
		size_t h = 2, n = f[1] & 0x7f;
		unsigned op = f[0] & 0x0f;

		if (f[1] & 0x80) { /* a server never masks */
			w->bad++;
			c->closed = true;
			return;
		}
		if (n == 126) {
			if (c->in_len - off < 4)
				break;
			n = (size_t)f[2] << 8 | f[3];
			h = 4;
		} else if (n == 127) {
			w->bad++;
			c->closed = true;
			return;
		}
		if (c->in_len - off < h + n)
			break;
		if (op == 2)
			count(w, c, f + h, n, now);
		else if (op == 9)
			queue_frame(w, c, 10, f + h, n);
		else if (op == 8) {
			c->close_code = n >= 2 ? (uint16_t)(f[h] << 8 | f[h + 1]) : 1005;
			c->closed = true;
		}
		off += h + n;
	}
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
}

static void on_readable(struct wl *w, struct conn *c, uint64_t now)
{
	if (w->o.udp) {
		uint8_t d[BENCH_MAX_DGRAM];

		for (int k = 0; k < 64; k++) {
			ssize_t r = recv(c->fd, d, sizeof(d), 0);

			if (r < 0)
				break;
			count(w, c, d, (size_t)r, now);
		}
		return;
	}
	for (;;) {
		int r = SSL_read(c->ssl, c->in + c->in_len, (int)(WL_IN_CAP - c->in_len));

		if (r <= 0) {
			int e = SSL_get_error(c->ssl, r);

			if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
				ERR_clear_error();
				c->closed = true;
			}
			break;
		}
		c->in_len += (size_t)r;
		parse(w, c, now);
		if (c->closed)
			break;
	}
	if (c->out_len)
		flush(w, c);
}

/* What is due now: the rate's datagrams round robin, or each window
 * refilled (a window quiet for WL_STALL_NS is presumed lost). */
static void send_due(struct wl *w, uint64_t now)
{
	bool in = now >= w->ta && now < w->tb;

	if (w->o.rate) {
		uint64_t due = (now - w->t0) * w->o.rate / BENCH_NS_PER_SEC;
		uint64_t most = w->o.rate * WL_CATCH_UP_NS / BENCH_NS_PER_SEC + 1;

		if (due - w->sent > most) {
			if (in)
				w->skipped_in += due - w->sent - most;
			w->sent = due - most;
		}
		while (w->sent < due) {
			struct conn *c = &w->c[w->rr];

			w->rr = (w->rr + 1) % (uint32_t)w->o.conns;
			w->sent++;
			if (in)
				w->sent_in++;
			if (!send_one(w, c, now) && in)
				w->blocked_in++;
		}
	} else {
		for (unsigned long i = 0; i < w->o.conns; i++) {
			struct conn *c = &w->c[i];

			if (c->inflight && now - c->last_rx > WL_STALL_NS) {
				c->inflight = 0;
				c->last_rx = now;
				w->stalls++;
			}
			while (c->inflight < w->o.window && send_one(w, c, now)) {
				w->sent++;
				if (in)
					w->sent_in++;
			}
		}
	}
	if (!w->o.udp)
		for (unsigned long i = 0; i < w->o.conns; i++)
			if (w->c[i].out_len && !w->c[i].out_armed)
				flush(w, &w->c[i]);
}

static void run(struct wl *w)
{
	struct epoll_event ev[WL_EVENTS];
	int phase = 0; /* warm-up, measuring, measured */

	w->t0 = bench_now();
	w->ta = w->t0 + w->o.warmup;
	w->tb = w->ta + w->o.duration;
	w->end = w->tb + w->o.drain;
	for (unsigned long i = 0; i < w->o.conns; i++)
		w->c[i].last_rx = w->t0;
	while (!stop_now) {
		uint64_t now = bench_now();
		int n;

		if (now >= w->end)
			break;
		if (phase == 0 && now >= w->ta) {
			phase = 1;
			if (w->o.marks)
				fputs(PROG ": measuring\n", stderr);
		}
		if (phase == 1 && now >= w->tb) {
			phase = 2; /* its datagrams still count in the drain */
			if (w->o.marks)
				fputs(PROG ": measured\n", stderr);
		}
		if (now < w->tb)
			send_due(w, now);
		n = epoll_wait(w->ep, ev, WL_EVENTS, w->o.rate ? 1 : 10);
		now = bench_now();
		for (int k = 0; k < n; k++) {
			struct conn *c = &w->c[ev[k].data.u32];

			if (c->closed)
				continue;
			if (ev[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				on_readable(w, c, now);
			if (!w->o.udp && (ev[k].events & EPOLLOUT) && !c->closed)
				flush(w, c);
		}
	}
}

static void report(struct wl *w, const char *cipher)
{
	unsigned long closed = 0;
	unsigned codes[4] = {0};
	double win = (double)w->o.duration / BENCH_NS_PER_SEC;

	for (unsigned long i = 0; i < w->o.conns; i++)
		if (w->c[i].closed) {
			closed++;
			if (closed <= 4)
				codes[closed - 1] = w->c[i].close_code;
		}
	printf("{\"mode\":\"%s\",\"conns\":%lu,\"size\":%lu,\"rate\":%lu,\"window\":%lu,"
	       "\"cipher\":\"%s\",\"window_s\":%.3f,\"sent\":%llu,\"received\":%llu,"
	       "\"delivered_per_s\":%.1f,\"loss\":%.6f,\"gen_blocked\":%llu,\"gen_skipped\":%llu,"
	       "\"stalls\":%llu,"
	       "\"bad\":%llu,\"misdelivered\":%llu,\"closed\":%lu,\"close_codes\":[%u,%u,%u,%u],"
	       "\"latency_us\":{\"p50\":%.1f,\"p99\":%.1f,\"max\":%.1f}}\n",
	       w->o.udp ? "udp" : "ws", w->o.conns, w->o.size, w->o.rate,
	       w->o.rate ? 0 : w->o.window, cipher, win, (unsigned long long)w->sent_in,
	       (unsigned long long)w->recv_in, (double)w->recv_in / win,
	       w->sent_in ? 1.0 - (double)w->recv_in / (double)w->sent_in : 0.0,
	       (unsigned long long)w->blocked_in, (unsigned long long)w->skipped_in,
	       (unsigned long long)w->stalls, (unsigned long long)w->bad,
	       (unsigned long long)w->misdelivered, closed, codes[0], codes[1], codes[2], codes[3],
	       hist_quantile(&w->lat, 0.5) / 1e3, hist_quantile(&w->lat, 0.99) / 1e3,
	       (double)w->lat.max / 1e3);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"connect", required_argument, NULL, 't'},
					   {"udp", no_argument, NULL, 'u'},
					   {"conns", required_argument, NULL, 'c'},
					   {"sni", required_argument, NULL, 'n'},
					   {"path", required_argument, NULL, 'p'},
					   {"token-prefix", required_argument, NULL, 'k'},
					   {"sources", required_argument, NULL, 'S'},
					   {"size", required_argument, NULL, 's'},
					   {"rate", required_argument, NULL, 'r'},
					   {"window", required_argument, NULL, 'w'},
					   {"warmup", required_argument, NULL, 'W'},
					   {"duration", required_argument, NULL, 'd'},
					   {"drain", required_argument, NULL, 'D'},
					   {"marks", no_argument, NULL, 'm'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	struct wl *w = calloc(1, sizeof(*w));
	struct opts *o;
	bool have_to = false;
	SSL_CTX *ctx = NULL;
	const char *cipher = "none";
	int ch;

	if (!w)
		return 1;
	o = &w->o;
	o->conns = 1;
	o->sources = 250;
	o->size = 160;
	o->window = 16;
	o->path = "/t";
	o->prefix = "tok-";
	o->warmup = BENCH_NS_PER_SEC;
	o->duration = 3 * BENCH_NS_PER_SEC;
	o->drain = BENCH_NS_PER_SEC / 2;
	while ((ch = getopt_long(argc, argv, "c:s:r:w:d:h", lo, NULL)) != -1) {
		int bad = 0;

		switch (ch) {
		case 't':
			bad = bench_opt_addr(PROG, "connect", optarg, &o->to);
			have_to = true;
			break;
		case 'u':
			o->udp = true;
			break;
		case 'c':
			bad = bench_opt_uint(PROG, "conns", optarg, 1, WL_CONNS_MAX, &o->conns);
			break;
		case 'n':
			o->sni = optarg;
			break;
		case 'p':
			o->path = optarg;
			break;
		case 'k':
			o->prefix = optarg;
			break;
		case 'S':
			bad = bench_opt_uint(PROG, "sources", optarg, 1, 250, &o->sources);
			break;
		case 's':
			bad = bench_opt_uint(PROG, "size", optarg, WL_SIZE_MIN, WL_SIZE_MAX,
					     &o->size);
			break;
		case 'r':
			bad = bench_opt_uint(PROG, "rate", optarg, 0, 10000000, &o->rate);
			break;
		case 'w':
			bad = bench_opt_uint(PROG, "window", optarg, 1, 4096, &o->window);
			break;
		case 'W':
			bad = bench_opt_dur(PROG, "warmup", optarg, &o->warmup);
			break;
		case 'd':
			bad = bench_opt_dur(PROG, "duration", optarg, &o->duration);
			break;
		case 'D':
			bad = bench_opt_dur(PROG, "drain", optarg, &o->drain);
			break;
		case 'm':
			o->marks = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
		if (bad)
			return 2;
	}
	if (optind < argc || !have_to || (!o->udp && !o->sni) || o->duration == 0) {
		fprintf(stderr, PROG ": %s\n",
			optind < argc ? "unexpected arguments"
			: !have_to    ? "--connect ADDR:PORT is required"
			: o->duration ? "--sni NAME is required (or --udp)"
				      : "--duration must be above 0");
		return 2;
	}
	if (o->to.sa.sa_family != AF_INET) {
		fputs(PROG ": --connect: IPv4 only (the sources are 127.0.0.N)\n", stderr);
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	w->rng = bench_now() | 1;
	hist_reset(&w->lat);
	if (bench_raise_nofile(o->conns + 64) < 0)
		fputs(PROG ": could not raise the descriptor limit\n", stderr);
	w->c = calloc(o->conns, sizeof(*w->c));
	if (!w->c || (w->ep = epoll_create1(0)) < 0) {
		perror(PROG);
		return 1;
	}
	if (!o->udp) {
		ctx = SSL_CTX_new(TLS_client_method());
		if (!ctx)
			die_ssl("SSL_CTX_new", 0);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL); /* a test CA's chain */
		SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	}
	for (unsigned long i = 0; i < o->conns; i++)
		open_conn(w, ctx, i);
	if (!o->udp)
		cipher = SSL_get_cipher_name(w->c[0].ssl);
	for (unsigned long i = 0; i < o->conns && !o->udp; i++)
		parse(w, &w->c[i], bench_now()); /* bytes that came with the answer */
	run(w);
	report(w, cipher);
	for (unsigned long i = 0; i < o->conns; i++) {
		if (w->c[i].ssl)
			SSL_free(w->c[i].ssl);
		close(w->c[i].fd);
		free(w->c[i].in);
		free(w->c[i].out);
	}
	SSL_CTX_free(ctx);
	free(w->c);
	free(w);
	return 0;
}
