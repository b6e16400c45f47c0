/* SPDX-License-Identifier: ISC */
/* What the XDP program (etrelay.bpf.c) and its loader (xdp.c) share: the
 * maps' keys and values, their sizes, and the counters' reasons. */
#ifndef ETR_XDP_MAPS_H
#define ETR_XDP_MAPS_H

#include <linux/types.h>

#include "shape.h"

#define XDP_PORTS_MAX	256
#define XDP_BANS_MAX	65536
#define XDP_KNOWN_MAX	65536
#define XDP_BUCKETS_MAX 131072

/* An address as 16 bytes, IPv4 as ::ffff:a.b.c.d (network order). */
struct xdp_addr {
	__u8 b[16];
};

/* The LPM trie's key: the prefix length over the 128 bits. */
struct xdp_lpm_key {
	__u32 prefixlen;
	__u8 addr[16];
};

/* The token bucket, as GCRA: a packet every interval_ns, tolerance_ns of
 * burst (interval_ns 0: no bucket). */
struct xdp_params {
	__u64 interval_ns;
	__u64 tolerance_ns;
	/* Steps of the Quake 3 line walk (a byte each) a CPU may spend each
	 * second on lines longer than XDP_WALK_FREE bytes; past it such a
	 * line goes by the bucket alone, unwalked (0: no limit). */
	__u64 walk_steps;
	/* The budget of frames from sources not known (GCRA per CPU, as
	 * above; budget_interval_ns 0: none): what the program passes from
	 * every such source together, that a flood of fresh sources (each
	 * within its own bucket) cannot fill the listeners' receive queues. */
	__u64 budget_interval_ns;
	__u64 budget_tolerance_ns;
};

/* The budget's burst per CPU at most: frames a listener's receive queue
 * (4 MiB of page-sized buffers, some 900) takes from two CPUs at once,
 * with room left for the known sources' packets. */
#define XDP_BUDGET_BURST_MAX 256

/* A line this long or shorter is always walked (at most some 130 steps). */
#define XDP_WALK_FREE 64

/* The loader's walk budget: about 2 % of a core at ~11 ns a step. */
#define XDP_WALK_STEPS 2000000

/* A CPU's walk budget: the second it counts in, the steps spent; and the
 * long lines it left unwalked since the program was loaded (the budget
 * spent: they went by their source's bucket alone). */
struct xdp_walk {
	__u64 window_ns;
	__u64 steps;
	__u64 unwalked;
};

/* Each packet to a listener port, counted once by its listener (shape.h's
 * enum shape_kind) and its verdict: etr_counts[listener * XDP_RESULTS +
 * result]. */
enum xdp_result {
	XDP_R_PASSED, /* its listener's shape, within its source's bucket */
	XDP_R_KNOWN,  /* a known source: passed at once */
	XDP_R_BOGON,
	XDP_R_BANNED,
	XDP_R_SHAPE,  /* not its listener's shape (shape.h) */
	XDP_R_RATE,   /* over its source's bucket */
	XDP_R_BUDGET, /* within its bucket, over the CPU's budget for them */
	XDP_RESULTS
};

/* A port's entry in etr_ports: its listeners, a bit (1 << SHAPE_*) each. */
#define XDP_PORT_GAME (1u << SHAPE_GAME)
#define XDP_PORT_TURN (1u << SHAPE_TURN)
#define XDP_PORT_PRBE (1u << SHAPE_PRBE)

#endif
