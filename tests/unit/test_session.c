/* SPDX-License-Identifier: ISC */
/* Unit tests for session.c: hash table, slab, LRU expiry, generations. */
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

#include "session.h"
#include "unit_util.h"

static const uint8_t key[16] = {
    0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0,
};

#define SEC 1000000000ull

/* Client number i: a distinct IPv4 ip:port. */
static void client_v4(union etr_sockaddr *sa, uint32_t i)
{
	memset(sa, 0, sizeof(*sa));
	sa->in.sin_family = AF_INET;
	sa->in.sin_addr.s_addr = htonl(0x0a000000u | (i & 0xffffffu));
	sa->in.sin_port = htons((uint16_t)(27960 + (i % 7)));
}

static uint32_t insert_v4(struct session_table *t, uint32_t i, uint64_t now)
{
	union etr_sockaddr sa;

	client_v4(&sa, i);
	return session_insert(t, &sa, (int)(100 + i), now);
}

static uint32_t lookup_v4(const struct session_table *t, uint32_t i)
{
	union etr_sockaddr sa;

	client_v4(&sa, i);
	return session_lookup(t, &sa);
}

/* init */

static void test_session_table_init_rejects_zero_capacity(void **state)
{
	struct session_table t;

	(void)state;
	memset(&t, 0, sizeof(t));
	assert_int_equal(session_table_init(&t, 0, key), -EINVAL);
}

static void test_session_table_init_rejects_capacity_above_max(void **state)
{
	struct session_table t;

	(void)state;
	memset(&t, 0, sizeof(t));
	assert_int_equal(session_table_init(&t, SESSION_CAP_MAX + 1, key), -EINVAL);
	assert_int_equal(session_table_init(&t, UINT32_MAX, key), -EINVAL);
}

static void test_session_table_init_sizes_slots_to_a_power_of_two_at_least_twice_cap(void **state)
{
	static const uint32_t caps[] = {1, 3, 8, 1000, 4000};
	struct session_table t;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		assert_int_equal(session_table_init(&t, caps[i], key), 0);
		assert_int_equal(t.cap, caps[i]);
		assert_true(t.nslots >= 2 * caps[i]);
		assert_int_equal(t.nslots & (t.nslots - 1), 0);
		assert_int_equal(t.mask, t.nslots - 1);
		assert_int_equal(t.active, 0);
		assert_memory_equal(t.key, key, sizeof(key));
		assert_int_equal(t.lru_head, SESSION_NONE);
		assert_int_equal(t.lru_tail, SESSION_NONE);
		session_table_free(&t);
	}
}

/* insert, lookup, remove */

static void test_session_lookup_finds_nothing_in_empty_table(void **state)
{
	struct session_table t;

	(void)state;
	assert_int_equal(session_table_init(&t, 16, key), 0);
	assert_int_equal(lookup_v4(&t, 1), SESSION_NONE);
	session_table_free(&t);
}

static void test_session_insert_then_lookup_returns_same_index(void **state)
{
	struct session_table t;
	union etr_sockaddr sa;
	uint32_t idx;

	(void)state;
	assert_int_equal(session_table_init(&t, 16, key), 0);
	sa_v4(&sa, "192.0.2.1", 27960);
	idx = session_insert(&t, &sa, 42, 5 * SEC);
	assert_int_not_equal(idx, SESSION_NONE);
	assert_true(idx < 16);
	assert_int_equal(session_lookup(&t, &sa), idx);
	assert_int_equal(t.active, 1);
	assert_true(t.s[idx].live);
	assert_int_equal(t.s[idx].fd, 42);
	assert_int_equal(t.s[idx].last_active, 5 * SEC);
	assert_int_equal(t.s[idx].opened, 5 * SEC);
	assert_int_equal(t.s[idx].pkts_up, 0);
	assert_int_equal(t.s[idx].pkts_down, 0);
	assert_int_equal(t.s[idx].queued, 0);
	assert_true(addr_equal(&t.s[idx].client, &sa));

	/* Same address, other port: a different client. */
	sa_v4(&sa, "192.0.2.1", 27961);
	assert_int_equal(session_lookup(&t, &sa), SESSION_NONE);
	session_table_free(&t);
}

static void test_session_remove_returns_fd_and_forgets_client(void **state)
{
	struct session_table t;
	union etr_sockaddr sa;
	uint32_t idx;

	(void)state;
	assert_int_equal(session_table_init(&t, 16, key), 0);
	sa_v4(&sa, "192.0.2.1", 27960);
	idx = session_insert(&t, &sa, 42, 5 * SEC);
	assert_int_not_equal(idx, SESSION_NONE);
	assert_int_equal(session_remove(&t, idx), 42);
	assert_int_equal(session_lookup(&t, &sa), SESSION_NONE);
	assert_int_equal(t.active, 0);
	assert_false(t.s[idx].live);
	assert_int_equal(t.s[idx].fd, -1);
	assert_int_equal(session_next_expiry(&t, 10 * SEC), UINT64_MAX);
	assert_int_equal(session_expired(&t, 1000 * SEC, 10 * SEC), SESSION_NONE);
	session_table_free(&t);
}

/* What the known hook was told: +1 on, -1 off, for the last client. */
static int known_net;
static unsigned known_calls;

static void known_hook(void *arg, const union etr_sockaddr *client, bool on)
{
	(void)arg;
	(void)client;
	known_net += on ? 1 : -1;
	known_calls++;
}

static void test_session_known_hook_hears_the_first_assure_and_an_assured_end(void **state)
{
	struct session_table t;
	union etr_sockaddr a, b;
	uint32_t ia, ib;

	(void)state;
	assert_int_equal(session_table_init(&t, 16, key), 0);
	t.known = known_hook;
	known_net = 0;
	known_calls = 0;
	sa_v4(&a, "192.0.2.1", 27960);
	sa_v4(&b, "192.0.2.2", 27960);
	ia = session_insert(&t, &a, 42, 5 * SEC);
	ib = session_insert(&t, &b, 43, 5 * SEC);
	session_assure(&t, ia);
	session_assure(&t, ia); /* once only */
	assert_int_equal(known_calls, 1);
	assert_int_equal(known_net, 1);
	/* An unassured session's end is not told; an assured one's is. */
	session_remove(&t, ib);
	assert_int_equal(known_calls, 1);
	session_remove(&t, ia);
	assert_int_equal(known_calls, 2);
	assert_int_equal(known_net, 0);
	session_table_free(&t);
}

static void test_session_distinct_clients_get_distinct_indexes(void **state)
{
	struct session_table t;
	uint32_t idx[32];
	uint32_t i, j;

	(void)state;
	assert_int_equal(session_table_init(&t, 32, key), 0);
	for (i = 0; i < 32; i++) {
		idx[i] = insert_v4(&t, i, SEC);
		assert_int_not_equal(idx[i], SESSION_NONE);
		assert_true(idx[i] < 32);
		for (j = 0; j < i; j++)
			assert_int_not_equal(idx[i], idx[j]);
	}
	for (i = 0; i < 32; i++) {
		assert_int_equal(lookup_v4(&t, i), idx[i]);
		assert_int_equal(t.s[idx[i]].fd, (int)(100 + i));
	}
	assert_int_equal(t.active, 32);
	session_table_free(&t);
}

static void test_session_ipv4_and_ipv6_keys_sharing_bytes_do_not_collide(void **state)
{
	struct session_table t;
	union etr_sockaddr v4, v6compat, v6mapped, v6front;
	uint32_t i4, i6;

	(void)state;
	assert_int_equal(session_table_init(&t, 16, key), 0);
	sa_v4(&v4, "1.2.3.4", 27960);
	sa_v6(&v6compat, "::1.2.3.4", 27960);
	sa_v6(&v6mapped, "::ffff:1.2.3.4", 27960);
	sa_v6(&v6front, "102:304::", 27960);

	i4 = session_insert(&t, &v4, 10, SEC);
	assert_int_not_equal(i4, SESSION_NONE);
	assert_int_equal(session_lookup(&t, &v6compat), SESSION_NONE);
	assert_int_equal(session_lookup(&t, &v6mapped), SESSION_NONE);
	assert_int_equal(session_lookup(&t, &v6front), SESSION_NONE);

	i6 = session_insert(&t, &v6compat, 11, SEC);
	assert_int_not_equal(i6, SESSION_NONE);
	assert_int_not_equal(i6, i4);
	assert_int_equal(session_lookup(&t, &v4), i4);
	assert_int_equal(session_lookup(&t, &v6compat), i6);
	assert_int_equal(session_lookup(&t, &v6mapped), SESSION_NONE);

	assert_int_equal(session_remove(&t, i4), 10);
	assert_int_equal(session_lookup(&t, &v4), SESSION_NONE);
	assert_int_equal(session_lookup(&t, &v6compat), i6);
	session_table_free(&t);
}

/* Capacity */

static void test_session_insert_into_full_table_returns_none(void **state)
{
	struct session_table t;
	uint32_t i, idx;

	(void)state;
	assert_int_equal(session_table_init(&t, 8, key), 0);
	for (i = 0; i < 8; i++)
		assert_int_not_equal(insert_v4(&t, i, SEC), SESSION_NONE);
	assert_int_equal(t.active, 8);
	assert_int_equal(insert_v4(&t, 8, SEC), SESSION_NONE);
	assert_int_equal(t.active, 8);
	assert_int_equal(lookup_v4(&t, 8), SESSION_NONE);
	for (i = 0; i < 8; i++)
		assert_int_not_equal(lookup_v4(&t, i), SESSION_NONE);

	/* A freed place takes the newcomer. */
	idx = lookup_v4(&t, 3);
	assert_int_equal(session_remove(&t, idx), 103);
	assert_int_equal(insert_v4(&t, 8, SEC), idx);
	assert_int_equal(lookup_v4(&t, 8), idx);
	assert_int_equal(insert_v4(&t, 9, SEC), SESSION_NONE);
	session_table_free(&t);
}

static void test_session_table_of_one_holds_exactly_one(void **state)
{
	struct session_table t;

	(void)state;
	assert_int_equal(session_table_init(&t, 1, key), 0);
	assert_int_equal(insert_v4(&t, 1, SEC), 0);
	assert_int_equal(insert_v4(&t, 2, SEC), SESSION_NONE);
	assert_int_equal(lookup_v4(&t, 1), 0);
	session_table_free(&t);
}

/* Probing after deletions */

static void test_session_probe_chains_survive_deleting_every_other_key(void **state)
{
	enum { N = 1000 };
	static uint32_t idx[N];
	struct session_table t;
	uint32_t i;

	(void)state;
	assert_int_equal(session_table_init(&t, N, key), 0);
	for (i = 0; i < N; i++) {
		idx[i] = insert_v4(&t, i, SEC + i);
		assert_int_not_equal(idx[i], SESSION_NONE);
	}
	assert_int_equal(insert_v4(&t, N, SEC), SESSION_NONE);

	for (i = 0; i < N; i += 2)
		assert_int_equal(session_remove(&t, idx[i]), (int)(100 + i));
	assert_int_equal(t.active, N / 2);

	for (i = 0; i < N; i++) {
		if (i % 2)
			assert_int_equal(lookup_v4(&t, i), idx[i]);
		else
			assert_int_equal(lookup_v4(&t, i), SESSION_NONE);
	}

	for (i = 0; i < N; i += 2) {
		idx[i] = insert_v4(&t, i, 2 * SEC);
		assert_int_not_equal(idx[i], SESSION_NONE);
	}
	assert_int_equal(t.active, N);
	for (i = 0; i < N; i++) {
		assert_int_equal(lookup_v4(&t, i), idx[i]);
		assert_int_equal(t.s[idx[i]].fd, (int)(100 + i));
	}
	session_table_free(&t);
}

static void test_session_small_table_survives_deletions_amid_collisions(void **state)
{
	struct session_table t;
	uint32_t idx[8];
	uint32_t i;

	(void)state;
	/* 8 keys in a handful of slots: chains are certain. */
	assert_int_equal(session_table_init(&t, 8, key), 0);
	for (i = 0; i < 8; i++) {
		idx[i] = insert_v4(&t, i, SEC);
		assert_int_not_equal(idx[i], SESSION_NONE);
	}
	for (i = 0; i < 8; i += 2)
		assert_int_equal(session_remove(&t, idx[i]), (int)(100 + i));
	for (i = 1; i < 8; i += 2)
		assert_int_equal(lookup_v4(&t, i), idx[i]);
	for (i = 0; i < 8; i += 2)
		assert_int_equal(lookup_v4(&t, i), SESSION_NONE);
	for (i = 0; i < 8; i += 2) {
		idx[i] = insert_v4(&t, i, SEC);
		assert_int_not_equal(idx[i], SESSION_NONE);
	}
	for (i = 0; i < 8; i++)
		assert_int_equal(lookup_v4(&t, i), idx[i]);
	assert_int_equal(t.active, 8);
	session_table_free(&t);
}

static void test_session_churn_through_many_clients_keeps_lookups_exact(void **state)
{
	enum { CAP = 8, ROUNDS = 20000 };
	struct session_table t;
	uint32_t live[CAP];
	uint32_t i, j, idx;

	(void)state;
	/* Endless insert/remove with a full table: deleted-slot markers must
	 * not pile up until a lookup of an absent key never terminates. */
	assert_int_equal(session_table_init(&t, CAP, key), 0);
	for (j = 0; j < CAP; j++) {
		live[j] = j;
		assert_int_not_equal(insert_v4(&t, j, SEC), SESSION_NONE);
	}
	for (i = CAP; i < ROUNDS; i++) {
		j = i % CAP;
		idx = lookup_v4(&t, live[j]);
		assert_int_not_equal(idx, SESSION_NONE);
		assert_int_equal(session_remove(&t, idx), (int)(100 + live[j]));
		assert_int_equal(lookup_v4(&t, live[j]), SESSION_NONE);
		assert_int_equal(lookup_v4(&t, i + 1000000), SESSION_NONE);
		live[j] = i;
		assert_int_not_equal(insert_v4(&t, i, SEC), SESSION_NONE);
	}
	for (j = 0; j < CAP; j++)
		assert_int_not_equal(lookup_v4(&t, live[j]), SESSION_NONE);
	assert_int_equal(t.active, CAP);
	session_table_free(&t);
}

/* LRU and expiry */

static void test_session_next_expiry_is_none_for_empty_table(void **state)
{
	struct session_table t;

	(void)state;
	assert_int_equal(session_table_init(&t, 4, key), 0);
	assert_int_equal(session_next_expiry(&t, 120 * SEC), UINT64_MAX);
	assert_int_equal(session_expired(&t, UINT64_MAX - 1, 120 * SEC), SESSION_NONE);
	session_table_free(&t);
}

static void test_session_expires_after_idle_timeout(void **state)
{
	const uint64_t timeout = 120 * SEC;
	struct session_table t;
	uint32_t a;

	(void)state;
	assert_int_equal(session_table_init(&t, 4, key), 0);
	a = insert_v4(&t, 1, 1000 * SEC);
	assert_int_not_equal(a, SESSION_NONE);

	assert_in_range(session_next_expiry(&t, timeout), 1000 * SEC + timeout,
			1000 * SEC + timeout + 1);
	assert_int_equal(session_expired(&t, 1000 * SEC, timeout), SESSION_NONE);
	assert_int_equal(session_expired(&t, 1000 * SEC + timeout - 1, timeout), SESSION_NONE);
	assert_int_equal(session_expired(&t, 1000 * SEC + timeout + 1, timeout), a);
	/* Asking does not remove it. */
	assert_int_equal(session_expired(&t, 1000 * SEC + timeout + 1, timeout), a);
	assert_int_equal(lookup_v4(&t, 1), a);
	session_table_free(&t);
}

static void test_session_does_not_expire_when_now_is_below_timeout(void **state)
{
	struct session_table t;

	(void)state;
	/* now - timeout would wrap around below zero. */
	assert_int_equal(session_table_init(&t, 4, key), 0);
	assert_int_not_equal(insert_v4(&t, 1, 5 * SEC), SESSION_NONE);
	assert_int_equal(session_expired(&t, 6 * SEC, 120 * SEC), SESSION_NONE);
	assert_int_equal(session_expired(&t, 0, 120 * SEC), SESSION_NONE);
	session_table_free(&t);
}

static void test_session_expires_in_lru_order(void **state)
{
	const uint64_t timeout = 10 * SEC;
	struct session_table t;
	uint32_t a, b, c, idx;

	(void)state;
	assert_int_equal(session_table_init(&t, 8, key), 0);
	a = insert_v4(&t, 1, 100 * SEC);
	b = insert_v4(&t, 2, 200 * SEC);
	c = insert_v4(&t, 3, 300 * SEC);
	assert_int_equal(t.lru_head, a);
	assert_int_equal(t.lru_tail, c);
	assert_int_equal(t.s[a].prev, SESSION_NONE);
	assert_int_equal(t.s[a].next, b);
	assert_int_equal(t.s[b].prev, a);
	assert_int_equal(t.s[b].next, c);
	assert_int_equal(t.s[c].prev, b);
	assert_int_equal(t.s[c].next, SESSION_NONE);

	assert_in_range(session_next_expiry(&t, timeout), 110 * SEC, 110 * SEC + 1);

	/* At 305 s: a and b are idle for more than 10 s, c for 5 s. */
	idx = session_expired(&t, 305 * SEC, timeout);
	assert_int_equal(idx, a);
	assert_int_equal(session_remove(&t, idx), 101);
	assert_in_range(session_next_expiry(&t, timeout), 210 * SEC, 210 * SEC + 1);
	idx = session_expired(&t, 305 * SEC, timeout);
	assert_int_equal(idx, b);
	assert_int_equal(session_remove(&t, idx), 102);
	assert_in_range(session_next_expiry(&t, timeout), 310 * SEC, 310 * SEC + 1);
	assert_int_equal(session_expired(&t, 305 * SEC, timeout), SESSION_NONE);
	assert_int_equal(t.lru_head, c);
	assert_int_equal(t.lru_tail, c);
	assert_int_equal(t.s[c].prev, SESSION_NONE);
	assert_int_equal(t.s[c].next, SESSION_NONE);
	session_table_free(&t);
}

static void test_session_touch_moves_to_lru_tail(void **state)
{
	const uint64_t timeout = 10 * SEC;
	struct session_table t;
	uint32_t a, b, c;

	(void)state;
	assert_int_equal(session_table_init(&t, 8, key), 0);
	a = insert_v4(&t, 1, 100 * SEC);
	b = insert_v4(&t, 2, 200 * SEC);
	c = insert_v4(&t, 3, 300 * SEC);

	session_touch(&t, a, 400 * SEC);
	assert_int_equal(t.s[a].last_active, 400 * SEC);
	assert_int_equal(t.s[a].opened, 100 * SEC);
	assert_int_equal(t.lru_head, b);
	assert_int_equal(t.lru_tail, a);
	assert_int_equal(t.s[b].prev, SESSION_NONE);
	assert_int_equal(t.s[c].next, a);
	assert_int_equal(t.s[a].prev, c);
	assert_int_equal(t.s[a].next, SESSION_NONE);
	assert_in_range(session_next_expiry(&t, timeout), 210 * SEC, 210 * SEC + 1);

	/* Touch the middle one. */
	session_touch(&t, c, 500 * SEC);
	assert_int_equal(t.lru_head, b);
	assert_int_equal(t.lru_tail, c);
	assert_int_equal(t.s[b].next, a);
	assert_int_equal(t.s[a].next, c);
	assert_int_equal(t.s[c].prev, a);

	/* Touch the tail: nothing moves. */
	session_touch(&t, c, 600 * SEC);
	assert_int_equal(t.lru_tail, c);
	assert_int_equal(t.s[c].last_active, 600 * SEC);
	assert_int_equal(t.s[a].next, c);

	/* At 605 s: b (200 s) then a (400 s) are idle, c (600 s) is not. */
	assert_int_equal(session_expired(&t, 605 * SEC, timeout), b);
	assert_int_equal(session_remove(&t, b), 102);
	assert_int_equal(t.lru_head, a);
	assert_in_range(session_next_expiry(&t, timeout), 410 * SEC, 410 * SEC + 1);
	assert_int_equal(session_expired(&t, 605 * SEC, timeout), a);
	assert_int_equal(session_remove(&t, a), 101);
	assert_int_equal(session_expired(&t, 605 * SEC, timeout), SESSION_NONE);
	assert_in_range(session_next_expiry(&t, timeout), 610 * SEC, 610 * SEC + 1);
	session_table_free(&t);
}

static void test_session_remove_from_middle_keeps_lru_linked(void **state)
{
	struct session_table t;
	uint32_t a, b, c;

	(void)state;
	assert_int_equal(session_table_init(&t, 8, key), 0);
	a = insert_v4(&t, 1, 100 * SEC);
	b = insert_v4(&t, 2, 200 * SEC);
	c = insert_v4(&t, 3, 300 * SEC);
	assert_int_equal(session_remove(&t, b), 102);
	assert_int_equal(t.s[a].next, c);
	assert_int_equal(t.s[c].prev, a);
	assert_int_equal(session_remove(&t, c), 103);
	assert_int_equal(t.lru_tail, a);
	assert_int_equal(t.s[a].next, SESSION_NONE);
	assert_int_equal(session_remove(&t, a), 101);
	assert_int_equal(t.lru_head, SESSION_NONE);
	assert_int_equal(t.lru_tail, SESSION_NONE);
	assert_int_equal(session_next_expiry(&t, SEC), UINT64_MAX);
	session_table_free(&t);
}

/* Generations and refs */

static void test_session_deref_of_live_ref_returns_index(void **state)
{
	struct session_table t;
	uint32_t a, b;

	(void)state;
	assert_int_equal(session_table_init(&t, 8, key), 0);
	a = insert_v4(&t, 1, SEC);
	b = insert_v4(&t, 2, SEC);
	assert_int_equal(session_deref(&t, session_ref(&t, a)), a);
	assert_int_equal(session_deref(&t, session_ref(&t, b)), b);
	assert_int_equal(session_ref(&t, a) & SESSION_CAP_MAX, a);
	session_table_free(&t);
}

static void test_session_deref_of_removed_session_returns_none(void **state)
{
	struct session_table t;
	uint32_t a, ref;

	(void)state;
	assert_int_equal(session_table_init(&t, 1, key), 0);
	a = insert_v4(&t, 1, SEC);
	assert_int_equal(a, 0);
	ref = session_ref(&t, a);
	assert_int_equal(session_remove(&t, a), 101);
	assert_int_equal(session_deref(&t, ref), SESSION_NONE);
	session_table_free(&t);
}

static void test_session_reuse_of_freed_slot_bumps_gen_so_old_ref_misses(void **state)
{
	struct session_table t;
	uint32_t a, b, old_ref, new_ref;
	uint16_t old_gen;

	(void)state;
	assert_int_equal(session_table_init(&t, 1, key), 0);
	a = insert_v4(&t, 1, SEC);
	assert_int_equal(a, 0);
	old_ref = session_ref(&t, a);
	old_gen = t.s[a].gen;
	assert_int_equal(session_remove(&t, a), 101);

	b = insert_v4(&t, 2, 2 * SEC);
	assert_int_equal(b, a); /* the only place there is */
	assert_int_not_equal(t.s[b].gen, old_gen);
	new_ref = session_ref(&t, b);
	assert_int_not_equal(new_ref, old_ref);
	assert_int_equal(session_deref(&t, old_ref), SESSION_NONE);
	assert_int_equal(session_deref(&t, new_ref), b);
	session_table_free(&t);
}

static void test_session_refs_stay_distinct_over_many_reuses(void **state)
{
	struct session_table t;
	uint32_t prev_ref, ref, idx;
	uint32_t i;

	(void)state;
	assert_int_equal(session_table_init(&t, 1, key), 0);
	idx = insert_v4(&t, 0, SEC);
	prev_ref = session_ref(&t, idx);
	for (i = 1; i < 5000; i++) {
		assert_int_equal(session_remove(&t, idx), (int)(100 + i - 1));
		idx = insert_v4(&t, i, SEC);
		assert_int_equal(idx, 0);
		ref = session_ref(&t, idx);
		assert_true(ref < (1u << SESSION_REF_BITS));
		assert_int_not_equal(ref, prev_ref);
		assert_int_equal(session_deref(&t, prev_ref), SESSION_NONE);
		assert_int_equal(session_deref(&t, ref), idx);
		prev_ref = ref;
	}
	session_table_free(&t);
}

static void test_session_freed_slot_is_reused_only_after_every_other_free_slot(void **state)
{
	struct session_table t;
	uint32_t first, again;

	(void)state;
	assert_int_equal(session_table_init(&t, 4, key), 0);
	first = insert_v4(&t, 1, 0);
	session_remove(&t, first);
	/* FIFO: the three never-used slots come before the freed one. */
	for (uint32_t i = 2; i < 5; i++)
		assert_int_not_equal(insert_v4(&t, i, 0), first);
	again = insert_v4(&t, 5, 0);
	assert_int_equal(again, first);
	assert_int_equal(insert_v4(&t, 6, 0), SESSION_NONE);
	session_table_free(&t);
}

static void test_session_new_sessions_are_unassured_oldest_first(void **state)
{
	struct session_table t;
	uint32_t a, b;

	(void)state;
	assert_int_equal(session_table_init(&t, 8, key), 0);
	a = insert_v4(&t, 1, 10 * SEC);
	b = insert_v4(&t, 2, 11 * SEC);
	assert_int_equal(t.unassured, 2);
	assert_int_equal(session_oldest_unassured(&t), a);
	session_assure(&t, a);
	session_assure(&t, a); /* twice is harmless */
	assert_int_equal(t.unassured, 1);
	assert_int_equal(session_oldest_unassured(&t), b);
	session_assure(&t, b);
	assert_int_equal(session_oldest_unassured(&t), SESSION_NONE);
	session_table_free(&t);
}

static void test_session_unassured_expire_from_opening_not_activity(void **state)
{
	struct session_table t;
	uint32_t a, b;

	(void)state;
	assert_int_equal(session_table_init(&t, 8, key), 0);
	a = insert_v4(&t, 1, 100 * SEC);
	b = insert_v4(&t, 2, 105 * SEC);
	session_touch(&t, a, 109 * SEC); /* the client talks; no answer yet */
	assert_int_equal(session_unassured_next_expiry(&t, 10 * SEC), 110 * SEC);
	assert_int_equal(session_unassured_expired(&t, 110 * SEC - 1, 10 * SEC), SESSION_NONE);
	assert_int_equal(session_unassured_expired(&t, 110 * SEC, 10 * SEC), a);
	session_assure(&t, a);
	assert_int_equal(session_unassured_expired(&t, 110 * SEC, 10 * SEC), SESSION_NONE);
	assert_int_equal(session_unassured_expired(&t, 115 * SEC, 10 * SEC), b);
	session_remove(&t, b);
	assert_int_equal(t.unassured, 0);
	assert_int_equal(session_unassured_next_expiry(&t, 10 * SEC), UINT64_MAX);
	session_table_free(&t);
}

static void test_session_in_grace_is_skipped_for_eviction(void **state)
{
	struct session_table t;
	uint32_t a, b, c;

	(void)state;
	assert_int_equal(session_table_init(&t, 8, key), 0);
	a = insert_v4(&t, 1, 100 * SEC);
	b = insert_v4(&t, 2, 101 * SEC);
	c = insert_v4(&t, 3, 102 * SEC);
	assert_int_equal(session_evictable(&t, 103 * SEC), a);
	session_grace(&t, a, 108 * SEC); /* a was sent a challengeResponse */
	assert_int_equal(session_evictable(&t, 103 * SEC), b);
	session_grace(&t, b, 106 * SEC);
	assert_int_equal(session_evictable(&t, 103 * SEC), c);
	session_grace(&t, c, 104 * SEC);
	assert_int_equal(session_evictable(&t, 103 * SEC), SESSION_NONE);
	/* grace ends: the oldest out of grace goes first */
	assert_int_equal(session_evictable(&t, 104 * SEC), c);
	assert_int_equal(session_evictable(&t, 106 * SEC), b);
	assert_int_equal(session_evictable(&t, 108 * SEC), a);
	session_table_free(&t);
}

static void test_session_eviction_scan_is_bounded(void **state)
{
	struct session_table t;
	uint32_t last = SESSION_NONE;

	(void)state;
	assert_int_equal(session_table_init(&t, SESSION_EVICT_SCAN + 1, key), 0);
	for (uint32_t i = 0; i < SESSION_EVICT_SCAN; i++)
		session_grace(&t, insert_v4(&t, i, 100 * SEC), 200 * SEC);
	last = insert_v4(&t, SESSION_EVICT_SCAN, 100 * SEC);
	assert_int_not_equal(last, SESSION_NONE);
	/* the one out of grace lies past the scan: refused, not searched for */
	assert_int_equal(session_evictable(&t, 150 * SEC), SESSION_NONE);
	session_table_free(&t);
}

static void test_session_grace_is_for_unassured_sessions_and_never_shortened(void **state)
{
	struct session_table t;
	uint32_t a, b;

	(void)state;
	assert_int_equal(session_table_init(&t, 8, key), 0);
	a = insert_v4(&t, 1, 100 * SEC);
	b = insert_v4(&t, 2, 101 * SEC);
	session_grace(&t, a, 113 * SEC);
	session_grace(&t, a, 112 * SEC); /* an earlier end does not shorten it */
	assert_int_equal(t.s[a].grace_until, 113 * SEC);
	assert_int_equal(session_evictable(&t, 112 * SEC), b);
	/* the unassured timeout still counts from the opening */
	assert_int_equal(session_unassured_next_expiry(&t, 10 * SEC), 110 * SEC);
	assert_int_equal(session_unassured_expired(&t, 110 * SEC, 10 * SEC), a);
	/* the connect was accepted: assured, no grace to give */
	session_assure(&t, b);
	session_grace(&t, b, 200 * SEC);
	assert_int_equal(t.s[b].grace_until, 0);
	session_table_free(&t);
}

static void test_session_ip_count_spans_ports_and_follows_removals(void **state)
{
	struct session_table t;
	union etr_sockaddr a1, a2, b1, m1;
	uint32_t ia1, ia2;

	(void)state;
	assert_int_equal(session_table_init(&t, 8, key), 0);
	sa_v4(&a1, "192.0.2.1", 1000);
	sa_v4(&a2, "192.0.2.1", 2000);
	sa_v4(&b1, "192.0.2.2", 1000);
	sa_v6(&m1, "::ffff:192.0.2.1", 3000);
	assert_int_equal(session_ip_count(&t, &a1), 0);
	ia1 = session_insert(&t, &a1, 10, 0);
	ia2 = session_insert(&t, &a2, 11, 0);
	session_insert(&t, &b1, 12, 0);
	assert_int_equal(session_ip_count(&t, &a1), 2);
	assert_int_equal(session_ip_count(&t, &b1), 1);
	/* The IPv4-mapped form is the same host. */
	assert_int_equal(session_ip_count(&t, &m1), 2);
	session_remove(&t, ia1);
	assert_int_equal(session_ip_count(&t, &a2), 1);
	session_remove(&t, ia2);
	assert_int_equal(session_ip_count(&t, &a1), 0);
	assert_int_equal(session_ip_count(&t, &b1), 1);
	session_table_free(&t);
}

static void test_session_ipv6_clients_count_per_slash_64(void **state)
{
	struct session_table t;
	union etr_sockaddr h1, h2, other, m1, m2;

	(void)state;
	assert_int_equal(session_table_init(&t, 8, key), 0);
	sa_v6(&h1, "2001:db8:1:2::10", 1000);
	sa_v6(&h2, "2001:db8:1:2:ffff:1:2:3", 1000);
	sa_v6(&other, "2001:db8:1:3::10", 1000);
	sa_v6(&m1, "::ffff:192.0.2.1", 1000);
	sa_v6(&m2, "::ffff:192.0.2.2", 1000);
	session_insert(&t, &h1, 10, 0);
	session_insert(&t, &h2, 11, 0);
	session_insert(&t, &m1, 12, 0);
	/* Two addresses of one /64 are one host for the cap... */
	assert_int_equal(session_ip_count(&t, &h1), 2);
	assert_int_equal(session_ip_count(&t, &h2), 2);
	/* ...the next /64 is another... */
	assert_int_equal(session_ip_count(&t, &other), 0);
	/* ...and IPv4, mapped or not, is still counted per address. */
	assert_int_equal(session_ip_count(&t, &m1), 1);
	assert_int_equal(session_ip_count(&t, &m2), 0);
	session_table_free(&t);
}

static void test_session_ip_counts_survive_churn_with_collisions(void **state)
{
	struct session_table t;
	union etr_sockaddr sa;
	uint32_t idx[64];

	(void)state;
	assert_int_equal(session_table_init(&t, 64, key), 0);
	for (uint32_t i = 0; i < 64; i++) {
		char ip[32];
		snprintf(ip, sizeof(ip), "10.0.0.%u", i % 16);
		sa_v4(&sa, ip, (uint16_t)(1000 + i));
		idx[i] = session_insert(&t, &sa, (int)i, 0);
	}
	for (uint32_t i = 0; i < 64; i += 2)
		session_remove(&t, idx[i]);
	for (uint32_t i = 0; i < 16; i++) {
		char ip[32];
		snprintf(ip, sizeof(ip), "10.0.0.%u", i);
		sa_v4(&sa, ip, 1);
		assert_int_equal(session_ip_count(&t, &sa), i % 2 ? 4 : 0);
	}
	session_table_free(&t);
}

static void test_session_deref_rejects_out_of_range_index(void **state)
{
	struct session_table t;

	(void)state;
	assert_int_equal(session_table_init(&t, 4, key), 0);
	assert_int_not_equal(insert_v4(&t, 1, SEC), SESSION_NONE);
	assert_int_equal(session_deref(&t, 4), SESSION_NONE);
	assert_int_equal(session_deref(&t, SESSION_CAP_MAX), SESSION_NONE);
	session_table_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_session_table_init_rejects_zero_capacity),
	    cmocka_unit_test(test_session_table_init_rejects_capacity_above_max),
	    cmocka_unit_test(
		test_session_table_init_sizes_slots_to_a_power_of_two_at_least_twice_cap),
	    cmocka_unit_test(test_session_lookup_finds_nothing_in_empty_table),
	    cmocka_unit_test(test_session_insert_then_lookup_returns_same_index),
	    cmocka_unit_test(test_session_remove_returns_fd_and_forgets_client),
	    cmocka_unit_test(test_session_known_hook_hears_the_first_assure_and_an_assured_end),
	    cmocka_unit_test(test_session_distinct_clients_get_distinct_indexes),
	    cmocka_unit_test(test_session_ipv4_and_ipv6_keys_sharing_bytes_do_not_collide),
	    cmocka_unit_test(test_session_insert_into_full_table_returns_none),
	    cmocka_unit_test(test_session_table_of_one_holds_exactly_one),
	    cmocka_unit_test(test_session_probe_chains_survive_deleting_every_other_key),
	    cmocka_unit_test(test_session_small_table_survives_deletions_amid_collisions),
	    cmocka_unit_test(test_session_churn_through_many_clients_keeps_lookups_exact),
	    cmocka_unit_test(test_session_next_expiry_is_none_for_empty_table),
	    cmocka_unit_test(test_session_expires_after_idle_timeout),
	    cmocka_unit_test(test_session_does_not_expire_when_now_is_below_timeout),
	    cmocka_unit_test(test_session_expires_in_lru_order),
	    cmocka_unit_test(test_session_touch_moves_to_lru_tail),
	    cmocka_unit_test(test_session_remove_from_middle_keeps_lru_linked),
	    cmocka_unit_test(test_session_deref_of_live_ref_returns_index),
	    cmocka_unit_test(test_session_deref_of_removed_session_returns_none),
	    cmocka_unit_test(test_session_reuse_of_freed_slot_bumps_gen_so_old_ref_misses),
	    cmocka_unit_test(test_session_refs_stay_distinct_over_many_reuses),
	    cmocka_unit_test(test_session_freed_slot_is_reused_only_after_every_other_free_slot),
	    cmocka_unit_test(test_session_new_sessions_are_unassured_oldest_first),
	    cmocka_unit_test(test_session_unassured_expire_from_opening_not_activity),
	    cmocka_unit_test(test_session_in_grace_is_skipped_for_eviction),
	    cmocka_unit_test(test_session_eviction_scan_is_bounded),
	    cmocka_unit_test(test_session_grace_is_for_unassured_sessions_and_never_shortened),
	    cmocka_unit_test(test_session_ip_count_spans_ports_and_follows_removals),
	    cmocka_unit_test(test_session_ipv6_clients_count_per_slash_64),
	    cmocka_unit_test(test_session_ip_counts_survive_churn_with_collisions),
	    cmocka_unit_test(test_session_deref_rejects_out_of_range_index),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
