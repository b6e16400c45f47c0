/* SPDX-License-Identifier: ISC */
/* io_uring backend: multishot recvmsg on every socket from one provided
 * buffer ring, forwards as sendmsg SQEs out of the same buffers (recycled on
 * the send's completion; a run to one destination is one GSO sendmsg), one
 * absolute timeout SQE for the earliest timer, multishot poll for watched
 * fds, one submit per loop turn. Copied sends use buffers of the same size
 * kept out of the ring, recycled the same way. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "addr.h"
#include "loop.h"
#include "loop_common.h"

#define UR_ENTRIES    4096
#define UR_CQ_ENTRIES 16384
#define UR_NBUFS      512 /* power of two: the ring's mask */
#define UR_COPY	      128 /* buffers for copied sends, after the ring's */
#define UR_NTX	      (UR_NBUFS + UR_COPY)
#define UR_BGID	      0
/* Each buffer: the recvmsg_out header, the name (sockaddr_in6 rounded up so
 * the cmsg after it is aligned), the control area, the largest datagram or
 * train; rounded to a cache line. The kernel writes the header at the
 * start of each buffer, and it must be aligned for us to read it. The
 * control area holds the UDP_GRO cmsg and LOOP_HEADROOM more: the kernel
 * writes its cmsgs at the area's start, so what it leaves unwritten lies
 * right in front of the payload, the datagram's headroom. */
#define UR_NAMELEN   CMSG_ALIGN(sizeof(struct sockaddr_in6))
#define UR_CTL_SPACE (GRO_CTL_SPACE + LOOP_HEADROOM)
#define UR_BUF_SIZE                                                                                \
	((sizeof(struct io_uring_recvmsg_out) + UR_NAMELEN + UR_CTL_SPACE + LOOP_MAX_DGRAM + 63) & \
	 ~(size_t)63)

/* user_data: op (8 bits) | aux (24 bits) | id (32 bits). Never a pointer. */
enum {
	OP_RECV = 1,
	OP_SEND,
	OP_POLL,
	OP_TIMER,
	OP_CANCEL,
	/* Streams: aux is the stream's slot, which is not reused while the
	 * kernel holds a request of it; OP_SSEND's id is the chunk. */
	OP_ACCEPT,
	OP_CONNECT,
	OP_SRECV,
	OP_SSEND,
	/* The poll linked in front of a splice (stream_splice_in/out): only
	 * counted, the splice's own completion acts. */
	OP_SPOLL,
};
#define UR_SBGID	1 /* the stream pool's ring; UR_SBGID + 1 its reserve's */
#define UD(op, aux, id) ((uint64_t)(op) << 56 | (uint64_t)((aux)&0xffffff) << 32 | (id))
#define UD_OP(u)	((unsigned)((u) >> 56))
#define UD_AUX(u)	((unsigned)((u) >> 32 & 0xffffff))
#define UD_ID(u)	((uint32_t)(u))

/* One sendmsg: a single datagram or a GSO train. Segment i is buffer
 * bid[i], forwarded for id[i]. */
struct tx {
	struct msghdr msg;
	union gso_ctl ctl;
	union etr_sockaddr dst;
	int fd;
	uint32_t sock; /* fdtab_raw(fd) when queued: is it still that socket? */
	struct gso_run run;
	struct iovec iov[GSO_MAX_SEGS];
	uint32_t id[GSO_MAX_SEGS];
	uint16_t bid[GSO_MAX_SEGS];
};
#define TX_NONE 0xffff

struct loop {
	struct loop_base b; /* first: loop_common.h */
	struct io_uring ring;

	struct io_uring_buf_ring *br;
	uint8_t *bufs;	      /* UR_NBUFS for the ring, then UR_COPY for copies */
	uint16_t ref[UR_NTX]; /* sends still reading each buffer */
	unsigned free_bufs;   /* buffers in the ring, ready for the kernel */
	struct msghdr rmsg;   /* multishot template: name and control sizes */
	uint16_t copy_free[UR_COPY];
	unsigned ncopy_free;

	/* As many sends as buffers: enough unless GRO buffers (many datagrams
	 * each) fan out to many sends; then a forward fails and is counted. */
	struct tx tx[UR_NTX];
	uint16_t tx_free[UR_NTX];
	unsigned ntx_free;
	uint16_t pend; /* the tx still gathering a run, or TX_NONE */

	/* Sockets whose multishot stopped for lack of buffers. */
	int *stalled_fd;
	uint32_t *stalled_id;
	unsigned nstalled, stalled_cap;

	struct __kernel_timespec ts;
	unsigned timer_gen;

	/* Streams (set up on first use): the read pool's own rings, [0] for
	 * chunks [0, nread - nreserve), [1] for the reserve (the rest; no
	 * ring when there is none). A read is armed on [0]; one that is not
	 * bulk goes on to [1] when [0] is empty. */
	struct io_uring_buf_ring *sbr[2];
	unsigned sbr_entries[2]; /* a power of two, >= its chunks */
	unsigned sring_free[2];	 /* read chunks in each ring */
	unsigned ssending;	 /* stream sends the kernel holds */
};

static void tx_flush(struct loop *l);
static void on_ssend(struct loop *l, struct io_uring_cqe *cqe);
static void on_stream_cqe(struct loop *l, struct io_uring_cqe *cqe, uint64_t now);
static void s_unstall(struct loop *l);
static void s_took(struct loop *l, uint32_t c);

static struct io_uring_sqe *sqe_get(struct loop *l)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);

	if (!sqe) {
		/* The SQ is full mid-turn: submit early rather than fail. */
		io_uring_submit(&l->ring);
		STAT_ADD(l->b.st.send_batches, 1);
		sqe = io_uring_get_sqe(&l->ring);
	}
	return sqe;
}

static uint8_t *buf_at(struct loop *l, unsigned bid)
{
	return l->bufs + (size_t)bid * UR_BUF_SIZE;
}

static void buf_recycle(struct loop *l, unsigned bid)
{
	l->ref[bid] = 0;
	io_uring_buf_ring_add(l->br, buf_at(l, bid), UR_BUF_SIZE, (unsigned short)bid,
			      io_uring_buf_ring_mask(UR_NBUFS), 0);
	io_uring_buf_ring_advance(l->br, 1);
	l->free_bufs++;
}

static int arm_recv(struct loop *l, int fd, uint32_t id)
{
	struct io_uring_sqe *sqe = sqe_get(l);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_recvmsg_multishot(sqe, fd, &l->rmsg, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = UR_BGID;
	io_uring_sqe_set_data64(sqe, UD(OP_RECV, fd, id));
	return 0;
}

static int arm_poll(struct loop *l, int fd, uint32_t id)
{
	struct io_uring_sqe *sqe = sqe_get(l);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_multishot(sqe, fd, POLLIN);
	io_uring_sqe_set_data64(sqe, UD(OP_POLL, fd, id));
	return 0;
}

/* Why io_uring cannot serve, in words an operator can act on. */
static void explain(char *why, size_t whylen, const char *what, int err)
{
	const char *hint = "";

	if (err == -EPERM)
		hint = " (seccomp or kernel.io_uring_disabled)";
	else if (err == -ENOSYS)
		hint = " (kernel built without io_uring)";
	else if (err == -EINVAL)
		hint = " (kernel too old)";
	snprintf(why, whylen, "%s: %s%s", what, strerror(-err), hint);
}

static const struct loop_stream_ops ur_stream_ops;

static int ur_create(struct loop **lp, const struct loop_handler *h, const struct loop_conf *c,
		     char *why, size_t whylen)
{
	struct io_uring_params p;
	struct io_uring_probe *probe;
	struct io_uring_buf_reg reg = {0};
	struct loop *l = calloc(1, sizeof(*l));
	static const int need[] = {
	    IORING_OP_RECVMSG,	IORING_OP_SENDMSG,	IORING_OP_TIMEOUT, IORING_OP_TIMEOUT_REMOVE,
	    IORING_OP_POLL_ADD, IORING_OP_ASYNC_CANCEL, IORING_OP_SEND_ZC};
	int err;

	if (!l)
		return -ENOMEM;
	/* Only this thread submits, and completions run when we ask for them:
	 * fewer interrupts of the packet work (Linux 6.1+, else plain). */
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	p.cq_entries = UR_CQ_ENTRIES;
	err = io_uring_queue_init_params(UR_ENTRIES, &l->ring, &p);
	if (err == -EINVAL) {
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_CQSIZE;
		p.cq_entries = UR_CQ_ENTRIES;
		err = io_uring_queue_init_params(UR_ENTRIES, &l->ring, &p);
	}
	if (err < 0) {
		explain(why, whylen, "io_uring_setup", err);
		free(l);
		return err;
	}
	probe = io_uring_get_probe_ring(&l->ring);
	if (!probe) {
		err = -ENOSYS;
		explain(why, whylen, "io_uring probe", err);
		goto fail_ring;
	}
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		if (!io_uring_opcode_supported(probe, need[i])) {
			/* SEND_ZC came with multishot recvmsg in Linux 6.0: its
			 * presence is how we learn the latter is there. */
			snprintf(why, whylen,
				 "io_uring lacks opcode %d (multishot recvmsg needs Linux 6.0)",
				 need[i]);
			io_uring_free_probe(probe);
			err = -EOPNOTSUPP;
			goto fail_ring;
		}
	}
	io_uring_free_probe(probe);

	l->br = mmap(NULL, UR_NBUFS * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
		     MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	l->bufs = mmap(NULL, (size_t)UR_NTX * UR_BUF_SIZE, PROT_READ | PROT_WRITE,
		       MAP_ANONYMOUS | MAP_PRIVATE | MAP_NORESERVE, -1, 0);
	if (l->br == MAP_FAILED || l->bufs == MAP_FAILED) {
		err = -ENOMEM;
		snprintf(why, whylen, "buffer ring: out of memory");
		goto fail_mem;
	}
	reg.ring_addr = (uint64_t)(uintptr_t)l->br;
	reg.ring_entries = UR_NBUFS;
	reg.bgid = UR_BGID;
	err = io_uring_register_buf_ring(&l->ring, &reg, 0);
	if (err < 0) {
		explain(why, whylen, "io_uring_register_buf_ring (Linux 5.19+)", err);
		goto fail_mem;
	}
	io_uring_buf_ring_init(l->br);
	for (unsigned i = 0; i < UR_NBUFS; i++)
		buf_recycle(l, i);
	for (unsigned i = 0; i < UR_COPY; i++)
		l->copy_free[l->ncopy_free++] = (uint16_t)(UR_NBUFS + i);
	for (unsigned i = 0; i < UR_NTX; i++)
		l->tx_free[i] = (uint16_t)i;
	l->ntx_free = UR_NTX;
	l->rmsg.msg_namelen = UR_NAMELEN;
	l->rmsg.msg_controllen = UR_CTL_SPACE;
	l->pend = TX_NONE;
	if (loop_base_init(&l->b, h, c) < 0) {
		err = -ENOMEM;
		snprintf(why, whylen, "fd table: out of memory");
		goto fail_mem;
	}
	l->b.so = &ur_stream_ops;
	*lp = l;
	return 0;
fail_mem:
	if (l->br != MAP_FAILED && l->br)
		munmap(l->br, UR_NBUFS * sizeof(struct io_uring_buf));
	if (l->bufs != MAP_FAILED && l->bufs)
		munmap(l->bufs, (size_t)UR_NTX * UR_BUF_SIZE);
	loop_base_free(&l->b);
fail_ring:
	io_uring_queue_exit(&l->ring);
	free(l);
	return err;
}

static void ur_destroy(struct loop *l)
{
	io_uring_queue_exit(&l->ring);
	munmap(l->br, UR_NBUFS * sizeof(struct io_uring_buf));
	munmap(l->bufs, (size_t)UR_NTX * UR_BUF_SIZE);
	for (int g = 0; g < 2; g++)
		if (l->sbr[g])
			munmap(l->sbr[g], l->sbr_entries[g] * sizeof(struct io_uring_buf));
	loop_base_free(&l->b);
	free(l->stalled_fd);
	free(l->stalled_id);
	free(l);
}

static int ur_add_socket(struct loop *l, int fd, uint32_t id)
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

static int ur_watch(struct loop *l, int fd, uint32_t id)
{
	int err = fdtab_set(&l->b.fds, fd, id);

	if (!err)
		err = arm_poll(l, fd, id);
	if (err)
		fdtab_clear(&l->b.fds, fd);
	return err;
}

static void ur_del_socket(struct loop *l, int fd, uint32_t id)
{
	struct io_uring_sqe *sqe = sqe_get(l);
	struct lstream *s = stream_at(&l->b, fd);

	fdtab_clear(&l->b.fds, fd);
	/* The multishot holds a reference to the file: closing the fd alone
	 * would leave it armed. Cancel it by its user_data. */
	if (sqe) {
		io_uring_prep_cancel64(sqe, UD(OP_RECV, fd, id), 0);
		io_uring_sqe_set_data64(sqe, UD(OP_CANCEL, 0, 0));
	}
	/* A stream: every request on the file goes (accept, recv, connect,
	 * the send under way); their completions end the slot's life and
	 * give each send its on_sent. */
	if (s) {
		stream_detach(&l->b, s);
		if (s->inflight == 0) {
			stream_close(&l->b, s);
		} else if ((sqe = sqe_get(l))) {
			io_uring_prep_cancel_fd(sqe, fd, IORING_ASYNC_CANCEL_ALL);
			io_uring_sqe_set_data64(sqe, UD(OP_CANCEL, 0, 0));
		}
	}
	/* Queued sends name this fd by number: submit them before the caller
	 * closes it, so each takes its file reference while it is ours. */
	if (l->pend != TX_NONE)
		tx_flush(l);
	/* With DEFER_TASKRUN the cancelled receive lets go of the file only
	 * when task work runs: run it now, so that the caller's close() frees
	 * the socket and its port at once (a session made room for a newcomer
	 * binds that port next; see session_open in udprelay.c). */
	io_uring_submit_and_get_events(&l->ring);
	STAT_ADD(l->b.st.send_batches, 1);
}

/* A send is done with its segment of buffer bid: the last one gives a
 * receive buffer back to the ring, a copy buffer to its free list. */
static void buf_put(struct loop *l, unsigned bid)
{
	if (--l->ref[bid] != 0)
		return;
	if (bid < UR_NBUFS)
		buf_recycle(l, bid);
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
static void tx_flush(struct loop *l)
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
	sqe = sqe_get(l);
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
		tx_flush(l);
	if (l->ntx_free == 0)
		return -EBUSY;
	tx_open(l, fd, dst, dstlen, data, len, bid, id, fdtab_gso(&l->b.fds, fd));
	return 0;
}

static int ur_forward(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
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
static int ur_send(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		   const void *buf, size_t len, uint32_t id)
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
static void unstall(struct loop *l)
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

static void on_recv(struct loop *l, struct io_uring_cqe *cqe, uint64_t now)
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
			buf_recycle(l, bid);
	}
	/* A multishot that ended without being cancelled is re-armed; a socket
	 * deleted meanwhile is not (its number may belong to another now). */
	if (!more && live && fdtab_is(&l->b.fds, fd, id) && cqe->res != -ECANCELED)
		arm_recv(l, fd, id);
}

static void on_send(struct loop *l, struct io_uring_cqe *cqe)
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
			tx_flush(l);
		for (unsigned i = 0; i < old.run.n; i++) {
			if (l->ntx_free == 0) { /* out of sends: this one failed */
				buf_put(l, old.bid[i]);
				l->b.h.on_sent(l->b.h.arg, old.id[i], res);
				continue;
			}
			tx_open(l, old.fd, old.msg.msg_namelen ? &old.dst.sa : NULL,
				old.msg.msg_namelen, old.iov[i].iov_base, old.iov[i].iov_len,
				old.bid[i], old.id[i], 0);
			tx_flush(l);
			/* The new send holds the buffer now: the train lets go. */
			buf_put(l, old.bid[i]);
		}
		return;
	}
	tx_done(l, slot, res);
}

static void arm_timer(struct loop *l, uint64_t deadline)
{
	struct io_uring_sqe *sqe;

	if (l->b.armed != UINT64_MAX) {
		sqe = sqe_get(l);
		if (!sqe)
			return;
		io_uring_prep_timeout_remove(sqe, UD(OP_TIMER, l->timer_gen, 0), 0);
		io_uring_sqe_set_data64(sqe, UD(OP_CANCEL, 0, 0));
		l->b.armed = UINT64_MAX;
	}
	sqe = sqe_get(l);
	if (!sqe)
		return;
	/* The kernel reads ts when it takes the SQE, so one copy suffices. */
	l->ts.tv_sec = (long long)(deadline / NS_PER_SEC);
	l->ts.tv_nsec = (long long)(deadline % NS_PER_SEC);
	l->timer_gen = (l->timer_gen + 1) & 0xffffff;
	io_uring_prep_timeout(sqe, &l->ts, 0, IORING_TIMEOUT_ABS);
	io_uring_sqe_set_data64(sqe, UD(OP_TIMER, l->timer_gen, 0));
	l->b.armed = deadline;
}

static int ur_run(struct loop *l)
{
	while (!l->b.stop) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0, accepts = 0;
		uint64_t now, at;
		int err;

		if (loop_wake_earlier(&l->b, &at))
			arm_timer(l, at);
		if (l->nstalled && l->free_bufs)
			unstall(l);
		if (l->b.sx && l->b.sx->nstalled && (l->sring_free[0] || l->sring_free[1]))
			s_unstall(l);
		if (l->pend != TX_NONE)
			tx_flush(l);
		err = io_uring_submit_and_wait(&l->ring, 1);
		STAT_ADD(l->b.st.send_batches, 1);
		if (err < 0 && err != -EINTR && err != -EAGAIN && err != -EBUSY)
			return err;
		now = loop_now();
		io_uring_for_each_cqe (&l->ring, head, cqe) {
			uint64_t ud = cqe->user_data;

			seen++;
			switch (UD_OP(ud)) {
			case OP_RECV:
				on_recv(l, cqe, now);
				break;
			case OP_SEND:
				on_send(l, cqe);
				break;
			case OP_POLL:
				if (fdtab_is(&l->b.fds, (int)UD_AUX(ud), UD_ID(ud))) {
					if (cqe->res >= 0)
						l->b.h.on_readable(l->b.h.arg, UD_ID(ud));
					if (!(cqe->flags & IORING_CQE_F_MORE))
						arm_poll(l, (int)UD_AUX(ud), UD_ID(ud));
				}
				break;
			case OP_TIMER:
				if (UD_AUX(ud) == l->timer_gen && cqe->res != -ECANCELED)
					l->b.armed = UINT64_MAX;
				break;
			case OP_ACCEPT:
				accepts++;
				/* fall through */
			case OP_CONNECT:
			case OP_SRECV:
			case OP_SSEND:
			case OP_SPOLL:
				on_stream_cqe(l, cqe, now);
				break;
			default:
				break;
			}
			/* The turn ends here; the next takes the rest. */
			if (accepts == LOOP_ACCEPT_TURN)
				break;
		}
		io_uring_cq_advance(&l->ring, seen);
		loop_turn_end(&l->b);
	}
	return 0;
}

static void ur_flush(struct loop *l)
{
	uint64_t until = loop_now() + LOOP_FLUSH_MS * NS_PER_MS;

	if (l->pend != TX_NONE)
		tx_flush(l);
	/* Until every send slot is back (each send in flight holds one) and
	 * every stream send has finished. */
	while ((l->ntx_free + (l->pend != TX_NONE) < UR_NTX || l->ssending) && loop_now() < until) {
		struct __kernel_timespec ts = {.tv_nsec = 50 * (long long)NS_PER_MS};
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;

		io_uring_submit_and_wait_timeout(&l->ring, &cqe, 1, &ts, NULL);
		io_uring_for_each_cqe (&l->ring, head, cqe) {
			seen++;
			if (UD_OP(cqe->user_data) == OP_SEND) {
				on_send(l, cqe);
			} else if (UD_OP(cqe->user_data) == OP_SSEND) {
				on_ssend(l, cqe);
			} else if (UD_OP(cqe->user_data) == OP_SRECV &&
				   (cqe->flags & IORING_CQE_F_BUFFER)) {
				/* Dropped, like datagrams. */
				s_took(l, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
				chunk_take(&l->b, cqe->flags >> IORING_CQE_BUFFER_SHIFT, CH_USER);
				chunk_put(&l->b, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
			} else if (UD_OP(cqe->user_data) == OP_RECV &&
				   (cqe->flags & IORING_CQE_F_BUFFER)) {
				unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;

				/* Dropped: nobody reads any more. */
				l->free_bufs--;
				if (l->ref[bid] == 0)
					buf_recycle(l, bid);
			}
		}
		io_uring_cq_advance(&l->ring, seen);
		if (l->pend != TX_NONE)
			tx_flush(l);
	}
}

/* Streams. Which ring read chunk c belongs to. */
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
static void s_took(struct loop *l, uint32_t c)
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
	struct io_uring_sqe *sqe = sqe_get(l);

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
	if (!(sqe = sqe_get(l)))
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
	if (!(sqe = sqe_get(l)))
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
	if (!(sqe = sqe_get(l)))
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

static void on_srecv(struct loop *l, struct lstream *s, struct io_uring_cqe *cqe, uint64_t now)
{
	uint32_t c = STREAM_NONE;
	int res = cqe->res;

	s->inflight--;
	if (cqe->flags & IORING_CQE_F_BUFFER) {
		c = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		s_took(l, c);
		chunk_take(&l->b, c, CH_USER);
	}
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

static void on_ssend(struct loop *l, struct io_uring_cqe *cqe)
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

/* Reads waiting for a chunk go on, oldest first, one per free chunk: on
 * the main ring any of them, on the reserve's those that are not bulk. */
static void s_unstall(struct loop *l)
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

static void on_stream_cqe(struct loop *l, struct io_uring_cqe *cqe, uint64_t now)
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
		on_srecv(l, s, cqe, now);
		break;
	case OP_SPOLL:
		s->inflight--;
		if (s->flags & SF_DEAD)
			s_release(l, s);
		break;
	default:
		on_ssend(l, cqe);
		break;
	}
}

static const struct loop_stream_ops ur_stream_ops = {
    .listen = arm_accept,
    .resume = s_resume,
    .connect = s_connect,
    .ready = s_ready,
    .read = s_read,
    .queue = s_queue,
};

const struct loop_ops loop_uring_ops = {
    .name = "io_uring",
    .create = ur_create,
    .destroy = ur_destroy,
    .add_socket = ur_add_socket,
    .del_socket = ur_del_socket,
    .watch = ur_watch,
    .forward = ur_forward,
    .send = ur_send,
    .run = ur_run,
    .flush = ur_flush,
    LOOP_COMMON_OPS,
};
