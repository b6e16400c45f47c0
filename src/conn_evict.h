/* SPDX-License-Identifier: ISC */
/* Which connection gives way when a listener's room for connections that
 * have not proven anything is spent (an SNI listener's max-preread, a TURN
 * listener's tcp-max-connections): the oldest of the address (addrclass_key:
 * IPv4, IPv6 /64) that holds the most, ties to the address whose oldest is
 * the oldest. Many silent connections from many addresses, each under the
 * per-address cap, are then churned, while a real client, whose first
 * request takes a round trip, gets through. Pure: the caller lists the
 * candidates' keys. */
#ifndef ETR_CONN_EVICT_H
#define ETR_CONN_EVICT_H

#include <stdint.h>

#include "addrclass.h"

struct conn_evict {
	struct conn_evict_slot {
		uint8_t key[ADDRCLASS_KEY_LEN];
		uint32_t count; /* 0: free */
		uint32_t first; /* position of its oldest */
	} *t;
	uint32_t mask, max;
};

/* Room for picks among up to max keys. Returns 0 or -ENOMEM. */
int conn_evict_init(struct conn_evict *e, uint32_t max);
void conn_evict_free(struct conn_evict *e);

/* keys[0..n), oldest first (n at most the init's max): the position of
 * the one that gives way, or -1 when n is 0. Linear in n. */
int32_t conn_evict_pick(struct conn_evict *e, const uint8_t (*keys)[ADDRCLASS_KEY_LEN],
		       uint32_t n);

#endif
