/* SPDX-License-Identifier: ISC */
/* epoll backend: level-triggered epoll, recvmmsg into a pool of buffers,
 * sends gathered over the whole loop turn and flushed with one sendmmsg per
 * run of the same socket (the replies of many sessions all leave through
 * the public socket; a run to one destination is one GSO train), one
 * timerfd for the earliest timer. Copied sends wait in an arena that, like
 * the receive pool, is free again after each flush. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "addr.h"
#include "loop.h"
#include "loop_common.h"

#define EP_BATCH	32  /* datagrams per recvmmsg */
#define EP_POOL		256 /* receive buffers: sends of one turn wait in them */
#define EP_TURN_BATCHES 4   /* recvmmsg calls per socket per turn: bounded work */
#define EP_EVENTS	64
/* Stream reads asked for while more bytes are likely there (the last read
 * filled its chunk) are tried at once, without an epoll_wait in between:
 * at most this many such rounds, then epoll_wait (not sleeping) lets the
 * other sockets in. */
#define EP_READY	64
#define EP_READY_ROUNDS 8
/* Copied sends of one turn: a flush makes room when it is full. */
#define EP_COPY_BYTES (256u << 10)

struct loop {
	struct loop_base b; /* first: loop_common.h */
	int ep, tfd;

	/* Receive batch. */
	struct mmsghdr rmsg[EP_BATCH];
	struct iovec riov[EP_BATCH];
	union etr_sockaddr rname[EP_BATCH];
	union gro_ctl rctl[EP_BATCH];
	uint8_t *rbuf;	/* EP_POOL * EP_SLOT */
	unsigned rused; /* pool buffers handed out since the last flush */
	uint8_t *cbuf;	/* EP_COPY_BYTES for copied sends */
	size_t cused;	/* bytes of it taken since the last flush */

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

	/* Streams whose read is tried before the next epoll_wait: slot, gen. */
	uint32_t ready[EP_READY][2];
	unsigned nready;

	/* The stream whose event is being handled: its interest is set once,
	 * at the end of s_event, whatever its handlers asked meanwhile. */
	struct lstream *cur;
	uint32_t cur_gen;
};

/* One byte more than the largest datagram is not needed: MSG_TRUNC tells.
 * Each pool slot has LOOP_HEADROOM free bytes in front. */
#define EP_BUF	LOOP_MAX_DGRAM
#define EP_SLOT (LOOP_HEADROOM + EP_BUF)

#define EV_WATCH  (1ull << 63)
#define EV_TIMER  (1ull << 62)
#define EV_STREAM (1ull << 61) /* then slot << 32 | gen */
static uint64_t ev_data(int fd, uint32_t id, uint64_t flags)
{
	return flags | (uint64_t)(uint32_t)fd << 32 | id;
}

static const struct loop_stream_ops ep_stream_ops;

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

static void s_cancel(struct loop *l, struct lstream *s);

static void ep_del_socket(struct loop *l, int fd, uint32_t id)
{
	struct lstream *s = stream_at(&l->b, fd);

	if (s) {
		s_cancel(l, s);
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

/* Streams. The interest registered for a stream follows what it waits
 * for: EPOLLIN while it listens or a read is asked for (and a chunk is
 * free), EPOLLOUT while it connects or has bytes to send; none, and it is
 * out of the epoll set (level-triggered: an error would wake us forever).
 * Two exceptions save an epoll_ctl pair per connection:
 * - lazy: an EPOLLIN no longer wanted stays while the socket is not known
 *   to be readable (its last read neither hit EOF nor an error); should it
 *   fire, s_event takes it away then (strict). A connection between its
 *   hello and its next read keeps its EPOLLIN instead of a DEL and an ADD.
 * - a connection after del_socket stays in the set: its caller closes the
 *   fd next (loop.h), and close(2) takes it out. A listener (it may stay
 *   open, unwatched) leaves with an EPOLL_CTL_DEL. */
static void s_sync_to(struct loop *l, struct lstream *s, bool strict)
{
	struct epoll_event ev = {0};
	/* EPOLLRDHUP: a read that empties the socket after the peer's FIN
	 * knows the next read is EOF (SF_EOF). EPOLLPRI: urgent data, where
	 * a read stops short with bytes behind it (not EOF next then). */
	uint32_t in = (s->flags & SF_ACCEPT) ? EPOLLIN : EPOLLIN | EPOLLRDHUP | EPOLLPRI;
	uint32_t want = 0;
	int op;

	if (!(s->flags & SF_DEAD)) {
		if ((s->flags & (SF_ACCEPT | SF_PAUSED)) == SF_ACCEPT ||
		    (s->flags & (SF_READ | SF_STALLED)) == SF_READ)
			want |= in;
		if ((s->flags & SF_CONNECT) || s->qhead != STREAM_NONE)
			want |= EPOLLOUT;
	} else if (!(s->flags & SF_ACCEPT)) {
		s->events = 0; /* close(2) comes next */
		return;
	}
	if (want == s->events)
		return;
	if (!strict && (s->events & ~want) == in && !(want & ~s->events))
		return; /* lazy */
	op = !want ? EPOLL_CTL_DEL : !s->events ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
	ev.events = want;
	ev.data.u64 = EV_STREAM | (uint64_t)s->slot << 32 | s->gen;
	if (epoll_ctl(l->ep, op, s->fd, &ev) == 0 || op == EPOLL_CTL_DEL)
		s->events = want;
}

static void s_sync(struct loop *l, struct lstream *s)
{
	if (s == l->cur && s->gen == l->cur_gen)
		return; /* s_event sets it when its handlers are done */
	s_sync_to(l, s, false);
}

/* A read chunk is free again: the oldest read waiting for one goes on. */
static void s_recycle(struct loop *l, uint32_t c)
{
	struct loop_streams *x = l->b.sx;
	struct lstream *s;

	x->rfree[x->nrfree++] = c;
	if ((s = stream_unstall(&l->b, x->nrfree > x->nreserve)))
		s_sync(l, s);
}

static int s_ready(struct loop *l)
{
	return streams_ready(&l->b, s_recycle);
}

/* Write what s has queued, oldest first, until the socket is full. */
static void s_write(struct loop *l, struct lstream *s)
{
	struct loop_streams *x = l->b.sx;
	uint32_t c;

	while ((c = s->qhead) != STREAM_NONE) {
		struct lchunk *ch = &x->c[c];
		/* A splice's bytes wait in its pipe: pipe to socket, no copy. A
		 * full socket is EAGAIN (the pipe holds them all, never
		 * empty here). */
		ssize_t n = ch->pipe >= 0 ? splice(ch->pipe, NULL, s->fd, NULL, ch->len - ch->done,
						   SPLICE_F_NONBLOCK | SPLICE_F_MOVE)
					  : send(s->fd, ch->data + ch->done, ch->len - ch->done,
						 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR)
				continue;
			stream_finished(&l->b, stream_dequeue(&l->b, s), -errno);
			continue;
		}
		ch->done += (uint32_t)n;
		STAT_ADD(l->b.st.stream_tx_bytes, (uint64_t)n);
		if (ch->done < ch->len)
			return; /* short: the socket is full, EPOLLOUT brings the tail */
		stream_finished(&l->b, stream_dequeue(&l->b, s), (int)ch->len);
	}
}

/* del_socket of a stream: out of epoll, queued sends end as -ECANCELED
 * (their on_sent at the end of this event or turn, never inside). */
static void s_cancel(struct loop *l, struct lstream *s)
{
	uint32_t c;

	stream_detach(&l->b, s);
	s_sync(l, s);
	while ((c = stream_dequeue(&l->b, s)) != STREAM_NONE)
		stream_finished(&l->b, c, -ECANCELED);
	stream_close(&l->b, s);
}

static void s_accept(struct loop *l, struct lstream *s, uint32_t gen)
{
	/* Bounded: other sockets get their turn (LOOP_ACCEPT_TURN). */
	for (unsigned i = 0; i < LOOP_ACCEPT_TURN; i++) {
		int fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
			continue;
		if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		/* An error once per turn: the listener stays; out of fds it
		 * pauses (out of the epoll set until so->resume), else
		 * level-triggered EPOLLIN would wake us at once, for ever. */
		if (fd < 0) {
			int err = -errno;

			if (loop_accept_pause(&l->b, err))
				s->flags |= SF_PAUSED;
			l->b.h.on_accept(l->b.h.arg, s->acc_id, err);
			return;
		}
		l->b.h.on_accept(l->b.h.arg, s->acc_id, fd);
		if (fd < 0 || s->gen != gen || !(s->flags & SF_ACCEPT))
			return;
	}
}

/* stream_splice_in: socket to pipe, no chunk taken. The caller asks only
 * with its pipe empty (loop.h), so EAGAIN is an empty socket, never a full
 * pipe. EOF and "EOF next" as for s_read. */
static bool s_splice_in(struct loop *l, struct lstream *s, uint64_t now, uint32_t events)
{
	ssize_t n = (s->flags & SF_EOF) ? 0
					: splice(s->fd, NULL, s->pipe, NULL, s->pipe_len,
						 SPLICE_F_NONBLOCK | SPLICE_F_MOVE);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
		s->flags &= (uint8_t)~SF_MORE;
		return false;
	}
	s->flags &= (uint8_t) ~(SF_READ | SF_MORE);
	if (n < 0) {
		l->b.h.on_recv_error(l->b.h.arg, s->read_id, -errno);
		return true;
	}
	if ((size_t)n == s->pipe_len)
		s->flags |= SF_MORE;
	else if (n > 0 && (events & (EPOLLRDHUP | EPOLLPRI | EPOLLERR | EPOLLHUP)) == EPOLLRDHUP)
		s->flags |= SF_EOF;
	STAT_ADD(l->b.st.stream_spliced, (uint64_t)n);
	stream_deliver(l, s, STREAM_NONE, (size_t)n, now);
	return n == 0 || (s->flags & SF_EOF);
}

/* Read into a free chunk; events: what woke us, 0 from the ready list.
 * The peer's FIN seen (EPOLLRDHUP, no error, no urgent data: a read stops
 * short at its mark) and a read short of the chunk: the socket is empty, and the next read is EOF
 * without a recv (SF_EOF). True when the socket stays readable for good (EOF, EOF next, an error):
 * its EPOLLIN, unless asked again, goes at once. */
static bool s_read(struct loop *l, struct lstream *s, uint64_t now, uint32_t events)
{
	struct loop_streams *x = l->b.sx;
	ssize_t n;
	uint32_t c;

	if (s->pipe >= 0)
		return s_splice_in(l, s, now, events);
	if (x->nrfree == 0 || (s->bulk && x->nrfree <= x->nreserve)) {
		if (x->nrfree)
			STAT_ADD(l->b.st.stream_reserve_waits, 1);
		stream_stall(&l->b, s); /* s_sync drops EPOLLIN meanwhile */
		return false;
	}
	c = x->rfree[--x->nrfree];
	chunk_take(&l->b, c, CH_USER);
	n = (s->flags & SF_EOF)
		? 0
		: recv(s->fd, chunk_base(x, c) + LOOP_HEADROOM, LOOP_STREAM_CHUNK, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
		chunk_put(&l->b, c);
		s->flags &= (uint8_t)~SF_MORE;
		return false;
	}
	s->flags &= (uint8_t) ~(SF_READ | SF_MORE);
	if (n < 0) {
		int err = -errno;

		chunk_put(&l->b, c);
		l->b.h.on_recv_error(l->b.h.arg, s->read_id, err);
		return true;
	}
	if (n == LOOP_STREAM_CHUNK)
		s->flags |= SF_MORE;
	else if (n > 0 && (events & (EPOLLRDHUP | EPOLLPRI | EPOLLERR | EPOLLHUP)) == EPOLLRDHUP)
		s->flags |= SF_EOF;
	stream_deliver(l, s, c, (size_t)n, now);
	return n == 0 || (s->flags & SF_EOF);
}

/* The reads asked for while their sockets likely had more: tried now, each
 * at most once (a read asked again from its on_stream waits for the next
 * round); one that finds nothing waits for EPOLLIN as usual. */
static void s_ready_reads(struct loop *l)
{
	struct loop_streams *x = l->b.sx;
	uint32_t ready[EP_READY][2];
	unsigned n = l->nready;
	uint64_t now = loop_now();

	memcpy(ready, l->ready, n * sizeof(ready[0]));
	l->nready = 0;
	for (unsigned i = 0; i < n && !l->b.stop; i++) {
		struct lstream *s = x->sv[ready[i][0]];
		bool eof;

		if (s->gen != ready[i][1] ||
		    (s->flags & (SF_DEAD | SF_READ | SF_STALLED)) != SF_READ)
			continue;
		eof = s_read(l, s, now, 0);
		streams_complete(l);
		if (s->gen == ready[i][1] && !(s->flags & SF_DEAD))
			s_sync_to(l, s, eof);
	}
}

/* Writable without EPOLLERR: connected, no SO_ERROR to ask. */
static void s_connected(struct loop *l, struct lstream *s, uint32_t events)
{
	int err = 0;
	socklen_t len = sizeof(err);

	s->flags &= (uint8_t)~SF_CONNECT;
	if (s->conn_res)
		err = -s->conn_res;
	else if ((events & (EPOLLERR | EPOLLHUP)) &&
		 getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	l->b.h.on_connected(l->b.h.arg, s->conn_id, -err);
}

static void s_event(struct loop *l, uint64_t u, uint32_t events, uint64_t now)
{
	struct loop_streams *x = l->b.sx;
	uint32_t slot = (uint32_t)(u >> 32) & 0x1fffffff, gen = (uint32_t)u;
	struct lstream *s;
	uint32_t reg;
	/* An error, a hang-up, an EPOLLIN not read or read to EOF: the
	 * socket stays ready, so interest it no longer wants goes now. */
	bool strict = (events & (EPOLLERR | EPOLLHUP)) != 0;

	if (!x || slot >= x->ns)
		return;
	s = x->sv[slot];
	/* Deleted earlier in this turn, perhaps taken again since. */
	if (s->gen != gen || (s->flags & SF_DEAD))
		return;
	reg = s->events;
	l->cur = s;
	l->cur_gen = gen;
	if ((reg & EPOLLOUT) && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		if (s->flags & SF_CONNECT)
			s_connected(l, s, events);
		else if (s->qhead != STREAM_NONE)
			s_write(l, s);
	}
	if (s->gen == gen && !(s->flags & SF_DEAD) && (reg & EPOLLIN) &&
	    (events & (EPOLLIN | EPOLLPRI | EPOLLERR | EPOLLHUP))) {
		/* EPOLLPRI alone (only the urgent byte left): a read skips it
		 * and the mark is gone (it would fire again else). */
		if (s->flags & SF_ACCEPT) {
			s_accept(l, s, gen);
			strict = true;
		} else if ((s->flags & (SF_READ | SF_STALLED)) == SF_READ) {
			strict |= s_read(l, s, now, events);
		} else {
			strict = true; /* lazy EPOLLIN fired */
		}
	}
	/* The sends that finished (a relay asks for its next read there)
	 * before the interest is set: one epoll_ctl less per chunk. */
	streams_complete(l);
	l->cur = NULL;
	if (s->gen == gen && !(s->flags & SF_DEAD))
		s_sync_to(l, s, strict);
}

static int s_listen(struct loop *l, struct lstream *s)
{
	s->flags |= SF_ACCEPT;
	s_sync_to(l, s, true);
	if (!(s->events & EPOLLIN)) {
		s->flags &= (uint8_t)~SF_ACCEPT;
		return -errno;
	}
	return 0;
}

static int s_connect(struct loop *l, struct lstream *s, const struct sockaddr *dst,
		     socklen_t dstlen, uint32_t id)
{
	if (connect(s->fd, dst, dstlen) == 0 || errno == EINPROGRESS) {
		s->conn_res = 0;
	} else if (errno == EBADF || errno == ENOTSOCK || errno == EISCONN || errno == EALREADY ||
		   errno == EAFNOSUPPORT || errno == EINVAL) {
		return -errno; /* the caller's mistake: no callback */
	} else {
		/* Refused at once (loopback can): reported like a late one. */
		s->conn_res = -errno;
	}
	s->conn_id = id;
	s->flags |= SF_CONNECT;
	s_sync(l, s);
	return 0;
}

/* The read a stream op asked for: tried at once when more is likely
 * there, else when EPOLLIN comes. */
static int s_read_asked(struct loop *l, struct lstream *s)
{
	if ((s->flags & (SF_MORE | SF_EOF)) && l->nready < EP_READY) {
		l->ready[l->nready][0] = s->slot;
		l->ready[l->nready++][1] = s->gen;
	}
	s_sync(l, s);
	return 0;
}

/* Sends on one fd leave in order: one written now when nothing waits
 * before it, else queued behind; what the socket did not take waits for
 * EPOLLOUT. on_sent always comes later, never from inside the op. */
static int s_queue(struct loop *l, struct lstream *s, uint32_t c, uint32_t id)
{
	bool idle = s->qhead == STREAM_NONE;

	stream_enqueue(&l->b, s, c, id);
	if (idle)
		s_write(l, s);
	s_sync(l, s);
	return 0;
}

static const struct loop_stream_ops ep_stream_ops = {
    .listen = s_listen,
    .resume = s_sync,
    .connect = s_connect,
    .ready = s_ready,
    .read = s_read_asked,
    .queue = s_queue,
};

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
		for (unsigned r = 0; l->nready && r < EP_READY_ROUNDS && !l->b.stop; r++)
			s_ready_reads(l);
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
			if (u & EV_STREAM) {
				s_event(l, u, ev[i].events, now);
				continue;
			}
			/* An earlier handler in this turn may have closed this fd,
			 * and the number may now belong to another socket. */
			if (!fdtab_is(&l->b.fds, fd, id))
				continue;
			if (u & EV_WATCH)
				l->b.h.on_readable(l->b.h.arg, id);
			else
				drain_socket(l, fd, id, now);
		}
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
