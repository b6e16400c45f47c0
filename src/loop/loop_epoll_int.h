/* SPDX-License-Identifier: ISC */
/* The epoll backend's insides, shared by its two files (loop_epoll.c:
 * setup, datagrams, the turn; loop_epoll_stream.c: streams and splices):
 * sizes, event tags, struct loop. Only those include it. */
#ifndef ETR_LOOP_EPOLL_INT_H
#define ETR_LOOP_EPOLL_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

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
/* Stream reads (a chunk each, 64 KiB at most, copied or spliced) in one
 * turn: half for the rounds above, the rest for the stream events, which
 * come after the turn's datagram sockets are drained; past it the rest
 * waits for the next turn (attack14: 20 bulk SNI uploads from one
 * address, 8 rounds of 64 streams before each epoll_wait, moved the game's
 * p50 from 0.3 to 170 ms). */
#define EP_TURN_READS 8
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
	unsigned turn_reads, read_limit; /* stream reads this turn, and up to */
	unsigned ev_turn;		 /* where the stream events' pass starts */

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
static inline uint64_t ev_data(int fd, uint32_t id, uint64_t flags)
{
	return flags | (uint64_t)(uint32_t)fd << 32 | id;
}

/* Streams (loop_epoll_stream.c). del_socket of stream s. */
void ep_s_cancel(struct loop *l, struct lstream *s);
/* The epoll event of a stream (u: its EV_STREAM data). */
void ep_s_event(struct loop *l, uint64_t u, uint32_t events, uint64_t now);
/* The reads asked for while their sockets likely had more, tried now. */
void ep_s_ready_reads(struct loop *l);
/* This backend's part of the stream ops (loop_common.h). */
extern const struct loop_stream_ops ep_stream_ops;

#endif
