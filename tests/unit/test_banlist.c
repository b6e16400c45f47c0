/* SPDX-License-Identifier: ISC */
/* Unit tests for banlist.c: parse, report every bad line, match. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "banlist.h"

static char err[4096];

static void load_ok(struct banlist *b, const char *text)
{
	int r = banlist_load(b, text, strlen(text), "bans.txt", err, sizeof(err));

	if (r != 0)
		fail_msg("load returned %d: %s", r, err);
	assert_string_equal(err, "");
}

static bool banned(const struct banlist *b, const char *ip)
{
	union etr_sockaddr sa;
	char s[80];

	snprintf(s, sizeof(s), strchr(ip, ':') ? "[%s]:27960" : "%s:27960", ip);
	assert_int_equal(addr_parse_numeric(s, &sa), 0);
	return banlist_match(b, &sa);
}

static void test_banlist_matches_ipv4_addresses_and_blocks_to_the_edge(void **state)
{
	struct banlist b;

	(void)state;
	load_ok(&b, "192.0.2.7\n198.51.100.0/24\n10.0.0.0/8\n");
	assert_int_equal(b.entries, 3);
	assert_true(banned(&b, "192.0.2.7"));
	assert_false(banned(&b, "192.0.2.6"));
	assert_false(banned(&b, "192.0.2.8"));
	assert_true(banned(&b, "198.51.100.0"));
	assert_true(banned(&b, "198.51.100.255"));
	assert_false(banned(&b, "198.51.99.255"));
	assert_false(banned(&b, "198.51.101.0"));
	assert_true(banned(&b, "10.0.0.0"));
	assert_true(banned(&b, "10.255.255.255"));
	assert_false(banned(&b, "9.255.255.255"));
	assert_false(banned(&b, "11.0.0.0"));
	banlist_free(&b);
}

static void test_banlist_matches_ipv6_addresses_and_blocks_to_the_edge(void **state)
{
	struct banlist b;

	(void)state;
	load_ok(&b, "2001:db8::1\n2001:db8:1::/48\n2001:db8:ff00::/40\n");
	assert_true(banned(&b, "2001:db8::1"));
	assert_false(banned(&b, "2001:db8::2"));
	assert_false(banned(&b, "2001:db8::"));
	assert_true(banned(&b, "2001:db8:1::"));
	assert_true(banned(&b, "2001:db8:1:ffff:ffff:ffff:ffff:ffff"));
	assert_false(banned(&b, "2001:db8:0:ffff:ffff:ffff:ffff:ffff"));
	assert_false(banned(&b, "2001:db8:2::"));
	assert_true(banned(&b, "2001:db8:ff00::"));
	assert_true(banned(&b, "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"));
	assert_false(banned(&b, "2001:db9::"));
	assert_false(banned(&b, "1.2.3.4"));
	banlist_free(&b);
}

static void test_banlist_skips_comments_blank_lines_and_spaces(void **state)
{
	struct banlist b;

	(void)state;
	load_ok(&b, "# griefers, 2024\n"
		    "\n"
		    "   \t\n"
		    "  192.0.2.1   # aimbot\r\n"
		    "\t2001:db8::/32\t\r\n"
		    "#198.51.100.1\n"
		    "203.0.113.9");
	assert_int_equal(b.entries, 3);
	assert_true(banned(&b, "192.0.2.1"));
	assert_true(banned(&b, "2001:db8:1:2::3"));
	assert_true(banned(&b, "203.0.113.9"));
	assert_false(banned(&b, "198.51.100.1"));
	banlist_free(&b);
}

static void test_banlist_matches_ipv4_mapped_sources_against_ipv4_entries(void **state)
{
	struct banlist b;

	(void)state;
	load_ok(&b, "192.0.2.0/24\n::ffff:198.51.100.0/120\n");
	assert_true(banned(&b, "::ffff:192.0.2.77"));
	assert_false(banned(&b, "::ffff:192.0.3.1"));
	/* A mapped entry bans the IPv4 source too. */
	assert_true(banned(&b, "198.51.100.20"));
	assert_true(banned(&b, "::ffff:198.51.100.20"));
	/* The IPv4-compatible and NAT64 forms name the same host, as the
	 * TURN peer policy reads them (they were other addresses before). */
	assert_true(banned(&b, "::192.0.2.1"));
	assert_true(banned(&b, "64:ff9b::192.0.2.1"));
	assert_false(banned(&b, "64:ff9b::192.0.3.1"));
	banlist_free(&b);
}

/* A peer or source may name an IPv4 host in an IPv6 form that embeds it;
 * an entry may be written in one too. Either way the IPv4 host is banned,
 * and nothing else is. */
static void test_banlist_matches_ipv4_through_every_embedding_form(void **state)
{
	struct banlist b;

	(void)state;
	load_ok(&b, "203.0.113.77\n"
		    "64:ff9b::198.51.100.5\n"
		    "2002:c000:0200::/40\n" /* 6to4 of 192.0.2.0/24 */
		    "::ffff:0:100.64.1.0/120\n"
		    "::0.0.0.1\n"      /* IPv6 loopback written oddly: no IPv4 */
		    "64:ff9b::/96\n"); /* the prefix alone: no IPv4 block */
	/* IPv4 entry, IPv6 forms of the peer. */
	assert_true(banned(&b, "64:ff9b::203.0.113.77"));
	assert_true(banned(&b, "64:ff9b:1::203.0.113.77"));
	assert_true(banned(&b, "2002:cb00:714d::1"));
	assert_true(banned(&b, "::203.0.113.77"));
	assert_true(banned(&b, "::ffff:0:203.0.113.77"));
	assert_false(banned(&b, "2002:cb00:714e::1"));
	/* Entries in embedding forms ban the IPv4 host or block. */
	assert_true(banned(&b, "198.51.100.5"));
	assert_false(banned(&b, "198.51.100.6"));
	assert_true(banned(&b, "192.0.2.0"));
	assert_true(banned(&b, "192.0.2.255"));
	assert_false(banned(&b, "192.0.3.0"));
	assert_true(banned(&b, "100.64.1.200"));
	assert_false(banned(&b, "100.64.2.1"));
	/* ...and the forms as written still match themselves. */
	assert_true(banned(&b, "64:ff9b::198.51.100.5"));
	assert_true(banned(&b, "2002:c000:200::9"));
	assert_true(banned(&b, "64:ff9b::8.8.8.8"));
	/* Neither ::1 nor the bare NAT64 prefix bans IPv4 hosts. */
	assert_false(banned(&b, "0.0.0.1"));
	assert_false(banned(&b, "8.8.8.8"));
	assert_int_equal(b.entries, 6);
	banlist_free(&b);
}

static void test_banlist_zero_prefixes_ban_a_whole_family(void **state)
{
	struct banlist b;

	(void)state;
	load_ok(&b, "0.0.0.0/0\n");
	assert_true(banned(&b, "0.0.0.0"));
	assert_true(banned(&b, "255.255.255.255"));
	assert_true(banned(&b, "::ffff:1.2.3.4"));
	assert_false(banned(&b, "2001:db8::1"));
	banlist_free(&b);
	/* IPv4 lives in ::ffff:0:0/96, so ::/0 is every address. */
	load_ok(&b, "::/0\n");
	assert_true(banned(&b, "::"));
	assert_true(banned(&b, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
	assert_true(banned(&b, "1.2.3.4"));
	assert_int_equal(b.n, 1);
	banlist_free(&b);
}

static void test_banlist_merges_overlapping_and_adjacent_entries(void **state)
{
	struct banlist b;

	(void)state;
	load_ok(&b, "10.0.0.0/9\n10.128.0.0/9\n10.1.2.3\n10.0.0.0/8\n10.0.0.0/8\n"
		    "192.0.2.1\n192.0.2.2\n192.0.2.4\n"
		    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127\n"
		    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff\n");
	assert_int_equal(b.entries, 10);
	/* 10/8, 192.0.2.1-2, 192.0.2.4, the top /127. */
	assert_int_equal(b.n, 4);
	assert_true(banned(&b, "10.200.0.1"));
	assert_true(banned(&b, "192.0.2.2"));
	assert_false(banned(&b, "192.0.2.3"));
	assert_true(banned(&b, "192.0.2.4"));
	assert_true(banned(&b, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
	assert_false(banned(&b, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd"));
	banlist_free(&b);
}

static void test_banlist_reports_every_bad_line_with_path_and_number(void **state)
{
	static const char text[] = "192.0.2.1\n"
				   "192.0.2.256\n"
				   "# fine\n"
				   "198.51.100.0/33\n"
				   "10.1.2.3/8\n"
				   "2001:db8::/129\n"
				   "192.0.2.2 192.0.2.3\n"
				   "example.com\n"
				   "fe80::1%eth0\n"
				   "192.0.2.0/\n"
				   "192.0.2.0/+8\n"
				   "2001:db8::1/64\n"
				   "203.0.113.1\n";
	struct banlist b;

	(void)state;
	assert_int_equal(
	    banlist_load(&b, text, strlen(text), "/etc/etrelay/bans", err, sizeof(err)), 10);
	assert_string_equal(
	    err,
	    "/etc/etrelay/bans:2: \"192.0.2.256\": not an IPv4 or IPv6 address\n"
	    "/etc/etrelay/bans:4: \"198.51.100.0/33\": prefix length must be 0 to 32\n"
	    "/etc/etrelay/bans:5: \"10.1.2.3/8\": host bits set; did you mean 10.0.0.0/8?\n"
	    "/etc/etrelay/bans:6: \"2001:db8::/129\": prefix length must be 0 to 128\n"
	    "/etc/etrelay/bans:7: \"192.0.2.2 192.0.2.3\": one address or CIDR block per line\n"
	    "/etc/etrelay/bans:8: \"example.com\": not an IPv4 or IPv6 address\n"
	    "/etc/etrelay/bans:9: \"fe80::1%eth0\": not an IPv4 or IPv6 address\n"
	    "/etc/etrelay/bans:10: \"192.0.2.0/\": prefix length must be 0 to 32\n"
	    "/etc/etrelay/bans:11: \"192.0.2.0/+8\": prefix length must be 0 to 32\n"
	    "/etc/etrelay/bans:12: \"2001:db8::1/64\": host bits set; did you mean 2001:db8::/64?");
	/* All or nothing: the good lines are not half loaded. */
	assert_int_equal(b.n, 0);
	assert_false(banned(&b, "192.0.2.1"));
}

static void test_banlist_quotes_unprintable_and_long_input(void **state)
{
	static const char text[] =
	    "192.0.2.1\0x\n"
	    "1111111111111111111111111111111111111111111111111111111111111111\n";
	struct banlist b;

	(void)state;
	assert_int_equal(banlist_load(&b, text, sizeof(text) - 1, "b", err, sizeof(err)), 2);
	assert_string_equal(err,
			    "b:1: \"192.0.2.1\\x00x\": not an IPv4 or IPv6 address or CIDR block\n"
			    "b:2: \"111111111111111111111111111111111111111111111111...\": "
			    "not an IPv4 or IPv6 address or CIDR block");
}

static void test_banlist_counts_errors_that_do_not_fit_in_err(void **state)
{
	static const char text[] = "x1\nx2\nx3\nx4\nx5\n";
	char small[160];
	struct banlist b;

	(void)state;
	assert_int_equal(banlist_load(&b, text, strlen(text), "bans", small, sizeof(small)), 5);
	assert_string_equal(small, "bans:1: \"x1\": not an IPv4 or IPv6 address\n"
				   "bans:2: \"x2\": not an IPv4 or IPv6 address\n"
				   "bans: 3 more errors not shown");
	assert_int_equal(banlist_load(&b, text, strlen(text), "bans", NULL, 0), 5);
	assert_int_equal(b.n, 0);
}

static void test_banlist_loads_an_empty_file_as_an_empty_list(void **state)
{
	struct banlist b;

	(void)state;
	load_ok(&b, "");
	assert_int_equal(b.n, 0);
	assert_false(banned(&b, "192.0.2.1"));
	load_ok(&b, "# nothing yet\n\n");
	assert_int_equal(b.entries, 0);
	banlist_free(&b);
}

static void test_banlist_ignores_the_port_and_unknown_families(void **state)
{
	struct banlist b;
	union etr_sockaddr sa;

	(void)state;
	load_ok(&b, "192.0.2.1\n");
	assert_int_equal(addr_parse_numeric("192.0.2.1:1", &sa), 0);
	assert_true(banlist_match(&b, &sa));
	assert_int_equal(addr_parse_numeric("192.0.2.1:65535", &sa), 0);
	assert_true(banlist_match(&b, &sa));
	memset(&sa, 0, sizeof(sa));
	sa.sa.sa_family = AF_UNIX;
	assert_false(banlist_match(&b, &sa));
	banlist_free(&b);
	assert_null(b.range);
	assert_int_equal(b.n, 0);
}

static void test_banlist_finds_each_of_thousands_of_entries(void **state)
{
	enum { N = 20000 };
	size_t cap = N * 24, len = 0;
	char *text = malloc(cap);
	struct banlist b;
	union etr_sockaddr sa;

	(void)state;
	assert_non_null(text);
	/* Every third address of 100.64.0.0/10 and of 2001:db8::/64. */
	for (uint32_t i = 0; i < N / 2; i++)
		len += (size_t)snprintf(text + len, cap - len, "100.%u.%u.%u\n", 64 + (i * 3 >> 16),
					(i * 3 >> 8) & 255, i * 3 & 255);
	for (uint32_t i = 0; i < N / 2; i++)
		len += (size_t)snprintf(text + len, cap - len, "2001:db8::%x\n", i * 3);
	assert_int_equal(banlist_load(&b, text, len, "big", err, sizeof(err)), 0);
	assert_int_equal(b.n, N);
	memset(&sa, 0, sizeof(sa));
	sa.in.sin_family = AF_INET;
	for (uint32_t i = 0; i < N / 2 * 3; i++) {
		sa.in.sin_addr.s_addr = htonl(0x64400000u + i);
		assert_int_equal(banlist_match(&b, &sa), i % 3 == 0);
	}
	sa.in6.sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, "2001:db8::", &sa.in6.sin6_addr), 1);
	for (uint32_t i = 0; i < N / 2 * 3; i++) {
		sa.in6.sin6_addr.s6_addr[14] = (uint8_t)(i >> 8);
		sa.in6.sin6_addr.s6_addr[15] = (uint8_t)i;
		assert_int_equal(banlist_match(&b, &sa), i % 3 == 0);
	}
	banlist_free(&b);
	free(text);
}

/* The daemon and the config check load the file through one function:
 * a file that cannot be read is -errno, and err says which and why. */
static void test_banlist_load_file_reads_a_file_and_names_one_it_cannot(void **state)
{
	char path[] = "/tmp/test_banlist_XXXXXX", why[256] = "";
	struct banlist b = {0};
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "192.0.2.0/24\n", 13), 13);
	close(fd);
	assert_int_equal(banlist_load_file(&b, path, why, sizeof(why)), 0);
	assert_int_equal(b.entries, 1);
	banlist_free(&b);
	unlink(path);
	assert_int_equal(banlist_load_file(&b, path, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, path));
	assert_non_null(strstr(why, "No such file"));
	assert_int_equal(b.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_banlist_matches_ipv4_addresses_and_blocks_to_the_edge),
	    cmocka_unit_test(test_banlist_matches_ipv6_addresses_and_blocks_to_the_edge),
	    cmocka_unit_test(test_banlist_skips_comments_blank_lines_and_spaces),
	    cmocka_unit_test(test_banlist_matches_ipv4_mapped_sources_against_ipv4_entries),
	    cmocka_unit_test(test_banlist_matches_ipv4_through_every_embedding_form),
	    cmocka_unit_test(test_banlist_zero_prefixes_ban_a_whole_family),
	    cmocka_unit_test(test_banlist_merges_overlapping_and_adjacent_entries),
	    cmocka_unit_test(test_banlist_reports_every_bad_line_with_path_and_number),
	    cmocka_unit_test(test_banlist_quotes_unprintable_and_long_input),
	    cmocka_unit_test(test_banlist_counts_errors_that_do_not_fit_in_err),
	    cmocka_unit_test(test_banlist_loads_an_empty_file_as_an_empty_list),
	    cmocka_unit_test(test_banlist_ignores_the_port_and_unknown_families),
	    cmocka_unit_test(test_banlist_finds_each_of_thousands_of_entries),
	    cmocka_unit_test(test_banlist_load_file_reads_a_file_and_names_one_it_cannot),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
