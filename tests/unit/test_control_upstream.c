/* SPDX-License-Identifier: ISC */
/* The control plane's route upstreams: the relay's own listeners never,
 * this host only when allowed alone, private ranges only when listed,
 * IPv4 embeddings judged as the IPv4 address they stand for. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "control_upstream.h"

static union etr_sockaddr A(const char *s) {
	union etr_sockaddr a;

	assert_int_equal(addr_parse_numeric(s, &a), 0);
	return a;
}

static void
allow(struct etr_conf *c, const char *cidr)
{
	assert_int_equal(conf_cidr_parse(cidr, &c->control_allow[c->ncontrol_allow++]), 0);
}

/* A relay on 0.0.0.0:27960, an SNI listener on the host's public address
 * 198.51.100.7:443, TURN on [::]:3478 with TCP 3478 and TLS 5349,
 * ops on 127.0.0.1:8080; the host is 198.51.100.7 and 10.8.0.1 (its
 * tunnel); the operator allows the tunnel 10.8.0.0/16 and 127.0.0.1 alone. */
static struct ctl_upstream_policy *policy(void)
{
	static struct ctl_upstream_policy p;
	static struct etr_conf c;
	union etr_sockaddr local[2] = {A("198.51.100.7:1"), A("10.8.0.1:1")};

	conf_defaults(&c, NULL);
	c.nrelays = 1;
	snprintf(c.relays[0].name, sizeof(c.relays[0].name), "et");
	c.relays[0].listen = A("0.0.0.0:27960");
	c.nsni = 1;
	snprintf(c.sni[0].name, sizeof(c.sni[0].name), "edge");
	c.sni[0].listen = A("198.51.100.7:443");
	c.nturn = 1;
	snprintf(c.turn[0].name, sizeof(c.turn[0].name), "t");
	c.turn[0].listen = A("[::]:3478");
	c.turn[0].tcp_set = c.turn[0].tls_set = true;
	c.turn[0].tcp_listen = A("[::]:3478");
	c.turn[0].tls_listen = A("[::]:5349");
	c.ops_enabled = true;
	c.ops_listen = A("127.0.0.1:8080");
	allow(&c, "10.8.0.0/16");
	allow(&c, "127.0.0.1");
	assert_int_equal(ctl_upstream_from_conf(&p, &c, local, 2), 0);
	return &p;
}

static enum ctl_upstream_why check(const char *up, char *why, size_t n)
{
	union etr_sockaddr a = A(up);

	return ctl_upstream_check(policy(), &a, why, n);
}

static void expect(const char *up, enum ctl_upstream_why want, const char *in_why)
{
	char why[256];
	enum ctl_upstream_why got = check(up, why, sizeof(why));

	if (got != want || (in_why && !strstr(why, in_why)))
		fail_msg("%s: %s (%s), want %s (%s)", up, ctl_upstream_why_name(got), why,
			 ctl_upstream_why_name(want), in_why ? in_why : "");
}

static void test_control_upstream_global_addresses_pass(void **state)
{
	(void)state;
	expect("192.0.43.10:443", CTL_UPSTREAM_OK, NULL);
	expect("[2001:4860::8888]:443", CTL_UPSTREAM_OK, NULL);
}

static void
test_control_upstream_the_relays_own_listeners_are_refused_whatever_is_allowed(void **state)
{
	(void)state;
	/* ops on 127.0.0.1, although 127.0.0.1 is allowed alone */
	expect("127.0.0.1:8080", CTL_UPSTREAM_LISTENER, "ops listener");
	expect("[::ffff:127.0.0.1]:8080", CTL_UPSTREAM_LISTENER, "ops listener");
	/* wildcard listeners on each address of the host, in the allowed tunnel too */
	expect("10.8.0.1:27960", CTL_UPSTREAM_LISTENER, "game relay et");
	expect("127.0.0.1:3478", CTL_UPSTREAM_LISTENER, "TURN listener t");
	expect("[::1]:5349", CTL_UPSTREAM_LISTENER, "TURN TLS listener t");
	expect("198.51.100.7:443", CTL_UPSTREAM_LISTENER, "SNI listener edge");
	/* the same port on another machine is not ours */
	expect("192.0.43.10:8080", CTL_UPSTREAM_OK, NULL);
	expect("10.8.0.2:27960", CTL_UPSTREAM_ALLOWED, NULL);
}

static void test_control_upstream_this_host_needs_an_entry_of_its_own(void **state)
{
	(void)state;
	expect("127.0.0.1:6379", CTL_UPSTREAM_ALLOWED, NULL);
	expect("[::ffff:127.0.0.1]:6379", CTL_UPSTREAM_ALLOWED, NULL);
	expect("127.0.0.2:6379", CTL_UPSTREAM_HOST, "control-allow-upstream 127.0.0.2");
	expect("[::1]:6379", CTL_UPSTREAM_HOST, NULL);
	expect("0.0.0.0:22", CTL_UPSTREAM_HOST, NULL);
	expect("[::]:22", CTL_UPSTREAM_HOST, NULL);
	/* the tunnel block holds the host's own tunnel address: not enough */
	expect("10.8.0.1:22", CTL_UPSTREAM_HOST, NULL);
	/* a public address of the host */
	expect("198.51.100.7:22", CTL_UPSTREAM_HOST, NULL);
}

/* Attack round 11: the host's addresses were a snapshot of the start,
 * cut at 64. An address that comes up later (the tunnel's) counts as the
 * host's once the list is read again; a list past the room is counted. */
static void test_control_upstream_hosts_follow_the_host(void **state)
{
	struct ctl_upstream_policy *p = policy();
	union etr_sockaddr late = A("10.8.0.9:1"), up = A("10.8.0.9:8443");
	static union etr_sockaddr many[CTL_UPSTREAM_HOST_MAX + 3];
	char why[256];

	(void)state;
	assert_int_equal(ctl_upstream_check(p, &up, why, sizeof(why)), CTL_UPSTREAM_ALLOWED);
	assert_int_equal(ctl_upstream_set_hosts(p, &late, 1), 0);
	assert_int_equal(ctl_upstream_check(p, &up, why, sizeof(why)), CTL_UPSTREAM_HOST);
	for (size_t i = 0; i < CTL_UPSTREAM_HOST_MAX + 3; i++) {
		char s[32];

		snprintf(s, sizeof(s), "10.9.%zu.%zu:1", i / 200, i % 200 + 1);
		many[i] = A(s);
	}
	assert_int_equal(ctl_upstream_set_hosts(p, many, CTL_UPSTREAM_HOST_MAX + 3), 3);
	/* the listeners stay whatever the host's list */
	up = A("198.51.100.7:443");
	assert_int_not_equal(ctl_upstream_check(p, &up, why, sizeof(why)), CTL_UPSTREAM_ALLOWED);
}

static void test_control_upstream_private_ranges_only_when_listed(void **state)
{
	(void)state;
	expect("10.8.3.4:443", CTL_UPSTREAM_ALLOWED, NULL);
	expect("10.9.0.1:443", CTL_UPSTREAM_PRIVATE, "10.9.0.1 is a private");
	expect("192.168.1.1:80", CTL_UPSTREAM_PRIVATE, NULL);
	expect("100.64.0.1:80", CTL_UPSTREAM_PRIVATE, NULL);
	expect("[fd00::1]:80", CTL_UPSTREAM_PRIVATE, NULL);
	/* the cloud's metadata service, as written and as IPv4-mapped or NAT64 */
	expect("169.254.169.254:80", CTL_UPSTREAM_PRIVATE, NULL);
	expect("[::ffff:169.254.169.254]:80", CTL_UPSTREAM_PRIVATE, NULL);
	expect("[64:ff9b::a9fe:a9fe]:80", CTL_UPSTREAM_PRIVATE, NULL);
	expect("[fe80::1]:80", CTL_UPSTREAM_PRIVATE, NULL);
	/* an embedding of an allowed tunnel address */
	expect("[::ffff:10.8.0.9]:443", CTL_UPSTREAM_ALLOWED, NULL);
}

static void test_control_upstream_other_reserved_ranges_are_refused(void **state)
{
	(void)state;
	expect("224.0.0.1:443", CTL_UPSTREAM_RESERVED, "not a globally reachable");
	expect("255.255.255.255:443", CTL_UPSTREAM_RESERVED, NULL);
	expect("[ff02::1]:443", CTL_UPSTREAM_RESERVED, NULL);
	expect("192.0.2.1:443", CTL_UPSTREAM_RESERVED, NULL);
}

static void test_control_upstream_without_an_allow_list_private_and_host_are_refused(void **state)
{
	struct ctl_upstream_policy p;
	struct etr_conf c;
	union etr_sockaddr a = A("10.8.0.2:443"), lo = A("127.0.0.1:443");
	char why[200];

	(void)state;
	conf_defaults(&c, NULL);
	assert_int_equal(ctl_upstream_from_conf(&p, &c, NULL, 0), 0);
	assert_int_equal(ctl_upstream_check(&p, &a, why, sizeof(why)), CTL_UPSTREAM_PRIVATE);
	assert_int_equal(ctl_upstream_check(&p, &lo, why, sizeof(why)), CTL_UPSTREAM_HOST);
	assert_string_equal(ctl_upstream_why_name(CTL_UPSTREAM_LISTENER), "listener");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_control_upstream_global_addresses_pass),
	    cmocka_unit_test(
		test_control_upstream_the_relays_own_listeners_are_refused_whatever_is_allowed),
	    cmocka_unit_test(test_control_upstream_this_host_needs_an_entry_of_its_own),
	    cmocka_unit_test(test_control_upstream_private_ranges_only_when_listed),
	    cmocka_unit_test(test_control_upstream_hosts_follow_the_host),
	    cmocka_unit_test(test_control_upstream_other_reserved_ranges_are_refused),
	    cmocka_unit_test(
		test_control_upstream_without_an_allow_list_private_and_host_are_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
