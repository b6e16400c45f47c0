/* SPDX-License-Identifier: ISC */
/* Unit tests for control_msg.c: the request bodies, and the answers taken
 * and refused (credential, route sets, Connect errors). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control_msg.h"
#include "url.h"

static json_t *parse(const char *s)
{
	json_error_t je;
	json_t *o = json_loads(s, JSON_REJECT_DUPLICATES, &je);

	if (!o)
		fail_msg("not JSON: %s (%s)", s, je.text);
	return o;
}

static int routes(const char *body, struct sni_route **list, size_t *n, char *err, size_t errlen)
{
	return ctl_msg_routes(body, strlen(body), list, n, err, errlen);
}

/* The answer is refused, and the reason contains want. */
static void assert_routes_refused(const char *body, const char *want)
{
	struct sni_route *list = (struct sni_route *)1;
	char err[256] = "";
	size_t n = 99;

	assert_int_equal(routes(body, &list, &n, err, sizeof(err)), -1);
	assert_null(list);
	assert_int_equal(n, 0);
	if (!strstr(err, want))
		fail_msg("error \"%s\" does not contain \"%s\" (answer %s)", err, want, body);
}

static void test_control_msg_enroll_request_carries_version_and_hostname(void **state)
{
	char *s = ctl_msg_enroll_request("1.2.3", "front\"1");
	json_t *o;

	(void)state;
	assert_non_null(s);
	o = parse(s);
	assert_string_equal(json_string_value(json_object_get(o, "version")), "1.2.3");
	/* quoted by the library, not by hand */
	assert_string_equal(json_string_value(json_object_get(o, "hostname")), "front\"1");
	assert_int_equal(json_object_size(o), 2);
	json_decref(o);
	free(s);
}

static void test_control_msg_heartbeat_request_reports_health_and_each_listener(void **state)
{
	struct control_report r = {.health = CTL_HEALTH_READY, .nlisteners = 4};
	json_t *o, *g, *sni, *turn;
	char *s;

	(void)state;
	r.listeners[0] = (struct ctl_listener){CTL_LISTENER_GAME, "et", 3, 4000};
	r.listeners[1] = (struct ctl_listener){CTL_LISTENER_SNI, "web", 7, 10000};
	r.listeners[2] = (struct ctl_listener){CTL_LISTENER_GAME, "q3", 0, 16};
	r.listeners[3] = (struct ctl_listener){CTL_LISTENER_TURN, "p2p", 5, 4000};
	s = ctl_msg_heartbeat_request("0.1.0", "host", &r);
	assert_non_null(s);
	o = parse(s);
	assert_string_equal(json_string_value(json_object_get(o, "version")), "0.1.0");
	assert_string_equal(json_string_value(json_object_get(o, "hostname")), "host");
	assert_string_equal(json_string_value(json_object_get(o, "health")), "HEALTH_READY");
	g = json_object_get(o, "gameRelays");
	sni = json_object_get(o, "sniListeners");
	assert_int_equal(json_array_size(g), 2);
	assert_int_equal(json_array_size(sni), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(g, 0), "name")), "et");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(g, 0), "sessions")), 3);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(g, 0), "maxSessions")),
			 4000);
	assert_string_equal(json_string_value(json_object_get(json_array_get(g, 1), "name")), "q3");
	assert_string_equal(json_string_value(json_object_get(json_array_get(sni, 0), "name")),
			    "web");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(sni, 0), "connections")),
			 7);
	assert_int_equal(
	    json_integer_value(json_object_get(json_array_get(sni, 0), "maxConnections")), 10000);
	turn = json_object_get(o, "turnListeners");
	assert_int_equal(json_array_size(turn), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(turn, 0), "name")),
			    "p2p");
	assert_int_equal(
	    json_integer_value(json_object_get(json_array_get(turn, 0), "allocations")), 5);
	assert_int_equal(
	    json_integer_value(json_object_get(json_array_get(turn, 0), "maxAllocations")), 4000);
	assert_int_equal(json_object_size(o), 6);
	json_decref(o);
	free(s);

	/* No TURN listener: no turnListeners key (the report a control plane
	 * without TURN always saw); game and SNI arrays are there, even empty. */
	r.nlisteners = 2;
	s = ctl_msg_heartbeat_request("0.1.0", "host", &r);
	o = parse(s);
	assert_null(json_object_get(o, "turnListeners"));
	assert_int_equal(json_array_size(json_object_get(o, "sniListeners")), 1);
	assert_int_equal(json_object_size(o), 5);
	json_decref(o);
	free(s);

	r.health = CTL_HEALTH_DRAINING;
	r.nlisteners = 0;
	s = ctl_msg_heartbeat_request("0.1.0", "host", &r);
	o = parse(s);
	assert_string_equal(json_string_value(json_object_get(o, "health")), "HEALTH_DRAINING");
	assert_int_equal(json_array_size(json_object_get(o, "gameRelays")), 0);
	json_decref(o);
	free(s);
}

static void test_control_msg_credential_is_read_and_written_back_alike(void **state)
{
	const char *a = "{\"relayId\":\"r-42\",\"apiToken\":\"tok_abc.DEF-123\",\"expires\":\"x\"}";
	struct ctl_credential c, d;
	char err[128], *s;

	(void)state;
	assert_int_equal(ctl_msg_credential(a, strlen(a), &c, err, sizeof(err)), 0);
	assert_string_equal(c.relay_id, "r-42");
	assert_string_equal(c.api_token, "tok_abc.DEF-123");
	s = ctl_msg_credential_json(&c);
	assert_non_null(s);
	assert_int_equal(s[strlen(s) - 1], '\n');
	assert_int_equal(ctl_msg_credential(s, strlen(s), &d, err, sizeof(err)), 0);
	assert_string_equal(d.relay_id, c.relay_id);
	assert_string_equal(d.api_token, c.api_token);
	free(s);
}

static void test_control_msg_credential_without_a_usable_token_is_refused(void **state)
{
	static const char *const bad[] = {
	    "{\"relayId\":\"r\"}",
	    "{\"apiToken\":\"t\"}",
	    "{\"relayId\":\"r\",\"apiToken\":\"\"}",
	    "{\"relayId\":\"r\",\"apiToken\":\"has space\"}",
	    "{\"relayId\":\"r\",\"apiToken\":7}",
	    "{\"relayId\":\"r\",\"apiToken\":\"t\",\"apiToken\":\"u\"}",
	    "[\"relayId\"]",
	    "{\"relayId\":\"r\",\"apiToken\":\"t\"",
	    "",
	};
	struct ctl_credential c;
	char err[128];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (ctl_msg_credential(bad[i], strlen(bad[i]), &c, err, sizeof(err)) != -1)
			fail_msg("accepted %s", bad[i]);
		assert_true(err[0] != '\0');
	}
}

static void test_control_msg_routes_are_read_whole(void **state)
{
	const char *a =
	    "{\"sniRoutes\":["
	    "{\"name\":\"svc.example.com\",\"upstream\":\"10.0.0.2:443\",\"proxyV2\":false},"
	    "{\"name\":\"*.Example.org\",\"upstream\":\"[fd00::1]:8443\",\"proxyV2\":true,"
	    "\"weight\":3},"
	    "{\"name\":\"c.example.com\",\"upstream\":\"10.0.0.3:443\"}"
	    "],\"nextHeartbeatSeconds\":\"30\"}";
	struct sni_route *list;
	char err[128], a6[64];
	size_t n;

	(void)state;
	assert_int_equal(routes(a, &list, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 3);
	assert_string_equal(list[0].name, "svc.example.com");
	assert_int_equal(list[0].upstream.sa.sa_family, AF_INET);
	assert_int_equal(ntohs(list[0].upstream.in.sin_port), 443);
	assert_int_equal(ntohl(list[0].upstream.in.sin_addr.s_addr), 0x0a000002);
	assert_false(list[0].proxy_v2);
	assert_string_equal(list[1].name, "*.Example.org");
	assert_int_equal(list[1].upstream.sa.sa_family, AF_INET6);
	inet_ntop(AF_INET6, &list[1].upstream.in6.sin6_addr, a6, sizeof(a6));
	assert_string_equal(a6, "fd00::1");
	assert_int_equal(ntohs(list[1].upstream.in6.sin6_port), 8443);
	assert_true(list[1].proxy_v2);
	assert_false(list[2].proxy_v2); /* proto3 leaves a false bool out */
	free(list);
}

static void test_control_msg_an_empty_or_absent_route_list_is_no_route(void **state)
{
	static const char *const empty[] = {"{}", "{\"sniRoutes\":[]}", "{\"sniRoutes\":null}",
					    "{\"other\":{\"sniRoutes\":[1]}}"};
	struct sni_route *list;
	char err[128];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
		n = 99;
		assert_int_equal(routes(empty[i], &list, &n, err, sizeof(err)), 0);
		assert_int_equal(n, 0);
		assert_null(list);
	}
}

static void test_control_msg_a_malformed_answer_is_refused(void **state)
{
	(void)state;
	assert_routes_refused("", "not JSON");
	assert_routes_refused("{\"sniRoutes\":[", "not JSON");
	assert_routes_refused("<html>503</html>", "not JSON");
	assert_routes_refused("[]", "not a JSON object");
	assert_routes_refused("\"sniRoutes\"", "not JSON"); /* jansson: an object or an array */
	assert_routes_refused("{\"sniRoutes\":{}}", "sniRoutes: not an array");
	assert_routes_refused("{\"sniRoutes\":\"a.example:1\"}", "sniRoutes: not an array");
	assert_routes_refused("{\"sniRoutes\":[],\"sniRoutes\":[]}", "not JSON");
}

static void test_control_msg_one_bad_route_refuses_the_whole_set(void **state)
{
	(void)state;
	/* a partial set would remove routes that are meant to stay */
	assert_routes_refused(
	    "{\"sniRoutes\":[{\"name\":\"a.example.com\",\"upstream\":\"10.0.0.1:1\"},"
	    "{\"name\":\"b.example.com\",\"upstream\":\"backend:443\"}]}",
	    "sniRoutes[1] (b.example.com).upstream");
	assert_routes_refused("{\"sniRoutes\":[7]}", "sniRoutes[0]: not an object");
	/* over SNI_CONTROL_ROUTES_MAX: refused before a route is read */
	{
		char *big = malloc(64 + 2 * (SNI_CONTROL_ROUTES_MAX + 1));
		size_t k = (size_t)sprintf(big, "{\"sniRoutes\":[");

		for (unsigned i = 0; i <= SNI_CONTROL_ROUTES_MAX; i++)
			k += (size_t)sprintf(big + k, i ? ",7" : "7");
		strcpy(big + k, "]}");
		assert_routes_refused(big, "sniRoutes: 10001 routes, at most 10000");
		free(big);
	}
	assert_routes_refused("{\"sniRoutes\":[{\"upstream\":\"10.0.0.1:1\"}]}",
			      "sniRoutes[0].name");
	assert_routes_refused("{\"sniRoutes\":[{\"name\":\"a b\",\"upstream\":\"10.0.0.1:1\"}]}",
			      "sniRoutes[0].name");
	assert_routes_refused(
	    "{\"sniRoutes\":[{\"name\":\"a.*.com\",\"upstream\":\"10.0.0.1:1\"}]}",
	    "sniRoutes[0].name");
	assert_routes_refused("{\"sniRoutes\":[{\"name\":\"a.com\"}]}",
			      "sniRoutes[0] (a.com).upstream");
	assert_routes_refused("{\"sniRoutes\":[{\"name\":\"a.com\",\"upstream\":\"10.0.0.1\"}]}",
			      "sniRoutes[0] (a.com).upstream");
	assert_routes_refused("{\"sniRoutes\":[{\"name\":\"a.com\",\"upstream\":\"10.0.0.1:0\"}]}",
			      "sniRoutes[0] (a.com).upstream");
	assert_routes_refused("{\"sniRoutes\":[{\"name\":\"a.com\",\"upstream\":443}]}",
			      "sniRoutes[0] (a.com).upstream");
	assert_routes_refused("{\"sniRoutes\":[{\"name\":\"a.com\",\"upstream\":\"10.0.0.1:1\","
			      "\"proxyV2\":\"yes\"}]}",
			      "sniRoutes[0] (a.com).proxyV2");
	/* the same name twice (in any case): which upstream wins is not ours to guess */
	assert_routes_refused("{\"sniRoutes\":[{\"name\":\"a.com\",\"upstream\":\"10.0.0.1:1\"},"
			      "{\"name\":\"A.com\",\"upstream\":\"10.0.0.2:1\"}]}",
			      "a.com");
}

static void test_control_msg_error_body_is_shown_not_parsed(void **state)
{
	const char *e = "{\"code\":\"unavailable\",\"message\":\"try\nlater\"}";
	char out[64], small[12];

	(void)state;
	ctl_msg_error_text(e, strlen(e), false, out, sizeof(out));
	assert_string_equal(out, "{\"code\":\"unavailable\",\"message\":\"try?later\"}");
	/* longer than out: the first bytes, marked as cut */
	ctl_msg_error_text(e, strlen(e), false, small, sizeof(small));
	assert_string_equal(small, "{\"code\":...");
	/* the transfer was cut off after what was kept */
	ctl_msg_error_text("<html>", 6, true, out, sizeof(out));
	assert_string_equal(out, "<html>...");
	ctl_msg_error_text("\xff\x01ok", 4, false, out, sizeof(out));
	assert_string_equal(out, "??ok");
	ctl_msg_error_text("", 0, true, out, sizeof(out));
	assert_string_equal(out, "");
}

static void test_control_msg_values_are_counted_outside_strings(void **state)
{
	const char *a = "{\"sniRoutes\":[{\"name\":\"a,b:{[\\\"\",\"upstream\":\"1.2.3.4:5\"}]}";

	(void)state;
	/* { : [ { : , : outside the strings, plus one */
	assert_int_equal(ctl_msg_values(a, strlen(a), 100), 8);
	assert_int_equal(ctl_msg_values("1", 1, 100), 1);
	/* stops past the limit */
	assert_int_equal(ctl_msg_values("[{},{},{},{},{}]", 16, 3), 4);
}

static void test_control_msg_an_answer_of_empty_objects_is_refused_unparsed(void **state)
{
	size_t n = 3 * (size_t)CTL_ANSWER_VALUES_MAX, o = 0;
	char *body = malloc(n + 64), err[200] = "";
	struct sni_route *list = NULL;
	size_t count = 7;

	(void)state;
	assert_non_null(body);
	o += (size_t)sprintf(body, "{\"sniRoutes\":[],\"x\":[");
	while (o + 4 < n)
		memcpy(body + o, "{},", 3), o += 3;
	memcpy(body + o, "0]}", 3), o += 3;
	assert_int_equal(ctl_msg_routes(body, o, &list, &count, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "JSON values, refused unparsed"));
	assert_null(list);
	assert_int_equal(count, 0);
	free(body);
}

static void test_control_msg_cleartext_url_to_another_host_is_named(void **state)
{
	static const struct {
		const char *url, *host;
		bool remote;
	} cases[] = {
	    {"http://cp.example.com", "cp.example.com", true},
	    {"http://cp.example.com:8080/api", "cp.example.com", true},
	    {"http://user:pw@10.1.2.3:80", "10.1.2.3", true},
	    {"http://[2001:db8::1]:8080", "2001:db8::1", true},
	    {"http://127.0.0.1:18900", "127.0.0.1", false},
	    {"http://127.9.8.7", "127.9.8.7", false},
	    {"http://localhost:80/x", "localhost", false},
	    {"http://cp.LOCALHOST", "cp.LOCALHOST", false},
	    {"http://[::1]:80", "::1", false},
	    {"http://[::ffff:127.0.0.1]", "::ffff:127.0.0.1", false},
	    {"http://a@127.0.0.1@evil.example", "evil.example", true},
	    {"http://localhost.evil.example", "localhost.evil.example", true},
	    {"http://128.0.0.1", "128.0.0.1", true},
	    {"https://cp.example.com", "", false},
	};
	char host[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool r = ctl_url_cleartext_remote(cases[i].url, host, sizeof(host));

		if (r != cases[i].remote)
			fail_msg("%s: %d", cases[i].url, r);
		assert_string_equal(host, cases[i].host);
	}
}

static void test_control_msg_url_password_is_hidden_for_the_log(void **state)
{
	static const struct {
		const char *url, *shown;
	} cases[] = {
	    {"http://user:pass@cp.example.com/api", "http://user:***@cp.example.com/api"},
	    {"https://tok@cp.example.com", "https://***@cp.example.com"},
	    {"http://a:b@c@10.0.0.1:80/x@y", "http://a:***@10.0.0.1:80/x@y"},
	    {"http://:secret@[::1]:8080", "http://:***@[::1]:8080"},
	    {"https://cp.example.com/a@b", "https://cp.example.com/a@b"},
	    {"http://127.0.0.1:18900", "http://127.0.0.1:18900"},
	};
	char out[128], small[12];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		url_redact(cases[i].url, out, sizeof(out));
		assert_string_equal(out, cases[i].shown);
	}
	/* truncated, never the password's first bytes past the cut */
	url_redact("http://u:password@h", small, sizeof(small));
	assert_string_equal(small, "http://u:**");
}

static void test_control_msg_url_without_a_host_has_none(void **state)
{
	static const char *const bad[] = {
	    "http://",	  "https://",	  "https://[::1",   "http://user:pw@",
	    "http://:80", "http:///path", "https://[]:443", "cp.example.com",
	};
	const char *h;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (url_host(bad[i], &h, &n) == 0)
			fail_msg("%s: host '%.*s'", bad[i], (int)n, h);
	assert_int_equal(url_host("https://u:p@[2001:db8::1]:443/x", &h, &n), 0);
	assert_memory_equal(h, "2001:db8::1", n);
	assert_int_equal(url_host("http://cp.example.com?q", &h, &n), 0);
	assert_int_equal(n, strlen("cp.example.com"));
}

static void test_control_msg_a_degraded_heartbeat_names_its_reasons(void **state)
{
	struct control_report r = {.health = CTL_HEALTH_DEGRADED, .nreasons = 2};
	json_t *o, *why;
	char *s;

	(void)state;
	snprintf(r.reasons[0], sizeof(r.reasons[0]), "relay et: the game server did not answer");
	snprintf(r.reasons[1], sizeof(r.reasons[1]),
		 "relay q3: the game server was not probed yet");
	s = ctl_msg_heartbeat_request("0.1.0", "host", &r);
	assert_non_null(s);
	o = parse(s);
	assert_string_equal(json_string_value(json_object_get(o, "health")), "HEALTH_DEGRADED");
	why = json_object_get(o, "healthReasons");
	assert_int_equal(json_array_size(why), 2);
	assert_string_equal(json_string_value(json_array_get(why, 0)),
			    "relay et: the game server did not answer");
	assert_string_equal(json_string_value(json_array_get(why, 1)),
			    "relay q3: the game server was not probed yet");
	json_decref(o);
	free(s);

	/* Ready: no reasons field, whatever the report holds. */
	r.health = CTL_HEALTH_READY;
	s = ctl_msg_heartbeat_request("0.1.0", "host", &r);
	o = parse(s);
	assert_string_equal(json_string_value(json_object_get(o, "health")), "HEALTH_READY");
	assert_null(json_object_get(o, "healthReasons"));
	json_decref(o);
	free(s);

	/* Draining, with its reason. */
	r.health = CTL_HEALTH_DRAINING;
	r.nreasons = 1;
	snprintf(r.reasons[0], sizeof(r.reasons[0]), "draining");
	s = ctl_msg_heartbeat_request("0.1.0", "host", &r);
	o = parse(s);
	assert_string_equal(json_string_value(json_object_get(o, "health")), "HEALTH_DRAINING");
	assert_string_equal(
	    json_string_value(json_array_get(json_object_get(o, "healthReasons"), 0)), "draining");
	json_decref(o);
	free(s);
}

static void test_control_msg_route_file_reads_back_the_set_it_was_written_from(void **state)
{
	struct sni_route in[3], *out = NULL;
	char err[256] = "", *text;
	size_t n = 0;
	json_t *o;

	(void)state;
	memset(in, 0, sizeof(in));
	snprintf(in[0].name, sizeof(in[0].name), "svc.example.com");
	assert_int_equal(addr_parse_numeric("10.0.0.2:443", &in[0].upstream), 0);
	snprintf(in[1].name, sizeof(in[1].name), "*.example.org");
	assert_int_equal(addr_parse_numeric("[fd00::2]:8443", &in[1].upstream), 0);
	in[1].proxy_v2 = true;
	snprintf(in[2].name, sizeof(in[2].name), "a.test");
	assert_int_equal(addr_parse_numeric("192.0.2.7:1", &in[2].upstream), 0);
	text = ctl_msg_routes_json(in, 3);
	assert_non_null(text);
	assert_int_equal(text[strlen(text) - 1], '\n');
	/* The answer's shape, proxyV2 only when true (as proto3 JSON has it). */
	o = parse(text);
	assert_int_equal(json_object_size(o), 1);
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(o, "sniRoutes"), 1), "upstream")),
			    "[fd00::2]:8443");
	assert_null(json_object_get(json_array_get(json_object_get(o, "sniRoutes"), 0), "proxyV2"));
	json_decref(o);
	if (ctl_msg_routes(text, strlen(text), &out, &n, err, sizeof(err)) < 0)
		fail_msg("the route file does not read back: %s", err);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_string_equal(out[i].name, in[i].name);
		assert_true(addr_equal(&out[i].upstream, &in[i].upstream));
		assert_int_equal(out[i].proxy_v2, in[i].proxy_v2);
	}
	assert_int_equal(ctl_msg_routes_sig(out, n), ctl_msg_routes_sig(in, 3));
	free(out);
	free(text);

	/* The empty set is a file too, and reads back empty. */
	text = ctl_msg_routes_json(NULL, 0);
	assert_non_null(text);
	assert_int_equal(ctl_msg_routes(text, strlen(text), &out, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	free(text);
}

static void test_control_msg_route_set_digest_tells_sets_apart(void **state)
{
	struct sni_route a[2], b[2];

	(void)state;
	memset(a, 0, sizeof(a));
	snprintf(a[0].name, sizeof(a[0].name), "a.test");
	assert_int_equal(addr_parse_numeric("10.0.0.1:443", &a[0].upstream), 0);
	snprintf(a[1].name, sizeof(a[1].name), "b.test");
	assert_int_equal(addr_parse_numeric("10.0.0.2:443", &a[1].upstream), 0);
	memcpy(b, a, sizeof(a));
	assert_int_equal(ctl_msg_routes_sig(a, 2), ctl_msg_routes_sig(b, 2));
	assert_int_not_equal(ctl_msg_routes_sig(NULL, 0), 0);
	assert_int_not_equal(ctl_msg_routes_sig(a, 1), ctl_msg_routes_sig(a, 2));
	assert_int_not_equal(ctl_msg_routes_sig(a, 0), ctl_msg_routes_sig(a, 1));
	b[1].proxy_v2 = true;
	assert_int_not_equal(ctl_msg_routes_sig(a, 2), ctl_msg_routes_sig(b, 2));
	b[1].proxy_v2 = false;
	assert_int_equal(addr_parse_numeric("10.0.0.2:444", &b[1].upstream), 0);
	assert_int_not_equal(ctl_msg_routes_sig(a, 2), ctl_msg_routes_sig(b, 2));
	/* The order is part of the set (the one in force is compared in order). */
	b[0] = a[1];
	b[1] = a[0];
	assert_int_not_equal(ctl_msg_routes_sig(a, 2), ctl_msg_routes_sig(b, 2));
}

/* The tunnel certificate's call: the request carries the PEM as given;
 * the answer's chain is taken whole or refused with a reason; "no
 * certificates offered" is told apart from a failure. */
static void test_control_msg_certificate_request_and_answer(void **state)
{
	static const char pem[] = "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n"
				  "-----END CERTIFICATE REQUEST-----\n";
	char *req = ctl_msg_cert_request(pem), *chain, err[256], *big;
	size_t n;

	(void)state;
	assert_non_null(req);
	assert_string_equal(req, "{\"csr\":\"-----BEGIN CERTIFICATE REQUEST-----\\nMIIB\\n"
				 "-----END CERTIFICATE REQUEST-----\\n\"}");
	free(req);

	assert_int_equal(
	    ctl_msg_cert_answer("{\"certificateChain\":\"A\\nB\",\"names\":[\"x\"]}",
				strlen("{\"certificateChain\":\"A\\nB\",\"names\":[\"x\"]}"),
				&chain, &n, err, sizeof(err)),
	    0);
	assert_string_equal(chain, "A\nB");
	assert_int_equal(n, 3);
	free(chain);
	assert_int_equal(ctl_msg_cert_answer("{\"certificateChain\":\"\"}",
					     strlen("{\"certificateChain\":\"\"}"), &chain, &n, err,
					     sizeof(err)),
			 -1);
	assert_null(chain);
	assert_non_null(strstr(err, "non-empty string"));
	assert_int_equal(ctl_msg_cert_answer("{\"certificateChain\":\"a\\u0000b\"}",
					     strlen("{\"certificateChain\":\"a\\u0000b\"}"), &chain,
					     &n, err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "NUL"));
	assert_int_equal(ctl_msg_cert_answer("[]", strlen("[]"), &chain, &n, err, sizeof(err)), -1);
	big = malloc(CTL_CERT_CHAIN_MAX + 64);
	assert_non_null(big);
	n = (size_t)snprintf(big, 32, "{\"certificateChain\":\"");
	memset(big + n, 'A', CTL_CERT_CHAIN_MAX + 1);
	n += CTL_CERT_CHAIN_MAX + 1;
	memcpy(big + n, "\"}", 2);
	assert_int_equal(ctl_msg_cert_answer(big, n + 2, &chain, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "more than"));
	free(big);

	assert_true(ctl_msg_cert_not_offered(400, "{\"code\":\"failed_precondition\"}",
					     strlen("{\"code\":\"failed_precondition\"}")));
	assert_true(ctl_msg_cert_not_offered(501, "", strlen("")));
	assert_true(
	    ctl_msg_cert_not_offered(404, "{\"code\":\"unimplemented\",\"message\":\"x\"}",
				     strlen("{\"code\":\"unimplemented\",\"message\":\"x\"}")));
	assert_false(ctl_msg_cert_not_offered(503, "{\"code\":\"unavailable\"}",
					      strlen("{\"code\":\"unavailable\"}")));
	assert_false(ctl_msg_cert_not_offered(500, "not json", strlen("not json")));
	assert_false(ctl_msg_cert_not_offered(200, "{\"code\":\"failed_precondition\"}",
					      strlen("{\"code\":\"failed_precondition\"}")));
}

static void test_control_msg_heartbeat_reports_the_tunnel_only_when_there_is_one(void **state)
{
	struct control_report r;
	json_t *o, *w;
	char *s;

	(void)state;
	memset(&r, 0, sizeof(r));
	s = ctl_msg_heartbeat_request("0.1.0", "host", &r);
	o = parse(s);
	assert_null(json_object_get(o, "wireguard"));
	json_decref(o);
	free(s);
	r.wg = true;
	strcpy(r.wg_public_key, "tawR8rL8aWI1ECuOkG0eb05Odbsi8DZxpStLtZS/ZHY=");
	r.wg_listen_port = 51820;
	s = ctl_msg_heartbeat_request("0.1.0", "host", &r);
	o = parse(s);
	w = json_object_get(o, "wireguard");
	assert_string_equal(json_string_value(json_object_get(w, "publicKey")), r.wg_public_key);
	assert_int_equal(json_integer_value(json_object_get(w, "listenPort")), 51820);
	assert_null(json_object_get(o, "tunnelUrl"));
	json_decref(o);
	free(s);
	/* tunnelUrl only while a certificate is served, as given. */
	strcpy(r.tunnel_url, "wss://tunnel.r1.relays.example.net/t");
	s = ctl_msg_heartbeat_request("0.1.0", "host", &r);
	o = parse(s);
	assert_string_equal(json_string_value(json_object_get(o, "tunnelUrl")), r.tunnel_url);
	json_decref(o);
	free(s);
}

#define K1 "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
#define K2 "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI="

static void test_control_msg_wireguard_peers_are_read_whole_or_refused_whole(void **state)
{
	const char *good = "{\"wireguardPeers\":[{\"publicKey\":\"" K2 "\",\"allowedIps\":["
			   "\"10.8.0.3/32\"],\"presharedKey\":\"" K1 "\"},{\"publicKey\":\"" K1
			   "\",\"allowedIps\":[\"10.8.0.2/32\",\"192.168.5.0/24\"]}]}";
	const char *bad[] = {
	    "{\"wireguardPeers\":[{\"publicKey\":\"" K1 "\"},{\"publicKey\":\"" K1 "\"}]}",
	    "{\"wireguardPeers\":[{\"publicKey\":\"" K1 "\"},{\"publicKey\":\"AQEB!\"}]}",
	    "{\"wireguardPeers\":[{\"publicKey\":\"" K1 "\",\"allowedIps\":[\"10.8.0.300/32\"]}]}",
	    "{\"wireguardPeers\":[{\"publicKey\":\"" K1 "\",\"presharedKey\":7}]}",
	    "{\"wireguardPeers\":{}}",
	};
	struct wgp_peer *p;
	char err[256];
	size_t n;

	(void)state;
	assert_int_equal(ctl_msg_wg_peers(good, strlen(good), &p, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	assert_int_equal(p[0].key[0], 1); /* sorted by key */
	assert_int_equal(p[0].n_allowed, 2);
	assert_int_equal(p[0].psk[0], 0);
	assert_int_equal(p[1].n_allowed, 1);
	assert_int_equal(p[1].psk[0], 1);
	free(p);
	assert_int_equal(ctl_msg_wg_peers("{}", 2, &p, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	assert_null(p);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(ctl_msg_wg_peers(bad[i], strlen(bad[i]), &p, &n, err, sizeof(err)),
				 -1);
		assert_null(p);
		assert_non_null(strstr(err, "wireguardPeers"));
	}
	assert_int_equal(ctl_msg_wg_peers(bad[0], strlen(bad[0]), &p, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "given twice"));
}

/* The rung-3 tokens: the whole set or none, each one the upgrade reader
 * takes, none twice, and an error that never shows a token. */
static void test_control_msg_tunnel_tokens_are_read_whole_or_refused_whole(void **state)
{
	static const char *const bad[] = {
	    "{\"tunnelTokens\":[\"tok-a\",\"tok-a\"]}",
	    "{\"tunnelTokens\":[\"tok-a\",\"\"]}",
	    "{\"tunnelTokens\":[\"tok-a\",\"has space\"]}",
	    "{\"tunnelTokens\":[\"tok-a\",\"a=b\"]}",
	    "{\"tunnelTokens\":[\"tok-a\",\"nul\\u0000x\"]}",
	    "{\"tunnelTokens\":[\"tok-a\",7]}",
	    "{\"tunnelTokens\":\"tok-a\"}",
	};
	const char *good = "{\"tunnelTokens\":[\"tok-b\",\"AbC.9_~+/x==\"]}";
	char big[400], body[512], err[256];
	char **t;
	size_t n;

	(void)state;
	assert_int_equal(ctl_msg_tunnel_tokens(good, strlen(good), &t, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	assert_string_equal(t[0], "tok-b");
	assert_string_equal(t[1], "AbC.9_~+/x==");
	free(t);
	assert_int_equal(ctl_msg_tunnel_tokens("{}", 2, &t, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	assert_null(t);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(
		    ctl_msg_tunnel_tokens(bad[i], strlen(bad[i]), &t, &n, err, sizeof(err)), -1);
		assert_null(t);
		assert_int_equal(n, 0);
		/* jansson itself refuses a NUL in a string. */
		if (!strstr(err, "tunnelTokens") && !strstr(err, "not JSON"))
			fail_msg("%s: %s", bad[i], err);
		assert_null(strstr(err, "tok-a"));
	}
	/* 256 characters are a token, 257 are not. */
	memset(big, 'k', sizeof(big));
	snprintf(body, sizeof(body), "{\"tunnelTokens\":[\"%.*s\"]}", 256, big);
	assert_int_equal(ctl_msg_tunnel_tokens(body, strlen(body), &t, &n, err, sizeof(err)), 0);
	assert_int_equal(strlen(t[0]), 256);
	free(t);
	snprintf(body, sizeof(body), "{\"tunnelTokens\":[\"%.*s\"]}", 257, big);
	assert_int_equal(ctl_msg_tunnel_tokens(body, strlen(body), &t, &n, err, sizeof(err)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_control_msg_enroll_request_carries_version_and_hostname),
	    cmocka_unit_test(test_control_msg_heartbeat_request_reports_health_and_each_listener),
	    cmocka_unit_test(test_control_msg_heartbeat_reports_the_tunnel_only_when_there_is_one),
	    cmocka_unit_test(test_control_msg_wireguard_peers_are_read_whole_or_refused_whole),
	    cmocka_unit_test(test_control_msg_tunnel_tokens_are_read_whole_or_refused_whole),
	    cmocka_unit_test(test_control_msg_a_degraded_heartbeat_names_its_reasons),
	    cmocka_unit_test(test_control_msg_route_file_reads_back_the_set_it_was_written_from),
	    cmocka_unit_test(test_control_msg_route_set_digest_tells_sets_apart),
	    cmocka_unit_test(test_control_msg_credential_is_read_and_written_back_alike),
	    cmocka_unit_test(test_control_msg_credential_without_a_usable_token_is_refused),
	    cmocka_unit_test(test_control_msg_routes_are_read_whole),
	    cmocka_unit_test(test_control_msg_an_empty_or_absent_route_list_is_no_route),
	    cmocka_unit_test(test_control_msg_a_malformed_answer_is_refused),
	    cmocka_unit_test(test_control_msg_one_bad_route_refuses_the_whole_set),
	    cmocka_unit_test(test_control_msg_error_body_is_shown_not_parsed),
	    cmocka_unit_test(test_control_msg_values_are_counted_outside_strings),
	    cmocka_unit_test(test_control_msg_an_answer_of_empty_objects_is_refused_unparsed),
	    cmocka_unit_test(test_control_msg_cleartext_url_to_another_host_is_named),
	    cmocka_unit_test(test_control_msg_url_password_is_hidden_for_the_log),
	    cmocka_unit_test(test_control_msg_url_without_a_host_has_none),
	    cmocka_unit_test(test_control_msg_certificate_request_and_answer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
