/* SPDX-License-Identifier: ISC */
/* The io_uring backend's insides, shared by its files: the ring's sizes,
 * user_data, struct loop, and what one file calls in another
 * (loop_uring.c: ring, turn, timer; loop_uring_dgram.c: datagrams;
 * loop_uring_stream.c: streams and splices). Only those include it. */
#ifndef ETR_LOOP_URING_INT_H
#define ETR_LOOP_URING_INT_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>

#include "addr.h"
#include "loop.h"
#include "loop_common.h"

#define UR_ENTRIES    4096
#define UR_CQ_ENTRIES 16384
#define UR_NBUFS      512 /* power of two: the ring's mask */
#define UR_COPY	      128 /* buffers for copied sends, after the ring's */
#define UR_NTX	      (UR_NBUFS + UR_COPY)
#define UR_BGID	      0
/* Stream reads (their completions: a chunk of 64 KiB copied, or a pipe's
 * worth spliced) handed up in one turn, after the turn's datagrams; the
 * rest wait, in completion order, for the next turns. Each one handed up
 * is a send and a read more in the next submit: unbounded, 96 bulk SNI
 * uploads from 24 addresses made submits of 128 requests ahead of the
 * game's forwards (attack round 14; a player's median 0.4 -> 18-31 ms). */
#define UR_TURN_READS 8
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
	/* Streams whose read completed, waiting for their turn: slots, oldest
	 * first, chained by cnext (a stream has one read at a time). */
	uint32_t rq_head, rq_tail;
};

/* A free SQE, submitting what is queued when the SQ is full; NULL if none. */
static inline struct io_uring_sqe *ur_sqe_get(struct loop *l)
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

/* Datagrams (loop_uring_dgram.c). Buffer bid goes back to the ring. */
void ur_buf_recycle(struct loop *l, unsigned bid);
/* Watch fd for id: a multishot poll. 0 or -EBUSY. */
int ur_arm_poll(struct loop *l, int fd, uint32_t id);
/* Queue the gathered tx (l->pend) as one sendmsg SQE. */
void ur_tx_flush(struct loop *l);
/* Re-arm the receives that stopped for want of buffers. */
void ur_unstall(struct loop *l);
/* A datagram receive's / send's completion. */
void ur_on_recv(struct loop *l, struct io_uring_cqe *cqe, uint64_t now);
void ur_on_send(struct loop *l, struct io_uring_cqe *cqe);
/* The datagram ops of loop_uring_ops. */
int ur_add_socket(struct loop *l, int fd, uint32_t id);
int ur_watch(struct loop *l, int fd, uint32_t id);
int ur_forward(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
	       struct loop_dgram *d, uint32_t id);
int ur_send(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen, const void *buf,
	    size_t len, uint32_t id);

/* Streams (loop_uring_stream.c). The kernel took read chunk c. */
void ur_s_took(struct loop *l, uint32_t c);
/* Reads waiting for a chunk go on, as many as chunks are free. */
void ur_s_unstall(struct loop *l);
/* A stream send's completion / any stream op's completion. */
void ur_on_ssend(struct loop *l, struct io_uring_cqe *cqe);
void ur_on_stream_cqe(struct loop *l, struct io_uring_cqe *cqe, uint64_t now);
/* The waiting reads' completions handed up, oldest first, until
 * UR_TURN_READS of them brought bytes. */
void ur_s_reads(struct loop *l, uint64_t now);
/* This backend's part of the stream ops (loop_common.h). */
extern const struct loop_stream_ops ur_stream_ops;

#endif
