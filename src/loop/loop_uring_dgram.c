/* SPDX-License-Identifier: ISC */
/* io_uring datagrams: the provided buffer ring and its multishot
 * receives, forwards and copies gathered into GSO sendmsg runs, watched
 * fds, receives stalled for want of buffers. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "loop_uring_int.h"

static uint8_t *buf_at(struct loop *l, unsigned bid)
{
	return l->bufs + (size_t)bid * UR_BUF_SIZE;
}

void ur_buf_recycle(struct loop *l, unsigned bid)
{
	l->ref[bid] = 0;
	io_uring_buf_ring_add(l->br, buf_at(l, bid), UR_BUF_SIZE, (unsigned short)bid,
			      io_uring_buf_ring_mask(UR_NBUFS), 0);
	io_uring_buf_ring_advance(l->br, 1);
	l->free_bufs++;
}

static int arm_recv(struct loop *l, int fd, uint32_t id)
{
	struct io_uring_sqe *sqe = ur_sqe_get(l);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_recvmsg_multishot(sqe, fd, &l->rmsg, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = UR_BGID;
	io_uring_sqe_set_data64(sqe, UD(OP_RECV, fd, id));
	return 0;
}

int ur_arm_poll(struct loop *l, int fd, uint32_t id)
{
	struct io_uring_sqe *sqe = ur_sqe_get(l);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_multishot(sqe, fd, POLLIN);
	io_uring_sqe_set_data64(sqe, UD(OP_POLL, fd, id));
	return 0;
}

int ur_add_socket(struct loop *l, int fd, uint32_t id)
{
	int err = fdtab_set(&l->b.fds, fd, id);

	if (l->b.gro)
		gro_enable(fd);
	if (!err)
		err = arm_recv(l, fd, id);
	if (err)
		fdtab_clear(&l->b.fds, fd);
	return err;
}

int ur_watch(struct loop *l, int fd, uint32_t id)
{
	int err = fdtab_set(&l->b.fds, fd, id);

	if (!err)
		err = ur_arm_poll(l, fd, id);
	if (err)
		fdtab_clear(&l->b.fds, fd);
	return err;
}

/* A send is done with its segment of buffer bid: the last one gives a
 * receive buffer back to the ring, a copy buffer to its free list. */
static void buf_put(struct loop *l, unsigned bid)
{
	if (--l->ref[bid] != 0)
		return;
	if (bid < UR_NBUFS)
		ur_buf_recycle(l, bid);
	else
		l->copy_free[l->ncopy_free++] = (uint16_t)bid;
}

/* A send finished with res (bytes or -errno): give back its buffers and
 * tell the layer above once per datagram. */
static void tx_done(struct loop *l, unsigned slot, int res)
{
	struct tx *t = &l->tx[slot];

	for (unsigned i = 0; i < t->run.n; i++) {
		buf_put(l, t->bid[i]);
		l->b.h.on_sent(l->b.h.arg, t->id[i], res < 0 ? res : (int)t->iov[i].iov_len);
	}
	l->tx_free[l->ntx_free++] = (uint16_t)slot;
}

/* Queue the gathered tx as one sendmsg SQE. */
void ur_tx_flush(struct loop *l)
{
	struct tx *t = &l->tx[l->pend];
	unsigned slot = l->pend;
	struct io_uring_sqe *sqe;

	l->pend = TX_NONE;
	t->msg.msg_iov = t->iov;
	t->msg.msg_iovlen = t->run.n;
	t->msg.msg_control = NULL;
	t->msg.msg_controllen = 0;
	if (t->run.n > 1) {
		gso_set_segment(&t->msg, &t->ctl, t->run.seg);
		loop_train_counted(&l->b, t->run.n);
	}
	sqe = ur_sqe_get(l);
	if (!sqe) {
		/* Cannot happen with an SQ this deep: a failed send. */
		STAT_ADD(l->b.st.send_failures, t->run.n);
		tx_done(l, slot, -EBUSY);
		return;
	}
	io_uring_prep_sendmsg(sqe, t->fd, &t->msg, 0);
	io_uring_sqe_set_data64(sqe, UD(OP_SEND, slot, 0));
}

/* A new tx for one datagram, made the pending one. */
static void tx_open(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		    uint8_t *data, size_t len, uint16_t bid, uint32_t id, uint16_t cap)
{
	uint16_t slot = l->tx_free[--l->ntx_free];
	struct tx *t = &l->tx[slot];

	memset(&t->msg, 0, sizeof(t->msg));
	if (dst) {
		memcpy(&t->dst, dst, dstlen);
		t->msg.msg_name = &t->dst;
		t->msg.msg_namelen = dstlen;
	}
	t->fd = fd;
	t->sock = fdtab_raw(&l->b.fds, fd);
	gso_start(&t->run, len, cap);
	t->iov[0].iov_base = data;
	t->iov[0].iov_len = len;
	t->bid[0] = bid;
	t->id[0] = id;
	l->ref[bid]++;
	l->pend = slot;
}

/* Does a datagram for fd and dst continue the pending run? */
static bool tx_joins(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		     size_t len)
{
	struct tx *t = &l->tx[l->pend];

	if (t->fd != fd || t->msg.msg_namelen != dstlen ||
	    (dstlen && memcmp(&t->dst, dst, dstlen) != 0))
		return false;
	return gso_join(&t->run, len);
}

/* Queue data (in buffer bid) as the pending run's next datagram, or as a
 * new run. 0, or -EBUSY when every send slot is taken. */
static int queue(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		 uint8_t *data, size_t len, uint16_t bid, uint32_t id)
{
	if (l->pend != TX_NONE && tx_joins(l, fd, dst, dstlen, len)) {
		struct tx *t = &l->tx[l->pend];
		unsigned i = t->run.n - 1;

		t->iov[i].iov_base = data;
		t->iov[i].iov_len = len;
		t->bid[i] = bid;
		t->id[i] = id;
		l->ref[bid]++;
		return 0;
	}
	if (l->pend != TX_NONE)
		ur_tx_flush(l);
	if (l->ntx_free == 0)
		return -EBUSY;
	tx_open(l, fd, dst, dstlen, data, len, bid, id, fdtab_gso(&l->b.fds, fd));
	return 0;
}

int ur_forward(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
	       struct loop_dgram *d, uint32_t id)
{
	if (l->b.taken)
		return -EINVAL;
	if (queue(l, fd, dst, dstlen, d->data, d->len, (uint16_t)d->bid, id) < 0) {
		STAT_ADD(l->b.st.send_failures, 1);
		return -EBUSY;
	}
	l->b.taken = true;
	return 0;
}

/* Out of copy buffers or send slots: refused, never waited for. A buffer
 * comes back when the kernel completes a send, a few microseconds after
 * the turn's submit: only a burst of more than UR_COPY copies in one turn
 * meets this. */
int ur_send(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen, const void *buf,
	    size_t len, uint32_t id)
{
	int err = loop_copy_check(len);
	uint16_t bid;

	if (err)
		return err;
	if (l->ncopy_free == 0) {
		STAT_ADD(l->b.st.send_nobufs, 1);
		return -ENOBUFS;
	}
	bid = l->copy_free[l->ncopy_free - 1];
	memcpy(buf_at(l, bid), buf, len);
	if (queue(l, fd, dst, dstlen, buf_at(l, bid), len, bid, id) < 0) {
		STAT_ADD(l->b.st.send_nobufs, 1);
		return -ENOBUFS;
	}
	l->ncopy_free--; /* queue took a reference: buf_put gives it back */
	STAT_ADD(l->b.st.copies, 1);
	return 0;
}

static void stall(struct loop *l, int fd, uint32_t id)
{
	if (l->nstalled == l->stalled_cap) {
		unsigned n = l->stalled_cap ? 2 * l->stalled_cap : 16;
		int *f = realloc(l->stalled_fd, n * sizeof(*f));
		uint32_t *i;

		if (f)
			l->stalled_fd = f;
		i = realloc(l->stalled_id, n * sizeof(*i));
		if (i)
			l->stalled_id = i;
		if (!f || !i)
			return; /* out of memory: the socket stays unarmed */
		l->stalled_cap = n;
	}
	l->stalled_fd[l->nstalled] = fd;
	l->stalled_id[l->nstalled] = id;
	l->nstalled++;
}

/* Re-arm sockets that ran dry once buffers are back (-ENOBUFS is
 * back-pressure: their datagrams wait in the socket buffer meanwhile). */
void ur_unstall(struct loop *l)
{
	unsigned kept = 0;

	for (unsigned i = 0; i < l->nstalled; i++) {
		int fd = l->stalled_fd[i];
		uint32_t id = l->stalled_id[i];

		if (!fdtab_is(&l->b.fds, fd, id))
			continue;
		if (l->free_bufs == 0 || arm_recv(l, fd, id) < 0) {
			l->stalled_fd[kept] = fd;
			l->stalled_id[kept++] = id;
		}
	}
	l->nstalled = kept;
}

/* Hand the datagram in buffer bid to the layer above (loop_deliver). The
 * control area the kernel left unwritten is the datagram's headroom. */
static void deliver(struct loop *l, struct io_uring_recvmsg_out *o, size_t len, unsigned bid,
		    int fd, uint32_t id, uint64_t now)
{
	const struct loop_dgram d = {
	    .from = o->namelen ? io_uring_recvmsg_name(o) : NULL,
	    .fromlen = o->namelen,
	    .data = io_uring_recvmsg_payload(o, &l->rmsg),
	    .len = len,
	    .headroom = l->rmsg.msg_controllen - o->controllen,
	    .truncated = (o->flags & MSG_TRUNC) != 0,
	    .bid = bid,
	    .now = now,
	};
	size_t seg = 0;
	struct cmsghdr *c;

	for (c = io_uring_recvmsg_cmsg_firsthdr(o, &l->rmsg); c && !seg;
	     c = io_uring_recvmsg_cmsg_nexthdr(o, &l->rmsg, c))
		seg = gro_size(c);
	loop_deliver(&l->b, fd, id, &d, seg);
}

void ur_on_recv(struct loop *l, struct io_uring_cqe *cqe, uint64_t now)
{
	uint64_t ud = cqe->user_data;
	int fd = (int)UD_AUX(ud);
	uint32_t id = UD_ID(ud);
	bool more = cqe->flags & IORING_CQE_F_MORE;
	bool live = fdtab_is(&l->b.fds, fd, id);

	if (cqe->res < 0) {
		if (cqe->res == -ENOBUFS) {
			STAT_ADD(l->b.st.nobufs, 1);
			if (live && !more)
				stall(l, fd, id);
			return;
		}
		if (cqe->res != -ECANCELED && live)
			l->b.h.on_recv_error(l->b.h.arg, id, cqe->res);
	} else if (cqe->flags & IORING_CQE_F_BUFFER) {
		unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		uint8_t *buf = buf_at(l, bid);
		struct io_uring_recvmsg_out *o;

		l->free_bufs--;
		STAT_ADD(l->b.st.recv_batches, 1);
		o = io_uring_recvmsg_validate(buf, cqe->res, &l->rmsg);
		if (o && live)
			deliver(l, o, io_uring_recvmsg_payload_length(o, cqe->res, &l->rmsg), bid,
				fd, id, now);
		if (l->ref[bid] == 0)
			ur_buf_recycle(l, bid);
	}
	/* A multishot that ended without being cancelled is re-armed; a socket
	 * deleted meanwhile is not (its number may belong to another now). */
	if (!more && live && fdtab_is(&l->b.fds, fd, id) && cqe->res != -ECANCELED)
		arm_recv(l, fd, id);
}

void ur_on_send(struct loop *l, struct io_uring_cqe *cqe)
{
	unsigned slot = UD_AUX(cqe->user_data);
	struct tx *t = &l->tx[slot];
	int res = cqe->res;

	if (res < 0 && t->run.n > 1 && t->sock && fdtab_raw(&l->b.fds, t->fd) == t->sock) {
		/* The train as a whole was refused. Its datagrams go again one
		 * by one, each to its own fate, and the socket learns what its
		 * trains may carry. */
		struct tx old = *t; /* the slot is reused below */

		loop_train_refused(&l->b, old.fd, old.run.seg, res);
		l->tx_free[l->ntx_free++] = (uint16_t)slot;
		if (l->pend != TX_NONE)
			ur_tx_flush(l);
		for (unsigned i = 0; i < old.run.n; i++) {
			if (l->ntx_free == 0) { /* out of sends: this one failed */
				buf_put(l, old.bid[i]);
				l->b.h.on_sent(l->b.h.arg, old.id[i], res);
				continue;
			}
			tx_open(l, old.fd, old.msg.msg_namelen ? &old.dst.sa : NULL,
				old.msg.msg_namelen, old.iov[i].iov_base, old.iov[i].iov_len,
				old.bid[i], old.id[i], 0);
			ur_tx_flush(l);
			/* The new send holds the buffer now: the train lets go. */
			buf_put(l, old.bid[i]);
		}
		return;
	}
	tx_done(l, slot, res);
}
