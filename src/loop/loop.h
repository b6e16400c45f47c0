/* SPDX-License-Identifier: ISC */
/* The event-loop interface: datagram sockets, sends of received or copied
 * bytes in one ordered path, timers, readable fds, and TCP streams. Nothing
 * above this header sees a CQE or an epoll_event. */
#ifndef ETR_LOOP_H
#define ETR_LOOP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "timers.h"

/* Largest datagram we accept; a read that does not fit is dropped. */
#define LOOP_MAX_DGRAM 65535

/* Bytes free in front of a received datagram (see loop_dgram.headroom):
 * room for TURN's 36-byte Data indication or 4-byte ChannelData header. */
#define LOOP_HEADROOM 64

struct loop;

/* One received datagram, valid only during the on_dgram callback. */
struct loop_dgram {
	const struct sockaddr *from; /* NULL on connected sockets */
	socklen_t fromlen;
	uint8_t *data;
	size_t len;
	/* Bytes in front of data that a layer may write into and forward with
	 * the datagram, without a copy (loop_dgram_prepend): at least
	 * LOOP_HEADROOM, but 0 for the second and later datagrams of a GRO
	 * train (their front is the previous datagram's end, which may be
	 * queued for sending already). */
	size_t headroom;
	bool truncated; /* did not fit LOOP_MAX_DGRAM: never forward it */
	uint32_t bid;	/* backend buffer id; opaque above the loop */
	uint64_t now;	/* CLOCK_MONOTONIC ns at the start of this loop turn */
};

/* Grow d by n bytes at the front, out of its headroom: the new start, to
 * be written by the caller, or NULL when there is not that much room. */
static inline uint8_t *loop_dgram_prepend(struct loop_dgram *d, size_t n)
{
	if (n > d->headroom)
		return NULL;
	d->data -= n;
	d->len += n;
	d->headroom -= n;
	return d->data;
}

/* What the loop tells the layer above. `id` is the value given to
 * loop_add_socket/loop_watch; the loop never interprets it. */
struct loop_handler {
	void *arg;
	/* A datagram arrived on socket `id`. */
	void (*on_dgram)(void *arg, uint32_t id, struct loop_dgram *d);
	/* A receive on socket `id` failed with -err (e.g. -ECONNREFUSED). */
	void (*on_recv_error)(void *arg, uint32_t id, int err);
	/* A send queued with forward or send for `id` finished with res (bytes
	 * or -errno). Called exactly once per accepted forward or send, also
	 * for sends nobody waits for (an id whose owner ignores it). */
	void (*on_sent)(void *arg, uint32_t id, int res);
	/* fd watched with loop_watch is readable. */
	void (*on_readable)(void *arg, uint32_t id);
	/* The timer t (armed with timer_set) is due: t->id is handed back.
	 * Called at the end of a loop turn, once per expiry; the timer is idle
	 * again and may be re-armed from here. */
	void (*on_timer)(void *arg, uint32_t id, uint64_t now);
	/* Streams (see "Streams" below). A connection arrived on listening
	 * socket id: fd is the new socket (non-blocking, close-on-exec, now
	 * the caller's), or -errno (EMFILE...; the listener stays armed). */
	void (*on_accept)(void *arg, uint32_t id, int fd);
	/* The connect on socket id finished: 0, or -errno. */
	void (*on_connected)(void *arg, uint32_t id, int res);
	/* The answer to one stream_read on socket id: d->from is NULL, d->len
	 * the bytes read (1..LOOP_STREAM_CHUNK), or 0 at EOF (the peer shut
	 * its side). An error (-ECONNRESET...) comes as on_recv_error. d's
	 * buffer goes back to the pool when this returns, unless it was
	 * handed to stream_forward. */
	void (*on_stream)(void *arg, uint32_t id, struct loop_dgram *d);
};

/* Written by the loop thread only, read by the ops thread (stats.h rules). */
struct loop_stats {
	_Atomic uint64_t recv_batches;	/* recvmmsg calls / recv CQEs handled */
	_Atomic uint64_t send_batches;	/* sendmmsg calls / io_uring_enter submits */
	_Atomic uint64_t nobufs;	/* times receive stalled for lack of buffers */
	_Atomic uint64_t send_failures; /* forwards that failed before reaching the kernel */
	_Atomic uint64_t copies;	/* sends of copied bytes accepted (loop ops send) */
	_Atomic uint64_t send_nobufs;	/* sends refused: no copy buffer or send slot free */
	_Atomic uint64_t gso_trains;	/* sends that carried more than one datagram */
	_Atomic uint64_t gso_datagrams; /* datagrams that left in those trains */
	_Atomic uint64_t gso_refused;	/* trains the kernel refused, resent one by one */
	/* Streams. */
	_Atomic uint64_t stream_chunks;	       /* stream chunks in use now (a gauge) */
	_Atomic uint64_t stream_chunks_peak;   /* the most ever in use at once */
	_Atomic uint64_t stream_stalls;	       /* stream reads that waited for a free chunk */
	_Atomic uint64_t stream_rx_bytes;      /* bytes handed up by on_stream */
	_Atomic uint64_t stream_tx_bytes;      /* bytes stream sends put with the kernel */
	_Atomic uint64_t accept_pauses;	       /* listeners paused: out of fds or memory */
	_Atomic uint64_t stream_pool;	       /* chunks in the stream pool (a constant) */
	_Atomic uint64_t stream_reserve;       /* of them, those bulk reads never take */
	_Atomic uint64_t stream_reserve_waits; /* bulk reads that waited: only the reserve free */
	_Atomic uint64_t stream_spliced;       /* bytes stream_splice_in moved into pipes */
};

struct loop_conf {
	unsigned max_sockets;	/* a hint: fd tables grow past it */
	bool gso;		/* gather runs to one destination into UDP GSO sends */
	unsigned stream_chunks; /* stream read pool; 0: LOOP_STREAM_CHUNKS (tests lower it) */
};

/* A backend: a const table chosen at run time. */
struct loop_ops {
	const char *name;
	/* Returns 0, or -errno with a reason in why[] (for the fallback log). */
	int (*create)(struct loop **lp, const struct loop_handler *h, const struct loop_conf *c,
		      char *why, size_t whylen);
	void (*destroy)(struct loop *l);
	/* Start receiving datagrams on non-blocking UDP socket fd. */
	int (*add_socket)(struct loop *l, int fd, uint32_t id);
	/* Stop receiving on fd (the caller closes it afterwards). */
	void (*del_socket)(struct loop *l, int fd, uint32_t id);
	/* Call on_readable(id) whenever fd is readable (eventfd, signalfd...). */
	int (*watch)(struct loop *l, int fd, uint32_t id);
	/* Send the received datagram d on fd, to dst (NULL when connected).
	 * The loop keeps d's buffer until the send completes and then calls
	 * on_sent(id). Returns 0 or -errno (then on_sent is not called).
	 * Sends leave in the order given, at the latest when the loop turn
	 * ends; runs to one destination may leave as one GSO train. */
	int (*forward)(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		       struct loop_dgram *d, uint32_t id);
	/* Send len bytes of buf on fd, to dst (NULL when connected): answers,
	 * probes, heartbeats, anything the loop did not receive. The bytes are
	 * copied into a buffer of the loop's, and the send joins the same
	 * ordered queue as forward (after forwards queued before it, in the
	 * same GSO trains), then on_sent(id) is called as for a forward.
	 * Returns 0; -EMSGSIZE over LOOP_MAX_DGRAM; -ENOBUFS when no copy
	 * buffer or send slot is free right now (counted in send_nobufs; the
	 * caller counts its own drop). Never blocks: the epoll backend sends
	 * what is queued early rather than refuse, io_uring refuses. */
	int (*send)(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		    const void *buf, size_t len, uint32_t id);
	/* Arm (or move) timer t for at (CLOCK_MONOTONIC ns): on_timer(t->id)
	 * at the end of the first loop turn at or after it. t lives in the
	 * caller's object (timers.h; timer_init first). The loop sleeps until
	 * its earliest timer. 0 or -ENOMEM. */
	int (*timer_set)(struct loop *l, struct timer *t, uint64_t at);
	/* Disarm t (nothing if idle). Before freeing t's object. */
	void (*timer_cancel)(struct loop *l, struct timer *t);
	/* Run until loop_stop(); returns 0 or -errno. */
	int (*run)(struct loop *l);
	void (*stop)(struct loop *l);
	/* Outside run only (on the way out): send what is queued and wait, at
	 * most LOOP_FLUSH_MS, for those sends to finish, calling on_sent for
	 * each. Datagrams that arrive meanwhile are dropped. Stream sends:
	 * io_uring waits for them too; epoll gives on_sent for those already
	 * done and leaves a tail the socket did not take (del_socket ends it). */
	void (*flush)(struct loop *l);
	/* The loop's counters; the pointer stays valid until destroy. */
	const struct loop_stats *(*stats)(const struct loop *l);

	/* Streams: see below. Each returns 0 or -errno (then no callback
	 * follows). */
	int (*listen)(struct loop *l, int fd, uint32_t id);
	int (*connect)(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
		       uint32_t id);
	int (*stream_read)(struct loop *l, int fd, uint32_t id);
	int (*stream_read_bulk)(struct loop *l, int fd, uint32_t id);
	int (*stream_forward)(struct loop *l, int fd, struct loop_dgram *d, uint32_t id);
	int (*stream_send)(struct loop *l, int fd, const void *buf, size_t len, uint32_t id);
	/* Splices (below): NULL in a backend without them. */
	int (*stream_splice_in)(struct loop *l, int fd, int pipe_w, size_t len, uint32_t id);
	int (*stream_splice_out)(struct loop *l, int fd, int pipe_r, size_t len, uint32_t id);
};

/* A listener whose accept fails for want of fds or memory (EMFILE,
 * ENFILE, ENOBUFS, ENOMEM) stops accepting this long, counted in
 * accept_pauses (the connections wait in its backlog), rather than retry
 * at once and spin until fds come back; nginx's accept disable. */
#define LOOP_ACCEPT_PAUSE_MS 100

/* New connections a loop turn takes, in all (io_uring) or per listener
 * (epoll), before the turn ends: its sends go out and its timers run, and
 * the next turn takes the rest. Each costs the thread the game shares an
 * accept, a preread buffer and often an eviction's close (about 25 us):
 * 256 at once held the game's answers for 6 ms under an SNI churn. */
#define LOOP_ACCEPT_TURN 32

/* How long flush may wait for the kernel. */
#define LOOP_FLUSH_MS 1000

/* Streams (TCP): what a splicing relay needs, no more.
 *
 *   listen(l, fd, id)    fd is a non-blocking socket already listen()ing:
 *                        on_accept(id, newfd) per connection (io_uring: a
 *                        multishot accept; epoll: accept4 until EAGAIN;
 *                        LOOP_ACCEPT_TURN a turn, the rest the next);
 *                        out of fds, on_accept(id, -EMFILE...) once and a
 *                        pause of LOOP_ACCEPT_PAUSE_MS.
 *   connect(l, fd, dst, dstlen, id)  start a connect on non-blocking fd
 *                        (the loop keeps its own copy of dst):
 *                        on_connected(id, 0 or -errno) once.
 *   stream_read(l, fd, id)  ONE receive: exactly one on_stream (bytes or
 *                        EOF) or on_recv_error follows; nothing more is
 *                        read from fd until the caller asks again. That is
 *                        the back-pressure: a relay asks for more of one
 *                        side only while few of its chunks are on their way
 *                        through the other (the SNI relay: fewer than two,
 *                        a read-ahead of one). stream_read may be asked
 *                        again as soon as its on_stream came (from inside
 *                        it too), before that chunk's forward got its
 *                        on_sent: the fd's send queue keeps the order.
 *                        The bytes land in a buffer of the
 *                        loop's stream pool, taken only when data is there
 *                        (io_uring: a provided-buffer ring of its own, so
 *                        streams never starve the datagram sockets; a
 *                        one-shot recv with buffer select, because a
 *                        multishot recv cannot be paused without a cancel
 *                        that races with data already on its way, and the
 *                        per-connection bound would be lost). An idle
 *                        connection holds no buffer.
 *   stream_read_bulk(l, fd, id)  the same, for bytes a relay passes on
 *                        (spliced data, which a peer that stops reading
 *                        can pin): it never takes the pool's reserve
 *                        (LOOP_STREAM_RESERVE), and waits, counted in
 *                        stream_reserve_waits, while only the reserve is
 *                        free. stream_read (a ClientHello, a TURN frame)
 *                        takes any free chunk, the reserve last: a pool
 *                        pinned by bulk data still reads those.
 *   stream_forward(l, fd, d, id)  send all of d (received by on_stream, of
 *                        any stream) on fd, without a copy: the loop keeps
 *                        d's buffer, resends the unsent tail of a short
 *                        write, and calls on_sent(id, d->len or -errno)
 *                        once, when the last byte is with the kernel.
 *                        d is the one on_stream handed over, forwarded
 *                        from inside that callback (else -EINVAL; so is
 *                        an EOF's d, which may hold no chunk).
 *   stream_send(l, fd, buf, len, id)  the same for len bytes of the
 *                        caller's (len <= INT_MAX, else -EMSGSIZE), sent
 *                        from buf itself: the loop copies nothing, so the
 *                        send needs no buffer of the loop's and is never
 *                        refused for want of one. buf must stay valid and
 *                        unchanged until on_sent(id), also after a
 *                        del_socket (whose on_sent comes later). Only
 *                        -ENOMEM, when the loop's table of pending sends
 *                        (grown as needed, never shrunk) cannot grow.
 *                        Sends on one fd leave in the order given: one at
 *                        a time, the next when the one before is all with
 *                        the kernel. on_sent never comes from inside the
 *                        op that queued the send.
 *   del_socket(l, fd, id)  as for datagram sockets: whatever is pending on
 *                        fd is cancelled. A send cancelled so still gets
 *                        its on_sent, after del_socket returns: its length
 *                        if it got out whole, else -ECANCELED. A read,
 *                        accept or connect gets no callback (a connection
 *                        accepted meanwhile is closed by the loop). After
 *                        it returns, the loop issues nothing more on fd.
 *                        A connection (not a listener) must then be
 *                        closed at once, and that close(2) must be the
 *                        socket's last reference (no dup, no child
 *                        holding it): epoll lets go of it only then (no
 *                        EPOLL_CTL_DEL, one syscall per socket saved);
 *                        a socket left open stays in its set, and its
 *                        events would wake the loop for nothing.
 *
 * listen, connect and stream_read return -EALREADY while the same is
 * pending on fd. The loop knows a stream by its fd: every op of one
 * connection names the same fd, and del_socket ends them all.
 *
 * Half-close is the caller's shutdown(fd, SHUT_WR) once the last on_sent of
 * that side came back (nothing is queued then); close is del_socket and
 * close(2). A connection's memory in the loop is thus what its relay lets
 * be in flight: the SNI relay's two chunks per direction, 4 *
 * LOOP_STREAM_CHUNK (256 KiB) while both sides stream. */
/* Splices (splice(2), zero-copy; NULL ops in a backend without them):
 *
 *   stream_splice_in(l, fd, pipe_w, len, id)  stream_read_bulk's twin
 *                        whose bytes go from socket fd into the caller's
 *                        pipe (write end pipe_w, non-blocking), at most
 *                        len, without a chunk: on_stream(id, d) with d->len
 *                        the bytes now in the pipe (0 at EOF) and d->data
 *                        pointing at nothing (d cannot be forwarded); an
 *                        error as on_recv_error. Ask only with the pipe
 *                        empty: a socket fills a pipe by pages, not bytes,
 *                        so a pipe that holds bytes may be full below its
 *                        size, and that is told apart from an empty
 *                        socket only so.
 *   stream_splice_out(l, fd, pipe_r, len, id)  stream_send's twin for len
 *                        bytes waiting in the pipe (read end pipe_r): the
 *                        same queue, order, on_sent and cancel.
 * The pipes are the caller's (open until the sends' on_sent, or until
 * del_socket of fd returned). A connection's memory in the kernel is then
 * its pipes' size (F_SETPIPE_SZ), no chunk of the pool. */
#define LOOP_STREAM_CHUNK 65536
/* Stream chunks per loop (the pool, 16 MiB of address space, touched as
 * used; a read waits while none is free, counted in stream_stalls, and
 * goes on when one comes back). 64 KiB rather than the 16 KiB of HAProxy's
 * and nginx's buffers: a receive and a send per chunk are most of what a
 * spliced GB costs besides the kernel's copies (bench/results/sni.md). */
#define LOOP_STREAM_CHUNKS 256
/* The pool's reserve for stream_read: an eighth (32 chunks, 2 MiB, of the
 * default pool; none in a pool under 8 chunks). On io_uring it is a
 * provided-buffer ring of its own, which a read tries when the main one
 * is empty; on epoll a count of the free list. */
#define LOOP_STREAM_RESERVE(chunks) ((chunks) / 8)

extern const struct loop_ops loop_uring_ops;
extern const struct loop_ops loop_epoll_ops;

/* CLOCK_MONOTONIC in nanoseconds (timers.h's mono_ns). */
static inline uint64_t loop_now(void)
{
	return mono_ns();
}

#endif
