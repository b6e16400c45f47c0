/* SPDX-License-Identifier: ISC */
/* A client's message (turn_on_message: to the data path or a request), and
 * the TURN requests a client makes (RFC 8656): Binding, Allocate (its
 * relayed socket bound here), Refresh, CreatePermission and ChannelBind,
 * each authenticated (turn_answer.c) and answered. */
#include "turn_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "stats.h"

/* Binds tried for one Allocate before it gets 508: a port someone else
 * holds is set aside (turn_alloc_port_unusable) and the next one tried. */
#define TURN_BIND_TRIES 8
/* The default lifetime and the least granted (RFC 8656 7.2), unless
 * max-lifetime is lower. */
#define TURN_LIFETIME_DEFAULT 600u

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

void turn_req_binding(struct turn_ctx *x, const struct stun_msg *m)
{
	uint8_t buf[TURN_ANSWER_MAX];
	struct stun_builder b;

	if (!turn_answer_unauth_ok(x))
		return;
	stun_build_begin(&b, buf, sizeof(buf), stun_type(STUN_BINDING, STUN_SUCCESS), m->tid);
	stun_add_xor_addr(&b, STUN_A_XOR_MAPPED_ADDRESS, &x->client);
	if (turn_answer_finish(x, &b, m, NULL))
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

static void reject(struct turn_ctx *x, const struct stun_msg *m, enum turn_reject why, int code,
		   const uint8_t *key, const char *detail)
{
	char text[128];

	STAT_ADD(x->l->stats.rejected[why], 1);
	snprintf(text, sizeof(text), "%s: %s", turn_reject_name(why), detail);
	turn_answer_error(x, m, code, key, text);
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
	if (!turn_to_client(x, p, n))
		STAT_ADD(x->l->stats.dropped[TURN_DROP_SEND_FAILED], 1);
	return true;
}

/* An Allocate's request itself (RFC 8656 7.2, steps 3 to 8): UDP, IPv4,
 * EVEN-PORT well formed (*even, *reserve), RESERVATION-TOKEN alone. False
 * when answered. */
static bool allocate_request_ok(struct turn_ctx *x, const struct stun_msg *m, const uint8_t *key,
				bool *even, bool *reserve)
{
	uint8_t proto, fam;

	if (!stun_get_requested_transport(m, &proto)) {
		reject(x, m, TURN_REJ_REQUEST, 400, key, "no REQUESTED-TRANSPORT");
		return false;
	}
	if (proto != STUN_TRANSPORT_UDP) {
		reject(x, m, TURN_REJ_REQUEST, 442, key, "a transport other than UDP");
		return false;
	}
	if (stun_has(m->requested_family) &&
	    (!stun_get_requested_family(m, &fam) || fam != STUN_FAMILY_IPV4)) {
		reject(x, m, TURN_REJ_REQUEST, 440, key, "an address family other than IPv4");
		return false;
	}
	if (stun_has(m->even_port) && !stun_get_even_port(m, reserve)) {
		reject(x, m, TURN_REJ_REQUEST, 400, key, "a malformed EVEN-PORT");
		return false;
	}
	*even = stun_has(m->even_port);
	if (stun_has(m->reservation_token) &&
	    (*even || m->reservation_token.len != 8 || stun_has(m->requested_family))) {
		reject(x, m, TURN_REJ_REQUEST, 400, key,
		       "RESERVATION-TOKEN with EVEN-PORT or a family");
		return false;
	}
	return true;
}

/* The 508 of a full table or cap, logged once a minute: max-allocations
 * reached across the workers when it is, else this worker's slice of the
 * ports (more ports would not help the former). */
static void allocate_full(struct turn_ctx *x, const struct stun_msg *m, const uint8_t *key,
			  bool cap)
{
	struct turn_listener *l = x->l;
	const struct turn_conf *conf = l->sh->conf;

	if (cap) {
		if (turn_log_due(l, TURN_LOG508_FULL, x->now_ms))
			log_warnx("turn %s: Allocate answered 508: max-allocations %u "
				  "reached (more at most once a minute)",
				  conf->name, conf->max_allocations);
		reject(x, m, TURN_REJ_CAP, 508, key, "max-allocations reached");
		return;
	}
	if (turn_log_due(l, TURN_LOG508_PORTS, x->now_ms))
		log_warnx("turn %s: Allocate answered 508: worker %u's ports "
			  "%u-%u are all in use (ports split across the workers; "
			  "more at most once a minute)",
			  conf->name, l->worker, l->sh->worker_min[l->worker],
			  l->sh->worker_max[l->worker]);
	reject(x, m, TURN_REJ_PORTS, 508, key, "this worker's relayed ports are all in use");
}

/* A place for a new allocation: one in the worker's table, one under
 * max-allocations across the workers, one of the userid's under user-quota
 * (its entry in *qe). False when answered; else the caller gives back the
 * last two on any way out (allocation_end once created). */
static bool allocate_place(struct turn_ctx *x, const struct stun_msg *m, const struct turn_auth *au,
			   uint32_t *qe)
{
	struct turn_listener *l = x->l;
	const struct turn_conf *conf = l->sh->conf;
	enum turn_alloc_err e;

	switch (turn_alloc_admit(&l->t, &x->tuple)) {
	case TURN_OK:
		break;
	case TURN_E_EXISTS:
		reject(x, m, TURN_REJ_EXISTS, 437, au->key, "the 5-tuple has an allocation");
		return false;
	default:
		/* The worker's table holds as many as its slice of the ports
		 * (or max-allocations, when fewer). */
		allocate_full(x, m, au->key,
			      atomic_load_explicit(&l->sh->active, memory_order_relaxed) >=
				  conf->max_allocations);
		return false;
	}
	/* The cap holds across the workers. */
	if (atomic_fetch_add_explicit(&l->sh->active, 1, memory_order_relaxed) >=
	    conf->max_allocations) {
		atomic_fetch_sub_explicit(&l->sh->active, 1, memory_order_relaxed);
		allocate_full(x, m, au->key, true);
		return false;
	}
	/* The quota holds across the workers too: counted under the cap's
	 * place, so the userids counted never outnumber max-allocations. */
	e = turn_quota_take(&l->sh->quota, au->userid, au->userid_len, qe);
	if (e != TURN_OK) {
		atomic_fetch_sub_explicit(&l->sh->active, 1, memory_order_relaxed);
		reject(x, m,
		       e == TURN_E_QUOTA  ? TURN_REJ_QUOTA
		       : e == TURN_E_FULL ? TURN_REJ_CAP
					  : TURN_REJ_REQUEST,
		       turn_alloc_err_code(e), au->key,
		       e == TURN_E_QUOTA ? "user-quota reached" : "no room in the table");
		return false;
	}
	return true;
}

/* A relayed port and its socket (*port, the fd returned): up to
 * TURN_BIND_TRIES ports of the worker's slice, EVEN-PORT and a
 * RESERVATION-TOKEN as asked, new_token kept for a reservation. -1 when
 * none (*e: why), logged once a minute but for a token's. */
static int allocate_socket(struct turn_ctx *x, const struct stun_msg *m, bool even, bool reserve,
			   const uint8_t new_token[8], uint16_t *port, enum turn_alloc_err *e)
{
	struct turn_listener *l = x->l;
	const struct turn_conf *conf = l->sh->conf;
	union etr_sockaddr relayed;
	uint8_t token[8];
	int fd = -1, bind_err = 0;

	*e = TURN_OK;
	if (stun_has(m->reservation_token))
		memcpy(token, stun_attr_ptr(m, m->reservation_token), 8);
	for (unsigned i = 0; i < TURN_BIND_TRIES; i++) {
		*e = turn_alloc_port_take(&l->t, even, reserve,
					  stun_has(m->reservation_token) ? token : NULL, new_token,
					  x->now_ms, port);
		if (*e != TURN_OK)
			break;
		fd = relay_socket(l, *port);
		if (fd >= 0)
			return fd;
		bind_err = fd;
		if (fd == -EADDRINUSE)
			turn_alloc_port_unusable(&l->t, *port, x->now_ms);
		else
			turn_alloc_port_release(&l->t, *port, x->now_ms);
		*e = TURN_E_NO_PORT;
	}
	if (*e != TURN_E_TOKEN && turn_log_due(l, TURN_LOG508_PORTS, x->now_ms)) {
		char a[ADDR_STRLEN];

		relayed = conf->relay_addr;
		relayed.in.sin_port = htons(*port);
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
	return -1;
}

void turn_req_allocate(struct turn_ctx *x, const struct stun_msg *m)
{
	struct turn_listener *l = x->l;
	const struct turn_conf *conf = l->sh->conf;
	uint32_t idx = turn_alloc_lookup(&l->t, &x->tuple), lifetime, ref;
	uint8_t buf[TURN_ANSWER_MAX], new_token[8];
	struct turn_alloc_req req;
	struct stun_builder b;
	struct turn_auth au;
	enum turn_alloc_err e;
	bool expired, reserve = false, even = false;
	uint16_t port = 0;
	union etr_sockaddr relayed;
	uint64_t r;
	uint32_t qe;
	size_t n;
	int fd;

	/* A retransmission on a live 5-tuple is its allocation's (its key). */
	if (turn_authenticate(x, m, idx, &au, &expired) < 0)
		return;
	if (idx != TURN_ALLOC_NONE) {
		if (!resend(x, idx, m))
			reject(x, m, TURN_REJ_EXISTS, 437, au.key, "the 5-tuple has an allocation");
		return;
	}
	if (expired) {
		/* A genuine credential past its expiry gets no new allocation. */
		STAT_ADD(l->stats.auth_failures[TURN_AF_EXPIRED], 1);
		turn_answer_debug_refused(x, m, 401, "an expired credential gets no allocation");
		turn_answer_challenge(x, m);
		return;
	}
	if (atomic_load_explicit(l->all->lifecycle, memory_order_relaxed) != LIFECYCLE_ACTIVE) {
		reject(x, m, TURN_REJ_DRAIN, 403, au.key, "draining");
		return;
	}
	if (!allocate_request_ok(x, m, au.key, &even, &reserve) || !allocate_place(x, m, &au, &qe))
		return;
	r = net_random64();
	memcpy(new_token, &r, 8);
	fd = allocate_socket(x, m, even, reserve, new_token, &port, &e);
	if (fd < 0) {
		turn_quota_put(&l->sh->quota, qe);
		atomic_fetch_sub_explicit(&l->sh->active, 1, memory_order_relaxed);
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
		turn_allocation_end(l, idx);
		reject(x, m, TURN_REJ_PORTS, 508, au.key,
		       "the relayed socket could not join the loop");
		return;
	}
	l->relay_fd[idx] = fd;
	l->relay_conn[idx] = x->conn;
	turn_peer_port_set(l->sh->live_ports, port, true);
	if (x->conn) {
		l->conns[x->conn - 1].alloc = idx;
		turn_conn_na_leave(l, x->conn - 1);
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
	n = turn_answer_finish(x, &b, m, au.key);
	keep(x, idx, m, buf, n);
	turn_timer_arm(l);
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
	if (turn_authenticate(x, m, idx, au, expired) < 0)
		return TURN_ALLOC_NONE;
	if (idx == TURN_ALLOC_NONE) {
		turn_answer_error(x, m, 437, au->key, "no allocation on this 5-tuple");
		return TURN_ALLOC_NONE;
	}
	a = &l->t.a[idx];
	if (a->username_len != m->username.len ||
	    memcmp(a->username, stun_attr_ptr(m, m->username), m->username.len) != 0) {
		STAT_ADD(l->stats.auth_failures[TURN_AF_WRONG_USER], 1);
		turn_answer_error(x, m, 441, au->key, "not the allocation's username");
		return TURN_ALLOC_NONE;
	}
	if (*expired && l->sh->conf->strict_expiry) {
		STAT_ADD(l->stats.auth_failures[TURN_AF_EXPIRED], 1);
		turn_answer_debug_refused(x, m, 401, "an expired credential under strict-expiry");
		turn_answer_challenge(x, m);
		return TURN_ALLOC_NONE;
	}
	return idx;
}

void turn_req_refresh(struct turn_ctx *x, const struct stun_msg *m)
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
		turn_allocation_end(l, idx);
		stun_build_begin(&b, buf, sizeof(buf), stun_type(STUN_REFRESH, STUN_SUCCESS),
				 m->tid);
		stun_add_u32(&b, STUN_A_LIFETIME, 0);
		turn_answer_finish(x, &b, m, au.key);
		turn_timer_arm(l);
		return;
	}
	want = lifetime_for(l, m, l->t.a[idx].cred_expiry);
	turn_alloc_refresh(&l->t, idx, want, x->now_ms);
	stun_build_begin(&b, buf, sizeof(buf), stun_type(STUN_REFRESH, STUN_SUCCESS), m->tid);
	stun_add_u32(&b, STUN_A_LIFETIME, want);
	n = turn_answer_finish(x, &b, m, au.key);
	keep(x, idx, m, buf, n);
	turn_timer_arm(l);
}

/* A 403 for a refused peer (why: banned, or the policy), naming the peer
 * and the reason. */
static void refuse_peer(struct turn_ctx *x, const struct stun_msg *m,
			const union etr_sockaddr *peer, bool ip_only, enum turn_drop why,
			const uint8_t *key)
{
	char a[ADDR_STRLEN], text[ADDR_STRLEN + 40];

	STAT_ADD(x->l->stats.peer_rejected, 1);
	if (log_debug_on)
		snprintf(text, sizeof(text), "peer %s: %s", addr_str(&peer->sa, a),
			 why == TURN_DROP_BANNED
			     ? "banned"
			     : turn_peer_why_str(turn_peer_check(&x->l->policy, peer, ip_only)));
	turn_answer_error(x, m, 403, key, log_debug_on ? text : "");
}

void turn_req_permission(struct turn_ctx *x, const struct stun_msg *m)
{
	struct turn_listener *l = x->l;
	union etr_sockaddr peers[STUN_PEERS_MAX];
	uint8_t buf[TURN_ANSWER_MAX];
	struct stun_builder b;
	struct turn_auth au;
	enum turn_drop why;
	bool expired;
	uint32_t idx;

	if ((idx = owned(x, m, &au, &expired)) == TURN_ALLOC_NONE)
		return;
	if (m->n_peer == 0) {
		turn_answer_error(x, m, 400, au.key, "no XOR-PEER-ADDRESS");
		return;
	}
	for (unsigned i = 0; i < m->n_peer; i++) {
		if (stun_get_xor_addr(m, m->peer[i], &peers[i]) < 0) {
			turn_answer_error(x, m, 400, au.key, "a malformed XOR-PEER-ADDRESS");
			return;
		}
		/* The policy before the family: a refused IPv6 form (::1,
		 * ::ffff:169.254.169.254, NAT64, 6to4) is refused and counted
		 * as such, not merely a mismatch (443). */
		if (!turn_data_peer_ok(x, &peers[i], true, &why)) {
			refuse_peer(x, m, &peers[i], true, why, au.key);
			return;
		}
		if (peers[i].sa.sa_family != AF_INET) {
			turn_answer_error(x, m, 443, au.key, "an IPv6 peer for an IPv4 allocation");
			return;
		}
	}
	/* All or none: a 508 leaves no permission of this request behind. */
	if (turn_alloc_permit_all(&l->t, idx, peers, m->n_peer, x->now_ms) != TURN_OK) {
		turn_answer_error(x, m, turn_alloc_err_code(TURN_E_PERM_FULL), au.key,
				  "the allocation's permissions are all taken");
		return;
	}
	stun_build_begin(&b, buf, sizeof(buf), stun_type(STUN_CREATE_PERMISSION, STUN_SUCCESS),
			 m->tid);
	turn_answer_finish(x, &b, m, au.key);
	turn_timer_arm(l);
}

void turn_req_channel_bind(struct turn_ctx *x, const struct stun_msg *m)
{
	struct turn_listener *l = x->l;
	union etr_sockaddr peer;
	uint8_t buf[TURN_ANSWER_MAX];
	struct stun_builder b;
	struct turn_auth au;
	enum turn_alloc_err e;
	enum turn_drop why;
	bool expired;
	uint16_t ch;
	uint32_t idx;

	if ((idx = owned(x, m, &au, &expired)) == TURN_ALLOC_NONE)
		return;
	if (m->n_peer != 1 || !stun_get_channel(m, &ch) ||
	    stun_get_xor_addr(m, m->peer[0], &peer) < 0) {
		turn_answer_error(x, m, 400, au.key,
				  "a malformed CHANNEL-NUMBER or XOR-PEER-ADDRESS");
		return;
	}
	/* The peer before the family, as above. */
	if (!turn_data_peer_ok(x, &peer, false, &why)) {
		refuse_peer(x, m, &peer, false, why, au.key);
		return;
	}
	if (peer.sa.sa_family != AF_INET) {
		turn_answer_error(x, m, 443, au.key, "an IPv6 peer for an IPv4 allocation");
		return;
	}
	e = turn_alloc_bind(&l->t, idx, ch, &peer, x->now_ms);
	if (e != TURN_OK) {
		turn_answer_error(x, m, turn_alloc_err_code(e), au.key, turn_alloc_err_str(e));
		return;
	}
	stun_build_begin(&b, buf, sizeof(buf), stun_type(STUN_CHANNEL_BIND, STUN_SUCCESS), m->tid);
	turn_answer_finish(x, &b, m, au.key);
	turn_timer_arm(l);
}

/* One message from a client (a datagram, or a frame of a TCP stream). d is
 * the datagram when the payload may be forwarded without a copy. */
void turn_on_message(struct turn_ctx *x, const uint8_t *p, size_t n, struct loop_dgram *d)
{
	struct turn_listener *l = x->l;
	struct stun_msg m;
	int rc;

	switch (stun_demux(p, n)) {
	case STUN_DEMUX_CHANNEL:
		turn_data_channel(x, p, n, d);
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
		turn_answer_error(x, &m, 400, NULL, "too many XOR-PEER-ADDRESS");
		return;
	}
	if (rc < 0) {
		STAT_ADD(l->stats.dropped[TURN_DROP_MALFORMED], 1);
		return;
	}
	if (m.cls == STUN_INDICATION) {
		if (m.method == STUN_SEND)
			turn_data_send(x, &m, d);
		else
			STAT_ADD(l->stats.dropped[TURN_DROP_UNEXPECTED], 1);
		return;
	}
	if (m.cls != STUN_REQUEST) {
		STAT_ADD(l->stats.dropped[TURN_DROP_UNEXPECTED], 1);
		return;
	}
	if (m.n_unknown) {
		turn_answer_error(x, &m, 420, NULL, "unknown comprehension-required attributes");
		return;
	}
	switch (m.method) {
	case STUN_BINDING:
		turn_req_binding(x, &m);
		break;
	case STUN_ALLOCATE:
		turn_req_allocate(x, &m);
		break;
	case STUN_REFRESH:
		turn_req_refresh(x, &m);
		break;
	case STUN_CREATE_PERMISSION:
		turn_req_permission(x, &m);
		break;
	case STUN_CHANNEL_BIND:
		turn_req_channel_bind(x, &m);
		break;
	default:
		turn_answer_error(x, &m, 400, NULL, "a method TURN does not serve");
		break;
	}
}
