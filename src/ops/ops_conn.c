/* SPDX-License-Identifier: ISC */
/* The ops listener's connection slots. libmicrohttpd's own timeout counts
 * idle time only, so a client that trickles a byte every few seconds would
 * keep a slot for ever: here every request has an absolute deadline, each
 * source address a share, and a full table makes room for the newcomer, or
 * lets it ask for health only. */
#include "ops_conn.h"

#include <string.h>

#include "addrclass.h"

#define NSEC_PER_SEC 1000000000ull

/* The connection that gives way when every slot is live: one of the
 * address that holds the most, its oldest, and only if that address holds
 * at least two more than the newcomer's (a fairer share) or the request has
 * had OPS_CONN_SLOW_MS to finish (a prober's finishes within a round trip):
 * a burst of fresh requests from as many addresses is not cut short.
 * Quadratic in the slots, and run only when all of them are taken. */
static int victim_of(const struct ops_conns *t, unsigned same, uint64_t now)
{
	uint64_t slow = (uint64_t)(OPS_CONN_DEADLINE_SEC * 1000 - OPS_CONN_SLOW_MS) * 1000000ull;
	unsigned most = 0;
	int pick = -1;

	for (int i = 0; i < OPS_CONN_SLOTS; i++) {
		const struct ops_conn *c = &t->c[i];
		unsigned held = 0;

		if (!c->used || c->closing)
			continue;
		for (int k = 0; k < OPS_CONN_SLOTS; k++)
			held +=
			    t->c[k].used && !t->c[k].closing && memcmp(t->c[k].ip, c->ip, 16) == 0;
		/* deadline - slow is when it will have waited OPS_CONN_SLOW_MS */
		if (held < same + 2 && c->deadline > now + slow)
			continue;
		if (held > most || (held == most && c->deadline < t->c[pick].deadline)) {
			most = held;
			pick = i;
		}
	}
	return pick;
}

/* The reserve connection that gives way when the reserve is full too: the
 * oldest that has not sent a whole request. A health check sends its
 * request with the handshake's last packet, so it is served long before
 * OPS_CONN_RESERVE newer connections push it out. */
static int reserve_victim(const struct ops_conns *t)
{
	int pick = -1;

	for (int i = 0; i < OPS_CONN_SLOTS; i++) {
		const struct ops_conn *c = &t->c[i];

		if (!c->used || c->closing || !c->reserve || c->asked)
			continue;
		if (pick < 0 || c->deadline < t->c[pick].deadline)
			pick = i;
	}
	return pick;
}

/* The reserve connection source ip holds, or -1. */
static int own_reserve(const struct ops_conns *t, const uint8_t ip[16])
{
	for (int i = 0; i < OPS_CONN_SLOTS; i++) {
		const struct ops_conn *c = &t->c[i];

		if (c->used && !c->closing && c->reserve && memcmp(c->ip, ip, 16) == 0)
			return i;
	}
	return -1;
}

enum ops_conn_verdict ops_conn_admit(struct ops_conns *t, const union etr_sockaddr *sa,
				     uint64_t now, int *victim)
{
	uint8_t ip[16];
	unsigned same = 0, used = 0;
	int v;

	*victim = -1;
	t->next_reserve = false;
	if (!addrclass_key(sa, ip)) {
		t->refused++;
		return OPS_CONN_REFUSE_IP;
	}
	for (int i = 0; i < OPS_CONN_SLOTS; i++) {
		const struct ops_conn *c = &t->c[i];

		if (!c->used)
			continue;
		used++;
		if (!c->closing && memcmp(c->ip, ip, 16) == 0)
			same++;
	}
	if (same >= OPS_CONN_PER_IP) {
		/* Its share is full: the reserve, one connection of its own
		 * there at a time (health only), its older one giving way
		 * unless that one's request is in. */
		if ((v = own_reserve(t, ip)) >= 0 && t->c[v].asked) {
			t->refused++;
			return OPS_CONN_REFUSE_IP;
		}
		if (used >= OPS_CONN_SLOTS) {
			t->refused++;
			return OPS_CONN_REFUSE_FULL;
		}
		t->next_reserve = true;
		if (v < 0 && t->reserved < OPS_CONN_RESERVE)
			return OPS_CONN_ACCEPT;
		if (v < 0 && (v = reserve_victim(t)) < 0) {
			t->next_reserve = false;
			t->refused++;
			return OPS_CONN_REFUSE_FULL;
		}
		goto evict;
	}
	if (used >= OPS_CONN_SLOTS) {
		t->refused++;
		return OPS_CONN_REFUSE_FULL;
	}
	if (t->live - t->reserved < OPS_CONN_MAX)
		return OPS_CONN_ACCEPT;
	if ((v = victim_of(t, same, now)) < 0) {
		if (t->reserved < OPS_CONN_RESERVE)
			return OPS_CONN_ACCEPT;
		if ((v = reserve_victim(t)) < 0) {
			t->refused++;
			return OPS_CONN_REFUSE_FULL;
		}
	}
evict:
	t->c[v].closing = true;
	t->live--;
	t->reserved -= t->c[v].reserve;
	t->evicted++;
	*victim = v;
	return OPS_CONN_EVICT;
}

int ops_conn_add(struct ops_conns *t, const union etr_sockaddr *sa, int fd, void *handle,
		 uint64_t now)
{
	uint8_t ip[16];

	if (!addrclass_key(sa, ip)) {
		t->refused++;
		return -1;
	}
	for (int i = 0; i < OPS_CONN_SLOTS; i++) {
		struct ops_conn *c = &t->c[i];

		if (c->used)
			continue;
		*c = (struct ops_conn){.used = true,
				       .reserve =
					   t->next_reserve || t->live - t->reserved >= OPS_CONN_MAX,
				       .fd = fd,
				       .handle = handle,
				       .deadline = now + OPS_CONN_DEADLINE_SEC * NSEC_PER_SEC};
		memcpy(c->ip, ip, 16);
		t->next_reserve = false;
		t->live++;
		t->reserved += c->reserve;
		return i;
	}
	t->refused++;
	return -1;
}

bool ops_conn_asked(struct ops_conns *t, int i, bool health)
{
	if (i < 0 || i >= OPS_CONN_SLOTS || !t->c[i].used)
		return true;
	t->c[i].asked = true;
	return health || !t->c[i].reserve;
}

void ops_conn_answered(struct ops_conns *t, int i, uint64_t now)
{
	if (i < 0 || i >= OPS_CONN_SLOTS || !t->c[i].used)
		return;
	t->c[i].asked = false;
	t->c[i].deadline = now + OPS_CONN_DEADLINE_SEC * NSEC_PER_SEC;
}

void ops_conn_remove(struct ops_conns *t, int i)
{
	if (i < 0 || i >= OPS_CONN_SLOTS || !t->c[i].used)
		return;
	if (!t->c[i].closing) {
		t->live--;
		t->reserved -= t->c[i].reserve;
	}
	memset(&t->c[i], 0, sizeof(t->c[i]));
}

int ops_conn_next_expired(struct ops_conns *t, uint64_t now)
{
	for (int i = 0; i < OPS_CONN_SLOTS; i++) {
		struct ops_conn *c = &t->c[i];

		if (!c->used || c->closing || c->deadline > now)
			continue;
		c->closing = true;
		t->live--;
		t->reserved -= c->reserve;
		t->expired++;
		return i;
	}
	return -1;
}

uint64_t ops_conn_next_deadline(const struct ops_conns *t)
{
	uint64_t next = UINT64_MAX;

	for (int i = 0; i < OPS_CONN_SLOTS; i++)
		if (t->c[i].used && !t->c[i].closing && t->c[i].deadline < next)
			next = t->c[i].deadline;
	return next;
}
