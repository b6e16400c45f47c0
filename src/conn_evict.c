/* SPDX-License-Identifier: ISC */
#include "conn_evict.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int conn_evict_init(struct conn_evict *e, uint32_t max)
{
	uint32_t size = 16;

	/* At most half full: short probe chains. */
	while (size < 2 * (uint64_t)max)
		size *= 2;
	e->t = calloc(size, sizeof(*e->t));
	if (!e->t)
		return -ENOMEM;
	e->mask = size - 1;
	e->max = max;
	return 0;
}

void conn_evict_free(struct conn_evict *e)
{
	free(e->t);
	e->t = NULL;
	e->mask = e->max = 0;
}

static uint32_t slot_of(const struct conn_evict *e, const uint8_t *key)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (unsigned i = 0; i < ADDRCLASS_KEY_LEN; i++)
		h = (h ^ key[i]) * 0x100000001b3ull;
	return (uint32_t)(h ^ h >> 29) & e->mask;
}

int32_t conn_evict_pick(struct conn_evict *e, const uint8_t (*keys)[ADDRCLASS_KEY_LEN],
		       uint32_t n)
{
	struct conn_evict_slot *best = NULL;

	if (n > e->max)
		n = e->max;
	if (n == 0)
		return -1;
	memset(e->t, 0, ((size_t)e->mask + 1) * sizeof(*e->t));
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = slot_of(e, keys[i]);
		struct conn_evict_slot *x;

		while (e->t[s].count && memcmp(e->t[s].key, keys[i], ADDRCLASS_KEY_LEN) != 0)
			s = (s + 1) & e->mask;
		x = &e->t[s];
		if (!x->count) {
			memcpy(x->key, keys[i], ADDRCLASS_KEY_LEN);
			x->first = i;
		}
		x->count++;
		/* Keys come oldest first: a tie keeps the address seen first. */
		if (!best || x->count > best->count || (x->count == best->count && x->first < best->first))
			best = x;
	}
	return (int32_t)best->first;
}
