/* SPDX-License-Identifier: ISC */
/* Log-linear latency histogram (the HdrHistogram idea in a page of C). */
#include "hist.h"

#include <string.h>

#define HALF (1u << (HIST_SUB_BITS - 1))

static unsigned bucket_of(uint64_t v)
{
	unsigned e, b;

	if (v < (1u << HIST_SUB_BITS))
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v); /* >= HIST_SUB_BITS */
	if (e > HIST_MAX_EXP)
		return HIST_BUCKETS - 1;
	/* Keep the top HIST_SUB_BITS bits: HALF..2*HALF-1 after the shift. */
	b = (unsigned)(v >> (e - HIST_SUB_BITS + 1)) - HALF;
	return (1u << HIST_SUB_BITS) + (e - HIST_SUB_BITS) * HALF + b;
}

/* Lower bound and width of a bucket. */
static void bucket_range(unsigned i, uint64_t *lo, uint64_t *width)
{
	unsigned e, b;

	if (i < (1u << HIST_SUB_BITS)) {
		*lo = i;
		*width = 1;
		return;
	}
	i -= 1u << HIST_SUB_BITS;
	e = i / HALF + HIST_SUB_BITS;
	b = i % HALF;
	*width = 1ull << (e - HIST_SUB_BITS + 1);
	*lo = (uint64_t)(HALF + b) * *width;
}

void hist_reset(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

void hist_add(struct hist *h, uint64_t v)
{
	h->n[bucket_of(v)]++;
	h->count++;
	h->sum += (double)v;
	if (v > h->max)
		h->max = v;
	if (v < h->min)
		h->min = v;
}

uint64_t hist_quantile(const struct hist *h, double q)
{
	uint64_t rank, seen = 0;

	if (h->count == 0)
		return 0;
	/* The smallest value with at least q of the samples at or below it. */
	rank = (uint64_t)(q * (double)h->count + 0.5);
	if (rank < 1)
		rank = 1;
	if (rank > h->count)
		rank = h->count;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->n[i];
		if (seen >= rank) {
			uint64_t lo, width, mid;

			bucket_range(i, &lo, &width);
			mid = lo + width / 2;
			if (mid > h->max)
				mid = h->max;
			if (mid < h->min)
				mid = h->min;
			return mid;
		}
	}
	return h->max;
}
