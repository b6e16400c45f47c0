/* SPDX-License-Identifier: ISC */
/* etrelay-echo: a game-server stand-in for benchmarks. Echoes datagrams with
 * recvmmsg/sendmmsg (runs to one peer as GSO trains with --gso), answers
 * getinfo and getstatus, and in the ET-match model sends every known client a
 * 20 Hz stream of snapshots instead. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "bench.h"

#define ECHO_BATCH	  64	/* datagrams per recvmmsg / sendmmsg */
#define ECHO_TURN_BATCHES 8	/* recvmmsg calls per wake-up: bounded work */
#define ECHO_BUF	  65536 /* the largest datagram or GRO train */
#define ECHO_TX_BUF	  2048	/* built replies: info, status, snapshots */
#define ECHO_PEERS_MAX	  65536 /* ET-match clients remembered */
#define ECHO_SLOTS	  (2 * ECHO_PEERS_MAX)
#define ECHO_TICK_NS	  (1 * BENCH_NS_PER_MS)
#define ECHO_PEER_SILENT  (2 * BENCH_NS_PER_SEC) /* stop sending snapshots */
#define ECHO_SOCK_BUF	  (4 << 20)

static const char usage[] =
    "usage: etrelay-echo --listen ADDR:PORT [options]\n"
    "\n"
    "Echo every datagram back to its sender, answer getinfo and getstatus like\n"
    "a game server; the upstream for etrelay-load.\n"
    "\n"
    "  -l, --listen ADDR:PORT     address to serve (IPv4 or [IPv6])\n"
    "  --snapshots HZ             ET-match model: do not echo match players'\n"
    "                             packets, send each player HZ snapshots per\n"
    "                             second instead (flat clients are still echoed)\n"
    "  --snapshot-size MIN-MAX    snapshot sizes in bytes (200-1400)\n"
    "  --status-size N            statusResponse size in bytes (600)\n"
    "  -d, --duration DUR         exit after DUR (0 or none: at SIGTERM/SIGINT)\n"
    "  --gso                      send runs of datagrams to one destination as\n"
    "                             UDP GSO trains (Linux 4.18+), as a bulk sender\n"
    "                             with a modern stack would; receivers get them\n"
    "                             whole with UDP_GRO or cut back by the kernel\n"
    "  -q, --quiet                no statistics at exit\n"
    "  -h, --help                 this text\n";

/* A client as the ET-match server knows it. */
struct peer {
	union bench_sockaddr addr;
	uint64_t heard;	  /* last packet from it (ns) */
	uint32_t id;	  /* the generator's client id */
	uint32_t up_seen; /* game packets from it */
	uint32_t up_top;  /* highest sequence number seen, plus one */
	uint32_t snap_seq;
	bool on_wheel;
};

/* The snapshot schedule: one list of peers per tick of the period. */
struct wheel_slot {
	uint32_t *peer;
	unsigned n, cap;
};

struct echo {
	int fd, ep, tfd, sfd;
	uint64_t deadline;
	bool quiet;
	unsigned hz;
	unsigned snap_min, snap_max, status_size;
	socklen_t addrlen;

	struct mmsghdr rmsg[ECHO_BATCH];
	struct iovec riov[ECHO_BATCH];
	union bench_sockaddr rname[ECHO_BATCH];
	union gro_ctl rctl[ECHO_BATCH];
	uint8_t *rbuf;

	unsigned nsend;
	struct mmsghdr smsg[ECHO_BATCH];
	struct iovec siov[ECHO_BATCH];
	union bench_sockaddr sdst[ECHO_BATCH];
	uint8_t *tbuf; /* ECHO_BATCH * ECHO_TX_BUF */
	unsigned ntx;  /* tx buffers used in this batch */

	/* --gso, until the kernel refuses a train: the batch regrouped, one
	 * message per train, and the datagram each train starts with. */
	bool gso;
	struct mmsghdr gmsg[ECHO_BATCH];
	union gso_ctl gctl[ECHO_BATCH];
	unsigned gfirst[ECHO_BATCH + 1];

	struct peer *peers;
	uint32_t npeers;
	uint32_t *slots; /* hash: peer index + 1, 0 empty */
	struct wheel_slot *wheel;
	unsigned nwheel, wheel_pos;
	uint64_t rng;

	uint64_t received, echoed, infos, statuses, snapshots, send_drops, game_in, peers_full,
	    trains;
};

static uint64_t rng_next(struct echo *e)
{
	/* xorshift64: sizes only need to look random. */
	e->rng ^= e->rng << 13;
	e->rng ^= e->rng >> 7;
	e->rng ^= e->rng << 17;
	return e->rng;
}

static bool addr_same(const union bench_sockaddr *a, const union bench_sockaddr *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return false;
	if (a->sa.sa_family == AF_INET6)
		return a->in6.sin6_port == b->in6.sin6_port &&
		       memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, 16) == 0;
	return a->in.sin_port == b->in.sin_port && a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
}

/* --gso: send the batch as trains, each a run of datagrams to one peer
 * that bench_gso_run accepts, all in one sendmmsg. Returns the first
 * datagram still to send one at a time: the end of the batch, unless the
 * kernel refused a train; what congestion kept back is dropped here. */
static unsigned send_trains(struct echo *e)
{
	unsigned nt = 0, off = 0;

	for (unsigned i = 0; i < e->nsend; nt++) {
		struct msghdr *m = &e->gmsg[nt].msg_hdr;
		socklen_t namelen = e->smsg[i].msg_hdr.msg_namelen;
		unsigned j = i + 1, t;

		while (j < e->nsend && e->smsg[j].msg_hdr.msg_namelen == namelen &&
		       addr_same(&e->sdst[j], &e->sdst[i]))
			j++;
		t = bench_gso_run(e->siov + i, j - i);
		*m = e->smsg[i].msg_hdr;
		m->msg_iovlen = t;
		if (t > 1)
			gso_set_segment(m, &e->gctl[nt], (uint16_t)e->siov[i].iov_len);
		e->gfirst[nt] = i;
		i += t;
	}
	e->gfirst[nt] = e->nsend;
	/* As in flush: a short count is a full buffer, retried once. */
	for (int tries = 0; off < nt && tries < 2; tries++) {
		int n = sendmmsg(e->fd, e->gmsg + off, nt - off, MSG_DONTWAIT);

		if (n < 0 && e->gmsg[off].msg_hdr.msg_iovlen > 1 && bench_gso_refused(-errno)) {
			fprintf(stderr,
				"etrelay-echo: --gso: a train of %zu x %zu B failed: %s; "
				"sending one datagram at a time from here\n",
				(size_t)e->gmsg[off].msg_hdr.msg_iovlen,
				e->siov[e->gfirst[off]].iov_len, strerror(errno));
			e->gso = false;
			break;
		}
		if (n <= 0)
			break;
		for (int k = 0; k < n; k++)
			e->trains += e->gmsg[off + (unsigned)k].msg_hdr.msg_iovlen > 1;
		off += (unsigned)n;
	}
	if (!e->gso)
		return e->gfirst[off];
	e->send_drops += e->nsend - e->gfirst[off];
	return e->nsend;
}

/* Send what the batch gathered, then forget it. */
static void flush(struct echo *e)
{
	unsigned off = e->gso ? send_trains(e) : 0;

	/* A short count means the socket buffer is full: retry once, then
	 * drop like any congested hop would. */
	for (int tries = 0; off < e->nsend && tries < 2; tries++) {
		int n = sendmmsg(e->fd, e->smsg + off, e->nsend - off, MSG_DONTWAIT);

		if (n <= 0)
			break;
		off += (unsigned)n;
	}
	e->send_drops += e->nsend - off;
	e->nsend = 0;
	e->ntx = 0;
}

static void queue_send(struct echo *e, const void *data, size_t len, const struct sockaddr *dst,
		       socklen_t dstlen)
{
	unsigned i = e->nsend;
	struct msghdr *m = &e->smsg[i].msg_hdr;

	e->siov[i].iov_base = (void *)(uintptr_t)data;
	e->siov[i].iov_len = len;
	memset(m, 0, sizeof(*m));
	memcpy(&e->sdst[i], dst, dstlen);
	m->msg_name = &e->sdst[i];
	m->msg_namelen = dstlen;
	m->msg_iov = &e->siov[i];
	m->msg_iovlen = 1;
	if (++e->nsend == ECHO_BATCH)
		flush(e);
}

/* A tx buffer for a reply built in this batch; flushes when all are taken. */
static uint8_t *tx_buf(struct echo *e)
{
	if (e->ntx == ECHO_BATCH || e->nsend == ECHO_BATCH)
		flush(e);
	return e->tbuf + (size_t)e->ntx++ * ECHO_TX_BUF;
}

/* Copy the challenge word after a command (up to whitespace or the end). */
static size_t challenge_of(const uint8_t *p, size_t n, size_t off, char *out, size_t outlen)
{
	size_t len = 0;

	while (off < n && p[off] == ' ')
		off++;
	while (off < n && len + 1 < outlen && p[off] > ' ' && p[off] != '\\' && p[off] != '"')
		out[len++] = (char)p[off++];
	out[len] = '\0';
	return len;
}

static void answer_info(struct echo *e, const uint8_t *p, size_t n, size_t off,
			const struct sockaddr *from, socklen_t fromlen)
{
	char ch[64];
	uint8_t *b = tx_buf(e);
	int len;

	challenge_of(p, n, off, ch, sizeof(ch));
	len = snprintf((char *)b, ECHO_TX_BUF,
		       "\xff\xff\xff\xffinfoResponse\n\\challenge\\%s\\protocol\\84"
		       "\\hostname\\etrelay-echo\\mapname\\oasis\\clients\\%u"
		       "\\sv_maxclients\\64\\gametype\\4\\pure\\1\\gamename\\etmain",
		       ch, e->npeers);
	e->infos++;
	queue_send(e, b, (size_t)len, from, fromlen);
}

static void answer_status(struct echo *e, const uint8_t *p, size_t n, size_t off,
			  const struct sockaddr *from, socklen_t fromlen)
{
	char ch[64];
	uint8_t *b = tx_buf(e);
	size_t len;

	challenge_of(p, n, off, ch, sizeof(ch));
	len = (size_t)snprintf((char *)b, ECHO_TX_BUF,
			       "\xff\xff\xff\xffstatusResponse\n\\challenge\\%s"
			       "\\sv_hostname\\etrelay-echo\\mapname\\oasis\\sv_maxclients\\64"
			       "\\g_gametype\\4\\gamename\\etmain\\filler\\",
			       ch);
	/* Pad the cvar value to the configured size, like a server with a
	 * long player list; the response ends with a newline. */
	if (len < e->status_size) {
		memset(b + len, 'x', e->status_size - len);
		len = e->status_size;
		b[len - 1] = '\n';
	}
	e->statuses++;
	queue_send(e, b, len, from, fromlen);
}

static uint32_t addr_hash(const union bench_sockaddr *a)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const uint8_t *p;
	size_t n;

	if (a->sa.sa_family == AF_INET6) {
		p = (const uint8_t *)&a->in6.sin6_addr;
		n = 16;
	} else {
		p = (const uint8_t *)&a->in.sin_addr;
		n = 4;
	}
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	h = (h ^ a->in.sin_port) * 0x100000001b3ull; /* same offset in both */
	return (uint32_t)(h ^ h >> 32);
}

static void wheel_add(struct echo *e, uint32_t idx)
{
	/* Spread the peers over the period so snapshots do not leave in one
	 * burst per 50 ms. */
	struct wheel_slot *w = &e->wheel[idx % e->nwheel];

	if (w->n == w->cap) {
		unsigned cap = w->cap ? 2 * w->cap : 64;
		uint32_t *p = realloc(w->peer, cap * sizeof(*p));

		if (!p)
			return;
		w->peer = p;
		w->cap = cap;
	}
	w->peer[w->n++] = idx;
	e->peers[idx].on_wheel = true;
}

/* Find or learn the peer a game packet came from. */
static struct peer *peer_get(struct echo *e, const union bench_sockaddr *from, uint32_t id,
			     uint64_t now)
{
	uint32_t i = addr_hash(from) & (ECHO_SLOTS - 1);
	struct peer *p;

	for (unsigned probes = 0; probes < ECHO_SLOTS; probes++, i = (i + 1) & (ECHO_SLOTS - 1)) {
		if (e->slots[i] == 0)
			break;
		p = &e->peers[e->slots[i] - 1];
		if (addr_same(&p->addr, from))
			goto found;
	}
	if (e->npeers == ECHO_PEERS_MAX) {
		e->peers_full++;
		return NULL;
	}
	p = &e->peers[e->npeers];
	memset(p, 0, sizeof(*p));
	p->addr = *from;
	e->slots[i] = ++e->npeers;
found:
	p->id = id;
	p->heard = now;
	if (!p->on_wheel)
		wheel_add(e, (uint32_t)(p - e->peers));
	return p;
}

static void on_game(struct echo *e, uint8_t *p, size_t n, const union bench_sockaddr *from,
		    socklen_t fromlen, uint64_t now)
{
	struct bench_hdr h;
	struct peer *peer;

	/* Echo clients (flat, flood) are answered even beside a match. */
	if (!e->hz || (bench_hdr_get(p, n, &h) && h.kind == BENCH_ECHO)) {
		queue_send(e, p, n, &from->sa, fromlen);
		e->echoed++;
		return;
	}
	e->game_in++;
	if (!bench_hdr_get(p, n, &h) || !(peer = peer_get(e, from, h.id, now)))
		return;
	peer->up_seen++;
	if (h.seq + 1 > peer->up_top)
		peer->up_top = h.seq + 1;
}

/* One datagram, or one segment of a GRO train. */
static void on_dgram(struct echo *e, uint8_t *p, size_t len, const union bench_sockaddr *from,
		     socklen_t fromlen, uint64_t now)
{
	size_t off;

	e->received++;
	if (bench_is_cmd(p, len, "getinfo", &off))
		answer_info(e, p, len, off, &from->sa, fromlen);
	else if (bench_is_cmd(p, len, "getstatus", &off))
		answer_status(e, p, len, off, &from->sa, fromlen);
	else if (len >= 4 && memcmp(p, "\xff\xff\xff\xff", 4) == 0)
		return; /* other connectionless commands: ignored */
	else
		on_game(e, p, len, from, fromlen, now);
}

static void on_readable(struct echo *e)
{
	for (int b = 0; b < ECHO_TURN_BATCHES; b++) {
		uint64_t now;
		int n;

		for (unsigned i = 0; i < ECHO_BATCH; i++) {
			struct msghdr *m = &e->rmsg[i].msg_hdr;

			memset(m, 0, sizeof(*m));
			m->msg_name = &e->rname[i];
			m->msg_namelen = sizeof(e->rname[i]);
			m->msg_iov = &e->riov[i];
			m->msg_iovlen = 1;
			m->msg_control = &e->rctl[i];
			m->msg_controllen = sizeof(e->rctl[i]);
		}
		n = recvmmsg(e->fd, e->rmsg, ECHO_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return;
		now = bench_now();
		for (int i = 0; i < n; i++) {
			struct msghdr *m = &e->rmsg[i].msg_hdr;
			uint8_t *p = e->riov[i].iov_base;
			size_t len = e->rmsg[i].msg_len, seg, off = 0;

			if (m->msg_flags & MSG_TRUNC) {
				e->received++;
				continue;
			}
			/* Each segment of a train is a datagram of its own;
			 * do-while so an empty datagram is seen too. */
			seg = gro_msg_size(m);
			do {
				size_t k = gro_segment(len, seg, off);

				on_dgram(e, p + off, k, &e->rname[i], m->msg_namelen, now);
				off += k;
			} while (off < len);
		}
		/* Echoes point into the receive buffers (a segment's echo at its
		 * offset in a train): send before reuse. */
		flush(e);
		if (n < ECHO_BATCH)
			return;
	}
}

static void send_snapshot(struct echo *e, struct peer *p, uint64_t now)
{
	uint8_t *b = tx_buf(e);
	size_t len = e->snap_min;

	if (e->snap_max > e->snap_min)
		len += rng_next(e) % (e->snap_max - e->snap_min + 1);
	bench_hdr_put(b, BENCH_SNAPSHOT, p->id, p->snap_seq++, now);
	memcpy(b + 16, &p->up_seen, 4);
	memcpy(b + 20, &p->up_top, 4);
	e->snapshots++;
	queue_send(e, b, len, &p->addr.sa, bench_addr_len(&p->addr));
}

/* One tick of the period: the peers in this wheel slot get a snapshot. */
static void on_tick(struct echo *e, uint64_t now)
{
	struct wheel_slot *w = &e->wheel[e->wheel_pos];

	e->wheel_pos = (e->wheel_pos + 1) % e->nwheel;
	for (unsigned i = 0; i < w->n;) {
		struct peer *p = &e->peers[w->peer[i]];

		if (now - p->heard > ECHO_PEER_SILENT) {
			/* Gone quiet: off the wheel until it talks again. */
			p->on_wheel = false;
			w->peer[i] = w->peer[--w->n];
			continue;
		}
		send_snapshot(e, p, now);
		i++;
	}
	flush(e);
}

static int parse_sizes(const char *s, unsigned *lo, unsigned *hi)
{
	unsigned a, b;
	int used = 0;

	if (sscanf(s, "%u-%u%n", &a, &b, &used) != 2 || s[used] || a < BENCH_SNAP_HDR || b < a ||
	    b > ECHO_TX_BUF)
		return -1;
	*lo = a;
	*hi = b;
	return 0;
}

static int setup(struct echo *e, const union bench_sockaddr *listen)
{
	struct epoll_event ev = {.events = EPOLLIN};
	sigset_t set;
	int one = 1;

	e->fd = socket(listen->sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (e->fd < 0)
		return -errno;
	setsockopt(e->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	bench_set_bufs(e->fd, ECHO_SOCK_BUF);
	gro_enable(e->fd);
	if (e->gso && !gso_supported()) {
		fprintf(stderr, "etrelay-echo: --gso: this kernel has no UDP GSO (UDP_SEGMENT, "
				"Linux 4.18+); sending one datagram at a time\n");
		e->gso = false;
	}
	if (bind(e->fd, &listen->sa, bench_addr_len(listen)) < 0)
		return -errno;
	e->ep = epoll_create1(EPOLL_CLOEXEC);
	if (e->ep < 0)
		return -errno;
	ev.data.u32 = 0;
	if (epoll_ctl(e->ep, EPOLL_CTL_ADD, e->fd, &ev) < 0)
		return -errno;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	e->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (e->sfd < 0)
		return -errno;
	ev.data.u32 = 1;
	if (epoll_ctl(e->ep, EPOLL_CTL_ADD, e->sfd, &ev) < 0)
		return -errno;

	if (e->hz) {
		struct itimerspec its = {
		    .it_value = {.tv_sec = 0, .tv_nsec = ECHO_TICK_NS},
		    .it_interval = {.tv_sec = 0, .tv_nsec = ECHO_TICK_NS},
		};

		e->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (e->tfd < 0 || timerfd_settime(e->tfd, 0, &its, NULL) < 0)
			return -errno;
		ev.data.u32 = 2;
		if (epoll_ctl(e->ep, EPOLL_CTL_ADD, e->tfd, &ev) < 0)
			return -errno;
	}

	e->rbuf = malloc((size_t)ECHO_BATCH * ECHO_BUF);
	e->tbuf = calloc(ECHO_BATCH, ECHO_TX_BUF);
	if (!e->rbuf || !e->tbuf)
		return -ENOMEM;
	for (unsigned i = 0; i < ECHO_BATCH; i++) {
		e->riov[i].iov_base = e->rbuf + (size_t)i * ECHO_BUF;
		e->riov[i].iov_len = ECHO_BUF;
	}
	if (e->hz) {
		/* Ticks per period, at least one. */
		e->nwheel = (unsigned)(BENCH_NS_PER_SEC / e->hz / ECHO_TICK_NS);
		if (e->nwheel == 0)
			e->nwheel = 1;
		e->peers = calloc(ECHO_PEERS_MAX, sizeof(*e->peers));
		e->slots = calloc(ECHO_SLOTS, sizeof(*e->slots));
		e->wheel = calloc(e->nwheel, sizeof(*e->wheel));
		if (!e->peers || !e->slots || !e->wheel)
			return -ENOMEM;
	}
	return 0;
}

static void run(struct echo *e)
{
	struct epoll_event ev[8];

	for (;;) {
		uint64_t now = bench_now();
		int timeout = -1, n;

		if (e->deadline) {
			if (now >= e->deadline)
				return;
			timeout = (int)((e->deadline - now) / BENCH_NS_PER_MS) + 1;
		}
		n = epoll_wait(e->ep, ev, 8, timeout);
		if (n < 0 && errno != EINTR)
			return;
		for (int i = 0; i < n; i++) {
			if (ev[i].data.u32 == 0) {
				on_readable(e);
			} else if (ev[i].data.u32 == 1) {
				return; /* SIGTERM or SIGINT */
			} else {
				uint64_t ticks = 0;

				if (read(e->tfd, &ticks, sizeof(ticks)) != sizeof(ticks))
					continue;
				/* Late wake-ups catch up, at most one period. */
				if (ticks > e->nwheel)
					ticks = e->nwheel;
				now = bench_now();
				while (ticks--)
					on_tick(e, now);
			}
		}
	}
}

static void echo_free(struct echo *e)
{
	int fds[] = {e->fd, e->ep, e->tfd, e->sfd};

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	for (unsigned i = 0; e->wheel && i < e->nwheel; i++)
		free(e->wheel[i].peer);
	free(e->wheel);
	free(e->peers);
	free(e->slots);
	free(e->rbuf);
	free(e->tbuf);
	free(e);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"snapshots", required_argument, NULL, 'S'},
	    {"snapshot-size", required_argument, NULL, 'Z'},
	    {"status-size", required_argument, NULL, 'T'},
	    {"duration", required_argument, NULL, 'd'},
	    {"gso", no_argument, NULL, 'G'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct echo *e = calloc(1, sizeof(*e));
	union bench_sockaddr listen;
	bool have_listen = false;
	char a[BENCH_ADDR_STRLEN];
	unsigned long v;
	uint64_t dur = 0;
	int c, err;

	if (!e)
		return 1;
	e->fd = e->ep = e->tfd = e->sfd = -1;
	e->snap_min = 200;
	e->snap_max = 1400;
	e->status_size = 600;
	e->rng = 0x9e3779b97f4a7c15ull;
	while ((c = getopt_long(argc, argv, "l:d:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (bench_opt_addr("etrelay-echo", "listen", optarg, &listen) < 0)
				return 2;
			have_listen = true;
			break;
		case 'S':
			if (bench_opt_uint("etrelay-echo", "snapshots", optarg, 1, 1000, &v) < 0)
				return 2;
			e->hz = (unsigned)v;
			break;
		case 'Z':
			if (parse_sizes(optarg, &e->snap_min, &e->snap_max) < 0) {
				fprintf(stderr,
					"etrelay-echo: --snapshot-size %s: want MIN-MAX, "
					"%d <= MIN <= MAX <= %d\n",
					optarg, BENCH_SNAP_HDR, ECHO_TX_BUF);
				return 2;
			}
			break;
		case 'T':
			if (bench_opt_uint("etrelay-echo", "status-size", optarg, 1, ECHO_TX_BUF,
					   &v) < 0)
				return 2;
			e->status_size = (unsigned)v;
			break;
		case 'd':
			if (bench_opt_dur("etrelay-echo", "duration", optarg, &dur) < 0)
				return 2;
			break;
		case 'G':
			e->gso = true;
			break;
		case 'q':
			e->quiet = true;
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
	err = setup(e, &listen);
	if (err < 0) {
		fprintf(stderr, "etrelay-echo: %s: %s\n", bench_addr_str(&listen.sa, a),
			strerror(-err));
		echo_free(e);
		return 1;
	}
	if (dur)
		e->deadline = bench_now() + dur;
	run(e);
	if (!e->quiet) {
		fprintf(
		    stderr,
		    "etrelay-echo: received %llu, echoed %llu, getinfo %llu, getstatus %llu, "
		    "game in %llu, snapshots %llu, clients %u (table full %llu), send drops %llu",
		    (unsigned long long)e->received, (unsigned long long)e->echoed,
		    (unsigned long long)e->infos, (unsigned long long)e->statuses,
		    (unsigned long long)e->game_in, (unsigned long long)e->snapshots, e->npeers,
		    (unsigned long long)e->peers_full, (unsigned long long)e->send_drops);
		if (e->gso || e->trains)
			fprintf(stderr, ", GSO trains %llu", (unsigned long long)e->trains);
		fputc('\n', stderr);
	}
	echo_free(e);
	return 0;
}
