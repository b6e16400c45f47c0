/* SPDX-License-Identifier: ISC */
/* etrelay-load: simulated game clients, one UDP socket (one source port)
 * each, that stamp every datagram and time the answers: flat open or closed
 * loop, an ET match, or a server-browser storm. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "bench.h"
#include "hist.h"
#include "turnc.h"

#define LOAD_BATCH	  64   /* datagrams per sendmmsg / recvmmsg */
#define LOAD_TURN_SENDS	  1024 /* datagrams sent per loop turn: receives get a say */
#define LOAD_TURN_BATCHES 4    /* recvmmsg calls per readable socket per turn */
#define LOAD_EVENTS	  256
#define LOAD_CLIENTS_MAX  20000
#define LOAD_RBUF	  65536			 /* the largest datagram or GRO train */
#define LOAD_SCAN_NS	  (50 * BENCH_NS_PER_MS) /* closed-loop timeout scan */
#define LOAD_MAX_WAIT_NS  (10 * BENCH_NS_PER_MS) /* longest sleep in a turn */
/* "\xff\xff\xff\xffgetstatus " and the 32-digit challenge. */
#define LOAD_STORM_SIZE (4 + 10 + BENCH_CHALLENGE_LEN)
/* allocs: new clients take source ports from this range in turn, below the
 * kernel's ephemeral range, so a port comes back only after thousands of
 * allocations (a server may keep a deleted allocation's 5-tuple a while). */
#define LOAD_CHURN_PORT_MIN 10000
#define LOAD_CHURN_PORT_MAX 31999

enum load_model { LOAD_FLAT, LOAD_MATCH, LOAD_STORM, LOAD_ALLOCS };
enum load_mode { LOAD_CLOSED, LOAD_RATE, LOAD_FLOOD };

static const char *const model_names[] = {"flat", "match", "storm", "allocs"};
static const char *const mode_names[] = {"closed", "rate", "flood"};

static const char usage[] =
    "usage: etrelay-load --target ADDR:PORT [options]\n"
    "\n"
    "Simulate game clients, each with its own source port, against a relay or\n"
    "a server (etrelay-echo) and report round trips and their latency.\n"
    "\n"
    "  -t, --target ADDR:PORT   relay or server (IPv4 or [IPv6])\n"
    "  -c, --clients N          clients, one source port each (1..20000; 1)\n"
    "  -s, --size S             datagram bytes (16..65507; 64)\n"
    "  -w, --window W           closed loop: W in flight per client (1)\n"
    "  -g, --inflight-max G     closed loop: at most G in flight in all (no cap)\n"
    "  -r, --rate R             open loop: R datagrams per second in all\n"
    "  -f, --flood              open loop, as fast as the generator can send\n"
    "  -m, --model M            flat, match (ET match: 40 small packets/s up per\n"
    "                           player, snapshots down from etrelay-echo\n"
    "                           --snapshots 20) or storm (getstatus bursts)\n"
    "  --up-rate N              match: packets per player per second (40)\n"
    "  -b, --burst B            storm: getstatus per source in a row (4);\n"
    "                           flood: datagrams per client per turn (8)\n"
    "  --churn                  storm: a new source port for every burst\n"
    "  --turn ADDR:PORT         go through this TURN server over UDP: each client\n"
    "                           allocates a relayed address with REST credentials,\n"
    "                           binds a channel to --target (the peer) and sends\n"
    "                           its datagrams as ChannelData (--size is the\n"
    "                           payload the peer sees)\n"
    "  --turn-secret S          the REST secret (default: $ETRELAY_TURN_SECRET)\n"
    "  --turn-user ID           the userid in the REST username (load)\n"
    "  --turn-timeout DUR       per TURN request while opening (1s; 3 tries)\n"
    "  --model allocs           with --turn, no --target: allocations per second,\n"
    "                           each client an Allocate then a Refresh(0), again\n"
    "                           and again, one in flight per client (-c is K)\n"
    "  -d, --duration DUR       measured time (10s)\n"
    "  --warmup DUR             traffic before measuring (1s)\n"
    "  --drain DUR              wait for answers after the last send (500ms)\n"
    "  --timeout DUR            closed loop: give up on an answer after DUR (1s)\n"
    "  --source-port P          bind client i to port P+i (kernel picks)\n"
    "  --id-base N              client i is N+i on the wire; bytes 4-5 of a\n"
    "                           datagram (a Quake 3 qport) are its low 16 bits,\n"
    "                           so generators that share a relay take apart\n"
    "                           ranges (0)\n"
    "  --source-ips N           IPv4 loopback target: client i sends from\n"
    "                           127.0.0.1 + (i mod N), N sources for a relay\n"
    "                           that spreads by source address (1..65536; 1);\n"
    "                           allocs: each new client from the next one\n"
    "  --gso                    send runs of datagrams to one destination as UDP\n"
    "                           GSO trains (Linux 4.18+), as a bulk sender with a\n"
    "                           modern stack would; receivers get them whole with\n"
    "                           UDP_GRO or cut back by the kernel\n"
    "  -j, --json               one JSON object instead of the summary\n"
    "  -q, --quiet              no progress line\n"
    "  --marks                  say on stderr when measuring starts and ends\n"
    "  -h, --help               this text\n"
    "\n"
    "DUR is seconds, or a number with us, ms, s or m.\n";

struct load_opts {
	union bench_sockaddr target;
	enum load_model model;
	enum load_mode mode;
	unsigned clients, size, window, inflight_max, burst, up_rate, source_port;
	unsigned source_ips; /* 0: the kernel's choice of source address */
	unsigned id_base;    /* client i is id_base + i on the wire */
	double rate;
	uint64_t duration, warmup, drain, timeout;
	bool json, quiet, marks, churn, gso;
	bool turn; /* --turn: through a TURN server */
	union bench_sockaddr turn_addr;
	const char *turn_secret, *turn_user;
	uint64_t turn_timeout;
};

struct client {
	int fd;
	uint32_t id;
	uint32_t seq;		  /* next sequence number */
	uint32_t win_base;	  /* closed loop: answers below this hold no slot */
	uint32_t inflight;	  /* closed loop: slots taken */
	uint64_t progress;	  /* closed loop: last send or answer (ns) */
	uint32_t snap_next;	  /* match: next snapshot number expected */
	uint32_t up_seen, up_top; /* match: the server's view, last snapshot */
	bool snap_any;
	bool ready;	   /* closed loop: in the ready queue */
	bool used;	   /* storm: has sent since its socket opened */
	uint8_t retries;   /* allocs: challenges in a row */
	uint64_t cycle_t0; /* allocs: when this Allocate began */
};

/* What one measurement window counted. */
struct load_count {
	uint64_t sent, received, misdelivered, bad, send_errors, refused, behind, timeouts;
	uint64_t gaps, reordered;	      /* match: snapshots missing / out of order */
	uint64_t deleted, challenges, errors; /* allocs: Refresh(0) done, 401/438, errors */
};

/* allocs: error answers by STUN code (300..699); [0] no code. */
#define LOAD_CODES 700

struct load {
	struct load_opts o;
	struct client *c;
	int ep;
	uint64_t t0, m0, m1, end; /* start, measuring from, sending until, give up */
	bool measuring, sending;
	bool gso; /* --gso, until the kernel refuses a train */

	/* closed loop */
	uint32_t *rq; /* ready queue of client indices */
	unsigned rq_head, rq_n;
	uint64_t inflight, next_scan;

	/* open loop */
	uint64_t issued; /* datagrams due so far, sent or skipped */
	unsigned rr;	 /* next client, round robin */
	unsigned burst_left;

	struct mmsghdr smsg[LOAD_BATCH];
	struct iovec siov[LOAD_BATCH];
	uint8_t *sbuf;
	struct mmsghdr rmsg[LOAD_BATCH];
	struct iovec riov[LOAD_BATCH];
	union gro_ctl rctl[LOAD_BATCH];
	uint8_t *rbuf;

	struct load_count m; /* the measured window */
	struct hist h;

	/* --turn */
	unsigned churn_port; /* allocs: the next source port to try */
	unsigned churn_ip;   /* allocs: the next of --source-ips */
	struct turnc_cred cred;
	struct turnc *tc; /* one per client */
	uint64_t codes[LOAD_CODES];
	uint64_t open_ns; /* how long opening the allocations took */
	uint8_t treq[TURNC_REQ_MAX];

	/* progress line */
	uint64_t next_progress;
	struct load_count last;
	struct hist ih;
};

static bool in_window(const struct load *l, uint64_t ts)
{
	return ts >= l->m0 && ts < l->m1;
}

static void ready_push(struct load *l, struct client *c)
{
	if (c->ready)
		return;
	c->ready = true;
	l->rq[(l->rq_head + l->rq_n++) % l->o.clients] = c->id;
}

static struct client *ready_pop(struct load *l)
{
	struct client *c = &l->c[l->rq[l->rq_head]];

	l->rq_head = (l->rq_head + 1) % l->o.clients;
	l->rq_n--;
	c->ready = false;
	return c;
}

static int client_open(struct load *l, struct client *c)
{
	const union bench_sockaddr *t = l->o.turn ? &l->o.turn_addr : &l->o.target;
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = c->id};
	int fd, err;

	fd = socket(t->sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Few clients carry deep windows and floods: give them room. */
	if (l->o.clients <= 100)
		bench_set_bufs(fd, l->o.clients == 1 ? 4 << 20 : 1 << 20);
	gro_enable(fd);
	if (l->churn_port) {
		union bench_sockaddr b;
		int tries;

		memset(&b, 0, sizeof(b));
		b.sa.sa_family = t->sa.sa_family;
		/* A new client from the next loopback address too: a server
		 * that limits 401s per source IP sees many hosts. */
		if (l->o.source_ips && t->sa.sa_family == AF_INET)
			b.in.sin_addr.s_addr =
			    htonl(INADDR_LOOPBACK + l->churn_ip++ % l->o.source_ips);
		for (tries = 0; tries < 64; tries++) {
			uint16_t port = (uint16_t)l->churn_port;

			l->churn_port =
			    port >= LOAD_CHURN_PORT_MAX ? LOAD_CHURN_PORT_MIN : port + 1;
			b.in.sin_port = htons(port); /* sin6_port is at the same place */
			if (bind(fd, &b.sa, bench_addr_len(&b)) == 0)
				break;
			if (errno != EADDRINUSE)
				goto fail;
		}
		if (tries == 64)
			goto fail;
	} else if (l->o.source_port || l->o.source_ips) {
		union bench_sockaddr b;
		uint16_t port = l->o.source_port ? (uint16_t)(l->o.source_port + c->id) : 0;

		memset(&b, 0, sizeof(b));
		b.sa.sa_family = t->sa.sa_family;
		if (t->sa.sa_family == AF_INET6) {
			b.in6.sin6_port = htons(port);
		} else {
			b.in.sin_port = htons(port);
			/* 127/8 is the loopback's whole: any of it is a source. */
			if (l->o.source_ips)
				b.in.sin_addr.s_addr =
				    htonl(INADDR_LOOPBACK + c->id % l->o.source_ips);
		}
		if (bind(fd, &b.sa, bench_addr_len(&b)) < 0)
			goto fail;
	}
	if (connect(fd, &t->sa, bench_addr_len(t)) < 0 ||
	    epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		goto fail;
	c->fd = fd;
	c->used = false;
	return 0;
fail:
	err = -errno;
	close(fd);
	return err;
}

/* Send smsg[off, k) one datagram each in one sendmmsg; returns how many
 * went, *err the error that stopped it. */
static unsigned send_each(struct load *l, int fd, unsigned off, unsigned k, int *err)
{
	int n = sendmmsg(fd, l->smsg + off, k - off, MSG_DONTWAIT);

	if (n < 0) {
		*err = -errno;
		return 0;
	}
	return (unsigned)n;
}

/* --gso: the k datagrams in siov as trains, one sendmsg each; returns how
 * many went, *err the error that stopped it. Each datagram is one iovec of
 * the segment size, so the kernel cuts the train where our stamps begin. A
 * train the kernel cannot cut goes again one datagram at a time, and so does
 * every send after it. */
static unsigned send_trains(struct load *l, int fd, unsigned k, int *err)
{
	unsigned off = 0;

	while (off < k && l->gso) {
		unsigned t = bench_gso_run(l->siov + off, k - off);
		struct msghdr m = {.msg_iov = l->siov + off, .msg_iovlen = t};
		union gso_ctl ctl;

		if (t > 1)
			gso_set_segment(&m, &ctl, (uint16_t)l->siov[off].iov_len);
		if (sendmsg(fd, &m, MSG_DONTWAIT) < 0) {
			*err = -errno;
			if (t == 1 || !bench_gso_refused(*err))
				return off;
			l->gso = false;
			fprintf(stderr,
				"etrelay-load: --gso: a train of %u x %zu B failed: %s; "
				"sending one datagram at a time from here\n",
				t, l->siov[off].iov_len, strerror(-*err));
			*err = 0;
			break;
		}
		off += t;
	}
	return off < k ? off + send_each(l, fd, off, k, err) : off;
}

static unsigned allocs_send(struct load *l, struct client *c, uint64_t now);

/* Send up to k datagrams from c; returns how many left. */
static unsigned send_from(struct load *l, struct client *c, unsigned k)
{
	uint64_t now = bench_now();
	unsigned n;
	int err = 0;

	if (l->o.model == LOAD_ALLOCS)
		return allocs_send(l, c, now);
	if (k > LOAD_BATCH)
		k = LOAD_BATCH;
	for (unsigned i = 0; i < k; i++) {
		uint8_t *p = l->siov[i].iov_base;

		/* --turn: the ChannelData header before our stamp (the channel
		 * and length are the same every time, but cheap to write). */
		if (l->o.turn) {
			stun_chan_header(p, TURNC_CHANNEL, (uint16_t)l->o.size);
			p += STUN_CHAN_HDR_LEN;
		}
		if (l->o.model == LOAD_STORM)
			l->siov[i].iov_len = (size_t)snprintf(
			    (char *)p, 64, "\xff\xff\xff\xffgetstatus %08x%08x%016llx",
			    l->o.id_base + c->id, c->seq + i, (unsigned long long)now);
		else
			bench_hdr_put(p, l->o.model == LOAD_MATCH ? BENCH_GAME : BENCH_ECHO,
				      l->o.id_base + c->id, c->seq + i, now);
	}
	n = l->gso ? send_trains(l, c->fd, k, &err) : send_each(l, c->fd, 0, k, &err);
	if (err == -ECONNREFUSED)
		l->m.refused += in_window(l, now);
	c->seq += n;
	c->used = true;
	c->progress = now;
	if (in_window(l, now)) {
		l->m.sent += n;
		l->m.send_errors += k - n;
	}
	return n;
}

static void on_snapshot(struct load *l, struct client *c, const struct bench_hdr *h,
			const uint8_t *p, size_t n, uint64_t now)
{
	if (h->kind != BENCH_SNAPSHOT || n < BENCH_SNAP_HDR) {
		l->m.bad++;
		return;
	}
	memcpy(&c->up_seen, p + 16, 4);
	memcpy(&c->up_top, p + 20, 4);
	if (in_window(l, h->ts)) {
		l->m.received++;
		hist_add(&l->h, now - h->ts);
		hist_add(&l->ih, now - h->ts);
		if (c->snap_any && h->seq > c->snap_next)
			l->m.gaps += h->seq - c->snap_next;
		if (c->snap_any && h->seq < c->snap_next)
			l->m.reordered++;
	}
	if (!c->snap_any || h->seq >= c->snap_next)
		c->snap_next = h->seq + 1;
	c->snap_any = true;
}

/* Find the \challenge\ of a statusResponse and read our stamp from it. */
static bool status_hdr(const uint8_t *p, size_t n, struct bench_hdr *h)
{
	static const char key[] = "\\challenge\\";
	size_t off;

	if (!bench_is_cmd(p, n, "statusResponse", &off))
		return false;
	for (; off + sizeof(key) - 1 + BENCH_CHALLENGE_LEN <= n; off++)
		if (memcmp(p + off, key, sizeof(key) - 1) == 0)
			return bench_challenge_get((const char *)p + off + sizeof(key) - 1,
						   n - off - (sizeof(key) - 1), h);
	return false;
}

static void on_answer(struct load *l, struct client *c, const uint8_t *p, size_t n, uint64_t now)
{
	struct bench_hdr h;
	bool ok = l->o.model == LOAD_STORM ? status_hdr(p, n, &h) : bench_hdr_get(p, n, &h);

	if (!ok) {
		l->m.bad++;
		return;
	}
	if (h.id != l->o.id_base + c->id) {
		/* Someone else's answer: the relay mixed up two sessions. */
		l->m.misdelivered++;
		return;
	}
	if (l->o.model == LOAD_MATCH) {
		on_snapshot(l, c, &h, p, n, now);
		return;
	}
	if (h.kind != BENCH_ECHO || h.seq >= c->seq || h.ts > now) {
		l->m.bad++;
		return;
	}
	if (l->o.mode == LOAD_CLOSED && h.seq >= c->win_base && c->inflight > 0) {
		c->inflight--;
		l->inflight--;
		c->progress = now;
		ready_push(l, c);
	}
	if (in_window(l, h.ts)) {
		l->m.received++;
		hist_add(&l->h, now - h.ts);
		hist_add(&l->ih, now - h.ts);
	}
}

static void allocs_answer(struct load *l, struct client *c, const uint8_t *p, size_t n,
			  uint64_t now);

/* --turn: an answer is ChannelData from the peer, or (allocs) a STUN
 * answer. */
static void on_turn(struct load *l, struct client *c, const uint8_t *p, size_t n, uint64_t now)
{
	const uint8_t *data;
	uint16_t ch;
	size_t len;

	if (l->o.model == LOAD_ALLOCS) {
		allocs_answer(l, c, p, n, now);
		return;
	}
	if (stun_chan_parse(p, n, &ch, &data, &len) != 0 || ch != TURNC_CHANNEL) {
		l->m.bad++;
		return;
	}
	on_answer(l, c, data, len, now);
}

static void drain_client(struct load *l, struct client *c)
{
	for (int b = 0; b < LOAD_TURN_BATCHES; b++) {
		uint64_t now;
		int n;

		/* The kernel shrinks msg_controllen to what it wrote. */
		for (unsigned i = 0; i < LOAD_BATCH; i++) {
			l->rmsg[i].msg_hdr.msg_control = &l->rctl[i];
			l->rmsg[i].msg_hdr.msg_controllen = sizeof(l->rctl[i]);
		}
		n = recvmmsg(c->fd, l->rmsg, LOAD_BATCH, MSG_DONTWAIT, NULL);
		if (n < 0) {
			/* A connected socket hears ICMP port unreachable. */
			if (errno == ECONNREFUSED)
				l->m.refused++;
			return;
		}
		now = bench_now();
		for (int i = 0; i < n; i++) {
			struct msghdr *m = &l->rmsg[i].msg_hdr;
			const uint8_t *p = l->riov[i].iov_base;
			size_t len = l->rmsg[i].msg_len, seg, off = 0;

			if (m->msg_flags & MSG_TRUNC) {
				l->m.bad++;
				continue;
			}
			/* Each segment of a train is an answer of its own;
			 * do-while so an empty datagram is seen too. */
			seg = gro_msg_size(m);
			do {
				size_t k = gro_segment(len, seg, off);

				if (l->o.turn)
					on_turn(l, c, p + off, k, now);
				else
					on_answer(l, c, p + off, k, now);
				off += k;
			} while (off < len);
		}
		if (n < LOAD_BATCH)
			return;
	}
}

/* Closed loop: clients with free slots send until the global cap. */
static void send_closed(struct load *l)
{
	unsigned budget = LOAD_TURN_SENDS;

	while (budget && l->rq_n && (!l->o.inflight_max || l->inflight < l->o.inflight_max)) {
		struct client *c = ready_pop(l);
		unsigned k = l->o.window - c->inflight, n;

		if (l->o.inflight_max && k > l->o.inflight_max - l->inflight)
			k = (unsigned)(l->o.inflight_max - l->inflight);
		if (k > budget)
			k = budget;
		n = send_from(l, c, k);
		c->inflight += n;
		l->inflight += n;
		budget -= k < 1 ? 1 : k;
		if (c->inflight < l->o.window)
			ready_push(l, c);
		if (n < k)
			break; /* the kernel refuses: try again next turn */
	}
}

/* Closed loop: a slot whose answer never came is freed after the timeout. */
static void scan_timeouts(struct load *l, uint64_t now)
{
	if (now < l->next_scan)
		return;
	l->next_scan = now + LOAD_SCAN_NS;
	for (unsigned i = 0; i < l->o.clients; i++) {
		struct client *c = &l->c[i];

		if (c->inflight == 0 || now - c->progress < l->o.timeout)
			continue;
		if (l->measuring && now < l->m1)
			l->m.timeouts += c->inflight;
		l->inflight -= c->inflight;
		c->inflight = 0;
		c->win_base = c->seq;
		ready_push(l, c);
	}
}

/* allocs: the request just built in treq goes out; false when the kernel
 * refused it (counted as a send error). */
static bool allocs_put(struct load *l, struct client *c, size_t len, uint64_t now)
{
	c->progress = now;
	if (len && send(c->fd, l->treq, len, MSG_DONTWAIT) == (ssize_t)len)
		return true;
	if (in_window(l, now))
		l->m.send_errors++;
	return false;
}

/* allocs: a client starts its next cycle as a new client would: from a new
 * source port (a server may keep a deleted allocation's 5-tuple a while:
 * coturn answers 437 there for a second), with a bare Allocate that draws
 * the 401. */
static unsigned allocs_send(struct load *l, struct client *c, uint64_t now)
{
	struct turnc *t = &l->tc[c->id];

	if (c->used) {
		epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
		if (client_open(l, c) < 0) {
			l->m.send_errors += in_window(l, now);
			return 0;
		}
	}
	c->used = true;
	l->churn_port = l->churn_port ? l->churn_port : LOAD_CHURN_PORT_MIN;
	turnc_forget(t);
	c->retries = 0;
	c->cycle_t0 = now;
	if (!allocs_put(l, c, turnc_allocate(t, l->treq), now))
		return 0;
	l->m.sent += in_window(l, now);
	return 1;
}

/* allocs: this client's cycle is over (done or failed); it may start
 * another. */
static void allocs_done(struct load *l, struct client *c)
{
	c->inflight = 0;
	l->inflight--;
	ready_push(l, c);
}

static void allocs_count_error(struct load *l, int code, uint64_t now)
{
	if (!in_window(l, now))
		return;
	l->m.errors++;
	l->codes[code >= 300 && code < LOAD_CODES ? code : 0]++;
}

static void allocs_answer(struct load *l, struct client *c, const uint8_t *p, size_t n,
			  uint64_t now)
{
	struct turnc *t = &l->tc[c->id];
	char reason[64];
	size_t len = 0;
	int code;

	if (c->inflight == 0)
		return; /* a late answer after a timeout */
	switch (turnc_answer(t, p, n, &code, reason, NULL)) {
	case TURNC_IGNORE:
		return;
	case TURNC_BAD:
		l->m.bad += in_window(l, now);
		allocs_done(l, c);
		return;
	case TURNC_RETRY:
		l->m.challenges += in_window(l, now);
		if (++c->retries > 3) {
			allocs_count_error(l, code, now);
			allocs_done(l, c);
			return;
		}
		len = t->method == STUN_ALLOCATE ? turnc_allocate(t, l->treq)
						 : turnc_refresh(t, l->treq, 0);
		break;
	case TURNC_OK:
		if (t->method == STUN_REFRESH) {
			l->m.deleted += in_window(l, now);
			allocs_done(l, c);
			return;
		}
		if (in_window(l, now)) {
			l->m.received++;
			hist_add(&l->h, now - c->cycle_t0);
			hist_add(&l->ih, now - c->cycle_t0);
		}
		c->retries = 0;
		len = turnc_refresh(t, l->treq, 0);
		break;
	case TURNC_ERROR:
		allocs_count_error(l, code, now);
		/* 437: an allocation of ours is still there (a lost answer):
		 * delete it, then go on. */
		if (t->method != STUN_ALLOCATE || code != 437) {
			allocs_done(l, c);
			return;
		}
		len = turnc_refresh(t, l->treq, 0);
		break;
	}
	if (!allocs_put(l, c, len, now))
		allocs_done(l, c);
}

/* Storm: the next source, on a fresh port with --churn. */
static struct client *next_source(struct load *l)
{
	struct client *c = &l->c[l->rr];

	if (l->burst_left == 0) {
		l->rr = (l->rr + 1) % l->o.clients;
		c = &l->c[l->rr];
		l->burst_left = l->o.burst;
		if (l->o.churn && c->used) {
			epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
			close(c->fd);
			if (client_open(l, c) < 0)
				c->fd = -1;
		}
	}
	return c;
}

/* Open loop: send what the clock says is due, round robin over clients. */
static void send_rate(struct load *l, uint64_t now)
{
	uint64_t due_total = (uint64_t)((double)(now - l->t0) * l->o.rate / 1e9);
	/* Falling more than 5 ms behind means the generator (or its core) is the
	 * bottleneck: skip and count rather than burst to catch up. */
	uint64_t max_lag = (uint64_t)(l->o.rate / 200) + LOAD_BATCH;
	uint64_t due = due_total > l->issued ? due_total - l->issued : 0;

	if (due > max_lag) {
		if (in_window(l, now))
			l->m.behind += due - max_lag;
		l->issued += due - max_lag;
		due = max_lag;
	}
	while (due) {
		struct client *c;
		uint64_t k;

		if (l->o.model == LOAD_STORM) {
			c = next_source(l);
			k = l->burst_left < due ? l->burst_left : due;
			l->burst_left -= (unsigned)k;
		} else {
			c = &l->c[l->rr];
			k = due / l->o.clients;
			k = k < 1 ? 1 : k > LOAD_BATCH ? LOAD_BATCH : k;
			l->rr = (l->rr + 1) % l->o.clients;
		}
		if (c->fd >= 0)
			send_from(l, c, (unsigned)k);
		l->issued += k;
		due -= k;
	}
}

static void send_flood(struct load *l)
{
	for (unsigned budget = LOAD_TURN_SENDS; budget >= l->o.burst; budget -= l->o.burst) {
		send_from(l, &l->c[l->rr], l->o.burst);
		l->rr = (l->rr + 1) % l->o.clients;
	}
}

static void progress(struct load *l, uint64_t now)
{
	double secs = (double)(now - l->t0) / 1e9;
	const char *end = isatty(2) ? "\r" : "\n";

	if (l->o.quiet || now < l->next_progress)
		return;
	/* Only runs longer than a few seconds get a progress line. */
	if (l->m1 + l->o.drain - l->t0 > 3 * BENCH_NS_PER_SEC)
		fprintf(
		    stderr,
		    "%5.1fs %-8s sent %8llu/s  answers %8llu/s  p99 %8.1f us  in flight %llu   %s",
		    secs,
		    !l->measuring ? "warm-up"
		    : l->sending  ? "measure"
				  : "drain",
		    (unsigned long long)(l->m.sent - l->last.sent),
		    (unsigned long long)(l->m.received - l->last.received),
		    (double)hist_quantile(&l->ih, 0.99) / 1e3, (unsigned long long)l->inflight,
		    end);
	l->last = l->m;
	hist_reset(&l->ih);
	l->next_progress += BENCH_NS_PER_SEC;
}

/* Every client answered or the window passed: nothing more will count. */
static bool drained(const struct load *l, uint64_t now)
{
	if (now >= l->end)
		return true;
	if (l->sending)
		return false;
	if (l->o.mode == LOAD_CLOSED)
		return l->inflight == 0;
	if (l->o.model == LOAD_MATCH)
		return false;
	return l->m.received >= l->m.sent;
}

static uint64_t wait_ns(const struct load *l, uint64_t now)
{
	uint64_t w = LOAD_MAX_WAIT_NS;

	if (l->sending) {
		if (l->o.mode == LOAD_FLOOD)
			return 0;
		if (l->o.mode == LOAD_CLOSED && l->rq_n &&
		    (!l->o.inflight_max || l->inflight < l->o.inflight_max))
			return 0;
		if (l->o.mode == LOAD_RATE) {
			uint64_t next =
			    l->t0 + (uint64_t)((double)(l->issued + 1) * 1e9 / l->o.rate);
			w = next > now ? next - now : 0;
		}
	}
	if (!l->measuring && l->m0 - now < w)
		w = l->m0 - now;
	if (l->sending && l->m1 - now < w)
		w = l->m1 - now;
	return w < LOAD_MAX_WAIT_NS ? w : LOAD_MAX_WAIT_NS;
}

static void run(struct load *l)
{
	struct epoll_event ev[LOAD_EVENTS];

	l->t0 = bench_now();
	l->m0 = l->t0 + l->o.warmup;
	l->m1 = l->m0 + l->o.duration;
	l->end = l->m1 + l->o.drain;
	l->sending = true;
	l->next_progress = l->t0 + BENCH_NS_PER_SEC;
	l->next_scan = l->t0 + LOAD_SCAN_NS;
	for (;;) {
		uint64_t now = bench_now(), w;
		struct timespec ts;
		int n;

		if (!l->measuring && now >= l->m0) {
			l->measuring = true;
			if (l->o.marks)
				fputs("etrelay-load: measuring\n", stderr);
		}
		if (l->sending && now >= l->m1) {
			l->sending = false;
			if (l->o.marks)
				fputs("etrelay-load: measured\n", stderr);
		}
		if (drained(l, now))
			break;
		if (l->o.mode == LOAD_CLOSED)
			scan_timeouts(l, now);
		if (l->sending) {
			if (l->o.mode == LOAD_CLOSED)
				send_closed(l);
			else if (l->o.mode == LOAD_RATE)
				send_rate(l, now);
			else
				send_flood(l);
		}
		progress(l, now);
		now = bench_now();
		w = wait_ns(l, now);
		ts.tv_sec = (time_t)(w / BENCH_NS_PER_SEC);
		ts.tv_nsec = (long)(w % BENCH_NS_PER_SEC);
		n = epoll_pwait2(l->ep, ev, LOAD_EVENTS, &ts, NULL);
		for (int i = 0; i < n; i++) {
			struct client *c = &l->c[ev[i].data.u32];

			if (c->fd >= 0)
				drain_client(l, c);
		}
	}
	if (!l->o.quiet && isatty(2) && l->m1 + l->o.drain - l->t0 > 3 * BENCH_NS_PER_SEC)
		fputc('\n', stderr);
}

static double us(uint64_t ns)
{
	return (double)ns / 1e3;
}

/* allocs: Allocate + Refresh(0) cycles. */
static void report_allocs(const struct load *l)
{
	const struct load_count *m = &l->m;
	double secs = (double)l->o.duration / 1e9;
	char a[BENCH_ADDR_STRLEN];

	printf("etrelay-load: allocs against TURN server %s, %u in flight, %.2f s after "
	       "%.2f s warm-up\n",
	       bench_addr_str(&l->o.turn_addr.sa, a), l->o.clients, secs,
	       (double)l->o.warmup / 1e9);
	printf("  started     %llu Allocate\n  allocated   %llu (%.0f/s), deleted %llu, "
	       "challenges %llu\n  latency     p50 %.1f us, p99 %.1f us, p99.9 %.1f us, "
	       "max %.1f us\n",
	       (unsigned long long)m->sent, (unsigned long long)m->received,
	       (double)m->received / secs, (unsigned long long)m->deleted,
	       (unsigned long long)m->challenges, us(hist_quantile(&l->h, 0.5)),
	       us(hist_quantile(&l->h, 0.99)), us(hist_quantile(&l->h, 0.999)), us(l->h.max));
	printf("  errors      %llu", (unsigned long long)m->errors);
	for (unsigned i = 0; i < LOAD_CODES; i++)
		if (l->codes[i] && i == 0)
			printf(", %llu without a code", (unsigned long long)l->codes[i]);
		else if (l->codes[i])
			printf(", %llu x %u %s", (unsigned long long)l->codes[i], i,
			       stun_reason((int)i));
	printf("; bad %llu, send %llu, timeouts %llu\n", (unsigned long long)m->bad,
	       (unsigned long long)m->send_errors, (unsigned long long)m->timeouts);
}

static void report(const struct load *l)
{
	const struct load_opts *o = &l->o;
	const struct load_count *m = &l->m;
	double secs = (double)o->duration / 1e9;
	uint64_t lost = m->sent > m->received ? m->sent - m->received : 0;
	uint64_t up_top = 0, up_seen = 0, up_lost;
	double loss = m->sent ? (double)lost / (double)m->sent : 0;
	char a[BENCH_ADDR_STRLEN];

	if (o->model == LOAD_MATCH) {
		/* Down: snapshots missing from each stream; up: what the server
		 * says it got, over the whole run. */
		for (unsigned i = 0; i < o->clients; i++) {
			up_top += l->c[i].up_top;
			up_seen += l->c[i].up_seen;
		}
		lost = m->gaps;
		loss =
		    m->received + m->gaps ? (double)m->gaps / (double)(m->received + m->gaps) : 0;
	}
	up_lost = up_top > up_seen ? up_top - up_seen : 0;
	bench_addr_str(&o->target.sa, a);
	if (o->json) {
		printf("{\"model\":\"%s\",\"mode\":\"%s\",\"target\":\"%s\",\"family\":\"%s\","
		       "\"clients\":%u,\"size\":%u,\"window\":%u,\"inflight_max\":%u,"
		       "\"rate\":%.0f,\"burst\":%u,\"churn\":%s,\"warmup_s\":%.3f,"
		       "\"duration_s\":%.3f,\"sent\":%llu,\"received\":%llu,\"lost\":%llu,"
		       "\"loss\":%.6f,\"round_trips_per_s\":%.1f,"
		       "\"latency_us\":{\"p50\":%.1f,\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f,"
		       "\"mean\":%.1f},\"misdelivered\":%llu,\"bad\":%llu,\"send_errors\":%llu,"
		       "\"refused\":%llu,\"behind\":%llu,\"timeouts\":%llu,\"gso\":%s,"
		       "\"source_ips\":%u",
		       model_names[o->model], mode_names[o->mode], a,
		       o->target.sa.sa_family == AF_INET6 ? "ipv6" : "ipv4", o->clients,
		       o->model == LOAD_STORM ? LOAD_STORM_SIZE : o->size,
		       o->mode == LOAD_CLOSED ? o->window : 0, o->inflight_max, o->rate, o->burst,
		       o->churn ? "true" : "false", (double)o->warmup / 1e9, secs,
		       (unsigned long long)m->sent, (unsigned long long)m->received,
		       (unsigned long long)lost, loss, (double)m->received / secs,
		       us(hist_quantile(&l->h, 0.5)), us(hist_quantile(&l->h, 0.99)),
		       us(hist_quantile(&l->h, 0.999)), us(l->h.max),
		       l->h.count ? l->h.sum / (double)l->h.count / 1e3 : 0.0,
		       (unsigned long long)m->misdelivered, (unsigned long long)m->bad,
		       (unsigned long long)m->send_errors, (unsigned long long)m->refused,
		       (unsigned long long)m->behind, (unsigned long long)m->timeouts,
		       l->gso ? "true" : "false", o->source_ips ? o->source_ips : 1);
		if (o->model == LOAD_MATCH)
			printf(",\"up_rate\":%u,\"down_gaps\":%llu,\"down_reordered\":%llu,"
			       "\"up_acked_expected\":%llu,\"up_acked\":%llu,\"up_lost\":%llu",
			       o->up_rate, (unsigned long long)m->gaps,
			       (unsigned long long)m->reordered, (unsigned long long)up_top,
			       (unsigned long long)up_seen, (unsigned long long)up_lost);
		if (o->turn) {
			char t[BENCH_ADDR_STRLEN];

			printf(",\"turn\":\"%s\",\"turn_open_s\":%.6f",
			       bench_addr_str(&o->turn_addr.sa, t), (double)l->open_ns / 1e9);
		}
		if (o->model == LOAD_ALLOCS) {
			const char *sep = "";

			printf(",\"allocations_per_s\":%.1f,\"deleted\":%llu,\"challenges\":%llu,"
			       "\"errors\":%llu,\"error_codes\":{",
			       (double)m->received / secs, (unsigned long long)m->deleted,
			       (unsigned long long)m->challenges, (unsigned long long)m->errors);
			for (unsigned i = 0; i < LOAD_CODES; i++)
				if (l->codes[i]) {
					printf("%s\"%u\":%llu", sep, i,
					       (unsigned long long)l->codes[i]);
					sep = ",";
				}
			printf("}");
		}
		printf("}\n");
		return;
	}
	if (o->model == LOAD_ALLOCS) {
		report_allocs(l);
		return;
	}
	printf("etrelay-load: %s %s loop to %s, %u client%s", model_names[o->model],
	       o->mode == LOAD_CLOSED ? "closed" : "open", a, o->clients,
	       o->clients == 1 ? "" : "s");
	if (o->mode == LOAD_CLOSED)
		printf(" x %u in flight%s", o->window, o->inflight_max ? " (capped)" : "");
	else if (o->mode == LOAD_RATE)
		printf(" at %.0f/s", o->rate);
	else
		printf(" flat out");
	printf(", %u B%s, %.2f s after %.2f s warm-up\n",
	       o->model == LOAD_STORM ? LOAD_STORM_SIZE : o->size,
	       l->gso	? " in GSO trains"
	       : o->gso ? " (GSO refused: one at a time)"
			: "",
	       secs, (double)o->warmup / 1e9);
	if (o->model == LOAD_MATCH) {
		printf("  up        sent %llu; server got %llu of %llu (lost %llu, whole run)\n",
		       (unsigned long long)m->sent, (unsigned long long)up_seen,
		       (unsigned long long)up_top, (unsigned long long)up_lost);
		printf("  down      snapshots %llu (%.0f/s), missing %llu (%.3f %%), "
		       "out of order %llu\n",
		       (unsigned long long)m->received, (double)m->received / secs,
		       (unsigned long long)m->gaps, 100 * loss, (unsigned long long)m->reordered);
		printf("  one-way   ");
	} else {
		printf("  sent        %llu\n  received    %llu (lost %llu, %.3f %%)\n"
		       "  round trips %.0f/s\n  latency     ",
		       (unsigned long long)m->sent, (unsigned long long)m->received,
		       (unsigned long long)lost, 100 * loss, (double)m->received / secs);
	}
	printf("p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us\n",
	       us(hist_quantile(&l->h, 0.5)), us(hist_quantile(&l->h, 0.99)),
	       us(hist_quantile(&l->h, 0.999)), us(l->h.max));
	printf("  errors      misdelivered %llu, bad %llu, send %llu, refused %llu, "
	       "behind %llu, timeouts %llu\n",
	       (unsigned long long)m->misdelivered, (unsigned long long)m->bad,
	       (unsigned long long)m->send_errors, (unsigned long long)m->refused,
	       (unsigned long long)m->behind, (unsigned long long)m->timeouts);
}

/* --turn: credentials for every client and, but for allocs, its
 * allocation with a channel to the peer, one client after the other. */
static int turn_open(struct load *l)
{
	const struct load_opts *o = &l->o;
	uint64_t t0 = bench_now();
	char err[200], a[BENCH_ADDR_STRLEN];

	if (turnc_cred_init(&l->cred, (const uint8_t *)o->turn_secret, strlen(o->turn_secret),
			    o->turn_user, (uint64_t)time(NULL) + 86400) < 0) {
		fprintf(stderr, "etrelay-load: --turn-user %s: too long\n", o->turn_user);
		return -1;
	}
	l->tc = calloc(o->clients, sizeof(*l->tc));
	if (!l->tc) {
		fprintf(stderr, "etrelay-load: out of memory\n");
		return -1;
	}
	for (unsigned i = 0; i < o->clients; i++) {
		turnc_init(&l->tc[i], &l->cred, o->id_base + i);
		if (o->model == LOAD_ALLOCS)
			continue;
		if (turnc_open(&l->tc[i], l->c[i].fd, TURNC_CHANNEL, &o->target, o->turn_timeout,
			       NULL, err, sizeof(err)) < 0) {
			fprintf(stderr, "etrelay-load: client %u: TURN server %s: %s\n", i,
				bench_addr_str(&o->turn_addr.sa, a), err);
			return -1;
		}
	}
	l->open_ns = bench_now() - t0;
	if (!o->quiet && o->model != LOAD_ALLOCS)
		fprintf(stderr, "etrelay-load: %u allocation%s with a channel to %s in %.1f ms\n",
			o->clients, o->clients == 1 ? "" : "s", bench_addr_str(&o->target.sa, a),
			(double)l->open_ns / 1e6);
	return 0;
}

/* --turn: give the allocations back (best effort: a server that does not
 * answer is not asked again). */
static void turn_close(struct load *l)
{
	if (!l->tc || l->o.model == LOAD_ALLOCS)
		return;
	for (unsigned i = 0; i < l->o.clients; i++)
		if (l->c[i].fd < 0 || turnc_close(&l->tc[i], l->c[i].fd, 50 * BENCH_NS_PER_MS) < 0)
			return;
}

static int setup(struct load *l)
{
	const struct load_opts *o = &l->o;
	char a[BENCH_ADDR_STRLEN];
	size_t sbuf = (o->size > 64 ? o->size : 64) + (o->turn ? STUN_CHAN_HDR_LEN : 0);
	int err;

	err = bench_raise_nofile(o->clients + 64);
	if (err < 0) {
		fprintf(stderr,
			"etrelay-load: %u clients need %u file descriptors: %s "
			"(raise ulimit -n)\n",
			o->clients, o->clients + 64, strerror(-err));
		return err;
	}
	l->c = calloc(o->clients, sizeof(*l->c));
	l->rq = calloc(o->clients, sizeof(*l->rq));
	l->sbuf = malloc(LOAD_BATCH * sbuf);
	l->rbuf = malloc((size_t)LOAD_BATCH * LOAD_RBUF);
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	if (!l->c || !l->rq || !l->sbuf || !l->rbuf || l->ep < 0) {
		fprintf(stderr, "etrelay-load: out of memory\n");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < o->clients; i++)
		l->c[i].fd = -1;
	/* Padding a byte pattern once; each send writes only the header. */
	for (size_t i = 0; i < LOAD_BATCH * sbuf; i++)
		l->sbuf[i] = (uint8_t)('a' + i % 26);
	for (unsigned i = 0; i < LOAD_BATCH; i++) {
		l->siov[i].iov_base = l->sbuf + i * sbuf;
		l->siov[i].iov_len = o->size + (o->turn ? STUN_CHAN_HDR_LEN : 0);
		l->smsg[i].msg_hdr.msg_iov = &l->siov[i];
		l->smsg[i].msg_hdr.msg_iovlen = 1;
		l->riov[i].iov_base = l->rbuf + (size_t)i * LOAD_RBUF;
		l->riov[i].iov_len = LOAD_RBUF;
		l->rmsg[i].msg_hdr.msg_iov = &l->riov[i];
		l->rmsg[i].msg_hdr.msg_iovlen = 1;
	}
	for (unsigned i = 0; i < o->clients; i++) {
		struct client *c = &l->c[i];

		c->id = i;
		err = client_open(l, c);
		if (err < 0) {
			fprintf(stderr, "etrelay-load: client %u: socket to %s%s: %s%s\n", i,
				bench_addr_str(&o->target.sa, a),
				o->source_port ? " from port" : "", strerror(-err),
				err == -EADDRINUSE ? " (pick another --source-port)" : "");
			return err;
		}
		if (o->mode == LOAD_CLOSED)
			ready_push(l, c);
	}
	if (o->turn && turn_open(l) < 0)
		return -EPROTO;
	if (o->gso) {
		l->gso = gso_supported();
		if (!l->gso)
			fprintf(stderr,
				"etrelay-load: --gso: this kernel has no UDP GSO "
				"(UDP_SEGMENT, Linux 4.18+); sending one datagram at a time\n");
	}
	hist_reset(&l->h);
	hist_reset(&l->ih);
	l->burst_left = o->burst;
	return 0;
}

static int parse_dur_opt(const char *name, const char *v, uint64_t *ns)
{
	return bench_opt_dur("etrelay-load", name, v, ns);
}

static int parse_uint_opt(const char *name, const char *v, unsigned long lo, unsigned long hi,
			  unsigned *out)
{
	unsigned long x;

	if (bench_opt_uint("etrelay-load", name, v, lo, hi, &x) < 0)
		return -1;
	*out = (unsigned)x;
	return 0;
}

static int parse_args(struct load_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"target", required_argument, NULL, 't'},
	    {"clients", required_argument, NULL, 'c'},
	    {"size", required_argument, NULL, 's'},
	    {"window", required_argument, NULL, 'w'},
	    {"inflight-max", required_argument, NULL, 'g'},
	    {"rate", required_argument, NULL, 'r'},
	    {"flood", no_argument, NULL, 'f'},
	    {"model", required_argument, NULL, 'm'},
	    {"up-rate", required_argument, NULL, 'U'},
	    {"burst", required_argument, NULL, 'b'},
	    {"churn", no_argument, NULL, 'C'},
	    {"duration", required_argument, NULL, 'd'},
	    {"warmup", required_argument, NULL, 'W'},
	    {"drain", required_argument, NULL, 'D'},
	    {"timeout", required_argument, NULL, 'T'},
	    {"source-port", required_argument, NULL, 'P'},
	    {"source-ips", required_argument, NULL, 'S'},
	    {"id-base", required_argument, NULL, 'I'},
	    {"gso", no_argument, NULL, 'G'},
	    {"turn", required_argument, NULL, 'X'},
	    {"turn-secret", required_argument, NULL, 'K'},
	    {"turn-user", required_argument, NULL, 'Y'},
	    {"turn-timeout", required_argument, NULL, 'Z'},
	    {"json", no_argument, NULL, 'j'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"marks", no_argument, NULL, 'M'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	/* in the order of enum load_model */
	static const char *const models[] = {"flat", "match", "storm", "allocs", NULL};
	bool have_target = false, have_window = false, have_burst = false;
	unsigned rate = 0;
	int c, k;

	memset(o, 0, sizeof(*o));
	o->clients = 1;
	o->size = 64;
	o->window = 1;
	o->up_rate = 40;
	o->duration = 10 * BENCH_NS_PER_SEC;
	o->warmup = BENCH_NS_PER_SEC;
	o->drain = 500 * BENCH_NS_PER_MS;
	o->timeout = BENCH_NS_PER_SEC;
	o->mode = LOAD_CLOSED;
	o->turn_user = "load";
	o->turn_timeout = BENCH_NS_PER_SEC;
	while ((c = getopt_long(argc, argv, "t:c:s:w:g:r:fm:b:d:jqh", opts, NULL)) != -1) {
		int bad = 0;

		switch (c) {
		case 't':
			if (bench_opt_addr("etrelay-load", "target", optarg, &o->target) < 0)
				return -1;
			have_target = true;
			break;
		case 'c':
			bad = parse_uint_opt("clients", optarg, 1, LOAD_CLIENTS_MAX, &o->clients);
			break;
		case 's':
			bad = parse_uint_opt("size", optarg, BENCH_HDR, BENCH_MAX_DGRAM, &o->size);
			break;
		case 'w':
			bad = parse_uint_opt("window", optarg, 1, 4096, &o->window);
			have_window = true;
			break;
		case 'g':
			bad = parse_uint_opt("inflight-max", optarg, 1, 1u << 24, &o->inflight_max);
			break;
		case 'r':
			bad = parse_uint_opt("rate", optarg, 1, 100000000, &rate);
			o->mode = LOAD_RATE;
			break;
		case 'f':
			o->mode = LOAD_FLOOD;
			break;
		case 'm':
			if ((k = bench_opt_choice("etrelay-load", "model", optarg, models)) < 0)
				return -1;
			o->model = (enum load_model)k;
			break;
		case 'U':
			bad = parse_uint_opt("up-rate", optarg, 1, 1000, &o->up_rate);
			break;
		case 'b':
			bad = parse_uint_opt("burst", optarg, 1, LOAD_BATCH, &o->burst);
			have_burst = true;
			break;
		case 'C':
			o->churn = true;
			break;
		case 'd':
			bad = parse_dur_opt("duration", optarg, &o->duration);
			break;
		case 'W':
			bad = parse_dur_opt("warmup", optarg, &o->warmup);
			break;
		case 'D':
			bad = parse_dur_opt("drain", optarg, &o->drain);
			break;
		case 'T':
			bad = parse_dur_opt("timeout", optarg, &o->timeout);
			break;
		case 'P':
			bad = parse_uint_opt("source-port", optarg, 1, 65535, &o->source_port);
			break;
		case 'I':
			bad = parse_uint_opt("id-base", optarg, 0, BENCH_ID_MAX, &o->id_base);
			break;
		case 'S':
			bad = parse_uint_opt("source-ips", optarg, 1, 65536, &o->source_ips);
			break;
		case 'G':
			o->gso = true;
			break;
		case 'X':
			if (bench_opt_addr("etrelay-load", "turn", optarg, &o->turn_addr) < 0)
				return -1;
			o->turn = true;
			break;
		case 'K':
			o->turn_secret = optarg;
			break;
		case 'Y':
			o->turn_user = optarg;
			break;
		case 'Z':
			bad = parse_dur_opt("turn-timeout", optarg, &o->turn_timeout);
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
	if ((!have_target && o->model != LOAD_ALLOCS) || optind != argc) {
		fputs(usage, stderr);
		return -1;
	}
	if (o->turn && !o->turn_secret)
		o->turn_secret = getenv("ETRELAY_TURN_SECRET");
	if (o->turn && (!o->turn_secret || !*o->turn_secret)) {
		fprintf(stderr, "etrelay-load: --turn needs a secret: --turn-secret or "
				"ETRELAY_TURN_SECRET\n");
		return -1;
	}
	if (o->model == LOAD_ALLOCS) {
		if (!o->turn || o->mode != LOAD_CLOSED || have_window || o->gso) {
			fprintf(stderr, "etrelay-load: --model allocs wants --turn and sets its "
					"own pace (no --rate, --flood, --window, --gso)\n");
			return -1;
		}
		if (!have_target)
			o->target = o->turn_addr; /* for the report only */
	}
	if (o->turn && o->model == LOAD_STORM) {
		fprintf(stderr, "etrelay-load: --turn: not with --model storm\n");
		return -1;
	}
	if (o->turn && o->size > BENCH_MAX_DGRAM - STUN_CHAN_HDR_LEN) {
		fprintf(stderr,
			"etrelay-load: --turn: --size at most %u (4 bytes go to the "
			"ChannelData header)\n",
			BENCH_MAX_DGRAM - STUN_CHAN_HDR_LEN);
		return -1;
	}
	if (o->duration == 0) {
		fprintf(stderr, "etrelay-load: --duration must be more than 0\n");
		return -1;
	}
	if (o->source_port && o->source_port + o->clients - 1 > 65535) {
		fprintf(stderr, "etrelay-load: --source-port %u: %u clients run past port 65535\n",
			o->source_port, o->clients);
		return -1;
	}
	if (o->id_base + o->clients - 1 > BENCH_ID_MAX) {
		fprintf(stderr, "etrelay-load: --id-base %u: %u clients run past id %u\n",
			o->id_base, o->clients, BENCH_ID_MAX);
		return -1;
	}
	if (o->source_ips > 1 &&
	    ((o->turn ? &o->turn_addr : &o->target)->sa.sa_family != AF_INET ||
	     (ntohl((o->turn ? &o->turn_addr : &o->target)->in.sin_addr.s_addr) >> 24) != 127)) {
		fprintf(stderr, "etrelay-load: --source-ips wants an IPv4 loopback target "
				"(127.0.0.0/8)\n");
		return -1;
	}
	if (!have_burst)
		o->burst = o->model == LOAD_STORM ? 4 : 8;
	o->rate = rate;
	if (o->model == LOAD_MATCH) {
		if (o->mode != LOAD_CLOSED || have_window) {
			fprintf(stderr, "etrelay-load: --model match sets its own rate "
					"(--clients x --up-rate)\n");
			return -1;
		}
		o->mode = LOAD_RATE;
		o->rate = (double)o->clients * o->up_rate;
	}
	if (o->model == LOAD_STORM && o->mode != LOAD_RATE) {
		fprintf(stderr, "etrelay-load: --model storm needs --rate\n");
		return -1;
	}
	if (o->mode != LOAD_CLOSED && (have_window || o->inflight_max)) {
		fprintf(stderr, "etrelay-load: --window and --inflight-max are for the closed "
				"loop, not with --rate or --flood\n");
		return -1;
	}
	return 0;
}

static void load_free(struct load *l)
{
	for (unsigned i = 0; l->c && i < l->o.clients; i++)
		if (l->c[i].fd >= 0)
			close(l->c[i].fd);
	if (l->ep >= 0)
		close(l->ep);
	free(l->c);
	free(l->rq);
	free(l->sbuf);
	free(l->rbuf);
	free(l->tc);
	free(l);
}

int main(int argc, char **argv)
{
	struct load *l = calloc(1, sizeof(*l));
	int rc = 0;

	if (!l)
		return 1;
	l->ep = -1;
	if (parse_args(&l->o, argc, argv) < 0) {
		rc = 2;
		goto out;
	}
	/* Sleeps end on time: open-loop pacing depends on it. */
	prctl(PR_SET_TIMERSLACK, 1UL);
	if (setup(l) < 0) {
		rc = 1;
		goto out;
	}
	run(l);
	report(l);
	turn_close(l);
out:
	load_free(l);
	return rc;
}
