/* SPDX-License-Identifier: ISC */
/* Unit tests for control_sched.c: enrolment backoff, the heartbeat rhythm,
 * status classes and the log-once rule, with time passed in. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "control_sched.h"

#define MS  1000000ull
#define SEC (1000 * MS)
#define MIN (60 * SEC)

static void test_control_sched_backoff_doubles_from_min_to_max(void **state)
{
	(void)state;
	assert_int_equal(ctl_backoff_delay(MIN, 30 * MIN, 0), 0);
	assert_int_equal(ctl_backoff_delay(MIN, 30 * MIN, 1), MIN);
	assert_int_equal(ctl_backoff_delay(MIN, 30 * MIN, 2), 2 * MIN);
	assert_int_equal(ctl_backoff_delay(MIN, 30 * MIN, 3), 4 * MIN);
	assert_int_equal(ctl_backoff_delay(MIN, 30 * MIN, 5), 16 * MIN);
	assert_int_equal(ctl_backoff_delay(MIN, 30 * MIN, 6), 30 * MIN);
	assert_int_equal(ctl_backoff_delay(MIN, 30 * MIN, 7), 30 * MIN);
	/* no overflow however long it fails */
	assert_int_equal(ctl_backoff_delay(MIN, 30 * MIN, UINT32_MAX), 30 * MIN);
	assert_int_equal(ctl_backoff_delay(UINT64_MAX / 3, UINT64_MAX, 40), UINT64_MAX);
	/* min equal to max: no doubling at all */
	assert_int_equal(ctl_backoff_delay(200 * MS, 200 * MS, 4), 200 * MS);
}

static void test_control_sched_failed_enrolments_wait_200_400_800_then_the_cap(void **state)
{
	struct ctl_sched s;
	uint64_t now = 1000 * SEC;
	static const uint64_t want[] = {200 * MS, 400 * MS, 800 * MS, 1000 * MS, 1000 * MS};

	(void)state;
	ctl_sched_init(&s, 500 * MS, 200 * MS, 1000 * MS, false, now);
	assert_int_equal(s.next, now); /* the first attempt at once */
	for (size_t i = 0; i < 5; i++) {
		now = s.next + 3 * MS; /* each attempt took 3 ms */
		ctl_sched_enrolment(&s, CTL_HTTP_ERROR, now);
		assert_false(s.enrolled);
		assert_int_equal(s.failures, i + 1);
		assert_int_equal(s.next - now, want[i]);
	}
	/* success: the first heartbeat at once, the failures forgotten */
	ctl_sched_enrolment(&s, CTL_OK, now);
	assert_true(s.enrolled);
	assert_int_equal(s.failures, 0);
	assert_int_equal(s.next, now);
}

static void test_control_sched_a_refused_bootstrap_token_waits_the_cap(void **state)
{
	struct ctl_sched s;

	(void)state;
	ctl_sched_init(&s, 30 * SEC, MIN, 30 * MIN, false, 0);
	ctl_sched_enrolment(&s, CTL_REFUSED, 5 * SEC);
	assert_int_equal(s.next, 5 * SEC + 30 * MIN);
	/* a timeout after it goes back to the doubling */
	ctl_sched_enrolment(&s, CTL_TIMEOUT, s.next);
	assert_int_equal(s.failures, 2);
	assert_int_equal(s.next, 5 * SEC + 30 * MIN + 2 * MIN);
}

static void test_control_sched_credential_kept_in_memory_only_still_counts_as_enrolled(void **state)
{
	struct ctl_sched s;

	(void)state;
	ctl_sched_init(&s, 30 * SEC, MIN, 30 * MIN, false, 0);
	ctl_sched_enrolment(&s, CTL_STATE_ERROR, 7);
	assert_true(s.enrolled);
	assert_int_equal(s.next, 7);
}

static void test_control_sched_heartbeats_keep_their_rhythm_ok_or_not(void **state)
{
	struct ctl_sched s;
	static const enum ctl_result results[] = {CTL_OK, CTL_HTTP_ERROR, CTL_TIMEOUT, CTL_OK};

	(void)state;
	ctl_sched_init(&s, 500 * MS, MIN, 30 * MIN, true, 10 * SEC);
	for (size_t i = 0; i < 4; i++) {
		uint64_t due = s.next;

		ctl_sched_heartbeat(&s, results[i], due + 40 * MS);
		/* counted from when it was due, not from its end: no drift */
		assert_int_equal(s.next, due + 500 * MS);
	}
	assert_int_equal(s.failures, 0);
}

static void test_control_sched_consecutive_failures_count_until_a_success(void **state)
{
	struct ctl_sched s;

	(void)state;
	ctl_sched_init(&s, SEC, MIN, 30 * MIN, true, 0);
	ctl_sched_heartbeat(&s, CTL_REFUSED, 1);
	ctl_sched_heartbeat(&s, CTL_BAD_ANSWER, s.next + 1);
	ctl_sched_heartbeat(&s, CTL_NETWORK, s.next + 1);
	assert_int_equal(s.failures, 3);
	ctl_sched_heartbeat(&s, CTL_OK, s.next + 1);
	assert_int_equal(s.failures, 0);
}

static void test_control_sched_a_hanging_heartbeat_is_followed_by_the_next_tick_only(void **state)
{
	struct ctl_sched s;

	(void)state;
	ctl_sched_init(&s, 500 * MS, MIN, 30 * MIN, true, 0);
	/* the answer took 1.7 s: ticks at 0.5, 1.0, 1.5 s are gone; the next is 2.0 s */
	ctl_sched_heartbeat(&s, CTL_TIMEOUT, 1700 * MS);
	assert_int_equal(s.next, 2000 * MS);
	/* exactly on a tick: that tick is past, the next one */
	ctl_sched_heartbeat(&s, CTL_TIMEOUT, 2500 * MS);
	assert_int_equal(s.next, 3000 * MS);
}

static void test_control_sched_status_classes(void **state)
{
	(void)state;
	assert_int_equal(ctl_result_of_status(200), CTL_OK);
	assert_int_equal(ctl_result_of_status(204), CTL_OK);
	assert_int_equal(ctl_result_of_status(400), CTL_REFUSED);
	assert_int_equal(ctl_result_of_status(401), CTL_REFUSED);
	assert_int_equal(ctl_result_of_status(403), CTL_REFUSED);
	assert_int_equal(ctl_result_of_status(404), CTL_REFUSED);
	assert_int_equal(ctl_result_of_status(429), CTL_HTTP_ERROR);
	assert_int_equal(ctl_result_of_status(500), CTL_HTTP_ERROR);
	assert_int_equal(ctl_result_of_status(503), CTL_HTTP_ERROR);
	assert_int_equal(ctl_result_of_status(301), CTL_HTTP_ERROR);
	assert_int_equal(ctl_result_of_status(0), CTL_HTTP_ERROR);
}

static void test_control_sched_a_result_is_logged_once_until_it_or_the_count_changes(void **state)
{
	struct ctl_logstate l = {0};

	(void)state;
	assert_true(ctl_log_changed(&l, CTL_OK, 3, NULL));
	assert_false(ctl_log_changed(&l, CTL_OK, 3, NULL));
	assert_false(ctl_log_changed(&l, CTL_OK, 3, NULL));
	assert_true(ctl_log_changed(&l, CTL_OK, 2, NULL));
	assert_true(ctl_log_changed(&l, CTL_HTTP_ERROR, 2, NULL));
	assert_false(ctl_log_changed(&l, CTL_HTTP_ERROR, 2, NULL));
	assert_true(ctl_log_changed(&l, CTL_TIMEOUT, 2, NULL));
	assert_true(ctl_log_changed(&l, CTL_OK, 2, NULL));
	assert_false(ctl_log_changed(&l, CTL_OK, 2, NULL));
}

static void test_control_sched_a_failure_is_logged_again_when_its_reason_changes(void **state)
{
	struct ctl_logstate l = {0};

	(void)state;
	assert_true(ctl_log_changed(&l, CTL_BAD_ANSWER, 1, "route a.test twice"));
	assert_false(ctl_log_changed(&l, CTL_BAD_ANSWER, 1, "route a.test twice"));
	/* The same result, another reason: logged. */
	assert_true(ctl_log_changed(&l, CTL_BAD_ANSWER, 1,
				    "sniRoutes[1] (b.test).upstream: expected a numeric IP:PORT"));
	assert_false(ctl_log_changed(&l, CTL_BAD_ANSWER, 1,
				     "sniRoutes[1] (b.test).upstream: expected a numeric IP:PORT"));
	assert_true(ctl_log_changed(&l, CTL_HTTP_ERROR, 1, "HTTP 503"));
	assert_true(ctl_log_changed(&l, CTL_HTTP_ERROR, 1, "HTTP 502"));
	/* The time libcurl took is not another reason. */
	assert_true(ctl_log_changed(&l, CTL_NETWORK, 1,
				    "Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't "
				    "connect to server"));
	assert_false(
	    ctl_log_changed(&l, CTL_NETWORK, 1,
			    "Failed to connect to 127.0.0.1 port 9 after 1234 ms: Couldn't "
			    "connect to server"));
	assert_true(ctl_log_changed(&l, CTL_NETWORK, 1,
				    "Failed to connect to 127.0.0.1 port 10 after 0 ms: Couldn't "
				    "connect to server"));
	assert_true(ctl_log_changed(&l, CTL_OK, 1, NULL));
	assert_int_equal(ctl_reason_sig(NULL), 0);
	assert_int_equal(ctl_reason_sig(""), 0);
	assert_int_not_equal(ctl_reason_sig("x"), 0);
}

static void test_control_sched_every_result_has_a_name(void **state)
{
	(void)state;
	for (unsigned r = 0; r < CTL_RESULT_COUNT; r++)
		assert_string_not_equal(ctl_result_name(r), "unknown");
	assert_string_equal(ctl_result_name(CTL_RESULT_COUNT), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_control_sched_backoff_doubles_from_min_to_max),
	    cmocka_unit_test(test_control_sched_failed_enrolments_wait_200_400_800_then_the_cap),
	    cmocka_unit_test(test_control_sched_a_refused_bootstrap_token_waits_the_cap),
	    cmocka_unit_test(
		test_control_sched_credential_kept_in_memory_only_still_counts_as_enrolled),
	    cmocka_unit_test(test_control_sched_heartbeats_keep_their_rhythm_ok_or_not),
	    cmocka_unit_test(test_control_sched_consecutive_failures_count_until_a_success),
	    cmocka_unit_test(
		test_control_sched_a_hanging_heartbeat_is_followed_by_the_next_tick_only),
	    cmocka_unit_test(test_control_sched_status_classes),
	    cmocka_unit_test(
		test_control_sched_a_result_is_logged_once_until_it_or_the_count_changes),
	    cmocka_unit_test(test_control_sched_a_failure_is_logged_again_when_its_reason_changes),
	    cmocka_unit_test(test_control_sched_every_result_has_a_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
