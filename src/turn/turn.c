/* SPDX-License-Identifier: ISC */
/* The TURN listener's glue: sockets, the loop's callbacks, the request
 * handlers of RFC 8656 over UDP, TCP and TLS (TCP's framing behind a
 * tls_conn), relaying both ways, expiry, the certificate reload. The
 * protocol's pure parts are stun.c, turn_auth.c, turn_alloc.c and
 * turn_peer.c; this file decides and sends. */
#include "turn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "addrclass.h"
#include "json.h"
#include "log.h"
#include "net.h"
#include "secret.h"
#include "reuseport.h"
#include "stats.h"
#include "stun.h"

/* The copy toward a client when a datagram cannot go as it came (a Data
 * indication, or ChannelData without headroom): the largest message. */
#define TURN_SCRATCH (STUN_HDR_LEN + 0xFFFF)

/* Binds tried for one Allocate before it gets 508: a port someone else
 * holds is set aside (turn_alloc_port_unusable) and the next one tried. */
#define TURN_BIND_TRIES 8
/* The default lifetime and the least granted (RFC 8656 7.2), unless
 * max-lifetime is lower. */
#define TURN_LIFETIME_DEFAULT 600u
/* Room for any answer the server builds (the largest: an Allocate success
 * with two addresses, lifetime, token, integrity and fingerprint). */
#define TURN_ANSWER_MAX 512
/* A TCP connection: the largest frame (a STUN message of 20 + 65535 bytes,
 * or ChannelData with its padding). */
#define TURN_CONN_RX_MAX (STUN_HDR_LEN + 0xFFFF + 4)
/* The most a UDP datagram over IPv4 carries: 65535 - 20 - 8. */
#define TURN_UDP_PAYLOAD_MAX 65507u
/* The memory a connection's queued sends may hold (counted by block, see
 * tx_cost; TLS: its ciphertext backlog), and that of one not authenticated
 * yet, which has only small answers coming: 8192 of those hold 256 MiB at
 * most. Reads pause at half of it. */
#define TURN_CONN_TX_MAX    (256u << 10)
#define TURN_CONN_TX_UNAUTH (32u << 10)
/* A TCP connection without an allocation is closed after TURN_CONN_IDLE_MS
 * (looked for every TURN_CONN_SWEEP_MS). */
#define TURN_CONN_IDLE_MS  30000ull
#define TURN_CONN_SWEEP_MS 5000ull
/* Plaintext taken from a TLS session at a time (a record's worth). */
#define TURN_TLS_RX 16384

/* Shared state */

static int turn_secret_read(const char *var, uint8_t *out, size_t *len, char *err, size_t errlen)
{
	char buf[1024];
	size_t n = 0;
	int rc = secret_from_env("turn", var, buf, sizeof(buf), &n, err, errlen);

	if (rc <= 0) {
		*len = 0;
		explicit_bzero(buf, sizeof(buf));
		return rc;
	}
	memcpy(out, buf, n);
	*len = n;
	explicit_bzero(buf, sizeof(buf));
	return 1;
}

int turn_secrets_read(struct turn_secret_set *out, char *err, size_t errlen)
{
	static const char *const vars[TURN_SECRETS_MAX] = {CONF_TURN_ENV_SECRET,
							   CONF_TURN_ENV_SECRET_NEXT};
	int set = 0;

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < TURN_SECRETS_MAX; i++) {
		int rc = turn_secret_read(vars[i], out->s[i], &out->len[i], err, errlen);

		if (rc < 0) {
			explicit_bzero(out, sizeof(*out));
			return -1;
		}
		set += rc;
	}
	if (set == 0) {
		snprintf(err, errlen,
			 "no TURN secret: set %s (or %s_FILE), at least %d bytes (for example "
			 "`openssl rand -hex 32`); %s is the next one during a rotation",
			 CONF_TURN_ENV_SECRET, CONF_TURN_ENV_SECRET, CONF_TURN_SECRET_MIN,
			 CONF_TURN_ENV_SECRET_NEXT);
		return -1;
	}
	return set;
}

static void cidr_of(const struct conf_cidr *c, struct addr_cidr *out)
{
	memset(out, 0, sizeof(*out));
	if (c->addr.sa.sa_family == AF_INET) {
		out->net[10] = out->net[11] = 0xff;
		memcpy(out->net + 12, &c->addr.in.sin_addr, 4);
		out->bits = (uint8_t)(c->bits + 96);
	} else {
		memcpy(out->net, &c->addr.in6.sin6_addr, 16);
		out->bits = c->bits;
	}
	/* Host bits off: the block is what its prefix says. */
	for (unsigned b = out->bits; b < 128; b++)
		out->net[b / 8] &= (uint8_t) ~(0x80u >> (b % 8));
}

int turn_relay_addr_check(const struct turn_conf *c, char *err, size_t errlen)
{
	union etr_sockaddr a = c->relay_addr;
	char s[ADDR_STRLEN];
	int fd = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = 0;

	if (fd < 0)
		return 0; /* no socket at all: the listener's own bind says why */
	a.in.sin_port = 0; /* the same offset in both families */
	if (bind(fd, &a.sa, addr_len(&a)) < 0 && errno == EADDRNOTAVAIL) {
		addr_str(&a.sa, s);
		if (a.sa.sa_family == AF_INET && strrchr(s, ':'))
			*strrchr(s, ':') = '\0';
		snprintf(err, errlen, "relay-address %s: not an address of this host", s);
		rc = -1;
	}
	close(fd);
	return rc;
}

int turn_shared_init(struct turn_shared *sh, unsigned i, const struct turn_conf *c,
		     unsigned nworkers, char *err, size_t errlen)
{
	struct turn_lshared *l = &sh->l[i];
	uint8_t rnd[32], key[16];
	uint32_t width = (uint32_t)c->port_max - c->port_min + 1;

	if (i == 0) {
		pthread_rwlock_init(&sh->lock, NULL);
		if (turn_secrets_read(&sh->secrets, err, errlen) < 0)
			return -1;
	}
	sh->nworkers = nworkers;
	memset(l, 0, sizeof(*l));
	l->conf = c;
	turn_peer_init(&l->policy);
	for (unsigned k = 0; k < c->ndeny; k++) {
		struct addr_cidr b;

		cidr_of(&c->deny[k], &b);
		turn_peer_deny(&l->policy, &b);
	}
	for (unsigned k = 0; k < c->nallow; k++) {
		struct addr_cidr b;

		cidr_of(&c->allow[k], &b);
		turn_peer_allow(&l->policy, &b);
	}
	/* Client to client: the relayed ports of relay-address (and of
	 * public-ip, the same address behind a NAT). The host's other
	 * addresses and the daemon's sockets: turn_shared_guard. */
	turn_peer_own(&l->policy, &c->relay_addr);
	if (c->public_ip.sa.sa_family == AF_INET || c->public_ip.sa.sa_family == AF_INET6)
		turn_peer_own(&l->policy, &c->public_ip);
	turn_peer_ports(&l->policy, c->port_min, c->port_max);
	turn_peer_live_ports(&l->policy, l->live_ports);
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		for (unsigned k = 0; k < 4; k++) {
			uint64_t v = net_random64();

			memcpy(rnd + 8 * k, &v, 8);
		}
	}
	turn_nonce_key_init(&l->nonce_key, rnd);
	explicit_bzero(rnd, sizeof(rnd));
	rl_random_key(net_random64, key);
	if (turn_quota_init(&l->quota, c->max_allocations, c->user_quota, key) < 0) {
		snprintf(err, errlen, "user-quota: out of memory");
		return -1;
	}
	/* Each worker relays from a slice of its own. */
	if (width < nworkers) {
		snprintf(err, errlen, "ports %u-%u: fewer ports than workers (%u)", c->port_min,
			 c->port_max, nworkers);
		turn_quota_free(&l->quota);
		return -1;
	}
	for (unsigned w = 0; w < nworkers; w++) {
		l->worker_min[w] = (uint16_t)(c->port_min + (uint64_t)width * w / nworkers);
		l->worker_max[w] =
		    (uint16_t)(c->port_min + (uint64_t)width * (w + 1) / nworkers - 1);
	}
	/* A pair that does not load is a startup error; later, a reload
	 * that fails keeps the last good one. */
	if (c->tls_set) {
		int rc = tls_server_init(&l->tls);

		if (rc < 0) {
			snprintf(err, errlen, "tls: %s", strerror(-rc));
			turn_quota_free(&l->quota);
			return -1;
		}
		if (tls_reload_init(&l->reload, &l->tls, c->tls_cert, c->tls_key, loop_now(), err,
				    errlen) < 0) {
			tls_server_free(&l->tls);
			turn_quota_free(&l->quota);
			return -1;
		}
		l->tls_on = true;
	}
	sh->n = i + 1;
	return 0;
}

void turn_shared_reload_tls(struct turn_shared *sh, uint64_t now)
{
	for (unsigned i = 0; i < sh->n; i++) {
		struct turn_lshared *l = &sh->l[i];

		if (!l->tls_on)
			continue;
		switch (tls_reload_check(&l->reload, now)) {
		case TLS_RELOAD_LOADED:
			log_info("SIGHUP: turn %s: certificate reloaded from %s", l->conf->name,
				 l->conf->tls_cert);
			break;
		case TLS_RELOAD_FAILED:
			log_warnx("SIGHUP: turn %s: certificate reload: %s (the last good pair "
				  "stays in force)",
				  l->conf->name, l->reload.error);
			break;
		default:
			/* A broken pair on disk is not tried again until it
			 * changes: say that it is still the broken one. */
			if (memcmp(l->reload.tried, l->reload.in_force, sizeof(l->reload.tried)))
				log_warnx("SIGHUP: turn %s: certificate unchanged since a reload "
					  "that failed (%s); the last good pair stays in force",
					  l->conf->name, l->reload.error);
			else
				log_info("SIGHUP: turn %s: certificate unchanged (%s)",
					 l->conf->name, l->conf->tls_cert);
			break;
		}
	}
}

int turn_shared_reload(struct turn_shared *sh, char *err, size_t errlen)
{
	struct turn_secret_set *fresh = malloc(sizeof(*fresh));
	int set;

	if (!fresh) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	set = turn_secrets_read(fresh, err, errlen);
	if (set > 0) {
		pthread_rwlock_wrlock(&sh->lock);
		memcpy(&sh->secrets, fresh, sizeof(*fresh));
		sh->secrets_gen++;
		pthread_rwlock_unlock(&sh->lock);
	}
	explicit_bzero(fresh, sizeof(*fresh));
	free(fresh);
	return set;
}

void turn_shared_free(struct turn_shared *sh)
{
	for (unsigned i = 0; i < sh->n; i++)
		turn_quota_free(&sh->l[i].quota);
	for (unsigned i = 0; i < sh->n; i++)
		if (sh->l[i].tls_on) {
			tls_reload_free(&sh->l[i].reload);
			tls_server_free(&sh->l[i].tls);
			sh->l[i].tls_on = false;
		}
	if (sh->n)
		pthread_rwlock_destroy(&sh->lock);
	explicit_bzero(&sh->secrets, sizeof(sh->secrets));
	sh->n = 0;
}

/* TCP connections */

struct turn_tx {
	struct turn_tx *next;
	size_t len, cap;
	uint8_t b[];
};

struct turn_conn {
	int fd; /* -1: free or closed */
	uint16_t gen;
	bool used; /* the slot is taken (closed ones until their last send) */
	bool reading, closing;
	union etr_sockaddr client;
	uint8_t *rx; /* a frame cut by a chunk's end: rxlen of its bytes */
	size_t rxlen, rxcap;
	struct turn_tx *tx_head, *tx_tail; /* queued; the head is with the loop */
	size_t tx_bytes;
	uint32_t alloc; /* its allocation, TURN_ALLOC_NONE */
	uint64_t since; /* ns: accepted, or its allocation ended */
	uint64_t opened; /* ns: accepted (tcp-auth-timeout runs from here) */
	bool authed;	 /* a request passed MESSAGE-INTEGRITY; else on ua list */
	uint32_t ua_prev, ua_next;
	bool on_na; /* authenticated, without an allocation: on the na list */
	uint32_t na_prev, na_next;
	uint32_t next_free;
	/* TLS: the session (the tx queue stays empty: ciphertext waits in
	 * it), a send of its with the loop, and an alert or close_notify to
	 * send before the close. */
	struct tls_conn *tls;
	bool sending, tls_closing;
};

/* What a connection may hold queued (TURN_CONN_TX_MAX, or
 * TURN_CONN_TX_UNAUTH before a request of its passed MESSAGE-INTEGRITY). */
static size_t conn_tx_max(const struct turn_conn *c)
{
	if (!c->authed)
		return TURN_CONN_TX_UNAUTH;
	return c->tls && TLS_CONN_OUT_MAX < TURN_CONN_TX_MAX ? TLS_CONN_OUT_MAX : TURN_CONN_TX_MAX;
}

/* A conn ref: 16 bits of index, 8 of generation. */
static uint32_t conn_ref(const struct turn_listener *l, uint32_t i)
{
	return i | (uint32_t)(l->conns[i].gen & 0xff) << 16;
}

static struct turn_conn *conn_deref(struct turn_listener *l, uint32_t ref, uint32_t *idx)
{
	uint32_t i = ref & 0xffff;

	if (i >= l->nconns || !l->conns[i].used || (l->conns[i].gen & 0xff) != (ref >> 16 & 0xff))
		return NULL;
	*idx = i;
	return &l->conns[i];
}

/* Where an answer goes: the client over UDP, or a TCP connection. */
struct turn_ctx {
	struct turn_listener *l;
	union etr_sockaddr client;
	uint32_t conn; /* index + 1 of the TCP connection, 0: UDP */
	uint64_t now;  /* CLOCK_MONOTONIC ns */
	uint64_t now_ms;
	struct turn_5tuple tuple;
};

static void conn_close(struct turn_listener *l, uint32_t i);
static void conn_authed(struct turn_listener *l, uint32_t conn);
static void na_join(struct turn_listener *l, uint32_t i);
static void na_leave(struct turn_listener *l, uint32_t i);

/* Hand a TLS session's next ciphertext to the loop, unless a send of its
 * is there already. A send the loop refuses is tried again on the next
 * write or read. */
static void tls_kick(struct turn_listener *l, uint32_t i)
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

/* The TLS side of conn_send: one record of the frame (gathered in tls_tx
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
	tls_kick(l, i);
	return true;
}

/* A frame buffer of cap bytes: past TURN_CONN_RX_KEEP its own pages, so
 * that freeing it gives the memory back to the system at once (a heap
 * keeps what a flood of half frames made it grow to). */
static uint8_t *rx_get(size_t cap)
{
	void *p;

	if (cap <= TURN_CONN_RX_KEEP)
		return malloc(cap);
	p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void rx_put(uint8_t *p, size_t cap)
{
	if (!p)
		return;
	if (cap <= TURN_CONN_RX_KEEP)
		free(p);
	else
		munmap(p, cap);
}

/* Give back a connection's frame buffer. */
static void conn_rx_free(struct turn_listener *l, struct turn_conn *c)
{
	l->rx_bytes -= c->rxcap;
	rx_put(c->rx, c->rxcap);
	c->rx = NULL;
	c->rxcap = 0;
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
static bool conn_send(struct turn_listener *l, uint32_t i, const void *a, size_t alen,
		      const void *b, size_t blen, size_t pad)
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

/* Send an answer or a message for the client. */
static bool to_client(struct turn_ctx *x, const uint8_t *p, size_t n)
{
	struct turn_listener *l = x->l;

	if (x->conn)
		return conn_send(l, x->conn - 1, p, n, NULL, 0, 0);
	return l->ops->send(l->loop, l->fd, &x->client.sa, addr_len(&x->client), p, n,
			    endpoint_id(l->ep, l->slot_udp)) == 0;
}

/* Answers */

static bool has_fingerprint(const struct stun_msg *m)
{
	return stun_has(m->fingerprint);
}

/* Sign (key non-NULL) and finish an answer, then send it. */
static size_t finish(struct turn_ctx *x, struct stun_builder *b, const struct stun_msg *m,
		     const uint8_t *key)
{
	size_t n;

	if (key) {
		/* The algorithms of the request (RFC 8489 9.2.4), in the order
		 * of 14.5 and 14.6: only FINGERPRINT may follow
		 * MESSAGE-INTEGRITY-SHA256, which a client that checks it
		 * would otherwise find followed by MESSAGE-INTEGRITY. */
		if (stun_has(m->mi) || !stun_has(m->mi256))
			stun_add_integrity(b, key, TURN_KEY_LEN);
		if (stun_has(m->mi256))
			stun_add_integrity_sha256(b, key, TURN_KEY_LEN);
	}
	if (has_fingerprint(m))
		stun_add_fingerprint(b);
	n = stun_build_finish(b);
	if (n == 0 || !to_client(x, b->buf, n)) {
		STAT_ADD(x->l->stats.dropped[TURN_DROP_SEND_FAILED], 1);
		return 0;
	}
	return n;
}

static void add_realm_nonce(struct turn_ctx *x, struct stun_builder *b)
{
	const char *realm = x->l->sh->conf->realm;
	char nonce[TURN_NONCE_SIZE];
	int n = turn_nonce_make(&x->l->sh->nonce_key, &x->client, x->now / NS_PER_SEC, nonce);

	stun_add_attr(b, STUN_A_REALM, realm, strlen(realm));
	if (n > 0)
		stun_add_attr(b, STUN_A_NONCE, nonce, (size_t)n);
}

/* May an answer to an unauthenticated request go out? Each is larger than
 * the request, whose source may be forged (a reflector), and costs the
 * thread the game shares (a 401 or 438 its nonce's HMAC), so it needs a
 * token of the source IP's bucket (unauth-ip-rate) and one of the
 * listener's (unauth-rate: 60000 forged sources get no more than it). Over
 * UDP the answer is withheld. Over TCP and TLS, where requests come
 * pipelined (4 connections of unsigned Allocates moved a UDP Binding's
 * median from 0.07 to 52 ms), the connection is closed instead: a client
 * does not retransmit there, and a withheld answer would leave it waiting
 * for good. A connection authenticated already takes the same tokens (one
 * credential pipelining unsigned Allocates drew 300 000 401s a second and
 * moved the game's p50 to 5-7 ms), but past them only the answer is
 * withheld: its call goes on. */
static bool unauth_ok(struct turn_ctx *x)
{
	struct turn_listener *l = x->l;
	bool ip;

	ip = !rl_table_allow(&l->rl401[x->conn != 0], &x->client, x->now);
	if (!ip && rl_take(&l->unauth_rl[x->conn != 0], x->now))
		return true;
	if (x->conn && l->conns[x->conn - 1].authed) {
		STAT_ADD(l->stats.dropped[ip ? TURN_DROP_THROTTLED : TURN_DROP_THROTTLED_TOTAL], 1);
		return false;
	}
	if (x->conn) {
		STAT_ADD(l->stats.tcp_dropped[ip ? TURN_TCP_UNAUTH_RATE_IP : TURN_TCP_UNAUTH_RATE],
			 1);
		conn_close(l, x->conn - 1);
	} else {
		STAT_ADD(l->stats.dropped[ip ? TURN_DROP_THROTTLED : TURN_DROP_THROTTLED_TOTAL], 1);
	}
	return false;
}

/* --debug: a request refused, with its code and why, so that an operator
 * sees what the counters only count (the debug log's cap bounds it). */
static void debug_refused(const struct turn_ctx *x, const struct stun_msg *m, int code,
			  const char *why)
{
	char a[ADDR_STRLEN];

	if (!log_debug_on)
		return;
	log_debug("turn %s: %s from %s%s: %d %s (%s)", x->l->sh->conf->name,
		  stun_method_name(m->method), addr_str(&x->client.sa, a),
		  x->conn ? " over TCP" : "", code, stun_reason(code), why);
}

/* An error answer; key signs it (NULL: unauthenticated, and limited); why
 * for the debug log. */
static void answer_error(struct turn_ctx *x, const struct stun_msg *m, int code, const uint8_t *key,
			 const char *why)
{
	uint8_t buf[TURN_ANSWER_MAX];
	struct stun_builder b;

	debug_refused(x, m, code, why);
	if (!key && !unauth_ok(x))
		return;
	stun_build_begin(&b, buf, sizeof(buf), stun_type(m->method, STUN_ERROR), m->tid);
	stun_add_error(&b, code, NULL);
	if (code == 420)
		stun_add_unknown_attrs(&b, m->unknown, m->n_unknown);
	if (code == 438)
		add_realm_nonce(x, &b);
	if (finish(x, &b, m, key))
		STAT_ADD(x->l->stats.errors[turn_error_index(code)], 1);
}

/* 401 with REALM and NONCE: the challenge (limited as unauth_ok says). */
static void challenge(struct turn_ctx *x, const struct stun_msg *m)
{
	uint8_t buf[TURN_ANSWER_MAX];
	struct stun_builder b;

	if (!unauth_ok(x))
		return;
	stun_build_begin(&b, buf, sizeof(buf), stun_type(m->method, STUN_ERROR), m->tid);
	stun_add_error(&b, 401, NULL);
	add_realm_nonce(x, &b);
	if (finish(x, &b, m, NULL)) {
		STAT_ADD(x->l->stats.challenges, 1);
		STAT_ADD(x->l->stats.errors[turn_error_index(401)], 1);
	}
}

/* Whether m is signed with the key allocation idx was made with, under its
 * username: then au is that credential's. An allocation keeps its key, so
 * a secret removed (rotation's last step) ends no call in progress. */
static bool signed_as_owner(struct turn_ctx *x, const struct stun_msg *m, uint32_t idx,
			    struct turn_auth *au, bool *expired)
{
	const struct turn_alloc *a;

	if (idx == TURN_ALLOC_NONE)
		return false;
	a = &x->l->t.a[idx];
	if (a->username_len != m->username.len ||
	    memcmp(a->username, stun_attr_ptr(m, m->username), m->username.len) != 0 ||
	    !stun_check_integrity(m, a->key, sizeof(a->key)))
		return false;
	memset(au, 0, sizeof(*au));
	au->secret = -1;
	au->expiry = a->cred_expiry;
	memcpy(au->key, a->key, sizeof(au->key));
	*expired = (uint64_t)time(NULL) > a->cred_expiry;
	return true;
}

/* Log lines of the failed-authentication budget (after those of log_due's
 * enum below). */
enum { TURN_LOG_AUTH_IP = 5, TURN_LOG_AUTH_ALL = 6 };
static bool log_due(struct turn_listener *l, unsigned kind, uint64_t now_ms);

/* A signed request over a failed-authentication budget (auth-fail-ip-rate
 * when ip, else auth-fail-rate with its username's key not kept): no HMAC
 * work for it. Over UDP it is dropped (an answer would feed a reflector);
 * a TCP or TLS connection is closed. Counted, and logged once a minute. */
static void auth_refused(struct turn_ctx *x, bool ip)
{
	struct turn_listener *l = x->l;
	const struct turn_conf *c = l->sh->conf;
	char a[ADDR_STRLEN];

	if (ip && log_due(l, TURN_LOG_AUTH_IP, x->now_ms))
		log_warnx("turn %s: %s fails authentication faster than auth-fail-ip-rate %u/s: "
			  "its signed requests get no check (auth_rate_ip; the first source a "
			  "minute is named)",
			  c->name, addr_str(&x->client.sa, a), c->authf_ip_rate);
	else if (!ip && log_due(l, TURN_LOG_AUTH_ALL, x->now_ms))
		log_warnx("turn %s: failed authentications over auth-fail-rate %u/s: only "
			  "usernames that passed before are checked (auth_rate; once a minute)",
			  c->name, c->authf_rate);
	if (log_debug_on)
		log_debug("turn %s: a request from %s%s not checked: %s spent; %s", c->name,
			  addr_str(&x->client.sa, a), x->conn ? " over TCP" : "",
			  ip ? "auth-fail-ip-rate" : "auth-fail-rate",
			  x->conn ? "connection closed" : "dropped");
	if (x->conn) {
		STAT_ADD(l->stats.tcp_dropped[ip ? TURN_TCP_AUTH_RATE_IP : TURN_TCP_AUTH_RATE], 1);
		conn_close(l, x->conn - 1);
	} else {
		STAT_ADD(l->stats.dropped[ip ? TURN_DROP_AUTH_RATE_IP : TURN_DROP_AUTH_RATE], 1);
	}
}

/* A failed authentication costs its source a token and the listener one. */
static void auth_failed(struct turn_ctx *x)
{
	rl_table_allow(&x->l->authf_ip_rl, &x->client, x->now);
	rl_take(&x->l->authf_rl, x->now);
	rl_stamps_mark(&x->l->authf_net, &x->client, x->now, false);
}

/* The secrets' generation (keys kept under another are not used). */
static uint64_t secrets_gen(struct turn_listener *l)
{
	uint64_t gen;

	pthread_rwlock_rdlock(&l->all->lock);
	gen = l->all->secrets_gen;
	pthread_rwlock_unlock(&l->all->lock);
	return gen;
}

/* Authentication (RFC 8489 9.2.4). 0 with au filled (*expired set for a
 * genuine but expired credential), or -1 when the request was answered.
 * idx: the allocation of the request's 5-tuple (TURN_ALLOC_NONE: none),
 * whose own key is tried before the secrets. */
static int authenticate(struct turn_ctx *x, const struct stun_msg *m, uint32_t idx,
			struct turn_auth *au, bool *expired)
{
	struct turn_listener *l = x->l;
	const char *realm = l->sh->conf->realm;
	struct turn_secrets sec;
	enum turn_auth_result r;
	enum turn_nonce_result nr;
	bool cached_only, over_ip;
	uint64_t gen;

	*expired = false;
	if (!stun_has(m->mi) && !stun_has(m->mi256)) {
		challenge(x, m);
		return -1;
	}
	if (!stun_has(m->username) || !stun_has(m->realm) || !stun_has(m->nonce)) {
		STAT_ADD(l->stats.auth_failures[TURN_AF_MISSING], 1);
		answer_error(x, m, 400, NULL, "USERNAME, REALM or NONCE missing");
		return -1;
	}
	/* The HMAC work of failed checks is budgeted, so that a flood of
	 * forged MACs (over TCP as cheap as over UDP) cannot take the
	 * thread from the game. A source over its budget gets none, but for
	 * the allocation of its 5-tuple (one MAC: the calls of players
	 * behind the same NAT address go on); with the listener's spent, a
	 * client whose key is kept from a success still gets its one MAC. */
	over_ip = !rl_table_has(&l->authf_ip_rl, &x->client, x->now);
	if (over_ip && idx == TURN_ALLOC_NONE) {
		auth_refused(x, true);
		return -1;
	}
	cached_only = rl_available(&l->authf_rl, x->now) == 0 &&
		      rl_stamps_recent(&l->authf_net, &x->client, x->now);
	if (cached_only && idx == TURN_ALLOC_NONE &&
	    !turn_key_cache_has(&l->keys, (const char *)stun_attr_ptr(m, m->username),
				m->username.len, secrets_gen(l))) {
		auth_refused(x, false);
		return -1;
	}
	nr = turn_nonce_check(&l->sh->nonce_key, &x->client,
			      (const char *)stun_attr_ptr(m, m->nonce), m->nonce.len,
			      x->now / NS_PER_SEC,
			      (uint32_t)(l->sh->conf->nonce_lifetime_ms / 1000));
	if (nr != TURN_NONCE_OK) {
		/* Stale: the client's clock or a long pause; bad: never ours
		 * (another process's, forged), which tells probing apart. */
		STAT_ADD(l->stats.auth_failures[nr == TURN_NONCE_STALE ? TURN_AF_STALE_NONCE
								       : TURN_AF_BAD_NONCE],
			 1);
		/* A forged nonce fails over TCP, whose source is proven; over
		 * UDP a forger would spend its victim's budget. */
		if (nr == TURN_NONCE_BAD && x->conn)
			auth_failed(x);
		answer_error(x, m, 438, NULL, nr == TURN_NONCE_STALE ? "stale nonce" : "a nonce never ours");
		return -1;
	}
	if (signed_as_owner(x, m, idx, au, expired)) {
		conn_authed(l, x->conn);
		return 0;
	}
	if (over_ip) {
		auth_refused(x, true);
		return -1;
	}
	pthread_rwlock_rdlock(&l->all->lock);
	for (unsigned i = 0; i < TURN_SECRETS_MAX; i++) {
		sec.secret[i] = l->all->secrets.s[i];
		sec.len[i] = l->all->secrets.len[i];
	}
	gen = l->all->secrets_gen;
	r = turn_auth_check_cached(&sec, gen, &l->keys, cached_only, m, realm, strlen(realm),
				   (uint64_t)time(NULL), au);
	pthread_rwlock_unlock(&l->all->lock);
	switch (r) {
	case TURN_AUTH_OK:
		conn_authed(l, x->conn);
		return 0;
	case TURN_AUTH_EXPIRED:
		/* Genuine, though expired: it passed MESSAGE-INTEGRITY, and may
		 * refresh what it holds; but it gets no allocation, so it does
		 * not make its connection one that cannot be evicted (a
		 * week-old credential filled the table with such). A
		 * connection with an allocation is authenticated by it. */
		*expired = true;
		return 0;
	case TURN_AUTH_UNCACHED:
		auth_refused(x, false);
		return -1;
	case TURN_AUTH_BAD_USERNAME:
		STAT_ADD(l->stats.auth_failures[TURN_AF_BAD_USERNAME], 1);
		auth_failed(x);
		debug_refused(x, m, 401, "a malformed USERNAME (not expiry:userid)");
		break;
	default:
		STAT_ADD(l->stats.auth_failures[TURN_AF_BAD_INTEGRITY], 1);
		auth_failed(x);
		debug_refused(x, m, 401, "wrong MESSAGE-INTEGRITY: another secret or password");
		break;
	}
	challenge(x, m);
	return -1;
}

/* The lifetime to grant for a requested one (seconds), and under
 * strict-expiry no later than the credential's end. */
static uint32_t lifetime_for(const struct turn_listener *l, const struct stun_msg *m,
			     uint64_t cred_expiry)
{
	uint32_t max = (uint32_t)(l->sh->conf->max_lifetime_ms / 1000), want;

	if (!stun_get_lifetime(m, &want))
		want = TURN_LIFETIME_DEFAULT;
	if (want > max)
		want = max;
	if (want < TURN_LIFETIME_DEFAULT)
		want = TURN_LIFETIME_DEFAULT < max ? TURN_LIFETIME_DEFAULT : max;
	if (l->sh->conf->strict_expiry) {
		uint64_t unix_now = (uint64_t)time(NULL);
		uint64_t left = cred_expiry > unix_now ? cred_expiry - unix_now : 1;

		if (left < want)
			want = (uint32_t)left;
	}
	return want;
}

/* Expiry */

static void arm(struct turn_listener *l)
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
static void alloc_end(struct turn_listener *l, uint32_t idx)
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
		na_join(l, conn - 1);
	}
	turn_quota_put(&l->sh->quota, l->t.a[idx].quota);
	turn_alloc_remove(&l->t, idx);
	atomic_fetch_sub_explicit(&l->sh->active, 1, memory_order_relaxed);
}

static void on_timer(void *obj, uint32_t ref, uint64_t now)
{
	struct turn_listener *l = obj;
	uint32_t idx;

	(void)ref;
	l->timer_at = UINT64_MAX;
	while ((idx = turn_alloc_expire(&l->t, now / NS_PER_MS)) != TURN_ALLOC_NONE) {
		alloc_end(l, idx);
		STAT_ADD(l->stats.expired, 1);
	}
	/* No authenticated request within tcp-auth-timeout (oldest first). */
	while (l->ua_head != UINT32_MAX &&
	       now >= l->conns[l->ua_head].opened + l->sh->conf->tcp_auth_timeout_ms * NS_PER_MS) {
		STAT_ADD(l->stats.tcp_dropped[TURN_TCP_AUTH_TIMEOUT], 1);
		conn_close(l, l->ua_head);
	}
	if (l->nopen && now >= l->sweep_at) {
		/* A connection without an allocation for TURN_CONN_IDLE_MS is
		 * closed: it would hold its fd and slot for good. */
		for (uint32_t i = 0; i < l->nconns; i++) {
			struct turn_conn *c = &l->conns[i];

			if (c->fd >= 0 && c->alloc == TURN_ALLOC_NONE &&
			    now - c->since >= TURN_CONN_IDLE_MS * NS_PER_MS) {
				STAT_ADD(l->stats.conns_idle, 1);
				conn_close(l, i);
			}
		}
		l->sweep_at = now + TURN_CONN_SWEEP_MS * NS_PER_MS;
	}
	arm(l);
}

/* Handlers */

static void on_binding(struct turn_ctx *x, const struct stun_msg *m)
{
	uint8_t buf[TURN_ANSWER_MAX];
	struct stun_builder b;

	if (!unauth_ok(x))
		return;
	stun_build_begin(&b, buf, sizeof(buf), stun_type(STUN_BINDING, STUN_SUCCESS), m->tid);
	stun_add_xor_addr(&b, STUN_A_XOR_MAPPED_ADDRESS, &x->client);
	if (finish(x, &b, m, NULL))
		STAT_ADD(x->l->stats.bindings, 1);
}

/* A UDP socket bound to relay-address:port. fd or -errno. */
static int relay_socket(const struct turn_listener *l, uint16_t port)
{
	union etr_sockaddr a = l->sh->conf->relay_addr;
	int fd = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err;

	if (fd < 0)
		return -errno;
	a.in.sin_port = htons(port); /* the same offset in both families */
	if (bind(fd, &a.sa, addr_len(&a)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* An operator must learn why Allocates get 508, and why TCP and TLS
 * connections are closed at accept, without a line per request: the
 * first of each kind a minute per listener. */
enum { TURN_LOG508_FULL, TURN_LOG508_PORTS, TURN_LOG_TLS_IP, TURN_LOG_TLS_ALL, TURN_LOG_TCP_FULL };
#define TURN_LOG_EVERY_MS 60000

static bool log_due(struct turn_listener *l, unsigned kind, uint64_t now_ms)
{
	uint64_t at = atomic_load_explicit(&l->sh->log_at[kind], memory_order_relaxed);

	return now_ms >= at && atomic_compare_exchange_strong_explicit(
				       &l->sh->log_at[kind], &at, now_ms + TURN_LOG_EVERY_MS,
				       memory_order_relaxed, memory_order_relaxed);
}

static void reject(struct turn_ctx *x, const struct stun_msg *m, enum turn_reject why, int code,
		   const uint8_t *key, const char *detail)
{
	char text[128];

	STAT_ADD(x->l->stats.rejected[why], 1);
	snprintf(text, sizeof(text), "%s: %s", turn_reject_name(why), detail);
	answer_error(x, m, code, key, text);
}

/* Remember a success answer for retransmissions of the transaction. */
static void keep(struct turn_ctx *x, uint32_t idx, const struct stun_msg *m, const uint8_t *buf,
		 size_t n)
{
	if (n)
		turn_alloc_txn_store(&x->l->t, idx, m->tid, buf, n, x->now_ms);
}

/* A retransmission of the allocation's last transaction: the same answer. */
static bool resend(struct turn_ctx *x, uint32_t idx, const struct stun_msg *m)
{
	size_t n;
	const uint8_t *p = turn_alloc_txn_find(&x->l->t, idx, m->tid, x->now_ms, &n);

	if (!p)
		return false;
	if (!to_client(x, p, n))
		STAT_ADD(x->l->stats.dropped[TURN_DROP_SEND_FAILED], 1);
	return true;
}

static void on_allocate(struct turn_ctx *x, const struct stun_msg *m)
{
	struct turn_listener *l = x->l;
	const struct turn_conf *conf = l->sh->conf;
	uint32_t idx = turn_alloc_lookup(&l->t, &x->tuple), lifetime, ref;
	uint8_t buf[TURN_ANSWER_MAX], token[8], new_token[8];
	struct turn_alloc_req req;
	struct stun_builder b;
	struct turn_auth au;
	enum turn_alloc_err e = TURN_OK;
	bool expired, reserve = false, even = false;
	uint8_t proto, fam;
	uint16_t port = 0;
	union etr_sockaddr relayed;
	int fd = -1, bind_err = 0;
	uint32_t qe;
	size_t n;

	/* A retransmission on a live 5-tuple is its allocation's (its key). */
	if (authenticate(x, m, idx, &au, &expired) < 0)
		return;
	if (idx != TURN_ALLOC_NONE) {
		if (!resend(x, idx, m))
			reject(x, m, TURN_REJ_EXISTS, 437, au.key, "the 5-tuple has an allocation");
		return;
	}
	if (expired) {
		/* A genuine credential past its expiry gets no new allocation. */
		STAT_ADD(l->stats.auth_failures[TURN_AF_EXPIRED], 1);
		debug_refused(x, m, 401, "an expired credential gets no allocation");
		challenge(x, m);
		return;
	}
	if (atomic_load_explicit(l->all->lifecycle, memory_order_relaxed) != LIFECYCLE_ACTIVE) {
		reject(x, m, TURN_REJ_DRAIN, 403, au.key, "draining");
		return;
	}
	if (!stun_get_requested_transport(m, &proto)) {
		reject(x, m, TURN_REJ_REQUEST, 400, au.key, "no REQUESTED-TRANSPORT");
		return;
	}
	if (proto != STUN_TRANSPORT_UDP) {
		reject(x, m, TURN_REJ_REQUEST, 442, au.key, "a transport other than UDP");
		return;
	}
	if (stun_has(m->requested_family) &&
	    (!stun_get_requested_family(m, &fam) || fam != STUN_FAMILY_IPV4)) {
		reject(x, m, TURN_REJ_REQUEST, 440, au.key, "an address family other than IPv4");
		return;
	}
	if (stun_has(m->even_port) && !stun_get_even_port(m, &reserve)) {
		reject(x, m, TURN_REJ_REQUEST, 400, au.key, "a malformed EVEN-PORT");
		return;
	}
	even = stun_has(m->even_port);
	if (stun_has(m->reservation_token) &&
	    (even || m->reservation_token.len != 8 || stun_has(m->requested_family))) {
		reject(x, m, TURN_REJ_REQUEST, 400, au.key, "RESERVATION-TOKEN with EVEN-PORT or a family");
		return;
	}
	switch (turn_alloc_admit(&l->t, &x->tuple)) {
	case TURN_OK:
		break;
	case TURN_E_EXISTS:
		reject(x, m, TURN_REJ_EXISTS, 437, au.key, "the 5-tuple has an allocation");
		return;
	default:
		/* The worker's table holds as many as its slice of the ports
		 * (or max-allocations, when fewer). With max-allocations
		 * reached across the workers, that is the cause (more ports
		 * would not help); below it, the worker's slice ran out. */
		if (atomic_load_explicit(&l->sh->active, memory_order_relaxed) >=
		    conf->max_allocations) {
			if (log_due(l, TURN_LOG508_FULL, x->now_ms))
				log_warnx("turn %s: Allocate answered 508: max-allocations %u "
					  "reached (more at most once a minute)",
					  conf->name, conf->max_allocations);
			reject(x, m, TURN_REJ_CAP, 508, au.key, "max-allocations reached");
		} else {
			if (log_due(l, TURN_LOG508_PORTS, x->now_ms))
				log_warnx("turn %s: Allocate answered 508: worker %u's ports "
					  "%u-%u are all in use (ports split across the workers; "
					  "more at most once a minute)",
					  conf->name, l->worker, l->sh->worker_min[l->worker],
					  l->sh->worker_max[l->worker]);
			reject(x, m, TURN_REJ_PORTS, 508, au.key, "this worker's relayed ports are all in use");
		}
		return;
	}
	/* The cap holds across the workers. */
	if (atomic_fetch_add_explicit(&l->sh->active, 1, memory_order_relaxed) >=
	    conf->max_allocations) {
		atomic_fetch_sub_explicit(&l->sh->active, 1, memory_order_relaxed);
		if (log_due(l, TURN_LOG508_FULL, x->now_ms))
			log_warnx("turn %s: Allocate answered 508: max-allocations %u reached "
				  "(more at most once a minute)",
				  conf->name, conf->max_allocations);
		reject(x, m, TURN_REJ_CAP, 508, au.key, "max-allocations reached");
		return;
	}
	/* The quota holds across the workers too: counted under the cap's
	 * place, so the userids counted never outnumber max-allocations. From
	 * here every way out gives both back (alloc_end once created). */
	e = turn_quota_take(&l->sh->quota, au.userid, au.userid_len, &qe);
	if (e != TURN_OK) {
		atomic_fetch_sub_explicit(&l->sh->active, 1, memory_order_relaxed);
		reject(x, m,
		       e == TURN_E_QUOTA  ? TURN_REJ_QUOTA
		       : e == TURN_E_FULL ? TURN_REJ_CAP
					  : TURN_REJ_REQUEST,
		       turn_alloc_err_code(e), au.key,
		       e == TURN_E_QUOTA ? "user-quota reached" : "no room in the table");
		return;
	}
	if (stun_has(m->reservation_token))
		memcpy(token, stun_attr_ptr(m, m->reservation_token), 8);
	{
		uint64_t r = net_random64();

		memcpy(new_token, &r, 8);
	}
	for (unsigned i = 0; i < TURN_BIND_TRIES; i++) {
		e = turn_alloc_port_take(&l->t, even, reserve,
					 stun_has(m->reservation_token) ? token : NULL, new_token,
					 x->now_ms, &port);
		if (e != TURN_OK)
			break;
		fd = relay_socket(l, port);
		if (fd >= 0)
			break;
		bind_err = fd;
		if (fd == -EADDRINUSE)
			turn_alloc_port_unusable(&l->t, port, x->now_ms);
		else
			turn_alloc_port_release(&l->t, port, x->now_ms);
		e = TURN_E_NO_PORT;
	}
	if (fd < 0) {
		turn_quota_put(&l->sh->quota, qe);
		atomic_fetch_sub_explicit(&l->sh->active, 1, memory_order_relaxed);
		if (e != TURN_E_TOKEN && log_due(l, TURN_LOG508_PORTS, x->now_ms)) {
			char a[ADDR_STRLEN];

			relayed = conf->relay_addr;
			relayed.in.sin_port = htons(port);
			if (bind_err == 0)
				log_warnx("turn %s: Allocate answered 508: no free relayed port in "
					  "worker %u's slice %u-%u of ports (more at most once a "
					  "minute)",
					  conf->name, l->worker, l->sh->worker_min[l->worker],
					  l->sh->worker_max[l->worker]);
			else
				log_warnx("turn %s: Allocate answered 508: relayed socket: bind %s: "
					  "%s (more at most once a minute)",
					  conf->name, addr_str(&relayed.sa, a), strerror(-bind_err));
		}
		reject(x, m, e == TURN_E_TOKEN ? TURN_REJ_REQUEST : TURN_REJ_PORTS, 508, au.key,
		       e == TURN_E_TOKEN ? "an unknown or expired RESERVATION-TOKEN"
					 : "no relayed port could be bound");
		return;
	}
	lifetime = lifetime_for(l, m, au.expiry);
	memset(&req, 0, sizeof(req));
	req.username = (const char *)stun_attr_ptr(m, m->username);
	req.username_len = m->username.len;
	req.quota = qe;
	req.key = au.key;
	req.cred_expiry = au.expiry;
	req.lifetime_s = lifetime;
	req.family = AF_INET;
	req.port = port;
	e = turn_alloc_create(&l->t, &x->tuple, &req, x->now_ms, &idx);
	if (e != TURN_OK) {
		close(fd);
		turn_alloc_port_release(&l->t, port, x->now_ms);
		turn_quota_put(&l->sh->quota, qe);
		atomic_fetch_sub_explicit(&l->sh->active, 1, memory_order_relaxed);
		reject(x, m, e == TURN_E_FULL ? TURN_REJ_CAP : TURN_REJ_REQUEST,
		       turn_alloc_err_code(e), au.key, "the allocation could not be made");
		return;
	}
	ref = turn_alloc_ref(&l->t, idx);
	if (l->ops->add_socket(l->loop, fd, endpoint_ref_id(l->slot_relay, ref)) < 0) {
		close(fd);
		l->relay_fd[idx] = -1;
		alloc_end(l, idx);
		reject(x, m, TURN_REJ_PORTS, 508, au.key, "the relayed socket could not join the loop");
		return;
	}
	l->relay_fd[idx] = fd;
	l->relay_conn[idx] = x->conn;
	turn_peer_port_set(l->sh->live_ports, port, true);
	if (x->conn) {
		l->conns[x->conn - 1].alloc = idx;
		na_leave(l, x->conn - 1);
	}
	STAT_ADD(l->stats.allocations, 1);
	relayed = conf->relay_addr;
	relayed.in.sin_port = htons(port);
	stun_build_begin(&b, buf, sizeof(buf), stun_type(STUN_ALLOCATE, STUN_SUCCESS), m->tid);
	stun_add_xor_addr(&b, STUN_A_XOR_RELAYED_ADDRESS, &relayed);
	stun_add_u32(&b, STUN_A_LIFETIME, lifetime);
	if (reserve)
		stun_add_attr(&b, STUN_A_RESERVATION_TOKEN, new_token, 8);
	stun_add_xor_addr(&b, STUN_A_XOR_MAPPED_ADDRESS, &x->client);
	n = finish(x, &b, m, au.key);
	keep(x, idx, m, buf, n);
	arm(l);
}

/* The allocation a request is about, authenticated as its owner: its index,
 * or TURN_ALLOC_NONE when the request was answered (437, 441, 401...). */
static uint32_t owned(struct turn_ctx *x, const struct stun_msg *m, struct turn_auth *au,
		      bool *expired)
{
	struct turn_listener *l = x->l;
	uint32_t idx;
	const struct turn_alloc *a;

	idx = turn_alloc_lookup(&l->t, &x->tuple);
	if (authenticate(x, m, idx, au, expired) < 0)
		return TURN_ALLOC_NONE;
	if (idx == TURN_ALLOC_NONE) {
		answer_error(x, m, 437, au->key, "no allocation on this 5-tuple");
		return TURN_ALLOC_NONE;
	}
	a = &l->t.a[idx];
	if (a->username_len != m->username.len ||
	    memcmp(a->username, stun_attr_ptr(m, m->username), m->username.len) != 0) {
		STAT_ADD(l->stats.auth_failures[TURN_AF_WRONG_USER], 1);
		answer_error(x, m, 441, au->key, "not the allocation's username");
		return TURN_ALLOC_NONE;
	}
	if (*expired && l->sh->conf->strict_expiry) {
		STAT_ADD(l->stats.auth_failures[TURN_AF_EXPIRED], 1);
		debug_refused(x, m, 401, "an expired credential under strict-expiry");
		challenge(x, m);
		return TURN_ALLOC_NONE;
	}
	return idx;
}

static void on_refresh(struct turn_ctx *x, const struct stun_msg *m)
{
	struct turn_listener *l = x->l;
	uint8_t buf[TURN_ANSWER_MAX];
	struct stun_builder b;
	struct turn_auth au;
	bool expired;
	uint32_t idx, want = 1;
	size_t n;

	if ((idx = owned(x, m, &au, &expired)) == TURN_ALLOC_NONE || resend(x, idx, m))
		return;
	if (stun_has(m->lifetime) && stun_get_lifetime(m, &want) && want == 0) {
		alloc_end(l, idx);
		stun_build_begin(&b, buf, sizeof(buf), stun_type(STUN_REFRESH, STUN_SUCCESS),
				 m->tid);
		stun_add_u32(&b, STUN_A_LIFETIME, 0);
		finish(x, &b, m, au.key);
		arm(l);
		return;
	}
	want = lifetime_for(l, m, l->t.a[idx].cred_expiry);
	turn_alloc_refresh(&l->t, idx, want, x->now_ms);
	stun_build_begin(&b, buf, sizeof(buf), stun_type(STUN_REFRESH, STUN_SUCCESS), m->tid);
	stun_add_u32(&b, STUN_A_LIFETIME, want);
	n = finish(x, &b, m, au.key);
	keep(x, idx, m, buf, n);
	arm(l);
}

/* How often a worker reads the host's addresses again (when it judges a
 * peer): an address added at run time is the host's within a second. */
#define TURN_HOSTS_EVERY_MS 1000ull

/* Whether the relay may send to peer (turn_peer_check: the relay's own
 * address only on relayed ports with a live allocation, never another
 * service of the host). ip_only: a CreatePermission's, port ignored. */
static bool peer_ok(struct turn_ctx *x, const union etr_sockaddr *peer, bool ip_only)
{
	struct turn_listener *l = x->l;

	if (x->now - l->hosts_at >= TURN_HOSTS_EVERY_MS * NS_PER_MS) {
		union etr_sockaddr local[TURN_PEER_HOST_MAX];
		size_t n = net_local_addrs(local, TURN_PEER_HOST_MAX);

		l->hosts_at = x->now;
		if (n) { /* getifaddrs failed: the last list stays */
			turn_peer_hosts_clear(&l->policy);
			for (size_t k = 0; k < n; k++)
				turn_peer_host(&l->policy, &local[k]);
		}
	}
	return turn_peer_ok(turn_peer_check(&l->policy, peer, ip_only));
}

/* Whether ban-file holds a (a client or a peer). */
static bool banned(const struct turn_listener *l, const union etr_sockaddr *a)
{
	return l->bans && banlist_match(l->bans, a);
}

/* A 403 for a refused peer, naming the peer and the policy's reason. */
static void refuse_peer(struct turn_ctx *x, const struct stun_msg *m, const union etr_sockaddr *peer,
			bool ip_only, const uint8_t *key)
{
	char a[ADDR_STRLEN], why[ADDR_STRLEN + 40];

	STAT_ADD(x->l->stats.peer_rejected, 1);
	if (log_debug_on)
		snprintf(why, sizeof(why), "peer %s: %s", addr_str(&peer->sa, a),
			 banned(x->l, peer)
				 ? "banned"
				 : turn_peer_why_str(turn_peer_check(&x->l->policy, peer, ip_only)));
	answer_error(x, m, 403, key, log_debug_on ? why : "");
}

static void on_permission(struct turn_ctx *x, const struct stun_msg *m)
{
	struct turn_listener *l = x->l;
	union etr_sockaddr peers[STUN_PEERS_MAX];
	uint8_t buf[TURN_ANSWER_MAX];
	struct stun_builder b;
	struct turn_auth au;
	bool expired;
	uint32_t idx;

	if ((idx = owned(x, m, &au, &expired)) == TURN_ALLOC_NONE)
		return;
	if (m->n_peer == 0) {
		answer_error(x, m, 400, au.key, "no XOR-PEER-ADDRESS");
		return;
	}
	for (unsigned i = 0; i < m->n_peer; i++) {
		if (stun_get_xor_addr(m, m->peer[i], &peers[i]) < 0) {
			answer_error(x, m, 400, au.key, "a malformed XOR-PEER-ADDRESS");
			return;
		}
		/* The policy before the family: a refused IPv6 form (::1,
		 * ::ffff:169.254.169.254, NAT64, 6to4) is refused and counted
		 * as such, not merely a mismatch (443). */
		if (!peer_ok(x, &peers[i], true) || banned(l, &peers[i])) {
			refuse_peer(x, m, &peers[i], true, au.key);
			return;
		}
		if (peers[i].sa.sa_family != AF_INET) {
			answer_error(x, m, 443, au.key, "an IPv6 peer for an IPv4 allocation");
			return;
		}
	}
	/* All or none: a 508 leaves no permission of this request behind. */
	if (turn_alloc_permit_all(&l->t, idx, peers, m->n_peer, x->now_ms) != TURN_OK) {
		answer_error(x, m, turn_alloc_err_code(TURN_E_PERM_FULL), au.key,
			     "the allocation's permissions are all taken");
		return;
	}
	stun_build_begin(&b, buf, sizeof(buf), stun_type(STUN_CREATE_PERMISSION, STUN_SUCCESS),
			 m->tid);
	finish(x, &b, m, au.key);
	arm(l);
}

static void on_channel_bind(struct turn_ctx *x, const struct stun_msg *m)
{
	struct turn_listener *l = x->l;
	union etr_sockaddr peer;
	uint8_t buf[TURN_ANSWER_MAX];
	struct stun_builder b;
	struct turn_auth au;
	enum turn_alloc_err e;
	bool expired;
	uint16_t ch;
	uint32_t idx;

	if ((idx = owned(x, m, &au, &expired)) == TURN_ALLOC_NONE)
		return;
	if (m->n_peer != 1 || !stun_get_channel(m, &ch) ||
	    stun_get_xor_addr(m, m->peer[0], &peer) < 0) {
		answer_error(x, m, 400, au.key, "a malformed CHANNEL-NUMBER or XOR-PEER-ADDRESS");
		return;
	}
	if (!peer_ok(x, &peer, false) || banned(l, &peer)) { /* before the family, as above */
		refuse_peer(x, m, &peer, false, au.key);
		return;
	}
	if (peer.sa.sa_family != AF_INET) {
		answer_error(x, m, 443, au.key, "an IPv6 peer for an IPv4 allocation");
		return;
	}
	e = turn_alloc_bind(&l->t, idx, ch, &peer, x->now_ms);
	if (e != TURN_OK) {
		answer_error(x, m, turn_alloc_err_code(e), au.key, turn_alloc_err_str(e));
		return;
	}
	stun_build_begin(&b, buf, sizeof(buf), stun_type(STUN_CHANNEL_BIND, STUN_SUCCESS), m->tid);
	finish(x, &b, m, au.key);
	arm(l);
}

/* Send bytes to a peer from allocation idx's relayed socket: the received
 * buffer itself when there is one (d, narrowed to the payload), else a copy. */
static void to_peer(struct turn_ctx *x, uint32_t idx, const union etr_sockaddr *peer,
		    const uint8_t *p, size_t n, struct loop_dgram *d)
{
	struct turn_listener *l = x->l;
	int fd = l->relay_fd[idx], rc;
	uint32_t id = endpoint_ref_id(l->slot_relay, turn_alloc_ref(&l->t, idx));

	/* A frame over TCP can hold more than a UDP datagram over IPv4 (the
	 * relayed family) carries. */
	if (n > TURN_UDP_PAYLOAD_MAX) {
		STAT_ADD(l->stats.dropped[TURN_DROP_OVERSIZE], 1);
		return;
	}

	if (d) {
		/* p is inside d's bytes: narrow d to it. */
		d->data += p - d->data;
		d->len = n;
		rc = l->ops->forward(l->loop, fd, &peer->sa, addr_len(peer), d, id);
	} else {
		rc = l->ops->send(l->loop, fd, &peer->sa, addr_len(peer), p, n, id);
	}
	if (rc < 0) {
		STAT_ADD(l->stats.dropped[TURN_DROP_SEND_FAILED], 1);
		return;
	}
	STAT_ADD(l->stats.dgrams_to_peer, 1);
	STAT_ADD(l->stats.bytes_to_peer, n);
	l->t.a[idx].dgrams_to_peer++;
	l->t.a[idx].bytes_to_peer += n;
}

static void on_send(struct turn_ctx *x, const struct stun_msg *m, struct loop_dgram *d)
{
	struct turn_listener *l = x->l;
	uint32_t idx = turn_alloc_lookup(&l->t, &x->tuple);
	union etr_sockaddr peer;

	if (idx == TURN_ALLOC_NONE) {
		STAT_ADD(l->stats.dropped[TURN_DROP_NO_ALLOCATION], 1);
		return;
	}
	if (m->n_peer != 1 || !stun_has(m->data) || stun_get_xor_addr(m, m->peer[0], &peer) < 0 ||
	    peer.sa.sa_family != AF_INET) {
		STAT_ADD(l->stats.dropped[TURN_DROP_MALFORMED], 1);
		return;
	}
	if (!turn_alloc_permitted(&l->t, idx, &peer, x->now_ms)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_NO_PERMISSION], 1);
		return;
	}
	if (!peer_ok(x, &peer, false)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_PEER_REFUSED], 1);
		return;
	}
	to_peer(x, idx, &peer, stun_attr_ptr(m, m->data), m->data.len, d);
}

static void on_channel_data(struct turn_ctx *x, const uint8_t *p, size_t n, struct loop_dgram *d)
{
	struct turn_listener *l = x->l;
	uint32_t idx = turn_alloc_lookup(&l->t, &x->tuple);
	union etr_sockaddr peer;
	const uint8_t *data;
	uint16_t ch;
	size_t len;

	if (stun_chan_parse(p, n, &ch, &data, &len) < 0) {
		STAT_ADD(l->stats.dropped[TURN_DROP_MALFORMED], 1);
		return;
	}
	if (idx == TURN_ALLOC_NONE) {
		STAT_ADD(l->stats.dropped[TURN_DROP_NO_ALLOCATION], 1);
		return;
	}
	if (!turn_alloc_chan_peer(&l->t, idx, ch, x->now_ms, &peer)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_NO_CHANNEL], 1);
		return;
	}
	/* Bound to another client's relayed port whose allocation has
	 * ended since: another service may hold that port now. */
	if (turn_peer_own_dead(&l->policy, &peer)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_PEER_REFUSED], 1);
		return;
	}
	to_peer(x, idx, &peer, data, len, d);
}

/* One message from a client (a datagram, or a frame of a TCP stream). d is
 * the datagram when the payload may be forwarded without a copy. */
static void on_message(struct turn_ctx *x, const uint8_t *p, size_t n, struct loop_dgram *d)
{
	struct turn_listener *l = x->l;
	struct stun_msg m;
	int rc;

	switch (stun_demux(p, n)) {
	case STUN_DEMUX_CHANNEL:
		on_channel_data(x, p, n, d);
		return;
	case STUN_DEMUX_STUN:
		break;
	default:
		STAT_ADD(l->stats.dropped[TURN_DROP_NOT_TURN], 1);
		return;
	}
	rc = stun_parse(p, n, &m);
	if (rc == STUN_E_TOO_MANY && m.cls == STUN_REQUEST) {
		/* More XOR-PEER-ADDRESS than the codec keeps: an answer, not
		 * silence (the client would only retransmit). */
		answer_error(x, &m, 400, NULL, "too many XOR-PEER-ADDRESS");
		return;
	}
	if (rc < 0) {
		STAT_ADD(l->stats.dropped[TURN_DROP_MALFORMED], 1);
		return;
	}
	if (m.cls == STUN_INDICATION) {
		if (m.method == STUN_SEND)
			on_send(x, &m, d);
		else
			STAT_ADD(l->stats.dropped[TURN_DROP_UNEXPECTED], 1);
		return;
	}
	if (m.cls != STUN_REQUEST) {
		STAT_ADD(l->stats.dropped[TURN_DROP_UNEXPECTED], 1);
		return;
	}
	if (m.n_unknown) {
		answer_error(x, &m, 420, NULL, "unknown comprehension-required attributes");
		return;
	}
	switch (m.method) {
	case STUN_BINDING:
		on_binding(x, &m);
		break;
	case STUN_ALLOCATE:
		on_allocate(x, &m);
		break;
	case STUN_REFRESH:
		on_refresh(x, &m);
		break;
	case STUN_CREATE_PERMISSION:
		on_permission(x, &m);
		break;
	case STUN_CHANNEL_BIND:
		on_channel_bind(x, &m);
		break;
	default:
		answer_error(x, &m, 400, NULL, "a method TURN does not serve");
		break;
	}
}

static void ctx_init(struct turn_ctx *x, struct turn_listener *l, uint64_t now, uint32_t conn)
{
	x->l = l;
	x->now = now;
	x->now_ms = now / NS_PER_MS;
	x->conn = conn;
	memset(&x->tuple, 0, sizeof(x->tuple));
	x->tuple.client = x->client;
	x->tuple.listener = (uint16_t)l->index;
	x->tuple.transport = !conn ? TURN_UDP : l->conns[conn - 1].tls ? TURN_TLS : TURN_TCP;
	x->tuple.conn = conn;
}

/* The listener's UDP socket. */
static void udp_dgram(void *obj, uint32_t ref, struct loop_dgram *d)
{
	struct turn_listener *l = obj;
	struct turn_ctx x;

	(void)ref;
	if (d->truncated) {
		STAT_ADD(l->stats.dropped[TURN_DROP_TRUNCATED], 1);
		return;
	}
	if (!d->from || !addr_from(&x.client, d->from, d->fromlen)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_NOT_TURN], 1);
		return;
	}
	/* Before any parsing: a banned client gets no answer, and its
	 * allocation (if a reload banned it while it lived) no Refresh. */
	if (banned(l, &x.client)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_BANNED], 1);
		return;
	}
	ctx_init(&x, l, d->now, 0);
	on_message(&x, d->data, d->len, d);
}

static void udp_recv_error(void *obj, uint32_t ref, int err)
{
	(void)obj;
	(void)ref;
	log_debug("turn: receive: %s", strerror(-err));
}

/* A peer's datagram on a relayed socket: ChannelData when the peer has a
 * channel, else a Data indication; nothing without a permission. */
static void relay_dgram(void *obj, uint32_t ref, struct loop_dgram *d)
{
	struct turn_listener *l = obj;
	uint32_t idx = turn_alloc_deref(&l->t, ref);
	union etr_sockaddr peer;
	struct turn_ctx x;
	uint64_t now_ms = d->now / NS_PER_MS;
	uint8_t *buf = l->scratch;
	uint16_t ch;
	size_t n = d->len;

	if (idx == TURN_ALLOC_NONE)
		return; /* a late datagram of a closed allocation */
	if (d->truncated) {
		STAT_ADD(l->stats.dropped[TURN_DROP_TRUNCATED], 1);
		return;
	}
	if (!d->from || !addr_from(&peer, d->from, d->fromlen) ||
	    !turn_alloc_permitted(&l->t, idx, &peer, now_ms)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_NO_PERMISSION], 1);
		return;
	}
	/* A peer banned after its permission was made: not carried. */
	if (banned(l, &peer)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_BANNED], 1);
		return;
	}
	x.client = l->t.a[idx].tuple.client;
	ctx_init(&x, l, d->now, l->relay_conn[idx]);
	ch = turn_alloc_chan_of(&l->t, idx, &peer, now_ms);
	if (ch) {
		uint8_t hdr[STUN_CHAN_HDR_LEN], *p;

		stun_chan_header(hdr, ch, (uint16_t)n);
		if (x.conn) {
			if (!conn_send(l, x.conn - 1, hdr, sizeof(hdr), d->data, n,
				       stun_chan_pad(n)))
				goto fail;
		} else if ((p = loop_dgram_prepend(d, STUN_CHAN_HDR_LEN)) != NULL) {
			memcpy(p, hdr, sizeof(hdr));
			if (l->ops->forward(l->loop, l->fd, &x.client.sa, addr_len(&x.client), d,
					    endpoint_id(l->ep, l->slot_udp)) < 0)
				goto fail;
		} else {
			size_t len = stun_chan_build(buf, TURN_SCRATCH, ch, d->data, n, false);

			if (!len || !to_client(&x, buf, len))
				goto fail;
		}
	} else {
		struct stun_builder b;
		uint8_t tid[STUN_TID_LEN];
		uint64_t seq = l->tid_base[0] ^ l->tid_seq++;
		size_t len;

		/* A Data indication: a copy (its DATA needs padding behind
		 * the payload, where a GRO train's next datagram may be). */
		memcpy(tid, &seq, 8);
		memcpy(tid + 8, &l->tid_base[1], 4);
		stun_build_begin(&b, buf, TURN_SCRATCH, stun_type(STUN_DATA, STUN_INDICATION), tid);
		stun_add_xor_addr(&b, STUN_A_XOR_PEER_ADDRESS, &peer);
		stun_add_attr(&b, STUN_A_DATA, d->data, n);
		len = stun_build_finish(&b);
		if (!len || !to_client(&x, buf, len))
			goto fail;
	}
	STAT_ADD(l->stats.dgrams_to_client, 1);
	STAT_ADD(l->stats.bytes_to_client, n);
	l->t.a[idx].dgrams_to_client++;
	l->t.a[idx].bytes_to_client += n;
	return;
fail:
	STAT_ADD(l->stats.dropped[x.conn && l->send_full ? TURN_DROP_CLIENT_SLOW
							 : TURN_DROP_SEND_FAILED],
		 1);
}

static void relay_recv_error(void *obj, uint32_t ref, int err)
{
	(void)obj;
	(void)ref;
	/* ICMP port unreachable from a peer: nothing to do for the client. */
	log_debug("turn: relayed socket: %s", strerror(-err));
}

/* TCP */

/* Connections per source on this worker (srctab: IPv4 address and IPv6
 * /64 at tcp-max-per-ip, /56 and /48 at its multiples): one address, one
 * /64, lands on one worker (the reuseport program), so the first level is
 * exact; a /56 or /48 spread over the workers is capped on each. */
static bool ip_take(struct turn_listener *l, const union etr_sockaddr *a)
{
	return srctab_take(&l->ips, a);
}

static void ip_put(struct turn_listener *l, const union etr_sockaddr *a)
{
	srctab_put(&l->ips, a);
}

static void conn_read(struct turn_listener *l, uint32_t i)
{
	struct turn_conn *c = &l->conns[i];

	if (c->reading || c->closing || c->tls_closing || c->tx_bytes > conn_tx_max(c) / 2 ||
	    (c->tls && tls_conn_out_bytes(c->tls) > conn_tx_max(c) / 2))
		return;
	if (l->ops->stream_read(l->loop, c->fd, endpoint_ref_id(l->slot_conn, conn_ref(l, i))) == 0)
		c->reading = true;
	else
		conn_close(l, i);
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
static void na_join(struct turn_listener *l, uint32_t i)
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
static void na_leave(struct turn_listener *l, uint32_t i)
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
static void conn_authed(struct turn_listener *l, uint32_t conn)
{
	if (conn && conn - 1 < l->nconns && l->conns[conn - 1].fd >= 0) {
		ua_leave(l, conn - 1);
		na_join(l, conn - 1);
	}
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
	conn_close(l, i);
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

static void conn_close(struct turn_listener *l, uint32_t i)
{
	struct turn_conn *c = &l->conns[i];

	if (c->fd < 0)
		return;
	if (c->alloc != TURN_ALLOC_NONE) {
		alloc_end(l, c->alloc);
		arm(l);
	}
	c->closing = true;
	l->nopen--;
	ua_leave(l, i);
	na_leave(l, i);
	STAT_ADD(l->stats.conns_open[c->tls ? 1 : 0], -1);
	ip_put(l, &c->client);
	l->ops->del_socket(l->loop, c->fd, endpoint_ref_id(l->slot_conn, conn_ref(l, i)));
	close(c->fd);
	c->fd = -1;
	conn_rx_free(l, c);
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
	 * conn_sent. */
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
		if (log_due(l, TURN_LOG_TLS_IP, now / NS_PER_MS))
			log_warnx("turn %s: %s opens TLS connections faster than "
				  "tls-handshake-ip-rate %u/s: closed at accept (tls_rate_ip; "
				  "the first source a minute is named)",
				  c->name, addr_str(&peer->sa, a), c->tls_ip_rate);
		return false;
	}
	if (!rl_take(&l->tls_rl, now)) {
		STAT_ADD(l->stats.tcp_dropped[TURN_TCP_TLS_RATE], 1);
		if (log_due(l, TURN_LOG_TLS_ALL, now / NS_PER_MS))
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
	if (banned(l, &peer)) {
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
	if ((l->nopen >= l->tcp_cap && !conn_evict_one(l)) ||
	    l->conn_free == UINT32_MAX) {
		char a[ADDR_STRLEN];

		STAT_ADD(l->stats.tcp_dropped[TURN_TCP_FULL], 1);
		if (log_due(l, TURN_LOG_TCP_FULL, loop_now() / NS_PER_MS))
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
		arm(l);
	conn_read(l, i);
}

static void tcp_accept(void *obj, uint32_t ref, int fd)
{
	(void)ref;
	conn_accept(obj, fd, false);
}

static void tls_accept(void *obj, uint32_t ref, int fd)
{
	(void)ref;
	conn_accept(obj, fd, true);
}

/* The connection other than c holding the largest partial frame, larger
 * than need, or UINT32_MAX: a scan, only when the worker's frame memory is
 * spent (each such eviction cost its sender that many bytes). */
static uint32_t rx_largest(const struct turn_listener *l, const struct turn_conn *c, size_t need)
{
	uint32_t v = UINT32_MAX;
	size_t most = need;

	for (uint32_t k = 0; k < l->nconns; k++)
		if (&l->conns[k] != c && l->conns[k].fd >= 0 && l->conns[k].rxcap > most) {
			most = l->conns[k].rxcap;
			v = k;
		}
	return v;
}

/* Room for need bytes of a partial frame of frame bytes (0: its length not
 * known yet), within the worker's TURN_CONN_RX_TOTAL. The buffer grows
 * with the bytes that came, doubling (the copies stay linear in the
 * frame), never past the frame: what a header announces costs nothing
 * until it arrives (334 headers of 64 KiB, 1.3 KB sent, spent 16 MiB).
 * False closes the connection. */
static bool conn_room(struct turn_listener *l, struct turn_conn *c, size_t need, size_t frame)
{
	uint8_t *p;

	if (need <= c->rxcap)
		return true;
	if (need > TURN_CONN_RX_MAX)
		return false;
	if (need < 2 * c->rxcap)
		need = 2 * c->rxcap;
	if (need < 512)
		need = 512;
	if (frame && need > frame)
		need = frame;
	/* The worker's room is spent: the connection holding the largest
	 * partial frame, larger than this one's would be, gives way (attack
	 * round 12: authenticated connections holding 65000 bytes of 65540
	 * closed every client whose frame came in two segments); with none
	 * larger, this one is closed. */
	while (l->rx_bytes - c->rxcap + need > TURN_CONN_RX_TOTAL) {
		uint32_t v = rx_largest(l, c, need);

		STAT_ADD(l->stats.tcp_dropped[TURN_TCP_FRAME_MEMORY], 1);
		if (v == UINT32_MAX)
			return false;
		conn_close(l, v);
	}
	p = rx_get(need);
	if (!p)
		return false;
	if (c->rxlen)
		memcpy(p, c->rx, c->rxlen);
	rx_put(c->rx, c->rxcap);
	l->rx_bytes += need - c->rxcap;
	c->rx = p;
	c->rxcap = need;
	return true;
}

/* Before an authenticated request a connection sends small STUN requests
 * only: ChannelData (no channel can be bound yet) or a frame over
 * TURN_CONN_UNAUTH_FRAME closes it, counted. p: the frame's first n bytes
 * (n >= 1), flen its length (0: not known yet). False when closed. */
static bool conn_frame_ok(struct turn_listener *l, uint32_t i, const uint8_t *p, size_t n, int flen)
{
	enum turn_tcp_drop why;

	if (l->conns[i].authed)
		return true;
	if (stun_demux(p, n) == STUN_DEMUX_CHANNEL)
		why = TURN_TCP_UNAUTH_CHANNEL;
	else if (flen > (int)TURN_CONN_UNAUTH_FRAME)
		why = TURN_TCP_UNAUTH_LARGE;
	else
		return true;
	STAT_ADD(l->stats.tcp_dropped[why], 1);
	conn_close(l, i);
	return false;
}

static void conn_frame(struct turn_listener *l, uint32_t i, const uint8_t *p, size_t n,
		       uint64_t now)
{
	struct turn_ctx x;

	x.client = l->conns[i].client;
	ctx_init(&x, l, now, i + 1);
	on_message(&x, p, n, NULL);
}

/* Bytes of a TCP connection (or plaintext of a TLS one): whole frames are
 * handled where they lie; only a frame cut by the end is copied, into a
 * buffer of its size (an idle connection holds none). False when the
 * connection was closed meanwhile. */
static bool conn_bytes(struct turn_listener *l, uint32_t i, const uint8_t *p, size_t n,
		       uint64_t now)
{
	struct turn_conn *c = &l->conns[i];
	int flen;

	/* First the frame the last chunk began. */
	while (c->rxlen && n) {
		size_t want, take;

		flen = stun_frame_len(c->rx, c->rxlen);
		if (flen < 0)
			goto garbage;
		if (!conn_frame_ok(l, i, c->rx, c->rxlen, flen))
			return false;
		want = flen ? (size_t)flen : 4;
		take = want - c->rxlen < n ? want - c->rxlen : n;
		if (!conn_room(l, c, c->rxlen + take, (size_t)flen)) {
			conn_close(l, i);
			return false;
		}
		memcpy(c->rx + c->rxlen, p, take);
		c->rxlen += take;
		p += take;
		n -= take;
		if (flen && c->rxlen == (size_t)flen) {
			c->rxlen = 0;
			conn_frame(l, i, c->rx, (size_t)flen, now);
			if (c->fd < 0)
				return false;
		}
	}
	while (n) {
		flen = stun_frame_len(p, n);
		if (flen < 0)
			goto garbage;
		if (!conn_frame_ok(l, i, p, n, flen))
			return false;
		if (flen == 0 || (size_t)flen > n) {
			if (!conn_room(l, c, n, (size_t)flen)) {
				conn_close(l, i);
				return false;
			}
			memcpy(c->rx, p, n);
			c->rxlen = n;
			break;
		}
		conn_frame(l, i, p, (size_t)flen, now);
		if (c->fd < 0)
			return false;
		p += flen;
		n -= (size_t)flen;
	}
	/* No frame left incomplete: a large buffer goes back at once. */
	if (!c->rxlen && c->rxcap > TURN_CONN_RX_KEEP)
		conn_rx_free(l, c);
	return true;
garbage:
	STAT_ADD(l->stats.dropped[TURN_DROP_NOT_TURN], 1);
	conn_close(l, i);
	return false;
}

/* Ciphertext of a TLS connection: into its session, and the plaintext out
 * of it through TCP's framing. A handshake that fails (garbage, no
 * common version or cipher) or a bad record ends the connection once its
 * alert is sent; so does the client's close_notify. */
static void tls_stream(struct turn_listener *l, uint32_t i, struct loop_dgram *d)
{
	struct turn_conn *c = &l->conns[i];
	ssize_t n;

	/* In slices of a record's size, each read out before the next: what
	 * waits in the session is then at most a slice and a record cut in
	 * two, well under TLS_CONN_IN_MAX, whatever the loop's chunk. */
	for (size_t off = 0; off < d->len;) {
		size_t take = d->len - off < TURN_TLS_RX ? d->len - off : TURN_TLS_RX;

		if (tls_conn_feed(c->tls, d->data + off, take) < 0) {
			char why[256];

			/* Still in the handshake (-ENOBUFS): conn_close counts it. */
			if (tls_conn_state(c->tls) != TLS_CONN_HANDSHAKE)
				STAT_ADD(l->stats.tls_failed, 1);
			log_debug("turn %s: TLS: %s", l->sh->conf->name,
				  tls_error_text(why, sizeof(why)));
			goto end;
		}
		off += take;
		while ((n = tls_conn_read(c->tls, l->tls_rx, TURN_TLS_RX)) > 0)
			if (!conn_bytes(l, i, l->tls_rx, (size_t)n, d->now))
				return;
		if (n < 0) {
			if (n != -EPIPE)
				STAT_ADD(l->stats.tls_failed, 1);
			goto end;
		}
	}
	tls_kick(l, i);
	conn_read(l, i);
	return;
end:
	c->tls_closing = true;
	tls_kick(l, i);
	if (!c->sending)
		conn_close(l, i);
}

/* Bytes of a TCP or TLS connection. */
static void conn_stream(void *obj, uint32_t ref, struct loop_dgram *d)
{
	struct turn_listener *l = obj;
	uint32_t i;
	struct turn_conn *c = conn_deref(l, ref, &i);

	if (!c || c->fd < 0)
		return;
	c->reading = false;
	if (d->len == 0) {
		conn_close(l, i);
		return;
	}
	if (c->tls)
		tls_stream(l, i, d);
	else if (conn_bytes(l, i, d->data, d->len, d->now))
		conn_read(l, i);
}

static void conn_sent(void *obj, uint32_t ref, int res)
{
	struct turn_listener *l = obj;
	uint32_t i;
	struct turn_conn *c = conn_deref(l, ref, &i);
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
			conn_close(l, i);
			return;
		}
		tls_conn_out_done(c->tls, (size_t)res);
		tls_kick(l, i);
		if (c->tls_closing && !c->sending)
			conn_close(l, i);
		else
			conn_read(l, i);
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
		conn_close(l, i);
		return;
	}
	if (c->tx_head && l->ops->stream_send(l->loop, c->fd, c->tx_head->b, c->tx_head->len,
					      endpoint_ref_id(l->slot_conn, conn_ref(l, i))) < 0) {
		/* Nothing of the queue is with the loop now: conn_close
		 * would keep the head (and the slot) for an on_sent that
		 * never comes. */
		conn_tx_drop(l, c);
		conn_close(l, i);
		return;
	}
	conn_read(l, i);
}

static void conn_recv_error(void *obj, uint32_t ref, int err)
{
	struct turn_listener *l = obj;
	uint32_t i;

	(void)err;
	if (conn_deref(l, ref, &i) && l->conns[i].fd >= 0)
		conn_close(l, i);
}

static const struct endpoint_ops turn_udp_ops = {
    .name = "turn",
    .on_dgram = udp_dgram,
    .on_recv_error = udp_recv_error,
    .on_timer = on_timer,
};

static const struct endpoint_ops turn_relay_ops = {
    .name = "turn-relay",
    .multi = true,
    .on_dgram = relay_dgram,
    .on_recv_error = relay_recv_error,
};

static const struct endpoint_ops turn_tcp_ops = {
    .name = "turn-tcp",
    .on_accept = tcp_accept,
};

/* The certificate reload, on worker 0's TLS listener: read the pair again
 * every tls-reload-interval, put it in force when it changed and loads. */
static void tls_reload_tick(void *obj, uint32_t ref, uint64_t now)
{
	struct turn_listener *l = obj;
	struct turn_lshared *sh = l->sh;

	(void)ref;
	switch (tls_reload_check(&sh->reload, now)) {
	case TLS_RELOAD_LOADED:
		log_info("turn %s: certificate reloaded from %s", sh->conf->name,
			 sh->conf->tls_cert);
		break;
	case TLS_RELOAD_FAILED:
		log_warnx("turn %s: certificate reload: %s (the last good pair stays in force)",
			  sh->conf->name, sh->reload.error);
		break;
	default:
		break;
	}
	if (l->ops->timer_set(l->loop, &l->reload_timer,
			      now + sh->conf->tls_reload_ms * NS_PER_MS) < 0)
		log_warnx("turn %s: reload timer: out of memory", sh->conf->name);
}

static const struct endpoint_ops turn_tls_ops = {
    .name = "turn-tls",
    .on_accept = tls_accept,
    .on_timer = tls_reload_tick,
};

static const struct endpoint_ops turn_conn_ops = {
    .name = "turn-conn",
    .multi = true,
    .on_stream = conn_stream,
    .on_sent = conn_sent,
    .on_recv_error = conn_recv_error,
};

/* Setup */

int turn_listener_open(struct turn_listener *l, struct turn_shared *all, unsigned i, unsigned w,
		       bool reuseport)
{
	struct turn_lshared *sh = &all->l[i];
	const struct turn_conf *c = sh->conf;
	uint16_t lo = sh->worker_min[w], hi = sh->worker_max[w];
	uint32_t cap = c->max_allocations, width = (uint32_t)hi - lo + 1;
	uint8_t key[16];
	char a[ADDR_STRLEN];
	int err;

	memset(l, 0, sizeof(*l));
	l->all = all;
	l->sh = sh;
	l->index = i;
	l->worker = w;
	l->fd = l->tcp_fd = l->tls_fd = -1;
	l->timer_at = UINT64_MAX;
	l->conn_free = UINT32_MAX;
	sh->stats[w] = &l->stats;
	if (cap > width)
		cap = width;
	if (cap > TURN_ALLOC_CAP_MAX)
		cap = TURN_ALLOC_CAP_MAX;
	rl_random_key(net_random64, key);
	err = turn_alloc_init(&l->t, cap, lo, hi, key, net_random64());
	if (err < 0) {
		log_warnx("turn %s: allocation table: %s", c->name, strerror(-err));
		return -1;
	}
	l->tid_base[0] = net_random64();
	l->tid_base[1] = net_random64();
	l->scratch = malloc(TURN_SCRATCH);
	l->relay_fd = malloc(cap * sizeof(*l->relay_fd));
	l->relay_conn = calloc(cap, sizeof(*l->relay_conn));
	if (!l->relay_fd || !l->relay_conn || !l->scratch) {
		log_warnx("turn %s: out of memory", c->name);
		return -1;
	}
	for (uint32_t k = 0; k < cap; k++)
		l->relay_fd[k] = -1;
	for (int k = 0; k < 2; k++) {
		rl_random_key(net_random64, key);
		err = rl_table_init(&l->rl401[k], rl_worker_entries(TURN_RL_ENTRIES, all->nworkers),
				    c->unauth_ip_burst, c->unauth_ip_rate, key);
		if (err < 0) {
			log_warnx("turn %s: rate table: %s", c->name, strerror(-err));
			return -1;
		}
		rl_bucket_init(&l->unauth_rl[k], rl_worker_part(c->unauth_burst, all->nworkers),
			       rl_worker_part(c->unauth_rate, all->nworkers), 0);
	}
	rl_random_key(net_random64, key);
	err = rl_table_init(&l->authf_ip_rl, rl_worker_entries(TURN_RL_ENTRIES, all->nworkers),
			    c->authf_ip_burst, c->authf_ip_rate, key);
	if (err == 0) {
		rl_random_key(net_random64, key);
		err = turn_key_cache_init(&l->keys, TURN_KEY_CACHE, key);
	}
	if (err == 0) {
		rl_random_key(net_random64, key);
		err = rl_stamps_init(&l->authf_net,
				     rl_worker_entries(TURN_RL_ENTRIES, all->nworkers), 24, 48,
				     TURN_AUTHF_NET_TTL, key);
	}
	if (err < 0) {
		log_warnx("turn %s: failed-authentication tables: %s", c->name, strerror(-err));
		return -1;
	}
	rl_bucket_init(&l->authf_rl, rl_worker_part(c->authf_burst, all->nworkers),
		       rl_worker_part(c->authf_rate, all->nworkers), 0);
	addr_str(&c->listen.sa, a);
	/* As for a relay: the first socket must not join a group another
	 * process holds. */
	l->fd = reuseport && w == 0 ? net_port_free(&c->listen) : 0;
	if (l->fd == 0)
		l->fd = net_bind_public(&c->listen, reuseport);
	if (l->fd < 0) {
		log_warnx("turn %s: listen %s: bind: %s%s", c->name, a, strerror(-l->fd),
			  addr_bind_hint(l->fd));
		l->fd = -1;
		return -1;
	}
	l->ua_head = l->ua_tail = UINT32_MAX;
	l->na_head = l->na_tail = UINT32_MAX;
	if (c->tcp_set || c->tls_set) {
		/* tcp-max-connections is the listener's total, split evenly
		 * as the rates are: the descriptors it takes do not grow with
		 * the CPU count (a config checked on 2 CPUs starts on 64). */
		uint32_t slots;

		l->tcp_cap = rl_worker_part(c->tcp_max_conns, all->nworkers);
		slots = TURN_CONN_SLOTS(l->tcp_cap);
		l->conns = calloc(slots, sizeof(*l->conns));
		if (!l->conns) {
			log_warnx("turn %s: out of memory", c->name);
			return -1;
		}
		l->nconns = slots;
		if (srctab_init(&l->ips, slots, c->tcp_max_per_ip, 0) < 0) {
			log_warnx("turn %s: out of memory", c->name);
			return -1;
		}
		for (uint32_t k = slots; k-- > 0;) {
			l->conns[k].fd = -1;
			l->conns[k].alloc = TURN_ALLOC_NONE;
			l->conns[k].next_free = l->conn_free;
			l->conn_free = k;
		}
	}
	if (c->tcp_set) {
		l->tcp_fd = w == 0 ? net_tcp_port_free(&c->tcp_listen) : 0;
		if (l->tcp_fd == 0)
			l->tcp_fd = net_listen_tcp(&c->tcp_listen, reuseport);
		if (l->tcp_fd < 0) {
			addr_str(&c->tcp_listen.sa, a);
			log_warnx("turn %s: tcp-listen %s: %s%s", c->name, a, strerror(-l->tcp_fd),
				  l->tcp_fd == -EADDRINUSE ? " (another process listens there)"
							   : addr_bind_hint(l->tcp_fd));
			l->tcp_fd = -1;
			return -1;
		}
	}
	if (c->tls_set) {
		rl_random_key(net_random64, key);
		err = rl_table_init(&l->tls_ip_rl,
				    rl_worker_entries(TURN_RL_ENTRIES, all->nworkers),
				    c->tls_ip_burst, c->tls_ip_rate, key);
		if (err < 0) {
			log_warnx("turn %s: rate table: %s", c->name, strerror(-err));
			return -1;
		}
		rl_bucket_init(&l->tls_rl, rl_worker_part(c->tls_burst, all->nworkers),
			       rl_worker_part(c->tls_rate, all->nworkers), loop_now());
		l->tls_rx = malloc(TURN_TLS_RX);
		l->tls_tx = malloc(TURN_CONN_RX_MAX);
		if (!l->tls_rx || !l->tls_tx) {
			log_warnx("turn %s: out of memory", c->name);
			return -1;
		}
		l->tls_fd = w == 0 ? net_tcp_port_free(&c->tls_listen) : 0;
		if (l->tls_fd == 0)
			l->tls_fd = net_listen_tcp(&c->tls_listen, reuseport);
		if (l->tls_fd < 0) {
			addr_str(&c->tls_listen.sa, a);
			log_warnx("turn %s: tls-listen %s: %s%s", c->name, a, strerror(-l->tls_fd),
				  l->tls_fd == -EADDRINUSE ? " (another process listens there)"
							   : addr_bind_hint(l->tls_fd));
			l->tls_fd = -1;
			return -1;
		}
	}
	return 0;
}

int turn_listener_attach(struct turn_listener *l, const struct loop_ops *ops, struct loop *loop,
			 struct endpoint_table *ep)
{
	int s;

	l->ops = ops;
	l->loop = loop;
	l->ep = ep;
	/* The daemon has added the host's addresses and its sockets by now;
	 * the worker reads the former again (peer_ok). */
	l->policy = l->sh->policy;
	l->hosts_at = loop_now();
	if ((s = endpoint_add(ep, &turn_udp_ops, l)) < 0)
		return s;
	l->slot_udp = (unsigned)s;
	l->attached = true;
	if ((s = endpoint_add(ep, &turn_relay_ops, l)) < 0)
		return s;
	l->slot_relay = (unsigned)s;
	timer_init(&l->timer, endpoint_id(ep, l->slot_udp));
	if ((s = ops->add_socket(loop, l->fd, endpoint_id(ep, l->slot_udp))) < 0)
		return s;
	if (l->tcp_fd < 0 && l->tls_fd < 0)
		return 0;
	if (!ops->listen || !ops->stream_read)
		return -EOPNOTSUPP;
	if ((s = endpoint_add(ep, &turn_conn_ops, l)) < 0)
		return s;
	l->slot_conn = (unsigned)s;
	if (l->tcp_fd >= 0) {
		if ((s = endpoint_add(ep, &turn_tcp_ops, l)) < 0)
			return s;
		l->slot_tcp = (unsigned)s;
		if ((s = ops->listen(loop, l->tcp_fd, endpoint_id(ep, l->slot_tcp))) < 0)
			return s;
	}
	if (l->tls_fd >= 0) {
		if ((s = endpoint_add(ep, &turn_tls_ops, l)) < 0)
			return s;
		l->slot_tls = (unsigned)s;
		if ((s = ops->listen(loop, l->tls_fd, endpoint_id(ep, l->slot_tls))) < 0)
			return s;
		/* One worker looks at the files; the others see the context
		 * it puts in force. */
		timer_init(&l->reload_timer, endpoint_id(ep, l->slot_tls));
		if (l->worker == 0 &&
		    (s = ops->timer_set(loop, &l->reload_timer,
					loop_now() + l->sh->conf->tls_reload_ms * NS_PER_MS)) < 0)
			return s;
	}
	return 0;
}

void turn_listener_take_bans(struct turn_listener *l, const struct banlist *b)
{
	l->bans = b;
	if (!l->attached || !b)
		return;
	for (uint32_t i = 0; i < l->nconns; i++)
		if (l->conns[i].used && l->conns[i].fd >= 0 && banned(l, &l->conns[i].client)) {
			STAT_ADD(l->stats.tcp_dropped[TURN_TCP_BANNED], 1);
			conn_close(l, i);
		}
	for (uint32_t idx = 0; idx < l->t.cap; idx++)
		if (l->t.a[idx].live && l->t.a[idx].tuple.transport == TURN_UDP &&
		    banned(l, &l->t.a[idx].tuple.client))
			alloc_end(l, idx);
	arm(l);
}

void turn_listener_shutdown(struct turn_listener *l)
{
	if (!l->attached)
		return;
	for (uint32_t i = 0; i < l->nconns; i++)
		if (l->conns[i].fd >= 0)
			conn_close(l, i);
	for (uint32_t i = 0; i < l->t.cap; i++)
		if (l->t.a[i].live)
			alloc_end(l, i);
	l->ops->timer_cancel(l->loop, &l->timer);
	l->timer_at = UINT64_MAX;
	if (l->tls_fd >= 0)
		l->ops->timer_cancel(l->loop, &l->reload_timer);
}

void turn_allocations_json(const struct turn_listener *l, FILE *f, uint64_t now, bool *first)
{
	static const char *const transport[] = {"udp", "tcp", "tls"};
	const struct turn_alloc_table *t = &l->t;
	uint64_t now_ms = now / NS_PER_MS;
	char a[ADDR_STRLEN];

	/* At most the worker's max-allocations entries, in table order. */
	for (uint32_t i = 0; i < t->cap; i++) {
		const struct turn_alloc *al = &t->a[i];
		union etr_sockaddr relayed = l->sh->conf->relay_addr;
		unsigned perms, chans;

		if (!al->live)
			continue;
		turn_alloc_counts(t, i, now_ms, &perms, &chans);
		relayed.in.sin_port = htons(al->port);
		fputs(*first ? "\n" : ",\n", f);
		*first = false;
		fputs("{\"turn\":", f);
		json_string(f, l->sh->conf->name);
		fprintf(f, ",\"worker\":%u,\"client\":", l->worker);
		json_string(f, addr_str(&al->tuple.client.sa, a));
		fprintf(f, ",\"transport\":\"%s\",\"relayed\":", transport[al->tuple.transport]);
		json_string(f, addr_str(&relayed.sa, a));
		fputs(",\"username\":", f);
		json_string(f, al->username);
		fprintf(
		    f,
		    ",\"age_seconds\":%llu,\"lifetime_seconds\":%llu,\"permissions\":%u,"
		    "\"channels\":%u,\"datagrams_to_peer\":%llu,\"bytes_to_peer\":%llu,"
		    "\"datagrams_to_client\":%llu,\"bytes_to_client\":%llu}",
		    (unsigned long long)((now_ms - al->created) / 1000),
		    (unsigned long long)(al->expires > now_ms ? (al->expires - now_ms) / 1000 : 0),
		    perms, chans, (unsigned long long)al->dgrams_to_peer,
		    (unsigned long long)al->bytes_to_peer, (unsigned long long)al->dgrams_to_client,
		    (unsigned long long)al->bytes_to_client);
	}
}

void turn_listener_free(struct turn_listener *l)
{
	/* The loop is gone by now (worker_free): close and free, no more. */
	if (l->attached) {
		endpoint_del(l->ep, l->slot_udp);
		endpoint_del(l->ep, l->slot_relay);
		if (l->tcp_fd >= 0)
			endpoint_del(l->ep, l->slot_tcp);
		if (l->tls_fd >= 0)
			endpoint_del(l->ep, l->slot_tls);
		if (l->tcp_fd >= 0 || l->tls_fd >= 0)
			endpoint_del(l->ep, l->slot_conn);
	}
	l->attached = false;
	if (l->fd >= 0)
		close(l->fd);
	if (l->tcp_fd >= 0)
		close(l->tcp_fd);
	if (l->tls_fd >= 0)
		close(l->tls_fd);
	l->fd = l->tcp_fd = l->tls_fd = -1;
	for (uint32_t i = 0; i < l->nconns; i++) {
		struct turn_tx *t = l->conns[i].tx_head, *next;

		if (l->conns[i].fd >= 0)
			close(l->conns[i].fd);
		for (; t; t = next) {
			next = t->next;
			free(t);
		}
		rx_put(l->conns[i].rx, l->conns[i].rxcap);
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
	for (uint32_t i = 0; l->relay_fd && i < l->t.cap; i++)
		if (l->relay_fd[i] >= 0)
			close(l->relay_fd[i]);
	free(l->relay_fd);
	free(l->relay_conn);
	free(l->scratch);
	free(l->tls_rx);
	free(l->tls_tx);
	l->scratch = l->tls_rx = l->tls_tx = NULL;
	l->relay_fd = NULL;
	l->relay_conn = NULL;
	if (l->t.a)
		turn_alloc_free(&l->t);
	rl_table_free(&l->rl401[0]);
	rl_table_free(&l->rl401[1]);
	rl_table_free(&l->tls_ip_rl);
	rl_table_free(&l->authf_ip_rl);
	rl_stamps_free(&l->authf_net);
	turn_key_cache_free(&l->keys);
}
