/* SPDX-License-Identifier: ISC */
/* An SNI listener's connections: their slots (alloc, the one free), their
 * reads (a preread's, a splice's: bulk, or deferred at the source's cap of
 * chunks, sni_pin.h) and the wake-ups when chunks come back, the
 * prereads' list, pipes closed, and the ends: a refusal (at once, or a
 * linger) or a spliced connection's end. */
#include "sni_int.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "proxy_v2.h"
#include "sni_pin.h"

void sni_conn_arm(struct sni_listener *l, struct sni_conn *c, uint64_t at)
{
	if (l->ops->timer_set(l->loop, &c->timer, at) < 0)
		log_warnx("sni %s: timer: out of memory", l->conf->name);
}

int sni_conn_read(struct sni_listener *l, struct sni_conn *c, int side)
{
	int rc = l->ops->stream_read(l->loop, c->fd[side], sni_conn_id(l, c, side));

	if (rc == 0)
		c->dir[side] |= D_READING;
	return rc;
}

/* Side s's next read of the splice: a bulk one (the pool's reserve is not
 * for it), unless the source holds its cap of chunks; then the connection
 * waits for one of them to come back (D_DEFER, woken by sni_conn_pin_gave). */
int sni_conn_splice_read(struct sni_listener *l, struct sni_conn *c, int side)
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
					      sni_conn_id(l, c, side));
		if (rc == 0)
			c->dir[side] |= D_READING;
		return rc;
	}
	if (!sni_pin_admit(&l->pin, k, nk, sni_conn_idx(l, c))) {
		uint64_t at = loop_now() + SNI_PRESSED;

		c->dir[side] |= D_DEFER;
		SNI_ADD(l->stats.deferred, 1);
		/* Tried again by sni_relay_timer too, should no chunk come back. */
		if (timer_sooner(&c->timer, at))
			sni_conn_arm(l, c, at);
		return 0;
	}
	rc = (l->ops->stream_read_bulk ? l->ops->stream_read_bulk : l->ops->stream_read)(
	    l->loop, c->fd[side], sni_conn_id(l, c, side));
	if (rc == 0)
		c->dir[side] |= D_READING;
	return rc;
}

/* A connection whose source got a chunk back (or that waited long) reads
 * its waiting sides. */
void sni_conn_pin_wake(struct sni_listener *l, uint32_t i)
{
	struct sni_conn *c = &l->conns[i];
	uint64_t at = loop_now() + SNI_WOKEN_HOLD;

	if (c->state != C_SPLICE)
		return;
	/* Its place goes at sni_relay_timer if its read brings nothing by then. */
	if (sni_pin_woken(&l->pin, i) && timer_sooner(&c->timer, at))
		sni_conn_arm(l, c, at);
	for (int s = 0; s < 2; s++) {
		if (!(c->dir[s] & D_DEFER))
			continue;
		c->dir[s] &= (uint8_t)~D_DEFER;
		if (c->ahead[s] < SNI_AHEAD && sni_conn_splice_read(l, c, s) < 0) {
			sni_conn_end(l, c, SNI_END_RESET);
			return;
		}
	}
}

/* c's source gave n chunks back: wake who waits for them. */
void sni_conn_pin_gave(struct sni_listener *l, struct sni_conn *c, unsigned n)
{
	struct sni_pin_key k[SNI_PIN_KEYS];
	unsigned nk = sni_pin_keys(&c->peer, k);

	while (n--) {
		uint32_t wake[SNI_WAKE_MAX];
		unsigned nw = sni_pin_put(&l->pin, k, nk, wake, SNI_WAKE_MAX);

		for (unsigned i = 0; i < nw; i++)
			sni_conn_pin_wake(l, wake[i]);
	}
}

void sni_conn_free_pre(struct sni_listener *l, struct sni_conn *c)
{
	if (!c->pre)
		return;
	SNI_SUB(l->stats.memory, (int64_t)(PROXY_V2_MAX + c->pre_cap));
	free(c->pre);
	c->pre = NULL;
	c->pre_len = c->pre_cap = c->pre_off = c->pre_end = 0;
}

/* Into the listener's prereads (the newest of its source) and their
 * shared count. */
bool sni_conn_preread_enter(struct sni_listener *l, struct sni_conn *c)
{
	if (SNI_ADD(l->sh->preread, 1) >= l->conf->max_preread) {
		SNI_SUB(l->sh->preread, 1);
		return false;
	}
	c->in_preread = true;
	SNI_ADD(l->stats.preread, 1);
	srctab_join(&l->pre_src, sni_conn_idx(l, c), &c->peer);
	c->pre_next = SNI_NONE;
	c->pre_prev = l->pre_tail;
	if (l->pre_tail == SNI_NONE)
		l->pre_head = sni_conn_idx(l, c);
	else
		l->conns[l->pre_tail].pre_next = sni_conn_idx(l, c);
	l->pre_tail = sni_conn_idx(l, c);
	return true;
}

void sni_conn_preread_leave(struct sni_listener *l, struct sni_conn *c)
{
	if (!c->in_preread)
		return;
	SNI_SUB(l->sh->preread, 1);
	SNI_SUB(l->stats.preread, 1);
	c->in_preread = false;
	srctab_leave(&l->pre_src, sni_conn_idx(l, c));
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
	sni_conn_preread_leave(l, c);
	if (ip && c->ip_counted) {
		sni_shared_ip_put(l->sh, &c->peer);
		c->ip_counted = false;
	}
	if (c->counted) {
		SNI_SUB(l->sh->active, 1);
		SNI_SUB(l->stats.active, 1);
		c->counted = false;
	}
}

void sni_conn_pipes_close(struct sni_conn *c)
{
	for (int s = 0; s < 2; s++)
		for (int e = 0; e < 2; e++)
			if (c->pipe[s][e] >= 0) {
				close(c->pipe[s][e]);
				c->pipe[s][e] = -1;
			}
	c->spliced = false;
}

static void close_side(struct sni_listener *l, struct sni_conn *c, int side)
{
	if (c->fd[side] < 0)
		return;
	l->ops->del_socket(l->loop, c->fd[side], sni_conn_id(l, c, side));
	close(c->fd[side]);
	c->fd[side] = -1;
	c->dir[side] = 0;
}

/* The one way a connection's slot is freed. */
void sni_conn_free(struct sni_listener *l, struct sni_conn *c)
{
	bool spliced = c->spliced;
	unsigned held = spliced ? 0 : (unsigned)c->ahead[0] + c->ahead[1];
	struct sni_pin_key k[SNI_PIN_KEYS];

	l->ops->timer_cancel(l->loop, &c->timer);
	close_side(l, c, SIDE_C);
	close_side(l, c, SIDE_U);
	/* After both del_sockets: the loop splices from them no more. */
	if (spliced) {
		SNI_SUB(l->stats.pipes, 2);
		SNI_SUB(l->sh->spliced, 1);
	}
	sni_conn_pipes_close(c);
	uncount(l, c, true);
	if (sni_pin_waiting(&l->pin, sni_conn_idx(l, c)) ||
	    sni_pin_woken(&l->pin, sni_conn_idx(l, c))) {
		sni_pin_keys(&c->peer, k);
		sni_pin_cancel(&l->pin, k, sni_conn_idx(l, c));
	}
	for (int s = 0; s < 2; s++) {
		if (!spliced) /* a pipe's bytes are the kernel's */
			SNI_SUB(l->stats.memory, (int64_t)c->fwd_len[s]);
		c->fwd_len[s] = 0;
		c->ahead[s] = 0;
	}
	/* Its chunks go back to the pool once their sends are cancelled:
	 * for its source they are back now. */
	if (held)
		sni_conn_pin_gave(l, c, held);
	if (c->state == C_LINGER) {
		SNI_SUB(l->stats.lingering, 1);
		SNI_SUB(l->sh->lingering, 1);
	}
	if (c->pre_sending) {
		/* stream_send sends from pre itself: it stays until that
		 * send's on_sent, which comes after del_socket too. */
		c->state = C_GONE;
		return;
	}
	sni_conn_free_pre(l, c);
	c->state = C_FREE;
	c->gen++;
	/* FIFO: a slot just freed is reused last, so its generation wraps
	 * only after many reuses. */
	c->next_free = SNI_NONE;
	if (l->free_head == SNI_NONE) {
		l->free_head = sni_conn_idx(l, c);
	} else {
		uint32_t *tail = &l->conns[l->free_tail].next_free;

		*tail = sni_conn_idx(l, c);
	}
	l->free_tail = sni_conn_idx(l, c);
}

struct sni_conn *sni_conn_alloc(struct sni_listener *l, int fd, uint64_t now)
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
	timer_init(&c->timer, sni_conn_id(l, c, SIDE_C));
	return c;
}

void sni_conn_end(struct sni_listener *l, struct sni_conn *c, enum sni_end why)
{
	SNI_ADD(l->stats.ended[why], 1);
	/* A reset passes on as a reset: a client whose upstream reset
	 * mid-transfer must not read a clean end (a truncated download
	 * looking whole), nor the upstream a client's. */
	if (why == SNI_END_RESET || why == SNI_END_STALLED) {
		struct linger lg = {.l_onoff = 1, .l_linger = 0};

		for (int s = 0; s < 2; s++)
			if (c->fd[s] >= 0)
				setsockopt(c->fd[s], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	sni_conn_free(l, c);
}

/* The preread's time, on the clock its start was read from (loop_now in
 * sni_preread_accept): a loop turn's now is read before the turn's events, so
 * a read answered in its accept's turn would end before it started. */
void sni_conn_preread_timed(struct sni_listener *l, struct sni_conn *c)
{
	uint64_t now = loop_now(), ns = now > c->start ? now - c->start : 0;

	SNI_ADD(l->stats.preread_ns, ns);
	SNI_ADD(l->stats.preread_count, 1);
	SNI_ADD(l->stats.preread_hist[sni_preread_bucket(ns)], 1);
}

/* The preread is over (timed, unless it ended already: a connecting
 * connection is still among the prereads) and leaves their list. */
void sni_conn_preread_done(struct sni_listener *l, struct sni_conn *c)
{
	if (c->state == C_PREREAD)
		sni_conn_preread_timed(l, c);
	sni_conn_preread_leave(l, c);
}

/* Refuse at once: close without a byte and without a linger (a client
 * whose bytes arrived reads a reset). A refusal by a cap: it holds no
 * socket, so no address can fill the listener's slots with refusals. */
void sni_conn_refuse_now(struct sni_listener *l, struct sni_conn *c, enum sni_result why)
{
	SNI_ADD(l->stats.result[why], 1);
	log_debug("sni %s: refused (%s), closed at once", l->conf->name, sni_result_name(why));
	shutdown(c->fd[SIDE_C], SHUT_WR);
	sni_conn_free(l, c);
}

/* Refuse without a byte: shut our side, read and drop what the client
 * still sends until its EOF (or the linger ends), then close. A lingering
 * connection still counts for its source (max-connections-per-ip) and for
 * the listener's SNI_LINGER_MAX; past that it is closed at once. */
void sni_conn_refuse(struct sni_listener *l, struct sni_conn *c, enum sni_result why, uint64_t now)
{
	SNI_ADD(l->stats.result[why], 1);
	log_debug("sni %s: refused (%s)", l->conf->name, sni_result_name(why));
	uncount(l, c, false);
	sni_conn_free_pre(l, c);
	close_side(l, c, SIDE_U);
	shutdown(c->fd[SIDE_C], SHUT_WR);
	if (SNI_ADD(l->sh->lingering, 1) >= SNI_LINGER_MAX(l->conf->max_connections)) {
		SNI_SUB(l->sh->lingering, 1);
		sni_conn_free(l, c);
		return;
	}
	c->state = C_LINGER;
	SNI_ADD(l->stats.lingering, 1);
	sni_conn_arm(l, c, now + SNI_LINGER);
	if (!(c->dir[SIDE_C] & D_READING) && sni_conn_read(l, c, SIDE_C) < 0)
		sni_conn_free(l, c);
}
