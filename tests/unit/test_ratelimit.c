/* SPDX-License-Identifier: ISC */
/* Unit tests for ratelimit.c: buckets, the per-source table, the budget. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ratelimit.h"
#include "unit_util.h"

#define MS  1000000ull
#define SEC 1000000000ull
/* A monotonic clock well past zero, as on a real host. */
#define T0 (1000 * SEC)

static const uint8_t key[16] = "0123456789abcdef";

/* The i-th address of 10.0.0.0/8, port 27960. */
static union etr_sockaddr nth_v4(uint32_t i)
{
	union etr_sockaddr a;

	memset(&a, 0, sizeof(a));
	a.in.sin_family = AF_INET;
	a.in.sin_port = htons(27960);
	a.in.sin_addr.s_addr = htonl(0x0a000000u + i);
	return a;
}

static bool allow(struct rl_table *t, const char *s, uint64_t now)
{
	union etr_sockaddr a = sa(s);

	return rl_table_allow(t, &a, now);
}

/* How many packets src gets through at `now` before the first refusal. */
static unsigned drain(struct rl_table *t, const char *s, uint64_t now)
{
	unsigned n = 0;

	while (allow(t, s, now) && n < 1000)
		n++;
	return n;
}

/* rl_bucket */

static void test_rl_bucket_starts_full_then_refuses(void **state)
{
	struct rl_bucket b;

	(void)state;
	rl_bucket_init(&b, 10, 1, T0);
	assert_int_equal(rl_available(&b, T0), 10);
	for (int i = 0; i < 10; i++)
		assert_true(rl_take(&b, T0));
	assert_false(rl_take(&b, T0));
	assert_int_equal(rl_available(&b, T0), 0);
}

static void test_rl_bucket_refills_at_the_given_rate(void **state)
{
	struct rl_bucket b;

	(void)state;
	rl_bucket_init(&b, 10, 1, T0);
	for (int i = 0; i < 10; i++)
		assert_true(rl_take(&b, T0));
	assert_false(rl_take(&b, T0 + 999 * MS));
	assert_true(rl_take(&b, T0 + SEC));
	assert_false(rl_take(&b, T0 + SEC));
	assert_int_equal(rl_available(&b, T0 + 4 * SEC), 3);
}

static void test_rl_bucket_keeps_fractions_of_a_token(void **state)
{
	struct rl_bucket b;

	(void)state;
	/* 3 per second: a token every 333,333,333.3 ns. */
	rl_bucket_init(&b, 1, 3, T0);
	assert_true(rl_take(&b, T0));
	assert_false(rl_take(&b, T0 + 333333333));
	assert_true(rl_take(&b, T0 + 333333334));
	/* Ten steps of 100 ms add up to three tokens, not zero. */
	rl_bucket_init(&b, 5, 3, T0);
	for (int i = 0; i < 5; i++)
		assert_true(rl_take(&b, T0));
	for (int i = 1; i <= 10; i++)
		assert_int_equal(rl_available(&b, T0 + (uint64_t)i * 100 * MS), (i * 3) / 10);
	for (int i = 1; i <= 10; i++)
		rl_take(&b, T0 + (uint64_t)i * 100 * MS);
	assert_int_equal(rl_available(&b, T0 + 1000 * MS), 0);
}

static void test_rl_bucket_never_holds_more_than_burst(void **state)
{
	struct rl_bucket b;

	(void)state;
	rl_bucket_init(&b, 4, 1000000, T0);
	assert_true(rl_take(&b, T0));
	assert_int_equal(rl_available(&b, UINT64_MAX), 4);
	assert_int_equal(rl_available(&b, T0 + 3600 * SEC), 4);
	rl_bucket_init(&b, 4, 1, 0);
	assert_true(rl_take(&b, 0));
	assert_int_equal(rl_available(&b, UINT64_MAX), 4);
}

static void test_rl_bucket_ignores_a_clock_that_goes_back(void **state)
{
	struct rl_bucket b;

	(void)state;
	rl_bucket_init(&b, 2, 1, T0);
	assert_true(rl_take(&b, T0));
	assert_true(rl_take(&b, T0));
	assert_false(rl_take(&b, T0 - 5 * SEC));
	assert_int_equal(rl_available(&b, T0 - 5 * SEC), 0);
	/* The earlier `now` did not move the refill point back. */
	assert_false(rl_take(&b, T0 + 999 * MS));
	assert_true(rl_take(&b, T0 + SEC));
}

static void test_rl_bucket_with_zero_rate_never_refills(void **state)
{
	struct rl_bucket b;

	(void)state;
	rl_bucket_init(&b, 1, 0, T0);
	assert_true(rl_take(&b, T0));
	assert_false(rl_take(&b, T0 + 3600 * SEC));
}

/* rl_table */

static void test_rl_table_init_rejects_zero_burst_and_huge_tables(void **state)
{
	struct rl_table t;

	(void)state;
	assert_int_equal(rl_table_init(&t, 64, 0, 1, key), -EINVAL);
	assert_int_equal(rl_table_init(&t, RL_TABLE_MAX + 1, 10, 1, key), -EINVAL);
}

static void test_rl_table_init_rounds_entries_up_to_a_power_of_two(void **state)
{
	struct rl_table t;

	(void)state;
	assert_int_equal(rl_table_init(&t, 1000, 10, 1, key), 0);
	assert_int_equal(t.entries, 1024);
	rl_table_free(&t);
	assert_int_equal(rl_table_init(&t, 1, 10, 1, key), 0);
	assert_int_equal(t.entries, RL_TABLE_WAYS);
	rl_table_free(&t);
	assert_null(t.slot);
}

static void test_rl_table_limits_each_source_to_its_burst(void **state)
{
	struct rl_table t;

	(void)state;
	assert_int_equal(rl_table_init(&t, 1024, 10, 1, key), 0);
	assert_int_equal(drain(&t, "1.2.3.4:27960", T0), 10);
	assert_int_equal(drain(&t, "1.2.3.5:27960", T0), 10);
	assert_int_equal(drain(&t, "[2001:db8:1::1]:27960", T0), 10);
	assert_false(allow(&t, "1.2.3.4:27960", T0));
	rl_table_free(&t);
}

static bool has(struct rl_table *t, const char *s, uint64_t now)
{
	union etr_sockaddr a = sa(s);

	return rl_table_has(t, &a, now);
}

static void test_rl_table_has_looks_without_taking(void **state)
{
	struct rl_table t;

	(void)state;
	assert_int_equal(rl_table_init(&t, 1024, 3, 1, key), 0);
	/* Never seen: a full bucket, and looking adds no entry. */
	for (int i = 0; i < 10; i++)
		assert_true(has(&t, "1.2.3.4:1", T0));
	assert_int_equal(drain(&t, "1.2.3.4:1", T0), 3);
	assert_false(has(&t, "1.2.3.4:2", T0)); /* the port plays no part */
	assert_true(has(&t, "1.2.3.5:1", T0));
	assert_false(has(&t, "1.2.3.4:1", T0 + 999 * MS));
	assert_true(has(&t, "1.2.3.4:1", T0 + SEC));
	assert_true(has(&t, "1.2.3.4:1", T0 + SEC)); /* still there: not taken */
	assert_true(allow(&t, "1.2.3.4:1", T0 + SEC));
	assert_false(has(&t, "1.2.3.4:1", T0 + SEC));
	rl_table_free(&t);
}

static void test_rl_table_refills_a_source_once_per_second(void **state)
{
	struct rl_table t;

	(void)state;
	assert_int_equal(rl_table_init(&t, 1024, 10, 1, key), 0);
	assert_int_equal(drain(&t, "1.2.3.4:27960", T0), 10);
	assert_false(allow(&t, "1.2.3.4:27960", T0 + 999 * MS));
	assert_true(allow(&t, "1.2.3.4:27960", T0 + SEC));
	assert_false(allow(&t, "1.2.3.4:27960", T0 + SEC));
	assert_int_equal(drain(&t, "1.2.3.4:27960", T0 + 4 * SEC), 3);
	rl_table_free(&t);
}

static void test_rl_table_ignores_the_source_port(void **state)
{
	struct rl_table t;

	(void)state;
	assert_int_equal(rl_table_init(&t, 1024, 3, 1, key), 0);
	assert_true(allow(&t, "1.2.3.4:1", T0));
	assert_true(allow(&t, "1.2.3.4:2", T0));
	assert_true(allow(&t, "1.2.3.4:3", T0));
	assert_false(allow(&t, "1.2.3.4:4", T0));
	assert_true(allow(&t, "[2001:db8::1]:1", T0));
	assert_true(allow(&t, "[2001:db8::1]:2", T0));
	assert_true(allow(&t, "[2001:db8::1]:3", T0));
	assert_false(allow(&t, "[2001:db8::1]:4", T0));
	rl_table_free(&t);
}

static void test_rl_table_keys_ipv4_mapped_ipv6_as_the_ipv4_address(void **state)
{
	struct rl_table t;

	(void)state;
	assert_int_equal(rl_table_init(&t, 1024, 2, 1, key), 0);
	assert_true(allow(&t, "1.2.3.4:27960", T0));
	assert_true(allow(&t, "[::ffff:1.2.3.4]:27961", T0));
	assert_false(allow(&t, "1.2.3.4:27960", T0));
	assert_false(allow(&t, "[::ffff:1.2.3.4]:27960", T0));
	/* ::1.2.3.4 (IPv4-compatible) is an IPv6 address, not this one. */
	assert_true(allow(&t, "[::ffff:1.2.3.5]:27960", T0));
	rl_table_free(&t);
}

static void test_rl_table_shares_one_bucket_per_ipv6_slash_64(void **state)
{
	struct rl_table t;

	(void)state;
	assert_int_equal(rl_table_init(&t, 1024, 2, 1, key), 0);
	assert_true(allow(&t, "[2001:db8:0:1::1]:27960", T0));
	assert_true(allow(&t, "[2001:db8:0:1:ffff:ffff:ffff:ffff]:27960", T0));
	assert_false(allow(&t, "[2001:db8:0:1::2]:27960", T0));
	assert_true(allow(&t, "[2001:db8:0:2::1]:27960", T0));
	rl_table_free(&t);
}

static void test_rl_table_refuses_an_unknown_family(void **state)
{
	struct rl_table t;
	union etr_sockaddr a;

	(void)state;
	memset(&a, 0, sizeof(a));
	a.sa.sa_family = AF_UNIX;
	assert_int_equal(rl_table_init(&t, 64, 10, 1, key), 0);
	assert_false(rl_table_allow(&t, &a, T0));
	rl_table_free(&t);
}

static void test_rl_table_never_grows_and_always_admits_a_newcomer(void **state)
{
	struct rl_table t;
	union etr_sockaddr a;
	uint32_t used = 0;

	(void)state;
	assert_int_equal(rl_table_init(&t, 64, 1, 1, key), 0);
	/* 100,000 sources in one second, each with a full burst the first time:
	 * a flood from many addresses recycles slots, it cannot fill them for
	 * good. */
	for (uint32_t i = 0; i < 100000; i++) {
		a = nth_v4(i);
		assert_true(rl_table_allow(&t, &a, T0 + i * 10000ull));
	}
	assert_int_equal(t.entries, 64);
	for (uint32_t i = 0; i < t.entries; i++)
		used += t.slot[i].lo != 0;
	assert_int_equal(used, 64);
	assert_true(t.evicted + t.recycled >= 100000 - 64);
	a = nth_v4(200000);
	assert_true(rl_table_allow(&t, &a, T0 + SEC));
	assert_false(rl_table_allow(&t, &a, T0 + SEC));
	rl_table_free(&t);
}

static void test_rl_table_reuses_a_refilled_bucket_before_the_least_recent(void **state)
{
	struct rl_table t;
	char ip[32];

	(void)state;
	/* Eight slots: one set, which every source shares. */
	assert_int_equal(rl_table_init(&t, RL_TABLE_WAYS, 2, 1, key), 0);
	for (int i = 1; i < RL_TABLE_WAYS; i++) {
		snprintf(ip, sizeof(ip), "10.0.0.%d:27960", i);
		assert_int_equal(drain(&t, ip, T0), 2);
	}
	/* The most recent source takes one token: full again 1 s later. */
	assert_true(allow(&t, "10.0.0.100:27960", T0 + 100 * MS));
	assert_true(allow(&t, "10.0.0.200:27960", T0 + 1500 * MS));
	assert_int_equal(t.recycled, 1);
	assert_int_equal(t.evicted, 0);
	/* The drained sources kept their state: 1.5 tokens each, not 2. */
	for (int i = 1; i < RL_TABLE_WAYS; i++) {
		snprintf(ip, sizeof(ip), "10.0.0.%d:27960", i);
		assert_int_equal(drain(&t, ip, T0 + 1500 * MS), 1);
	}
	rl_table_free(&t);
}

static void test_rl_table_evicts_the_least_recently_used_source(void **state)
{
	struct rl_table t;
	char ip[32];

	(void)state;
	/* One token each, never refilled: no bucket is ever full again. */
	assert_int_equal(rl_table_init(&t, RL_TABLE_WAYS, 1, 0, key), 0);
	for (int i = 1; i <= RL_TABLE_WAYS; i++) {
		snprintf(ip, sizeof(ip), "10.0.0.%d:27960", i);
		assert_true(allow(&t, ip, T0 + (uint64_t)i * SEC));
	}
	/* A refused packet is a use too: 10.0.0.1 is now the most recent. */
	assert_false(allow(&t, "10.0.0.1:27960", T0 + 9 * SEC));
	assert_true(allow(&t, "10.0.0.9:27960", T0 + 10 * SEC));
	assert_int_equal(t.evicted, 1);
	assert_false(allow(&t, "10.0.0.1:27960", T0 + 11 * SEC));
	for (int i = 3; i <= 9; i++) {
		snprintf(ip, sizeof(ip), "10.0.0.%d:27960", i);
		assert_false(allow(&t, ip, T0 + 12 * SEC));
	}
	/* 10.0.0.2 was the one forgotten: it starts over with a full bucket. */
	assert_true(allow(&t, "10.0.0.2:27960", T0 + 13 * SEC));
	assert_int_equal(t.evicted, 2);
	rl_table_free(&t);
}

static void test_rl_table_keeps_every_source_while_half_full(void **state)
{
	struct rl_table t;
	union etr_sockaddr a, first = nth_v4(0);

	(void)state;
	/* Two candidate sets per source keep the sets even: at half load no
	 * source loses its bucket to another. */
	assert_int_equal(rl_table_init(&t, 4096, 1, 0, key), 0);
	assert_true(rl_table_allow(&t, &first, T0));
	for (uint32_t i = 1; i < 2048; i++) {
		a = nth_v4(i);
		assert_true(rl_table_allow(&t, &a, T0 + i));
	}
	assert_int_equal(t.evicted, 0);
	for (uint32_t i = 0; i < 2048; i++) {
		a = nth_v4(i);
		assert_false(rl_table_allow(&t, &a, T0 + SEC));
	}
	rl_table_free(&t);
}

/* rl_budget */

static void test_rl_budget_init_rejects_reserves_that_leave_browsers_nothing(void **state)
{
	struct rl_budget b;

	(void)state;
	assert_int_equal(rl_budget_init(&b, 10, 1, 5, 5, T0), -EINVAL);
	assert_int_equal(rl_budget_init(&b, 10, 1, 10, 0, T0), -EINVAL);
	assert_int_equal(rl_budget_init(&b, 10, 1, 4, 5, T0), 0);
}

/* How many of cls pass at `now` before the first refusal. */
static int take_all(struct rl_budget *b, enum rl_class cls, uint64_t now)
{
	int n;

	for (n = 0; rl_budget_take(b, cls, now) && n < 100; n++)
		;
	return n;
}

static void test_rl_budget_browsers_take_only_the_shared_tokens(void **state)
{
	struct rl_budget b;

	(void)state;
	assert_int_equal(rl_budget_init(&b, 10, 1, 2, 3, T0), 0);
	assert_int_equal(take_all(&b, RL_BROWSER, T0), 5);
	/* Each class still has its whole reserve, and only its own. */
	assert_int_equal(take_all(&b, RL_PLAYER, T0), 3);
	assert_int_equal(take_all(&b, RL_MASTER, T0), 2);
	assert_false(rl_budget_take(&b, RL_BROWSER, T0));
}

static void test_rl_budget_masters_cannot_take_what_players_are_guaranteed(void **state)
{
	struct rl_budget b;

	(void)state;
	assert_int_equal(rl_budget_init(&b, 9, 1, 4, 3, T0), 0);
	/* Shared 2 + the masters' 4: a flood in a master's name stops there. */
	assert_int_equal(take_all(&b, RL_MASTER, T0), 6);
	assert_int_equal(rl_budget_left(&b, RL_PLAYER, T0), 3);
	assert_int_equal(take_all(&b, RL_PLAYER, T0), 3);
}

static void test_rl_budget_players_cannot_take_what_masters_are_guaranteed(void **state)
{
	struct rl_budget b;

	(void)state;
	assert_int_equal(rl_budget_init(&b, 9, 1, 4, 3, T0), 0);
	assert_int_equal(take_all(&b, RL_PLAYER, T0), 5);
	assert_int_equal(take_all(&b, RL_MASTER, T0), 4);
}

static void test_rl_budget_refills_the_reserves_before_the_shared_part(void **state)
{
	struct rl_budget b;

	(void)state;
	assert_int_equal(rl_budget_init(&b, 9, 1, 4, 3, T0), 0);
	assert_int_equal(take_all(&b, RL_MASTER, T0), 6);
	assert_int_equal(take_all(&b, RL_PLAYER, T0), 3);
	/* 7 s: half to each reserve while both lack, then to the masters'. */
	assert_int_equal(rl_budget_left(&b, RL_PLAYER, T0 + 2 * SEC), 1);
	assert_int_equal(rl_budget_left(&b, RL_MASTER, T0 + 2 * SEC), 1);
	assert_int_equal(rl_budget_left(&b, RL_BROWSER, T0 + 7 * SEC), 0);
	assert_int_equal(rl_budget_left(&b, RL_PLAYER, T0 + 7 * SEC), 3);
	assert_int_equal(rl_budget_left(&b, RL_MASTER, T0 + 7 * SEC), 4);
	assert_false(rl_budget_take(&b, RL_BROWSER, T0 + 7 * SEC));
	assert_true(rl_budget_take(&b, RL_BROWSER, T0 + 8 * SEC));
	/* Never more than burst in all, however long it rests. */
	assert_int_equal(rl_budget_left(&b, RL_BROWSER, T0 + 3600 * SEC), 2);
}

static void test_rl_budget_keeps_the_reserves_through_a_browser_storm(void **state)
{
	struct rl_budget b;
	uint64_t end = T0 + 10 * SEC - MS;
	int served = 0;

	(void)state;
	assert_int_equal(rl_budget_init(&b, 10, 1, 2, 3, T0), 0);
	/* 10 seconds of browsers at 1000 packets per second: the first 5, then
	 * one per second. */
	for (uint64_t now = T0; now <= end; now += MS)
		served += rl_budget_take(&b, RL_BROWSER, now);
	assert_int_equal(served, 5 + 9);
	assert_int_equal(take_all(&b, RL_PLAYER, end), 3);
	assert_int_equal(take_all(&b, RL_MASTER, end), 2);
}

static void test_rl_budget_serves_browsers_again_after_a_refill(void **state)
{
	struct rl_budget b;

	(void)state;
	assert_int_equal(rl_budget_init(&b, 4, 1, 1, 1, T0), 0);
	assert_true(rl_budget_take(&b, RL_BROWSER, T0));
	assert_true(rl_budget_take(&b, RL_BROWSER, T0));
	assert_false(rl_budget_take(&b, RL_BROWSER, T0));
	assert_false(rl_budget_take(&b, RL_BROWSER, T0 + 999 * MS));
	assert_true(rl_budget_take(&b, RL_BROWSER, T0 + SEC));
	assert_false(rl_budget_take(&b, RL_BROWSER, T0 + SEC));
}

static void test_rl_budget_free_packets_spend_nothing(void **state)
{
	struct rl_budget b;

	(void)state;
	assert_int_equal(rl_budget_init(&b, 4, 1, 1, 1, T0), 0);
	for (int i = 0; i < 50; i++)
		assert_true(rl_budget_take(&b, RL_FREE, T0));
	assert_int_equal(take_all(&b, RL_BROWSER, T0), 2);
}

/* The README's busy minute with the defaults (burst 9, 1/s; two masters:
 * 4 kept for them, 3 for players) on an ET server: the probe, then both
 * masters asking getChallenge then getinfo, a browser's cache refresh
 * wanted every second (the cache answers the rest), a player joining
 * (getchallenge, connect 100 ms later) every 10 s, two of them at once at
 * 30 s. Masters and players are never refused; browsers get a refresh at
 * least every 6 s, what the cache serves (1 s fresh + 5 s stale). */
static void test_rl_budget_busy_minute_with_the_defaults(void **state)
{
	struct rl_budget b;
	uint64_t last_refresh = T0, gap = 0;

	(void)state;
	assert_int_equal(rl_budget_init(&b, 9, 1, 4, 3, T0), 0);
	for (unsigned ms = 0; ms < 60000; ms += 10) {
		uint64_t now = T0 + ms * MS;

		if (ms == 0) {
			assert_true(rl_budget_take(&b, RL_MASTER, now)); /* probe */
			for (int m = 0; m < 2; m++) {
				assert_true(rl_budget_take(&b, RL_MASTER, now + MS));
				assert_true(rl_budget_take(&b, RL_MASTER, now + 2 * MS));
			}
		}
		if (ms % 10000 == 5000 || ms == 30000)
			for (int p = 0; p < (ms == 30000 ? 2 : 1); p++) {
				assert_true(rl_budget_take(&b, RL_PLAYER, now));
				assert_true(rl_budget_take(&b, RL_PLAYER, now + 100 * MS));
			}
		if (ms % 1000 == 0 && rl_budget_take(&b, RL_BROWSER, now))
			last_refresh = now;
		if (now - last_refresh > gap)
			gap = now - last_refresh;
	}
	print_message("longest time without a refresh: %llu ms\n", (unsigned long long)(gap / MS));
	assert_true(gap <= 6 * SEC);
}

/* rl_stamps */

static void test_rl_stamps_init_rejects_prefixes_out_of_range(void **state)
{
	struct rl_stamps t;

	(void)state;
	assert_int_equal(rl_stamps_init(&t, 64, 33, 48, SEC, key), -EINVAL);
	assert_int_equal(rl_stamps_init(&t, 64, 24, 65, SEC, key), -EINVAL);
	assert_int_equal(rl_stamps_init(&t, 64, 4, 48, SEC, key), -EINVAL);
	assert_int_equal(rl_stamps_init(&t, RL_TABLE_MAX + 1, 24, 48, SEC, key), -EINVAL);
	assert_int_equal(rl_stamps_init(&t, 64, 24, 48, SEC, key), 0);
	rl_stamps_free(&t);
}

static void test_rl_stamps_count_an_ipv4_slash_24_and_an_ipv6_slash_48_as_one(void **state)
{
	struct rl_stamps t;
	union etr_sockaddr a;

	(void)state;
	assert_int_equal(rl_stamps_init(&t, 64, 24, 48, 2500 * MS, key), 0);
	a = sa("192.0.2.1:27960");
	rl_stamps_mark(&t, &a, T0, false);
	a = sa("192.0.2.254:1");
	assert_true(rl_stamps_recent(&t, &a, T0 + MS));
	a = sa("[::ffff:192.0.2.77]:5");
	assert_true(rl_stamps_recent(&t, &a, T0 + MS));
	a = sa("192.0.3.1:27960");
	assert_false(rl_stamps_recent(&t, &a, T0 + MS));
	/* A /56 and its /64s are inside their /48. */
	a = sa("[2001:db8:1:ff00::1]:27960");
	rl_stamps_mark(&t, &a, T0, false);
	a = sa("[2001:db8:1:aa::9]:1");
	assert_true(rl_stamps_recent(&t, &a, T0 + MS));
	a = sa("[2001:db8:2::1]:27960");
	assert_false(rl_stamps_recent(&t, &a, T0 + MS));
	rl_stamps_free(&t);
}

static void test_rl_stamps_forget_a_stamp_after_its_ttl(void **state)
{
	struct rl_stamps t;
	union etr_sockaddr a = sa("198.51.100.7:27960");

	(void)state;
	assert_int_equal(rl_stamps_init(&t, 64, 32, 64, 2500 * MS, key), 0);
	assert_false(rl_stamps_recent(&t, &a, T0));
	rl_stamps_mark(&t, &a, T0, false);
	assert_true(rl_stamps_recent(&t, &a, T0));
	assert_true(rl_stamps_recent(&t, &a, T0 + 2499 * MS));
	assert_false(rl_stamps_recent(&t, &a, T0 + 2500 * MS));
	/* A newer stamp starts the time again. */
	rl_stamps_mark(&t, &a, T0 + 2 * SEC, false);
	assert_true(rl_stamps_recent(&t, &a, T0 + 4 * SEC));
	rl_stamps_free(&t);
}

static void test_rl_stamps_give_one_credit_per_marked_stamp(void **state)
{
	struct rl_stamps t;
	union etr_sockaddr a = sa("198.51.100.7:27960");

	(void)state;
	assert_int_equal(rl_stamps_init(&t, 64, 24, 48, 2500 * MS, key), 0);
	assert_false(rl_stamps_use_credit(&t, &a, T0));
	rl_stamps_mark(&t, &a, T0, true);
	/* A mark without credit leaves the one there. */
	rl_stamps_mark(&t, &a, T0 + MS, false);
	assert_true(rl_stamps_use_credit(&t, &a, T0 + 100 * MS));
	assert_false(rl_stamps_use_credit(&t, &a, T0 + 100 * MS));
	rl_stamps_mark(&t, &a, T0 + SEC, true);
	/* Gone with its stamp. */
	assert_false(rl_stamps_use_credit(&t, &a, T0 + 4 * SEC));
	rl_stamps_mark(&t, &a, T0 + 5 * SEC, false);
	assert_false(rl_stamps_use_credit(&t, &a, T0 + 5 * SEC));
	rl_stamps_free(&t);
}

static void test_rl_stamps_never_grow_and_reuse_old_stamps_first(void **state)
{
	struct rl_stamps t;

	(void)state;
	assert_int_equal(rl_stamps_init(&t, 64, 32, 64, SEC, key), 0);
	/* 1000 networks stamped long ago, then 40 now: room comes from the
	 * old ones, no recent stamp is dropped while there are old ones. */
	for (uint32_t i = 0; i < 1000; i++) {
		union etr_sockaddr a = nth_v4(i);
		rl_stamps_mark(&t, &a, T0, false);
	}
	uint64_t evicted = t.evicted;

	assert_true(evicted > 0); /* 1000 recent stamps in 64 slots */
	for (uint32_t i = 0; i < 40; i++) {
		union etr_sockaddr a = nth_v4(5000 + i);
		rl_stamps_mark(&t, &a, T0 + 10 * SEC, false);
	}
	assert_int_equal(t.evicted, evicted);
	for (uint32_t i = 0; i < 40; i++) {
		union etr_sockaddr a = nth_v4(5000 + i);
		assert_true(rl_stamps_recent(&t, &a, T0 + 10 * SEC));
	}
	assert_int_equal(t.entries, 64);
	rl_stamps_free(&t);
}

/* The default budget as the relay sets it up: burst 9, 1/s, one master
 * (2), players 3 of which the last is proven players', the one before
 * fresh networks'; 4 shared. */
static void default_budget(struct rl_budget *b, uint64_t now)
{
	assert_int_equal(rl_budget_init(b, 9, 1, 2, 3, now), 0);
	assert_int_equal(rl_budget_players(b, 1, 1), 0);
}

static void test_rl_budget_players_rejects_more_kept_than_the_reserve(void **state)
{
	struct rl_budget b;

	(void)state;
	assert_int_equal(rl_budget_init(&b, 9, 1, 2, 3, T0), 0);
	assert_int_equal(rl_budget_players(&b, 2, 2), -EINVAL);
	assert_int_equal(rl_budget_players(&b, 0, 4), -EINVAL);
	assert_int_equal(rl_budget_players(&b, 1, 2), 0);
	assert_int_equal(rl_budget_left(&b, RL_BROWSER, T0), 4);
}

static void test_rl_budget_a_network_seen_lately_leaves_the_last_tokens(void **state)
{
	struct rl_budget b;

	(void)state;
	default_budget(&b, T0);
	/* 1 of the players' 3, then the shared 4; two stay. */
	assert_int_equal(take_all(&b, RL_PLAYER_AGAIN, T0), 5);
	assert_int_equal(rl_budget_left(&b, RL_PLAYER, T0), 2);
	assert_true(rl_budget_take(&b, RL_PLAYER, T0));
	assert_false(rl_budget_take(&b, RL_PLAYER, T0));
	assert_true(rl_budget_take(&b, RL_PROVEN, T0));
	assert_false(rl_budget_take(&b, RL_PROVEN, T0));
	/* The refill goes to the players' reserve: proven first again. */
	assert_false(rl_budget_take(&b, RL_PLAYER, T0 + SEC));
	assert_true(rl_budget_take(&b, RL_PROVEN, T0 + SEC));
	assert_false(rl_budget_take(&b, RL_PLAYER_AGAIN, T0 + 3 * SEC));
	assert_true(rl_budget_take(&b, RL_PLAYER, T0 + 3 * SEC));
}

static void test_rl_budget_proven_players_have_a_token_no_one_else_takes(void **state)
{
	struct rl_budget b;

	(void)state;
	default_budget(&b, T0);
	assert_int_equal(take_all(&b, RL_PLAYER, T0), 6);
	assert_int_equal(take_all(&b, RL_BROWSER, T0), 0);
	assert_int_equal(take_all(&b, RL_MASTER, T0), 2);
	assert_int_equal(take_all(&b, RL_RCON, T0), 0);
	assert_true(rl_budget_take(&b, RL_PROVEN, T0));
	assert_false(rl_budget_take(&b, RL_PROVEN, T0));
}

static void test_rl_budget_rcon_takes_shared_tokens_but_never_the_last(void **state)
{
	struct rl_budget b;

	(void)state;
	default_budget(&b, T0);
	assert_int_equal(take_all(&b, RL_RCON, T0), 3);
	assert_int_equal(rl_budget_left(&b, RL_PLAYER, T0), 3);
	assert_true(rl_budget_take(&b, RL_BROWSER, T0));
	assert_false(rl_budget_take(&b, RL_RCON, T0 + 1500 * MS));
}

/* The relay's rule (relay.c player_admit) over the pure parts: a flood of
 * getchallenge from `nets` networks (each at `rate` a second) for 60 s,
 * and a real player from a network of its own who asks every 3 s and
 * counts as joined at its first answer, then starts again 3 s later.
 * Returns the joins in `*joined` and the attempts made. */
static int flood_minute(unsigned nets, unsigned rate, int *joined)
{
	struct rl_budget b;
	struct rl_stamps t;
	union etr_sockaddr player = sa("203.0.113.9:27960");
	int tries = 0;

	assert_int_equal(rl_stamps_init(&t, 256, 24, 48, 2500 * MS, key), 0);
	default_budget(&b, T0);
	*joined = 0;
	for (unsigned ms = 0; ms < 60000; ms++) {
		uint64_t now = T0 + ms * MS;

		for (unsigned n = 0; n < nets; n++) {
			union etr_sockaddr a = nth_v4(n << 8 | (ms % 200));

			if ((ms + n * 7) % (1000 / rate) != 0)
				continue;
			if (rl_budget_take(
				&b, rl_stamps_recent(&t, &a, now) ? RL_PLAYER_AGAIN : RL_PLAYER,
				now))
				rl_stamps_mark(&t, &a, now, false);
		}
		if (ms % 3000 == 1500) {
			enum rl_class c =
			    rl_stamps_recent(&t, &player, now) ? RL_PLAYER_AGAIN : RL_PLAYER;
			tries++;
			if (rl_budget_take(&b, c, now)) {
				rl_stamps_mark(&t, &player, now, false);
				(*joined)++;
			}
		}
	}
	rl_stamps_free(&t);
	return tries;
}

static void test_rl_budget_a_flood_from_one_network_never_refuses_a_player(void **state)
{
	int joined, tries;

	(void)state;
	/* 10 addresses of one /24 at 10 a second, and at 100. */
	tries = flood_minute(1, 10, &joined);
	assert_int_equal(joined, tries);
	tries = flood_minute(1, 100, &joined);
	assert_int_equal(joined, tries);
	/* More networks delay a player: said plainly, not hidden. Two take
	 * the fresh token now and then, three or more most of the time. */
	for (unsigned nets = 2; nets <= 10; nets += nets < 4 ? 1 : 6) {
		tries = flood_minute(nets, 10, &joined);
		print_message("%u networks at 10/s each: a player answered %d of %d times\n", nets,
			      joined, tries);
		if (nets == 2)
			assert_true(joined >= tries * 9 / 10);
		if (nets == 10)
			assert_true(joined < tries / 2);
	}
}

static void test_rl_take_n_takes_all_or_nothing(void **state)
{
	struct rl_bucket b;

	(void)state;
	rl_bucket_init(&b, 1000, 1000, T0);
	assert_true(rl_take_n(&b, 600, T0));
	assert_false(rl_take_n(&b, 600, T0));
	assert_int_equal(rl_available(&b, T0), 400);
	assert_false(rl_take_n(&b, 1001, T0 + 3600 * SEC));
	assert_true(rl_take_n(&b, 1000, T0 + SEC));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rl_bucket_starts_full_then_refuses),
	    cmocka_unit_test(test_rl_bucket_refills_at_the_given_rate),
	    cmocka_unit_test(test_rl_bucket_keeps_fractions_of_a_token),
	    cmocka_unit_test(test_rl_bucket_never_holds_more_than_burst),
	    cmocka_unit_test(test_rl_bucket_ignores_a_clock_that_goes_back),
	    cmocka_unit_test(test_rl_bucket_with_zero_rate_never_refills),
	    cmocka_unit_test(test_rl_table_init_rejects_zero_burst_and_huge_tables),
	    cmocka_unit_test(test_rl_table_init_rounds_entries_up_to_a_power_of_two),
	    cmocka_unit_test(test_rl_table_limits_each_source_to_its_burst),
	    cmocka_unit_test(test_rl_table_has_looks_without_taking),
	    cmocka_unit_test(test_rl_table_refills_a_source_once_per_second),
	    cmocka_unit_test(test_rl_table_ignores_the_source_port),
	    cmocka_unit_test(test_rl_table_keys_ipv4_mapped_ipv6_as_the_ipv4_address),
	    cmocka_unit_test(test_rl_table_shares_one_bucket_per_ipv6_slash_64),
	    cmocka_unit_test(test_rl_table_refuses_an_unknown_family),
	    cmocka_unit_test(test_rl_table_never_grows_and_always_admits_a_newcomer),
	    cmocka_unit_test(test_rl_table_reuses_a_refilled_bucket_before_the_least_recent),
	    cmocka_unit_test(test_rl_table_evicts_the_least_recently_used_source),
	    cmocka_unit_test(test_rl_table_keeps_every_source_while_half_full),
	    cmocka_unit_test(test_rl_budget_init_rejects_reserves_that_leave_browsers_nothing),
	    cmocka_unit_test(test_rl_budget_browsers_take_only_the_shared_tokens),
	    cmocka_unit_test(test_rl_budget_masters_cannot_take_what_players_are_guaranteed),
	    cmocka_unit_test(test_rl_budget_players_cannot_take_what_masters_are_guaranteed),
	    cmocka_unit_test(test_rl_budget_refills_the_reserves_before_the_shared_part),
	    cmocka_unit_test(test_rl_budget_keeps_the_reserves_through_a_browser_storm),
	    cmocka_unit_test(test_rl_budget_serves_browsers_again_after_a_refill),
	    cmocka_unit_test(test_rl_budget_free_packets_spend_nothing),
	    cmocka_unit_test(test_rl_budget_busy_minute_with_the_defaults),
	    cmocka_unit_test(test_rl_take_n_takes_all_or_nothing),
	    cmocka_unit_test(test_rl_stamps_init_rejects_prefixes_out_of_range),
	    cmocka_unit_test(test_rl_stamps_count_an_ipv4_slash_24_and_an_ipv6_slash_48_as_one),
	    cmocka_unit_test(test_rl_stamps_forget_a_stamp_after_its_ttl),
	    cmocka_unit_test(test_rl_stamps_give_one_credit_per_marked_stamp),
	    cmocka_unit_test(test_rl_stamps_never_grow_and_reuse_old_stamps_first),
	    cmocka_unit_test(test_rl_budget_players_rejects_more_kept_than_the_reserve),
	    cmocka_unit_test(test_rl_budget_a_network_seen_lately_leaves_the_last_tokens),
	    cmocka_unit_test(test_rl_budget_proven_players_have_a_token_no_one_else_takes),
	    cmocka_unit_test(test_rl_budget_rcon_takes_shared_tokens_but_never_the_last),
	    cmocka_unit_test(test_rl_budget_a_flood_from_one_network_never_refuses_a_player),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
