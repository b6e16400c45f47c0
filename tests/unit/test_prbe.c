/* SPDX-License-Identifier: ISC */
/* Unit tests for prbe.c: exact echo, no amplification, the drops and their
 * reasons, the per-source rate, the listener's, and a bounce. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "prbe.h"

#define SEC 1000000000ull
#define T0  (1000 * SEC)

static const uint8_t key[16] = "0123456789abcdef";
static const uint16_t echo_ports[] = {443, 51820, 51821};

struct fixture {
	struct rl_table rl;
	struct prbe p;
};

static int setup(void **state)
{
	static struct fixture f;

	/* 3 probes at once per source, then 1 per second. */
	assert_int_equal(rl_table_init(&f.rl, 64, 3, 1, key), 0);
	assert_int_equal(prbe_init(&f.p, &f.rl, 0, echo_ports, 3, false), 0);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rl_table_free(&f->rl);
	return 0;
}

static enum prbe_verdict check(struct prbe *p, const char *src, const void *data, size_t len,
			       uint64_t now)
{
	union etr_sockaddr a;
	size_t reply = 12345;
	enum prbe_verdict v;

	assert_int_equal(addr_parse_numeric(src, &a), 0);
	v = prbe_check(p, &a, data, len, now, &reply);
	/* Never larger than it came; nothing at all unless echoed. */
	assert_int_equal(reply, v == PRBE_ECHO ? len : 0);
	return v;
}

/* Probe number i: PRBE and four digits (probes from one source differ, or
 * the second would be taken for the first one's echo coming back). */
static const char *nth(int i)
{
	static char b[16];

	snprintf(b, sizeof(b), "PRBE%04d", i);
	return b;
}

static void test_prbe_echoes_a_probe_unchanged(void **state)
{
	struct fixture *f = *state;
	const char probe[] = "PRBE\x01\x02nonce-1234";
	union etr_sockaddr a;
	size_t reply;

	assert_int_equal(addr_parse_numeric("203.0.113.7:50000", &a), 0);
	assert_int_equal(
	    prbe_check(&f->p, &a, (const uint8_t *)probe, sizeof(probe) - 1, T0, &reply),
	    PRBE_ECHO);
	assert_int_equal(reply, sizeof(probe) - 1);
	/* Just the four bytes is a probe too. */
	assert_int_equal(check(&f->p, "203.0.113.8:50000", "PRBE", 4, T0), PRBE_ECHO);
	assert_int_equal(check(&f->p, "[2001:db8::7]:50000", "PRBE", 4, T0), PRBE_ECHO);
	assert_int_equal(f->p.count[PRBE_ECHO], 3);
}

static void test_prbe_other_datagrams_are_not_probes(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(check(&f->p, "203.0.113.7:50000", "PRB", 3, T0), PRBE_NOT_PROBE);
	assert_int_equal(check(&f->p, "203.0.113.7:50000", "prbe", 4, T0), PRBE_NOT_PROBE);
	assert_int_equal(check(&f->p, "203.0.113.7:50000", "\xff\xff\xff\xffgetinfo", 11, T0),
			 PRBE_NOT_PROBE);
	assert_int_equal(
	    check(&f->p, "203.0.113.7:50000", "\x00\x01\x00\x00\x21\x12\xa4\x42", 8, T0),
	    PRBE_NOT_PROBE);
	assert_int_equal(check(&f->p, "203.0.113.7:50000", "", 0, T0), PRBE_NOT_PROBE);
	assert_int_equal(f->p.count[PRBE_NOT_PROBE], 5);
	/* None of them spent a token. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(check(&f->p, "203.0.113.7:50000", nth(i), 8, T0), PRBE_ECHO);
}

static void test_prbe_never_answers_a_port_below_1024(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(check(&f->p, "203.0.113.7:1023", "PRBE", 4, T0), PRBE_DROP_PORT);
	assert_int_equal(check(&f->p, "203.0.113.7:53", "PRBE", 4, T0), PRBE_DROP_PORT);
	assert_int_equal(check(&f->p, "[2001:db8::7]:7", "PRBE", 4, T0), PRBE_DROP_PORT);
	assert_int_equal(check(&f->p, "203.0.113.7:1024", "PRBE", 4, T0), PRBE_ECHO);
	assert_int_equal(f->p.count[PRBE_DROP_PORT], 3);
}

static void test_prbe_never_answers_another_echo_port(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(check(&f->p, "203.0.113.7:51821", "PRBE", 4, T0), PRBE_DROP_LOOP);
	assert_int_equal(check(&f->p, "203.0.113.7:51820", "PRBE", 4, T0), PRBE_DROP_LOOP);
	assert_int_equal(check(&f->p, "203.0.113.7:51822", "PRBE", 4, T0), PRBE_ECHO);
}

static void test_prbe_drops_sources_that_cannot_be_real(void **state)
{
	struct fixture *f = *state;
	struct prbe lo;

	assert_int_equal(check(&f->p, "0.0.0.0:5000", "PRBE", 4, T0), PRBE_DROP_SOURCE);
	assert_int_equal(check(&f->p, "224.0.0.1:5000", "PRBE", 4, T0), PRBE_DROP_SOURCE);
	assert_int_equal(check(&f->p, "255.255.255.255:5000", "PRBE", 4, T0), PRBE_DROP_SOURCE);
	assert_int_equal(check(&f->p, "127.0.0.1:5000", "PRBE", 4, T0), PRBE_DROP_SOURCE);
	/* Port 0 (the address parser refuses it, so by hand). */
	union etr_sockaddr a;
	size_t reply;

	assert_int_equal(addr_parse_numeric("203.0.113.7:1", &a), 0);
	a.in.sin_port = 0;
	assert_int_equal(prbe_check(&f->p, &a, (const uint8_t *)"PRBE", 4, T0, &reply),
			 PRBE_DROP_SOURCE);
	assert_int_equal(reply, 0);
	/* Loopback is real on a loopback listener. */
	assert_int_equal(prbe_init(&lo, &f->rl, 0, NULL, 0, true), 0);
	assert_int_equal(check(&lo, "127.0.0.1:5000", "PRBE", 4, T0), PRBE_ECHO);
}

static void test_prbe_drops_datagrams_over_the_size_cap(void **state)
{
	struct fixture *f = *state;
	static uint8_t big[PRBE_LEN_MAX_DEFAULT + 1];
	struct prbe small;

	memcpy(big, "PRBE", 4);
	assert_int_equal(check(&f->p, "203.0.113.7:5000", big, sizeof(big), T0), PRBE_DROP_SIZE);
	assert_int_equal(check(&f->p, "203.0.113.7:5000", big, sizeof(big) - 1, T0), PRBE_ECHO);
	assert_int_equal(prbe_init(&small, &f->rl, 64, NULL, 0, false), 0);
	assert_int_equal(check(&small, "203.0.113.8:5000", big, 65, T0), PRBE_DROP_SIZE);
	assert_int_equal(check(&small, "203.0.113.8:5000", big, 64, T0), PRBE_ECHO);
}

static void test_prbe_rate_limits_each_source(void **state)
{
	struct fixture *f = *state;

	for (int i = 0; i < 3; i++)
		assert_int_equal(check(&f->p, "203.0.113.7:5000", nth(i), 8, T0), PRBE_ECHO);
	assert_int_equal(check(&f->p, "203.0.113.7:5000", nth(3), 8, T0), PRBE_DROP_RATE);
	/* Another port of the same IP is the same source. */
	assert_int_equal(check(&f->p, "203.0.113.7:5001", nth(4), 8, T0), PRBE_DROP_RATE);
	/* Another IP is not. */
	assert_int_equal(check(&f->p, "203.0.113.9:5000", nth(5), 8, T0), PRBE_ECHO);
	/* One more a second later. */
	assert_int_equal(check(&f->p, "203.0.113.7:5000", nth(6), 8, T0 + SEC), PRBE_ECHO);
	assert_int_equal(check(&f->p, "203.0.113.7:5000", nth(7), 8, T0 + SEC), PRBE_DROP_RATE);
	/* An IPv6 /64 is one source. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(check(&f->p, "[2001:db8::1]:5000", nth(i), 8, T0), PRBE_ECHO);
	assert_int_equal(check(&f->p, "[2001:db8::2]:5000", nth(3), 8, T0), PRBE_DROP_RATE);
	assert_int_equal(f->p.count[PRBE_DROP_RATE], 4);
	assert_int_equal(f->p.count[PRBE_ECHO], 8);
}

static void test_prbe_never_answers_a_reflector_port(void **state)
{
	struct fixture *f = *state;
	struct prbe p;

	/* no echo ports configured: the list holds anyway */
	assert_int_equal(prbe_init(&p, &f->rl, 0, NULL, 0, false), 0);
	assert_int_equal(check(&p, "203.0.113.7:11211", "PRBE", 4, T0), PRBE_DROP_REFLECTOR);
	assert_int_equal(check(&p, "203.0.113.7:1900", "PRBE", 4, T0), PRBE_DROP_REFLECTOR);
	assert_int_equal(check(&p, "[2001:db8::7]:5353", "PRBE", 4, T0), PRBE_DROP_REFLECTOR);
	assert_int_equal(check(&p, "203.0.113.7:51821", "PRBE", 4, T0), PRBE_DROP_REFLECTOR);
	assert_int_equal(check(&p, "203.0.113.7:51820", "PRBE", 4, T0), PRBE_DROP_REFLECTOR);
	assert_int_equal(p.count[PRBE_DROP_REFLECTOR], 5);
	/* none spent a token */
	for (int i = 0; i < 3; i++)
		assert_int_equal(check(&p, "203.0.113.7:11212", nth(i), 8, T0), PRBE_ECHO);
	assert_true(prbe_reflector_port(1434));
	assert_false(prbe_reflector_port(27960));
	assert_false(prbe_reflector_port(1024));
}

/* 8 sources, one probe each, against a listener's 5 at once then 2 a
 * second: forged sources do not each get an echo. */
static void test_prbe_listener_budget_bounds_every_source_together(void **state)
{
	struct fixture *f = *state;
	char src[64];
	int echoed = 0;

	prbe_budget(&f->p, 5, 2);
	for (int i = 0; i < 8; i++) {
		snprintf(src, sizeof(src), "198.51.100.%d:5000", i + 1);
		echoed += check(&f->p, src, "PRBE", 4, T0) == PRBE_ECHO;
	}
	assert_int_equal(echoed, 5);
	assert_int_equal(f->p.count[PRBE_DROP_BUDGET], 3);
	/* half a second: one more, whoever asks */
	assert_int_equal(check(&f->p, "198.51.100.20:5000", "PRBE", 4, T0 + SEC / 2), PRBE_ECHO);
	assert_int_equal(check(&f->p, "198.51.100.21:5000", "PRBE", 4, T0 + SEC / 2),
			 PRBE_DROP_BUDGET);
	/* the source's own rule still comes first */
	for (int i = 0; i < 3; i++)
		check(&f->p, "198.51.100.30:5000", nth(i), 8, T0 + 10 * SEC);
	assert_int_equal(check(&f->p, "198.51.100.30:5000", nth(3), 8, T0 + 10 * SEC),
			 PRBE_DROP_RATE);
}

/* The same bytes from where they were just echoed: a bounce, not a probe;
 * two echoers that know nothing of each other stop after one round. */
static void test_prbe_a_bounced_echo_is_not_echoed_again(void **state)
{
	struct fixture *f = *state;
	struct rl_table rl2;
	struct prbe e, a, b;
	const char p[] = "PRBE forged";
	int sent = 0;

	/* 100 at once per source: only the bounce rule speaks */
	assert_int_equal(rl_table_init(&rl2, 64, 100, 100, key), 0);
	assert_int_equal(prbe_init(&e, &rl2, 0, NULL, 0, false), 0);
	assert_int_equal(check(&e, "203.0.113.7:5000", p, 11, T0), PRBE_ECHO);
	assert_int_equal(check(&e, "203.0.113.7:5000", p, 11, T0 + PRBE_BOUNCE_NS - 1),
			 PRBE_DROP_BOUNCE);
	/* other bytes, another port or address, or later: a probe */
	assert_int_equal(check(&e, "203.0.113.7:5000", "PRBE forgeD", 11, T0 + 1), PRBE_ECHO);
	assert_int_equal(check(&e, "203.0.113.7:5001", p, 11, T0 + 2), PRBE_ECHO);
	assert_int_equal(check(&e, "[2001:db8::7]:5000", p, 11, T0 + 2), PRBE_ECHO);
	assert_int_equal(check(&e, "203.0.113.8:5000", p, 11, T0 + 2), PRBE_ECHO);
	assert_int_equal(check(&e, "203.0.113.7:5000", p, 11, T0 + PRBE_BOUNCE_NS), PRBE_ECHO);
	assert_int_equal(e.count[PRBE_DROP_BOUNCE], 1);
	assert_int_equal(e.count[PRBE_ECHO], 6);

	/* echo ports 20000 (a) and 20001 (b) on two hosts, a probe forged as
	 * b's to a: echoes go back and forth until one side drops */
	assert_int_equal(prbe_init(&a, &f->rl, 0, (const uint16_t[]){20000}, 1, false), 0);
	assert_int_equal(prbe_init(&b, &rl2, 0, (const uint16_t[]){20001}, 1, false), 0);
	for (int round = 0; round < 20; round++) {
		bool to_a = round % 2 == 0;

		if (check(to_a ? &a : &b, to_a ? "192.0.2.2:20001" : "192.0.2.1:20000", p, 11,
			  T0 + 10 * SEC + (uint64_t)round * 1000000) != PRBE_ECHO)
			break;
		sent++;
	}
	assert_int_equal(sent, 2);
	assert_int_equal(a.count[PRBE_DROP_BOUNCE], 1);
	rl_table_free(&rl2);
}

static void test_prbe_init_refuses_bad_settings(void **state)
{
	struct fixture *f = *state;
	struct prbe p;
	uint16_t ports[PRBE_PORTS_MAX + 1] = {0};

	assert_int_equal(prbe_init(&p, NULL, 0, NULL, 0, false), -EINVAL);
	assert_int_equal(prbe_init(&p, &f->rl, 3, NULL, 0, false), -EINVAL);
	assert_int_equal(prbe_init(&p, &f->rl, 0, ports, PRBE_PORTS_MAX + 1, false), -EINVAL);
	assert_int_equal(prbe_init(&p, &f->rl, 0, ports, PRBE_PORTS_MAX, false), 0);
	assert_int_equal(p.len_max, PRBE_LEN_MAX_DEFAULT);
}

static void test_prbe_verdict_names(void **state)
{
	assert_string_equal(prbe_verdict_name(PRBE_ECHO), "echoed");
	assert_string_equal(prbe_verdict_name(PRBE_DROP_PORT), "low_port");
	assert_string_equal(prbe_verdict_name(PRBE_VERDICTS), "unknown");
	for (int v = 0; v < PRBE_VERDICTS; v++)
		assert_non_null(prbe_verdict_name((enum prbe_verdict)v));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_prbe_echoes_a_probe_unchanged, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_prbe_other_datagrams_are_not_probes, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_prbe_never_answers_a_port_below_1024, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_prbe_never_answers_another_echo_port, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_prbe_drops_sources_that_cannot_be_real, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_prbe_drops_datagrams_over_the_size_cap, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_prbe_rate_limits_each_source, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_prbe_never_answers_a_reflector_port, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_prbe_listener_budget_bounds_every_source_together,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_prbe_a_bounced_echo_is_not_echoed_again, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_prbe_init_refuses_bad_settings, setup, teardown),
	    cmocka_unit_test(test_prbe_verdict_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
