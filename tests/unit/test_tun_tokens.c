/* SPDX-License-Identifier: ISC */
/* Unit tests for rung 3's token set in force (tun/tun_tokens.c): swaps,
 * references, and a connection's token mapped into the next set. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "tun_tokens.h"

static void test_tun_tokens_swap_take_and_remap(void **state)
{
	char *first[] = {"tok-a", "tok-b", "tok-c"}, *next[] = {"tok-c", "tok-a"};
	struct tun_tokens h;
	struct tun_tokset *s1, *s2;
	uint64_t g1, g2;

	(void)state;
	assert_int_equal(tun_tokens_init(&h), 0);
	assert_null(tun_tokens_take(&h, &g1));
	assert_int_equal(g1, 0);
	assert_int_equal(tun_tokens_set(&h, first, 3), 1);
	assert_true(tun_tokens_moved(&h, g1));
	s1 = tun_tokens_take(&h, &g1);
	assert_non_null(s1);
	assert_false(tun_tokens_moved(&h, g1));
	assert_int_equal(udpws_token_find(&s1->t, "tok-b", 5), 1);
	/* The same set again: no swap, no new generation. */
	assert_int_equal(tun_tokens_set(&h, first, 3), 0);
	assert_false(tun_tokens_moved(&h, g1));
	/* A bad token changes nothing. */
	{
		char *bad[] = {"tok-a", ""};

		assert_int_equal(tun_tokens_set(&h, bad, 2), -EINVAL);
		assert_false(tun_tokens_moved(&h, g1));
	}
	/* tok-b leaves, the others move: a worker still holding s1 maps its
	 * connections' tokens into the new set. */
	assert_int_equal(tun_tokens_set(&h, next, 2), 1);
	assert_true(tun_tokens_moved(&h, g1));
	s2 = tun_tokens_take(&h, &g2);
	assert_true(g2 > g1);
	assert_int_equal(tun_token_remap(&s1->t, 0, &s2->t), 1);
	assert_int_equal(tun_token_remap(&s1->t, 1, &s2->t), -1);
	assert_int_equal(tun_token_remap(&s1->t, 2, &s2->t), 0);
	assert_int_equal(tun_token_remap(&s1->t, 3, &s2->t), -1);
	assert_int_equal(tun_token_remap(&s1->t, -1, &s2->t), -1);
	assert_int_equal(tun_token_remap(&s1->t, 0, NULL), -1);
	tun_tokset_put(s1); /* the old set's last reference: freed */
	/* No token at all: every connection's token is gone. */
	assert_int_equal(tun_tokens_set(&h, NULL, 0), 1);
	s1 = tun_tokens_take(&h, &g1);
	assert_non_null(s1);
	assert_int_equal(s1->t.n, 0);
	assert_int_equal(tun_token_remap(&s2->t, 0, &s1->t), -1);
	assert_int_equal(tun_tokens_set(&h, NULL, 0), 0);
	tun_tokset_put(s1);
	tun_tokset_put(s2);
	tun_tokens_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tun_tokens_swap_take_and_remap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
