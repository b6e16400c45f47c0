/* SPDX-License-Identifier: ISC */
/* Latency histogram: log-linear buckets, better than 1 % relative error from
 * 1 ns to 1000 s, fixed size, no allocation. */
#ifndef ETR_HIST_H
#define ETR_HIST_H

#include <stdint.h>

/* Values below 2^HIST_SUB_BITS are exact; above, each power of two is cut
 * into 2^(HIST_SUB_BITS-1) equal buckets. */
#define HIST_SUB_BITS 7
#define HIST_MAX_EXP  40 /* 2^40 ns is about 18 minutes */
#define HIST_BUCKETS                                                                               \
	((1u << HIST_SUB_BITS) + (HIST_MAX_EXP - HIST_SUB_BITS + 1) * (1u << (HIST_SUB_BITS - 1)))

struct hist {
	uint64_t n[HIST_BUCKETS];
	uint64_t count;
	uint64_t max;
	uint64_t min;
	double sum;
};

void hist_reset(struct hist *h);

/* Count one value (ns); values past the top land in the last bucket. */
void hist_add(struct hist *h, uint64_t v);

/* The value at quantile q (0..1): the middle of its bucket, at most max. 0
 * when empty. */
uint64_t hist_quantile(const struct hist *h, double q);

#endif
