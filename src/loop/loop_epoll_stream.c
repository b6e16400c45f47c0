/* SPDX-License-Identifier: ISC */
/* epoll streams: each stream's interest kept to what it waits for,
 * accept, connect, reads into the pool's chunks, writes, splices. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>

#include "loop_epoll_int.h"

/* The interest registered for a stream follows what it waits
 * for: EPOLLIN while it listens or a read is asked for (and a chunk is
 * free), EPOLLOUT while it connects or has bytes to send; none, and it is
 * out of the epoll set (level-triggered: an error would wake us forever).
 * Two exceptions save an epoll_ctl pair per connection:
 * - lazy: an EPOLLIN no longer wanted stays while the socket is not known
 *   to be readable (its last read neither hit EOF nor an error); should it
 *   fire, ep_s_event takes it away then (strict). A connection between its
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
		return; /* ep_s_event sets it when its handlers are done */
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
void ep_s_cancel(struct loop *l, struct lstream *s)
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

	l->turn_reads++;
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
void ep_s_ready_reads(struct loop *l)
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

		/* The turn's reads spent: the rest next turn, after the
		 * datagram sockets (they keep their EPOLLIN meanwhile). */
		if (l->turn_reads >= l->read_limit) {
			if (l->nready < EP_READY) {
				l->ready[l->nready][0] = ready[i][0];
				l->ready[l->nready++][1] = ready[i][1];
			}
			continue;
		}
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

void ep_s_event(struct loop *l, uint64_t u, uint32_t events, uint64_t now)
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

const struct loop_stream_ops ep_stream_ops = {
    .listen = s_listen,
    .resume = s_sync,
    .connect = s_connect,
    .ready = s_ready,
    .read = s_read_asked,
    .queue = s_queue,
};
