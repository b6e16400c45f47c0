/* SPDX-License-Identifier: ISC */
/* epoll backend: level-triggered epoll, recvmmsg into a pool of buffers,
 * sends gathered over the whole loop turn and flushed with one sendmmsg per
 * run of the same socket (the replies of many sessions all leave through
 * the public socket; a run to one destination is one GSO train), one
 * timerfd for the deadline. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "addr.h"
#include "loop.h"
#include "loop_fdtab.h"
#include "loop_gso.h"
#include "stats.h"

#define EP_BATCH 32      /* datagrams per recvmmsg */
#define EP_POOL 256      /* receive buffers: sends of one turn wait in them */
#define EP_TURN_BATCHES 4 /* recvmmsg calls per socket per turn: bounded work */
#define EP_EVENTS 64

struct loop {
	struct loop_handler h;
	int ep, tfd;
	bool stop;
	uint64_t armed; /* deadline in the timerfd, UINT64_MAX if none */
	struct fdtab fds;

	/* Receive batch. */
	struct mmsghdr rmsg[EP_BATCH];
	struct iovec riov[EP_BATCH];
	union etr_sockaddr rname[EP_BATCH];
	union gro_ctl rctl[EP_BATCH];
	bool gro; /* --gso and a kernel with it: trains both ways */
	uint8_t *rbuf; /* EP_POOL * EP_BUF */
	unsigned rused; /* pool buffers handed out since the last flush */
	bool taken;

	/* Sends waiting for the end of the batch, in arrival order. */
	unsigned nsend;
	struct mmsghdr smsg[EP_POOL];
	struct iovec siov[EP_POOL];
	union etr_sockaddr sdst[EP_POOL];
	int sfd[EP_POOL];
	uint32_t sid[EP_POOL];

	/* The same sends as trains, built by flush(): train t is datagrams
	 * tfirst[t] .. tfirst[t] + tn[t] - 1. */
	struct mmsghdr tmsg[EP_POOL];
	union gso_ctl tctl[EP_POOL];
	uint16_t tfirst[EP_POOL], tn[EP_POOL], tseg[EP_POOL];

	struct loop_stats st;
};

/* One byte more than the largest datagram is not needed: MSG_TRUNC tells. */
#define EP_BUF LOOP_MAX_DGRAM

#define EV_WATCH (1ull << 63)
#define EV_TIMER (1ull << 62)
static uint64_t ev_data(int fd, uint32_t id, uint64_t flags)
{
	return flags | (uint64_t)(uint32_t)fd << 32 | id;
}

static int ep_create(struct loop **lp, const struct loop_handler *h, const struct loop_conf *c,
		     char *why, size_t whylen)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct loop *l = calloc(1, sizeof(*l));
	int err;

	if (!l)
		return -ENOMEM;
	l->h = *h;
	l->armed = UINT64_MAX;
	l->tfd = -1;
	l->gro = c->gso && gso_supported();
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->ep < 0 || l->tfd < 0) {
		err = -errno;
		snprintf(why, whylen, "epoll setup: %s", strerror(errno));
		goto fail;
	}
	l->rbuf = malloc((size_t)EP_POOL * EP_BUF);
	if (!l->rbuf || fdtab_init(&l->fds, c->max_sockets, l->gro ? GSO_ANY : 0) < 0) {
		err = -ENOMEM;
		snprintf(why, whylen, "epoll setup: out of memory");
		goto fail;
	}
	ev.data.u64 = ev_data(l->tfd, 0, EV_TIMER);
	if (epoll_ctl(l->ep, EPOLL_CTL_ADD, l->tfd, &ev) < 0) {
		err = -errno;
		snprintf(why, whylen, "epoll_ctl: %s", strerror(errno));
		goto fail;
	}
	*lp = l;
	return 0;
fail:
	if (l->ep >= 0)
		close(l->ep);
	if (l->tfd >= 0)
		close(l->tfd);
	fdtab_free(&l->fds);
	free(l->rbuf);
	free(l);
	return err;
}

static void ep_destroy(struct loop *l)
{
	close(l->ep);
	close(l->tfd);
	fdtab_free(&l->fds);
	free(l->rbuf);
	free(l);
}

static int ep_add(struct loop *l, int fd, uint32_t id, uint64_t flags)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = ev_data(fd, id, flags) };

	if (fdtab_set(&l->fds, fd, id) < 0)
		return -ENOMEM;
	if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int err = -errno;
		fdtab_clear(&l->fds, fd);
		return err;
	}
	return 0;
}

static int ep_add_socket(struct loop *l, int fd, uint32_t id)
{
	if (l->gro)
		gro_enable(fd);
	return ep_add(l, fd, id, 0);
}

static int ep_watch(struct loop *l, int fd, uint32_t id)
{
	return ep_add(l, fd, id, EV_WATCH);
}

static bool same_dst(const struct msghdr *a, const struct msghdr *b)
{
	return a->msg_namelen == b->msg_namelen &&
	       (!a->msg_namelen || memcmp(a->msg_name, b->msg_name, a->msg_namelen) == 0);
}

/* Cut sends [i, j), all on fd, into trains; returns how many. The iovecs of
 * one train are neighbours in siov[], so a train is one msghdr over them. */
static unsigned make_trains(struct loop *l, int fd, unsigned i, unsigned j)
{
	uint16_t cap = fdtab_gso(&l->fds, fd);
	unsigned nt = 0;

	while (i < j) {
		struct msghdr *m = &l->tmsg[nt].msg_hdr;
		struct gso_run run;
		unsigned k = i + 1;

		gso_start(&run, l->siov[i].iov_len, cap);
		while (k < j && same_dst(&l->smsg[i].msg_hdr, &l->smsg[k].msg_hdr) &&
		       gso_join(&run, l->siov[k].iov_len))
			k++;
		*m = l->smsg[i].msg_hdr;
		m->msg_iovlen = k - i;
		if (k - i > 1) {
			gso_set_segment(m, &l->tctl[nt], run.seg);
			STAT_ADD(l->st.gso_trains, 1);
			STAT_ADD(l->st.gso_datagrams, k - i);
		}
		l->tfirst[nt] = (uint16_t)i;
		l->tn[nt] = (uint16_t)(k - i);
		l->tseg[nt] = run.seg;
		nt++;
		i = k;
	}
	return nt;
}

/* Train t finished with res (bytes or -errno): one on_sent per datagram. */
static void train_done(struct loop *l, unsigned t, int res)
{
	for (unsigned k = l->tfirst[t]; k < l->tfirst[t] + l->tn[t]; k++)
		l->h.on_sent(l->h.arg, l->sid[k], res < 0 ? res : (int)l->siov[k].iov_len);
}

/* The kernel refused train t as a train: learn the socket's cap, then send
 * its datagrams one by one, each to its own fate. */
static void train_resend(struct loop *l, int fd, unsigned t, int err)
{
	STAT_ADD(l->st.gso_refused, 1);
	fdtab_set_gso(&l->fds, fd, gso_refused(fdtab_gso(&l->fds, fd), l->tseg[t], err));
	for (unsigned k = l->tfirst[t]; k < l->tfirst[t] + l->tn[t]; k++) {
		ssize_t n = sendmsg(fd, &l->smsg[k].msg_hdr, MSG_DONTWAIT);

		STAT_ADD(l->st.send_batches, 1);
		l->h.on_sent(l->h.arg, l->sid[k], n < 0 ? -errno : (int)n);
	}
}

/* Send [i, j), all on fd, as trains in as few sendmmsg calls as it takes. */
static void send_run(struct loop *l, int fd, unsigned i, unsigned j)
{
	unsigned nt = make_trains(l, fd, i, j), t = 0;

	while (t < nt) {
		int n = sendmmsg(fd, &l->tmsg[t], nt - t, MSG_DONTWAIT);
		int err = n < 0 ? -errno : 0;

		STAT_ADD(l->st.send_batches, 1);
		for (; n > 0; n--, t++)
			train_done(l, t, (int)l->tmsg[t].msg_len);
		if (!err)
			continue; /* stopped short: the next call says why */
		if (err == -EAGAIN) {
			/* The socket buffer is full: the rest is dropped, as on
			 * any congested hop. */
			for (; t < nt; t++)
				train_done(l, t, err);
		} else if (l->tn[t] > 1) {
			train_resend(l, fd, t++, err);
		} else {
			train_done(l, t++, err);
		}
	}
}

/* Send what the turn gathered, run by run of the same fd. */
static void flush(struct loop *l)
{
	unsigned i = 0;

	while (i < l->nsend) {
		unsigned j = i + 1;

		while (j < l->nsend && l->sfd[j] == l->sfd[i])
			j++;
		send_run(l, l->sfd[i], i, j);
		i = j;
	}
	l->nsend = 0;
	l->rused = 0; /* every buffer is free again */
}

static void ep_del_socket(struct loop *l, int fd, uint32_t id)
{
	/* Sends queued for this fd must leave before the caller closes it: the
	 * number could come back for another socket. */
	for (unsigned i = 0; i < l->nsend; i++) {
		if (l->sfd[i] == fd) {
			flush(l);
			break;
		}
	}
	epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
	fdtab_clear(&l->fds, fd);
}

static int ep_forward(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		      struct loop_dgram *d, uint32_t id)
{
	unsigned i = l->nsend;
	struct msghdr *m = &l->smsg[i].msg_hdr;

	if (l->taken)
		return -EINVAL; /* one forward per datagram */
	if (i == EP_POOL) {
		/* GRO trains make many datagrams of one buffer: the queue can
		 * fill before the pool does. Send what is queued, in order. */
		flush(l);
		i = 0;
		m = &l->smsg[0].msg_hdr;
	}
	l->taken = true;
	l->siov[i].iov_base = d->data;
	l->siov[i].iov_len = d->len;
	memset(m, 0, sizeof(*m));
	m->msg_iov = &l->siov[i];
	m->msg_iovlen = 1;
	if (dst) {
		memcpy(&l->sdst[i], dst, dstlen);
		m->msg_name = &l->sdst[i];
		m->msg_namelen = dstlen;
	}
	l->sfd[i] = fd;
	l->sid[i] = id;
	l->nsend++;
	return 0;
}

/* Hand one received message to the layer above; a GRO train as the
 * datagrams it was made of. False when the socket went away meanwhile. */
static bool deliver(struct loop *l, struct mmsghdr *mm, int fd, uint32_t id, uint64_t now)
{
	struct msghdr *m = &mm->msg_hdr;
	size_t len = mm->msg_len, seg = gro_msg_size(m), off = 0;

	do {
		struct loop_dgram d = {
			.from = m->msg_namelen ? m->msg_name : NULL,
			.fromlen = m->msg_namelen,
			.data = (uint8_t *)m->msg_iov->iov_base + off,
			.len = gro_segment(len, seg, off),
			.truncated = (m->msg_flags & MSG_TRUNC) != 0,
			.now = now,
		};

		l->taken = false;
		l->h.on_dgram(l->h.arg, id, &d);
		/* A handler may flush (closing a socket does) and so reset
		 * rused, yet later datagrams of this batch may still be queued:
		 * the batch's buffers stay taken until the next flush either
		 * way. */
		if (!fdtab_is(&l->fds, fd, id))
			return false;
		off += d.len;
	} while (off < len);
	return true;
}

/* Read up to EP_TURN_BATCHES batches from one socket. */
static void drain_socket(struct loop *l, int fd, uint32_t id, uint64_t now)
{
	for (int b = 0; b < EP_TURN_BATCHES; b++) {
		unsigned base;
		int n;

		/* Sends wait in their receive buffers until the flush: make room
		 * for a whole batch first. */
		if (EP_POOL - l->rused < EP_BATCH)
			flush(l);
		base = l->rused;
		for (unsigned i = 0; i < EP_BATCH; i++) {
			struct msghdr *m = &l->rmsg[i].msg_hdr;

			l->riov[i].iov_base = l->rbuf + (size_t)(base + i) * EP_BUF;
			l->riov[i].iov_len = EP_BUF;
			memset(m, 0, sizeof(*m));
			m->msg_name = &l->rname[i];
			m->msg_namelen = sizeof(l->rname[i]);
			m->msg_iov = &l->riov[i];
			m->msg_iovlen = 1;
			if (l->gro) {
				m->msg_control = l->rctl[i].buf;
				m->msg_controllen = sizeof(l->rctl[i].buf);
			}
		}
		n = recvmmsg(fd, l->rmsg, EP_BATCH, MSG_DONTWAIT, NULL);
		STAT_ADD(l->st.recv_batches, 1);
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				l->h.on_recv_error(l->h.arg, id, -errno);
			return;
		}
		for (int i = 0; i < n; i++) {
			if (!deliver(l, &l->rmsg[i], fd, id, now)) {
				l->rused = base + (unsigned)n;
				return;
			}
		}
		l->rused = base + (unsigned)n;
		if (n < EP_BATCH)
			return;
	}
}

static void arm(struct loop *l, uint64_t deadline)
{
	struct itimerspec its = { 0 };
	/* 0 would disarm: a deadline at time zero means "now". */
	uint64_t t = deadline ? deadline : 1;

	/* Deadlines move later on every packet (LRU expiry): re-arming for
	 * each would cost a syscall per turn. A timer that fires early costs
	 * one idle tick, then we arm for the real deadline. */
	if (deadline >= l->armed)
		return;
	its.it_value.tv_sec = (time_t)(t / NS_PER_SEC);
	its.it_value.tv_nsec = (long)(t % NS_PER_SEC);
	timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL);
	l->armed = deadline;
}

static int ep_run(struct loop *l)
{
	struct epoll_event ev[EP_EVENTS];

	while (!l->stop) {
		uint64_t now;
		int n;

		arm(l, l->h.next_deadline(l->h.arg));
		n = epoll_wait(l->ep, ev, EP_EVENTS, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		now = loop_now();
		for (int i = 0; i < n && !l->stop; i++) {
			uint64_t u = ev[i].data.u64;
			int fd = (int)(u >> 32 & 0x3fffffff);
			uint32_t id = (uint32_t)u;

			if (u & EV_TIMER) {
				uint64_t ticks;
				if (read(l->tfd, &ticks, sizeof(ticks)) < 0) {
					/* EAGAIN: already consumed */
				}
				l->armed = UINT64_MAX;
				continue;
			}
			/* An earlier handler in this turn may have closed this fd,
			 * and the number may now belong to another socket. */
			if (!fdtab_is(&l->fds, fd, id))
				continue;
			if (u & EV_WATCH)
				l->h.on_readable(l->h.arg, id);
			else
				drain_socket(l, fd, id, now);
		}
		flush(l);
		now = loop_now();
		if (!l->stop && now >= l->h.next_deadline(l->h.arg))
			l->h.on_tick(l->h.arg, now);
	}
	flush(l);
	return 0;
}

static void ep_stop(struct loop *l)
{
	l->stop = true;
}

static const struct loop_stats *ep_stats(const struct loop *l)
{
	return &l->st;
}

const struct loop_ops loop_epoll_ops = {
	.name = "epoll",
	.create = ep_create,
	.destroy = ep_destroy,
	.add_socket = ep_add_socket,
	.del_socket = ep_del_socket,
	.watch = ep_watch,
	.forward = ep_forward,
	.run = ep_run,
	.stop = ep_stop,
	.stats = ep_stats,
};
