/* SPDX-License-Identifier: ISC */
/* Unit tests for reuseport.c: the model of the worker choice, and the BPF
 * program run through a small interpreter of the classic BPF it uses, on
 * IPv4 and IPv6 headers, to show that the two agree. (The integration test
 * test_workers shows that the kernel agrees too.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "addrclass.h"
#include "reuseport.h"
#include "unit_util.h"

/* The network header of a datagram from src: only the fields the program
 * reads are filled in. */
static size_t header_of(const union etr_sockaddr *src, uint8_t h[40])
{
	uint32_t v4;

	memset(h, 0, 40);
	if (addrclass_v4(src, &v4)) {
		h[0] = 0x45;
		v4 = htonl(v4);
		memcpy(h + 12, &v4, 4);
		return 20;
	}
	h[0] = 0x60;
	memcpy(h + 8, &src->in6.sin6_addr, 16);
	return 40;
}

/* Classic BPF as the kernel runs a reuseport program, for the opcodes
 * reuseport_build emits; loads only through SKF_NET_OFF. Fails the test on
 * anything else, on an out-of-bounds load or a jump past the end. */
static uint32_t run(const struct sock_filter *prog, int n, const uint8_t *net, size_t len)
{
	uint32_t a = 0, x = 0;

	for (int pc = 0, steps = 0; steps < 1000; steps++) {
		const struct sock_filter *f;
		uint32_t off;

		assert_true(pc >= 0 && pc < n);
		f = &prog[pc++];
		switch (f->code) {
		case BPF_LD | BPF_B | BPF_ABS:
		case BPF_LD | BPF_W | BPF_ABS:
			assert_true(f->k >= (uint32_t)SKF_NET_OFF);
			off = f->k - (uint32_t)SKF_NET_OFF;
			if (BPF_SIZE(f->code) == BPF_B) {
				assert_true(off < len);
				a = net[off];
			} else {
				assert_true(off + 4 <= len);
				a = (uint32_t)net[off] << 24 | (uint32_t)net[off + 1] << 16 |
				    (uint32_t)net[off + 2] << 8 | net[off + 3];
			}
			break;
		case BPF_ALU | BPF_AND | BPF_K:
			a &= f->k;
			break;
		case BPF_ALU | BPF_MUL | BPF_K:
			a *= f->k;
			break;
		case BPF_ALU | BPF_RSH | BPF_K:
			a >>= f->k;
			break;
		case BPF_ALU | BPF_XOR | BPF_X:
			a ^= x;
			break;
		case BPF_ALU | BPF_MOD | BPF_K:
			assert_true(f->k != 0);
			a %= f->k;
			break;
		case BPF_MISC | BPF_TAX:
			x = a;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			pc += a == f->k ? f->jt : f->jf;
			break;
		case BPF_RET | BPF_A:
			return a;
		case BPF_RET | BPF_K:
			return f->k;
		default:
			fail_msg("opcode 0x%x not expected", f->code);
		}
	}
	fail_msg("the program did not return");
	return 0;
}

static uint32_t run_for(const struct reuseport_plan *p, const union etr_sockaddr *src)
{
	struct sock_filter prog[REUSEPORT_PROG_MAX];
	uint8_t h[40];
	size_t len = header_of(src, h);
	int n = reuseport_build(p, prog);

	assert_true(n > 0 && n <= REUSEPORT_PROG_MAX);
	return run(prog, n, h, len);
}

static union etr_sockaddr v4_at(uint32_t host, uint16_t port)
{
	union etr_sockaddr a = {0};

	a.in.sin_family = AF_INET;
	a.in.sin_addr.s_addr = htonl(host);
	a.in.sin_port = htons(port);
	return a;
}

static void test_reuseport_one_address_any_port_is_one_worker(void **state)
{
	struct reuseport_plan p = {.workers = 2, .key = reuseport_key(0x12345678)};
	union etr_sockaddr first = v4_at(0xc0000207, 1024);
	unsigned w = reuseport_pick(&p, &first);

	(void)state;
	for (uint16_t port = 1024; port < 1074; port++) {
		union etr_sockaddr a = v4_at(0xc0000207, port);

		assert_int_equal(reuseport_pick(&p, &a), w);
		assert_int_equal(run_for(&p, &a), w);
	}
}

static void test_reuseport_ipv6_picks_by_its_slash_64(void **state)
{
	struct reuseport_plan p = {.workers = 8, .key = reuseport_key(0xdeadbeef)};
	union etr_sockaddr a = sa("[2001:db8:1:2::1]:1"), b = sa("[2001:db8:1:2:ffff::9]:2");
	unsigned seen[8] = {0}, used = 0;

	(void)state;
	assert_int_equal(reuseport_pick(&p, &a), reuseport_pick(&p, &b));
	assert_int_equal(run_for(&p, &a), reuseport_pick(&p, &a));
	assert_int_equal(run_for(&p, &b), reuseport_pick(&p, &a));
	/* Other /64s of one /48 spread. */
	for (unsigned i = 0; i < 64; i++) {
		union etr_sockaddr c = sa("[2001:db8:1::1]:1");

		c.in6.sin6_addr.s6_addr[6] = (uint8_t)(i >> 8);
		c.in6.sin6_addr.s6_addr[7] = (uint8_t)i;
		assert_int_equal(run_for(&p, &c), reuseport_pick(&p, &c));
		seen[reuseport_pick(&p, &c)]++;
	}
	for (unsigned w = 0; w < 8; w++)
		used += seen[w] > 0;
	assert_true(used >= 6);
}

static void test_reuseport_program_agrees_with_the_model(void **state)
{
	static const unsigned workers[] = {2, 3, 4, 7, 64};

	(void)state;
	for (unsigned k = 0; k < sizeof(workers) / sizeof(workers[0]); k++) {
		struct reuseport_plan p = {.workers = workers[k],
					   .key = reuseport_key(0x9e3779b9 * (k + 1))};

		for (uint32_t i = 0; i < 2000; i++) {
			union etr_sockaddr a = v4_at(0x7f000000 + i * 37, 1),
					   b = sa("[2001:db8::1]:1");

			b.in6.sin6_addr.s6_addr[3] = (uint8_t)i;
			b.in6.sin6_addr.s6_addr[5] = (uint8_t)(i * 7);
			assert_int_equal(run_for(&p, &a), reuseport_pick(&p, &a));
			assert_int_equal(run_for(&p, &b), reuseport_pick(&p, &b));
			assert_true(reuseport_pick(&p, &a) < workers[k]);
		}
	}
}

static void test_reuseport_mapped_ipv4_is_picked_as_ipv4(void **state)
{
	struct reuseport_plan p = {.workers = 5, .key = reuseport_key(77)};

	(void)state;
	for (unsigned i = 0; i < 200; i++) {
		union etr_sockaddr a = v4_at(0x0a000000 + i, 5), m = a;

		addrclass_map_v4(&m);
		assert_int_equal(reuseport_pick(&p, &a), reuseport_pick(&p, &m));
		/* A dual-stack socket receives it with an IPv4 header. */
		assert_int_equal(run_for(&p, &m), reuseport_pick(&p, &a));
	}
}

static void test_reuseport_200_loopback_sources_spread_over_two_workers(void **state)
{
	struct reuseport_plan p = {.workers = 2};
	unsigned n[2] = {0, 0};

	(void)state;
	/* Whatever the key: the integration test's 127.0.x.y sources. */
	for (uint32_t key = 1; key < 2000; key += 2) {
		p.key = reuseport_key(key * 2654435761u);
		n[0] = n[1] = 0;
		for (unsigned i = 0; i < 200; i++) {
			union etr_sockaddr a =
			    v4_at(0x7f000000 | (1 + i / 250) << 8 | (1 + i % 250), 1);

			n[reuseport_pick(&p, &a)]++;
		}
		assert_true(n[0] >= 50 && n[1] >= 50);
	}
}

static void test_reuseport_steered_addresses_reach_the_owner(void **state)
{
	struct reuseport_plan p = {.workers = 4, .key = reuseport_key(0x31337), .owner = 2};
	union etr_sockaddr m4 = v4_at(0xc6336401, 27950), m6 = sa("[2001:db8:99::7]:27950"),
			   near6 = sa("[2001:db8:99::8]:27950"), mapped = m4;
	unsigned other = 0;

	(void)state;
	addrclass_map_v4(&mapped);
	p.steer[p.nsteer++] = mapped; /* as resolved for a dual-stack listener */
	p.steer[p.nsteer++] = m6;
	for (p.owner = 0; p.owner < 4; p.owner++) {
		assert_int_equal(reuseport_pick(&p, &m4), p.owner);
		assert_int_equal(run_for(&p, &m4), p.owner);
		assert_int_equal(reuseport_pick(&p, &m6), p.owner);
		assert_int_equal(run_for(&p, &m6), p.owner);
		/* Its /64 neighbour goes by the hash, like everyone else. */
		assert_int_equal(run_for(&p, &near6), reuseport_pick(&p, &near6));
		other += reuseport_pick(&p, &near6) != p.owner;
	}
	assert_int_equal(other, 3);
}

static void test_reuseport_refuses_a_plan_out_of_range(void **state)
{
	struct sock_filter prog[REUSEPORT_PROG_MAX];
	struct reuseport_plan p = {.workers = 0, .key = 1};

	(void)state;
	assert_int_equal(reuseport_build(&p, prog), -EINVAL);
	p.workers = REUSEPORT_WORKERS_MAX + 1;
	assert_int_equal(reuseport_build(&p, prog), -EINVAL);
	p.workers = 2;
	p.owner = 2;
	assert_int_equal(reuseport_build(&p, prog), -EINVAL);
	p.owner = 0;
	p.nsteer = REUSEPORT_STEER_MAX + 1;
	assert_int_equal(reuseport_build(&p, prog), -EINVAL);
}

static void test_reuseport_the_largest_program_fits(void **state)
{
	struct sock_filter prog[REUSEPORT_PROG_MAX];
	struct reuseport_plan p = {.workers = REUSEPORT_WORKERS_MAX, .key = 3};
	union etr_sockaddr m = sa("[2001:db8::1]:1");

	(void)state;
	for (unsigned i = 0; i < REUSEPORT_STEER_MAX; i++) {
		p.steer[i] = m;
		p.steer[i].in6.sin6_addr.s6_addr[15] = (uint8_t)i;
	}
	p.nsteer = REUSEPORT_STEER_MAX;
	p.owner = 63;
	assert_true(reuseport_build(&p, prog) <= REUSEPORT_PROG_MAX);
	for (unsigned i = 0; i < REUSEPORT_STEER_MAX; i++)
		assert_int_equal(run_for(&p, &p.steer[i]), 63);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reuseport_one_address_any_port_is_one_worker),
	    cmocka_unit_test(test_reuseport_ipv6_picks_by_its_slash_64),
	    cmocka_unit_test(test_reuseport_program_agrees_with_the_model),
	    cmocka_unit_test(test_reuseport_mapped_ipv4_is_picked_as_ipv4),
	    cmocka_unit_test(test_reuseport_200_loopback_sources_spread_over_two_workers),
	    cmocka_unit_test(test_reuseport_steered_addresses_reach_the_owner),
	    cmocka_unit_test(test_reuseport_refuses_a_plan_out_of_range),
	    cmocka_unit_test(test_reuseport_the_largest_program_fits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
