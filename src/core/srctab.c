/* SPDX-License-Identifier: ISC */
/* Connections per source: keyed counts at three prefix levels, and the
 * heaviest source's oldest member for eviction. */
#include "srctab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "addrclass.h"

/* Prefix bits of each level (IPv4 has the address level only). */
static const unsigned level_bits[SRCTAB_LEVELS] = {ADDRCLASS_V6_PREFIX, 56, 48};

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t p = 16;

	while (p < n && p < (1u << 31))
		p <<= 1;
	return p;
}

static uint32_t mul_sat(uint32_t a, uint32_t b)
{
	uint64_t v = (uint64_t)a * b;

	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

int srctab_init(struct srctab *t, uint32_t sources, uint32_t per_ip, uint32_t members_max)
{
	uint64_t entries = (uint64_t)sources * SRCTAB_LEVELS + 1;
	uint32_t size;

	memset(t, 0, sizeof(*t));
	if (entries > (1u << 30))
		return -EINVAL;
	if (getrandom(t->key, sizeof(t->key), 0) != sizeof(t->key))
		return -errno;
	t->cap[SRCTAB_ADDR] = per_ip;
	t->cap[SRCTAB_P56] = mul_sat(per_ip, SRCTAB_P56_MULT);
	t->cap[SRCTAB_P48] = mul_sat(per_ip, SRCTAB_P48_MULT);
	/* At most half full: short probe chains. */
	size = pow2_at_least(2 * entries);
	t->nentries = (uint32_t)entries;
	t->e = calloc(entries, sizeof(*t->e));
	t->slot = malloc((size_t)size * sizeof(*t->slot));
	if (members_max) {
		t->m = malloc((size_t)members_max * sizeof(*t->m));
		t->heap = malloc((size_t)entries * sizeof(*t->heap));
	}
	if (!t->e || !t->slot || (members_max && (!t->m || !t->heap))) {
		srctab_free(t);
		return -ENOMEM;
	}
	t->mask = size - 1;
	memset(t->slot, 0xff, (size_t)size * sizeof(*t->slot));
	for (uint32_t i = 0; i < t->nentries; i++)
		t->e[i].next = i + 1 < t->nentries ? i + 1 : SRCTAB_NONE;
	t->free_entry = 0;
	t->members_max = members_max;
	for (uint32_t i = 0; i < members_max; i++)
		t->m[i].entry = SRCTAB_NONE;
	return 0;
}

void srctab_free(struct srctab *t)
{
	free(t->e);
	free(t->slot);
	free(t->m);
	free(t->heap);
	memset(t, 0, sizeof(*t));
}

/* The keys of a's levels: how many (1 for IPv4, 3 for IPv6, 0 for another
 * family). */
static unsigned keys_of(const union etr_sockaddr *a, uint8_t key[SRCTAB_LEVELS][16])
{
	if (!addrclass_key(a, key[SRCTAB_ADDR]))
		return 0;
	if (addrclass_key_is_v4(key[SRCTAB_ADDR]))
		return 1;
	for (unsigned lvl = 1; lvl < SRCTAB_LEVELS; lvl++)
		addrclass_prefix(a, 32, level_bits[lvl], key[lvl]);
	return SRCTAB_LEVELS;
}

static uint32_t hash_of(const struct srctab *t, const uint8_t key[16], unsigned lvl)
{
	uint8_t in[17];

	/* The level is hashed too: a /48's key is its first /64's. */
	memcpy(in, key, 16);
	in[16] = (uint8_t)lvl;
	return (uint32_t)addr_siphash(in, sizeof(in), t->key);
}

/* The slot holding (key, lvl), or the empty one ending its chain. */
static uint32_t find(struct srctab *t, const uint8_t key[16], unsigned lvl, uint32_t h)
{
	uint32_t s = h & t->mask, n = 0;

	for (; t->slot[s] != SRCTAB_NONE; s = (s + 1) & t->mask, n++) {
		const struct srctab_entry *x = &t->e[t->slot[s]];

		if (x->hash == h && x->level == lvl && memcmp(x->key, key, 16) == 0)
			break;
	}
	t->work += n + 1;
	if (n + 1 > t->probe_max)
		t->probe_max = n + 1;
	return s;
}

/* Remove the entry at slot s (count 0): backward-shift deletion keeps
 * every probe chain whole. */
static void unplace(struct srctab *t, uint32_t s)
{
	uint32_t hole = s, i = t->slot[s];

	t->e[i].next = t->free_entry;
	t->free_entry = i;
	t->used--;
	t->slot[s] = SRCTAB_NONE;
	for (s = (s + 1) & t->mask; t->slot[s] != SRCTAB_NONE; s = (s + 1) & t->mask) {
		uint32_t want = t->e[t->slot[s]].hash & t->mask;

		t->work++;
		if (((s - want) & t->mask) >= ((s - hole) & t->mask)) {
			t->slot[hole] = t->slot[s];
			t->slot[s] = SRCTAB_NONE;
			hole = s;
		}
	}
}

/* Heap order: more members first, then the oldest oldest member. */
static bool before(const struct srctab *t, uint32_t a, uint32_t b)
{
	const struct srctab_entry *x = &t->e[a], *y = &t->e[b];

	if (x->count != y->count)
		return x->count > y->count;
	return t->m[x->head].seq < t->m[y->head].seq;
}

static void heap_set(struct srctab *t, uint32_t pos, uint32_t ent)
{
	t->heap[pos] = ent;
	t->e[ent].heap = pos;
}

static void heap_fix(struct srctab *t, uint32_t pos)
{
	uint32_t ent = t->heap[pos];

	while (pos > 0 && before(t, ent, t->heap[(pos - 1) / 2])) {
		heap_set(t, pos, t->heap[(pos - 1) / 2]);
		pos = (pos - 1) / 2;
		t->work++;
	}
	for (;;) {
		uint32_t c = 2 * pos + 1;

		if (c >= t->nheap)
			break;
		if (c + 1 < t->nheap && before(t, t->heap[c + 1], t->heap[c]))
			c++;
		if (!before(t, t->heap[c], ent))
			break;
		heap_set(t, pos, t->heap[c]);
		pos = c;
		t->work++;
	}
	heap_set(t, pos, ent);
}

static void heap_remove(struct srctab *t, uint32_t ent)
{
	uint32_t pos = t->e[ent].heap, last = t->heap[--t->nheap];

	t->e[ent].heap = SRCTAB_NONE;
	if (last != ent) {
		heap_set(t, pos, last);
		heap_fix(t, pos);
	}
}

/* Count a's connection at every level; the address level's entry in *at.
 * False when a level is at its cap or no entry is free. */
static bool take(struct srctab *t, const union etr_sockaddr *a, uint32_t *at)
{
	uint8_t key[SRCTAB_LEVELS][16];
	uint32_t h[SRCTAB_LEVELS], s[SRCTAB_LEVELS];
	bool is_new[SRCTAB_LEVELS];
	unsigned n = keys_of(a, key), fresh = 0;

	*at = SRCTAB_NONE;
	if (n == 0)
		return true;
	for (unsigned lvl = 0; lvl < n; lvl++) {
		h[lvl] = hash_of(t, key[lvl], lvl);
		s[lvl] = find(t, key[lvl], lvl, h[lvl]);
		is_new[lvl] = t->slot[s[lvl]] == SRCTAB_NONE;
		if (is_new[lvl])
			fresh++;
		else if (t->cap[lvl] && t->e[t->slot[s[lvl]]].count >= t->cap[lvl])
			return false;
	}
	if (fresh > t->nentries - t->used)
		return false;
	for (unsigned lvl = 0; lvl < n; lvl++) {
		struct srctab_entry *x;

		if (is_new[lvl]) {
			uint32_t i = t->free_entry;

			/* A level placed before may have filled the empty
			 * slot this one found: look again. */
			s[lvl] = find(t, key[lvl], lvl, h[lvl]);
			x = &t->e[i];
			t->free_entry = x->next;
			t->used++;
			memcpy(x->key, key[lvl], 16);
			x->level = (uint8_t)lvl;
			x->hash = h[lvl];
			x->count = 0;
			x->heap = x->head = x->tail = SRCTAB_NONE;
			t->slot[s[lvl]] = i;
		}
		t->e[t->slot[s[lvl]]].count++;
	}
	*at = t->slot[s[SRCTAB_ADDR]];
	return true;
}

bool srctab_take(struct srctab *t, const union etr_sockaddr *a)
{
	uint32_t at;

	return take(t, a, &at);
}

void srctab_put(struct srctab *t, const union etr_sockaddr *a)
{
	uint8_t key[SRCTAB_LEVELS][16];
	unsigned n = keys_of(a, key);

	for (unsigned lvl = 0; lvl < n; lvl++) {
		uint32_t s = find(t, key[lvl], lvl, hash_of(t, key[lvl], lvl));

		if (t->slot[s] == SRCTAB_NONE)
			continue;
		if (--t->e[t->slot[s]].count == 0)
			unplace(t, s);
	}
}

uint32_t srctab_count(struct srctab *t, const union etr_sockaddr *a, unsigned lvl)
{
	uint8_t key[SRCTAB_LEVELS][16];
	uint32_t s;

	if (lvl >= keys_of(a, key))
		return 0;
	s = find(t, key[lvl], lvl, hash_of(t, key[lvl], lvl));
	return t->slot[s] == SRCTAB_NONE ? 0 : t->e[t->slot[s]].count;
}

bool srctab_join(struct srctab *t, uint32_t id, const union etr_sockaddr *a)
{
	struct srctab_member *m;
	struct srctab_entry *x;
	uint32_t at;

	if (id >= t->members_max || t->m[id].entry != SRCTAB_NONE)
		return false;
	if (!take(t, a, &at))
		return false;
	if (at == SRCTAB_NONE)
		return false;
	m = &t->m[id];
	x = &t->e[at];
	m->entry = at;
	m->seq = t->seq++;
	m->next = SRCTAB_NONE;
	m->prev = x->tail;
	if (x->tail == SRCTAB_NONE)
		x->head = id;
	else
		t->m[x->tail].next = id;
	x->tail = id;
	if (x->heap == SRCTAB_NONE)
		heap_set(t, t->nheap++, at);
	heap_fix(t, x->heap);
	return true;
}

void srctab_leave(struct srctab *t, uint32_t id)
{
	union etr_sockaddr a;
	struct srctab_member *m;
	struct srctab_entry *x;
	uint32_t at;

	if (id >= t->members_max || t->m[id].entry == SRCTAB_NONE)
		return;
	m = &t->m[id];
	at = m->entry;
	x = &t->e[at];
	if (m->prev == SRCTAB_NONE)
		x->head = m->next;
	else
		t->m[m->prev].next = m->next;
	if (m->next == SRCTAB_NONE)
		x->tail = m->prev;
	else
		t->m[m->next].prev = m->prev;
	m->entry = SRCTAB_NONE;
	/* Its address again, for srctab_put's walk of the levels: the
	 * address level's key is an address of the source. */
	memset(&a, 0, sizeof(a));
	a.in6.sin6_family = AF_INET6;
	a.in6.sin6_port = htons(1);
	memcpy(&a.in6.sin6_addr, x->key, 16);
	if (x->head == SRCTAB_NONE)
		heap_remove(t, at);
	/* The entry's count falls below: its place is fixed after the put. */
	srctab_put(t, &a);
	if (x->count && x->heap != SRCTAB_NONE)
		heap_fix(t, x->heap);
}

uint32_t srctab_heaviest(const struct srctab *t)
{
	if (!t->nheap)
		return SRCTAB_NONE;
	return t->e[t->heap[0]].head;
}
