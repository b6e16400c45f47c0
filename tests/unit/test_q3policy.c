/* SPDX-License-Identifier: ISC */
/* Unit tests for q3policy.c: the Quake 3 decisions the forwarder asks for,
 * driven through the forwarder with the fake loop and socket factory (no
 * socket; the masters are set up without their probe socket or resolver). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "q3policy.h"
#include "q3proto.h"
#include "relay_conf.h"
#include "unit_util.h"

#include "fake_loop.h"

#define SEC	    1000000000ull
#define MASTER_IP   "198.51.100.50"
#define MASTER_PORT 27950

struct fixture {
	struct relay_conf conf;
	union etr_sockaddr upstream;
	struct udprelay u;
	struct q3policy p;
	struct q3p_shared sh;
	struct masters ms;
	struct loop l;
	struct fake_sock sock;
	struct endpoint_table ep;
	struct relay_stats stats;
	struct etr_stats global;
};

static uint64_t counter_random(void)
{
	static uint64_t n = 0x1234;

	return n += 0x9e3779b97f4a7c15ull;
}

/* --query-cache-bytes for the next setup_worker, 0: the default. */
static uint32_t cache_bytes;

/* The policy of worker `worker`, sharing sh with the other workers' (NULL:
 * one worker, its own f->sh). */
static void setup_worker(struct fixture *f, const char *game, struct q3p_shared *sh,
			 unsigned worker)
{
	static const uint8_t key[16] = {7};
	struct udprelay_conf fc;

	memset(f, 0, sizeof(*f));
	conf_relay_defaults(&f->conf);
	snprintf(f->conf.game, sizeof(f->conf.game), "%s", game);
	f->conf.nmasters = 1;
	if (cache_bytes)
		f->conf.query_cache_bytes = cache_bytes;
	snprintf(f->conf.masters[0].host, sizeof(f->conf.masters[0].host), "%s", MASTER_IP);
	f->conf.masters[0].port = MASTER_PORT;
	assert_int_equal(addr_parse_numeric("10.9.0.2:27960", &f->upstream), 0);
	fc = (struct udprelay_conf){
	    .name = "test",
	    .max_sessions = 16,
	    .sessions_per_ip = 16,
	    .session_rate = 1000,
	    .ip_session_rate = 1000,
	    .session_timeout = 30 * SEC,
	    .unassured_timeout = 10 * SEC,
	};
	f->sock.next_fd = FD_BASE;
	endpoint_table_init(&f->ep);
	masters_init(&f->ms, &f->conf, &f->upstream, &f->stats, &f->global);
	assert_int_equal(udprelay_init(&f->u, &fc, PUB_FD, key, key, &f->stats, &f->global, SEC),
			 0);
	udprelay_set_sockops(&f->u, &fake_sockops, &f->sock);
	udprelay_set_policy(&f->u, &q3policy_ops, &f->p);
	masters_set_events(&f->ms, &q3policy_masters_events, &f->p, &f->u);
	if (!sh) {
		assert_int_equal(q3p_shared_init(&f->sh, &f->conf, 1, SEC), 0);
		sh = &f->sh;
	}
	assert_int_equal(
	    q3policy_init(&f->p, &f->conf, &f->u, &f->ms, sh, worker, counter_random, SEC), 0);
	assert_int_equal(udprelay_attach(&f->u, &fake_loop_ops, &f->l, &f->ep), 0);
}

static void setup_game(struct fixture *f, const char *game)
{
	setup_worker(f, game, NULL, 0);
}

static int setup(void **state)
{
	static struct fixture f;

	setup_game(&f, "ET");
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	udprelay_free(&f->u);
	if (f->p.sh == &f->sh)
		q3p_shared_free(&f->sh);
	q3policy_free(&f->p);
	return 0;
}

static void client_bytes(struct fixture *f, const char *ip, uint16_t port, const void *data,
			 size_t len, uint64_t now)
{
	static uint8_t buf[2048];
	union etr_sockaddr sa;
	struct loop_dgram d = {.data = buf, .len = len, .now = now};

	memcpy(buf, data, len);
	sa_v4(&sa, ip, port);
	d.from = &sa.sa;
	d.fromlen = addr_len(&sa);
	assert_true(endpoint_dgram(&f->ep, endpoint_id(&f->ep, f->u.ep_public), &d));
}

/* A connectionless command from ip:port. */
static void client_cmd(struct fixture *f, const char *ip, uint16_t port, const char *text,
		       uint64_t now)
{
	uint8_t pkt[1024];
	int n = q3_build(pkt, sizeof(pkt), text);

	assert_true(n > 0);
	client_bytes(f, ip, port, pkt, (size_t)n, now);
}

/* An in-game packet carrying qport q at bytes 4-5, as clients send. */
static void client_game(struct fixture *f, const char *ip, uint16_t port, uint16_t q, uint64_t now)
{
	uint8_t pkt[16] = {1, 0, 0, 0, (uint8_t)(q & 0xff), (uint8_t)(q >> 8), 9, 9};

	client_bytes(f, ip, port, pkt, sizeof(pkt), now);
}

static uint32_t session_of(struct fixture *f, const char *ip, uint16_t port)
{
	union etr_sockaddr sa;

	sa_v4(&sa, ip, port);
	return session_lookup(udprelay_sessions(&f->u), &sa);
}

/* The game server answers on session idx. */
static void server_cmd(struct fixture *f, uint32_t idx, const char *text, uint64_t now)
{
	uint8_t pkt[1024];
	int n = q3_build(pkt, sizeof(pkt), text);
	struct loop_dgram d = {.data = pkt, .len = (size_t)n, .now = now};

	assert_true(endpoint_dgram(&f->ep, udprelay_session_id(&f->u, idx), &d));
}

static uint64_t drops(struct fixture *f, enum stats_drop why)
{
	return STAT_GET(f->stats.drops[why]);
}

static void test_q3policy_connect_on_a_session_never_challenged_is_refused(void **state)
{
	struct fixture *f = *state;

	client_cmd(f, "192.0.2.1", 5000, "connect \"\\qport\\7\"", SEC);
	assert_int_equal(drops(f, DROP_CONNECT_UNCHALLENGED), 1);
	assert_int_equal(session_of(f, "192.0.2.1", 5000), SESSION_NONE);
	assert_int_equal(f->l.nfwd, 0);
}

/* The game server's challengeResponse lets the client's connect past the
 * challenge rule, on to the userinfo decoder (which this one fails). */
static void test_q3policy_challenge_response_admits_the_connect_to_the_decoder(void **state)
{
	struct fixture *f = *state;
	uint32_t idx;

	client_cmd(f, "192.0.2.1", 5000, "getchallenge", SEC);
	idx = session_of(f, "192.0.2.1", 5000);
	assert_int_not_equal(idx, SESSION_NONE);
	assert_int_equal(f->l.nfwd, 1);
	server_cmd(f, idx, "challengeResponse 1234", SEC);
	assert_true(f->p.ss[idx].challenged);
	assert_false(udprelay_sessions(&f->u)->s[idx].assured);
	assert_true(udprelay_sessions(&f->u)->s[idx].grace_until > SEC);
	/* Not Huffman-coded as a client's: its qport cannot be read. */
	client_cmd(f, "192.0.2.1", 5000, "connect garbage", SEC);
	assert_int_equal(drops(f, DROP_CONNECT_UNCHALLENGED), 0);
	assert_int_equal(drops(f, DROP_CONNECT_UNREAD), 1);
	assert_int_equal(f->l.nfwd, 2); /* the challengeResponse went down */
}

static void test_q3policy_connect_response_assures_the_session(void **state)
{
	struct fixture *f = *state;
	uint32_t idx;

	client_cmd(f, "192.0.2.1", 5000, "getchallenge", SEC);
	idx = session_of(f, "192.0.2.1", 5000);
	server_cmd(f, idx, "infoResponse\n\\a\\b", SEC);
	assert_false(udprelay_sessions(&f->u)->s[idx].assured);
	server_cmd(f, idx, "connectResponse 1234", SEC);
	assert_true(udprelay_sessions(&f->u)->s[idx].assured);
}

/* Every connectionless packet from one IP, known command or not, spends
 * from its bucket; any port. */
static void test_q3policy_per_ip_query_bucket_refuses_past_its_burst(void **state)
{
	struct fixture *f = *state;

	for (unsigned i = 0; i < f->conf.ip_query_burst; i++)
		client_cmd(f, "192.0.2.1", (uint16_t)(5000 + i % 3), "whatever", SEC);
	assert_int_equal(drops(f, DROP_IP_RATE), 0);
	client_cmd(f, "192.0.2.1", 6000, "whatever", SEC);
	assert_int_equal(drops(f, DROP_IP_RATE), 1);
	client_cmd(f, "192.0.2.2", 6000, "whatever", SEC);
	assert_int_equal(drops(f, DROP_IP_RATE), 1);
}

/* The game server's budget: once its tokens for players are spent, the
 * next getchallenge is refused. */
static void test_q3policy_server_budget_refuses_when_spent(void **state)
{
	struct fixture *f = *state;
	char ip[32];
	int i;

	for (i = 0; i < 40 && drops(f, DROP_SERVER_RATE) + drops(f, DROP_NET_RATE) == 0; i++) {
		snprintf(ip, sizeof(ip), "10.%d.0.1", i + 1); /* a network each */
		client_cmd(f, ip, 5000, "getchallenge", SEC);
	}
	assert_true(i < 40);
	assert_true(i > 1);
	assert_int_equal(drops(f, DROP_SERVER_RATE) + drops(f, DROP_NET_RATE), 1);
}

/* A master's address is held to its own allowance; past it only its
 * getinfo and getstatus are served (as a browser's). */
static void test_q3policy_master_past_its_allowance_is_refused(void **state)
{
	struct fixture *f = *state;
	uint32_t idx;

	for (unsigned i = 0; i < f->conf.master_queries; i++)
		client_cmd(f, MASTER_IP, MASTER_PORT, "getchallenge", SEC);
	assert_int_equal(drops(f, DROP_MASTER_RATE), 0);
	client_cmd(f, MASTER_IP, MASTER_PORT, "getchallenge", SEC);
	assert_int_equal(drops(f, DROP_MASTER_RATE), 1);
	/* Its session is a master's: assured from the start. */
	idx = session_of(f, MASTER_IP, MASTER_PORT);
	assert_int_not_equal(idx, SESSION_NONE);
	assert_int_equal(f->p.ss[idx].master, 1);
	assert_true(udprelay_sessions(&f->u)->s[idx].assured);
	/* A heartbeat invites it again. */
	q3policy_masters_events.invited(&f->p, 0);
	client_cmd(f, MASTER_IP, MASTER_PORT, "getchallenge", SEC);
	assert_int_equal(drops(f, DROP_MASTER_RATE), 1);
}

/* With the server up and a fresh infoResponse stored, a browser's getinfo
 * is answered by the relay, from the public socket, with its challenge. */
static void test_q3policy_fresh_info_answers_a_browser_from_the_cache(void **state)
{
	struct fixture *f = *state;
	const char *hit = "infoResponse\n\\challenge\\abc\\hostname\\x";
	unsigned before;

	f->ms.hb.server = HB_UP;
	client_cmd(f, "192.0.2.1", 5000, "getinfo xyz", SEC);
	assert_int_equal(f->l.nfwd, 1); /* nothing cached: the refresh goes up */
	server_cmd(f, session_of(f, "192.0.2.1", 5000),
		   "infoResponse\n\\challenge\\xyz\\hostname\\x", SEC);
	before = f->l.nfwd;
	client_cmd(f, "192.0.2.2", 5000, "getinfo abc", SEC + 1);
	assert_int_equal(f->l.nfwd, before);
	assert_int_equal(f->l.nsent, 1);
	assert_int_equal(f->l.last_fd, PUB_FD);
	assert_int_equal(STAT_GET(f->stats.cache_answers), 1);
	assert_true(f->l.last_len == 4 + strlen(hit));
	assert_memory_equal(f->l.last + 4, hit, strlen(hit));
	assert_int_equal(session_of(f, "192.0.2.2", 5000), SESSION_NONE);
}

/* After a failed probe round, no ghost answers: the query goes up. */
static void test_q3policy_failed_round_empties_the_cache(void **state)
{
	struct fixture *f = *state;

	f->ms.hb.server = HB_UP;
	client_cmd(f, "192.0.2.1", 5000, "getinfo xyz", SEC);
	server_cmd(f, session_of(f, "192.0.2.1", 5000), "infoResponse\n\\challenge\\xyz", SEC);
	q3policy_masters_events.round_failed(&f->p);
	client_cmd(f, "192.0.2.2", 5000, "getinfo abc", SEC + 1);
	assert_int_equal(f->l.nsent, 0);
	assert_int_not_equal(session_of(f, "192.0.2.2", 5000), SESSION_NONE);
}

/* An in-game packet names its session's qport; one with another is
 * refused and counted as a collision; another client's packet with it is
 * refused while the first plays. */
static void test_q3policy_in_game_qport_rules_through_the_forwarder(void **state)
{
	struct fixture *f = *state;
	uint32_t a;

	client_game(f, "192.0.2.1", 5000, 4711, SEC);
	a = session_of(f, "192.0.2.1", 5000);
	assert_int_not_equal(a, SESSION_NONE);
	assert_true(f->p.ss[a].qport_known);
	assert_int_equal(f->p.ss[a].qport, 4711);
	client_game(f, "192.0.2.1", 5000, 4712, SEC);
	assert_int_equal(drops(f, DROP_QPORT_MISMATCH), 1);
	client_game(f, "192.0.2.9", 5000, 4711, SEC);
	assert_int_equal(drops(f, DROP_QPORT_OWNED), 1);
	assert_int_equal(STAT_GET(f->stats.qport_collisions), 2);
	assert_int_equal(f->l.nfwd, 1);
	/* Its session closes: the qport is free for the other. */
	udprelay_close_session(&f->u, a, CLOSE_IDLE);
	client_game(f, "192.0.2.9", 5000, 4711, SEC);
	assert_int_equal(f->l.nfwd, 2);
}

/* DarkPlaces has no qport: bytes 4-5 mean nothing, no rule applies. */
static void test_q3policy_darkplaces_has_no_qport_rules(void **state)
{
	struct fixture *f = *state;

	teardown(state);
	setup_game(f, "DP");
	client_game(f, "192.0.2.1", 5000, 4711, SEC);
	client_game(f, "192.0.2.1", 5000, 4712, SEC);
	client_game(f, "192.0.2.9", 5000, 4711, SEC);
	assert_int_equal(STAT_GET(f->stats.qport_collisions), 0);
	assert_int_equal(f->l.nfwd, 3);
}

/* Two workers (one relay's policies sharing a q3p_shared): a player's qport
 * on one is refused to another client on the other while its holder is
 * heard from, and is free for it once the holder's session ends. */
static void test_q3policy_qport_is_held_across_workers(void **state)
{
	struct fixture *a = *state;
	static struct fixture b;
	struct fixture *bp = &b;
	struct q3p_shared sh;

	assert_int_equal(q3p_shared_init(&sh, &a->conf, 2, SEC), 0);
	teardown(state);
	setup_worker(a, "ET", &sh, 0);
	setup_worker(&b, "ET", &sh, 1);
	client_game(a, "192.0.2.1", 5000, 4711, SEC);
	assert_int_equal(a->l.nfwd, 1);
	client_game(&b, "192.0.2.9", 5000, 4711, SEC + 1);
	assert_int_equal(drops(&b, DROP_QPORT_OWNED), 1);
	assert_int_equal(b.l.nfwd, 0);
	/* Each worker has its own clock, read once per batch: b's may be a
	 * few milliseconds behind the moment a last wrote. The holder is
	 * still heard from (it took the qport's whole 32-bit window before:
	 * a stream theft in a loaded w2 suite). */
	client_game(a, "192.0.2.1", 5000, 4711, 2 * SEC);
	client_game(&b, "192.0.2.8", 5000, 4711, 2 * SEC - 5 * NS_PER_MS);
	assert_int_equal(drops(&b, DROP_QPORT_OWNED), 2);
	assert_int_equal(b.l.nfwd, 0);
	/* A qport of its own goes on. */
	client_game(&b, "192.0.2.9", 5001, 4712, SEC + 2);
	assert_int_equal(b.l.nfwd, 1);
	udprelay_close_session(&a->u, session_of(a, "192.0.2.1", 5000), CLOSE_IDLE);
	client_game(&b, "192.0.2.9", 5002, 4711, SEC + 3);
	assert_int_equal(b.l.nfwd, 2);
	/* Now the first client is the one refused. */
	client_game(a, "192.0.2.1", 5000, 4711, SEC + 4);
	assert_int_equal(drops(a, DROP_QPORT_OWNED), 1);
	teardown((void **)&bp);
	teardown(state);
	q3p_shared_free(&sh);
	setup_game(a, "ET"); /* what the test's teardown frees */
}

/* Two workers and --query-cache-bytes 1200: each worker's byte share (600)
 * is below an 825-byte answer (OpenArena's statusResponse), yet the answer
 * is served from the cache: a share holds at least the largest answer. */
static void test_q3policy_cache_share_fits_the_largest_answer(void **state)
{
	struct fixture *a = *state;
	struct q3p_shared sh;
	const char *hdr = "infoResponse\n\\challenge\\xyz\\hostname\\";
	char reply[840];

	teardown(state);
	cache_bytes = 1200;
	setup_worker(a, "ET", NULL, 0);
	assert_int_equal(q3p_shared_init(&sh, &a->conf, 2, SEC), 0);
	teardown(state);
	setup_worker(a, "ET", &sh, 1);
	cache_bytes = 0;
	a->ms.hb.server = HB_UP;
	client_cmd(a, "192.0.2.1", 5000, "getinfo xyz", SEC);
	assert_int_equal(a->l.nfwd, 1);
	memset(reply, 'x', sizeof(reply));
	memcpy(reply, hdr, strlen(hdr));
	reply[820] = '\0';
	server_cmd(a, session_of(a, "192.0.2.1", 5000), reply, SEC);
	client_cmd(a, "192.0.2.2", 5000, "getinfo abc", SEC + 1);
	assert_int_equal(STAT_GET(a->stats.cache_answers), 1);
	assert_int_equal(drops(a, DROP_CACHE_RATE), 0);
	teardown(state);
	q3p_shared_free(&sh);
	setup_game(a, "ET"); /* what the test's teardown frees */
}

/* Sessions for the qport tests, straight into the forwarder's table. */
static uint32_t insert(struct fixture *f, uint32_t i, uint64_t now)
{
	union etr_sockaddr sa;
	char ip[32];

	snprintf(ip, sizeof(ip), "10.0.0.%u", i);
	sa_v4(&sa, ip, 27960);
	return session_insert(udprelay_sessions(&f->u), &sa, (int)(100 + i), now);
}

/* Two clients of the relay, one qport: the first in-game packet names it,
 * a second session is refused while the first is heard from, and takes it
 * over (NAT rebinding) once the first has been quiet for the grace. */
static void test_q3policy_qport_has_one_owner_until_it_goes_quiet(void **state)
{
	struct fixture *f = *state;
	struct session_table *t = udprelay_sessions(&f->u);
	uint32_t a, b, owner = SESSION_NONE;
	uint64_t now = 10 * SEC;

	a = insert(f, 1, now);
	b = insert(f, 2, now);
	assert_int_equal(q3policy_qport_claim(&f->p, a, 4711, false, now, NULL), Q3P_QPORT_OK);
	session_heard_up(t, a, now);
	assert_int_equal(q3policy_qport_claim(&f->p, b, 4711, false, now + 1, &owner),
			 Q3P_QPORT_OWNED);
	assert_int_equal(owner, a);
	/* b's first refused packet gave it no qport: it may still try its own. */
	assert_false(f->p.ss[b].qport_known);
	now += Q3P_QPORT_GRACE - 1;
	assert_int_equal(q3policy_qport_claim(&f->p, b, 4711, true, now, NULL), Q3P_QPORT_OWNED);
	now += 1;
	assert_int_equal(q3policy_qport_claim(&f->p, b, 4711, false, now, NULL), Q3P_QPORT_OK);
	assert_int_equal(f->p.qport_owner[4711], b + 1);
	session_heard_up(t, b, now);
	/* Now a is the one refused, until b goes quiet in turn. */
	assert_int_equal(q3policy_qport_claim(&f->p, a, 4711, false, now + 1, &owner),
			 Q3P_QPORT_OWNED);
	assert_int_equal(owner, b);
}

static void test_q3policy_qport_in_game_packet_must_carry_its_sessions(void **state)
{
	struct fixture *f = *state;
	uint32_t a = insert(f, 1, SEC);

	assert_int_equal(q3policy_qport_claim(&f->p, a, 100, false, SEC, NULL), Q3P_QPORT_OK);
	assert_int_equal(q3policy_qport_claim(&f->p, a, 101, false, SEC, NULL), Q3P_QPORT_MISMATCH);
	assert_int_equal(f->p.qport_owner[101], 0);
	/* Long after, still: a sweep from one session reaches nothing. */
	assert_int_equal(q3policy_qport_claim(&f->p, a, 101, false, 100 * SEC, NULL),
			 Q3P_QPORT_MISMATCH);
}

/* A reconnect from the same client may name a new qport: the old one is
 * free at once. */
static void test_q3policy_qport_connect_renames_and_frees_the_old_one(void **state)
{
	struct fixture *f = *state;
	uint32_t a = insert(f, 1, SEC), b = insert(f, 2, SEC);

	assert_int_equal(q3policy_qport_claim(&f->p, a, 100, true, SEC, NULL), Q3P_QPORT_OK);
	assert_int_equal(q3policy_qport_claim(&f->p, a, 200, true, SEC, NULL), Q3P_QPORT_OK);
	assert_int_equal(f->p.ss[a].qport, 200);
	assert_int_equal(f->p.qport_owner[100], 0);
	assert_int_equal(q3policy_qport_claim(&f->p, b, 100, false, SEC, NULL), Q3P_QPORT_OK);
	assert_int_equal(q3policy_qport_claim(&f->p, a, 100, false, SEC, NULL), Q3P_QPORT_MISMATCH);
}

/* A session that ends gives its qport back; one that lost it to another
 * does not take it from the new holder as it ends. */
static void test_q3policy_qport_is_released_by_its_holder_only(void **state)
{
	struct fixture *f = *state;
	struct session_table *t = udprelay_sessions(&f->u);
	uint32_t a, b, c;
	uint64_t now = SEC;

	a = insert(f, 1, now);
	assert_int_equal(q3policy_qport_claim(&f->p, a, 7, false, now, NULL), Q3P_QPORT_OK);
	now += Q3P_QPORT_GRACE;
	b = insert(f, 2, now);
	assert_int_equal(q3policy_qport_claim(&f->p, b, 7, false, now, NULL), Q3P_QPORT_OK);
	q3policy_ops.session_closed(&f->p, &f->u, a);
	session_remove(t, a);
	assert_int_equal(f->p.qport_owner[7], b + 1);
	q3policy_ops.session_closed(&f->p, &f->u, b);
	session_remove(t, b);
	assert_int_equal(f->p.qport_owner[7], 0);
	c = insert(f, 3, now);
	assert_int_equal(q3policy_qport_claim(&f->p, c, 7, false, now, NULL), Q3P_QPORT_OK);
}

static void test_q3_budget_class_follows_the_engines(void **state)
{
	(void)state;
	/* Counted by both engines' per-address bucket. */
	assert_int_equal(q3_budget_class(Q3_GETINFO, false, false), RL_BROWSER);
	assert_int_equal(q3_budget_class(Q3_GETSTATUS, false, true), RL_BROWSER);
	assert_int_equal(q3_budget_class(Q3_GETCHALLENGE, false, false), RL_PLAYER);
	/* rcon: its own class, not a player's token. */
	assert_int_equal(q3_budget_class(Q3_RCON, false, false), RL_RCON);
	/* A master's challenge, whichever command it uses. */
	assert_int_equal(q3_budget_class(Q3_GETINFO, true, false), RL_MASTER);
	assert_int_equal(q3_budget_class(Q3_GETCHALLENGE, true, true), RL_MASTER);
	assert_int_equal(q3_budget_class(Q3_GETSTATUS, true, true), RL_MASTER);
	/* connect: ET: Legacy counts it (sv_protect 1), ioquake3 does not. */
	assert_int_equal(q3_budget_class(Q3_CONNECT, false, true), RL_PLAYER);
	assert_int_equal(q3_budget_class(Q3_CONNECT, false, false), RL_FREE);
	assert_int_equal(q3_budget_class(Q3_CONNECT, true, true), RL_PLAYER);
	/* Nothing else costs the server's bucket. */
	assert_int_equal(q3_budget_class(Q3_UNKNOWN, false, true), RL_FREE);
	assert_int_equal(q3_budget_class(Q3_GAME, false, true), RL_FREE);
	assert_int_equal(q3_budget_class(Q3_DISCONNECT, false, true), RL_FREE);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_q3_budget_class_follows_the_engines),
	    T(test_q3policy_connect_on_a_session_never_challenged_is_refused),
	    T(test_q3policy_challenge_response_admits_the_connect_to_the_decoder),
	    T(test_q3policy_connect_response_assures_the_session),
	    T(test_q3policy_per_ip_query_bucket_refuses_past_its_burst),
	    T(test_q3policy_server_budget_refuses_when_spent),
	    T(test_q3policy_master_past_its_allowance_is_refused),
	    T(test_q3policy_fresh_info_answers_a_browser_from_the_cache),
	    T(test_q3policy_failed_round_empties_the_cache),
	    T(test_q3policy_in_game_qport_rules_through_the_forwarder),
	    T(test_q3policy_darkplaces_has_no_qport_rules),
	    T(test_q3policy_qport_has_one_owner_until_it_goes_quiet),
	    T(test_q3policy_qport_in_game_packet_must_carry_its_sessions),
	    T(test_q3policy_qport_connect_renames_and_frees_the_old_one),
	    T(test_q3policy_qport_is_released_by_its_holder_only),
	    T(test_q3policy_qport_is_held_across_workers),
	    T(test_q3policy_cache_share_fits_the_largest_answer),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
