/* SPDX-License-Identifier: ISC */
/* The ops listener's connection slots: how many per source address, the
 * absolute deadline of each request, which connection gives way when all
 * slots are taken, and a few slots kept for /healthz and /readyz. Pure:
 * `now` (monotonic ns) is passed in. */
#ifndef ETR_OPS_CONN_H
#define ETR_OPS_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "addr.h"

/* Connections served at once. */
#define OPS_CONN_MAX 64
/* Connections one source address may hold (IPv6: one /64), so that one
 * address never takes every slot. */
#define OPS_CONN_PER_IP 8
/* Connections over OPS_CONN_MAX that may ask for /healthz and /readyz
 * only (anything else is 503 and closed): with every general slot taken by
 * fresh connections from as many addresses, so that none gives way, a
 * health check still gets in. Among these, the oldest that has not sent a
 * whole request gives way to a newcomer. */
#define OPS_CONN_RESERVE 8
/* Connections already told to go that may still hold a descriptor until the
 * listener has closed them: the listener's own limit is the sum. */
#define OPS_CONN_CLOSING 16
#define OPS_CONN_SLOTS	 (OPS_CONN_MAX + OPS_CONN_RESERVE + OPS_CONN_CLOSING)
/* Seconds from accepting a connection (or from its last answer) to the end
 * of its next answer, however the bytes trickle in or out. */
#define OPS_CONN_DEADLINE_SEC 5
/* A request unanswered this long may give way to a newcomer when every
 * slot is taken. */
#define OPS_CONN_SLOW_MS 1000

struct ops_conn {
	bool used;
	bool closing;	   /* told to go, waiting for the listener to close it */
	bool reserve;	   /* over OPS_CONN_MAX: health requests only */
	bool asked;	   /* a whole request came and is not answered yet */
	uint8_t ip[16];	   /* the source, as addrclass_key makes it */
	uint64_t deadline; /* monotonic ns */
	int fd;
	void *handle; /* the listener's connection */
};

struct ops_conns {
	struct ops_conn c[OPS_CONN_SLOTS];
	unsigned live;	   /* used and not closing */
	unsigned reserved; /* ... of which reserve */
	uint64_t evicted;  /* given way to a newer connection */
	uint64_t expired;  /* past their deadline */
	uint64_t refused;  /* over OPS_CONN_PER_IP, or no slot at all */
	bool next_reserve; /* ops_conn_admit let the next one into the reserve */
};

enum ops_conn_verdict {
	OPS_CONN_ACCEPT,     /* a slot is free */
	OPS_CONN_EVICT,	     /* accept once *victim (a slot index) is closed */
	OPS_CONN_REFUSE_IP,  /* the source holds OPS_CONN_PER_IP already */
	OPS_CONN_REFUSE_FULL /* every slot is taken, none by a slow request */
};

/* Before accepting a connection from sa at `now`: may it have a slot? A
 * source that holds its OPS_CONN_PER_IP already gets one of the reserve
 * slots (health only), and its own older reserve connection that has not
 * sent a whole request gives way to it: a health check from an address
 * whose share a slow client holds still gets in. With all OPS_CONN_MAX
 * taken, the oldest connection of the address holding the
 * most gives way if that address holds two more than sa's or the request
 * has waited OPS_CONN_SLOW_MS (*victim, already marked closing; the caller
 * closes its socket); else sa gets a reserve slot, and with all of those
 * taken, the oldest reserve connection without a whole request gives way.
 * Counts a refusal. */
enum ops_conn_verdict ops_conn_admit(struct ops_conns *t, const union etr_sockaddr *sa,
				     uint64_t now, int *victim);

/* A connection was accepted: its slot index, or -1 (none free, counted as
 * refused: the caller closes it). Its deadline is now + the deadline; it
 * is a reserve slot when OPS_CONN_MAX others are live. */
int ops_conn_add(struct ops_conns *t, const union etr_sockaddr *sa, int fd, void *handle,
		 uint64_t now);

/* A whole request came on slot i. Returns false when the slot may not
 * serve it: a reserve slot and not a health request (health). */
bool ops_conn_asked(struct ops_conns *t, int i, bool health);

/* A request on slot i was answered: the next one has a fresh deadline. */
void ops_conn_answered(struct ops_conns *t, int i, uint64_t now);

/* The listener closed slot i's connection. */
void ops_conn_remove(struct ops_conns *t, int i);

/* The next live slot past its deadline at `now`, marked closing and
 * counted, or -1. */
int ops_conn_next_expired(struct ops_conns *t, uint64_t now);

/* The earliest deadline of a live slot, or UINT64_MAX when none. */
uint64_t ops_conn_next_deadline(const struct ops_conns *t);

#endif
