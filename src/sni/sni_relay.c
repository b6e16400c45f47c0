/* SPDX-License-Identifier: ISC */
/* An SNI listener on one worker: accept, read the ClientHello (keeping its
 * bytes), route, connect, send a PROXY v2 header and the bytes read, then
 * splice both ways one chunk at a time; a refusal closes without a byte.
 *
 * A connection's states, each with its deadline set where it is entered:
 *   PREREAD    reading the ClientHello               preread-timeout
 *   CONNECTING connect to the route's upstream       connect-timeout
 *   SENDPRE    header and preread bytes to upstream  idle-timeout
 *   SPLICE     both ways                              idle-timeout
 *   LINGER     refused: our side shut, the client's bytes read and dropped
 *              until its EOF, so that the close is a FIN and not a reset
 *                                                      SNI_LINGER
 *   GONE       closed while the loop still sends from its preread buffer:
 *              the slot and the buffer wait for that send's on_sent
 * Back-pressure is the loop's one-shot stream_read: a side is read again
 * while fewer than SNI_AHEAD of its chunks are on their way through the
 * other (a read-ahead of one chunk, so that receive and send overlap), so
 * a connection holds at most SNI_AHEAD chunks per direction. A peer that
 * stops reading pins them; what bounds that (finding 1 of the attack round
 * on the stream pool):
 *   - spliced bytes are read with stream_read_bulk, which never takes the
 *     pool's reserve: prereads and TURN over TCP/TLS still read;
 *   - a source holds at most its cap of chunks (sni_pin.h), its further
 *     bulk reads wait for one of them to come back;
 *   - a side whose send makes no progress for send-timeout (SNI_PRESSED
 *     when the pool runs short) is reset, ended stalled.
 * A connection counts under max-preread until its upstream answered: what
 * it read holds its memory while it connects too.
 *
 * With `splice yes` (and a loop that splices) a spliced connection's bytes
 * take no chunk: per direction a pipe, socket to pipe to socket with
 * splice(2) (stream_splice_in/out), one pipe's worth at a time (the next
 * splice in once the pipe is empty, loop.h). What a peer that stops
 * reading pins is then its pipe (SNI_PIPE_SIZE) in the kernel, no chunk
 * of the pool, and the source caps have nothing to count; send-timeout
 * resets it as before. A connection whose pipes cannot be had (out of
 * descriptors, past max-spliced, or pipes of that size refused) copies. */
#include "sni.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "proxy_v2.h"
#include "sni_pin.h"

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
/* Connections one returned chunk may wake (sni_pin_put). */
#define SNI_WAKE_MAX 64
/* A connection ref: index (16 bits), generation (7), side (1). */
#define SNI_IDX_BITS 16
#define SNI_IDX_MASK ((1u << SNI_IDX_BITS) - 1)
#define SNI_GEN_BITS 7
#define SNI_SIDE_BIT (1u << (SNI_IDX_BITS + SNI_GEN_BITS))
#define SNI_NONE     UINT32_MAX
/* A preread this old has had its time for a hello: the first to give way
 * at max-preread (evict_one). */
#define SNI_PREREAD_STALE (1000 * NS_PER_MS)
/* The listening socket's ref: an index no connection has. */
#define SNI_LISTEN_REF SNI_IDX_MASK
/* The preread buffer: the most the reader consumes before answering, and
 * the rest of the chunk that ended the hello (0-RTT data may follow it). */
#define SNI_PRE_MAX (TLS_HELLO_WIRE_MAX(TLS_HELLO_CAP_DEFAULT) + LOOP_STREAM_CHUNK)

_Static_assert(CONF_SNI_CONNECTIONS_LIMIT + CONF_SNI_CONNECTIONS_LIMIT / 4 + 16 <= SNI_IDX_MASK,
	       "connection index bits");
_Static_assert(REF_FITS(SNI_IDX_BITS, SNI_GEN_BITS + 1, ENDPOINT_REF_BITS), "ref layout");

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

#define ADD(field, n) atomic_fetch_add_explicit(&(field), (n), memory_order_relaxed)
#define SUB(field, n) atomic_fetch_sub_explicit(&(field), (n), memory_order_relaxed)

static uint32_t idx_of(const struct sni_listener *l, const struct sni_conn *c)
{
	return (uint32_t)(c - l->conns);
}

static uint32_t conn_id(const struct sni_listener *l, const struct sni_conn *c, int side)
{
	uint32_t ref = ref_pack(idx_of(l, c), SNI_IDX_BITS, c->gen, SNI_GEN_BITS) |
		       (side == SIDE_U ? SNI_SIDE_BIT : 0);

	return endpoint_ref_id(l->slot_conns, ref);
}

static struct sni_conn *deref(struct sni_listener *l, uint32_t ref, int *side)
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

static bool draining(const struct sni_listener *l)
{
	return l->all->lifecycle && atomic_load_explicit(l->all->lifecycle, memory_order_relaxed);
}

static void arm(struct sni_listener *l, struct sni_conn *c, uint64_t at)
{
	if (l->ops->timer_set(l->loop, &c->timer, at) < 0)
		log_warnx("sni %s: timer: out of memory", l->conf->name);
}

static int read_side(struct sni_listener *l, struct sni_conn *c, int side)
{
	int rc = l->ops->stream_read(l->loop, c->fd[side], conn_id(l, c, side));

	if (rc == 0)
		c->dir[side] |= D_READING;
	return rc;
}

static void end(struct sni_listener *l, struct sni_conn *c, enum sni_end why);

/* Side s's next read of the splice: a bulk one (the pool's reserve is not
 * for it), unless the source holds its cap of chunks; then the connection
 * waits for one of them to come back (D_DEFER, woken by pin_gave). */
static int splice_read(struct sni_listener *l, struct sni_conn *c, int side)
{
	struct sni_pin_key k[SNI_PIN_KEYS];
	unsigned nk = sni_pin_keys(&c->peer, k);
	int rc;

	if (c->dir[side] & (D_READING | D_EOF | D_DEFER))
		return 0;
	if (c->spliced) {
		/* The next splice in once the pipe is empty (loop.h). */
		if (c->ahead[side])
			return 0;
		rc = l->ops->stream_splice_in(l->loop, c->fd[side], c->pipe[side][1], SNI_PIPE_SIZE,
					      conn_id(l, c, side));
		if (rc == 0)
			c->dir[side] |= D_READING;
		return rc;
	}
	if (!sni_pin_admit(&l->pin, k, nk, idx_of(l, c))) {
		uint64_t at = loop_now() + SNI_PRESSED;

		c->dir[side] |= D_DEFER;
		ADD(l->stats.deferred, 1);
		/* Tried again by conn_timer too, should no chunk come back. */
		if (timer_sooner(&c->timer, at))
			arm(l, c, at);
		return 0;
	}
	rc = (l->ops->stream_read_bulk ? l->ops->stream_read_bulk : l->ops->stream_read)(
	    l->loop, c->fd[side], conn_id(l, c, side));
	if (rc == 0)
		c->dir[side] |= D_READING;
	return rc;
}

/* A connection whose source got a chunk back (or that waited long) reads
 * its waiting sides. */
static void pin_wake(struct sni_listener *l, uint32_t i)
{
	struct sni_conn *c = &l->conns[i];
	uint64_t at = loop_now() + SNI_PRESSED;

	if (c->state != C_SPLICE)
		return;
	/* Its place goes at conn_timer if its read brings nothing by then. */
	if (sni_pin_woken(&l->pin, i) && timer_sooner(&c->timer, at))
		arm(l, c, at);
	for (int s = 0; s < 2; s++) {
		if (!(c->dir[s] & D_DEFER))
			continue;
		c->dir[s] &= (uint8_t)~D_DEFER;
		if (c->ahead[s] < SNI_AHEAD && splice_read(l, c, s) < 0) {
			end(l, c, SNI_END_RESET);
			return;
		}
	}
}

/* c's source took a chunk (its place, if it was woken into one). */
static void pin_took(struct sni_listener *l, struct sni_conn *c)
{
	struct sni_pin_key k[SNI_PIN_KEYS];

	sni_pin_take(&l->pin, k, sni_pin_keys(&c->peer, k), idx_of(l, c));
}

/* c's source gave n chunks back: wake who waits for them. */
static void pin_gave(struct sni_listener *l, struct sni_conn *c, unsigned n)
{
	struct sni_pin_key k[SNI_PIN_KEYS];
	unsigned nk = sni_pin_keys(&c->peer, k);

	while (n--) {
		uint32_t wake[SNI_WAKE_MAX];
		unsigned nw = sni_pin_put(&l->pin, k, nk, wake, SNI_WAKE_MAX);

		for (unsigned i = 0; i < nw; i++)
			pin_wake(l, wake[i]);
	}
}

/* c gives up the place it was woken into: who waits may have it. */
static void pin_let_go(struct sni_listener *l, struct sni_conn *c)
{
	struct sni_pin_key k[SNI_PIN_KEYS];
	uint32_t wake[SNI_WAKE_MAX];
	unsigned nw;

	if (!sni_pin_woken(&l->pin, idx_of(l, c)))
		return;
	sni_pin_keys(&c->peer, k);
	nw = sni_pin_release(&l->pin, k, idx_of(l, c), wake, SNI_WAKE_MAX);
	for (unsigned i = 0; i < nw; i++)
		pin_wake(l, wake[i]);
}

/* Whether the worker's stream pool runs short: less than an eighth of it
 * free outside the reserve. */
static bool pool_pressed(const struct sni_listener *l)
{
	uint64_t pool, used, res;

	if (!l->lst)
		return false;
	pool = atomic_load_explicit(&l->lst->stream_pool, memory_order_relaxed);
	res = atomic_load_explicit(&l->lst->stream_reserve, memory_order_relaxed);
	used = atomic_load_explicit(&l->lst->stream_chunks, memory_order_relaxed);
	return used + pool / 8 >= pool - res;
}

/* How long a side may take no spliced byte: send-timeout, SNI_PRESSED if
 * shorter while the pool runs short. */
static uint64_t send_limit(const struct sni_listener *l)
{
	uint64_t t = l->conf->send_timeout_ms * NS_PER_MS;

	return pool_pressed(l) && t > SNI_PRESSED ? SNI_PRESSED : t;
}

static void free_pre(struct sni_listener *l, struct sni_conn *c)
{
	if (!c->pre)
		return;
	SUB(l->stats.memory, (int64_t)(PROXY_V2_MAX + c->pre_cap));
	free(c->pre);
	c->pre = NULL;
	c->pre_len = c->pre_cap = c->pre_off = c->pre_end = 0;
}

/* Into the listener's prereads (the newest of its source) and their
 * shared count. */
static bool preread_enter(struct sni_listener *l, struct sni_conn *c)
{
	if (ADD(l->sh->preread, 1) >= l->conf->max_preread) {
		SUB(l->sh->preread, 1);
		return false;
	}
	c->in_preread = true;
	ADD(l->stats.preread, 1);
	srctab_join(&l->pre_src, idx_of(l, c), &c->peer);
	c->pre_next = SNI_NONE;
	c->pre_prev = l->pre_tail;
	if (l->pre_tail == SNI_NONE)
		l->pre_head = idx_of(l, c);
	else
		l->conns[l->pre_tail].pre_next = idx_of(l, c);
	l->pre_tail = idx_of(l, c);
	return true;
}

static void preread_leave(struct sni_listener *l, struct sni_conn *c)
{
	if (!c->in_preread)
		return;
	SUB(l->sh->preread, 1);
	SUB(l->stats.preread, 1);
	c->in_preread = false;
	srctab_leave(&l->pre_src, idx_of(l, c));
	if (c->pre_prev == SNI_NONE)
		l->pre_head = c->pre_next;
	else
		l->conns[c->pre_prev].pre_next = c->pre_next;
	if (c->pre_next == SNI_NONE)
		l->pre_tail = c->pre_prev;
	else
		l->conns[c->pre_next].pre_prev = c->pre_prev;
}

/* Give back what the connection holds of the caps; its source's count
 * only with ip (a lingering connection keeps it: one address cannot hold
 * more sockets, lingering or not, than max-connections-per-ip). */
static void uncount(struct sni_listener *l, struct sni_conn *c, bool ip)
{
	preread_leave(l, c);
	if (ip && c->ip_counted) {
		sni_shared_ip_put(l->sh, &c->peer);
		c->ip_counted = false;
	}
	if (c->counted) {
		SUB(l->sh->active, 1);
		SUB(l->stats.active, 1);
		c->counted = false;
	}
}

static void pipes_close(struct sni_conn *c)
{
	for (int s = 0; s < 2; s++)
		for (int e = 0; e < 2; e++)
			if (c->pipe[s][e] >= 0) {
				close(c->pipe[s][e]);
				c->pipe[s][e] = -1;
			}
	c->spliced = false;
}

/* Both directions' pipes, or none (then the connection copies). */
static bool pipes_open(struct sni_listener *l, struct sni_conn *c)
{
	for (int s = 0; s < 2; s++) {
		if (pipe2(c->pipe[s], O_NONBLOCK | O_CLOEXEC) < 0) {
			c->pipe[s][0] = c->pipe[s][1] = -1;
			log_debug("sni %s: pipe: %s, copying", l->conf->name, strerror(errno));
			pipes_close(c);
			return false;
		}
		/* Refused past the user's pipe-user-pages-soft (without
		 * CAP_SYS_RESOURCE), where new pipes get 2 pages: such a pipe
		 * would splice 8 KiB at a time, slower than the copy. */
		if (fcntl(c->pipe[s][1], F_SETPIPE_SZ, SNI_PIPE_SIZE) < 0) {
			log_debug("sni %s: F_SETPIPE_SZ: %s, copying", l->conf->name,
				  strerror(errno));
			pipes_close(c);
			return false;
		}
	}
	c->spliced = true;
	return true;
}

static void close_side(struct sni_listener *l, struct sni_conn *c, int side)
{
	if (c->fd[side] < 0)
		return;
	l->ops->del_socket(l->loop, c->fd[side], conn_id(l, c, side));
	close(c->fd[side]);
	c->fd[side] = -1;
	c->dir[side] = 0;
}

/* The one way a connection's slot is freed. */
static void conn_free(struct sni_listener *l, struct sni_conn *c)
{
	bool spliced = c->spliced;
	unsigned held = spliced ? 0 : (unsigned)c->ahead[0] + c->ahead[1];
	struct sni_pin_key k[SNI_PIN_KEYS];

	l->ops->timer_cancel(l->loop, &c->timer);
	close_side(l, c, SIDE_C);
	close_side(l, c, SIDE_U);
	/* After both del_sockets: the loop splices from them no more. */
	if (spliced) {
		SUB(l->stats.pipes, 2);
		SUB(l->sh->spliced, 1);
	}
	pipes_close(c);
	uncount(l, c, true);
	if (sni_pin_waiting(&l->pin, idx_of(l, c)) || sni_pin_woken(&l->pin, idx_of(l, c))) {
		sni_pin_keys(&c->peer, k);
		sni_pin_cancel(&l->pin, k, idx_of(l, c));
	}
	for (int s = 0; s < 2; s++) {
		if (!spliced) /* a pipe's bytes are the kernel's */
			SUB(l->stats.memory, (int64_t)c->fwd_len[s]);
		c->fwd_len[s] = 0;
		c->ahead[s] = 0;
	}
	/* Its chunks go back to the pool once their sends are cancelled:
	 * for its source they are back now. */
	if (held)
		pin_gave(l, c, held);
	if (c->state == C_LINGER) {
		SUB(l->stats.lingering, 1);
		SUB(l->sh->lingering, 1);
	}
	if (c->pre_sending) {
		/* stream_send sends from pre itself: it stays until that
		 * send's on_sent, which comes after del_socket too. */
		c->state = C_GONE;
		return;
	}
	free_pre(l, c);
	c->state = C_FREE;
	c->gen++;
	/* FIFO: a slot just freed is reused last, so its generation wraps
	 * only after many reuses. */
	c->next_free = SNI_NONE;
	if (l->free_head == SNI_NONE) {
		l->free_head = idx_of(l, c);
	} else {
		uint32_t *tail = &l->conns[l->free_tail].next_free;

		*tail = idx_of(l, c);
	}
	l->free_tail = idx_of(l, c);
}

static struct sni_conn *conn_alloc(struct sni_listener *l, int fd, uint64_t now)
{
	struct sni_conn *c;

	if (l->free_head == SNI_NONE)
		return NULL;
	c = &l->conns[l->free_head];
	l->free_head = c->next_free;
	c->state = C_PREREAD;
	c->dir[0] = c->dir[1] = 0;
	c->ahead[0] = c->ahead[1] = 0;
	c->counted = c->ip_counted = c->in_preread = c->proxy = c->pre_sending = false;
	c->spliced = false;
	c->fd[SIDE_C] = fd;
	c->fd[SIDE_U] = -1;
	c->fwd_len[0] = c->fwd_len[1] = 0;
	c->linger_chunks = 0;
	c->start = c->last = now;
	c->pre = NULL;
	c->pre_len = c->pre_cap = c->pre_off = c->pre_end = 0;
	timer_init(&c->timer, conn_id(l, c, SIDE_C));
	return c;
}

static void end(struct sni_listener *l, struct sni_conn *c, enum sni_end why)
{
	ADD(l->stats.ended[why], 1);
	/* A reset passes on as a reset: a client whose upstream reset
	 * mid-transfer must not read a clean end (a truncated download
	 * looking whole), nor the upstream a client's. */
	if (why == SNI_END_RESET || why == SNI_END_STALLED) {
		struct linger lg = {.l_onoff = 1, .l_linger = 0};

		for (int s = 0; s < 2; s++)
			if (c->fd[s] >= 0)
				setsockopt(c->fd[s], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	conn_free(l, c);
}

/* The preread's time, on the clock its start was read from (loop_now in
 * listen_accept): a loop turn's now is read before the turn's events, so
 * a read answered in its accept's turn would end before it started. */
static void preread_timed(struct sni_listener *l, struct sni_conn *c)
{
	uint64_t now = loop_now(), ns = now > c->start ? now - c->start : 0;

	ADD(l->stats.preread_ns, ns);
	ADD(l->stats.preread_count, 1);
	ADD(l->stats.preread_hist[sni_preread_bucket(ns)], 1);
}

/* The preread is over (timed, unless it ended already: a connecting
 * connection is still among the prereads) and leaves their list. */
static void preread_done(struct sni_listener *l, struct sni_conn *c)
{
	if (c->state == C_PREREAD)
		preread_timed(l, c);
	preread_leave(l, c);
}

/* Refuse at once: close without a byte and without a linger (a client
 * whose bytes arrived reads a reset). A refusal by a cap: it holds no
 * socket, so no address can fill the listener's slots with refusals. */
static void refuse_now(struct sni_listener *l, struct sni_conn *c, enum sni_result why)
{
	ADD(l->stats.result[why], 1);
	log_debug("sni %s: refused (%s), closed at once", l->conf->name, sni_result_name(why));
	shutdown(c->fd[SIDE_C], SHUT_WR);
	conn_free(l, c);
}

/* Refuse without a byte: shut our side, read and drop what the client
 * still sends until its EOF (or the linger ends), then close. A lingering
 * connection still counts for its source (max-connections-per-ip) and for
 * the listener's SNI_LINGER_MAX; past that it is closed at once. */
static void refuse(struct sni_listener *l, struct sni_conn *c, enum sni_result why, uint64_t now)
{
	ADD(l->stats.result[why], 1);
	log_debug("sni %s: refused (%s)", l->conf->name, sni_result_name(why));
	uncount(l, c, false);
	free_pre(l, c);
	close_side(l, c, SIDE_U);
	shutdown(c->fd[SIDE_C], SHUT_WR);
	if (ADD(l->sh->lingering, 1) >= SNI_LINGER_MAX(l->conf->max_connections)) {
		SUB(l->sh->lingering, 1);
		conn_free(l, c);
		return;
	}
	c->state = C_LINGER;
	ADD(l->stats.lingering, 1);
	arm(l, c, now + SNI_LINGER);
	if (!(c->dir[SIDE_C] & D_READING) && read_side(l, c, SIDE_C) < 0)
		conn_free(l, c);
}

static enum sni_result hello_result(enum tls_hello_result r)
{
	switch (r) {
	case TLS_HELLO_NOT_TLS:
		return SNI_NOT_TLS;
	case TLS_HELLO_NOT_CLIENT_HELLO:
		return SNI_NOT_CLIENT_HELLO;
	case TLS_HELLO_NO_SNI:
		return SNI_NO_SNI;
	case TLS_HELLO_BAD_NAME:
		return SNI_BAD_NAME;
	case TLS_HELLO_TOO_BIG:
		return SNI_TOO_BIG;
	default:
		return SNI_MALFORMED;
	}
}

static void connect_upstream(struct sni_listener *l, struct sni_conn *c, uint64_t now)
{
	int one = 1, fd;

	fd = socket(c->upstream.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		refuse(l, c, SNI_NO_RESOURCES, now);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd[SIDE_U] = fd;
	if (l->ops->connect(l->loop, fd, &c->upstream.sa, addr_len(&c->upstream),
			    conn_id(l, c, SIDE_U)) < 0) {
		refuse(l, c, SNI_CONNECT_FAILED, now);
		return;
	}
	c->state = C_CONNECTING;
	arm(l, c, now + l->conf->connect_timeout_ms * NS_PER_MS);
}

/* A chunk of the ClientHello: keep it, feed the reader, act on its answer. */
static void preread(struct sni_listener *l, struct sni_conn *c, struct loop_dgram *d)
{
	const struct sni_route *r;
	enum tls_hello_result res;
	uint32_t need = c->pre_len + (uint32_t)d->len;

	if (d->len == 0) {
		preread_done(l, c);
		ADD(l->stats.result[SNI_PREREAD_CLOSED], 1);
		conn_free(l, c);
		return;
	}
	if (need > c->pre_cap) {
		uint8_t *p = need <= SNI_PRE_MAX ? realloc(c->pre, PROXY_V2_MAX + need) : NULL;

		if (!p) {
			preread_done(l, c);
			refuse(l, c, SNI_NO_RESOURCES, d->now);
			return;
		}
		ADD(l->stats.memory,
		    (int64_t)(need - c->pre_cap) + (c->pre ? 0 : (int64_t)PROXY_V2_MAX));
		c->pre = p;
		c->pre_cap = need;
	}
	memcpy(c->pre + PROXY_V2_MAX + c->pre_len, d->data, d->len);
	c->pre_len = need;
	res = tls_hello_feed(&c->hello, d->data, d->len);
	if (res == TLS_HELLO_MORE) {
		if (read_side(l, c, SIDE_C) < 0)
			conn_free(l, c);
		return;
	}
	if (res != TLS_HELLO_NAME) {
		preread_done(l, c);
		refuse(l, c, hello_result(res), d->now);
		return;
	}
	/* Timed, but still among the prereads (max-preread) until the
	 * upstream answers: connecting, it holds what it read (up to
	 * SNI_PRE_MAX) as a preread does, for up to connect-timeout. */
	preread_timed(l, c);
	/* Again now: a drain that began while the hello was read (the
	 * process's lifecycle, not a copy) splices nothing new. */
	if (draining(l)) {
		refuse(l, c, SNI_DRAINING, d->now);
		return;
	}
	r = sni_routes_lookup(l->routes, c->hello.name, c->hello.name_len);
	if (!r) {
		refuse(l, c, SNI_UNKNOWN_NAME, d->now);
		return;
	}
	c->upstream = r->upstream;
	c->proxy = r->proxy_v2;
	connect_upstream(l, c, d->now);
}

/* The header and the preread bytes in one send, from pre itself: the
 * loop copies nothing, so the send cannot fail for want of a buffer. */
static void send_pre(struct sni_listener *l, struct sni_conn *c)
{
	if (l->ops->stream_send(l->loop, c->fd[SIDE_U], c->pre + c->pre_off,
				c->pre_end - c->pre_off, conn_id(l, c, SIDE_U)) < 0) {
		end(l, c, SNI_END_RESET);
		return;
	}
	c->pre_sending = true;
}

/* --debug: an upstream that ends a spliced connection before its first
 * byte is counted as spliced, yet nobody was served: most often a
 * proxy-v2 route to a server that does not expect the header, or a
 * backend refusing the name. Said here, as the refusals are (the debug
 * log's own cap bounds it). */
static void upstream_gone(struct sni_listener *l, struct sni_conn *c, const char *how)
{
	char a[ADDR_STRLEN];

	if (!log_debug_on || (c->dir[SIDE_U] & D_DATA))
		return;
	log_debug("sni %s: %s from %s: upstream %s before sending a byte%s", l->conf->name,
		  c->hello.name, addr_str(&c->peer.sa, a), how,
		  c->proxy ? " (a proxy-v2 route: does the upstream expect the PROXY header?)"
			   : "");
}

static void connected(struct sni_listener *l, struct sni_conn *c, int res, uint64_t now)
{
	int one = 1;

	if (res < 0) {
		log_debug("sni %s: upstream for %s: %s", l->conf->name, c->hello.name,
			  strerror(-res));
		refuse(l, c, SNI_CONNECT_FAILED, now);
		return;
	}
	c->pre_off = PROXY_V2_MAX;
	c->pre_end = PROXY_V2_MAX + c->pre_len;
	if (c->proxy) {
		union etr_sockaddr local;
		socklen_t len = sizeof(local);
		uint8_t hdr[PROXY_V2_MAX];
		int n = -1;

		if (getsockname(c->fd[SIDE_C], &local.sa, &len) == 0)
			n = proxy_v2_build(hdr, sizeof(hdr), &c->peer, &local);
		if (n < 0) {
			refuse(l, c, SNI_NO_RESOURCES, now);
			return;
		}
		c->pre_off -= (uint32_t)n;
		memcpy(c->pre + c->pre_off, hdr, (size_t)n);
	}
	setsockopt(c->fd[SIDE_C], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	preread_leave(l, c);
	ADD(l->stats.result[SNI_SPLICED], 1);
	ADD(l->stats.bytes_in, c->pre_len);
	c->state = C_SENDPRE;
	c->last = now;
	arm(l, c, now + l->conf->idle_timeout_ms * NS_PER_MS);
	send_pre(l, c);
}

static void splice_start(struct sni_listener *l, struct sni_conn *c)
{
	free_pre(l, c);
	c->state = C_SPLICE;
	if (l->splice) {
		/* max-spliced across the workers, as the fds were counted;
		 * past it, or without pipes, the connection copies. */
		if (ADD(l->sh->spliced, 1) >= conf_sni_max_spliced(l->conf) || !pipes_open(l, c))
			SUB(l->sh->spliced, 1);
		else
			ADD(l->stats.pipes, 2);
	}
	if (splice_read(l, c, SIDE_C) < 0 || splice_read(l, c, SIDE_U) < 0)
		end(l, c, SNI_END_RESET);
}

/* Side s's EOF, once all its chunks are sent: shut the other's write
 * side; the connection ends when both directions are shut so. */
/* Direction s is done: the FIN passes on to side !s. The last direction
 * ends the connection, and close(2) sends that FIN itself, without the
 * shutdown: side !s was read to its EOF, nothing unread is left there
 * (unread bytes would make close send a reset, not a FIN). */
static void shut_dir(struct sni_listener *l, struct sni_conn *c, int s)
{
	c->dir[s] |= D_SHUT;
	if (c->dir[!s] & D_SHUT) {
		end(l, c, SNI_END_DONE);
		return;
	}
	shutdown(c->fd[!s], SHUT_WR);
}

/* Loop events on the connections' endpoint. */

static void conn_stream(void *obj, uint32_t ref, struct loop_dgram *d)
{
	struct sni_listener *l = obj;
	int s, o;
	struct sni_conn *c = deref(l, ref, &s);

	if (!c)
		return;
	o = !s;
	c->dir[s] &= ~D_READING;
	switch (c->state) {
	case C_PREREAD:
		if (s == SIDE_C)
			preread(l, c, d);
		return;
	case C_LINGER:
		if (s == SIDE_C && (d->len == 0 || ++c->linger_chunks >= SNI_LINGER_CHUNKS ||
				    read_side(l, c, SIDE_C) < 0))
			conn_free(l, c);
		return;
	case C_SPLICE:
		break;
	default:
		return;
	}
	if (d->len == 0) {
		if (s == SIDE_U)
			upstream_gone(l, c, "closed");
		/* The shutdown only behind the chunks still queued: the last
		 * one's on_sent sends it then. */
		c->dir[s] |= D_EOF;
		pin_let_go(l, c);
		if (c->state != C_SPLICE)
			return;
		if (c->ahead[s] == 0)
			shut_dir(l, c, s);
		return;
	}
	c->last = d->now;
	c->dir[s] |= D_DATA;
	if ((c->spliced ? l->ops->stream_splice_out(l->loop, c->fd[o], c->pipe[s][0], d->len,
						    conn_id(l, c, o))
			: l->ops->stream_forward(l->loop, c->fd[o], d, conn_id(l, c, o))) < 0) {
		end(l, c, SNI_END_RESET);
		return;
	}
	if (c->ahead[s]++ == 0) {
		/* Chunks in flight: looked at within SNI_PRESSED (send-timeout,
		 * conn_timer), one timer move per burst, not per chunk. */
		uint64_t at = d->now + l->conf->send_timeout_ms * NS_PER_MS;

		c->moved[s] = d->now;
		if (at > d->now + SNI_PRESSED)
			at = d->now + SNI_PRESSED;
		if (timer_sooner(&c->timer, at))
			arm(l, c, at);
	}
	c->fwd_len[s] += (uint32_t)d->len;
	if (!c->spliced) {
		pin_took(l, c);
		ADD(l->stats.memory, (int64_t)d->len);
	}
	ADD(*(s == SIDE_C ? &l->stats.bytes_in : &l->stats.bytes_out), d->len);
	ADD(l->stats.relayed[c->spliced], d->len);
	/* Read ahead: the next chunk comes while this one is sent. */
	if (c->ahead[s] < SNI_AHEAD && splice_read(l, c, s) < 0)
		end(l, c, SNI_END_RESET);
}

static void conn_sent(void *obj, uint32_t ref, int res)
{
	struct sni_listener *l = obj;
	int o, s;
	struct sni_conn *c = deref(l, ref, &o);

	if (!c)
		return;
	s = !o; /* the side the bytes were read from */
	if (c->state == C_GONE) {
		c->pre_sending = false;
		conn_free(l, c);
		return;
	}
	if (c->state == C_SENDPRE && o == SIDE_U) {
		c->pre_sending = false;
		if (res < 0)
			end(l, c, SNI_END_RESET);
		else
			splice_start(l, c);
		return;
	}
	if (c->state != C_SPLICE || c->ahead[s] == 0)
		return;
	if (res < 0) {
		end(l, c, SNI_END_RESET);
		return;
	}
	/* A whole chunk (res is its length); sends of one fd end in order. */
	c->ahead[s]--;
	c->moved[s] = loop_now();
	if ((uint32_t)res > c->fwd_len[s])
		res = (int)c->fwd_len[s];
	c->fwd_len[s] -= (uint32_t)res;
	/* Back for its source too: who waited for it reads now (this
	 * connection's other side among them, or one that ends). */
	if (!c->spliced) {
		SUB(l->stats.memory, (int64_t)res);
		pin_gave(l, c, 1);
	}
	if (c->state != C_SPLICE)
		return;
	if (c->dir[s] & D_EOF) {
		if (c->ahead[s] == 0)
			shut_dir(l, c, s);
		return;
	}
	if (splice_read(l, c, s) < 0)
		end(l, c, SNI_END_RESET);
}

static void conn_recv_error(void *obj, uint32_t ref, int err)
{
	struct sni_listener *l = obj;
	int s;
	struct sni_conn *c = deref(l, ref, &s);

	if (!c)
		return;
	c->dir[s] &= ~D_READING;
	switch (c->state) {
	case C_PREREAD:
		preread_done(l, c);
		ADD(l->stats.result[SNI_PREREAD_CLOSED], 1);
		conn_free(l, c);
		return;
	case C_LINGER:
		conn_free(l, c);
		return;
	case C_SENDPRE:
	case C_SPLICE:
		if (s == SIDE_U)
			upstream_gone(l, c, strerror(-err));
		end(l, c, SNI_END_RESET);
		return;
	default:
		return;
	}
}

static void conn_connected(void *obj, uint32_t ref, int res)
{
	struct sni_listener *l = obj;
	int s;
	struct sni_conn *c = deref(l, ref, &s);

	if (c && c->state == C_CONNECTING && s == SIDE_U)
		connected(l, c, res, loop_now());
}

static void conn_timer(void *obj, uint32_t ref, uint64_t now)
{
	struct sni_listener *l = obj;
	int s;
	struct sni_conn *c = deref(l, ref, &s);
	uint64_t idle = l->conf->idle_timeout_ms * NS_PER_MS;

	if (!c)
		return;
	switch (c->state) {
	case C_PREREAD:
		preread_done(l, c);
		refuse(l, c, SNI_PREREAD_TIMEOUT, now);
		return;
	case C_CONNECTING:
		refuse(l, c, SNI_CONNECT_TIMEOUT, now);
		return;
	case C_SENDPRE:
	case C_SPLICE: {
		uint64_t limit = send_limit(l), at = c->last + idle;

		if (now - c->last >= idle) {
			end(l, c, SNI_END_IDLE);
			return;
		}
		/* A place it was woken into and did not use goes to the next;
		 * a side still waiting tries again (a wake-up may have been
		 * missed: room left by a connection that closed). */
		if (c->state == C_SPLICE) {
			pin_let_go(l, c);
			if (c->state == C_SPLICE && (c->dir[0] | c->dir[1]) & D_DEFER)
				pin_wake(l, idx_of(l, c));
			if (c->state != C_SPLICE)
				return;
			if ((c->dir[0] | c->dir[1]) & D_DEFER ||
			    sni_pin_woken(&l->pin, idx_of(l, c)))
				at = at < now + SNI_PRESSED ? at : now + SNI_PRESSED;
		}
		for (int d = 0; d < 2; d++) {
			if (!c->ahead[d])
				continue;
			if (now - c->moved[d] >= limit) {
				log_debug("sni %s: %s: a side took nothing for %llu ms, reset",
					  l->conf->name, c->hello.name,
					  (unsigned long long)((now - c->moved[d]) / NS_PER_MS));
				end(l, c, SNI_END_STALLED);
				return;
			}
			if (at > c->moved[d] + limit)
				at = c->moved[d] + limit;
			if (at > now + SNI_PRESSED)
				at = now + SNI_PRESSED;
		}
		arm(l, c, at);
		return;
	}
	case C_LINGER:
		conn_free(l, c);
		return;
	default:
		return;
	}
}

/* max-preread (or this worker's share of it) is reached: close, without
 * a byte, the worker's oldest preread connection once it has had
 * SNI_PREREAD_STALE for its hello (a real client's comes within a round
 * trip); while every one is younger, the oldest of the address (IPv4,
 * IPv6 /64) that holds the most, ties to the address whose oldest is the
 * oldest (srctab_heaviest: no walk of the prereads). The first rule
 * keeps silent connections from many addresses, one each, from making a
 * real client's parallel connections (a browser's, a NAT's) the heaviest
 * and closing them (attack round 11: 1100 addresses, one silent
 * connection each, let a client keep 1 of its 6); the second churns many
 * young connections from a few addresses. False when the worker holds
 * none. */
static bool evict_one(struct sni_listener *l)
{
	uint32_t v = l->pre_head;

	if (v == SNI_NONE)
		return false;
	if (loop_now() - l->conns[v].start < SNI_PREREAD_STALE)
		v = srctab_heaviest(&l->pre_src);
	if (v == SRCTAB_NONE)
		return false;
	preread_done(l, &l->conns[v]);
	refuse_now(l, &l->conns[v], SNI_PREREAD_EVICTED);
	return true;
}

/* A new connection on the listening socket. */
static void listen_accept(void *obj, uint32_t ref, int fd)
{
	struct sni_listener *l = obj;
	uint64_t now = loop_now();
	struct sni_conn *c;
	socklen_t len = sizeof(union etr_sockaddr);
	union etr_sockaddr peer;

	if (ref != SNI_LISTEN_REF) {
		if (fd >= 0)
			close(fd);
		return;
	}
	if (fd < 0) {
		if (now >= l->log_next) {
			log_warnx("sni %s: accept: %s", l->conf->name, strerror(-fd));
			l->log_next = now + 10 * NS_PER_SEC;
		}
		return;
	}
	memset(&peer, 0, sizeof(peer));
	if (getpeername(fd, &peer.sa, &len) < 0) {
		c = NULL;
	} else if (l->bans && banlist_match(l->bans, &peer)) {
		/* ban-file: closed before any slot, cap count or read. */
		ADD(l->stats.result[SNI_BANNED], 1);
		close(fd);
		return;
	} else {
		c = conn_alloc(l, fd, now);
	}
	if (!c) {
		/* No slot to linger in: close at once. */
		ADD(l->stats.result[SNI_NO_RESOURCES], 1);
		shutdown(fd, SHUT_WR);
		close(fd);
		return;
	}
	c->peer = peer;
	/* The source first: whatever follows (a linger too) counts for it,
	 * and a source over its cap is closed at once. */
	if (!sni_shared_ip_take(l->sh, &peer)) {
		refuse_now(l, c, SNI_CAP_PER_IP);
		return;
	}
	c->ip_counted = true;
	if (draining(l)) {
		refuse(l, c, SNI_DRAINING, now);
		return;
	}
	if (ADD(l->sh->active, 1) >= l->conf->max_connections) {
		SUB(l->sh->active, 1);
		refuse_now(l, c, SNI_CAP_CONNECTIONS);
		return;
	}
	c->counted = true;
	ADD(l->stats.active, 1);
	/* A worker at its share of max-preread makes room among its own
	 * too: otherwise the workers an attack reaches most would end up
	 * with every preread, and one holding none could only refuse. */
	if (atomic_load_explicit(&l->stats.preread, memory_order_relaxed) >=
	    (l->conf->max_preread + l->all->nworkers - 1) / l->all->nworkers)
		evict_one(l);
	if (!preread_enter(l, c) && (!evict_one(l) || !preread_enter(l, c))) {
		refuse_now(l, c, SNI_CAP_PREREAD);
		return;
	}
	tls_hello_init(&c->hello, 0);
	arm(l, c, now + l->conf->preread_timeout_ms * NS_PER_MS);
	if (read_side(l, c, SIDE_C) < 0)
		conn_free(l, c);
}

/* One multi endpoint per listener: its connections' refs, and
 * SNI_LISTEN_REF for the listening socket. */
static const struct endpoint_ops conn_ops = {
    .name = "sni",
    .multi = true,
    .on_recv_error = conn_recv_error,
    .on_sent = conn_sent,
    .on_timer = conn_timer,
    .on_accept = listen_accept,
    .on_connected = conn_connected,
    .on_stream = conn_stream,
};

int sni_listener_open(struct sni_listener *l, struct sni_shared *all, unsigned i, unsigned w,
		      bool reuseport)
{
	const struct sni_conf *conf = all->l[i].conf;
	char a[ADDR_STRLEN];
	/* Every worker may get every connection (reuseport hashes), so each
	 * has room for them all: max-connections and SNI_LINGER_MAX, both
	 * counted across the workers (and so the fds main.c reserves), and a
	 * margin for connections closed as they are accepted. */
	uint32_t n = conf->max_connections + SNI_LINGER_MAX(conf->max_connections) + 16;

	memset(l, 0, sizeof(*l));
	l->fd = -1;
	l->all = all;
	l->sh = &all->l[i];
	l->conf = conf;
	l->worker = w;
	l->sh->stats[w] = &l->stats;
	/* The first socket, with one worker too: nobody may listen there
	 * already (another etrelay, a program with SO_REUSEPORT would
	 * otherwise share the port and take part of its connections). */
	l->fd = w == 0 ? net_tcp_port_free(&conf->listen) : 0;
	if (l->fd == 0)
		l->fd = net_listen_tcp(&conf->listen, reuseport);
	if (l->fd < 0) {
		log_warnx("sni %s: listen on %s (TCP): %s%s", conf->name,
			  addr_str(&conf->listen.sa, a), strerror(-l->fd),
			  l->fd == -EADDRINUSE ? " (another process listens there)"
					       : addr_bind_hint(l->fd));
		return l->fd;
	}
	l->conns = calloc(n, sizeof(*l->conns));
	/* Prereads are at most max-preread across the workers. */
	if (!l->conns || srctab_init(&l->pre_src, conf->max_preread, 0, n) < 0) {
		log_warn("sni %s: %u connections", conf->name, n);
		return -ENOMEM;
	}
	l->nconns = n;
	for (uint32_t k = 0; k < n; k++) {
		l->conns[k].fd[0] = l->conns[k].fd[1] = -1;
		l->conns[k].pipe[0][0] = l->conns[k].pipe[0][1] = -1;
		l->conns[k].pipe[1][0] = l->conns[k].pipe[1][1] = -1;
		l->conns[k].next_free = k + 1 < n ? k + 1 : SNI_NONE;
		timer_init(&l->conns[k].timer, 0);
	}
	l->free_head = 0;
	l->free_tail = n - 1;
	l->pre_head = l->pre_tail = SNI_NONE;
	return 0;
}

int sni_listener_attach(struct sni_listener *l, const struct loop_ops *ops, struct loop *loop,
			struct endpoint_table *ep)
{
	uint64_t sip[2] = {net_random64(), net_random64()};
	uint32_t pool = LOOP_STREAM_CHUNKS;
	int a;

	if (!ops->listen || !ops->stream_read)
		return -EOPNOTSUPP; /* a backend without streams */
	l->ops = ops;
	l->loop = loop;
	l->ep = ep;
	l->lst = ops->stats ? ops->stats(loop) : NULL;
	l->splice = l->conf->splice && ops->stream_splice_in && ops->stream_splice_out;
	if (l->conf->splice && !l->splice && l->worker == 0)
		log_warnx("sni %s: splice yes: the %s loop does not splice yet, its bytes are "
			  "copied",
			  l->conf->name, ops->name);
	if (l->lst && atomic_load_explicit(&l->lst->stream_pool, memory_order_relaxed))
		pool = (uint32_t)atomic_load_explicit(&l->lst->stream_pool, memory_order_relaxed);
	if (sni_pin_init(&l->pin, pool, l->nconns, (const uint8_t *)sip) < 0)
		return -ENOMEM;
	if ((a = endpoint_add(ep, &conn_ops, l)) < 0)
		return a;
	l->slot_conns = (unsigned)a;
	l->routes = sni_shared_take(l->all, l->sh, l->worker, &l->gen);
	l->attached = true;
	return ops->listen(loop, l->fd, endpoint_ref_id(l->slot_conns, SNI_LISTEN_REF));
}

void sni_listener_take_routes(struct sni_listener *l)
{
	uint64_t gen, now = loop_now();
	const struct sni_routes *t = sni_shared_take(l->all, l->sh, l->worker, &gen);

	if (gen == l->gen)
		return;
	l->routes = t;
	l->gen = gen;
	for (uint32_t k = 0; k < l->nconns; k++) {
		struct sni_conn *c = &l->conns[k];
		const struct sni_route *r;

		if (c->state != C_CONNECTING && c->state != C_SENDPRE && c->state != C_SPLICE)
			continue;
		r = sni_routes_lookup(t, c->hello.name, c->hello.name_len);
		if (r && addr_equal(&r->upstream, &c->upstream) && r->proxy_v2 == c->proxy)
			continue;
		log_debug("sni %s: %s: route gone or changed, closing", l->conf->name,
			  c->hello.name);
		if (c->state == C_CONNECTING)
			refuse(l, c, SNI_ROUTE_GONE, now);
		else
			end(l, c, SNI_END_REVOKED);
	}
}

void sni_listener_take_bans(struct sni_listener *l, const struct banlist *b)
{
	l->bans = b;
	if (!l->attached || !b)
		return;
	for (uint32_t k = 0; k < l->nconns; k++) {
		struct sni_conn *c = &l->conns[k];

		if (c->state == C_FREE || c->state == C_LINGER || c->state == C_GONE ||
		    !banlist_match(b, &c->peer))
			continue;
		if (c->state == C_PREREAD) {
			preread_done(l, c);
			refuse_now(l, c, SNI_BANNED);
		} else if (c->state == C_CONNECTING) {
			refuse_now(l, c, SNI_BANNED);
		} else {
			end(l, c, SNI_END_BANNED);
		}
	}
}

void sni_listener_shutdown(struct sni_listener *l)
{
	for (uint32_t k = 0; k < l->nconns && l->attached; k++) {
		struct sni_conn *c = &l->conns[k];

		if (c->state == C_SENDPRE || c->state == C_SPLICE)
			end(l, c, SNI_END_SHUTDOWN);
		else if (c->state != C_FREE)
			conn_free(l, c);
	}
	if (l->attached && l->fd >= 0)
		l->ops->del_socket(l->loop, l->fd, endpoint_ref_id(l->slot_conns, SNI_LISTEN_REF));
}

void sni_listener_close(struct sni_listener *l)
{
	for (uint32_t k = 0; k < l->nconns; k++) {
		for (int s = 0; s < 2; s++)
			if (l->conns[k].fd[s] >= 0)
				close(l->conns[k].fd[s]);
		pipes_close(&l->conns[k]);
	}
	for (uint32_t k = 0; k < l->nconns; k++)
		free(l->conns[k].pre);
	free(l->conns);
	l->conns = NULL;
	srctab_free(&l->pre_src);
	sni_pin_free(&l->pin);
	l->nconns = 0;
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}
