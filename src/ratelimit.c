/* SPDX-License-Identifier: ISC */
/* Token buckets in integer fixed point, a per-source table of them with
 * bounded memory, and the tiered global budget. */
#include "ratelimit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Marks a used slot's key; no real key has it (see rl_key). */
#define RL_USED (1ull << 63)

/* Tokens at `now` of a bucket that held `tokens` at `last`. A clock that
 * goes backwards refills nothing. */
static uint64_t refill(uint64_t burst, uint64_t rate, uint64_t tokens, uint64_t last, uint64_t now)
{
	uint64_t elapsed, need;

	if (tokens >= burst)
		return burst;
	if (now <= last || rate == 0)
		return tokens;
	elapsed = now - last;
	need = burst - tokens;
	/* Compare before multiplying: a long idle time would overflow. Below
	 * the bound, elapsed * rate <= need. */
	if (elapsed > need / rate)
		return burst;
	return tokens + elapsed * rate;
}

static uint64_t later(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

void rl_bucket_init(struct rl_bucket *b, unsigned burst, unsigned per_sec, uint64_t now)
{
	b->burst = (uint64_t)burst * RL_ONE;
	b->rate = per_sec;
	b->tokens = b->burst;
	b->last = now;
}

bool rl_take(struct rl_bucket *b, uint64_t now)
{
	b->tokens = refill(b->burst, b->rate, b->tokens, b->last, now);
	b->last = later(b->last, now);
	if (b->tokens < RL_ONE)
		return false;
	b->tokens -= RL_ONE;
	return true;
}

bool rl_take_n(struct rl_bucket *b, uint64_t n, uint64_t now)
{
	b->tokens = refill(b->burst, b->rate, b->tokens, b->last, now);
	b->last = later(b->last, now);
	if (n > b->burst / RL_ONE || b->tokens < n * RL_ONE)
		return false;
	b->tokens -= n * RL_ONE;
	return true;
}

unsigned rl_available(const struct rl_bucket *b, uint64_t now)
{
	return (unsigned)(refill(b->burst, b->rate, b->tokens, b->last, now) / RL_ONE);
}

/* The table key of a source: IPv4 and IPv4-mapped IPv6 as ::ffff:a.b.c.d
 * (hi 0, lo 0000ffff_aabbccdd), other IPv6 as its /64 (hi prefix, lo 0).
 * RL_USED keeps every key apart from an empty slot. */
static bool rl_key(const union etr_sockaddr *src, uint64_t *hi, uint64_t *lo)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	const uint8_t *a;
	uint64_t h = 0;

	if (src->sa.sa_family == AF_INET) {
		*hi = 0;
		*lo = RL_USED | 0xffff00000000ull | ntohl(src->in.sin_addr.s_addr);
		return true;
	}
	if (src->sa.sa_family != AF_INET6)
		return false;
	a = src->in6.sin6_addr.s6_addr;
	if (memcmp(a, mapped, 12) == 0) {
		uint32_t v4;

		memcpy(&v4, a + 12, 4);
		*hi = 0;
		*lo = RL_USED | 0xffff00000000ull | ntohl(v4);
		return true;
	}
	for (int i = 0; i < RL_V6_PREFIX_BITS / 8; i++)
		h = h << 8 | a[i];
	*hi = h;
	*lo = RL_USED;
	return true;
}

/* addr_hash over the key as an IPv6 sockaddr with port and scope 0. */
static uint64_t rl_hash(const struct rl_table *t, uint64_t hi, uint64_t lo)
{
	union etr_sockaddr k;
	uint32_t v4 = htonl((uint32_t)lo);

	memset(&k, 0, sizeof(k));
	k.in6.sin6_family = AF_INET6;
	for (int i = 0; i < 8; i++)
		k.in6.sin6_addr.s6_addr[i] = (uint8_t)(hi >> (56 - 8 * i));
	if (lo & 0xffff00000000ull) {
		k.in6.sin6_addr.s6_addr[10] = 0xff;
		k.in6.sin6_addr.s6_addr[11] = 0xff;
		memcpy(&k.in6.sin6_addr.s6_addr[12], &v4, 4);
	}
	return addr_hash(&k, t->key);
}

int rl_table_init(struct rl_table *t, uint32_t entries, unsigned burst, unsigned per_sec,
		  const uint8_t key[16])
{
	uint32_t n = RL_TABLE_WAYS;

	memset(t, 0, sizeof(*t));
	if (entries > RL_TABLE_MAX || burst == 0)
		return -EINVAL;
	while (n < entries)
		n <<= 1;
	t->slot = calloc(n, sizeof(*t->slot));
	if (!t->slot)
		return -ENOMEM;
	t->sets_mask = n / RL_TABLE_WAYS - 1;
	t->entries = n;
	t->burst = (uint64_t)burst * RL_ONE;
	t->rate = per_sec;
	memcpy(t->key, key, 16);
	return 0;
}

static bool take_entry(const struct rl_table *t, struct rl_entry *e, uint64_t now)
{
	e->tokens = refill(t->burst, t->rate, e->tokens, e->last, now);
	e->last = later(e->last, now);
	if (e->tokens < RL_ONE)
		return false;
	e->tokens -= RL_ONE;
	return true;
}

/* Look for the key in one set. Slots of a set fill in order and are reused,
 * never emptied, so the search ends at the first empty slot; *used is the
 * number of slots in use. */
static struct rl_entry *set_find(struct rl_entry *set, uint64_t hi, uint64_t lo, unsigned *used)
{
	unsigned k;

	for (k = 0; k < RL_TABLE_WAYS && set[k].lo != 0; k++)
		if (set[k].hi == hi && set[k].lo == lo)
			return &set[k];
	*used = k;
	return NULL;
}

/* Both sets are full: a bucket that has refilled to burst is as good as no
 * entry, so take one of those first; else the least recently used. */
static struct rl_entry *victim(struct rl_table *t, struct rl_entry *sets[2], uint64_t now)
{
	struct rl_entry *v = NULL;

	for (int s = 0; s < 2; s++)
		for (unsigned k = 0; k < RL_TABLE_WAYS; k++) {
			struct rl_entry *e = &sets[s][k];

			if (refill(t->burst, t->rate, e->tokens, e->last, now) >= t->burst) {
				t->recycled++;
				return e;
			}
			if (!v || e->last < v->last)
				v = e;
		}
	t->evicted++;
	return v;
}

bool rl_table_allow(struct rl_table *t, const union etr_sockaddr *src, uint64_t now)
{
	struct rl_entry *sets[2], *e;
	unsigned used[2];
	uint64_t hi, lo, h;

	if (!rl_key(src, &hi, &lo))
		return false;
	/* Two candidate sets from one keyed hash: the emptier one takes a new
	 * source, which keeps sets even (the power of two choices). */
	h = rl_hash(t, hi, lo);
	sets[0] = &t->slot[(size_t)((uint32_t)h & t->sets_mask) * RL_TABLE_WAYS];
	sets[1] = &t->slot[(size_t)((uint32_t)(h >> 32) & t->sets_mask) * RL_TABLE_WAYS];
	for (int s = 0; s < 2; s++) {
		e = set_find(sets[s], hi, lo, &used[s]);
		if (e)
			return take_entry(t, e, now);
	}
	if (used[0] < RL_TABLE_WAYS || used[1] < RL_TABLE_WAYS)
		e = used[1] < used[0] ? &sets[1][used[1]] : &sets[0][used[0]];
	else
		e = victim(t, sets, now);
	e->hi = hi;
	e->lo = lo;
	e->tokens = t->burst - RL_ONE;
	e->last = now;
	return true;
}

void rl_table_free(struct rl_table *t)
{
	free(t->slot);
	memset(t, 0, sizeof(*t));
}

enum rl_class rl_budget_class(enum q3_cmd cmd, bool from_master, bool connect_counts)
{
	switch (cmd) {
	case Q3_GETINFO:
	case Q3_GETSTATUS:
		return from_master ? RL_MASTER : RL_BROWSER;
	case Q3_GETCHALLENGE:
		return from_master ? RL_MASTER : RL_PLAYER;
	case Q3_CONNECT:
		return connect_counts ? RL_PLAYER : RL_FREE;
	case Q3_RCON:
		/* An admin's: not guaranteed, but not behind the browsers. */
		return RL_PLAYER;
	default:
		return RL_FREE;
	}
}

int rl_budget_init(struct rl_budget *b, unsigned burst, unsigned per_sec, unsigned reserve_master,
		   unsigned reserve_player, uint64_t now)
{
	memset(b, 0, sizeof(*b));
	if ((uint64_t)reserve_master + reserve_player >= burst)
		return -EINVAL;
	b->burst = (uint64_t)burst * RL_ONE;
	b->rate = per_sec;
	b->last = now;
	b->res_max[0] = b->res[0] = (uint64_t)reserve_master * RL_ONE;
	b->res_max[1] = b->res[1] = (uint64_t)reserve_player * RL_ONE;
	b->shared = b->burst - b->res[0] - b->res[1];
	return 0;
}

/* Give `add` to a reserve up to its maximum; returns what is left over. */
static uint64_t fill(uint64_t *level, uint64_t max, uint64_t add)
{
	uint64_t take = max - *level < add ? max - *level : add;

	*level += take;
	return add - take;
}

/* What the bucket earned since `last` goes to the reserves first (half
 * each, the rest to whichever still lacks), then to the shared part. */
static void budget_refill(struct rl_budget *b, uint64_t now)
{
	uint64_t elapsed, add, half, cap;

	if (now <= b->last)
		return;
	elapsed = now - b->last;
	b->last = now;
	if (b->rate == 0)
		return;
	/* Capped before multiplying: a long idle time would overflow. */
	add = elapsed > b->burst / b->rate ? b->burst : elapsed * b->rate;
	half = add / 2;
	add = add - half + fill(&b->res[0], b->res_max[0], half);
	add = fill(&b->res[1], b->res_max[1], add);
	add = fill(&b->res[0], b->res_max[0], add);
	cap = b->burst - b->res_max[0] - b->res_max[1];
	b->shared = b->shared + add > cap ? cap : b->shared + add;
}

bool rl_budget_take(struct rl_budget *b, enum rl_class cls, uint64_t now)
{
	uint64_t *own;

	if (cls == RL_FREE)
		return true;
	budget_refill(b, now);
	/* Its own reserve first: the shared tokens are all browsers have,
	 * and a reserve refills before them anyway. */
	own = cls == RL_BROWSER ? NULL : &b->res[cls == RL_MASTER ? 0 : 1];
	if (own && *own >= RL_ONE) {
		*own -= RL_ONE;
		return true;
	}
	if (b->shared < RL_ONE)
		return false;
	b->shared -= RL_ONE;
	return true;
}

unsigned rl_budget_left(struct rl_budget *b, enum rl_class part, uint64_t now)
{
	budget_refill(b, now);
	if (part == RL_MASTER)
		return (unsigned)(b->res[0] / RL_ONE);
	if (part == RL_PLAYER)
		return (unsigned)(b->res[1] / RL_ONE);
	return (unsigned)(b->shared / RL_ONE);
}
