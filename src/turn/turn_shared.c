/* SPDX-License-Identifier: ISC */
/* What the workers of a TURN listener share and the ops plane reads without
 * linking them: the per-userid allocation count (user-quota) and the names
 * of the counters' labels. */
#include "turn.h"

#include <errno.h>
#include <stdlib.h>

/* ---- user-quota across the workers ---- */

int turn_quota_init(struct turn_quota *q, uint32_t cap, uint32_t quota, const uint8_t key[16])
{
	uint32_t n = 2;

	memset(q, 0, sizeof(*q));
	if (cap == 0 || cap > (1u << 24) || quota == 0)
		return -EINVAL;
	while (n < 2 * cap)
		n <<= 1;
	q->e = calloc(cap, sizeof(*q->e));
	q->slot = calloc(n, sizeof(*q->slot));
	if (!q->e || !q->slot) {
		free(q->e);
		free(q->slot);
		memset(q, 0, sizeof(*q));
		return -ENOMEM;
	}
	pthread_mutex_init(&q->lock, NULL);
	q->cap = cap;
	q->mask = n - 1;
	q->quota = quota;
	memcpy(q->key, key, sizeof(q->key));
	for (uint32_t i = 0; i < cap; i++)
		q->e[i].next_free = i + 1 < cap ? i + 1 : TURN_ALLOC_NONE;
	q->free_head = 0;
	return 0;
}

void turn_quota_free(struct turn_quota *q)
{
	if (!q->e)
		return;
	pthread_mutex_destroy(&q->lock);
	free(q->e);
	free(q->slot);
	memset(q, 0, sizeof(*q));
}

static uint32_t quota_home(const struct turn_quota *q, const char *u, size_t n)
{
	return (uint32_t)addr_siphash(u, n, q->key) & q->mask;
}

/* The slot of userid u, or the empty one ending its chain. */
static uint32_t quota_slot(const struct turn_quota *q, const char *u, size_t n)
{
	uint32_t i = quota_home(q, u, n);

	while (q->slot[i] != 0) {
		const struct turn_quota_entry *e = &q->e[q->slot[i] - 1];

		if (e->len == n && memcmp(e->userid, u, n) == 0)
			break;
		i = (i + 1) & q->mask;
	}
	return i;
}

/* Empty slot i and shift later members of its chain back (no tombstones). */
static void quota_slot_delete(struct turn_quota *q, uint32_t i)
{
	uint32_t j = i;

	q->slot[i] = 0;
	for (;;) {
		const struct turn_quota_entry *e;
		uint32_t home;

		j = (j + 1) & q->mask;
		if (q->slot[j] == 0)
			return;
		e = &q->e[q->slot[j] - 1];
		home = quota_home(q, e->userid, e->len);
		/* Move j to i unless its home lies cyclically in (i, j]. */
		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			q->slot[i] = q->slot[j];
			q->slot[j] = 0;
			i = j;
		}
	}
}

enum turn_alloc_err turn_quota_take(struct turn_quota *q, const char *userid, size_t len,
				    uint32_t *entry)
{
	enum turn_alloc_err err = TURN_OK;
	uint32_t s, i;

	if (len > TURN_USERNAME_MAX)
		return TURN_E_USERNAME;
	pthread_mutex_lock(&q->lock);
	s = quota_slot(q, userid, len);
	if (q->slot[s] != 0) {
		i = q->slot[s] - 1;
		if (q->e[i].count >= q->quota) {
			err = TURN_E_QUOTA;
			goto out;
		}
	} else if (q->free_head == TURN_ALLOC_NONE) {
		err = TURN_E_FULL;
		goto out;
	} else {
		i = q->free_head;
		q->free_head = q->e[i].next_free;
		q->e[i].len = (uint8_t)len;
		memcpy(q->e[i].userid, userid, len);
		q->slot[s] = i + 1;
		q->used++;
	}
	q->e[i].count++;
	*entry = i;
out:
	pthread_mutex_unlock(&q->lock);
	return err;
}

void turn_quota_put(struct turn_quota *q, uint32_t entry)
{
	struct turn_quota_entry *e;

	if (entry >= q->cap)
		return;
	pthread_mutex_lock(&q->lock);
	e = &q->e[entry];
	if (e->count > 0 && --e->count == 0) {
		quota_slot_delete(q, quota_slot(q, e->userid, e->len));
		e->next_free = q->free_head;
		q->free_head = entry;
		q->used--;
	}
	pthread_mutex_unlock(&q->lock);
}

uint32_t turn_quota_count(struct turn_quota *q, const char *userid, size_t len)
{
	uint32_t v, n = 0;

	if (len > TURN_USERNAME_MAX)
		return 0;
	pthread_mutex_lock(&q->lock);
	v = q->slot[quota_slot(q, userid, len)];
	if (v)
		n = q->e[v - 1].count;
	pthread_mutex_unlock(&q->lock);
	return n;
}

/* ---- labels ---- */

static const char *const reject_names[TURN_REJECTS] = {
    [TURN_REJ_CAP] = "cap",	[TURN_REJ_QUOTA] = "quota",   [TURN_REJ_DRAIN] = "drain",
    [TURN_REJ_PORTS] = "ports", [TURN_REJ_EXISTS] = "exists", [TURN_REJ_REQUEST] = "bad_request",
};
static const char *const authf_names[TURN_AUTHFS] = {
    [TURN_AF_BAD_INTEGRITY] = "bad_integrity",
    [TURN_AF_BAD_USERNAME] = "bad_username",
    [TURN_AF_EXPIRED] = "expired",
    [TURN_AF_STALE_NONCE] = "stale_nonce",
    [TURN_AF_WRONG_USER] = "wrong_user",
    [TURN_AF_MISSING] = "missing_attributes",
    [TURN_AF_BAD_NONCE] = "bad_nonce",
};
static const char *const drop_names[TURN_DROPS] = {
    [TURN_DROP_NOT_TURN] = "not_turn",		 [TURN_DROP_MALFORMED] = "malformed",
    [TURN_DROP_NO_ALLOCATION] = "no_allocation", [TURN_DROP_NO_PERMISSION] = "no_permission",
    [TURN_DROP_NO_CHANNEL] = "no_channel",	 [TURN_DROP_PEER_REFUSED] = "peer_refused",
    [TURN_DROP_SEND_FAILED] = "send_failed",	 [TURN_DROP_THROTTLED] = "throttled",
    [TURN_DROP_UNEXPECTED] = "unexpected",	 [TURN_DROP_TRUNCATED] = "truncated",
    [TURN_DROP_CLIENT_SLOW] = "client_slow",
    [TURN_DROP_THROTTLED_TOTAL] = "throttled_total",
    [TURN_DROP_OVERSIZE] = "oversize",
    [TURN_DROP_BANNED] = "banned",
    [TURN_DROP_AUTH_RATE_IP] = "auth_rate_ip",
    [TURN_DROP_AUTH_RATE] = "auth_rate",
};

static const char *const tcp_drop_names[TURN_TCP_DROPS] = {
    [TURN_TCP_PER_IP] = "per_ip",
    [TURN_TCP_FULL] = "full",
    [TURN_TCP_FRAME_MEMORY] = "frame_memory",
    [TURN_TCP_EVICTED] = "evicted",
    [TURN_TCP_AUTH_TIMEOUT] = "auth_timeout",
    [TURN_TCP_BANNED] = "banned",
    [TURN_TCP_TLS_RATE_IP] = "tls_rate_ip",
    [TURN_TCP_TLS_RATE] = "tls_rate",
    [TURN_TCP_UNAUTH_CHANNEL] = "unauth_channel",
    [TURN_TCP_UNAUTH_LARGE] = "unauth_large",
    [TURN_TCP_AUTH_RATE_IP] = "auth_rate_ip",
    [TURN_TCP_AUTH_RATE] = "auth_rate",
    [TURN_TCP_UNAUTH_RATE_IP] = "unauth_rate_ip",
    [TURN_TCP_UNAUTH_RATE] = "unauth_rate",
};

const uint16_t turn_error_codes[TURN_ERROR_CODES] = {
    400, 401, 403, 420, 437, 438, 440, 441, 442, 443, 486, 508, 0,
};

unsigned turn_error_index(int code)
{
	for (unsigned i = 0; i + 1 < TURN_ERROR_CODES; i++)
		if (turn_error_codes[i] == code)
			return i;
	return TURN_ERROR_CODES - 1;
}

const char *turn_tcp_drop_name(enum turn_tcp_drop d)
{
	return d < TURN_TCP_DROPS ? tcp_drop_names[d] : "?";
}

const char *turn_reject_name(enum turn_reject r)
{
	return r < TURN_REJECTS ? reject_names[r] : "?";
}

const char *turn_authf_name(enum turn_authf a)
{
	return a < TURN_AUTHFS ? authf_names[a] : "?";
}

const char *turn_drop_name(enum turn_drop d)
{
	return d < TURN_DROPS ? drop_names[d] : "?";
}
