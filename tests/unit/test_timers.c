/* SPDX-License-Identifier: ISC */
/* Unit tests for timers.c: the heap of deadlines the loop sleeps on. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "timers.h"

static void test_timers_an_empty_heap_has_no_deadline(void **state)
{
	struct timers q;

	(void)state;
	timers_init(&q);
	assert_int_equal(timers_next(&q), UINT64_MAX);
	assert_null(timers_pop(&q, UINT64_MAX));
	timers_free(&q);
}

static void test_timers_pop_in_deadline_order_and_only_when_due(void **state)
{
	struct timers q;
	struct timer t[5];
	const uint64_t at[5] = {50, 10, 40, 20, 30};

	(void)state;
	timers_init(&q);
	for (int i = 0; i < 5; i++) {
		timer_init(&t[i], (uint32_t)i);
		assert_int_equal(timers_set(&q, &t[i], at[i]), 0);
	}
	assert_int_equal(timers_next(&q), 10);
	assert_null(timers_pop(&q, 9));
	assert_int_equal(timers_pop(&q, 25)->id, 1);
	assert_int_equal(timers_pop(&q, 25)->id, 3);
	assert_null(timers_pop(&q, 25));
	assert_false(timer_armed(&t[1]));
	assert_true(timer_armed(&t[0]));
	assert_int_equal(timers_next(&q), 30);
	timers_free(&q);
	assert_false(timer_armed(&t[0]));
}

static void test_timers_a_moved_timer_keeps_one_place(void **state)
{
	struct timers q;
	struct timer a, b;

	(void)state;
	timers_init(&q);
	timer_init(&a, 1);
	timer_init(&b, 2);
	timers_set(&q, &a, 100);
	timers_set(&q, &b, 200);
	timers_set(&q, &a, 300); /* later: b is first now */
	assert_int_equal(timers_next(&q), 200);
	timers_set(&q, &a, 5); /* earlier again */
	assert_int_equal(q.n, 2);
	assert_int_equal(timers_pop(&q, 1000)->id, 1);
	assert_int_equal(timers_pop(&q, 1000)->id, 2);
	assert_null(timers_pop(&q, 1000));
	timers_free(&q);
}

static void test_timers_a_cancelled_timer_never_fires(void **state)
{
	struct timers q;
	struct timer a, b, c;

	(void)state;
	timers_init(&q);
	timer_init(&a, 1);
	timer_init(&b, 2);
	timer_init(&c, 3);
	timers_set(&q, &a, 10);
	timers_set(&q, &b, 20);
	timers_set(&q, &c, 30);
	timers_cancel(&q, &a);
	timers_cancel(&q, &a); /* idle: nothing */
	assert_int_equal(timers_next(&q), 20);
	timers_cancel(&q, &c);
	assert_int_equal(timers_pop(&q, 100)->id, 2);
	assert_null(timers_pop(&q, 100));
	/* A cancelled timer may be armed again. */
	timers_set(&q, &a, 7);
	assert_int_equal(timers_pop(&q, 7)->id, 1);
	timers_free(&q);
}

/* xorshift: the same sequence on every run. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Random sets, moves, cancels and pops against a plain array: the heap
 * always hands out the earliest armed deadline. */
static void test_timers_agree_with_a_linear_scan(void **state)
{
	enum { N = 300, STEPS = 20000 };
	static struct timer t[N];
	struct timers q;
	uint64_t s = 0x9e3779b97f4a7c15ull, now = 0;

	(void)state;
	timers_init(&q);
	for (uint32_t i = 0; i < N; i++)
		timer_init(&t[i], i);
	for (int step = 0; step < STEPS; step++) {
		uint32_t i = (uint32_t)(rnd(&s) % N);
		uint64_t min = UINT64_MAX;
		unsigned op = (unsigned)(rnd(&s) % 4);

		if (op <= 1)
			assert_int_equal(timers_set(&q, &t[i], now + rnd(&s) % 1000), 0);
		else if (op == 2)
			timers_cancel(&q, &t[i]);
		for (uint32_t k = 0; k < N; k++)
			if (timer_armed(&t[k]) && t[k].at < min)
				min = t[k].at;
		assert_int_equal(timers_next(&q), min);
		if (op == 3) {
			struct timer *p;

			now += rnd(&s) % 300;
			while ((p = timers_pop(&q, now))) {
				assert_true(p->at <= now);
				assert_false(timer_armed(p));
			}
			assert_true(timers_next(&q) > now);
		}
	}
	timers_free(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_timers_an_empty_heap_has_no_deadline),
	    cmocka_unit_test(test_timers_pop_in_deadline_order_and_only_when_due),
	    cmocka_unit_test(test_timers_a_moved_timer_keeps_one_place),
	    cmocka_unit_test(test_timers_a_cancelled_timer_never_fires),
	    cmocka_unit_test(test_timers_agree_with_a_linear_scan),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
