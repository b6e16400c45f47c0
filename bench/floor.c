/* SPDX-License-Identifier: ISC */
/* etrelay-floor: the cheapest relay with etrelay's sockets, bench/compare's
 * "floor" row. One public UDP socket; per client, one UDP socket connected to
 * the upstream, opened at its first datagram and kept for the run. No policy,
 * no heartbeats, no timeouts: what is left is the kernel's work per datagram. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "addr.h"
#include "bench.h"

#define FLOOR_BATCH	   64	 /* datagrams per recvmmsg */
#define FLOOR_TURN_BATCHES 4	 /* recvmmsg calls per readable socket per turn */
#define FLOOR_POOL	   256	 /* receive buffers: the sends of a turn point into them */
#define FLOOR_BUF	   65536 /* the largest datagram or GRO train */
#define FLOOR_QUEUE	   1024	 /* sends gathered per direction before they leave */
#define FLOOR_EVENTS	   256
#define FLOOR_SESSIONS	   60000      /* clients; each holds a descriptor */
#define FLOOR_SLOTS	   (1u << 17) /* hash slots: more than twice the sessions */
#define FLOOR_PUBLIC_BUF   (4 << 20)  /* as etrelay's public socket */
#define FLOOR_EV_PUBLIC	   0
#define FLOOR_EV_SIGNAL	   UINT32_MAX /* sessions are index + 1 */

static const char usage[] =
    "usage: etrelay-floor --listen ADDR:PORT --upstream ADDR:PORT\n"
    "\n"
    "Relay UDP between clients on ADDR:PORT and one upstream, the cheapest way\n"
    "with etrelay's sockets: a benchmark's lower bound, not a relay to run.\n"
    "Each new client gets a socket connected to the upstream for the rest of\n"
    "the run; datagrams move with recvmmsg and sendmmsg, GRO and GSO.\n"
    "\n"
    "  -l, --listen ADDR:PORT     public address (IPv4 or [IPv6])\n"
    "  -u, --upstream ADDR:PORT   the game server\n"
    "  -h, --help                 this text\n";

struct session {
	union etr_sockaddr addr; /* the client */
	int fd;			 /* connected to the upstream */
};

/* Sends gathered over a loop turn in one direction, in arrival order. */
struct sendq {
	unsigned n;
	int fd[FLOOR_QUEUE];
	struct session *dst[FLOOR_QUEUE]; /* NULL: the socket is connected */
	struct iovec iov[FLOOR_QUEUE];
	/* The queue cut into trains: messages over neighbouring iovecs. */
	struct mmsghdr tmsg[FLOOR_QUEUE];
	union gso_ctl tctl[FLOOR_QUEUE];
	unsigned tfirst[FLOOR_QUEUE], tn[FLOOR_QUEUE];
};

struct floor {
	int pub, ep, sfd;
	union etr_sockaddr upstream;
	uint8_t key[16];
	bool gso;

	struct session *sessions;
	uint32_t nsessions;
	uint32_t *slots; /* session index + 1, 0 empty */

	uint8_t *pool; /* FLOOR_POOL buffers of FLOOR_BUF */
	unsigned pused;
	struct mmsghdr rmsg[FLOOR_BATCH];
	struct iovec riov[FLOOR_BATCH];
	union etr_sockaddr rname[FLOOR_BATCH];
	union gro_ctl rctl[FLOOR_BATCH];

	struct sendq up, down;

	uint64_t up_pkts, down_pkts, drop_full, drop_error, drop_sessions, drop_trunc;
};

/* The client's session, opened at its first datagram; NULL (counted) when
 * the table is full or the socket cannot be made. */
static struct session *session_get(struct floor *f, const union etr_sockaddr *from)
{
	uint32_t i = (uint32_t)addr_hash(from, f->key) & (FLOOR_SLOTS - 1);
	struct epoll_event ev = {.events = EPOLLIN};
	struct session *s;
	int fd;

	for (; f->slots[i]; i = (i + 1) & (FLOOR_SLOTS - 1)) {
		s = &f->sessions[f->slots[i] - 1];
		if (addr_equal(&s->addr, from))
			return s;
	}
	if (f->nsessions == FLOOR_SESSIONS)
		goto fail;
	fd = socket(f->upstream.sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	if (f->gso)
		gro_enable(fd);
	ev.data.u32 = f->nsessions + 1;
	if (connect(fd, &f->upstream.sa, addr_len(&f->upstream)) < 0 ||
	    epoll_ctl(f->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		close(fd);
		goto fail;
	}
	s = &f->sessions[f->nsessions];
	s->addr = *from;
	s->fd = fd;
	f->slots[i] = ++f->nsessions;
	return s;
fail:
	f->drop_sessions++;
	return NULL;
}

static bool train_same_dst(const struct sendq *q, unsigned a, unsigned b)
{
	return q->fd[a] == q->fd[b] && q->dst[a] == q->dst[b];
}

/* Cut the queue into trains (runs to one destination that the kernel can cut
 * back into the same datagrams); returns how many. */
static unsigned make_trains(struct floor *f, struct sendq *q)
{
	unsigned nt = 0;

	for (unsigned i = 0, k; i < q->n; i = k, nt++) {
		struct msghdr *m = &q->tmsg[nt].msg_hdr;
		struct gso_run run;

		gso_start(&run, q->iov[i].iov_len, f->gso ? GSO_ANY : 0);
		for (k = i + 1;
		     k < q->n && train_same_dst(q, i, k) && gso_join(&run, q->iov[k].iov_len); k++)
			;
		memset(m, 0, sizeof(*m));
		if (q->dst[i]) {
			m->msg_name = &q->dst[i]->addr;
			m->msg_namelen = addr_len(&q->dst[i]->addr);
		}
		m->msg_iov = &q->iov[i];
		m->msg_iovlen = k - i;
		if (k - i > 1)
			gso_set_segment(m, &q->tctl[nt], run.seg);
		q->tfirst[nt] = i;
		q->tn[nt] = k - i;
	}
	return nt;
}

/* Send the queue: one sendmmsg per run of trains on one socket. A full
 * socket buffer drops the rest of that run, as any congested hop would. */
static void sendq_flush(struct floor *f, struct sendq *q)
{
	unsigned nt = make_trains(f, q), t = 0;

	while (t < nt) {
		unsigned j = t + 1;
		int fd = q->fd[q->tfirst[t]], n;

		while (j < nt && q->fd[q->tfirst[j]] == fd)
			j++;
		n = sendmmsg(fd, &q->tmsg[t], j - t, MSG_DONTWAIT);
		if (n > 0) {
			t += (unsigned)n; /* stopped short: the next call says why */
			continue;
		}
		if (errno == EAGAIN) {
			for (; t < j; t++)
				f->drop_full += q->tn[t];
		} else if (q->tn[t] > 1 && bench_gso_refused(-errno)) {
			/* No trains on this path: one datagram at a time from now. */
			struct msghdr one = q->tmsg[t].msg_hdr;

			f->gso = false;
			one.msg_control = NULL;
			one.msg_controllen = 0;
			one.msg_iovlen = 1;
			for (unsigned k = 0; k < q->tn[t]; k++, one.msg_iov++)
				if (sendmsg(fd, &one, MSG_DONTWAIT) < 0)
					f->drop_error++;
			t++;
		} else {
			f->drop_error += q->tn[t++]; /* ECONNREFUSED and the like */
		}
	}
	q->n = 0;
}

/* Everything gathered leaves; the receive buffers are free again. */
static void flush(struct floor *f)
{
	sendq_flush(f, &f->up);
	sendq_flush(f, &f->down);
	f->pused = 0;
}

static void queue(struct floor *f, struct sendq *q, int fd, struct session *dst, uint8_t *p,
		  size_t len)
{
	/* Sends point into receive buffers still held: only the queue goes. */
	if (q->n == FLOOR_QUEUE)
		sendq_flush(f, q);
	q->fd[q->n] = fd;
	q->dst[q->n] = dst;
	q->iov[q->n].iov_base = p;
	q->iov[q->n].iov_len = len;
	q->n++;
}

/* Read up to FLOOR_TURN_BATCHES batches from fd: the public socket when s is
 * NULL (clients to their sessions), else session s (to its client). */
static void on_readable(struct floor *f, int fd, struct session *s)
{
	for (int b = 0; b < FLOOR_TURN_BATCHES; b++) {
		int n;

		if (FLOOR_POOL - f->pused < FLOOR_BATCH)
			flush(f);
		for (unsigned i = 0; i < FLOOR_BATCH; i++) {
			struct msghdr *m = &f->rmsg[i].msg_hdr;

			f->riov[i].iov_base = f->pool + (size_t)(f->pused + i) * FLOOR_BUF;
			f->riov[i].iov_len = FLOOR_BUF;
			memset(m, 0, sizeof(*m));
			if (!s) {
				m->msg_name = &f->rname[i];
				m->msg_namelen = sizeof(f->rname[i]);
			}
			m->msg_iov = &f->riov[i];
			m->msg_iovlen = 1;
			m->msg_control = &f->rctl[i];
			m->msg_controllen = sizeof(f->rctl[i]);
		}
		n = recvmmsg(fd, f->rmsg, FLOOR_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return;
		f->pused += (unsigned)n;
		for (int i = 0; i < n; i++) {
			struct msghdr *m = &f->rmsg[i].msg_hdr;
			uint8_t *p = f->riov[i].iov_base;
			size_t len = f->rmsg[i].msg_len, seg = gro_msg_size(m), off = 0;
			struct session *to = s;

			if (m->msg_flags & MSG_TRUNC) {
				f->drop_trunc++;
				continue;
			}
			if (!s && !(to = session_get(f, &f->rname[i])))
				continue;
			/* A GRO train is its datagrams again; do-while so an
			 * empty datagram goes too. */
			do {
				size_t k = gro_segment(len, seg, off);

				if (s) {
					queue(f, &f->down, f->pub, to, p + off, k);
					f->down_pkts++;
				} else {
					queue(f, &f->up, to->fd, NULL, p + off, k);
					f->up_pkts++;
				}
				off += k;
			} while (off < len);
		}
		if (n < FLOOR_BATCH)
			return;
	}
}

static int setup(struct floor *f, const union etr_sockaddr *listen)
{
	struct epoll_event ev = {.events = EPOLLIN};
	sigset_t set;

	if (getrandom(f->key, sizeof(f->key), 0) != sizeof(f->key))
		return -errno;
	/* One descriptor per session; what the hard limit refuses shows as
	 * "session" drops. */
	(void)bench_raise_nofile(FLOOR_SESSIONS + 16);
	f->gso = gso_supported();
	f->pub = socket(listen->sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (f->pub < 0)
		return -errno;
	bench_set_bufs(f->pub, FLOOR_PUBLIC_BUF);
	if (f->gso)
		gro_enable(f->pub);
	if (bind(f->pub, &listen->sa, addr_len(listen)) < 0)
		return -errno;
	f->ep = epoll_create1(EPOLL_CLOEXEC);
	if (f->ep < 0)
		return -errno;
	ev.data.u32 = FLOOR_EV_PUBLIC;
	if (epoll_ctl(f->ep, EPOLL_CTL_ADD, f->pub, &ev) < 0)
		return -errno;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	f->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (f->sfd < 0)
		return -errno;
	ev.data.u32 = FLOOR_EV_SIGNAL;
	if (epoll_ctl(f->ep, EPOLL_CTL_ADD, f->sfd, &ev) < 0)
		return -errno;
	/* Pages are touched as they are used: RSS grows with the sessions. */
	f->sessions = calloc(FLOOR_SESSIONS, sizeof(*f->sessions));
	f->slots = calloc(FLOOR_SLOTS, sizeof(*f->slots));
	f->pool = malloc((size_t)FLOOR_POOL * FLOOR_BUF);
	if (!f->sessions || !f->slots || !f->pool)
		return -ENOMEM;
	return 0;
}

static void run(struct floor *f)
{
	struct epoll_event ev[FLOOR_EVENTS];

	for (;;) {
		int n = epoll_wait(f->ep, ev, FLOOR_EVENTS, -1);

		if (n < 0 && errno != EINTR)
			return;
		for (int i = 0; i < n; i++) {
			uint32_t id = ev[i].data.u32;

			if (id == FLOOR_EV_SIGNAL)
				return; /* SIGTERM or SIGINT */
			if (id == FLOOR_EV_PUBLIC)
				on_readable(f, f->pub, NULL);
			else
				on_readable(f, f->sessions[id - 1].fd, &f->sessions[id - 1]);
		}
		/* The whole turn's answers to clients leave in one sendmmsg. */
		flush(f);
	}
}

static void floor_free(struct floor *f)
{
	for (uint32_t i = 0; i < f->nsessions; i++)
		close(f->sessions[i].fd);
	if (f->pub >= 0)
		close(f->pub);
	if (f->ep >= 0)
		close(f->ep);
	if (f->sfd >= 0)
		close(f->sfd);
	free(f->sessions);
	free(f->slots);
	free(f->pool);
	free(f);
}

/* The counts in the shape of etrelay's exit line, which bench/compare reads. */
static void print_stats(const struct floor *f)
{
	uint64_t drops = f->drop_full + f->drop_error + f->drop_sessions + f->drop_trunc;

	fprintf(stderr,
		"etrelay-floor: stats: sessions opened %u; up %llu pkts; down %llu pkts; "
		"dropped %llu",
		f->nsessions, (unsigned long long)f->up_pkts, (unsigned long long)f->down_pkts,
		(unsigned long long)drops);
	if (drops)
		fprintf(stderr, " (full %llu, error %llu, session %llu, truncated %llu)",
			(unsigned long long)f->drop_full, (unsigned long long)f->drop_error,
			(unsigned long long)f->drop_sessions, (unsigned long long)f->drop_trunc);
	fputc('\n', stderr);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"upstream", required_argument, NULL, 'u'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct floor *f = calloc(1, sizeof(*f));
	union etr_sockaddr listen = {0};
	char a[ADDR_STRLEN];
	int c, err;

	if (!f)
		return 1;
	f->pub = f->ep = f->sfd = -1;
	while ((c = getopt_long(argc, argv, "l:u:h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
		case 'u':
			if (addr_parse_numeric(optarg, c == 'l' ? &listen : &f->upstream) < 0) {
				fprintf(stderr,
					"etrelay-floor: --%s %s: want ADDR:PORT or "
					"[ADDR]:PORT, numeric\n",
					c == 'l' ? "listen" : "upstream", optarg);
				return 2;
			}
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (!listen.sa.sa_family || !f->upstream.sa.sa_family || optind != argc) {
		fputs(usage, stderr);
		return 2;
	}
	err = setup(f, &listen);
	if (err < 0) {
		fprintf(stderr, "etrelay-floor: %s: %s\n", addr_str(&listen.sa, a), strerror(-err));
		floor_free(f);
		return 1;
	}
	run(f);
	print_stats(f);
	floor_free(f);
	return 0;
}
