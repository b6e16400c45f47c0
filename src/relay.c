/* SPDX-License-Identifier: ISC */
/* What to do with a datagram: find or open the client's session, forward,
 * count. Plus the heartbeat round's I/O and master resolution. */
#include "relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "addrclass.h"
#include "huffman.h"
#include "json.h"
#include "log.h"
#include "net.h"
#include "q3proto.h"
#include "qport.h"
#include "resolver.h"

/* Source IPs tracked for query limits: 2 MiB, far more than a game
 * server's audience; an attacker with more IPs recycles idle buckets. */
#define RELAY_RL_ENTRIES 65536
/* IPs accepted as players in RELAY_PROVEN_WINDOW: only the game server's
 * connectResponse adds one, which a forged source never sees. */
#define RELAY_PROVEN_ENTRIES 16384

static uint64_t random64(void)
{
	uint64_t v = 0;

	/* getrandom with GRND_NONBLOCK never blocks after boot; on failure a
	 * clock-derived value still differs per round. */
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = loop_now() * 0x9e3779b97f4a7c15ull;
	return v;
}

static void masters_init(struct relay *r)
{
	const struct relay_conf *c = r->conf;

	r->nmasters = c->nmasters;
	r->stats.nmasters = c->nmasters;
	for (unsigned i = 0; i < c->nmasters; i++) {
		struct relay_master *m = &r->masters[i];
		char lit[ADDR_HOSTLEN + 8];

		memcpy(m->host, c->masters[i].host, sizeof(m->host));
		m->port = c->masters[i].port;
		m->last_err = -1; /* nothing logged yet */
		addr_hostport(m->host, m->port, lit);
		snprintf(r->stats.masters[i].name, sizeof(r->stats.masters[i].name), "%s", lit);
		/* Literals need no resolver. */
		if (addr_parse_numeric(lit, &m->addr) == 0) {
			if (m->addr.sa.sa_family == AF_INET && c->listen.sa.sa_family == AF_INET6)
				addrclass_map_v4(&m->addr);
			m->numeric = m->have_addr = m->addr.sa.sa_family == c->listen.sa.sa_family;
			if (m->have_addr)
				addr_str(&m->addr.sa, r->stats.masters[i].addr);
		}
	}
}

/* The game server's budget and the cache's. Masters keep 2 tokens each (a
 * getChallenge and a getinfo), together no more than what leaves players
 * theirs and browsers one; ET and RTCW servers count connect too. */
static int relay_budget_init(struct relay *r, uint64_t now)
{
	const struct relay_conf *c = r->conf;
	unsigned burst = c->server_query_burst, masters = RELAY_RESERVE_MASTER * c->nmasters;

	int err;

	if (burst <= RELAY_RESERVE_PLAYER + 1)
		return -EINVAL;
	if (masters > burst - RELAY_RESERVE_PLAYER - 1)
		masters = burst - RELAY_RESERVE_PLAYER - 1;
	r->connect_counts = strcmp(c->game, "ET") == 0 || strcmp(c->game, "RTCW") == 0;
	/* DarkPlaces tells clients apart by address and port (the relay's
	 * session ports keep them apart) and has no qport: bytes 4-5 of its
	 * packets are part of a sequence number, or ciphertext. */
	r->qport_rules = strcmp(c->game, "DP") != 0;
	rl_bucket_init(&r->cache_pkts, c->query_cache_rate, c->query_cache_rate, now);
	rl_bucket_init(&r->cache_bytes, c->query_cache_bytes, c->query_cache_bytes, now);
	err = rl_budget_init(&r->budget, burst, c->server_query_rate, masters, RELAY_RESERVE_PLAYER,
			     now);
	if (!err)
		err = rl_budget_players(&r->budget, RELAY_RESERVE_PROVEN, RELAY_PLAYER_FRESH);
	return err;
}

/* The stamps that share the players' tokens: by network, and by IP for
 * returning players. Each table has a hash key of its own. */
static int player_tables_init(struct relay *r)
{
	struct rl_stamps *t[3] = {&r->player_nets, &r->proven, &r->proven_gap};
	uint64_t ttl[3] = {RELAY_PLAYER_GAP, RELAY_PROVEN_WINDOW, RELAY_PROVEN_GAP};
	int err = 0;

	for (int i = 0; i < 3 && !err; i++) {
		uint64_t v[2] = {random64(), random64()};
		uint8_t key[16];

		memcpy(key, v, sizeof(key));
		err = i == 0 ? rl_stamps_init(t[i], RELAY_RL_ENTRIES, RL_NET_V4_BITS,
					      RL_NET_V6_BITS, ttl[i] * NS_PER_MS, key)
			     : rl_stamps_init(t[i], RELAY_PROVEN_ENTRIES, 32, RL_V6_PREFIX_BITS,
					      ttl[i] * NS_PER_MS, key);
	}
	return err;
}

/* Connect userinfo decoded (Huffman) per second in all, and at once. The
 * qport in it decides whose slot a connect is for, so a connect that cannot
 * be decoded is dropped (connect_unread): the budget must never meet a
 * player. One decode costs 25 us for a player's 300-byte userinfo, 125 us
 * for the longest (1 KiB of many symbols), measured on a 2-core x86-64 VM
 * at -O2: 200 a second is at most 2.5 % of a core, and three times what a
 * full 64-player server's reconnecting after a restart sends at once. Each
 * source is held to its query bucket (or a master's allowance) already. */
#define RELAY_DECODE_BURST 200
#define RELAY_DECODE_RATE  200

/* The limits on what a source may open: new sessions per IP and in all, the
 * masters' own allowances, and the userinfo decoding budget. */
static int admission_init(struct relay *r, const uint8_t key[16], uint64_t now)
{
	const struct relay_conf *c = r->conf;

	for (unsigned i = 0; i < r->nmasters; i++) {
		r->masters[i].mq_tokens = c->master_queries;
		r->masters[i].mq_last = now;
	}
	rl_bucket_init(&r->sess_rl, c->session_rate, c->session_rate, now);
	rl_bucket_init(&r->decode_rl, RELAY_DECODE_BURST, RELAY_DECODE_RATE, now);
	return rl_table_init(&r->ip_sess_rl, RELAY_RL_ENTRIES, c->ip_session_rate,
			     c->ip_session_rate, key);
}

int relay_open(struct relay *r, unsigned index, const struct relay_conf *conf,
	       const union etr_sockaddr *upstream, struct etr_stats *global)
{
	char a[ADDR_STRLEN];
	uint8_t key[16];
	int err;

	memset(r, 0, sizeof(*r));
	r->conf = conf;
	r->index = index;
	r->global = global;
	r->upstream = *upstream;
	r->pub_fd = r->probe_fd = r->res_fd = -1;
	r->session_timeout = conf->session_timeout_ms * NS_PER_MS;
	r->unassured_timeout = conf->unassured_timeout_ms * NS_PER_MS;
	r->port_next = conf->port_min;
	r->listener_loopback = addrclass_bogon(&conf->listen, false) &&
			       !addrclass_bogon(&conf->listen, true);
	pthread_mutex_init(&r->stats.lock, NULL);
	snprintf(r->stats.name, sizeof(r->stats.name), "%s", conf->name);
	addr_str(&conf->listen.sa, r->stats.public_addr);
	addr_str(&upstream->sa, r->stats.upstream);
	snprintf(r->stats.game, sizeof(r->stats.game), "%s", conf->game);
	hb_init(&r->hb, conf->heartbeat_interval_ms * NS_PER_MS,
		conf->probe_timeout_ms * NS_PER_MS, CONF_PROBE_ATTEMPTS);
	masters_init(r);

	for (unsigned i = 0; i < 2; i++) {
		uint64_t v = random64();
		memcpy(key + 8 * i, &v, 8);
	}
	err = session_table_init(&r->st, conf->max_sessions, key);
	if (!err) {
		uint64_t v = random64();
		memcpy(key, &v, 8); /* a key of its own: no hash shared across tables */
		err = rl_table_init(&r->ip_rl, RELAY_RL_ENTRIES, conf->ip_query_burst,
				    conf->ip_query_rate, key);
	}
	if (!err) {
		uint64_t v = random64();
		memcpy(key + 8, &v, 8);
		err = admission_init(r, key, loop_now());
	}
	if (!err)
		err = relay_budget_init(r, loop_now());
	if (!err)
		err = player_tables_init(r);
	if (!err)
		err = qcache_init(&r->cache, conf->query_cache_ms * NS_PER_MS,
				  conf->query_cache_stale_ms * NS_PER_MS, conf->query_cache_max_reply);
	if (err < 0) {
		log_warnx("relay %s: tables for %u sessions: %s", conf->name, conf->max_sessions,
			  strerror(-err));
		return err;
	}
	r->pub_fd = net_bind_public(&conf->listen);
	if (r->pub_fd < 0) {
		log_warnx("relay %s: bind %s: %s%s", conf->name, addr_str(&conf->listen.sa, a),
			  strerror(-r->pub_fd),
			  r->pub_fd == -EADDRINUSE ? " (another process owns the port)" : "");
		return r->pub_fd;
	}
	r->probe_fd = net_connect_udp(upstream);
	if (r->probe_fd < 0) {
		log_warnx("relay %s: probe socket to %s: %s", conf->name,
			  addr_str(&upstream->sa, a), strerror(-r->probe_fd));
		return r->probe_fd;
	}
	err = resolver_create(&r->res, conf->listen.sa.sa_family, &r->res_fd);
	if (err < 0) {
		log_warnx("relay %s: resolver: %s", conf->name, strerror(-err));
		return err;
	}
	return 0;
}

static const struct endpoint_ops relay_public_ops, relay_session_ops, relay_probe_ops,
	relay_resolver_ops;

/* Refs under the public endpoint (a multi endpoint: the relay owns it for
 * the process's life), so that its on_sent knows what a send was: the
 * socket itself and the relay's timer, a reply (cache answer, print), a
 * heartbeat or a flatline to master m. */
enum { PUB_SOCKET, PUB_REPLY, PUB_HEARTBEAT, PUB_FLATLINE };

static uint32_t pub_id(const struct relay *r, unsigned kind, unsigned master)
{
	return endpoint_ref_id(r->ep_public, (uint32_t)kind << 8 | master);
}

/* Arm the relay's timer when its next deadline may have come earlier
 * (a session opened, a probe round brought forward, a heartbeat sent);
 * one that moved later (every forward touches a session) leaves the timer
 * to fire early once, and relay_on_tick re-arms it exactly. So nothing is
 * recomputed per packet. */
static void relay_arm(struct relay *r)
{
	uint64_t at;

	if (!r->attached)
		return;
	at = relay_next_deadline(r);
	if (at != UINT64_MAX && (!timer_armed(&r->timer) || at < r->timer.at))
		r->ops->timer_set(r->loop, &r->timer, at);
}

int relay_attach(struct relay *r, const struct loop_ops *ops, struct loop *l,
		 struct endpoint_table *ep)
{
	int s[RELAY_ENDPOINTS];
	int err;

	r->ops = ops;
	r->loop = l;
	r->ep = ep;
	s[0] = endpoint_add(ep, &relay_public_ops, r);
	s[1] = endpoint_add(ep, &relay_session_ops, r);
	s[2] = endpoint_add(ep, &relay_probe_ops, r);
	s[3] = endpoint_add(ep, &relay_resolver_ops, r);
	for (unsigned i = 0; i < RELAY_ENDPOINTS; i++)
		if (s[i] < 0) {
			for (unsigned j = 0; j < RELAY_ENDPOINTS; j++)
				if (s[j] >= 0)
					endpoint_del(ep, (unsigned)s[j]);
			r->ep = NULL;
			return -ENOSPC;
		}
	r->ep_public = (unsigned)s[0];
	r->ep_sessions = (unsigned)s[1];
	r->ep_probe = (unsigned)s[2];
	r->ep_resolver = (unsigned)s[3];
	r->attached = true;
	timer_init(&r->timer, pub_id(r, PUB_SOCKET, 0));
	err = ops->add_socket(l, r->pub_fd, pub_id(r, PUB_SOCKET, 0));
	if (!err)
		err = ops->add_socket(l, r->probe_fd, endpoint_id(ep, r->ep_probe));
	if (!err)
		err = ops->watch(l, r->res_fd, endpoint_id(ep, r->ep_resolver));
	relay_arm(r);
	return err;
}

static uint32_t session_id(const struct relay *r, uint32_t idx)
{
	return endpoint_ref_id(r->ep_sessions, session_ref(&r->st, idx));
}

static void session_close(struct relay *r, uint32_t idx, enum stats_close why)
{
	struct session *s = &r->st.s[idx];
	char a[ADDR_STRLEN];

	if (log_debug_on)
		addr_str(&s->client.sa, a);
	r->ops->del_socket(r->loop, s->fd, session_id(r, idx));
	close(session_remove(&r->st, idx));
	STAT_ADD(r->stats.sessions_closed[why], 1);
	STAT_SET(r->stats.sessions_active, r->st.active);
	log_debug("session - %s (%s, %u active)", a, stats_close_name(why), r->st.active);
}

static void expire_sessions(struct relay *r, uint64_t now)
{
	uint32_t idx;

	while ((idx = session_expired(&r->st, now, r->session_timeout)) != SESSION_NONE)
		session_close(r, idx, CLOSE_IDLE);
	while ((idx = session_unassured_expired(&r->st, now, r->unassured_timeout)) !=
	       SESSION_NONE)
		session_close(r, idx, CLOSE_UNASSURED);
}

/* Which master, if any, this client is: masters challenge from the
 * address and port the heartbeat went to (dpmaster and etmaster answer
 * from their listening socket), so anything else is not a master. */
static uint8_t master_of(const struct relay *r, const union etr_sockaddr *client)
{
	for (unsigned i = 0; i < r->nmasters; i++)
		if (r->masters[i].have_addr && addr_equal(&r->masters[i].addr, client))
			return (uint8_t)(i + 1);
	return 0;
}

/* Count a datagram that goes no further. With --debug a connectionless one
 * gets its line, with the reason, so that a client's missing answer can be
 * explained (within the debug line cap, like every other line). */
static void refuse(struct relay *r, const union etr_sockaddr *client, const struct loop_dgram *d,
		   enum stats_drop why)
{
	char a[ADDR_STRLEN], w[Q3_WORD_MAX];

	STAT_ADD(r->stats.drops[why], 1);
	if (!log_debug_on || !q3_is_connectionless(d->data, d->len))
		return;
	q3_word(d->data, d->len, w);
	log_debug("%s -> %-3s %s (%zu B) refused: %s", addr_str(&client->sa, a), r->conf->game, w,
		  d->len, stats_drop_name(why));
}

/* A socket for a new session, connected to the game server. */
static int session_socket(struct relay *r)
{
	if (r->conf->port_min)
		return net_connect_udp_range(&r->upstream, r->conf->port_min, r->conf->port_max,
					     &r->port_next);
	return net_connect_udp(&r->upstream);
}

/* Out of descriptors or of session ports: closing a session gives one back. */
static bool socket_scarce(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -EADDRINUSE || err == -ENOBUFS;
}

/* New sessions per second, from this IP and in all. In-game packets and
 * commands the game server's budget did not admit (it never saw them: no
 * proof of anything, and spoofed at line rate) may only take the upper half
 * of the relay's tokens; the lower half is kept for queries it admitted, a
 * player's getchallenge above all. */
static bool session_rate_allow(struct relay *r, const union etr_sockaddr *client, bool admitted,
			       const struct loop_dgram *d)
{
	if (!admitted && (uint64_t)rl_available(&r->sess_rl, d->now) * 2 <= r->conf->session_rate) {
		refuse(r, client, d, DROP_SESSION_RATE);
		return false;
	}
	if (!rl_table_allow(&r->ip_sess_rl, client, d->now)) {
		refuse(r, client, d, DROP_IP_SESSION_RATE);
		return false;
	}
	if (!rl_take(&r->sess_rl, d->now)) {
		refuse(r, client, d, DROP_SESSION_RATE);
		return false;
	}
	return true;
}

/* A session for a client that has none. admitted: the packet is a query
 * the game server's budget let through. */
static uint32_t session_open(struct relay *r, const union etr_sockaddr *client, bool admitted,
			     const struct loop_dgram *d)
{
	uint64_t now = d->now;
	uint32_t idx;
	int fd, err;

	/* A draining relay keeps its sessions and takes no new ones. */
	if (STAT_GET(r->global->lifecycle) != LIFECYCLE_ACTIVE) {
		refuse(r, client, d, DROP_DRAINING);
		return SESSION_NONE;
	}
	/* Expired sessions make room before a new one is refused. */
	expire_sessions(r, now);
	if (session_ip_count(&r->st, client) >= r->conf->sessions_per_ip) {
		refuse(r, client, d, DROP_IP_SESSIONS);
		return SESSION_NONE;
	}
	if (!session_rate_allow(r, client, admitted, d))
		return SESSION_NONE;
	/* Full: the oldest session the game server never answered makes room;
	 * one it answered is never evicted for a newcomer, nor one whose
	 * client was just sent a challenge (its connect is on its way). */
	if (r->st.active >= r->st.cap) {
		idx = session_evictable(&r->st, now);
		if (idx == SESSION_NONE) {
			refuse(r, client, d, DROP_TABLE_FULL);
			return SESSION_NONE;
		}
		session_close(r, idx, CLOSE_EVICTED);
	}
	/* Out of descriptors or ports (EMFILE, ENFILE, --session-ports all
	 * taken): an unassured session makes room the same way, once. */
	fd = session_socket(r);
	if (fd < 0 && socket_scarce(fd) && (idx = session_evictable(&r->st, now)) != SESSION_NONE) {
		log_debug("session socket: %s; evicting an unassured session", strerror(-fd));
		session_close(r, idx, CLOSE_EVICTED);
		fd = session_socket(r);
	}
	if (fd < 0) {
		log_debug("session socket: %s", strerror(-fd));
		refuse(r, client, d, DROP_SOCKET);
		return SESSION_NONE;
	}
	idx = session_insert(&r->st, client, fd, now);
	err = r->ops->add_socket(r->loop, fd, session_id(r, idx));
	if (err < 0) {
		session_remove(&r->st, idx);
		close(fd);
		refuse(r, client, d, DROP_SOCKET);
		return SESSION_NONE;
	}
	r->st.s[idx].master = master_of(r, client);
	/* A master is the address and port our own heartbeat went to; it only
	 * ever asks, so it would never be assured, and a challenge arriving
	 * as its session times out would lose its answer (and our listing).
	 * It is assured from the start. */
	if (r->st.s[idx].master)
		session_assure(&r->st, idx);
	STAT_ADD(r->stats.sessions_opened, 1);
	STAT_SET(r->stats.sessions_active, r->st.active);
	relay_arm(r);
	if (log_debug_on) {
		char a[ADDR_STRLEN];
		log_debug("session + %s (%u active)", addr_str(&client->sa, a), r->st.active);
	}
	return idx;
}

static void log_packet(const struct relay *r, const union etr_sockaddr *client,
		       const struct loop_dgram *d, const char *dir)
{
	char a[ADDR_STRLEN], w[Q3_WORD_MAX];

	if (!log_debug_on || !q3_is_connectionless(d->data, d->len))
		return;
	q3_word(d->data, d->len, w);
	log_debug("%s %s %-3s %s (%zu B)", addr_str(&client->sa, a), dir, r->conf->game, w,
		  d->len);
}

/* Hand d to the kernel for session idx; counts the drop when it cannot. */
static bool forward(struct relay *r, uint32_t idx, int fd, const union etr_sockaddr *dst,
		    struct loop_dgram *d)
{
	struct session *s = &r->st.s[idx];

	if (s->queued >= SESSION_QUEUE_MAX) {
		STAT_ADD(r->stats.drops[DROP_QUEUE_FULL], 1);
		return false;
	}
	if (r->ops->forward(r->loop, fd, dst ? &dst->sa : NULL, dst ? addr_len(dst) : 0, d,
			    session_id(r, idx)) < 0) {
		STAT_ADD(r->stats.drops[DROP_SEND_ERROR], 1);
		return false;
	}
	s->queued++;
	session_touch(&r->st, idx, d->now);
	return true;
}

/* A master's own allowance: --master-queries tokens at once, one back every
 * heartbeat interval / --master-queries. Sub-second rates, so not an
 * rl_bucket. */
static bool master_allow(struct relay *r, struct relay_master *m, uint64_t now)
{
	uint32_t burst = r->conf->master_queries;
	uint64_t period = r->conf->heartbeat_interval_ms * NS_PER_MS / burst;

	if (period == 0)
		period = 1;
	if (m->mq_tokens < burst && now > m->mq_last) {
		uint64_t back = (now - m->mq_last) / period;

		if (back >= burst - m->mq_tokens) {
			m->mq_tokens = burst;
		} else {
			m->mq_tokens += (uint32_t)back;
			m->mq_last += back * period;
		}
	}
	if (m->mq_tokens == 0)
		return false;
	if (m->mq_tokens == burst)
		m->mq_last = now; /* the refill clock starts with the first token taken */
	m->mq_tokens--;
	return true;
}

/* A heartbeat invites the master's queries: its allowance is full again,
 * however soon after the last round (a server back up heartbeats at once). */
static void master_invite(const struct relay *r, struct relay_master *m)
{
	m->mq_tokens = r->conf->master_queries;
}

/* Connectionless commands the game server limits per source IP. */
static bool query_limited(enum q3_cmd cmd)
{
	return cmd == Q3_GETINFO || cmd == Q3_GETSTATUS || cmd == Q3_GETCHALLENGE ||
	       cmd == Q3_CONNECT || cmd == Q3_RCON;
}

/* Answer a query from the cache within the cache's own budget (answers
 * and bytes per second, per relay): the bound on what spoofed queries can
 * draw. Past it the query is dropped, counted: the server's budget is not
 * the place for a flood the cache turned away. */
static void cache_answer(struct relay *r, const union etr_sockaddr *client,
			 const struct loop_dgram *d, const uint8_t *out, int n)
{
	uint64_t now = d->now;

	if (rl_available(&r->cache_pkts, now) < 1 ||
	    !rl_take_n(&r->cache_bytes, (uint64_t)n, now)) {
		refuse(r, client, d, DROP_CACHE_RATE);
		return;
	}
	rl_take(&r->cache_pkts, now);
	if (r->ops->send(r->loop, r->pub_fd, &client->sa, addr_len(client), out, (size_t)n,
			 pub_id(r, PUB_REPLY, 0)) < 0) {
		STAT_ADD(r->stats.drops[DROP_SEND_ERROR], 1);
	} else {
		STAT_ADD(r->stats.cache_answers, 1);
		STAT_ADD(r->stats.down_pkts, 1);
		STAT_ADD(r->stats.down_bytes, (uint64_t)n);
		if (log_debug_on) {
			char a[ADDR_STRLEN], w[Q3_WORD_MAX];
			q3_word(out, (size_t)n, w);
			log_debug("%s <- %-3s %s (%d B, from cache)", addr_str(&client->sa, a),
				  r->conf->game, w, n);
		}
	}
}

/* An IP the game server accepted as a player lately, or this very address
 * and port with its assured session still open: a returning player. */
static bool player_proven(const struct relay *r, const union etr_sockaddr *client, uint64_t now)
{
	uint32_t idx;

	if (rl_stamps_recent(&r->proven, client, now))
		return true;
	idx = session_lookup(&r->st, client);
	return idx != SESSION_NONE && r->st.s[idx].assured && !r->st.s[idx].master;
}

/* A player's token (getchallenge, and connect where the game counts it).
 * Nothing before the connect proves a source's address, so the tokens are
 * shared out by where sources say they are. A returning player may take
 * every token (once per RELAY_PROVEN_GAP per IP, and the connect that
 * follows); a network (IPv4 /24, IPv6 /48) that took no player's token
 * within RELAY_PLAYER_GAP all but the last RELAY_RESERVE_PROVEN; one that
 * did all but RELAY_PLAYER_FRESH more. A flood from one network, however
 * many addresses it has there, can so never take the token the next resend
 * of a player from elsewhere finds. The connect after a network's fresh
 * getchallenge counts as fresh too (once): the join completes. */
static bool player_admit(struct relay *r, const union etr_sockaddr *client, enum q3_cmd cmd,
			 const struct loop_dgram *d)
{
	uint64_t now = d->now;
	enum rl_class cls = RL_PLAYER;

	if (player_proven(r, client, now) &&
	    (!rl_stamps_recent(&r->proven_gap, client, now) ||
	     (cmd == Q3_CONNECT && rl_stamps_use_credit(&r->proven_gap, client, now))) &&
	    rl_budget_take(&r->budget, RL_PROVEN, now)) {
		rl_stamps_mark(&r->proven_gap, client, now, cmd == Q3_GETCHALLENGE);
		return true;
	}
	if (rl_stamps_recent(&r->player_nets, client, now) &&
	    !(cmd == Q3_CONNECT && rl_stamps_use_credit(&r->player_nets, client, now)))
		cls = RL_PLAYER_AGAIN;
	if (!rl_budget_take(&r->budget, cls, now)) {
		refuse(r, client, d,
		       cls == RL_PLAYER_AGAIN && rl_budget_left(&r->budget, RL_PLAYER, now) > 0
			   ? DROP_NET_RATE
			   : DROP_SERVER_RATE);
		return false;
	}
	rl_stamps_mark(&r->player_nets, client, now, cls == RL_PLAYER && cmd == Q3_GETCHALLENGE);
	return true;
}

/* The cache, then the game server's budget, for a query the source's own
 * limits let through. Returns true when it may go on to the game server.
 *
 * A browser's getinfo or getstatus is answered from a fresh copy; when the
 * copy is past --query-cache, this query goes to the game server as the one
 * refresh (if the budget has a browser's token) and every other is answered
 * from the older copy, up to --query-cache-stale older. A master's
 * challenge goes to the game server itself: the listing then rests on a
 * live answer, as when the server heartbeats itself. */
static bool admit_server_query(struct relay *r, const union etr_sockaddr *client,
			       enum q3_cmd cmd, bool master, const struct loop_dgram *d)
{
	enum rl_class cls = rl_budget_class(cmd, master, r->connect_counts);
	uint8_t out[LOOP_MAX_DGRAM];
	size_t cap = r->cache.max_reply < sizeof(out) ? r->cache.max_reply : sizeof(out);
	int n;

	if (cls == RL_BROWSER && r->hb.server == HB_UP) {
		if (qcache_refresh_due(&r->cache, cmd, d->now) &&
		    rl_budget_take(&r->budget, cls, d->now)) {
			qcache_refresh_sent(&r->cache, cmd, d->now);
			return true;
		}
		n = qcache_answer(&r->cache, d->data, d->len, d->now, out, cap);
		if (n >= 0) {
			cache_answer(r, client, d, out, n);
			return false;
		}
	}
	if (cls == RL_PLAYER)
		return player_admit(r, client, cmd, d);
	if (!rl_budget_take(&r->budget, cls, d->now)) {
		refuse(r, client, d, DROP_SERVER_RATE);
		return false;
	}
	return true;
}

/* The source's own limits, then admit_server_query. Returns true when the
 * packet may go on to the game server. */
static bool admit_query(struct relay *r, const union etr_sockaddr *client, enum q3_cmd cmd,
			const struct loop_dgram *d)
{
	uint8_t m = master_of(r, client);
	bool master = false;

	if (m) {
		/* A master's address is public and easily forged: it is not
		 * exempt, it has an allowance of its own. Past it, a flood in
		 * its name must still not cost the real master its listing, so
		 * its getinfo and getstatus are served as a browser's (from the
		 * cache, or within the browsers' share of the budget) without
		 * the per-IP bucket that the flood has emptied; the cache's own
		 * budget bounds what that sends the master's way. Nothing else
		 * passes. */
		master = master_allow(r, &r->masters[m - 1], d->now);
		/* The masters' reserve and the shared tokens spent (by the
		 * probe, or by forged packets that took the allowance before
		 * the real master): its challenge is answered from the copy
		 * rather than dropped. */
		if (master && (cmd == Q3_GETINFO || cmd == Q3_GETSTATUS) &&
		    rl_budget_left(&r->budget, RL_MASTER, d->now) == 0 &&
		    rl_budget_left(&r->budget, RL_BROWSER, d->now) == 0)
			master = false;
		if (!master && cmd != Q3_GETINFO && cmd != Q3_GETSTATUS) {
			refuse(r, client, d, DROP_MASTER_RATE);
			return false;
		}
	} else if (!rl_table_allow(&r->ip_rl, client, d->now)) {
		/* Every connectionless packet, known command or not: the game
		 * server reads commands its own way, and anything it might
		 * answer is a query. Before the cache: a cached statusResponse
		 * is many times the size of the query, and spoofed queries
		 * would aim it at a victim. */
		refuse(r, client, d, DROP_IP_RATE);
		return false;
	}
	return !query_limited(cmd) || admit_server_query(r, client, cmd, master, d);
}

/* A packet refused for its qport: counted as a collision, with its drop
 * reason, and logged once a second at most (forged traffic must not flood
 * the log; the counters have them all). owner: the session that holds the
 * qport, or SESSION_NONE for a packet with another qport than its own
 * session's. */
static void qport_refuse(struct relay *r, uint32_t idx, uint32_t owner, uint16_t q,
			 const struct loop_dgram *d, enum stats_drop why)
{
	const struct session *s = &r->st.s[idx];
	char a[ADDR_STRLEN], b[ADDR_STRLEN];

	STAT_ADD(r->stats.qport_collisions, 1);
	refuse(r, &s->client, d, why);
	/* Two real players whose clients picked the same qport (ioquake3 takes
	 * it from the clock at start-up) cannot both play behind one address:
	 * the one refused is told why, on its connect screen, rather than
	 * left waiting. Its connect was challenged and passed its source's
	 * query bucket, and the answer is about as large: no amplifier. */
	if (why == DROP_QPORT_OWNED && q3_is_connectionless(d->data, d->len)) {
		char text[128];
		uint8_t pkt[136];
		int n;

		snprintf(text, sizeof(text),
			 "print\nqport %u is in use by another player here: restart the game "
			 "(or set net_qport) and connect again\n",
			 q);
		n = q3_build(pkt, sizeof(pkt), text);
		if (n > 0 && r->ops->send(r->loop, r->pub_fd, &s->client.sa, addr_len(&s->client),
					  pkt, (size_t)n, pub_id(r, PUB_REPLY, 0)) < 0)
			STAT_ADD(r->stats.drops[DROP_SEND_ERROR], 1);
	}
	if (d->now < r->qport_log_next)
		return;
	r->qport_log_next = d->now + NS_PER_SEC;
	addr_str(&s->client.sa, a);
	if (owner == SESSION_NONE)
		log_warnx("relay %s: %s sent qport %u, its session's is %u: refused (%s)",
			  r->conf->name, a, q, s->qport, stats_drop_name(why));
	else
		log_warnx("relay %s: %s %s qport %u, which %s holds: refused (%s)", r->conf->name,
			  a, why == DROP_CONNECT_UNREAD || q3_is_connectionless(d->data, d->len)
				     ? "connects with"
				     : "sent",
			  q, addr_str(&r->st.s[owner].client.sa, b), stats_drop_name(why));
}

/* Behind the relay every player has the relay's address, and the game
 * server tells them apart by qport alone (bytes 4-5 of an in-game packet):
 * it hands a packet to the player with that qport and sends that player's
 * stream to the port it came from. So an in-game packet must carry its
 * session's qport, and one session holds a qport at a time (see
 * session_qport_claim). Returns true when the packet may go on. */
static bool note_qport(struct relay *r, uint32_t idx, const struct loop_dgram *d)
{
	uint16_t q = qport_of_packet(d->data, d->len);
	uint32_t owner = SESSION_NONE;

	switch (session_qport_claim(&r->st, idx, q, false, d->now, &owner)) {
	case SESSION_QPORT_OK:
		return true;
	case SESSION_QPORT_MISMATCH:
		qport_refuse(r, idx, SESSION_NONE, q, d, DROP_QPORT_MISMATCH);
		return false;
	case SESSION_QPORT_OWNED:
		qport_refuse(r, idx, owner, q, d, DROP_QPORT_OWNED);
		return false;
	}
	return false;
}

/* A connect carries the player's userinfo, Huffman-compressed; the game
 * server takes one with the qport of a player it has (from the relay's
 * address, as all of them are) as that player's reconnect, and gives it
 * the slot. So the connect's qport becomes its session's, unless another
 * session holds it; and a connect whose qport the relay cannot read the
 * way the engine would (not the exact "connect " every client sends, a
 * malformed stream, an unquoted userinfo) or cannot afford to decode is
 * dropped: it could name anyone's. The name is kept for /sessions. Returns
 * true when the packet may go on. */
static bool note_player(struct relay *r, uint32_t idx, const struct loop_dgram *d)
{
	static const char prefix[HUFFMAN_CONNECT_OFFSET] = "\xff\xff\xff\xff"
							    "connect ";
	struct session *s = &r->st.s[idx];
	uint8_t text[HUFFMAN_INFO_MAX + 2];
	uint32_t owner = SESSION_NONE;
	const char *info;
	size_t start = 0;
	int n = -1, q = -1;

	if (d->len > HUFFMAN_CONNECT_OFFSET && memcmp(d->data, prefix, sizeof(prefix)) == 0 &&
	    rl_take(&r->decode_rl, d->now)) {
		n = huffman_decode(d->data + HUFFMAN_CONNECT_OFFSET,
				   d->len - HUFFMAN_CONNECT_OFFSET, text, sizeof(text));
		if (n >= 0)
			n = qport_connect_userinfo(text, (size_t)n, &start);
		if (n >= 0)
			q = qport_of_userinfo((const char *)text + start, (size_t)n);
	}
	if (q < 0) {
		refuse(r, &s->client, d, DROP_CONNECT_UNREAD);
		return false;
	}
	if (session_qport_claim(&r->st, idx, (uint16_t)q, true, d->now, &owner) !=
	    SESSION_QPORT_OK) {
		qport_refuse(r, idx, owner, (uint16_t)q, d, DROP_QPORT_OWNED);
		return false;
	}
	info = (const char *)text + start;
	if (q3_info_value(info, (size_t)n, "name", s->name, sizeof(s->name)) < 0)
		s->name[0] = '\0';
	return true;
}

/* A client connects with the challenge the game server sent to its
 * address and port, which here is its session's socket: a connect on a
 * session that was never sent one is refused by the game server anyway
 * ("no or bad challenge"). Refused here, before the budget, the Huffman
 * decoding and the qport rules, a flood of forged connects costs nothing
 * and cannot use up what real players' connects need: those the relay
 * examines are bounded by the challenges the game server's budget lets
 * out. DarkPlaces answers "challenge", not challengeResponse, and is left
 * to its server. */
static bool connect_challenged(struct relay *r, const union etr_sockaddr *client,
			       const struct loop_dgram *d)
{
	uint32_t idx;

	if (!r->qport_rules)
		return true;
	idx = session_lookup(&r->st, client);
	if (idx != SESSION_NONE && r->st.s[idx].challenged)
		return true;
	refuse(r, client, d, DROP_CONNECT_UNCHALLENGED);
	return false;
}

static void from_client(struct relay *r, struct loop_dgram *d)
{
	union etr_sockaddr client;
	enum q3_cmd cmd = Q3_GAME;
	uint32_t idx;

	if (!d->from || !addr_from(&client, d->from, d->fromlen)) {
		STAT_ADD(r->stats.drops[DROP_BAD_SOURCE], 1);
		return;
	}
	if (addrclass_bogon(&client, r->listener_loopback)) {
		refuse(r, &client, d, DROP_BOGON);
		return;
	}
	if (r->bans && banlist_match(r->bans, &client)) {
		refuse(r, &client, d, DROP_BANNED);
		return;
	}
	if (d->truncated) {
		refuse(r, &client, d, DROP_TRUNCATED);
		return;
	}
	/* In-game traffic (most packets) skips the command parsing. */
	if (q3_is_connectionless(d->data, d->len)) {
		cmd = q3_classify(d->data, d->len);
		if (cmd == Q3_CONNECT && !connect_challenged(r, &client, d))
			return;
		if (!admit_query(r, &client, cmd, d))
			return;
	}
	idx = session_lookup(&r->st, &client);
	if (idx != SESSION_NONE && r->st.s[idx].last_active + r->session_timeout <= d->now) {
		session_close(r, idx, CLOSE_IDLE);
		idx = SESSION_NONE;
	}
	/* An unassured session ends --unassured-timeout after it opened: a
	 * query sent in its last fifth would find the session gone when the
	 * answer comes back. It gets a fresh session instead; a flooder gains
	 * nothing, sessions still end that long after they open. */
	if (idx != SESSION_NONE && !r->st.s[idx].assured &&
	    (cmd == Q3_GETINFO || cmd == Q3_GETSTATUS || cmd == Q3_GETCHALLENGE) &&
	    r->st.s[idx].opened + r->unassured_timeout < d->now + r->unassured_timeout / 5) {
		session_close(r, idx, CLOSE_UNASSURED);
		idx = SESSION_NONE;
	}
	/* A query the game server's budget bounds may open a session from the
	 * tokens kept for such; anything else (in-game packets, unknown
	 * commands, an ioquake3 connect) only from the rest. */
	if (idx == SESSION_NONE &&
	    (idx = session_open(r, &client,
				cmd != Q3_GAME && query_limited(cmd) &&
					rl_budget_class(cmd, false, r->connect_counts) != RL_FREE,
				d)) == SESSION_NONE)
		return;
	log_packet(r, &client, d, "->");
	if (r->qport_rules && cmd == Q3_GAME && !note_qport(r, idx, d))
		return;
	if (r->qport_rules && cmd == Q3_CONNECT && !note_player(r, idx, d))
		return;
	if (forward(r, idx, r->st.s[idx].fd, NULL, d)) {
		session_heard_up(&r->st, idx, d->now);
		r->st.s[idx].pkts_up++;
		STAT_ADD(r->stats.up_pkts, 1);
		STAT_ADD(r->stats.up_bytes, d->len);
	}
}

/* Say when an event brought the next probe round forward (once per move:
 * later events that change nothing say nothing). */
static void log_early_round(const struct relay *r, uint64_t before, uint64_t now,
			    const char *why)
{
	uint64_t at = hb_deadline(&r->hb);

	if (!log_debug_on || at >= before)
		return;
	if (at <= now)
		log_debug("relay %s: %s: probe round now", r->conf->name, why);
	else
		log_debug("relay %s: %s: probe round in %llu ms", r->conf->name, why,
			  (unsigned long long)((at - now) / NS_PER_MS));
}

/* Publish one master's health for the ops plane. */
static void master_publish(struct relay *r, unsigned m, bool stamp)
{
	struct master_status *ms = &r->stats.masters[m];
	enum hb_master_state st = r->masters[m].health.state;

	pthread_mutex_lock(&r->stats.lock);
	ms->listing_confirmed = st == HB_MASTER_LISTED;
	ms->quiet = st == HB_MASTER_QUIET;
	if (stamp)
		ms->last_confirmed = (uint64_t)time(NULL);
	pthread_mutex_unlock(&r->stats.lock);
}

/* A master's challenge was answered from the public socket: the listing
 * loop is closed for that master. */
static void confirm_listing(struct relay *r, unsigned m, uint64_t now)
{
	unsigned ev = hb_master_challenged(&r->masters[m].health, now);

	master_publish(r, m, true);
	if (ev & HB_MASTER_CONFIRMED)
		log_info("relay %s: master %s challenged us and got its answer", r->conf->name,
			 r->stats.masters[m].name);
	else if (ev & HB_MASTER_BACK)
		log_info("relay %s: master %s challenges again: it lists this relay",
			 r->conf->name, r->stats.masters[m].name);
}

/* Masters that left two intervals of heartbeats unanswered: said once. */
static void check_masters(struct relay *r, uint64_t now)
{
	for (unsigned i = 0; i < r->nmasters; i++) {
		if (!hb_master_check(&r->masters[i].health, now, r->hb.interval))
			continue;
		master_publish(r, i, false);
		log_warnx("relay %s: master %s is quiet: no challenge within %llu s of a "
			  "heartbeat; it does not list this relay",
			  r->conf->name, r->stats.masters[i].name,
			  (unsigned long long)(HB_MASTER_QUIET_INTERVALS * r->hb.interval /
					       NS_PER_SEC));
	}
}

static void from_server(struct relay *r, uint32_t ref, struct loop_dgram *d)
{
	uint32_t idx = session_deref(&r->st, ref);
	struct session *s;

	if (idx == SESSION_NONE)
		return; /* the session closed while this was queued */
	/* Anything from the game server while it is not up: probe it now. */
	if (r->hb.server != HB_UP) {
		uint64_t before = hb_deadline(&r->hb);

		hb_heard(&r->hb, d->now);
		log_early_round(r, before, d->now, "game server heard from");
		relay_arm(r);
	}
	if (d->truncated) {
		STAT_ADD(r->stats.drops[DROP_TRUNCATED], 1);
		return;
	}
	s = &r->st.s[idx];
	log_packet(r, &s->client, d, "<-");
	if (q3_is_connectionless(d->data, d->len)) {
		enum q3_cmd cmd = q3_classify(d->data, d->len);

		if (cmd == Q3_INFORESPONSE || cmd == Q3_STATUSRESPONSE)
			qcache_store(&r->cache, cmd, d->data, d->len, d->now);
		if (s->master && cmd == Q3_INFORESPONSE)
			confirm_listing(r, s->master - 1u, d->now);
		/* The game server answers anyone's getchallenge, getinfo or
		 * getstatus, forged source or not: such an answer proves nothing
		 * about the client. Accepting its connect does: that needed the
		 * challenge, which only the real address received. */
		if (cmd == Q3_CONNECTRESPONSE) {
			session_assure(&r->st, idx);
			rl_stamps_mark(&r->proven, &s->client, d->now, false);
		}
		/* Not proof either, but the client's connect, tied by the game
		 * server to this session's port, is on its way: no eviction or
		 * unassured timeout may change that port before it arrives. */
		else if (cmd == Q3_CHALLENGERESPONSE) {
			s->challenged = true;
			session_grace(&r->st, idx, d->now + CONF_CHALLENGE_GRACE * NS_PER_MS);
		}
	} else {
		/* In-game traffic: a player. Its IP stays proven while it
		 * plays: the stamp is renewed every 1024 packets (about a
		 * minute of snapshots), not on each. */
		if (!s->assured || (s->pkts_down & 1023) == 0)
			rl_stamps_mark(&r->proven, &s->client, d->now, false);
		session_assure(&r->st, idx);
	}
	if (forward(r, idx, r->pub_fd, &s->client, d)) {
		s->pkts_down++;
		STAT_ADD(r->stats.down_pkts, 1);
		STAT_ADD(r->stats.down_bytes, d->len);
	}
}

static void master_result(struct relay *r, unsigned i, enum stats_hb_result res)
{
	struct master_status *ms = &r->stats.masters[i];

	pthread_mutex_lock(&r->stats.lock);
	ms->last_heartbeat = (uint64_t)time(NULL);
	ms->last_result = res;
	ms->heartbeats[res]++;
	if (r->masters[i].have_addr)
		addr_str(&r->masters[i].addr.sa, ms->addr);
	pthread_mutex_unlock(&r->stats.lock);
}

/* What became of a heartbeat (or flatline) to master i: 0, sent, or
 * -errno. Told by the loop's on_sent, or at once when it was not queued. */
static void heartbeat_done(struct relay *r, unsigned i, bool flat, int err)
{
	struct relay_master *m = &r->masters[i];
	const char *tag = flat ? r->conf->flatline : r->conf->heartbeat;
	char a[ADDR_STRLEN], hp[ADDR_HOSTLEN + 8];

	addr_str(&m->addr.sa, a);
	addr_hostport(m->host, m->port, hp);
	if (err < 0 && conf_addr_family(&m->addr) != conf_addr_family(&r->conf->listen) &&
	    (err == -ENETUNREACH || err == -EAFNOSUPPORT || err == -EINVAL)) {
		/* [::] with IPV6_V6ONLY (net.ipv6.bindv6only=1): no IPv4. */
		if (!flat)
			master_result(r, i, HB_RESULT_WRONG_FAMILY);
		if (!m->v6only_said)
			log_warnx("master %s: %s is an IPv4 address, which the IPv6-only listener "
				  "cannot reach (net.ipv6.bindv6only); no heartbeats to it",
				  hp, a);
		m->v6only_said = true;
		return;
	}
	if (!flat)
		master_result(r, i, err < 0 ? HB_RESULT_SEND_ERROR : HB_RESULT_SENT);
	if (!flat && err == 0) {
		hb_master_heartbeat(&m->health, loop_now());
		relay_arm(r);
	}
	if (err < 0) {
		log_warnx("heartbeat %s -> %s (%s): %s", tag, hp, a, strerror(-err));
		return;
	}
	if (flat) {
		STAT_ADD(r->stats.flatlines, 1);
		log_info("flatline %s -> %s (%s)", tag, hp, a);
	} else {
		log_debug("heartbeat %s -> %s (%s)", tag, hp, a);
	}
}

/* Queue a heartbeat (or flatline) to master i from the public socket: the
 * master lists the address it came from. Its fate comes in heartbeat_done;
 * the master's allowance is full again from now (its challenge may come
 * back within the same millisecond). */
static void send_heartbeat(struct relay *r, unsigned i, const char *tag)
{
	struct relay_master *m = &r->masters[i];
	char text[CONF_TAG_MAX + 16];
	uint8_t pkt[CONF_TAG_MAX + 20];
	bool flat = strcmp(tag, r->conf->heartbeat) != 0;
	int n, err;

	snprintf(text, sizeof(text), "heartbeat %s\n", tag);
	n = q3_build(pkt, sizeof(pkt), text);
	err = r->ops->send(r->loop, r->pub_fd, &m->addr.sa, addr_len(&m->addr), pkt, (size_t)n,
			   pub_id(r, flat ? PUB_FLATLINE : PUB_HEARTBEAT, i));
	if (err < 0)
		heartbeat_done(r, i, flat, err);
	else if (!flat)
		master_invite(r, m);
}

static void send_flatline(struct relay *r)
{
	if (r->conf->flatline[0] == '\0')
		return;
	/* Last good addresses: a flatline must not wait for DNS. */
	for (unsigned i = 0; i < r->nmasters; i++)
		if (r->masters[i].have_addr)
			send_heartbeat(r, i, r->conf->flatline);
}

/* Heartbeat every master, resolving names first (the heartbeat leaves when
 * the answer comes back; see on_resolved). */
static void heartbeat_masters(struct relay *r)
{
	/* A draining relay refuses new sessions: inviting masters (and the
	 * players they send) would only get them refused. */
	if (STAT_GET(r->global->lifecycle) != LIFECYCLE_ACTIVE) {
		log_debug("relay %s: draining, no heartbeat this round", r->conf->name);
		return;
	}
	for (unsigned i = 0; i < r->nmasters; i++) {
		struct relay_master *m = &r->masters[i];

		if (m->numeric) {
			send_heartbeat(r, i, r->conf->heartbeat);
			continue;
		}
		m->heartbeat_due = true;
		if (resolver_start(r->res, i, m->host, m->port) == -EBUSY)
			log_debug("master %s: still resolving", m->host);
	}
}

static void on_resolved(struct relay *r)
{
	struct resolver_result res;
	char a[ADDR_STRLEN], l[ADDR_STRLEN], hp[ADDR_HOSTLEN + 8];

	resolver_ack(r->res);
	while (resolver_take(r->res, &res)) {
		struct relay_master *m = &r->masters[res.slot];

		addr_hostport(m->host, m->port, hp);
		/* Addresses of a family the listener cannot send to are no
		 * address at all, and are said to be once, as such. */
		if (res.gai_err == 0 &&
		    !conf_listener_reaches(&r->conf->listen, false, conf_addr_family(&res.addr)))
			res.gai_err = EAI_ADDRFAMILY, res.wrong_family = true;
		if (res.wrong_family) {
			if (!m->wrong_family)
				log_warnx("master %s: only %s addresses (%s), which the listener %s "
					  "cannot reach; no heartbeats to it%s",
					  hp, conf_addr_family(&res.addr) == AF_INET ? "IPv4" : "IPv6",
					  addr_str(&res.addr.sa, a),
					  addr_str(&r->conf->listen.sa, l),
					  m->have_addr ? " but to its last good address" : "");
		} else if (res.gai_err == 0) {
			if (m->last_err != 0 || !m->have_addr || !addr_equal(&m->addr, &res.addr))
				log_info("master %s is %s", hp, addr_str(&res.addr.sa, a));
			m->addr = res.addr;
			m->have_addr = true;
		} else if (res.gai_err != m->last_err) {
			/* Logged once per change, not once per heartbeat. */
			if (m->have_addr)
				log_warnx("master %s: cannot resolve (%s); keeping %s", m->host,
					  gai_strerror(res.gai_err), addr_str(&m->addr.sa, a));
			else
				log_warnx("master %s: cannot resolve (%s); no address yet",
					  m->host, gai_strerror(res.gai_err));
		}
		m->last_err = res.gai_err;
		m->wrong_family = res.wrong_family;
		if (m->heartbeat_due && r->hb.server == HB_UP &&
		    STAT_GET(r->global->lifecycle) == LIFECYCLE_ACTIVE) {
			if (m->have_addr)
				send_heartbeat(r, res.slot, r->conf->heartbeat);
			else
				master_result(r, res.slot,
					      res.wrong_family ? HB_RESULT_WRONG_FAMILY
							       : HB_RESULT_UNRESOLVED);
		}
		m->heartbeat_due = false;
	}
}

static void hb_actions(struct relay *r, unsigned act, uint64_t now)
{
	char a[ADDR_STRLEN];

	/* No ghost listing: answers about a server that stopped answering are
	 * not served from the cache. */
	if (act & HB_ROUND_FAILED)
		qcache_invalidate(&r->cache);
	if (act & HB_SEND_PROBE) {
		char text[32];
		uint8_t pkt[40];
		int n, err;

		/* The probe spends from the game server's budget like a
		 * master's query: never refused, but counted. */
		rl_budget_take(&r->budget, RL_MASTER, now);
		snprintf(text, sizeof(text), "getinfo %s", r->hb.challenge);
		n = q3_build(pkt, sizeof(pkt), text);
		err = r->ops->send(r->loop, r->probe_fd, NULL, 0, pkt, (size_t)n,
				   endpoint_id(r->ep, r->ep_probe));
		STAT_ADD(r->stats.probes_sent, 1);
		if (err < 0)
			log_debug("probe: %s", strerror(-err));
	}
	/* Published before it is announced: whoever reads the log line and
	 * then asks /readyz must see the same state. */
	if (act & (HB_LOG_UP | HB_LOG_DOWN))
		STAT_SET(r->stats.server, (int)r->hb.server);
	/* Down: the listings are withdrawn (flatline) or die out; no master
	 * owes a challenge until the next heartbeat. */
	if (act & HB_LOG_DOWN)
		for (unsigned i = 0; i < r->nmasters; i++) {
			hb_master_withdrawn(&r->masters[i].health);
			master_publish(r, i, false);
		}
	if (act & HB_LOG_UP)
		log_info("server up: %s answered the probe", addr_str(&r->upstream.sa, a));
	if (act & HB_LOG_DOWN)
		log_warnx("server down: %s did not answer %u probes", addr_str(&r->upstream.sa, a),
			  r->hb.attempts);
	if (act & HB_SEND_HEARTBEAT)
		heartbeat_masters(r);
	if (act & HB_SEND_FLATLINE)
		send_flatline(r);
}

static void from_probe(struct relay *r, struct loop_dgram *d)
{
	unsigned act;

	if (d->truncated || !q3_info_response_matches(d->data, d->len, r->hb.challenge))
		return;
	act = hb_probe_answered(&r->hb, d->now, r->hb.challenge);
	if (act)
		STAT_ADD(r->stats.probe_rounds_ok, 1);
	qcache_store(&r->cache, Q3_INFORESPONSE, d->data, d->len, d->now);
	hb_actions(r, act, d->now);
	relay_arm(r);
}

/* The relay's endpoints: what each of its fds does with a loop event. */

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

/* Sends from the public socket that are not forwards: heartbeats and
 * flatlines report to their master, a reply that failed is a drop. */
static void public_sent(void *obj, uint32_t ref, int res)
{
	struct relay *r = obj;
	unsigned kind = ref >> 8, m = ref & 0xff;

	if ((kind == PUB_HEARTBEAT || kind == PUB_FLATLINE) && m < r->nmasters)
		heartbeat_done(r, m, kind == PUB_FLATLINE, res < 0 ? res : 0);
	else if (res < 0)
		STAT_ADD(r->stats.drops[DROP_SEND_ERROR], 1);
}

static void public_timer(void *obj, uint32_t ref, uint64_t now)
{
	(void)ref;
	relay_on_tick(obj, now);
}

static void probe_dgram(void *obj, uint32_t ref, struct loop_dgram *d)
{
	(void)ref;
	from_probe(obj, d);
}

/* The probe's own refusals show in the probe rounds, not as refused sends;
 * a closed port ends the attempt early. */
static void probe_recv_error(void *obj, uint32_t ref, int err)
{
	struct relay *r = obj;

	(void)ref;
	if (err == -ECONNREFUSED) {
		hb_probe_refused(&r->hb, loop_now());
		relay_arm(r);
	}
}

/* A refused probe shows in the next receive (probe_recv_error). */
static void probe_sent(void *obj, uint32_t ref, int res)
{
	(void)obj;
	(void)ref;
	if (res < 0 && res != -ECONNREFUSED)
		log_debug("probe: %s", strerror(-res));
}

static void session_dgram(void *obj, uint32_t ref, struct loop_dgram *d)
{
	from_server(obj, ref, d);
}

static void session_recv_error(void *obj, uint32_t ref, int err)
{
	struct relay *r = obj;
	uint32_t idx;

	/* A closed game-server port shows up on its connected sockets; the
	 * session stays, the server may come back. So do passing conditions. */
	if (err == -ECONNREFUSED) {
		uint64_t now = loop_now(), before = hb_deadline(&r->hb);

		STAT_ADD(r->stats.refused, 1);
		hb_refused(&r->hb, now);
		log_early_round(r, before, now, "game server refused a send");
		relay_arm(r);
		return;
	}
	if (err == -EAGAIN || err == -EINTR || err == -ENOBUFS || err == -ENOMEM)
		return;
	/* Anything else and the socket is of no further use. */
	idx = session_deref(&r->st, ref);
	if (idx != SESSION_NONE) {
		log_debug("session socket: %s", strerror(-err));
		session_close(r, idx, CLOSE_ERROR);
	}
}

/* Every forward is queued under its session's id, whichever socket it
 * leaves from. */
static void session_sent(void *obj, uint32_t ref, int res)
{
	struct relay *r = obj;
	uint32_t idx;

	idx = session_deref(&r->st, ref);
	if (idx != SESSION_NONE && r->st.s[idx].queued > 0)
		r->st.s[idx].queued--;
	if (res >= 0)
		return;
	if (res == -ECONNREFUSED) {
		uint64_t now = loop_now(), before = hb_deadline(&r->hb);

		STAT_ADD(r->stats.refused, 1);
		hb_refused(&r->hb, now);
		log_early_round(r, before, now, "game server refused a send");
		relay_arm(r);
	} else
		STAT_ADD(r->stats.drops[DROP_SEND_ERROR], 1);
}

void relay_on_tick(struct relay *r, uint64_t now)
{
	expire_sessions(r, now);
	if (now >= hb_deadline(&r->hb)) {
		unsigned act = hb_step(&r->hb, now, random64());

		if (act & HB_ROUND_FAILED)
			STAT_ADD(r->stats.probe_rounds_failed, 1);
		hb_actions(r, act, now);
	}
	check_masters(r, now);
	/* Exactly, now: the deadline may have moved later meanwhile. */
	now = relay_next_deadline(r);
	if (now == UINT64_MAX)
		r->ops->timer_cancel(r->loop, &r->timer);
	else
		r->ops->timer_set(r->loop, &r->timer, now);
}

static void resolver_readable(void *obj, uint32_t ref)
{
	(void)ref;
	on_resolved(obj);
}

static const struct endpoint_ops relay_public_ops = {
	.name = "public",
	.multi = true,
	.on_dgram = public_dgram,
	.on_recv_error = public_recv_error,
	.on_sent = public_sent,
	.on_timer = public_timer,
};

static const struct endpoint_ops relay_session_ops = {
	.name = "session",
	.multi = true,
	.on_dgram = session_dgram,
	.on_recv_error = session_recv_error,
	.on_sent = session_sent,
};

static const struct endpoint_ops relay_probe_ops = {
	.name = "probe",
	.on_dgram = probe_dgram,
	.on_recv_error = probe_recv_error,
	.on_sent = probe_sent,
};

static const struct endpoint_ops relay_resolver_ops = {
	.name = "resolver",
	.on_readable = resolver_readable,
};

uint64_t relay_next_deadline(const struct relay *r)
{
	uint64_t e = session_next_expiry(&r->st, r->session_timeout);
	uint64_t u = session_unassured_next_expiry(&r->st, r->unassured_timeout);
	uint64_t h = hb_deadline(&r->hb);

	if (u < e)
		e = u;
	for (unsigned i = 0; i < r->nmasters; i++) {
		uint64_t m = hb_master_deadline(&r->masters[i].health, r->hb.interval);

		if (m < h)
			h = m;
	}
	return e < h ? e : h;
}

void relay_shutdown(struct relay *r)
{
	if (hb_shutdown(&r->hb) & HB_SEND_FLATLINE)
		send_flatline(r);
	while (r->st.lru_head != SESSION_NONE)
		session_close(r, r->st.lru_head, CLOSE_SHUTDOWN);
}

void relay_close(struct relay *r)
{
	if (r->pub_fd >= 0)
		close(r->pub_fd);
	if (r->probe_fd >= 0)
		close(r->probe_fd);
	resolver_destroy(r->res);
	if (r->attached) {
		endpoint_del(r->ep, r->ep_public);
		endpoint_del(r->ep, r->ep_sessions);
		endpoint_del(r->ep, r->ep_probe);
		endpoint_del(r->ep, r->ep_resolver);
		r->attached = false;
	}
	session_table_free(&r->st);
	rl_table_free(&r->ip_rl);
	rl_table_free(&r->ip_sess_rl);
	rl_stamps_free(&r->player_nets);
	rl_stamps_free(&r->proven);
	rl_stamps_free(&r->proven_gap);
	qcache_free(&r->cache);
	pthread_mutex_destroy(&r->stats.lock);
	r->pub_fd = r->probe_fd = -1;
	r->res = NULL;
}

void relay_sessions_json(const struct relay *r, FILE *f, uint64_t now, bool *first)
{
	char a[ADDR_STRLEN];

	/* Oldest activity first: the LRU order is the one we have for free. */
	for (uint32_t i = r->st.lru_head; i != SESSION_NONE; i = r->st.s[i].next) {
		const struct session *s = &r->st.s[i];

		fputs(*first ? "\n" : ",\n", f);
		*first = false;
		fputs("{\"relay\":", f);
		json_string(f, r->conf->name);
		/* Asked of the kernel only here, so opening a session (which a
		 * spoofed flood does at line rate) costs no extra syscall. */
		fprintf(f, ",\"server_port\":%u,\"client\":", net_local_port(s->fd));
		json_string(f, addr_str(&s->client.sa, a));
		fprintf(f,
			",\"age_seconds\":%llu,\"idle_seconds\":%llu,\"packets_up\":%llu,"
			"\"packets_down\":%llu,\"assured\":%s,\"qport\":",
			(unsigned long long)((now - s->opened) / NS_PER_SEC),
			(unsigned long long)((now - s->last_active) / NS_PER_SEC),
			(unsigned long long)s->pkts_up, (unsigned long long)s->pkts_down,
			s->assured ? "true" : "false");
		if (s->qport_known)
			fprintf(f, "%u", s->qport);
		else
			fputs("null", f);
		fputs(",\"name\":", f);
		if (s->name[0])
			json_string(f, s->name);
		else
			fputs("null", f);
		fputc('}', f);
	}
}

void relay_log_stats(const struct relay *r)
{
	const struct relay_stats *s = &r->stats;
	uint64_t dropped = 0, closed = 0;
	char why[512] = "";
	size_t o = 0;

	for (int i = 0; i < DROP_COUNT; i++) {
		uint64_t n = STAT_GET(s->drops[i]);

		dropped += n;
		if (n && o < sizeof(why))
			o += (size_t)snprintf(why + o, sizeof(why) - o, "%s%s %llu", o ? ", " : " (",
					      stats_drop_name((enum stats_drop)i),
					      (unsigned long long)n);
	}
	if (o && o < sizeof(why) - 1)
		strcat(why, ")");
	for (int i = 0; i < CLOSE_COUNT; i++)
		closed += STAT_GET(s->sessions_closed[i]);
	log_info("stats %s: sessions opened %llu closed %llu active %u; up %llu pkts %llu B; "
		 "down %llu pkts %llu B (%llu from cache); refused %llu; dropped %llu%s; "
		 "flatlines %llu",
		 r->conf->name, (unsigned long long)STAT_GET(s->sessions_opened),
		 (unsigned long long)closed, r->st.active,
		 (unsigned long long)STAT_GET(s->up_pkts), (unsigned long long)STAT_GET(s->up_bytes),
		 (unsigned long long)STAT_GET(s->down_pkts),
		 (unsigned long long)STAT_GET(s->down_bytes),
		 (unsigned long long)STAT_GET(s->cache_answers),
		 (unsigned long long)STAT_GET(s->refused), (unsigned long long)dropped, why,
		 (unsigned long long)STAT_GET(s->flatlines));
}
