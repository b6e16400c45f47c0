/* SPDX-License-Identifier: ISC */
/* io_uring streams: the read pool's two buffer rings, accept, connect,
 * reads and sends, and splices (a poll linked in front of each). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "loop_uring_int.h"

/* Which ring read chunk c belongs to. */
static int s_group(const struct loop *l, uint32_t c)
{
	return c >= l->b.sx->nread - l->b.sx->nreserve;
}

/* A read chunk goes back to its stream ring. */
static void s_recycle(struct loop *l, uint32_t c)
{
	struct loop_streams *x = l->b.sx;
	int g = s_group(l, c);

	io_uring_buf_ring_add(l->sbr[g], chunk_base(x, c) + LOOP_HEADROOM, LOOP_STREAM_CHUNK,
			      (unsigned short)c, io_uring_buf_ring_mask(l->sbr_entries[g]), 0);
	io_uring_buf_ring_advance(l->sbr[g], 1);
	x->c[c].state = CH_KERNEL;
	l->sring_free[g]++;
}

/* The kernel took read chunk c out of its ring. */
void ur_s_took(struct loop *l, uint32_t c)
{
	l->sring_free[s_group(l, c)]--;
}

/* Stream ring g for n chunks: 0 or -errno. */
static int s_ring(struct loop *l, int g, unsigned chunks)
{
	struct io_uring_buf_reg reg = {0};
	unsigned n = 1;
	int err;

	while (n < chunks)
		n <<= 1;
	l->sbr[g] = mmap(NULL, n * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
			 MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (l->sbr[g] == MAP_FAILED) {
		l->sbr[g] = NULL;
		return -ENOMEM;
	}
	reg.ring_addr = (uint64_t)(uintptr_t)l->sbr[g];
	reg.ring_entries = n;
	reg.bgid = (uint16_t)(UR_SBGID + g);
	err = io_uring_register_buf_ring(&l->ring, &reg, 0);
	if (err < 0) {
		munmap(l->sbr[g], n * sizeof(struct io_uring_buf));
		l->sbr[g] = NULL;
		return err;
	}
	l->sbr_entries[g] = n;
	io_uring_buf_ring_init(l->sbr[g]);
	return 0;
}

/* The stream pool and its rings, on first use: a daemon without streams
 * never registers them. */
static int s_ready(struct loop *l)
{
	unsigned res;
	int err;

	if (l->b.sx)
		return 0;
	if (l->b.stream_chunks > 32768)
		return -EINVAL; /* bids are 16 bits */
	err = streams_ready(&l->b, s_recycle);
	if (err)
		return err;
	res = l->b.sx->nreserve;
	err = s_ring(l, 0, l->b.sx->nread - res);
	if (!err && res && (err = s_ring(l, 1, res)) < 0) {
		io_uring_unregister_buf_ring(&l->ring, UR_SBGID);
		munmap(l->sbr[0], l->sbr_entries[0] * sizeof(struct io_uring_buf));
		l->sbr[0] = NULL;
	}
	if (err) {
		streams_free(&l->b);
		return err;
	}
	for (unsigned i = 0; i < l->b.sx->nread; i++)
		s_recycle(l, i);
	return 0;
}

/* A deleted stream's slot goes back once the kernel holds nothing of it. */
static void s_release(struct loop *l, struct lstream *s)
{
	if ((s->flags & SF_DEAD) && s->inflight == 0)
		stream_close(&l->b, s);
}

static int arm_accept(struct loop *l, struct lstream *s)
{
	struct io_uring_sqe *sqe = ur_sqe_get(l);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_multishot_accept(sqe, s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, UD(OP_ACCEPT, s->slot, 0));
	s->inflight++;
	s->flags |= SF_ACCEPT;
	return 0;
}

/* A splice (pipe or socket to pipe or socket, SPLICE_F_NONBLOCK) behind a
 * poll for `events` on s's socket, linked: IORING_OP_SPLICE always runs in
 * the kernel's io-wq, where a blocking splice of an idle socket would hold
 * a worker thread; non-blocking behind the poll, it runs once there are
 * bytes (or room) and returns at once. Both SQEs in one submission, so
 * that the link holds. ud: the splice's user_data. */
static int arm_splice(struct loop *l, struct lstream *s, unsigned events, int in, int out,
		      uint32_t len, uint64_t ud)
{
	struct io_uring_sqe *poll, *sp;

	if (io_uring_sq_space_left(&l->ring) < 2) {
		io_uring_submit(&l->ring);
		STAT_ADD(l->b.st.send_batches, 1);
	}
	if (!(poll = io_uring_get_sqe(&l->ring)))
		return -EBUSY;
	if (!(sp = io_uring_get_sqe(&l->ring))) {
		io_uring_prep_nop(poll); /* taken: it must go as something */
		io_uring_sqe_set_data64(poll, UD(OP_CANCEL, 0, 0));
		return -EBUSY;
	}
	io_uring_prep_poll_add(poll, s->fd, events);
	poll->flags |= IOSQE_IO_LINK;
	io_uring_sqe_set_data64(poll, UD(OP_SPOLL, s->slot, 0));
	io_uring_prep_splice(sp, in, -1, out, -1, len, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
	io_uring_sqe_set_data64(sp, ud);
	s->inflight += 2;
	return 0;
}

/* A read on ring g (0: the main one, 1: the reserve), or a splice in. */
static int arm_srecv(struct loop *l, struct lstream *s, int g)
{
	struct io_uring_sqe *sqe;

	if (s->pipe >= 0)
		return arm_splice(l, s, POLLIN | POLLRDHUP, s->fd, s->pipe, s->pipe_len,
				  UD(OP_SRECV, s->slot, 0));
	if (!(sqe = ur_sqe_get(l)))
		return -EBUSY;
	io_uring_prep_recv(sqe, s->fd, NULL, LOOP_STREAM_CHUNK, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = (uint16_t)(UR_SBGID + g);
	s->group = (uint8_t)g;
	io_uring_sqe_set_data64(sqe, UD(OP_SRECV, s->slot, 0));
	s->inflight++;
	return 0;
}

/* The send at the head of s's queue, from where it got to. */
static int arm_ssend(struct loop *l, struct lstream *s)
{
	struct loop_streams *x = l->b.sx;
	struct io_uring_sqe *sqe;
	uint32_t c = s->qhead;
	struct lchunk *ch = &x->c[c];

	if (ch->pipe >= 0) {
		int err = arm_splice(l, s, POLLOUT, ch->pipe, s->fd, ch->len - ch->done,
				     UD(OP_SSEND, s->slot, c));

		if (!err)
			l->ssending++;
		return err;
	}
	if (!(sqe = ur_sqe_get(l)))
		return -EBUSY;
	io_uring_prep_send(sqe, s->fd, ch->data + ch->done, ch->len - ch->done, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, UD(OP_SSEND, s->slot, c));
	s->inflight++;
	l->ssending++;
	return 0;
}

/* Start the next send of s, if any; one that cannot start fails. */
static void s_next(struct loop *l, struct lstream *s)
{
	while (s->qhead != STREAM_NONE && arm_ssend(l, s) < 0)
		stream_finished(&l->b, stream_dequeue(&l->b, s), -EBUSY);
}

static int s_connect(struct loop *l, struct lstream *s, const struct sockaddr *dst,
		     socklen_t dstlen, uint32_t id)
{
	struct io_uring_sqe *sqe;

	if (dstlen > sizeof(s->dst))
		return -EINVAL;
	if (!(sqe = ur_sqe_get(l)))
		return -EBUSY;
	/* The slot outlives the request: the kernel may read dst late. */
	memcpy(&s->dst, dst, dstlen);
	io_uring_prep_connect(sqe, s->fd, &s->dst.sa, dstlen);
	io_uring_sqe_set_data64(sqe, UD(OP_CONNECT, s->slot, 0));
	s->conn_id = id;
	s->inflight++;
	s->flags |= SF_CONNECT;
	return 0;
}

/* The read a stream op asked for, on the main ring. */
static int s_read(struct loop *l, struct lstream *s)
{
	return arm_srecv(l, s, 0);
}

/* Sends on one fd leave one at a time, in the order queued: the next goes
 * to the kernel when the one before is all there. A link chain could not
 * resend a short write's tail before the next, and a short write is
 * normal on a stream. */
static int s_queue(struct loop *l, struct lstream *s, uint32_t c, uint32_t id)
{
	bool idle = s->qhead == STREAM_NONE;

	stream_enqueue(&l->b, s, c, id);
	if (idle && arm_ssend(l, s) < 0) {
		stream_dequeue(&l->b, s);
		return -EBUSY;
	}
	return 0;
}

static void on_saccept(struct loop *l, struct lstream *s, struct io_uring_cqe *cqe)
{
	bool more = cqe->flags & IORING_CQE_F_MORE;
	uint32_t gen = s->gen;

	if (!more) {
		s->inflight--;
		s->flags &= (uint8_t)~SF_ACCEPT;
	}
	if (s->flags & SF_DEAD) {
		if (cqe->res >= 0)
			close(cqe->res); /* accepted as the listener went */
		s_release(l, s);
		return;
	}
	/* Out of fds the multishot ends: re-armed at once it would fail at
	 * once, for ever. The listener pauses (s_resume re-arms it). */
	if (!more && cqe->res < 0 && loop_accept_pause(&l->b, cqe->res))
		s->flags |= SF_PAUSED;
	if (cqe->res != -ECANCELED)
		l->b.h.on_accept(l->b.h.arg, s->acc_id, cqe->res);
	/* The multishot ended (an error, or the kernel's choice): the
	 * listener stays armed, so arm it again. */
	if (!more && s->gen == gen && !(s->flags & (SF_DEAD | SF_ACCEPT | SF_PAUSED)))
		arm_accept(l, s);
}

/* A paused listener's accept is armed again. */
static void s_resume(struct loop *l, struct lstream *s)
{
	if (!(s->flags & SF_ACCEPT))
		arm_accept(l, s);
}

/* A read's completion waits for its turn (ur_s_reads), its chunk out of
 * the ring now. The read stays counted in inflight meanwhile: a
 * del_socket keeps the slot until it is handed up. */
static void s_defer(struct loop *l, struct lstream *s, const struct io_uring_cqe *cqe)
{
	s->cres = cqe->res;
	s->cchunk = STREAM_NONE;
	s->cnext = STREAM_NONE;
	if (cqe->flags & IORING_CQE_F_BUFFER) {
		s->cchunk = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		ur_s_took(l, s->cchunk);
		chunk_take(&l->b, s->cchunk, CH_USER);
	}
	if (l->rq_tail == STREAM_NONE)
		l->rq_head = s->slot;
	else
		l->b.sx->sv[l->rq_tail]->cnext = s->slot;
	l->rq_tail = s->slot;
}

/* s's read completed with res into chunk c (or STREAM_NONE). */
static void on_srecv(struct loop *l, struct lstream *s, int res, uint32_t c, uint64_t now)
{
	s->inflight--;
	if (s->flags & SF_DEAD) {
		if (c != STREAM_NONE)
			chunk_put(&l->b, c);
		s_release(l, s);
		return;
	}
	if (res == -ENOBUFS) {
		/* The main ring is empty: a read that is not bulk tries the
		 * reserve; else the bytes wait in the socket until a chunk
		 * comes back (run re-arms the oldest first). */
		if (s->group == 0 && l->sbr[1] && !s->bulk && arm_srecv(l, s, 1) == 0)
			return;
		if (s->bulk && l->sring_free[1])
			STAT_ADD(l->b.st.stream_reserve_waits, 1);
		stream_stall(&l->b, s);
		return;
	}
	/* A splice in whose poll woke for nothing it could move: again. */
	if (s->pipe >= 0 && res == -EAGAIN && arm_srecv(l, s, 0) == 0)
		return;
	s->flags &= (uint8_t)~SF_READ;
	if (res < 0) {
		if (c != STREAM_NONE)
			chunk_put(&l->b, c);
		l->b.h.on_recv_error(l->b.h.arg, s->read_id, res);
		return;
	}
	if (s->pipe >= 0)
		STAT_ADD(l->b.st.stream_spliced, (uint64_t)res);
	stream_deliver(l, s, c, (size_t)res, now);
}

void ur_on_ssend(struct loop *l, struct io_uring_cqe *cqe)
{
	struct loop_streams *x = l->b.sx;
	struct lstream *s = x->sv[UD_AUX(cqe->user_data)];
	uint32_t c = UD_ID(cqe->user_data);
	struct lchunk *ch = &x->c[c];
	int res = cqe->res;

	s->inflight--;
	l->ssending--;
	if (res > 0) {
		ch->done += (uint32_t)res;
		STAT_ADD(l->b.st.stream_tx_bytes, (uint64_t)res);
	}
	if (ch->done < ch->len && !(s->flags & SF_DEAD)) {
		/* A short write: the tail goes next, before the rest. A splice
		 * out whose poll said room but that moved nothing: again. */
		if ((res > 0 || (res == -EAGAIN && ch->pipe >= 0)) && arm_ssend(l, s) == 0)
			return;
		if (res >= 0)
			res = -EPIPE; /* no progress, or no SQE for the tail */
	}
	stream_dequeue(&l->b, s);
	if (ch->done == ch->len)
		res = (int)ch->len;
	else if (res >= 0 || (s->flags & SF_DEAD))
		res = -ECANCELED;
	stream_finished(&l->b, c, res);
	if (s->flags & SF_DEAD) {
		while ((c = stream_dequeue(&l->b, s)) != STREAM_NONE)
			stream_finished(&l->b, c, -ECANCELED);
		s_release(l, s);
	} else {
		s_next(l, s);
	}
	streams_complete(l);
}

void ur_s_reads(struct loop *l, uint64_t now)
{
	for (unsigned n = 0; l->rq_head != STREAM_NONE && n < UR_TURN_READS && !l->b.stop;) {
		struct lstream *s = l->b.sx->sv[l->rq_head];

		l->rq_head = s->cnext;
		if (l->rq_head == STREAM_NONE)
			l->rq_tail = STREAM_NONE;
		/* Bytes count (each is a send to come); an end, an error or a
		 * wait for a chunk is only bookkeeping. */
		n += s->cres > 0 && !(s->flags & SF_DEAD);
		on_srecv(l, s, s->cres, s->cchunk, now);
	}
}

/* Reads waiting for a chunk go on, oldest first, one per free chunk: on
 * the main ring any of them, on the reserve's those that are not bulk. */
void ur_s_unstall(struct loop *l)
{
	unsigned n[2] = {l->sring_free[0], l->sring_free[1]};
	struct lstream *s;

	for (;;) {
		int g = n[0] ? 0 : 1;

		if (!n[g] || !(s = stream_unstall(&l->b, g == 0)))
			return;
		if (arm_srecv(l, s, g) < 0) {
			stream_stall(&l->b, s);
			return;
		}
		n[g]--;
	}
}

void ur_on_stream_cqe(struct loop *l, struct io_uring_cqe *cqe, uint64_t now)
{
	struct lstream *s = l->b.sx->sv[UD_AUX(cqe->user_data)];

	switch (UD_OP(cqe->user_data)) {
	case OP_ACCEPT:
		on_saccept(l, s, cqe);
		break;
	case OP_CONNECT:
		s->inflight--;
		s->flags &= (uint8_t)~SF_CONNECT;
		if (s->flags & SF_DEAD)
			s_release(l, s);
		else
			l->b.h.on_connected(l->b.h.arg, s->conn_id, cqe->res);
		break;
	case OP_SRECV:
		s_defer(l, s, cqe);
		break;
	case OP_SPOLL:
		s->inflight--;
		if (s->flags & SF_DEAD)
			s_release(l, s);
		break;
	default:
		ur_on_ssend(l, cqe);
		break;
	}
}

const struct loop_stream_ops ur_stream_ops = {
    .listen = arm_accept,
    .resume = s_resume,
    .connect = s_connect,
    .ready = s_ready,
    .read = s_read,
    .queue = s_queue,
};
