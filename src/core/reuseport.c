/* SPDX-License-Identifier: ISC */
/* The reuseport program and its model: one hash of the source address, the
 * same in BPF and in C, so that a test (and an operator) can say which
 * worker a client lands on. */
#include "reuseport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "addrclass.h"

/* Multiply, fold the high half down, multiply again, keep the high half:
 * every bit of the address moves the result, whatever its place (clients
 * of one provider differ in their low bits, IPv6 /64s in their middle
 * ones). Nothing but 32-bit multiply, shift, xor: classic BPF has them. */
static uint32_t finish(uint32_t key, uint32_t h)
{
	h *= key;
	h ^= h >> 16;
	h *= key;
	return h >> 16;
}

uint32_t reuseport_hash_v4(uint32_t key, uint32_t v4)
{
	return finish(key, v4);
}

uint32_t reuseport_hash_v6(uint32_t key, uint32_t hi, uint32_t lo)
{
	return finish(key, lo ^ hi * key);
}

static uint32_t word(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

unsigned reuseport_pick(const struct reuseport_plan *p, const union etr_sockaddr *src)
{
	uint32_t v4;
	const uint8_t *b;

	if (p->workers <= 1)
		return 0;
	for (unsigned i = 0; i < p->nsteer; i++) {
		uint32_t s4;

		if (addrclass_v4(src, &v4)) {
			if (addrclass_v4(&p->steer[i], &s4) && s4 == v4)
				return p->owner;
		} else if (src->sa.sa_family == AF_INET6 && p->steer[i].sa.sa_family == AF_INET6 &&
			   !addrclass_v4(&p->steer[i], &s4) &&
			   memcmp(&src->in6.sin6_addr, &p->steer[i].in6.sin6_addr, 16) == 0) {
			return p->owner;
		}
	}
	if (addrclass_v4(src, &v4))
		return reuseport_hash_v4(p->key, v4) % p->workers;
	if (src->sa.sa_family != AF_INET6)
		return 0;
	b = src->in6.sin6_addr.s6_addr;
	return reuseport_hash_v6(p->key, word(b), word(b + 4)) % p->workers;
}

/* Offsets into the IPv4 and IPv6 headers, from SKF_NET_OFF. */
#define NET(off) ((uint32_t)(SKF_NET_OFF + (off)))
#define V4_SRC	 12
#define V6_SRC	 8

struct emit {
	struct sock_filter *prog;
	unsigned n;
};

static unsigned put(struct emit *e, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	e->prog[e->n] = (struct sock_filter){code, jt, jf, k};
	return e->n++;
}

/* A jump's target is relative to the instruction after it. */
static void patch_jt(struct emit *e, unsigned at, unsigned target)
{
	e->prog[at].jt = (uint8_t)(target - at - 1);
}

static void patch_jf(struct emit *e, unsigned at, unsigned target)
{
	e->prog[at].jf = (uint8_t)(target - at - 1);
}

/* A = finish(key, A) % workers; return A. */
static void emit_finish(struct emit *e, const struct reuseport_plan *p)
{
	put(e, BPF_ALU | BPF_MUL | BPF_K, 0, 0, p->key);
	put(e, BPF_MISC | BPF_TAX, 0, 0, 0);
	put(e, BPF_ALU | BPF_RSH | BPF_K, 0, 0, 16);
	put(e, BPF_ALU | BPF_XOR | BPF_X, 0, 0, 0);
	put(e, BPF_ALU | BPF_MUL | BPF_K, 0, 0, p->key);
	put(e, BPF_ALU | BPF_RSH | BPF_K, 0, 0, 16);
	put(e, BPF_ALU | BPF_MOD | BPF_K, 0, 0, p->workers);
	put(e, BPF_RET | BPF_A, 0, 0, 0);
}

int reuseport_build(const struct reuseport_plan *p, struct sock_filter *prog)
{
	struct emit e = {prog, 0};
	unsigned to_owner[4 * REUSEPORT_STEER_MAX], nowner = 0;
	unsigned skip[3 * REUSEPORT_STEER_MAX], nskip = 0;
	unsigned is_v4, is_v6, owner_at;
	uint32_t s4;

	if (p->workers < 1 || p->workers > REUSEPORT_WORKERS_MAX || p->owner >= p->workers ||
	    p->nsteer > REUSEPORT_STEER_MAX)
		return -EINVAL;
	if (p->workers == 1) {
		put(&e, BPF_RET | BPF_K, 0, 0, 0);
		return (int)e.n;
	}
	/* The IP version, from the header's first nibble: a dual-stack IPv6
	 * socket receives IPv4 datagrams with their IPv4 header. */
	put(&e, BPF_LD | BPF_B | BPF_ABS, 0, 0, NET(0));
	put(&e, BPF_ALU | BPF_AND | BPF_K, 0, 0, 0xf0);
	is_v4 = put(&e, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 0x40);
	is_v6 = put(&e, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 0x60);
	/* Neither: socket 0 (cannot happen on an IP socket). */
	put(&e, BPF_RET | BPF_K, 0, 0, 0);

	patch_jt(&e, is_v4, e.n);
	put(&e, BPF_LD | BPF_W | BPF_ABS, 0, 0, NET(V4_SRC));
	for (unsigned i = 0; i < p->nsteer; i++)
		if (addrclass_v4(&p->steer[i], &s4))
			to_owner[nowner++] = put(&e, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, s4);
	emit_finish(&e, p);

	patch_jt(&e, is_v6, e.n);
	for (unsigned i = 0; i < p->nsteer; i++) {
		const uint8_t *b = p->steer[i].in6.sin6_addr.s6_addr;
		unsigned first = nskip;

		if (p->steer[i].sa.sa_family != AF_INET6 || addrclass_v4(&p->steer[i], &s4))
			continue;
		for (unsigned w = 0; w < 4; w++) {
			put(&e, BPF_LD | BPF_W | BPF_ABS, 0, 0, NET(V6_SRC + 4 * w));
			if (w < 3)
				skip[nskip++] =
				    put(&e, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, word(b + 4 * w));
			else
				to_owner[nowner++] =
				    put(&e, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, word(b + 12));
		}
		/* A word that differs: on to the next address. */
		for (unsigned j = first; j < nskip; j++)
			patch_jf(&e, skip[j], e.n);
	}
	put(&e, BPF_LD | BPF_W | BPF_ABS, 0, 0, NET(V6_SRC));
	put(&e, BPF_ALU | BPF_MUL | BPF_K, 0, 0, p->key);
	put(&e, BPF_MISC | BPF_TAX, 0, 0, 0);
	put(&e, BPF_LD | BPF_W | BPF_ABS, 0, 0, NET(V6_SRC + 4));
	put(&e, BPF_ALU | BPF_XOR | BPF_X, 0, 0, 0);
	emit_finish(&e, p);

	owner_at = put(&e, BPF_RET | BPF_K, 0, 0, p->owner);
	for (unsigned j = 0; j < nowner; j++)
		patch_jt(&e, to_owner[j], owner_at);
	return (int)e.n;
}
