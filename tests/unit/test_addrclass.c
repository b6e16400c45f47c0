/* SPDX-License-Identifier: ISC */
/* Unit tests for addrclass.c: client keys, IPv4 mapping, private ranges
 * (bogons have their own file, test_bogon.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <string.h>

#include "addrclass.h"
#include "unit_util.h"

static void key_of(const char *s, uint8_t k[ADDRCLASS_KEY_LEN])
{
	union etr_sockaddr a = sa(s);

	assert_true(addrclass_key(&a, k));
}

static void test_addrclass_key_of_ipv4_is_its_mapped_form(void **state)
{
	static const uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4};
	uint8_t k[16];

	(void)state;
	key_of("1.2.3.4:27960", k);
	assert_memory_equal(k, want, 16);
	assert_true(addrclass_key_is_v4(k));
}

static void test_addrclass_key_of_ipv4_and_mapped_ipv6_are_one(void **state)
{
	uint8_t a[16], b[16];

	(void)state;
	key_of("192.0.2.7:1", a);
	key_of("[::ffff:192.0.2.7]:2", b);
	assert_memory_equal(a, b, 16);
}

static void test_addrclass_key_ignores_the_port(void **state)
{
	uint8_t a[16], b[16];

	(void)state;
	key_of("192.0.2.7:1", a);
	key_of("192.0.2.7:65535", b);
	assert_memory_equal(a, b, 16);
	key_of("[2001:db8::1]:1", a);
	key_of("[2001:db8::1]:2", b);
	assert_memory_equal(a, b, 16);
}

static void test_addrclass_key_of_ipv6_is_its_slash_64(void **state)
{
	static const uint8_t want[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2};
	uint8_t a[16], b[16], c[16];

	(void)state;
	key_of("[2001:db8:1:2::1]:27960", a);
	key_of("[2001:db8:1:2:ffff:ffff:ffff:ffff]:27960", b);
	key_of("[2001:db8:1:3::1]:27960", c);
	assert_memory_equal(a, want, 16);
	assert_memory_equal(a, b, 16);
	assert_memory_not_equal(a, c, 16);
	assert_false(addrclass_key_is_v4(a));
}

static void test_addrclass_prefix_cuts_ipv4_to_24_and_ipv6_to_48(void **state)
{
	static const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 0};
	static const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, 0xab, 0xcd};
	union etr_sockaddr a = sa("192.0.2.77:1"), b = sa("[::ffff:192.0.2.200]:2"),
			   c = sa("[2001:db8:abcd:12:1::9]:3"), d = sa("[2001:db8:abce::1]:3");
	uint8_t k[16], l[16];

	(void)state;
	assert_true(addrclass_prefix(&a, ADDRCLASS_NET_V4_BITS, ADDRCLASS_NET_V6_BITS, k));
	assert_memory_equal(k, v4, 16);
	assert_true(addrclass_prefix(&b, ADDRCLASS_NET_V4_BITS, ADDRCLASS_NET_V6_BITS, l));
	assert_memory_equal(l, v4, 16);
	assert_true(addrclass_prefix(&c, ADDRCLASS_NET_V4_BITS, ADDRCLASS_NET_V6_BITS, k));
	assert_memory_equal(k, v6, 16);
	assert_true(addrclass_prefix(&d, ADDRCLASS_NET_V4_BITS, ADDRCLASS_NET_V6_BITS, l));
	assert_memory_not_equal(k, l, 16);
	/* Bits that are not whole bytes: a /20 and a /44. */
	assert_true(addrclass_prefix(&a, 20, 44, k));
	assert_int_equal(k[13], 0);
	assert_int_equal(k[14], 0);
	assert_true(addrclass_prefix(&c, 20, 44, k));
	assert_int_equal(k[4], 0xab);
	assert_int_equal(k[5], 0xc0);
	/* The full address and the /64 key agree with addrclass_key. */
	assert_true(addrclass_prefix(&c, 32, ADDRCLASS_V6_PREFIX, k));
	assert_true(addrclass_key(&c, l));
	assert_memory_equal(k, l, 16);
}

static void test_addrclass_key_refuses_another_family(void **state)
{
	union etr_sockaddr a;
	uint8_t k[16];

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(k, 0x55, sizeof(k));
	a.sa.sa_family = AF_UNIX;
	assert_false(addrclass_key(&a, k));
	for (int i = 0; i < 16; i++)
		assert_int_equal(k[i], 0);
}

static void test_addrclass_v4_reads_ipv4_and_mapped_only(void **state)
{
	union etr_sockaddr a = sa("10.1.2.3:5"), b = sa("[::ffff:10.1.2.3]:5"),
			   c = sa("[2001:db8::10.1.2.3]:5");
	uint32_t v = 0;

	(void)state;
	assert_true(addrclass_v4(&a, &v));
	assert_int_equal(v, 0x0a010203);
	v = 0;
	assert_true(addrclass_v4(&b, &v));
	assert_int_equal(v, 0x0a010203);
	assert_false(addrclass_v4(&c, &v));
}

static void test_addrclass_map_v4_gives_the_dual_stack_form(void **state)
{
	union etr_sockaddr a = sa("198.51.100.9:27950"), want = sa("[::ffff:198.51.100.9]:27950");
	union etr_sockaddr six = sa("[2001:db8::1]:3"), same = six;

	(void)state;
	addrclass_map_v4(&a);
	assert_true(addr_equal(&a, &want));
	addrclass_map_v4(&six);
	assert_memory_equal(&six, &same, sizeof(six));
}

static bool private(const char *s)
{
	union etr_sockaddr a = sa(s);

	return addrclass_private(&a);
}

static void test_addrclass_private_ranges(void **state)
{
	(void)state;
	assert_true(private("127.0.0.1:1"));
	assert_true(private("10.255.0.1:1"));
	assert_true(private("172.16.0.1:1"));
	assert_true(private("172.31.255.255:1"));
	assert_false(private("172.32.0.1:1"));
	assert_true(private("192.168.0.1:1"));
	assert_true(private("100.64.0.1:1"));
	assert_false(private("100.128.0.1:1"));
	assert_true(private("169.254.1.1:1"));
	assert_false(private("8.8.8.8:1"));
	assert_true(private("[::1]:1"));
	assert_true(private("[fd00::1]:1"));
	assert_true(private("[fe80::1]:1"));
	assert_true(private("[::ffff:10.0.0.1]:1"));
	assert_false(private("[::ffff:8.8.8.8]:1"));
	assert_false(private("[2001:db8::1]:1"));
}

static void test_addrclass_loopback(void **state)
{
	union etr_sockaddr a = sa("127.9.9.9:1"), b = sa("[::1]:1"), c = sa("[::ffff:127.0.0.1]:1"),
			   d = sa("10.0.0.1:1"), e = sa("[::2]:1");

	(void)state;
	assert_true(addrclass_loopback(&a));
	assert_true(addrclass_loopback(&b));
	assert_true(addrclass_loopback(&c));
	assert_false(addrclass_loopback(&d));
	assert_false(addrclass_loopback(&e));
}

static void test_addrclass_bogon_of_mapped_follows_ipv4(void **state)
{
	union etr_sockaddr a = sa("[::ffff:224.0.0.1]:1"), b = sa("[::ffff:127.0.0.1]:1"),
			   c = sa("[::ffff:1.2.3.4]:1");

	(void)state;
	assert_true(addrclass_bogon(&a, true));
	assert_true(addrclass_bogon(&b, false));
	assert_false(addrclass_bogon(&b, true));
	assert_false(addrclass_bogon(&c, false));
}

static bool reserved(const char *s)
{
	union etr_sockaddr a = sa(s);

	return addrclass_reserved(&a);
}

static void test_addrclass_reserved_has_azure_wireserver_and_teredo(void **state)
{
	(void)state;
	assert_true(reserved("168.63.129.16:1"));
	assert_true(reserved("[::ffff:168.63.129.16]:1"));
	assert_false(reserved("168.63.129.15:1"));
	assert_false(reserved("168.63.129.17:1"));
	assert_true(reserved("[2001::1]:1"));
	assert_true(reserved("[2001:0:4136:e378:8000:63bf:3fff:fdd2]:1"));
	assert_true(reserved("[2001:0:ffff:ffff::1]:1"));
	assert_false(reserved("[2001:1::1]:1"));
	assert_false(reserved("[2001:4860:4860::8888]:1"));
	/* The local-use NAT64 prefix, whatever it carries. */
	assert_true(reserved("[64:ff9b:1::8.8.8.8]:1"));
	assert_false(reserved("[64:ff9b::8.8.8.8]:1"));
}

/* The IPv4 address s stands for, or 0 when none. */
static uint32_t embedded(const char *s)
{
	union etr_sockaddr a = sa(s);
	uint32_t v4 = 0;

	return addrclass_v4_embedded(&a, &v4) ? v4 : 0;
}

static void test_addrclass_v4_embedded_reduces_siit_and_nat64_forms(void **state)
{
	(void)state;
	assert_int_equal(embedded("10.1.2.3:1"), 0x0a010203);
	assert_int_equal(embedded("[::ffff:10.1.2.3]:1"), 0x0a010203);
	assert_int_equal(embedded("[::ffff:0:10.1.2.3]:1"), 0x0a010203);   /* SIIT */
	assert_int_equal(embedded("[::10.1.2.3]:1"), 0x0a010203);	   /* compatible */
	assert_int_equal(embedded("[64:ff9b::10.1.2.3]:1"), 0x0a010203);   /* NAT64 */
	assert_int_equal(embedded("[64:ff9b:1::10.1.2.3]:1"), 0x0a010203); /* local-use */
	assert_int_equal(embedded("[64:ff9b:1:abcd:0:12:a9fe:a9fe]:1"), 0xa9fea9fe);
	assert_int_equal(embedded("[2002:a01:203::1]:1"), 0x0a010203); /* 6to4 */
	/* Not embeddings: another prefix, the u-octet set, :: and ::1. */
	assert_int_equal(embedded("[64:ff9b:2::10.1.2.3]:1"), 0);
	assert_int_equal(embedded("[64:ff9b:1:0:ff00::a01:203]:1"), 0);
	assert_int_equal(embedded("[::ffff:1:10.1.2.3]:1"), 0);
	assert_int_equal(embedded("[::]:1"), 0);
	assert_int_equal(embedded("[::1]:1"), 0);
	assert_int_equal(embedded("[2001::1]:1"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_addrclass_reserved_has_azure_wireserver_and_teredo),
	    cmocka_unit_test(test_addrclass_v4_embedded_reduces_siit_and_nat64_forms),
	    cmocka_unit_test(test_addrclass_key_of_ipv4_is_its_mapped_form),
	    cmocka_unit_test(test_addrclass_key_of_ipv4_and_mapped_ipv6_are_one),
	    cmocka_unit_test(test_addrclass_key_ignores_the_port),
	    cmocka_unit_test(test_addrclass_key_of_ipv6_is_its_slash_64),
	    cmocka_unit_test(test_addrclass_prefix_cuts_ipv4_to_24_and_ipv6_to_48),
	    cmocka_unit_test(test_addrclass_key_refuses_another_family),
	    cmocka_unit_test(test_addrclass_v4_reads_ipv4_and_mapped_only),
	    cmocka_unit_test(test_addrclass_map_v4_gives_the_dual_stack_form),
	    cmocka_unit_test(test_addrclass_private_ranges),
	    cmocka_unit_test(test_addrclass_loopback),
	    cmocka_unit_test(test_addrclass_bogon_of_mapped_follows_ipv4),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
