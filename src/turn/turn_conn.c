/* SPDX-License-Identifier: ISC */
/* The TURN listener's TCP and TLS connections: accept (bans, per-source
 * and TLS handshake budgets, eviction at the cap), their slots and lists
 * (unauthenticated, without an allocation), their send queues (blocks kept
 * for reuse; TLS ciphertext), frame buffers and close; with what a close
 * shares with the files above (an allocation's end, the listener's next
 * deadline). Their bytes: turn_stream.c. */
#include "turn_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "stats.h"

/* The memory a connection's queued sends may hold (counted by block, see
 * tx_cost; TLS: its ciphertext backlog), and that of one not authenticated
 * yet, which has only small answers coming: 8192 of those hold 256 MiB at
 * most. Reads pause at half of it. */
#define TURN_CONN_TX_MAX    (256u << 10)
#define TURN_CONN_TX_UNAUTH (32u << 10)

/* What a connection may hold queued (TURN_CONN_TX_MAX, or
 * TURN_CONN_TX_UNAUTH before a request of its passed MESSAGE-INTEGRITY). */
static size_t conn_tx_max(const struct turn_conn *c)
{
	if (!c->authed)
		return TURN_CONN_TX_UNAUTH;
	return c->tls && TLS_CONN_OUT_MAX < TURN_CONN_TX_MAX ? TLS_CONN_OUT_MAX : TURN_CONN_TX_MAX;
}

/* A conn ref: 16 bits of index, 8 of generation. */
#define TURN_CONN_IDX_BITS 16
#define TURN_CONN_GEN_BITS 8
_Static_assert(REF_FITS(TURN_CONN_IDX_BITS, TURN_CONN_GEN_BITS, ENDPOINT_REF_BITS),
	       "connection refs are endpoint refs");
_Static_assert(TURN_CONN_SLOTS(CONF_TURN_TCP_MAX_CONNECTIONS_MAX) <= 1u << TURN_CONN_IDX_BITS,
	       "connection index bits");

static uint32_t conn_ref(const struct turn_listener *l, uint32_t i)
{
	return ref_pack(i, TURN_CONN_IDX_BITS, l->conns[i].gen, TURN_CONN_GEN_BITS);
}

struct turn_conn *turn_conn_deref(struct turn_listener *l, uint32_t ref, uint32_t *idx)
{
	uint32_t i = ref_idx(ref, TURN_CONN_IDX_BITS);

	if (i >= l->nconns || !l->conns[i].used ||
	    !ref_gen_ok(ref, TURN_CONN_IDX_BITS, TURN_CONN_GEN_BITS, l->conns[i].gen))
		return NULL;
	*idx = i;
	return &l->conns[i];
}

/* Hand a TLS session's next ciphertext to the loop, unless a send of its
 * is there already. A send the loop refuses is tried again on the next
 * write or read. */
void turn_conn_tls_kick(struct turn_listener *l, uint32_t i)
{
	struct turn_conn *c = &l->conns[i];
	const uint8_t *p;
	size_t n;

	if (c->sending || c->fd < 0)
		return;
	n = tls_conn_pending_out(c->tls, &p);
	if (n && l->ops->stream_send(l->loop, c->fd, p, n,
				     endpoint_ref_id(l->slot_conn, conn_ref(l, i))) == 0)
		c->sending = true;
}

/* The TLS side of turn_conn_send: one record of the frame (gathered in tls_tx
 * when it comes in parts). A client whose ciphertext backlog is full
 * loses the frame (send_full says so). */
static bool tls_send(struct turn_listener *l, uint32_t i, const void *a, size_t alen, const void *b,
		     size_t blen, size_t pad)
{
	struct turn_conn *c = &l->conns[i];
	size_t len = alen + blen + pad;
	const void *p = a;
	int rc;

	if (c->closing || c->tls_closing)
		return false;
	/* Ciphertext is about the plaintext's size (a record adds 22 to 40
	 * bytes), and a memory BIO holds just that. */
	if (tls_conn_out_bytes(c->tls) + len > conn_tx_max(c)) {
		l->send_full = true;
		return false;
	}
	if (blen || pad) {
		if (len > TURN_CONN_RX_MAX)
			return false;
		memcpy(l->tls_tx, a, alen);
		if (blen)
			memcpy(l->tls_tx + alen, b, blen);
		memset(l->tls_tx + alen + blen, 0, pad);
		p = l->tls_tx;
	}
	rc = tls_conn_write(c->tls, p, len);
	if (rc < 0) {
		l->send_full = rc == -ENOBUFS;
		return false;
	}
	turn_conn_tls_kick(l, i);
	return true;
}

/* What a send of len bytes holds while queued: its block, TURN_TX_SMALL
 * for a small one (an answer of 40 bytes holds 2000), so that
 * conn_tx_max bounds memory, not payload. */
static size_t tx_cost(size_t len)
{
	return len <= TURN_TX_SMALL ? TURN_TX_SMALL : len;
}

/* A send buffer for len bytes: frames up to TURN_TX_SMALL (a game's
 * datagrams, the answers) come from the listener's cache of such blocks,
 * refilled as sends complete, so the steady state allocates nothing;
 * larger ones are allocated for the send. */
static struct turn_tx *tx_get(struct turn_listener *l, size_t len)
{
	struct turn_tx *t;
	size_t cap = tx_cost(len);

	if (cap == TURN_TX_SMALL && l->tx_cache) {
		t = l->tx_cache;
		l->tx_cache = t->next;
		l->tx_ncache--;
		return t;
	}
	t = malloc(sizeof(*t) + cap);
	if (t)
		t->cap = cap;
	return t;
}

static void tx_put(struct turn_listener *l, struct turn_tx *t)
{
	if (t->cap == TURN_TX_SMALL && l->tx_ncache < TURN_TX_CACHE) {
		t->next = l->tx_cache;
		l->tx_cache = t;
		l->tx_ncache++;
		return;
	}
	free(t);
}

/* Queue len bytes (and pad zero bytes) on a TCP connection; the loop sends
 * them in order. False when the connection has too much queued. */
bool turn_conn_send(struct turn_listener *l, uint32_t i, const void *a, size_t alen, const void *b,
		    size_t blen, size_t pad)
{
	struct turn_conn *c = &l->conns[i];
	size_t len = alen + blen + pad;
	struct turn_tx *t;

	l->send_full = false;
	if (c->tls)
		return tls_send(l, i, a, alen, b, blen, pad);
	/* Behind the send the loop holds, small frames share the last block
	 * while it has room (answers to pipelined requests: a block each
	 * otherwise, and a burst of them past the bound). */
	t = c->tx_tail;
	if (!c->closing && t && t != c->tx_head && t->cap - t->len >= len) {
		memcpy(t->b + t->len, a, alen);
		if (blen)
			memcpy(t->b + t->len + alen, b, blen);
		memset(t->b + t->len + alen + blen, 0, pad);
		t->len += len;
		return true;
	}
	if (!c->closing && c->tx_bytes + tx_cost(len) > conn_tx_max(c))
		l->send_full = true;
	if (c->closing || c->tx_bytes + tx_cost(len) > conn_tx_max(c))
		return false;
	t = tx_get(l, len);
	if (!t)
		return false;
	t->next = NULL;
	t->len = len;
	memcpy(t->b, a, alen);
	if (blen)
		memcpy(t->b + alen, b, blen);
	memset(t->b + alen + blen, 0, pad);
	c->tx_bytes += t->cap;
	if (c->tx_tail) {
		c->tx_tail->next = t;
		c->tx_tail = t;
		return true;
	}
	c->tx_head = c->tx_tail = t;
	if (l->ops->stream_send(l->loop, c->fd, t->b, t->len,
				endpoint_ref_id(l->slot_conn, conn_ref(l, i))) < 0) {
		c->tx_head = c->tx_tail = NULL;
		c->tx_bytes -= t->cap;
		tx_put(l, t);
		return false;
	}
	return true;
}

/* Connections per source on this worker (srctab: IPv4 address and IPv6
 * /64 at tcp-max-per-ip, /56 and /48 at its multiples): one address, one
 * /64, lands on one worker (the reuseport program), so the first level is
 * exact; a /56 or /48 spread over the workers is capped on each. */
/* A frame buffer of cap bytes: past TURN_CONN_RX_KEEP its own pages, so
 * that freeing it gives the memory back to the system at once (a heap
 * keeps what a flood of half frames made it grow to). */
uint8_t *turn_conn_rx_get(size_t cap)
{
	void *p;

	if (cap <= TURN_CONN_RX_KEEP)
		return malloc(cap);
	p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void turn_conn_rx_put(uint8_t *p, size_t cap)
{
	if (!p)
		return;
	if (cap <= TURN_CONN_RX_KEEP)
		free(p);
	else
		munmap(p, cap);
}

/* Give back a connection's frame buffer. */
void turn_conn_rx_free(struct turn_listener *l, struct turn_conn *c)
{
	l->rx_bytes -= c->rxcap;
	turn_conn_rx_put(c->rx, c->rxcap);
	c->rx = NULL;
	c->rxcap = 0;
}

static bool ip_take(struct turn_listener *l, const union etr_sockaddr *a)
{
	return srctab_take(&l->ips, a);
}

static void ip_put(struct turn_listener *l, const union etr_sockaddr *a)
{
	srctab_put(&l->ips, a);
}

void turn_conn_read(struct turn_listener *l, uint32_t i)
{
	struct turn_conn *c = &l->conns[i];

	if (c->reading || c->closing || c->tls_closing || c->tx_bytes > conn_tx_max(c) / 2 ||
	    (c->tls && tls_conn_out_bytes(c->tls) > conn_tx_max(c) / 2))
		return;
	if (l->ops->stream_read(l->loop, c->fd, endpoint_ref_id(l->slot_conn, conn_ref(l, i))) == 0)
		c->reading = true;
	else
		turn_conn_close(l, i);
}

/* Connection i leaves the unauthenticated list (authenticated, or closed). */
static void ua_leave(struct turn_listener *l, uint32_t i)
{
	struct turn_conn *c = &l->conns[i];

	if (c->authed)
		return;
	c->authed = true;
	STAT_ADD(l->stats.conns_unauth, -1);
	if (c->ua_prev == UINT32_MAX)
		l->ua_head = c->ua_next;
	else
		l->conns[c->ua_prev].ua_next = c->ua_next;
	if (c->ua_next == UINT32_MAX)
		l->ua_tail = c->ua_prev;
	else
		l->conns[c->ua_next].ua_prev = c->ua_prev;
}

/* Open connection i, authenticated, holds no allocation (yet, or any
 * more): it joins the na list's tail, once. */
void turn_conn_na_join(struct turn_listener *l, uint32_t i)
{
	struct turn_conn *c = &l->conns[i];

	if (c->on_na || c->fd < 0 || !c->authed || c->alloc != TURN_ALLOC_NONE)
		return;
	c->on_na = true;
	c->na_next = UINT32_MAX;
	c->na_prev = l->na_tail;
	if (l->na_tail == UINT32_MAX)
		l->na_head = i;
	else
		l->conns[l->na_tail].na_next = i;
	l->na_tail = i;
}

/* Connection i leaves the na list (an allocation, or closed). */
void turn_conn_na_leave(struct turn_listener *l, uint32_t i)
{
	struct turn_conn *c = &l->conns[i];

	if (!c->on_na)
		return;
	c->on_na = false;
	if (c->na_prev == UINT32_MAX)
		l->na_head = c->na_next;
	else
		l->conns[c->na_prev].na_next = c->na_next;
	if (c->na_next == UINT32_MAX)
		l->na_tail = c->na_prev;
	else
		l->conns[c->na_next].na_prev = c->na_prev;
}

/* A request on connection conn (index + 1; 0: UDP) passed
 * MESSAGE-INTEGRITY: no longer bound by tcp-auth-timeout. Evictable still
 * until it holds an allocation (na list). */
void turn_conn_authed(struct turn_listener *l, uint32_t conn)
{
	if (conn && conn - 1 < l->nconns && l->conns[conn - 1].fd >= 0) {
		ua_leave(l, conn - 1);
		turn_conn_na_join(l, conn - 1);
	}
}

void turn_timer_arm(struct turn_listener *l)
{
	uint64_t ms = turn_alloc_next_deadline(&l->t);
	uint64_t at = ms == UINT64_MAX ? UINT64_MAX : ms * NS_PER_MS;

	/* While TCP connections are open, a look for idle ones; the oldest
	 * unauthenticated one's tcp-auth-timeout. */
	if (l->nopen && l->sweep_at < at)
		at = l->sweep_at;
	if (l->ua_head != UINT32_MAX &&
	    l->conns[l->ua_head].opened + l->sh->conf->tcp_auth_timeout_ms * NS_PER_MS < at)
		at = l->conns[l->ua_head].opened + l->sh->conf->tcp_auth_timeout_ms * NS_PER_MS;
	if (at == l->timer_at)
		return;
	l->timer_at = at;
	if (at == UINT64_MAX)
		l->ops->timer_cancel(l->loop, &l->timer);
	else if (l->ops->timer_set(l->loop, &l->timer, at) < 0)
		log_warnx("turn %s: timer: out of memory", l->sh->conf->name);
}

/* End allocation idx: its socket leaves the loop, its slot the table. */
void turn_allocation_end(struct turn_listener *l, uint32_t idx)
{
	int fd = l->relay_fd[idx];
	uint32_t conn = l->relay_conn[idx];

	if (fd >= 0) {
		l->ops->del_socket(l->loop, fd,
				   endpoint_ref_id(l->slot_relay, turn_alloc_ref(&l->t, idx)));
		close(fd);
	}
	l->relay_fd[idx] = -1;
	l->relay_conn[idx] = 0;
	turn_peer_port_set(l->sh->live_ports, l->t.a[idx].port, false);
	if (conn && conn - 1 < l->nconns && l->conns[conn - 1].alloc == idx) {
		l->conns[conn - 1].alloc = TURN_ALLOC_NONE;
		l->conns[conn - 1].since = loop_now();
		turn_conn_na_join(l, conn - 1);
	}
	turn_quota_put(&l->sh->quota, l->t.a[idx].quota);
	turn_alloc_remove(&l->t, idx);
	atomic_fetch_sub_explicit(&l->sh->active, 1, memory_order_relaxed);
}

/* Every slot holds a connection: close the oldest one without an
 * allocation, unauthenticated (by its accept) or authenticated (by when it
 * became so: a 486, 508 or 403, a Refresh to 0, an expiry), in constant
 * time (the heads of two lists). Only an allocation protects a connection:
 * RFC 8656 has one per TCP connection, so user-quota bounds the protected
 * ones a credential holds; a signed request alone would not (one
 * credential filled a worker's share with 486s). Not "the source holding
 * the most", as SNI's prereads do: that picks clients behind one NAT
 * address (or a browser's TURN and TURNS at once) before an attacker with
 * one connection per address, and costs a scan of the list per accept. A
 * real client allocates within two or three round trips; to make it give
 * way, an attacker must open tcp-max-connections in that time. False when
 * every open connection holds an allocation. */
static bool conn_evict_one(struct turn_listener *l)
{
	uint32_t i = l->ua_head;

	if (l->na_head != UINT32_MAX &&
	    (i == UINT32_MAX || l->conns[l->na_head].since < l->conns[i].opened))
		i = l->na_head;
	if (i == UINT32_MAX)
		return false;
	STAT_ADD(l->stats.tcp_dropped[TURN_TCP_EVICTED], 1);
	turn_conn_close(l, i);
	return true;
}

/* Free slot i once nothing of its connection is with the loop. */
static void conn_release(struct turn_listener *l, uint32_t i)
{
	struct turn_conn *c = &l->conns[i];

	c->used = false;
	c->gen++;
	c->next_free = l->conn_free;
	l->conn_free = i;
}

/* Free a connection's queue, none of which is with the loop. */
static void conn_tx_drop(struct turn_listener *l, struct turn_conn *c)
{
	while (c->tx_head) {
		struct turn_tx *t = c->tx_head;

		c->tx_head = t->next;
		tx_put(l, t);
	}
	c->tx_tail = NULL;
	c->tx_bytes = 0;
}

void turn_conn_close(struct turn_listener *l, uint32_t i)
{
	struct turn_conn *c = &l->conns[i];

	if (c->fd < 0)
		return;
	if (c->alloc != TURN_ALLOC_NONE) {
		turn_allocation_end(l, c->alloc);
		turn_timer_arm(l);
	}
	c->closing = true;
	l->nopen--;
	ua_leave(l, i);
	turn_conn_na_leave(l, i);
	STAT_ADD(l->stats.conns_open[c->tls ? 1 : 0], -1);
	ip_put(l, &c->client);
	l->ops->del_socket(l->loop, c->fd, endpoint_ref_id(l->slot_conn, conn_ref(l, i)));
	close(c->fd);
	c->fd = -1;
	turn_conn_rx_free(l, c);
	c->rxlen = 0;
	/* Only the head of the queue is with the loop; it gets its on_sent
	 * after del_socket, and the slot is freed then (its buffer must
	 * outlive the send). */
	while (c->tx_head && c->tx_head->next) {
		struct turn_tx *t = c->tx_head->next;

		c->tx_head->next = t->next;
		tx_put(l, t);
	}
	c->tx_tail = c->tx_head;
	/* A handshake that never finished (the client reset or closed, the
	 * auth timeout, an eviction) failed too: a flood of hellos cut off
	 * after the server's flight would show nowhere else. */
	if (c->tls && tls_conn_state(c->tls) == TLS_CONN_HANDSHAKE)
		STAT_ADD(l->stats.tls_failed, 1);
	/* A TLS send with the loop holds the session's bytes: freed in
	 * turn_conn_sent. */
	if (c->tls && !c->sending) {
		tls_conn_free(c->tls);
		c->tls = NULL;
	}
	if (!c->tx_head && !c->tls)
		conn_release(l, i);
}

/* May a new TLS connection from peer have a handshake? One costs this
 * thread (which moves the game's packets too) a few tenths of a ms of
 * crypto for a hello an attacker replays at no cost, so a token of the
 * source's bucket (tls-handshake-ip-rate) and then one of the listener's
 * (tls-handshake-rate, this worker's part) are needed; else the connection
 * is closed at accept, before OpenSSL sees a byte. */
static bool tls_budget_ok(struct turn_listener *l, const union etr_sockaddr *peer, uint64_t now)
{
	const struct turn_conf *c = l->sh->conf;
	char a[ADDR_STRLEN];

	if (!rl_table_allow(&l->tls_ip_rl, peer, now)) {
		STAT_ADD(l->stats.tcp_dropped[TURN_TCP_TLS_RATE_IP], 1);
		if (turn_log_due(l, TURN_LOG_TLS_IP, now / NS_PER_MS))
			log_warnx("turn %s: %s opens TLS connections faster than "
				  "tls-handshake-ip-rate %u/s: closed at accept (tls_rate_ip; "
				  "the first source a minute is named)",
				  c->name, addr_str(&peer->sa, a), c->tls_ip_rate);
		return false;
	}
	if (!rl_take(&l->tls_rl, now)) {
		STAT_ADD(l->stats.tcp_dropped[TURN_TCP_TLS_RATE], 1);
		if (turn_log_due(l, TURN_LOG_TLS_ALL, now / NS_PER_MS))
			log_warnx("turn %s: TLS handshakes over tls-handshake-rate %u/s: new TLS "
				  "connections closed at accept (tls_rate; once a minute)",
				  c->name, c->tls_rate);
		return false;
	}
	return true;
}

/* A connection of the TCP listener, or of the TLS one (tls: its session
 * on the listener's current certificate). */
static void conn_accept(struct turn_listener *l, int fd, bool tls)
{
	union etr_sockaddr peer;
	socklen_t plen = sizeof(peer);
	struct turn_conn *c;
	struct tls_conn *tc = NULL;
	uint32_t i;

	if (fd < 0)
		return;
	if (getpeername(fd, &peer.sa, &plen) < 0) {
		close(fd);
		return;
	}
	/* Banned: closed before any slot, count or TLS byte. */
	if (turn_banned(l, &peer)) {
		STAT_ADD(l->stats.tcp_dropped[TURN_TCP_BANNED], 1);
		close(fd);
		return;
	}
	if (!ip_take(l, &peer)) {
		STAT_ADD(l->stats.tcp_dropped[TURN_TCP_PER_IP], 1);
		close(fd);
		return;
	}
	/* Before an eviction: a refused handshake must not cost a client
	 * its connection. */
	if (tls && !tls_budget_ok(l, &peer, loop_now())) {
		ip_put(l, &peer);
		close(fd);
		return;
	}
	/* At tcp-max-connections one without an allocation gives way;
	 * refused only when all hold one (or every spare slot still sends). */
	if ((l->nopen >= l->tcp_cap && !conn_evict_one(l)) || l->conn_free == UINT32_MAX) {
		char a[ADDR_STRLEN];

		STAT_ADD(l->stats.tcp_dropped[TURN_TCP_FULL], 1);
		if (turn_log_due(l, TURN_LOG_TCP_FULL, loop_now() / NS_PER_MS))
			log_warnx("turn %s: tcp-max-connections %u (%u this worker) all hold "
				  "allocations: a connection from %s refused (full; once a "
				  "minute; user-quota bounds them per credential)",
				  l->sh->conf->name, l->sh->conf->tcp_max_conns, l->tcp_cap,
				  addr_str(&peer.sa, a));
		ip_put(l, &peer);
		close(fd);
		return;
	}
	if (tls && !(tc = tls_conn_new(&l->sh->tls))) {
		ip_put(l, &peer);
		close(fd);
		return;
	}
	i = l->conn_free;
	c = &l->conns[i];
	c->tls = tc;
	c->sending = c->tls_closing = false;
	c->tx_head = c->tx_tail = NULL;
	c->rx = NULL;
	c->rxcap = 0;
	l->conn_free = c->next_free;
	c->used = true;
	c->fd = fd;
	c->client = peer;
	c->rxlen = 0;
	c->tx_bytes = 0;
	c->reading = c->closing = false;
	c->alloc = TURN_ALLOC_NONE;
	c->since = c->opened = loop_now();
	STAT_ADD(l->stats.conns_open[tls ? 1 : 0], 1);
	STAT_ADD(l->stats.conns_unauth, 1);
	c->authed = false;
	c->on_na = false;
	c->ua_next = UINT32_MAX;
	c->ua_prev = l->ua_tail;
	if (l->ua_tail == UINT32_MAX)
		l->ua_head = i;
	else
		l->conns[l->ua_tail].ua_next = i;
	l->ua_tail = i;
	if (l->nopen++ == 0)
		l->sweep_at = c->since + TURN_CONN_SWEEP_MS * NS_PER_MS;
	if (l->nopen == 1 || l->ua_head == i)
		turn_timer_arm(l);
	turn_conn_read(l, i);
}

void turn_conn_tcp_accept(void *obj, uint32_t ref, int fd)
{
	(void)ref;
	conn_accept(obj, fd, false);
}

void turn_conn_tls_accept(void *obj, uint32_t ref, int fd)
{
	(void)ref;
	conn_accept(obj, fd, true);
}

void turn_conn_sent(void *obj, uint32_t ref, int res)
{
	struct turn_listener *l = obj;
	uint32_t i;
	struct turn_conn *c = turn_conn_deref(l, ref, &i);
	struct turn_tx *t;

	if (!c)
		return;
	if (c->tls || c->sending) {
		c->sending = false;
		if (c->fd < 0) {
			tls_conn_free(c->tls);
			c->tls = NULL;
			conn_release(l, i);
			return;
		}
		if (res < 0) {
			turn_conn_close(l, i);
			return;
		}
		tls_conn_out_done(c->tls, (size_t)res);
		turn_conn_tls_kick(l, i);
		if (c->tls_closing && !c->sending)
			turn_conn_close(l, i);
		else
			turn_conn_read(l, i);
		return;
	}
	t = c->tx_head;
	if (!t)
		return;
	c->tx_head = t->next;
	if (!c->tx_head)
		c->tx_tail = NULL;
	c->tx_bytes -= t->cap;
	tx_put(l, t);
	if (c->fd < 0) {
		if (!c->tx_head)
			conn_release(l, i);
		return;
	}
	if (res < 0) {
		turn_conn_close(l, i);
		return;
	}
	if (c->tx_head && l->ops->stream_send(l->loop, c->fd, c->tx_head->b, c->tx_head->len,
					      endpoint_ref_id(l->slot_conn, conn_ref(l, i))) < 0) {
		/* Nothing of the queue is with the loop now: turn_conn_close
		 * would keep the head (and the slot) for an on_sent that
		 * never comes. */
		conn_tx_drop(l, c);
		turn_conn_close(l, i);
		return;
	}
	turn_conn_read(l, i);
}

void turn_conn_recv_error(void *obj, uint32_t ref, int err)
{
	struct turn_listener *l = obj;
	uint32_t i;

	(void)err;
	if (turn_conn_deref(l, ref, &i) && l->conns[i].fd >= 0)
		turn_conn_close(l, i);
}

void turn_conns_free(struct turn_listener *l)
{
	for (uint32_t i = 0; i < l->nconns; i++) {
		struct turn_tx *t = l->conns[i].tx_head, *next;

		if (l->conns[i].fd >= 0)
			close(l->conns[i].fd);
		for (; t; t = next) {
			next = t->next;
			free(t);
		}
		turn_conn_rx_free(l, &l->conns[i]);
		tls_conn_free(l->conns[i].tls);
	}
	free(l->conns);
	l->conns = NULL;
	while (l->tx_cache) {
		struct turn_tx *t = l->tx_cache;

		l->tx_cache = t->next;
		free(t);
	}
	l->tx_ncache = 0;
	srctab_free(&l->ips);
	l->nconns = 0;
}
