/* SPDX-License-Identifier: ISC */
/* epoll backend: level-triggered epoll, recvmmsg into a pool of buffers,
 * sends gathered over the whole loop turn and flushed with one sendmmsg per
 * run of the same socket (the replies of many sessions all leave through
 * the public socket), one timerfd for the deadline. */
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

static int ep_create(struct loop **lp, const struct loop_handler *h, unsigned max_sockets,
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
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->ep < 0 || l->tfd < 0) {
		err = -errno;
		snprintf(why, whylen, "epoll setup: %s", strerror(errno));
		goto fail;
	}
	l->rbuf = malloc((size_t)EP_POOL * EP_BUF);
	if (!l->rbuf || fdtab_init(&l->fds, max_sockets) < 0) {
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
	return ep_add(l, fd, id, 0);
}

static int ep_watch(struct loop *l, int fd, uint32_t id)
{
	return ep_add(l, fd, id, EV_WATCH);
}

/* Send what the batch gathered: one sendmmsg per run of the same fd. */
static void flush(struct loop *l)
{
	unsigned i = 0;

	while (i < l->nsend) {
		unsigned j = i + 1, k;
		int n;

		while (j < l->nsend && l->sfd[j] == l->sfd[i])
			j++;
		n = sendmmsg(l->sfd[i], &l->smsg[i], j - i, MSG_DONTWAIT);
		l->st.send_batches++;
		for (k = i; k < j; k++) {
			int res;

			if (n < 0)
				res = -errno;
			else if (k - i < (unsigned)n)
				res = (int)l->smsg[k].msg_len;
			else
				res = -EAGAIN; /* the kernel stopped short: buffer full */
			/* A failed datagram is dropped like on any congested hop;
			 * the first error was returned, the rest are counted too. */
			l->h.on_sent(l->h.arg, l->sid[k], res);
		}
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

	if (l->taken || i == EP_POOL)
		return -EINVAL; /* one forward per datagram */
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
		}
		n = recvmmsg(fd, l->rmsg, EP_BATCH, MSG_DONTWAIT, NULL);
		l->st.recv_batches++;
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				l->h.on_recv_error(l->h.arg, id, -errno);
			return;
		}
		for (int i = 0; i < n; i++) {
			struct msghdr *m = &l->rmsg[i].msg_hdr;
			struct loop_dgram d = {
				.from = m->msg_namelen ? m->msg_name : NULL,
				.fromlen = m->msg_namelen,
				.data = m->msg_iov->iov_base,
				.len = l->rmsg[i].msg_len,
				.truncated = (m->msg_flags & MSG_TRUNC) != 0,
				.bid = (uint32_t)i,
				.now = now,
			};

			l->taken = false;
			l->h.on_dgram(l->h.arg, id, &d);
			/* A handler may flush (closing a socket does) and so reset
			 * rused, yet later datagrams of this batch may still be
			 * queued: the batch's buffers stay taken until the next
			 * flush either way. */
			if (!fdtab_is(&l->fds, fd, id)) {
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

static void ep_stats(const struct loop *l, struct loop_stats *st)
{
	*st = l->st;
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
