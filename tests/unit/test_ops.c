/* SPDX-License-Identifier: ISC */
/* Unit tests for ops.c without HTTP: which listen addresses are private,
 * how tokens are read and refused, and the public-address refusal. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops.h"
#include "unit_util.h"

#define TOKEN_32 "0123456789abcdef0123456789abcdef"
#define TOKEN_31 "0123456789abcdef0123456789abcde"

static const char *const vars[] = {OPS_ENV_LIFECYCLE, OPS_ENV_READ, OPS_ENV_METRICS};
static char dir[] = "/tmp/etrelay-test-ops-XXXXXX";

/* Port 0 (the kernel picks one), which addr_parse_numeric refuses. */
static union etr_sockaddr any_port(const char *s)
{
	union etr_sockaddr a = sa(s);

	a.in.sin_port = 0; /* same offset as sin6_port */
	return a;
}

static bool private(const char *s)
{
	union etr_sockaddr a = sa(s);

	return ops_addr_is_private(&a);
}

/* ops_addr_is_private */

static void test_ops_addr_loopback_is_private(void **state)
{
	assert_true(private("127.0.0.1:9091"));
	assert_true(private("127.255.255.254:9091"));
	assert_true(private("[::1]:9091"));
}

static void test_ops_addr_rfc1918_is_private_and_its_edges_are_not(void **state)
{
	assert_true(private("10.0.0.1:9091"));
	assert_true(private("10.255.255.255:9091"));
	assert_false(private("11.0.0.1:9091"));
	assert_false(private("9.255.255.255:9091"));
	assert_true(private("172.16.0.1:9091"));
	assert_true(private("172.31.255.255:9091"));
	assert_false(private("172.15.255.255:9091"));
	assert_false(private("172.32.0.1:9091"));
	assert_true(private("192.168.0.1:9091"));
	assert_true(private("192.168.255.255:9091"));
	assert_false(private("192.169.0.1:9091"));
	assert_false(private("192.167.255.255:9091"));
}

static void test_ops_addr_cgnat_is_private_and_its_edges_are_not(void **state)
{
	assert_true(private("100.64.0.0:9091"));
	assert_true(private("100.100.1.1:9091"));
	assert_true(private("100.127.255.255:9091"));
	assert_false(private("100.63.255.255:9091"));
	assert_false(private("100.128.0.0:9091"));
}

static void test_ops_addr_link_local_is_private(void **state)
{
	assert_true(private("169.254.0.1:9091"));
	assert_true(private("169.254.169.254:9091"));
	assert_false(private("169.253.255.255:9091"));
	assert_false(private("169.255.0.1:9091"));
	assert_true(private("[fe80::1]:9091"));
	assert_true(private("[febf::1]:9091"));
	assert_false(private("[fec0::1]:9091"));
}

static void test_ops_addr_ula_is_private(void **state)
{
	assert_true(private("[fc00::1]:9091"));
	assert_true(private("[fd12:3456::1]:9091"));
	assert_false(private("[fe00::1]:9091"));
	assert_false(private("[fb00::1]:9091"));
}

static void test_ops_addr_mapped_ipv4_follows_the_ipv4_rule(void **state)
{
	assert_true(private("[::ffff:10.0.0.1]:9091"));
	assert_true(private("[::ffff:127.0.0.1]:9091"));
	assert_false(private("[::ffff:8.8.8.8]:9091"));
}

static void test_ops_addr_public_addresses_are_not_private(void **state)
{
	assert_false(private("8.8.8.8:9091"));
	assert_false(private("203.0.113.10:9091"));
	assert_false(private("[2001:db8::1]:9091"));
	assert_false(private("[2606:4700::1111]:9091"));
}

static void test_ops_addr_any_address_is_not_private(void **state)
{
	/* Binding every interface includes the public ones. */
	assert_false(private("0.0.0.0:9091"));
	assert_false(private("[::]:9091"));
}

/* ops_tokens_check */

static int clear_env(void **state)
{
	char name[64];

	for (unsigned i = 0; i < 3; i++) {
		unsetenv(vars[i]);
		snprintf(name, sizeof(name), "%s_FILE", vars[i]);
		unsetenv(name);
	}
	return 0;
}

static const char *write_file(const char *name, const char *content)
{
	static char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
	return path;
}

static void setenv_file(const char *var, const char *path)
{
	char name[64];

	snprintf(name, sizeof(name), "%s_FILE", var);
	setenv(name, path, 1);
}

static void test_ops_tokens_none_set_is_fine(void **state)
{
	char err[256] = "";

	assert_int_equal(ops_tokens_check(err, sizeof(err)), 0);
}

static void test_ops_tokens_accept_32_bytes_in_each_variable(void **state)
{
	char err[256] = "";

	for (unsigned i = 0; i < 3; i++)
		setenv(vars[i], TOKEN_32, 1);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), 0);
}

static void test_ops_tokens_refuse_31_bytes_without_showing_them(void **state)
{
	char err[256];

	for (unsigned i = 0; i < 3; i++) {
		clear_env(NULL);
		setenv(vars[i], TOKEN_31, 1);
		err[0] = '\0';
		assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
		assert_non_null(strstr(err, vars[i]));
		assert_non_null(strstr(err, "32"));
		assert_null(strstr(err, "0123456789"));
	}
}

static void test_ops_tokens_refuse_an_empty_variable(void **state)
{
	char err[256] = "";

	setenv(OPS_ENV_METRICS, "", 1);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
	assert_non_null(strstr(err, OPS_ENV_METRICS));
}

static void test_ops_tokens_refuse_a_space_inside(void **state)
{
	char err[256] = "";

	setenv(OPS_ENV_READ, "0123456789abcdef 0123456789abcdef", 1);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
	assert_null(strstr(err, "0123456789"));
}

static void test_ops_tokens_refuse_variable_and_file_both_set(void **state)
{
	char err[256] = "";

	setenv(OPS_ENV_LIFECYCLE, TOKEN_32, 1);
	setenv_file(OPS_ENV_LIFECYCLE, write_file("both", TOKEN_32 "\n"));
	assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
	assert_non_null(strstr(err, "both"));
	assert_non_null(strstr(err, OPS_ENV_LIFECYCLE "_FILE"));
}

static void test_ops_tokens_file_loses_one_trailing_newline(void **state)
{
	char err[256] = "";

	setenv_file(OPS_ENV_LIFECYCLE, write_file("lf", TOKEN_32 "\n"));
	assert_int_equal(ops_tokens_check(err, sizeof(err)), 0);
	setenv_file(OPS_ENV_LIFECYCLE, write_file("crlf", TOKEN_32 "\r\n"));
	assert_int_equal(ops_tokens_check(err, sizeof(err)), 0);
	/* The newline does not count toward the 32 bytes. */
	setenv_file(OPS_ENV_LIFECYCLE, write_file("short", TOKEN_31 "\n"));
	assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
	assert_null(strstr(err, "0123456789"));
	/* Only one newline goes; a second one is part of the token. */
	setenv_file(OPS_ENV_LIFECYCLE, write_file("two", TOKEN_32 "\n\n"));
	assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
}

static void test_ops_tokens_name_an_unreadable_file(void **state)
{
	char err[256] = "";

	setenv(OPS_ENV_METRICS "_FILE", "/nonexistent/etrelay-token", 1);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/etrelay-token"));
	assert_non_null(strstr(err, "No such file"));
}

static void test_ops_tokens_refuse_an_oversized_file(void **state)
{
	char big[4096];
	char err[256] = "";

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	setenv_file(OPS_ENV_READ, write_file("big", big));
	assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
	assert_non_null(strstr(err, "longer"));
}

static void test_ops_tokens_refuse_a_world_readable_file_and_name_it(void **state)
{
	char err[256] = "";
	const char *path = write_file("world", TOKEN_32 "\n");

	assert_int_equal(chmod(path, 0644), 0);
	setenv_file(OPS_ENV_READ, path);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
	assert_non_null(strstr(err, OPS_ENV_READ "_FILE"));
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "0644"));
	assert_non_null(strstr(err, "every user read"));
	assert_non_null(strstr(err, "chmod 600"));
	assert_null(strstr(err, "0123456789"));
}

static void test_ops_tokens_refuse_a_file_others_may_write(void **state)
{
	char err[256] = "";
	const char *path = write_file("gw", TOKEN_32 "\n");

	assert_int_equal(chmod(path, 0620), 0);
	setenv_file(OPS_ENV_METRICS, path);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
	assert_non_null(strstr(err, "its group write"));
	assert_int_equal(chmod(path, 0602), 0);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
	assert_non_null(strstr(err, "every user write"));
}

static void test_ops_tokens_accept_600_and_640(void **state)
{
	char err[256] = "";
	const char *path = write_file("ok", TOKEN_32 "\n");

	setenv_file(OPS_ENV_LIFECYCLE, path);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), 0);
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), 0);
	assert_int_equal(chmod(path, 0400), 0);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), 0);
}

/* The file read is the one checked: a symlink to a private file works (as
 * Kubernetes mounts secrets), a symlink to a world-readable one does not. */
static void test_ops_tokens_check_the_file_a_symlink_points_to(void **state)
{
	char err[256] = "", link[160];
	const char *path = write_file("target", TOKEN_32 "\n");

	snprintf(link, sizeof(link), "%s/link", dir);
	unlink(link);
	assert_int_equal(symlink(path, link), 0);
	setenv_file(OPS_ENV_LIFECYCLE, link);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), 0);
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
	assert_non_null(strstr(err, link));
	assert_non_null(strstr(err, "every user read"));
}

static void test_ops_tokens_refuse_what_is_not_a_regular_file(void **state)
{
	char err[256] = "";

	setenv_file(OPS_ENV_LIFECYCLE, dir);
	assert_int_equal(ops_tokens_check(err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a regular file"));
}

/* ops_start before any socket */

static void test_ops_start_refuses_a_public_address(void **state)
{
	struct ops_config cfg = {.listen = sa("8.8.8.8:9091")};
	struct ops *op = (struct ops *)&cfg;
	struct etr_stats st = {0};
	char err[512] = "";

	assert_int_equal(ops_start(&op, &cfg, &st, err, sizeof(err)), -EINVAL);
	assert_null(op);
	assert_non_null(strstr(err, "8.8.8.8:9091"));
	assert_non_null(strstr(err, "--ops-allow-public"));
	cfg.listen = sa("0.0.0.0:9091");
	assert_int_equal(ops_start(&op, &cfg, &st, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--ops-allow-public"));
}

static void test_ops_start_refuses_a_short_token(void **state)
{
	struct ops_config cfg = {.listen = any_port("127.0.0.1:1")};
	struct etr_stats st = {0};
	struct ops *op;
	char err[512] = "";

	setenv(OPS_ENV_LIFECYCLE, TOKEN_31, 1);
	assert_int_equal(ops_start(&op, &cfg, &st, err, sizeof(err)), -EINVAL);
	assert_null(op);
	assert_non_null(strstr(err, OPS_ENV_LIFECYCLE));
	assert_null(strstr(err, "0123456789"));
}

static void test_ops_start_serves_any_address_with_allow_public(void **state)
{
	struct ops_config cfg = {.listen = any_port("0.0.0.0:1"), .allow_public = true};
	struct etr_stats st = {0};
	struct ops *op;
	char err[512] = "";

	assert_int_equal(ops_start(&op, &cfg, &st, err, sizeof(err)), 0);
	assert_true(ops_port(op) > 0);
	ops_stop(op);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ops_addr_loopback_is_private),
	    cmocka_unit_test(test_ops_addr_rfc1918_is_private_and_its_edges_are_not),
	    cmocka_unit_test(test_ops_addr_cgnat_is_private_and_its_edges_are_not),
	    cmocka_unit_test(test_ops_addr_link_local_is_private),
	    cmocka_unit_test(test_ops_addr_ula_is_private),
	    cmocka_unit_test(test_ops_addr_mapped_ipv4_follows_the_ipv4_rule),
	    cmocka_unit_test(test_ops_addr_public_addresses_are_not_private),
	    cmocka_unit_test(test_ops_addr_any_address_is_not_private),
	    cmocka_unit_test_setup(test_ops_tokens_none_set_is_fine, clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_accept_32_bytes_in_each_variable, clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_refuse_31_bytes_without_showing_them, clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_refuse_an_empty_variable, clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_refuse_a_space_inside, clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_refuse_variable_and_file_both_set, clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_file_loses_one_trailing_newline, clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_name_an_unreadable_file, clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_refuse_an_oversized_file, clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_refuse_a_world_readable_file_and_name_it,
				   clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_refuse_a_file_others_may_write, clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_accept_600_and_640, clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_check_the_file_a_symlink_points_to, clear_env),
	    cmocka_unit_test_setup(test_ops_tokens_refuse_what_is_not_a_regular_file, clear_env),
	    cmocka_unit_test_setup(test_ops_start_refuses_a_public_address, clear_env),
	    cmocka_unit_test_setup(test_ops_start_refuses_a_short_token, clear_env),
	    cmocka_unit_test_setup(test_ops_start_serves_any_address_with_allow_public, clear_env),
	};
	char cmd[128];
	int rc;

	if (!mkdtemp(dir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		rc = rc ? rc : 1;
	return rc;
}
