/* SPDX-License-Identifier: ISC */
/* Unit tests for qport.c: the qport as the engine reads it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "qport.h"

static int uq(const char *info)
{
	return qport_of_userinfo(info, strlen(info));
}

static int text(const char *t, size_t *start)
{
	return qport_connect_userinfo((const uint8_t *)t, strlen(t), start);
}

static void test_qport_of_packet_reads_bytes_4_and_5_little_endian(void **state)
{
	static const uint8_t p[] = {1, 0, 0, 0, 0x69, 0x7a, 0, 0};

	(void)state;
	assert_int_equal(qport_of_packet(p, sizeof(p)), 0x7a69);
	assert_int_equal(qport_of_packet(p, 6), 0x7a69);
	/* Shorter: the engine's reader returns -1, masked to 0xffff. */
	assert_int_equal(qport_of_packet(p, 5), 0xffff);
	assert_int_equal(qport_of_packet(p, 0), 0xffff);
}

static void test_qport_of_userinfo_takes_the_first_key_in_any_case(void **state)
{
	(void)state;
	assert_int_equal(uq("\\name\\p\\qport\\31337\\rate\\25000"), 31337);
	assert_int_equal(uq("qport\\5\\qport\\6"), 5);
	assert_int_equal(uq("\\QPort\\77\\qport\\6"), 77);
	assert_int_equal(uq("\\xqport\\1\\qportx\\2\\qport\\3"), 3);
	/* A value named qport is not the key. */
	assert_int_equal(uq("\\name\\qport\\x\\9"), 0);
}

static void test_qport_of_userinfo_is_atoi_of_the_value(void **state)
{
	(void)state;
	assert_int_equal(uq("\\qport\\ 12x"), 12);
	assert_int_equal(uq("\\qport\\+65535"), 65535);
	assert_int_equal(uq("\\qport\\-0"), 0);
	assert_int_equal(uq("\\qport\\"), 0);
	assert_int_equal(uq("\\qport\\abc"), 0);
	assert_int_equal(uq("\\name\\p"), 0);
	assert_int_equal(uq(""), 0);
	/* No in-game packet can carry these: refused. */
	assert_int_equal(uq("\\qport\\65536"), -1);
	assert_int_equal(uq("\\qport\\-1"), -1);
	assert_int_equal(uq("\\qport\\4294967296"), -1);
}

static void test_qport_connect_userinfo_is_a_closed_quoted_string(void **state)
{
	size_t start = 99;
	char big[1100];

	(void)state;
	assert_int_equal(text("\"\\qport\\1\"", &start), 8);
	assert_int_equal(start, 1);
	assert_int_equal(text("\"\\qport\\1\" tail", &start), 8);
	assert_int_equal(text("\"\"", &start), 0);
	/* Anything else the engines read their own ways. */
	assert_int_equal(text("\\qport\\1", &start), -1);
	assert_int_equal(text(" \"\\qport\\1\"", &start), -1);
	assert_int_equal(text("\"\\qport\\1", &start), -1);
	assert_int_equal(text("\"\\name\\a\n\\qport\\1\"", &start), -1);
	assert_int_equal(qport_connect_userinfo((const uint8_t *)"\"a\0b\"", 5, &start), -1);
	/* The closing quote past what the engine's line holds: refused. */
	memset(big, 'a', sizeof(big));
	big[0] = '"';
	big[QPORT_CONNECT_TEXT_MAX - 1] = '"';
	assert_int_equal(qport_connect_userinfo((const uint8_t *)big, sizeof(big), &start),
			 QPORT_CONNECT_TEXT_MAX - 2);
	big[QPORT_CONNECT_TEXT_MAX - 1] = 'a';
	big[QPORT_CONNECT_TEXT_MAX] = '"';
	assert_int_equal(qport_connect_userinfo((const uint8_t *)big, sizeof(big), &start), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_qport_of_packet_reads_bytes_4_and_5_little_endian),
	    cmocka_unit_test(test_qport_of_userinfo_takes_the_first_key_in_any_case),
	    cmocka_unit_test(test_qport_of_userinfo_is_atoi_of_the_value),
	    cmocka_unit_test(test_qport_connect_userinfo_is_a_closed_quoted_string),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
