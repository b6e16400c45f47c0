/* SPDX-License-Identifier: ISC */
/* Unit tests for config.c: defaults, every flag, durations, error text. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <string.h>

#include "config.h"

/* Parse "etrelay ARGS..." after conf_defaults; err is cleared first. */
#define PARSE(c, err, ...)                                                           \
	parse_args((c), (err), (int)(sizeof((char *[]){"etrelay", __VA_ARGS__}) /       \
				     sizeof(char *)),                                   \
		   (char *[]){"etrelay", __VA_ARGS__, NULL})

#define ERRLEN 256

static int parse_args(struct etr_conf *c, char *err, int argc, char **argv)
{
	conf_defaults(c);
	memset(err, 0, ERRLEN);
	return conf_parse_args(c, argc, argv, err, ERRLEN);
}

/* err is one line that names the flag and the offending value. */
static void assert_err_names(const char *err, const char *flag, const char *value)
{
	const char *nl = strchr(err, '\n');

	assert_true(err[0] != '\0');
	assert_non_null(strstr(err, flag));
	if (value != NULL)
		assert_non_null(strstr(err, value));
	assert_true(nl == NULL || nl[1] == '\0');
}

static void assert_v4(const union etr_sockaddr *sa, const char *ip, uint16_t port)
{
	struct in_addr want;

	assert_int_equal(inet_pton(AF_INET, ip, &want), 1);
	assert_int_equal(sa->sa.sa_family, AF_INET);
	assert_int_equal(sa->in.sin_addr.s_addr, want.s_addr);
	assert_int_equal(ntohs(sa->in.sin_port), port);
}

/* Defaults */

static void test_config_defaults_listen_on_any_ipv4_port_27960(void **state)
{
	struct etr_conf c;

	(void)state;
	memset(&c, 0x5a, sizeof(c));
	conf_defaults(&c);
	assert_v4(&c.listen, "0.0.0.0", 27960);
}

static void test_config_defaults_have_two_et_masters(void **state)
{
	struct etr_conf c;

	(void)state;
	memset(&c, 0x5a, sizeof(c));
	conf_defaults(&c);
	assert_int_equal(c.nmasters, 2);
	assert_string_equal(c.masters[0].host, "etmaster.idsoftware.com");
	assert_int_equal(c.masters[0].port, 27950);
	assert_string_equal(c.masters[1].host, "etmaster.net");
	assert_int_equal(c.masters[1].port, 27950);
}

static void test_config_defaults_are_et_tags_and_documented_intervals(void **state)
{
	struct etr_conf c;

	(void)state;
	memset(&c, 0x5a, sizeof(c));
	conf_defaults(&c);
	assert_string_equal(c.game, "ET");
	assert_string_equal(c.heartbeat, "EnemyTerritory-1");
	assert_string_equal(c.flatline, "ETFlatline-1");
	assert_int_equal(c.heartbeat_interval_ms, 300000);
	assert_int_equal(c.session_timeout_ms, 120000);
	assert_int_equal(c.probe_timeout_ms, 3000);
	assert_int_equal(c.max_sessions, 4000);
	assert_int_equal(c.backend, CONF_BACKEND_AUTO);
	assert_false(c.debug);
	assert_false(c.help);
	assert_false(c.version);
	assert_string_equal(c.upstream_host, "");
}

static void test_config_upstream_alone_keeps_defaults(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "127.0.0.1:27961"), 0);
	assert_string_equal(c.upstream_host, "127.0.0.1");
	assert_int_equal(c.upstream_port, 27961);
	assert_v4(&c.listen, "0.0.0.0", 27960);
	assert_int_equal(c.nmasters, 2);
	assert_string_equal(c.masters[0].host, "etmaster.idsoftware.com");
	assert_string_equal(c.masters[1].host, "etmaster.net");
	assert_string_equal(c.heartbeat, "EnemyTerritory-1");
	assert_string_equal(c.flatline, "ETFlatline-1");
	assert_int_equal(c.heartbeat_interval_ms, 300000);
	assert_int_equal(c.session_timeout_ms, 120000);
	assert_int_equal(c.probe_timeout_ms, 3000);
	assert_int_equal(c.max_sessions, 4000);
	assert_int_equal(c.backend, CONF_BACKEND_AUTO);
	assert_false(c.debug);
	assert_false(c.help);
	assert_false(c.version);
}

/* --upstream */

static void test_config_upstream_takes_hostname_and_ipv6(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "game.example:27960"), 0);
	assert_string_equal(c.upstream_host, "game.example");
	assert_int_equal(c.upstream_port, 27960);

	assert_int_equal(PARSE(&c, err, "--upstream", "[::1]:27961"), 0);
	assert_string_equal(c.upstream_host, "::1");
	assert_int_equal(c.upstream_port, 27961);
}

static void test_config_missing_upstream_is_an_error(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--debug"), -1);
	assert_err_names(err, "--upstream", NULL);

	assert_int_equal(parse_args(&c, err, 1, (char *[]){"etrelay", NULL}), -1);
	assert_err_names(err, "--upstream", NULL);
}

static void test_config_upstream_without_port_is_an_error(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "gamehost"), -1);
	assert_err_names(err, "--upstream", "gamehost");
}

static void test_config_upstream_with_bad_port_is_an_error(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "gamehost:0"), -1);
	assert_err_names(err, "--upstream", "gamehost:0");
	assert_int_equal(PARSE(&c, err, "--upstream", "gamehost:70000"), -1);
	assert_err_names(err, "--upstream", "gamehost:70000");
	assert_int_equal(PARSE(&c, err, "--upstream", "[::1:27960"), -1);
	assert_err_names(err, "--upstream", "[::1:27960");
}

static void test_config_upstream_without_argument_is_an_error(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream"), -1);
	assert_err_names(err, "--upstream", NULL);
}

/* --listen */

static void test_config_listen_takes_numeric_ipv4(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--listen", "127.0.0.1:27000", "--upstream", "h:1"), 0);
	assert_v4(&c.listen, "127.0.0.1", 27000);
}

static void test_config_listen_takes_ipv6_any(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--listen", "[::]:27960"), 0);
	assert_int_equal(c.listen.sa.sa_family, AF_INET6);
	assert_memory_equal(&c.listen.in6.sin6_addr, &in6addr_any, sizeof(struct in6_addr));
	assert_int_equal(ntohs(c.listen.in6.sin6_port), 27960);
}

static void test_config_listen_rejects_hostname_and_missing_port(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--listen", "nothost:1"), -1);
	assert_err_names(err, "--listen", "nothost:1");
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--listen", "10.0.0.1"), -1);
	assert_err_names(err, "--listen", "10.0.0.1");
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--listen", "10.0.0.1:65536"), -1);
	assert_err_names(err, "--listen", "10.0.0.1:65536");
}

/* --master */

static void test_config_master_without_port_uses_27950_and_replaces_defaults(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--master", "master.example"), 0);
	assert_int_equal(c.nmasters, 1);
	assert_string_equal(c.masters[0].host, "master.example");
	assert_int_equal(c.masters[0].port, CONF_MASTER_PORT);
	assert_int_equal(c.masters[0].port, 27950);
}

static void test_config_master_is_repeatable_in_order(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--master", "a.example:1", "--upstream", "h:1",
			       "--master", "b.example", "--master", "[2001:db8::5]:27951"),
			 0);
	assert_int_equal(c.nmasters, 3);
	assert_string_equal(c.masters[0].host, "a.example");
	assert_int_equal(c.masters[0].port, 1);
	assert_string_equal(c.masters[1].host, "b.example");
	assert_int_equal(c.masters[1].port, 27950);
	assert_string_equal(c.masters[2].host, "2001:db8::5");
	assert_int_equal(c.masters[2].port, 27951);
}

static void test_config_master_accepts_eight(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--master", "m1", "--master", "m2",
			       "--master", "m3", "--master", "m4", "--master", "m5", "--master",
			       "m6", "--master", "m7", "--master", "m8"),
			 0);
	assert_int_equal(c.nmasters, CONF_MASTERS_MAX);
	assert_string_equal(c.masters[0].host, "m1");
	assert_string_equal(c.masters[7].host, "m8");
}

static void test_config_more_than_eight_masters_is_an_error(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--master", "m1", "--master", "m2",
			       "--master", "m3", "--master", "m4", "--master", "m5", "--master",
			       "m6", "--master", "m7", "--master", "m8", "--master", "m9"),
			 -1);
	assert_err_names(err, "--master", "m9");
}

static void test_config_master_with_bad_port_is_an_error(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--master", "m.example:x"), -1);
	assert_err_names(err, "--master", "m.example:x");
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--master", "m.example:0"), -1);
	assert_err_names(err, "--master", "m.example:0");
}

/* --game, --heartbeat, --flatline */

static void test_config_game_et_sets_et_tags(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--game", "et"), 0);
	assert_string_equal(c.game, "ET");
	assert_string_equal(c.heartbeat, "EnemyTerritory-1");
	assert_string_equal(c.flatline, "ETFlatline-1");
}

static void test_config_game_rtcw_sets_wolfenstein_tags(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--game", "rtcw"), 0);
	assert_string_equal(c.game, "RTCW");
	assert_string_equal(c.heartbeat, "Wolfenstein-1");
	assert_string_equal(c.flatline, "WolfFlatline-1");
}

static void test_config_game_q3_has_empty_flatline(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--game", "q3"), 0);
	assert_string_equal(c.game, "Q3");
	assert_string_equal(c.heartbeat, "QuakeArena-1");
	assert_string_equal(c.flatline, "");
}

static void test_config_game_dp_has_empty_flatline(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--game", "dp"), 0);
	assert_string_equal(c.game, "DP");
	assert_string_equal(c.heartbeat, "DarkPlaces");
	assert_string_equal(c.flatline, "");
}

static void test_config_unknown_game_is_an_error(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--game", "doom"), -1);
	assert_err_names(err, "--game", "doom");
}

static void test_config_heartbeat_before_game_still_overrides(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--heartbeat", "Custom-7", "--game", "q3", "--upstream",
			       "h:1"),
			 0);
	assert_string_equal(c.game, "Q3");
	assert_string_equal(c.heartbeat, "Custom-7");
	assert_string_equal(c.flatline, "");
}

static void test_config_heartbeat_after_game_overrides(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--game", "q3", "--heartbeat",
			       "Custom-7"),
			 0);
	assert_string_equal(c.heartbeat, "Custom-7");
	assert_string_equal(c.flatline, "");
}

static void test_config_flatline_before_game_still_overrides(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--flatline", "Dead-1", "--game", "q3", "--upstream",
			       "h:1"),
			 0);
	assert_string_equal(c.heartbeat, "QuakeArena-1");
	assert_string_equal(c.flatline, "Dead-1");
}

static void test_config_empty_flatline_disables_it(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--flatline", "", "--game", "rtcw"),
			 0);
	assert_string_equal(c.heartbeat, "Wolfenstein-1");
	assert_string_equal(c.flatline, "");
}

static void test_config_tag_too_long_is_an_error(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];
	char tag[CONF_TAG_MAX + 1];

	(void)state;
	memset(tag, 'T', CONF_TAG_MAX - 1);
	tag[CONF_TAG_MAX - 1] = '\0';
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--heartbeat", tag), 0);
	assert_string_equal(c.heartbeat, tag);

	memset(tag, 'T', CONF_TAG_MAX);
	tag[CONF_TAG_MAX] = '\0';
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--heartbeat", tag), -1);
	assert_non_null(strstr(err, "--heartbeat"));
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--flatline", tag), -1);
	assert_non_null(strstr(err, "--flatline"));
}

/* Durations and numbers */

static void test_config_duration_flags_are_parsed(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--heartbeat-interval", "10m",
			       "--session-timeout", "30s", "--probe-timeout", "500ms"),
			 0);
	assert_int_equal(c.heartbeat_interval_ms, 600000);
	assert_int_equal(c.session_timeout_ms, 30000);
	assert_int_equal(c.probe_timeout_ms, 500);

	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--heartbeat-interval", "1h",
			       "--session-timeout", "45", "--probe-timeout", "2s"),
			 0);
	assert_int_equal(c.heartbeat_interval_ms, 3600000);
	assert_int_equal(c.session_timeout_ms, 45000);
	assert_int_equal(c.probe_timeout_ms, 2000);
}

static void test_config_bad_heartbeat_interval_names_flag_and_value(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--heartbeat-interval", "abc"), -1);
	assert_err_names(err, "--heartbeat-interval", "abc");
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--heartbeat-interval", "0s"), -1);
	assert_err_names(err, "--heartbeat-interval", "0s");
}

static void test_config_bad_session_timeout_names_flag_and_value(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--session-timeout", "5x"), -1);
	assert_err_names(err, "--session-timeout", "5x");
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--session-timeout", "-1"), -1);
	assert_err_names(err, "--session-timeout", "-1");
}

static void test_config_bad_probe_timeout_names_flag_and_value(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--probe-timeout", "0ms"), -1);
	assert_err_names(err, "--probe-timeout", "0ms");
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--probe-timeout", "fast"), -1);
	assert_err_names(err, "--probe-timeout", "fast");
}

static void test_config_max_sessions_is_parsed(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--max-sessions", "100"), 0);
	assert_int_equal(c.max_sessions, 100);
	assert_int_equal(PARSE(&c, err, "--max-sessions", "1", "--upstream", "h:1"), 0);
	assert_int_equal(c.max_sessions, 1);
}

static void test_config_bad_max_sessions_names_flag_and_value(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--max-sessions", "0"), -1);
	assert_err_names(err, "--max-sessions", "0");
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--max-sessions", "lots"), -1);
	assert_err_names(err, "--max-sessions", "lots");
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--max-sessions", "-5"), -1);
	assert_err_names(err, "--max-sessions", "-5");
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--max-sessions", "12x"), -1);
	assert_err_names(err, "--max-sessions", "12x");
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--max-sessions", "99999999999"), -1);
	assert_err_names(err, "--max-sessions", "99999999999");
}

/* --backend, --debug, --help, --version */

static void test_config_backend_values_are_parsed(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--backend", "io_uring"), 0);
	assert_int_equal(c.backend, CONF_BACKEND_URING);
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--backend", "epoll"), 0);
	assert_int_equal(c.backend, CONF_BACKEND_EPOLL);
	assert_int_equal(PARSE(&c, err, "--backend", "epoll", "--backend", "auto", "--upstream",
			       "h:1"),
			 0);
	assert_int_equal(c.backend, CONF_BACKEND_AUTO);
}

static void test_config_unknown_backend_names_flag_and_value(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--backend", "kqueue"), -1);
	assert_err_names(err, "--backend", "kqueue");
}

static void test_config_debug_flag_is_set(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--debug"), 0);
	assert_true(c.debug);
}

static void test_config_help_does_not_need_upstream(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--help"), 0);
	assert_true(c.help);
	assert_false(c.version);
	assert_int_equal(PARSE(&c, err, "-h"), 0);
	assert_true(c.help);
}

static void test_config_version_does_not_need_upstream(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--version"), 0);
	assert_true(c.version);
	assert_false(c.help);
	assert_int_equal(PARSE(&c, err, "-V"), 0);
	assert_true(c.version);
}

static void test_config_unknown_option_error_names_it(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--bogus"), -1);
	assert_err_names(err, "--bogus", NULL);
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "-z"), -1);
	assert_err_names(err, "-z", NULL);
}

static void test_config_unknown_short_option_in_a_cluster_error_names_it(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "-zV", "--upstream", "h:1"), -1);
	assert_err_names(err, "-z", NULL);
}

static void test_config_missing_value_error_names_the_flag(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--game"), -1);
	assert_err_names(err, "--game", NULL);
}

static void test_config_parses_again_after_an_error(void **state)
{
	struct etr_conf c;
	char err[ERRLEN];

	(void)state;
	/* getopt's state must be reset on every call. */
	assert_int_equal(PARSE(&c, err, "--upstream", "h:1", "--game", "doom"), -1);
	assert_int_equal(PARSE(&c, err, "--upstream", "h:2", "--game", "rtcw"), 0);
	assert_int_equal(c.upstream_port, 2);
	assert_string_equal(c.heartbeat, "Wolfenstein-1");
	assert_int_equal(PARSE(&c, err, "--upstream", "h:3", "--debug"), 0);
	assert_int_equal(c.upstream_port, 3);
	assert_true(c.debug);

	/* An error in the middle of "-zh" must not leave the 'h' pending. */
	assert_int_equal(PARSE(&c, err, "-zh"), -1);
	assert_int_equal(PARSE(&c, err, "--upstream", "h:4"), 0);
	assert_int_equal(c.upstream_port, 4);
	assert_false(c.help);
	assert_false(c.version);
}

static void test_config_usage_mentions_the_options(void **state)
{
	(void)state;
	assert_non_null(strstr(conf_usage, "--upstream"));
	assert_non_null(strstr(conf_usage, "--master"));
	assert_non_null(strstr(conf_usage, "--game"));
}

/* conf_parse_duration */

static void test_config_duration_bare_number_is_seconds(void **state)
{
	uint64_t ms = 0;

	(void)state;
	assert_int_equal(conf_parse_duration("300", &ms), 0);
	assert_int_equal(ms, 300000);
	assert_int_equal(conf_parse_duration("1", &ms), 0);
	assert_int_equal(ms, 1000);
}

static void test_config_duration_accepts_every_unit(void **state)
{
	uint64_t ms = 0;

	(void)state;
	assert_int_equal(conf_parse_duration("300s", &ms), 0);
	assert_int_equal(ms, 300000);
	assert_int_equal(conf_parse_duration("500ms", &ms), 0);
	assert_int_equal(ms, 500);
	assert_int_equal(conf_parse_duration("1ms", &ms), 0);
	assert_int_equal(ms, 1);
	assert_int_equal(conf_parse_duration("5m", &ms), 0);
	assert_int_equal(ms, 300000);
	assert_int_equal(conf_parse_duration("1h", &ms), 0);
	assert_int_equal(ms, 3600000);
	assert_int_equal(conf_parse_duration("5ms", &ms), 0);
	assert_int_equal(ms, 5);
}

static void test_config_duration_rejects_zero(void **state)
{
	uint64_t ms = 0;

	(void)state;
	assert_int_equal(conf_parse_duration("0", &ms), -1);
	assert_int_equal(conf_parse_duration("0s", &ms), -1);
	assert_int_equal(conf_parse_duration("0ms", &ms), -1);
	assert_int_equal(conf_parse_duration("0h", &ms), -1);
}

static void test_config_duration_rejects_negative_and_junk(void **state)
{
	uint64_t ms = 0;

	(void)state;
	assert_int_equal(conf_parse_duration("-1", &ms), -1);
	assert_int_equal(conf_parse_duration("-5s", &ms), -1);
	assert_int_equal(conf_parse_duration("abc", &ms), -1);
	assert_int_equal(conf_parse_duration("5x", &ms), -1);
	assert_int_equal(conf_parse_duration("5mss", &ms), -1);
	assert_int_equal(conf_parse_duration("5 s", &ms), -1);
	assert_int_equal(conf_parse_duration("", &ms), -1);
	assert_int_equal(conf_parse_duration("s", &ms), -1);
	assert_int_equal(conf_parse_duration("ms", &ms), -1);
	assert_int_equal(conf_parse_duration(" 5", &ms), -1);
	assert_int_equal(conf_parse_duration("+5s", &ms), -1);
}

static void test_config_duration_rejects_overflow(void **state)
{
	uint64_t ms = 0;

	(void)state;
	/* Does not fit 64 bits at all. */
	assert_int_equal(conf_parse_duration("99999999999999999999", &ms), -1);
	assert_int_equal(conf_parse_duration("99999999999999999999ms", &ms), -1);
	/* Fits 64 bits, but not once scaled to milliseconds. */
	assert_int_equal(conf_parse_duration("18446744073709551615", &ms), -1);
	assert_int_equal(conf_parse_duration("18446744073709551615s", &ms), -1);
	assert_int_equal(conf_parse_duration("18446744073709552s", &ms), -1);
	assert_int_equal(conf_parse_duration("5124095576030432m", &ms), -1);
	assert_int_equal(conf_parse_duration("5124095576030432h", &ms), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_defaults_listen_on_any_ipv4_port_27960),
		cmocka_unit_test(test_config_defaults_have_two_et_masters),
		cmocka_unit_test(test_config_defaults_are_et_tags_and_documented_intervals),
		cmocka_unit_test(test_config_upstream_alone_keeps_defaults),
		cmocka_unit_test(test_config_upstream_takes_hostname_and_ipv6),
		cmocka_unit_test(test_config_missing_upstream_is_an_error),
		cmocka_unit_test(test_config_upstream_without_port_is_an_error),
		cmocka_unit_test(test_config_upstream_with_bad_port_is_an_error),
		cmocka_unit_test(test_config_upstream_without_argument_is_an_error),
		cmocka_unit_test(test_config_listen_takes_numeric_ipv4),
		cmocka_unit_test(test_config_listen_takes_ipv6_any),
		cmocka_unit_test(test_config_listen_rejects_hostname_and_missing_port),
		cmocka_unit_test(test_config_master_without_port_uses_27950_and_replaces_defaults),
		cmocka_unit_test(test_config_master_is_repeatable_in_order),
		cmocka_unit_test(test_config_master_accepts_eight),
		cmocka_unit_test(test_config_more_than_eight_masters_is_an_error),
		cmocka_unit_test(test_config_master_with_bad_port_is_an_error),
		cmocka_unit_test(test_config_game_et_sets_et_tags),
		cmocka_unit_test(test_config_game_rtcw_sets_wolfenstein_tags),
		cmocka_unit_test(test_config_game_q3_has_empty_flatline),
		cmocka_unit_test(test_config_game_dp_has_empty_flatline),
		cmocka_unit_test(test_config_unknown_game_is_an_error),
		cmocka_unit_test(test_config_heartbeat_before_game_still_overrides),
		cmocka_unit_test(test_config_heartbeat_after_game_overrides),
		cmocka_unit_test(test_config_flatline_before_game_still_overrides),
		cmocka_unit_test(test_config_empty_flatline_disables_it),
		cmocka_unit_test(test_config_tag_too_long_is_an_error),
		cmocka_unit_test(test_config_duration_flags_are_parsed),
		cmocka_unit_test(test_config_bad_heartbeat_interval_names_flag_and_value),
		cmocka_unit_test(test_config_bad_session_timeout_names_flag_and_value),
		cmocka_unit_test(test_config_bad_probe_timeout_names_flag_and_value),
		cmocka_unit_test(test_config_max_sessions_is_parsed),
		cmocka_unit_test(test_config_bad_max_sessions_names_flag_and_value),
		cmocka_unit_test(test_config_backend_values_are_parsed),
		cmocka_unit_test(test_config_unknown_backend_names_flag_and_value),
		cmocka_unit_test(test_config_debug_flag_is_set),
		cmocka_unit_test(test_config_help_does_not_need_upstream),
		cmocka_unit_test(test_config_version_does_not_need_upstream),
		cmocka_unit_test(test_config_unknown_option_error_names_it),
		cmocka_unit_test(test_config_unknown_short_option_in_a_cluster_error_names_it),
		cmocka_unit_test(test_config_missing_value_error_names_the_flag),
		cmocka_unit_test(test_config_parses_again_after_an_error),
		cmocka_unit_test(test_config_usage_mentions_the_options),
		cmocka_unit_test(test_config_duration_bare_number_is_seconds),
		cmocka_unit_test(test_config_duration_accepts_every_unit),
		cmocka_unit_test(test_config_duration_rejects_zero),
		cmocka_unit_test(test_config_duration_rejects_negative_and_junk),
		cmocka_unit_test(test_config_duration_rejects_overflow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
