/* SPDX-License-Identifier: ISC */
/* The session table: open-addressing hash of client sockaddrs, a slab of
 * sessions sized at startup, and an LRU list for idle expiry. Generic (no
 * game's fields: a policy keeps its own beside it, by index). Pure: it
 * stores fds but never opens or closes them. */
#ifndef ETR_SESSION_H
#define ETR_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "addr.h"
#include "ref.h"

/* Packets in flight per session (both directions) before we drop. */
#define SESSION_QUEUE_MAX 64

/* Index value meaning "no session". */
#define SESSION_NONE UINT32_MAX

/* Unassured sessions looked at, oldest first, for one in no grace time to
 * evict. Sessions in grace come from challengeResponses, which the game
 * server's budget holds to a few a second, so this is plenty. */
#define SESSION_EVICT_SCAN 64

struct session {
	union etr_sockaddr client; /* key */
	uint64_t last_active;	   /* CLOCK_MONOTONIC ns of the last packet */
	uint64_t opened;
	uint64_t grace_until; /* ns: not evicted for a newcomer before */
	uint64_t last_up;     /* ns: the client's last datagram to the upstream */
	uint64_t pkts_up, pkts_down;
	int fd;	       /* connected to the game server; -1 when free */
	uint32_t prev; /* LRU neighbours (index), SESSION_NONE at the ends */
	uint32_t next;
	uint32_t uprev; /* unassured list neighbours, while not assured */
	uint32_t unext;
	uint16_t gen;	 /* bumped on every reuse: stale completions miss */
	uint16_t queued; /* datagrams handed to the kernel, not yet completed */
	bool live;
	bool assured; /* the upstream answered this client (the policy says when) */
};

/* Sessions per source IP (any port), for the per-IP cap. */
struct session_ipcount {
	uint8_t ip[16]; /* IPv4 as ::ffff:a.b.c.d */
	uint32_t count; /* 0 = empty slot */
};

struct session_table {
	struct session *s; /* cap entries */
	uint32_t *slot;	   /* nslots entries: session index + 1, 0 = empty */
	uint32_t cap, nslots, mask;
	uint32_t active;
	uint32_t free_head; /* free list through .next, oldest first */
	uint32_t free_tail;
	uint32_t lru_head; /* least recently active */
	uint32_t lru_tail;
	uint32_t un_head; /* unassured sessions, oldest first */
	uint32_t un_tail;
	uint32_t unassured;
	struct session_ipcount *ipc; /* nslots entries, same probing as slot[] */
	uint8_t key[16];
	/* Told when a session is first assured (on) and when an assured one
	 * ends (!on): the XDP program's known sources. NULL: nobody. */
	void (*known)(void *arg, const union etr_sockaddr *client, bool on);
	void *known_arg;
};

/* Allocate a table for `cap` sessions (slots: a power of two >= 2*cap).
 * Returns 0 or -ENOMEM/-EINVAL. */
int session_table_init(struct session_table *t, uint32_t cap, const uint8_t key[16]);
void session_table_free(struct session_table *t);

/* The live session of this client, or SESSION_NONE. */
uint32_t session_lookup(const struct session_table *t, const union etr_sockaddr *client);

/* Insert a new session for a client that has none (the caller checked).
 * Returns its index, or SESSION_NONE when the table is full. */
uint32_t session_insert(struct session_table *t, const union etr_sockaddr *client, int fd,
			uint64_t now);

/* Remove a live session; returns the fd it held (the caller closes it). */
int session_remove(struct session_table *t, uint32_t idx);

/* Mark activity: move to the LRU tail. */
void session_touch(struct session_table *t, uint32_t idx, uint64_t now);

/* The least recently active session if idle since before `now - timeout`,
 * else SESSION_NONE. Call repeatedly to purge. */
uint32_t session_expired(const struct session_table *t, uint64_t now, uint64_t timeout);

/* When the oldest session will expire (UINT64_MAX with none). */
uint64_t session_next_expiry(const struct session_table *t, uint64_t timeout);

/* The game server answered: the session leaves the unassured list, for
 * good. */
void session_assure(struct session_table *t, uint32_t idx);

/* The game server answered this unassured session with a challengeResponse:
 * its client's connect is on its way. Until `until` the session is not
 * evicted for a newcomer (its unassured timeout still applies: a query late
 * in it gets a fresh session, see udprelay.c). */
void session_grace(struct session_table *t, uint32_t idx, uint64_t until);

/* The oldest unassured session if opened before `now - timeout`, else
 * SESSION_NONE. */
uint32_t session_unassured_expired(const struct session_table *t, uint64_t now, uint64_t timeout);

/* When the oldest unassured session times out (UINT64_MAX with none). */
uint64_t session_unassured_next_expiry(const struct session_table *t, uint64_t timeout);

/* The oldest unassured session, the first to go when the table is full;
 * SESSION_NONE when every session is assured. */
static inline uint32_t session_oldest_unassured(const struct session_table *t)
{
	return t->un_head;
}

/* The session to evict for a newcomer: the oldest unassured one not in its
 * grace time at `now`, among the SESSION_EVICT_SCAN oldest; SESSION_NONE
 * when there is none. */
uint32_t session_evictable(const struct session_table *t, uint64_t now);

/* The client of session idx sent a datagram to the upstream. */
static inline void session_heard_up(struct session_table *t, uint32_t idx, uint64_t now)
{
	t->s[idx].last_up = now;
}

/* Live sessions from this client's IP address, any port. */
uint32_t session_ip_count(const struct session_table *t, const union etr_sockaddr *client);

/* Pack index and generation into 24 bits (17 index, 7 generation), so a
 * completion that outlives its session cannot touch the slot's next owner.
 * Freed slots are reused last (FIFO), so the generation would have to wrap
 * across `cap` reuses before a stale ref could match. */
#define SESSION_IDX_BITS 17
#define SESSION_GEN_BITS 7
#define SESSION_REF_BITS 24
#define SESSION_CAP_MAX	 ((1u << SESSION_IDX_BITS) - 1)
_Static_assert(REF_FITS(SESSION_IDX_BITS, SESSION_GEN_BITS, SESSION_REF_BITS), "session refs");
static inline uint32_t session_ref(const struct session_table *t, uint32_t idx)
{
	return ref_pack(idx, SESSION_IDX_BITS, t->s[idx].gen, SESSION_GEN_BITS);
}
/* The index a ref names if that session is still the same one, else
 * SESSION_NONE. */
uint32_t session_deref(const struct session_table *t, uint32_t ref);

#endif
