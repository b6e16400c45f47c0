/* SPDX-License-Identifier: ISC */
/* TURN allocations of one worker (RFC 8656): the table keyed by 5-tuple,
 * the relayed port range, permissions, channels, the last-transaction
 * cache and expiry. Pure: no sockets, no clock (`now` is CLOCK_MONOTONIC
 * milliseconds, passed in), all memory taken at init. The per-userid quota
 * is the listener's, across its workers (turn_quota in turn.h): an
 * allocation keeps its entry as a tag. */
#ifndef ETR_TURN_ALLOC_H
#define ETR_TURN_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "ref.h"

/* Index value meaning "no allocation". */
#define TURN_ALLOC_NONE UINT32_MAX

/* Permissions and channels per allocation. A CreatePermission or ChannelBind
 * that needs one more (after expired ones are reused) gets
 * TURN_E_PERM_FULL / TURN_E_CHAN_FULL, answered 508 (Insufficient Capacity,
 * RFC 8656 §9.1 and §12.1 let the server bound them). */
#define TURN_PERM_MAX 32
#define TURN_CHAN_MAX 32

/* Lifetimes fixed by RFC 8656: permissions 300 s (§9), channels 600 s
 * (§12), a reserved port 30 s (§7.2, RESERVATION-TOKEN). */
#define TURN_PERM_LIFETIME_MS 300000u
#define TURN_CHAN_LIFETIME_MS 600000u
#define TURN_RESV_LIFETIME_MS 30000u

/* Channel numbers accepted: 0x4000-0x7FFF, the RFC 5766 range, because
 * deployed clients (coturn's uclient) still pick numbers above 0x4FFF. */
#define TURN_CHAN_FIRST 0x4000u
#define TURN_CHAN_LAST	0x7fffu

/* How long the last transaction's response is kept for a retransmission
 * (RFC 8489 §6.3.4: at least the 39.5 s a UDP client retransmits for), and
 * the largest response kept (a larger one is not cached: the glue builds it
 * again, as it would for an unknown transaction). */
#define TURN_TXN_KEEP_MS  40000u
#define TURN_TXN_RESP_MAX 256

/* Longest USERNAME stored (bytes). REST usernames are "expiry:userid", far
 * shorter; a longer one gets TURN_E_USERNAME (answer 400). */
#define TURN_USERNAME_MAX 128

/* A port whose bind failed (someone else holds it) is out of use this long,
 * then tried again last. */
#define TURN_PORT_BAD_MS 60000u

/* Allocation refs for loop ids: 16 bits of index, 8 of generation (fits
 * ENDPOINT_REF_BITS). Freed slots are reused last (FIFO), so a stale ref
 * would need 256 reuses of its slot, across cap allocations, to match. */
#define TURN_ALLOC_IDX_BITS 16
#define TURN_ALLOC_GEN_BITS 8
#define TURN_ALLOC_CAP_MAX  ((1u << TURN_ALLOC_IDX_BITS) - 1)

enum turn_transport {
	TURN_UDP,
	TURN_TCP,
	TURN_TLS,
};

/* The client side of an allocation. For TCP and TLS the connection names it
 * (conn, the glue's opaque ref); client is still compared, so pass it. For
 * UDP pass conn 0. */
struct turn_5tuple {
	union etr_sockaddr client;
	uint32_t conn;
	uint16_t listener; /* the glue's index of the listening socket */
	uint8_t transport; /* enum turn_transport */
};

/* Why the table said no. turn_alloc_err_code gives the STUN error code. */
enum turn_alloc_err {
	TURN_OK = 0,
	TURN_E_EXISTS,	     /* 437: the 5-tuple has an allocation */
	TURN_E_FULL,	     /* 508: the table is at its capacity (node cap) */
	TURN_E_QUOTA,	     /* 486: the userid holds its quota (turn_quota_take) */
	TURN_E_NO_PORT,	     /* 508: no usable port (or no even one) left */
	TURN_E_TOKEN,	     /* 508: RESERVATION-TOKEN unknown or expired */
	TURN_E_USERNAME,     /* 400: USERNAME longer than TURN_USERNAME_MAX */
	TURN_E_PERM_FULL,    /* 508: TURN_PERM_MAX live permissions */
	TURN_E_CHAN_FULL,    /* 508: TURN_CHAN_MAX live channels */
	TURN_E_CHAN_RANGE,   /* 400: channel number outside 0x4000-0x7FFF */
	TURN_E_CHAN_CONFLICT /* 400: number bound to another peer, or peer to another number */
};

/* The STUN error code for err (0 for TURN_OK). */
int turn_alloc_err_code(enum turn_alloc_err err);

/* A short lowercase name for err ("quota", "cap", ...), for logs and metric
 * labels. */
const char *turn_alloc_err_str(enum turn_alloc_err err);

/* A permission: a peer IP (as 16 bytes, IPv4 as ::ffff:a.b.c.d). */
struct turn_perm {
	uint8_t ip[16];
	uint64_t expires; /* ms; 0 = unused */
};

/* A channel: number and peer transport address. */
struct turn_chan {
	uint8_t ip[16];	  /* as in turn_perm */
	uint64_t expires; /* ms; 0 = unused */
	uint16_t port;	  /* host byte order */
	uint16_t num;
};

struct turn_alloc {
	struct turn_5tuple tuple;
	uint8_t key[16];      /* long-term key the allocation was made with */
	uint64_t expires;     /* ms */
	uint64_t cred_expiry; /* the glue's, as it gave it (e.g. unix s) */
	uint64_t deadline;    /* earliest of expires and live perms/chans */
	uint64_t txn_at;      /* ms the cached response was stored */
	uint64_t created;     /* ms */
	/* Relayed through it, counted by the glue (its worker's alone, so no
	 * atomics); for GET /sessions. */
	uint64_t dgrams_to_peer, bytes_to_peer, dgrams_to_client, bytes_to_client;
	struct turn_perm perm[TURN_PERM_MAX];
	struct turn_chan chan[TURN_CHAN_MAX];
	uint32_t quota;	   /* the glue's tag (its quota entry), as given */
	uint32_t heap_pos; /* in the deadline heap */
	uint32_t next_free;
	uint16_t port;	  /* relayed port */
	uint16_t txn_len; /* 0 = no cached response */
	uint16_t gen;
	uint8_t family; /* AF_INET or AF_INET6: the relayed address's */
	uint8_t username_len;
	bool live;
	uint8_t txn_id[12];
	char username[TURN_USERNAME_MAX + 1];
	uint8_t txn_resp[TURN_TXN_RESP_MAX];
};

/* A reserved port (EVEN-PORT with R=1) waiting for its token. */
struct turn_resv {
	uint8_t token[8];
	uint64_t expires; /* ms */
	uint16_t port;
};

/* The port range of one worker: each worker gets a disjoint slice of the
 * configured MIN-MAX, so that no two workers hand out the same port. */
struct turn_ports {
	uint16_t min, max;
	uint32_t width; /* max - min + 1 */
	uint32_t nfree;
	uint32_t *next; /* width entries: free list (random order at init) */
	uint32_t *prev; /* and the list of bad ports, both doubly linked */
	uint64_t *bad_until;
	uint8_t *state; /* TURN_PORT_* below */
	uint32_t free_head, free_tail;
	uint32_t bad_head, bad_tail;
	uint32_t nbad;
};

struct turn_alloc_table {
	struct turn_alloc *a;	/* cap entries */
	uint32_t *slot;		/* 5-tuple hash: index + 1, 0 = empty */
	uint32_t *heap;		/* live allocations by deadline */
	uint32_t *by_port;	/* ports.width entries: index, TURN_ALLOC_NONE */
	struct turn_resv *resv; /* cap entries */
	struct turn_ports ports;
	uint32_t cap, nslots, mask;
	uint32_t active, nheap, nresv;
	uint32_t free_head, free_tail;
	uint8_t key[16];
	/* Called when an allocation over UDP is made (on) and when it is
	 * removed (!on): the XDP program's known sources, as a game session's
	 * (session.h). NULL: nobody. Set after turn_alloc_init. */
	void (*known)(void *arg, const union etr_sockaddr *client, bool on);
	void *known_arg;
};

/* Make a table for cap allocations (1..TURN_ALLOC_CAP_MAX, at most the
 * slice's width), relaying from ports port_min..port_max (this worker's
 * slice). key keys the hash
 * (random per process); seed shuffles the order ports are handed out in.
 * Returns 0, -EINVAL or -ENOMEM. */
int turn_alloc_init(struct turn_alloc_table *t, uint32_t cap, uint16_t port_min, uint16_t port_max,
		    const uint8_t key[16], uint64_t seed);
void turn_alloc_free(struct turn_alloc_table *t);

/* The allocation of this 5-tuple, or TURN_ALLOC_NONE. */
uint32_t turn_alloc_lookup(const struct turn_alloc_table *t, const struct turn_5tuple *k);

/* The allocation relaying on port (O(1)), or TURN_ALLOC_NONE. */
uint32_t turn_alloc_by_port(const struct turn_alloc_table *t, uint16_t port);

/* Whether an Allocate from k could be granted here: TURN_OK, TURN_E_EXISTS
 * or TURN_E_FULL, in that order (the glue asks before it counts the userid,
 * takes a port and binds it). */
enum turn_alloc_err turn_alloc_admit(const struct turn_alloc_table *t, const struct turn_5tuple *k);

/* Take a relayed port. With token (8 bytes, RESERVATION-TOKEN) the port
 * reserved under it, or TURN_E_TOKEN. Else with even an even port (RFC 8656
 * EVEN-PORT), and with reserve also port + 1, held TURN_RESV_LIFETIME_MS
 * for a later Allocate bearing new_token (8 bytes the glue drew at random).
 * Else any free port. Ports come out in a shuffled order and are reused
 * last. Returns TURN_OK with *port, or TURN_E_NO_PORT. The port is the
 * caller's until turn_alloc_create, turn_alloc_port_release or
 * turn_alloc_port_unusable. */
enum turn_alloc_err turn_alloc_port_take(struct turn_alloc_table *t, bool even, bool reserve,
					 const uint8_t *token, const uint8_t new_token[8],
					 uint64_t now, uint16_t *port);

/* Give back a port taken and not used (and the reservation of port + 1 a
 * take with reserve made). */
void turn_alloc_port_release(struct turn_alloc_table *t, uint16_t port, uint64_t now);

/* The glue could not bind port (EADDRINUSE: someone outside holds it): keep
 * it out of use for TURN_PORT_BAD_MS, then try it again last. Drops the
 * reservation of port + 1 a take with reserve made. Take another port. */
void turn_alloc_port_unusable(struct turn_alloc_table *t, uint16_t port, uint64_t now);

/* Ports free to take now, and ports out of use after a failed bind. */
uint32_t turn_alloc_ports_free(const struct turn_alloc_table *t);
uint32_t turn_alloc_ports_bad(const struct turn_alloc_table *t);

/* What an allocation is made with. */
struct turn_alloc_req {
	const char *username; /* USERNAME as received */
	size_t username_len;
	uint32_t quota;	      /* kept in the allocation for the glue (its quota entry) */
	const uint8_t *key;   /* 16 bytes: long-term key */
	uint64_t cred_expiry; /* stored for the glue, not interpreted */
	uint32_t lifetime_s;  /* granted lifetime, clamped by the glue */
	uint8_t family;	      /* AF_INET or AF_INET6 */
	uint16_t port;	      /* from turn_alloc_port_take, bound by the glue */
};

/* Make the allocation of k. On TURN_OK *idx names it; on an error the port
 * is still the caller's (release it). Checks what turn_alloc_admit does,
 * and TURN_E_USERNAME. */
enum turn_alloc_err turn_alloc_create(struct turn_alloc_table *t, const struct turn_5tuple *k,
				      const struct turn_alloc_req *req, uint64_t now,
				      uint32_t *idx);

/* Remove a live allocation: its port goes back to the range (last in line).
 * The glue closes the relayed socket and gives back its quota entry. */
void turn_alloc_remove(struct turn_alloc_table *t, uint32_t idx);

/* Refresh: the allocation now lasts lifetime_s from now (the glue clamps;
 * Refresh with LIFETIME 0 is turn_alloc_remove). */
void turn_alloc_refresh(struct turn_alloc_table *t, uint32_t idx, uint32_t lifetime_s,
			uint64_t now);

/* Install or refresh the permission for peer's IP (port ignored) for
 * TURN_PERM_LIFETIME_MS. TURN_OK or TURN_E_PERM_FULL. */
enum turn_alloc_err turn_alloc_permit(struct turn_alloc_table *t, uint32_t idx,
				      const union etr_sockaddr *peer, uint64_t now);

/* CreatePermission with n peers, all or nothing (RFC 8656 §9.2: a request
 * that fails changes nothing): installs or refreshes every peer's IP, or,
 * when the new IPs (those not permitted yet, each counted once however often
 * it is named) outnumber the free places, returns TURN_E_PERM_FULL having
 * changed nothing. */
enum turn_alloc_err turn_alloc_permit_all(struct turn_alloc_table *t, uint32_t idx,
					  const union etr_sockaddr *peers, unsigned n,
					  uint64_t now);

/* Whether peer's IP (port ignored) has a live permission: the check for
 * Send, ChannelData and everything arriving on the relayed socket. */
bool turn_alloc_permitted(const struct turn_alloc_table *t, uint32_t idx,
			  const union etr_sockaddr *peer, uint64_t now);

/* ChannelBind: bind num to peer (IP and port) for TURN_CHAN_LIFETIME_MS, or
 * refresh the same binding; installs or refreshes the permission of peer's
 * IP too. TURN_E_CHAN_RANGE, TURN_E_CHAN_CONFLICT (num bound to another
 * peer, or peer to another number), TURN_E_CHAN_FULL, TURN_E_PERM_FULL; on
 * an error nothing changed. */
enum turn_alloc_err turn_alloc_bind(struct turn_alloc_table *t, uint32_t idx, uint16_t num,
				    const union etr_sockaddr *peer, uint64_t now);

/* The peer bound to channel num, as the relayed socket's family wants it
 * (AF_INET for an IPv4 allocation), for ChannelData from the client; false
 * when num is not bound (or its binding expired). */
bool turn_alloc_chan_peer(const struct turn_alloc_table *t, uint32_t idx, uint16_t num,
			  uint64_t now, union etr_sockaddr *peer);

/* The channel bound to peer (IP and port), 0 when none: toward the client,
 * ChannelData on it, else a Data indication (if permitted). */
uint16_t turn_alloc_chan_of(const struct turn_alloc_table *t, uint32_t idx,
			    const union etr_sockaddr *peer, uint64_t now);

/* Keep resp (len bytes) as the answer to transaction tid (12 bytes) of this
 * allocation, replacing the one before. Returns false (nothing kept) when
 * len exceeds TURN_TXN_RESP_MAX. */
bool turn_alloc_txn_store(struct turn_alloc_table *t, uint32_t idx, const uint8_t tid[12],
			  const void *resp, size_t len, uint64_t now);

/* The kept answer to tid if it is the last transaction and younger than
 * TURN_TXN_KEEP_MS; NULL otherwise. A retransmitted Allocate or Refresh is
 * answered with these bytes. (A Refresh with LIFETIME 0 removed the
 * allocation: its retransmission gets 437, which RFC 8656 §8.3 tells the
 * client to take as success.) */
const uint8_t *turn_alloc_txn_find(const struct turn_alloc_table *t, uint32_t idx,
				   const uint8_t tid[12], uint64_t now, size_t *len);

/* Live permissions and channels of allocation idx at now (for GET
 * /sessions). */
void turn_alloc_counts(const struct turn_alloc_table *t, uint32_t idx, uint64_t now,
		       unsigned *perms, unsigned *chans);

/* An allocation whose lifetime ran out by now, earliest first, or
 * TURN_ALLOC_NONE; on the way drops expired permissions, channels and port
 * reservations. The caller removes what it gets (turn_alloc_remove) before
 * it calls again, or gets the same one. */
uint32_t turn_alloc_expire(struct turn_alloc_table *t, uint64_t now);

/* When turn_alloc_expire next has work: the earliest deadline of an
 * allocation, permission, channel or reservation (UINT64_MAX with none). */
uint64_t turn_alloc_next_deadline(const struct turn_alloc_table *t);

/* A ref (TURN_ALLOC_IDX_BITS + TURN_ALLOC_GEN_BITS) naming idx in its
 * current life. */
static inline uint32_t turn_alloc_ref(const struct turn_alloc_table *t, uint32_t idx)
{
	return ref_pack(idx, TURN_ALLOC_IDX_BITS, t->a[idx].gen, TURN_ALLOC_GEN_BITS);
}

/* The live allocation ref names if it is still the same one, else
 * TURN_ALLOC_NONE. */
uint32_t turn_alloc_deref(const struct turn_alloc_table *t, uint32_t ref);

#endif
