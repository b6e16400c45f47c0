/* SPDX-License-Identifier: ISC */
/* Unit tests for sni_routes.c: exact and wildcard routes, which wins,
 * names refused at build time, whole-table replacement. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addrclass.h"
#include "sni_routes.h"

static struct sni_route route(const char *name, const char *upstream, bool pp2)
{
	struct sni_route r;

	memset(&r, 0, sizeof(r));
	snprintf(r.name, sizeof(r.name), "%s", name);
	assert_int_equal(addr_parse_numeric(upstream, &r.upstream), 0);
	r.proxy_v2 = pp2;
	return r;
}

/* The route name a server name goes to, or "-" for none. */
static const char *to(const struct sni_routes *t, const char *name)
{
	const struct sni_route *r = sni_routes_lookup(t, name, strlen(name));

	return r ? r->name : "-";
}

static struct sni_routes *build(const struct sni_route *list, size_t n)
{
	struct sni_routes *t;
	char err[300];

	if (sni_routes_build(&t, list, n, err, sizeof(err)) != 0)
		fail_msg("build: %s", err);
	return t;
}

static void test_sni_routes_exact_names_go_to_their_own_upstream(void **state)
{
	const struct sni_route list[] = {
	    route("svc1.example.com", "127.0.0.1:8443", false),
	    route("SVC2.Example.com", "[::1]:9443", true),
	};
	struct sni_routes *t = build(list, 2);
	const struct sni_route *r;

	assert_int_equal(sni_routes_count(t), 2);
	r = sni_routes_lookup(t, "svc1.example.com", 16);
	assert_non_null(r);
	assert_int_equal(ntohs(r->upstream.in.sin_port), 8443);
	assert_false(r->proxy_v2);
	r = sni_routes_lookup(t, "svc2.example.com", 16);
	assert_non_null(r);
	assert_string_equal(r->name, "svc2.example.com"); /* folded */
	assert_int_equal(r->upstream.sa.sa_family, AF_INET6);
	assert_true(r->proxy_v2);
	assert_string_equal(to(t, "svc3.example.com"), "-");
	assert_string_equal(to(t, "example.com"), "-");
	assert_string_equal(to(t, "x.svc1.example.com"), "-");
	/* The length is the caller's: a prefix of a name is another name. */
	assert_null(sni_routes_lookup(t, "svc1.example.com", 15));
	sni_routes_free(t);
}

static void test_sni_routes_a_wildcard_matches_any_depth_but_not_its_own_suffix(void **state)
{
	const struct sni_route list[] = {
	    route("*.example.com", "127.0.0.1:1", false),
	};
	struct sni_routes *t = build(list, 1);

	assert_string_equal(to(t, "a.example.com"), "*.example.com");
	assert_string_equal(to(t, "a.b.example.com"), "*.example.com");
	assert_string_equal(to(t, "x-1.y.z.example.com"), "*.example.com");
	assert_string_equal(to(t, "example.com"), "-");
	assert_string_equal(to(t, "com"), "-");
	assert_string_equal(to(t, "aexample.com"), "-");
	assert_string_equal(to(t, "a.example.org"), "-");
	assert_string_equal(to(t, "a.example.com.evil.net"), "-");
	sni_routes_free(t);
}

static void test_sni_routes_exact_beats_wildcard_and_the_longest_wildcard_wins(void **state)
{
	const struct sni_route list[] = {
	    route("*.com", "127.0.0.1:1", false),
	    route("*.example.com", "127.0.0.1:2", false),
	    route("*.b.example.com", "127.0.0.1:3", false),
	    route("b.example.com", "127.0.0.1:4", false),
	    route("c.b.example.com", "127.0.0.1:5", false),
	    route("example.com", "127.0.0.1:6", false),
	};
	struct sni_routes *t = build(list, 6);

	assert_string_equal(to(t, "example.com"), "example.com");
	assert_string_equal(to(t, "a.example.com"), "*.example.com");
	assert_string_equal(to(t, "b.example.com"), "b.example.com");
	assert_string_equal(to(t, "a.b.example.com"), "*.b.example.com");
	assert_string_equal(to(t, "x.a.b.example.com"), "*.b.example.com");
	assert_string_equal(to(t, "c.b.example.com"), "c.b.example.com");
	assert_string_equal(to(t, "d.c.b.example.com"), "*.b.example.com");
	assert_string_equal(to(t, "other.com"), "*.com");
	assert_string_equal(to(t, "com"), "-");
	/* The same whatever the order of the list. */
	struct sni_route rev[6];

	for (int i = 0; i < 6; i++)
		rev[i] = list[5 - i];
	sni_routes_free(t);
	t = build(rev, 6);
	assert_string_equal(to(t, "a.b.example.com"), "*.b.example.com");
	assert_string_equal(to(t, "a.example.com"), "*.example.com");
	assert_string_equal(to(t, "b.example.com"), "b.example.com");
	sni_routes_free(t);
}

static void test_sni_routes_refuses_names_no_hello_could_carry(void **state)
{
	const char *bad[] = {"",
			     "*",
			     "*.",
			     "**.example.com",
			     "*example.com",
			     "a.*.example.com",
			     "*.*.example.com",
			     "example.*",
			     "ex ample.com",
			     "example.com.",
			     "1.2.3.4",
			     "*.10.0.0",
			     "a_b.example.com",
			     ".example.com",
			     "-a.example"};
	struct sni_routes *t;
	char err[300];

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct sni_route r = route("x", "127.0.0.1:1", false);

		snprintf(r.name, sizeof(r.name), "%s", bad[i]);
		if (sni_routes_build(&t, &r, 1, err, sizeof(err)) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_null(t);
		assert_non_null(strstr(err, "route 1"));
		assert_false(addr_host_pattern_valid(bad[i]));
	}
	assert_true(addr_host_pattern_valid("*.example.com"));
	assert_true(addr_host_pattern_valid("localhost"));
}

static void test_sni_routes_wildcard_suffix_leaves_room_for_a_label(void **state)
{
	char name[SNI_ROUTE_NAME_MAX + 2];

	/* "*." + 251 bytes: a name under it can be 253 long. */
	memset(name, 'a', sizeof(name));
	name[0] = '*', name[1] = '.';
	for (size_t i = 40; i < sizeof(name); i += 40)
		name[i] = '.';
	name[2 + TLS_NAME_MAX - 2] = '\0';
	assert_true(addr_host_pattern_valid(name));
	name[2 + TLS_NAME_MAX - 2] = 'a';
	name[2 + TLS_NAME_MAX - 1] = '\0';
	assert_false(addr_host_pattern_valid(name));
}

static void test_sni_routes_a_name_twice_is_refused(void **state)
{
	const struct sni_route list[] = {
	    route("a.example.com", "127.0.0.1:1", false),
	    route("*.example.com", "127.0.0.1:2", false),
	    route("A.EXAMPLE.COM", "127.0.0.1:3", false),
	};
	struct sni_routes *t;
	char err[300];

	assert_int_equal(sni_routes_build(&t, list, 3, err, sizeof(err)), -EEXIST);
	assert_null(t);
	assert_string_equal(err, "route 3 \"a.example.com\": listed twice");
	/* A wildcard and the exact name of its suffix are two routes. */
	const struct sni_route two[] = {
	    route("example.com", "127.0.0.1:1", false),
	    route("*.example.com", "127.0.0.1:2", false),
	};
	t = build(two, 2);
	assert_string_equal(to(t, "example.com"), "example.com");
	sni_routes_free(t);
}

static void test_sni_routes_an_empty_table_matches_nothing(void **state)
{
	struct sni_routes *t = build(NULL, 0);

	assert_int_equal(sni_routes_count(t), 0);
	assert_string_equal(to(t, "a.example.com"), "-");
	sni_routes_free(t);
	assert_null(sni_routes_lookup(NULL, "a", 1));
	assert_int_equal(sni_routes_count(NULL), 0);
	sni_routes_free(NULL);
}

static void test_sni_routes_a_new_set_replaces_the_old_whole(void **state)
{
	const struct sni_route first[] = {
	    route("a.example.com", "127.0.0.1:1", false),
	    route("b.example.com", "127.0.0.1:2", false),
	};
	const struct sni_route second[] = {
	    route("b.example.com", "127.0.0.1:22", true),
	    route("*.c.example.com", "127.0.0.1:3", false),
	};
	struct sni_routes *t = build(first, 2), *next = build(second, 2), *old;

	assert_string_equal(to(t, "a.example.com"), "a.example.com");
	old = t;
	t = next;
	sni_routes_free(old);
	/* A route absent from the new set is gone. */
	assert_string_equal(to(t, "a.example.com"), "-");
	assert_int_equal(ntohs(sni_routes_lookup(t, "b.example.com", 13)->upstream.in.sin_port),
			 22);
	assert_string_equal(to(t, "x.c.example.com"), "*.c.example.com");
	sni_routes_free(t);
}

static void test_sni_routes_many_routes(void **state)
{
	enum { N = 5000 };
	struct sni_route *list = calloc(N, sizeof(*list));
	struct sni_routes *t;
	char name[64];

	assert_non_null(list);
	for (int i = 0; i < N; i++) {
		char n[64];

		snprintf(n, sizeof(n), i % 2 ? "*.gw%d.relay.example" : "gw%d.relay.example", i);
		list[i] = route(n, "127.0.0.1:1", false);
		list[i].upstream.in.sin_port = htons((uint16_t)(i + 1));
	}
	t = build(list, N);
	for (int i = 0; i < N; i++) {
		const struct sni_route *r;

		snprintf(name, sizeof(name),
			 i % 2 ? "www.gw%d.relay.example" : "gw%d.relay.example", i);
		r = sni_routes_lookup(t, name, strlen(name));
		assert_non_null(r);
		assert_int_equal(ntohs(r->upstream.in.sin_port), i + 1);
	}
	assert_string_equal(to(t, "gw1.relay.example"), "-");
	assert_string_equal(to(t, "www.gw0.relay.example"), "-");
	sni_routes_free(t);
	free(list);
}

static bool loops(const char *up, const char *listen, const char *local)
{
	union etr_sockaddr u, l, x;

	assert_int_equal(addr_parse_numeric(up, &u), 0);
	assert_int_equal(addr_parse_numeric(listen, &l), 0);
	if (local)
		assert_int_equal(addr_parse_numeric(local, &x), 0);
	return addrclass_loops(&u, &l, &x, local ? 1 : 0);
}

static void test_sni_route_to_the_listener_itself_loops(void **state)
{
	(void)state;
	assert_true(loops("127.0.0.1:443", "127.0.0.1:443", NULL));
	assert_true(loops("[::1]:443", "[::1]:443", NULL));
	assert_false(loops("127.0.0.1:444", "127.0.0.1:443", NULL));
	assert_false(loops("127.0.0.2:443", "127.0.0.1:443", NULL)); /* another bind */
	/* A wildcard listener: any address of the host on its port. */
	assert_true(loops("127.0.0.9:443", "0.0.0.0:443", NULL));
	assert_true(loops("[::1]:443", "0.0.0.0:443", NULL));
	assert_true(loops("127.0.0.1:443", "[::]:443", NULL));
	assert_true(loops("0.0.0.0:443", "0.0.0.0:443", NULL));
	assert_true(loops("192.0.2.7:443", "0.0.0.0:443", "192.0.2.7:1"));
	assert_false(loops("192.0.2.7:443", "0.0.0.0:443", "192.0.2.8:1"));
	assert_false(loops("192.0.2.7:443", "0.0.0.0:443", NULL));
	/* 0.0.0.0 as an upstream is the loopback. */
	assert_true(loops("0.0.0.0:443", "127.0.0.1:443", NULL));
	assert_false(loops("0.0.0.0:443", "192.0.2.7:443", NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sni_routes_exact_names_go_to_their_own_upstream),
	    cmocka_unit_test(test_sni_routes_a_wildcard_matches_any_depth_but_not_its_own_suffix),
	    cmocka_unit_test(test_sni_routes_exact_beats_wildcard_and_the_longest_wildcard_wins),
	    cmocka_unit_test(test_sni_routes_refuses_names_no_hello_could_carry),
	    cmocka_unit_test(test_sni_routes_wildcard_suffix_leaves_room_for_a_label),
	    cmocka_unit_test(test_sni_routes_a_name_twice_is_refused),
	    cmocka_unit_test(test_sni_routes_an_empty_table_matches_nothing),
	    cmocka_unit_test(test_sni_routes_a_new_set_replaces_the_old_whole),
	    cmocka_unit_test(test_sni_routes_many_routes),
	    cmocka_unit_test(test_sni_route_to_the_listener_itself_loops),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
