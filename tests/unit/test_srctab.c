/* SPDX-License-Identifier: ISC */
/* Unit tests for the per-source table (src/core/srctab.c): caps at each level,
 * the heaviest source's oldest member, and the work each step costs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "srctab.h"
#include "unit_util.h"

/* An IPv6 source: 2001:db8:<site>:<subnet>::<host>, port 1000. */
static union etr_sockaddr v6(unsigned site, unsigned subnet, unsigned host)
{
	char b[80];

	snprintf(b, sizeof(b), "[2001:db8:%x:%x::%x]:1000", site, subnet, host);
	return sa(b);
}

static void test_srctab_caps_an_ipv4_address_and_its_mapped_form(void **state)
{
	struct srctab t;
	union etr_sockaddr a = sa("192.0.2.1:1"), mapped = sa("[::ffff:192.0.2.1]:2");
	union etr_sockaddr b = sa("192.0.2.2:1");

	(void)state;
	assert_int_equal(srctab_init(&t, 64, 2, 0), 0);
	assert_true(srctab_take(&t, &a));
	assert_true(srctab_take(&t, &mapped));
	assert_false(srctab_take(&t, &a));
	assert_true(srctab_take(&t, &b));
	assert_int_equal(srctab_count(&t, &a, SRCTAB_ADDR), 2);
	srctab_put(&t, &mapped);
	assert_true(srctab_take(&t, &a));
	srctab_put(&t, &a);
	srctab_put(&t, &a);
	srctab_put(&t, &b);
	assert_int_equal(srctab_count(&t, &a, SRCTAB_ADDR), 0);
	assert_int_equal(t.used, 0);
	srctab_free(&t);
}

static void test_srctab_caps_an_ipv6_64_56_and_48(void **state)
{
	struct srctab t;
	union etr_sockaddr a;
	unsigned ok = 0;

	(void)state;
	assert_int_equal(srctab_init(&t, 1000, 2, 0), 0);
	/* A /64: 2, whatever the host part. */
	a = v6(1, 0, 1);
	assert_true(srctab_take(&t, &a));
	a = v6(1, 0, 2);
	assert_true(srctab_take(&t, &a));
	assert_false(srctab_take(&t, &a));
	/* The /56 2001:db8:1:0::/56 (subnets 0..ff): 4 * 2 in all. */
	for (unsigned s = 1; s < 40; s++) {
		a = v6(1, s, 1);
		ok += srctab_take(&t, &a);
	}
	assert_int_equal(ok, 2 * SRCTAB_P56_MULT - 2);
	assert_int_equal(srctab_count(&t, &a, SRCTAB_P56), 2 * SRCTAB_P56_MULT);
	/* A refused take counted nothing at any level. */
	assert_int_equal(srctab_count(&t, &a, SRCTAB_ADDR), 0);
	assert_int_equal(srctab_count(&t, &a, SRCTAB_P48), 2 * SRCTAB_P56_MULT);
	/* The /48 2001:db8:1::/48: 8 * 2 over its /56s (subnet s << 8). */
	for (unsigned s = 1; s < 40; s++) {
		a = v6(1, s << 8, 1);
		ok += srctab_take(&t, &a);
	}
	assert_int_equal(ok, 2 * SRCTAB_P48_MULT - 2);
	assert_int_equal(srctab_count(&t, &a, SRCTAB_P48), 2 * SRCTAB_P48_MULT);
	/* Another site is a stranger to it. */
	a = v6(2, 0, 1);
	assert_true(srctab_take(&t, &a));
	/* One given back in the /48 lets one more in, from any /64 of it. */
	a = v6(1, 0, 7);
	srctab_put(&t, &a);
	a = v6(1, 0x7700, 9);
	assert_true(srctab_take(&t, &a));
	assert_false(srctab_take(&t, &a));
	srctab_free(&t);
}

static void test_srctab_without_a_cap_counts_only(void **state)
{
	struct srctab t;
	union etr_sockaddr a = v6(3, 0, 1);

	(void)state;
	assert_int_equal(srctab_init(&t, 300, 0, 0), 0);
	for (unsigned i = 0; i < 300; i++)
		assert_true(srctab_take(&t, &a));
	assert_int_equal(srctab_count(&t, &a, SRCTAB_P48), 300);
	srctab_free(&t);
}

/* Room for sources connections (three entries each for IPv6): past it a
 * take is refused, never a loop over a full table. */
static void test_srctab_full_refuses(void **state)
{
	struct srctab t;
	union etr_sockaddr a;
	unsigned ok = 0;

	(void)state;
	assert_int_equal(srctab_init(&t, 10, 0, 0), 0);
	for (unsigned i = 0; i < 100; i++) {
		a = v6(i, 0, 1);
		ok += srctab_take(&t, &a);
	}
	assert_true(ok >= 10 && ok < 100);
	a = v6(0, 0, 1);
	srctab_put(&t, &a);
	a = v6(500, 0, 1);
	assert_true(srctab_take(&t, &a));
	srctab_free(&t);
}

/* Two levels of one take may find the same empty slot (likely in a small
 * table): each gets an entry of its own. Over many keys, so over many
 * placements. */
static void test_srctab_counts_each_level_once(void **state)
{
	(void)state;
	for (unsigned r = 0; r < 200; r++) {
		struct srctab t;
		union etr_sockaddr a;

		assert_int_equal(srctab_init(&t, 10, 0, 0), 0);
		for (unsigned i = 0; i < 10; i++) {
			a = v6(i, 0, 1);
			assert_true(srctab_take(&t, &a));
			for (unsigned lvl = 0; lvl < SRCTAB_LEVELS; lvl++)
				assert_int_equal(srctab_count(&t, &a, lvl), 1);
		}
		assert_int_equal(t.used, 30);
		srctab_free(&t);
	}
}

static void test_srctab_key_differs_per_table(void **state)
{
	struct srctab a, b;

	(void)state;
	assert_int_equal(srctab_init(&a, 4, 1, 0), 0);
	assert_int_equal(srctab_init(&b, 4, 1, 0), 0);
	assert_memory_not_equal(a.key, b.key, sizeof(a.key));
	srctab_free(&a);
	srctab_free(&b);
}

/* 10000 sources whose keys an unkeyed FNV hash would cluster (one /48's
 * /64s, and IPv4 addresses counting up) keep every probe short. */
static void test_srctab_probes_stay_short(void **state)
{
	struct srctab t;
	union etr_sockaddr a;

	(void)state;
	assert_int_equal(srctab_init(&t, 20000, 0, 0), 0);
	for (unsigned i = 0; i < 10000; i++) {
		a = v6(9, i, 1);
		assert_true(srctab_take(&t, &a));
	}
	for (unsigned i = 0; i < 10000; i++) {
		char b[40];

		snprintf(b, sizeof(b), "10.%u.%u.1:5", i >> 8, i & 0xff);
		a = sa(b);
		assert_true(srctab_take(&t, &a));
	}
	/* 10000 /64s, 40 /56s, one /48, 10000 IPv4: 20041 entries in 131072
	 * slots. */
	assert_int_equal(t.used, 20041);
	assert_true(t.probe_max <= 24);
	assert_true(t.work / (10000 * 4) < 4);
	for (unsigned i = 0; i < 10000; i++) {
		a = v6(9, i, 1);
		srctab_put(&t, &a);
	}
	assert_int_equal(t.used, 10000);
	srctab_free(&t);
}

/* who: one letter an address, oldest first; returns the position of the
 * member that gives way. */
static uint32_t pick(const char *who)
{
	struct srctab t;
	uint32_t n = (uint32_t)strlen(who), v;

	assert_int_equal(srctab_init(&t, 64, 0, 64), 0);
	for (uint32_t i = 0; i < n; i++) {
		char b[40];
		union etr_sockaddr a;

		snprintf(b, sizeof(b), "198.51.100.%u:%u", (unsigned)who[i], 1000 + i);
		a = sa(b);
		assert_true(srctab_join(&t, i, &a));
	}
	v = srctab_heaviest(&t);
	srctab_free(&t);
	return v;
}

static void test_srctab_heaviest_is_the_oldest_of_the_address_holding_the_most(void **state)
{
	(void)state;
	assert_int_equal(pick(""), SRCTAB_NONE);
	assert_int_equal(pick("a"), 0);
	/* b holds 3: its oldest, at 1. */
	assert_int_equal(pick("abacbdb"), 1);
	/* A real client's one connection, the oldest, is not taken. */
	assert_int_equal(pick("rxxyyyx"), 1);
	/* Ties: the address whose oldest is the oldest. */
	assert_int_equal(pick("cabbac"), 0);
	assert_int_equal(pick("xabab"), 1);
	/* Every address with one: the oldest connection. */
	assert_int_equal(pick("abcdefgh"), 0);
}

/* Leaves, in any order, keep the choice right: the count falls and the
 * oldest moves on. */
static void test_srctab_heaviest_follows_leaves(void **state)
{
	struct srctab t;
	union etr_sockaddr x = sa("192.0.2.7:1"), y = sa("192.0.2.8:1"), z = v6(4, 1, 1);

	(void)state;
	assert_int_equal(srctab_init(&t, 16, 0, 16), 0);
	assert_true(srctab_join(&t, 0, &x));
	assert_true(srctab_join(&t, 1, &y));
	assert_true(srctab_join(&t, 2, &y));
	assert_true(srctab_join(&t, 3, &x));
	assert_true(srctab_join(&t, 4, &z));
	assert_true(srctab_join(&t, 5, &z));
	assert_false(srctab_join(&t, 5, &z)); /* already in */
	/* Three with two each: x's oldest is the oldest. */
	assert_int_equal(srctab_heaviest(&t), 0);
	srctab_leave(&t, 0);
	/* x holds one now: y's (1) is older than z's (4). */
	assert_int_equal(srctab_heaviest(&t), 1);
	srctab_leave(&t, 1);
	assert_int_equal(srctab_heaviest(&t), 4);
	assert_true(srctab_join(&t, 6, &x));
	/* x's 3 is older than z's 4. */
	assert_int_equal(srctab_heaviest(&t), 3);
	srctab_leave(&t, 5);
	srctab_leave(&t, 4);
	srctab_leave(&t, 4);
	assert_int_equal(srctab_heaviest(&t), 3);
	srctab_leave(&t, 3);
	assert_int_equal(srctab_heaviest(&t), 2);
	srctab_leave(&t, 2);
	srctab_leave(&t, 6);
	assert_int_equal(srctab_heaviest(&t), SRCTAB_NONE);
	assert_int_equal(t.used, 0);
	assert_int_equal(t.nheap, 0);
	srctab_free(&t);
}

/* Random joins and leaves over a few sources (IPv4 and IPv6 /64s, several
 * hosts each): the choice is always the one a scan of every member makes. */
static void test_srctab_heaviest_matches_a_scan(void **state)
{
	enum { N = 64, SOURCES = 9 };
	struct srctab t;
	union etr_sockaddr addr[N];
	unsigned src[N];
	uint64_t seq[N], next = 0;
	bool in[N] = {false};
	uint32_t rnd = 12345;

	(void)state;
	assert_int_equal(srctab_init(&t, N, 0, N), 0);
	for (unsigned step = 0; step < 20000; step++) {
		uint32_t id, count[SOURCES] = {0}, want = SRCTAB_NONE;
		uint64_t oldest[SOURCES];

		rnd = rnd * 1103515245u + 12345u;
		id = (rnd >> 8) % N;
		if (in[id]) {
			srctab_leave(&t, id);
			in[id] = false;
		} else {
			char b[64];

			rnd = rnd * 1103515245u + 12345u;
			src[id] = (rnd >> 8) % SOURCES;
			if (src[id] < 4)
				snprintf(b, sizeof(b), "192.0.2.%u:%u", src[id], 1000 + id);
			else
				snprintf(b, sizeof(b), "[2001:db8:7:%x::%x]:1", src[id], id);
			addr[id] = sa(b);
			assert_true(srctab_join(&t, id, &addr[id]));
			in[id] = true;
			seq[id] = next++;
		}
		for (unsigned k = 0; k < SOURCES; k++)
			oldest[k] = UINT64_MAX;
		for (uint32_t m = 0; m < N; m++) {
			if (!in[m])
				continue;
			count[src[m]]++;
			if (seq[m] < oldest[src[m]])
				oldest[src[m]] = seq[m];
		}
		for (uint32_t m = 0; m < N; m++) {
			unsigned k = src[m], w;

			if (!in[m] || seq[m] != oldest[k])
				continue;
			if (want == SRCTAB_NONE) {
				want = m;
				continue;
			}
			w = src[want];
			if (count[k] > count[w] || (count[k] == count[w] && oldest[k] < oldest[w]))
				want = m;
		}
		assert_int_equal(srctab_heaviest(&t), want);
	}
	srctab_free(&t);
}

/* The max-preread churn: the table full of members, each event evicts the
 * heaviest's oldest and a newcomer joins. The work of one event (probes
 * and heap steps) does not grow with the members: about the same at 100
 * and at 10000 (the old rebuild was linear, and quadratic on colliding
 * keys). */
static uint64_t churn_work(uint32_t n)
{
	struct srctab t;
	uint64_t before;
	union etr_sockaddr a;

	assert_int_equal(srctab_init(&t, n, 0, n), 0);
	for (uint32_t i = 0; i < n; i++) {
		/* Many /64s of one /48 and a few heavy IPv4 addresses. */
		if (i % 3)
			a = v6(5, i, 1);
		else
			a = sa(i % 2 ? "192.0.2.1:1" : "192.0.2.2:1");
		assert_true(srctab_join(&t, i, &a));
	}
	before = t.work;
	for (uint32_t k = 0; k < 1000; k++) {
		uint32_t v = srctab_heaviest(&t);

		assert_true(v != SRCTAB_NONE);
		srctab_leave(&t, v);
		a = v6(6, k, 1);
		assert_true(srctab_join(&t, v, &a));
	}
	before = t.work - before;
	srctab_free(&t);
	return before / 1000;
}

static void test_srctab_eviction_work_stays_flat(void **state)
{
	uint64_t small, big;

	(void)state;
	small = churn_work(100);
	big = churn_work(10000);
	assert_true(big < 64);
	assert_true(big <= 2 * small + 16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_srctab_caps_an_ipv4_address_and_its_mapped_form),
	    cmocka_unit_test(test_srctab_caps_an_ipv6_64_56_and_48),
	    cmocka_unit_test(test_srctab_without_a_cap_counts_only),
	    cmocka_unit_test(test_srctab_full_refuses),
	    cmocka_unit_test(test_srctab_counts_each_level_once),
	    cmocka_unit_test(test_srctab_key_differs_per_table),
	    cmocka_unit_test(test_srctab_probes_stay_short),
	    cmocka_unit_test(test_srctab_heaviest_is_the_oldest_of_the_address_holding_the_most),
	    cmocka_unit_test(test_srctab_heaviest_follows_leaves),
	    cmocka_unit_test(test_srctab_heaviest_matches_a_scan),
	    cmocka_unit_test(test_srctab_eviction_work_stays_flat),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
