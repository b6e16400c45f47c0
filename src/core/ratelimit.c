/* SPDX-License-Identifier: ISC */
/* Token buckets in integer fixed point, a per-source table of them with
 * bounded memory, and the tiered global budget. */
#include "ratelimit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "addrclass.h"

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

/* The table key of a source's prefix: IPv4 and IPv4-mapped IPv6 as
 * ::ffff:a.b.c.d cut to v4_bits (hi 0, lo 0000ffff_aabbccdd), other IPv6
 * as its first v6_bits (hi prefix, lo 0). RL_USED keeps every key apart
 * from an empty slot. */
static bool rl_key_bits(const union etr_sockaddr *src, unsigned v4_bits, unsigned v6_bits,
			uint64_t *hi, uint64_t *lo)
{
	uint8_t k[ADDRCLASS_KEY_LEN];
	uint64_t h = 0, l = 0;

	if (!addrclass_prefix(src, v4_bits, v6_bits, k))
		return false;
	for (int i = 0; i < 8; i++) {
		h = h << 8 | k[i];
		l = l << 8 | k[8 + i];
	}
	*hi = h;
	*lo = RL_USED | l;
	return true;
}

/* The per-source key: an IPv4 address, an IPv6 /64. */
static bool rl_key(const union etr_sockaddr *src, uint64_t *hi, uint64_t *lo)
{
	return rl_key_bits(src, 32, RL_V6_PREFIX_BITS, hi, lo);
}

/* addr_hash over the key as an IPv6 sockaddr with port and scope 0. */
static uint64_t rl_hash(const uint8_t key[16], uint64_t hi, uint64_t lo)
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
	return addr_hash(&k, key);
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
	h = rl_hash(t->key, hi, lo);
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

bool rl_table_has(const struct rl_table *t, const union etr_sockaddr *src, uint64_t now)
{
	struct rl_entry *set, *e;
	unsigned used;
	uint64_t hi, lo, h;

	if (!rl_key(src, &hi, &lo))
		return false;
	h = rl_hash(t->key, hi, lo);
	for (int s = 0; s < 2; s++) {
		set =
		    &t->slot[(size_t)((uint32_t)(s ? h >> 32 : h) & t->sets_mask) * RL_TABLE_WAYS];
		e = set_find(set, hi, lo, &used);
		if (e)
			return refill(t->burst, t->rate, e->tokens, e->last, now) >= RL_ONE;
	}
	return true;
}

void rl_table_free(struct rl_table *t)
{
	free(t->slot);
	memset(t, 0, sizeof(*t));
}

int rl_stamps_init(struct rl_stamps *t, uint32_t entries, unsigned v4_bits, unsigned v6_bits,
		   uint64_t ttl, const uint8_t key[16])
{
	uint32_t n = RL_TABLE_WAYS;

	memset(t, 0, sizeof(*t));
	if (entries > RL_TABLE_MAX || v4_bits < 8 || v4_bits > 32 || v6_bits < 8 || v6_bits > 64)
		return -EINVAL;
	while (n < entries)
		n <<= 1;
	t->slot = calloc(n, sizeof(*t->slot));
	if (!t->slot)
		return -ENOMEM;
	t->sets_mask = n / RL_TABLE_WAYS - 1;
	t->entries = n;
	t->v4_bits = (uint8_t)v4_bits;
	t->v6_bits = (uint8_t)v6_bits;
	t->ttl = ttl;
	memcpy(t->key, key, 16);
	return 0;
}

/* A stamp less than ttl old; one from the future counts as recent. */
static bool stamp_recent(const struct rl_stamps *t, const struct rl_entry *e, uint64_t now)
{
	return now < e->last || now - e->last < t->ttl;
}

/* The key's slot, or NULL; sets[] and used[] are filled for an insert. */
static struct rl_entry *stamps_find(const struct rl_stamps *t, uint64_t hi, uint64_t lo,
				    struct rl_entry *sets[2], unsigned used[2])
{
	struct rl_entry *e;
	uint64_t h = rl_hash(t->key, hi, lo);

	sets[0] = &t->slot[(size_t)((uint32_t)h & t->sets_mask) * RL_TABLE_WAYS];
	sets[1] = &t->slot[(size_t)((uint32_t)(h >> 32) & t->sets_mask) * RL_TABLE_WAYS];
	for (int s = 0; s < 2; s++) {
		e = set_find(sets[s], hi, lo, &used[s]);
		if (e)
			return e;
	}
	return NULL;
}

bool rl_stamps_recent(const struct rl_stamps *t, const union etr_sockaddr *src, uint64_t now)
{
	struct rl_entry *sets[2], *e;
	unsigned used[2];
	uint64_t hi, lo;

	if (!rl_key_bits(src, t->v4_bits, t->v6_bits, &hi, &lo))
		return false;
	e = stamps_find(t, hi, lo, sets, used);
	return e && stamp_recent(t, e, now);
}

void rl_stamps_mark(struct rl_stamps *t, const union etr_sockaddr *src, uint64_t now, bool credit)
{
	struct rl_entry *sets[2], *e, *v = NULL;
	unsigned used[2];
	uint64_t hi, lo;

	if (!rl_key_bits(src, t->v4_bits, t->v6_bits, &hi, &lo))
		return;
	e = stamps_find(t, hi, lo, sets, used);
	if (!e && (used[0] < RL_TABLE_WAYS || used[1] < RL_TABLE_WAYS))
		e = used[1] < used[0] ? &sets[1][used[1]] : &sets[0][used[0]];
	/* Both sets full: an old stamp is as good as none; else the oldest
	 * goes, which lets its network take a player's token a little early. */
	for (int s = 0; !e && s < 2; s++)
		for (unsigned k = 0; k < RL_TABLE_WAYS; k++) {
			if (!stamp_recent(t, &sets[s][k], now)) {
				e = &sets[s][k];
				break;
			}
			if (!v || sets[s][k].last < v->last)
				v = &sets[s][k];
		}
	if (!e) {
		t->evicted++;
		e = v;
	}
	if (e->hi != hi || e->lo != lo || !stamp_recent(t, e, now))
		e->tokens = 0; /* a new stamp: no credit carried over */
	e->hi = hi;
	e->lo = lo;
	e->last = now;
	if (credit)
		e->tokens = 1;
}

bool rl_stamps_use_credit(struct rl_stamps *t, const union etr_sockaddr *src, uint64_t now)
{
	struct rl_entry *sets[2], *e;
	unsigned used[2];
	uint64_t hi, lo;

	if (!rl_key_bits(src, t->v4_bits, t->v6_bits, &hi, &lo))
		return false;
	e = stamps_find(t, hi, lo, sets, used);
	if (!e || !stamp_recent(t, e, now) || e->tokens == 0)
		return false;
	e->tokens = 0;
	return true;
}

void rl_stamps_free(struct rl_stamps *t)
{
	free(t->slot);
	memset(t, 0, sizeof(*t));
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

int rl_budget_players(struct rl_budget *b, unsigned proven, unsigned fresh)
{
	if ((uint64_t)(proven + fresh) * RL_ONE > b->res_max[1])
		return -EINVAL;
	b->keep_proven = (uint64_t)proven * RL_ONE;
	b->keep_fresh = (uint64_t)fresh * RL_ONE;
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
	uint64_t *own, keep;

	if (cls == RL_FREE)
		return true;
	budget_refill(b, now);
	/* Its own reserve first: the shared tokens are all browsers have,
	 * and a reserve refills before them anyway. Of the players' reserve,
	 * a network seen lately leaves the last tokens to fresh networks and
	 * returning players, a fresh network the very last to the latter. */
	own = cls == RL_BROWSER || cls == RL_RCON ? NULL : &b->res[cls == RL_MASTER ? 0 : 1];
	keep = cls == RL_PLAYER_AGAIN ? b->keep_proven + b->keep_fresh
	       : cls == RL_PLAYER     ? b->keep_proven
				      : 0;
	if (own && *own >= RL_ONE + keep) {
		*own -= RL_ONE;
		return true;
	}
	/* rcon leaves the last shared token to a browser's cache refresh. */
	if (b->shared < RL_ONE || (cls == RL_RCON && b->shared < 2 * RL_ONE))
		return false;
	b->shared -= RL_ONE;
	return true;
}

unsigned rl_budget_left(struct rl_budget *b, enum rl_class part, uint64_t now)
{
	budget_refill(b, now);
	if (part == RL_MASTER)
		return (unsigned)(b->res[0] / RL_ONE);
	if (part == RL_PLAYER || part == RL_PLAYER_AGAIN || part == RL_PROVEN)
		return (unsigned)(b->res[1] / RL_ONE);
	return (unsigned)(b->shared / RL_ONE);
}
