/* SPDX-License-Identifier: ISC */
/* Unit tests for ops_conn.c: the ops listener's slots, the share of one
 * address, the absolute deadline and who gives way when all are taken. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ops_conn.h"
#include "unit_util.h"

#define SEC 1000000000ull
#define T0  (100 * SEC)

/* Admit and add, as the listener does; returns the slot. */
static int connect_from(struct ops_conns *t, const char *s, uint64_t now)
{
	union etr_sockaddr a = sa(s);
	int victim, i;

	assert_int_equal(ops_conn_admit(t, &a, now, &victim), OPS_CONN_ACCEPT);
	i = ops_conn_add(t, &a, 1000 + (int)t->live, NULL, now);
	assert_true(i >= 0);
	return i;
}

/* OPS_CONN_MAX connections, OPS_CONN_PER_IP from each of 10.0.0.1, 10.0.1.1
 * and on, one nanosecond apart. */
static void fill(struct ops_conns *t, uint64_t now)
{
	char s[64];

	for (int i = 0; i < OPS_CONN_MAX; i++) {
		snprintf(s, sizeof(s), "10.0.%d.1:4000", i / OPS_CONN_PER_IP);
		connect_from(t, s, now + (uint64_t)i);
	}
}

/* Source a holds its share: one more goes into the reserve (health only);
 * once that one's request is in, the next is refused. */
static void expect_share_full(struct ops_conns *t, const union etr_sockaddr *a)
{
	int victim, s;

	assert_int_equal(ops_conn_admit(t, a, T0, &victim), OPS_CONN_ACCEPT);
	assert_int_equal(victim, -1);
	s = ops_conn_add(t, a, 100, NULL, T0);
	assert_true(s >= 0);
	assert_true(t->c[s].reserve);
	assert_false(ops_conn_asked(t, s, false)); /* anything but health: 503 */
	assert_int_equal(ops_conn_admit(t, a, T0, &victim), OPS_CONN_REFUSE_IP);
	assert_int_equal(victim, -1);
}

static void test_ops_conn_one_address_gets_its_share_and_no_more(void **state)
{
	static struct ops_conns t;
	union etr_sockaddr a = sa("192.0.2.7:5000"), b = sa("192.0.2.8:5000");
	int victim;

	memset(&t, 0, sizeof(t));
	for (int i = 0; i < OPS_CONN_PER_IP; i++)
		connect_from(&t, "192.0.2.7:5000", T0);
	expect_share_full(&t, &a);
	assert_int_equal(t.refused, 1);
	/* another address is welcome */
	assert_int_equal(ops_conn_admit(&t, &b, T0, &victim), OPS_CONN_ACCEPT);
}

static void test_ops_conn_a_closed_connection_gives_its_share_back(void **state)
{
	static struct ops_conns t;
	union etr_sockaddr a = sa("192.0.2.7:5000");
	int first = -1, victim;

	memset(&t, 0, sizeof(t));
	for (int i = 0; i < OPS_CONN_PER_IP; i++) {
		int s = connect_from(&t, "192.0.2.7:5000", T0);

		if (i == 0)
			first = s;
	}
	ops_conn_remove(&t, first);
	assert_int_equal(t.live, OPS_CONN_PER_IP - 1);
	assert_int_equal(ops_conn_admit(&t, &a, T0, &victim), OPS_CONN_ACCEPT);
}

static void test_ops_conn_ipv6_shares_count_per_slash_64(void **state)
{
	static struct ops_conns t;
	union etr_sockaddr same = sa("[2001:db8:1:2:ffff::9]:5000");
	union etr_sockaddr other = sa("[2001:db8:1:3::1]:5000");
	char s[64];
	int victim;

	memset(&t, 0, sizeof(t));
	for (int i = 0; i < OPS_CONN_PER_IP; i++) {
		snprintf(s, sizeof(s), "[2001:db8:1:2::%x]:5000", i + 1);
		connect_from(&t, s, T0);
	}
	expect_share_full(&t, &same);
	assert_int_equal(ops_conn_admit(&t, &other, T0, &victim), OPS_CONN_ACCEPT);
}

static void test_ops_conn_ipv4_mapped_counts_as_ipv4(void **state)
{
	static struct ops_conns t;
	union etr_sockaddr mapped = sa("[::ffff:192.0.2.7]:5000");
	int victim;

	memset(&t, 0, sizeof(t));
	for (int i = 0; i < OPS_CONN_PER_IP; i++)
		connect_from(&t, "192.0.2.7:5000", T0);
	(void)victim;
	expect_share_full(&t, &mapped);
}

/* A health check from an address whose share slow clients hold: its one
 * reserve connection that sent nothing whole gives way to the newcomer
 * (attack13 F2: 8 slowloris from 127.0.0.1 failed 35 of 44 probes). */
static void test_ops_conn_a_busy_address_still_gets_a_health_check_in(void **state)
{
	static struct ops_conns t;
	union etr_sockaddr a = sa("127.0.0.1:5000");
	int victim, slow, s;

	(void)state;
	memset(&t, 0, sizeof(t));
	for (int i = 0; i < OPS_CONN_PER_IP; i++)
		connect_from(&t, "127.0.0.1:5000", T0);
	assert_int_equal(ops_conn_admit(&t, &a, T0, &victim), OPS_CONN_ACCEPT);
	slow = ops_conn_add(&t, &a, 100, NULL, T0);
	assert_true(t.c[slow].reserve);
	/* slow sent half a request; the health check comes */
	assert_int_equal(ops_conn_admit(&t, &a, T0 + 1, &victim), OPS_CONN_EVICT);
	assert_int_equal(victim, slow);
	ops_conn_remove(&t, slow);
	s = ops_conn_add(&t, &a, 101, NULL, T0 + 1);
	assert_true(s >= 0 && t.c[s].reserve);
	assert_true(ops_conn_asked(&t, s, true));
	/* its request in, it is not pushed out by the next */
	assert_int_equal(ops_conn_admit(&t, &a, T0 + 2, &victim), OPS_CONN_REFUSE_IP);
}

static void test_ops_conn_a_trickling_request_expires_at_its_deadline(void **state)
{
	static struct ops_conns t;
	int i;

	memset(&t, 0, sizeof(t));
	i = connect_from(&t, "192.0.2.7:5000", T0);
	assert_int_equal(ops_conn_next_deadline(&t), T0 + OPS_CONN_DEADLINE_SEC * SEC);
	/* bytes arriving change nothing here: only an answer does */
	assert_int_equal(ops_conn_next_expired(&t, T0 + OPS_CONN_DEADLINE_SEC * SEC - 1), -1);
	assert_int_equal(ops_conn_next_expired(&t, T0 + OPS_CONN_DEADLINE_SEC * SEC), i);
	assert_true(t.c[i].closing);
	assert_int_equal(t.expired, 1);
	assert_int_equal(t.live, 0);
	/* told once: not again while the listener closes it */
	assert_int_equal(ops_conn_next_expired(&t, T0 + 60 * SEC), -1);
	assert_int_equal(ops_conn_next_deadline(&t), UINT64_MAX);
	ops_conn_remove(&t, i);
	assert_false(t.c[i].used);
	assert_int_equal(t.live, 0);
}

static void test_ops_conn_an_answer_starts_the_next_deadline(void **state)
{
	static struct ops_conns t;
	int i;

	memset(&t, 0, sizeof(t));
	i = connect_from(&t, "192.0.2.7:5000", T0);
	ops_conn_answered(&t, i, T0 + 4 * SEC);
	assert_int_equal(ops_conn_next_expired(&t, T0 + 6 * SEC), -1);
	assert_int_equal(ops_conn_next_deadline(&t), T0 + (4 + OPS_CONN_DEADLINE_SEC) * SEC);
	assert_int_equal(ops_conn_next_expired(&t, T0 + (4 + OPS_CONN_DEADLINE_SEC) * SEC), i);
}

/* 64 addresses with one fresh request each: nobody has more than a fair
 * share, nobody is slow, nobody gives way; a newcomer gets a reserve slot,
 * for a health check only. */
static void test_ops_conn_a_full_table_keeps_a_reserve_for_health_checks(void **state)
{
	static struct ops_conns t;
	union etr_sockaddr prober = sa("127.0.0.1:6000");
	uint64_t fresh = T0 + OPS_CONN_SLOW_MS * 1000000ull - 1;
	int victim, i;

	memset(&t, 0, sizeof(t));
	for (int k = 0; k < OPS_CONN_MAX; k++) {
		char s[64];

		snprintf(s, sizeof(s), "10.1.0.%d:4000", 1 + k);
		i = connect_from(&t, s, T0);
		assert_false(t.c[i].reserve);
		assert_true(ops_conn_asked(&t, i, false));
	}
	assert_int_equal(t.live, OPS_CONN_MAX);
	/* a burst of good requests is not cut short for a newcomer */
	assert_int_equal(ops_conn_admit(&t, &prober, fresh, &victim), OPS_CONN_ACCEPT);
	assert_int_equal(victim, -1);
	i = ops_conn_add(&t, &prober, 7, NULL, fresh);
	assert_true(t.c[i].reserve);
	assert_int_equal(t.reserved, 1);
	assert_false(ops_conn_asked(&t, i, false));
	assert_true(ops_conn_asked(&t, i, true));
	assert_int_equal(t.evicted, 0);
	assert_int_equal(t.refused, 0);
	/* a general slot freed is general again */
	ops_conn_remove(&t, 0);
	assert_int_equal(t.live, OPS_CONN_MAX);
	assert_int_equal(t.reserved, 1);
	assert_false(t.c[connect_from(&t, "10.2.0.1:4000", fresh)].reserve);
}

/* Every general slot taken by fresh connections, and the reserve by
 * connections that ask for nothing: the oldest of those gives way to a
 * newcomer, never one whose request is being answered. */
static void test_ops_conn_a_full_reserve_evicts_its_oldest_silent_one(void **state)
{
	static struct ops_conns t;
	union etr_sockaddr prober = sa("127.0.0.1:6000");
	int victim, first = -1, second = -1, i;

	memset(&t, 0, sizeof(t));
	for (int k = 0; k < OPS_CONN_MAX + OPS_CONN_RESERVE; k++) {
		char s[64];

		snprintf(s, sizeof(s), "10.1.%d.%d:4000", k / 200, 1 + k % 200);
		i = connect_from(&t, s, T0 + (uint64_t)k);
		if (k == OPS_CONN_MAX)
			first = i;
		if (k == OPS_CONN_MAX + 1)
			second = i;
	}
	assert_int_equal(t.reserved, OPS_CONN_RESERVE);
	/* the oldest reserve connection asked: the next oldest goes */
	assert_true(ops_conn_asked(&t, first, true));
	assert_int_equal(ops_conn_admit(&t, &prober, T0 + 100, &victim), OPS_CONN_EVICT);
	assert_int_equal(victim, second);
	assert_true(t.c[second].closing);
	assert_int_equal(t.reserved, OPS_CONN_RESERVE - 1);
	i = ops_conn_add(&t, &prober, 7, NULL, T0 + 100);
	assert_true(t.c[i].reserve);
	assert_int_equal(t.reserved, OPS_CONN_RESERVE);
	ops_conn_remove(&t, second);
	assert_int_equal(t.reserved, OPS_CONN_RESERVE);
	/* every reserve connection asked: refused */
	for (int k = 0; k < OPS_CONN_SLOTS; k++)
		if (t.c[k].used && t.c[k].reserve)
			ops_conn_asked(&t, k, true);
	assert_int_equal(ops_conn_admit(&t, &prober, T0 + 200, &victim), OPS_CONN_REFUSE_FULL);
	assert_int_equal(t.refused, 1);
	/* an answer makes the prober's connection silent again: it may go */
	ops_conn_answered(&t, i, T0 + 300);
	assert_int_equal(ops_conn_admit(&t, &prober, T0 + 300, &victim), OPS_CONN_EVICT);
	assert_true(t.c[victim].reserve);
}

static void test_ops_conn_a_full_table_evicts_a_slow_one_of_the_busiest_address(void **state)
{
	static struct ops_conns t;
	union etr_sockaddr prober = sa("127.0.0.1:6000");
	uint64_t later = T0 + 2 * SEC;
	int victim, i, lone;

	memset(&t, 0, sizeof(t));
	/* the oldest connection is a lone client's */
	lone = connect_from(&t, "192.0.2.1:7000", T0 - SEC);
	for (int k = 0; k < OPS_CONN_MAX - 1; k++) {
		char s[64];

		snprintf(s, sizeof(s), "10.0.%d.1:4000", k / OPS_CONN_PER_IP);
		connect_from(&t, s, T0 + (uint64_t)k);
	}
	assert_int_equal(t.live, OPS_CONN_MAX);
	/* 10.0.0.1 holds 8, the most: its oldest goes, not the lone client */
	assert_int_equal(ops_conn_admit(&t, &prober, later, &victim), OPS_CONN_EVICT);
	assert_true(victim != lone);
	assert_int_equal(t.c[victim].deadline, T0 + OPS_CONN_DEADLINE_SEC * SEC);
	assert_true(t.c[victim].closing);
	assert_int_equal(t.evicted, 1);
	i = ops_conn_add(&t, &prober, 7, NULL, later);
	assert_true(i >= 0 && i != victim);
	assert_int_equal(t.live, OPS_CONN_MAX);
	/* now 10.0.1.1 holds the most (8 against 10.0.0.1's 7): its oldest */
	assert_int_equal(ops_conn_admit(&t, &prober, later, &victim), OPS_CONN_EVICT);
	assert_int_equal(t.c[victim].deadline, T0 + OPS_CONN_PER_IP + OPS_CONN_DEADLINE_SEC * SEC);
	assert_false(t.c[lone].closing);
}

/* An address with 8 fresh connections gives one up to an address with none:
 * a prober gets in while an attacker holds every slot. */
static void test_ops_conn_the_busiest_address_gives_way_to_a_fair_share(void **state)
{
	static struct ops_conns t;
	union etr_sockaddr prober = sa("127.0.0.1:6000"), seven = sa("10.0.0.1:4000");
	int victim, i;

	memset(&t, 0, sizeof(t));
	fill(&t, T0);
	assert_int_equal(ops_conn_admit(&t, &prober, T0, &victim), OPS_CONN_EVICT);
	i = ops_conn_add(&t, &prober, 7, NULL, T0);
	assert_true(i >= 0);
	assert_false(t.c[i].reserve);
	/* 10.0.0.1 now holds 7 against 8 elsewhere: not two fewer, nobody
	 * gives way; it gets a reserve slot, for health checks only */
	assert_int_equal(ops_conn_admit(&t, &seven, T0, &victim), OPS_CONN_ACCEPT);
	i = ops_conn_add(&t, &seven, 8, NULL, T0);
	assert_true(t.c[i].reserve);
	assert_int_equal(t.evicted, 1);
}

static void test_ops_conn_refuses_when_every_slot_is_closing_or_live(void **state)
{
	static struct ops_conns t;
	uint64_t later = T0 + 2 * SEC;
	union etr_sockaddr a;
	char s[64];
	int victim;

	memset(&t, 0, sizeof(t));
	fill(&t, T0);
	/* the listener has not closed any victim yet */
	for (int i = 0; i < OPS_CONN_SLOTS - OPS_CONN_MAX; i++) {
		snprintf(s, sizeof(s), "10.9.%d.1:4000", i);
		a = sa(s);
		assert_int_equal(ops_conn_admit(&t, &a, later, &victim), OPS_CONN_EVICT);
		assert_true(ops_conn_add(&t, &a, 2000 + i, NULL, later) >= 0);
	}
	a = sa("10.10.0.1:4000");
	assert_int_equal(ops_conn_admit(&t, &a, later, &victim), OPS_CONN_REFUSE_FULL);
	assert_int_equal(victim, -1);
	assert_int_equal(ops_conn_add(&t, &a, 3000, NULL, later), -1);
	assert_int_equal(t.refused, 2);
	/* once the listener closed one, there is room again */
	for (int i = 0; i < OPS_CONN_SLOTS; i++)
		if (t.c[i].closing) {
			ops_conn_remove(&t, i);
			break;
		}
	assert_int_equal(ops_conn_admit(&t, &a, later, &victim), OPS_CONN_EVICT);
}

static void test_ops_conn_slot_calls_out_of_range_are_ignored(void **state)
{
	static struct ops_conns t;

	memset(&t, 0, sizeof(t));
	ops_conn_answered(&t, -1, T0);
	ops_conn_answered(&t, OPS_CONN_SLOTS, T0);
	ops_conn_remove(&t, -1);
	ops_conn_remove(&t, 3);
	assert_int_equal(t.live, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ops_conn_one_address_gets_its_share_and_no_more),
	    cmocka_unit_test(test_ops_conn_a_closed_connection_gives_its_share_back),
	    cmocka_unit_test(test_ops_conn_ipv6_shares_count_per_slash_64),
	    cmocka_unit_test(test_ops_conn_ipv4_mapped_counts_as_ipv4),
	    cmocka_unit_test(test_ops_conn_a_busy_address_still_gets_a_health_check_in),
	    cmocka_unit_test(test_ops_conn_a_trickling_request_expires_at_its_deadline),
	    cmocka_unit_test(test_ops_conn_an_answer_starts_the_next_deadline),
	    cmocka_unit_test(test_ops_conn_a_full_table_keeps_a_reserve_for_health_checks),
	    cmocka_unit_test(test_ops_conn_a_full_reserve_evicts_its_oldest_silent_one),
	    cmocka_unit_test(test_ops_conn_a_full_table_evicts_a_slow_one_of_the_busiest_address),
	    cmocka_unit_test(test_ops_conn_the_busiest_address_gives_way_to_a_fair_share),
	    cmocka_unit_test(test_ops_conn_refuses_when_every_slot_is_closing_or_live),
	    cmocka_unit_test(test_ops_conn_slot_calls_out_of_range_are_ignored),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
