/* SPDX-License-Identifier: ISC */
/* Token buckets: one per source address in a fixed-size table, and a global
 * budget with reserves for the master and for players. Pure: `now` is
 * CLOCK_MONOTONIC in nanoseconds, passed in.
 *
 * Why: the hidden game server (ioquake3, ET: Legacy with sv_protect 1)
 * answers getinfo, getstatus, getchallenge, rcon (and in ET: Legacy connect)
 * at most 10 at once then 1/s per source IP, and about 10/s in all. Behind the relay every packet
 * carries the relay's IP, so the server sees a single sender and one busy browser uses up
 * everyone's share. The relay knows the real sources: it limits each one (rl_table) and spends the
 * server's budget itself (rl_budget), so a browser storm can never spend what the master's
 * challenge or a player's getchallenge needs. A plain bucket also bounds the answers the relay
 * gives from its cache (packets and bytes per second). */
#ifndef ETR_RATELIMIT_H
#define ETR_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "addr.h"
#include "addrclass.h"

/* One token in fixed point: tokens count in token-nanoseconds, so a rate of
 * N tokens per second adds exactly N units per nanosecond. */
#define RL_ONE 1000000000ull

/* Slots in a set of the table: 8 x 32 bytes, four cache lines. */
#define RL_TABLE_WAYS 8

/* Most entries a table may have (32 bytes each: 512 MiB). */
#define RL_TABLE_MAX (1u << 24)

/* Sources are keyed as addrclass.h says: IPv6 share one bucket per /64,
 * the smallest block a subscriber gets. */
#define RL_V6_PREFIX_BITS ADDRCLASS_V6_PREFIX

/* A network, for sharing the players' tokens fairly: an IPv4 /24 or an
 * IPv6 /48 (a site: its /56 and /64 subnets are one network here). */
#define RL_NET_V4_BITS ADDRCLASS_NET_V4_BITS
#define RL_NET_V6_BITS ADDRCLASS_NET_V6_BITS

/* A token bucket; all fields in fixed point (RL_ONE is one token). */
struct rl_bucket {
	uint64_t burst;	 /* capacity */
	uint64_t rate;	 /* refill per nanosecond (= tokens per second) */
	uint64_t tokens; /* at time `last` */
	uint64_t last;	 /* monotonic ns of the last refill */
};

/* Fill b to `burst` tokens, refilling at `per_sec` tokens per second. */
void rl_bucket_init(struct rl_bucket *b, unsigned burst, unsigned per_sec, uint64_t now);

/* Take one token if there is one; false when the bucket is empty. */
bool rl_take(struct rl_bucket *b, uint64_t now);

/* Take n tokens at once, or none; false when fewer than n are left. */
bool rl_take_n(struct rl_bucket *b, uint64_t n, uint64_t now);

/* Whole tokens available at `now`. */
unsigned rl_available(const struct rl_bucket *b, uint64_t now);

/* One source's bucket: the key is the IPv6 form of the address (IPv4 as
 * ::ffff:a.b.c.d, IPv6 cut to its /64), plus a mark bit so that an all-zero
 * slot is empty. */
struct rl_entry {
	uint64_t hi, lo;
	uint64_t tokens;
	uint64_t last;
};

/* Per-source buckets, open addressing with a keyed hash: a source may live
 * in either of two sets of RL_TABLE_WAYS slots that the hash picks. Memory is
 * fixed at init: when both sets are full, a bucket that has refilled to
 * `burst` (as good as no entry) is reused first, else the least recently used
 * of the 16. A sender cannot aim at a set without the key. Counters are for
 * the metrics page. */
struct rl_table {
	struct rl_entry *slot;
	uint32_t entries;   /* slots, a power of two */
	uint32_t sets_mask; /* entries / RL_TABLE_WAYS - 1 */
	uint64_t burst;	    /* fixed point */
	uint64_t rate;	    /* fixed point per ns */
	uint8_t key[16];    /* hash key: random at startup */
	uint64_t recycled;  /* full-bucket entries reused: harmless */
	uint64_t evicted;   /* LRU entries dropped while not refilled */
};

/* Allocate `entries` slots (rounded up to a power of two, at least
 * RL_TABLE_WAYS), each source allowed `burst` packets at once then `per_sec`
 * per second. Returns 0, -EINVAL or -ENOMEM. */
int rl_table_init(struct rl_table *t, uint32_t entries, unsigned burst, unsigned per_sec,
		  const uint8_t key[16]);

/* Take a token from src's bucket (the port is ignored); false when the
 * source is over its limit or of an unknown family. */
bool rl_table_allow(struct rl_table *t, const union etr_sockaddr *src, uint64_t now);

/* Whether src's bucket holds a token now (one never seen does), without
 * taking it: for a budget charged only when the work it pays for failed.
 * False for an unknown family. */
bool rl_table_has(const struct rl_table *t, const union etr_sockaddr *src, uint64_t now);

/* Release the slots; t can be initialised again. */
void rl_table_free(struct rl_table *t);

/* A table of time stamps by source prefix, with the same bounded memory
 * and set choice as rl_table: when the source's network last did something
 * (took a player's token, was accepted as a player). A stamp older than
 * `ttl` is as good as none and its slot is reused first. */
struct rl_stamps {
	struct rl_entry *slot; /* .last is the stamp, .tokens a one-use credit */
	uint32_t entries;
	uint32_t sets_mask;
	uint8_t v4_bits, v6_bits; /* the prefix a source is counted in */
	uint64_t ttl;		  /* ns */
	uint8_t key[16];
	uint64_t evicted; /* stamps younger than ttl dropped for room */
};

/* Allocate `entries` slots (as rl_table_init) for stamps of sources grouped
 * by their IPv4 /v4_bits (8..32) or IPv6 /v6_bits (8..64), kept `ttl` ns.
 * Returns 0, -EINVAL or -ENOMEM. */
int rl_stamps_init(struct rl_stamps *t, uint32_t entries, unsigned v4_bits, unsigned v6_bits,
		   uint64_t ttl, const uint8_t key[16]);

/* True when src's prefix has a stamp less than ttl old at `now`. */
bool rl_stamps_recent(const struct rl_stamps *t, const union etr_sockaddr *src, uint64_t now);

/* Stamp src's prefix with `now`; with `credit`, give it one credit (see
 * rl_stamps_use_credit), else leave its credit as it is. */
void rl_stamps_mark(struct rl_stamps *t, const union etr_sockaddr *src, uint64_t now, bool credit);

/* Spend the credit of src's prefix's recent stamp: true once per mark. */
bool rl_stamps_use_credit(struct rl_stamps *t, const union etr_sockaddr *src, uint64_t now);

/* Release the slots; t can be initialised again. */
void rl_stamps_free(struct rl_stamps *t);

/* Who a packet to the game server is for. */
enum rl_class {
	RL_MASTER,  /* a master's getinfo/getstatus/getchallenge, the relay's probe */
	RL_PLAYER,  /* getchallenge, connect (where the game counts it) */
	RL_BROWSER, /* getinfo, getstatus from anyone else: a cache refresh or miss */
	RL_FREE,    /* a packet the game server does not count: no token */
	RL_RCON,    /* rcon: the shared tokens only, never the last one */
	/* What the relay makes of an RL_PLAYER packet (q3_budget_class never
	 * returns these): */
	RL_PLAYER_AGAIN, /* from a prefix that took a player's token lately */
	RL_PROVEN,	 /* from an IP the game server accepted as a player lately */
};

/* The game server's budget as the relay spends it: one bucket of `burst`
 * tokens refilled at `rate`, split in three. A reserve for masters and one
 * for players are refilled first, half each; the rest is shared. A master
 * or a player takes from its own reserve first and from the shared tokens
 * after; a browser takes only shared tokens. So neither masters nor players can
 * take what the other is guaranteed, and browsers take neither. Within the
 * players' reserve (rl_budget_players), RL_PLAYER leaves the last
 * `keep_proven` tokens to RL_PROVEN, RL_PLAYER_AGAIN the last
 * `keep_proven + keep_fresh` to both. */
struct rl_budget {
	uint64_t burst;		     /* fixed point, all three parts */
	uint64_t rate;		     /* per ns */
	uint64_t last;		     /* monotonic ns of the last refill */
	uint64_t shared;	     /* fixed point */
	uint64_t res[2], res_max[2]; /* [0] masters, [1] players */
	uint64_t keep_proven;	     /* fixed point, see above */
	uint64_t keep_fresh;
};

/* A full budget of `burst` tokens refilled at `per_sec` per second, with
 * the reserves given. Returns 0, or -EINVAL when the reserves leave no
 * shared token. */
int rl_budget_init(struct rl_budget *b, unsigned burst, unsigned per_sec, unsigned reserve_master,
		   unsigned reserve_player, uint64_t now);

/* Keep the last `proven` tokens of the players' reserve for RL_PROVEN,
 * and `fresh` more from RL_PLAYER_AGAIN. Returns 0, or -EINVAL when the
 * players' reserve is smaller than both together. */
int rl_budget_players(struct rl_budget *b, unsigned proven, unsigned fresh);

/* Spend one token for a packet of class cls; false when cls must wait.
 * RL_FREE always passes and spends nothing. */
bool rl_budget_take(struct rl_budget *b, enum rl_class cls, uint64_t now);

/* Whole tokens left at `now`: shared, or in a class's reserve (RL_MASTER,
 * RL_PLAYER and its kinds). */
unsigned rl_budget_left(struct rl_budget *b, enum rl_class part, uint64_t now);

/* A table's hash key: 128 bits from random64 (getrandom in the daemon,
 * a fixed sequence in tests). */
static inline void rl_random_key(uint64_t (*random64)(void), uint8_t key[16])
{
	uint64_t v[2] = {random64(), random64()};

	memcpy(key, v, sizeof(v));
}

/* Workers: a worker's tables are its share of the sources (the reuseport
 * program picks a worker by source address), smaller, down to this. */
#define RL_WORKER_ENTRIES_MIN 4096

/* A worker's part of a relay-wide rate: the rates that bound what a relay
 * sends or opens per second are split evenly (at least 1), so that they
 * hold as totals without a counter shared on the path a flood takes. */
static inline uint32_t rl_worker_part(uint32_t total, unsigned workers)
{
	return total / workers ? total / workers : 1;
}

/* Entries for one worker's share of a table sized `all` for every source. */
static inline uint32_t rl_worker_entries(uint32_t all, unsigned workers)
{
	return all / workers > RL_WORKER_ENTRIES_MIN ? all / workers : RL_WORKER_ENTRIES_MIN;
}

#endif
