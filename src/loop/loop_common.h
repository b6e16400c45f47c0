/* SPDX-License-Identifier: ISC */
/* What both backends do the same way: the state every loop starts with
 * (handler, fd table, counters, timers), handing a received buffer up as
 * the datagrams it holds, the wake-up deadline, the timers that are due at
 * the end of a turn, and what a refused GSO train teaches a socket. Only
 * loop_uring.c and loop_epoll.c include it. */
#ifndef ETR_LOOP_COMMON_H
#define ETR_LOOP_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "loop.h"
#include "loop_fdtab.h"
#include "loop_gso.h"
#include "stats.h"
#include "timers.h"

struct loop_streams;
struct loop_stream_ops;

/* The first member of each backend's struct loop. */
struct loop_base {
	struct loop_handler h;
	struct fdtab fds;
	struct timers timers;
	struct loop_stats st;
	uint64_t armed; /* the wake-up the backend has set, UINT64_MAX for none */
	bool stop;
	bool taken;			  /* the datagram in on_dgram was forwarded */
	bool gro;			  /* --gso and a kernel with it: trains both ways */
	unsigned stream_chunks;		  /* the stream read pool's size (loop_conf) */
	struct loop_streams *sx;	  /* NULL until the first stream op */
	const struct loop_stream_ops *so; /* the backend's part of the stream ops */
	/* Listeners paused for want of fds (LOOP_ACCEPT_PAUSE_MS): each
	 * is taken up again (so->resume) when this is due. */
	struct timer accept_timer;
};

static inline struct loop_base *loop_base(struct loop *l)
{
	return (struct loop_base *)(void *)l;
}

/* Fill b for handler h and conf c. Returns 0 or -ENOMEM. */
int loop_base_init(struct loop_base *b, const struct loop_handler *h, const struct loop_conf *c);
void loop_base_free(struct loop_base *b);

/* Hand up the buffer d describes (data, len, headroom in front of it,
 * from, truncated, bid, now): one datagram, or with a GRO size seg the
 * datagrams the train was made of. Only the first has d->headroom: the
 * bytes in front of a later one are its predecessor's, which may be queued
 * for sending already. Returns false when the socket was deleted meanwhile
 * (the rest of the train is dropped). */
bool loop_deliver(struct loop_base *b, int fd, uint32_t id, const struct loop_dgram *d, size_t seg);

/* The earliest timer, to wake up at, when it is earlier than the one armed
 * (the backend arms it and sets b->armed), else false. Deadlines that move
 * later are not re-armed: an early wake-up costs one idle turn, re-arming
 * on every packet a syscall or two SQEs each. */
bool loop_wake_earlier(struct loop_base *b, uint64_t *at);

/* An accept failed with err (-errno): true when its listener is to pause
 * (out of fds or memory; counted, accept_timer armed), false when the
 * backend goes on as before. */
bool loop_accept_pause(struct loop_base *b, int err);

/* The end of a loop turn: every timer due, in deadline order (at most as
 * many as were armed: one re-armed into the past may wait for the next
 * turn). */
void loop_turn_end(struct loop_base *b);

/* A train of segment size seg on fd was refused with -err: count it and
 * lower what the socket's trains may carry (gso_refused). */
void loop_train_refused(struct loop_base *b, int fd, uint16_t seg, int err);

/* A train of n > 1 datagrams is leaving. */
static inline void loop_train_counted(struct loop_base *b, unsigned n)
{
	STAT_ADD(b->st.gso_trains, 1);
	STAT_ADD(b->st.gso_datagrams, n);
}

/* Can a send of len copied bytes be taken at all? 0 or -EMSGSIZE. */
static inline int loop_copy_check(size_t len)
{
	return len > LOOP_MAX_DGRAM ? -EMSGSIZE : 0;
}

/* Streams: state both backends keep the same way. A stream is a slot
 * (fd, what is armed, its send queue); a chunk is LOOP_STREAM_CHUNK bytes
 * of the pool with LOOP_HEADROOM in front. Entries [0, nread) of c are the
 * read pool's chunks; the rest, a table that grows (never shrinks) as
 * more are pending at once, describe stream_send's sends of the caller's
 * own bytes. A send waits in its entry: the queue of a stream and the list
 * of finished sends chain entries. */
#define LOOP_STREAM_USER_MIN 64 /* the user send table's first size */
#define STREAM_STRIDE	     (LOOP_HEADROOM + LOOP_STREAM_CHUNK)
#define STREAM_NONE	     UINT32_MAX

enum {
	SF_ACCEPT = 1,	/* listening: accept armed */
	SF_READ = 2,	/* one read asked for */
	SF_CONNECT = 4, /* connect under way */
	SF_STALLED = 8, /* the read waits for a free chunk */
	SF_DEAD = 16,	/* del_socket came: nothing more on fd */
	SF_PAUSED = 32, /* listening, paused: out of fds (loop_accept_pause) */
	SF_MORE = 64,	/* epoll: the last read filled its chunk, more is likely there */
	SF_EOF = 128,	/* epoll: the peer's FIN came and a read emptied the socket */
};

enum { CH_FREE, CH_KERNEL, CH_USER, CH_SEND };

struct lstream {
	int fd;
	uint32_t slot, gen; /* gen: bumped when the slot is taken again */
	uint8_t flags;
	uint8_t inflight;  /* io_uring: requests the kernel holds */
	uint32_t events;   /* epoll: the interest registered, 0 for none */
	bool bulk;	   /* the read asked for is stream_read_bulk's */
	int pipe;	   /* epoll: the read is stream_splice_in's, into this pipe; else -1 */
	uint32_t pipe_len; /* the most it moves */
	uint8_t group;	   /* io_uring: the buffer group the read is armed on */
	int conn_res;	   /* epoll: connect(2)'s own answer when not EINPROGRESS */
	uint32_t acc_id, read_id, conn_id;
	uint32_t qhead, qtail;	/* sends, oldest first (chunks) */
	uint32_t next;		/* free slots */
	union etr_sockaddr dst; /* the connect's address, alive until it ends */
	/* io_uring: the read's completion, waiting for its turn (ur_s_reads):
	 * its result, its chunk (or STREAM_NONE), the next stream waiting. */
	int cres;
	uint32_t cchunk, cnext;
};

struct lchunk {
	uint32_t next;	     /* in a send queue or the finished list */
	const uint8_t *data; /* a send's bytes: in the chunk, or the caller's */
	int pipe;	     /* or -1; stream_splice_out's: its bytes wait in this pipe */
	uint32_t len, done;
	uint32_t id;
	int res;
	uint8_t state;
};

struct loop_streams {
	uint8_t *arena;
	unsigned nread, nuser; /* c holds nread + nuser entries */
	unsigned nreserve;     /* the last nreserve read chunks: LOOP_STREAM_RESERVE */
	struct lchunk *c;
	uint32_t *rfree, *ufree; /* free read chunks (epoll), free user sends */
	unsigned nrfree, nufree;
	unsigned inuse;
	struct lstream **sv; /* by slot */
	unsigned ns, scap;
	uint32_t sfree; /* free slot list */
	uint32_t *byfd; /* slot + 1 per fd, 0 for none */
	unsigned nfd;
	uint32_t *stalled; /* slots whose read waits for a chunk, oldest first */
	unsigned nstalled, stcap;
	uint32_t done_head, done_tail; /* finished sends waiting for on_sent */
	/* The backend takes a read chunk back (ring or free list). */
	void (*recycle)(struct loop *l, uint32_t c);
};

/* Set up the stream pool on first use; 0 or -ENOMEM. */
int streams_ready(struct loop_base *b, void (*recycle)(struct loop *l, uint32_t c));
void streams_free(struct loop_base *b);

/* The stream on fd (NULL: none), or a new one for fd (NULL: no memory). */
struct lstream *stream_at(const struct loop_base *b, int fd);
struct lstream *stream_open(struct loop_base *b, int fd);
/* Give the slot back (nothing of it left in the kernel). */
void stream_close(struct loop_base *b, struct lstream *s);
/* del_socket's part: fd forgets the stream, the read stops waiting. */
void stream_detach(struct loop_base *b, struct lstream *s);

static inline uint8_t *chunk_base(const struct loop_streams *x, uint32_t c)
{
	return x->arena + (size_t)c * STREAM_STRIDE;
}

/* Read chunk c leaves the pool (state st) / comes back to it; a user
 * send's entry comes back to its table. */
void chunk_take(struct loop_base *b, uint32_t c, uint8_t st);
void chunk_put(struct loop_base *b, uint32_t c);

/* An entry for a send of the caller's len bytes at buf, sent from there
 * (no copy): 0, -EMSGSIZE over INT_MAX, or -ENOMEM when the table cannot
 * grow. Entries of c may move: hold no pointer into it across this. */
int stream_user(struct loop_base *b, const void *buf, size_t len, uint32_t *c);
/* The chunk d names when on_stream may hand it on, else -EINVAL. */
int stream_take(struct loop_base *b, const struct loop_dgram *d, uint32_t *c);

/* Append chunk c (bytes off..off+len of it, for id) to s's queue. */
void stream_enqueue(struct loop_base *b, struct lstream *s, uint32_t c, uint32_t id);
/* Take the oldest send off s's queue. */
uint32_t stream_dequeue(struct loop_base *b, struct lstream *s);
/* Send c finished with res: on_sent comes from streams_complete. */
void stream_finished(struct loop_base *b, uint32_t c, int res);
/* Every finished send: chunk back, then on_sent. */
void streams_complete(struct loop *l);

/* Hand up read chunk c of s (len bytes, 0 at EOF) as on_stream; the chunk
 * goes back unless it was forwarded. */
void stream_deliver(struct loop *l, struct lstream *s, uint32_t c, size_t len, uint64_t now);

/* s's read waits for a chunk / the oldest such stream (NULL: none); with
 * bulk false, the oldest whose read is not a bulk one (only the reserve
 * is free). */
void stream_stall(struct loop_base *b, struct lstream *s);
struct lstream *stream_unstall(struct loop_base *b, bool bulk);

/* What a backend does under the stream ops both share (loop_stream_*
 * below, straight in each backend's loop_ops). */
struct loop_stream_ops {
	/* Listener s (acc_id set, no accept armed): arm its accept,
	 * setting SF_ACCEPT. 0 or -errno (SF_ACCEPT not set). */
	int (*listen)(struct loop *l, struct lstream *s);
	/* Paused listener s (SF_PAUSED just cleared): accept again. */
	void (*resume)(struct loop *l, struct lstream *s);
	/* Connect s to dst (no connect under way) for id. 0 or -errno. */
	int (*connect)(struct loop *l, struct lstream *s, const struct sockaddr *dst,
		       socklen_t dstlen, uint32_t id);
	/* The stream pool (streams_ready) and what the backend keeps beside
	 * it, on first use: 0 or -errno. */
	int (*ready)(struct loop *l);
	/* s's read was asked for (SF_READ, read_id, bulk, pipe and pipe_len
	 * set): start it. 0, or -errno and SF_READ is taken back. */
	int (*read)(struct loop *l, struct lstream *s);
	/* Chunk c, a send for id, goes on s's queue: 0, or -errno and c is
	 * not queued (still the caller's). */
	int (*queue)(struct loop *l, struct lstream *s, uint32_t c, uint32_t id);
};

/* The stream on fd, made on first use (b->so->ready): NULL with *err. */
struct lstream *stream_get(struct loop *l, int fd, int *err);

/* The stream ops of loop.h, the same on both backends. */
int loop_stream_listen(struct loop *l, int fd, uint32_t id);
int loop_stream_connect(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
			uint32_t id);
int loop_stream_read(struct loop *l, int fd, uint32_t id);
int loop_stream_read_bulk(struct loop *l, int fd, uint32_t id);
int loop_stream_splice_in(struct loop *l, int fd, int pipe_w, size_t len, uint32_t id);
int loop_stream_forward(struct loop *l, int fd, struct loop_dgram *d, uint32_t id);
int loop_stream_send(struct loop *l, int fd, const void *buf, size_t len, uint32_t id);
int loop_stream_splice_out(struct loop *l, int fd, int pipe_r, size_t len, uint32_t id);

/* The ops every backend shares. */
int loop_common_timer_set(struct loop *l, struct timer *t, uint64_t at);
void loop_common_timer_cancel(struct loop *l, struct timer *t);
const struct loop_stats *loop_common_stats(const struct loop *l);
void loop_common_stop(struct loop *l);

/* The entries of a backend's loop_ops that are the same on both. */
#define LOOP_COMMON_OPS                                                                            \
	.timer_set = loop_common_timer_set, .timer_cancel = loop_common_timer_cancel,              \
	.stop = loop_common_stop, .stats = loop_common_stats, .listen = loop_stream_listen,        \
	.connect = loop_stream_connect, .stream_read = loop_stream_read,                           \
	.stream_read_bulk = loop_stream_read_bulk, .stream_forward = loop_stream_forward,          \
	.stream_send = loop_stream_send, .stream_splice_in = loop_stream_splice_in,                \
	.stream_splice_out = loop_stream_splice_out

#endif
