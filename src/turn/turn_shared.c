/* SPDX-License-Identifier: ISC */
/* What the workers of a TURN listener share and the ops plane reads without
 * linking them: the per-userid allocation count (user-quota) and the names
 * of the counters' labels. */
#include "turn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "secret.h"

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
    [TURN_DROP_CLIENT_SLOW] = "client_slow",	 [TURN_DROP_THROTTLED_TOTAL] = "throttled_total",
    [TURN_DROP_OVERSIZE] = "oversize",		 [TURN_DROP_BANNED] = "banned",
    [TURN_DROP_AUTH_RATE_IP] = "auth_rate_ip",	 [TURN_DROP_AUTH_RATE] = "auth_rate",
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

/* ---- secrets, the peer policy, the TLS pair: set up and reloaded ---- */

static int turn_secret_read(const char *var, uint8_t *out, size_t *len, char *err, size_t errlen)
{
	char buf[1024];
	size_t n = 0;
	int rc = secret_from_env("turn", var, buf, sizeof(buf), &n, err, errlen);

	if (rc <= 0) {
		*len = 0;
		explicit_bzero(buf, sizeof(buf));
		return rc;
	}
	memcpy(out, buf, n);
	*len = n;
	explicit_bzero(buf, sizeof(buf));
	return 1;
}

int turn_secrets_read(struct turn_secret_set *out, char *err, size_t errlen)
{
	static const char *const vars[TURN_SECRETS_MAX] = {CONF_TURN_ENV_SECRET,
							   CONF_TURN_ENV_SECRET_NEXT};
	int set = 0;

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < TURN_SECRETS_MAX; i++) {
		int rc = turn_secret_read(vars[i], out->s[i], &out->len[i], err, errlen);

		if (rc < 0) {
			explicit_bzero(out, sizeof(*out));
			return -1;
		}
		set += rc;
	}
	if (set == 0) {
		snprintf(err, errlen,
			 "no TURN secret: set %s (or %s_FILE), at least %d bytes (for example "
			 "`openssl rand -hex 32`); %s is the next one during a rotation",
			 CONF_TURN_ENV_SECRET, CONF_TURN_ENV_SECRET, CONF_TURN_SECRET_MIN,
			 CONF_TURN_ENV_SECRET_NEXT);
		return -1;
	}
	return set;
}

static void cidr_of(const struct conf_cidr *c, struct addr_cidr *out)
{
	memset(out, 0, sizeof(*out));
	if (c->addr.sa.sa_family == AF_INET) {
		out->net[10] = out->net[11] = 0xff;
		memcpy(out->net + 12, &c->addr.in.sin_addr, 4);
		out->bits = (uint8_t)(c->bits + 96);
	} else {
		memcpy(out->net, &c->addr.in6.sin6_addr, 16);
		out->bits = c->bits;
	}
	/* Host bits off: the block is what its prefix says. */
	for (unsigned b = out->bits; b < 128; b++)
		out->net[b / 8] &= (uint8_t) ~(0x80u >> (b % 8));
}

int turn_relay_addr_check(const struct turn_conf *c, char *err, size_t errlen)
{
	union etr_sockaddr a = c->relay_addr;
	char s[ADDR_STRLEN];
	int fd = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = 0;

	if (fd < 0)
		return 0;  /* no socket at all: the listener's own bind says why */
	a.in.sin_port = 0; /* the same offset in both families */
	if (bind(fd, &a.sa, addr_len(&a)) < 0 && errno == EADDRNOTAVAIL) {
		addr_str(&a.sa, s);
		if (a.sa.sa_family == AF_INET && strrchr(s, ':'))
			*strrchr(s, ':') = '\0';
		snprintf(err, errlen, "relay-address %s: not an address of this host", s);
		rc = -1;
	}
	close(fd);
	return rc;
}

int turn_shared_init(struct turn_shared *sh, unsigned i, const struct turn_conf *c,
		     unsigned nworkers, char *err, size_t errlen)
{
	struct turn_lshared *l = &sh->l[i];
	uint8_t rnd[32], key[16];
	uint32_t width = (uint32_t)c->port_max - c->port_min + 1;

	if (i == 0) {
		pthread_rwlock_init(&sh->lock, NULL);
		if (turn_secrets_read(&sh->secrets, err, errlen) < 0)
			return -1;
	}
	sh->nworkers = nworkers;
	memset(l, 0, sizeof(*l));
	l->conf = c;
	turn_peer_init(&l->policy);
	for (unsigned k = 0; k < c->ndeny; k++) {
		struct addr_cidr b;

		cidr_of(&c->deny[k], &b);
		turn_peer_deny(&l->policy, &b);
	}
	for (unsigned k = 0; k < c->nallow; k++) {
		struct addr_cidr b;

		cidr_of(&c->allow[k], &b);
		turn_peer_allow(&l->policy, &b);
	}
	/* Client to client: the relayed ports of relay-address (and of
	 * public-ip, the same address behind a NAT). The host's other
	 * addresses and the daemon's sockets: turn_shared_guard. */
	turn_peer_own(&l->policy, &c->relay_addr);
	if (c->public_ip.sa.sa_family == AF_INET || c->public_ip.sa.sa_family == AF_INET6)
		turn_peer_own(&l->policy, &c->public_ip);
	turn_peer_ports(&l->policy, c->port_min, c->port_max);
	turn_peer_live_ports(&l->policy, l->live_ports);
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		for (unsigned k = 0; k < 4; k++) {
			uint64_t v = net_random64();

			memcpy(rnd + 8 * k, &v, 8);
		}
	}
	turn_nonce_key_init(&l->nonce_key, rnd);
	explicit_bzero(rnd, sizeof(rnd));
	rl_random_key(net_random64, key);
	if (turn_quota_init(&l->quota, c->max_allocations, c->user_quota, key) < 0) {
		snprintf(err, errlen, "user-quota: out of memory");
		return -1;
	}
	/* Each worker relays from a slice of its own. */
	if (width < nworkers) {
		snprintf(err, errlen, "ports %u-%u: fewer ports than workers (%u)", c->port_min,
			 c->port_max, nworkers);
		turn_quota_free(&l->quota);
		return -1;
	}
	for (unsigned w = 0; w < nworkers; w++) {
		l->worker_min[w] = (uint16_t)(c->port_min + (uint64_t)width * w / nworkers);
		l->worker_max[w] =
		    (uint16_t)(c->port_min + (uint64_t)width * (w + 1) / nworkers - 1);
	}
	/* A pair that does not load is a startup error; later, a reload
	 * that fails keeps the last good one. */
	if (c->tls_set) {
		int rc = tls_server_init(&l->tls);

		if (rc < 0) {
			snprintf(err, errlen, "tls: %s", strerror(-rc));
			turn_quota_free(&l->quota);
			return -1;
		}
		if (tls_reload_init(&l->reload, &l->tls, c->tls_cert, c->tls_key, loop_now(), err,
				    errlen) < 0) {
			tls_server_free(&l->tls);
			turn_quota_free(&l->quota);
			return -1;
		}
		l->tls_on = true;
	}
	sh->n = i + 1;
	return 0;
}

void turn_shared_reload_tls(struct turn_shared *sh, uint64_t now)
{
	for (unsigned i = 0; i < sh->n; i++) {
		struct turn_lshared *l = &sh->l[i];

		if (!l->tls_on)
			continue;
		switch (tls_reload_check(&l->reload, now)) {
		case TLS_RELOAD_LOADED:
			log_info("SIGHUP: turn %s: certificate reloaded from %s", l->conf->name,
				 l->conf->tls_cert);
			break;
		case TLS_RELOAD_FAILED:
			log_warnx("SIGHUP: turn %s: certificate reload: %s (the last good pair "
				  "stays in force)",
				  l->conf->name, l->reload.error);
			break;
		default:
			/* A broken pair on disk is not tried again until it
			 * changes: say that it is still the broken one. */
			if (memcmp(l->reload.tried, l->reload.in_force, sizeof(l->reload.tried)))
				log_warnx("SIGHUP: turn %s: certificate unchanged since a reload "
					  "that failed (%s); the last good pair stays in force",
					  l->conf->name, l->reload.error);
			else
				log_info("SIGHUP: turn %s: certificate unchanged (%s)",
					 l->conf->name, l->conf->tls_cert);
			break;
		}
	}
}

int turn_shared_reload(struct turn_shared *sh, char *err, size_t errlen)
{
	struct turn_secret_set *fresh = malloc(sizeof(*fresh));
	int set;

	if (!fresh) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	set = turn_secrets_read(fresh, err, errlen);
	if (set > 0) {
		pthread_rwlock_wrlock(&sh->lock);
		memcpy(&sh->secrets, fresh, sizeof(*fresh));
		sh->secrets_gen++;
		pthread_rwlock_unlock(&sh->lock);
	}
	explicit_bzero(fresh, sizeof(*fresh));
	free(fresh);
	return set;
}

void turn_shared_free(struct turn_shared *sh)
{
	for (unsigned i = 0; i < sh->n; i++)
		turn_quota_free(&sh->l[i].quota);
	for (unsigned i = 0; i < sh->n; i++)
		if (sh->l[i].tls_on) {
			tls_reload_free(&sh->l[i].reload);
			tls_server_free(&sh->l[i].tls);
			sh->l[i].tls_on = false;
		}
	if (sh->n)
		pthread_rwlock_destroy(&sh->lock);
	explicit_bzero(&sh->secrets, sizeof(sh->secrets));
	sh->n = 0;
}
