/* SPDX-License-Identifier: ISC */
/* Unit tests for turn_alloc.c: 5-tuples, cap, the port range with
 * EVEN-PORT and reservations, permissions, channels, the retransmission
 * cache, expiry order; and a randomized run against a naive model. */
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

#include "turn_alloc.h"
#include "unit_util.h"

static const uint8_t hkey[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t lkey[16] = {0xaa};

#define S 1000ull /* now is in ms */

/* Client i over UDP on listener 0. */
static struct turn_5tuple udp(uint32_t i)
{
	struct turn_5tuple k;

	memset(&k, 0, sizeof(k));
	k.client.in.sin_family = AF_INET;
	k.client.in.sin_addr.s_addr = htonl(0xc6336400u + (i >> 8)); /* 198.51.100.x */
	k.client.in.sin_port = htons((uint16_t)(40000 + (i & 0xff)));
	k.transport = TURN_UDP;
	return k;
}

/* Allocate for k as "expiry:user": take a port, create. */
static enum turn_alloc_err alloc_as(struct turn_alloc_table *t, const struct turn_5tuple *k,
				    const char *user, uint32_t lifetime_s, uint64_t now,
				    uint32_t *idx)
{
	char username[160];
	struct turn_alloc_req r;
	enum turn_alloc_err e;
	uint16_t port;

	snprintf(username, sizeof(username), "1700000000:%s", user);
	e = turn_alloc_admit(t, k);
	if (e != TURN_OK)
		return e;
	e = turn_alloc_port_take(t, false, false, NULL, NULL, now, &port);
	if (e != TURN_OK)
		return e;
	memset(&r, 0, sizeof(r));
	r.username = username;
	r.username_len = strlen(username);
	r.key = lkey;
	r.cred_expiry = 1700000000;
	r.lifetime_s = lifetime_s;
	r.family = AF_INET;
	r.port = port;
	e = turn_alloc_create(t, k, &r, now, idx);
	if (e != TURN_OK)
		turn_alloc_port_release(t, port, now);
	return e;
}

static void test_allocation_is_found_by_5tuple_and_by_port(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1), other = udp(2);
	uint32_t idx, idx2;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 8, 50000, 50099, hkey, 1), 0);
	assert_int_equal(alloc_as(&t, &k, "alice", 600, 0, &idx), TURN_OK);
	assert_int_equal(turn_alloc_lookup(&t, &k), idx);
	assert_int_equal(turn_alloc_lookup(&t, &other), TURN_ALLOC_NONE);
	assert_true(t.a[idx].port >= 50000 && t.a[idx].port <= 50099);
	assert_int_equal(turn_alloc_by_port(&t, t.a[idx].port), idx);
	assert_int_equal(turn_alloc_by_port(&t, 49999), TURN_ALLOC_NONE);
	assert_int_equal(turn_alloc_by_port(&t, 50100), TURN_ALLOC_NONE);
	assert_string_equal(t.a[idx].username, "1700000000:alice");
	assert_memory_equal(t.a[idx].key, lkey, 16);
	assert_int_equal(t.a[idx].cred_expiry, 1700000000);
	assert_int_equal(t.a[idx].expires, 600 * S);
	/* A second Allocate on the 5-tuple: 437. */
	assert_int_equal(alloc_as(&t, &k, "alice", 600, 0, &idx2), TURN_E_EXISTS);
	assert_int_equal(turn_alloc_err_code(TURN_E_EXISTS), 437);
	assert_int_equal(turn_alloc_ports_free(&t), 99);
	assert_int_equal(t.active, 1);
	turn_alloc_free(&t);
}

static void test_stream_5tuples_are_told_apart_by_connection_and_listener(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple a = udp(1), b, c, d;
	uint32_t ia, ib, ic, id;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 8, 50000, 50099, hkey, 1), 0);
	a.transport = TURN_TCP;
	a.conn = 7;
	b = a;
	b.conn = 8;
	c = a;
	c.listener = 1;
	d = a;
	d.transport = TURN_TLS;
	assert_int_equal(alloc_as(&t, &a, "u", 600, 0, &ia), TURN_OK);
	assert_int_equal(alloc_as(&t, &b, "u", 600, 0, &ib), TURN_OK);
	assert_int_equal(alloc_as(&t, &c, "u", 600, 0, &ic), TURN_OK);
	assert_int_equal(alloc_as(&t, &d, "u", 600, 0, &id), TURN_OK);
	assert_int_equal(turn_alloc_lookup(&t, &a), ia);
	assert_int_equal(turn_alloc_lookup(&t, &b), ib);
	assert_int_equal(turn_alloc_lookup(&t, &c), ic);
	assert_int_equal(turn_alloc_lookup(&t, &d), id);
	turn_alloc_remove(&t, ib);
	assert_int_equal(turn_alloc_lookup(&t, &b), TURN_ALLOC_NONE);
	assert_int_equal(turn_alloc_lookup(&t, &a), ia);
	assert_int_equal(turn_alloc_lookup(&t, &d), id);
	turn_alloc_free(&t);
}

/* The XDP program's known sources, as the table reports them. */
static int known_on, known_off;
static union etr_sockaddr known_last;

static void known(void *arg, const union etr_sockaddr *client, bool on)
{
	assert_ptr_equal(arg, &known_on);
	known_last = *client;
	if (on)
		known_on++;
	else
		known_off++;
}

static void test_udp_allocations_are_reported_known_until_removed(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple u = udp(1), tcp = udp(2);
	uint32_t iu, it, x;

	(void)state;
	known_on = known_off = 0;
	assert_int_equal(turn_alloc_init(&t, 8, 50000, 50099, hkey, 1), 0);
	t.known = known;
	t.known_arg = &known_on;
	tcp.transport = TURN_TCP;
	tcp.conn = 3;
	assert_int_equal(alloc_as(&t, &u, "u", 600, 0, &iu), TURN_OK);
	assert_int_equal(known_on, 1);
	assert_memory_equal(&known_last.in, &u.client.in, sizeof(u.client.in));
	/* Over TCP: the program never sees its packets. */
	assert_int_equal(alloc_as(&t, &tcp, "u", 600, 0, &it), TURN_OK);
	assert_int_equal(known_on, 1);
	/* Refused (437): nothing new is known. */
	assert_int_equal(alloc_as(&t, &u, "u", 600, 0, &x), TURN_E_EXISTS);
	assert_int_equal(known_on, 1);
	turn_alloc_remove(&t, it);
	assert_int_equal(known_off, 0);
	turn_alloc_remove(&t, iu);
	assert_int_equal(known_off, 1);
	assert_memory_equal(&known_last.in, &u.client.in, sizeof(u.client.in));
	/* Removed twice: reported once. */
	turn_alloc_remove(&t, iu);
	assert_int_equal(known_off, 1);
	turn_alloc_free(&t);
}

static void test_node_cap_refuses_with_508_until_one_goes(void **state)
{
	struct turn_alloc_table t;
	uint32_t idx[4], x;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50099, hkey, 1), 0);
	for (uint32_t i = 0; i < 4; i++) {
		struct turn_5tuple k = udp(i);

		assert_int_equal(alloc_as(&t, &k, "u", 600, 0, &idx[i]), TURN_OK);
	}
	{
		struct turn_5tuple k = udp(9);

		assert_int_equal(alloc_as(&t, &k, "u", 600, 0, &x), TURN_E_FULL);
		assert_int_equal(turn_alloc_err_code(TURN_E_FULL), 508);
		assert_string_equal(turn_alloc_err_str(TURN_E_FULL), "cap");
		/* The port the glue took is back. */
		assert_int_equal(turn_alloc_ports_free(&t), 96);
		turn_alloc_remove(&t, idx[2]);
		assert_int_equal(alloc_as(&t, &k, "u", 600, 0, &x), TURN_OK);
	}
	turn_alloc_free(&t);
}

static void test_init_refuses_a_cap_wider_than_the_port_range(void **state)
{
	struct turn_alloc_table t;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 11, 50000, 50009, hkey, 1), -EINVAL);
	assert_int_equal(turn_alloc_init(&t, 0, 50000, 50009, hkey, 1), -EINVAL);
	assert_int_equal(turn_alloc_init(&t, 1, 50009, 50000, hkey, 1), -EINVAL);
	assert_int_equal(turn_alloc_init(&t, 10, 50000, 50009, hkey, 1), 0);
	turn_alloc_free(&t);
}

static void test_long_username_is_refused(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	char name[TURN_USERNAME_MAX + 2];
	struct turn_alloc_req r;
	uint16_t port;
	uint32_t x;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50099, hkey, 1), 0);
	memset(name, 'a', sizeof(name));
	name[sizeof(name) - 1] = '\0';
	assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, 0, &port), TURN_OK);
	memset(&r, 0, sizeof(r));
	r.username = name;
	r.username_len = TURN_USERNAME_MAX + 1;
	r.key = lkey;
	r.lifetime_s = 600;
	r.family = AF_INET;
	r.port = port;
	assert_int_equal(turn_alloc_create(&t, &k, &r, 0, &x), TURN_E_USERNAME);
	assert_int_equal(turn_alloc_err_code(TURN_E_USERNAME), 400);
	r.username_len = TURN_USERNAME_MAX;
	assert_int_equal(turn_alloc_create(&t, &k, &r, 0, &x), TURN_OK);
	assert_int_equal(strlen(t.a[x].username), TURN_USERNAME_MAX);
	turn_alloc_free(&t);
}

static void test_refs_carry_the_generation(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	uint32_t idx, ref, idx2;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 1, 50000, 50001, hkey, 1), 0);
	assert_int_equal(alloc_as(&t, &k, "u", 600, 0, &idx), TURN_OK);
	ref = turn_alloc_ref(&t, idx);
	assert_true(ref < (1u << 24));
	assert_int_equal(turn_alloc_deref(&t, ref), idx);
	turn_alloc_remove(&t, idx);
	assert_int_equal(turn_alloc_deref(&t, ref), TURN_ALLOC_NONE);
	assert_int_equal(alloc_as(&t, &k, "u", 600, 0, &idx2), TURN_OK);
	assert_int_equal(idx2, idx);
	assert_int_equal(turn_alloc_deref(&t, ref), TURN_ALLOC_NONE);
	assert_int_equal(turn_alloc_deref(&t, turn_alloc_ref(&t, idx2)), idx2);
	assert_int_equal(turn_alloc_deref(&t, 5), TURN_ALLOC_NONE);
	turn_alloc_free(&t);
}

static void test_allocations_expire_earliest_first_and_refresh_moves_them(void **state)
{
	static const uint32_t life[6] = {900, 600, 3600, 700, 601, 1200};
	struct turn_alloc_table t;
	uint32_t idx[6], got;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 8, 50000, 50099, hkey, 1), 0);
	assert_int_equal(turn_alloc_next_deadline(&t), UINT64_MAX);
	for (uint32_t i = 0; i < 6; i++) {
		struct turn_5tuple k = udp(i);

		assert_int_equal(alloc_as(&t, &k, "u", life[i], 10 * S, &idx[i]), TURN_OK);
	}
	assert_int_equal(turn_alloc_next_deadline(&t), 610 * S);
	assert_int_equal(turn_alloc_expire(&t, 610 * S - 1), TURN_ALLOC_NONE);
	/* Refresh the 700 s one to 200 s from 300 s: it goes first now. */
	turn_alloc_refresh(&t, idx[3], 200, 300 * S);
	assert_int_equal(turn_alloc_next_deadline(&t), 500 * S);
	/* And the 600 s one later: 3000 s from 400 s. */
	turn_alloc_refresh(&t, idx[1], 3000, 400 * S);
	{
		static const int order[6] = {3, 4, 0, 5, 1, 2};

		for (int i = 0; i < 6; i++) {
			got = turn_alloc_expire(&t, 10000 * S);
			assert_int_equal(got, idx[order[i]]);
			/* Not removed: the same one again. */
			assert_int_equal(turn_alloc_expire(&t, 10000 * S), got);
			turn_alloc_remove(&t, got);
		}
	}
	assert_int_equal(turn_alloc_expire(&t, 10000 * S), TURN_ALLOC_NONE);
	assert_int_equal(turn_alloc_next_deadline(&t), UINT64_MAX);
	assert_int_equal(turn_alloc_ports_free(&t), 100);
	turn_alloc_free(&t);
}

static void test_permissions_last_300_s_ip_only_and_refresh(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	union etr_sockaddr p1, p1b, p2, p6, p6m;
	uint32_t idx;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50099, hkey, 1), 0);
	assert_int_equal(alloc_as(&t, &k, "u", 3600, 0, &idx), TURN_OK);
	sa_v4(&p1, "8.8.8.8", 1000);
	sa_v4(&p1b, "8.8.8.8", 2000);
	sa_v4(&p2, "8.8.4.4", 1000);
	sa_v6(&p6, "2001:4860::1", 1000);
	sa_v6(&p6m, "::ffff:8.8.8.8", 9);
	assert_false(turn_alloc_permitted(&t, idx, &p1, 0));
	assert_int_equal(turn_alloc_permit(&t, idx, &p1, 0), TURN_OK);
	assert_int_equal(turn_alloc_permit(&t, idx, &p6, 0), TURN_OK);
	/* Any port of the IP; the mapped form is the same IP. */
	assert_true(turn_alloc_permitted(&t, idx, &p1b, 0));
	assert_true(turn_alloc_permitted(&t, idx, &p6m, 0));
	assert_true(turn_alloc_permitted(&t, idx, &p6, 0));
	assert_false(turn_alloc_permitted(&t, idx, &p2, 0));
	assert_int_equal(turn_alloc_next_deadline(&t), 300 * S);
	assert_true(turn_alloc_permitted(&t, idx, &p1, 300 * S - 1));
	/* Refreshed at 200 s: lasts to 500 s. p6 does not. */
	assert_int_equal(turn_alloc_permit(&t, idx, &p1b, 200 * S), TURN_OK);
	assert_false(turn_alloc_permitted(&t, idx, &p6, 300 * S));
	assert_true(turn_alloc_permitted(&t, idx, &p1, 300 * S));
	/* Expiry drops p6 without ending the allocation. */
	assert_int_equal(turn_alloc_expire(&t, 300 * S), TURN_ALLOC_NONE);
	assert_int_equal(turn_alloc_next_deadline(&t), 500 * S);
	assert_int_equal(turn_alloc_expire(&t, 500 * S), TURN_ALLOC_NONE);
	assert_false(turn_alloc_permitted(&t, idx, &p1, 500 * S));
	assert_int_equal(turn_alloc_next_deadline(&t), 3600 * S);
	assert_int_equal(turn_alloc_lookup(&t, &k), idx);
	turn_alloc_free(&t);
}

static void test_permissions_are_bounded_and_expired_ones_reused(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	union etr_sockaddr p;
	char ip[32];
	uint32_t idx;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50099, hkey, 1), 0);
	assert_int_equal(alloc_as(&t, &k, "u", 3600, 0, &idx), TURN_OK);
	for (int i = 0; i < TURN_PERM_MAX; i++) {
		snprintf(ip, sizeof(ip), "8.8.%d.1", i);
		sa_v4(&p, ip, 1);
		assert_int_equal(turn_alloc_permit(&t, idx, &p, (uint64_t)i * S), TURN_OK);
	}
	sa_v4(&p, "9.9.9.9", 1);
	assert_int_equal(turn_alloc_permit(&t, idx, &p, 40 * S), TURN_E_PERM_FULL);
	assert_int_equal(turn_alloc_err_code(TURN_E_PERM_FULL), 508);
	/* Refreshing one that is there still works when full. */
	sa_v4(&p, "8.8.3.1", 1);
	assert_int_equal(turn_alloc_permit(&t, idx, &p, 40 * S), TURN_OK);
	/* The first one (0 s) expires at 300 s: its place is free. */
	sa_v4(&p, "9.9.9.9", 1);
	assert_int_equal(turn_alloc_permit(&t, idx, &p, 300 * S), TURN_OK);
	sa_v4(&p, "8.8.0.1", 1);
	assert_false(turn_alloc_permitted(&t, idx, &p, 300 * S));
	sa_v4(&p, "9.9.9.10", 1);
	assert_int_equal(turn_alloc_permit(&t, idx, &p, 300 * S), TURN_E_PERM_FULL);
	turn_alloc_free(&t);
}

static void test_create_permission_with_several_peers_is_all_or_nothing(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	union etr_sockaddr p, three[3], dups[4];
	char ip[32];
	uint32_t idx;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50099, hkey, 1), 0);
	assert_int_equal(alloc_as(&t, &k, "u", 3600, 0, &idx), TURN_OK);
	for (int i = 0; i < TURN_PERM_MAX - 1; i++) {
		snprintf(ip, sizeof(ip), "8.8.%d.1", i);
		sa_v4(&p, ip, 1);
		assert_int_equal(turn_alloc_permit(&t, idx, &p, 0), TURN_OK);
	}
	/* One place left, three new peers: refused, none of them installed,
	 * and the one already there (8.8.0.1) not refreshed either. */
	sa_v4(&three[0], "9.9.9.1", 1);
	sa_v4(&three[1], "8.8.0.1", 1);
	sa_v4(&three[2], "9.9.9.2", 1);
	assert_int_equal(turn_alloc_permit_all(&t, idx, three, 3, 10 * S), TURN_E_PERM_FULL);
	assert_false(turn_alloc_permitted(&t, idx, &three[0], 10 * S));
	assert_false(turn_alloc_permitted(&t, idx, &three[2], 10 * S));
	assert_false(turn_alloc_permitted(&t, idx, &three[1], 300 * S));
	/* One new IP named three times (other ports, the mapped form) and one
	 * permitted: the duplicates count once, so it fits the last place. */
	sa_v4(&dups[0], "9.9.9.3", 1);
	sa_v4(&dups[1], "9.9.9.3", 2);
	sa_v6(&dups[2], "::ffff:9.9.9.3", 3);
	sa_v4(&dups[3], "8.8.5.1", 1);
	assert_int_equal(turn_alloc_permit_all(&t, idx, dups, 4, 10 * S), TURN_OK);
	assert_true(turn_alloc_permitted(&t, idx, &dups[0], 10 * S));
	assert_true(turn_alloc_permitted(&t, idx, &dups[3], 300 * S)); /* refreshed */
	/* Now full: even one new peer is refused, a permitted one refreshed. */
	assert_int_equal(turn_alloc_permit_all(&t, idx, &three[0], 1, 10 * S), TURN_E_PERM_FULL);
	assert_int_equal(turn_alloc_permit_all(&t, idx, &three[1], 1, 10 * S), TURN_OK);
	assert_true(turn_alloc_permitted(&t, idx, &three[1], 300 * S));
	turn_alloc_free(&t);
}

static void test_counts_are_of_live_permissions_and_channels(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	union etr_sockaddr p1, p2;
	unsigned perms, chans;
	uint32_t idx;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50099, hkey, 1), 0);
	assert_int_equal(alloc_as(&t, &k, "u", 3600, 7 * S, &idx), TURN_OK);
	assert_int_equal(t.a[idx].created, 7 * S);
	assert_int_equal(t.a[idx].dgrams_to_peer + t.a[idx].bytes_to_client, 0);
	turn_alloc_counts(&t, idx, 7 * S, &perms, &chans);
	assert_int_equal(perms, 0);
	assert_int_equal(chans, 0);
	sa_v4(&p1, "8.8.8.8", 1000);
	sa_v4(&p2, "8.8.4.4", 1000);
	assert_int_equal(turn_alloc_permit(&t, idx, &p1, 10 * S), TURN_OK);
	assert_int_equal(turn_alloc_bind(&t, idx, 0x4000, &p2, 10 * S), TURN_OK);
	turn_alloc_counts(&t, idx, 10 * S, &perms, &chans);
	assert_int_equal(perms, 2); /* p1, and p2's with its channel */
	assert_int_equal(chans, 1);
	/* The permissions end at 310 s, the channel at 610 s. */
	turn_alloc_counts(&t, idx, 310 * S, &perms, &chans);
	assert_int_equal(perms, 0);
	assert_int_equal(chans, 1);
	/* A slot used again starts from zero. */
	t.a[idx].dgrams_to_peer = 5;
	turn_alloc_remove(&t, idx);
	for (int i = 0; i < 4; i++) {
		struct turn_5tuple o = udp(10 + i);
		uint32_t j;

		assert_int_equal(alloc_as(&t, &o, "v", 600, 400 * S, &j), TURN_OK);
		assert_int_equal(t.a[j].dgrams_to_peer, 0);
		assert_int_equal(t.a[j].created, 400 * S);
	}
	turn_alloc_free(&t);
}

static void test_channels_bind_refresh_and_install_permissions(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	union etr_sockaddr p1, p1other, got;
	uint32_t idx;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50099, hkey, 1), 0);
	assert_int_equal(alloc_as(&t, &k, "u", 3600, 0, &idx), TURN_OK);
	sa_v4(&p1, "8.8.8.8", 5000);
	sa_v4(&p1other, "8.8.8.8", 5001);
	assert_int_equal(turn_alloc_bind(&t, idx, 0x4000, &p1, 0), TURN_OK);
	assert_true(turn_alloc_permitted(&t, idx, &p1other, 0));
	assert_int_equal(turn_alloc_chan_of(&t, idx, &p1, 0), 0x4000);
	assert_int_equal(turn_alloc_chan_of(&t, idx, &p1other, 0), 0);
	assert_true(turn_alloc_chan_peer(&t, idx, 0x4000, 0, &got));
	assert_int_equal(got.sa.sa_family, AF_INET);
	assert_true(addr_equal(&got, &p1));
	assert_false(turn_alloc_chan_peer(&t, idx, 0x4001, 0, &got));
	/* The same pair again at 250 s (uclient does): refreshes both. */
	assert_int_equal(turn_alloc_bind(&t, idx, 0x4000, &p1, 250 * S), TURN_OK);
	assert_true(turn_alloc_permitted(&t, idx, &p1, 540 * S));
	assert_false(turn_alloc_permitted(&t, idx, &p1, 550 * S));
	/* The channel outlives its permission: 600 s from 250 s. */
	assert_int_equal(turn_alloc_expire(&t, 600 * S), TURN_ALLOC_NONE);
	assert_int_equal(turn_alloc_chan_of(&t, idx, &p1, 600 * S), 0x4000);
	assert_int_equal(turn_alloc_next_deadline(&t), 850 * S);
	assert_int_equal(turn_alloc_expire(&t, 850 * S), TURN_ALLOC_NONE);
	assert_int_equal(turn_alloc_chan_of(&t, idx, &p1, 850 * S), 0);
	assert_false(turn_alloc_chan_peer(&t, idx, 0x4000, 850 * S, &got));
	/* Once expired, the number may go to another peer. */
	assert_int_equal(turn_alloc_bind(&t, idx, 0x4000, &p1other, 900 * S), TURN_OK);
	turn_alloc_free(&t);
}

static void test_channel_range_and_conflicts_are_refused(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	union etr_sockaddr p1, p2;
	uint32_t idx;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50099, hkey, 1), 0);
	assert_int_equal(alloc_as(&t, &k, "u", 3600, 0, &idx), TURN_OK);
	sa_v4(&p1, "8.8.8.8", 5000);
	sa_v4(&p2, "8.8.4.4", 5000);
	assert_int_equal(turn_alloc_bind(&t, idx, 0x3fff, &p1, 0), TURN_E_CHAN_RANGE);
	assert_int_equal(turn_alloc_bind(&t, idx, 0x8000, &p1, 0), TURN_E_CHAN_RANGE);
	assert_int_equal(turn_alloc_err_code(TURN_E_CHAN_RANGE), 400);
	/* 0x7FFF: the RFC 5766 range deployed clients use. */
	assert_int_equal(turn_alloc_bind(&t, idx, 0x7fff, &p1, 0), TURN_OK);
	assert_int_equal(turn_alloc_bind(&t, idx, 0x7fff, &p2, 0), TURN_E_CHAN_CONFLICT);
	assert_int_equal(turn_alloc_bind(&t, idx, 0x4001, &p1, 0), TURN_E_CHAN_CONFLICT);
	assert_int_equal(turn_alloc_err_code(TURN_E_CHAN_CONFLICT), 400);
	/* Nothing changed: p2 got no permission. */
	assert_false(turn_alloc_permitted(&t, idx, &p2, 0));
	assert_int_equal(turn_alloc_chan_of(&t, idx, &p1, 0), 0x7fff);
	turn_alloc_free(&t);
}

static void test_channels_are_bounded(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	union etr_sockaddr p;
	uint32_t idx;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50099, hkey, 1), 0);
	assert_int_equal(alloc_as(&t, &k, "u", 3600, 0, &idx), TURN_OK);
	for (int i = 0; i < TURN_CHAN_MAX; i++) {
		sa_v4(&p, "8.8.8.8", (uint16_t)(1000 + i));
		assert_int_equal(turn_alloc_bind(&t, idx, (uint16_t)(0x4000 + i), &p, 0), TURN_OK);
	}
	sa_v4(&p, "8.8.8.8", 999);
	assert_int_equal(turn_alloc_bind(&t, idx, 0x5000, &p, 0), TURN_E_CHAN_FULL);
	assert_int_equal(turn_alloc_err_code(TURN_E_CHAN_FULL), 508);
	turn_alloc_free(&t);
}

static void test_channel_refused_when_its_permission_cannot_be_had(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	union etr_sockaddr p;
	char ip[32];
	uint32_t idx;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50099, hkey, 1), 0);
	assert_int_equal(alloc_as(&t, &k, "u", 3600, 0, &idx), TURN_OK);
	for (int i = 0; i < TURN_PERM_MAX; i++) {
		snprintf(ip, sizeof(ip), "8.8.%d.1", i);
		sa_v4(&p, ip, 1);
		assert_int_equal(turn_alloc_permit(&t, idx, &p, 0), TURN_OK);
	}
	sa_v4(&p, "9.9.9.9", 1);
	assert_int_equal(turn_alloc_bind(&t, idx, 0x4000, &p, 0), TURN_E_PERM_FULL);
	assert_int_equal(turn_alloc_chan_of(&t, idx, &p, 0), 0);
	/* A peer with a permission binds. */
	sa_v4(&p, "8.8.7.1", 1);
	assert_int_equal(turn_alloc_bind(&t, idx, 0x4000, &p, 0), TURN_OK);
	turn_alloc_free(&t);
}

static void test_ipv6_allocation_gets_ipv6_channel_peers(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	union etr_sockaddr p, got;
	struct turn_alloc_req r;
	uint16_t port;
	uint32_t idx;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50099, hkey, 1), 0);
	assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, 0, &port), TURN_OK);
	memset(&r, 0, sizeof(r));
	r.username = "u";
	r.username_len = 1;
	r.key = lkey;
	r.lifetime_s = 600;
	r.family = AF_INET6;
	r.port = port;
	assert_int_equal(turn_alloc_create(&t, &k, &r, 0, &idx), TURN_OK);
	sa_v6(&p, "2001:4860::1", 7);
	assert_int_equal(turn_alloc_bind(&t, idx, 0x4100, &p, 0), TURN_OK);
	assert_true(turn_alloc_chan_peer(&t, idx, 0x4100, 0, &got));
	assert_int_equal(got.sa.sa_family, AF_INET6);
	assert_true(addr_equal(&got, &p));
	turn_alloc_free(&t);
}

static void test_last_transaction_is_answered_again_for_40_s(void **state)
{
	static const uint8_t tid[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
	static const uint8_t tid2[12] = {9};
	uint8_t resp[TURN_TXN_RESP_MAX + 1];
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	const uint8_t *got;
	uint32_t idx;
	size_t len;

	(void)state;
	memset(resp, 0x5a, sizeof(resp));
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50099, hkey, 1), 0);
	assert_int_equal(alloc_as(&t, &k, "u", 600, 0, &idx), TURN_OK);
	assert_null(turn_alloc_txn_find(&t, idx, tid, 0, &len));
	assert_true(turn_alloc_txn_store(&t, idx, tid, resp, 100, 1 * S));
	got = turn_alloc_txn_find(&t, idx, tid, 1 * S + TURN_TXN_KEEP_MS - 1, &len);
	assert_non_null(got);
	assert_int_equal(len, 100);
	assert_memory_equal(got, resp, 100);
	assert_null(turn_alloc_txn_find(&t, idx, tid2, 2 * S, &len));
	assert_null(turn_alloc_txn_find(&t, idx, tid, 1 * S + TURN_TXN_KEEP_MS, &len));
	/* The next transaction replaces it. */
	assert_true(turn_alloc_txn_store(&t, idx, tid2, resp, 20, 3 * S));
	assert_null(turn_alloc_txn_find(&t, idx, tid, 3 * S, &len));
	assert_non_null(turn_alloc_txn_find(&t, idx, tid2, 3 * S, &len));
	/* Too large to keep: nothing kept, the older one neither. */
	assert_false(turn_alloc_txn_store(&t, idx, tid, resp, sizeof(resp), 4 * S));
	assert_null(turn_alloc_txn_find(&t, idx, tid2, 4 * S, &len));
	assert_null(turn_alloc_txn_find(&t, idx, tid, 4 * S, &len));
	/* A new allocation in the slot starts with no cache. */
	assert_true(turn_alloc_txn_store(&t, idx, tid, resp, 100, 5 * S));
	turn_alloc_remove(&t, idx);
	assert_int_equal(alloc_as(&t, &k, "u", 600, 5 * S, &idx), TURN_OK);
	assert_null(turn_alloc_txn_find(&t, idx, tid, 5 * S, &len));
	turn_alloc_free(&t);
}

static void test_port_range_exhausts_and_reuses_freed_ports_last(void **state)
{
	struct turn_alloc_table t;
	uint16_t ports[10], p;
	bool seen[10] = {false};

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 10, 50000, 50009, hkey, 42), 0);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, 0, &ports[i]),
				 TURN_OK);
		assert_true(ports[i] >= 50000 && ports[i] <= 50009);
		assert_false(seen[ports[i] - 50000]);
		seen[ports[i] - 50000] = true;
	}
	assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, 0, &p), TURN_E_NO_PORT);
	assert_int_equal(turn_alloc_err_code(TURN_E_NO_PORT), 508);
	turn_alloc_port_release(&t, ports[3], 0);
	turn_alloc_port_release(&t, ports[7], 0);
	assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, 0, &p), TURN_OK);
	assert_int_equal(p, ports[3]);
	assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, 0, &p), TURN_OK);
	assert_int_equal(p, ports[7]);
	turn_alloc_free(&t);
}

static void test_ports_come_out_shuffled_by_the_seed(void **state)
{
	struct turn_alloc_table a, b;
	uint16_t pa[20], pb[20];
	int same = 0, ascending = 0;

	(void)state;
	assert_int_equal(turn_alloc_init(&a, 20, 50000, 50999, hkey, 1), 0);
	assert_int_equal(turn_alloc_init(&b, 20, 50000, 50999, hkey, 2), 0);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(turn_alloc_port_take(&a, false, false, NULL, NULL, 0, &pa[i]), 0);
		assert_int_equal(turn_alloc_port_take(&b, false, false, NULL, NULL, 0, &pb[i]), 0);
		same += pa[i] == pb[i];
		ascending += i > 0 && pa[i] == pa[i - 1] + 1;
	}
	assert_true(same < 5);
	assert_true(ascending < 5);
	turn_alloc_free(&a);
	turn_alloc_free(&b);
}

static void test_even_port_is_even_and_fails_when_none_is_left(void **state)
{
	struct turn_alloc_table t;
	uint16_t p;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 10, 50000, 50009, hkey, 7), 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(turn_alloc_port_take(&t, true, false, NULL, NULL, 0, &p), TURN_OK);
		assert_int_equal(p % 2, 0);
	}
	assert_int_equal(turn_alloc_port_take(&t, true, false, NULL, NULL, 0, &p), TURN_E_NO_PORT);
	/* Odd ones are still there for a plain Allocate. */
	assert_int_equal(turn_alloc_ports_free(&t), 5);
	assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, 0, &p), TURN_OK);
	assert_int_equal(p % 2, 1);
	turn_alloc_free(&t);
}

static void test_even_port_reservation_is_redeemed_once_within_30_s(void **state)
{
	static const uint8_t tok[8] = {'t', 'o', 'k', 'e', 'n', '0', '0', '1'};
	static const uint8_t tok2[8] = {'t', 'o', 'k', 'e', 'n', '0', '0', '2'};
	struct turn_alloc_table t;
	uint16_t p, q, r;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 10, 50001, 50010, hkey, 3), 0);
	assert_int_equal(turn_alloc_port_take(&t, true, true, NULL, tok, 0, &p), TURN_OK);
	assert_int_equal(p % 2, 0);
	assert_true(p + 1 <= 50010);
	assert_int_equal(turn_alloc_ports_free(&t), 8);
	assert_int_equal(turn_alloc_next_deadline(&t), TURN_RESV_LIFETIME_MS);
	/* Nobody else gets p + 1. */
	for (int i = 0; i < 8; i++) {
		assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, 0, &q),
				 TURN_OK);
		assert_int_not_equal(q, p + 1);
		turn_alloc_port_release(&t, q, 0);
	}
	/* A wrong token: 508. */
	assert_int_equal(turn_alloc_port_take(&t, false, false, tok2, NULL, 0, &q), TURN_E_TOKEN);
	assert_int_equal(turn_alloc_err_code(TURN_E_TOKEN), 508);
	assert_int_equal(turn_alloc_port_take(&t, false, false, tok, NULL, 29 * S, &q), TURN_OK);
	assert_int_equal(q, p + 1);
	/* Only once. */
	assert_int_equal(turn_alloc_port_take(&t, false, false, tok, NULL, 29 * S, &r),
			 TURN_E_TOKEN);
	/* A reservation nobody redeems goes back after 30 s. */
	turn_alloc_port_release(&t, p, 30 * S);
	turn_alloc_port_release(&t, q, 30 * S);
	assert_int_equal(turn_alloc_ports_free(&t), 10);
	assert_int_equal(turn_alloc_port_take(&t, true, true, NULL, tok2, 40 * S, &p), TURN_OK);
	assert_int_equal(turn_alloc_ports_free(&t), 8);
	assert_int_equal(turn_alloc_expire(&t, 70 * S - 1), TURN_ALLOC_NONE);
	assert_int_equal(turn_alloc_ports_free(&t), 8);
	assert_int_equal(turn_alloc_expire(&t, 70 * S), TURN_ALLOC_NONE);
	assert_int_equal(turn_alloc_ports_free(&t), 9);
	assert_int_equal(turn_alloc_next_deadline(&t), UINT64_MAX);
	assert_int_equal(turn_alloc_port_take(&t, false, false, tok2, NULL, 70 * S, &q),
			 TURN_E_TOKEN);
	turn_alloc_free(&t);
}

static void test_reservation_needs_a_free_pair(void **state)
{
	static const uint8_t tok[8] = {1};
	struct turn_alloc_table t;
	uint16_t p, taken[4];
	int n = 0;

	(void)state;
	/* 50000..50003: take the odd ones, then no pair is left. */
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50003, hkey, 3), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, 0, &taken[i]),
				 0);
	}
	for (int i = 0; i < 4; i++)
		if (taken[i] % 2 == 0)
			turn_alloc_port_release(&t, taken[i], 0);
		else
			n++;
	assert_int_equal(n, 2);
	assert_int_equal(turn_alloc_port_take(&t, true, true, NULL, tok, 0, &p), TURN_E_NO_PORT);
	assert_int_equal(turn_alloc_port_take(&t, true, false, NULL, NULL, 0, &p), TURN_OK);
	assert_int_equal(p % 2, 0);
	turn_alloc_free(&t);
}

static void test_unusable_port_is_kept_out_then_tried_again(void **state)
{
	static const uint8_t tok[8] = {2};
	struct turn_alloc_table t;
	uint16_t p, q, bad;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50003, hkey, 5), 0);
	assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, 0, &bad), TURN_OK);
	turn_alloc_port_unusable(&t, bad, 0);
	assert_int_equal(turn_alloc_ports_bad(&t), 1);
	assert_int_equal(turn_alloc_ports_free(&t), 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, 1 * S, &p), 0);
		assert_int_not_equal(p, bad);
	}
	assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, 1 * S, &p),
			 TURN_E_NO_PORT);
	/* After TURN_PORT_BAD_MS it is tried again. */
	assert_int_equal(turn_alloc_port_take(&t, false, false, NULL, NULL, TURN_PORT_BAD_MS, &p),
			 TURN_OK);
	assert_int_equal(p, bad);
	assert_int_equal(turn_alloc_ports_bad(&t), 0);
	turn_alloc_free(&t);

	/* A port taken with its neighbour reserved: the reservation goes too. */
	assert_int_equal(turn_alloc_init(&t, 4, 50000, 50003, hkey, 5), 0);
	assert_int_equal(turn_alloc_port_take(&t, true, true, NULL, tok, 0, &p), TURN_OK);
	turn_alloc_port_unusable(&t, p, 0);
	assert_int_equal(turn_alloc_ports_free(&t), 3);
	assert_int_equal(turn_alloc_port_take(&t, false, false, tok, NULL, 0, &q), TURN_E_TOKEN);
	/* The glue tries again and gets the other pair. */
	assert_int_equal(turn_alloc_port_take(&t, true, true, NULL, tok, 0, &q), TURN_OK);
	assert_int_not_equal(q, p);
	/* Releasing or marking an allocation's port does nothing. */
	turn_alloc_free(&t);
}

static void test_release_of_an_allocated_port_is_ignored(void **state)
{
	struct turn_alloc_table t;
	struct turn_5tuple k = udp(1);
	uint32_t idx;
	uint16_t port;

	(void)state;
	assert_int_equal(turn_alloc_init(&t, 2, 50000, 50001, hkey, 1), 0);
	assert_int_equal(alloc_as(&t, &k, "u", 600, 0, &idx), TURN_OK);
	port = t.a[idx].port;
	turn_alloc_port_release(&t, port, 0);
	turn_alloc_port_unusable(&t, port, 0);
	turn_alloc_port_release(&t, 1, 0);
	assert_int_equal(turn_alloc_ports_free(&t), 1);
	assert_int_equal(turn_alloc_ports_bad(&t), 0);
	assert_int_equal(turn_alloc_by_port(&t, port), idx);
	turn_alloc_free(&t);
}

/* ---- randomized, against a naive model ---- */

struct model {
	bool live;
	uint32_t idx;
	uint64_t expires;
	uint16_t port;
	int user;
	uint64_t perm[4]; /* peer i's permission expiry */
};

static uint64_t rnd_state = 0x1234567887654321ull;

static uint32_t rnd(uint32_t n)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return (uint32_t)(rnd_state % n);
}

static void test_random_operations_match_a_naive_model(void **state)
{
	enum { CAP = 24, CLIENTS = 40, USERS = 5, STEPS = 20000 };
	struct turn_alloc_table t;
	struct model m[CLIENTS];
	uint64_t now = 0;
	const char *users[USERS] = {"a", "b", "c", "d", "e"};

	(void)state;
	memset(m, 0, sizeof(m));
	assert_int_equal(turn_alloc_init(&t, CAP, 40000, 40000 + CAP + 5, hkey, 9), 0);
	for (int step = 0; step < STEPS; step++) {
		uint32_t c = rnd(CLIENTS), op = rnd(10);
		struct turn_5tuple k = udp(c);
		union etr_sockaddr peer;
		int live = 0;

		now += rnd(20 * S);
		for (int i = 0; i < CLIENTS; i++) {
			live += m[i].live;
		}
		sa_v4(&peer, "8.8.8.8", 1);
		peer.in.sin_addr.s_addr = htonl(0x08080800u + (uint32_t)rnd(4));
		if (op < 4) { /* Allocate */
			uint32_t idx;
			enum turn_alloc_err e =
			    alloc_as(&t, &k, users[c % USERS], 600 + rnd(600), now, &idx);

			if (m[c].live)
				assert_int_equal(e, TURN_E_EXISTS);
			else if (live >= CAP)
				assert_int_equal(e, TURN_E_FULL);
			else {
				assert_int_equal(e, TURN_OK);
				m[c].live = true;
				m[c].idx = idx;
				m[c].expires = t.a[idx].expires;
				m[c].port = t.a[idx].port;
				m[c].user = (int)(c % USERS);
				memset(m[c].perm, 0, sizeof(m[c].perm));
			}
		} else if (op < 5 && m[c].live) { /* Refresh, or delete */
			if (rnd(3) == 0) {
				turn_alloc_remove(&t, m[c].idx);
				m[c].live = false;
			} else {
				uint32_t life = 600 + rnd(3000);

				turn_alloc_refresh(&t, m[c].idx, life, now);
				m[c].expires = now + life * S;
			}
		} else if (op < 7 && m[c].live) { /* CreatePermission */
			uint32_t p = ntohl(peer.in.sin_addr.s_addr) & 3;

			assert_int_equal(turn_alloc_permit(&t, m[c].idx, &peer, now), TURN_OK);
			m[c].perm[p] = now + TURN_PERM_LIFETIME_MS;
		} else if (op < 8) { /* expiry timer */
			uint32_t x;

			while ((x = turn_alloc_expire(&t, now)) != TURN_ALLOC_NONE) {
				int found = -1;

				for (int i = 0; i < CLIENTS; i++)
					if (m[i].live && m[i].idx == x)
						found = i;
				assert_true(found >= 0);
				assert_true(m[found].expires <= now);
				turn_alloc_remove(&t, x);
				m[found].live = false;
			}
			for (int i = 0; i < CLIENTS; i++)
				assert_false(m[i].live && m[i].expires <= now);
			assert_true(turn_alloc_next_deadline(&t) > now);
		}
		/* Every lookup agrees with the model. */
		for (int i = 0; i < CLIENTS; i++) {
			struct turn_5tuple ki = udp((uint32_t)i);
			uint32_t idx = turn_alloc_lookup(&t, &ki);

			if (!m[i].live) {
				assert_int_equal(idx, TURN_ALLOC_NONE);
				continue;
			}
			assert_int_equal(idx, m[i].idx);
			assert_int_equal(turn_alloc_by_port(&t, m[i].port), idx);
			for (uint32_t p = 0; p < 4; p++) {
				sa_v4(&peer, "8.8.8.0", 1);
				peer.in.sin_addr.s_addr = htonl(0x08080800u + p);
				assert_int_equal(turn_alloc_permitted(&t, idx, &peer, now),
						 m[i].perm[p] > now);
			}
		}
		assert_int_equal(turn_alloc_ports_free(&t) + t.active, CAP + 6);
	}
	turn_alloc_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_allocation_is_found_by_5tuple_and_by_port),
	    cmocka_unit_test(test_stream_5tuples_are_told_apart_by_connection_and_listener),
	    cmocka_unit_test(test_udp_allocations_are_reported_known_until_removed),
	    cmocka_unit_test(test_node_cap_refuses_with_508_until_one_goes),
	    cmocka_unit_test(test_init_refuses_a_cap_wider_than_the_port_range),
	    cmocka_unit_test(test_long_username_is_refused),
	    cmocka_unit_test(test_refs_carry_the_generation),
	    cmocka_unit_test(test_allocations_expire_earliest_first_and_refresh_moves_them),
	    cmocka_unit_test(test_permissions_last_300_s_ip_only_and_refresh),
	    cmocka_unit_test(test_permissions_are_bounded_and_expired_ones_reused),
	    cmocka_unit_test(test_create_permission_with_several_peers_is_all_or_nothing),
	    cmocka_unit_test(test_counts_are_of_live_permissions_and_channels),
	    cmocka_unit_test(test_channels_bind_refresh_and_install_permissions),
	    cmocka_unit_test(test_channel_range_and_conflicts_are_refused),
	    cmocka_unit_test(test_channels_are_bounded),
	    cmocka_unit_test(test_channel_refused_when_its_permission_cannot_be_had),
	    cmocka_unit_test(test_ipv6_allocation_gets_ipv6_channel_peers),
	    cmocka_unit_test(test_last_transaction_is_answered_again_for_40_s),
	    cmocka_unit_test(test_port_range_exhausts_and_reuses_freed_ports_last),
	    cmocka_unit_test(test_ports_come_out_shuffled_by_the_seed),
	    cmocka_unit_test(test_even_port_is_even_and_fails_when_none_is_left),
	    cmocka_unit_test(test_even_port_reservation_is_redeemed_once_within_30_s),
	    cmocka_unit_test(test_reservation_needs_a_free_pair),
	    cmocka_unit_test(test_unusable_port_is_kept_out_then_tried_again),
	    cmocka_unit_test(test_release_of_an_allocated_port_is_ignored),
	    cmocka_unit_test(test_random_operations_match_a_naive_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
