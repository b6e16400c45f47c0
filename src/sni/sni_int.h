/* SPDX-License-Identifier: ISC */
/* What the files of the SNI listener share and nothing outside src/sni/
 * reads: a connection (struct sni_conn), its states and refs, and the
 * functions one file offers the others. The files from the bottom up, each
 * calling only those before it: sni_conn.c (a connection's slot, reads,
 * source caps and ends), sni_preread.c (accept, the ClientHello, its
 * route, the connect), sni_relay.c (the upstream's answer on: both ways,
 * the loop's events), and sni_listener.c on top. sni.h is the face. */
#ifndef ETR_SNI_INT_H
#define ETR_SNI_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "endpoint.h"
#include "ref.h"
#include "sni.h"

/* A refused connection's linger: at most this long and this many chunks. */
#define SNI_LINGER	  (2 * NS_PER_SEC)
#define SNI_LINGER_CHUNKS 64
/* Chunks of one direction in flight at once (read, not yet all sent): 2
 * is a read-ahead of one, so the next chunk is read while the last one is
 * sent; 4 * LOOP_STREAM_CHUNK (4 * 64 KiB) per connection while both
 * directions stream. */
#define SNI_AHEAD 2
/* send-timeout while the worker's stream pool runs short (an eighth of it
 * free outside the reserve), when that is shorter; and how often a side
 * with chunks in flight is looked at, so that the shorter limit applies
 * soon after the pool runs short. */
#define SNI_PRESSED (5 * NS_PER_SEC)
/* A spliced direction's pipe (F_SETPIPE_SZ): what it may hold in the
 * kernel, and the most one splice moves. 128 KiB (32 pages: a socket
 * fills a pipe by pages) rather than the default 64 KiB: bench/compare-sni
 * on a loaded 2-CPU host, CPU per GB against the copy, 1 and 100
 * connections: 64 KiB 0.80 and 1.23, 128 KiB 0.77 and 0.84, 256 KiB 0.58
 * and 0.45; 256 KiB would let an unprivileged user's default
 * pipe-user-pages-soft (16384 pages) hold only 128 connections' pipes. */
#define SNI_PIPE_SIZE 131072
/* How long a connection woken into a place of its source (sni_pin.h)
 * keeps it while its reads bring nothing; then the place goes to the
 * next in the source's queue, its reads staying out. A read with bytes
 * waiting completes within a loop turn; an idle one held the place for
 * SNI_PRESSED before, and one address's idle connections (a NAT's, or
 * bench/compare-sni's 2000) queued the others' first bytes for seconds. */
#define SNI_WOKEN_HOLD (100 * NS_PER_MS)
/* Connections one returned chunk may wake (sni_pin_put). */
#define SNI_WAKE_MAX 64
/* A connection ref: index (16 bits), generation (7), side (1). */
#define SNI_IDX_BITS 16
#define SNI_IDX_MASK ((1u << SNI_IDX_BITS) - 1)
#define SNI_GEN_BITS 7
#define SNI_SIDE_BIT (1u << (SNI_IDX_BITS + SNI_GEN_BITS))
#define SNI_NONE     UINT32_MAX
/* The listening socket's ref: an index no connection has. */
#define SNI_LISTEN_REF SNI_IDX_MASK

_Static_assert(CONF_SNI_CONNECTIONS_LIMIT + CONF_SNI_CONNECTIONS_LIMIT / 4 + 16 <= SNI_IDX_MASK,
	       "connection index bits");
_Static_assert(REF_FITS(SNI_IDX_BITS, SNI_GEN_BITS + 1, ENDPOINT_REF_BITS), "ref layout");

/* A connection's states, each with its deadline set where it is entered:
 *   PREREAD    reading the ClientHello               preread-timeout
 *   CONNECTING connect to the route's upstream       connect-timeout
 *   SENDPRE    header and preread bytes to upstream  idle-timeout
 *   SPLICE     both ways                              idle-timeout
 *   LINGER     refused: our side shut, the client's bytes read and dropped
 *              until its EOF, so that the close is a FIN and not a reset
 *                                                      SNI_LINGER
 *   GONE       closed while the loop still sends from its preread buffer:
 *              the slot and the buffer wait for that send's on_sent
 */
enum { C_FREE, C_PREREAD, C_CONNECTING, C_SENDPRE, C_SPLICE, C_LINGER, C_GONE };
enum { SIDE_C = 0, SIDE_U = 1 };
/* Per direction, indexed by the side read from. */
#define D_READING 1u  /* a stream_read is out on this side */
#define D_EOF	  2u  /* it shut its side (no more reads) */
#define D_SHUT	  4u  /* and we shut the other's write side, all sent */
#define D_DEFER	  8u  /* its bulk read waits: its source holds its cap of chunks */
#define D_DATA	  16u /* it sent at least one byte */

struct sni_conn {
	uint8_t state, gen;
	uint8_t dir[2];
	uint8_t ahead[2]; /* chunks in flight (<= SNI_AHEAD), by side read from */
	bool counted, ip_counted, in_preread, proxy;
	bool pre_sending; /* the loop sends from pre until its on_sent */
	bool spliced;	  /* its directions go through pipe[] (splice yes) */
	int fd[2];
	int pipe[2][2]; /* by side read from: read end, write end; -1 none */
	uint32_t next_free;
	uint32_t pre_prev, pre_next; /* the prereads, oldest first, while in_preread */
	uint32_t fwd_len[2];	     /* bytes in flight, by side read from */
	uint32_t linger_chunks;
	union etr_sockaddr peer, upstream;
	struct timer timer;
	uint64_t start, last;
	uint64_t moved[2]; /* a direction's last progress (chunks in flight), by side read from */
	/* Preread bytes at pre + PROXY_V2_MAX (the header goes in front);
	 * pre_off..pre_end is what is left to send upstream. */
	uint8_t *pre;
	uint32_t pre_len, pre_cap, pre_off, pre_end;
	struct tls_hello hello;
};

#define SNI_ADD(field, n) atomic_fetch_add_explicit(&(field), (n), memory_order_relaxed)
#define SNI_SUB(field, n) atomic_fetch_sub_explicit(&(field), (n), memory_order_relaxed)

/* c's index in the listener's table. */
static inline uint32_t sni_conn_idx(const struct sni_listener *l, const struct sni_conn *c)
{
	return (uint32_t)(c - l->conns);
}

/* The loop id of c's side (SIDE_C, SIDE_U) in its current life. */
static inline uint32_t sni_conn_id(const struct sni_listener *l, const struct sni_conn *c, int side)
{
	uint32_t ref = ref_pack(sni_conn_idx(l, c), SNI_IDX_BITS, c->gen, SNI_GEN_BITS) |
		       (side == SIDE_U ? SNI_SIDE_BIT : 0);

	return endpoint_ref_id(l->slot_conns, ref);
}

/* The live connection a loop ref names (the side in *side), NULL: gone. */
static inline struct sni_conn *sni_conn_deref(struct sni_listener *l, uint32_t ref, int *side)
{
	uint32_t i = ref_idx(ref, SNI_IDX_BITS);
	struct sni_conn *c;

	if (i >= l->nconns)
		return NULL;
	c = &l->conns[i];
	if (c->state == C_FREE || !ref_gen_ok(ref, SNI_IDX_BITS, SNI_GEN_BITS, c->gen))
		return NULL;
	*side = ref & SNI_SIDE_BIT ? SIDE_U : SIDE_C;
	return c;
}

/* Whether the process drains (its lifecycle, read now: not a copy). */
static inline bool sni_draining(const struct sni_listener *l)
{
	return l->all->lifecycle && atomic_load_explicit(l->all->lifecycle, memory_order_relaxed);
}

/* sni_conn.c: a connection's slot, its reads and the source caps, its ends */

/* Set c's timer to at. */
void sni_conn_arm(struct sni_listener *l, struct sni_conn *c, uint64_t at);
/* Ask the loop for side's next bytes (a preread, a linger). */
int sni_conn_read(struct sni_listener *l, struct sni_conn *c, int side);
/* Side's next read of the splice (a bulk one, or deferred while its
 * source holds its cap of chunks). */
int sni_conn_splice_read(struct sni_listener *l, struct sni_conn *c, int side);
/* Connection i, whose source got a chunk back (or that waited long),
 * reads its waiting sides. */
void sni_conn_pin_wake(struct sni_listener *l, uint32_t i);
/* c's source gave n chunks back: wake who waits for them. */
void sni_conn_pin_gave(struct sni_listener *l, struct sni_conn *c, unsigned n);
/* Free c's preread buffer. */
void sni_conn_free_pre(struct sni_listener *l, struct sni_conn *c);
/* Into the listener's prereads (false past max-preread), and out. */
bool sni_conn_preread_enter(struct sni_listener *l, struct sni_conn *c);
void sni_conn_preread_leave(struct sni_listener *l, struct sni_conn *c);
/* Close c's pipes (it copies from now on). */
void sni_conn_pipes_close(struct sni_conn *c);
/* The one way a connection's slot is freed. */
void sni_conn_free(struct sni_listener *l, struct sni_conn *c);
/* A free slot for accepted fd, in PREREAD; NULL: none. */
struct sni_conn *sni_conn_alloc(struct sni_listener *l, int fd, uint64_t now);
/* A spliced connection ends, counted by why (a reset passed on as one). */
void sni_conn_end(struct sni_listener *l, struct sni_conn *c, enum sni_end why);
/* The preread's time counted; and the preread over (timed, unless it
 * ended already) and out of the prereads. */
void sni_conn_preread_timed(struct sni_listener *l, struct sni_conn *c);
void sni_conn_preread_done(struct sni_listener *l, struct sni_conn *c);
/* Refuse without a byte: at once (a reset), or lingering until the
 * client's EOF. */
void sni_conn_refuse_now(struct sni_listener *l, struct sni_conn *c, enum sni_result why);
void sni_conn_refuse(struct sni_listener *l, struct sni_conn *c, enum sni_result why, uint64_t now);

/* sni_preread.c: accept, the ClientHello, its route, the connect */

/* A chunk of the ClientHello (side SIDE_C, state C_PREREAD). */
void sni_preread(struct sni_listener *l, struct sni_conn *c, struct loop_dgram *d);
/* The loop's callback: a new connection on the listening socket. */
void sni_preread_accept(void *obj, uint32_t ref, int fd);

/* sni_relay.c: from the upstream's answer on, and the loop's events */

/* The loop's callbacks on the connections' endpoint: bytes of a side, a
 * send done, a read error, the upstream's connect done, the timer. */
void sni_relay_stream(void *obj, uint32_t ref, struct loop_dgram *d);
void sni_relay_sent(void *obj, uint32_t ref, int res);
void sni_relay_recv_error(void *obj, uint32_t ref, int err);
void sni_relay_connected(void *obj, uint32_t ref, int res);
void sni_relay_timer(void *obj, uint32_t ref, uint64_t now);

#endif
