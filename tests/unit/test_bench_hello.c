/* SPDX-License-Identifier: ISC */
/* The benchmarks' canned ClientHello (bench/hello.c): the relay's own reader
 * finds its name and its end, whatever its size and records; the backend's
 * end finder agrees, fed in pieces, and refuses what is not a hello. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../bench/hello.h"
#include "tls_hello.h"

static uint8_t wire[HELLO_MAX + 5 * 1100];

static void check(const char *name, size_t size, size_t record)
{
	size_t n = hello_build(wire, sizeof(wire), name, size, record);
	struct tls_hello h;
	struct hello_end e = {0};
	size_t used = 0;

	assert_int_equal(n, size + 5 * ((size + record - 1) / record));
	assert_int_equal(tls_hello_init(&h, size <= 16384 ? 0 : TLS_HELLO_CAP_MAX), 0);
	assert_int_equal(tls_hello_feed(&h, wire, n), TLS_HELLO_NAME);
	assert_string_equal(h.name, name);
	/* Three bytes at a time, as a relay may forward them. */
	for (size_t off = 0; off < n; off += 3) {
		size_t k = n - off < 3 ? n - off : 3;

		assert_false(e.done);
		used += hello_end_feed(&e, wire + off, k);
	}
	assert_true(e.done);
	assert_false(e.bad);
	assert_int_equal(used, n);
}

static void test_sizes(void **state)
{
	(void)state;
	check("svc1.example.com", 1800, 16384);
	check("svc1.example.com", 512, 16384);
	check("a.b", HELLO_MIN + 3, 16384);
	check("svc1.example.com", 5 * 1024, 1000);
	check("svc1.example.com", 16 * 1024, 16384); /* two records */
}

static void test_stream_after(void **state)
{
	size_t n = hello_build(wire, sizeof(wire), "x.example", 1800, 16384);
	uint8_t more[2000];
	struct hello_end e = {0};

	(void)state;
	/* Bulk bytes right behind the hello are not the hello's. */
	memcpy(more, wire, n);
	memset(more + n, 'A', sizeof(more) - n);
	assert_int_equal(hello_end_feed(&e, more, sizeof(more)), n);
	assert_true(e.done);
}

static void test_refusals(void **state)
{
	static const uint8_t http[] = "GET / HTTP/1.1\r\n\r\n";
	struct hello_end e = {0};
	char big[HELLO_NAME_MAX + 2];

	(void)state;
	hello_end_feed(&e, http, sizeof(http) - 1);
	assert_true(e.bad);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(hello_build(wire, sizeof(wire), big, 1800, 16384), 0);
	assert_int_equal(hello_build(wire, sizeof(wire), "", 1800, 16384), 0);
	assert_int_equal(hello_build(wire, sizeof(wire), "x", HELLO_MIN - 1, 16384), 0);
	assert_int_equal(hello_build(wire, 100, "x", 1800, 16384), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_stream_after),
	    cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
