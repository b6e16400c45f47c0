/* SPDX-License-Identifier: ISC */
/* Unit tests for proxy_v2.c against the bytes of HAProxy's
 * doc/proxy-protocol.txt, section 2.2. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "proxy_v2.h"
#include "unit_util.h"

/* The signature, spelled out as the spec gives it. */
static const uint8_t sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
				0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

static void test_proxy_v2_tcp4_header_is_the_specs_bytes(void **state)
{
	union etr_sockaddr c = sa("192.0.2.10:51234"), l = sa("198.51.100.1:443");
	const uint8_t want[28] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49,
				  0x54, 0x0A, 0x21, 0x11, 0x00, 0x0C, 192,  0,	  2,	10,
				  198,	51,   100,  1,	  0xC8, 0x22, 0x01, 0xBB};
	uint8_t buf[PROXY_V2_MAX];

	memset(buf, 0xee, sizeof(buf));
	assert_int_equal(proxy_v2_build(buf, sizeof(buf), &c, &l), 28);
	assert_memory_equal(buf, want, 28);
	assert_memory_equal(buf, sig, 12);
	assert_memory_equal(PROXY_V2_SIG, sig, 12);
	assert_int_equal(buf[28], 0xee); /* nothing written past it */
}

static void test_proxy_v2_tcp6_header_is_the_specs_bytes(void **state)
{
	union etr_sockaddr c = sa("[2001:db8::1]:40000"), l = sa("[2001:db8:ffff::443]:8443");
	uint8_t buf[PROXY_V2_MAX];
	const uint8_t head[4] = {0x21, 0x21, 0x00, 0x24};
	const uint8_t src[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	const uint8_t dst[16] = {0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0,	   0,
				 0,    0,    0,	   0,	 0,    0,    0x04, 0x43};

	assert_int_equal(proxy_v2_build(buf, sizeof(buf), &c, &l), 52);
	assert_memory_equal(buf, sig, 12);
	assert_memory_equal(buf + 12, head, 4);
	assert_memory_equal(buf + 16, src, 16);
	assert_memory_equal(buf + 32, dst, 16);
	assert_int_equal(buf[48] << 8 | buf[49], 40000);
	assert_int_equal(buf[50] << 8 | buf[51], 8443);
}

static void test_proxy_v2_a_mapped_ipv4_client_is_sent_as_ipv4(void **state)
{
	union etr_sockaddr c = sa("[::ffff:192.0.2.10]:51234"), l = sa("[::ffff:198.51.100.1]:443");
	union etr_sockaddr c4 = sa("192.0.2.10:51234"), l4 = sa("198.51.100.1:443");
	uint8_t a[PROXY_V2_MAX], b[PROXY_V2_MAX];

	assert_int_equal(proxy_v2_build(a, sizeof(a), &c, &l), 28);
	assert_int_equal(proxy_v2_build(b, sizeof(b), &c4, &l4), 28);
	assert_memory_equal(a, b, 28);
	/* One of each: the IPv4 one mapped into TCP over IPv6. */
	l = sa("[2001:db8::443]:443");
	assert_int_equal(proxy_v2_build(a, sizeof(a), &c4, &l), 52);
	assert_int_equal(a[13], 0x21);
	const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 10};
	assert_memory_equal(a + 16, mapped, 16);
}

static void test_proxy_v2_refuses_a_short_buffer_and_other_families(void **state)
{
	union etr_sockaddr c = sa("192.0.2.10:1"), l = sa("198.51.100.1:443"), u;
	union etr_sockaddr c6 = sa("[2001:db8::1]:1");
	uint8_t buf[PROXY_V2_MAX];

	assert_int_equal(proxy_v2_build(buf, 27, &c, &l), -1);
	assert_int_equal(proxy_v2_build(buf, 28, &c, &l), 28);
	assert_int_equal(proxy_v2_build(buf, 51, &c6, &l), -1);
	assert_int_equal(proxy_v2_build(buf, 52, &c6, &l), 52);
	memset(&u, 0, sizeof(u));
	u.sa.sa_family = AF_UNIX;
	assert_int_equal(proxy_v2_build(buf, sizeof(buf), &u, &l), -1);
	assert_int_equal(proxy_v2_build(buf, sizeof(buf), &c, &u), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_proxy_v2_tcp4_header_is_the_specs_bytes),
	    cmocka_unit_test(test_proxy_v2_tcp6_header_is_the_specs_bytes),
	    cmocka_unit_test(test_proxy_v2_a_mapped_ipv4_client_is_sent_as_ipv4),
	    cmocka_unit_test(test_proxy_v2_refuses_a_short_buffer_and_other_families),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
