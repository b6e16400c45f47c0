/* SPDX-License-Identifier: ISC */
/* The generic UDP session forwarder: find or open the client's session,
 * forward, count; expiry and the caps. What a datagram may do is its
 * policy's to say (udprelay.h). */
#include "udprelay.h"

#include <errno.h>
#include <string.h>

#include "addrclass.h"
#include "log.h"
#include "prbe_port.h"

static const struct endpoint_ops udprelay_public_ops, udprelay_session_ops;

int udprelay_init(struct udprelay *u, const struct udprelay_conf *c, int pub_fd,
		  const uint8_t key[16], const uint8_t key2[16], struct relay_stats *stats,
		  const struct etr_stats *global, uint64_t now)
{
	int err;

	memset(u, 0, sizeof(*u));
	u->conf = *c;
	u->pub_fd = pub_fd;
	u->stats = stats;
	u->global = global;
	u->open = &u->own_open;
	err = session_table_init(&u->st, c->max_sessions, key);
	if (!err)
		err = rl_table_init(&u->ip_sess_rl,
				    c->ip_entries ? c->ip_entries : UDPRELAY_IP_ENTRIES,
				    c->ip_session_rate, c->ip_session_rate, key2);
	rl_bucket_init(&u->sess_rl, c->session_rate, c->session_rate, now);
	return err;
}

void udprelay_share_count(struct udprelay *u, _Atomic uint32_t *open)
{
	u->open = open;
}

void udprelay_set_policy(struct udprelay *u, const struct udprelay_policy_ops *pol, void *p)
{
	u->pol = pol;
	u->pobj = p;
}

void udprelay_set_sockops(struct udprelay *u, const struct udprelay_sockops *s, void *arg)
{
	u->sock = s;
	u->sarg = arg;
}

void udprelay_set_prbe(struct udprelay *u, struct prbe *p, struct prbe_stats *st)
{
	u->prbe = p;
	u->prbe_stats = st;
}

static uint32_t public_id(const struct udprelay *u, uint32_t ref)
{
	return endpoint_ref_id(u->ep_public, ref);
}

/* Arm the timer when the next deadline may have come earlier (a session
 * opened); one that moved later (every forward touches a session) leaves
 * the timer to fire early once, and udprelay_tick re-arms it exactly. So
 * nothing is recomputed per packet. */
static void udprelay_arm(struct udprelay *u)
{
	uint64_t at;

	if (!u->attached)
		return;
	at = udprelay_next_deadline(u);
	if (timer_sooner(&u->timer, at))
		u->ops->timer_set(u->loop, &u->timer, at);
}

int udprelay_attach(struct udprelay *u, const struct loop_ops *ops, struct loop *l,
		    struct endpoint_table *ep)
{
	int pub, ses, err;

	u->ops = ops;
	u->loop = l;
	pub = endpoint_add(ep, &udprelay_public_ops, u);
	ses = endpoint_add(ep, &udprelay_session_ops, u);
	if (pub < 0 || ses < 0) {
		if (pub >= 0)
			endpoint_del(ep, (unsigned)pub);
		if (ses >= 0)
			endpoint_del(ep, (unsigned)ses);
		return -ENOSPC;
	}
	u->ep = ep;
	u->ep_public = (unsigned)pub;
	u->ep_sessions = (unsigned)ses;
	u->attached = true;
	timer_init(&u->timer, public_id(u, UDPRELAY_REF_SOCKET));
	err = ops->add_socket(l, u->pub_fd, public_id(u, UDPRELAY_REF_SOCKET));
	udprelay_arm(u);
	return err;
}

void udprelay_close_session(struct udprelay *u, uint32_t idx, enum stats_close why)
{
	struct session *s = &u->st.s[idx];
	char a[ADDR_STRLEN];

	if (log_debug_on)
		addr_str(&s->client.sa, a);
	if (u->pol->session_closed)
		u->pol->session_closed(u->pobj, u, idx);
	u->ops->del_socket(u->loop, s->fd, udprelay_session_id(u, idx));
	u->sock->close(u->sarg, session_remove(&u->st, idx));
	atomic_fetch_sub_explicit(u->open, 1, memory_order_relaxed);
	STAT_ADD(u->stats->sessions_closed[why], 1);
	STAT_SET(u->stats->sessions_active, u->st.active);
	log_debug("session - %s (%s, %u active)", a, stats_close_name(why), u->st.active);
}

void udprelay_expire(struct udprelay *u, uint64_t now)
{
	uint32_t idx;

	while ((idx = session_expired(&u->st, now, u->conf.session_timeout)) != SESSION_NONE)
		udprelay_close_session(u, idx, CLOSE_IDLE);
	while ((idx = session_unassured_expired(&u->st, now, u->conf.unassured_timeout)) !=
	       SESSION_NONE)
		udprelay_close_session(u, idx, CLOSE_UNASSURED);
}

uint64_t udprelay_next_deadline(const struct udprelay *u)
{
	uint64_t e = session_next_expiry(&u->st, u->conf.session_timeout);
	uint64_t n = session_unassured_next_expiry(&u->st, u->conf.unassured_timeout);

	return n < e ? n : e;
}

void udprelay_tick(struct udprelay *u, uint64_t now)
{
	udprelay_expire(u, now);
	if (!u->attached)
		return;
	/* Exactly, now: the deadline may have moved later meanwhile. */
	now = udprelay_next_deadline(u);
	if (now == UINT64_MAX)
		u->ops->timer_cancel(u->loop, &u->timer);
	else
		u->ops->timer_set(u->loop, &u->timer, now);
}

void udprelay_shutdown(struct udprelay *u)
{
	while (u->st.lru_head != SESSION_NONE)
		udprelay_close_session(u, u->st.lru_head, CLOSE_SHUTDOWN);
}

void udprelay_free(struct udprelay *u)
{
	if (u->pub_fd >= 0 && u->sock)
		u->sock->close(u->sarg, u->pub_fd);
	u->pub_fd = -1;
	if (u->attached) {
		endpoint_del(u->ep, u->ep_public);
		endpoint_del(u->ep, u->ep_sessions);
		u->attached = false;
	}
	session_table_free(&u->st);
	rl_table_free(&u->ip_sess_rl);
}

void udprelay_refuse(struct udprelay *u, const union etr_sockaddr *client,
		     const struct loop_dgram *d, enum stats_drop why)
{
	STAT_ADD(u->stats->drops[why], 1);
	if (log_debug_on && u->pol->log_refused)
		u->pol->log_refused(u->pobj, client, d, why);
}

int udprelay_send(struct udprelay *u, const union etr_sockaddr *dst, const void *buf, size_t len,
		  uint32_t id)
{
	return u->ops->send(u->loop, u->pub_fd, &dst->sa, addr_len(dst), buf, len, id);
}

int udprelay_reply(struct udprelay *u, const union etr_sockaddr *dst, const void *buf, size_t len)
{
	int err = udprelay_send(u, dst, buf, len, public_id(u, UDPRELAY_REF_REPLY));

	if (err < 0)
		STAT_ADD(u->stats->drops[DROP_SEND_ERROR], 1);
	return err;
}

/* Out of descriptors or of session ports: closing a session gives one back. */
static bool socket_scarce(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -EADDRINUSE || err == -ENOBUFS;
}

/* New sessions per second, from this IP and in all. Datagrams the policy's
 * budget did not admit (no proof of anything, and spoofed at line rate)
 * may only take the upper half of the tokens; the lower half is kept for
 * those it admitted (a player's getchallenge above all). */
static bool session_rate_allow(struct udprelay *u, const union etr_sockaddr *client, bool admitted,
			       const struct loop_dgram *d)
{
	if (!admitted && (uint64_t)rl_available(&u->sess_rl, d->now) * 2 <= u->conf.session_rate) {
		udprelay_refuse(u, client, d, DROP_SESSION_RATE);
		return false;
	}
	if (!rl_table_allow(&u->ip_sess_rl, client, d->now)) {
		udprelay_refuse(u, client, d, DROP_IP_SESSION_RATE);
		return false;
	}
	if (!rl_take(&u->sess_rl, d->now)) {
		udprelay_refuse(u, client, d, DROP_SESSION_RATE);
		return false;
	}
	return true;
}

/* A place for one more session among every sharing forwarder's
 * (max_sessions is a total): true when taken. No lock. */
static bool session_place(struct udprelay *u)
{
	if (atomic_fetch_add_explicit(u->open, 1, memory_order_relaxed) < u->conf.max_sessions)
		return true;
	atomic_fetch_sub_explicit(u->open, 1, memory_order_relaxed);
	return false;
}

/* A session for a client that has none. */
static uint32_t session_open(struct udprelay *u, const union etr_sockaddr *client, bool admitted,
			     const struct loop_dgram *d)
{
	uint64_t now = d->now;
	uint32_t idx;
	int fd, err;

	/* A draining relay keeps its sessions and takes no new ones. */
	if (STAT_GET(u->global->lifecycle) != LIFECYCLE_ACTIVE) {
		udprelay_refuse(u, client, d, DROP_DRAINING);
		return SESSION_NONE;
	}
	/* Expired sessions make room before a new one is refused. */
	udprelay_expire(u, now);
	if (session_ip_count(&u->st, client) >= u->conf.sessions_per_ip) {
		udprelay_refuse(u, client, d, DROP_IP_SESSIONS);
		return SESSION_NONE;
	}
	if (!session_rate_allow(u, client, admitted, d))
		return SESSION_NONE;
	/* Full: the oldest session the upstream never answered makes room;
	 * one it answered is never evicted for a newcomer, nor one in its
	 * grace time (the policy set it: an answer is on its way). With a
	 * shared count, full is every sharer's sessions together, and only
	 * this forwarder's own make room. */
	if (!session_place(u)) {
		idx = session_evictable(&u->st, now);
		if (idx != SESSION_NONE)
			udprelay_close_session(u, idx, CLOSE_EVICTED);
		if (idx == SESSION_NONE || !session_place(u)) {
			udprelay_refuse(u, client, d, DROP_TABLE_FULL);
			return SESSION_NONE;
		}
	}
	/* Out of descriptors or ports (EMFILE, ENFILE, --session-ports all
	 * taken): an unassured session makes room the same way, once. */
	fd = u->sock->open(u->sarg);
	if (fd < 0 && socket_scarce(fd) && (idx = session_evictable(&u->st, now)) != SESSION_NONE) {
		log_debug("session socket: %s; evicting an unassured session", strerror(-fd));
		udprelay_close_session(u, idx, CLOSE_EVICTED);
		fd = u->sock->open(u->sarg);
	}
	if (fd < 0) {
		atomic_fetch_sub_explicit(u->open, 1, memory_order_relaxed);
		log_debug("session socket: %s", strerror(-fd));
		udprelay_refuse(u, client, d, DROP_SOCKET);
		return SESSION_NONE;
	}
	idx = session_insert(&u->st, client, fd, now);
	err = u->ops->add_socket(u->loop, fd, udprelay_session_id(u, idx));
	if (err < 0) {
		atomic_fetch_sub_explicit(u->open, 1, memory_order_relaxed);
		session_remove(&u->st, idx);
		u->sock->close(u->sarg, fd);
		udprelay_refuse(u, client, d, DROP_SOCKET);
		return SESSION_NONE;
	}
	STAT_ADD(u->stats->sessions_opened, 1);
	STAT_SET(u->stats->sessions_active, u->st.active);
	udprelay_arm(u);
	if (log_debug_on) {
		char a[ADDR_STRLEN];
		log_debug("session + %s (%u active)", addr_str(&client->sa, a), u->st.active);
	}
	return idx;
}

/* Hand d to the kernel for session idx; counts the drop when it cannot. */
static bool forward(struct udprelay *u, uint32_t idx, int fd, const union etr_sockaddr *dst,
		    struct loop_dgram *d)
{
	struct session *s = &u->st.s[idx];

	if (s->queued >= SESSION_QUEUE_MAX) {
		STAT_ADD(u->stats->drops[DROP_QUEUE_FULL], 1);
		return false;
	}
	if (u->ops->forward(u->loop, fd, dst ? &dst->sa : NULL, dst ? addr_len(dst) : 0, d,
			    udprelay_session_id(u, idx)) < 0) {
		STAT_ADD(u->stats->drops[DROP_SEND_ERROR], 1);
		return false;
	}
	s->queued++;
	session_touch(&u->st, idx, d->now);
	return true;
}

/* A probe from a source without a session: echoed or dropped here, never
 * the policy's (a player's in-game packet starts with its sequence number,
 * and its session keeps whatever it sends). */
static void probe(struct udprelay *u, const union etr_sockaddr *client, struct loop_dgram *d)
{
	if (u->bans && banlist_match(u->bans, client)) {
		STAT_ADD(u->prbe_stats->result[STATS_PRBE_BANNED], 1);
		udprelay_refuse(u, client, d, DROP_BANNED);
		return;
	}
	if (prbe_port_answer(u->prbe, u->prbe_stats, u->ops, u->loop, u->pub_fd, client, d,
			     public_id(u, UDPRELAY_REF_PRBE)) != PRBE_ECHO)
		STAT_ADD(u->stats->drops[DROP_PRBE], 1);
}

static void from_client(struct udprelay *u, struct loop_dgram *d)
{
	union etr_sockaddr client;
	uint32_t idx, seen;
	unsigned v;

	if (!d->from || !addr_from(&client, d->from, d->fromlen)) {
		STAT_ADD(u->stats->drops[DROP_BAD_SOURCE], 1);
		return;
	}
	if (u->prbe && prbe_port_magic(d) && session_lookup(&u->st, &client) == SESSION_NONE) {
		probe(u, &client, d);
		return;
	}
	if (addrclass_bogon(&client, u->conf.listener_loopback)) {
		udprelay_refuse(u, &client, d, DROP_BOGON);
		return;
	}
	if (u->bans && banlist_match(u->bans, &client)) {
		udprelay_refuse(u, &client, d, DROP_BANNED);
		return;
	}
	if (d->truncated) {
		udprelay_refuse(u, &client, d, DROP_TRUNCATED);
		return;
	}
	/* The policy sees the session only if it is to carry this datagram:
	 * one idle past its time is replaced (below), after the policy spoke,
	 * so its admission still counts what that session proved. */
	idx = session_lookup(&u->st, &client);
	seen = idx;
	if (idx != SESSION_NONE && u->st.s[idx].last_active + u->conf.session_timeout <= d->now)
		seen = SESSION_NONE;
	v = u->pol->client_dgram(u->pobj, u, seen, &client, d);
	if (!v)
		return;
	if (idx != SESSION_NONE && seen == SESSION_NONE) {
		udprelay_close_session(u, idx, CLOSE_IDLE);
		idx = SESSION_NONE;
	}
	/* An unassured session ends --unassured-timeout after it opened: a
	 * request sent in its last fifth would find the session gone when the
	 * answer comes back. It gets a fresh session instead; a flooder gains
	 * nothing, sessions still end that long after they open. */
	if (idx != SESSION_NONE && (v & UDPRELAY_ASKS) && !u->st.s[idx].assured &&
	    u->st.s[idx].opened + u->conf.unassured_timeout <
		d->now + u->conf.unassured_timeout / 5) {
		udprelay_close_session(u, idx, CLOSE_UNASSURED);
		idx = SESSION_NONE;
	}
	if (idx == SESSION_NONE) {
		idx = session_open(u, &client, v & UDPRELAY_ADMITTED, d);
		if (idx == SESSION_NONE)
			return;
		if (u->pol->session_opened && !u->pol->session_opened(u->pobj, u, idx, d, v))
			return;
	}
	if (forward(u, idx, u->st.s[idx].fd, NULL, d)) {
		session_heard_up(&u->st, idx, d->now);
		u->st.s[idx].pkts_up++;
		STAT_ADD(u->stats->up_pkts, 1);
		STAT_ADD(u->stats->up_bytes, d->len);
	}
}

static void from_server(struct udprelay *u, uint32_t ref, struct loop_dgram *d)
{
	uint32_t idx = session_deref(&u->st, ref);
	struct session *s;
	bool pass;

	if (idx == SESSION_NONE)
		return; /* the session closed while this was queued */
	pass = u->pol->server_dgram(u->pobj, u, idx, d);
	if (d->truncated) {
		STAT_ADD(u->stats->drops[DROP_TRUNCATED], 1);
		return;
	}
	if (!pass)
		return;
	s = &u->st.s[idx];
	if (forward(u, idx, u->pub_fd, &s->client, d)) {
		s->pkts_down++;
		STAT_ADD(u->stats->down_pkts, 1);
		STAT_ADD(u->stats->down_bytes, d->len);
	}
}

/* The upstream's port is closed: a normal result (it may come back), not
 * a reason to drop the session. */
static void upstream_refused(struct udprelay *u)
{
	STAT_ADD(u->stats->refused, 1);
	if (u->pol->upstream_refused)
		u->pol->upstream_refused(u->pobj, loop_now());
}

/* The forwarder's endpoints: the public socket, and its sessions' (one
 * multi endpoint, refs from session_ref). */

static void public_dgram(void *obj, uint32_t ref, struct loop_dgram *d)
{
	(void)ref;
	from_client(obj, d);
}

static void public_recv_error(void *obj, uint32_t ref, int err)
{
	(void)obj;
	(void)ref;
	log_debug("receive on the public socket: %s", strerror(-err));
}

/* Sends from the public socket that are not forwards: the policy's
 * replies (a failure is a drop). */
static void public_sent(void *obj, uint32_t ref, int res)
{
	struct udprelay *u = obj;

	if (ref == UDPRELAY_REF_PRBE) {
		prbe_port_sent(u->prbe_stats, res);
		if (res < 0)
			STAT_ADD(u->stats->drops[DROP_PRBE], 1);
	} else if (res < 0) {
		STAT_ADD(u->stats->drops[DROP_SEND_ERROR], 1);
	}
}

static void public_timer(void *obj, uint32_t ref, uint64_t now)
{
	(void)ref;
	udprelay_tick(obj, now);
}

static void session_dgram(void *obj, uint32_t ref, struct loop_dgram *d)
{
	from_server(obj, ref, d);
}

static void session_recv_error(void *obj, uint32_t ref, int err)
{
	struct udprelay *u = obj;
	uint32_t idx;

	/* A closed upstream port shows up on its connected sockets; the
	 * session stays, the server may come back. So do passing conditions. */
	if (err == -ECONNREFUSED) {
		upstream_refused(u);
		return;
	}
	if (err == -EAGAIN || err == -EINTR || err == -ENOBUFS || err == -ENOMEM)
		return;
	/* Anything else and the socket is of no further use. */
	idx = session_deref(&u->st, ref);
	if (idx != SESSION_NONE) {
		log_debug("session socket: %s", strerror(-err));
		udprelay_close_session(u, idx, CLOSE_ERROR);
	}
}

/* Every forward is queued under its session's id, whichever socket it
 * leaves from. */
static void session_sent(void *obj, uint32_t ref, int res)
{
	struct udprelay *u = obj;
	uint32_t idx;

	idx = session_deref(&u->st, ref);
	if (idx != SESSION_NONE && u->st.s[idx].queued > 0)
		u->st.s[idx].queued--;
	if (res >= 0)
		return;
	if (res == -ECONNREFUSED)
		upstream_refused(u);
	else
		STAT_ADD(u->stats->drops[DROP_SEND_ERROR], 1);
}

static const struct endpoint_ops udprelay_public_ops = {
    .name = "public",
    .multi = true,
    .on_dgram = public_dgram,
    .on_recv_error = public_recv_error,
    .on_sent = public_sent,
    .on_timer = public_timer,
};

static const struct endpoint_ops udprelay_session_ops = {
    .name = "session",
    .multi = true,
    .on_dgram = session_dgram,
    .on_recv_error = session_recv_error,
    .on_sent = session_sent,
};
