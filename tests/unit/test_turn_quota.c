/* SPDX-License-Identifier: ISC */
/* Unit tests for the user-quota a TURN listener's workers share
 * (turn_shared.c): counts per userid, 486 at the quota, a bounded table of
 * userids, and two threads taking and giving back at once. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "turn.h"

static const uint8_t hkey[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static enum turn_alloc_err take(struct turn_quota *q, const char *u, uint32_t *e)
{
	return turn_quota_take(q, u, strlen(u), e);
}

static uint32_t count(struct turn_quota *q, const char *u)
{
	return turn_quota_count(q, u, strlen(u));
}

static void test_quota_counts_per_userid_and_answers_486(void **state)
{
	struct turn_quota q;
	uint32_t a[3], b, x;

	(void)state;
	assert_int_equal(turn_quota_init(&q, 16, 2, hkey), 0);
	assert_int_equal(take(&q, "alice", &a[0]), TURN_OK);
	assert_int_equal(take(&q, "alice", &a[1]), TURN_OK);
	assert_int_equal(a[0], a[1]); /* one entry per userid */
	assert_int_equal(take(&q, "alice", &x), TURN_E_QUOTA);
	assert_int_equal(turn_alloc_err_code(TURN_E_QUOTA), 486);
	assert_int_equal(count(&q, "alice"), 2);
	/* Another user is not held back; a userid is compared whole. */
	assert_int_equal(take(&q, "bob", &b), TURN_OK);
	assert_int_equal(take(&q, "alic", &x), TURN_OK);
	assert_int_equal(take(&q, "alicee", &x), TURN_OK);
	assert_int_equal(count(&q, "bob"), 1);
	/* One goes, one may come, and no more. */
	turn_quota_put(&q, a[0]);
	assert_int_equal(count(&q, "alice"), 1);
	assert_int_equal(take(&q, "alice", &a[2]), TURN_OK);
	assert_int_equal(take(&q, "alice", &x), TURN_E_QUOTA);
	/* All of alice's go: her entry is freed and comes back at zero. */
	turn_quota_put(&q, a[1]);
	turn_quota_put(&q, a[2]);
	assert_int_equal(count(&q, "alice"), 0);
	assert_int_equal(q.used, 3);
	assert_int_equal(take(&q, "alice", &a[0]), TURN_OK);
	assert_int_equal(take(&q, "alice", &a[1]), TURN_OK);
	assert_int_equal(take(&q, "alice", &x), TURN_E_QUOTA);
	turn_quota_free(&q);
}

static void test_quota_refuses_a_userid_too_long_and_ignores_no_entry(void **state)
{
	struct turn_quota q;
	char name[TURN_USERNAME_MAX + 1];
	uint32_t x;

	(void)state;
	assert_int_equal(turn_quota_init(&q, 4, 1, hkey), 0);
	memset(name, 'a', sizeof(name));
	assert_int_equal(turn_quota_take(&q, name, sizeof(name), &x), TURN_E_USERNAME);
	assert_int_equal(turn_quota_take(&q, name, TURN_USERNAME_MAX, &x), TURN_OK);
	assert_int_equal(turn_quota_count(&q, name, TURN_USERNAME_MAX), 1);
	turn_quota_put(&q, TURN_ALLOC_NONE); /* an allocation made without one */
	assert_int_equal(turn_quota_count(&q, name, TURN_USERNAME_MAX), 1);
	turn_quota_put(&q, x);
	assert_int_equal(q.used, 0);
	turn_quota_free(&q);
	assert_int_equal(turn_quota_init(&q, 0, 1, hkey), -EINVAL);
	assert_int_equal(turn_quota_init(&q, 4, 0, hkey), -EINVAL);
}

static void test_quota_tracks_at_most_cap_userids(void **state)
{
	enum { CAP = 32 };
	struct turn_quota q;
	uint32_t e[CAP], x;
	char u[32];

	(void)state;
	/* A flood of distinct userids: at most CAP entries, never more memory;
	 * every slot of the hash gets used and reused, so backward-shift
	 * deletion must keep every chain findable. */
	assert_int_equal(turn_quota_init(&q, CAP, 1, hkey), 0);
	for (uint32_t round = 0; round < 20; round++) {
		for (uint32_t i = 0; i < CAP; i++) {
			snprintf(u, sizeof(u), "user%u", round * 7 + i);
			assert_int_equal(take(&q, u, &e[i]), TURN_OK);
		}
		assert_int_equal(q.used, CAP);
		snprintf(u, sizeof(u), "flood%u", round);
		assert_int_equal(take(&q, u, &x), TURN_E_FULL);
		for (uint32_t i = 0; i < CAP; i += 2)
			turn_quota_put(&q, e[i]);
		for (uint32_t i = 1; i < CAP; i += 2) {
			snprintf(u, sizeof(u), "user%u", round * 7 + i);
			assert_int_equal(take(&q, u, &x), TURN_E_QUOTA);
			assert_int_equal(count(&q, u), 1);
		}
		for (uint32_t i = 0; i < CAP; i += 2) {
			snprintf(u, sizeof(u), "user%u", round * 7 + i);
			assert_int_equal(count(&q, u), 0);
		}
		for (uint32_t i = 1; i < CAP; i += 2)
			turn_quota_put(&q, e[i]);
		assert_int_equal(q.used, 0);
	}
	turn_quota_free(&q);
}

/* Two workers: each takes for one userid until refused, then gives all
 * back, for a bounded number of rounds. held counts what the threads hold
 * (raised after a take, lowered before a put): never above the quota. */
enum { QT_QUOTA = 3, QT_ROUNDS = 20000 };

struct qt_arg {
	struct turn_quota *q;
	_Atomic int *held;
	_Atomic bool *over;
	uint64_t granted;
};

static void *qt_worker(void *p)
{
	struct qt_arg *a = p;
	uint32_t mine[QT_QUOTA + 1];

	for (int r = 0; r < QT_ROUNDS; r++) {
		unsigned n = 0;

		while (n <= QT_QUOTA && take(a->q, "shared", &mine[n]) == TURN_OK) {
			if (atomic_fetch_add(a->held, 1) + 1 > QT_QUOTA)
				atomic_store(a->over, true);
			n++;
			a->granted++;
		}
		if (n > QT_QUOTA)
			atomic_store(a->over, true);
		/* Another userid comes and goes meanwhile (chain moves). */
		if (take(a->q, r & 1 ? "other1" : "other2", &mine[QT_QUOTA]) == TURN_OK)
			turn_quota_put(a->q, mine[QT_QUOTA]);
		while (n > 0) {
			atomic_fetch_sub(a->held, 1);
			turn_quota_put(a->q, mine[--n]);
		}
	}
	return NULL;
}

static void test_quota_is_exact_for_two_threads_at_once(void **state)
{
	struct turn_quota q;
	_Atomic int held = 0;
	_Atomic bool over = false;
	struct qt_arg a[2];
	pthread_t th[2];

	(void)state;
	assert_int_equal(turn_quota_init(&q, 8, QT_QUOTA, hkey), 0);
	for (int i = 0; i < 2; i++) {
		a[i] = (struct qt_arg){.q = &q, .held = &held, .over = &over};
		assert_int_equal(pthread_create(&th[i], NULL, qt_worker, &a[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_false(atomic_load(&over));
	assert_int_equal(atomic_load(&held), 0);
	/* Takes were granted (one thread may starve the other: no fairness
	 * is promised, only the bound); all given back, no entry left. */
	assert_true(a[0].granted + a[1].granted > 0);
	assert_int_equal(count(&q, "shared"), 0);
	assert_int_equal(q.used, 0);
	turn_quota_free(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quota_counts_per_userid_and_answers_486),
	    cmocka_unit_test(test_quota_refuses_a_userid_too_long_and_ignores_no_entry),
	    cmocka_unit_test(test_quota_tracks_at_most_cap_userids),
	    cmocka_unit_test(test_quota_is_exact_for_two_threads_at_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
