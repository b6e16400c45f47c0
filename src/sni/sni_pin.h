/* SPDX-License-Identifier: ISC */
/* The stream chunks each source holds in one SNI listener of a worker:
 * spliced bytes read and not yet all with the kernel, which a peer that
 * stops reading pins. A source (an IPv4 address; an IPv6 /64, and its /56
 * and /48 at twice and four times the cap) at its cap gets no more bulk
 * reads: the connection waits in the source's queue until one of its
 * chunks comes back. A chunk back wakes as many as there is room for, and
 * each woken one holds its place (woken) until its read brings a chunk
 * (sni_pin_take), ends, or the caller gives the place up (sni_pin_release:
 * a read that stays idle), so that wake-ups cannot let a source run far
 * past its cap. Reads already out when a source reaches its cap are not
 * counted: with them a source may pass the cap by one chunk per direction
 * of its connections that were reading then. Pure: no sockets, no clock. */
#ifndef ETR_SNI_PIN_H
#define ETR_SNI_PIN_H

#include <stdbool.h>
#include <stdint.h>

#include "addr.h"
#include "addrclass.h"

#define SNI_PIN_KEYS 3 /* IPv6: /64, /56, /48; IPv4: one */
#define SNI_PIN_NONE UINT32_MAX

struct sni_pin_key {
	uint8_t b[ADDRCLASS_KEY_LEN];
	uint8_t plen;  /* 32 for IPv4, else the IPv6 prefix */
	uint8_t shift; /* the cap of this key: cap << shift */
};

struct sni_pin_ent {
	struct sni_pin_key k;
	bool used;
	uint32_t n;	     /* chunks held */
	uint32_t woken;	     /* woken ids whose read has brought nothing yet */
	uint32_t head, tail; /* waiting ids, oldest first */
};

/* A waiter's links, by id (the caller's connection index). */
struct sni_pin_link {
	uint32_t prev, next;
	int8_t key;  /* the key index it waits on, -1: not waiting */
	int8_t woke; /* the key index it was woken on and holds a place in, -1: none */
};

struct sni_pin {
	struct sni_pin_ent *t;
	uint32_t mask;
	struct sni_pin_link *link;
	uint32_t nlink;
	uint32_t cap; /* chunks per IPv4 address or IPv6 /64 */
	uint8_t sip[16];
};

/* The cap for a pool of chunks: a sixteenth of it, at least 4 (16 chunks,
 * 1 MiB, of the default pool). */
#define SNI_PIN_CAP(chunks) ((chunks) / 16 > 4 ? (chunks) / 16 : 4)

/* For a pool of chunks and waiter ids 0..nlink-1 (the caller's
 * connections). 0 or -ENOMEM. */
int sni_pin_init(struct sni_pin *p, uint32_t chunks, uint32_t nlink, const uint8_t sip[16]);
void sni_pin_free(struct sni_pin *p);

/* The keys a is counted under: their number (0 for another family). */
unsigned sni_pin_keys(const union etr_sockaddr *a, struct sni_pin_key k[SNI_PIN_KEYS]);

/* May the source of keys k take another chunk? False when one of its keys
 * is at its cap: id then waits in that key's queue (once: an id waiting
 * already stays where it is). */
bool sni_pin_admit(struct sni_pin *p, const struct sni_pin_key *k, unsigned nk, uint32_t id);

/* id's source took a chunk (id's place, if woken, becomes the chunk) /
 * gave one back. put writes the ids it wakes (taken out of their queue,
 * each holding a place: the caller asks again) to wake[], at most max,
 * and returns their number. */
void sni_pin_take(struct sni_pin *p, const struct sni_pin_key *k, unsigned nk, uint32_t id);
unsigned sni_pin_put(struct sni_pin *p, const struct sni_pin_key *k, unsigned nk, uint32_t *wake,
		     unsigned max);

/* id gives up the place it was woken into (its read stays idle, or ended
 * without bytes); the room wakes others, as put does. */
unsigned sni_pin_release(struct sni_pin *p, const struct sni_pin_key *k, uint32_t id,
			 uint32_t *wake, unsigned max);

/* id stops waiting and gives up its place (its connection closed). */
void sni_pin_cancel(struct sni_pin *p, const struct sni_pin_key *k, uint32_t id);

/* Whether id waits / holds a place it was woken into. */
static inline bool sni_pin_waiting(const struct sni_pin *p, uint32_t id)
{
	return id < p->nlink && p->link[id].key >= 0;
}

static inline bool sni_pin_woken(const struct sni_pin *p, uint32_t id)
{
	return id < p->nlink && p->link[id].woke >= 0;
}

/* The chunks held under key k (0: none), for tests. */
uint32_t sni_pin_held(struct sni_pin *p, const struct sni_pin_key *k);

#endif
