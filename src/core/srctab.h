/* SPDX-License-Identifier: ISC */
/* Connections per source, for every per-source cap and eviction: counts
 * kept as connections come and go (no rebuild per event), in an open
 * addressing table keyed with SipHash under a key drawn at init, so a
 * sender cannot aim its addresses at one probe chain. Pure but for the
 * key's getrandom(2); not locked (a caller shared by threads locks). */
#ifndef ETR_SRCTAB_H
#define ETR_SRCTAB_H

#include <stdbool.h>
#include <stdint.h>

#include "addr.h"

#define SRCTAB_NONE UINT32_MAX

/* What one source may hold: an IPv4 address (IPv4-mapped IPv6 too) or an
 * IPv6 /64 at most ip; an IPv6 /56 (a home's delegation) at most
 * SRCTAB_P56_MULT times ip, an IPv6 /48 (a site's) at most SRCTAB_P48_MULT
 * times ip. Each level is counted: a take fails when any is at its cap.
 * The multiples leave a home or a site several /64s' worth while a /48,
 * whose 65536 /64s cost its holder nothing, cannot take more than a few
 * addresses would. */
#define SRCTAB_P56_MULT 4
#define SRCTAB_P48_MULT 8

/* Levels of a source's counts: the address (IPv4, IPv6 /64) and IPv6's
 * /56 and /48. */
enum { SRCTAB_ADDR, SRCTAB_P56, SRCTAB_P48, SRCTAB_LEVELS };

struct srctab {
	uint8_t key[16];	     /* SipHash key: random per table */
	uint32_t cap[SRCTAB_LEVELS]; /* 0: no cap at that level */
	/* Sources: entries, found through slots (entry index, SRCTAB_NONE:
	 * empty) at most half full. */
	struct srctab_entry {
		uint8_t key[16]; /* addrclass_prefix at its level */
		uint8_t level;
		uint32_t count;	     /* 0: free */
		uint32_t hash;	     /* of key and level, masked when placed */
		uint32_t next;	     /* free list */
		uint32_t heap;	     /* its place in the heap, SRCTAB_NONE: none */
		uint32_t head, tail; /* its members, oldest first */
	} * e;
	uint32_t *slot, mask, nentries, free_entry, used;
	/* Members (with members_max): caller's ids 0..members_max, each in
	 * its source's list; the address-level sources with members in a
	 * binary heap, the most members first, ties to the oldest oldest. */
	struct srctab_member {
		uint32_t entry; /* SRCTAB_NONE: not in */
		uint32_t prev, next;
		uint64_t seq; /* joined: smaller is older */
	} * m;
	uint32_t members_max, *heap, nheap;
	uint64_t seq;
	/* Work done (slots probed, heap steps), for the tests: a count, not
	 * a time. */
	uint64_t work;
	uint32_t probe_max; /* the longest probe seen */
};

/* A table for up to sources connections at once (each IPv6 one takes
 * three entries: /64, /56, /48) with caps per_ip (0: none) and its
 * multiples, and room for members_max members (0: no eviction). Returns
 * 0 or -errno (ENOMEM, or getrandom's). */
int srctab_init(struct srctab *t, uint32_t sources, uint32_t per_ip, uint32_t members_max);
void srctab_free(struct srctab *t);

/* Count one connection of a at every level: false (nothing counted) when
 * a level is at its cap or the table is full. An address of another
 * family is not counted (true). */
bool srctab_take(struct srctab *t, const union etr_sockaddr *a);

/* Give back one connection of a taken by srctab_take. */
void srctab_put(struct srctab *t, const union etr_sockaddr *a);

/* Connections of a's level lvl (SRCTAB_ADDR for IPv4). */
uint32_t srctab_count(struct srctab *t, const union etr_sockaddr *a, unsigned lvl);

/* Member id (< members_max, not in) joins as the newest of a's source,
 * counted as srctab_take counts. False when refused (cap, table full,
 * another family: such a member cannot be picked). */
bool srctab_join(struct srctab *t, uint32_t id, const union etr_sockaddr *a);

/* Member id leaves (nothing when it is not in). */
void srctab_leave(struct srctab *t, uint32_t id);

/* The member that gives way first: the oldest of the address (IPv4,
 * IPv6 /64) holding the most members, ties to the address whose oldest
 * is the oldest; SRCTAB_NONE when there is none. Constant time; joins
 * and leaves are logarithmic in the sources. */
uint32_t srctab_heaviest(const struct srctab *t);

#endif
