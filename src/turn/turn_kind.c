/* SPDX-License-Identifier: ISC */
/* The TURN listener as a listener kind (loop/kind.h). */
#include "turn_kind.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "net.h"
#include "stats.h"
#include "tls_reload.h"
#include "turn.h"

static unsigned count(const struct etr_conf *c)
{
	return c->nturn;
}

static bool any_tcp(const struct etr_conf *c)
{
	for (unsigned i = 0; i < c->nturn; i++)
		if (c->turn[i].tcp_set || c->turn[i].tls_set)
			return true;
	return false;
}

/* An allocation holds its relayed socket (max-allocations counts across
 * the workers), each worker a UDP, a TCP and a TLS listener;
 * tcp-max-connections counts across the workers too (each has its share,
 * at least 1), one more per worker for a connection closed as it is
 * accepted. */
static uint64_t fds(const struct etr_conf *c, unsigned workers)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < c->nturn; i++) {
		bool tcp = c->turn[i].tcp_set || c->turn[i].tls_set;

		n += c->turn[i].max_allocations + 3ull * workers +
		     (tcp ? c->turn[i].tcp_max_conns + 2ull * workers : 0);
	}
	return n;
}

static const char *fds_what(const struct etr_conf *c)
{
	return any_tcp(c) ? "the TURN listeners' allocations and TCP connections"
			  : "the TURN listeners' allocations";
}

/* The workers' program (a source address picks its worker) on fd, the
 * first socket of its group. */
static int attach_workers(const struct kind_env *e, int fd)
{
	const struct reuseport_plan p = {.workers = e->nworkers, .key = e->reuseport_key};

	return net_attach_plan(fd, &p);
}

struct plumbing {
	struct turn_peer_policy *p;
	unsigned lost;
};

static void plumbing_each(void *arg, const struct conf_listen *l)
{
	struct plumbing *pl = arg;

	pl->lost += turn_peer_plumbing(pl->p, l->addr) == -ENOSPC;
}

/* What no TURN peer reaches: the host's addresses (read once, at start;
 * an address added later is judged by the policy's other rules) and,
 * exactly, the daemon's own sockets. */
static void turn_guard(const struct kind_env *e, struct turn_peer_policy *p)
{
	const struct etr_conf *c = e->conf;
	union etr_sockaddr local[TURN_PEER_HOST_MAX];
	size_t n = net_local_addrs(local, TURN_PEER_HOST_MAX);
	unsigned lost = 0;

	for (size_t k = 0; k < n; k++)
		lost += turn_peer_host(p, &local[k]) == -ENOSPC;
	{
		struct plumbing pl = {p, 0};

		conf_each_listen(c, plumbing_each, &pl);
		lost += pl.lost;
	}
	for (size_t i = 0; i < e->ndials; i++)
		lost += turn_peer_plumbing(p, &e->dials[i]) == -ENOSPC;
	if (lost)
		log_warnx("turn: %u of the host's addresses and sockets past the peer policy's "
			  "lists (%u, %u) are not refused as such",
			  lost, TURN_PEER_HOST_MAX, TURN_PEER_PLUMB_MAX);
}

/* TURN listener i on every worker: each UDP socket in the port's reuseport
 * group with the workers' program (a client's address picks its worker,
 * which holds its allocations), each TCP listener in its own group. */
static int open_one(struct kind_env *e, unsigned i)
{
	const struct turn_conf *c = &e->conf->turn[i];
	struct turn_shared *sh = e->shared;
	char err[512];

	/* Not an address of this host: the host's fault, as a listen
	 * address that is not its own (1), not the configuration's. */
	if (turn_relay_addr_check(c, err, sizeof(err)) < 0) {
		log_warnx("turn %s: %s", c->name, err);
		return EXIT_FAILURE;
	}
	if (turn_shared_init(sh, i, c, e->nworkers, err, sizeof(err)) < 0) {
		char where[CONF_PATH_MAX + 32];

		/* A TLS pair that does not load: on its key's line, as -t. */
		if (c->tls_set && conf_turn_tls_where(e->conf, c, err, where, sizeof(where)))
			log_warnx("%s: turn %s: %s", where, c->name, err);
		else
			log_warnx("turn %s: %s", c->name, err);
		return EXIT_CONFIG;
	}
	for (unsigned w = 0; w < e->nworkers; w++) {
		struct turn_listener *l = e->inst(e, w, i);
		int rc;

		rc = turn_listener_open(l, sh, i, w, e->nworkers > 1);
		e->opened(e, w, i + 1);
		if (rc < 0)
			return EXIT_FAILURE;
		if (w == 0 && e->nworkers > 1) {
			rc = attach_workers(e, turn_listener_fd(l));
			/* The TCP and TLS groups too: a source address stays
			 * on one worker, whose tcp-max-per-ip count is then
			 * exact. */
			if (rc == 0 && turn_listener_tcp_fd(l) >= 0)
				rc = attach_workers(e, turn_listener_tcp_fd(l));
			if (rc == 0 && turn_listener_tls_fd(l) >= 0)
				rc = attach_workers(e, turn_listener_tls_fd(l));
			if (rc < 0) {
				log_warnx("turn %s: reuseport program: %s", c->name, strerror(-rc));
				return EXIT_FAILURE;
			}
		}
	}
	return 0;
}

/* e->shared: the listeners' struct turn_shared (SIGHUP reloads its secrets
 * and certificates, the ops plane reads it). */
static int open_all(struct kind_env *e)
{
	struct turn_shared *sh = e->shared;
	int rc = 0;

	sh->lifecycle = &e->stats->lifecycle;
	for (unsigned i = 0; i < e->conf->nturn && rc == 0; i++)
		rc = open_one(e, i);
	if (rc != 0)
		return rc;
	e->stats->turn = sh;
	for (unsigned i = 0; i < e->conf->nturn; i++)
		turn_guard(e, &sh->l[i].policy);
	return 0;
}

static void shared_free(struct kind_env *e)
{
	turn_shared_free(e->shared);
}

static int attach(void *inst, const struct loop_ops *ops, struct loop *loop,
		  struct endpoint_table *ep)
{
	return turn_listener_attach(inst, ops, loop, ep);
}

static void take_bans(void *inst, const struct banlist *b)
{
	turn_listener_take_bans(inst, b);
}

static void shutdown_(void *inst)
{
	turn_listener_shutdown(inst);
}

static void close_(void *inst)
{
	turn_listener_free(inst);
}

static uint32_t active(const void *shared, unsigned n)
{
	(void)n;
	return turn_active_total(shared);
}

/* SIGHUP: the secrets, and the certificates of the TLS listeners. */
static void reload(struct kind_env *e)
{
	char err[256];

	if (turn_shared_reload(e->shared, err, sizeof(err)) < 0)
		log_warnx("SIGHUP: %s; keeping the previous TURN secrets", err);
	else
		log_info("SIGHUP: TURN secrets reloaded");
	turn_shared_reload_tls(e->shared, loop_now());
}

static void log_start(const struct kind_env *e, const char *backend)
{
	for (unsigned i = 0; i < e->conf->nturn; i++) {
		const struct turn_conf *c = &e->conf->turn[i];
		char a[ADDR_STRLEN], t[ADDR_STRLEN], r[ADDR_STRLEN], s[ADDR_STRLEN];

		log_info("turn %s listening on %s (UDP)%s%s%s%s%s%s, backend %s, relaying from %s "
			 "ports %u-%u, realm %s, up to %u allocations",
			 c->name, addr_str(&c->listen.sa, a), c->tcp_set ? " and " : "",
			 c->tcp_set ? addr_str(&c->tcp_listen.sa, t) : "",
			 c->tcp_set ? " (TCP)" : "", c->tls_set ? " and " : "",
			 c->tls_set ? addr_str(&c->tls_listen.sa, s) : "",
			 c->tls_set ? " (TLS)" : "", backend, addr_str(&c->relay_addr.sa, r),
			 c->port_min, c->port_max, c->realm, c->max_allocations);
	}
}

static const char *drop_at(unsigned i)
{
	return turn_drop_name((enum turn_drop)i);
}

static const char *tcp_drop_at(unsigned i)
{
	return turn_tcp_drop_name((enum turn_tcp_drop)i);
}

static const char *reject_at(unsigned i)
{
	return turn_reject_name((enum turn_reject)i);
}

/* Each listener's line beside the relays' `stats NAME`: what it served
 * and what it refused, summed over the workers. */
static void log_stats(const struct kind_env *e)
{
	const struct turn_shared *sh = e->shared;
	char why[512], drops[512];

	for (unsigned i = 0; i < e->conf->nturn; i++) {
		struct turn_stats t;
		uint64_t rej[TURN_REJECTS], drop[TURN_DROPS], tdrop[TURN_TCP_DROPS];
		uint64_t rejected = 0, dropped = 0, tcp = 0;
		size_t o;

		turn_listener_totals(&sh->l[i], e->nworkers, &t);
		for (unsigned k = 0; k < TURN_REJECTS; k++)
			rejected += rej[k] = STAT_GET(t.rejected[k]);
		for (unsigned k = 0; k < TURN_DROPS; k++)
			dropped += drop[k] = STAT_GET(t.dropped[k]);
		for (unsigned k = 0; k < TURN_TCP_DROPS; k++)
			tcp += tdrop[k] = STAT_GET(t.tcp_dropped[k]);
		why[0] = drops[0] = '\0';
		stats_list(why, sizeof(why), 0, rej, TURN_REJECTS, reject_at, UINT32_MAX);
		o = stats_list(drops, sizeof(drops), 0, drop, TURN_DROPS, drop_at, UINT32_MAX);
		if (o < sizeof(drops))
			o += (size_t)snprintf(drops + o, sizeof(drops) - o,
					      "; TCP and TLS connections dropped %llu",
					      (unsigned long long)tcp);
		stats_list(drops, sizeof(drops), o, tdrop, TURN_TCP_DROPS, tcp_drop_at, UINT32_MAX);
		log_info("stats turn %s: allocations %llu, rejected %llu%s; to peers %llu pkts "
			 "%llu B; to clients %llu pkts %llu B; dropped %llu%s; TLS failed %llu",
			 e->conf->turn[i].name, (unsigned long long)STAT_GET(t.allocations),
			 (unsigned long long)rejected, why,
			 (unsigned long long)STAT_GET(t.dgrams_to_peer),
			 (unsigned long long)STAT_GET(t.bytes_to_peer),
			 (unsigned long long)STAT_GET(t.dgrams_to_client),
			 (unsigned long long)STAT_GET(t.bytes_to_client),
			 (unsigned long long)dropped, drops,
			 (unsigned long long)STAT_GET(t.tls_failed));
	}
}

static void sessions(const void *inst, FILE *f, uint64_t now, bool *first)
{
	turn_allocations_json(inst, f, now, first);
}

static void listener(const struct kind_env *e, unsigned i, struct kind_listener *out)
{
	const struct turn_shared *sh = e->shared;

	out->name = sh->l[i].conf->name;
	out->active = atomic_load_explicit(&sh->l[i].active, memory_order_relaxed);
	out->max = sh->l[i].conf->max_allocations;
}

/* The ops plane reads e->stats->turn, set once every listener opened. */
static unsigned running(const struct kind_env *e)
{
	return e->stats->turn ? e->stats->turn->n : 0;
}

/* ip:port's address alone ("1.2.3.4:0" -> "1.2.3.4"), into a. */
static const char *addr_only(const union etr_sockaddr *ip, char a[ADDR_STRLEN])
{
	char *colon;

	addr_str(&ip->sa, a);
	if ((colon = strrchr(a, ':')) != NULL)
		*colon = '\0';
	return a;
}

/* GET /lifecycle's details: what a registry's probe of a TURN node reads,
 * its live allocations, the address clients reach, the transports. */
static void lifecycle_details(const struct kind_env *e, FILE *f, bool *first)
{
	const struct turn_shared *sh = e->stats->turn;
	char a[ADDR_STRLEN];
	bool tcp = false, tls = false;

	if (!sh)
		return;
	for (unsigned i = 0; i < sh->n; i++) {
		tcp |= sh->l[i].conf->tcp_set;
		tls |= sh->l[i].conf->tls_set;
	}
	fprintf(f, "%s\"active_allocations\":%" PRIu32 ",\"public_ip\":", *first ? "" : ",",
		turn_active_total(sh));
	json_string(f, addr_only(&sh->l[0].conf->public_ip, a));
	fprintf(f, ",\"transports\":[\"udp\"%s%s]", tcp ? ",\"tcp\"" : "", tls ? ",\"tls\"" : "");
	*first = false;
}

/* GET /lifecycle: "turn_listeners", when there are. */
static void lifecycle(const struct kind_env *e, FILE *f)
{
	const struct turn_shared *sh = e->stats->turn;

	if (!sh)
		return;
	fputs(",\"turn_listeners\":[", f);
	for (unsigned i = 0; i < sh->n; i++) {
		const struct turn_conf *tc = sh->l[i].conf;
		char a[ADDR_STRLEN];

		fputs(i ? ",{\"name\":" : "{\"name\":", f);
		json_string(f, tc->name);
		fputs(",\"listen\":", f);
		json_string(f, addr_str(&tc->listen.sa, a));
		fputs(",\"tcp_listen\":", f);
		if (tc->tcp_set)
			json_string(f, addr_str(&tc->tcp_listen.sa, a));
		else
			fputs("null", f);
		fputs(",\"public_ip\":", f);
		json_string(f, addr_only(&tc->public_ip, a));
		fprintf(f, ",\"active_allocations\":%" PRIu32 ",\"max_allocations\":%" PRIu32 "}",
			atomic_load_explicit(&sh->l[i].active, memory_order_relaxed),
			tc->max_allocations);
	}
	fputc(']', f);
}

/* -t as root reads any file; the service may not (the shipped unit runs
 * as a DynamicUser). A file only root can read is refused at start by
 * another user: said here, since "valid" would be false for that start. A
 * file readable by a group may or may not be the service's: nothing said. */
static void root_only_warning(const struct etr_conf *c, const struct turn_conf *t)
{
	const char *file[2] = {t->tls_cert, t->tls_key};
	const char *key[2] = {"tls-cert", "tls-key"};
	const unsigned line[2] = {t->tls_cert_line, t->tls_key_line};
	struct stat st;

	if (geteuid() != 0)
		return;
	for (unsigned k = 0; k < 2; k++) {
		if (stat(file[k], &st) < 0 || st.st_uid != 0 || (st.st_mode & 0044))
			continue;
		if (line[k])
			fprintf(stderr, "%s:%u: ", c->path ? c->path : "", line[k]);
		else
			fputs("etrelay: ", stderr);
		fprintf(stderr,
			"warning: turn %s: %s %s: only root can read it (owner root, mode "
			"%04o); read here as root, it is refused by a start as another user "
			"(the shipped unit's DynamicUser): make it readable by a group the "
			"service has (SupplementaryGroups=), or pass it with LoadCredential=; "
			"see etrelay(8)\n",
			t->name, key[k], file[k], (unsigned)(st.st_mode & 07777));
	}
}

/* Each TURN listener's certificate and key, loaded as a start loads them
 * (tls_reload_init, the function the start calls) and dropped: a pair the
 * start refuses is refused here, in the start's words. */
static int check_turn_tls(const struct etr_conf *c)
{
	int bad = 0;

	for (unsigned i = 0; i < c->nturn; i++) {
		const struct turn_conf *t = &c->turn[i];
		struct tls_server s;
		struct tls_reload r;
		char err[512];
		int rc;

		if (!t->tls_set)
			continue;
		if ((rc = tls_server_init(&s)) < 0) {
			log_warnx("turn %s: tls: %s", t->name, strerror(-rc));
			bad = 1;
			continue;
		}
		if (tls_reload_init(&r, &s, t->tls_cert, t->tls_key, loop_now(), err, sizeof(err)) <
		    0) {
			char where[CONF_PATH_MAX + 32];

			if (conf_turn_tls_where(c, t, err, where, sizeof(where)))
				log_warnx("%s: turn %s: %s", where, t->name, err);
			else
				log_warnx("turn %s: %s", t->name, err);
			bad = 1;
		} else {
			tls_reload_free(&r);
			root_only_warning(c, t);
		}
		tls_server_free(&s);
	}
	return bad ? EXIT_CONFIG : 0;
}

/* Each worker relays TURN from a slice of the ports of its own: a range
 * narrower than the workers a start runs here is refused by it. */
static int check_turn_ports(const struct etr_conf *c, unsigned workers)
{
	int bad = 0;

	for (unsigned i = 0; i < c->nturn; i++) {
		const struct turn_conf *t = &c->turn[i];
		unsigned line = t->ports_line ? t->ports_line : t->line;

		if ((unsigned)t->port_max - t->port_min + 1 >= workers)
			continue;
		if (line)
			fprintf(stderr, "%s:%u: ", c->path ? c->path : "", line);
		else
			fputs("etrelay: ", stderr);
		fprintf(stderr,
			"turn %s: ports %u-%u: fewer ports than workers (%u%s): widen the range "
			"or set workers\n",
			t->name, t->port_min, t->port_max, workers,
			c->workers == CONF_WORKERS_AUTO ? ", workers auto: one per CPU here" : "");
		bad = EXIT_CONFIG;
	}
	return bad;
}

/* -t: what a start here refuses: a pair that does not load, a port range
 * narrower than the workers. */
static int check(const struct etr_conf *c, unsigned workers)
{
	int bad = check_turn_tls(c);

	return bad ? bad : check_turn_ports(c, workers);
}

/* -t: each TURN listener as configured. */
static void report(const struct etr_conf *c)
{
	for (unsigned i = 0; i < c->nturn; i++) {
		const struct turn_conf *t = &c->turn[i];
		char a[ADDR_STRLEN], b[ADDR_STRLEN], r[ADDR_STRLEN], s[ADDR_STRLEN], err[128];

		/* A warning: -t may check a file for another host; a start
		 * refuses it. */
		if (turn_relay_addr_check(t, err, sizeof(err)) < 0)
			fprintf(stderr,
				"etrelay: warning: turn %s: %s (a start on this host "
				"exits 1 on it)\n",
				t->name, err);
		addr_str(&t->relay_addr.sa, r);
		if (strrchr(r, ':')) /* an address alone (IPv4): no ":0" */
			*strrchr(r, ':') = '\0';
		printf("turn %s: listen %s (UDP)%s%s%s%s%s%s, relay-address %s, ports %u-%u, "
		       "max-allocations %" PRIu32 ", user-quota %" PRIu32 ", realm %s%s\n",
		       t->name, addr_str(&t->listen.sa, a), t->tcp_set ? ", tcp-listen " : "",
		       t->tcp_set ? addr_str(&t->tcp_listen.sa, b) : "",
		       t->tls_set ? ", tls-listen " : "",
		       t->tls_set ? addr_str(&t->tls_listen.sa, s) : "", t->tls_set ? " cert " : "",
		       t->tls_set ? t->tls_cert : "", r, t->port_min, t->port_max,
		       t->max_allocations, t->user_quota, t->realm,
		       t->strict_expiry ? ", strict-expiry" : "");
	}
}

const struct kind turn_kind = {
    .name = "turn",
    .size = sizeof(struct turn_listener),
    .count = count,
    .shared_size = sizeof(struct turn_shared),
    .open = open_all,
    .shared_free = shared_free,
    .fds = fds,
    .fds_what = fds_what,
    .fds_knob = "max-allocations",
    .attach = attach,
    .take_bans = take_bans,
    .shutdown = shutdown_,
    .close = close_,
    .reload = reload,
    .log_start = log_start,
    .log_stats = log_stats,
    .sessions_key = "allocations",
    .sessions = sessions,
    .listener = listener,
    .running = running,
    .lifecycle_details = lifecycle_details,
    .lifecycle = lifecycle,
    .check = check,
    .report = report,
    .summary_one = "TURN listener",
    .summary_many = "TURN listeners",
    .active = active,
    .active_one = "TURN allocation",
    .active_many = "TURN allocations",
};
