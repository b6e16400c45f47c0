/* SPDX-License-Identifier: ISC */
/* Where an answer goes (turn_ctx_init), answers of the TURN listener
 * (signed, errors, the 401 challenge, the rate of answers to
 * unauthenticated requests) and a request's authentication over the
 * credentials (turn_auth.c) with its budgets of failed checks. */
#include "turn_int.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "stats.h"

void turn_ctx_init(struct turn_ctx *x, struct turn_listener *l, uint64_t now, uint32_t conn)
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

/* Send an answer or a message for the client. */
bool turn_to_client(struct turn_ctx *x, const uint8_t *p, size_t n)
{
	struct turn_listener *l = x->l;

	if (x->conn)
		return turn_conn_send(l, x->conn - 1, p, n, NULL, 0, 0);
	return l->ops->send(l->loop, l->fd, &x->client.sa, addr_len(&x->client), p, n,
			    endpoint_id(l->ep, l->slot_udp)) == 0;
}

static bool has_fingerprint(const struct stun_msg *m)
{
	return stun_has(m->fingerprint);
}

/* Sign (key non-NULL) and finish an answer, then send it. */
size_t turn_answer_finish(struct turn_ctx *x, struct stun_builder *b, const struct stun_msg *m,
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
	if (n == 0 || !turn_to_client(x, b->buf, n)) {
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
bool turn_answer_unauth_ok(struct turn_ctx *x)
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
		turn_conn_close(l, x->conn - 1);
	} else {
		STAT_ADD(l->stats.dropped[ip ? TURN_DROP_THROTTLED : TURN_DROP_THROTTLED_TOTAL], 1);
	}
	return false;
}

/* --debug: a request refused, with its code and why, so that an operator
 * sees what the counters only count (the debug log's cap bounds it). */
void turn_answer_debug_refused(const struct turn_ctx *x, const struct stun_msg *m, int code,
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
void turn_answer_error(struct turn_ctx *x, const struct stun_msg *m, int code, const uint8_t *key,
		       const char *why)
{
	uint8_t buf[TURN_ANSWER_MAX];
	struct stun_builder b;

	turn_answer_debug_refused(x, m, code, why);
	if (!key && !turn_answer_unauth_ok(x))
		return;
	stun_build_begin(&b, buf, sizeof(buf), stun_type(m->method, STUN_ERROR), m->tid);
	stun_add_error(&b, code, NULL);
	if (code == 420)
		stun_add_unknown_attrs(&b, m->unknown, m->n_unknown);
	if (code == 438)
		add_realm_nonce(x, &b);
	if (turn_answer_finish(x, &b, m, key))
		STAT_ADD(x->l->stats.errors[turn_error_index(code)], 1);
}

/* 401 with REALM and NONCE: the challenge (limited as turn_answer_unauth_ok says). */
void turn_answer_challenge(struct turn_ctx *x, const struct stun_msg *m)
{
	uint8_t buf[TURN_ANSWER_MAX];
	struct stun_builder b;

	if (!turn_answer_unauth_ok(x))
		return;
	stun_build_begin(&b, buf, sizeof(buf), stun_type(m->method, STUN_ERROR), m->tid);
	stun_add_error(&b, 401, NULL);
	add_realm_nonce(x, &b);
	if (turn_answer_finish(x, &b, m, NULL)) {
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

/* A signed request over a failed-authentication budget (auth-fail-ip-rate
 * when ip, else auth-fail-rate with its username's key not kept): no HMAC
 * work for it. Over UDP it is dropped (an answer would feed a reflector);
 * a TCP or TLS connection is closed. Counted, and logged once a minute. */
static void auth_refused(struct turn_ctx *x, bool ip)
{
	struct turn_listener *l = x->l;
	const struct turn_conf *c = l->sh->conf;
	char a[ADDR_STRLEN];

	if (ip && turn_log_due(l, TURN_LOG_AUTH_IP, x->now_ms))
		log_warnx("turn %s: %s fails authentication faster than auth-fail-ip-rate %u/s: "
			  "its signed requests get no check (auth_rate_ip; the first source a "
			  "minute is named)",
			  c->name, addr_str(&x->client.sa, a), c->authf_ip_rate);
	else if (!ip && turn_log_due(l, TURN_LOG_AUTH_ALL, x->now_ms))
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
		turn_conn_close(l, x->conn - 1);
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
int turn_authenticate(struct turn_ctx *x, const struct stun_msg *m, uint32_t idx,
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
		turn_answer_challenge(x, m);
		return -1;
	}
	if (!stun_has(m->username) || !stun_has(m->realm) || !stun_has(m->nonce)) {
		STAT_ADD(l->stats.auth_failures[TURN_AF_MISSING], 1);
		turn_answer_error(x, m, 400, NULL, "USERNAME, REALM or NONCE missing");
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
	nr = turn_nonce_check(
	    &l->sh->nonce_key, &x->client, (const char *)stun_attr_ptr(m, m->nonce), m->nonce.len,
	    x->now / NS_PER_SEC, (uint32_t)(l->sh->conf->nonce_lifetime_ms / 1000));
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
		turn_answer_error(x, m, 438, NULL,
				  nr == TURN_NONCE_STALE ? "stale nonce" : "a nonce never ours");
		return -1;
	}
	if (signed_as_owner(x, m, idx, au, expired)) {
		turn_conn_authed(l, x->conn);
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
		turn_conn_authed(l, x->conn);
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
		turn_answer_debug_refused(x, m, 401, "a malformed USERNAME (not expiry:userid)");
		break;
	default:
		STAT_ADD(l->stats.auth_failures[TURN_AF_BAD_INTEGRITY], 1);
		auth_failed(x);
		turn_answer_debug_refused(x, m, 401,
					  "wrong MESSAGE-INTEGRITY: another secret or password");
		break;
	}
	turn_answer_challenge(x, m);
	return -1;
}
