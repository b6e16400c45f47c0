/* SPDX-License-Identifier: ISC */
/* Unit tests for certsched.c: the tunnel certificate's schedule as seed 002
 * gives it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "certsched.h"

#define MIN (60ull * 1000)
#define DAY (24ull * 60 * MIN)

static void test_certsched_asks_at_start_and_backs_off_to_thirty_minutes(void **state)
{
	static const uint64_t waits[] = {1, 2, 4, 8, 16, 30, 30, 30};
	struct certsched s;
	uint64_t now = 5000;

	(void)state;
	certsched_init(&s, now);
	assert_int_equal(s.due, now);
	for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
		uint64_t due = certsched_done(&s, now, CERTSCHED_FAILED, 0, 0);

		assert_int_equal(due - now, waits[i] * MIN);
		now = due;
	}
	/* A success starts the back-off over. */
	certsched_done(&s, now, CERTSCHED_OK, 90 * DAY, 0);
	assert_int_equal(certsched_done(&s, now, CERTSCHED_FAILED, 0, 0) - now, 1 * MIN);
}

static void test_certsched_waits_an_hour_when_none_is_offered(void **state)
{
	struct certsched s;

	(void)state;
	certsched_init(&s, 0);
	certsched_done(&s, 0, CERTSCHED_FAILED, 0, 0);
	certsched_done(&s, 1 * MIN, CERTSCHED_FAILED, 0, 0);
	assert_int_equal(certsched_done(&s, 3 * MIN, CERTSCHED_NOT_OFFERED, 0, 0), 63 * MIN);
	/* and a failure after that starts at a minute again */
	assert_int_equal(certsched_done(&s, 63 * MIN, CERTSCHED_FAILED, 0, 0), 64 * MIN);
}

static void test_certsched_renews_at_two_thirds_of_the_lifetime(void **state)
{
	struct certsched s;

	(void)state;
	certsched_init(&s, 0);
	/* 90 days, just issued: renew after 60 days. */
	assert_int_equal(certsched_done(&s, 1000, CERTSCHED_OK, 90 * DAY, 0), 1000 + 60 * DAY);
	/* 90 days, issued 30 days ago (a restart): 30 days from now. */
	assert_int_equal(certsched_done(&s, 0, CERTSCHED_OK, 60 * DAY, 30 * DAY), 30 * DAY);
	/* Past two thirds already: soon, but not in a loop. */
	assert_int_equal(certsched_done(&s, 0, CERTSCHED_OK, 10 * DAY, 80 * DAY), 1 * MIN);
	/* Scaled down for a test: the same shape. */
	s.retry_first = 100;
	assert_int_equal(certsched_done(&s, 0, CERTSCHED_OK, 3000, 0), 2000);
}

/* attack15 F7: a certificate with 3 s left was renewed every
 * retry_first; one under the floor is refused, a failure on its
 * schedule. */
static void test_certsched_floor_is_ten_retries_at_most_ten_minutes(void **state)
{
	struct certsched s;

	(void)state;
	certsched_init(&s, 0);
	assert_int_equal(certsched_floor(&s), 10 * MIN);
	s.retry_first = 300; /* a test's 0.3 s */
	assert_int_equal(certsched_floor(&s), 3000);
	s.retry_first = 30 * MIN;
	assert_int_equal(certsched_floor(&s), 10 * MIN);
	certsched_init(&s, 0);
	assert_int_equal(certsched_done(&s, 0, CERTSCHED_SHORT, 3000, 0), 1 * MIN);
	assert_int_equal(certsched_done(&s, 1 * MIN, CERTSCHED_SHORT, 3000, 0), 3 * MIN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_certsched_asks_at_start_and_backs_off_to_thirty_minutes),
	    cmocka_unit_test(test_certsched_waits_an_hour_when_none_is_offered),
	    cmocka_unit_test(test_certsched_renews_at_two_thirds_of_the_lifetime),
	    cmocka_unit_test(test_certsched_floor_is_ten_retries_at_most_ten_minutes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
