/* SPDX-License-Identifier: ISC */
/* Unit tests for addr.c: split, numeric parse, print, compare, hash. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/un.h>

#include "addr.h"

static const uint8_t key_a[16] = {
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
};
static const uint8_t key_b[16] = {
    16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1,
};

/* A v4 sockaddr built by hand, padding filled with `junk`. */
static void make_v4(union etr_sockaddr *sa, const char *ip, uint16_t port, uint8_t junk)
{
	memset(sa, junk, sizeof(*sa));
	sa->in.sin_family = AF_INET;
	sa->in.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, ip, &sa->in.sin_addr), 1);
}

static void make_v6(union etr_sockaddr *sa, const char *ip, uint16_t port, uint8_t junk)
{
	memset(sa, junk, sizeof(*sa));
	sa->in6.sin6_family = AF_INET6;
	sa->in6.sin6_port = htons(port);
	sa->in6.sin6_flowinfo = 0;
	sa->in6.sin6_scope_id = 0;
	assert_int_equal(inet_pton(AF_INET6, ip, &sa->in6.sin6_addr), 1);
}

/* addr_split */

static void test_addr_split_takes_ipv4_host_and_port(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("1.2.3.4:27960", host, &port, -1), 0);
	assert_string_equal(host, "1.2.3.4");
	assert_int_equal(port, 27960);
}

static void test_addr_split_strips_brackets_from_ipv6_host(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("[::1]:27960", host, &port, -1), 0);
	assert_string_equal(host, "::1");
	assert_int_equal(port, 27960);

	assert_int_equal(addr_split("[2001:db8::7]:1", host, &port, 27950), 0);
	assert_string_equal(host, "2001:db8::7");
	assert_int_equal(port, 1);
}

static void test_addr_split_takes_hostname_and_port(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("host.example:1", host, &port, -1), 0);
	assert_string_equal(host, "host.example");
	assert_int_equal(port, 1);

	assert_int_equal(addr_split("etmaster.net:65535", host, &port, 27950), 0);
	assert_string_equal(host, "etmaster.net");
	assert_int_equal(port, 65535);
}

static void test_addr_split_uses_default_port_for_bare_host(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("host", host, &port, 27950), 0);
	assert_string_equal(host, "host");
	assert_int_equal(port, 27950);
}

static void test_addr_split_explicit_port_beats_default_port(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("host:27961", host, &port, 27950), 0);
	assert_string_equal(host, "host");
	assert_int_equal(port, 27961);
}

/* attack15: "upstream = 127.0.0.1:23100" passed -t as the host
 * "= 127.0.0.1" and failed to resolve at start, without its line. */
static void test_addr_split_rejects_a_host_no_name_or_address_has(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port;

	(void)state;
	assert_int_equal(addr_split("= 127.0.0.1:23100", host, &port, -1), -1);
	assert_int_equal(addr_split("a b:1", host, &port, -1), -1);
	assert_int_equal(addr_split("[::1 ]:1", host, &port, -1), -1);
	assert_int_equal(addr_split("[fe80::1%eth0]:1", host, &port, -1), 0);
	assert_int_equal(addr_split("_srv.host-1.example:1", host, &port, -1), 0);
}

static void test_addr_split_rejects_bare_host_without_default_port(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("host", host, &port, -1), -1);
	assert_int_equal(addr_split("1.2.3.4", host, &port, -1), -1);
}

static void test_addr_split_rejects_port_zero(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("host:0", host, &port, -1), -1);
	assert_int_equal(addr_split("host:0", host, &port, 27950), -1);
	assert_int_equal(addr_split("[::1]:0", host, &port, -1), -1);
}

static void test_addr_split_rejects_port_above_65535(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("host:65536", host, &port, -1), -1);
	assert_int_equal(addr_split("host:99999999999999999999", host, &port, -1), -1);
	assert_int_equal(addr_split("[::1]:65536", host, &port, -1), -1);
}

static void test_addr_split_rejects_non_numeric_port(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("host:x", host, &port, -1), -1);
	assert_int_equal(addr_split("host:x", host, &port, 27950), -1);
	assert_int_equal(addr_split("host:27960x", host, &port, -1), -1);
	assert_int_equal(addr_split("host:-1", host, &port, -1), -1);
}

static void test_addr_split_rejects_empty_port(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("host:", host, &port, -1), -1);
	assert_int_equal(addr_split("host:", host, &port, 27950), -1);
	assert_int_equal(addr_split("[::1]:", host, &port, -1), -1);
	assert_int_equal(addr_split("", host, &port, -1), -1);
}

static void test_addr_split_rejects_unterminated_bracket(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("[::1", host, &port, -1), -1);
	assert_int_equal(addr_split("[::1", host, &port, 27950), -1);
	assert_int_equal(addr_split("[::1:27960", host, &port, -1), -1);
}

static void test_addr_split_rejects_junk_after_bracket(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("[::1]x", host, &port, 27950), -1);
	assert_int_equal(addr_split("[::1]27960", host, &port, 27950), -1);
	assert_int_equal(addr_split("[::1]:27960x", host, &port, 27950), -1);
	assert_int_equal(addr_split("[]:27960", host, &port, 27950), -1);
}

static void test_addr_split_uses_default_port_for_bare_bracketed_ipv6(void **state)
{
	char host[ADDR_HOSTLEN];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split("[2001:db8::1]", host, &port, 27950), 0);
	assert_string_equal(host, "2001:db8::1");
	assert_int_equal(port, 27950);
	assert_int_equal(addr_split("[2001:db8::1]", host, &port, -1), -1);
}

static void test_addr_split_rejects_host_too_long(void **state)
{
	char host[ADDR_HOSTLEN];
	char s[ADDR_HOSTLEN + 16];
	uint16_t port = 0;

	(void)state;
	memset(s, 'a', ADDR_HOSTLEN);
	strcpy(s + ADDR_HOSTLEN, ":27960");
	assert_int_equal(addr_split(s, host, &port, -1), -1);
}

/* addr_parse_numeric */

static void test_addr_parse_numeric_reads_ipv4(void **state)
{
	union etr_sockaddr sa;

	(void)state;
	memset(&sa, 0xa5, sizeof(sa));
	assert_int_equal(addr_parse_numeric("127.0.0.1:27960", &sa), 0);
	assert_int_equal(sa.sa.sa_family, AF_INET);
	assert_int_equal(ntohs(sa.in.sin_port), 27960);
	assert_int_equal(ntohl(sa.in.sin_addr.s_addr), 0x7f000001u);
	assert_int_equal(addr_len(&sa), sizeof(struct sockaddr_in));
}

static void test_addr_parse_numeric_reads_ipv6(void **state)
{
	union etr_sockaddr sa;
	struct in6_addr want;

	(void)state;
	memset(&sa, 0xa5, sizeof(sa));
	assert_int_equal(addr_parse_numeric("[::1]:27960", &sa), 0);
	assert_int_equal(sa.sa.sa_family, AF_INET6);
	assert_int_equal(ntohs(sa.in6.sin6_port), 27960);
	assert_memory_equal(&sa.in6.sin6_addr, &in6addr_loopback, sizeof(struct in6_addr));
	assert_int_equal(addr_len(&sa), sizeof(struct sockaddr_in6));

	assert_int_equal(addr_parse_numeric("[2001:db8::42]:1", &sa), 0);
	assert_int_equal(inet_pton(AF_INET6, "2001:db8::42", &want), 1);
	assert_int_equal(sa.sa.sa_family, AF_INET6);
	assert_int_equal(ntohs(sa.in6.sin6_port), 1);
	assert_memory_equal(&sa.in6.sin6_addr, &want, sizeof(want));
}

static void test_addr_parse_numeric_reads_any_addresses(void **state)
{
	union etr_sockaddr sa;

	(void)state;
	assert_int_equal(addr_parse_numeric("0.0.0.0:27960", &sa), 0);
	assert_int_equal(sa.sa.sa_family, AF_INET);
	assert_int_equal(sa.in.sin_addr.s_addr, htonl(INADDR_ANY));
	assert_int_equal(ntohs(sa.in.sin_port), 27960);

	assert_int_equal(addr_parse_numeric("[::]:27960", &sa), 0);
	assert_int_equal(sa.sa.sa_family, AF_INET6);
	assert_memory_equal(&sa.in6.sin6_addr, &in6addr_any, sizeof(struct in6_addr));
	assert_int_equal(ntohs(sa.in6.sin6_port), 27960);
}

static void test_addr_parse_numeric_rejects_hostnames_and_junk(void **state)
{
	union etr_sockaddr sa;

	(void)state;
	assert_int_equal(addr_parse_numeric("host.example:1", &sa), -1);
	assert_int_equal(addr_parse_numeric("localhost:27960", &sa), -1);
	assert_int_equal(addr_parse_numeric("1.2.3.256:27960", &sa), -1);
	assert_int_equal(addr_parse_numeric("1.2.3:27960", &sa), -1);
	assert_int_equal(addr_parse_numeric("[::g]:27960", &sa), -1);
	assert_int_equal(addr_parse_numeric("1.2.3.4", &sa), -1);
	assert_int_equal(addr_parse_numeric("1.2.3.4:", &sa), -1);
	assert_int_equal(addr_parse_numeric("1.2.3.4:65536", &sa), -1);
	assert_int_equal(addr_parse_numeric("1.2.3.4:x", &sa), -1);
	assert_int_equal(addr_parse_numeric("[::1", &sa), -1);
	assert_int_equal(addr_parse_numeric("", &sa), -1);
}

/* addr_len */

static void test_addr_len_is_zero_for_unknown_family(void **state)
{
	union etr_sockaddr sa;

	(void)state;
	memset(&sa, 0, sizeof(sa));
	sa.sa.sa_family = AF_UNIX;
	assert_int_equal(addr_len(&sa), 0);
	sa.sa.sa_family = AF_UNSPEC;
	assert_int_equal(addr_len(&sa), 0);
}

/* addr_str */

static void test_addr_str_round_trips_ipv4(void **state)
{
	union etr_sockaddr sa;
	char buf[ADDR_STRLEN];

	(void)state;
	assert_int_equal(addr_parse_numeric("1.2.3.4:27960", &sa), 0);
	assert_ptr_equal(addr_str(&sa.sa, buf), buf);
	assert_string_equal(buf, "1.2.3.4:27960");

	make_v4(&sa, "255.255.255.255", 65535, 0);
	assert_string_equal(addr_str(&sa.sa, buf), "255.255.255.255:65535");
}

static void test_addr_str_round_trips_ipv6_in_brackets(void **state)
{
	union etr_sockaddr sa;
	char buf[ADDR_STRLEN];

	(void)state;
	assert_int_equal(addr_parse_numeric("[::1]:27960", &sa), 0);
	assert_ptr_equal(addr_str(&sa.sa, buf), buf);
	assert_string_equal(buf, "[::1]:27960");

	assert_int_equal(addr_parse_numeric("[2001:db8::42]:27950", &sa), 0);
	assert_string_equal(addr_str(&sa.sa, buf), "[2001:db8::42]:27950");
}

static void test_addr_str_fits_longest_ipv6(void **state)
{
	union etr_sockaddr sa;
	char buf[ADDR_STRLEN];

	(void)state;
	make_v6(&sa, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535, 0);
	assert_string_equal(addr_str(&sa.sa, buf),
			    "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
}

/* addr_equal */

static void test_addr_equal_is_true_for_same_address_and_port(void **state)
{
	union etr_sockaddr a, b;

	(void)state;
	make_v4(&a, "10.1.2.3", 27960, 0x00);
	make_v4(&b, "10.1.2.3", 27960, 0xff);
	assert_true(addr_equal(&a, &b));

	make_v6(&a, "2001:db8::1", 27960, 0x00);
	make_v6(&b, "2001:db8::1", 27960, 0xff);
	assert_true(addr_equal(&a, &b));
}

static void test_addr_equal_is_false_for_different_port(void **state)
{
	union etr_sockaddr a, b;

	(void)state;
	make_v4(&a, "10.1.2.3", 27960, 0);
	make_v4(&b, "10.1.2.3", 27961, 0);
	assert_false(addr_equal(&a, &b));

	make_v6(&a, "2001:db8::1", 27960, 0);
	make_v6(&b, "2001:db8::1", 27961, 0);
	assert_false(addr_equal(&a, &b));
}

static void test_addr_equal_is_false_for_different_address(void **state)
{
	union etr_sockaddr a, b;

	(void)state;
	make_v4(&a, "10.1.2.3", 27960, 0);
	make_v4(&b, "10.1.2.4", 27960, 0);
	assert_false(addr_equal(&a, &b));

	make_v6(&a, "2001:db8::1", 27960, 0);
	make_v6(&b, "2001:db8::2", 27960, 0);
	assert_false(addr_equal(&a, &b));
}

static void test_addr_equal_is_false_for_different_family(void **state)
{
	union etr_sockaddr a, b;

	(void)state;
	/* Same port, and the v6 address holds the v4 bytes. */
	make_v4(&a, "1.2.3.4", 27960, 0);
	make_v6(&b, "::1.2.3.4", 27960, 0);
	assert_false(addr_equal(&a, &b));
	assert_false(addr_equal(&b, &a));

	make_v6(&b, "::ffff:1.2.3.4", 27960, 0);
	assert_false(addr_equal(&a, &b));

	make_v4(&a, "0.0.0.0", 27960, 0);
	make_v6(&b, "::", 27960, 0);
	assert_false(addr_equal(&a, &b));
}

static void test_addr_equal_compares_ipv6_scope(void **state)
{
	union etr_sockaddr a, b;

	(void)state;
	make_v6(&a, "fe80::1", 27960, 0);
	make_v6(&b, "fe80::1", 27960, 0);
	a.in6.sin6_scope_id = 2;
	b.in6.sin6_scope_id = 3;
	assert_false(addr_equal(&a, &b));
	b.in6.sin6_scope_id = 2;
	assert_true(addr_equal(&a, &b));
}

/* addr_hash */

static void test_addr_hash_is_equal_for_equal_addresses(void **state)
{
	union etr_sockaddr a, b;

	(void)state;
	make_v4(&a, "192.0.2.7", 27960, 0x00);
	make_v4(&b, "192.0.2.7", 27960, 0x5a);
	assert_true(addr_equal(&a, &b));
	assert_int_equal(addr_hash(&a, key_a), addr_hash(&b, key_a));

	make_v6(&a, "2001:db8::7", 27960, 0x00);
	make_v6(&b, "2001:db8::7", 27960, 0x5a);
	assert_true(addr_equal(&a, &b));
	assert_int_equal(addr_hash(&a, key_a), addr_hash(&b, key_a));
}

static void test_addr_hash_differs_with_key(void **state)
{
	union etr_sockaddr a;

	(void)state;
	make_v4(&a, "192.0.2.7", 27960, 0);
	assert_int_not_equal(addr_hash(&a, key_a), addr_hash(&a, key_b));
	make_v6(&a, "2001:db8::7", 27960, 0);
	assert_int_not_equal(addr_hash(&a, key_a), addr_hash(&a, key_b));
}

static void test_addr_hash_differs_with_port_address_and_family(void **state)
{
	union etr_sockaddr a, b;
	uint64_t ha;

	(void)state;
	make_v4(&a, "192.0.2.7", 27960, 0);
	ha = addr_hash(&a, key_a);

	make_v4(&b, "192.0.2.7", 27961, 0);
	assert_int_not_equal(ha, addr_hash(&b, key_a));
	make_v4(&b, "192.0.2.8", 27960, 0);
	assert_int_not_equal(ha, addr_hash(&b, key_a));
	make_v6(&b, "::192.0.2.7", 27960, 0);
	assert_int_not_equal(ha, addr_hash(&b, key_a));
}

static void test_addr_hash_is_deterministic(void **state)
{
	union etr_sockaddr a;

	(void)state;
	make_v4(&a, "192.0.2.7", 27960, 0);
	assert_int_equal(addr_hash(&a, key_a), addr_hash(&a, key_a));
}

/* addr_from */

static void test_addr_from_copies_ipv4_and_ipv6(void **state)
{
	union etr_sockaddr src, dst;

	(void)state;
	make_v4(&src, "198.51.100.9", 1234, 0);
	memset(&dst, 0, sizeof(dst));
	assert_true(addr_from(&dst, &src.sa, sizeof(struct sockaddr_in)));
	assert_int_equal(dst.sa.sa_family, AF_INET);
	assert_true(addr_equal(&dst, &src));

	make_v6(&src, "2001:db8::9", 1234, 0);
	memset(&dst, 0, sizeof(dst));
	assert_true(addr_from(&dst, &src.sa, sizeof(struct sockaddr_in6)));
	assert_int_equal(dst.sa.sa_family, AF_INET6);
	assert_true(addr_equal(&dst, &src));
}

static void test_addr_from_accepts_a_longer_length_than_needed(void **state)
{
	struct sockaddr_storage ss;
	union etr_sockaddr src, dst;

	(void)state;
	make_v4(&src, "198.51.100.9", 1234, 0);
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, &src.in, sizeof(src.in));
	assert_true(addr_from(&dst, (const struct sockaddr *)&ss, sizeof(ss)));
	assert_true(addr_equal(&dst, &src));
}

static void test_addr_from_rejects_unix_sockets(void **state)
{
	struct sockaddr_un un;
	union etr_sockaddr dst;

	(void)state;
	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	strcpy(un.sun_path, "/tmp/etrelay.sock");
	assert_false(addr_from(&dst, (const struct sockaddr *)&un, sizeof(un)));
}

static void test_addr_from_rejects_short_lengths(void **state)
{
	union etr_sockaddr src, dst;

	(void)state;
	make_v4(&src, "198.51.100.9", 1234, 0);
	assert_false(addr_from(&dst, &src.sa, sizeof(struct sockaddr_in) - 1));
	assert_false(addr_from(&dst, &src.sa, 0));

	make_v6(&src, "2001:db8::9", 1234, 0);
	assert_false(addr_from(&dst, &src.sa, sizeof(struct sockaddr_in6) - 1));
	assert_false(addr_from(&dst, &src.sa, sizeof(struct sockaddr_in)));
}

static void test_addr_bind_hint_names_the_capability_for_eacces_only(void **state)
{
	(void)state;
	assert_non_null(strstr(addr_bind_hint(-EACCES), "CAP_NET_BIND_SERVICE"));
	assert_non_null(strstr(addr_bind_hint(EACCES), "contrib/etrelay.service"));
	assert_non_null(strstr(addr_bind_hint(-EACCES), "1024"));
	assert_string_equal(addr_bind_hint(-EADDRINUSE), "");
	assert_string_equal(addr_bind_hint(-EPERM), "");
	assert_string_equal(addr_bind_hint(0), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_addr_split_takes_ipv4_host_and_port),
	    cmocka_unit_test(test_addr_split_strips_brackets_from_ipv6_host),
	    cmocka_unit_test(test_addr_split_takes_hostname_and_port),
	    cmocka_unit_test(test_addr_split_uses_default_port_for_bare_host),
	    cmocka_unit_test(test_addr_split_explicit_port_beats_default_port),
	    cmocka_unit_test(test_addr_split_rejects_a_host_no_name_or_address_has),
	    cmocka_unit_test(test_addr_split_rejects_bare_host_without_default_port),
	    cmocka_unit_test(test_addr_split_rejects_port_zero),
	    cmocka_unit_test(test_addr_split_rejects_port_above_65535),
	    cmocka_unit_test(test_addr_split_rejects_non_numeric_port),
	    cmocka_unit_test(test_addr_split_rejects_empty_port),
	    cmocka_unit_test(test_addr_split_rejects_unterminated_bracket),
	    cmocka_unit_test(test_addr_split_rejects_junk_after_bracket),
	    cmocka_unit_test(test_addr_split_uses_default_port_for_bare_bracketed_ipv6),
	    cmocka_unit_test(test_addr_split_rejects_host_too_long),
	    cmocka_unit_test(test_addr_parse_numeric_reads_ipv4),
	    cmocka_unit_test(test_addr_parse_numeric_reads_ipv6),
	    cmocka_unit_test(test_addr_parse_numeric_reads_any_addresses),
	    cmocka_unit_test(test_addr_parse_numeric_rejects_hostnames_and_junk),
	    cmocka_unit_test(test_addr_len_is_zero_for_unknown_family),
	    cmocka_unit_test(test_addr_str_round_trips_ipv4),
	    cmocka_unit_test(test_addr_str_round_trips_ipv6_in_brackets),
	    cmocka_unit_test(test_addr_str_fits_longest_ipv6),
	    cmocka_unit_test(test_addr_equal_is_true_for_same_address_and_port),
	    cmocka_unit_test(test_addr_equal_is_false_for_different_port),
	    cmocka_unit_test(test_addr_equal_is_false_for_different_address),
	    cmocka_unit_test(test_addr_equal_is_false_for_different_family),
	    cmocka_unit_test(test_addr_equal_compares_ipv6_scope),
	    cmocka_unit_test(test_addr_hash_is_equal_for_equal_addresses),
	    cmocka_unit_test(test_addr_hash_differs_with_key),
	    cmocka_unit_test(test_addr_hash_differs_with_port_address_and_family),
	    cmocka_unit_test(test_addr_hash_is_deterministic),
	    cmocka_unit_test(test_addr_from_copies_ipv4_and_ipv6),
	    cmocka_unit_test(test_addr_from_accepts_a_longer_length_than_needed),
	    cmocka_unit_test(test_addr_from_rejects_unix_sockets),
	    cmocka_unit_test(test_addr_from_rejects_short_lengths),
	    cmocka_unit_test(test_addr_bind_hint_names_the_capability_for_eacces_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
