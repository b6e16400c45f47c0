/* SPDX-License-Identifier: ISC */
/* Unit tests for turn_peer.c (and the ranges it asks addrclass.c about):
 * the default refused set, embedded IPv4 forms, port 0, allow/deny order,
 * own addresses, the CIDR parser's errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "turn_peer.h"

/* "ip" with port 3478; IPv6 when it has a ':'. */
static union etr_sockaddr peer(const char *ip, uint16_t port)
{
	union etr_sockaddr a;

	memset(&a, 0, sizeof(a));
	if (strchr(ip, ':')) {
		a.in6.sin6_family = AF_INET6;
		a.in6.sin6_port = htons(port);
		assert_int_equal(inet_pton(AF_INET6, ip, &a.in6.sin6_addr), 1);
	} else {
		a.in.sin_family = AF_INET;
		a.in.sin_port = htons(port);
		assert_int_equal(inet_pton(AF_INET, ip, &a.in.sin_addr), 1);
	}
	return a;
}

static enum turn_peer_why check(const struct turn_peer_policy *p, const char *ip)
{
	union etr_sockaddr a = peer(ip, 3478);

	return turn_peer_check(p, &a, false);
}

static void add(struct turn_peer_policy *p, bool allow, const char *cidr)
{
	struct addr_cidr c;
	char err[256];

	assert_int_equal(turn_cidr_parse(allow ? "turn-allow-peer" : "turn-deny-peer", cidr, &c,
					 err, sizeof(err)),
			 0);
	assert_int_equal(allow ? turn_peer_allow(p, &c) : turn_peer_deny(p, &c), 0);
}

static void test_default_set_refuses_every_listed_range(void **state)
{
	static const char *const refused[] = {
	    "0.0.0.0",
	    "0.255.255.255",
	    "127.0.0.1",
	    "127.255.255.254",
	    "10.0.0.1",
	    "10.255.255.255",
	    "100.64.0.1",
	    "100.127.255.255",
	    "169.254.0.1",
	    "169.254.169.254",
	    "172.16.0.1",
	    "172.31.255.255",
	    "192.0.0.1",
	    "192.0.0.255",
	    "192.0.2.1",
	    "192.88.99.1",
	    "192.168.1.1",
	    "198.18.0.1",
	    "198.19.255.255",
	    "198.51.100.7",
	    "203.0.113.9",
	    "224.0.0.1",
	    "239.255.255.255",
	    "240.0.0.1",
	    "255.255.255.255",
	    "::",
	    "::1",
	    "64:ff9b:1::1",
	    "64:ff9b:1:ffff::1",
	    "100::1",
	    "100::ffff:ffff:ffff:ffff",
	    "2001:db8::1",
	    "2001:db8:ffff::1",
	    "fc00::1",
	    "fd00:ec2::254",
	    "fdff::1",
	    "fe80::1",
	    "febf::1",
	    "fec0::1",
	    "feff::1",
	    "ff02::1",
	    "ff0e::1",
	};
	struct turn_peer_policy p;

	(void)state;
	turn_peer_init(&p);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		if (check(&p, refused[i]) != TURN_PEER_RESERVED)
			fail_msg("%s was not refused", refused[i]);
	}
}

static void test_default_set_allows_neighbours_of_the_refused_ranges(void **state)
{
	static const char *const ok[] = {
	    "1.0.0.1",	    "9.255.255.255",
	    "11.0.0.1",	    "100.63.255.255",
	    "100.128.0.1",  "126.255.255.255",
	    "128.0.0.1",    "169.253.255.255",
	    "169.255.0.1",  "172.15.255.255",
	    "172.32.0.1",   "192.0.1.1",
	    "192.0.3.1",    "192.88.98.1",
	    "192.88.100.1", "192.167.255.255",
	    "192.169.0.1",  "198.17.255.255",
	    "198.20.0.1",   "198.51.99.1",
	    "198.51.101.1", "203.0.112.1",
	    "203.0.114.1",  "223.255.255.255",
	    "8.8.8.8",	    "2001:4860:4860::8888",
	    "2001:db9::1",  "2001:db7::1",
	    "64:ff9b:2::1", "100:0:0:1::1",
	    "fbff::1",	    "fe00::1",
	    "2a00:1450::1", "::2:1", /* ::0.2.0.1 reduced below */
	};
	struct turn_peer_policy p;

	(void)state;
	turn_peer_init(&p);
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		enum turn_peer_why w = check(&p, ok[i]);

		if (strcmp(ok[i], "::2:1") == 0)
			assert_int_equal(w, TURN_PEER_RESERVED); /* 0.2.0.1 is in 0/8 */
		else if (w != TURN_PEER_OK)
			fail_msg("%s was refused (%s)", ok[i], turn_peer_why_str(w));
	}
}

static void test_embedded_ipv4_forms_are_judged_as_ipv4(void **state)
{
	static const char *const refused[] = {
	    "::ffff:127.0.0.1",
	    "::ffff:10.1.2.3",
	    "::ffff:169.254.169.254",
	    "::127.0.0.1",
	    "::10.0.0.1",
	    "::192.168.0.1", /* IPv4-compatible */
	    "64:ff9b::127.0.0.1",
	    "64:ff9b::a9fe:a9fe",
	    "64:ff9b::10.0.0.1", /* NAT64 */
	    "2002:7f00:1::1",
	    "2002:a00:1::",
	    "2002:c0a8:101::1",
	    "2002:a9fe:a9fe::1", /* 6to4 */
	    "::ffff:0.0.0.0",
	    "::ffff:255.255.255.255",
	    "64:ff9b::e000:1",
	};
	static const char *const ok[] = {
	    "::ffff:8.8.8.8",
	    "::8.8.8.8",
	    "64:ff9b::8.8.8.8",
	    "2002:808:808::1",
	};
	struct turn_peer_policy p;

	(void)state;
	turn_peer_init(&p);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (check(&p, refused[i]) != TURN_PEER_RESERVED)
			fail_msg("%s was not refused", refused[i]);
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (check(&p, ok[i]) != TURN_PEER_OK)
			fail_msg("%s was refused", ok[i]);
}

static void test_port_zero_is_refused_unless_only_the_ip_counts(void **state)
{
	struct turn_peer_policy p;
	union etr_sockaddr a = peer("8.8.8.8", 0), b = peer("2001:4860::1", 0);

	(void)state;
	turn_peer_init(&p);
	assert_int_equal(turn_peer_check(&p, &a, false), TURN_PEER_PORT);
	assert_int_equal(turn_peer_check(&p, &b, false), TURN_PEER_PORT);
	assert_false(turn_peer_allowed(&p, &a));
	/* CreatePermission ignores the port. */
	assert_int_equal(turn_peer_check(&p, &a, true), TURN_PEER_OK);
	/* An allow-listed address on port 0 is still refused. */
	add(&p, true, "8.8.8.0/24");
	assert_int_equal(turn_peer_check(&p, &a, false), TURN_PEER_PORT);
}

static void test_unknown_family_is_refused(void **state)
{
	struct turn_peer_policy p;
	union etr_sockaddr a;

	(void)state;
	memset(&a, 0, sizeof(a));
	a.sa.sa_family = AF_UNIX;
	turn_peer_init(&p);
	assert_int_equal(turn_peer_check(&p, &a, true), TURN_PEER_FAMILY);
	assert_false(turn_peer_ok(TURN_PEER_FAMILY));
}

static void test_allow_list_opens_a_refused_range(void **state)
{
	struct turn_peer_policy p;

	(void)state;
	turn_peer_init(&p);
	add(&p, true, "127.0.0.1/32");
	add(&p, true, "192.168.10.0/24");
	add(&p, true, "fd00::/8");
	assert_int_equal(check(&p, "127.0.0.1"), TURN_PEER_ALLOWED);
	assert_int_equal(check(&p, "127.0.0.2"), TURN_PEER_RESERVED);
	assert_int_equal(check(&p, "192.168.10.77"), TURN_PEER_ALLOWED);
	assert_int_equal(check(&p, "192.168.11.1"), TURN_PEER_RESERVED);
	assert_int_equal(check(&p, "fd12::1"), TURN_PEER_ALLOWED);
	assert_int_equal(check(&p, "fc00::1"), TURN_PEER_RESERVED);
	/* The mapped and embedded forms of an allowed address are allowed. */
	assert_int_equal(check(&p, "::ffff:127.0.0.1"), TURN_PEER_ALLOWED);
	assert_int_equal(check(&p, "64:ff9b::192.168.10.1"), TURN_PEER_ALLOWED);
	/* Global addresses stay allowed by default. */
	assert_int_equal(check(&p, "8.8.8.8"), TURN_PEER_OK);
}

static void test_deny_wins_over_allow_and_over_the_default(void **state)
{
	struct turn_peer_policy p;

	(void)state;
	turn_peer_init(&p);
	add(&p, true, "10.0.0.0/8");
	add(&p, false, "10.9.0.0/16");
	add(&p, false, "8.8.8.0/24");
	add(&p, false, "2a00:1450::/32");
	add(&p, false, "2002::/16");
	assert_int_equal(check(&p, "10.1.0.1"), TURN_PEER_ALLOWED);
	assert_int_equal(check(&p, "10.9.0.1"), TURN_PEER_DENIED);
	assert_int_equal(check(&p, "8.8.8.8"), TURN_PEER_DENIED);
	assert_int_equal(check(&p, "8.8.4.4"), TURN_PEER_OK);
	/* Deny matches the reduced form too: a global IPv4 address denied
	 * cannot be reached through its mapped, compatible or NAT64 form. */
	assert_int_equal(check(&p, "::ffff:8.8.8.8"), TURN_PEER_DENIED);
	assert_int_equal(check(&p, "::8.8.8.8"), TURN_PEER_DENIED);
	assert_int_equal(check(&p, "64:ff9b::8.8.8.8"), TURN_PEER_DENIED);
	assert_int_equal(check(&p, "64:ff9b::10.9.1.1"), TURN_PEER_DENIED);
	/* ...and the form as sent: 6to4 denied as a whole. */
	assert_int_equal(check(&p, "2002:808:404::1"), TURN_PEER_DENIED);
	assert_int_equal(check(&p, "2a00:1450:4001::1"), TURN_PEER_DENIED);
	assert_int_equal(check(&p, "2a00:1451::1"), TURN_PEER_OK);
}

static void test_own_address_is_allowed_unless_denied(void **state)
{
	struct turn_peer_policy p;
	union etr_sockaddr own4 = peer("10.0.0.5", 3478), own6 = peer("fd00::5", 0);
	union etr_sockaddr un;

	(void)state;
	turn_peer_init(&p);
	assert_int_equal(turn_peer_own(&p, &own4), 0);
	assert_int_equal(turn_peer_own(&p, &own6), 0);
	turn_peer_ports(&p, 3000, 4000);
	/* Its relayed ports: client to client through the relay's addresses. */
	assert_int_equal(check(&p, "10.0.0.5"), TURN_PEER_OWN);
	assert_int_equal(check(&p, "::ffff:10.0.0.5"), TURN_PEER_OWN);
	assert_int_equal(check(&p, "fd00::5"), TURN_PEER_OWN);
	assert_int_equal(check(&p, "10.0.0.6"), TURN_PEER_RESERVED);
	assert_int_equal(check(&p, "fd00::6"), TURN_PEER_RESERVED);
	add(&p, false, "10.0.0.0/24");
	assert_int_equal(check(&p, "10.0.0.5"), TURN_PEER_DENIED);
	assert_int_equal(check(&p, "fd00::5"), TURN_PEER_OWN);
	add(&p, true, "fd00::/8");
	assert_int_equal(check(&p, "fd00::5"), TURN_PEER_OWN);
	memset(&un, 0, sizeof(un));
	un.sa.sa_family = AF_UNIX;
	assert_int_equal(turn_peer_own(&p, &un), -EAFNOSUPPORT);
	for (unsigned i = p.nown; i < TURN_PEER_OWN_MAX; i++)
		assert_int_equal(turn_peer_own(&p, &own4), 0);
	assert_int_equal(turn_peer_own(&p, &own4), -ENOSPC);
}

static enum turn_peer_why at(const struct turn_peer_policy *p, const char *ip, uint16_t port)
{
	union etr_sockaddr a = peer(ip, port);

	return turn_peer_check(p, &a, false);
}

static void test_own_address_is_refused_outside_the_relayed_ports(void **state)
{
	struct turn_peer_policy p;
	union etr_sockaddr own = peer("45.0.0.1", 0), a;

	(void)state;
	turn_peer_init(&p);
	assert_int_equal(turn_peer_own(&p, &own), 0);
	turn_peer_ports(&p, 50000, 50999);
	assert_int_equal(at(&p, "45.0.0.1", 50000), TURN_PEER_OWN);
	assert_int_equal(at(&p, "45.0.0.1", 50999), TURN_PEER_OWN);
	assert_int_equal(at(&p, "::ffff:45.0.0.1", 50500), TURN_PEER_OWN);
	assert_int_equal(at(&p, "45.0.0.1", 49999), TURN_PEER_HOST);
	assert_int_equal(at(&p, "45.0.0.1", 51000), TURN_PEER_HOST);
	assert_int_equal(at(&p, "45.0.0.1", 22), TURN_PEER_HOST);
	assert_int_equal(at(&p, "64:ff9b::45.0.0.1", 22), TURN_PEER_HOST);
	/* A CreatePermission names the address alone. */
	a = peer("45.0.0.1", 22);
	assert_int_equal(turn_peer_check(&p, &a, true), TURN_PEER_OWN);
	/* A block holding it is not enough; the address alone is. */
	add(&p, true, "45.0.0.0/24");
	assert_int_equal(at(&p, "45.0.0.1", 22), TURN_PEER_HOST);
	add(&p, true, "45.0.0.1/32");
	assert_int_equal(at(&p, "45.0.0.1", 22), TURN_PEER_ALLOWED);
}

static void test_own_address_is_open_only_on_ports_of_live_allocations(void **state)
{
	static _Atomic uint64_t live[TURN_PEER_LIVE_WORDS];
	struct turn_peer_policy p;
	union etr_sockaddr own = peer("45.0.0.1", 0), a;

	(void)state;
	turn_peer_init(&p);
	assert_int_equal(turn_peer_own(&p, &own), 0);
	turn_peer_ports(&p, 50000, 52000);
	turn_peer_live_ports(&p, live);
	/* A WireGuard port inside the range, no allocation on it. */
	assert_int_equal(at(&p, "45.0.0.1", 51820), TURN_PEER_HOST);
	assert_int_equal(at(&p, "45.0.0.1", 50000), TURN_PEER_HOST);
	turn_peer_port_set(live, 50000, true);
	turn_peer_port_set(live, 50001, true);
	assert_int_equal(at(&p, "45.0.0.1", 50000), TURN_PEER_OWN);
	assert_int_equal(at(&p, "::ffff:45.0.0.1", 50001), TURN_PEER_OWN);
	assert_int_equal(at(&p, "45.0.0.1", 51820), TURN_PEER_HOST);
	turn_peer_port_set(live, 50000, false);
	assert_int_equal(at(&p, "45.0.0.1", 50000), TURN_PEER_HOST);
	assert_int_equal(at(&p, "45.0.0.1", 50001), TURN_PEER_OWN);
	/* A live port outside the range is no relayed port. */
	turn_peer_port_set(live, 22, true);
	assert_int_equal(at(&p, "45.0.0.1", 22), TURN_PEER_HOST);
	/* A channel bound while 50000 was live reaches it no more. */
	a = peer("45.0.0.1", 50000);
	assert_true(turn_peer_own_dead(&p, &a));
	a = peer("::ffff:45.0.0.1", 50001);
	assert_false(turn_peer_own_dead(&p, &a));
	a = peer("45.0.0.2", 50000);
	assert_false(turn_peer_own_dead(&p, &a));
	a = peer("45.0.0.1", 22); /* not a relayed port: the policy's business */
	assert_false(turn_peer_own_dead(&p, &a));
	/* A CreatePermission names the address alone: allowed, its
	 * ChannelBind or Send then decides on the port. */
	a = peer("45.0.0.1", 51820);
	assert_int_equal(turn_peer_check(&p, &a, true), TURN_PEER_OWN);
}

static void test_host_addresses_follow_the_host(void **state)
{
	struct turn_peer_policy p;
	union etr_sockaddr h1 = peer("45.0.0.2", 0), h2 = peer("45.0.0.3", 0);

	(void)state;
	turn_peer_init(&p);
	assert_int_equal(turn_peer_host(&p, &h1), 0);
	assert_int_equal(check(&p, "45.0.0.2"), TURN_PEER_HOST);
	assert_int_equal(check(&p, "45.0.0.3"), TURN_PEER_OK);
	/* The host's addresses read again: one gone, one added. */
	turn_peer_hosts_clear(&p);
	assert_int_equal(turn_peer_host(&p, &h2), 0);
	assert_int_equal(check(&p, "45.0.0.2"), TURN_PEER_OK);
	assert_int_equal(check(&p, "45.0.0.3"), TURN_PEER_HOST);
}

static void test_new_ranges_and_forms_are_refused(void **state)
{
	static const char *const refused[] = {
	    "168.63.129.16",	   "::ffff:168.63.129.16",
	    "64:ff9b::a83f:8110",  "2001::1",
	    "2001:0:4136:e378::1", "::ffff:0:10.0.0.1",
	    "::ffff:0:127.0.0.1",  "::ffff:0:169.254.169.254",
	    "64:ff9b:1::8.8.8.8",  "64:ff9b:1::10.0.0.1",
	};
	struct turn_peer_policy p;

	(void)state;
	turn_peer_init(&p);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (check(&p, refused[i]) != TURN_PEER_RESERVED)
			fail_msg("%s was not refused", refused[i]);
	assert_int_equal(check(&p, "::ffff:0:8.8.8.8"), TURN_PEER_OK);
	/* The reduced form meets the operator's lists. */
	add(&p, false, "8.8.8.0/24");
	assert_int_equal(check(&p, "::ffff:0:8.8.8.8"), TURN_PEER_DENIED);
	assert_int_equal(check(&p, "64:ff9b:1::8.8.8.8"), TURN_PEER_DENIED);
}

static void test_every_host_address_is_closed_unless_allowed_alone(void **state)
{
	struct turn_peer_policy p;
	union etr_sockaddr h4 = peer("45.0.0.2", 0), h6 = peer("2a00::2", 0), a;

	(void)state;
	turn_peer_init(&p);
	turn_peer_ports(&p, 50000, 50999);
	assert_int_equal(at(&p, "45.0.0.2", 7777), TURN_PEER_OK);
	assert_int_equal(turn_peer_host(&p, &h4), 0);
	assert_int_equal(turn_peer_host(&p, &h6), 0);
	assert_int_equal(at(&p, "45.0.0.2", 7777), TURN_PEER_HOST);
	/* Not an own address: its relayed ports are closed too. */
	assert_int_equal(at(&p, "45.0.0.2", 50000), TURN_PEER_HOST);
	assert_int_equal(at(&p, "::ffff:45.0.0.2", 7777), TURN_PEER_HOST);
	assert_int_equal(at(&p, "2a00::2", 7777), TURN_PEER_HOST);
	assert_int_equal(at(&p, "2a00::3", 7777), TURN_PEER_OK);
	a = peer("45.0.0.2", 7777);
	assert_int_equal(turn_peer_check(&p, &a, true), TURN_PEER_HOST);
	/* Loopback and the unspecified addresses are the host, listed or not. */
	add(&p, true, "127.0.0.0/8");
	add(&p, true, "0.0.0.0/0");
	add(&p, true, "::/0");
	assert_int_equal(at(&p, "127.0.0.5", 22), TURN_PEER_RESERVED);
	assert_int_equal(at(&p, "0.0.0.0", 22), TURN_PEER_RESERVED);
	assert_int_equal(at(&p, "::1", 22), TURN_PEER_RESERVED);
	assert_int_equal(at(&p, "::", 22), TURN_PEER_RESERVED);
	assert_int_equal(at(&p, "45.0.0.2", 7777), TURN_PEER_HOST);
	assert_int_equal(at(&p, "8.8.8.8", 53), TURN_PEER_ALLOWED);
	add(&p, true, "127.0.0.5");
	add(&p, true, "45.0.0.2");
	assert_int_equal(at(&p, "127.0.0.5", 22), TURN_PEER_ALLOWED);
	assert_int_equal(at(&p, "45.0.0.2", 7777), TURN_PEER_ALLOWED);
	assert_int_equal(at(&p, "127.0.0.6", 22), TURN_PEER_RESERVED);
	for (unsigned i = p.nhost; i < TURN_PEER_HOST_MAX; i++)
		assert_int_equal(turn_peer_host(&p, &h4), 0);
	assert_int_equal(turn_peer_host(&p, &h4), -ENOSPC);
}

static void test_daemon_sockets_are_refused_even_when_allowed(void **state)
{
	struct turn_peer_policy p;
	union etr_sockaddr own = peer("45.0.0.1", 0), game = peer("45.0.0.1", 27960);
	union etr_sockaddr up = peer("127.0.0.1", 27961), remote = peer("198.51.100.7", 27960);
	union etr_sockaddr any = peer("0.0.0.0", 9960), a;

	(void)state;
	turn_peer_init(&p);
	assert_int_equal(turn_peer_own(&p, &own), 0);
	turn_peer_ports(&p, 27000, 28000);
	assert_int_equal(turn_peer_plumbing(&p, &game), 0);
	assert_int_equal(turn_peer_plumbing(&p, &up), 0);
	assert_int_equal(turn_peer_plumbing(&p, &remote), 0);
	assert_int_equal(turn_peer_plumbing(&p, &any), 0);
	add(&p, true, "0.0.0.0/0");
	add(&p, true, "127.0.0.1");
	add(&p, true, "45.0.0.1");
	/* Inside the relayed ports, allowed alone: still refused. */
	assert_int_equal(at(&p, "45.0.0.1", 27960), TURN_PEER_PLUMBING);
	assert_int_equal(at(&p, "45.0.0.1", 27961), TURN_PEER_OWN);
	assert_int_equal(at(&p, "127.0.0.1", 27961), TURN_PEER_PLUMBING);
	assert_int_equal(at(&p, "::ffff:127.0.0.1", 27961), TURN_PEER_PLUMBING);
	assert_int_equal(at(&p, "127.0.0.1", 22), TURN_PEER_ALLOWED);
	/* A remote game server: exactly its port. */
	assert_int_equal(at(&p, "198.51.100.7", 27960), TURN_PEER_PLUMBING);
	assert_int_equal(at(&p, "198.51.100.7", 27961), TURN_PEER_ALLOWED);
	/* A wildcard listener: its port on every address of the host, no other. */
	assert_int_equal(at(&p, "127.0.0.1", 9960), TURN_PEER_PLUMBING);
	assert_int_equal(at(&p, "45.0.0.1", 9960), TURN_PEER_PLUMBING);
	assert_int_equal(at(&p, "198.51.100.8", 9960), TURN_PEER_ALLOWED);
	/* A CreatePermission has no port to judge. */
	a = peer("198.51.100.7", 27960);
	assert_int_equal(turn_peer_check(&p, &a, true), TURN_PEER_ALLOWED);
	for (unsigned i = p.nplumb; i < TURN_PEER_PLUMB_MAX; i++)
		assert_int_equal(turn_peer_plumbing(&p, &up), 0);
	assert_int_equal(turn_peer_plumbing(&p, &up), -ENOSPC);
}

static void test_lists_are_bounded(void **state)
{
	struct turn_peer_policy p;
	struct addr_cidr c;
	char err[128];

	(void)state;
	turn_peer_init(&p);
	assert_int_equal(turn_cidr_parse("k", "192.0.2.0/24", &c, err, sizeof(err)), 0);
	for (unsigned i = 0; i < TURN_PEER_LIST_MAX; i++) {
		assert_int_equal(turn_peer_allow(&p, &c), 0);
		assert_int_equal(turn_peer_deny(&p, &c), 0);
	}
	assert_int_equal(turn_peer_allow(&p, &c), -ENOSPC);
	assert_int_equal(turn_peer_deny(&p, &c), -ENOSPC);
}

static void test_cidr_parser_accepts_and_explains(void **state)
{
	struct {
		const char *in, *err;
	} cases[] = {
	    {"10.0.0.0/8", NULL},
	    {"127.0.0.1", NULL},
	    {"0.0.0.0/0", NULL},
	    {"::/0", NULL},
	    {"2001:db8::/32", NULL},
	    {"::1", NULL},
	    {"::ffff:10.0.0.0/104", NULL},
	    {"10.0.0.0/33", "turn-allow-peer: '10.0.0.0/33': prefix longer than 32"},
	    {"fc00::/129", "turn-allow-peer: 'fc00::/129': prefix longer than 128"},
	    {"10.0.0.1/8",
	     "turn-allow-peer: '10.0.0.1/8': host bits set; did you mean 10.0.0.0/8?"},
	    {"fc00::1/7", "turn-allow-peer: 'fc00::1/7': host bits set; did you mean fc00::/7?"},
	    {"10.0.0.0/", "turn-allow-peer: '10.0.0.0/': prefix length is not a number"},
	    {"10.0.0.0/+8", "turn-allow-peer: '10.0.0.0/+8': prefix length is not a number"},
	    {"10.0.0.0/0008", "turn-allow-peer: '10.0.0.0/0008': prefix length is not a number"},
	    {"10.0.0/8", "turn-allow-peer: '10.0.0/8': not an IPv4 address"},
	    {"example.com", "turn-allow-peer: 'example.com': not an IPv4 address"},
	    {"fc00:::/7", "turn-allow-peer: 'fc00:::/7': not an IPv6 address"},
	    {"", "turn-allow-peer: '': not an IPv4 address"},
	    {"1111:2222:3333:4444:5555:6666:7777:8888/128/1",
	     "turn-allow-peer: '1111:2222:3333:4444:5555:6666:7777:8888/128/1': "
	     "prefix length is not a number"},
	    {"1111:2222:3333:4444:5555:6666:255.255.255.255/128 trailing",
	     "turn-allow-peer: '1111:2222:3333:4444:5555:6666:255.255.255.255/128 trailing': "
	     "not an IPv4 or IPv6 address or CIDR block"},
	};
	struct addr_cidr c;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r;

		err[0] = '\0';
		r = turn_cidr_parse("turn-allow-peer", cases[i].in, &c, err, sizeof(err));
		if (!cases[i].err) {
			if (r != 0)
				fail_msg("%s: %s", cases[i].in, err);
		} else {
			assert_int_equal(r, -1);
			assert_string_equal(err, cases[i].err);
		}
	}
}

static void test_cidr_match_covers_prefix_edges(void **state)
{
	struct addr_cidr c;
	char err[128];
	uint8_t ip[16];

	(void)state;
	assert_int_equal(turn_cidr_parse("k", "172.16.0.0/12", &c, err, sizeof(err)), 0);
	assert_int_equal(c.bits, 108);
	memset(ip, 0, sizeof(ip));
	ip[10] = ip[11] = 0xff;
	ip[12] = 172;
	ip[13] = 31;
	assert_true(addr_cidr_match(&c, ip));
	ip[13] = 32;
	assert_false(addr_cidr_match(&c, ip));
	assert_int_equal(turn_cidr_parse("k", "::/0", &c, err, sizeof(err)), 0);
	assert_true(addr_cidr_match(&c, ip));
	/* An IPv4 block never holds a native IPv6 address. */
	assert_int_equal(turn_cidr_parse("k", "0.0.0.0/0", &c, err, sizeof(err)), 0);
	memset(ip, 0, sizeof(ip));
	ip[0] = 0x20;
	assert_false(addr_cidr_match(&c, ip));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default_set_refuses_every_listed_range),
	    cmocka_unit_test(test_default_set_allows_neighbours_of_the_refused_ranges),
	    cmocka_unit_test(test_embedded_ipv4_forms_are_judged_as_ipv4),
	    cmocka_unit_test(test_own_address_is_open_only_on_ports_of_live_allocations),
	    cmocka_unit_test(test_host_addresses_follow_the_host),
	    cmocka_unit_test(test_new_ranges_and_forms_are_refused),
	    cmocka_unit_test(test_port_zero_is_refused_unless_only_the_ip_counts),
	    cmocka_unit_test(test_unknown_family_is_refused),
	    cmocka_unit_test(test_allow_list_opens_a_refused_range),
	    cmocka_unit_test(test_deny_wins_over_allow_and_over_the_default),
	    cmocka_unit_test(test_own_address_is_allowed_unless_denied),
	    cmocka_unit_test(test_own_address_is_refused_outside_the_relayed_ports),
	    cmocka_unit_test(test_every_host_address_is_closed_unless_allowed_alone),
	    cmocka_unit_test(test_daemon_sockets_are_refused_even_when_allowed),
	    cmocka_unit_test(test_lists_are_bounded),
	    cmocka_unit_test(test_cidr_parser_accepts_and_explains),
	    cmocka_unit_test(test_cidr_match_covers_prefix_edges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
