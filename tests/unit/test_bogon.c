/* SPDX-License-Identifier: ISC */
/* Unit tests for addrclass_bogon: which source addresses cannot be real. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <string.h>

#include "addrclass.h"

/* "ip:port" or "[v6]:port" as the source of a datagram. */
static union etr_sockaddr src(const char *s)
{
	union etr_sockaddr sa;

	assert_int_equal(addr_parse_numeric(s, &sa), 0);
	return sa;
}

static bool bogon(const char *s)
{
	union etr_sockaddr sa = src(s);

	return addrclass_bogon(&sa, false);
}

static bool bogon_on_loopback(const char *s)
{
	union etr_sockaddr sa = src(s);

	return addrclass_bogon(&sa, true);
}

static void test_bogon_passes_public_and_private_ipv4(void **state)
{
	(void)state;
	assert_false(bogon("1.2.3.4:27960"));
	assert_false(bogon("10.0.0.1:1"));
	assert_false(bogon("192.168.1.20:27961"));
	assert_false(bogon("1.0.0.0:65535"));
	assert_false(bogon("126.255.255.255:27960"));
	assert_false(bogon("128.0.0.0:27960"));
	assert_false(bogon("223.255.255.255:27960"));
}

static void test_bogon_refuses_this_network_0_slash_8(void **state)
{
	(void)state;
	assert_true(bogon("0.0.0.0:27960"));
	assert_true(bogon("0.1.2.3:27960"));
	assert_true(bogon("0.255.255.255:27960"));
	assert_true(bogon_on_loopback("0.0.0.0:27960"));
}

static void test_bogon_refuses_ipv4_loopback_unless_the_listener_is_loopback(void **state)
{
	(void)state;
	assert_true(bogon("127.0.0.1:27960"));
	assert_true(bogon("127.255.255.254:27960"));
	assert_false(bogon_on_loopback("127.0.0.1:27960"));
	assert_false(bogon_on_loopback("127.1.2.3:27960"));
}

static void test_bogon_refuses_ipv4_multicast(void **state)
{
	(void)state;
	assert_true(bogon("224.0.0.0:27960"));
	assert_true(bogon("224.0.0.1:27960"));
	assert_true(bogon("239.255.255.255:27960"));
	assert_true(bogon_on_loopback("224.0.0.251:5353"));
}

static void test_bogon_refuses_reserved_ipv4_and_broadcast(void **state)
{
	(void)state;
	assert_true(bogon("240.0.0.0:27960"));
	assert_true(bogon("250.1.2.3:27960"));
	assert_true(bogon("255.255.255.255:27960"));
}

static void test_bogon_refuses_source_port_zero(void **state)
{
	union etr_sockaddr sa = src("1.2.3.4:27960");
	union etr_sockaddr sa6 = src("[2001:db8::1]:27960");

	(void)state;
	sa.in.sin_port = 0;
	sa6.in6.sin6_port = 0;
	assert_true(addrclass_bogon(&sa, false));
	assert_true(addrclass_bogon(&sa, true));
	assert_true(addrclass_bogon(&sa6, false));
}

static void test_bogon_passes_global_and_link_local_ipv6(void **state)
{
	(void)state;
	assert_false(bogon("[2001:db8::1]:27960"));
	assert_false(bogon("[2a01:4f8::dead:beef]:27960"));
	assert_false(bogon("[fe80::1]:27960"));
	assert_false(bogon("[fd00::1]:27960"));
	assert_false(bogon("[::2]:27960"));
	assert_false(bogon("[feff:ffff::1]:27960"));
}

static void test_bogon_refuses_ipv6_unspecified(void **state)
{
	(void)state;
	assert_true(bogon("[::]:27960"));
	assert_true(bogon_on_loopback("[::]:27960"));
}

static void test_bogon_refuses_ipv6_loopback_unless_the_listener_is_loopback(void **state)
{
	(void)state;
	assert_true(bogon("[::1]:27960"));
	assert_false(bogon_on_loopback("[::1]:27960"));
}

static void test_bogon_refuses_ipv6_multicast(void **state)
{
	(void)state;
	assert_true(bogon("[ff00::]:27960"));
	assert_true(bogon("[ff02::1]:27960"));
	assert_true(bogon("[ff0e::1:3]:27960"));
	assert_true(bogon_on_loopback("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:27960"));
}

static void test_bogon_judges_ipv4_mapped_ipv6_as_the_ipv4_address(void **state)
{
	(void)state;
	assert_false(bogon("[::ffff:1.2.3.4]:27960"));
	assert_false(bogon("[::ffff:10.0.0.1]:27960"));
	assert_true(bogon("[::ffff:0.0.0.0]:27960"));
	assert_true(bogon("[::ffff:0.9.9.9]:27960"));
	assert_true(bogon("[::ffff:127.0.0.1]:27960"));
	assert_false(bogon_on_loopback("[::ffff:127.0.0.1]:27960"));
	assert_true(bogon("[::ffff:224.0.0.1]:27960"));
	assert_true(bogon("[::ffff:239.1.1.1]:27960"));
	assert_true(bogon("[::ffff:240.0.0.1]:27960"));
	assert_true(bogon("[::ffff:255.255.255.255]:27960"));
}

static void test_bogon_refuses_an_unknown_family(void **state)
{
	union etr_sockaddr sa;

	(void)state;
	memset(&sa, 0, sizeof(sa));
	sa.sa.sa_family = AF_UNIX;
	assert_true(addrclass_bogon(&sa, false));
	assert_true(addrclass_bogon(&sa, true));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bogon_passes_public_and_private_ipv4),
	    cmocka_unit_test(test_bogon_refuses_this_network_0_slash_8),
	    cmocka_unit_test(test_bogon_refuses_ipv4_loopback_unless_the_listener_is_loopback),
	    cmocka_unit_test(test_bogon_refuses_ipv4_multicast),
	    cmocka_unit_test(test_bogon_refuses_reserved_ipv4_and_broadcast),
	    cmocka_unit_test(test_bogon_refuses_source_port_zero),
	    cmocka_unit_test(test_bogon_passes_global_and_link_local_ipv6),
	    cmocka_unit_test(test_bogon_refuses_ipv6_unspecified),
	    cmocka_unit_test(test_bogon_refuses_ipv6_loopback_unless_the_listener_is_loopback),
	    cmocka_unit_test(test_bogon_refuses_ipv6_multicast),
	    cmocka_unit_test(test_bogon_judges_ipv4_mapped_ipv6_as_the_ipv4_address),
	    cmocka_unit_test(test_bogon_refuses_an_unknown_family),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
