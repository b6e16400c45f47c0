/* SPDX-License-Identifier: ISC */
/* Session table: linear probing with backward-shift deletion (no
 * tombstones, so chains never rot), a slab with a free list, and an LRU list
 * whose head is always the next session to expire. */
#include "session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "addrclass.h"

int session_table_init(struct session_table *t, uint32_t cap, const uint8_t key[16])
{
	uint32_t n = 2;

	memset(t, 0, sizeof(*t));
	if (cap == 0 || cap > SESSION_CAP_MAX)
		return -EINVAL;
	/* Load factor at most 1/2 keeps probe chains short. */
	while (n < 2 * cap)
		n <<= 1;
	t->s = calloc(cap, sizeof(*t->s));
	t->slot = calloc(n, sizeof(*t->slot));
	t->ipc = calloc(n, sizeof(*t->ipc));
	if (!t->s || !t->slot || !t->ipc) {
		session_table_free(t);
		return -ENOMEM;
	}
	t->cap = cap;
	t->nslots = n;
	t->mask = n - 1;
	memcpy(t->key, key, sizeof(t->key));
	for (uint32_t i = 0; i < cap; i++) {
		t->s[i].fd = -1;
		t->s[i].next = i + 1 < cap ? i + 1 : SESSION_NONE;
	}
	t->free_head = 0;
	t->free_tail = cap - 1;
	t->lru_head = t->lru_tail = SESSION_NONE;
	t->un_head = t->un_tail = SESSION_NONE;
	return 0;
}

void session_table_free(struct session_table *t)
{
	free(t->s);
	free(t->slot);
	free(t->ipc);
	memset(t, 0, sizeof(*t));
}

static uint32_t home_slot(const struct session_table *t, const union etr_sockaddr *a)
{
	return (uint32_t)addr_hash(a, t->key) & t->mask;
}

/* The slot holding `client`, or the empty slot ending its chain. */
static uint32_t find_slot(const struct session_table *t, const union etr_sockaddr *client)
{
	uint32_t i = home_slot(t, client);

	while (t->slot[i] != 0 && !addr_equal(&t->s[t->slot[i] - 1].client, client))
		i = (i + 1) & t->mask;
	return i;
}

uint32_t session_lookup(const struct session_table *t, const union etr_sockaddr *client)
{
	uint32_t v = t->slot[find_slot(t, client)];

	return v ? v - 1 : SESSION_NONE;
}

static void lru_unlink(struct session_table *t, uint32_t idx)
{
	struct session *s = &t->s[idx];

	if (s->prev != SESSION_NONE)
		t->s[s->prev].next = s->next;
	else
		t->lru_head = s->next;
	if (s->next != SESSION_NONE)
		t->s[s->next].prev = s->prev;
	else
		t->lru_tail = s->prev;
}

static void lru_append(struct session_table *t, uint32_t idx)
{
	struct session *s = &t->s[idx];

	s->prev = t->lru_tail;
	s->next = SESSION_NONE;
	if (t->lru_tail != SESSION_NONE)
		t->s[t->lru_tail].next = idx;
	else
		t->lru_head = idx;
	t->lru_tail = idx;
}

/* The IP a client is counted under, as 16 bytes: IPv4 as ::ffff:a.b.c.d so
 * that an IPv4 client counts the same on an IPv4 and a dual-stack IPv6
 * socket; other IPv6 as its /64, the least a host gets, so that one host
 * cannot take fresh addresses from its prefix to get past the cap (the
 * query buckets count the same way). */
static void ip_key(const union etr_sockaddr *a, uint8_t ip[16])
{
	addrclass_key(a, ip);
}

static uint32_t ip_home(const struct session_table *t, const uint8_t ip[16])
{
	union etr_sockaddr k = {.in6 = {.sin6_family = AF_INET6}};

	memcpy(&k.in6.sin6_addr, ip, 16);
	return (uint32_t)addr_hash(&k, t->key) & t->mask;
}

/* The slot counting this IP, or the empty slot ending its chain. There are
 * as many slots as for sessions and never more IPs than sessions, so a
 * free slot always exists. */
static uint32_t ip_find(const struct session_table *t, const uint8_t ip[16])
{
	uint32_t i = ip_home(t, ip);

	while (t->ipc[i].count != 0 && memcmp(t->ipc[i].ip, ip, 16) != 0)
		i = (i + 1) & t->mask;
	return i;
}

uint32_t session_ip_count(const struct session_table *t, const union etr_sockaddr *client)
{
	uint8_t ip[16];

	ip_key(client, ip);
	return t->ipc[ip_find(t, ip)].count;
}

static void ip_inc(struct session_table *t, const union etr_sockaddr *client)
{
	uint8_t ip[16];
	uint32_t i;

	ip_key(client, ip);
	i = ip_find(t, ip);
	memcpy(t->ipc[i].ip, ip, 16);
	t->ipc[i].count++;
}

static void ip_dec(struct session_table *t, const union etr_sockaddr *client)
{
	uint8_t ip[16];
	uint32_t i, j, home;

	ip_key(client, ip);
	i = ip_find(t, ip);
	if (--t->ipc[i].count != 0)
		return;
	/* Backward-shift deletion, as for the session slots. */
	for (j = (i + 1) & t->mask; t->ipc[j].count != 0; j = (j + 1) & t->mask) {
		home = ip_home(t, t->ipc[j].ip);
		if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
			t->ipc[i] = t->ipc[j];
			t->ipc[j].count = 0;
			i = j;
		}
	}
}

static void un_unlink(struct session_table *t, uint32_t idx)
{
	struct session *s = &t->s[idx];

	if (s->uprev != SESSION_NONE)
		t->s[s->uprev].unext = s->unext;
	else
		t->un_head = s->unext;
	if (s->unext != SESSION_NONE)
		t->s[s->unext].uprev = s->uprev;
	else
		t->un_tail = s->uprev;
	t->unassured--;
}

static void un_append(struct session_table *t, uint32_t idx)
{
	struct session *s = &t->s[idx];

	s->uprev = t->un_tail;
	s->unext = SESSION_NONE;
	if (t->un_tail != SESSION_NONE)
		t->s[t->un_tail].unext = idx;
	else
		t->un_head = idx;
	t->un_tail = idx;
	t->unassured++;
}

void session_assure(struct session_table *t, uint32_t idx)
{
	if (t->s[idx].assured)
		return;
	t->s[idx].assured = true;
	un_unlink(t, idx);
	if (t->known)
		t->known(t->known_arg, &t->s[idx].client, true);
}

void session_grace(struct session_table *t, uint32_t idx, uint64_t until)
{
	if (!t->s[idx].assured && until > t->s[idx].grace_until)
		t->s[idx].grace_until = until;
}

uint32_t session_unassured_expired(const struct session_table *t, uint64_t now, uint64_t timeout)
{
	uint32_t h = t->un_head;

	if (h != SESSION_NONE && t->s[h].opened + timeout <= now)
		return h;
	return SESSION_NONE;
}

uint64_t session_unassured_next_expiry(const struct session_table *t, uint64_t timeout)
{
	uint32_t h = t->un_head;

	return h == SESSION_NONE ? UINT64_MAX : t->s[h].opened + timeout;
}

uint32_t session_evictable(const struct session_table *t, uint64_t now)
{
	uint32_t i = t->un_head;

	for (unsigned n = 0; i != SESSION_NONE && n < SESSION_EVICT_SCAN; n++, i = t->s[i].unext)
		if (t->s[i].grace_until <= now)
			return i;
	return SESSION_NONE;
}

uint32_t session_insert(struct session_table *t, const union etr_sockaddr *client, int fd,
			uint64_t now)
{
	uint32_t idx = t->free_head, i;
	struct session *s;
	uint16_t gen;

	if (idx == SESSION_NONE)
		return SESSION_NONE;
	s = &t->s[idx];
	t->free_head = s->next;
	if (t->free_head == SESSION_NONE)
		t->free_tail = SESSION_NONE;
	gen = (uint16_t)(s->gen + 1);
	memset(s, 0, sizeof(*s));
	s->client = *client;
	s->fd = fd;
	s->gen = gen;
	s->opened = s->last_active = s->last_up = now;
	s->live = true;
	i = find_slot(t, client);
	t->slot[i] = idx + 1;
	lru_append(t, idx);
	un_append(t, idx);
	ip_inc(t, client);
	t->active++;
	return idx;
}

int session_remove(struct session_table *t, uint32_t idx)
{
	struct session *s = &t->s[idx];
	uint32_t i = find_slot(t, &s->client), j, home;
	int fd = s->fd;

	/* Backward-shift deletion: pull later members of the chain into the
	 * hole when the hole lies between their home slot and where they sit. */
	t->slot[i] = 0;
	for (j = (i + 1) & t->mask; t->slot[j] != 0; j = (j + 1) & t->mask) {
		home = home_slot(t, &t->s[t->slot[j] - 1].client);
		if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
			t->slot[i] = t->slot[j];
			t->slot[j] = 0;
			i = j;
		}
	}
	lru_unlink(t, idx);
	if (!s->assured)
		un_unlink(t, idx);
	else if (t->known)
		t->known(t->known_arg, &s->client, false);
	ip_dec(t, &s->client);
	s->live = false;
	s->fd = -1;
	s->next = SESSION_NONE;
	if (t->free_tail != SESSION_NONE)
		t->s[t->free_tail].next = idx;
	else
		t->free_head = idx;
	t->free_tail = idx;
	t->active--;
	return fd;
}

void session_touch(struct session_table *t, uint32_t idx, uint64_t now)
{
	t->s[idx].last_active = now;
	if (t->lru_tail != idx) {
		lru_unlink(t, idx);
		lru_append(t, idx);
	}
}

uint32_t session_expired(const struct session_table *t, uint64_t now, uint64_t timeout)
{
	uint32_t h = t->lru_head;

	if (h != SESSION_NONE && t->s[h].last_active + timeout <= now)
		return h;
	return SESSION_NONE;
}

uint64_t session_next_expiry(const struct session_table *t, uint64_t timeout)
{
	uint32_t h = t->lru_head;

	return h == SESSION_NONE ? UINT64_MAX : t->s[h].last_active + timeout;
}

uint32_t session_deref(const struct session_table *t, uint32_t ref)
{
	uint32_t idx = ref_idx(ref, SESSION_IDX_BITS);

	if (idx >= t->cap || !t->s[idx].live ||
	    !ref_gen_ok(ref, SESSION_IDX_BITS, SESSION_GEN_BITS, t->s[idx].gen))
		return SESSION_NONE;
	return idx;
}
