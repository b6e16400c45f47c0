/* SPDX-License-Identifier: ISC */
/* Unit tests for config.c: every flag and file key, their errors, the layers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf_schema.h"
#include "config.h"
#include "control_conf.h"
#include "relay_conf.h"
#include "sni_conf.h"
#include "tun_r3.h"
#include "turn_conf.h"

/* The name config files are loaded under, as in "t.conf:3: ...". */
#define PATH "t.conf"

/* argc and argv for "etrelay ARGS...". */
/* clang-format off */
#define ARGV(...)                                                                 \
	(int)(sizeof((char *[]){ "etrelay", __VA_ARGS__ }) / sizeof(char *)),    \
		(char *[]){ "etrelay", __VA_ARGS__, NULL }
#define NOARGS 1, (char *[]){ "etrelay", NULL }
/* clang-format on */

/* conf_parse_args after conf_defaults, with e cleared. */
static int args(struct etr_conf *c, struct conf_errors *e, int argc, char **argv)
{
	conf_defaults(c, &etr_conf_schema);
	memset(e, 0, sizeof(*e));
	return conf_parse_args(c, argc, argv, e);
}

/* The command line with no file, as main runs it: parse, then finish. */
static int cli(struct etr_conf *c, struct conf_errors *e, int argc, char **argv)
{
	if (args(c, e, argc, argv) < 0)
		return -1;
	return conf_finish(c, e);
}

/* conf_load of len bytes of text under PATH, which main also puts in path. */
static int load_n(struct etr_conf *c, struct conf_errors *e, const char *text, size_t len)
{
	c->path = PATH;
	return conf_load(c, text, len, PATH, e);
}

static int load(struct etr_conf *c, struct conf_errors *e, const char *text)
{
	return load_n(c, e, text, strlen(text));
}

/* The command line (which must parse), the file, then conf_finish, as main
 * runs them; errors of both stages gather in e. 0 when both pass. */
static int run(struct etr_conf *c, struct conf_errors *e, const char *text, int argc, char **argv)
{
	int rc;

	assert_int_equal(args(c, e, argc, argv), 0);
	rc = load(c, e, text);
	if (conf_finish(c, e) < 0)
		rc = -1;
	return rc;
}

static unsigned newlines(const char *s)
{
	unsigned n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Exactly n errors: n counted, n lines of text, each ended by a newline. */
static void assert_errors(const struct conf_errors *e, unsigned n)
{
	if (e->count != n || newlines(e->text) != n)
		fail_msg("want %u errors, have count %u and text:\n%s", n, e->count, e->text);
	assert_int_equal(strlen(e->text), e->len);
	if (n > 0)
		assert_int_equal(e->text[e->len - 1], '\n');
}

/* The only error names the flag and, when given, the offending value. */
static void assert_err_names(const struct conf_errors *e, const char *flag, const char *value)
{
	assert_errors(e, 1);
	if (strstr(e->text, flag) == NULL || (value != NULL && strstr(e->text, value) == NULL))
		fail_msg("want '%s' and '%s' in: %s", flag, value ? value : "", e->text);
}

/* Some error line begins with prefix and contains a and b (either may be
 * NULL). */
static void assert_err_line(const struct conf_errors *e, const char *prefix, const char *a,
			    const char *b)
{
	const char *p = e->text;

	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		char line[sizeof(e->text)];

		memcpy(line, p, n);
		line[n] = '\0';
		if (strncmp(line, prefix, strlen(prefix)) == 0 && (!a || strstr(line, a)) &&
		    (!b || strstr(line, b)))
			return;
		p += n + (nl != NULL);
	}
	fail_msg("no error line '%s...' with '%s' and '%s' in:\n%s", prefix, a ? a : "", b ? b : "",
		 e->text);
}

static const struct relay_conf *relay(const struct etr_conf *c, const char *name)
{
	for (unsigned i = 0; i < c->nrelays; i++)
		if (strcmp(c->relays[i].name, name) == 0)
			return &c->relays[i];
	fail_msg("no relay '%s'", name);
	return NULL;
}

static void assert_v4(const union etr_sockaddr *sa, const char *ip, uint16_t port)
{
	struct in_addr want;

	assert_int_equal(inet_pton(AF_INET, ip, &want), 1);
	assert_int_equal(sa->sa.sa_family, AF_INET);
	assert_int_equal(sa->in.sin_addr.s_addr, want.s_addr);
	assert_int_equal(ntohs(sa->in.sin_port), port);
}

static void assert_master(const struct relay_conf *r, unsigned i, const char *host, uint16_t port)
{
	assert_true(i < r->nmasters);
	assert_string_equal(r->masters[i].host, host);
	assert_int_equal(r->masters[i].port, port);
}

/* Defaults */

static void test_config_defaults_listen_on_any_ipv4_port_27960(void **state)
{
	struct etr_conf c;

	(void)state;
	memset(&c, 0x5a, sizeof(c));
	conf_defaults(&c, &etr_conf_schema);
	assert_v4(&c.base.listen, "0.0.0.0", 27960);
}

static void test_config_defaults_leave_the_masters_to_the_game(void **state)
{
	struct etr_conf c;

	(void)state;
	memset(&c, 0x5a, sizeof(c));
	conf_defaults(&c, &etr_conf_schema);
	assert_int_equal(c.base.nmasters, 0);
	assert_false(c.base.masters_set);
}

static void test_config_default_masters_follow_the_game(void **state)
{
	static const struct {
		const char *game, *m0, *m1;
	} want[] = {
	    {"et", "etmaster.idsoftware.com", "etmaster.net"},
	    {"rtcw", "wolfmaster.idsoftware.com", "wolfmaster.s4ndmod.com"},
	    {"q3", "master.ioquake3.org", "dpmaster.deathmask.net"},
	    {"dp", "dpmaster.deathmask.net", "dpmaster.tchr.no"},
	};
	struct etr_conf c;
	struct conf_errors e, w;
	char text[128];

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char game[8];

		snprintf(game, sizeof(game), "%s", want[i].game);
		assert_int_equal(cli(&c, &e, ARGV("--upstream", "127.0.0.1:27961", "--game", game)),
				 0);
		assert_int_equal(c.relays[0].nmasters, 2);
		assert_master(&c.relays[0], 0, want[i].m0, 27950);
		assert_master(&c.relays[0], 1, want[i].m1, 27950);
		memset(&w, 0, sizeof(w));
		assert_int_equal(conf_master_warnings(&c, &w), 0);
		/* a relay section's game picks its list, the base's is ET */
		snprintf(text, sizeof(text), "[relay a]\nupstream h:1\ngame %s\n", want[i].game);
		assert_int_equal(run(&c, &e, text, NOARGS), 0);
		assert_master(&c.relays[0], 0, want[i].m0, 27950);
	}
	/* given masters win over the game's */
	assert_int_equal(
	    run(&c, &e, "master m.example\n[relay a]\nupstream h:1\ngame q3\n", NOARGS), 0);
	assert_int_equal(c.relays[0].nmasters, 1);
	assert_master(&c.relays[0], 0, "m.example", 27950);
}

static void test_config_a_master_of_another_game_is_a_warning(void **state)
{
	struct etr_conf c;
	struct conf_errors e, w;

	(void)state;
	memset(&w, 0, sizeof(w));
	assert_int_equal(run(&c, &e,
			     "[relay oa]\nupstream h:1\ngame q3\nmaster etmaster.net\n"
			     "master dpmaster.deathmask.net\nmaster m.example\n",
			     NOARGS),
			 0);
	assert_int_equal(conf_master_warnings(&c, &w), 1);
	assert_err_line(&w, "t.conf:4: warning: relay oa: master etmaster.net", "ET", NULL);
	memset(&w, 0, sizeof(w));
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--master", "master.ioquake3.org")),
			 0);
	assert_int_equal(conf_master_warnings(&c, &w), 1);
	assert_err_line(&w, "etrelay: --master: warning: relay default: master master.ioquake3.org",
			"Q3", NULL);
}

static void test_config_defaults_are_et_with_documented_values_and_no_relay(void **state)
{
	struct etr_conf c;

	(void)state;
	memset(&c, 0x5a, sizeof(c));
	conf_defaults(&c, &etr_conf_schema);
	assert_string_equal(c.base.name, "default");
	assert_int_equal(c.base.line, 0);
	assert_string_equal(c.base.game, "ET");
	assert_false(c.base.heartbeat_set);
	assert_false(c.base.flatline_set);
	assert_int_equal(c.base.heartbeat_interval_ms, 300000);
	assert_int_equal(c.base.session_timeout_ms, 120000);
	assert_int_equal(c.base.probe_timeout_ms, 3000);
	assert_int_equal(c.base.max_sessions, 4000);
	assert_int_equal(c.base.port_min, 0);
	assert_int_equal(c.base.port_max, 0);
	assert_string_equal(c.base.upstream_host, "");
	assert_int_equal(c.backend, CONF_BACKEND_AUTO);
	assert_false(c.debug);
	assert_false(c.ops_enabled);
	assert_false(c.ops_allow_public);
	assert_int_equal(c.drain_timeout_ms, 0);
	assert_null(c.path);
	assert_false(c.path_given);
	assert_false(c.test);
	assert_false(c.probe);
	assert_false(c.help);
	assert_false(c.version);
	assert_int_equal(c.ncli, 0);
	assert_false(c.cli_upstream);
	assert_int_equal(c.nrelays, 0);
}

static void test_config_upstream_alone_makes_one_default_relay_with_defaults(void **state)
{
	struct etr_conf c;
	struct conf_errors e;
	const struct relay_conf *r = &c.relays[0];

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "127.0.0.1:27961")), 0);
	assert_errors(&e, 0);
	assert_int_equal(c.nrelays, 1);
	assert_string_equal(r->name, "default");
	assert_int_equal(r->line, 0);
	assert_string_equal(r->upstream_host, "127.0.0.1");
	assert_int_equal(r->upstream_port, 27961);
	assert_v4(&r->listen, "0.0.0.0", 27960);
	assert_int_equal(r->nmasters, 2);
	assert_master(r, 0, "etmaster.idsoftware.com", 27950);
	assert_master(r, 1, "etmaster.net", 27950);
	assert_string_equal(r->game, "ET");
	assert_string_equal(r->heartbeat, "EnemyTerritory-1");
	assert_string_equal(r->flatline, "ETFlatline-1");
	assert_int_equal(r->heartbeat_interval_ms, 300000);
	assert_int_equal(r->session_timeout_ms, 120000);
	assert_int_equal(r->probe_timeout_ms, 3000);
	assert_int_equal(r->max_sessions, 4000);
	assert_int_equal(r->port_min, 0);
	assert_int_equal(r->port_max, 0);
	assert_int_equal(c.backend, CONF_BACKEND_AUTO);
	assert_false(c.debug);
	assert_false(c.ops_enabled);
	assert_int_equal(c.drain_timeout_ms, 0);
	assert_false(c.help);
	assert_false(c.version);
	assert_null(c.path);
}

/* --upstream */

static void test_config_upstream_takes_hostname_and_ipv6(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "game.example:27960")), 0);
	assert_string_equal(c.relays[0].upstream_host, "game.example");
	assert_int_equal(c.relays[0].upstream_port, 27960);

	assert_int_equal(cli(&c, &e, ARGV("--upstream", "[::1]:27961")), 0);
	assert_string_equal(c.relays[0].upstream_host, "::1");
	assert_int_equal(c.relays[0].upstream_port, 27961);
}

/* The schema's keys: one name each across every kind's part (a second
 * would never be found), each section's too, within CONF_KEYS_MAX (each
 * relay's key_line[]), every one with a setter. */
static void test_config_schema_names_each_key_once(void **state)
{
	const char *seen[CONF_KEYS_MAX];
	size_t n = 0;

	(void)state;
	for (const struct conf_part *const *p = etr_conf_schema.parts; *p; p++) {
		const struct conf_section *s = (*p)->section;

		for (size_t i = 0; i < (*p)->nkeys; i++) {
			assert_true(n < CONF_KEYS_MAX);
			assert_non_null((*p)->keys[i].set);
			for (size_t j = 0; j < n; j++)
				assert_string_not_equal(seen[j], (*p)->keys[i].name);
			seen[n++] = (*p)->keys[i].name;
		}
		for (size_t i = 0; s && i < s->nkeys; i++) {
			assert_non_null(s->keys[i].set);
			for (size_t j = 0; j < i; j++)
				assert_string_not_equal(s->keys[j].name, s->keys[i].name);
		}
	}
	assert_true(n > 80);
}

static void test_config_missing_upstream_is_an_error_from_conf_finish(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--debug")), 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	assert_err_names(&e, "upstream", NULL);

	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	assert_err_names(&e, "upstream", NULL);
}

static void test_config_only_upstream_marks_the_command_line_as_naming_a_server(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1")), 0);
	assert_true(c.cli_upstream);
	assert_int_equal(
	    args(&c, &e,
		 ARGV("--listen", "127.0.0.1:1", "--master", "m", "--debug", "-c", "x.conf")),
	    0);
	assert_false(c.cli_upstream);
}

static void test_config_upstream_without_port_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "gamehost")), -1);
	assert_err_names(&e, "--upstream", "gamehost");
}

static void test_config_upstream_with_bad_port_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "gamehost:0")), -1);
	assert_err_names(&e, "--upstream", "gamehost:0");
	assert_int_equal(args(&c, &e, ARGV("--upstream", "gamehost:70000")), -1);
	assert_err_names(&e, "--upstream", "gamehost:70000");
	assert_int_equal(args(&c, &e, ARGV("--upstream", "[::1:27960")), -1);
	assert_err_names(&e, "--upstream", "[::1:27960");
}

static void test_config_upstream_without_argument_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream")), -1);
	assert_err_names(&e, "--upstream", NULL);
}

/* --listen */

static void test_config_listen_takes_numeric_ipv4(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--listen", "127.0.0.1:27000", "--upstream", "h:1")), 0);
	assert_v4(&c.relays[0].listen, "127.0.0.1", 27000);
}

static void test_config_listen_takes_ipv6_any(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--listen", "[::]:27960")), 0);
	assert_int_equal(c.relays[0].listen.sa.sa_family, AF_INET6);
	assert_memory_equal(&c.relays[0].listen.in6.sin6_addr, &in6addr_any,
			    sizeof(struct in6_addr));
	assert_int_equal(ntohs(c.relays[0].listen.in6.sin6_port), 27960);
}

static void test_config_listen_rejects_hostname_and_missing_port(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--listen", "nothost:1")), -1);
	assert_err_names(&e, "--listen", "nothost:1");
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--listen", "10.0.0.1")), -1);
	assert_err_names(&e, "--listen", "10.0.0.1");
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--listen", "10.0.0.1:65536")), -1);
	assert_err_names(&e, "--listen", "10.0.0.1:65536");
}

/* --master */

static void test_config_master_without_port_uses_27950_and_replaces_defaults(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--master", "master.example")), 0);
	assert_int_equal(c.relays[0].nmasters, 1);
	assert_master(&c.relays[0], 0, "master.example", CONF_MASTER_PORT);
	assert_int_equal(c.relays[0].masters[0].port, 27950);
}

static void test_config_master_is_repeatable_in_order(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(
	    cli(&c, &e,
		ARGV("--master", "a.example:1", "--upstream", "h:1", "--master", "b.example",
		     "--master", "[2001:db8::5]:27951", "--listen", "[::]:27960")),
	    0);
	assert_int_equal(c.relays[0].nmasters, 3);
	assert_master(&c.relays[0], 0, "a.example", 1);
	assert_master(&c.relays[0], 1, "b.example", 27950);
	assert_master(&c.relays[0], 2, "2001:db8::5", 27951);
}

static void test_config_master_accepts_eight(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--master", "m1", "--master", "m2",
				  "--master", "m3", "--master", "m4", "--master", "m5", "--master",
				  "m6", "--master", "m7", "--master", "m8")),
			 0);
	assert_int_equal(c.relays[0].nmasters, CONF_MASTERS_MAX);
	assert_master(&c.relays[0], 0, "m1", 27950);
	assert_master(&c.relays[0], 7, "m8", 27950);
}

static void test_config_more_than_eight_masters_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;
	int rc;

	(void)state;
	rc = args(&c, &e,
		  ARGV("--upstream", "h:1", "--master", "m1", "--master", "m2", "--master", "m3",
		       "--master", "m4", "--master", "m5", "--master", "m6", "--master", "m7",
		       "--master", "m8", "--master", "m9"));
	/* Checked now, by the contract; at the latest, conf_finish must say. */
	if (rc == 0)
		rc = conf_finish(&c, &e);
	assert_int_equal(rc, -1);
	assert_err_names(&e, "--master", "m9");
}

static void test_config_master_with_bad_port_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--master", "m.example:x")), -1);
	assert_err_names(&e, "--master", "m.example:x");
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--master", "m.example:0")), -1);
	assert_err_names(&e, "--master", "m.example:0");
}

/* --game, --heartbeat, --flatline */

static void test_config_game_et_sets_et_tags(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--game", "et")), 0);
	assert_string_equal(c.relays[0].game, "ET");
	assert_string_equal(c.relays[0].heartbeat, "EnemyTerritory-1");
	assert_string_equal(c.relays[0].flatline, "ETFlatline-1");
}

static void test_config_game_rtcw_sets_wolfenstein_tags(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--game", "rtcw")), 0);
	assert_string_equal(c.relays[0].game, "RTCW");
	assert_string_equal(c.relays[0].heartbeat, "Wolfenstein-1");
	assert_string_equal(c.relays[0].flatline, "WolfFlatline-1");
}

static void test_config_game_q3_has_empty_flatline(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--game", "q3")), 0);
	assert_string_equal(c.relays[0].game, "Q3");
	assert_string_equal(c.relays[0].heartbeat, "QuakeArena-1");
	assert_string_equal(c.relays[0].flatline, "");
}

static void test_config_game_dp_has_empty_flatline(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--game", "dp")), 0);
	assert_string_equal(c.relays[0].game, "DP");
	assert_string_equal(c.relays[0].heartbeat, "DarkPlaces");
	assert_string_equal(c.relays[0].flatline, "");
}

static void test_config_unknown_game_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--game", "doom")), -1);
	assert_err_names(&e, "--game", "doom");
}

static void test_config_heartbeat_before_game_still_overrides(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(
	    cli(&c, &e, ARGV("--heartbeat", "Custom-7", "--game", "q3", "--upstream", "h:1")), 0);
	assert_string_equal(c.relays[0].game, "Q3");
	assert_string_equal(c.relays[0].heartbeat, "Custom-7");
	assert_string_equal(c.relays[0].flatline, "");
}

static void test_config_heartbeat_after_game_overrides(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(
	    cli(&c, &e, ARGV("--upstream", "h:1", "--game", "q3", "--heartbeat", "Custom-7")), 0);
	assert_string_equal(c.relays[0].heartbeat, "Custom-7");
	assert_string_equal(c.relays[0].flatline, "");
}

static void test_config_flatline_before_game_still_overrides(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(
	    cli(&c, &e, ARGV("--flatline", "Dead-1", "--game", "q3", "--upstream", "h:1")), 0);
	assert_string_equal(c.relays[0].heartbeat, "QuakeArena-1");
	assert_string_equal(c.relays[0].flatline, "Dead-1");
}

static void test_config_empty_flatline_disables_it(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--flatline", "", "--game", "rtcw")),
			 0);
	assert_string_equal(c.relays[0].heartbeat, "Wolfenstein-1");
	assert_string_equal(c.relays[0].flatline, "");
}

static void test_config_tag_too_long_or_with_spaces_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;
	char tag[CONF_TAG_MAX + 1];

	(void)state;
	memset(tag, 'T', CONF_TAG_MAX - 1);
	tag[CONF_TAG_MAX - 1] = '\0';
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--heartbeat", tag)), 0);
	assert_string_equal(c.relays[0].heartbeat, tag);

	memset(tag, 'T', CONF_TAG_MAX);
	tag[CONF_TAG_MAX] = '\0';
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--heartbeat", tag)), -1);
	assert_err_names(&e, "--heartbeat", NULL);
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--flatline", tag)), -1);
	assert_err_names(&e, "--flatline", NULL);

	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--heartbeat", "Two Words")), -1);
	assert_err_names(&e, "--heartbeat", "Two Words");
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--heartbeat", "")), -1);
	assert_err_names(&e, "--heartbeat", NULL);
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--flatline", "back\\slash")), -1);
	assert_err_names(&e, "--flatline", "back\\slash");
}

/* Durations and numbers */

static void test_config_duration_flags_are_parsed(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--heartbeat-interval", "10m",
				  "--session-timeout", "30s", "--probe-timeout", "500ms")),
			 0);
	assert_int_equal(c.relays[0].heartbeat_interval_ms, 600000);
	assert_int_equal(c.relays[0].session_timeout_ms, 30000);
	assert_int_equal(c.relays[0].probe_timeout_ms, 500);

	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--heartbeat-interval", "1h",
				  "--session-timeout", "45", "--probe-timeout", "2s")),
			 0);
	assert_int_equal(c.relays[0].heartbeat_interval_ms, 3600000);
	assert_int_equal(c.relays[0].session_timeout_ms, 45000);
	assert_int_equal(c.relays[0].probe_timeout_ms, 2000);
}

static void test_config_bad_heartbeat_interval_names_flag_and_value(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--heartbeat-interval", "abc")),
			 -1);
	assert_err_names(&e, "--heartbeat-interval", "abc");
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--heartbeat-interval", "0s")), -1);
	assert_err_names(&e, "--heartbeat-interval", "0s");
}

static void test_config_bad_session_timeout_names_flag_and_value(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--session-timeout", "5x")), -1);
	assert_err_names(&e, "--session-timeout", "5x");
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--session-timeout", "-1")), -1);
	assert_err_names(&e, "--session-timeout", "-1");
}

static void test_config_bad_probe_timeout_names_flag_and_value(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--probe-timeout", "0ms")), -1);
	assert_err_names(&e, "--probe-timeout", "0ms");
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--probe-timeout", "fast")), -1);
	assert_err_names(&e, "--probe-timeout", "fast");
}

static void test_config_max_sessions_is_parsed(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--max-sessions", "100")), 0);
	assert_int_equal(c.relays[0].max_sessions, 100);
	assert_int_equal(cli(&c, &e, ARGV("--max-sessions", "1", "--upstream", "h:1")), 0);
	assert_int_equal(c.relays[0].max_sessions, 1);
}

static void test_config_bad_max_sessions_names_flag_and_value(void **state)
{
	static const char *const bad[] = {"0", "lots", "-5", "12x", "99999999999", "100001"};
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char v[32];

		snprintf(v, sizeof(v), "%s", bad[i]);
		assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--max-sessions", v)), -1);
		assert_err_names(&e, "--max-sessions", v);
	}
}

static void test_config_session_ports_flag_sets_the_range(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--session-ports", "40000-44999",
				  "--max-sessions", "5000")),
			 0);
	assert_int_equal(c.relays[0].port_min, 40000);
	assert_int_equal(c.relays[0].port_max, 44999);
	assert_int_equal(
	    cli(&c, &e,
		ARGV("--upstream", "h:1", "--session-ports", "1024-1024", "--max-sessions", "1")),
	    0);
	assert_int_equal(c.relays[0].port_min, 1024);
	assert_int_equal(c.relays[0].port_max, 1024);
}

static void test_config_bad_session_ports_names_flag_and_value(void **state)
{
	static const char *const bad[] = {"1000-2000", "5000-4000",    "40000",
					  "40000-",    "x-y",	       "40000-70000",
					  "-5-10",     "40000-44999x", "40000:44999"};
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char v[32];

		snprintf(v, sizeof(v), "%s", bad[i]);
		assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--session-ports", v)), -1);
		assert_err_names(&e, "--session-ports", v);
	}
}

static void test_config_max_sessions_above_the_session_ports_range_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--session-ports", "40000-40009",
				  "--max-sessions", "10")),
			 0);
	assert_int_equal(args(&c, &e,
			      ARGV("--upstream", "h:1", "--session-ports", "40000-40009",
				   "--max-sessions", "11")),
			 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	assert_err_names(&e, "max-sessions", "11");
	/* The default 4000 does not fit 10 ports either. */
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--session-ports", "40000-40009")),
			 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	assert_err_names(&e, "max-sessions", "4000");
	/* Not over a UDP listener's port: its own, an echo port's, TURN's
	 * (attack13 F5: two of ten sessions could not bind, unsaid). */
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--listen", "127.0.0.1:40005",
				  "--session-ports", "40000-40009", "--max-sessions", "10")),
			 -1);
	assert_err_names(&e, "session-ports 40000-40009",
			 "hold port 40005 of the game relay default 127.0.0.1:40005");
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--session-ports", "40000-40009",
				  "--max-sessions", "10", "--prbe-listen", "0.0.0.0:40009")),
			 -1);
	assert_err_names(&e, "session-ports 40000-40009", "PRBE echo port 0.0.0.0:40009");
	assert_int_equal(
	    cli(&c, &e,
		ARGV("--upstream", "h:1", "--session-ports", "40000-40009", "--max-sessions", "10",
		     "--turn-listen", "127.0.0.1:40000", "--turn-ports", "45000-49999")),
	    -1);
	assert_err_names(&e, "session-ports 40000-40009", "TURN listener default");
	/* Nor the tunnel's WireGuard port (it listens on every address). */
	assert_int_equal(run(&c, &e,
			     "upstream h:1\nsession-ports 40000-40009\nmax-sessions 10\n"
			     "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\nlisten-port 40003\n",
			     NOARGS),
			 -1);
	assert_err_names(&e, "session-ports 40000-40009", "the WireGuard port 0.0.0.0:40003");
	/* A TCP listener's port is no clash (session sockets are UDP). */
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--session-ports", "40000-40009",
				  "--max-sessions", "10", "--ops-listen", "127.0.0.1:40001")),
			 0);
}

/* --backend, --debug, the ops plane */

static void test_config_backend_values_are_parsed(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--backend", "io_uring")), 0);
	assert_int_equal(c.backend, CONF_BACKEND_URING);
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--backend", "epoll")), 0);
	assert_int_equal(c.backend, CONF_BACKEND_EPOLL);
	assert_int_equal(
	    cli(&c, &e, ARGV("--backend", "epoll", "--backend", "auto", "--upstream", "h:1")), 0);
	assert_int_equal(c.backend, CONF_BACKEND_AUTO);
}

static void test_config_unknown_backend_names_flag_and_value(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--backend", "kqueue")), -1);
	assert_err_names(&e, "--backend", "kqueue");
}

static void test_config_workers_take_a_count_or_auto(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1")), 0);
	assert_int_equal(c.workers, CONF_WORKERS_AUTO);
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--workers", "1")), 0);
	assert_int_equal(c.workers, 1);
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--workers", "64")), 0);
	assert_int_equal(c.workers, 64);
	assert_int_equal(
	    cli(&c, &e, ARGV("--workers", "3", "--workers", "auto", "--upstream", "h:1")), 0);
	assert_int_equal(c.workers, CONF_WORKERS_AUTO);
	assert_int_equal(run(&c, &e, "upstream h:1\nworkers 2\n", NOARGS), 0);
	assert_int_equal(c.workers, 2);
}

static void test_config_workers_out_of_range_are_refused(void **state)
{
	static char bad[][8] = {"0", "65", "-1", "2x", "", "many"};
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--workers", bad[i])), -1);
		assert_err_names(&e, "--workers", "1 to 64");
	}
}

static void test_config_debug_flag_is_set(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--debug")), 0);
	assert_true(c.debug);
}

static void test_config_ops_flags_set_the_ops_plane(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--ops-listen", "127.0.0.1:9100",
				  "--ops-allow-public", "--drain-timeout", "30s")),
			 0);
	assert_true(c.ops_enabled);
	assert_v4(&c.ops_listen, "127.0.0.1", 9100);
	assert_true(c.ops_allow_public);
	assert_int_equal(c.drain_timeout_ms, 30000);

	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--drain-timeout", "0")), 0);
	assert_int_equal(c.drain_timeout_ms, 0);
	assert_false(c.ops_enabled);
	assert_false(c.ops_allow_public);
}

/* A public ops-listen is refused by conf_finish (so -t refuses what the
 * start refuses), named where it was set, with the way out in that place's
 * words; ops-allow-public lets it through. */
static void test_config_public_ops_listen_is_refused_where_it_was_set(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--ops-listen", "45.0.0.2:9961")),
			 -1);
	assert_err_line(&e, "etrelay: --ops-listen 45.0.0.2:9961: not a private address",
			"--ops-allow-public", NULL);
	assert_errors(&e, 1);
	assert_int_equal(run(&c, &e, "upstream h:1\n\nops-listen 45.0.0.2:9961\n", NOARGS), -1);
	assert_err_line(&e, PATH ":3: ops-listen 45.0.0.2:9961: not a private address",
			"set ops-allow-public yes", NULL);
	assert_errors(&e, 1);
	assert_null(strstr(e.text, "--ops"));
	assert_int_equal(run(&c, &e, "upstream h:1\nops-listen [2001:db8::1]:9961\n", NOARGS), -1);
	assert_err_line(&e, PATH ":2: ops-listen [2001:db8::1]:9961", NULL, NULL);
	assert_int_equal(
	    run(&c, &e, "upstream h:1\nops-listen 0.0.0.0:9961\nops-allow-public yes\n", NOARGS),
	    0);
	assert_int_equal(
	    cli(&c, &e,
		ARGV("--upstream", "h:1", "--ops-listen", "45.0.0.2:9961", "--ops-allow-public")),
	    0);
	for (const char *const *a =
		 (const char *const[]){"127.0.0.1:9100", "10.8.0.2:9100", "100.64.0.1:9100",
				       "[fd00::1]:9100", "[::1]:9100", NULL};
	     *a; a++) {
		char text[128];

		snprintf(text, sizeof(text), "upstream h:1\nops-listen %s\n", *a);
		if (run(&c, &e, text, NOARGS) != 0)
			fail_msg("ops-listen %s refused: %s", *a, e.text);
	}
}

static void test_config_bad_ops_values_name_flag_and_value(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--ops-listen", "localhost:9100")),
			 -1);
	assert_err_names(&e, "--ops-listen", "localhost:9100");
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--ops-listen", "127.0.0.1")), -1);
	assert_err_names(&e, "--ops-listen", "127.0.0.1");
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--drain-timeout", "5x")), -1);
	assert_err_names(&e, "--drain-timeout", "5x");
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--drain-timeout", "-1")), -1);
	assert_err_names(&e, "--drain-timeout", "-1");
}

/* Command-line-only options */

static void test_config_help_does_not_need_upstream(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--help")), 0);
	assert_true(c.help);
	assert_false(c.version);
	assert_errors(&e, 0);
	assert_int_equal(args(&c, &e, ARGV("-h")), 0);
	assert_true(c.help);
}

static void test_config_version_does_not_need_upstream(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--version")), 0);
	assert_true(c.version);
	assert_false(c.help);
	assert_errors(&e, 0);
	assert_int_equal(args(&c, &e, ARGV("-V")), 0);
	assert_true(c.version);
}

static void test_config_config_option_sets_the_path(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("-c", "/tmp/relays.conf")), 0);
	assert_string_equal(c.path, "/tmp/relays.conf");
	assert_true(c.path_given);
	assert_false(c.test);
	assert_int_equal(args(&c, &e, ARGV("--config=/srv/etrelay.conf")), 0);
	assert_string_equal(c.path, "/srv/etrelay.conf");
	assert_true(c.path_given);
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1")), 0);
	assert_null(c.path);
	assert_false(c.path_given);
	assert_int_equal(args(&c, &e, ARGV("-c")), -1);
	assert_err_names(&e, "-c", NULL);
}

static void test_config_test_option_sets_test(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("-t")), 0);
	assert_true(c.test);
	assert_false(c.probe);
	assert_int_equal(args(&c, &e, ARGV("--test", "-c", "x.conf")), 0);
	assert_true(c.test);
	assert_int_equal(args(&c, &e, ARGV("-tc", "x.conf")), 0);
	assert_true(c.test);
	assert_string_equal(c.path, "x.conf");
	assert_int_equal(args(&c, &e, ARGV("-t", "--probe")), 0);
	assert_true(c.test);
	assert_true(c.probe);
	assert_int_equal(args(&c, &e, ARGV("--probe", "--test")), 0);
	assert_true(c.probe);
}

static void test_config_session_opening_and_master_limits(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1")), 0);
	assert_int_equal(c.relays[0].ip_session_rate, 8);
	assert_int_equal(c.relays[0].session_rate, 100);
	assert_int_equal(c.relays[0].master_queries, 2);
	assert_int_equal(run(&c, &e,
			     "session-rate 50\n"
			     "[relay a]\nupstream h:1\nlisten 127.0.0.1:1\n"
			     "ip-session-rate 2\nmaster-queries 1\n"
			     "[relay b]\nupstream h:2\nlisten 127.0.0.1:2\n",
			     ARGV("--master-queries", "3")),
			 0);
	assert_int_equal(c.relays[0].session_rate, 50); /* inherited */
	assert_int_equal(c.relays[1].session_rate, 50);
	assert_int_equal(c.relays[0].ip_session_rate, 2);
	assert_int_equal(c.relays[1].ip_session_rate, 8);
	/* the command line wins in every relay */
	assert_int_equal(c.relays[0].master_queries, 3);
	assert_int_equal(c.relays[1].master_queries, 3);
	assert_int_equal(args(&c, &e, ARGV("--session-rate", "0")), -1);
	assert_non_null(strstr(e.text, "--session-rate"));
	assert_int_equal(args(&c, &e, ARGV("--ip-session-rate", "many")), -1);
	assert_non_null(strstr(e.text, "'many'"));
	assert_int_equal(args(&c, &e, ARGV("--master-queries", "100001")), -1);
	assert_non_null(strstr(e.text, "--master-queries"));
}

static void test_config_abuse_keys_have_their_defaults(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1")), 0);
	assert_int_equal(c.relays[0].sessions_per_ip, 8);
	assert_int_equal(c.relays[0].unassured_timeout_ms, 10000);
	assert_int_equal(c.relays[0].ip_query_burst, 10);
	assert_int_equal(c.relays[0].ip_query_rate, 1);
	assert_int_equal(c.relays[0].server_query_burst, 9);
	assert_int_equal(c.relays[0].server_query_rate, 1);
	assert_int_equal(c.relays[0].query_cache_ms, 1000);
	assert_int_equal(c.relays[0].query_cache_stale_ms, 5000);
	assert_int_equal(c.relays[0].query_cache_rate, 200);
	assert_int_equal(c.relays[0].query_cache_bytes, 256 * 1024);
	assert_int_equal(c.relays[0].query_cache_max_reply, 4096);
	assert_string_equal(c.ban_file, "");
}

static void test_config_abuse_keys_from_the_file_and_the_command_line(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e,
			     "ban-file /etc/etrelay/bans\n"
			     "sessions-per-ip 3\n"
			     "[relay a]\nupstream h:1\nlisten 127.0.0.1:1\n"
			     "unassured-timeout 5s\nip-query-burst 20\nip-query-rate 2\n"
			     "server-query-burst 10\nserver-query-rate 3\nquery-cache 0\n"
			     "query-cache-stale 0\nquery-cache-rate 50\nquery-cache-bytes 1M\n"
			     "query-cache-max-reply 1400\n"
			     "[relay b]\nupstream h:2\nlisten 127.0.0.1:2\n",
			     ARGV("--query-cache", "2s", "--query-cache-bytes", "64k")),
			 0);
	assert_string_equal(c.ban_file, "/etc/etrelay/bans");
	assert_int_equal(c.relays[0].sessions_per_ip, 3); /* inherited */
	assert_int_equal(c.relays[1].sessions_per_ip, 3);
	assert_int_equal(c.relays[0].unassured_timeout_ms, 5000);
	assert_int_equal(c.relays[0].ip_query_burst, 20);
	assert_int_equal(c.relays[0].ip_query_rate, 2);
	assert_int_equal(c.relays[0].server_query_burst, 10);
	assert_int_equal(c.relays[0].server_query_rate, 3);
	assert_int_equal(c.relays[1].server_query_burst, 9);
	assert_int_equal(c.relays[0].query_cache_stale_ms, 0);
	assert_int_equal(c.relays[1].query_cache_stale_ms, 5000);
	assert_int_equal(c.relays[0].query_cache_rate, 50);
	assert_int_equal(c.relays[0].query_cache_max_reply, 1400);
	assert_int_equal(c.relays[1].query_cache_max_reply, 4096);
	assert_int_equal(c.relays[0].query_cache_bytes, 64 * 1024);
	assert_int_equal(c.relays[1].query_cache_bytes, 64 * 1024);
	/* the command line wins in every relay */
	assert_int_equal(c.relays[0].query_cache_ms, 2000);
	assert_int_equal(c.relays[1].query_cache_ms, 2000);
}

static void test_config_xdp_interfaces_from_the_file_or_the_command_line(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e,
			     "xdp-interface eth0\nxdp-interface veth-game1\nxdp-rate 100\n"
			     "[relay a]\nupstream h:1\nlisten 127.0.0.1:1\n",
			     NOARGS),
			 0);
	assert_int_equal(c.xdp.n, 2);
	assert_string_equal(c.xdp.iface[1], "veth-game1");
	assert_int_equal(c.xdp.line[0], 1);
	assert_int_equal(c.xdp.line[1], 2);
	assert_int_equal(c.xdp.rate, 100);
	assert_int_equal(c.xdp.burst, CONF_XDP_BURST);
	/* The command line's list replaces the file's. */
	assert_int_equal(run(&c, &e,
			     "xdp-interface eth0\nxdp-interface eth1\n"
			     "[relay a]\nupstream h:1\nlisten 127.0.0.1:1\n",
			     ARGV("--xdp-interface", "bond0", "--xdp-burst", "7")),
			 0);
	assert_int_equal(c.xdp.n, 1);
	assert_string_equal(c.xdp.iface[0], "bond0");
	assert_int_equal(c.xdp.line[0], 0);
	assert_int_equal(c.xdp.burst, 7);
	assert_int_equal(run(&c, &e,
			     "xdp-interface eth0\nxdp-interface eth0\n"
			     "xdp-interface eth0/1\nxdp-interface abcdefghijklmnop\nxdp-rate 0\n"
			     "[relay a]\nupstream h:1\nlisten 127.0.0.1:1\n",
			     NOARGS),
			 -1);
	assert_non_null(strstr(e.text, PATH ":2: xdp-interface"));
	assert_non_null(strstr(e.text, "given twice"));
	assert_non_null(strstr(e.text, PATH ":3: xdp-interface"));
	assert_non_null(strstr(e.text, PATH ":4: xdp-interface"));
	assert_non_null(strstr(e.text, PATH ":5: xdp-rate"));
	assert_int_equal(args(&c, &e, ARGV("--xdp-burst", "1000001")), -1);
	assert_non_null(strstr(e.text, "--xdp-burst"));
}

static void test_config_server_query_burst_must_leave_browsers_a_share(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--server-query-burst", "5")), -1);
	assert_non_null(strstr(e.text, "server-query-burst 5"));
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--server-query-burst", "6")), 0);
	assert_int_equal(args(&c, &e, ARGV("--sessions-per-ip", "0")), -1);
	assert_non_null(strstr(e.text, "--sessions-per-ip"));
	assert_int_equal(args(&c, &e, ARGV("--query-cache", "soon")), -1);
	assert_non_null(strstr(e.text, "'soon'"));
	assert_int_equal(args(&c, &e, ARGV("--query-cache-stale", "2m")), -1);
	assert_non_null(strstr(e.text, "--query-cache-stale"));
	assert_int_equal(args(&c, &e, ARGV("--query-cache-rate", "0")), -1);
	assert_non_null(strstr(e.text, "--query-cache-rate"));
	assert_int_equal(args(&c, &e, ARGV("--query-cache-bytes", "2G")), -1);
	assert_non_null(strstr(e.text, "'2G'"));
	assert_int_equal(args(&c, &e, ARGV("--query-cache-max-reply", "63")), -1);
	assert_non_null(strstr(e.text, "from 64 to 65535"));
	assert_int_equal(args(&c, &e, ARGV("--query-cache-max-reply", "64k")), -1);
	assert_int_equal(run(&c, &e, "[relay a]\nupstream h:1\nban-file /x\n", NOARGS), -1);
	assert_non_null(strstr(e.text, PATH ":3: ban-file: a process-wide key"));
}

static void test_config_probe_without_test_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--probe")), -1);
	assert_err_names(&e, "--probe", NULL);
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--probe", "-c", "x.conf")), -1);
	assert_err_names(&e, "--probe", NULL);
}

static void test_config_unknown_option_error_names_it(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--bogus")), -1);
	assert_err_names(&e, "--bogus", NULL);
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "-z")), -1);
	assert_err_names(&e, "-z", NULL);
}

static void test_config_unknown_short_option_in_a_cluster_error_names_it(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("-zV", "--upstream", "h:1")), -1);
	assert_err_names(&e, "-z", NULL);
	assert_int_equal(args(&c, &e, ARGV("-tz")), -1);
	assert_err_names(&e, "-z", NULL);
}

static void test_config_value_given_to_a_flag_error_names_the_flag(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--debug=yes")), -1);
	assert_err_names(&e, "--debug", NULL);
	assert_int_equal(args(&c, &e, ARGV("--test=1")), -1);
	assert_err_names(&e, "--test", NULL);
}

static void test_config_missing_value_error_names_the_flag(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--game")), -1);
	assert_err_names(&e, "--game", NULL);
}

static void test_config_stray_argument_is_an_error_naming_it(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "stray")), -1);
	assert_err_names(&e, "stray", NULL);
}

static void test_config_parses_again_after_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	/* getopt's state must be reset on every call. */
	assert_int_equal(args(&c, &e, ARGV("--upstream", "h:1", "--game", "doom")), -1);
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:2", "--game", "rtcw")), 0);
	assert_int_equal(c.relays[0].upstream_port, 2);
	assert_string_equal(c.relays[0].heartbeat, "Wolfenstein-1");
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:3", "--debug")), 0);
	assert_int_equal(c.relays[0].upstream_port, 3);
	assert_true(c.debug);

	/* An error in the middle of "-zh" must not leave the 'h' pending. */
	assert_int_equal(args(&c, &e, ARGV("-zh")), -1);
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:4")), 0);
	assert_int_equal(c.relays[0].upstream_port, 4);
	assert_false(c.help);
	assert_false(c.version);
}

static void test_config_usage_mentions_the_options(void **state)
{
	(void)state;
	assert_non_null(strstr(conf_usage, "--upstream"));
	assert_non_null(strstr(conf_usage, "--master"));
	assert_non_null(strstr(conf_usage, "--game"));
	assert_non_null(strstr(conf_usage, "--session-ports"));
	assert_non_null(strstr(conf_usage, "--config"));
	assert_non_null(strstr(conf_usage, "--probe"));
}

/* conf_parse_duration */

static void test_config_duration_bare_number_is_seconds(void **state)
{
	uint64_t ms = 0;

	(void)state;
	assert_int_equal(conf_parse_duration("300", &ms, false), 0);
	assert_int_equal(ms, 300000);
	assert_int_equal(conf_parse_duration("1", &ms, false), 0);
	assert_int_equal(ms, 1000);
}

static void test_config_duration_accepts_every_unit(void **state)
{
	uint64_t ms = 0;

	(void)state;
	assert_int_equal(conf_parse_duration("300s", &ms, false), 0);
	assert_int_equal(ms, 300000);
	assert_int_equal(conf_parse_duration("500ms", &ms, false), 0);
	assert_int_equal(ms, 500);
	assert_int_equal(conf_parse_duration("1ms", &ms, false), 0);
	assert_int_equal(ms, 1);
	assert_int_equal(conf_parse_duration("5m", &ms, false), 0);
	assert_int_equal(ms, 300000);
	assert_int_equal(conf_parse_duration("1h", &ms, false), 0);
	assert_int_equal(ms, 3600000);
	assert_int_equal(conf_parse_duration("5ms", &ms, false), 0);
	assert_int_equal(ms, 5);
}

static void test_config_duration_rejects_zero_unless_allowed(void **state)
{
	uint64_t ms = 7;

	(void)state;
	assert_int_equal(conf_parse_duration("0", &ms, false), -1);
	assert_int_equal(conf_parse_duration("0s", &ms, false), -1);
	assert_int_equal(conf_parse_duration("0ms", &ms, false), -1);
	assert_int_equal(conf_parse_duration("0h", &ms, false), -1);

	assert_int_equal(conf_parse_duration("0", &ms, true), 0);
	assert_int_equal(ms, 0);
	ms = 7;
	assert_int_equal(conf_parse_duration("0ms", &ms, true), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(conf_parse_duration("2m", &ms, true), 0);
	assert_int_equal(ms, 120000);
}

static void test_config_duration_rejects_negative_and_junk(void **state)
{
	static const char *const bad[] = {"-1", "-5s", "abc", "5x", "5mss", "5 s",
					  "",	"s",   "ms",  " 5", "+5s",  "5s "};
	uint64_t ms = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(conf_parse_duration(bad[i], &ms, false), -1);
		assert_int_equal(conf_parse_duration(bad[i], &ms, true), -1);
	}
}

static void test_config_duration_rejects_overflow(void **state)
{
	uint64_t ms = 0;

	(void)state;
	/* Does not fit 64 bits at all. */
	assert_int_equal(conf_parse_duration("99999999999999999999", &ms, false), -1);
	assert_int_equal(conf_parse_duration("99999999999999999999ms", &ms, false), -1);
	/* Fits 64 bits, but not once scaled to milliseconds. */
	assert_int_equal(conf_parse_duration("18446744073709551615", &ms, false), -1);
	assert_int_equal(conf_parse_duration("18446744073709551615s", &ms, false), -1);
	assert_int_equal(conf_parse_duration("18446744073709552s", &ms, false), -1);
	assert_int_equal(conf_parse_duration("5124095576030432m", &ms, false), -1);
	assert_int_equal(conf_parse_duration("5124095576030432h", &ms, true), -1);
}

/* The file: keys */

/* One relay's settings, field by field; what names the case on failure. */
static void assert_relay_equal(const struct relay_conf *a, const struct relay_conf *b,
			       const char *what)
{
#define SAME(cond)                                                                                 \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fail_msg("%s: differs: %s", what, #cond);                                  \
	} while (0)
	SAME(strcmp(a->name, b->name) == 0);
	SAME(a->line == b->line);
	SAME(addr_equal(&a->listen, &b->listen));
	SAME(strcmp(a->upstream_host, b->upstream_host) == 0);
	SAME(a->upstream_port == b->upstream_port);
	SAME(a->nmasters == b->nmasters);
	for (unsigned i = 0; i < a->nmasters && i < CONF_MASTERS_MAX; i++) {
		SAME(strcmp(a->masters[i].host, b->masters[i].host) == 0);
		SAME(a->masters[i].port == b->masters[i].port);
	}
	SAME(strcmp(a->game, b->game) == 0);
	SAME(strcmp(a->heartbeat, b->heartbeat) == 0);
	SAME(strcmp(a->flatline, b->flatline) == 0);
	SAME(a->heartbeat_set == b->heartbeat_set);
	SAME(a->flatline_set == b->flatline_set);
	SAME(a->heartbeat_interval_ms == b->heartbeat_interval_ms);
	SAME(a->session_timeout_ms == b->session_timeout_ms);
	SAME(a->probe_timeout_ms == b->probe_timeout_ms);
	SAME(a->max_sessions == b->max_sessions);
	SAME(a->port_min == b->port_min);
	SAME(a->port_max == b->port_max);
	SAME(a->server_query_burst == b->server_query_burst);
	SAME(a->query_cache_ms == b->query_cache_ms);
	SAME(a->query_cache_stale_ms == b->query_cache_stale_ms);
	SAME(a->query_cache_rate == b->query_cache_rate);
	SAME(a->query_cache_bytes == b->query_cache_bytes);
	SAME(a->query_cache_max_reply == b->query_cache_max_reply);
#undef SAME
}

static void test_config_every_file_key_sets_what_its_flag_sets(void **state)
{
	/* value NULL: a flag on the command line, "yes" in the file. */
	static const struct {
		const char *key, *value;
	} cases[] = {
	    {"listen", "127.0.0.1:27000"},
	    {"listen", "[::1]:27001"},
	    {"upstream", "game.example:27961"},
	    {"master", "m.example"},
	    {"master", "192.0.2.5:27951"},
	    {"game", "rtcw"},
	    {"game", "q3"},
	    {"game", "dp"},
	    {"heartbeat", "Custom-7"},
	    {"flatline", "Dead-1"},
	    {"flatline", ""},
	    {"heartbeat-interval", "10m"},
	    {"probe-timeout", "500ms"},
	    {"session-timeout", "45"},
	    {"max-sessions", "100"},
	    {"session-ports", "20000-24999"},
	    {"server-query-burst", "10"},
	    {"query-cache", "2s"},
	    {"query-cache-stale", "3s"},
	    {"query-cache-rate", "500"},
	    {"query-cache-bytes", "2M"},
	    {"query-cache-max-reply", "1400"},
	    {"backend", "epoll"},
	    {"backend", "io_uring"},
	    {"workers", "3"},
	    {"workers", "auto"},
	    {"ops-listen", "127.0.0.1:9100"},
	    {"ops-listen", "[::1]:9101"},
	    {"ops-allow-public", NULL},
	    {"drain-timeout", "30s"},
	    {"debug", NULL},
	    {"log-time", "yes"},
	    {"log-time", "no"},
	    {"log-time", "auto"},
	};
	static struct etr_conf a, b;
	struct conf_errors e;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *key = cases[i].key, *value = cases[i].value;
		char flag[64], val[64], text[256], what[128];
		char prog[] = "etrelay", up[] = "--upstream", host[] = "h:1";
		char *argv[] = {prog, up, host, flag, value ? val : NULL, NULL};

		snprintf(what, sizeof(what), "%s '%s'", key, value ? value : "(flag)");
		snprintf(flag, sizeof(flag), "--%s", key);
		snprintf(val, sizeof(val), "%s", value ? value : "");
		if (cli(&a, &e, value ? 5 : 4, argv) != 0)
			fail_msg("%s: %s", what, e.text);
		assert_errors(&e, 0);

		snprintf(text, sizeof(text), "upstream h:1\n%s %s\n", key,
			 !value	    ? "yes"
			 : value[0] ? value
				    : "\"\"");
		if (run(&b, &e, text, NOARGS) != 0)
			fail_msg("%s: %s", what, e.text);

		assert_int_equal(a.nrelays, 1);
		assert_int_equal(b.nrelays, 1);
		assert_relay_equal(&a.relays[0], &b.relays[0], what);
		assert_int_equal(a.backend, b.backend);
		assert_int_equal(a.workers, b.workers);
		assert_int_equal(a.debug, b.debug);
		assert_int_equal(a.log_time, b.log_time);
		assert_int_equal(a.ops_enabled, b.ops_enabled);
		assert_int_equal(a.ops_allow_public, b.ops_allow_public);
		if (a.ops_enabled)
			assert_true(addr_equal(&a.ops_listen, &b.ops_listen));
		assert_int_equal(a.drain_timeout_ms, b.drain_timeout_ms);
	}
}

static void test_config_file_keys_set_their_values(void **state)
{
	static const char text[] = "listen 127.0.0.1:27000\n"
				   "upstream game.example:27961\n"
				   "master m1.example\n"
				   "master m2.example:27951\n"
				   "game rtcw\n"
				   "heartbeat Custom-7\n"
				   "flatline Dead-1\n"
				   "heartbeat-interval 10m\n"
				   "probe-timeout 500ms\n"
				   "session-timeout 45\n"
				   "max-sessions 100\n"
				   "session-ports 20000-24999\n"
				   "backend epoll\n"
				   "ops-listen 127.0.0.1:9100\n"
				   "ops-allow-public yes\n"
				   "drain-timeout 30s\n"
				   "debug yes\n";
	static struct etr_conf c;
	struct conf_errors e;
	const struct relay_conf *r = &c.relays[0];

	(void)state;
	assert_int_equal(run(&c, &e, text, NOARGS), 0);
	assert_errors(&e, 0);
	assert_int_equal(c.nrelays, 1);
	assert_v4(&r->listen, "127.0.0.1", 27000);
	assert_string_equal(r->upstream_host, "game.example");
	assert_int_equal(r->upstream_port, 27961);
	assert_int_equal(r->nmasters, 2);
	assert_master(r, 0, "m1.example", 27950);
	assert_master(r, 1, "m2.example", 27951);
	assert_string_equal(r->game, "RTCW");
	assert_string_equal(r->heartbeat, "Custom-7");
	assert_string_equal(r->flatline, "Dead-1");
	assert_int_equal(r->heartbeat_interval_ms, 600000);
	assert_int_equal(r->probe_timeout_ms, 500);
	assert_int_equal(r->session_timeout_ms, 45000);
	assert_int_equal(r->max_sessions, 100);
	assert_int_equal(r->port_min, 20000);
	assert_int_equal(r->port_max, 24999);
	assert_int_equal(c.backend, CONF_BACKEND_EPOLL);
	assert_true(c.ops_enabled);
	assert_v4(&c.ops_listen, "127.0.0.1", 9100);
	assert_true(c.ops_allow_public);
	assert_int_equal(c.drain_timeout_ms, 30000);
	assert_true(c.debug);
}

static void test_config_file_flag_keys_take_yes_or_no(void **state)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};
	static struct etr_conf c;
	struct conf_errors e;
	char text[128];

	(void)state;
	for (size_t i = 0; i < 4; i++) {
		snprintf(text, sizeof(text), "debug %s\nops-allow-public %s\n", yes[i], yes[i]);
		assert_int_equal(args(&c, &e, NOARGS), 0);
		assert_int_equal(load(&c, &e, text), 0);
		assert_true(c.debug);
		assert_true(c.ops_allow_public);

		snprintf(text, sizeof(text), "debug yes\ndebug %s\nops-allow-public %s\n", no[i],
			 no[i]);
		assert_int_equal(args(&c, &e, NOARGS), 0);
		assert_int_equal(load(&c, &e, text), 0);
		assert_false(c.debug);
		assert_false(c.ops_allow_public);
	}
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, "\ndebug maybe\n"), -1);
	assert_err_names(&e, "debug", "maybe");
	assert_err_line(&e, PATH ":2: ", "debug", "maybe");
}

static void test_config_file_errors_carry_path_and_line(void **state)
{
	static const char text[] = "# a comment\n"	 /* 1 */
				   "\n"			 /* 2 */
				   "upstream gamehost\n" /* 3 */
				   "listen 10.0.0.1:1\n" /* 4 */
				   "game doom\n"	 /* 5 */
				   "   \n"		 /* 6 */
				   "max-sessions 0\n";	 /* 7 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), -1);
	assert_errors(&e, 3);
	assert_err_line(&e, PATH ":3: ", "upstream", "gamehost");
	assert_err_line(&e, PATH ":5: ", "game", "doom");
	assert_err_line(&e, PATH ":7: ", "max-sessions", "'0'");
	/* The good line between the bad ones still counts. */
	assert_v4(&c.base.listen, "10.0.0.1", 1);
}

static void test_config_every_error_of_a_file_is_reported(void **state)
{
	static const char text[] = "upstream h:1\n"	   /* 1 */
				   "colour blue\n"	   /* 2 */
				   "[server eu]\n"	   /* 3 */
				   "probe-timeout soon\n"; /* 4 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), -1);
	assert_errors(&e, 3);
	assert_err_line(&e, PATH ":2: ", "colour", NULL);
	assert_err_line(&e, PATH ":3: ", NULL, NULL);
	assert_err_line(&e, PATH ":4: ", "probe-timeout", "soon");
}

static void test_config_bad_value_of_every_file_key_is_reported_at_its_line(void **state)
{
	static const struct {
		const char *key, *value;
	} cases[] = {
	    {"listen", "nothost:1"},
	    {"upstream", "gamehost"},
	    {"master", "m.example:0"},
	    {"game", "doom"},
	    {"heartbeat", "Two-Words Here"},
	    {"flatline", "back\\slash"},
	    {"heartbeat-interval", "0s"},
	    {"probe-timeout", "fast"},
	    {"session-timeout", "-1"},
	    {"max-sessions", "100001"},
	    {"session-ports", "5000-4000"},
	    {"backend", "kqueue"},
	    {"workers", "0"},
	    {"ops-listen", "localhost:9100"},
	    {"ops-allow-public", "maybe"},
	    {"drain-timeout", "5x"},
	    {"debug", "2"},
	};
	static struct etr_conf c;
	struct conf_errors e;
	char text[1024];
	size_t len = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len, "%s %s\n", cases[i].key,
					cases[i].value);
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), -1);
	assert_errors(&e, sizeof(cases) / sizeof(cases[0]));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char prefix[32];

		snprintf(prefix, sizeof(prefix), PATH ":%zu: ", i + 1);
		assert_err_line(&e, prefix, cases[i].key, cases[i].value);
	}
}

static void test_config_file_unknown_key_is_an_error(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	/* Command-line-only options are not file keys. */
	assert_int_equal(load(&c, &e,
			      "upstream h:1\n"
			      "listen-address 127.0.0.1:1\n"
			      "--debug yes\n"
			      "config /etc/other.conf\n"
			      "test yes\n"
			      "Listen 127.0.0.1:1\n"),
			 -1);
	assert_errors(&e, 5);
	assert_err_line(&e, PATH ":2: ", "listen-address", NULL);
	assert_err_line(&e, PATH ":3: ", "--debug", NULL);
	assert_err_line(&e, PATH ":4: ", "config", NULL);
	assert_err_line(&e, PATH ":5: ", "test", NULL);
	assert_err_line(&e, PATH ":6: ", "Listen", NULL);
	assert_false(c.debug);
}

static void test_config_bad_section_headers_are_errors(void **state)
{
	static const char text[] = "upstream h:1\n"				/* 1 */
				   "[relay]\n"					/* 2 */
				   "[server a]\n"				/* 3 */
				   "[relay a\n"					/* 4 */
				   "[relay a] junk\n"				/* 5 */
				   "[relay bad/name]\n"				/* 6 */
				   "[relay a b]\n"				/* 7 */
				   "[relaya]\n"					/* 8 */
				   "[relay 0123456789abcdef0123456789abcdef]\n" /* 9 */
				   "[]\n"					/* 10 */
				   "[relay  ]\n";				/* 11 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), -1);
	assert_errors(&e, 10);
	for (unsigned line = 2; line <= 11; line++) {
		char prefix[32];

		snprintf(prefix, sizeof(prefix), PATH ":%u: ", line);
		assert_err_line(&e, prefix, NULL, NULL);
	}
	assert_int_equal(c.nrelays, 0);
}

static void test_config_good_section_headers_name_their_relays(void **state)
{
	static const char text[] = "[relay eu-1.main_2]\n"
				   "listen 127.0.0.1:1\n"
				   "upstream h:1\n"
				   "  [relay\tspaced  ]  \n"
				   "listen 127.0.0.1:2\n"
				   "upstream h:2\n"
				   "[relay 0123456789abcdef0123456789abcde]\n"
				   "listen 127.0.0.1:3\n"
				   "upstream h:3\n";
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e, text, NOARGS), 0);
	assert_errors(&e, 0);
	assert_int_equal(c.nrelays, 3);
	assert_string_equal(c.relays[0].name, "eu-1.main_2");
	assert_int_equal(c.relays[0].line, 1);
	assert_string_equal(c.relays[1].name, "spaced");
	assert_int_equal(c.relays[1].line, 4);
	assert_string_equal(c.relays[2].name, "0123456789abcdef0123456789abcde");
	assert_int_equal(c.relays[2].line, 7);
}

static void test_config_duplicate_relay_name_names_the_first_line(void **state)
{
	static const char text[] = "upstream h:1\n"	   /* 1 */
				   "[relay a]\n"	   /* 2 */
				   "listen 127.0.0.1:1\n"  /* 3 */
				   "\n"			   /* 4 */
				   "[relay b]\n"	   /* 5 */
				   "listen 127.0.0.1:2\n"  /* 6 */
				   "[relay a]\n"	   /* 7 */
				   "listen 127.0.0.1:3\n"; /* 8 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), -1);
	assert_errors(&e, 1);
	assert_err_line(&e, PATH ":7: ", "'a'", "line 2");
}

static void test_config_name_used_three_times_is_two_errors_naming_the_first_line(void **state)
{
	static const char text[] = "upstream h:1\n"	   /* 1 */
				   "[relay a]\n"	   /* 2 */
				   "listen 127.0.0.1:1\n"  /* 3 */
				   "[relay a]\n"	   /* 4 */
				   "listen 127.0.0.1:2\n"  /* 5 */
				   "[relay a]\n"	   /* 6 */
				   "listen 127.0.0.1:3\n"; /* 7 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), -1);
	/* One error per bad line, each naming where 'a' was defined. */
	assert_errors(&e, 2);
	assert_err_line(&e, PATH ":4: ", "'a'", "line 2");
	assert_err_line(&e, PATH ":6: ", "'a'", "line 2");
}

static void test_config_process_wide_key_inside_a_relay_is_an_error(void **state)
{
	static const char text[] = "backend epoll\n"		 /* 1 */
				   "upstream h:1\n"		 /* 2 */
				   "[relay a]\n"		 /* 3 */
				   "backend io_uring\n"		 /* 4 */
				   "ops-listen 127.0.0.1:9100\n" /* 5 */
				   "ops-allow-public yes\n"	 /* 6 */
				   "drain-timeout 30s\n"	 /* 7 */
				   "debug yes\n"		 /* 8 */
				   "max-sessions 10\n";		 /* 9 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), -1);
	assert_errors(&e, 5);
	assert_err_line(&e, PATH ":4: ", "backend", NULL);
	assert_err_line(&e, PATH ":5: ", "ops-listen", NULL);
	assert_err_line(&e, PATH ":6: ", "ops-allow-public", NULL);
	assert_err_line(&e, PATH ":7: ", "drain-timeout", NULL);
	assert_err_line(&e, PATH ":8: ", "debug", NULL);
	/* None of them took effect; the relay key after them did. */
	assert_int_equal(c.backend, CONF_BACKEND_EPOLL);
	assert_false(c.ops_enabled);
	assert_false(c.ops_allow_public);
	assert_int_equal(c.drain_timeout_ms, 0);
	assert_false(c.debug);
	assert_int_equal(c.relays[0].max_sessions, 10);
}

static void test_config_file_key_without_value_is_an_error(void **state)
{
	static const char text[] = "upstream\n"	      /* 1 */
				   "listen   \t\n"    /* 2 */
				   "heartbeat \"\"\n" /* 3 */
				   "debug\n"	      /* 4 */
				   "game\n"	      /* 5 */
				   "master \"\"\n";   /* 6 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), -1);
	assert_errors(&e, 6);
	assert_err_line(&e, PATH ":1: ", "upstream", NULL);
	assert_err_line(&e, PATH ":2: ", "listen", NULL);
	assert_err_line(&e, PATH ":3: ", "heartbeat", NULL);
	assert_err_line(&e, PATH ":4: ", "debug", NULL);
	assert_err_line(&e, PATH ":5: ", "game", NULL);
	assert_err_line(&e, PATH ":6: ", "master", NULL);
	assert_false(c.debug);
}

static void test_config_file_quoted_values_are_unquoted(void **state)
{
	static const char text[] = "upstream \"game.example:27961\"\n"
				   "master \"m.example\"\n"
				   "heartbeat \"Custom-7\"\n"
				   "flatline \"\"\n"
				   "[relay a]\n"
				   "listen \"127.0.0.1:1\"\n"
				   "[relay b]\n"
				   "listen 127.0.0.1:2\n"
				   "game rtcw\n"
				   "flatline   \"\"  \n";
	static struct etr_conf c;
	struct conf_errors e;
	const struct relay_conf *a, *b;

	(void)state;
	assert_int_equal(run(&c, &e, text, NOARGS), 0);
	assert_errors(&e, 0);
	a = relay(&c, "a");
	b = relay(&c, "b");
	assert_string_equal(a->upstream_host, "game.example");
	assert_int_equal(a->upstream_port, 27961);
	assert_master(a, 0, "m.example", 27950);
	assert_string_equal(a->heartbeat, "Custom-7");
	/* "" is how the file says "no flatline", even for ET. */
	assert_string_equal(a->game, "ET");
	assert_string_equal(a->flatline, "");
	assert_true(a->flatline_set);
	assert_v4(&a->listen, "127.0.0.1", 1);
	assert_string_equal(b->heartbeat, "Custom-7");
	assert_string_equal(b->flatline, "");
	assert_true(b->flatline_set);

	/* An unbalanced quote is part of the value, and so a bad one. */
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, "listen \"127.0.0.1:1\n"), -1);
	assert_err_line(&e, PATH ":1: ", "listen", "\"127.0.0.1:1");
}

static void test_config_file_comments_and_blank_lines_are_ignored(void **state)
{
	static const char text[] = "# etrelay configuration\n"
				   "\n"
				   "   # indented comment\n"
				   "\t\n"
				   "#[relay nope]\n"
				   "#debug yes\n"
				   "    \n"
				   "\tupstream \t h:1  \t\n"
				   "  listen    127.0.0.1:5   \n"
				   "#";
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e, text, NOARGS), 0);
	assert_errors(&e, 0);
	assert_int_equal(c.nrelays, 1);
	assert_string_equal(c.relays[0].name, "default");
	assert_string_equal(c.relays[0].upstream_host, "h");
	assert_int_equal(c.relays[0].upstream_port, 1);
	assert_v4(&c.relays[0].listen, "127.0.0.1", 5);
	assert_false(c.debug);
}

static void test_config_file_with_crlf_line_endings_is_read_alike(void **state)
{
	static const char text[] = "upstream h:1\r\n"
				   "debug yes\r\n"
				   "\r\n"
				   "# comment\r\n"
				   "[relay a]\r\n"
				   "listen 127.0.0.1:1\r\n"
				   "flatline \"\"\r\n"
				   "[relay b]\r\n"
				   "listen 127.0.0.1:2\r\n"
				   "game q3\r\n";
	static struct etr_conf c;
	struct conf_errors e;
	const struct relay_conf *a, *b;

	(void)state;
	assert_int_equal(run(&c, &e, text, NOARGS), 0);
	assert_errors(&e, 0);
	assert_int_equal(c.nrelays, 2);
	a = relay(&c, "a");
	b = relay(&c, "b");
	assert_int_equal(a->line, 5);
	assert_int_equal(b->line, 8);
	assert_string_equal(a->upstream_host, "h");
	assert_int_equal(a->upstream_port, 1);
	assert_string_equal(a->flatline, "");
	assert_true(c.debug);
	assert_string_equal(b->game, "Q3");

	/* Errors still name the right line, and carry no CR. */
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, "upstream h:1\r\n\r\ngame doom\r\n"), -1);
	assert_errors(&e, 1);
	assert_err_line(&e, PATH ":3: ", "game", "'doom'");
	assert_null(strchr(e.text, '\r'));
}

static void test_config_file_nul_byte_is_an_error_at_its_line(void **state)
{
	static const char text[] = "upstream h:1\n"
				   "lis\0ten 127.0.0.1:5\n"
				   "game doom\n"
				   "max-sessions 7\n";
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load_n(&c, &e, text, sizeof(text) - 1), -1);
	assert_errors(&e, 2);
	assert_err_line(&e, PATH ":2: ", NULL, NULL);
	assert_err_line(&e, PATH ":3: ", "game", "doom");
	assert_int_equal(c.base.max_sessions, 7);
	assert_v4(&c.base.listen, "0.0.0.0", 27960);
}

static void test_config_file_line_over_1023_bytes_is_an_error(void **state)
{
	static char text[4096];
	static struct etr_conf c;
	struct conf_errors e;
	size_t len = 0;

	(void)state;
	/* Line 1: a comment of exactly 1023 bytes, accepted. */
	text[len++] = '#';
	memset(text + len, 'x', 1022);
	len += 1022;
	text[len++] = '\n';
	len += (size_t)snprintf(text + len, sizeof(text) - len, "upstream h:1\n");
	/* Line 3: 1024 bytes. */
	text[len++] = '#';
	memset(text + len, 'x', 1023);
	len += 1023;
	text[len++] = '\n';
	len += (size_t)snprintf(text + len, sizeof(text) - len, "game doom\nmax-sessions 9\n");

	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load_n(&c, &e, text, len), -1);
	assert_errors(&e, 2);
	assert_err_line(&e, PATH ":3: ", NULL, NULL);
	assert_err_line(&e, PATH ":4: ", "game", "doom");
	assert_string_equal(c.base.upstream_host, "h");
	assert_int_equal(c.base.max_sessions, 9);
}

/* Sections of n relays (listen 127.0.0.1:1001.., upstream h:1..), three lines
 * each, the first header at line 1; extra is appended. */
static size_t relays_text(char *text, size_t size, unsigned n, const char *extra)
{
	size_t len = 0;

	for (unsigned i = 1; i <= n; i++)
		len += (size_t)snprintf(text + len, size - len,
					"[relay r%u]\nlisten 127.0.0.1:%u\nupstream h:%u\n", i,
					1000 + i, i);
	len += (size_t)snprintf(text + len, size - len, "%s", extra);
	return len;
}

/* ":L: " for line l of the file. */
static const char *line_prefix(char buf[32], unsigned l)
{
	snprintf(buf, 32, PATH ":%u: ", l);
	return buf;
}

static void test_config_relays_up_to_the_limit_are_accepted(void **state)
{
	static char text[16384];
	static struct etr_conf c;
	struct conf_errors e;
	const unsigned last = CONF_RELAYS_MAX - 1;
	char name[16];

	(void)state;
	assert_true(CONF_RELAYS_MAX > 16); /* past the old 4-bit relay index */
	relays_text(text, sizeof(text), CONF_RELAYS_MAX, "");
	assert_int_equal(run(&c, &e, text, NOARGS), 0);
	assert_errors(&e, 0);
	assert_int_equal(c.nrelays, CONF_RELAYS_MAX);
	snprintf(name, sizeof(name), "r%u", CONF_RELAYS_MAX);
	assert_string_equal(c.relays[last].name, name);
	assert_int_equal(c.relays[last].line, 3 * last + 1);
	assert_v4(&c.relays[last].listen, "127.0.0.1", 1000 + CONF_RELAYS_MAX);
}

static void test_config_relay_past_the_limit_is_an_error_at_its_header(void **state)
{
	static char text[16384];
	static struct etr_conf c;
	struct conf_errors e;
	char at[32];

	(void)state;
	relays_text(text, sizeof(text), CONF_RELAYS_MAX + 1, "");
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), -1);
	assert_errors(&e, 1);
	assert_err_line(&e, line_prefix(at, 3 * CONF_RELAYS_MAX + 1),
			"at most " CONF_STR(CONF_RELAYS_MAX), NULL);
	assert_int_equal(c.nrelays, CONF_RELAYS_MAX);
}

static void test_config_lines_of_a_relay_past_the_limit_are_still_checked(void **state)
{
	static char text[16384];
	static struct etr_conf c;
	struct conf_errors e;
	const unsigned end = 3 * (CONF_RELAYS_MAX + 1); /* the sections' last line */
	char at[32];

	(void)state;
	relays_text(text, sizeof(text), CONF_RELAYS_MAX + 1,
		    "game doom\n"   /* end + 1 */
		    "debug yes\n"); /* end + 2 */
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), -1);
	assert_errors(&e, 3);
	assert_err_line(&e, line_prefix(at, end - 2), NULL, NULL);
	assert_err_line(&e, line_prefix(at, end + 1), "game", "doom");
	assert_err_line(&e, line_prefix(at, end + 2), "debug", NULL);
	assert_false(c.debug);
}

static void test_config_file_without_final_newline_reads_the_last_line(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e, "upstream h:1\nmax-sessions 42", NOARGS), 0);
	assert_int_equal(c.relays[0].max_sessions, 42);
	assert_int_equal(run(&c, &e, "upstream h:1\ngame doom", NOARGS), -1);
	assert_err_line(&e, PATH ":2: ", "game", "doom");
}

static void test_config_empty_file_leaves_the_command_line_relay(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e, "", ARGV("--upstream", "h:1")), 0);
	assert_errors(&e, 0);
	assert_int_equal(c.nrelays, 1);
	assert_string_equal(c.relays[0].name, "default");
	assert_string_equal(c.relays[0].upstream_host, "h");
}

/* The file: several relays */

static void test_config_top_level_keys_are_inherited_by_every_relay(void **state)
{
	static const char text[] = "game rtcw\n"		     /* 1 */
				   "master top.example\n"	     /* 2 */
				   "heartbeat-interval 1m\n"	     /* 3 */
				   "max-sessions 10\n"		     /* 4 */
				   "upstream shared.example:27960\n" /* 5 */
				   "\n"				     /* 6 */
				   "[relay a]\n"		     /* 7 */
				   "listen 127.0.0.1:27960\n"	     /* 8 */
				   "probe-timeout 1s\n"		     /* 9 */
				   "[relay b]\n"		     /* 10 */
				   "listen 127.0.0.1:27961\n"	     /* 11 */
				   "upstream other.example:27961\n"  /* 12 */
				   "session-timeout 30s\n";	     /* 13 */
	static struct etr_conf c;
	struct conf_errors e;
	const struct relay_conf *a = &c.relays[0], *b = &c.relays[1];

	(void)state;
	assert_int_equal(run(&c, &e, text, NOARGS), 0);
	assert_errors(&e, 0);
	assert_int_equal(c.nrelays, 2);
	assert_string_equal(a->name, "a");
	assert_int_equal(a->line, 7);
	assert_string_equal(b->name, "b");
	assert_int_equal(b->line, 10);
	for (unsigned i = 0; i < 2; i++) {
		const struct relay_conf *r = &c.relays[i];

		assert_string_equal(r->game, "RTCW");
		assert_string_equal(r->heartbeat, "Wolfenstein-1");
		assert_string_equal(r->flatline, "WolfFlatline-1");
		assert_int_equal(r->nmasters, 1);
		assert_master(r, 0, "top.example", 27950);
		assert_int_equal(r->heartbeat_interval_ms, 60000);
		assert_int_equal(r->max_sessions, 10);
	}
	assert_v4(&a->listen, "127.0.0.1", 27960);
	assert_string_equal(a->upstream_host, "shared.example");
	assert_int_equal(a->upstream_port, 27960);
	assert_v4(&b->listen, "127.0.0.1", 27961);
	assert_string_equal(b->upstream_host, "other.example");
	assert_int_equal(b->upstream_port, 27961);
	/* A section's keys stay in it. */
	assert_int_equal(a->probe_timeout_ms, 1000);
	assert_int_equal(b->probe_timeout_ms, 3000);
	assert_int_equal(a->session_timeout_ms, 120000);
	assert_int_equal(b->session_timeout_ms, 30000);
}

static void test_config_explicit_top_level_tag_wins_over_a_sections_game(void **state)
{
	static const char text[] = "heartbeat Custom-7\n"
				   "upstream h:1\n"
				   "[relay a]\n"
				   "game q3\n";
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e, text, NOARGS), 0);
	assert_string_equal(c.relays[0].game, "Q3");
	assert_string_equal(c.relays[0].heartbeat, "Custom-7");
	assert_string_equal(c.relays[0].flatline, "");
}

static void test_config_a_sections_first_master_replaces_the_inherited_list(void **state)
{
	static const char text[] = "master top1.example\n"
				   "master top2.example:1\n"
				   "upstream h:1\n"
				   "[relay a]\n"
				   "listen 127.0.0.1:1\n"
				   "[relay b]\n"
				   "listen 127.0.0.1:2\n"
				   "master b1.example\n"
				   "master b2.example:2\n"
				   "[relay c]\n"
				   "listen 127.0.0.1:3\n"
				   "master c1.example\n";
	static struct etr_conf c;
	struct conf_errors e;
	const struct relay_conf *r;

	(void)state;
	assert_int_equal(run(&c, &e, text, NOARGS), 0);
	assert_errors(&e, 0);
	/* The top level's first master replaced the built-in two. */
	r = relay(&c, "a");
	assert_int_equal(r->nmasters, 2);
	assert_master(r, 0, "top1.example", 27950);
	assert_master(r, 1, "top2.example", 1);
	r = relay(&c, "b");
	assert_int_equal(r->nmasters, 2);
	assert_master(r, 0, "b1.example", 27950);
	assert_master(r, 1, "b2.example", 2);
	r = relay(&c, "c");
	assert_int_equal(r->nmasters, 1);
	assert_master(r, 0, "c1.example", 27950);
}

static void test_config_more_than_eight_masters_in_a_section_is_an_error(void **state)
{
	static const char text[] = "master t1\nmaster t2\nmaster t3\nmaster t4\n"
				   "master t5\nmaster t6\nmaster t7\nmaster t8\n" /* 1-8 */
				   "upstream h:1\n"				  /* 9 */
				   "[relay a]\n"				  /* 10 */
				   "master a1\nmaster a2\nmaster a3\nmaster a4\n" /* 11-14 */
				   "master a5\nmaster a6\nmaster a7\nmaster a8\n" /* 15-18 */
				   "master a9\n";				  /* 19 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), -1);
	assert_errors(&e, 1);
	assert_err_line(&e, PATH ":19: ", "master", "a9");
	assert_int_equal(c.relays[0].nmasters, CONF_MASTERS_MAX);
	assert_master(&c.relays[0], 0, "a1", 27950);
}

static void test_config_two_relays_on_one_listen_address_is_an_error_naming_both(void **state)
{
	static const char text[] = "upstream h:1\n"	       /* 1 */
				   "[relay alpha]\n"	       /* 2 */
				   "listen 127.0.0.1:27960\n"  /* 3 */
				   "[relay beta]\n"	       /* 4 */
				   "listen 127.0.0.1:27961\n"  /* 5 */
				   "[relay gamma]\n"	       /* 6 */
				   "listen 127.0.0.1:27960\n"; /* 7 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	assert_errors(&e, 1);
	assert_err_line(&e, PATH ":6: ", "gamma", "alpha");
	assert_err_line(&e, PATH ":6: ", "127.0.0.1:27960", NULL);

	/* Two relays that both keep the default listen address clash too. */
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, "upstream h:1\n[relay x]\n[relay y]\n"), 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	assert_errors(&e, 1);
	assert_err_line(&e, PATH ":3: ", "relay y", "relay x");
}

static void test_config_overlapping_session_ports_is_an_error_naming_both(void **state)
{
	static const char text[] = "upstream h:1\n"		 /* 1 */
				   "max-sessions 100\n"		 /* 2 */
				   "[relay a]\n"		 /* 3 */
				   "listen 127.0.0.1:1\n"	 /* 4 */
				   "session-ports 40000-40999\n" /* 5 */
				   "[relay b]\n"		 /* 6 */
				   "listen 127.0.0.1:2\n"	 /* 7 */
				   "session-ports 41000-41999\n" /* 8 */
				   "[relay c]\n"		 /* 9 */
				   "listen 127.0.0.1:3\n"	 /* 10 */
				   "session-ports 40999-41000\n" /* 11 */
				   "max-sessions 2\n"		 /* 12 */
				   "[relay d]\n"		 /* 13 */
				   "listen 127.0.0.1:4\n";	 /* 14 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	/* Adjacent ranges (a, b) and ephemeral ports (d) do not overlap. */
	assert_errors(&e, 2);
	assert_err_line(&e, PATH ":9: ", "c", " a");
	assert_err_line(&e, PATH ":9: ", "c", " b");
}

static void test_config_max_sessions_above_a_relays_port_range_is_an_error(void **state)
{
	static const char text[] = "upstream h:1\n"		  /* 1 */
				   "[relay a]\n"		  /* 2 */
				   "listen 127.0.0.1:1\n"	  /* 3 */
				   "session-ports 40000-40099\n"  /* 4 */
				   "max-sessions 100\n"		  /* 5 */
				   "[relay b]\n"		  /* 6 */
				   "listen 127.0.0.1:2\n"	  /* 7 */
				   "session-ports 41000-41099\n"  /* 8 */
				   "max-sessions 101\n"		  /* 9 */
				   "[relay c]\n"		  /* 10 */
				   "listen 127.0.0.1:3\n"	  /* 11 */
				   "session-ports 42000-42099\n"; /* 12 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	assert_errors(&e, 2);
	/* The line of the key set last of the two; the relay by name. */
	assert_err_line(&e, PATH ":9: ", "max-sessions 101", "relay b");
	assert_err_line(&e, PATH ":12: ", "max-sessions 4000", "relay c");
}

static void test_config_an_error_about_two_top_level_keys_names_a_line(void **state)
{
	static const char text[] = "upstream h:1\n"		  /* 1 */
				   "max-sessions 100\n"		  /* 2 */
				   "session-ports 40000-40001\n"; /* 3 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	assert_errors(&e, 1);
	assert_err_line(&e, PATH ":2: ", "max-sessions 100", "session-ports 40000-40001");
}

static void test_config_missing_upstream_in_a_relay_names_it(void **state)
{
	static const char text[] = "[relay a]\n"	   /* 1 */
				   "listen 127.0.0.1:1\n"  /* 2 */
				   "upstream h:1\n"	   /* 3 */
				   "[relay b]\n"	   /* 4 */
				   "listen 127.0.0.1:2\n"; /* 5 */
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, text), 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	assert_errors(&e, 1);
	assert_err_line(&e, PATH ":4: ", "relay b", "upstream");
}

static void test_config_no_relay_section_makes_the_top_level_the_default_relay(void **state)
{
	static const char text[] = "listen 127.0.0.1:27000\n"
				   "upstream h:1\n"
				   "game q3\n";
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e, text, NOARGS), 0);
	assert_int_equal(c.nrelays, 1);
	assert_string_equal(c.relays[0].name, "default");
	assert_int_equal(c.relays[0].line, 0);
	assert_v4(&c.relays[0].listen, "127.0.0.1", 27000);
	assert_string_equal(c.relays[0].heartbeat, "QuakeArena-1");
}

static void test_config_no_relay_section_and_no_upstream_is_an_error_from_finish(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, NOARGS), 0);
	assert_int_equal(load(&c, &e, "listen 127.0.0.1:1\ngame q3\n"), 0);
	assert_errors(&e, 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	assert_err_names(&e, "upstream", NULL);
}

static void test_config_errors_of_load_and_finish_add_up(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e, "game doom\n", NOARGS), -1);
	assert_errors(&e, 2);
	assert_err_line(&e, PATH ":1: ", "game", "doom");
	assert_non_null(strstr(e.text, "upstream"));
}

/* The command line over the file */

static void test_config_relay_key_on_the_command_line_overrides_every_relay(void **state)
{
	static const char text[] = "game rtcw\n"
				   "session-timeout 30s\n"
				   "[relay a]\n"
				   "listen 127.0.0.1:1\n"
				   "upstream h:1\n"
				   "max-sessions 100\n"
				   "heartbeat FileTag-1\n"
				   "[relay b]\n"
				   "listen 127.0.0.1:2\n"
				   "upstream h:2\n";
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e, text,
			     ARGV("--max-sessions", "7", "--game", "q3", "--upstream",
				  "cli.example:5", "--heartbeat", "CliTag-1")),
			 0);
	assert_errors(&e, 0);
	assert_int_equal(c.nrelays, 2);
	for (unsigned i = 0; i < 2; i++) {
		const struct relay_conf *r = &c.relays[i];

		assert_int_equal(r->max_sessions, 7);
		assert_string_equal(r->game, "Q3");
		assert_string_equal(r->heartbeat, "CliTag-1");
		assert_string_equal(r->flatline, "");
		assert_string_equal(r->upstream_host, "cli.example");
		assert_int_equal(r->upstream_port, 5);
		/* What the command line does not name stays the file's. */
		assert_int_equal(r->session_timeout_ms, 30000);
	}
	assert_v4(&c.relays[0].listen, "127.0.0.1", 1);
	assert_v4(&c.relays[1].listen, "127.0.0.1", 2);
	assert_true(c.cli_upstream);
}

static void test_config_first_master_on_the_command_line_replaces_each_relays_list(void **state)
{
	static const char text[] = "master top.example\n"
				   "upstream h:1\n"
				   "[relay a]\n"
				   "listen 127.0.0.1:1\n"
				   "master a1.example\n"
				   "master a2.example\n"
				   "[relay b]\n"
				   "listen 127.0.0.1:2\n";
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e, text,
			     ARGV("--master", "c1.example", "--debug", "--master", "c2.example:2")),
			 0);
	assert_errors(&e, 0);
	for (unsigned i = 0; i < 2; i++) {
		const struct relay_conf *r = &c.relays[i];

		assert_int_equal(r->nmasters, 2);
		assert_master(r, 0, "c1.example", 27950);
		assert_master(r, 1, "c2.example", 2);
	}
}

static void test_config_global_key_on_the_command_line_overrides_the_files(void **state)
{
	static const char text[] = "backend io_uring\n"
				   "debug no\n"
				   "drain-timeout 10s\n"
				   "ops-listen 127.0.0.1:9100\n"
				   "ops-allow-public no\n"
				   "upstream h:1\n";
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e, text,
			     ARGV("--backend", "epoll", "--debug", "--drain-timeout", "0",
				  "--ops-listen", "127.0.0.1:9200", "--ops-allow-public")),
			 0);
	assert_errors(&e, 0);
	assert_int_equal(c.backend, CONF_BACKEND_EPOLL);
	assert_true(c.debug);
	assert_int_equal(c.drain_timeout_ms, 0);
	assert_true(c.ops_enabled);
	assert_v4(&c.ops_listen, "127.0.0.1", 9200);
	assert_true(c.ops_allow_public);

	/* Without them, the file's values stand. */
	assert_int_equal(run(&c, &e, text, ARGV("--max-sessions", "5")), 0);
	assert_int_equal(c.backend, CONF_BACKEND_URING);
	assert_false(c.debug);
	assert_int_equal(c.drain_timeout_ms, 10000);
	assert_v4(&c.ops_listen, "127.0.0.1", 9100);
}

static void test_config_upstream_on_the_command_line_completes_a_file_without_one(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(
	    run(&c, &e, "listen 127.0.0.1:1\ngame q3\n", ARGV("-c", PATH, "--upstream", "h:9")), 0);
	assert_errors(&e, 0);
	assert_true(c.path_given);
	assert_int_equal(c.nrelays, 1);
	assert_string_equal(c.relays[0].name, "default");
	assert_v4(&c.relays[0].listen, "127.0.0.1", 1);
	assert_string_equal(c.relays[0].upstream_host, "h");
	assert_int_equal(c.relays[0].upstream_port, 9);
	assert_string_equal(c.relays[0].heartbeat, "QuakeArena-1");
}

/* log-time and the masters' address families */

static void test_config_log_time_is_auto_by_default_and_takes_yes_no_auto(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1")), 0);
	assert_int_equal(c.log_time, CONF_LOG_TIME_AUTO);
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--log-time", "yes")), 0);
	assert_int_equal(c.log_time, CONF_LOG_TIME_YES);
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--log-time", "no")), 0);
	assert_int_equal(c.log_time, CONF_LOG_TIME_NO);
	assert_int_equal(run(&c, &e, "log-time yes\nupstream h:1\n", ARGV("--log-time", "auto")),
			 0);
	assert_int_equal(c.log_time, CONF_LOG_TIME_AUTO);
	assert_int_equal(args(&c, &e, ARGV("--log-time", "sometimes")), -1);
	assert_err_names(&e, "--log-time", "sometimes");
	assert_int_equal(run(&c, &e, "upstream h:1\n[relay a]\nlog-time yes\n", NOARGS), -1);
}

static void test_config_ipv6_master_with_ipv4_listener_is_refused_naming_the_line(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e,
			     "upstream h:1\nlisten 0.0.0.0:27960\nmaster m.example\n"
			     "master [2001:db8::5]:27951\n",
			     NOARGS),
			 -1);
	assert_errors(&e, 1);
	assert_err_line(&e, PATH ":4: master [2001:db8::5]:27951: an IPv6 address", "0.0.0.0:27960",
			"cannot reach");
	/* On the command line, the option is named. */
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1", "--master", "[::1]:27950")), -1);
	assert_err_line(&e, "etrelay: --master [::1]:27950: an IPv6 address", "cannot reach", NULL);
	/* An IPv6 listener takes it. */
	assert_int_equal(
	    cli(&c, &e,
		ARGV("--upstream", "h:1", "--listen", "[::1]:27960", "--master", "[::1]:27950")),
	    0);
}

static void test_config_ipv4_master_needs_an_ipv6_listener_on_any_address(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	/* [::] reaches IPv4 through mapped addresses. */
	assert_int_equal(
	    cli(&c, &e,
		ARGV("--upstream", "h:1", "--listen", "[::]:27960", "--master", "127.0.0.1:27950")),
	    0);
	assert_int_equal(run(&c, &e,
			     "upstream h:1\n[relay six]\nlisten [::1]:27960\nmaster 127.0.0.1\n",
			     NOARGS),
			 -1);
	assert_errors(&e, 1);
	assert_err_line(&e, PATH ":4: master 127.0.0.1:27950: an IPv4 address", "relay six",
			"[::1]:27960");
}

static void test_config_listener_reaches_by_family(void **state)
{
	union etr_sockaddr l4, any6, lo6, mapped, m;

	(void)state;
	assert_int_equal(addr_parse_numeric("0.0.0.0:1", &l4), 0);
	assert_int_equal(addr_parse_numeric("[::]:1", &any6), 0);
	assert_int_equal(addr_parse_numeric("[::1]:1", &lo6), 0);
	assert_int_equal(addr_parse_numeric("[::ffff:192.0.2.1]:1", &mapped), 0);
	assert_true(conf_listener_reaches(&l4, false, AF_INET));
	assert_false(conf_listener_reaches(&l4, false, AF_INET6));
	assert_true(conf_listener_reaches(&any6, false, AF_INET));
	assert_false(conf_listener_reaches(&any6, true, AF_INET));
	assert_true(conf_listener_reaches(&any6, true, AF_INET6));
	assert_false(conf_listener_reaches(&lo6, false, AF_INET));
	assert_true(conf_listener_reaches(&lo6, false, AF_INET6));
	/* A mapped address is IPv4, whichever side it is on. */
	assert_true(conf_listener_reaches(&mapped, false, AF_INET));
	assert_false(conf_listener_reaches(&mapped, false, AF_INET6));
	assert_int_equal(addr_parse_numeric("[::ffff:10.0.0.1]:27950", &m), 0);
	assert_int_equal(conf_addr_family(&m), AF_INET);
}

static void test_config_sni_section_sets_every_key_and_needs_no_relay(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e,
			     "[sni web]\n"
			     "listen 0.0.0.0:443\n"
			     "route Svc.Example.com 10.0.0.2:443\n"
			     "route *.example.org backend.lan:8443 proxy-v2\n"
			     "preread-timeout 2s\n"
			     "connect-timeout 500ms\n"
			     "idle-timeout 1m\n"
			     "send-timeout 15s\n"
			     "max-connections 100\n"
			     "max-connections-per-ip 5\n"
			     "max-preread 7\n",
			     NOARGS),
			 0);
	assert_int_equal(c.nrelays, 0);
	assert_int_equal(c.nsni, 1);
	assert_string_equal(c.sni[0].name, "web");
	assert_int_equal(c.sni[0].line, 1);
	assert_int_equal(ntohs(c.sni[0].listen.in.sin_port), 443);
	assert_int_equal(c.sni[0].nroutes, 2);
	assert_string_equal(c.sni[0].routes[0].name, "svc.example.com");
	assert_string_equal(c.sni[0].routes[0].host, "10.0.0.2");
	assert_false(c.sni[0].routes[0].proxy_v2);
	assert_string_equal(c.sni[0].routes[1].host, "backend.lan");
	assert_int_equal(c.sni[0].routes[1].port, 8443);
	assert_true(c.sni[0].routes[1].proxy_v2);
	assert_int_equal(c.sni[0].routes[1].line, 4);
	assert_int_equal(c.sni[0].preread_timeout_ms, 2000);
	assert_int_equal(c.sni[0].connect_timeout_ms, 500);
	assert_int_equal(c.sni[0].idle_timeout_ms, 60000);
	assert_int_equal(c.sni[0].send_timeout_ms, 15000);
	assert_int_equal(c.sni[0].max_connections, 100);
	assert_int_equal(c.sni[0].max_per_ip, 5);
	assert_int_equal(c.sni[0].max_preread, 7);
}

static void test_config_sni_defaults_are_the_documented_ones(void **state)
{
	struct sni_conf s;

	(void)state;
	conf_sni_defaults(&s);
	assert_int_equal(s.preread_timeout_ms, 10000);
	assert_int_equal(s.connect_timeout_ms, 5000);
	assert_int_equal(s.idle_timeout_ms, 300000);
	assert_int_equal(s.send_timeout_ms, 60000);
	assert_int_equal(s.max_connections, 4096);
	assert_int_equal(s.max_per_ip, 64);
	assert_int_equal(s.max_preread, 1024);
}

static void test_config_sni_bad_values_name_their_line(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e,
			     "[sni web]\n"
			     "listen 0.0.0.0:443\n"
			     "route bad_name 10.0.0.2:443\n"
			     "route a.example 10.0.0.2\n"
			     "route b.example 10.0.0.2:443 proxy-v9\n"
			     "route c.example 10.0.0.2:443\n"
			     "route C.example 10.0.0.3:443\n"
			     "preread-timeout 0\n"
			     "max-connections 50001\n"
			     "max-connections-per-ip x\n"
			     "max-preread 0\n"
			     "connect-timeout soon\n"
			     "idle-timeout -1\n"
			     "upstream 1.2.3.4:5\n"
			     "send-timeout 0\n",
			     NOARGS),
			 -1);
	for (unsigned line = 3; line <= 15; line++) {
		char want[32];

		if (line == 6) /* the first c.example: fine */
			continue;
		snprintf(want, sizeof(want), PATH ":%u: ", line);
		assert_non_null(strstr(e.text, want));
	}
	assert_non_null(strstr(e.text, "already given at line 6"));
}

static void test_config_sni_quick_start_on_the_command_line(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(
	    cli(&c, &e,
		ARGV("--sni-listen", "127.0.0.1:8443", "--sni-route", "a.test=127.0.0.1:9001",
		     "--sni-route", "*.b.test=[::1]:9002,proxy-v2")),
	    0);
	assert_true(c.cli_listener);
	assert_int_equal(c.nrelays, 0);
	assert_int_equal(c.nsni, 1);
	assert_string_equal(c.sni[0].name, "default");
	assert_int_equal(c.sni[0].nroutes, 2);
	assert_string_equal(c.sni[0].routes[1].host, "::1");
	assert_true(c.sni[0].routes[1].proxy_v2);
	assert_int_equal(args(&c, &e, ARGV("--sni-route", "a.test")), -1);
	assert_non_null(strstr(e.text, "--sni-route"));
	assert_int_equal(cli(&c, &e, ARGV("--sni-route", "a.test=127.0.0.1:9")), -1);
	assert_non_null(strstr(e.text, "no sni-listen"));
}

static void test_config_turn_section_sets_every_key_and_needs_no_relay(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;
	char a[ADDR_STRLEN];

	(void)state;
	assert_int_equal(run(&c, &e,
			     "[turn p2p]\n"
			     "listen 127.0.0.1\n"
			     "tcp-listen 127.0.0.1:3479\n"
			     "realm game.example\n"
			     "public-ip 192.0.2.7\n"
			     "ports 50000-50999\n"
			     "max-allocations 900\n"
			     "user-quota 3\n"
			     "tcp-max-per-ip 5\n"
			     "tcp-max-connections 300\n"
			     "tcp-auth-timeout 2500ms\n"
			     "max-lifetime 10m\n"
			     "nonce-lifetime 5m\n"
			     "allow-peer 127.0.0.1/32\n"
			     "allow-peer fd00::/8\n"
			     "deny-peer 198.51.100.0/24\n"
			     "strict-expiry yes\n"
			     "tls-listen 127.0.0.1:5349\n"
			     "tls-cert /etc/etrelay/turn.pem\n"
			     "tls-key /etc/etrelay/turn.key\n"
			     "tls-reload-interval 30s\n",
			     NOARGS),
			 0);
	assert_int_equal(c.nrelays, 0);
	assert_int_equal(c.nturn, 1);
	assert_string_equal(c.turn[0].name, "p2p");
	assert_int_equal(ntohs(c.turn[0].listen.in.sin_port), 3478);
	assert_true(c.turn[0].tcp_set);
	assert_int_equal(ntohs(c.turn[0].tcp_listen.in.sin_port), 3479);
	assert_string_equal(c.turn[0].realm, "game.example");
	/* relay-address defaults to the (specific) listen address. */
	assert_string_equal(addr_str(&c.turn[0].relay_addr.sa, a), "127.0.0.1:0");
	assert_string_equal(addr_str(&c.turn[0].public_ip.sa, a), "192.0.2.7:0");
	assert_int_equal(c.turn[0].port_min, 50000);
	assert_int_equal(c.turn[0].port_max, 50999);
	assert_int_equal(c.turn[0].max_allocations, 900);
	assert_int_equal(c.turn[0].user_quota, 3);
	assert_int_equal(c.turn[0].tcp_max_per_ip, 5);
	assert_int_equal(c.turn[0].tcp_max_conns, 300);
	assert_int_equal(c.turn[0].tcp_auth_timeout_ms, 2500);
	assert_int_equal(c.turn[0].max_lifetime_ms, 600000);
	assert_int_equal(c.turn[0].nonce_lifetime_ms, 300000);
	assert_int_equal(c.turn[0].nallow, 2);
	assert_int_equal(c.turn[0].allow[0].bits, 32);
	assert_int_equal(c.turn[0].allow[1].addr.sa.sa_family, AF_INET6);
	assert_int_equal(c.turn[0].allow[1].bits, 8);
	assert_int_equal(c.turn[0].ndeny, 1);
	assert_int_equal(c.turn[0].deny[0].bits, 24);
	assert_true(c.turn[0].strict_expiry);
	assert_int_equal(c.turn[0].tls_reload_ms, 30000);
	assert_true(c.turn[0].tls_set);
	assert_int_equal(ntohs(c.turn[0].tls_listen.in.sin_port), 5349);
	assert_string_equal(c.turn[0].tls_cert, "/etc/etrelay/turn.pem");
	assert_string_equal(c.turn[0].tls_key, "/etc/etrelay/turn.key");
}

static void test_config_turn_defaults_are_the_documented_ones(void **state)
{
	static struct turn_conf t;

	(void)state;
	conf_turn_defaults(&t);
	assert_string_equal(t.realm, "etrelay");
	assert_int_equal(t.port_min, 49152);
	assert_int_equal(t.port_max, 65535);
	assert_int_equal(t.max_allocations, 4000);
	assert_int_equal(t.user_quota, 10);
	assert_int_equal(t.unauth_rate, 2000);
	assert_int_equal(t.unauth_burst, 4000);
	assert_int_equal(t.unauth_ip_rate, 10);
	assert_int_equal(t.unauth_ip_burst, 20);
	assert_int_equal(t.tls_rate, 200);
	assert_int_equal(t.tls_burst, 100);
	assert_int_equal(t.tls_ip_rate, 20);
	assert_int_equal(t.tls_ip_burst, 40);
	assert_int_equal(t.tcp_max_per_ip, 64);
	assert_int_equal(t.tcp_max_conns, 4096);
	assert_int_equal(t.tcp_auth_timeout_ms, 10000);
	assert_int_equal(t.max_lifetime_ms, 3600000);
	assert_int_equal(t.nonce_lifetime_ms, 3600000);
	assert_int_equal(t.tls_reload_ms, 60000);
	assert_false(t.strict_expiry);
	assert_false(t.tcp_set);
	assert_false(t.tls_set);
}

static void test_config_turn_quick_start_on_the_command_line(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;
	char a[ADDR_STRLEN];

	(void)state;
	assert_int_equal(
	    cli(&c, &e,
		ARGV("--turn-listen", "0.0.0.0:3478", "--turn-relay-address", "127.0.0.1",
		     "--turn-ports", "40000-40099", "--turn-max-allocations", "100",
		     "--turn-allow-peer", "127.0.0.1/32", "--turn-deny-peer", "10.0.0.0/8",
		     "--turn-strict-expiry", "yes", "--turn-user-quota", "2", "--turn-tcp-listen",
		     "0.0.0.0:3478", "--turn-realm", "r", "--turn-nonce-lifetime", "1s",
		     "--turn-tls-listen", "0.0.0.0:5349", "--turn-tls-cert", "c.pem",
		     "--turn-tls-key", "k.pem", "--turn-tls-reload-interval", "500ms",
		     "--turn-unauth-rate", "50", "--turn-unauth-burst", "60",
		     "--turn-unauth-ip-rate", "2", "--turn-unauth-ip-burst", "3",
		     "--turn-tcp-max-per-ip", "7", "--turn-tcp-max-connections", "64",
		     "--turn-tcp-auth-timeout", "1s")),
	    0);
	assert_int_equal(c.turn[0].unauth_rate, 50);
	assert_int_equal(c.turn[0].unauth_burst, 60);
	assert_int_equal(c.turn[0].unauth_ip_rate, 2);
	assert_int_equal(c.turn[0].unauth_ip_burst, 3);
	assert_true(c.cli_listener);
	assert_int_equal(c.nrelays, 0);
	assert_int_equal(c.nturn, 1);
	assert_string_equal(c.turn[0].name, "default");
	assert_string_equal(addr_str(&c.turn[0].relay_addr.sa, a), "127.0.0.1:0");
	assert_string_equal(addr_str(&c.turn[0].public_ip.sa, a), "127.0.0.1:0");
	assert_int_equal(c.turn[0].port_min, 40000);
	assert_int_equal(c.turn[0].max_allocations, 100);
	assert_int_equal(c.turn[0].nallow, 1);
	assert_int_equal(c.turn[0].ndeny, 1);
	assert_true(c.turn[0].strict_expiry);
	assert_int_equal(c.turn[0].user_quota, 2);
	assert_true(c.turn[0].tcp_set);
	assert_string_equal(c.turn[0].realm, "r");
	assert_int_equal(c.turn[0].nonce_lifetime_ms, 1000);
	assert_true(c.turn[0].tls_set);
	assert_int_equal(ntohs(c.turn[0].tls_listen.in.sin_port), 5349);
	assert_string_equal(c.turn[0].tls_cert, "c.pem");
	assert_string_equal(c.turn[0].tls_key, "k.pem");
	assert_int_equal(c.turn[0].tls_reload_ms, 500);
	assert_int_equal(c.turn[0].tcp_max_per_ip, 7);
	assert_int_equal(c.turn[0].tcp_max_conns, 64);
	assert_int_equal(c.turn[0].tcp_auth_timeout_ms, 1000);
	/* A key without a listener. */
	assert_int_equal(
	    cli(&c, &e, ARGV("--upstream", "1.2.3.4:5", "--turn-ports", "40000-40099")), -1);
	assert_non_null(strstr(e.text, "no turn-listen"));
}

static void test_config_turn_tls_handshake_budget_is_set_by_key_and_option(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e,
			     "[turn t]\nlisten 127.0.0.1\ntls-listen 127.0.0.1:5349\n"
			     "tls-cert c.pem\ntls-key k.pem\ntls-handshake-rate 300\n"
			     "tls-handshake-burst 40\ntls-handshake-ip-rate 4\n"
			     "tls-handshake-ip-burst 6\n",
			     NOARGS),
			 0);
	assert_int_equal(c.turn[0].tls_rate, 300);
	assert_int_equal(c.turn[0].tls_burst, 40);
	assert_int_equal(c.turn[0].tls_ip_rate, 4);
	assert_int_equal(c.turn[0].tls_ip_burst, 6);
	assert_int_equal(
	    cli(&c, &e,
		ARGV("--turn-listen", "127.0.0.1", "--turn-tls-listen", "127.0.0.1:5349",
		     "--turn-tls-cert", "c.pem", "--turn-tls-key", "k.pem",
		     "--turn-tls-handshake-rate", "50", "--turn-tls-handshake-burst", "8",
		     "--turn-tls-handshake-ip-rate", "1", "--turn-tls-handshake-ip-burst", "2")),
	    0);
	assert_int_equal(c.turn[0].tls_rate, 50);
	assert_int_equal(c.turn[0].tls_burst, 8);
	assert_int_equal(c.turn[0].tls_ip_rate, 1);
	assert_int_equal(c.turn[0].tls_ip_burst, 2);
	/* 0 would refuse every handshake: an error naming its line. */
	assert_int_equal(run(&c, &e,
			     "[turn t]\nlisten 127.0.0.1\ntls-handshake-rate 0\n"
			     "tls-handshake-burst x\ntls-handshake-ip-rate 1000001\n"
			     "tls-handshake-ip-burst -1\n",
			     NOARGS),
			 -1);
	assert_non_null(strstr(e.text, PATH ":3: tls-handshake-rate: invalid value '0'"));
	assert_non_null(strstr(e.text, PATH ":4: tls-handshake-burst: invalid value 'x'"));
	assert_non_null(strstr(e.text, PATH ":5: tls-handshake-ip-rate: invalid value"));
	assert_non_null(strstr(e.text, PATH ":6: tls-handshake-ip-burst: invalid value"));
}

static void test_config_turn_limits_and_addresses_are_checked(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	/* More allocations than ports. */
	assert_int_equal(run(&c, &e,
			     "[turn t]\nlisten 127.0.0.1:3478\nports 40000-40009\n"
			     "max-allocations 11\n",
			     NOARGS),
			 -1);
	/* At the later of the two keys' lines (attack13 F7: the header's). */
	assert_non_null(
	    strstr(e.text, PATH ":4: turn t: max-allocations 11 is more than the 10 ports"));
	assert_int_equal(run(&c, &e,
			     "[turn t]\nlisten 127.0.0.1:3478\nmax-allocations 11\n"
			     "ports 40000-40009\n",
			     NOARGS),
			 -1);
	assert_non_null(strstr(e.text, PATH ":4: turn t: max-allocations 11 is more"));
	/* The default, said so, with a range too narrow for it. */
	assert_int_equal(
	    run(&c, &e, "[turn t]\nlisten 127.0.0.1:3478\nports 40000-40999\n", NOARGS), -1);
	assert_non_null(strstr(e.text, PATH ":3: turn t: max-allocations 4000 (the default) is "
					    "more than the 1000 ports"));
	/* The default 4000 fits the default range. */
	assert_int_equal(run(&c, &e, "[turn t]\nlisten 127.0.0.1:3478\n", NOARGS), 0);
	/* A wildcard listener needs relay-address. */
	assert_int_equal(run(&c, &e, "[turn t]\nlisten 0.0.0.0:3478\n", NOARGS), -1);
	assert_non_null(strstr(e.text, PATH ":1: turn t: relay-address: missing"));
	/* No listen at all. */
	assert_int_equal(run(&c, &e, "[turn t]\nrealm x\n", NOARGS), -1);
	assert_non_null(strstr(e.text, "turn t: listen: missing"));
	/* Bad values name their line. */
	assert_int_equal(run(&c, &e,
			     "[turn t]\n"
			     "listen 127.0.0.1:3478\n"
			     "ports 80-90\n"
			     "max-allocations 0\n"
			     "user-quota x\n"
			     "allow-peer 10.0.0.0/33\n"
			     "deny-peer nowhere\n"
			     "strict-expiry maybe\n"
			     "relay-address 1.2.3.4:5\n"
			     "realm \"a\\\"b\"\n"
			     "max-lifetime 0\n"
			     "nonce-lifetime 2d\n"
			     "tcp-max-per-ip 0\n"
			     "tcp-max-connections 49153\n"
			     "tcp-auth-timeout 31s\n"
			     "tcp-auth-timeout 50ms\n"
			     "colour blue\n",
			     NOARGS),
			 -1);
	for (unsigned line = 3; line <= 17; line++) {
		char want[32];

		snprintf(want, sizeof(want), PATH ":%u: ", line);
		assert_non_null(strstr(e.text, want));
	}
	assert_non_null(strstr(e.text, "unknown key 'colour' in a [turn] section"));
	/* The same UDP port as a relay. */
	assert_int_equal(run(&c, &e,
			     "listen 0.0.0.0:27960\nupstream 1.2.3.4:27960\n"
			     "[turn t]\nlisten 127.0.0.1:27960\n",
			     NOARGS),
			 -1);
	assert_non_null(strstr(e.text, "relay default listens there"));
	/* TLS without its pair. */
	assert_int_equal(
	    run(&c, &e, "[turn t]\nlisten 127.0.0.1\ntls-listen 127.0.0.1:5349\n", NOARGS), -1);
	assert_non_null(strstr(e.text, "tls-listen: needs tls-cert and tls-key"));
	/* TLS on the TCP listener's address. */
	assert_int_equal(run(&c, &e,
			     "[turn t]\nlisten 127.0.0.1\ntcp-listen 127.0.0.1:5349\n"
			     "tls-listen 127.0.0.1:5349\ntls-cert c.pem\ntls-key k.pem\n",
			     NOARGS),
			 -1);
	assert_non_null(strstr(e.text, "tls-listen 127.0.0.1:5349: the tcp-listen address"));
	/* Two sections of one name. */
	assert_int_equal(
	    run(&c, &e, "[turn t]\nlisten 127.0.0.1\n[turn t]\nlisten 127.0.0.2\n", NOARGS), -1);
	assert_non_null(strstr(e.text, "turn 't' already defined at line 1"));
}

static void test_config_turn_tls_pair_without_tls_listen_and_tcp_clashes(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	/* A pair nothing would load: each key named on its own line. */
	assert_int_equal(run(&c, &e,
			     "[turn t]\nlisten 127.0.0.1\nrealm x\ntls-cert c.pem\ntls-key k.pem\n",
			     NOARGS),
			 -1);
	assert_errors(&e, 2);
	assert_err_line(&e, PATH ":4: turn t: tls-cert: given without tls-listen", NULL, NULL);
	assert_err_line(&e, PATH ":5: turn t: tls-key: given without tls-listen", NULL, NULL);
	assert_int_equal(cli(&c, &e, ARGV("--turn-listen", "127.0.0.1", "--turn-tls-key", "k.pem")),
			 -1);
	assert_errors(&e, 1);
	assert_err_line(&e, "etrelay: turn default: tls-key: given without tls-listen", NULL, NULL);
	/* The reload interval alone: nothing to reload, the same error. */
	assert_int_equal(
	    run(&c, &e, "[turn t]\nlisten 127.0.0.1\nrealm x\ntls-reload-interval 5s\n", NOARGS),
	    -1);
	assert_errors(&e, 1);
	assert_err_line(&e, PATH ":4: turn t: tls-reload-interval: given without tls-listen", NULL,
			NULL);
	assert_int_equal(
	    cli(&c, &e, ARGV("--turn-listen", "127.0.0.1", "--turn-tls-reload-interval", "5s")),
	    -1);
	assert_errors(&e, 1);
	assert_err_line(&e, "etrelay: turn default: tls-reload-interval: given without tls-listen",
			NULL, NULL);
	/* The TLS, TCP and SNI listeners on the ops plane's port, a wildcard
	 * included: one error each, naming the key. */
	assert_int_equal(run(&c, &e,
			     "ops-listen 127.0.0.1:9960\n"
			     "[sni web]\nlisten 0.0.0.0:9960\nroute a.test 127.0.0.1:8443\n"
			     "[turn t]\nlisten 127.0.0.1\ntcp-listen 127.0.0.1:9960\n"
			     "tls-listen 127.0.0.1:9960\ntls-cert c.pem\ntls-key k.pem\n",
			     NOARGS),
			 -1);
	assert_err_line(&e, PATH ":2: sni web: listen 0.0.0.0:9960: the ops-listen address", NULL,
			NULL);
	assert_err_line(&e, PATH ":5: turn t: tcp-listen 127.0.0.1:9960: the ops-listen address",
			NULL, NULL);
	assert_err_line(&e, PATH ":5: turn t: tls-listen 127.0.0.1:9960: the ops-listen address",
			NULL, NULL);
	assert_int_equal(cli(&c, &e,
			     ARGV("--ops-listen", "127.0.0.1:9960", "--turn-listen", "127.0.0.1",
				  "--turn-tls-listen", "127.0.0.1:9960", "--turn-tls-cert", "c.pem",
				  "--turn-tls-key", "k.pem")),
			 -1);
	assert_errors(&e, 1);
	assert_err_line(&e,
			"etrelay: turn default: tls-listen 127.0.0.1:9960: the ops-listen "
			"address",
			NULL, NULL);
	/* One listener's tls-listen on another's tcp-listen. */
	assert_int_equal(run(&c, &e,
			     "[turn a]\nlisten 127.0.0.1:3478\ntcp-listen 127.0.0.1:5349\n"
			     "[turn b]\nlisten 127.0.0.2:3478\nports 40000-49999\n"
			     "tls-listen 127.0.0.1:5349\ntls-cert c.pem\ntls-key k.pem\n",
			     NOARGS),
			 -1);
	assert_errors(&e, 1);
	assert_err_line(&e,
			PATH ":4: turn b: tls-listen 127.0.0.1:5349: the tcp-listen address "
			     "of turn a",
			NULL, NULL);
	/* Other ports: no clash. */
	assert_int_equal(run(&c, &e,
			     "ops-listen 127.0.0.1:9960\n"
			     "[turn t]\nlisten 127.0.0.1\ntcp-listen 127.0.0.1:3478\n"
			     "tls-listen 127.0.0.1:5349\ntls-cert c.pem\ntls-key k.pem\n",
			     NOARGS),
			 0);
}

/* A section holding one TCP listener on addr, written at buf: kind 0 an
 * SNI listener, 1 a TURN tcp-listen, 2 a TURN tls-listen (its UDP listen and
 * relayed ports on 127.0.0.n, apart from the other's). Its lines, and the
 * key, in *lines and *key. */
static int tcp_section(char *buf, size_t len, int kind, const char *name, int n, const char *addr,
		       unsigned *lines, const char **key)
{
	static const char *keys[3] = {"listen", "tcp-listen", "tls-listen"};

	*key = keys[kind];
	*lines = kind == 2 ? 5 : 3;
	if (kind == 0)
		return snprintf(buf, len, "[sni %s]\nlisten %s\nroute %s.test 127.0.0.1:8443\n",
				name, addr, name);
	return snprintf(buf, len, "[turn %s]\nlisten 127.0.0.%d\n%s %s\n%s", name, n, *key, addr,
			kind == 2 ? "tls-cert c.pem\ntls-key k.pem\n" : "");
}

static void test_config_every_pair_of_tcp_listeners_on_one_port_is_an_error(void **state)
{
	static struct etr_conf c;
	static const char *wild[] = {"0.0.0.0:443", "[::]:443", "127.0.0.1:443"};
	struct conf_errors e;
	char text[512], want[256];
	const char *kind_name[3] = {"sni", "turn", "turn"}, *ka, *kb;
	unsigned la, lb;
	int n;

	(void)state;
	/* SNI, TURN tcp-listen and TURN tls-listen, each against each (two
	 * SNI, two TCP, two TLS listeners too): the first a wildcard (IPv4,
	 * IPv6) or the same address, the second 127.0.0.1:443. One error, at
	 * the second section's line, naming the first and its line. */
	for (int a = 0; a < 3; a++)
		for (int b = 0; b < 3; b++)
			for (unsigned w = 0; w < 3; w++) {
				n = tcp_section(text, sizeof(text), a, "one", 2, wild[w], &la, &ka);
				tcp_section(text + n, sizeof(text) - (size_t)n, b, "two", 3,
					    "127.0.0.1:443", &lb, &kb);
				assert_int_equal(run(&c, &e, text, NOARGS), -1);
				assert_errors(&e, 1);
				snprintf(want, sizeof(want),
					 PATH ":%u: %s two: %s 127.0.0.1:443: the %s address of %s "
					      "one (line 1)",
					 la + 1, kind_name[b], kb, ka, kind_name[a]);
				assert_err_line(&e, want, NULL, NULL);
				/* Another port: no clash. */
				tcp_section(text + n, sizeof(text) - (size_t)n, b, "two", 3,
					    "127.0.0.1:444", &lb, &kb);
				assert_int_equal(run(&c, &e, text, NOARGS), 0);
				/* Another specific address: no clash either. */
				if (w == 2) {
					tcp_section(text + n, sizeof(text) - (size_t)n, b, "two", 3,
						    "127.0.0.2:443", &lb, &kb);
					assert_int_equal(run(&c, &e, text, NOARGS), 0);
				}
			}
	/* From the command line: named as such. */
	assert_int_equal(
	    run(&c, &e, "[sni web]\nlisten 127.0.0.1:443\nroute a.test 127.0.0.1:8443\n",
		ARGV("--turn-listen", "127.0.0.1", "--turn-tcp-listen", "0.0.0.0:443")),
	    -1);
	assert_errors(&e, 1);
	assert_err_line(&e,
			"etrelay: turn default: tcp-listen 0.0.0.0:443: the listen address of sni "
			"web (line 1)",
			NULL, NULL);
}

static void test_config_turn_ports_holding_another_listener_are_an_error(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	/* The game relay's public port, its own listen and a prbe port: each
	 * named with the range. TCP ports (tcp-listen, ops-listen) are not
	 * in the way of UDP relayed sockets. */
	assert_int_equal(run(&c, &e,
			     "listen 0.0.0.0:27960\nupstream 1.2.3.4:27960\n"
			     "ops-listen 127.0.0.1:9100\nprbe-listen 0.0.0.0:9101\n"
			     "[turn t]\nlisten 127.0.0.1:9200\ntcp-listen 127.0.0.1:9201\n"
			     "ports 9000-30000\n",
			     NOARGS),
			 -1);
	/* Named on the ports line, with where the other key was set. */
	assert_errors(&e, 3);
	assert_err_line(&e, PATH ":8: turn t: ports 9000-30000 hold port 27960 of relay default",
			"listen 0.0.0.0:27960 (" PATH ":1)", NULL);
	assert_err_line(&e, PATH ":8: turn t: ports",
			"hold port 9200 of turn t listen 127.0.0.1:9200 (" PATH ":5)", NULL);
	assert_err_line(&e, PATH ":8: turn t: ports",
			"hold port 9101 of prbe-listen 0.0.0.0:9101 (" PATH ":4)", NULL);
	/* The default range says so, on the section's line. */
	assert_int_equal(run(&c, &e,
			     "prbe-listen 0.0.0.0:51821\n"
			     "[turn p2p]\nlisten 127.0.0.1:3478\n",
			     NOARGS),
			 -1);
	assert_errors(&e, 1);
	assert_err_line(&e, PATH ":2: turn p2p: ports 49152-65535 (the default) hold port 51821",
			"prbe-listen 0.0.0.0:51821 (" PATH ":1)", NULL);
	/* Another TURN listener's port, from the command line. */
	assert_int_equal(run(&c, &e, "[turn a]\nlisten 127.0.0.1:40000\n",
			     ARGV("--turn-listen", "127.0.0.1:3478", "--turn-ports", "40000-40099",
				  "--turn-max-allocations", "100")),
			 -1);
	assert_err_line(&e,
			"etrelay: turn default: turn-ports 40000-40099 hold port 40000 of turn a",
			"(" PATH ":1)", NULL);
	/* Another address, or a TCP port: no clash. */
	assert_int_equal(run(&c, &e,
			     "listen 127.0.0.2:27960\nupstream 1.2.3.4:27960\n"
			     "ops-listen 127.0.0.1:20001\n"
			     "[turn t]\nlisten 127.0.0.1:3478\ntcp-listen 127.0.0.1:20000\n"
			     "ports 20000-30000\n",
			     NOARGS),
			 0);
}

static void test_config_turn_peers_public_ip_and_port_0_are_checked(void **state)
{
	static struct etr_conf c;
	struct conf_errors e, w;

	(void)state;
	/* Host bits, as a ban-file says; public-ip unspecified. */
	assert_int_equal(run(&c, &e,
			     "[turn t]\nlisten 127.0.0.1\nallow-peer 10.0.0.1/8\n"
			     "deny-peer 2001:db8::1/32\npublic-ip 0.0.0.0\n",
			     NOARGS),
			 -1);
	assert_err_line(&e, PATH ":3: allow-peer", "did you mean 10.0.0.0/8?", NULL);
	assert_err_line(&e, PATH ":4: deny-peer", "did you mean 2001:db8::/32?", NULL);
	assert_err_line(&e, PATH ":5: public-ip", "not 0.0.0.0", NULL);
	assert_int_equal(cli(&c, &e, ARGV("--turn-listen", "127.0.0.1", "--turn-public-ip", "::")),
			 -1);
	assert_err_names(&e, "--turn-public-ip", "not 0.0.0.0 or ::");
	/* listen ADDR:0 is one error, about the port. */
	assert_int_equal(run(&c, &e, "[turn t]\nlisten 45.0.0.1:0\n", NOARGS), -1);
	assert_errors(&e, 1);
	assert_err_line(&e, PATH ":2: listen", "(port 0", NULL);
	assert_int_equal(run(&c, &e, "[turn t]\nlisten 0.0.0.0:0\n", NOARGS), -1);
	assert_errors(&e, 1);
	/* allow-peer 0.0.0.0/0 or ::/0 is legal, and a warning naming its line. */
	assert_int_equal(run(&c, &e,
			     "[turn t]\nlisten 127.0.0.1\nallow-peer 10.0.0.0/8\n"
			     "allow-peer 0.0.0.0/0\nallow-peer ::/0\n",
			     NOARGS),
			 0);
	memset(&w, 0, sizeof(w));
	assert_int_equal(conf_turn_warnings(&c, &w), 2);
	assert_err_line(&w, PATH ":4: warning: turn t: allow-peer 0.0.0.0/0", NULL, NULL);
	assert_err_line(&w, PATH ":5: warning: turn t: allow-peer ::/0", NULL, NULL);
	assert_int_equal(
	    cli(&c, &e, ARGV("--turn-listen", "127.0.0.1", "--turn-allow-peer", "0.0.0.0/0")), 0);
	memset(&w, 0, sizeof(w));
	assert_int_equal(conf_turn_warnings(&c, &w), 1);
	assert_err_line(&w, "etrelay: --turn-allow-peer: warning: turn default", NULL, NULL);
}

/* attack14: max-spliced without splice yes does nothing; say so. */
static void test_config_sni_max_spliced_without_splice_is_a_warning(void **state)
{
	static struct etr_conf c;
	struct conf_errors e, w;

	(void)state;
	assert_int_equal(run(&c, &e,
			     "[sni web]\nlisten 127.0.0.1:8443\nroute a.example.com 127.0.0.1:1\n"
			     "max-spliced 64\n",
			     NOARGS),
			 0);
	memset(&w, 0, sizeof(w));
	assert_int_equal(conf_sni_warnings(&c, &w), 1);
	assert_err_line(&w, PATH ":4: warning: sni web: max-spliced 64 without splice yes", NULL,
			NULL);
	assert_int_equal(run(&c, &e,
			     "[sni web]\nlisten 127.0.0.1:8443\nroute a.example.com 127.0.0.1:1\n"
			     "max-spliced 64\nsplice yes\n",
			     NOARGS),
			 0);
	memset(&w, 0, sizeof(w));
	assert_int_equal(conf_sni_warnings(&c, &w), 0);
}

static void test_config_cidr_blocks_are_parsed(void **state)
{
	struct conf_cidr b;

	(void)state;
	assert_int_equal(conf_cidr_parse("10.1.2.3", &b), 0);
	assert_int_equal(b.bits, 32);
	assert_int_equal(conf_cidr_parse("::1", &b), 0);
	assert_int_equal(b.bits, 128);
	assert_int_equal(conf_cidr_parse("64:ff9b::/96", &b), 0);
	assert_int_equal(b.bits, 96);
	assert_int_equal(conf_cidr_parse("0.0.0.0/0", &b), 0);
	assert_int_equal(b.bits, 0);
	assert_int_equal(conf_cidr_parse("10.0.0.0/", &b), -1);
	assert_int_equal(conf_cidr_parse("/8", &b), -1);
	assert_int_equal(conf_cidr_parse("::/129", &b), -1);
	assert_int_equal(conf_cidr_parse("10.0.0.0/8x", &b), -1);
}

static void test_config_sni_without_listen_is_an_error(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e, "[sni web]\nroute a.test 1.2.3.4:5\n", NOARGS), -1);
	assert_non_null(strstr(e.text, PATH ":1: sni web: listen: missing"));
}

/* PRBE echo: prbe per relay, the echo-only ports, the rules. */

static void test_config_prbe_defaults_are_off_1472_bytes_10_per_second_burst_20(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1")), 0);
	assert_false(c.relays[0].prbe);
	assert_int_equal(c.prbe.nlisten, 0);
	assert_int_equal(c.prbe.nports, 0);
	assert_int_equal(c.prbe.max_size, 1472);
	assert_int_equal(c.prbe.rate, 10);
	assert_int_equal(c.prbe.burst, 20);
}

static void test_config_prbe_is_per_relay_and_its_ports_are_echo_ports(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e,
			     "prbe-listen 0.0.0.0:51821\n"
			     "prbe-listen [::1]:443\n"
			     "prbe-max-size 1200\n"
			     "prbe-rate 5\n"
			     "prbe-burst 7\n"
			     "prbe-listener-rate 50\n"
			     "prbe-listener-burst 60\n"
			     "[relay a]\nupstream h:1\nlisten 0.0.0.0:27960\nprbe yes\n"
			     "[relay b]\nupstream h:2\nlisten 0.0.0.0:27961\n",
			     NOARGS),
			 0);
	assert_true(c.relays[0].prbe);
	assert_false(c.relays[1].prbe);
	assert_int_equal(c.prbe.nlisten, 2);
	assert_int_equal(c.prbe.max_size, 1200);
	assert_int_equal(c.prbe.rate, 5);
	assert_int_equal(c.prbe.burst, 7);
	assert_int_equal(c.prbe.listener_rate, 50);
	assert_int_equal(c.prbe.listener_burst, 60);
	/* Every echo port once: the two echo-only ports, relay a's. */
	assert_int_equal(c.prbe.nports, 3);
	assert_int_equal(c.prbe.ports[0], 51821);
	assert_int_equal(c.prbe.ports[1], 443);
	assert_int_equal(c.prbe.ports[2], 27960);
}

static void test_config_prbe_on_the_command_line(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	/* The file's echo ports are replaced by the command line's, which
	 * add up among themselves; --prbe sets every relay. */
	assert_int_equal(run(&c, &e,
			     "prbe-listen 127.0.0.1:5000\n"
			     "[relay a]\nupstream h:1\nlisten 0.0.0.0:27960\n"
			     "[relay b]\nupstream h:2\nlisten 0.0.0.0:27961\nprbe no\n",
			     ARGV("--prbe-listen", "127.0.0.1:6000", "--prbe-listen",
				  "127.0.0.1:6001", "--prbe", "yes", "--prbe-rate", "3")),
			 0);
	assert_int_equal(c.prbe.nlisten, 2);
	assert_int_equal(ntohs(c.prbe.listen[0].in.sin_port), 6000);
	assert_int_equal(ntohs(c.prbe.listen[1].in.sin_port), 6001);
	assert_true(c.relays[0].prbe);
	assert_true(c.relays[1].prbe);
	assert_int_equal(c.prbe.rate, 3);
	assert_int_equal(c.prbe.nports, 4);
	/* the listener's bucket by default */
	assert_int_equal(c.prbe.listener_rate, CONF_PRBE_LISTENER_RATE);
	assert_int_equal(c.prbe.listener_burst, CONF_PRBE_LISTENER_BURST);
}

static void test_config_any_listener_makes_a_process_echo_ports_alone_too(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	/* Echo ports alone, on the command line and in a file: no relay. */
	assert_int_equal(cli(&c, &e, ARGV("--prbe-listen", "127.0.0.1:51821")), 0);
	assert_true(c.cli_listener);
	assert_int_equal(c.nrelays, 0);
	assert_int_equal(c.prbe.nports, 1);
	assert_int_equal(run(&c, &e, "prbe-listen 127.0.0.1:51821\n", NOARGS), 0);
	assert_int_equal(c.nrelays, 0);
	assert_int_equal(c.prbe.nports, 1);
	/* An upstream beside them still makes the top level a relay. */
	assert_int_equal(cli(&c, &e, ARGV("--prbe-listen", "127.0.0.1:51821", "--upstream", "h:1")),
			 0);
	assert_int_equal(c.nrelays, 1);
	/* No listener at all: the relay's upstream is missing. */
	assert_int_equal(cli(&c, &e, ARGV("--prbe-rate", "3")), -1);
	assert_non_null(strstr(e.text, "upstream: missing"));
}

static void test_config_prbe_bad_values_name_the_key(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--prbe", "maybe")), -1);
	assert_err_names(&e, "--prbe", "maybe");
	assert_int_equal(args(&c, &e, ARGV("--prbe-listen", "127.0.0.1")), -1);
	assert_err_names(&e, "--prbe-listen", "127.0.0.1");
	assert_int_equal(args(&c, &e, ARGV("--prbe-listen", "127.0.0.1:0")), -1);
	assert_err_names(&e, "--prbe-listen", "127.0.0.1:0");
	assert_int_equal(args(&c, &e, ARGV("--prbe-listen", "echo.example:7")), -1);
	assert_err_names(&e, "--prbe-listen", "echo.example:7");
	assert_int_equal(args(&c, &e, ARGV("--prbe-max-size", "3")), -1);
	assert_err_names(&e, "--prbe-max-size", "3");
	assert_int_equal(args(&c, &e, ARGV("--prbe-max-size", "65508")), -1);
	assert_err_names(&e, "--prbe-max-size", "65508");
	assert_int_equal(args(&c, &e, ARGV("--prbe-max-size", "4")), 0);
	assert_int_equal(args(&c, &e, ARGV("--prbe-rate", "0")), -1);
	assert_err_names(&e, "--prbe-rate", "0");
	assert_int_equal(args(&c, &e, ARGV("--prbe-burst", "x")), -1);
	assert_err_names(&e, "--prbe-burst", "x");
	assert_int_equal(args(&c, &e, ARGV("--prbe-listener-rate", "0")), -1);
	assert_err_names(&e, "--prbe-listener-rate", "0");
	assert_int_equal(args(&c, &e, ARGV("--prbe-listener-burst", "100001")), -1);
	assert_err_names(&e, "--prbe-listener-burst", "100001");
	conf_defaults(&c, &etr_conf_schema);
	memset(&e, 0, sizeof(e));
	assert_int_equal(load(&c, &e,
			      "prbe-max-size 70000\n[relay a]\nprbe-rate 2\n"
			      "prbe-listener-rate 5\n"),
			 -1);
	assert_err_line(&e, PATH ":1: prbe-max-size", "70000", NULL);
	assert_err_line(&e, PATH ":3: prbe-rate", "process-wide", NULL);
	assert_err_line(&e, PATH ":4: prbe-listener-rate", "process-wide", NULL);
}

static void test_config_prbe_listen_at_most_8_and_not_on_a_relays_port(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e,
			      ARGV("--prbe-listen", "127.0.0.1:1", "--prbe-listen", "127.0.0.1:2",
				   "--prbe-listen", "127.0.0.1:3", "--prbe-listen", "127.0.0.1:4",
				   "--prbe-listen", "127.0.0.1:5", "--prbe-listen", "127.0.0.1:6",
				   "--prbe-listen", "127.0.0.1:7", "--prbe-listen", "127.0.0.1:8",
				   "--prbe-listen", "127.0.0.1:9")),
			 -1);
	assert_err_names(&e, "--prbe-listen", "at most 8");
	/* A relay's own address, or a wildcard over it: prbe yes is the way. */
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--listen", "127.0.0.1:27960",
				  "--prbe-listen", "0.0.0.0:27960")),
			 -1);
	assert_err_names(&e, "prbe-listen 0.0.0.0:27960", "prbe yes");
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--listen", "127.0.0.1:27960",
				  "--prbe-listen", "127.0.0.2:27960")),
			 0);
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--prbe-listen", "127.0.0.1:7000",
				  "--prbe-listen", "127.0.0.1:7000")),
			 -1);
	assert_err_names(&e, "prbe-listen 127.0.0.1:7000", "twice");
	/* A wildcard and an address on one port: not "twice" (attack13 F7). */
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--prbe-listen", "[::]:7000",
				  "--prbe-listen", "127.0.0.1:7000")),
			 -1);
	assert_err_names(&e, "prbe-listen 127.0.0.1:7000",
			 "the same port as prbe-listen [::]:7000");
	assert_null(strstr(e.text, "twice"));
}

static void test_config_prbe_more_than_8_echo_ports_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;
	char text[2048];
	size_t o = 0;

	(void)state;
	/* 6 echo-only ports and 3 relays with prbe yes: 9 ports. */
	for (unsigned i = 0; i < 6; i++)
		o += (size_t)snprintf(text + o, sizeof(text) - o, "prbe-listen 127.0.0.1:%u\n",
				      7000 + i);
	for (unsigned i = 0; i < 3; i++)
		o += (size_t)snprintf(text + o, sizeof(text) - o,
				      "[relay r%u]\nupstream h:1\nlisten 0.0.0.0:%u\nprbe yes\n", i,
				      27960 + i);
	assert_int_equal(run(&c, &e, text, NOARGS), -1);
	assert_err_names(&e, "more than 8 ports", NULL);
	/* Relays on one port number count once. */
	o = 0;
	for (unsigned i = 0; i < 6; i++)
		o += (size_t)snprintf(text + o, sizeof(text) - o, "prbe-listen 127.0.0.1:%u\n",
				      7000 + i);
	for (unsigned i = 0; i < 3; i++)
		o += (size_t)snprintf(
		    text + o, sizeof(text) - o,
		    "[relay r%u]\nupstream h:1\nlisten 127.0.0.%u:27960\nprbe yes\n", i, i + 1);
	assert_int_equal(run(&c, &e, text, NOARGS), 0);
	assert_int_equal(c.prbe.nports, 7);
}

static void test_config_control_keys_default_off_with_documented_defaults(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1")), 0);
	assert_string_equal(c.control_url, "");
	assert_string_equal(c.control_bootstrap_file, "");
	assert_string_equal(c.state_dir, "/var/lib/etrelay");
	assert_int_equal(c.control_interval_ms, 30000);
	assert_int_equal(c.control_timeout_ms, 10000);
	assert_int_equal(c.control_backoff_min_ms, 60000);
	assert_int_equal(c.control_backoff_max_ms, 30 * 60000);
	assert_int_equal(c.control_cert_retry_min_ms, 60000);
	assert_int_equal(c.control_cert_retry_max_ms, 30 * 60000);
	assert_int_equal(c.control_cert_not_offered_ms, 60 * 60000);
}

static void test_config_control_keys_from_the_file_and_the_command_line(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e,
			     "control-url https://cp.example.com/api/\n"
			     "control-bootstrap-token-file /etc/etrelay/bootstrap\n"
			     "state-directory /srv/etrelay\n"
			     "control-interval 500ms\ncontrol-timeout 2s\n"
			     "control-backoff-min 200ms\ncontrol-backoff-max 1s\n"
			     "control-cert-retry-min 300ms\ncontrol-cert-retry-max 2s\n"
			     "control-cert-not-offered 5m\n"
			     "[relay a]\nupstream h:1\n",
			     ARGV("--control-interval", "1s", "--state-directory", "/tmp/st",
				  "--control-cert-retry-max", "3s")),
			 0);
	/* the trailing '/' goes: the service path brings its own */
	assert_string_equal(c.control_url, "https://cp.example.com/api");
	assert_string_equal(c.control_bootstrap_file, "/etc/etrelay/bootstrap");
	assert_string_equal(c.state_dir, "/tmp/st");
	assert_int_equal(c.control_interval_ms, 1000);
	assert_int_equal(c.control_timeout_ms, 2000);
	assert_int_equal(c.control_backoff_min_ms, 200);
	assert_int_equal(c.control_backoff_max_ms, 1000);
	assert_int_equal(c.control_cert_retry_min_ms, 300);
	assert_int_equal(c.control_cert_retry_max_ms, 3000);
	assert_int_equal(c.control_cert_not_offered_ms, 5 * 60000);
}

static void test_config_control_bad_values_are_errors_naming_the_key(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(args(&c, &e, ARGV("--control-url", "ftp://x")), -1);
	assert_non_null(strstr(e.text, "--control-url: invalid value 'ftp://x'"));
	assert_int_equal(args(&c, &e, ARGV("--control-interval", "0")), -1);
	assert_non_null(strstr(e.text, "--control-interval"));
	conf_defaults(&c, &etr_conf_schema);
	memset(&e, 0, sizeof(e));
	assert_int_equal(load(&c, &e,
			      "control-url http://a b\ncontrol-timeout soon\n"
			      "control-backoff-min -1\n[relay a]\nupstream h:1\n"
			      "control-interval 1s\n"),
			 -1);
	assert_errors(&e, 4);
	assert_non_null(strstr(e.text, "t.conf:1: control-url: invalid value"));
	assert_non_null(strstr(e.text, "t.conf:2: control-timeout: invalid value 'soon'"));
	assert_non_null(strstr(e.text, "t.conf:6: control-interval: a process-wide key"));
}

static void test_config_control_max_answer_and_allow_upstream(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "h:1")), 0);
	assert_int_equal(c.control_max_answer, 2u << 20);
	assert_int_equal(c.ncontrol_allow, 0);
	/* the command line's list replaces the file's */
	assert_int_equal(run(&c, &e,
			     "control-max-answer 512k\n"
			     "control-allow-upstream 10.8.0.0/16\ncontrol-allow-upstream fd00::/8\n"
			     "[relay a]\nupstream h:1\n",
			     ARGV("--control-allow-upstream", "127.0.0.1")),
			 0);
	assert_int_equal(c.control_max_answer, 512u << 10);
	assert_int_equal(c.ncontrol_allow, 1);
	assert_int_equal(c.control_allow[0].bits, 32);
	assert_int_equal(run(&c, &e,
			     "control-allow-upstream 10.8.0.0/16\ncontrol-allow-upstream fd00::/8\n"
			     "[relay a]\nupstream h:1\n",
			     NOARGS),
			 0);
	assert_int_equal(c.ncontrol_allow, 2);
	assert_int_equal(c.control_allow[1].line, 2);
	/* out of range, not a block, host bits: errors naming the line */
	conf_defaults(&c, &etr_conf_schema);
	memset(&e, 0, sizeof(e));
	assert_int_equal(
	    load(&c, &e,
		 "control-max-answer 1k\ncontrol-max-answer 65M\n"
		 "control-allow-upstream 10.8.0.1/16\ncontrol-allow-upstream cp.lan\n"),
	    -1);
	assert_errors(&e, 4);
	assert_non_null(strstr(e.text, "t.conf:1: control-max-answer: invalid value '1k'"));
	assert_non_null(strstr(e.text, "t.conf:2: control-max-answer: invalid value '65M'"));
	assert_non_null(strstr(e.text, "did you mean 10.8.0.0/16?"));
	assert_non_null(strstr(e.text, "t.conf:4: control-allow-upstream: invalid value"));
	assert_int_equal(args(&c, &e, ARGV("--control-max-answer", "2x")), -1);
}

static void test_config_control_url_without_a_host_is_an_error_naming_the_line(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	conf_defaults(&c, &etr_conf_schema);
	memset(&e, 0, sizeof(e));
	assert_int_equal(load(&c, &e, "# pad\ncontrol-url http://\n"), -1);
	assert_err_names(&e, "t.conf:2: control-url", "http://");
	conf_defaults(&c, &etr_conf_schema);
	memset(&e, 0, sizeof(e));
	assert_int_equal(load(&c, &e, "control-url https://[::1\n"), -1);
	assert_err_names(&e, "t.conf:1: control-url", "https://[::1");
	assert_int_equal(args(&c, &e, ARGV("--control-url", "https://user:pw@/api")), -1);
	assert_errors(&e, 1);
	assert_int_equal(args(&c, &e, ARGV("--control-url", "https://user:pw@[::1]:8443")), 0);
}

static void test_config_errors_of_two_keys_name_the_file_and_line(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	conf_defaults(&c, &etr_conf_schema);
	memset(&e, 0, sizeof(e));
	assert_int_equal(load(&c, &e,
			      "prbe-listen 127.0.0.1:28970\nprbe-listen 127.0.0.1:28970\n"
			      "control-backoff-min 10m\ncontrol-backoff-max 1m\n"
			      "sni-route a.example.org=127.0.0.1:1\n"
			      "[relay a]\nupstream h:1\n"),
			 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	assert_errors(&e, 3);
	assert_err_line(&e, "t.conf:2: prbe-listen 127.0.0.1:28970", "given twice",
			"first on line 1");
	assert_err_line(&e, "t.conf:3: control-backoff-min", "above control-backoff-max", NULL);
	assert_err_line(&e, "t.conf:5: sni-route a.example.org", "no sni-listen", NULL);
}

static void test_config_state_directory_must_be_absolute(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	conf_defaults(&c, &etr_conf_schema);
	memset(&e, 0, sizeof(e));
	assert_int_equal(load(&c, &e, "# pad\nstate-directory relative/dir\n"), -1);
	assert_err_names(&e, "t.conf:2: state-directory", "absolute");
	assert_int_equal(args(&c, &e, ARGV("--state-directory", "st")), -1);
	assert_err_names(&e, "--state-directory", "absolute");
	assert_int_equal(args(&c, &e, ARGV("--state-directory", "/srv/st")), 0);
}

static void test_config_control_timeout_above_interval_is_a_warning(void **state)
{
	struct etr_conf c;
	struct conf_errors e, w;

	(void)state;
	memset(&w, 0, sizeof(w));
	assert_int_equal(run(&c, &e,
			     "control-url https://cp.example\ncontrol-timeout 1h\n"
			     "[relay a]\nupstream h:1\n",
			     NOARGS),
			 0);
	assert_int_equal(conf_control_warnings(&c, &w), 1);
	assert_err_line(&w, "t.conf:2: warning: control-timeout 3600000 ms", "control-interval",
			NULL);
	/* equal is fine; without control-url nothing is said */
	memset(&w, 0, sizeof(w));
	c.control_timeout_ms = c.control_interval_ms;
	assert_int_equal(conf_control_warnings(&c, &w), 0);
	c.control_timeout_ms = c.control_interval_ms + 1;
	c.control_url[0] = '\0';
	assert_int_equal(conf_control_warnings(&c, &w), 0);
}

static void test_config_control_allow_upstream_of_everything_is_a_warning(void **state)
{
	struct etr_conf c;
	struct conf_errors e, w;

	(void)state;
	memset(&w, 0, sizeof(w));
	assert_int_equal(run(&c, &e,
			     "control-url https://cp.example\ncontrol-allow-upstream 10.8.0.0/16\n"
			     "control-allow-upstream ::/0\n[relay a]\nupstream h:1\n",
			     NOARGS),
			 0);
	assert_int_equal(conf_control_warnings(&c, &w), 1);
	assert_err_line(&w, "t.conf:3: warning: control-allow-upstream ::/0", "metadata", NULL);
}

static void test_config_missing_bootstrap_token_file_is_a_warning_unless_enrolled(void **state)
{
	char dir[] = "/tmp/etrelay-test-cfg-XXXXXX", cred[64];
	struct etr_conf c;
	struct conf_errors e, w;
	FILE *f;

	(void)state;
	unsetenv("ETRELAY_CONTROL_TOKEN");
	unsetenv("ETRELAY_CONTROL_TOKEN_FILE");
	assert_non_null(mkdtemp(dir));
	assert_int_equal(run(&c, &e,
			     "control-url https://cp.example\n"
			     "control-bootstrap-token-file /nonexistent/boot\n"
			     "[relay a]\nupstream h:1\n",
			     ARGV("--state-directory", dir)),
			 0);
	memset(&w, 0, sizeof(w));
	assert_int_equal(conf_control_warnings(&c, &w), 1);
	assert_err_line(&w, "t.conf:2: warning: control-bootstrap-token-file /nonexistent/boot",
			"No such file", "control-credential.json");
	/* enrolled already: the token is not needed */
	snprintf(cred, sizeof(cred), "%s/control-credential.json", dir);
	assert_non_null(f = fopen(cred, "w"));
	fclose(f);
	memset(&w, 0, sizeof(w));
	assert_int_equal(conf_control_warnings(&c, &w), 0);
	unlink(cred);
	/* nor with the token in the environment */
	setenv("ETRELAY_CONTROL_TOKEN_FILE", "/x", 1);
	assert_int_equal(conf_control_warnings(&c, &w), 0);
	unsetenv("ETRELAY_CONTROL_TOKEN_FILE");
	rmdir(dir);
}

static void test_config_control_backoff_min_above_max_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--control-backoff-min", "2m",
				  "--control-backoff-max", "1m")),
			 -1);
	assert_errors(&e, 1);
	assert_non_null(strstr(e.text, "control-backoff-min 120000 ms is above control-backoff-max "
				       "60000 ms"));
	/* The tunnel certificate's waits alike, at the line of the file. */
	conf_defaults(&c, &etr_conf_schema);
	memset(&e, 0, sizeof(e));
	assert_int_equal(load(&c, &e,
			      "control-cert-retry-max 1m\ncontrol-cert-retry-min 2m\n"
			      "control-cert-not-offered 0\n[relay a]\nupstream h:1\n"),
			 -1);
	assert_err_line(&e, "t.conf:3: control-cert-not-offered", "invalid value '0'", NULL);
	conf_defaults(&c, &etr_conf_schema);
	memset(&e, 0, sizeof(e));
	assert_int_equal(load(&c, &e,
			      "control-cert-retry-max 1m\ncontrol-cert-retry-min 2m\n"
			      "[relay a]\nupstream h:1\n"),
			 0);
	assert_int_equal(conf_finish(&c, &e), -1);
	assert_err_line(&e, "t.conf:2: control-cert-retry-min",
			"120000 ms is above control-cert-retry-max 60000 ms", NULL);
}

/* attack13 F8: nor does one whose upstream is this process's echo port or
 * TURN listener. */
static void test_config_relay_upstream_that_is_another_udp_listener_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e,
			     "listen 127.0.0.1:27960\nupstream 127.0.0.1:27990\n"
			     "prbe-listen 0.0.0.0:27990\n",
			     NOARGS),
			 -1);
	assert_err_line(&e,
			PATH ":2: upstream 127.0.0.1:27990 (relay default) is this process's PRBE "
			     "echo port 0.0.0.0:27990, not a game server",
			NULL, NULL);
	assert_int_equal(run(&c, &e,
			     "listen 127.0.0.1:27960\nupstream 127.0.0.1:3478\n"
			     "[turn p2p]\nlisten 127.0.0.1:3478\n",
			     NOARGS),
			 -1);
	assert_err_line(&e,
			PATH ":2: upstream 127.0.0.1:3478 (relay default) is this process's TURN "
			     "listener p2p 127.0.0.1:3478, not a game server",
			NULL, NULL);
	/* Another port of the same host is a game server as far as we know. */
	assert_int_equal(run(&c, &e,
			     "listen 127.0.0.1:27960\nupstream 127.0.0.1:3479\n"
			     "[turn p2p]\nlisten 127.0.0.1:3478\n",
			     NOARGS),
			 0);
}

/* attacker10 F4: a relay whose upstream is itself answers nobody. */
static void test_config_relay_upstream_that_is_its_own_listen_is_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;
	union etr_sockaddr local, up;

	(void)state;
	/* its own address, and loopback or the wildcard on a wildcard's port */
	assert_int_equal(
	    cli(&c, &e, ARGV("--upstream", "127.0.0.1:27960", "--listen", "127.0.0.1:27960")), -1);
	assert_errors(&e, 1);
	assert_err_line(&e,
			"etrelay: command line: upstream 127.0.0.1:27960 (relay default) is "
			"its own listen address 127.0.0.1:27960: a loop",
			NULL, NULL);
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "127.0.0.1:27960")), -1);
	assert_non_null(strstr(e.text, "is its own listen address 0.0.0.0:27960: a loop"));
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "[::1]:27961", "--listen", "[::]:27961")),
			 -1);
	assert_non_null(strstr(e.text, "upstream [::1]:27961 (relay default) is its own"));
	assert_int_equal(
	    cli(&c, &e, ARGV("--upstream", "0.0.0.0:27962", "--listen", "127.0.0.1:27962")), -1);
	assert_int_equal(run(&c, &e,
			     "[relay a]\nlisten 0.0.0.0:27970\nupstream 127.0.0.2:27970\n"
			     "[relay b]\nlisten 127.0.0.1:27971\nupstream 127.0.0.1:27971\n",
			     NOARGS),
			 -1);
	assert_errors(&e, 2);
	assert_err_line(&e, PATH ":3: upstream 127.0.0.2:27970 (relay a) is its own listen", NULL,
			NULL);
	assert_err_line(&e, PATH ":6: upstream 127.0.0.1:27971 (relay b) is its own listen", NULL,
			NULL);

	/* not loops: another port, another loopback address than a specific
	 * listen, a name (checked once resolved) */
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "127.0.0.1:27961")), 0);
	assert_int_equal(
	    cli(&c, &e, ARGV("--upstream", "127.0.0.2:27960", "--listen", "127.0.0.1:27960")), 0);
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "gs.example:27960")), 0);

	/* the host's other addresses (main passes net_local_addrs), and a
	 * resolved name */
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "192.0.2.5:27960")), 0);
	assert_int_equal(addr_parse_numeric("192.0.2.5:1", &local), 0);
	assert_int_equal(conf_relay_loops(&c, NULL, &local, 1, &e), -1);
	assert_non_null(strstr(e.text, "upstream 192.0.2.5:27960 (relay default) is its own"));
	assert_int_equal(addr_parse_numeric("192.0.2.6:1", &local), 0);
	memset(&e, 0, sizeof(e));
	assert_int_equal(conf_relay_loops(&c, NULL, &local, 1, &e), 0);
	assert_int_equal(cli(&c, &e, ARGV("--upstream", "gs.example:27960")), 0);
	assert_int_equal(addr_parse_numeric("127.0.0.1:27960", &up), 0);
	assert_int_equal(conf_relay_loops(&c, &up, NULL, 0, &e), -1);
	assert_non_null(strstr(e.text, "upstream gs.example:27960 (relay default) is its own"));
	assert_int_equal(addr_parse_numeric("127.0.0.1:27961", &up), 0);
	memset(&e, 0, sizeof(e));
	assert_int_equal(conf_relay_loops(&c, &up, NULL, 0, &e), 0);
}

/* Attack round 11: two relays whose upstreams are each other's ports
 * passed -t and a start; a chain that ends at a game server is fine. */
static void test_config_relays_upstreams_in_a_cycle_are_an_error(void **state)
{
	struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e,
			     "[relay a]\nlisten 127.0.0.1:27960\nupstream 127.0.0.1:27961\n"
			     "[relay b]\nlisten 127.0.0.1:27961\nupstream 127.0.0.1:27962\n"
			     "[relay c]\nlisten 127.0.0.1:27962\nupstream 127.0.0.1:27999\n",
			     NOARGS),
			 0);
	memset(&e, 0, sizeof(e));
	assert_int_equal(conf_relay_loops(&c, NULL, NULL, 0, &e), 0);
	assert_int_equal(run(&c, &e,
			     "[relay a]\nlisten 127.0.0.1:27960\nupstream 127.0.0.1:27961\n"
			     "[relay b]\nlisten 127.0.0.1:27961\nupstream 127.0.0.1:27962\n"
			     "[relay c]\nlisten 127.0.0.1:27962\nupstream 127.0.0.1:27960\n",
			     NOARGS),
			 0);
	memset(&e, 0, sizeof(e));
	assert_int_equal(conf_relay_loops(&c, NULL, NULL, 0, &e), -1);
	assert_errors(&e, 3);
	assert_non_null(strstr(e.text, "upstream 127.0.0.1:27961 (relay a) leads through relay c "
				       "back to it: a loop"));
}

/* Two relays on one port, one of them on a wildcard: a start cannot bind
 * both, so the check refuses it (attack13 F3). Different ports are fine. */
static void test_config_relays_on_a_wildcard_and_an_address_of_one_port_clash(void **state)
{
	static const char *const pairs[][2] = {{"[::]:27960", "0.0.0.0:27960"},
					       {"0.0.0.0:27960", "127.0.0.1:27960"},
					       {"127.0.0.1:27960", "[::]:27960"}};
	struct etr_conf c;
	struct conf_errors e;
	char text[256];

	(void)state;
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		snprintf(text, sizeof(text),
			 "[relay a]\nupstream h:1\nlisten %s\n[relay b]\nupstream h:2\nlisten %s\n",
			 pairs[i][0], pairs[i][1]);
		conf_defaults(&c, &etr_conf_schema);
		memset(&e, 0, sizeof(e));
		assert_int_equal(run(&c, &e, text, NOARGS), -1);
		assert_non_null(strstr(e.text, "already used by relay a"));
	}
	assert_int_equal(run(&c, &e,
			     "[relay a]\nupstream h:1\nlisten 0.0.0.0:27960\n"
			     "[relay b]\nupstream h:2\nlisten 0.0.0.0:27961\n",
			     NOARGS),
			 0);
}

static void test_config_tunnel_section_defaults_and_errors_name_their_line(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e, "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\n", NOARGS), 0);
	assert_int_equal(c.nrelays, 0);
	assert_int_equal(c.ntunnel, 1);
	assert_string_equal(c.tunnel[0].ifname, "wg0");
	assert_int_equal(c.tunnel[0].listen_port, 51820);
	assert_int_equal(c.tunnel[0].address.bits, 24);
	assert_false(c.tunnel[0].create);
	assert_int_equal(run(&c, &e,
			     "[tunnel]\nlisten-port 0\naddress 10.8.0.1\ncreate maybe\n"
			     "[tunnel]\ninterface wg1\n",
			     NOARGS),
			 -1);
	assert_non_null(strstr(e.text, "t.conf:2: listen-port: invalid value '0'"));
	assert_non_null(strstr(e.text, "t.conf:3: address: invalid value '10.8.0.1'"));
	assert_non_null(strstr(e.text, "t.conf:4: create: invalid value 'maybe'"));
	assert_non_null(strstr(e.text, "t.conf:5: [tunnel] already given at line 1"));
	assert_non_null(strstr(e.text, "t.conf:1: tunnel: interface: missing"));
	/* Given, wrong and said so at its line: not "missing" besides. */
	assert_null(strstr(e.text, "address: missing"));
	/* WireGuard's port on a game relay's. */
	assert_int_equal(run(&c, &e,
			     "upstream 127.0.0.1:27960\nlisten 0.0.0.0:51820\n"
			     "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\n",
			     NOARGS),
			 -1);
	assert_non_null(
	    strstr(e.text, "t.conf:3: tunnel: listen-port 51820 is the port of game relay"));
	/* attack16 L3: a network's own address and its broadcast are no
	 * host's; a /31's two addresses are. */
	assert_int_equal(run(&c, &e, "[tunnel]\ninterface wg0\naddress 10.8.0.0/24\n", NOARGS), -1);
	assert_non_null(strstr(e.text, "t.conf:3: address: invalid value '10.8.0.0/24'"));
	assert_int_equal(run(&c, &e, "[tunnel]\ninterface wg0\naddress 10.8.0.255/24\n", NOARGS),
			 -1);
	assert_non_null(strstr(e.text, "not the network's own address or its broadcast"));
	assert_int_equal(run(&c, &e, "[tunnel]\ninterface wg0\naddress 10.8.0.0/31\n", NOARGS), 0);
	assert_int_equal(run(&c, &e, "[tunnel]\ninterface wg0\naddress 10.8.3.255/22\n", NOARGS),
			 -1);
	assert_int_equal(run(&c, &e, "[tunnel]\ninterface wg0\naddress 10.8.1.255/22\n", NOARGS),
			 0);
}

/* attack15 F5: a key of [tunnel] given twice takes its last value (as
 * every key that does not add up) and a later error names that key's
 * line; a wrong top-level wg-interface is one error at its line, not
 * "missing" besides; session-ports holding the WireGuard port name the
 * port's line. */
static void test_config_tunnel_errors_name_the_line_of_their_key(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(run(&c, &e,
			     "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\ninterface wg1\n"
			     "listen-port 51821\n",
			     NOARGS),
			 0);
	assert_string_equal(c.tunnel[0].ifname, "wg1");
	assert_int_equal(c.tunnel[0].ifname_line, 4);
	assert_int_equal(c.tunnel[0].port_line, 5);
	assert_int_equal(run(&c, &e, "wg-interface = x\nwg-address 10.8.0.1/24\n", NOARGS), -1);
	assert_errors(&e, 1);
	assert_non_null(strstr(e.text, "t.conf:1: wg-interface: invalid value '= x' (expected an "
				       "interface name such as wg0: write the key, a space and the "
				       "value, without '=')"));
	assert_int_equal(run(&c, &e, "[tunnel]\ninterface wg0\naddress = 10.8.0.1/24\n", NOARGS),
			 -1);
	assert_errors(&e, 1);
	assert_non_null(strstr(e.text, "t.conf:3: address: invalid value '= 10.8.0.1/24'"));
	/* session-ports over the WireGuard port: both lines. */
	assert_int_equal(run(&c, &e,
			     "upstream 10.9.0.2:27960\nsession-ports 50000-54999\n"
			     "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\n",
			     NOARGS),
			 -1);
	assert_errors(&e, 1);
	assert_non_null(strstr(e.text, "t.conf:2: relay default: session-ports 50000-54999 hold "
				       "port 51820 of the WireGuard port 0.0.0.0:51820 (line 3)"));
	assert_int_equal(run(&c, &e,
			     "upstream 10.9.0.2:27960\nsession-ports 50000-54999\n"
			     "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\nlisten-port 50001\n",
			     NOARGS),
			 -1);
	assert_non_null(strstr(e.text, "port 50001 of the WireGuard port 0.0.0.0:50001 (line 6)"));
	/* WireGuard's port on a game relay's: at listen-port's line. */
	assert_int_equal(run(&c, &e,
			     "upstream 127.0.0.1:27960\nlisten 0.0.0.0:51821\n"
			     "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\nlisten-port 51821\n",
			     NOARGS),
			 -1);
	assert_non_null(
	    strstr(e.text, "t.conf:6: tunnel: listen-port 51821 is the port of game relay"));
}

/* Rung 3's limits: [tunnel] keys whose defaults are the worker's
 * constants; a value out of its range is refused at its line, with the
 * range (-t and a start parse alike); the quick-start tunnel has no
 * --wg- option for them. */
static void test_config_tunnel_rung3_limits_default_and_refuse_out_of_range(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;
	const struct tun_r3_limits *l = &c.tunnel[0].r3;

	(void)state;
	assert_int_equal(run(&c, &e, "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\n", NOARGS), 0);
	assert_int_equal(l->conns, TUN_R3_CONNS);
	assert_int_equal(l->conns, 256);
	assert_int_equal(l->per_source, 8);
	assert_int_equal(l->per_token, 4);
	assert_int_equal(l->max_msg, 2048);
	assert_int_equal(l->backlog, 65536);
	assert_int_equal(l->handshake_ms, 10000);
	assert_int_equal(l->idle_ms, 180000);
	assert_int_equal(l->hs_rate, 200);
	assert_int_equal(l->hs_burst, 100);
	assert_int_equal(l->hs_ip_rate, 20);
	assert_int_equal(l->hs_ip_burst, 40);
	assert_int_equal(run(&c, &e,
			     "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\n"
			     "rung3-handshake-rate 50\nrung3-handshake-burst 5\n"
			     "rung3-handshake-ip-rate 2\nrung3-handshake-ip-burst 3\n",
			     NOARGS),
			 0);
	assert_int_equal(l->hs_rate, 50);
	assert_int_equal(l->hs_burst, 5);
	assert_int_equal(l->hs_ip_rate, 2);
	assert_int_equal(l->hs_ip_burst, 3);
	assert_int_equal(run(&c, &e,
			     "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\n"
			     "rung3-handshake-rate 0\nrung3-handshake-ip-burst 1000001\n",
			     NOARGS),
			 -1);
	assert_errors(&e, 2);
	assert_err_line(&e, "t.conf:4: rung3-handshake-rate: invalid value '0'", "1 to 1000000",
			NULL);
	assert_err_line(&e, "t.conf:5: rung3-handshake-ip-burst: invalid value '1000001'",
			"1 to 1000000", NULL);
	assert_int_equal(run(&c, &e,
			     "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\n"
			     "rung3-max-connections 4096\nrung3-max-per-source 1\n"
			     "rung3-max-per-token 2\nrung3-max-message 64k\n"
			     "rung3-handshake-timeout 2s\nrung3-idle-timeout 1h\n",
			     NOARGS),
			 -1);
	/* 64k is 65536, one past WebSocket's 16-bit length. */
	assert_errors(&e, 1);
	assert_err_line(&e, "t.conf:7: rung3-max-message: invalid value '64k'", "1312 to 65535",
			NULL);
	assert_int_equal(run(&c, &e,
			     "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\n"
			     "rung3-max-connections 4096\nrung3-max-per-source 1\n"
			     "rung3-max-per-token 2\nrung3-max-message 1312\n"
			     "rung3-handshake-timeout 2s\nrung3-idle-timeout 1h\n"
			     "rung3-max-backlog 8k\n",
			     NOARGS),
			 0);
	assert_int_equal(l->backlog, 8192);
	assert_int_equal(l->conns, 4096);
	assert_int_equal(l->per_source, 1);
	assert_int_equal(l->per_token, 2);
	assert_int_equal(l->max_msg, 1312);
	assert_int_equal(l->handshake_ms, 2000);
	assert_int_equal(l->idle_ms, 3600000);
	assert_int_equal(run(&c, &e,
			     "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\n"
			     "rung3-max-connections 0\nrung3-max-per-source 4097\n"
			     "rung3-max-per-token x\nrung3-max-message 1311\n"
			     "rung3-handshake-timeout 500ms\nrung3-idle-timeout 2d\n"
			     "rung3-idle-timeout 5s\nrung3-handshake-timeout 6m\n"
			     "rung3-max-backlog 4095\nrung3-max-backlog 65537\n",
			     NOARGS),
			 -1);
	assert_errors(&e, 10);
	assert_err_line(&e, "t.conf:12: rung3-max-backlog: invalid value '4095'", "4k to 64k",
			NULL);
	assert_err_line(&e, "t.conf:13: rung3-max-backlog: invalid value '65537'", "4k to 64k",
			NULL);
	assert_err_line(&e, "t.conf:4: rung3-max-connections: invalid value '0'", "1 to 4096",
			NULL);
	assert_err_line(&e, "t.conf:5: rung3-max-per-source: invalid value '4097'", "1 to 4096",
			NULL);
	assert_err_line(&e, "t.conf:6: rung3-max-per-token: invalid value 'x'", "1 to 4096", NULL);
	assert_err_line(&e, "t.conf:7: rung3-max-message: invalid value '1311'", "1312 to 65535",
			NULL);
	assert_err_line(&e, "t.conf:8: rung3-handshake-timeout: invalid value '500ms'", "1s to 5m",
			NULL);
	assert_err_line(&e, "t.conf:9: rung3-idle-timeout: invalid value '2d'", "10s to 24h", NULL);
	assert_err_line(&e, "t.conf:10: rung3-idle-timeout: invalid value '5s'", "10s to 24h",
			NULL);
	assert_err_line(&e, "t.conf:11: rung3-handshake-timeout: invalid value '6m'", "1s to 5m",
			NULL);
	/* The file's only: no quick-start option, and no top-level key. */
	assert_int_equal(cli(&c, &e,
			     ARGV("--wg-interface", "wg0", "--wg-address", "10.8.0.1/24",
				  "--wg-rung3-max-connections", "8")),
			 -1);
	assert_int_equal(run(&c, &e,
			     "wg-interface wg0\nwg-address 10.8.0.1/24\nrung3-max-connections 8\n",
			     NOARGS),
			 -1);
	assert_non_null(strstr(e.text, "t.conf:3: "));
}

/* --wg-KEY is KEY of [tunnel] for a quick start: the same checks, named
 * by the option, and checked against the other listeners as a file's
 * [tunnel] is. */
static void test_config_wg_options_make_the_quick_start_tunnel(void **state)
{
	static struct etr_conf c;
	struct conf_errors e;

	(void)state;
	assert_int_equal(cli(&c, &e,
			     ARGV("--wg-interface", "wg0", "--wg-address", "10.8.0.1/24",
				  "--wg-listen-port", "51821", "--wg-create", "yes")),
			 0);
	assert_int_equal(c.nrelays, 0);
	assert_true(c.cli_listener);
	assert_int_equal(c.ntunnel, 1);
	assert_string_equal(c.tunnel[0].ifname, "wg0");
	assert_int_equal(c.tunnel[0].listen_port, 51821);
	assert_int_equal(c.tunnel[0].address.bits, 24);
	assert_true(c.tunnel[0].create);
	assert_int_equal(c.tunnel[0].line, 0);
	/* Defaults as the section's. */
	assert_int_equal(cli(&c, &e, ARGV("--wg-interface", "wg1", "--wg-address", "fd00::1/64")),
			 0);
	assert_int_equal(c.tunnel[0].listen_port, 51820);
	assert_false(c.tunnel[0].create);
	/* A bad value is refused at the option. */
	assert_int_equal(cli(&c, &e, ARGV("--wg-interface", "a/b")), -1);
	assert_err_names(&e, "etrelay: --wg-interface: invalid value 'a/b'", "interface name");
	assert_int_equal(cli(&c, &e, ARGV("--wg-listen-port", "0")), -1);
	assert_err_names(&e, "etrelay: --wg-listen-port: invalid value '0'", NULL);
	assert_int_equal(cli(&c, &e, ARGV("--wg-address", "10.8.0.1")), -1);
	assert_err_names(&e, "etrelay: --wg-address: invalid value '10.8.0.1'", "prefix");
	/* No address a host cannot take as its own (attack15: loopback took
	 * routes from lo, multicast and broadcast were set as unicast). */
	{
		static char bad[][24] = {
		    "127.0.0.1/8", "224.0.0.1/24", "255.255.255.255/32",  "0.0.0.0/8", "::1/128",
		    "ff02::1/64",  "::/64",	   "::ffff:127.0.0.1/120"};
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			assert_int_equal(
			    cli(&c, &e, ARGV("--wg-interface", "wg0", "--wg-address", bad[i])), -1);
			assert_err_names(&e, "etrelay: --wg-address: invalid value", "loopback");
		}
		assert_int_equal(
		    run(&c, &e, "[tunnel]\ninterface wg0\naddress 127.0.0.2/8\n", NOARGS), -1);
		assert_err_line(&e, "t.conf:3: address: invalid value '127.0.0.2/8'", "multicast",
				NULL);
	}
	assert_int_equal(cli(&c, &e, ARGV("--wg-create", "maybe")), -1);
	assert_err_names(&e, "etrelay: --wg-create: invalid value 'maybe'", NULL);
	/* What is missing, by the option's name. */
	assert_int_equal(cli(&c, &e, ARGV("--wg-interface", "wg0")), -1);
	assert_err_names(&e, "etrelay: tunnel: wg-address: missing", NULL);
	/* (--wg-interface makes the process one without a relay; without
	 * it the relay's upstream is missing too.) */
	assert_int_equal(cli(&c, &e, ARGV("--wg-address", "10.8.0.1/24")), -1);
	assert_non_null(strstr(e.text, "etrelay: tunnel: wg-interface: missing"));
	/* The same keys at the file's top level. */
	assert_int_equal(run(&c, &e, "wg-interface wg0\nwg-address 10.8.0.1/24\n", NOARGS), 0);
	assert_int_equal(c.ntunnel, 1);
	assert_int_equal(c.nrelays, 0);
	/* Beside a file's [tunnel]: one interface per process. */
	assert_int_equal(run(&c, &e, "[tunnel]\ninterface wg0\naddress 10.8.0.1/24\n",
			     ARGV("--wg-listen-port", "51821")),
			 -1);
	assert_err_names(&e, "etrelay: wg-*: the file has a [tunnel] already (t.conf:1)", NULL);
	/* Its port against the other listeners, as a file's. */
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--listen", "0.0.0.0:51820",
				  "--wg-interface", "wg0", "--wg-address", "10.8.0.1/24")),
			 -1);
	assert_err_names(&e, "etrelay: tunnel: wg-listen-port 51820 is the port of game relay",
			 NULL);
	assert_int_equal(cli(&c, &e,
			     ARGV("--upstream", "h:1", "--session-ports", "40000-40009",
				  "--max-sessions", "10", "--wg-interface", "wg0", "--wg-address",
				  "10.8.0.1/24", "--wg-listen-port", "40003")),
			 -1);
	assert_err_names(&e, "session-ports 40000-40009", "the WireGuard port 0.0.0.0:40003");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config_relays_on_a_wildcard_and_an_address_of_one_port_clash),
	    cmocka_unit_test(test_config_defaults_listen_on_any_ipv4_port_27960),
	    cmocka_unit_test(test_config_defaults_leave_the_masters_to_the_game),
	    cmocka_unit_test(test_config_default_masters_follow_the_game),
	    cmocka_unit_test(test_config_a_master_of_another_game_is_a_warning),
	    cmocka_unit_test(test_config_defaults_are_et_with_documented_values_and_no_relay),
	    cmocka_unit_test(test_config_upstream_alone_makes_one_default_relay_with_defaults),
	    cmocka_unit_test(test_config_upstream_takes_hostname_and_ipv6),
	    cmocka_unit_test(test_config_schema_names_each_key_once),
	    cmocka_unit_test(test_config_missing_upstream_is_an_error_from_conf_finish),
	    cmocka_unit_test(test_config_only_upstream_marks_the_command_line_as_naming_a_server),
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
	    cmocka_unit_test(test_config_tag_too_long_or_with_spaces_is_an_error),
	    cmocka_unit_test(test_config_duration_flags_are_parsed),
	    cmocka_unit_test(test_config_bad_heartbeat_interval_names_flag_and_value),
	    cmocka_unit_test(test_config_bad_session_timeout_names_flag_and_value),
	    cmocka_unit_test(test_config_bad_probe_timeout_names_flag_and_value),
	    cmocka_unit_test(test_config_max_sessions_is_parsed),
	    cmocka_unit_test(test_config_bad_max_sessions_names_flag_and_value),
	    cmocka_unit_test(test_config_session_ports_flag_sets_the_range),
	    cmocka_unit_test(test_config_bad_session_ports_names_flag_and_value),
	    cmocka_unit_test(test_config_max_sessions_above_the_session_ports_range_is_an_error),
	    cmocka_unit_test(test_config_backend_values_are_parsed),
	    cmocka_unit_test(test_config_unknown_backend_names_flag_and_value),
	    cmocka_unit_test(test_config_workers_take_a_count_or_auto),
	    cmocka_unit_test(test_config_workers_out_of_range_are_refused),
	    cmocka_unit_test(test_config_debug_flag_is_set),
	    cmocka_unit_test(test_config_ops_flags_set_the_ops_plane),
	    cmocka_unit_test(test_config_public_ops_listen_is_refused_where_it_was_set),
	    cmocka_unit_test(test_config_bad_ops_values_name_flag_and_value),
	    cmocka_unit_test(test_config_help_does_not_need_upstream),
	    cmocka_unit_test(test_config_version_does_not_need_upstream),
	    cmocka_unit_test(test_config_config_option_sets_the_path),
	    cmocka_unit_test(test_config_test_option_sets_test),
	    cmocka_unit_test(test_config_probe_without_test_is_an_error),
	    cmocka_unit_test(test_config_abuse_keys_have_their_defaults),
	    cmocka_unit_test(test_config_session_opening_and_master_limits),
	    cmocka_unit_test(test_config_abuse_keys_from_the_file_and_the_command_line),
	    cmocka_unit_test(test_config_xdp_interfaces_from_the_file_or_the_command_line),
	    cmocka_unit_test(test_config_server_query_burst_must_leave_browsers_a_share),
	    cmocka_unit_test(test_config_unknown_option_error_names_it),
	    cmocka_unit_test(test_config_unknown_short_option_in_a_cluster_error_names_it),
	    cmocka_unit_test(test_config_value_given_to_a_flag_error_names_the_flag),
	    cmocka_unit_test(test_config_missing_value_error_names_the_flag),
	    cmocka_unit_test(test_config_stray_argument_is_an_error_naming_it),
	    cmocka_unit_test(test_config_parses_again_after_an_error),
	    cmocka_unit_test(test_config_usage_mentions_the_options),
	    cmocka_unit_test(test_config_duration_bare_number_is_seconds),
	    cmocka_unit_test(test_config_duration_accepts_every_unit),
	    cmocka_unit_test(test_config_duration_rejects_zero_unless_allowed),
	    cmocka_unit_test(test_config_duration_rejects_negative_and_junk),
	    cmocka_unit_test(test_config_duration_rejects_overflow),
	    cmocka_unit_test(test_config_every_file_key_sets_what_its_flag_sets),
	    cmocka_unit_test(test_config_log_time_is_auto_by_default_and_takes_yes_no_auto),
	    cmocka_unit_test(test_config_ipv6_master_with_ipv4_listener_is_refused_naming_the_line),
	    cmocka_unit_test(test_config_ipv4_master_needs_an_ipv6_listener_on_any_address),
	    cmocka_unit_test(test_config_listener_reaches_by_family),
	    cmocka_unit_test(test_config_file_keys_set_their_values),
	    cmocka_unit_test(test_config_file_flag_keys_take_yes_or_no),
	    cmocka_unit_test(test_config_file_errors_carry_path_and_line),
	    cmocka_unit_test(test_config_every_error_of_a_file_is_reported),
	    cmocka_unit_test(test_config_bad_value_of_every_file_key_is_reported_at_its_line),
	    cmocka_unit_test(test_config_file_unknown_key_is_an_error),
	    cmocka_unit_test(test_config_bad_section_headers_are_errors),
	    cmocka_unit_test(test_config_good_section_headers_name_their_relays),
	    cmocka_unit_test(test_config_duplicate_relay_name_names_the_first_line),
	    cmocka_unit_test(test_config_name_used_three_times_is_two_errors_naming_the_first_line),
	    cmocka_unit_test(test_config_process_wide_key_inside_a_relay_is_an_error),
	    cmocka_unit_test(test_config_file_key_without_value_is_an_error),
	    cmocka_unit_test(test_config_file_quoted_values_are_unquoted),
	    cmocka_unit_test(test_config_file_comments_and_blank_lines_are_ignored),
	    cmocka_unit_test(test_config_file_with_crlf_line_endings_is_read_alike),
	    cmocka_unit_test(test_config_file_nul_byte_is_an_error_at_its_line),
	    cmocka_unit_test(test_config_file_line_over_1023_bytes_is_an_error),
	    cmocka_unit_test(test_config_relays_up_to_the_limit_are_accepted),
	    cmocka_unit_test(test_config_relay_past_the_limit_is_an_error_at_its_header),
	    cmocka_unit_test(test_config_lines_of_a_relay_past_the_limit_are_still_checked),
	    cmocka_unit_test(test_config_file_without_final_newline_reads_the_last_line),
	    cmocka_unit_test(test_config_empty_file_leaves_the_command_line_relay),
	    cmocka_unit_test(test_config_top_level_keys_are_inherited_by_every_relay),
	    cmocka_unit_test(test_config_explicit_top_level_tag_wins_over_a_sections_game),
	    cmocka_unit_test(test_config_a_sections_first_master_replaces_the_inherited_list),
	    cmocka_unit_test(test_config_more_than_eight_masters_in_a_section_is_an_error),
	    cmocka_unit_test(test_config_two_relays_on_one_listen_address_is_an_error_naming_both),
	    cmocka_unit_test(test_config_overlapping_session_ports_is_an_error_naming_both),
	    cmocka_unit_test(test_config_max_sessions_above_a_relays_port_range_is_an_error),
	    cmocka_unit_test(test_config_an_error_about_two_top_level_keys_names_a_line),
	    cmocka_unit_test(test_config_missing_upstream_in_a_relay_names_it),
	    cmocka_unit_test(test_config_no_relay_section_makes_the_top_level_the_default_relay),
	    cmocka_unit_test(test_config_no_relay_section_and_no_upstream_is_an_error_from_finish),
	    cmocka_unit_test(test_config_errors_of_load_and_finish_add_up),
	    cmocka_unit_test(test_config_relay_key_on_the_command_line_overrides_every_relay),
	    cmocka_unit_test(
		test_config_first_master_on_the_command_line_replaces_each_relays_list),
	    cmocka_unit_test(test_config_global_key_on_the_command_line_overrides_the_files),
	    cmocka_unit_test(test_config_upstream_on_the_command_line_completes_a_file_without_one),
	    cmocka_unit_test(test_config_sni_section_sets_every_key_and_needs_no_relay),
	    cmocka_unit_test(test_config_turn_section_sets_every_key_and_needs_no_relay),
	    cmocka_unit_test(test_config_turn_defaults_are_the_documented_ones),
	    cmocka_unit_test(test_config_turn_quick_start_on_the_command_line),
	    cmocka_unit_test(test_config_turn_tls_handshake_budget_is_set_by_key_and_option),
	    cmocka_unit_test(test_config_turn_limits_and_addresses_are_checked),
	    cmocka_unit_test(test_config_turn_tls_pair_without_tls_listen_and_tcp_clashes),
	    cmocka_unit_test(test_config_every_pair_of_tcp_listeners_on_one_port_is_an_error),
	    cmocka_unit_test(test_config_turn_ports_holding_another_listener_are_an_error),
	    cmocka_unit_test(test_config_turn_peers_public_ip_and_port_0_are_checked),
	    cmocka_unit_test(test_config_sni_max_spliced_without_splice_is_a_warning),
	    cmocka_unit_test(test_config_cidr_blocks_are_parsed),
	    cmocka_unit_test(test_config_sni_defaults_are_the_documented_ones),
	    cmocka_unit_test(test_config_sni_bad_values_name_their_line),
	    cmocka_unit_test(test_config_sni_quick_start_on_the_command_line),
	    cmocka_unit_test(test_config_sni_without_listen_is_an_error),
	    cmocka_unit_test(test_config_prbe_defaults_are_off_1472_bytes_10_per_second_burst_20),
	    cmocka_unit_test(test_config_prbe_is_per_relay_and_its_ports_are_echo_ports),
	    cmocka_unit_test(test_config_prbe_on_the_command_line),
	    cmocka_unit_test(test_config_prbe_bad_values_name_the_key),
	    cmocka_unit_test(test_config_prbe_listen_at_most_8_and_not_on_a_relays_port),
	    cmocka_unit_test(test_config_any_listener_makes_a_process_echo_ports_alone_too),
	    cmocka_unit_test(test_config_prbe_more_than_8_echo_ports_is_an_error),
	    cmocka_unit_test(test_config_control_keys_default_off_with_documented_defaults),
	    cmocka_unit_test(test_config_control_keys_from_the_file_and_the_command_line),
	    cmocka_unit_test(test_config_control_bad_values_are_errors_naming_the_key),
	    cmocka_unit_test(test_config_control_max_answer_and_allow_upstream),
	    cmocka_unit_test(test_config_control_allow_upstream_of_everything_is_a_warning),
	    cmocka_unit_test(test_config_control_url_without_a_host_is_an_error_naming_the_line),
	    cmocka_unit_test(test_config_errors_of_two_keys_name_the_file_and_line),
	    cmocka_unit_test(test_config_state_directory_must_be_absolute),
	    cmocka_unit_test(test_config_control_timeout_above_interval_is_a_warning),
	    cmocka_unit_test(test_config_missing_bootstrap_token_file_is_a_warning_unless_enrolled),
	    cmocka_unit_test(test_config_control_backoff_min_above_max_is_an_error),
	    cmocka_unit_test(test_config_relay_upstream_that_is_its_own_listen_is_an_error),
	    cmocka_unit_test(test_config_relay_upstream_that_is_another_udp_listener_is_an_error),
	    cmocka_unit_test(test_config_relays_upstreams_in_a_cycle_are_an_error),
	    cmocka_unit_test(test_config_tunnel_section_defaults_and_errors_name_their_line),
	    cmocka_unit_test(test_config_tunnel_errors_name_the_line_of_their_key),
	    cmocka_unit_test(test_config_wg_options_make_the_quick_start_tunnel),
	    cmocka_unit_test(test_config_tunnel_rung3_limits_default_and_refuse_out_of_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
