/* SPDX-License-Identifier: ISC */
/* epoll backend: level-triggered epoll, recvmmsg into a pool of buffers,
 * sends gathered over the whole loop turn and flushed with one sendmmsg per
 * run of the same socket (the replies of many sessions all leave through
 * the public socket; a run to one destination is one GSO train), one
 * timerfd for the earliest timer. Copied sends wait in an arena that, like
 * the receive pool, is free again after each flush. Streams and splices:
 * loop_epoll_stream.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "loop_epoll_int.h"

static int ep_create(struct loop **lp, const struct loop_handler *h, const struct loop_conf *c,
		     char *why, size_t whylen)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct loop *l = calloc(1, sizeof(*l));
	int err;

	if (!l)
		return -ENOMEM;
	l->tfd = -1;
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->ep < 0 || l->tfd < 0) {
		err = -errno;
		snprintf(why, whylen, "epoll setup: %s", strerror(errno));
		goto fail;
	}
	l->rbuf = malloc((size_t)EP_POOL * EP_SLOT);
	l->cbuf = malloc(EP_COPY_BYTES);
	if (loop_base_init(&l->b, h, c) < 0 || !l->rbuf || !l->cbuf) {
		err = -ENOMEM;
		snprintf(why, whylen, "epoll setup: out of memory");
		goto fail;
	}
	l->b.so = &ep_stream_ops;
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
	loop_base_free(&l->b);
	free(l->rbuf);
	free(l->cbuf);
	free(l);
	return err;
}

static void ep_destroy(struct loop *l)
{
	close(l->ep);
	close(l->tfd);
	loop_base_free(&l->b);
	free(l->rbuf);
	free(l->cbuf);
	free(l);
}

static int ep_add(struct loop *l, int fd, uint32_t id, uint64_t flags)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = ev_data(fd, id, flags)};

	if (fdtab_set(&l->b.fds, fd, id) < 0)
		return -ENOMEM;
	if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int err = -errno;
		fdtab_clear(&l->b.fds, fd);
		return err;
	}
	return 0;
}

static int ep_add_socket(struct loop *l, int fd, uint32_t id)
{
	if (l->b.gro)
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
	uint16_t cap = fdtab_gso(&l->b.fds, fd);
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
			loop_train_counted(&l->b, k - i);
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
		l->b.h.on_sent(l->b.h.arg, l->sid[k], res < 0 ? res : (int)l->siov[k].iov_len);
}

/* The kernel refused train t as a train: learn the socket's cap, then send
 * its datagrams one by one, each to its own fate. */
static void train_resend(struct loop *l, int fd, unsigned t, int err)
{
	loop_train_refused(&l->b, fd, l->tseg[t], err);
	for (unsigned k = l->tfirst[t]; k < l->tfirst[t] + l->tn[t]; k++) {
		ssize_t n = sendmsg(fd, &l->smsg[k].msg_hdr, MSG_DONTWAIT);

		STAT_ADD(l->b.st.send_batches, 1);
		l->b.h.on_sent(l->b.h.arg, l->sid[k], n < 0 ? -errno : (int)n);
	}
}

/* Send [i, j), all on fd, as trains in as few sendmmsg calls as it takes. */
static void send_run(struct loop *l, int fd, unsigned i, unsigned j)
{
	unsigned nt = make_trains(l, fd, i, j), t = 0;

	while (t < nt) {
		int n = sendmmsg(fd, &l->tmsg[t], nt - t, MSG_DONTWAIT);
		int err = n < 0 ? -errno : 0;

		STAT_ADD(l->b.st.send_batches, 1);
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
	l->cused = 0;
}

static void ep_del_socket(struct loop *l, int fd, uint32_t id)
{
	struct lstream *s = stream_at(&l->b, fd);

	if (s) {
		ep_s_cancel(l, s);
		fdtab_clear(&l->b.fds, fd);
		return;
	}
	/* Sends queued for this fd must leave before the caller closes it: the
	 * number could come back for another socket. */
	for (unsigned i = 0; i < l->nsend; i++) {
		if (l->sfd[i] == fd) {
			flush(l);
			break;
		}
	}
	epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
	fdtab_clear(&l->b.fds, fd);
}

/* Room for one more send in the queue: GRO trains make many datagrams of
 * one buffer, and copies need no pool buffer, so the queue can fill before
 * the pool does. Then what is queued leaves now, in order. */
static void queue_room(struct loop *l)
{
	if (l->nsend == EP_POOL)
		flush(l);
}

/* Append a send to the queue (queue_room first). */
static void queue(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		  uint8_t *data, size_t len, uint32_t id)
{
	unsigned i = l->nsend++;
	struct msghdr *m = &l->smsg[i].msg_hdr;

	l->siov[i].iov_base = data;
	l->siov[i].iov_len = len;
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
}

static int ep_forward(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		      struct loop_dgram *d, uint32_t id)
{
	if (l->b.taken)
		return -EINVAL; /* one forward per datagram */
	queue_room(l);
	l->b.taken = true;
	queue(l, fd, dst, dstlen, d->data, d->len, id);
	return 0;
}

static int ep_send(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		   const void *buf, size_t len, uint32_t id)
{
	size_t at;
	int err = loop_copy_check(len);

	if (err)
		return err;
	queue_room(l);
	/* Cache-line aligned copies; a full arena leaves now, like a full
	 * queue (a flush empties both). */
	at = (l->cused + 63) & ~(size_t)63;
	if (at + len > EP_COPY_BYTES) {
		flush(l);
		at = 0;
	}
	memcpy(l->cbuf + at, buf, len);
	l->cused = at + len;
	queue(l, fd, dst, dstlen, l->cbuf + at, len, id);
	STAT_ADD(l->b.st.copies, 1);
	return 0;
}

/* Hand one received message to the layer above (loop_deliver). False
 * when the socket went away meanwhile. A handler may flush (closing a
 * socket does) and so reset rused, yet later datagrams of this batch may
 * still be queued: the batch's buffers stay taken until the next flush
 * either way (drain_socket). */
static bool deliver(struct loop *l, struct mmsghdr *mm, int fd, uint32_t id, uint64_t now)
{
	struct msghdr *m = &mm->msg_hdr;
	const struct loop_dgram d = {
	    .from = m->msg_namelen ? m->msg_name : NULL,
	    .fromlen = m->msg_namelen,
	    .data = m->msg_iov->iov_base,
	    .len = mm->msg_len,
	    .headroom = LOOP_HEADROOM,
	    .truncated = (m->msg_flags & MSG_TRUNC) != 0,
	    .now = now,
	};

	return loop_deliver(&l->b, fd, id, &d, gro_msg_size(m));
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

			l->riov[i].iov_base =
			    l->rbuf + (size_t)(base + i) * EP_SLOT + LOOP_HEADROOM;
			l->riov[i].iov_len = EP_BUF;
			memset(m, 0, sizeof(*m));
			m->msg_name = &l->rname[i];
			m->msg_namelen = sizeof(l->rname[i]);
			m->msg_iov = &l->riov[i];
			m->msg_iovlen = 1;
			if (l->b.gro) {
				m->msg_control = l->rctl[i].buf;
				m->msg_controllen = sizeof(l->rctl[i].buf);
			}
		}
		n = recvmmsg(fd, l->rmsg, EP_BATCH, MSG_DONTWAIT, NULL);
		STAT_ADD(l->b.st.recv_batches, 1);
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				l->b.h.on_recv_error(l->b.h.arg, id, -errno);
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
	struct itimerspec its = {0};
	/* 0 would disarm: a deadline at time zero means "now". */
	uint64_t t = deadline ? deadline : 1;

	its.it_value.tv_sec = (time_t)(t / NS_PER_SEC);
	its.it_value.tv_nsec = (long)(t % NS_PER_SEC);
	timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL);
	l->b.armed = deadline;
}

static int ep_run(struct loop *l)
{
	struct epoll_event ev[EP_EVENTS];

	while (!l->b.stop) {
		uint64_t now, at;
		int n;

		/* Stream sends finished outside an event (from a timer, or
		 * before run): their on_sent before we sleep. */
		if (l->b.sx) {
			streams_complete(l);
			if (l->b.stop)
				break;
		}
		/* Half the turn's reads for the streams that likely have more
		 * (a queue: each read goes to its back), the rest for the
		 * stream events (from a turning start): none waits for ever. */
		l->turn_reads = 0;
		l->read_limit = EP_TURN_READS / 2;
		for (unsigned r = 0; l->nready && r < EP_READY_ROUNDS && !l->b.stop &&
				     l->turn_reads < l->read_limit;
		     r++)
			ep_s_ready_reads(l);
		l->read_limit = EP_TURN_READS;
		if (l->b.stop)
			break;
		if (loop_wake_earlier(&l->b, &at))
			arm(l, at);
		n = epoll_wait(l->ep, ev, EP_EVENTS, l->nready ? 0 : -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		now = loop_now();
		/* Datagrams and timers first, then the streams (below). */
		for (int i = 0; i < n && !l->b.stop; i++) {
			uint64_t u = ev[i].data.u64;
			int fd = (int)(u >> 32 & 0x3fffffff);
			uint32_t id = (uint32_t)u;

			if (u & EV_TIMER) {
				uint64_t ticks;
				if (read(l->tfd, &ticks, sizeof(ticks)) < 0) {
					/* EAGAIN: already consumed */
				}
				l->b.armed = UINT64_MAX;
				continue;
			}
			if (u & EV_STREAM)
				continue;
			/* An earlier handler in this turn may have closed this fd,
			 * and the number may now belong to another socket. */
			if (!fdtab_is(&l->b.fds, fd, id))
				continue;
			if (u & EV_WATCH)
				l->b.h.on_readable(l->b.h.arg, id);
			else
				drain_socket(l, fd, id, now);
		}
		/* Then the streams, from a turning start, within the turn's
		 * reads: an event left over (level-triggered) comes again
		 * with the next epoll_wait. */
		for (int k = 0, i = n ? (int)(l->ev_turn++ % (unsigned)n) : 0;
		     k < n && !l->b.stop && l->turn_reads < l->read_limit; k++, i = (i + 1) % n)
			if (ev[i].data.u64 & EV_STREAM)
				ep_s_event(l, ev[i].data.u64, ev[i].events, now);
		/* Timers' sends (probes, heartbeats) leave with the turn's. */
		loop_turn_end(&l->b);
		flush(l);
	}
	flush(l);
	return 0;
}

/* Sends leave synchronously here: nothing to wait for. */
static void ep_flush(struct loop *l)
{
	flush(l);
	if (l->b.sx)
		streams_complete(l);
}

const struct loop_ops loop_epoll_ops = {
    .name = "epoll",
    .create = ep_create,
    .destroy = ep_destroy,
    .add_socket = ep_add_socket,
    .del_socket = ep_del_socket,
    .watch = ep_watch,
    .forward = ep_forward,
    .send = ep_send,
    .run = ep_run,
    .flush = ep_flush,
    LOOP_COMMON_OPS,
};
