/* SPDX-License-Identifier: ISC */
/* Rung 3 on one worker (tun_r3.h): the connections handed over by the SNI
 * listener, their sockets, limits and timers. */
#include "tun_r3.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "r3conn.h"
#include "ratelimit.h"
#include "ref.h"
#include "stats.h"
#include "tun_cert.h"

/* A connection's ref: index (16 bits), generation (7), side (1: its
 * WireGuard socket). */
#define R3_IDX_BITS 16
#define R3_GEN_BITS 7
#define R3_SIDE_U   (1u << (R3_IDX_BITS + R3_GEN_BITS))
#define R3_NONE	    UINT32_MAX
_Static_assert(REF_FITS(R3_IDX_BITS, R3_GEN_BITS + 1, ENDPOINT_REF_BITS), "ref layout");
_Static_assert(TUN_R3_CONNS_MAX < (1u << R3_IDX_BITS), "connection index bits");
_Static_assert(TUN_R3_MSG >= WS_MSG_MIN && TUN_R3_MSG <= WS_MSG_MAX, "message bounds");

/* A slot's states: OPEN (TLS, the upgrade, then datagrams; closing once
 * its last bytes are queued), GONE (its sockets closed while the loop
 * still sends from its TLS session: freed at that send's on_sent). */
enum { S_FREE, S_OPEN, S_GONE };

/* The connection's memory besides OpenSSL's: taken at the hand-over, its
 * message buffer rung3-max-message bytes. */
struct r3mem {
	struct r3conn c;
	char host[TLS_CERT_NAME_MAX];
	uint8_t msg[];
};

static const struct udpws_tokens no_tokens = {NULL, 0};

const char *tun_r3_result_name(enum tun_r3_result r)
{
	static const char *const names[TUN_R3_RESULTS] = {
	    [TUN_R3_UPGRADED] = "upgraded",	  [TUN_R3_NO_CERT] = "no_certificate",
	    [TUN_R3_LIMIT_TOTAL] = "limit_total", [TUN_R3_LIMIT_SOURCE] = "limit_source",
	    [TUN_R3_RATE_SOURCE] = "rate_source", [TUN_R3_RATE_TOTAL] = "rate_total",
	    [TUN_R3_LIMIT_TOKEN] = "limit_token", [TUN_R3_BAD_UPGRADE] = "bad_upgrade",
	    [TUN_R3_NO_TOKEN] = "no_token",	  [TUN_R3_BAD_TOKEN] = "bad_token",
	    [TUN_R3_TLS_FAILED] = "tls_failed",	  [TUN_R3_TIMEOUT] = "timeout",
	    [TUN_R3_CLOSED] = "closed",		  [TUN_R3_INTERNAL] = "internal",
	    [TUN_R3_EVICTED] = "evicted",
	};

	return (unsigned)r < TUN_R3_RESULTS ? names[r] : "unknown";
}

const char *tun_r3_end_name(enum tun_r3_end e)
{
	static const char *const names[TUN_R3_ENDS] = {
	    [TUN_R3_END_CLIENT] = "client",
	    [TUN_R3_END_REFUSED] = "refused",
	    [TUN_R3_END_HANDSHAKE] = "handshake_timeout",
	    [TUN_R3_END_IDLE] = "idle",
	    [TUN_R3_END_TOKEN] = "token_gone",
	    [TUN_R3_END_TOO_BIG] = "too_big",
	    [TUN_R3_END_ERROR] = "error",
	    [TUN_R3_END_BANNED] = "banned",
	    [TUN_R3_END_SHUTDOWN] = "shutdown",
	    [TUN_R3_END_EVICTED] = "evicted",
	};

	return (unsigned)e < TUN_R3_ENDS ? names[e] : "unknown";
}

const char *tun_r3_drop_name(enum tun_r3_drop d)
{
	static const char *const names[TUN_R3_DROPS] = {
	    [TUN_R3_DROP_WG_SEND] = "wireguard_send",
	    [TUN_R3_DROP_WG_REFUSED] = "wireguard_refused",
	    [TUN_R3_DROP_BACKLOG] = "backlog_full",
	    [TUN_R3_DROP_TOO_BIG] = "too_big",
	    [TUN_R3_DROP_CLOSING] = "closing",
	};

	return (unsigned)d < TUN_R3_DROPS ? names[d] : "unknown";
}

_Static_assert(sizeof(struct tun_r3_stats) % sizeof(uint64_t) == 0, "counters only");

void tun_r3_totals(const struct tun_stats *st, struct tun_r3_stats *out)
{
	enum { N = sizeof(*out) / sizeof(uint64_t) };
	_Atomic uint64_t *o = (_Atomic uint64_t *)(void *)out;

	memset(out, 0, sizeof(*out));
	for (unsigned w = 0; w < STATS_WORKERS_MAX; w++) {
		const _Atomic uint64_t *v = (const _Atomic uint64_t *)(const void *)st->r3[w];

		for (unsigned k = 0; v && k < N; k++)
			STAT_SET(o[k], STAT_GET(o[k]) + STAT_GET(v[k]));
	}
}

/* Its result, once (the first call counts). */
static void count_result(struct tun_r3 *w, struct tun_r3_slot *s, enum tun_r3_result r)
{
	if (s->counted)
		return;
	s->counted = true;
	STAT_ADD(w->st.result[r], 1);
}

/* Why it ends: the first reason holds (a close the relay began, then the
 * client's EOF, is the relay's reason). */
static void mark(struct tun_r3_slot *s, enum tun_r3_end why)
{
	if (s->end == TUN_R3_ENDS)
		s->end = (uint8_t)why;
}

/* What the connection's own bytes ended it with (r3conn said R3_CLOSE):
 * the upgrade refused, TLS or WebSocket broken, a message too big, or the
 * client's close. */
static enum tun_r3_end why_closed(const struct r3conn *c)
{
	if (c->ws.status && c->ws.status != 101)
		return TUN_R3_END_REFUSED;
	if (tls_conn_state(c->tls) == TLS_CONN_FAILED)
		return TUN_R3_END_ERROR;
	if (c->ws.status == 101 && c->ws.u.rd.final_ev == WS_EV_ERROR)
		return c->ws.u.rd.code == WS_CLOSE_TOO_BIG ? TUN_R3_END_TOO_BIG : TUN_R3_END_ERROR;
	return TUN_R3_END_CLIENT;
}

/* The result of a refused upgrade, by the status answered. */
static enum tun_r3_result refused_result(uint16_t status)
{
	return status == 401   ? TUN_R3_NO_TOKEN
	       : status == 403 ? TUN_R3_BAD_TOKEN
			       : TUN_R3_BAD_UPGRADE;
}

static uint32_t idx_of(const struct tun_r3 *w, const struct tun_r3_slot *s)
{
	return (uint32_t)(s - w->conns);
}

static uint32_t id_of(const struct tun_r3 *w, const struct tun_r3_slot *s, bool udp)
{
	uint32_t ref = ref_pack(idx_of(w, s), R3_IDX_BITS, s->gen, R3_GEN_BITS);

	return endpoint_ref_id(w->slot, ref | (udp ? R3_SIDE_U : 0));
}

static struct tun_r3_slot *deref(struct tun_r3 *w, uint32_t ref, bool *udp)
{
	uint32_t i = ref_idx(ref, R3_IDX_BITS);
	struct tun_r3_slot *s;

	if (i >= w->nconns)
		return NULL;
	s = &w->conns[i];
	if (s->state == S_FREE || !ref_gen_ok(ref, R3_IDX_BITS, R3_GEN_BITS, s->gen))
		return NULL;
	*udp = (ref & R3_SIDE_U) != 0;
	return s;
}

static const struct udpws_tokens *tokset(const struct tun_r3 *w)
{
	return w->set ? &w->set->t : &no_tokens;
}

/* The slot back on the free list, its memory freed. */
static void slot_free(struct tun_r3 *w, struct tun_r3_slot *s)
{
	if (s->c) {
		r3conn_free(s->c);
		free(s->c);
		s->c = NULL;
	}
	s->state = S_FREE;
	s->gen = (uint8_t)((s->gen + 1) & ((1u << R3_GEN_BITS) - 1));
	s->next_free = w->free_head;
	w->free_head = idx_of(w, s);
	w->live--;
}

/* The one way a connection ends, with why (unless an earlier reason was
 * marked): its sockets closed, its counts given back, its result (if none
 * yet) and its end counted; its slot waits for a send still with the
 * loop. */
static void finish(struct tun_r3 *w, struct tun_r3_slot *s, enum tun_r3_end why)
{
	if (s->state != S_OPEN)
		return;
	mark(s, why);
	if (s->end == TUN_R3_END_HANDSHAKE)
		count_result(w, s, TUN_R3_TIMEOUT);
	else if (s->end == TUN_R3_END_EVICTED)
		count_result(w, s, TUN_R3_EVICTED);
	else if (s->c && tls_conn_state(s->c->tls) == TLS_CONN_FAILED)
		count_result(w, s, TUN_R3_TLS_FAILED);
	else
		count_result(w, s, TUN_R3_CLOSED);
	STAT_ADD(w->st.ended[s->end], 1);
	STAT_SET(w->st.open, STAT_GET(w->st.open) - 1);
	w->ops->timer_cancel(w->loop, &s->timer);
	if (s->ufd >= 0) {
		w->ops->del_socket(w->loop, s->ufd, id_of(w, s, true));
		close(s->ufd);
		s->ufd = -1;
	}
	w->ops->del_socket(w->loop, s->fd, id_of(w, s, false));
	close(s->fd);
	s->fd = -1;
	srctab_put(&w->src, &s->peer);
	if (s->admitted && w->per_token && s->token >= 0)
		w->per_token[s->token]--;
	s->admitted = false;
	s->state = S_GONE;
	if (!s->sending)
		slot_free(w, s);
}

/* Hand the session's next ciphertext to the loop unless a send of its is
 * out. False when the connection ended. */
static bool kick(struct tun_r3 *w, struct tun_r3_slot *s)
{
	const uint8_t *p;
	size_t n;

	if (s->sending)
		return true;
	n = tls_conn_pending_out(s->c->tls, &p);
	if (n) {
		if (w->ops->stream_send(w->loop, s->fd, p, n, id_of(w, s, false)) < 0) {
			finish(w, s, TUN_R3_END_ERROR);
			return false;
		}
		s->sending = true;
		return true;
	}
	if (s->closing) {
		finish(w, s, TUN_R3_END_ERROR); /* its reason was marked with closing */
		return false;
	}
	return true;
}

/* The connection ends (why) once its last bytes left, at most
 * TUN_R3_LINGER from now. */
static void set_closing(struct tun_r3 *w, struct tun_r3_slot *s, enum tun_r3_end why, uint64_t now)
{
	mark(s, why);
	if (s->closing)
		return;
	s->closing = true;
	w->ops->timer_set(w->loop, &s->timer, now + TUN_R3_LINGER);
}

/* Close from the relay's side: a close frame (code) when open, TLS's
 * close_notify, then the connection once they left (or TUN_R3_LINGER). */
static void close_with(struct tun_r3 *w, struct tun_r3_slot *s, uint16_t code, enum tun_r3_end why,
		       uint64_t now)
{
	if (s->closing)
		return;
	r3conn_close(s->c, code);
	set_closing(w, s, why, now);
}

/* The upgrade let a token in: counted under it (rung3-max-per-token), and the
 * connection's socket to WireGuard. False: closed. */
static bool admit(struct tun_r3 *w, struct tun_r3_slot *s, uint64_t now)
{
	long t = s->c->ws.token;
	int fd;

	if (t < 0 || !w->per_token || (size_t)t >= w->set->t.n) {
		count_result(w, s, TUN_R3_INTERNAL);
		close_with(w, s, WS_CLOSE_INTERNAL, TUN_R3_END_ERROR, now);
		return false;
	}
	if (w->per_token[t] >= w->lim.per_token) {
		count_result(w, s, TUN_R3_LIMIT_TOKEN);
		close_with(w, s, WS_CLOSE_POLICY, TUN_R3_END_REFUSED, now);
		return false;
	}
	fd = net_connect_udp(&w->wg);
	if (fd < 0 || w->ops->add_socket(w->loop, fd, id_of(w, s, true)) < 0) {
		if (fd >= 0)
			close(fd);
		log_debug("tunnel: rung 3: a socket to WireGuard: %s",
			  strerror(fd < 0 ? -fd : EIO));
		count_result(w, s, TUN_R3_INTERNAL);
		close_with(w, s, WS_CLOSE_INTERNAL, TUN_R3_END_ERROR, now);
		return false;
	}
	count_result(w, s, TUN_R3_UPGRADED);
	s->ufd = fd;
	s->token = t;
	s->admitted = true;
	w->per_token[t]++;
	w->ops->timer_set(w->loop, &s->timer, s->last + w->idle_ns);
	return true;
}

/* One datagram to WireGuard: queued on the loop, or, when the loop has no
 * copy buffer left this turn (io_uring's UR_COPY: one 64 KiB chunk of
 * the client's holds some 350 small messages), sent at once on the
 * connected socket, a loopback send that does not wait. The two ways may
 * reorder a burst by up to a turn's queue; WireGuard's replay window
 * takes that. False: neither took it. */
static bool to_wireguard(struct tun_r3 *w, struct tun_r3_slot *s, const uint8_t *dg, size_t len)
{
	int rc = w->ops->send(w->loop, s->ufd, NULL, 0, dg, len, id_of(w, s, true));

	if (rc == -ENOBUFS)
		return send(s->ufd, dg, len, MSG_DONTWAIT) == (ssize_t)len;
	return rc == 0;
}

/* What the bytes fed ask for, until more are needed or the end. */
static void work(struct tun_r3 *w, struct tun_r3_slot *s, uint64_t now)
{
	const uint8_t *dg;
	size_t len;

	/* Bounded: each turn consumes bytes fed, or ends. */
	for (;;) {
		enum r3_ev ev = r3conn_next(s->c, tokset(w), &dg, &len);

		if (ev == R3_CLOSE) {
			if (!s->admitted && s->c->ws.status && s->c->ws.status != 101)
				count_result(w, s, refused_result(s->c->ws.status));
			set_closing(w, s, why_closed(s->c), now);
			break;
		}
		if (!s->admitted && !s->closing && s->c->ws.state == UDPWS_OPEN &&
		    !admit(w, s, now))
			break;
		if (ev == R3_MORE)
			break;
		if (s->closing || !s->admitted)
			continue; /* closed by the relay: read to the end, drop */
		if (to_wireguard(w, s, dg, len)) {
			STAT_ADD(w->st.dgrams[0], 1);
			STAT_ADD(w->st.bytes[0], len);
		} else {
			STAT_ADD(w->st.dropped[TUN_R3_DROP_WG_SEND], 1);
		}
	}
}

/* Ask for the client's next bytes. False when the connection ended. */
static bool read_next(struct tun_r3 *w, struct tun_r3_slot *s)
{
	if (s->reading || s->closing)
		return true;
	if (w->ops->stream_read(w->loop, s->fd, id_of(w, s, false)) < 0) {
		finish(w, s, TUN_R3_END_ERROR);
		return false;
	}
	s->reading = true;
	return true;
}

/* The client's ciphertext, a record's worth at a time, each worked
 * through before the next: what waits in the session stays small. */
static void feed(struct tun_r3 *w, struct tun_r3_slot *s, const uint8_t *p, size_t n, uint64_t now)
{
	for (size_t off = 0; off < n && !s->closing;) {
		size_t take = n - off < R3_PLAIN ? n - off : R3_PLAIN;

		if (r3conn_feed(s->c, p + off, take) < 0) {
			/* Its alert, if any, is pending_out's. */
			set_closing(w, s, TUN_R3_END_ERROR, now);
			break;
		}
		off += take;
		work(w, s, now);
	}
	if (kick(w, s))
		read_next(w, s);
}

static void on_stream(void *obj, uint32_t ref, struct loop_dgram *d)
{
	struct tun_r3 *w = obj;
	bool udp;
	struct tun_r3_slot *s = deref(w, ref, &udp);

	if (!s || udp || s->state != S_OPEN)
		return;
	s->reading = false;
	if (d->len == 0) { /* the client's EOF: nothing more can reach it */
		finish(w, s, TUN_R3_END_CLIENT);
		return;
	}
	s->last = d->now;
	feed(w, s, d->data, d->len, d->now);
}

static void on_sent(void *obj, uint32_t ref, int res)
{
	struct tun_r3 *w = obj;
	bool udp;
	struct tun_r3_slot *s = deref(w, ref, &udp);

	if (!s || udp)
		return; /* a copied send to WireGuard: nothing to give back */
	s->sending = false;
	if (s->state == S_GONE) {
		slot_free(w, s);
		return;
	}
	if (res < 0) {
		finish(w, s, TUN_R3_END_ERROR);
		return;
	}
	tls_conn_out_done(s->c->tls, (size_t)res);
	kick(w, s);
}

static void on_recv_error(void *obj, uint32_t ref, int err)
{
	struct tun_r3 *w = obj;
	bool udp;
	struct tun_r3_slot *s = deref(w, ref, &udp);

	(void)err;
	if (!s || s->state != S_OPEN)
		return;
	if (udp) { /* WireGuard's port refused (not up yet): the client retries */
		STAT_ADD(w->st.dropped[TUN_R3_DROP_WG_REFUSED], 1);
		return;
	}
	s->reading = false;
	finish(w, s, TUN_R3_END_ERROR);
}

/* A datagram from WireGuard, to the client as one binary message. */
static void on_dgram(void *obj, uint32_t ref, struct loop_dgram *d)
{
	struct tun_r3 *w = obj;
	bool udp;
	struct tun_r3_slot *s = deref(w, ref, &udp);

	if (!s || !udp || s->state != S_OPEN)
		return;
	if (s->closing) {
		STAT_ADD(w->st.dropped[TUN_R3_DROP_CLOSING], 1);
		return;
	}
	if (d->truncated || d->len > w->lim.max_msg) {
		STAT_ADD(w->st.dropped[TUN_R3_DROP_TOO_BIG], 1);
		return;
	}
	/* The TLS session's own bound is TLS_CONN_OUT_MAX; rung3-max-backlog
	 * may be lower. */
	if (tls_conn_out_bytes(s->c->tls) >= w->lim.backlog ||
	    r3conn_send(s->c, d->data, d->len) < 0) {
		STAT_ADD(w->st.dropped[TUN_R3_DROP_BACKLOG], 1);
		return;
	}
	STAT_ADD(w->st.dgrams[1], 1);
	STAT_ADD(w->st.bytes[1], d->len);
	kick(w, s);
}

static void on_timer(void *obj, uint32_t ref, uint64_t now)
{
	struct tun_r3 *w = obj;
	bool udp;
	struct tun_r3_slot *s = deref(w, ref, &udp);
	uint64_t due;

	if (!s || s->state != S_OPEN)
		return;
	if (s->closing) { /* its last bytes did not leave in TUN_R3_LINGER */
		finish(w, s, TUN_R3_END_ERROR);
		return;
	}
	due = s->admitted ? s->last + w->idle_ns : s->start + w->upgrade_ns;
	if (now < due) {
		w->ops->timer_set(w->loop, &s->timer, due);
		return;
	}
	close_with(w, s, WS_CLOSE_GOING_AWAY, s->admitted ? TUN_R3_END_IDLE : TUN_R3_END_HANDSHAKE,
		   now);
	kick(w, s);
}

static const struct endpoint_ops r3_ops = {
    .name = "tunnel",
    .multi = true,
    .on_dgram = on_dgram,
    .on_recv_error = on_recv_error,
    .on_sent = on_sent,
    .on_timer = on_timer,
    .on_stream = on_stream,
};

/* The bounds the rung3-* keys check (tun_conf.c), again: a caller's
 * limits never size a table past them. */
static bool limits_ok(const struct tun_r3_limits *l)
{
	return l->conns >= 1 && l->conns <= TUN_R3_CONNS_MAX && l->per_source >= 1 &&
	       l->per_source <= TUN_R3_CONNS_MAX && l->per_token >= 1 &&
	       l->per_token <= TUN_R3_CONNS_MAX && l->max_msg >= WS_MSG_MIN &&
	       l->max_msg <= WS_MSG_MAX && l->backlog >= TUN_R3_BACKLOG_MIN &&
	       l->backlog <= TUN_R3_BACKLOG && l->handshake_ms >= TUN_R3_UPGRADE_MS_MIN &&
	       l->handshake_ms <= TUN_R3_UPGRADE_MS_MAX && l->idle_ms >= TUN_R3_IDLE_MS_MIN &&
	       l->idle_ms <= TUN_R3_IDLE_MS_MAX && l->hs_rate >= 1 && l->hs_rate <= TUN_R3_HS_MAX &&
	       l->hs_burst >= 1 && l->hs_burst <= TUN_R3_HS_MAX && l->hs_ip_rate >= 1 &&
	       l->hs_ip_rate <= TUN_R3_HS_MAX && l->hs_ip_burst >= 1 &&
	       l->hs_ip_burst <= TUN_R3_HS_MAX;
}

int tun_r3_open(struct tun_r3 *w, struct tun_cert *cert, struct tun_tokens *tokens,
		uint16_t wg_port, const struct tun_r3_limits *lim)
{
	uint8_t key[16];
	uint32_t nconns;

	memset(w, 0, sizeof(*w));
	if (!limits_ok(lim))
		return -EINVAL;
	w->lim = *lim;
	w->upgrade_ns = lim->handshake_ms * NS_PER_MS;
	w->idle_ns = lim->idle_ms * NS_PER_MS;
	nconns = lim->conns;
	w->cert = cert;
	w->tokens = tokens;
	w->wg.in.sin_family = AF_INET;
	w->wg.in.sin_port = htons(wg_port);
	w->wg.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	w->conns = calloc(nconns, sizeof(*w->conns));
	rl_random_key(net_random64, key);
	if (!w->conns || srctab_init(&w->src, nconns, lim->per_source, 0) < 0 ||
	    rl_table_init(&w->hs_ip, TUN_R3_RL_ENTRIES, lim->hs_ip_burst, lim->hs_ip_rate, key) <
		0) {
		srctab_free(&w->src);
		free(w->conns);
		w->conns = NULL;
		return -ENOMEM;
	}
	rl_bucket_init(&w->hs, lim->hs_burst, lim->hs_rate, loop_now());
	w->nconns = nconns;
	for (uint32_t k = 0; k < nconns; k++) {
		w->conns[k].fd = w->conns[k].ufd = -1;
		w->conns[k].next_free = k + 1 < nconns ? k + 1 : R3_NONE;
		timer_init(&w->conns[k].timer, 0);
	}
	w->free_head = 0;
	return 0;
}

int tun_r3_attach(struct tun_r3 *w, const struct loop_ops *ops, struct loop *loop,
		  struct endpoint_table *ep)
{
	int a;

	if (!ops->stream_read || !ops->stream_send)
		return -EOPNOTSUPP;
	w->ops = ops;
	w->loop = loop;
	w->ep = ep;
	if ((a = endpoint_add(ep, &r3_ops, w)) < 0)
		return a;
	w->slot = (unsigned)a;
	w->attached = true;
	return 0;
}

void tun_r3_tokens(struct tun_r3 *w)
{
	struct tun_tokset *ns, *old = w->set;
	uint32_t *counts = NULL;
	uint64_t gen, now;

	if (!w->tokens || !tun_tokens_moved(w->tokens, w->gen))
		return;
	ns = tun_tokens_take(w->tokens, &gen);
	if (ns && ns->t.n && !(counts = calloc(ns->t.n, sizeof(*counts)))) {
		tun_tokset_put(ns); /* no memory: the old set stays, tried again */
		return;
	}
	now = loop_now();
	for (uint32_t k = 0; k < w->nconns; k++) {
		struct tun_r3_slot *s = &w->conns[k];
		long t;

		if (s->state != S_OPEN || !s->admitted)
			continue;
		t = tun_token_remap(old ? &old->t : NULL, s->token, ns ? &ns->t : NULL);
		if (t < 0) {
			s->admitted = false; /* its count goes with the old set */
			close_with(w, s, WS_CLOSE_POLICY, TUN_R3_END_TOKEN, now);
			if (w->attached)
				kick(w, s);
			continue;
		}
		s->token = t;
		counts[t]++;
	}
	free(w->per_token);
	w->per_token = counts;
	w->set = ns;
	w->gen = gen;
	tun_tokset_put(old);
}

/* All connections held: the oldest not upgraded yet (none of its bytes
 * on their way out), if TUN_R3_EVICT_AGE old, makes room. */
static void evict_oldest(struct tun_r3 *w, uint64_t now)
{
	struct tun_r3_slot *old = NULL;

	for (uint32_t k = 0; k < w->nconns; k++) {
		struct tun_r3_slot *s = &w->conns[k];

		if (s->state == S_OPEN && !s->admitted && !s->closing && !s->sending &&
		    now - s->start >= TUN_R3_EVICT_AGE && (!old || s->start < old->start))
			old = s;
	}
	if (old)
		finish(w, old, TUN_R3_END_EVICTED);
}

/* May peer begin a handshake now? A token of its source's bucket, then
 * one of the worker's; else refused before OpenSSL sees a byte, counted,
 * and said once a minute. */
static bool hs_budget(struct tun_r3 *w, const union etr_sockaddr *peer, uint64_t now)
{
	enum tun_r3_result r;
	char a[ADDR_STRLEN];

	if (!rl_table_allow(&w->hs_ip, peer, now))
		r = TUN_R3_RATE_SOURCE;
	else if (!rl_take(&w->hs, now))
		r = TUN_R3_RATE_TOTAL;
	else
		return true;
	STAT_ADD(w->st.result[r], 1);
	if (now / NS_PER_MS >= w->hs_log_at) {
		w->hs_log_at = now / NS_PER_MS + TUN_R3_LOG_EVERY_MS;
		if (r == TUN_R3_RATE_SOURCE)
			log_warnx(
			    "tunnel: %s begins rung-3 handshakes faster than "
			    "rung3-handshake-ip-rate %u/s: refused (rate_source; once a minute)",
			    addr_str(&peer->sa, a), w->lim.hs_ip_rate);
		else
			log_warnx("tunnel: rung-3 handshakes over rung3-handshake-rate: refused "
				  "(rate_total; once a minute)");
	}
	return false;
}

int tun_r3_take(struct tun_r3 *w, int fd, const union etr_sockaddr *peer, const uint8_t *pre,
		size_t len, uint64_t now)
{
	struct tun_r3_slot *s;
	struct r3mem *m;

	if (!w->attached)
		return -ENOTCONN;
	tun_r3_tokens(w);
	if (w->free_head == R3_NONE)
		evict_oldest(w, now);
	if (w->free_head == R3_NONE) {
		STAT_ADD(w->st.result[TUN_R3_LIMIT_TOTAL], 1);
		return -ENOSPC;
	}
	if (!hs_budget(w, peer, now))
		return -EAGAIN;
	if (!srctab_take(&w->src, peer)) {
		STAT_ADD(w->st.result[TUN_R3_LIMIT_SOURCE], 1);
		return -EBUSY;
	}
	m = calloc(1, sizeof(*m) + w->lim.max_msg);
	if (!m || !tun_cert_name(w->cert, (int64_t)time(NULL), m->host) ||
	    r3conn_init(&m->c, &w->cert->tls, m->host, m->msg, w->lim.max_msg) < 0) {
		if (m)
			r3conn_free(&m->c); /* nothing, or a session made before a failure */
		free(m);
		srctab_put(&w->src, peer);
		STAT_ADD(w->st.result[TUN_R3_NO_CERT], 1);
		return -ENOENT;
	}
	s = &w->conns[w->free_head];
	w->free_head = s->next_free;
	w->live++;
	s->state = S_OPEN;
	s->reading = s->sending = s->closing = s->admitted = s->counted = false;
	s->end = TUN_R3_ENDS;
	s->fd = fd;
	s->ufd = -1;
	s->token = -1;
	s->peer = *peer;
	s->start = s->last = now;
	s->c = &m->c;
	s->timer.id = id_of(w, s, false);
	STAT_ADD(w->st.open, 1);
	w->ops->timer_set(w->loop, &s->timer, now + w->upgrade_ns);
	feed(w, s, pre, len, now);
	return 0;
}

void tun_r3_bans(struct tun_r3 *w, const struct banlist *b)
{
	for (uint32_t k = 0; k < w->nconns && w->attached && b; k++)
		if (w->conns[k].state == S_OPEN && banlist_match(b, &w->conns[k].peer))
			finish(w, &w->conns[k], TUN_R3_END_BANNED);
}

void tun_r3_shutdown(struct tun_r3 *w)
{
	for (uint32_t k = 0; k < w->nconns && w->attached; k++)
		finish(w, &w->conns[k], TUN_R3_END_SHUTDOWN);
}

void tun_r3_close(struct tun_r3 *w)
{
	for (uint32_t k = 0; k < w->nconns; k++) {
		struct tun_r3_slot *s = &w->conns[k];

		if (s->fd >= 0)
			close(s->fd);
		if (s->ufd >= 0)
			close(s->ufd);
		if (s->c) {
			r3conn_free(s->c);
			free(s->c);
		}
	}
	free(w->conns);
	w->conns = NULL;
	w->nconns = 0;
	free(w->per_token);
	w->per_token = NULL;
	tun_tokset_put(w->set);
	w->set = NULL;
	srctab_free(&w->src);
	rl_table_free(&w->hs_ip);
}
