/* SPDX-License-Identifier: ISC */
/* Unit tests for heartbeat.c: the probe / heartbeat / flatline state machine. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <string.h>

#include "heartbeat.h"

#define MS	 1000000ull
#define SEC	 1000000000ull
#define INTERVAL (300 * SEC)
#define TIMEOUT	 (3 * SEC)
#define ATTEMPTS 3
#define T0	 (1000 * SEC)

static void init(struct hb *h)
{
	memset(h, 0x5a, sizeof(*h));
	hb_init(h, INTERVAL, TIMEOUT, ATTEMPTS);
}

/* A challenge the game server will echo back untouched: printable, no
 * space, and none of the characters Info_SetValueForKey refuses. */
static void assert_usable_challenge(const char *c)
{
	size_t n = strnlen(c, HB_CHALLENGE_LEN + 1);
	size_t i;

	assert_true(n > 0);
	assert_true(n <= HB_CHALLENGE_LEN);
	for (i = 0; i < n; i++) {
		assert_true(isgraph((unsigned char)c[i]));
		assert_null(strchr("\\;\"", c[i]));
	}
}

/* Start a round at `now`: one probe, attempt 1, deadline now + timeout. */
static void start_round(struct hb *h, uint64_t now, uint64_t rnd)
{
	assert_int_equal(hb_step(h, now, rnd), HB_SEND_PROBE);
	assert_int_equal(h->phase, HB_PROBING);
	assert_int_equal(h->attempt, 1);
	assert_int_equal(h->round_start, now);
	assert_int_equal(hb_deadline(h), now + TIMEOUT);
	assert_usable_challenge(h->challenge);
}

/* Let attempts 1 .. ATTEMPTS-1 of the round begun at `start` time out:
 * each timeout sends the next probe. */
static void fail_retries(struct hb *h, uint64_t start)
{
	unsigned a;

	for (a = 2; a <= ATTEMPTS; a++) {
		uint64_t now = start + (a - 1) * TIMEOUT;

		assert_int_equal(hb_step(h, now - 1, 7), 0);
		assert_int_equal(hb_step(h, now, 7), HB_SEND_PROBE);
		assert_int_equal(h->phase, HB_PROBING);
		assert_int_equal(h->attempt, a);
		assert_int_equal(hb_deadline(h), now + TIMEOUT);
		assert_usable_challenge(h->challenge);
	}
}

/* Run a whole round from `start` in which the server answers nothing;
 * returns the result of the step where the last attempt times out. */
static unsigned failed_round(struct hb *h, uint64_t start, uint64_t rnd)
{
	uint64_t end = start + ATTEMPTS * TIMEOUT;
	unsigned r;

	start_round(h, start, rnd);
	fail_retries(h, start);
	assert_int_equal(hb_step(h, end - 1, 7), 0);
	r = hb_step(h, end, 7);
	assert_int_equal(h->phase, HB_IDLE);
	assert_int_equal(h->server, HB_DOWN);
	/* Down: the next round comes soon, to see it come back. */
	assert_int_equal(hb_deadline(h), end + HB_DOWN_RETRY);
	/* Every failed round says so; the rest of the mask is what varies. */
	assert_true(r & HB_ROUND_FAILED);
	return r & ~(unsigned)HB_ROUND_FAILED;
}

/* A round from `start` answered on the first attempt. */
static unsigned answered_round(struct hb *h, uint64_t start, uint64_t rnd)
{
	char ch[HB_CHALLENGE_LEN + 1];
	unsigned r;

	start_round(h, start, rnd);
	memcpy(ch, h->challenge, sizeof(ch));
	r = hb_probe_answered(h, start + 20 * MS, ch);
	assert_int_equal(h->phase, HB_IDLE);
	assert_int_equal(h->server, HB_UP);
	assert_int_equal(hb_deadline(h), start + INTERVAL);
	return r;
}

/* Setup */

static void test_hb_init_stores_parameters_and_starts_unknown(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	assert_int_equal(h.interval, INTERVAL);
	assert_int_equal(h.probe_timeout, TIMEOUT);
	assert_int_equal(h.attempts, ATTEMPTS);
	assert_int_equal(h.server, HB_UNKNOWN);
	/* The first round is due at once. */
	assert_int_equal(hb_deadline(&h), 0);
}

static void test_hb_first_step_sends_probe_with_printable_challenge(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	start_round(&h, T0, 0x0123456789abcdefull);
	assert_int_equal(h.server, HB_UNKNOWN);

	init(&h);
	start_round(&h, T0, 0); /* a zero seed still makes a challenge */
}

static void test_hb_challenge_depends_on_rnd(void **state)
{
	struct hb a, b;

	(void)state;
	init(&a);
	init(&b);
	start_round(&a, T0, 1);
	start_round(&b, T0, 0xfeedface12345678ull);
	assert_string_not_equal(a.challenge, b.challenge);
}

static void test_hb_step_before_probe_deadline_does_nothing(void **state)
{
	struct hb h;
	char ch[HB_CHALLENGE_LEN + 1];

	(void)state;
	init(&h);
	start_round(&h, T0, 42);
	memcpy(ch, h.challenge, sizeof(ch));
	assert_int_equal(hb_step(&h, T0, 43), 0);
	assert_int_equal(hb_step(&h, T0 + 1 * SEC, 44), 0);
	assert_int_equal(hb_step(&h, T0 + TIMEOUT - 1, 45), 0);
	assert_int_equal(h.attempt, 1);
	assert_int_equal(h.phase, HB_PROBING);
	assert_int_equal(hb_deadline(&h), T0 + TIMEOUT);
	assert_string_equal(h.challenge, ch);
}

/* Answers */

static void test_hb_answer_on_first_attempt_sends_heartbeat_and_logs_up(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	assert_int_equal(answered_round(&h, T0, 42), HB_SEND_HEARTBEAT | HB_LOG_UP);
	/* Idle until the next round. */
	assert_int_equal(hb_step(&h, T0 + TIMEOUT, 1), 0);
	assert_int_equal(hb_step(&h, T0 + INTERVAL - 1, 1), 0);
	assert_int_equal(h.phase, HB_IDLE);
	assert_int_equal(hb_deadline(&h), T0 + INTERVAL);
}

static void test_hb_answer_on_second_attempt_sends_heartbeat_and_logs_up(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	start_round(&h, T0, 42);
	assert_int_equal(hb_step(&h, T0 + TIMEOUT, 43), HB_SEND_PROBE);
	assert_int_equal(h.attempt, 2);
	assert_int_equal(hb_deadline(&h), T0 + 2 * TIMEOUT);
	assert_int_equal(hb_probe_answered(&h, T0 + TIMEOUT + 5 * MS, h.challenge),
			 HB_SEND_HEARTBEAT | HB_LOG_UP);
	assert_int_equal(h.server, HB_UP);
	assert_int_equal(h.phase, HB_IDLE);
	assert_int_equal(hb_deadline(&h), T0 + INTERVAL);
}

static void test_hb_answer_on_third_attempt_sends_heartbeat_and_logs_up(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	start_round(&h, T0, 42);
	fail_retries(&h, T0);
	assert_int_equal(h.attempt, 3);
	assert_int_equal(hb_deadline(&h), T0 + 3 * TIMEOUT);
	assert_int_equal(hb_probe_answered(&h, T0 + 3 * TIMEOUT - 1, h.challenge),
			 HB_SEND_HEARTBEAT | HB_LOG_UP);
	assert_int_equal(h.server, HB_UP);
	assert_int_equal(h.phase, HB_IDLE);
	/* The next round counts from the round's start, not the answer. */
	assert_int_equal(hb_deadline(&h), T0 + INTERVAL);
	assert_int_equal(hb_step(&h, T0 + 3 * TIMEOUT, 1), 0);
}

static void test_hb_answer_with_wrong_challenge_is_ignored(void **state)
{
	struct hb h;
	char ch[HB_CHALLENGE_LEN + 1];
	char longer[HB_CHALLENGE_LEN + 2];
	size_t n;

	(void)state;
	init(&h);
	start_round(&h, T0, 42);
	memcpy(ch, h.challenge, sizeof(ch));
	n = strlen(ch);

	assert_int_equal(hb_probe_answered(&h, T0 + MS, "not-the-challenge"), 0);
	assert_int_equal(hb_probe_answered(&h, T0 + MS, ""), 0);
	if (n > 1) {
		char prefix[HB_CHALLENGE_LEN + 1];

		memcpy(prefix, ch, n - 1);
		prefix[n - 1] = '\0';
		assert_int_equal(hb_probe_answered(&h, T0 + MS, prefix), 0);
	}
	memcpy(longer, ch, n);
	longer[n] = 'x';
	longer[n + 1] = '\0';
	assert_int_equal(hb_probe_answered(&h, T0 + MS, longer), 0);

	assert_int_equal(h.server, HB_UNKNOWN);
	assert_int_equal(h.phase, HB_PROBING);
	assert_int_equal(hb_deadline(&h), T0 + TIMEOUT);

	assert_int_equal(hb_probe_answered(&h, T0 + 2 * MS, ch), HB_SEND_HEARTBEAT | HB_LOG_UP);
}

static void test_hb_second_answer_to_the_same_probe_sends_nothing(void **state)
{
	struct hb h;
	char ch[HB_CHALLENGE_LEN + 1];

	(void)state;
	init(&h);
	start_round(&h, T0, 42);
	memcpy(ch, h.challenge, sizeof(ch));
	assert_int_equal(hb_probe_answered(&h, T0 + MS, ch), HB_SEND_HEARTBEAT | HB_LOG_UP);
	assert_int_equal(hb_probe_answered(&h, T0 + 2 * MS, ch), 0);
	assert_int_equal(h.server, HB_UP);
	assert_int_equal(hb_deadline(&h), T0 + INTERVAL);
}

static void test_hb_answer_with_previous_rounds_challenge_is_ignored(void **state)
{
	struct hb h;
	char old[HB_CHALLENGE_LEN + 1];

	(void)state;
	init(&h);
	assert_int_equal(answered_round(&h, T0, 1111), HB_SEND_HEARTBEAT | HB_LOG_UP);
	memcpy(old, h.challenge, sizeof(old));

	start_round(&h, T0 + INTERVAL, 2222);
	assert_string_not_equal(h.challenge, old);
	assert_int_equal(hb_probe_answered(&h, T0 + INTERVAL + MS, old), 0);
	assert_int_equal(h.phase, HB_PROBING);
	assert_int_equal(hb_probe_answered(&h, T0 + INTERVAL + MS, h.challenge), HB_SEND_HEARTBEAT);
}

static void test_hb_steady_up_sends_heartbeat_every_round_without_logging(void **state)
{
	struct hb h;
	uint64_t r;

	(void)state;
	init(&h);
	assert_int_equal(answered_round(&h, T0, 1), HB_SEND_HEARTBEAT | HB_LOG_UP);
	for (r = 1; r <= 5; r++) {
		assert_int_equal(hb_step(&h, T0 + r * INTERVAL - 1, 9), 0);
		assert_int_equal(answered_round(&h, T0 + r * INTERVAL, 100 + r), HB_SEND_HEARTBEAT);
	}
}

/* Failures */

static void test_hb_all_attempts_failing_from_unknown_marks_down_without_flatline(void **state)
{
	struct hb h;
	unsigned r;

	(void)state;
	init(&h);
	r = failed_round(&h, T0, 42);
	assert_int_equal(r & HB_SEND_FLATLINE, 0);
	assert_int_equal(r & HB_SEND_HEARTBEAT, 0);
	assert_int_equal(r & HB_SEND_PROBE, 0);
	assert_int_equal(r & HB_LOG_UP, 0);
	assert_int_equal(r, HB_LOG_DOWN);
	assert_int_equal(hb_step(&h, T0 + ATTEMPTS * TIMEOUT + HB_DOWN_RETRY - 1, 1), 0);
}

static void test_hb_all_attempts_failing_after_up_flatlines_exactly_once(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	assert_int_equal(answered_round(&h, T0, 1), HB_SEND_HEARTBEAT | HB_LOG_UP);
	assert_int_equal(failed_round(&h, T0 + INTERVAL, 2), HB_SEND_FLATLINE | HB_LOG_DOWN);
	/* The next failing round is silent: no second flatline, no log. */
	assert_int_equal(failed_round(&h, T0 + 2 * INTERVAL, 3), 0);
	assert_int_equal(failed_round(&h, T0 + 3 * INTERVAL, 4), 0);
}

static void test_hb_no_heartbeat_while_down(void **state)
{
	struct hb h;
	uint64_t start = T0 + INTERVAL;
	uint64_t t;
	unsigned r;

	(void)state;
	init(&h);
	assert_int_equal(answered_round(&h, T0, 1), HB_SEND_HEARTBEAT | HB_LOG_UP);
	assert_int_equal(failed_round(&h, start, 2), HB_SEND_FLATLINE | HB_LOG_DOWN);

	/* Tick through a whole down interval every half second: rounds keep
	 * coming (HB_DOWN_RETRY apart), none says more than "probe". */
	unsigned probes = 0;

	start += INTERVAL;
	for (t = start - INTERVAL + ATTEMPTS * TIMEOUT + 1; t <= start + ATTEMPTS * TIMEOUT;
	     t += SEC / 2) {
		r = hb_step(&h, t, 5);
		assert_int_equal(
		    r & (HB_SEND_HEARTBEAT | HB_SEND_FLATLINE | HB_LOG_UP | HB_LOG_DOWN), 0);
		probes += (r & HB_SEND_PROBE) != 0;
	}
	assert_true(probes >= INTERVAL / (HB_DOWN_RETRY + ATTEMPTS * TIMEOUT + SEC) * ATTEMPTS);
	assert_true(probes <=
		    INTERVAL / (HB_DOWN_RETRY + ATTEMPTS * TIMEOUT) * ATTEMPTS + ATTEMPTS);
	assert_int_equal(h.server, HB_DOWN);
	assert_int_equal(hb_probe_answered(&h, t, "wrong"), 0);
	assert_int_equal(h.server, HB_DOWN);
}

static void test_hb_recovery_sends_heartbeat_and_logs_up(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	assert_int_equal(answered_round(&h, T0, 1), HB_SEND_HEARTBEAT | HB_LOG_UP);
	assert_int_equal(failed_round(&h, T0 + INTERVAL, 2), HB_SEND_FLATLINE | HB_LOG_DOWN);
	assert_int_equal(failed_round(&h, T0 + 2 * INTERVAL, 3), 0);
	assert_int_equal(answered_round(&h, T0 + 3 * INTERVAL, 4), HB_SEND_HEARTBEAT | HB_LOG_UP);
	assert_int_equal(answered_round(&h, T0 + 4 * INTERVAL, 5), HB_SEND_HEARTBEAT);
}

static void test_hb_recovery_from_never_up_sends_heartbeat_and_logs_up(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	(void)failed_round(&h, T0, 1);
	assert_int_equal(answered_round(&h, T0 + INTERVAL, 2), HB_SEND_HEARTBEAT | HB_LOG_UP);
}

static void test_hb_single_attempt_rounds_flatline_after_one_timeout(void **state)
{
	struct hb h;
	char ch[HB_CHALLENGE_LEN + 1];

	(void)state;
	hb_init(&h, INTERVAL, TIMEOUT, 1);
	assert_int_equal(hb_step(&h, T0, 1), HB_SEND_PROBE);
	memcpy(ch, h.challenge, sizeof(ch));
	assert_int_equal(hb_probe_answered(&h, T0 + MS, ch), HB_SEND_HEARTBEAT | HB_LOG_UP);
	assert_int_equal(hb_step(&h, T0 + INTERVAL, 2), HB_SEND_PROBE);
	assert_int_equal(hb_step(&h, T0 + INTERVAL + TIMEOUT, 3),
			 HB_ROUND_FAILED | HB_SEND_FLATLINE | HB_LOG_DOWN);
	assert_int_equal(h.server, HB_DOWN);
	assert_int_equal(hb_deadline(&h), T0 + INTERVAL + TIMEOUT + HB_DOWN_RETRY);
}

/* Shutdown */

static void test_hb_shutdown_flatlines_only_when_up(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	assert_int_equal(hb_shutdown(&h), 0); /* never stepped */

	init(&h);
	start_round(&h, T0, 1);
	assert_int_equal(hb_shutdown(&h), 0); /* still unknown */

	init(&h);
	(void)failed_round(&h, T0, 1);
	assert_int_equal(hb_shutdown(&h), 0); /* never up */

	init(&h);
	assert_int_equal(answered_round(&h, T0, 1), HB_SEND_HEARTBEAT | HB_LOG_UP);
	assert_int_equal(hb_shutdown(&h), HB_SEND_FLATLINE);

	init(&h);
	assert_int_equal(answered_round(&h, T0, 1), HB_SEND_HEARTBEAT | HB_LOG_UP);
	start_round(&h, T0 + INTERVAL, 2); /* up, a probe out */
	assert_int_equal(hb_shutdown(&h), HB_SEND_FLATLINE);

	init(&h);
	assert_int_equal(answered_round(&h, T0, 1), HB_SEND_HEARTBEAT | HB_LOG_UP);
	assert_int_equal(failed_round(&h, T0 + INTERVAL, 2), HB_SEND_FLATLINE | HB_LOG_DOWN);
	assert_int_equal(hb_shutdown(&h), 0); /* already flatlined */
}

static void test_hb_server_names_are_distinct(void **state)
{
	const char *u = hb_server_name(HB_UNKNOWN);
	const char *up = hb_server_name(HB_UP);
	const char *d = hb_server_name(HB_DOWN);

	(void)state;
	assert_non_null(u);
	assert_non_null(up);
	assert_non_null(d);
	assert_true(u[0] != '\0' && up[0] != '\0' && d[0] != '\0');
	assert_string_not_equal(u, up);
	assert_string_not_equal(u, d);
	assert_string_not_equal(up, d);
}

/* Early rounds: a refused send, or the server heard from again */

static void test_hb_refused_while_up_starts_a_round_at_once(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	answered_round(&h, T0, 1);
	hb_refused(&h, T0 + 60 * SEC);
	assert_int_equal(hb_deadline(&h), T0 + 60 * SEC);
	start_round(&h, T0 + 60 * SEC, 2);
}

static void test_hb_refused_while_down_changes_nothing(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	failed_round(&h, T0, 1);
	hb_refused(&h, T0 + 60 * SEC);
	assert_int_equal(hb_deadline(&h), T0 + ATTEMPTS * TIMEOUT + HB_DOWN_RETRY);
}

static void test_hb_refused_while_probing_changes_nothing(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	start_round(&h, T0, 1);
	hb_refused(&h, T0 + 1 * SEC);
	hb_heard(&h, T0 + 1 * SEC);
	assert_int_equal(h.phase, HB_PROBING);
	assert_int_equal(hb_deadline(&h), T0 + TIMEOUT);
}

static void test_hb_early_rounds_start_at_most_once_per_kick_gap(void **state)
{
	struct hb h;
	uint64_t t = T0 + 1 * SEC;

	(void)state;
	init(&h);
	answered_round(&h, T0, 1);
	/* Refused a second after a regular round: at once. */
	hb_refused(&h, t);
	assert_int_equal(hb_deadline(&h), t);
	answered_round(&h, t, 2);
	/* Refused again a second later: not before the gap. */
	hb_refused(&h, t + 1 * SEC);
	assert_int_equal(hb_deadline(&h), t + HB_KICK_GAP);
	assert_int_equal(hb_step(&h, t + HB_KICK_GAP - 1, 2), 0);
	start_round(&h, t + HB_KICK_GAP, 3);
	/* Refusals while that round runs add nothing. */
	for (int i = 0; i < 100; i++)
		hb_refused(&h, t + HB_KICK_GAP + (uint64_t)i * MS);
	assert_int_equal(hb_deadline(&h), t + HB_KICK_GAP + TIMEOUT);
}

static void test_hb_heard_while_down_starts_a_round_that_announces_up(void **state)
{
	struct hb h;
	/* A second after the round that found it down: before the retry. */
	uint64_t t = T0 + INTERVAL + ATTEMPTS * TIMEOUT + 1 * SEC;

	(void)state;
	init(&h);
	answered_round(&h, T0, 1);
	assert_int_equal(failed_round(&h, T0 + INTERVAL, 2), HB_SEND_FLATLINE | HB_LOG_DOWN);
	assert_true(hb_deadline(&h) > t);
	hb_heard(&h, t);
	assert_int_equal(hb_deadline(&h), t);
	assert_int_equal(answered_round(&h, t, 3), HB_SEND_HEARTBEAT | HB_LOG_UP);
}

static void test_hb_heard_while_up_changes_nothing(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	answered_round(&h, T0, 1);
	hb_heard(&h, T0 + 60 * SEC);
	assert_int_equal(hb_deadline(&h), T0 + INTERVAL);
}

static void test_hb_refused_probes_end_the_round_within_seconds(void **state)
{
	struct hb h;
	uint64_t t = T0 + 100 * SEC;
	unsigned r = 0;

	(void)state;
	init(&h);
	answered_round(&h, T0, 1);
	hb_refused(&h, t);
	start_round(&h, t, 2);
	/* Each probe is refused a millisecond after it left. */
	for (unsigned a = 1; a <= ATTEMPTS; a++) {
		hb_probe_refused(&h, t + 1 * MS);
		assert_int_equal(hb_deadline(&h), t + 1 * MS + HB_REFUSED_WAIT);
		t += 1 * MS + HB_REFUSED_WAIT;
		r = hb_step(&h, t, 7);
		if (a < ATTEMPTS)
			assert_int_equal(r, HB_SEND_PROBE);
	}
	assert_int_equal(r, HB_ROUND_FAILED | HB_SEND_FLATLINE | HB_LOG_DOWN);
	assert_int_equal(h.server, HB_DOWN);
	assert_true(t < T0 + 100 * SEC + ATTEMPTS * TIMEOUT);
}

static void test_hb_probe_refused_never_extends_an_attempt(void **state)
{
	struct hb h;

	(void)state;
	init(&h);
	start_round(&h, T0, 1);
	hb_probe_refused(&h, T0 + TIMEOUT - 10 * MS);
	assert_int_equal(hb_deadline(&h), T0 + TIMEOUT);
	/* Idle: a late refusal of the last round's probe changes nothing. */
	init(&h);
	answered_round(&h, T0, 1);
	hb_probe_refused(&h, T0 + 1 * SEC);
	assert_int_equal(hb_deadline(&h), T0 + INTERVAL);
}

/* Master health */

static void test_hb_master_that_never_challenges_goes_quiet_once_after_two_intervals(void **state)
{
	struct hb_master m = {0};

	(void)state;
	assert_int_equal(hb_master_deadline(&m, INTERVAL), UINT64_MAX);
	hb_master_heartbeat(&m, T0);
	hb_master_heartbeat(&m, T0 + INTERVAL); /* the first unanswered one counts */
	assert_int_equal(hb_master_deadline(&m, INTERVAL), T0 + 2 * INTERVAL);
	assert_int_equal(hb_master_check(&m, T0 + 2 * INTERVAL - 1, INTERVAL), 0);
	assert_int_equal(hb_master_check(&m, T0 + 2 * INTERVAL, INTERVAL), HB_MASTER_WENT_QUIET);
	assert_int_equal(m.state, HB_MASTER_QUIET);
	hb_master_heartbeat(&m, T0 + 2 * INTERVAL);
	assert_int_equal(hb_master_check(&m, T0 + 9 * INTERVAL, INTERVAL), 0);
	assert_int_equal(hb_master_deadline(&m, INTERVAL), UINT64_MAX);
}

static void test_hb_master_that_challenges_every_round_stays_listed(void **state)
{
	struct hb_master m = {0};

	(void)state;
	hb_master_heartbeat(&m, T0);
	assert_int_equal(hb_master_challenged(&m, T0 + 50 * MS), HB_MASTER_CONFIRMED);
	for (uint64_t k = 1; k < 20; k++) {
		hb_master_heartbeat(&m, T0 + k * INTERVAL);
		assert_int_equal(hb_master_check(&m, T0 + k * INTERVAL + 40 * MS, INTERVAL), 0);
		assert_int_equal(hb_master_challenged(&m, T0 + k * INTERVAL + 50 * MS), 0);
	}
	assert_int_equal(m.state, HB_MASTER_LISTED);
	assert_int_equal(m.last_challenge, T0 + 19 * INTERVAL + 50 * MS);
}

static void test_hb_master_one_lost_challenge_is_not_quiet(void **state)
{
	struct hb_master m = {0};

	(void)state;
	hb_master_heartbeat(&m, T0);
	hb_master_challenged(&m, T0 + 50 * MS);
	hb_master_heartbeat(&m, T0 + INTERVAL); /* its challenge is lost */
	hb_master_heartbeat(&m, T0 + 2 * INTERVAL);
	assert_int_equal(hb_master_check(&m, T0 + 2 * INTERVAL + 40 * MS, INTERVAL), 0);
	assert_int_equal(hb_master_challenged(&m, T0 + 2 * INTERVAL + 50 * MS), 0);
	assert_int_equal(hb_master_check(&m, T0 + 9 * INTERVAL, INTERVAL), 0);
}

static void test_hb_master_challenging_after_quiet_is_back(void **state)
{
	struct hb_master m = {0};

	(void)state;
	hb_master_heartbeat(&m, T0);
	hb_master_challenged(&m, T0 + 50 * MS);
	hb_master_heartbeat(&m, T0 + INTERVAL);
	assert_int_equal(hb_master_check(&m, T0 + 3 * INTERVAL, INTERVAL), HB_MASTER_WENT_QUIET);
	assert_int_equal(hb_master_challenged(&m, T0 + 3 * INTERVAL + 50 * MS), HB_MASTER_BACK);
	assert_int_equal(m.state, HB_MASTER_LISTED);
	assert_int_equal(hb_master_deadline(&m, INTERVAL), UINT64_MAX);
}

static void test_hb_master_withdrawn_listing_is_confirmed_anew_and_not_quiet(void **state)
{
	struct hb_master m = {0};

	(void)state;
	hb_master_heartbeat(&m, T0);
	hb_master_challenged(&m, T0 + 50 * MS);
	hb_master_heartbeat(&m, T0 + INTERVAL);
	hb_master_withdrawn(&m); /* server down: no heartbeats, no challenges owed */
	assert_int_equal(m.state, HB_MASTER_NEW);
	assert_int_equal(hb_master_check(&m, T0 + 9 * INTERVAL, INTERVAL), 0);
	hb_master_heartbeat(&m, T0 + 10 * INTERVAL);
	assert_int_equal(hb_master_challenged(&m, T0 + 10 * INTERVAL + 50 * MS),
			 HB_MASTER_CONFIRMED);
}

static void test_hb_down_server_is_probed_again_soon_and_its_return_heartbeats_at_once(void **state)
{
	struct hb h;
	uint64_t end = T0 + INTERVAL + ATTEMPTS * TIMEOUT;

	(void)state;
	init(&h);
	answered_round(&h, T0, 1);
	assert_int_equal(failed_round(&h, T0 + INTERVAL, 2), HB_SEND_FLATLINE | HB_LOG_DOWN);
	/* Not at the next interval: HB_DOWN_RETRY after the failed round. */
	assert_int_equal(hb_deadline(&h), end + HB_DOWN_RETRY);
	assert_int_equal(failed_round(&h, end + HB_DOWN_RETRY, 3), 0);
	end += HB_DOWN_RETRY + ATTEMPTS * TIMEOUT;
	assert_int_equal(answered_round(&h, end + HB_DOWN_RETRY, 4), HB_SEND_HEARTBEAT | HB_LOG_UP);
	/* Up again: back to the interval. */
	assert_int_equal(hb_deadline(&h), end + HB_DOWN_RETRY + INTERVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hb_init_stores_parameters_and_starts_unknown),
	    cmocka_unit_test(test_hb_first_step_sends_probe_with_printable_challenge),
	    cmocka_unit_test(test_hb_challenge_depends_on_rnd),
	    cmocka_unit_test(test_hb_step_before_probe_deadline_does_nothing),
	    cmocka_unit_test(test_hb_answer_on_first_attempt_sends_heartbeat_and_logs_up),
	    cmocka_unit_test(test_hb_answer_on_second_attempt_sends_heartbeat_and_logs_up),
	    cmocka_unit_test(test_hb_answer_on_third_attempt_sends_heartbeat_and_logs_up),
	    cmocka_unit_test(test_hb_answer_with_wrong_challenge_is_ignored),
	    cmocka_unit_test(test_hb_second_answer_to_the_same_probe_sends_nothing),
	    cmocka_unit_test(test_hb_answer_with_previous_rounds_challenge_is_ignored),
	    cmocka_unit_test(test_hb_steady_up_sends_heartbeat_every_round_without_logging),
	    cmocka_unit_test(test_hb_all_attempts_failing_from_unknown_marks_down_without_flatline),
	    cmocka_unit_test(test_hb_all_attempts_failing_after_up_flatlines_exactly_once),
	    cmocka_unit_test(test_hb_no_heartbeat_while_down),
	    cmocka_unit_test(test_hb_recovery_sends_heartbeat_and_logs_up),
	    cmocka_unit_test(test_hb_recovery_from_never_up_sends_heartbeat_and_logs_up),
	    cmocka_unit_test(test_hb_single_attempt_rounds_flatline_after_one_timeout),
	    cmocka_unit_test(test_hb_shutdown_flatlines_only_when_up),
	    cmocka_unit_test(test_hb_server_names_are_distinct),
	    cmocka_unit_test(test_hb_refused_while_up_starts_a_round_at_once),
	    cmocka_unit_test(test_hb_refused_while_down_changes_nothing),
	    cmocka_unit_test(test_hb_refused_while_probing_changes_nothing),
	    cmocka_unit_test(test_hb_early_rounds_start_at_most_once_per_kick_gap),
	    cmocka_unit_test(test_hb_heard_while_down_starts_a_round_that_announces_up),
	    cmocka_unit_test(test_hb_heard_while_up_changes_nothing),
	    cmocka_unit_test(
		test_hb_down_server_is_probed_again_soon_and_its_return_heartbeats_at_once),
	    cmocka_unit_test(test_hb_refused_probes_end_the_round_within_seconds),
	    cmocka_unit_test(test_hb_probe_refused_never_extends_an_attempt),
	    cmocka_unit_test(
		test_hb_master_that_never_challenges_goes_quiet_once_after_two_intervals),
	    cmocka_unit_test(test_hb_master_that_challenges_every_round_stays_listed),
	    cmocka_unit_test(test_hb_master_one_lost_challenge_is_not_quiet),
	    cmocka_unit_test(test_hb_master_challenging_after_quiet_is_back),
	    cmocka_unit_test(test_hb_master_withdrawn_listing_is_confirmed_anew_and_not_quiet),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
