/* SPDX-License-Identifier: ISC */
/* The classic BPF program that picks a worker's socket in a SO_REUSEPORT
 * group by the datagram's source address, and a C model of the same choice
 * (for tests, and for the operator's "which worker has this client").
 * Pure: builds instructions, attaches nothing (net_attach_reuseport does). */
#ifndef ETR_REUSEPORT_H
#define ETR_REUSEPORT_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"

/* Workers per process: the most a reuseport group gets from us. */
#define REUSEPORT_WORKERS_MAX 64
/* Addresses steered to one worker (a relay's masters). */
#define REUSEPORT_STEER_MAX 8
/* Instructions the program takes at most: 14 for the version test and the
 * two hashes, 2 per IPv4 address and 8 per IPv6 address steered. */
#define REUSEPORT_PROG_MAX (32 + 8 * REUSEPORT_STEER_MAX)

/* What the program decides by. */
struct reuseport_plan {
	unsigned workers; /* 1..REUSEPORT_WORKERS_MAX: the group's sockets */
	uint32_t key;	  /* odd: the hash's multiplier, random per process */
	/* Sources sent to `owner` whatever their hash (a relay's masters:
	 * their challenges must reach the worker that heartbeats them). */
	union etr_sockaddr steer[REUSEPORT_STEER_MAX];
	unsigned nsteer;
	unsigned owner;
};

/* A key for reuseport_plan from any 32 random bits (made odd). */
static inline uint32_t reuseport_key(uint32_t rnd)
{
	return rnd | 1u;
}

/* Build the program into prog (room for REUSEPORT_PROG_MAX). It reads the
 * IP header (SKF_NET_OFF): the IPv4 source, or the first 64 bits of the
 * IPv6 source, and returns the index of a socket in the group, which is
 * the order the sockets joined it (bound). Returns the instruction count,
 * or -EINVAL for a plan out of range. */
int reuseport_build(const struct reuseport_plan *p, struct sock_filter *prog);

/* The worker the program picks for a datagram from src (AF_INET, or
 * AF_INET6, where an IPv4-mapped address counts as the IPv4 it carries:
 * that is what a dual-stack socket receives). */
unsigned reuseport_pick(const struct reuseport_plan *p, const union etr_sockaddr *src);

/* The hash itself, exposed for tests and benchmarks: of an IPv4 source
 * (host byte order), or of the two high words of an IPv6 one. */
uint32_t reuseport_hash_v4(uint32_t key, uint32_t v4);
uint32_t reuseport_hash_v6(uint32_t key, uint32_t hi, uint32_t lo);

#endif
