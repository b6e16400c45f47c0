/* SPDX-License-Identifier: ISC */
/* TURN allocation table: a slab of allocations with a FIFO free list, a
 * linear-probing hash of 5-tuples with backward-shift deletion, a min-heap
 * of deadlines (so expiry visits only what is due), and the port range as
 * a shuffled doubly linked free list. */
#include "turn_alloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "addrclass.h"

#define NONE TURN_ALLOC_NONE

enum {
	PORT_FREE,
	PORT_USED, /* taken: the caller's or an allocation's */
	PORT_RESV, /* reserved for a RESERVATION-TOKEN */
	PORT_BAD,  /* bind failed; out of use until bad_until */
};

int turn_alloc_err_code(enum turn_alloc_err err)
{
	switch (err) {
	case TURN_OK:
		return 0;
	case TURN_E_EXISTS:
		return 437;
	case TURN_E_QUOTA:
		return 486;
	case TURN_E_USERNAME:
	case TURN_E_CHAN_RANGE:
	case TURN_E_CHAN_CONFLICT:
		return 400;
	case TURN_E_FULL:
	case TURN_E_NO_PORT:
	case TURN_E_TOKEN:
	case TURN_E_PERM_FULL:
	case TURN_E_CHAN_FULL:
		return 508;
	}
	return 500;
}

const char *turn_alloc_err_str(enum turn_alloc_err err)
{
	switch (err) {
	case TURN_OK:
		return "ok";
	case TURN_E_EXISTS:
		return "exists";
	case TURN_E_FULL:
		return "cap";
	case TURN_E_QUOTA:
		return "quota";
	case TURN_E_NO_PORT:
		return "ports";
	case TURN_E_TOKEN:
		return "token";
	case TURN_E_USERNAME:
		return "username";
	case TURN_E_PERM_FULL:
		return "permissions";
	case TURN_E_CHAN_FULL:
		return "channels";
	case TURN_E_CHAN_RANGE:
		return "channel_range";
	case TURN_E_CHAN_CONFLICT:
		return "channel_conflict";
	}
	return "unknown";
}

/* ---- the port range ---- */

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void list_unlink(struct turn_ports *p, uint32_t *head, uint32_t *tail, uint32_t o)
{
	if (p->prev[o] != NONE)
		p->next[p->prev[o]] = p->next[o];
	else
		*head = p->next[o];
	if (p->next[o] != NONE)
		p->prev[p->next[o]] = p->prev[o];
	else
		*tail = p->prev[o];
	p->next[o] = p->prev[o] = NONE;
}

static void list_append(struct turn_ports *p, uint32_t *head, uint32_t *tail, uint32_t o)
{
	p->prev[o] = *tail;
	p->next[o] = NONE;
	if (*tail != NONE)
		p->next[*tail] = o;
	else
		*head = o;
	*tail = o;
}

static void port_free(struct turn_ports *p, uint32_t o)
{
	p->state[o] = PORT_FREE;
	list_append(p, &p->free_head, &p->free_tail, o);
	p->nfree++;
}

static void port_use(struct turn_ports *p, uint32_t o, uint8_t state)
{
	list_unlink(p, &p->free_head, &p->free_tail, o);
	p->state[o] = state;
	p->nfree--;
}

static int ports_init(struct turn_ports *p, uint16_t min, uint16_t max, uint64_t seed)
{
	uint32_t *order;

	p->min = min;
	p->max = max;
	p->width = (uint32_t)max - min + 1;
	p->next = calloc(p->width, sizeof(*p->next));
	p->prev = calloc(p->width, sizeof(*p->prev));
	p->bad_until = calloc(p->width, sizeof(*p->bad_until));
	p->state = calloc(p->width, sizeof(*p->state));
	order = calloc(p->width, sizeof(*order));
	if (!p->next || !p->prev || !p->bad_until || !p->state || !order) {
		free(order);
		return -ENOMEM;
	}
	/* A shuffled order: the next relayed port cannot be guessed from the
	 * last one, and taking a port stays O(1). */
	for (uint32_t i = 0; i < p->width; i++)
		order[i] = i;
	for (uint32_t i = p->width - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(splitmix64(&seed) % (i + 1)), v = order[i];

		order[i] = order[j];
		order[j] = v;
	}
	p->free_head = p->free_tail = p->bad_head = p->bad_tail = NONE;
	for (uint32_t i = 0; i < p->width; i++)
		port_free(p, order[i]);
	free(order);
	return 0;
}

static void ports_free(struct turn_ports *p)
{
	free(p->next);
	free(p->prev);
	free(p->bad_until);
	free(p->state);
}

/* Bad ports whose time is up go back to the end of the free list. */
static void ports_recover(struct turn_ports *p, uint64_t now)
{
	while (p->bad_head != NONE && p->bad_until[p->bad_head] <= now) {
		uint32_t o = p->bad_head;

		list_unlink(p, &p->bad_head, &p->bad_tail, o);
		p->nbad--;
		port_free(p, o);
	}
}

static bool port_in(const struct turn_ports *p, uint16_t port)
{
	return port >= p->min && port <= p->max;
}

/* ---- reservations ---- */

static uint32_t resv_find_port(const struct turn_alloc_table *t, uint16_t port)
{
	for (uint32_t i = 0; i < t->nresv; i++)
		if (t->resv[i].port == port)
			return i;
	return NONE;
}

/* Drop reservation i; its port goes back to the range. */
static void resv_drop(struct turn_alloc_table *t, uint32_t i)
{
	port_free(&t->ports, (uint32_t)(t->resv[i].port - t->ports.min));
	t->resv[i] = t->resv[--t->nresv];
}

static void resv_expire(struct turn_alloc_table *t, uint64_t now)
{
	for (uint32_t i = 0; i < t->nresv;)
		if (t->resv[i].expires <= now)
			resv_drop(t, i);
		else
			i++;
}

/* ---- hashes ---- */

static uint64_t tuple_hash(const struct turn_alloc_table *t, const struct turn_5tuple *k)
{
	uint64_t extra = (uint64_t)k->conn << 24 | (uint64_t)k->listener << 8 | k->transport;

	return addr_hash(&k->client, t->key) ^ (extra * 0x9e3779b97f4a7c15ull);
}

static bool tuple_equal(const struct turn_5tuple *a, const struct turn_5tuple *b)
{
	return a->conn == b->conn && a->listener == b->listener && a->transport == b->transport &&
	       addr_equal(&a->client, &b->client);
}

static uint32_t tuple_slot(const struct turn_alloc_table *t, const struct turn_5tuple *k)
{
	uint32_t i = (uint32_t)tuple_hash(t, k) & t->mask;

	while (t->slot[i] != 0 && !tuple_equal(&t->a[t->slot[i] - 1].tuple, k))
		i = (i + 1) & t->mask;
	return i;
}

/* Empty slot i of the 5-tuple hash and shift later members of its chain
 * back, so no tombstone is left. */
static void slot_delete(struct turn_alloc_table *t, uint32_t *slot, uint32_t i)
{
	uint32_t j = i;

	slot[i] = 0;
	for (;;) {
		uint32_t home;

		j = (j + 1) & t->mask;
		if (slot[j] == 0)
			return;
		home = (uint32_t)tuple_hash(t, &t->a[slot[j] - 1].tuple) & t->mask;
		/* Move j to i unless its home lies cyclically in (i, j]. */
		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			slot[i] = slot[j];
			slot[j] = 0;
			i = j;
		}
	}
}

/* ---- deadline heap ---- */

static void heap_swap(struct turn_alloc_table *t, uint32_t i, uint32_t j)
{
	uint32_t a = t->heap[i], b = t->heap[j];

	t->heap[i] = b;
	t->heap[j] = a;
	t->a[b].heap_pos = i;
	t->a[a].heap_pos = j;
}

static uint64_t heap_key(const struct turn_alloc_table *t, uint32_t i)
{
	return t->a[t->heap[i]].deadline;
}

static void heap_fix(struct turn_alloc_table *t, uint32_t i)
{
	while (i > 0 && heap_key(t, (i - 1) / 2) > heap_key(t, i)) {
		heap_swap(t, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < t->nheap && heap_key(t, l) < heap_key(t, m))
			m = l;
		if (r < t->nheap && heap_key(t, r) < heap_key(t, m))
			m = r;
		if (m == i)
			return;
		heap_swap(t, i, m);
		i = m;
	}
}

static void heap_remove(struct turn_alloc_table *t, uint32_t idx)
{
	uint32_t i = t->a[idx].heap_pos;

	if (i != --t->nheap) {
		heap_swap(t, i, t->nheap);
		heap_fix(t, i);
	}
}

/* The deadline is exact at all times: only control messages change it, and
 * they are few. */
static void deadline_update(struct turn_alloc_table *t, uint32_t idx)
{
	struct turn_alloc *a = &t->a[idx];
	uint64_t d = a->expires;

	for (unsigned i = 0; i < TURN_PERM_MAX; i++)
		if (a->perm[i].expires && a->perm[i].expires < d)
			d = a->perm[i].expires;
	for (unsigned i = 0; i < TURN_CHAN_MAX; i++)
		if (a->chan[i].expires && a->chan[i].expires < d)
			d = a->chan[i].expires;
	a->deadline = d;
	heap_fix(t, a->heap_pos);
}

/* ---- the table ---- */

int turn_alloc_init(struct turn_alloc_table *t, uint32_t cap, uint16_t port_min, uint16_t port_max,
		    const uint8_t key[16], uint64_t seed)
{
	uint32_t n = 2;

	memset(t, 0, sizeof(*t));
	if (cap == 0 || cap > TURN_ALLOC_CAP_MAX || port_min == 0 || port_max < port_min ||
	    cap > (uint32_t)port_max - port_min + 1)
		return -EINVAL;
	while (n < 2 * cap)
		n <<= 1;
	t->a = calloc(cap, sizeof(*t->a));
	t->slot = calloc(n, sizeof(*t->slot));
	t->heap = calloc(cap, sizeof(*t->heap));
	t->resv = calloc(cap, sizeof(*t->resv));
	t->by_port = calloc((size_t)port_max - port_min + 1, sizeof(*t->by_port));
	if (!t->a || !t->slot || !t->heap || !t->resv || !t->by_port ||
	    ports_init(&t->ports, port_min, port_max, seed) < 0) {
		turn_alloc_free(t);
		return -ENOMEM;
	}
	t->cap = cap;
	t->nslots = n;
	t->mask = n - 1;
	memcpy(t->key, key, sizeof(t->key));
	for (uint32_t i = 0; i < cap; i++) {
		t->a[i].next_free = i + 1 < cap ? i + 1 : NONE;
	}
	for (uint32_t i = 0; i < t->ports.width; i++)
		t->by_port[i] = NONE;
	t->free_head = 0;
	t->free_tail = cap - 1;
	return 0;
}

void turn_alloc_free(struct turn_alloc_table *t)
{
	free(t->a);
	free(t->slot);
	free(t->heap);
	free(t->resv);
	free(t->by_port);
	ports_free(&t->ports);
	memset(t, 0, sizeof(*t));
}

uint32_t turn_alloc_lookup(const struct turn_alloc_table *t, const struct turn_5tuple *k)
{
	uint32_t v = t->slot[tuple_slot(t, k)];

	return v ? v - 1 : NONE;
}

uint32_t turn_alloc_by_port(const struct turn_alloc_table *t, uint16_t port)
{
	return port_in(&t->ports, port) ? t->by_port[port - t->ports.min] : NONE;
}

enum turn_alloc_err turn_alloc_admit(const struct turn_alloc_table *t, const struct turn_5tuple *k)
{
	if (turn_alloc_lookup(t, k) != NONE)
		return TURN_E_EXISTS;
	if (t->active >= t->cap)
		return TURN_E_FULL;
	return TURN_OK;
}

/* ---- ports ---- */

enum turn_alloc_err turn_alloc_port_take(struct turn_alloc_table *t, bool even, bool reserve,
					 const uint8_t *token, const uint8_t new_token[8],
					 uint64_t now, uint16_t *port)
{
	struct turn_ports *p = &t->ports;
	uint32_t o;

	resv_expire(t, now);
	ports_recover(p, now);
	if (token) {
		for (uint32_t i = 0; i < t->nresv; i++) {
			if (memcmp(t->resv[i].token, token, 8) != 0)
				continue;
			*port = t->resv[i].port;
			p->state[*port - p->min] = PORT_USED;
			t->resv[i] = t->resv[--t->nresv];
			return TURN_OK;
		}
		return TURN_E_TOKEN;
	}
	if (reserve && t->nresv >= t->cap)
		return TURN_E_NO_PORT;
	/* Half the free ports are even, so the walk is short unless the
	 * range is nearly full; it never goes past the list's end. */
	for (o = p->free_head; o != NONE; o = p->next[o]) {
		uint32_t pt = p->min + o;

		if (!even && !reserve)
			break;
		if (pt % 2 != 0)
			continue;
		if (!reserve || (pt + 1 <= p->max && p->state[o + 1] == PORT_FREE))
			break;
	}
	if (o == NONE)
		return TURN_E_NO_PORT;
	port_use(p, o, PORT_USED);
	*port = (uint16_t)(p->min + o);
	if (reserve) {
		struct turn_resv *r = &t->resv[t->nresv++];

		port_use(p, o + 1, PORT_RESV);
		memcpy(r->token, new_token, 8);
		r->port = (uint16_t)(*port + 1);
		r->expires = now + TURN_RESV_LIFETIME_MS;
	}
	return TURN_OK;
}

/* The reservation a take with reserve made beside port, dropped. */
static void resv_drop_beside(struct turn_alloc_table *t, uint16_t port)
{
	uint32_t i;

	if (port < UINT16_MAX && (i = resv_find_port(t, (uint16_t)(port + 1))) != NONE)
		resv_drop(t, i);
}

void turn_alloc_port_release(struct turn_alloc_table *t, uint16_t port, uint64_t now)
{
	struct turn_ports *p = &t->ports;

	(void)now;
	if (!port_in(p, port) || p->state[port - p->min] != PORT_USED ||
	    t->by_port[port - p->min] != NONE)
		return;
	resv_drop_beside(t, port);
	port_free(p, (uint32_t)(port - p->min));
}

void turn_alloc_port_unusable(struct turn_alloc_table *t, uint16_t port, uint64_t now)
{
	struct turn_ports *p = &t->ports;
	uint32_t o;

	if (!port_in(p, port) || p->state[port - p->min] != PORT_USED ||
	    t->by_port[port - p->min] != NONE)
		return;
	resv_drop_beside(t, port);
	o = (uint32_t)(port - p->min);
	p->state[o] = PORT_BAD;
	p->bad_until[o] = now + TURN_PORT_BAD_MS;
	list_append(p, &p->bad_head, &p->bad_tail, o);
	p->nbad++;
}

uint32_t turn_alloc_ports_free(const struct turn_alloc_table *t)
{
	return t->ports.nfree;
}

uint32_t turn_alloc_ports_bad(const struct turn_alloc_table *t)
{
	return t->ports.nbad;
}

/* ---- allocations ---- */

enum turn_alloc_err turn_alloc_create(struct turn_alloc_table *t, const struct turn_5tuple *k,
				      const struct turn_alloc_req *req, uint64_t now, uint32_t *idx)
{
	struct turn_ports *p = &t->ports;
	enum turn_alloc_err e;
	struct turn_alloc *a;
	uint32_t i;

	if (req->username_len > TURN_USERNAME_MAX)
		return TURN_E_USERNAME;
	e = turn_alloc_admit(t, k);
	if (e != TURN_OK)
		return e;
	if (!port_in(p, req->port) || p->state[req->port - p->min] != PORT_USED ||
	    t->by_port[req->port - p->min] != NONE)
		return TURN_E_NO_PORT;
	i = t->free_head;
	t->free_head = t->a[i].next_free;
	if (t->free_head == NONE)
		t->free_tail = NONE;
	a = &t->a[i];
	memset(a->perm, 0, sizeof(a->perm));
	memset(a->chan, 0, sizeof(a->chan));
	a->created = now;
	a->dgrams_to_peer = a->bytes_to_peer = a->dgrams_to_client = a->bytes_to_client = 0;
	a->tuple = *k;
	memcpy(a->key, req->key, sizeof(a->key));
	a->expires = now + (uint64_t)req->lifetime_s * 1000;
	a->cred_expiry = req->cred_expiry;
	a->txn_len = 0;
	a->quota = req->quota;
	a->port = req->port;
	a->family = req->family;
	a->username_len = (uint8_t)req->username_len;
	memcpy(a->username, req->username, req->username_len);
	a->username[req->username_len] = '\0';
	a->live = true;
	a->next_free = NONE;
	t->slot[tuple_slot(t, k)] = i + 1;
	t->by_port[req->port - p->min] = i;
	a->heap_pos = t->nheap;
	t->heap[t->nheap++] = i;
	a->deadline = a->expires;
	heap_fix(t, a->heap_pos);
	t->active++;
	if (t->known && k->transport == TURN_UDP)
		t->known(t->known_arg, &k->client, true);
	*idx = i;
	return TURN_OK;
}

void turn_alloc_remove(struct turn_alloc_table *t, uint32_t idx)
{
	struct turn_alloc *a = &t->a[idx];

	if (!a->live)
		return;
	if (t->known && a->tuple.transport == TURN_UDP)
		t->known(t->known_arg, &a->tuple.client, false);
	slot_delete(t, t->slot, tuple_slot(t, &a->tuple));
	heap_remove(t, idx);
	t->by_port[a->port - t->ports.min] = NONE;
	port_free(&t->ports, (uint32_t)(a->port - t->ports.min));
	a->live = false;
	a->gen++;
	a->next_free = NONE;
	if (t->free_tail != NONE)
		t->a[t->free_tail].next_free = idx;
	else
		t->free_head = idx;
	t->free_tail = idx;
	t->active--;
}

void turn_alloc_refresh(struct turn_alloc_table *t, uint32_t idx, uint32_t lifetime_s, uint64_t now)
{
	t->a[idx].expires = now + (uint64_t)lifetime_s * 1000;
	deadline_update(t, idx);
}

/* The 16-byte key of a peer: its IP, IPv4 as ::ffff:a.b.c.d. */
static bool peer_ip(const union etr_sockaddr *peer, uint8_t ip[16])
{
	return addrclass_prefix(peer, 32, 128, ip);
}

static int perm_find(const struct turn_alloc *a, const uint8_t ip[16], uint64_t now)
{
	for (int i = 0; i < TURN_PERM_MAX; i++)
		if (a->perm[i].expires > now && memcmp(a->perm[i].ip, ip, 16) == 0)
			return i;
	return -1;
}

static int perm_free_slot(const struct turn_alloc *a, uint64_t now)
{
	for (int i = 0; i < TURN_PERM_MAX; i++)
		if (a->perm[i].expires <= now)
			return i;
	return -1;
}

enum turn_alloc_err turn_alloc_permit(struct turn_alloc_table *t, uint32_t idx,
				      const union etr_sockaddr *peer, uint64_t now)
{
	struct turn_alloc *a = &t->a[idx];
	uint8_t ip[16];
	int i;

	if (!peer_ip(peer, ip))
		return TURN_E_PERM_FULL;
	i = perm_find(a, ip, now);
	if (i < 0 && (i = perm_free_slot(a, now)) < 0)
		return TURN_E_PERM_FULL;
	memcpy(a->perm[i].ip, ip, 16);
	a->perm[i].expires = now + TURN_PERM_LIFETIME_MS;
	deadline_update(t, idx);
	return TURN_OK;
}

enum turn_alloc_err turn_alloc_permit_all(struct turn_alloc_table *t, uint32_t idx,
					  const union etr_sockaddr *peers, unsigned n, uint64_t now)
{
	const struct turn_alloc *a = &t->a[idx];
	uint8_t ip[16], seen[TURN_PERM_MAX][16];
	unsigned fresh = 0, room = 0;

	for (int i = 0; i < TURN_PERM_MAX; i++)
		room += a->perm[i].expires <= now;
	/* Count first: an IP neither permitted nor already counted needs a
	 * place. More than TURN_PERM_MAX new ones can never fit. */
	for (unsigned i = 0; i < n; i++) {
		bool dup = false;

		if (!peer_ip(&peers[i], ip))
			return TURN_E_PERM_FULL;
		if (perm_find(a, ip, now) >= 0)
			continue;
		for (unsigned j = 0; j < fresh && !dup; j++)
			dup = memcmp(seen[j], ip, 16) == 0;
		if (dup)
			continue;
		if (fresh == room)
			return TURN_E_PERM_FULL;
		memcpy(seen[fresh++], ip, 16);
	}
	for (unsigned i = 0; i < n; i++)
		if (turn_alloc_permit(t, idx, &peers[i], now) != TURN_OK)
			return TURN_E_PERM_FULL; /* not reached: counted above */
	return TURN_OK;
}

bool turn_alloc_permitted(const struct turn_alloc_table *t, uint32_t idx,
			  const union etr_sockaddr *peer, uint64_t now)
{
	uint8_t ip[16];

	return peer_ip(peer, ip) && perm_find(&t->a[idx], ip, now) >= 0;
}

static uint16_t peer_port(const union etr_sockaddr *peer)
{
	/* sin_port and sin6_port sit at the same offset. */
	return ntohs(peer->in.sin_port);
}

enum turn_alloc_err turn_alloc_bind(struct turn_alloc_table *t, uint32_t idx, uint16_t num,
				    const union etr_sockaddr *peer, uint64_t now)
{
	struct turn_alloc *a = &t->a[idx];
	uint16_t port = peer_port(peer);
	int by_num = -1, by_peer = -1, slot = -1, p;
	uint8_t ip[16];

	if (num < TURN_CHAN_FIRST || num > TURN_CHAN_LAST)
		return TURN_E_CHAN_RANGE;
	if (!peer_ip(peer, ip))
		return TURN_E_CHAN_CONFLICT;
	for (int i = 0; i < TURN_CHAN_MAX; i++) {
		const struct turn_chan *c = &a->chan[i];

		if (c->expires <= now) {
			if (slot < 0)
				slot = i;
			continue;
		}
		if (c->num == num)
			by_num = i;
		if (c->port == port && memcmp(c->ip, ip, 16) == 0)
			by_peer = i;
	}
	if (by_num != by_peer)
		return TURN_E_CHAN_CONFLICT; /* one of them bound elsewhere */
	if (by_num < 0 && slot < 0)
		return TURN_E_CHAN_FULL;
	/* The permission comes with the channel, so check it can before
	 * changing anything. */
	p = perm_find(a, ip, now);
	if (p < 0 && (p = perm_free_slot(a, now)) < 0)
		return TURN_E_PERM_FULL;
	if (by_num < 0) {
		by_num = slot;
		memcpy(a->chan[slot].ip, ip, 16);
		a->chan[slot].port = port;
		a->chan[slot].num = num;
	}
	a->chan[by_num].expires = now + TURN_CHAN_LIFETIME_MS;
	memcpy(a->perm[p].ip, ip, 16);
	a->perm[p].expires = now + TURN_PERM_LIFETIME_MS;
	deadline_update(t, idx);
	return TURN_OK;
}

void turn_alloc_counts(const struct turn_alloc_table *t, uint32_t idx, uint64_t now,
		       unsigned *perms, unsigned *chans)
{
	const struct turn_alloc *a = &t->a[idx];

	*perms = *chans = 0;
	for (int i = 0; i < TURN_PERM_MAX; i++)
		*perms += a->perm[i].expires > now;
	for (int i = 0; i < TURN_CHAN_MAX; i++)
		*chans += a->chan[i].expires > now;
}

bool turn_alloc_chan_peer(const struct turn_alloc_table *t, uint32_t idx, uint16_t num,
			  uint64_t now, union etr_sockaddr *peer)
{
	const struct turn_alloc *a = &t->a[idx];

	for (int i = 0; i < TURN_CHAN_MAX; i++) {
		const struct turn_chan *c = &a->chan[i];

		if (c->expires <= now || c->num != num)
			continue;
		memset(peer, 0, sizeof(*peer));
		if (a->family == AF_INET && addrclass_key_is_v4(c->ip)) {
			peer->in.sin_family = AF_INET;
			peer->in.sin_port = htons(c->port);
			memcpy(&peer->in.sin_addr, c->ip + 12, 4);
		} else {
			peer->in6.sin6_family = AF_INET6;
			peer->in6.sin6_port = htons(c->port);
			memcpy(&peer->in6.sin6_addr, c->ip, 16);
		}
		return true;
	}
	return false;
}

uint16_t turn_alloc_chan_of(const struct turn_alloc_table *t, uint32_t idx,
			    const union etr_sockaddr *peer, uint64_t now)
{
	const struct turn_alloc *a = &t->a[idx];
	uint16_t port = peer_port(peer);
	uint8_t ip[16];

	if (!peer_ip(peer, ip))
		return 0;
	for (int i = 0; i < TURN_CHAN_MAX; i++) {
		const struct turn_chan *c = &a->chan[i];

		if (c->expires > now && c->port == port && memcmp(c->ip, ip, 16) == 0)
			return c->num;
	}
	return 0;
}

bool turn_alloc_txn_store(struct turn_alloc_table *t, uint32_t idx, const uint8_t tid[12],
			  const void *resp, size_t len, uint64_t now)
{
	struct turn_alloc *a = &t->a[idx];

	if (len == 0 || len > TURN_TXN_RESP_MAX) {
		a->txn_len = 0;
		return false;
	}
	memcpy(a->txn_id, tid, sizeof(a->txn_id));
	memcpy(a->txn_resp, resp, len);
	a->txn_len = (uint16_t)len;
	a->txn_at = now;
	return true;
}

const uint8_t *turn_alloc_txn_find(const struct turn_alloc_table *t, uint32_t idx,
				   const uint8_t tid[12], uint64_t now, size_t *len)
{
	const struct turn_alloc *a = &t->a[idx];

	if (a->txn_len == 0 || now - a->txn_at >= TURN_TXN_KEEP_MS ||
	    memcmp(a->txn_id, tid, sizeof(a->txn_id)) != 0)
		return NULL;
	*len = a->txn_len;
	return a->txn_resp;
}

uint32_t turn_alloc_expire(struct turn_alloc_table *t, uint64_t now)
{
	resv_expire(t, now);
	while (t->nheap > 0 && t->a[t->heap[0]].deadline <= now) {
		uint32_t idx = t->heap[0];
		struct turn_alloc *a = &t->a[idx];

		if (a->expires <= now)
			return idx;
		for (unsigned i = 0; i < TURN_PERM_MAX; i++)
			if (a->perm[i].expires <= now)
				a->perm[i].expires = 0;
		for (unsigned i = 0; i < TURN_CHAN_MAX; i++)
			if (a->chan[i].expires <= now)
				a->chan[i].expires = 0;
		deadline_update(t, idx);
	}
	return NONE;
}

uint64_t turn_alloc_next_deadline(const struct turn_alloc_table *t)
{
	uint64_t d = t->nheap ? t->a[t->heap[0]].deadline : UINT64_MAX;

	for (uint32_t i = 0; i < t->nresv; i++)
		if (t->resv[i].expires < d)
			d = t->resv[i].expires;
	return d;
}

uint32_t turn_alloc_deref(const struct turn_alloc_table *t, uint32_t ref)
{
	uint32_t idx = ref_idx(ref, TURN_ALLOC_IDX_BITS);

	if (idx >= t->cap || !t->a[idx].live ||
	    !ref_gen_ok(ref, TURN_ALLOC_IDX_BITS, TURN_ALLOC_GEN_BITS, t->a[idx].gen))
		return NONE;
	return idx;
}
