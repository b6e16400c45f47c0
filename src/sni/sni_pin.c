/* SPDX-License-Identifier: ISC */
/* The chunks each source holds in a worker's SNI listener (sni_pin.h): an
 * open-addressing table (linear probing, backward-shift deletion) keyed
 * with SipHash, and per key a queue of the connections waiting for it. */
#include "sni_pin.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sni_pin_init(struct sni_pin *p, uint32_t chunks, uint32_t nlink, const uint8_t sip[16])
{
	/* An entry holds a chunk or a woken id's place, or ids wait on it (at
	 * its cap: with chunks or places): SNI_PIN_KEYS per chunk or id at
	 * most, the table at most half full. calloc'd: pages untouched until
	 * used. */
	uint32_t n = 16;

	memset(p, 0, sizeof(*p));
	while (n < 2u * SNI_PIN_KEYS * (chunks + nlink))
		n <<= 1;
	p->t = calloc(n, sizeof(*p->t));
	p->link = calloc(nlink ? nlink : 1, sizeof(*p->link));
	if (!p->t || !p->link) {
		sni_pin_free(p);
		return -ENOMEM;
	}
	p->mask = n - 1;
	p->nlink = nlink;
	for (uint32_t i = 0; i < nlink; i++)
		p->link[i].key = p->link[i].woke = -1;
	p->cap = SNI_PIN_CAP(chunks);
	memcpy(p->sip, sip, sizeof(p->sip));
	return 0;
}

void sni_pin_free(struct sni_pin *p)
{
	free(p->t);
	free(p->link);
	p->t = NULL;
	p->link = NULL;
	p->nlink = 0;
}

unsigned sni_pin_keys(const union etr_sockaddr *a, struct sni_pin_key k[SNI_PIN_KEYS])
{
	static const uint8_t v6[SNI_PIN_KEYS] = {64, 56, 48};

	memset(k, 0, SNI_PIN_KEYS * sizeof(*k));
	if (!addrclass_key(a, k[0].b))
		return 0;
	if (addrclass_key_is_v4(k[0].b)) {
		k[0].plen = 32;
		return 1;
	}
	for (unsigned i = 0; i < SNI_PIN_KEYS; i++) {
		addrclass_prefix(a, 32, v6[i], k[i].b);
		k[i].plen = v6[i];
		k[i].shift = (uint8_t)i;
	}
	return SNI_PIN_KEYS;
}

static uint32_t slot_of(const struct sni_pin *p, const struct sni_pin_key *k)
{
	uint8_t buf[ADDRCLASS_KEY_LEN + 1];

	memcpy(buf, k->b, ADDRCLASS_KEY_LEN);
	buf[ADDRCLASS_KEY_LEN] = k->plen;
	return (uint32_t)addr_siphash(buf, sizeof(buf), p->sip) & p->mask;
}

static bool same(const struct sni_pin_key *a, const struct sni_pin_key *b)
{
	return a->plen == b->plen && memcmp(a->b, b->b, ADDRCLASS_KEY_LEN) == 0;
}

/* k's entry, or NULL (add: a new one, NULL only when the table is full). */
static struct sni_pin_ent *find(struct sni_pin *p, const struct sni_pin_key *k, bool add)
{
	for (uint32_t i = slot_of(p, k), n = 0; n <= p->mask; i = (i + 1) & p->mask, n++) {
		struct sni_pin_ent *e = &p->t[i];

		if (!e->used) {
			if (!add)
				return NULL;
			e->used = true;
			e->k = *k;
			e->n = e->woken = 0;
			e->head = e->tail = SNI_PIN_NONE;
			return e;
		}
		if (same(&e->k, k))
			return e;
	}
	return NULL;
}

/* e holds nothing and nobody waits on it: out, the run behind it shifted
 * back so that every probe still finds its key. */
static void drop(struct sni_pin *p, struct sni_pin_ent *e)
{
	uint32_t i = (uint32_t)(e - p->t), j = i;

	if (e->n || e->woken || e->head != SNI_PIN_NONE)
		return;
	for (;;) {
		uint32_t home;

		p->t[i].used = false;
		for (;;) {
			j = (j + 1) & p->mask;
			if (!p->t[j].used)
				return;
			home = slot_of(p, &p->t[j].k);
			/* j may move to i unless its home lies in (i, j]. */
			if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
				break;
		}
		p->t[i] = p->t[j];
		i = j;
	}
}

static uint32_t cap_of(const struct sni_pin *p, const struct sni_pin_key *k)
{
	return p->cap << k->shift;
}

static void unlink_id(struct sni_pin *p, struct sni_pin_ent *e, uint32_t id)
{
	struct sni_pin_link *w = &p->link[id];

	if (w->prev == SNI_PIN_NONE)
		e->head = w->next;
	else
		p->link[w->prev].next = w->next;
	if (w->next == SNI_PIN_NONE)
		e->tail = w->prev;
	else
		p->link[w->next].prev = w->prev;
	w->key = -1;
}

/* Chunks held or promised under key i of an id's keys, its own place
 * left out. */
static uint32_t used(const struct sni_pin *p, const struct sni_pin_ent *e, unsigned i, uint32_t id)
{
	uint32_t u = e->n + e->woken;

	if (id < p->nlink && p->link[id].woke == (int8_t)i && u)
		u--;
	return u;
}

/* id's place (if any) goes: on its key, woken drops. */
static void unwoke(struct sni_pin *p, const struct sni_pin_key *k, uint32_t id)
{
	struct sni_pin_ent *e;

	if (!sni_pin_woken(p, id))
		return;
	e = find(p, &k[p->link[id].woke], false);
	p->link[id].woke = -1;
	if (e && e->woken) {
		e->woken--;
		drop(p, e);
	}
}

bool sni_pin_admit(struct sni_pin *p, const struct sni_pin_key *k, unsigned nk, uint32_t id)
{
	for (unsigned i = 0; i < nk; i++) {
		struct sni_pin_ent *e = find(p, &k[i], false);

		if (!e || used(p, e, i, id) < cap_of(p, &k[i]))
			continue;
		if (id < p->nlink && p->link[id].key < 0) {
			unwoke(p, k, id);
			e = find(p, &k[i], false); /* unwoke may move entries */
			if (!e)
				return true;
			p->link[id].key = (int8_t)i;
			p->link[id].next = SNI_PIN_NONE;
			p->link[id].prev = e->tail;
			if (e->tail == SNI_PIN_NONE)
				e->head = id;
			else
				p->link[e->tail].next = id;
			e->tail = id;
		}
		return false;
	}
	/* Admitted while in a queue (asked again before its wake-up): out. */
	if (sni_pin_waiting(p, id)) {
		struct sni_pin_ent *e = find(p, &k[p->link[id].key], false);

		if (e) {
			unlink_id(p, e, id);
			drop(p, e);
		} else {
			p->link[id].key = -1;
		}
	}
	return true;
}

void sni_pin_take(struct sni_pin *p, const struct sni_pin_key *k, unsigned nk, uint32_t id)
{
	unwoke(p, k, id);
	for (unsigned i = 0; i < nk; i++) {
		struct sni_pin_ent *e = find(p, &k[i], true);

		if (e)
			e->n++;
	}
}

/* Wake e's oldest waiters (e is key i), as many as there is room for;
 * each holds a place. */
static unsigned wake_some(struct sni_pin *p, struct sni_pin_ent *e, unsigned i, uint32_t *wake,
			  unsigned max)
{
	uint32_t cap = cap_of(p, &e->k), u = e->n + e->woken;
	unsigned nw = 0;

	while (u < cap && nw < max && e->head != SNI_PIN_NONE) {
		uint32_t id = e->head;

		unlink_id(p, e, id);
		p->link[id].woke = (int8_t)i;
		e->woken++;
		u++;
		wake[nw++] = id;
	}
	return nw;
}

unsigned sni_pin_put(struct sni_pin *p, const struct sni_pin_key *k, unsigned nk, uint32_t *wake,
		     unsigned max)
{
	unsigned nw = 0;

	for (unsigned i = 0; i < nk; i++) {
		struct sni_pin_ent *e = find(p, &k[i], false);

		if (!e)
			continue;
		if (e->n)
			e->n--;
		nw += wake_some(p, e, i, wake + nw, max - nw);
		drop(p, e);
	}
	return nw;
}

unsigned sni_pin_release(struct sni_pin *p, const struct sni_pin_key *k, uint32_t id,
			 uint32_t *wake, unsigned max)
{
	struct sni_pin_ent *e;
	int8_t i;

	if (!sni_pin_woken(p, id))
		return 0;
	i = p->link[id].woke;
	unwoke(p, k, id);
	e = find(p, &k[i], false);
	return e ? wake_some(p, e, (unsigned)i, wake, max) : 0;
}

void sni_pin_cancel(struct sni_pin *p, const struct sni_pin_key *k, uint32_t id)
{
	struct sni_pin_ent *e;

	unwoke(p, k, id);
	if (!sni_pin_waiting(p, id))
		return;
	e = find(p, &k[p->link[id].key], false);
	if (e) {
		unlink_id(p, e, id);
		drop(p, e);
	} else {
		p->link[id].key = -1;
	}
}

uint32_t sni_pin_held(struct sni_pin *p, const struct sni_pin_key *k)
{
	struct sni_pin_ent *e = find(p, k, false);

	return e ? e->n : 0;
}
