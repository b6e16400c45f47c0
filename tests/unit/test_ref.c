/* SPDX-License-Identifier: ISC */
/* Unit tests for ref.h: an index and a generation packed in one ref. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ref.h"

/* The layouts the tree uses: {index bits, generation bits}. */
static const unsigned layouts[][2] = {{16, 8}, {16, 7}, {17, 7}, {24, 8}, {8, 16}};

static void test_ref_round_trips_index_and_generation(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(layouts) / sizeof(layouts[0]); k++) {
		unsigned ib = layouts[k][0], gb = layouts[k][1];
		const uint32_t idx[] = {0, 1, ref_mask(ib) / 2, ref_mask(ib)};
		const uint32_t gen[] = {0, 1, ref_mask(gb) / 2, ref_mask(gb)};

		for (size_t i = 0; i < 4; i++)
			for (size_t g = 0; g < 4; g++) {
				uint32_t r = ref_pack(idx[i], ib, gen[g], gb);

				assert_int_equal(ref_idx(r, ib), idx[i]);
				assert_int_equal(ref_gen(r, ib, gb), gen[g]);
				assert_true(ref_gen_ok(r, ib, gb, gen[g]));
				assert_true(r <= ref_mask(ib + gb));
			}
	}
}

static void test_ref_of_an_earlier_generation_does_not_match(void **state)
{
	uint32_t r = ref_pack(1234, 16, 41, 7);

	(void)state;
	/* The slot freed and taken again: its generation moved on. */
	assert_false(ref_gen_ok(r, 16, 7, 42));
	assert_false(ref_gen_ok(r, 16, 7, 40));
	/* Another slot's ref of the same generation names another index. */
	assert_int_not_equal(ref_idx(ref_pack(1235, 16, 41, 7), 16), 1234);
	assert_true(ref_gen_ok(r, 16, 7, 41));
}

static void test_ref_generation_wraps_in_its_bits(void **state)
{
	(void)state;
	/* A generation counter wider than its bits: only the low bits go
	 * into the ref, and the ref matches the counter again once it has
	 * wrapped all the way round (128 reuses of the slot for 7 bits). */
	for (uint32_t gen = 0; gen < 1000; gen++) {
		uint32_t r = ref_pack(7, 16, gen, 7);

		assert_int_equal(ref_gen(r, 16, 7), gen & 0x7f);
		assert_true(ref_gen_ok(r, 16, 7, gen));
		assert_false(ref_gen_ok(r, 16, 7, gen + 1));
		assert_true(ref_gen_ok(r, 16, 7, gen + 128));
		assert_int_equal(ref_idx(r, 16), 7);
	}
	/* A uint8_t or uint16_t generation's increment past its top. */
	assert_int_equal(ref_pack(3, 16, (uint8_t)(255 + 1), 8), 3);
	assert_true(ref_gen_ok(ref_pack(3, 16, 255, 8), 16, 8, (uint16_t)255));
}

static void test_ref_index_bits_do_not_reach_the_generation(void **state)
{
	(void)state;
	/* An index past its bits cannot forge another generation. */
	assert_int_equal(ref_gen(ref_pack(0x1ffff, 16, 5, 8), 16, 8), 5);
	assert_int_equal(ref_idx(ref_pack(0x1ffff, 16, 5, 8), 16), 0xffff);
	/* Bits above idx + gen in a ref (a side bit) are neither. */
	assert_int_equal(ref_gen(ref_pack(9, 16, 3, 7) | 1u << 23, 16, 7), 3);
	assert_int_equal(ref_idx(ref_pack(9, 16, 3, 7) | 1u << 23, 16), 9);
	assert_int_equal(ref_mask(32), UINT32_MAX);
	assert_int_equal(ref_pack(0xffffff, 24, 0xff, 8), UINT32_MAX);
}

_Static_assert(REF_FITS(16, 8, 24) && REF_FITS(24, 8, 32), "layouts that fit");
_Static_assert(!REF_FITS(17, 8, 24) && !REF_FITS(0, 8, 24) && !REF_FITS(16, 8, 33),
	       "layouts that do not");

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ref_round_trips_index_and_generation),
	    cmocka_unit_test(test_ref_of_an_earlier_generation_does_not_match),
	    cmocka_unit_test(test_ref_generation_wraps_in_its_bits),
	    cmocka_unit_test(test_ref_index_bits_do_not_reach_the_generation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
