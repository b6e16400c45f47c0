/* SPDX-License-Identifier: ISC */
/* The Quake 3 family's admission, qport and assurance rules, behind the
 * forwarder's policy interface. */
#include "q3policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "huffman.h"
#include "log.h"
#include "q3proto.h"
#include "qport.h"

/* Connect userinfo decoded (Huffman) per second in all, and at once. The
 * qport in it decides whose slot a connect is for, so a connect that cannot
 * be decoded is dropped (connect_unread): the budget must never meet a
 * player. One decode costs 25 us for a player's 300-byte userinfo, 125 us
 * for the longest (1 KiB of many symbols), measured on a 2-core x86-64 VM
 * at -O2: 200 a second is at most 2.5 % of a core, and three times what a
 * full 64-player server's reconnecting after a restart sends at once. Each
 * source is held to its query bucket (or a master's allowance) already. */
#define Q3P_DECODE_BURST 200
#define Q3P_DECODE_RATE	 200

/* The game server's budget, one for all workers. Masters keep 2 tokens
 * each (a getChallenge and a getinfo), together no more than what leaves
 * players theirs and browsers one. */
int q3p_shared_init(struct q3p_shared *sh, const struct relay_conf *c, unsigned workers,
		    uint64_t now)
{
	unsigned burst = c->server_query_burst, masters = RELAY_RESERVE_MASTER * c->nmasters;
	int err;

	memset(sh, 0, sizeof(*sh));
	sh->workers = workers ? workers : 1;
	pthread_mutex_init(&sh->lock, NULL);
	if (burst <= RELAY_RESERVE_PLAYER + 1)
		return -EINVAL;
	if (masters > burst - RELAY_RESERVE_PLAYER - 1)
		masters = burst - RELAY_RESERVE_PLAYER - 1;
	err = rl_budget_init(&sh->budget, burst, c->server_query_rate, masters,
			     RELAY_RESERVE_PLAYER, now);
	if (!err)
		err = rl_budget_players(&sh->budget, RELAY_RESERVE_PROVEN, RELAY_PLAYER_FRESH);
	if (!err && sh->workers > 1)
		err = qcache_init(&sh->cache, c->query_cache_ms * NS_PER_MS,
				  c->query_cache_stale_ms * NS_PER_MS, c->query_cache_max_reply);
	if (!err && sh->workers > 1 &&
	    (!(sh->qports = calloc(65536, sizeof(*sh->qports))) ||
	     !(sh->qport_client = calloc(65536, sizeof(*sh->qport_client)))))
		err = -ENOMEM;
	return err;
}

void q3p_shared_free(struct q3p_shared *sh)
{
	if (sh->workers > 1)
		qcache_free(&sh->cache);
	free(sh->qports);
	free(sh->qport_client);
	sh->qports = NULL;
	sh->qport_client = NULL;
	pthread_mutex_destroy(&sh->lock);
}

/* The shared budget: locked only when another worker may touch it. */
static bool budget_take(struct q3policy *p, enum rl_class cls, uint64_t now)
{
	struct q3p_shared *sh = p->sh;
	bool ok;

	if (sh->workers == 1)
		return rl_budget_take(&sh->budget, cls, now);
	pthread_mutex_lock(&sh->lock);
	ok = rl_budget_take(&sh->budget, cls, now);
	pthread_mutex_unlock(&sh->lock);
	return ok;
}

static unsigned budget_left(struct q3policy *p, enum rl_class part, uint64_t now)
{
	struct q3p_shared *sh = p->sh;
	unsigned n;

	if (sh->workers == 1)
		return rl_budget_left(&sh->budget, part, now);
	pthread_mutex_lock(&sh->lock);
	n = rl_budget_left(&sh->budget, part, now);
	pthread_mutex_unlock(&sh->lock);
	return n;
}

/* Workers share what their query caches learn, so that the game server
 * is asked for one refresh per --query-cache, not one per worker: a
 * worker's copy changed (a reply stored, a refresh sent, the copies
 * dropped): it becomes the one the others follow. At most a few times a
 * second; nothing with one worker. */
static void cache_publish(struct q3policy *p)
{
	struct q3p_shared *sh = p->sh;

	if (sh->workers == 1)
		return;
	pthread_mutex_lock(&sh->lock);
	qcache_copy(&sh->cache, &p->cache);
	p->cache_gen = atomic_fetch_add_explicit(&sh->cache_gen, 1, memory_order_release) + 1;
	pthread_mutex_unlock(&sh->lock);
}

/* Before answering from the copy: take the shared one if it changed (one
 * load on a line written a few times a second). */
static void cache_follow(struct q3policy *p)
{
	struct q3p_shared *sh = p->sh;

	if (sh->workers == 1 ||
	    atomic_load_explicit(&sh->cache_gen, memory_order_acquire) == p->cache_gen)
		return;
	pthread_mutex_lock(&sh->lock);
	qcache_copy(&p->cache, &sh->cache);
	p->cache_gen = atomic_load_explicit(&sh->cache_gen, memory_order_relaxed);
	pthread_mutex_unlock(&sh->lock);
}

/* A reply for the cache: stored, and shared when it was. */
static void cache_store(struct q3policy *p, enum q3_cmd kind, const uint8_t *data, size_t len,
			uint64_t now)
{
	cache_follow(p);
	if (qcache_store(&p->cache, kind, data, len, now) == 0)
		cache_publish(p);
}

/* The cache's budget (this worker's part); ET and RTCW servers count
 * connect. */
static void budget_init(struct q3policy *p, uint64_t now)
{
	const struct relay_conf *c = p->conf;
	unsigned n = p->sh->workers;
	uint32_t bytes;

	p->connect_counts = strcmp(c->game, "ET") == 0 || strcmp(c->game, "RTCW") == 0;
	/* DarkPlaces tells clients apart by address and port (the relay's
	 * session ports keep them apart) and has no qport: bytes 4-5 of its
	 * packets are part of a sequence number, or ciphertext. */
	p->qport_rules = strcmp(c->game, "DP") != 0;
	rl_bucket_init(&p->cache_pkts, rl_worker_part(c->query_cache_rate, n),
		       rl_worker_part(c->query_cache_rate, n), now);
	/* A worker's byte share holds at least the largest cached answer,
	 * or with many workers an answer could never fit its bucket. */
	bytes = rl_worker_part(c->query_cache_bytes, n);
	rl_bucket_init(&p->cache_bytes,
		       bytes > c->query_cache_max_reply ? bytes : c->query_cache_max_reply, bytes,
		       now);
}

/* The stamps that share the players' tokens: by network, and by IP for
 * returning players. Each table has a hash key of its own. */
static int player_tables_init(struct q3policy *p, uint64_t (*random64)(void))
{
	struct rl_stamps *t[3] = {&p->player_nets, &p->proven, &p->proven_gap};
	uint64_t ttl[3] = {RELAY_PLAYER_GAP, RELAY_PROVEN_WINDOW, RELAY_PROVEN_GAP};
	unsigned w = p->sh->workers;
	int err = 0;

	for (int i = 0; i < 3 && !err; i++) {
		uint8_t key[16];

		rl_random_key(random64, key);
		err = i == 0
			  ? rl_stamps_init(t[i], rl_worker_entries(UDPRELAY_IP_ENTRIES, w),
					   RL_NET_V4_BITS, RL_NET_V6_BITS, ttl[i] * NS_PER_MS, key)
			  : rl_stamps_init(t[i], rl_worker_entries(Q3P_PROVEN_ENTRIES, w), 32,
					   RL_V6_PREFIX_BITS, ttl[i] * NS_PER_MS, key);
	}
	return err;
}

int q3policy_init(struct q3policy *p, const struct relay_conf *conf, struct udprelay *fwd,
		  struct masters *ms, struct q3p_shared *sh, unsigned worker,
		  uint64_t (*random64)(void), uint64_t now)
{
	uint32_t cap = udprelay_sessions(fwd)->cap;
	uint8_t key[16];
	int err;

	memset(p, 0, sizeof(*p));
	p->conf = conf;
	p->fwd = fwd;
	p->ms = ms;
	p->sh = sh;
	p->worker = worker;
	p->stats = fwd->stats;
	p->ss = calloc(cap ? cap : 1, sizeof(*p->ss));
	p->names = calloc(cap ? cap : 1, sizeof(*p->names));
	p->qport_owner = calloc(65536, sizeof(*p->qport_owner));
	if (!p->ss || !p->names || !p->qport_owner)
		return -ENOMEM;
	for (unsigned i = 0; i < ms->n; i++) {
		p->mq[i].tokens = conf->master_queries;
		p->mq[i].last = now;
	}
	/* A bound on CPU time: each worker's own. */
	rl_bucket_init(&p->decode_rl, Q3P_DECODE_BURST, Q3P_DECODE_RATE, now);
	rl_random_key(random64, key);
	err = rl_table_init(&p->ip_rl, rl_worker_entries(UDPRELAY_IP_ENTRIES, sh->workers),
			    conf->ip_query_burst, conf->ip_query_rate, key);
	budget_init(p, now);
	if (!err)
		err = player_tables_init(p, random64);
	if (!err)
		err = qcache_init(&p->cache, conf->query_cache_ms * NS_PER_MS,
				  conf->query_cache_stale_ms * NS_PER_MS,
				  conf->query_cache_max_reply);
	return err;
}

void q3policy_free(struct q3policy *p)
{
	free(p->ss);
	free(p->names);
	free(p->qport_owner);
	rl_table_free(&p->ip_rl);
	rl_stamps_free(&p->player_nets);
	rl_stamps_free(&p->proven);
	rl_stamps_free(&p->proven_gap);
	qcache_free(&p->cache);
	p->ss = NULL;
	p->names = NULL;
	p->qport_owner = NULL;
}

static void refuse(struct q3policy *p, const union etr_sockaddr *client, const struct loop_dgram *d,
		   enum stats_drop why)
{
	udprelay_refuse(p->fwd, client, d, why);
}

/* With --debug a connectionless datagram refused gets its line, with the
 * reason, so that a client's missing answer can be explained (within the
 * debug line cap, like every other line). */
static void log_refused(void *obj, const union etr_sockaddr *client, const struct loop_dgram *d,
			enum stats_drop why)
{
	struct q3policy *p = obj;
	char a[ADDR_STRLEN], w[Q3_WORD_MAX];

	if (!q3_is_connectionless(d->data, d->len))
		return;
	q3_word(d->data, d->len, w);
	log_debug("%s -> %-3s %s (%zu B) refused: %s", addr_str(&client->sa, a), p->conf->game, w,
		  d->len, stats_drop_name(why));
}

static void log_packet(const struct q3policy *p, const union etr_sockaddr *client,
		       const struct loop_dgram *d, const char *dir)
{
	char a[ADDR_STRLEN], w[Q3_WORD_MAX];

	if (!log_debug_on || !q3_is_connectionless(d->data, d->len))
		return;
	q3_word(d->data, d->len, w);
	log_debug("%s %s %-3s %s (%zu B)", addr_str(&client->sa, a), dir, p->conf->game, w, d->len);
}

/* A master's own allowance: --master-queries tokens at once, one back every
 * heartbeat interval / --master-queries. Sub-second rates, so not an
 * rl_bucket. */
static bool master_allow(struct q3policy *p, unsigned i, uint64_t now)
{
	uint32_t burst = p->conf->master_queries;
	uint64_t period = p->conf->heartbeat_interval_ms * NS_PER_MS / burst;

	if (period == 0)
		period = 1;
	if (p->mq[i].tokens < burst && now > p->mq[i].last) {
		uint64_t back = (now - p->mq[i].last) / period;

		if (back >= burst - p->mq[i].tokens) {
			p->mq[i].tokens = burst;
		} else {
			p->mq[i].tokens += (uint32_t)back;
			p->mq[i].last += back * period;
		}
	}
	if (p->mq[i].tokens == 0)
		return false;
	if (p->mq[i].tokens == burst)
		p->mq[i].last = now; /* the refill clock starts with the first token taken */
	p->mq[i].tokens--;
	return true;
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
static void cache_answer(struct q3policy *p, const union etr_sockaddr *client,
			 const struct loop_dgram *d, const uint8_t *out, int n)
{
	uint64_t now = d->now;

	if (rl_available(&p->cache_pkts, now) < 1 ||
	    !rl_take_n(&p->cache_bytes, (uint64_t)n, now)) {
		refuse(p, client, d, DROP_CACHE_RATE);
		return;
	}
	rl_take(&p->cache_pkts, now);
	if (udprelay_reply(p->fwd, client, out, (size_t)n) == 0) {
		STAT_ADD(p->stats->cache_answers, 1);
		STAT_ADD(p->stats->down_pkts, 1);
		STAT_ADD(p->stats->down_bytes, (uint64_t)n);
		if (log_debug_on) {
			char a[ADDR_STRLEN], w[Q3_WORD_MAX];
			q3_word(out, (size_t)n, w);
			log_debug("%s <- %-3s %s (%d B, from cache)", addr_str(&client->sa, a),
				  p->conf->game, w, n);
		}
	}
}

/* An IP the game server accepted as a player lately, or this very address
 * and port with its assured session still open: a returning player. */
static bool player_proven(const struct q3policy *p, const union etr_sockaddr *client, uint64_t now)
{
	const struct session_table *st = udprelay_sessions(p->fwd);
	uint32_t idx;

	if (rl_stamps_recent(&p->proven, client, now))
		return true;
	idx = session_lookup(st, client);
	return idx != SESSION_NONE && st->s[idx].assured && !p->ss[idx].master;
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
static bool player_admit(struct q3policy *p, const union etr_sockaddr *client, enum q3_cmd cmd,
			 const struct loop_dgram *d)
{
	uint64_t now = d->now;
	enum rl_class cls = RL_PLAYER;

	if (player_proven(p, client, now) &&
	    (!rl_stamps_recent(&p->proven_gap, client, now) ||
	     (cmd == Q3_CONNECT && rl_stamps_use_credit(&p->proven_gap, client, now))) &&
	    budget_take(p, RL_PROVEN, now)) {
		rl_stamps_mark(&p->proven_gap, client, now, cmd == Q3_GETCHALLENGE);
		return true;
	}
	if (rl_stamps_recent(&p->player_nets, client, now) &&
	    !(cmd == Q3_CONNECT && rl_stamps_use_credit(&p->player_nets, client, now)))
		cls = RL_PLAYER_AGAIN;
	if (!budget_take(p, cls, now)) {
		refuse(p, client, d,
		       cls == RL_PLAYER_AGAIN && budget_left(p, RL_PLAYER, now) > 0
			   ? DROP_NET_RATE
			   : DROP_SERVER_RATE);
		return false;
	}
	rl_stamps_mark(&p->player_nets, client, now, cls == RL_PLAYER && cmd == Q3_GETCHALLENGE);
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
static bool admit_server_query(struct q3policy *p, const union etr_sockaddr *client,
			       enum q3_cmd cmd, bool master, const struct loop_dgram *d)
{
	enum rl_class cls = q3_budget_class(cmd, master, p->connect_counts);
	uint8_t out[LOOP_MAX_DGRAM];
	size_t cap = p->cache.max_reply < sizeof(out) ? p->cache.max_reply : sizeof(out);
	int n;

	if (cls == RL_BROWSER && masters_server_up(p->ms)) {
		cache_follow(p);
		if (qcache_refresh_due(&p->cache, cmd, d->now) && budget_take(p, cls, d->now)) {
			qcache_refresh_sent(&p->cache, cmd, d->now);
			cache_publish(p);
			return true;
		}
		n = qcache_answer(&p->cache, d->data, d->len, d->now, out, cap);
		if (n >= 0) {
			cache_answer(p, client, d, out, n);
			return false;
		}
	}
	if (cls == RL_PLAYER)
		return player_admit(p, client, cmd, d);
	if (!budget_take(p, cls, d->now)) {
		refuse(p, client, d, DROP_SERVER_RATE);
		return false;
	}
	return true;
}

/* The source's own limits, then admit_server_query. Returns true when the
 * packet may go on to the game server. */
static bool admit_query(struct q3policy *p, const union etr_sockaddr *client, enum q3_cmd cmd,
			const struct loop_dgram *d)
{
	uint8_t m = masters_of(p->ms, client);
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
		master = master_allow(p, m - 1u, d->now);
		/* The masters' reserve and the shared tokens spent (by the
		 * probe, or by forged packets that took the allowance before
		 * the real master): its challenge is answered from the copy
		 * rather than dropped. */
		if (master && (cmd == Q3_GETINFO || cmd == Q3_GETSTATUS) &&
		    budget_left(p, RL_MASTER, d->now) == 0 &&
		    budget_left(p, RL_BROWSER, d->now) == 0)
			master = false;
		if (!master && cmd != Q3_GETINFO && cmd != Q3_GETSTATUS) {
			refuse(p, client, d, DROP_MASTER_RATE);
			return false;
		}
	} else if (!rl_table_allow(&p->ip_rl, client, d->now)) {
		/* Every connectionless packet, known command or not: the game
		 * server reads commands its own way, and anything it might
		 * answer is a query. Before the cache: a cached statusResponse
		 * is many times the size of the query, and spoofed queries
		 * would aim it at a victim. */
		refuse(p, client, d, DROP_IP_RATE);
		return false;
	}
	return !query_limited(cmd) || admit_server_query(p, client, cmd, master, d);
}

/* Behind the relay every client has the relay's address, and the game
 * server tells them apart by qport alone: it gives an in-game packet to
 * the client with that qport (and sends that client's stream to whichever
 * port it came from), and takes a connect with a client's qport as that
 * client's reconnect. So one session speaks for a qport at a time. */
enum q3p_qport q3policy_qport_claim(struct q3policy *p, uint32_t idx, uint16_t q, bool from_connect,
				    uint64_t now, uint32_t *owner)
{
	const struct session_table *st = udprelay_sessions(p->fwd);
	struct q3p_session *s = &p->ss[idx];
	uint32_t o = p->qport_owner[q];

	if (!from_connect && s->qport_known && s->qport != q)
		return Q3P_QPORT_MISMATCH;
	if (o != 0 && o - 1 != idx && st->s[o - 1].live &&
	    st->s[o - 1].last_up + Q3P_QPORT_GRACE > now) {
		if (owner)
			*owner = o - 1;
		return Q3P_QPORT_OWNED;
	}
	/* A reconnect may name a new qport: the old one is free again. */
	if (s->qport_known && s->qport != q && p->qport_owner[s->qport] == idx + 1)
		p->qport_owner[s->qport] = 0;
	s->qport_known = true;
	s->qport = q;
	p->qport_owner[q] = idx + 1;
	return Q3P_QPORT_OK;
}

/* Qports across workers: entry q is worker << 56 | (session index + 1)
 * << 32 | the low 32 bits of the millisecond its holder was last heard
 * from, renewed at most every Q3P_QPORT_RENEW_MS (so a write per player
 * four times a second, not per packet; a holder counts as quiet up to that
 * much early). Within a worker q3policy_qport_claim decides, exactly. */
#define Q3P_QPORT_RENEW_MS    250
#define Q3P_QPORT_TAG(w, idx) ((uint64_t)(w) << 24 | ((uint64_t)(idx) + 1))

/* Another worker's session was heard with qport q within Q3P_QPORT_GRACE.
 * Each worker reads its clock once per batch, so the holder's stamp may be
 * a little after this worker's now: a negative age is "just heard". */
static bool qport_elsewhere(const struct q3policy *p, uint16_t q, uint64_t now)
{
	uint64_t e;

	if (p->sh->workers == 1)
		return false;
	e = atomic_load_explicit(&p->sh->qports[q], memory_order_relaxed);
	return e != 0 && e >> 56 != p->worker &&
	       (int32_t)((uint32_t)(now / NS_PER_MS) - (uint32_t)e) <
		   (int32_t)(Q3P_QPORT_GRACE / NS_PER_MS);
}

/* Session idx holds qport q (its packet goes on): the other workers see. */
static void qport_held(struct q3policy *p, uint32_t idx, uint16_t q, uint64_t now)
{
	uint32_t ms = (uint32_t)(now / NS_PER_MS);
	_Atomic uint64_t *e;
	uint64_t v;

	if (p->sh->workers == 1)
		return;
	e = &p->sh->qports[q];
	v = atomic_load_explicit(e, memory_order_relaxed);
	if (v >> 32 == Q3P_QPORT_TAG(p->worker, idx)) {
		if (ms - (uint32_t)v >= Q3P_QPORT_RENEW_MS)
			atomic_store_explicit(e, v >> 32 << 32 | ms, memory_order_relaxed);
		return;
	}
	/* A new holder (rare): its client, for the others' log lines. */
	pthread_mutex_lock(&p->sh->lock);
	p->sh->qport_client[q] = udprelay_sessions(p->fwd)->s[idx].client;
	atomic_store_explicit(e, Q3P_QPORT_TAG(p->worker, idx) << 32 | ms, memory_order_relaxed);
	pthread_mutex_unlock(&p->sh->lock);
}

/* Session idx ends: its qport is free for every worker at once. */
static void qport_released(struct q3policy *p, uint32_t idx)
{
	const struct q3p_session *s = &p->ss[idx];
	_Atomic uint64_t *e;
	uint64_t v;

	if (p->sh->workers == 1 || !s->qport_known)
		return;
	e = &p->sh->qports[s->qport];
	v = atomic_load_explicit(e, memory_order_relaxed);
	if (v >> 32 == Q3P_QPORT_TAG(p->worker, idx))
		atomic_compare_exchange_strong_explicit(e, &v, 0, memory_order_relaxed,
							memory_order_relaxed);
}

/* A packet refused for its qport: counted as a collision, with its drop
 * reason, and logged once a second at most (forged traffic must not flood
 * the log; the counters have them all). owner: the session that holds the
 * qport (Q3P_QPORT_REMOTE: another worker's), or SESSION_NONE for a packet
 * with another qport than its own session's. */
static void qport_refuse(struct q3policy *p, uint32_t idx, uint32_t owner, uint16_t q,
			 const struct loop_dgram *d, enum stats_drop why)
{
	const struct session_table *st = udprelay_sessions(p->fwd);
	const union etr_sockaddr *client = &st->s[idx].client;
	char a[ADDR_STRLEN], b[ADDR_STRLEN];

	STAT_ADD(p->stats->qport_collisions, 1);
	refuse(p, client, d, why);
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
		if (n > 0)
			udprelay_reply(p->fwd, client, pkt, (size_t)n);
	}
	if (d->now < p->qport_log_next)
		return;
	p->qport_log_next = d->now + NS_PER_SEC;
	addr_str(&client->sa, a);
	if (owner == SESSION_NONE)
		log_warnx("relay %s: %s sent qport %u, its session's is %u: refused (%s)",
			  p->conf->name, a, q, p->ss[idx].qport, stats_drop_name(why));
	else if (owner == Q3P_QPORT_REMOTE) {
		union etr_sockaddr holder;

		pthread_mutex_lock(&p->sh->lock);
		holder = p->sh->qport_client[q];
		pthread_mutex_unlock(&p->sh->lock);
		log_warnx("relay %s: %s %s qport %u, which %s holds: refused (%s)", p->conf->name,
			  a, q3_is_connectionless(d->data, d->len) ? "connects with" : "sent", q,
			  addr_str(&holder.sa, b), stats_drop_name(why));
	} else
		log_warnx("relay %s: %s %s qport %u, which %s holds: refused (%s)", p->conf->name,
			  a,
			  why == DROP_CONNECT_UNREAD || q3_is_connectionless(d->data, d->len)
			      ? "connects with"
			      : "sent",
			  q, addr_str(&st->s[owner].client.sa, b), stats_drop_name(why));
}

/* Behind the relay every player has the relay's address, and the game
 * server tells them apart by qport alone (bytes 4-5 of an in-game packet):
 * it hands a packet to the player with that qport and sends that player's
 * stream to the port it came from. So an in-game packet must carry its
 * session's qport, and one session holds a qport at a time (see
 * q3policy_qport_claim). Returns true when the packet may go on. */
static bool note_qport(struct q3policy *p, uint32_t idx, const struct loop_dgram *d)
{
	uint16_t q = qport_of_packet(d->data, d->len);
	const struct q3p_session *s = &p->ss[idx];
	uint32_t owner = SESSION_NONE;

	if ((!s->qport_known || s->qport == q) && qport_elsewhere(p, q, d->now)) {
		qport_refuse(p, idx, Q3P_QPORT_REMOTE, q, d, DROP_QPORT_OWNED);
		return false;
	}
	switch (q3policy_qport_claim(p, idx, q, false, d->now, &owner)) {
	case Q3P_QPORT_OK:
		qport_held(p, idx, q, d->now);
		return true;
	case Q3P_QPORT_MISMATCH:
		qport_refuse(p, idx, SESSION_NONE, q, d, DROP_QPORT_MISMATCH);
		return false;
	case Q3P_QPORT_OWNED:
		qport_refuse(p, idx, owner, q, d, DROP_QPORT_OWNED);
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
static bool note_player(struct q3policy *p, uint32_t idx, const struct loop_dgram *d)
{
	static const char prefix[HUFFMAN_CONNECT_OFFSET] = "\xff\xff\xff\xff"
							   "connect ";
	uint8_t text[HUFFMAN_INFO_MAX + 2];
	uint32_t owner = SESSION_NONE;
	const char *info;
	size_t start = 0;
	int n = -1, q = -1;

	if (d->len > HUFFMAN_CONNECT_OFFSET && memcmp(d->data, prefix, sizeof(prefix)) == 0 &&
	    rl_take(&p->decode_rl, d->now)) {
		n = huffman_decode(d->data + HUFFMAN_CONNECT_OFFSET,
				   d->len - HUFFMAN_CONNECT_OFFSET, text, sizeof(text));
		if (n >= 0)
			n = qport_connect_userinfo(text, (size_t)n, &start);
		if (n >= 0)
			q = qport_of_userinfo((const char *)text + start, (size_t)n);
	}
	if (q < 0) {
		refuse(p, &udprelay_sessions(p->fwd)->s[idx].client, d, DROP_CONNECT_UNREAD);
		return false;
	}
	if (qport_elsewhere(p, (uint16_t)q, d->now)) {
		qport_refuse(p, idx, Q3P_QPORT_REMOTE, (uint16_t)q, d, DROP_QPORT_OWNED);
		return false;
	}
	if (q3policy_qport_claim(p, idx, (uint16_t)q, true, d->now, &owner) != Q3P_QPORT_OK) {
		qport_refuse(p, idx, owner, (uint16_t)q, d, DROP_QPORT_OWNED);
		return false;
	}
	qport_held(p, idx, (uint16_t)q, d->now);
	info = (const char *)text + start;
	if (q3_info_value(info, (size_t)n, "name", p->names[idx], sizeof(p->names[idx])) < 0)
		p->names[idx][0] = '\0';
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
static bool connect_challenged(struct q3policy *p, const union etr_sockaddr *client,
			       const struct loop_dgram *d)
{
	uint32_t idx;

	if (!p->qport_rules)
		return true;
	idx = session_lookup(udprelay_sessions(p->fwd), client);
	if (idx != SESSION_NONE && p->ss[idx].challenged)
		return true;
	refuse(p, client, d, DROP_CONNECT_UNCHALLENGED);
	return false;
}

/* What a datagram on session idx must pass besides admission: the qport
 * rules. Returns true when it may go on. */
static bool on_session(struct q3policy *p, uint32_t idx, enum q3_cmd cmd,
		       const struct loop_dgram *d)
{
	log_packet(p, &udprelay_sessions(p->fwd)->s[idx].client, d, "->");
	if (p->qport_rules && cmd == Q3_GAME && !note_qport(p, idx, d))
		return false;
	if (p->qport_rules && cmd == Q3_CONNECT && !note_player(p, idx, d))
		return false;
	return true;
}

static enum q3_cmd command_of(const struct loop_dgram *d)
{
	/* In-game traffic (most packets) skips the command parsing. */
	return q3_is_connectionless(d->data, d->len) ? q3_classify(d->data, d->len) : Q3_GAME;
}

static unsigned client_dgram(void *obj, struct udprelay *u, uint32_t idx,
			     const union etr_sockaddr *client, struct loop_dgram *d)
{
	struct q3policy *p = obj;
	enum q3_cmd cmd = command_of(d);
	unsigned v = UDPRELAY_FORWARD;

	(void)u;
	if (cmd != Q3_GAME) {
		if (cmd == Q3_CONNECT && !connect_challenged(p, client, d))
			return 0;
		if (!admit_query(p, client, cmd, d))
			return 0;
		/* A query the game server's budget bounds may open a session
		 * from the tokens kept for such; anything else (in-game
		 * packets, unknown commands, an ioquake3 connect) only from
		 * the rest. */
		if (query_limited(cmd) && q3_budget_class(cmd, false, p->connect_counts) != RL_FREE)
			v |= UDPRELAY_ADMITTED;
		if (cmd == Q3_GETINFO || cmd == Q3_GETSTATUS || cmd == Q3_GETCHALLENGE)
			v |= UDPRELAY_ASKS;
	}
	if (idx != SESSION_NONE && !on_session(p, idx, cmd, d))
		return 0;
	return v;
}

static bool session_opened(void *obj, struct udprelay *u, uint32_t idx, struct loop_dgram *d,
			   unsigned verdict)
{
	struct q3policy *p = obj;
	struct q3p_session *s = &p->ss[idx];

	(void)verdict;
	memset(s, 0, sizeof(*s));
	p->names[idx][0] = '\0';
	s->master = masters_of(p->ms, &udprelay_sessions(u)->s[idx].client);
	/* A master is the address and port our own heartbeat went to; it only
	 * ever asks, so it would never be assured, and a challenge arriving
	 * as its session times out would lose its answer (and our listing).
	 * It is assured from the start. */
	if (s->master)
		session_assure(udprelay_sessions(u), idx);
	return on_session(p, idx, command_of(d), d);
}

static bool server_dgram(void *obj, struct udprelay *u, uint32_t idx, struct loop_dgram *d)
{
	struct q3policy *p = obj;
	struct session_table *st = udprelay_sessions(u);
	struct session *s = &st->s[idx];
	struct q3p_session *qs = &p->ss[idx];

	/* Anything from the game server while it is not up: probe it now. */
	if (!masters_server_up(p->ms))
		masters_heard(p->ms, d->now);
	if (d->truncated)
		return false;
	log_packet(p, &s->client, d, "<-");
	if (q3_is_connectionless(d->data, d->len)) {
		enum q3_cmd cmd = q3_classify(d->data, d->len);

		if (cmd == Q3_INFORESPONSE || cmd == Q3_STATUSRESPONSE)
			cache_store(p, cmd, d->data, d->len, d->now);
		if (qs->master && cmd == Q3_INFORESPONSE)
			masters_confirm_listing(p->ms, qs->master - 1u, d->now);
		/* The game server answers anyone's getchallenge, getinfo or
		 * getstatus, forged source or not: such an answer proves nothing
		 * about the client. Accepting its connect does: that needed the
		 * challenge, which only the real address received. */
		if (cmd == Q3_CONNECTRESPONSE) {
			session_assure(st, idx);
			rl_stamps_mark(&p->proven, &s->client, d->now, false);
		}
		/* Not proof either, but the client's connect, tied by the game
		 * server to this session's port, is on its way: no eviction or
		 * unassured timeout may change that port before it arrives. */
		else if (cmd == Q3_CHALLENGERESPONSE) {
			qs->challenged = true;
			session_grace(st, idx, d->now + CONF_CHALLENGE_GRACE * NS_PER_MS);
		}
	} else {
		/* In-game traffic: a player. Its IP stays proven while it
		 * plays: the stamp is renewed every 1024 packets (about a
		 * minute of snapshots), not on each. */
		if (!s->assured || (s->pkts_down & 1023) == 0)
			rl_stamps_mark(&p->proven, &s->client, d->now, false);
		session_assure(st, idx);
	}
	return true;
}

static void session_closed(void *obj, struct udprelay *u, uint32_t idx)
{
	struct q3policy *p = obj;
	struct q3p_session *s = &p->ss[idx];

	(void)u;
	qport_released(p, idx);
	if (s->qport_known && p->qport_owner[s->qport] == idx + 1)
		p->qport_owner[s->qport] = 0;
	memset(s, 0, sizeof(*s));
	p->names[idx][0] = '\0';
}

static void upstream_refused(void *obj, uint64_t now)
{
	struct q3policy *p = obj;

	masters_refused(p->ms, now);
}

const struct udprelay_policy_ops q3policy_ops = {
    .name = "q3",
    .client_dgram = client_dgram,
    .session_opened = session_opened,
    .server_dgram = server_dgram,
    .session_closed = session_closed,
    .upstream_refused = upstream_refused,
    .log_refused = log_refused,
};

/* The masters' events. */

static void probe_sent(void *arg, uint64_t now)
{
	struct q3policy *p = arg;

	budget_take(p, RL_MASTER, now);
}

static void probe_answer(void *arg, const uint8_t *data, size_t len, uint64_t now)
{
	struct q3policy *p = arg;

	cache_store(p, Q3_INFORESPONSE, data, len, now);
}

static void round_failed(void *arg)
{
	struct q3policy *p = arg;

	cache_follow(p);
	qcache_invalidate(&p->cache);
	cache_publish(p);
}

/* A heartbeat invites the master's queries: its allowance is full again,
 * however soon after the last round (a server back up heartbeats at once). */
static void invited(void *arg, unsigned i)
{
	struct q3policy *p = arg;

	p->mq[i].tokens = p->conf->master_queries;
}

const struct masters_events q3policy_masters_events = {
    .probe_sent = probe_sent,
    .probe_answer = probe_answer,
    .round_failed = round_failed,
    .invited = invited,
};

enum rl_class q3_budget_class(enum q3_cmd cmd, bool from_master, bool connect_counts)
{
	switch (cmd) {
	case Q3_GETINFO:
	case Q3_GETSTATUS:
		return from_master ? RL_MASTER : RL_BROWSER;
	case Q3_GETCHALLENGE:
		return from_master ? RL_MASTER : RL_PLAYER;
	case Q3_CONNECT:
		return connect_counts ? RL_PLAYER : RL_FREE;
	case Q3_RCON:
		return RL_RCON;
	default:
		return RL_FREE;
	}
}
