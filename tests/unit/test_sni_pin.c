/* SPDX-License-Identifier: ISC */
/* Unit tests for the stream chunks each source may hold in an SNI
 * listener (src/sni/sni_pin.c): the cap, the queue of connections waiting,
 * the places of the woken ones, and IPv6's /64, /56 and /48. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "sni_pin.h"

static const uint8_t sip[16] = "0123456789abcdef";

static unsigned keys(const char *a, struct sni_pin_key k[SNI_PIN_KEYS])
{
	union etr_sockaddr sa;

	assert_int_equal(addr_parse_numeric(a, &sa), 0);
	return sni_pin_keys(&sa, k);
}

static void test_sni_pin_a_source_at_its_cap_waits_for_a_chunk_back(void **state)
{
	struct sni_pin p;
	struct sni_pin_key a[SNI_PIN_KEYS], b[SNI_PIN_KEYS];
	unsigned na = keys("192.0.2.1:1000", a), nb = keys("192.0.2.2:1000", b);
	uint32_t wake[8];

	(void)state;
	assert_int_equal(sni_pin_init(&p, 64, 16, sip), 0); /* cap 4 */
	assert_int_equal(p.cap, 4);
	assert_int_equal(na, 1);
	for (uint32_t i = 0; i < 4; i++) {
		assert_true(sni_pin_admit(&p, a, na, i));
		sni_pin_take(&p, a, na, i);
	}
	assert_int_equal(sni_pin_held(&p, a), 4);
	/* 5 and 6 wait, in that order; another address goes on. */
	assert_false(sni_pin_admit(&p, a, na, 5));
	assert_false(sni_pin_admit(&p, a, na, 6));
	assert_false(sni_pin_admit(&p, a, na, 5)); /* once in the queue */
	assert_true(sni_pin_waiting(&p, 5) && sni_pin_waiting(&p, 6));
	assert_true(sni_pin_admit(&p, b, nb, 9));
	/* A chunk back wakes one, with a place: nobody else gets in. */
	assert_int_equal(sni_pin_put(&p, a, na, wake, 8), 1);
	assert_int_equal(wake[0], 5);
	assert_true(sni_pin_woken(&p, 5) && !sni_pin_waiting(&p, 5));
	assert_false(sni_pin_admit(&p, a, na, 7));
	assert_true(sni_pin_admit(&p, a, na, 5)); /* its own place */
	sni_pin_take(&p, a, na, 5);		  /* the place becomes the chunk */
	assert_false(sni_pin_woken(&p, 5));
	assert_int_equal(sni_pin_held(&p, a), 4);
	/* 5's read brought nothing: giving the place up wakes the next. */
	assert_int_equal(sni_pin_put(&p, a, na, wake, 8), 1);
	assert_int_equal(wake[0], 6);
	assert_int_equal(sni_pin_release(&p, a, 6, wake, 8), 1);
	assert_int_equal(wake[0], 7);
	/* Closed while woken or waiting: nothing left behind. */
	sni_pin_cancel(&p, a, 7);
	assert_false(sni_pin_woken(&p, 7));
	for (int i = 0; i < 3; i++)
		assert_int_equal(sni_pin_put(&p, a, na, wake, 8), 0);
	assert_int_equal(sni_pin_held(&p, a), 0);
	for (uint32_t i = 0; i <= p.mask; i++)
		assert_false(p.t[i].used);
	sni_pin_free(&p);
}

static void test_sni_pin_ipv6_counts_its_64_56_and_48(void **state)
{
	struct sni_pin p;
	struct sni_pin_key k[SNI_PIN_KEYS];
	uint32_t id = 0;
	char a[64];

	(void)state;
	assert_int_equal(sni_pin_init(&p, 64, 64, sip), 0); /* cap 4, 8, 16 */
	assert_int_equal(keys("[2001:db8:1:2::1]:1", k), 3);
	/* One /64: 4. */
	for (int i = 0; i < 4; i++) {
		snprintf(a, sizeof(a), "[2001:db8:1:2::%x]:1", i + 1);
		keys(a, k);
		assert_true(sni_pin_admit(&p, k, 3, id));
		sni_pin_take(&p, k, 3, id++);
	}
	keys("[2001:db8:1:2::99]:1", k);
	assert_false(sni_pin_admit(&p, k, 3, id++));
	/* Its /56: 8 in all, the other /64s of it taking the rest. */
	for (int i = 0; i < 4; i++) {
		snprintf(a, sizeof(a), "[2001:db8:1:%x::1]:1", 0x10 + i);
		keys(a, k);
		assert_true(sni_pin_admit(&p, k, 3, id));
		sni_pin_take(&p, k, 3, id++);
	}
	keys("[2001:db8:1:30::1]:1", k);
	assert_false(sni_pin_admit(&p, k, 3, id++));
	/* Its /48: 16, the other /56s of it taking the rest. */
	for (int i = 0; i < 8; i++) {
		snprintf(a, sizeof(a), "[2001:db8:1:%x::1]:1", 0x100 * (i + 1));
		keys(a, k);
		assert_true(sni_pin_admit(&p, k, 3, id));
		sni_pin_take(&p, k, 3, id++);
	}
	keys("[2001:db8:1:ff00::1]:1", k);
	assert_false(sni_pin_admit(&p, k, 3, id++));
	/* Another /48 goes on. */
	keys("[2001:db8:2::1]:1", k);
	assert_true(sni_pin_admit(&p, k, 3, id++));
	sni_pin_free(&p);
}

static void test_sni_pin_a_full_table_run_survives_deletes(void **state)
{
	struct sni_pin p;
	struct sni_pin_key k[SNI_PIN_KEYS];
	uint32_t wake[4];
	char a[64];

	(void)state;
	assert_int_equal(sni_pin_init(&p, 64, 0, sip), 0);
	/* Many sources, a chunk each, then back in another order: every
	 * count found again after the deletes shifted the runs. */
	for (int i = 0; i < 200; i++) {
		snprintf(a, sizeof(a), "10.0.%d.%d:1", i / 250, i % 250 + 1);
		keys(a, k);
		sni_pin_take(&p, k, 1, 0);
	}
	for (int i = 0; i < 200; i += 2) {
		snprintf(a, sizeof(a), "10.0.%d.%d:1", i / 250, i % 250 + 1);
		keys(a, k);
		assert_int_equal(sni_pin_put(&p, k, 1, wake, 4), 0);
	}
	for (int i = 0; i < 200; i++) {
		snprintf(a, sizeof(a), "10.0.%d.%d:1", i / 250, i % 250 + 1);
		keys(a, k);
		assert_int_equal(sni_pin_held(&p, k), i % 2 ? 1 : 0);
	}
	sni_pin_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sni_pin_a_source_at_its_cap_waits_for_a_chunk_back),
	    cmocka_unit_test(test_sni_pin_ipv6_counts_its_64_56_and_48),
	    cmocka_unit_test(test_sni_pin_a_full_table_run_survives_deletes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
