/* SPDX-License-Identifier: ISC */
/* An SNI connection once its upstream answered: the PROXY v2 header and
 * the preread bytes sent, then both ways one chunk at a time (or through
 * pipes), each direction's end, the timers (idle, send-timeout), and the
 * loop's events on the connections' endpoint.
 *
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
#include "sni_int.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "proxy_v2.h"
#include "sni_pin.h"

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

/* Both directions' pipes, or none (then the connection copies). */
static bool pipes_open(struct sni_listener *l, struct sni_conn *c)
{
	for (int s = 0; s < 2; s++) {
		if (pipe2(c->pipe[s], O_NONBLOCK | O_CLOEXEC) < 0) {
			c->pipe[s][0] = c->pipe[s][1] = -1;
			log_debug("sni %s: pipe: %s, copying", l->conf->name, strerror(errno));
			sni_conn_pipes_close(c);
			return false;
		}
		/* Refused past the user's pipe-user-pages-soft (without
		 * CAP_SYS_RESOURCE), where new pipes get 2 pages: such a pipe
		 * would splice 8 KiB at a time, slower than the copy. */
		if (fcntl(c->pipe[s][1], F_SETPIPE_SZ, SNI_PIPE_SIZE) < 0) {
			log_debug("sni %s: F_SETPIPE_SZ: %s, copying", l->conf->name,
				  strerror(errno));
			sni_conn_pipes_close(c);
			return false;
		}
	}
	c->spliced = true;
	return true;
}

/* c's source took a chunk (its place, if it was woken into one). */
static void pin_took(struct sni_listener *l, struct sni_conn *c)
{
	struct sni_pin_key k[SNI_PIN_KEYS];

	sni_pin_take(&l->pin, k, sni_pin_keys(&c->peer, k), sni_conn_idx(l, c));
}

/* c gives up the place it was woken into: who waits may have it. */
static void pin_let_go(struct sni_listener *l, struct sni_conn *c)
{
	struct sni_pin_key k[SNI_PIN_KEYS];
	uint32_t wake[SNI_WAKE_MAX];
	unsigned nw;

	if (!sni_pin_woken(&l->pin, sni_conn_idx(l, c)))
		return;
	sni_pin_keys(&c->peer, k);
	nw = sni_pin_release(&l->pin, k, sni_conn_idx(l, c), wake, SNI_WAKE_MAX);
	for (unsigned i = 0; i < nw; i++)
		sni_conn_pin_wake(l, wake[i]);
}

/* The header and the preread bytes in one send, from pre itself: the
 * loop copies nothing, so the send cannot fail for want of a buffer. */
static void send_pre(struct sni_listener *l, struct sni_conn *c)
{
	if (l->ops->stream_send(l->loop, c->fd[SIDE_U], c->pre + c->pre_off,
				c->pre_end - c->pre_off, sni_conn_id(l, c, SIDE_U)) < 0) {
		sni_conn_end(l, c, SNI_END_RESET);
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
		sni_conn_refuse(l, c, SNI_CONNECT_FAILED, now);
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
			sni_conn_refuse(l, c, SNI_NO_RESOURCES, now);
			return;
		}
		c->pre_off -= (uint32_t)n;
		memcpy(c->pre + c->pre_off, hdr, (size_t)n);
	}
	setsockopt(c->fd[SIDE_C], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	sni_conn_preread_leave(l, c);
	SNI_ADD(l->stats.result[SNI_SPLICED], 1);
	SNI_ADD(l->stats.bytes_in, c->pre_len);
	c->state = C_SENDPRE;
	c->last = now;
	sni_conn_arm(l, c, now + l->conf->idle_timeout_ms * NS_PER_MS);
	send_pre(l, c);
}

static void splice_start(struct sni_listener *l, struct sni_conn *c)
{
	sni_conn_free_pre(l, c);
	c->state = C_SPLICE;
	if (l->splice) {
		/* max-spliced across the workers, as the fds were counted;
		 * past it, or without pipes, the connection copies. */
		if (SNI_ADD(l->sh->spliced, 1) >= conf_sni_max_spliced(l->conf) ||
		    !pipes_open(l, c))
			SNI_SUB(l->sh->spliced, 1);
		else
			SNI_ADD(l->stats.pipes, 2);
	}
	if (sni_conn_splice_read(l, c, SIDE_C) < 0 || sni_conn_splice_read(l, c, SIDE_U) < 0)
		sni_conn_end(l, c, SNI_END_RESET);
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
		sni_conn_end(l, c, SNI_END_DONE);
		return;
	}
	shutdown(c->fd[!s], SHUT_WR);
}

/* Loop events on the connections' endpoint. */
void sni_relay_stream(void *obj, uint32_t ref, struct loop_dgram *d)
{
	struct sni_listener *l = obj;
	int s, o;
	struct sni_conn *c = sni_conn_deref(l, ref, &s);

	if (!c)
		return;
	o = !s;
	c->dir[s] &= ~D_READING;
	switch (c->state) {
	case C_PREREAD:
		if (s == SIDE_C)
			sni_preread(l, c, d);
		return;
	case C_LINGER:
		if (s == SIDE_C && (d->len == 0 || ++c->linger_chunks >= SNI_LINGER_CHUNKS ||
				    sni_conn_read(l, c, SIDE_C) < 0))
			sni_conn_free(l, c);
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
						    sni_conn_id(l, c, o))
			: l->ops->stream_forward(l->loop, c->fd[o], d, sni_conn_id(l, c, o))) < 0) {
		sni_conn_end(l, c, SNI_END_RESET);
		return;
	}
	if (c->ahead[s]++ == 0) {
		/* Chunks in flight: looked at within SNI_PRESSED (send-timeout,
		 * sni_relay_timer), one timer move per burst, not per chunk. */
		uint64_t at = d->now + l->conf->send_timeout_ms * NS_PER_MS;

		c->moved[s] = d->now;
		if (at > d->now + SNI_PRESSED)
			at = d->now + SNI_PRESSED;
		if (timer_sooner(&c->timer, at))
			sni_conn_arm(l, c, at);
	}
	c->fwd_len[s] += (uint32_t)d->len;
	if (!c->spliced) {
		pin_took(l, c);
		SNI_ADD(l->stats.memory, (int64_t)d->len);
	}
	SNI_ADD(*(s == SIDE_C ? &l->stats.bytes_in : &l->stats.bytes_out), d->len);
	SNI_ADD(l->stats.relayed[c->spliced], d->len);
	/* Read ahead: the next chunk comes while this one is sent. */
	if (c->ahead[s] < SNI_AHEAD && sni_conn_splice_read(l, c, s) < 0)
		sni_conn_end(l, c, SNI_END_RESET);
}

void sni_relay_sent(void *obj, uint32_t ref, int res)
{
	struct sni_listener *l = obj;
	int o, s;
	struct sni_conn *c = sni_conn_deref(l, ref, &o);

	if (!c)
		return;
	s = !o; /* the side the bytes were read from */
	if (c->state == C_GONE) {
		c->pre_sending = false;
		sni_conn_free(l, c);
		return;
	}
	if (c->state == C_SENDPRE && o == SIDE_U) {
		c->pre_sending = false;
		if (res < 0)
			sni_conn_end(l, c, SNI_END_RESET);
		else
			splice_start(l, c);
		return;
	}
	if (c->state != C_SPLICE || c->ahead[s] == 0)
		return;
	if (res < 0) {
		sni_conn_end(l, c, SNI_END_RESET);
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
		SNI_SUB(l->stats.memory, (int64_t)res);
		sni_conn_pin_gave(l, c, 1);
	}
	if (c->state != C_SPLICE)
		return;
	if (c->dir[s] & D_EOF) {
		if (c->ahead[s] == 0)
			shut_dir(l, c, s);
		return;
	}
	if (sni_conn_splice_read(l, c, s) < 0)
		sni_conn_end(l, c, SNI_END_RESET);
}

void sni_relay_recv_error(void *obj, uint32_t ref, int err)
{
	struct sni_listener *l = obj;
	int s;
	struct sni_conn *c = sni_conn_deref(l, ref, &s);

	if (!c)
		return;
	c->dir[s] &= ~D_READING;
	switch (c->state) {
	case C_PREREAD:
		sni_conn_preread_done(l, c);
		SNI_ADD(l->stats.result[SNI_PREREAD_CLOSED], 1);
		sni_conn_free(l, c);
		return;
	case C_LINGER:
		sni_conn_free(l, c);
		return;
	case C_SENDPRE:
	case C_SPLICE:
		if (s == SIDE_U)
			upstream_gone(l, c, strerror(-err));
		sni_conn_end(l, c, SNI_END_RESET);
		return;
	default:
		return;
	}
}

void sni_relay_connected(void *obj, uint32_t ref, int res)
{
	struct sni_listener *l = obj;
	int s;
	struct sni_conn *c = sni_conn_deref(l, ref, &s);

	if (c && c->state == C_CONNECTING && s == SIDE_U)
		connected(l, c, res, loop_now());
}

void sni_relay_timer(void *obj, uint32_t ref, uint64_t now)
{
	struct sni_listener *l = obj;
	int s;
	struct sni_conn *c = sni_conn_deref(l, ref, &s);
	uint64_t idle = l->conf->idle_timeout_ms * NS_PER_MS;

	if (!c)
		return;
	switch (c->state) {
	case C_PREREAD:
		sni_conn_preread_done(l, c);
		sni_conn_refuse(l, c, SNI_PREREAD_TIMEOUT, now);
		return;
	case C_CONNECTING:
		sni_conn_refuse(l, c, SNI_CONNECT_TIMEOUT, now);
		return;
	case C_SENDPRE:
	case C_SPLICE: {
		uint64_t limit = send_limit(l), at = c->last + idle;

		if (now - c->last >= idle) {
			sni_conn_end(l, c, SNI_END_IDLE);
			return;
		}
		/* A place it was woken into and did not use goes to the next;
		 * a side still waiting tries again (a wake-up may have been
		 * missed: room left by a connection that closed). */
		if (c->state == C_SPLICE) {
			pin_let_go(l, c);
			if (c->state == C_SPLICE && (c->dir[0] | c->dir[1]) & D_DEFER)
				sni_conn_pin_wake(l, sni_conn_idx(l, c));
			if (c->state != C_SPLICE)
				return;
			if ((c->dir[0] | c->dir[1]) & D_DEFER)
				at = at < now + SNI_PRESSED ? at : now + SNI_PRESSED;
			if (sni_pin_woken(&l->pin, sni_conn_idx(l, c)))
				at = at < now + SNI_WOKEN_HOLD ? at : now + SNI_WOKEN_HOLD;
		}
		for (int d = 0; d < 2; d++) {
			if (!c->ahead[d])
				continue;
			if (now - c->moved[d] >= limit) {
				log_debug("sni %s: %s: a side took nothing for %llu ms, reset",
					  l->conf->name, c->hello.name,
					  (unsigned long long)((now - c->moved[d]) / NS_PER_MS));
				sni_conn_end(l, c, SNI_END_STALLED);
				return;
			}
			if (at > c->moved[d] + limit)
				at = c->moved[d] + limit;
			if (at > now + SNI_PRESSED)
				at = now + SNI_PRESSED;
		}
		sni_conn_arm(l, c, at);
		return;
	}
	case C_LINGER:
		sni_conn_free(l, c);
		return;
	default:
		return;
	}
}
