/* SPDX-License-Identifier: ISC */
/* Unit tests for loop_gso.h: which datagrams join a GSO train, what a
 * refused train teaches the socket, how a GRO train is cut. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "loop_gso.h"

static void equal_sizes_join_up_to_the_segment_limit(void **state)
{
	struct gso_run r;

	gso_start(&r, 100, GSO_ANY);
	for (unsigned i = 1; i < GSO_MAX_SEGS; i++)
		assert_true(gso_join(&r, 100));
	assert_int_equal(r.n, GSO_MAX_SEGS);
	assert_int_equal(r.bytes, 100 * GSO_MAX_SEGS);
	assert_false(gso_join(&r, 100)); /* the kernel takes no more */
	assert_int_equal(r.n, GSO_MAX_SEGS);
}

static void a_shorter_datagram_ends_the_train(void **state)
{
	struct gso_run r;

	gso_start(&r, 100, GSO_ANY);
	assert_true(gso_join(&r, 100));
	assert_true(gso_join(&r, 37)); /* the last may be short */
	assert_false(gso_join(&r, 37));
	assert_false(gso_join(&r, 100));
	assert_int_equal(r.n, 3);
	assert_int_equal(r.seg, 100);
}

static void a_longer_datagram_never_joins(void **state)
{
	struct gso_run r;

	gso_start(&r, 100, GSO_ANY);
	assert_false(gso_join(&r, 101));
	assert_true(gso_join(&r, 100)); /* the run is still open */
}

static void the_train_stays_one_ip_datagram(void **state)
{
	struct gso_run r;
	unsigned n = 1;

	gso_start(&r, 1200, GSO_ANY);
	while (gso_join(&r, 1200))
		n++;
	assert_int_equal(n, GSO_MAX_BYTES / 1200);
	assert_true(r.bytes <= GSO_MAX_BYTES);
}

static void empty_or_over_cap_starts_no_train(void **state)
{
	struct gso_run r;

	gso_start(&r, 0, GSO_ANY);
	assert_false(gso_join(&r, 0));
	gso_start(&r, 1400, 1399);
	assert_false(gso_join(&r, 1400));
	gso_start(&r, 1000, 1399);
	assert_true(gso_join(&r, 1000));
	gso_start(&r, 10, 0); /* trains off on this socket */
	assert_false(gso_join(&r, 10));
}

static void a_refused_train_lowers_the_cap(void **state)
{
	/* Too big for the path: below this segment size from now on. */
	assert_int_equal(gso_refused(GSO_ANY, 1400, -EINVAL), 1399);
	assert_int_equal(gso_refused(GSO_ANY, 1400, -EMSGSIZE), 1399);
	assert_int_equal(gso_refused(900, 1400, -EINVAL), 900); /* never raised */
	assert_int_equal(gso_refused(GSO_ANY, 1, -EINVAL), 0);
	/* The device cannot do it at all. */
	assert_int_equal(gso_refused(GSO_ANY, 100, -EIO), 0);
	assert_int_equal(gso_refused(GSO_ANY, 100, -EOPNOTSUPP), 0);
	/* About the datagrams, not the train. */
	assert_int_equal(gso_refused(GSO_ANY, 100, -ECONNREFUSED), GSO_ANY);
	assert_int_equal(gso_refused(1000, 100, -ENOBUFS), 1000);
}

static void a_gro_train_is_cut_at_its_segment_size(void **state)
{
	size_t len = 4037, off = 0, n = 0, last = 0;

	while (off < len) {
		last = gro_segment(len, 100, off);
		off += last;
		n++;
	}
	assert_int_equal(n, 41);
	assert_int_equal(last, 37);
	/* No cmsg: one datagram, whatever its size. */
	assert_int_equal(gro_segment(4037, 0, 0), 4037);
	/* A train of one. */
	assert_int_equal(gro_segment(100, 100, 0), 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(equal_sizes_join_up_to_the_segment_limit),
	    cmocka_unit_test(a_shorter_datagram_ends_the_train),
	    cmocka_unit_test(a_longer_datagram_never_joins),
	    cmocka_unit_test(the_train_stays_one_ip_datagram),
	    cmocka_unit_test(empty_or_over_cap_starts_no_train),
	    cmocka_unit_test(a_refused_train_lowers_the_cap),
	    cmocka_unit_test(a_gro_train_is_cut_at_its_segment_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
