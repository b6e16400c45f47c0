/* SPDX-License-Identifier: ISC */
/* io_uring backend: multishot recvmsg on every socket from one provided
 * buffer ring, forwards as sendmsg SQEs out of the same buffers (recycled on
 * the send's completion; a run to one destination is one GSO sendmsg), one
 * absolute timeout SQE for the earliest timer, multishot poll for watched
 * fds, one submit per loop turn. Copied sends use buffers of the same size
 * kept out of the ring, recycled the same way. This file: the ring, the
 * turn, the timer, the flush; datagrams and streams have their own. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "log.h"
#include "loop_uring_int.h"

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
		/* Every worker's ring meets the same kernel: one line says it. */
		static atomic_bool said;

		if (!atomic_exchange(&said, true))
			log_info("io_uring: the kernel refused SINGLE_ISSUER and DEFER_TASKRUN "
				 "(Linux 6.1+): a plain ring, completions run when they come");
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
		ur_buf_recycle(l, i);
	for (unsigned i = 0; i < UR_COPY; i++)
		l->copy_free[l->ncopy_free++] = (uint16_t)(UR_NBUFS + i);
	for (unsigned i = 0; i < UR_NTX; i++)
		l->tx_free[i] = (uint16_t)i;
	l->ntx_free = UR_NTX;
	l->rmsg.msg_namelen = UR_NAMELEN;
	l->rmsg.msg_controllen = UR_CTL_SPACE;
	l->pend = TX_NONE;
	l->rq_head = l->rq_tail = STREAM_NONE;
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

static void ur_del_socket(struct loop *l, int fd, uint32_t id)
{
	struct io_uring_sqe *sqe = ur_sqe_get(l);
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
		} else if ((sqe = ur_sqe_get(l))) {
			io_uring_prep_cancel_fd(sqe, fd, IORING_ASYNC_CANCEL_ALL);
			io_uring_sqe_set_data64(sqe, UD(OP_CANCEL, 0, 0));
		}
	}
	/* Queued sends name this fd by number: submit them before the caller
	 * closes it, so each takes its file reference while it is ours. */
	if (l->pend != TX_NONE)
		ur_tx_flush(l);
	/* With DEFER_TASKRUN the cancelled receive lets go of the file only
	 * when task work runs: run it now, so that the caller's close() frees
	 * the socket and its port at once (a session made room for a newcomer
	 * binds that port next; see session_open in udprelay.c). */
	io_uring_submit_and_get_events(&l->ring);
	STAT_ADD(l->b.st.send_batches, 1);
}

static void arm_timer(struct loop *l, uint64_t deadline)
{
	struct io_uring_sqe *sqe;

	if (l->b.armed != UINT64_MAX) {
		sqe = ur_sqe_get(l);
		if (!sqe)
			return;
		io_uring_prep_timeout_remove(sqe, UD(OP_TIMER, l->timer_gen, 0), 0);
		io_uring_sqe_set_data64(sqe, UD(OP_CANCEL, 0, 0));
		l->b.armed = UINT64_MAX;
	}
	sqe = ur_sqe_get(l);
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
			ur_unstall(l);
		if (l->b.sx && l->b.sx->nstalled && (l->sring_free[0] || l->sring_free[1]))
			ur_s_unstall(l);
		if (l->pend != TX_NONE)
			ur_tx_flush(l);
		/* Stream reads waiting for their turn: what completed meanwhile
		 * is taken without a wait. */
		if (l->rq_head != STREAM_NONE)
			err = io_uring_submit_and_get_events(&l->ring);
		else
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
				ur_on_recv(l, cqe, now);
				break;
			case OP_SEND:
				ur_on_send(l, cqe);
				break;
			case OP_POLL:
				if (fdtab_is(&l->b.fds, (int)UD_AUX(ud), UD_ID(ud))) {
					if (cqe->res >= 0)
						l->b.h.on_readable(l->b.h.arg, UD_ID(ud));
					if (!(cqe->flags & IORING_CQE_F_MORE))
						ur_arm_poll(l, (int)UD_AUX(ud), UD_ID(ud));
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
				ur_on_stream_cqe(l, cqe, now);
				break;
			default:
				break;
			}
			/* The turn ends here; the next takes the rest. */
			if (accepts == LOOP_ACCEPT_TURN)
				break;
		}
		io_uring_cq_advance(&l->ring, seen);
		/* The turn's forwards go to the kernel ahead of its stream
		 * sends, then a bounded share of the stream reads (stream
		 * reads' completions wait in a queue, s_defer). */
		if (l->pend != TX_NONE)
			ur_tx_flush(l);
		ur_s_reads(l, now);
		loop_turn_end(&l->b);
	}
	return 0;
}

static void ur_flush(struct loop *l)
{
	uint64_t until = loop_now() + LOOP_FLUSH_MS * NS_PER_MS;

	if (l->pend != TX_NONE)
		ur_tx_flush(l);
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
				ur_on_send(l, cqe);
			} else if (UD_OP(cqe->user_data) == OP_SSEND) {
				ur_on_ssend(l, cqe);
			} else if (UD_OP(cqe->user_data) == OP_SRECV &&
				   (cqe->flags & IORING_CQE_F_BUFFER)) {
				/* Dropped, like datagrams. */
				ur_s_took(l, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
				chunk_take(&l->b, cqe->flags >> IORING_CQE_BUFFER_SHIFT, CH_USER);
				chunk_put(&l->b, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
			} else if (UD_OP(cqe->user_data) == OP_RECV &&
				   (cqe->flags & IORING_CQE_F_BUFFER)) {
				unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;

				/* Dropped: nobody reads any more. */
				l->free_bufs--;
				if (l->ref[bid] == 0)
					ur_buf_recycle(l, bid);
			}
		}
		io_uring_cq_advance(&l->ring, seen);
		if (l->pend != TX_NONE)
			ur_tx_flush(l);
	}
}

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
