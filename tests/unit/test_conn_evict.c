/* SPDX-License-Identifier: ISC */
/* Unit tests for the choice of the connection that gives way at an SNI
 * listener's max-preread or a TURN listener's tcp-max-connections
 * (src/conn_evict.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "conn_evict.h"

/* keys from a string, oldest first: one letter an address. */
static int32_t pick(struct conn_evict *e, const char *who)
{
	uint8_t keys[64][ADDRCLASS_KEY_LEN];
	uint32_t n = (uint32_t)strlen(who);

	memset(keys, 0, sizeof(keys));
	for (uint32_t i = 0; i < n; i++)
		keys[i][15] = (uint8_t)who[i];
	return conn_evict_pick(e, (const uint8_t(*)[ADDRCLASS_KEY_LEN])keys, n);
}

static void test_conn_evict_the_oldest_of_the_address_holding_the_most(void **state)
{
	struct conn_evict e;

	(void)state;
	assert_int_equal(conn_evict_init(&e, 64), 0);
	assert_int_equal(pick(&e, ""), -1);
	assert_int_equal(pick(&e, "a"), 0);
	/* b holds 3: its oldest, at 1. */
	assert_int_equal(pick(&e, "abacbdb"), 1);
	/* A real client's one connection, the oldest, is not taken. */
	assert_int_equal(pick(&e, "rxxyyyx"), 1);
	/* Ties: the address whose oldest is the oldest. */
	assert_int_equal(pick(&e, "cabbac"), 0);
	assert_int_equal(pick(&e, "xabab"), 1);
	/* Every address with one: the oldest connection. */
	assert_int_equal(pick(&e, "abcdefgh"), 0);
	conn_evict_free(&e);
}

/* Many addresses in a small table (probe chains, the table reused from
 * one pick to the next), and never past max. */
static void test_conn_evict_many_addresses(void **state)
{
	uint8_t keys[200][ADDRCLASS_KEY_LEN];
	struct conn_evict e;

	(void)state;
	assert_int_equal(conn_evict_init(&e, 200), 0);
	memset(keys, 0, sizeof(keys));
	for (uint32_t i = 0; i < 200; i++) {
		keys[i][0] = (uint8_t)(i % 97);
		keys[i][1] = (uint8_t)(i % 97 >> 8);
	}
	/* 97 addresses; 0..5 hold 3 each (i, i+97, i+194), the others 2: 0. */
	assert_int_equal(conn_evict_pick(&e, (const uint8_t(*)[ADDRCLASS_KEY_LEN])keys, 200), 0);
	keys[196][0] = 50; /* 2 now holds 2, 50 holds 3: 0 still the oldest tie */
	assert_int_equal(conn_evict_pick(&e, (const uint8_t(*)[ADDRCLASS_KEY_LEN])keys, 200), 0);
	keys[195][0] = 50; /* 50 holds 4 */
	assert_int_equal(conn_evict_pick(&e, (const uint8_t(*)[ADDRCLASS_KEY_LEN])keys, 200), 50);
	/* Only the first max keys count. */
	assert_int_equal(conn_evict_pick(&e, (const uint8_t(*)[ADDRCLASS_KEY_LEN])keys, 500), 50);
	conn_evict_free(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_conn_evict_the_oldest_of_the_address_holding_the_most),
	    cmocka_unit_test(test_conn_evict_many_addresses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
