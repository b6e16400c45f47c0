/* SPDX-License-Identifier: ISC */
/* The SNI listeners' shared part: the route table in force per listener
 * (config file and control plane, rebuilt whole and swapped), the retired
 * tables kept until every worker let go, and the caps across workers. */
#include "sni_shared.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

#include "addrclass.h"
#include "log.h"

static const char *const result_names[SNI_RESULTS] = {
    [SNI_SPLICED] = "spliced",
    [SNI_UNKNOWN_NAME] = "unknown_name",
    [SNI_NO_SNI] = "no_sni",
    [SNI_NOT_TLS] = "not_tls",
    [SNI_NOT_CLIENT_HELLO] = "not_client_hello",
    [SNI_BAD_NAME] = "bad_name",
    [SNI_MALFORMED] = "malformed",
    [SNI_TOO_BIG] = "too_big",
    [SNI_PREREAD_TIMEOUT] = "preread_timeout",
    [SNI_PREREAD_CLOSED] = "preread_closed",
    [SNI_CAP_CONNECTIONS] = "cap_connections",
    [SNI_CAP_PER_IP] = "cap_per_ip",
    [SNI_CAP_PREREAD] = "cap_preread",
    [SNI_PREREAD_EVICTED] = "preread_evicted",
    [SNI_DRAINING] = "draining",
    [SNI_CONNECT_FAILED] = "connect_failed",
    [SNI_CONNECT_TIMEOUT] = "connect_timeout",
    [SNI_ROUTE_GONE] = "route_gone",
    [SNI_NO_RESOURCES] = "no_resources",
    [SNI_BANNED] = "banned",
    [SNI_TUNNEL] = "tunnel",
};

static const char *const end_names[SNI_ENDS] = {
    [SNI_END_DONE] = "done",	   [SNI_END_IDLE] = "idle",	  [SNI_END_RESET] = "reset",
    [SNI_END_REVOKED] = "revoked", [SNI_END_STALLED] = "stalled", [SNI_END_SHUTDOWN] = "shutdown",
    [SNI_END_BANNED] = "banned",
};

const char *sni_result_name(enum sni_result r)
{
	return r < SNI_RESULTS ? result_names[r] : "?";
}

const char *sni_end_name(enum sni_end e)
{
	return e < SNI_ENDS ? end_names[e] : "?";
}

const uint64_t sni_preread_bound_ns[SNI_PREREAD_BUCKETS] = {
    1000000ull,	  5000000ull,	 25000000ull,	100000000ull,
    500000000ull, 1000000000ull, 5000000000ull, 10000000000ull,
};

unsigned sni_preread_bucket(uint64_t ns)
{
	unsigned b = 0;

	while (b < SNI_PREREAD_BUCKETS && ns > sni_preread_bound_ns[b])
		b++;
	return b;
}

int sni_shared_init(struct sni_shared *sh, unsigned i, const struct sni_conf *c,
		    const struct sni_route *file, size_t n, unsigned nworkers, char *err,
		    size_t errlen)
{
	struct sni_lshared *l = &sh->l[i];
	struct sni_routes *t = NULL;
	int rc;

	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	if (i == 0)
		pthread_mutex_init(&sh->tunnel.lock, NULL);
	l->conf = c;
	sh->nworkers = nworkers;
	if (i >= sh->n)
		sh->n = i + 1;
	if (sni_routes_build(&t, file, n, err, errlen) < 0)
		return -1;
	l->cur = t;
	l->gen = 1;
	atomic_store(&l->nroutes, (uint32_t)sni_routes_count(t));
	if (n) {
		l->file = malloc(n * sizeof(*file));
		if (!l->file) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		memcpy(l->file, file, n * sizeof(*file));
		l->nfile = n;
	}
	/* A source's count is held by its open connections (max-connections
	 * across the workers), its lingering ones (SNI_LINGER_MAX) and
	 * those each worker is accepting (a margin). */
	rc = srctab_init(&l->ips,
			 c->max_connections + SNI_LINGER_MAX(c->max_connections) + 16 * nworkers,
			 c->max_per_ip, 0);
	if (rc < 0) {
		snprintf(err, errlen, "per-source table: %s", strerror(-rc));
		return -1;
	}
	return 0;
}

/* Free the retired tables no worker uses any more. Under l->lock. */
static void collect(struct sni_lshared *l, unsigned nworkers)
{
	uint64_t low = UINT64_MAX;
	unsigned k = 0;

	for (unsigned w = 0; w < nworkers; w++) {
		uint64_t g = atomic_load_explicit(&l->taken[w], memory_order_acquire);

		if (g < low)
			low = g;
	}
	for (unsigned j = 0; j < l->nretired; j++) {
		if (l->retired[j].gen <= low)
			sni_routes_free(l->retired[j].t);
		else
			l->retired[k++] = l->retired[j];
	}
	l->nretired = k;
}

/* The config file routes r's name too (the file's route wins). */
static bool shadowed(const struct sni_lshared *l, const struct sni_route *r)
{
	for (size_t j = 0; j < l->nfile; j++)
		if (strcasecmp(l->file[j].name, r->name) == 0)
			return true;
	return false;
}

/* Log the control plane's routes the file shadows, once per change of the
 * set: those not in the set in force. Called only for a set committed, so
 * a set refused (by a later listener, say) and sent again logs nothing. */
static void log_shadowed(const struct sni_lshared *l, const struct sni_route *ctl, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bool before = false;

		if (!shadowed(l, &ctl[i]))
			continue;
		for (size_t j = 0; j < l->nctl && !before; j++)
			before = strcasecmp(l->ctl[j].name, ctl[i].name) == 0;
		if (!before)
			log_info("sni %s: route %s: the config file's route wins over the "
				 "control plane's",
				 l->conf->name, ctl[i].name);
	}
}

/* The control plane's set in force (every listener holds the same) is list:
 * the same routes in the same order. The control thread alone writes it. */
static bool same_control_routes(const struct sni_shared *sh, const struct sni_route *list, size_t n)
{
	for (unsigned i = 0; i < sh->n; i++) {
		const struct sni_lshared *l = &sh->l[i];

		if (l->nctl != n)
			return false;
		for (size_t j = 0; j < n; j++)
			if (strcmp(l->ctl[j].name, list[j].name) != 0 ||
			    !addr_equal(&l->ctl[j].upstream, &list[j].upstream) ||
			    l->ctl[j].proxy_v2 != list[j].proxy_v2)
				return false;
	}
	return true;
}

/* Listener l's table from its file routes and ctl (n), the file's winning
 * a name in both. Not under l->lock, so that accepts (sni_shared_ip_take)
 * never wait for a build: it reads the file's routes (fixed at start) and
 * the control plane's (written only by sni_set_control_routes, which the
 * control thread alone calls). */
static int build(struct sni_lshared *l, const struct sni_route *ctl, size_t n,
		 struct sni_routes **out, char *err, size_t errlen)
{
	struct sni_route *all = malloc((l->nfile + n + 1) * sizeof(*all));
	size_t m = l->nfile;
	int rc;

	if (!all) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (l->nfile)
		memcpy(all, l->file, l->nfile * sizeof(*all));
	for (size_t i = 0; i < n; i++)
		if (!shadowed(l, &ctl[i]))
			all[m++] = ctl[i];
	rc = sni_routes_build(out, all, m, err, errlen);
	free(all);
	return rc < 0 ? -1 : 0;
}

int sni_shared_loop(const struct sni_shared *sh, const union etr_sockaddr *up)
{
	for (unsigned i = 0; i < sh->n; i++)
		if (addrclass_loops(up, &sh->l[i].conf->listen, sh->local, sh->nlocal))
			return (int)i;
	return -1;
}

int sni_set_control_routes(struct sni_shared *sh, const struct sni_route *list, size_t n, char *err,
			   size_t errlen)
{
	struct sni_routes *fresh[CONF_SNI_MAX] = {NULL};
	struct sni_route *copy[CONF_SNI_MAX] = {NULL};
	int rc = 0;

	if (n > SNI_CONTROL_ROUTES_MAX) {
		snprintf(err, errlen, "%zu routes, at most %u", n, SNI_CONTROL_ROUTES_MAX);
		return -1;
	}
	/* Most heartbeats answer the set in force: nothing to build, swap or
	 * re-check (it passed the loop check below when it came). */
	if (same_control_routes(sh, list, n))
		return 0;
	/* A route back to one of our own listeners would chain connections
	 * until the caps run out: the whole set is refused. */
	for (size_t j = 0; j < n; j++) {
		int i = sni_shared_loop(sh, &list[j].upstream);
		char a[ADDR_STRLEN], b[ADDR_STRLEN];

		if (i >= 0) {
			snprintf(err, errlen,
				 "route %s: upstream %s is the SNI listener %s (%s): a loop",
				 list[j].name, addr_str(&list[j].upstream.sa, a),
				 sh->l[i].conf->name, addr_str(&sh->l[i].conf->listen.sa, b));
			return -1;
		}
	}

	/* Everything is built first: a bad set changes nothing anywhere. */
	for (unsigned i = 0; i < sh->n && rc == 0; i++) {
		struct sni_lshared *l = &sh->l[i];

		bool full;

		pthread_mutex_lock(&l->lock);
		collect(l, sh->nworkers);
		full = l->nretired == SNI_RETIRED_MAX; /* only this function adds */
		pthread_mutex_unlock(&l->lock);
		if (full) {
			snprintf(err, errlen,
				 "sni %s: a worker still uses older route tables; "
				 "try again",
				 l->conf->name);
			rc = -1;
		} else if (build(l, list, n, &fresh[i], err, errlen) < 0) {
			rc = -1;
		} else if (n && !(copy[i] = malloc(n * sizeof(*list)))) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
		}
	}
	if (rc < 0) {
		for (unsigned i = 0; i < sh->n; i++) {
			sni_routes_free(fresh[i]);
			free(copy[i]);
		}
		return -1;
	}
	for (unsigned i = 0; i < sh->n; i++) {
		struct sni_lshared *l = &sh->l[i];

		if (n)
			memcpy(copy[i], list, n * sizeof(*list));
		log_shadowed(l, list, n);
		pthread_mutex_lock(&l->lock);
		free(l->ctl);
		l->ctl = copy[i];
		l->nctl = n;
		l->gen++;
		l->retired[l->nretired].t = l->cur;
		l->retired[l->nretired++].gen = l->gen;
		l->cur = fresh[i];
		atomic_store(&l->nroutes, (uint32_t)sni_routes_count(fresh[i]));
		pthread_mutex_unlock(&l->lock);
	}
	if (sh->publish)
		sh->publish(sh);
	return 0;
}

void sni_listener_info(struct sni_shared *sh, unsigned i, uint32_t *active, uint32_t *capacity,
		       uint32_t *routes)
{
	struct sni_lshared *l = &sh->l[i];

	*active = atomic_load_explicit(&l->active, memory_order_relaxed);
	*capacity = l->conf->max_connections;
	*routes = atomic_load_explicit(&l->nroutes, memory_order_relaxed);
}

#define GET(field) atomic_load_explicit(&(field), memory_order_relaxed)

void sni_listener_totals(const struct sni_shared *sh, unsigned i, struct sni_totals *t)
{
	const struct sni_lshared *l = &sh->l[i];

	memset(t, 0, sizeof(*t));
	for (unsigned w = 0; w < CONF_WORKERS_MAX; w++) {
		const struct sni_stats *s = l->stats[w];

		if (!s)
			continue;
		for (unsigned r = 0; r < SNI_RESULTS; r++)
			t->result[r] += GET(s->result[r]);
		for (unsigned e = 0; e < SNI_ENDS; e++)
			t->ended[e] += GET(s->ended[e]);
		t->deferred += GET(s->deferred);
		t->relayed[0] += GET(s->relayed[0]);
		t->relayed[1] += GET(s->relayed[1]);
		t->pipes += GET(s->pipes);
		for (unsigned b = 0; b <= SNI_PREREAD_BUCKETS; b++)
			t->preread_hist[b] += GET(s->preread_hist[b]);
		t->bytes_in += GET(s->bytes_in);
		t->bytes_out += GET(s->bytes_out);
		t->preread_ns += GET(s->preread_ns);
		t->preread_count += GET(s->preread_count);
		t->memory += GET(s->memory);
		t->active += GET(s->active);
		t->preread += GET(s->preread);
		t->lingering += GET(s->lingering);
	}
}

uint32_t sni_active_total(const struct sni_shared *sh)
{
	uint32_t n = 0;

	for (unsigned i = 0; i < sh->n; i++)
		n += atomic_load_explicit(&sh->l[i].active, memory_order_relaxed);
	return n;
}

void sni_shared_free(struct sni_shared *sh)
{
	for (unsigned i = 0; i < sh->n; i++) {
		struct sni_lshared *l = &sh->l[i];

		for (unsigned j = 0; j < l->nretired; j++)
			sni_routes_free(l->retired[j].t);
		sni_routes_free(l->cur);
		free(l->file);
		free(l->ctl);
		srctab_free(&l->ips);
		pthread_mutex_destroy(&l->lock);
	}
	if (sh->n)
		pthread_mutex_destroy(&sh->tunnel.lock);
	sh->n = 0;
}

const struct sni_routes *sni_shared_take(struct sni_shared *sh, struct sni_lshared *l,
					 unsigned worker, uint64_t *gen)
{
	const struct sni_routes *t;

	pthread_mutex_lock(&l->lock);
	t = l->cur;
	*gen = l->gen;
	atomic_store_explicit(&l->taken[worker], l->gen, memory_order_release);
	collect(l, sh->nworkers);
	pthread_mutex_unlock(&l->lock);
	return t;
}

/* Per-source counts (srctab: IPv4 address, IPv6 /64, /56, /48): take
 * one unless a level is at its cap. */
bool sni_shared_ip_take(struct sni_lshared *l, const union etr_sockaddr *a)
{
	bool ok;

	pthread_mutex_lock(&l->lock);
	ok = srctab_take(&l->ips, a);
	pthread_mutex_unlock(&l->lock);
	return ok;
}

void sni_shared_ip_put(struct sni_lshared *l, const union etr_sockaddr *a)
{
	pthread_mutex_lock(&l->lock);
	srctab_put(&l->ips, a);
	pthread_mutex_unlock(&l->lock);
}

int sni_tunnel_set_name(struct sni_shared *sh, const char *name, size_t len)
{
	struct sni_tunnel *t = &sh->tunnel;
	char low[TLS_NAME_MAX + 1];

	if (!sh->n || len > TLS_NAME_MAX)
		return -1;
	for (size_t i = 0; i < len; i++) {
		char ch = name[i];

		if (ch >= 'A' && ch <= 'Z')
			ch = (char)(ch - 'A' + 'a');
		/* A host name's letters, digits, '-' and dots between
		 * labels: no wildcard, no empty label. */
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		      (ch == '.' && i > 0 && i + 1 < len && low[i - 1] != '.')))
			return -1;
		low[i] = ch;
	}
	low[len] = '\0';
	pthread_mutex_lock(&t->lock);
	if (len != t->len || memcmp(low, t->name, len) != 0) {
		memcpy(t->name, low, len + 1);
		t->len = len;
		atomic_fetch_add_explicit(&t->gen, 1, memory_order_release);
	}
	pthread_mutex_unlock(&t->lock);
	return 0;
}

bool sni_tunnel_match(struct sni_shared *sh, struct sni_tunnel_seen *seen, const char *name,
		      size_t len)
{
	struct sni_tunnel *t = &sh->tunnel;

	if (!t->take)
		return false;
	if (atomic_load_explicit(&t->gen, memory_order_acquire) != seen->gen) {
		pthread_mutex_lock(&t->lock);
		seen->gen = atomic_load_explicit(&t->gen, memory_order_relaxed);
		seen->len = t->len;
		memcpy(seen->name, t->name, t->len + 1);
		pthread_mutex_unlock(&t->lock);
	}
	return seen->len && len == seen->len && memcmp(name, seen->name, len) == 0;
}
