/* SPDX-License-Identifier: ISC */
/* Which preread connection gives way when an SNI listener's max-preread is
 * reached: the oldest of the address (addrclass_key: IPv4, IPv6 /64) that
 * holds the most, ties to the address whose oldest is the oldest. Many
 * silent connections from many addresses, each under the per-address cap,
 * are then churned, while a real client, whose ClientHello takes a round
 * trip, gets through. Pure: the caller lists its prereads' keys. */
#ifndef ETR_SNI_EVICT_H
#define ETR_SNI_EVICT_H

#include <stdint.h>

#include "addrclass.h"

struct sni_evict {
	struct sni_evict_slot {
		uint8_t key[ADDRCLASS_KEY_LEN];
		uint32_t count; /* 0: free */
		uint32_t first; /* position of its oldest */
	} *t;
	uint32_t mask, max;
};

/* Room for picks among up to max keys. Returns 0 or -ENOMEM. */
int sni_evict_init(struct sni_evict *e, uint32_t max);
void sni_evict_free(struct sni_evict *e);

/* keys[0..n), oldest first (n at most the init's max): the position of
 * the one that gives way, or -1 when n is 0. Linear in n. */
int32_t sni_evict_pick(struct sni_evict *e, const uint8_t (*keys)[ADDRCLASS_KEY_LEN],
		       uint32_t n);

#endif
