/* SPDX-License-Identifier: ISC */
/* io_uring backend: multishot recvmsg on every socket from one provided
 * buffer ring, forwards as sendmsg SQEs out of the same buffer (recycled on
 * the send's completion), one absolute timeout SQE for the deadline,
 * multishot poll for watched fds, one submit per loop turn. */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "addr.h"
#include "loop.h"
#include "loop_fdtab.h"

#define UR_ENTRIES 4096
#define UR_CQ_ENTRIES 16384
#define UR_NBUFS 512 /* power of two: the ring's mask */
#define UR_BGID 0
/* recvmsg_out header + the largest name + the largest datagram, rounded to
 * a cache line: the kernel writes the header at the start of each buffer,
 * and it must be aligned for us to read it. */
#define UR_BUF_SIZE                                                                        \
	((sizeof(struct io_uring_recvmsg_out) + sizeof(struct sockaddr_in6) + LOOP_MAX_DGRAM + \
	  63) & ~(size_t)63)

/* user_data: op (8 bits) | aux (24 bits) | id (32 bits). Never a pointer. */
enum { OP_RECV = 1, OP_SEND, OP_POLL, OP_TIMER, OP_CANCEL };
#define UD(op, aux, id) ((uint64_t)(op) << 56 | (uint64_t)((aux)&0xffffff) << 32 | (id))
#define UD_OP(u) ((unsigned)((u) >> 56))
#define UD_AUX(u) ((unsigned)((u) >> 32 & 0xffffff))
#define UD_ID(u) ((uint32_t)(u))

struct tx {
	struct msghdr msg;
	struct iovec iov;
	union etr_sockaddr dst;
	uint32_t id;
	uint16_t bid;
};

struct loop {
	struct loop_handler h;
	struct io_uring ring;
	bool stop;
	struct fdtab fds;

	struct io_uring_buf_ring *br;
	uint8_t *bufs;
	unsigned free_bufs; /* buffers in the ring, ready for the kernel */
	struct msghdr rmsg; /* multishot template: name and control sizes */

	struct tx tx[UR_NBUFS]; /* a send holds exactly one buffer: same count */
	uint16_t tx_free[UR_NBUFS];
	unsigned ntx_free;

	/* Sockets whose multishot stopped for lack of buffers. */
	int *stalled_fd;
	uint32_t *stalled_id;
	unsigned nstalled, stalled_cap;

	struct __kernel_timespec ts;
	uint64_t armed; /* UINT64_MAX: no timer in flight */
	unsigned timer_gen;
	bool taken;

	struct loop_stats st;
};

static struct io_uring_sqe *sqe_get(struct loop *l)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);

	if (!sqe) {
		/* The SQ is full mid-turn: submit early rather than fail. */
		io_uring_submit(&l->ring);
		l->st.send_batches++;
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

static int ur_create(struct loop **lp, const struct loop_handler *h, unsigned max_sockets,
		     char *why, size_t whylen)
{
	struct io_uring_params p;
	struct io_uring_probe *probe;
	struct io_uring_buf_reg reg = { 0 };
	struct loop *l = calloc(1, sizeof(*l));
	static const int need[] = { IORING_OP_RECVMSG, IORING_OP_SENDMSG, IORING_OP_TIMEOUT,
				    IORING_OP_TIMEOUT_REMOVE, IORING_OP_POLL_ADD,
				    IORING_OP_ASYNC_CANCEL, IORING_OP_SEND_ZC };
	int err;

	if (!l)
		return -ENOMEM;
	l->h = *h;
	l->armed = UINT64_MAX;
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
			snprintf(why, whylen, "io_uring lacks opcode %d (multishot recvmsg needs Linux 6.0)",
				 need[i]);
			io_uring_free_probe(probe);
			err = -EOPNOTSUPP;
			goto fail_ring;
		}
	}
	io_uring_free_probe(probe);

	l->br = mmap(NULL, UR_NBUFS * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
		     MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	l->bufs = mmap(NULL, (size_t)UR_NBUFS * UR_BUF_SIZE, PROT_READ | PROT_WRITE,
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
	for (unsigned i = 0; i < UR_NBUFS; i++) {
		buf_recycle(l, i);
		l->tx_free[i] = (uint16_t)i;
	}
	l->ntx_free = UR_NBUFS;
	l->rmsg.msg_namelen = sizeof(struct sockaddr_in6);
	l->rmsg.msg_controllen = 0;
	if (fdtab_init(&l->fds, max_sockets) < 0) {
		err = -ENOMEM;
		snprintf(why, whylen, "fd table: out of memory");
		goto fail_mem;
	}
	*lp = l;
	return 0;
fail_mem:
	if (l->br != MAP_FAILED && l->br)
		munmap(l->br, UR_NBUFS * sizeof(struct io_uring_buf));
	if (l->bufs != MAP_FAILED && l->bufs)
		munmap(l->bufs, (size_t)UR_NBUFS * UR_BUF_SIZE);
fail_ring:
	io_uring_queue_exit(&l->ring);
	free(l);
	return err;
}

static void ur_destroy(struct loop *l)
{
	io_uring_queue_exit(&l->ring);
	munmap(l->br, UR_NBUFS * sizeof(struct io_uring_buf));
	munmap(l->bufs, (size_t)UR_NBUFS * UR_BUF_SIZE);
	fdtab_free(&l->fds);
	free(l->stalled_fd);
	free(l->stalled_id);
	free(l);
}

static int ur_add_socket(struct loop *l, int fd, uint32_t id)
{
	int err = fdtab_set(&l->fds, fd, id);

	if (!err)
		err = arm_recv(l, fd, id);
	if (err)
		fdtab_clear(&l->fds, fd);
	return err;
}

static int ur_watch(struct loop *l, int fd, uint32_t id)
{
	int err = fdtab_set(&l->fds, fd, id);

	if (!err)
		err = arm_poll(l, fd, id);
	if (err)
		fdtab_clear(&l->fds, fd);
	return err;
}

static void ur_del_socket(struct loop *l, int fd, uint32_t id)
{
	struct io_uring_sqe *sqe = sqe_get(l);

	fdtab_clear(&l->fds, fd);
	/* The multishot holds a reference to the file: closing the fd alone
	 * would leave it armed. Cancel it by its user_data. */
	if (sqe) {
		io_uring_prep_cancel64(sqe, UD(OP_RECV, fd, id), 0);
		io_uring_sqe_set_data64(sqe, UD(OP_CANCEL, 0, 0));
	}
	/* Queued sends name this fd by number: submit them before the caller
	 * closes it, so each takes its file reference while it is ours. */
	io_uring_submit(&l->ring);
	l->st.send_batches++;
}

static int ur_forward(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		      struct loop_dgram *d, uint32_t id)
{
	struct io_uring_sqe *sqe;
	struct tx *t;
	uint16_t slot;

	if (l->taken || l->ntx_free == 0)
		return -EINVAL;
	sqe = sqe_get(l);
	if (!sqe) {
		l->st.send_failures++;
		return -EBUSY;
	}
	slot = l->tx_free[--l->ntx_free];
	t = &l->tx[slot];
	memset(&t->msg, 0, sizeof(t->msg));
	t->iov.iov_base = d->data;
	t->iov.iov_len = d->len;
	t->msg.msg_iov = &t->iov;
	t->msg.msg_iovlen = 1;
	if (dst) {
		memcpy(&t->dst, dst, dstlen);
		t->msg.msg_name = &t->dst;
		t->msg.msg_namelen = dstlen;
	}
	t->id = id;
	t->bid = (uint16_t)d->bid;
	io_uring_prep_sendmsg(sqe, fd, &t->msg, 0);
	io_uring_sqe_set_data64(sqe, UD(OP_SEND, slot, id));
	l->taken = true;
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

		if (!fdtab_is(&l->fds, fd, id))
			continue;
		if (l->free_bufs == 0 || arm_recv(l, fd, id) < 0) {
			l->stalled_fd[kept] = fd;
			l->stalled_id[kept++] = id;
		}
	}
	l->nstalled = kept;
}

static void on_recv(struct loop *l, struct io_uring_cqe *cqe, uint64_t now)
{
	uint64_t ud = cqe->user_data;
	int fd = (int)UD_AUX(ud);
	uint32_t id = UD_ID(ud);
	bool more = cqe->flags & IORING_CQE_F_MORE;
	bool live = fdtab_is(&l->fds, fd, id);

	if (cqe->res < 0) {
		if (cqe->res == -ENOBUFS) {
			l->st.nobufs++;
			if (live && !more)
				stall(l, fd, id);
			return;
		}
		if (cqe->res != -ECANCELED && live)
			l->h.on_recv_error(l->h.arg, id, cqe->res);
	} else if (cqe->flags & IORING_CQE_F_BUFFER) {
		unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		uint8_t *buf = buf_at(l, bid);
		struct io_uring_recvmsg_out *o;

		l->free_bufs--;
		l->st.recv_batches++;
		o = io_uring_recvmsg_validate(buf, cqe->res, &l->rmsg);
		l->taken = false;
		if (o && live) {
			struct loop_dgram d = {
				.from = o->namelen ? io_uring_recvmsg_name(o) : NULL,
				.fromlen = o->namelen,
				.data = io_uring_recvmsg_payload(o, &l->rmsg),
				.len = io_uring_recvmsg_payload_length(o, cqe->res, &l->rmsg),
				.truncated = (o->flags & MSG_TRUNC) != 0,
				.bid = bid,
				.now = now,
			};
			l->h.on_dgram(l->h.arg, id, &d);
		}
		if (!l->taken)
			buf_recycle(l, bid);
	}
	/* A multishot that ended without being cancelled is re-armed; a socket
	 * deleted meanwhile is not (its number may belong to another now). */
	if (!more && live && fdtab_is(&l->fds, fd, id) && cqe->res != -ECANCELED)
		arm_recv(l, fd, id);
}

static void on_send(struct loop *l, struct io_uring_cqe *cqe)
{
	unsigned slot = UD_AUX(cqe->user_data);
	struct tx *t = &l->tx[slot];

	buf_recycle(l, t->bid);
	l->tx_free[l->ntx_free++] = (uint16_t)slot;
	l->h.on_sent(l->h.arg, t->id, cqe->res);
}

static void arm_timer(struct loop *l, uint64_t deadline)
{
	struct io_uring_sqe *sqe;

	/* Deadlines move later on every packet (LRU expiry): re-arming for
	 * each would cost two SQEs per turn. A timeout that fires early costs
	 * one idle tick, then we arm for the real deadline. */
	if (deadline >= l->armed)
		return;
	if (l->armed != UINT64_MAX) {
		sqe = sqe_get(l);
		if (!sqe)
			return;
		io_uring_prep_timeout_remove(sqe, UD(OP_TIMER, l->timer_gen, 0), 0);
		io_uring_sqe_set_data64(sqe, UD(OP_CANCEL, 0, 0));
		l->armed = UINT64_MAX;
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
	l->armed = deadline;
}

static int ur_run(struct loop *l)
{
	while (!l->stop) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		uint64_t now;
		int err;

		arm_timer(l, l->h.next_deadline(l->h.arg));
		if (l->nstalled && l->free_bufs)
			unstall(l);
		err = io_uring_submit_and_wait(&l->ring, 1);
		l->st.send_batches++;
		if (err < 0 && err != -EINTR && err != -EAGAIN && err != -EBUSY)
			return err;
		now = loop_now();
		io_uring_for_each_cqe(&l->ring, head, cqe)
		{
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
				if (fdtab_is(&l->fds, (int)UD_AUX(ud), UD_ID(ud))) {
					if (cqe->res >= 0)
						l->h.on_readable(l->h.arg, UD_ID(ud));
					if (!(cqe->flags & IORING_CQE_F_MORE))
						arm_poll(l, (int)UD_AUX(ud), UD_ID(ud));
				}
				break;
			case OP_TIMER:
				if (UD_AUX(ud) == l->timer_gen && cqe->res != -ECANCELED)
					l->armed = UINT64_MAX;
				break;
			default:
				break;
			}
		}
		io_uring_cq_advance(&l->ring, seen);
		now = loop_now();
		if (!l->stop && now >= l->h.next_deadline(l->h.arg))
			l->h.on_tick(l->h.arg, now);
	}
	return 0;
}

static void ur_stop(struct loop *l)
{
	l->stop = true;
}

static void ur_stats(const struct loop *l, struct loop_stats *st)
{
	*st = l->st;
}

const struct loop_ops loop_uring_ops = {
	.name = "io_uring",
	.create = ur_create,
	.destroy = ur_destroy,
	.add_socket = ur_add_socket,
	.del_socket = ur_del_socket,
	.watch = ur_watch,
	.forward = ur_forward,
	.run = ur_run,
	.stop = ur_stop,
	.stats = ur_stats,
};
