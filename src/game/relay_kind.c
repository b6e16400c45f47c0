/* SPDX-License-Identifier: ISC */
/* The game relay as a listener kind (loop/kind.h). */
#include "relay_kind.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "addrclass.h"
#include "json.h"
#include "log.h"
#include "net.h"
#include "q3proto.h"
#include "resolver.h"
#include "loop.h"
#include "relay.h"
#include "relay_conf.h"
#include "stats.h"

/* What the relays share across the workers: one struct relay_shared per
 * relay, the first n of them set up. */
struct relay_kind_shared {
	unsigned n;
	struct relay_shared r[CONF_RELAYS_MAX];
};

static unsigned count(const struct etr_conf *c)
{
	return c->nrelays;
}

/* Each relay's game server (resolved: union etr_sockaddr upstream[i]). */
static size_t dials(const struct etr_conf *c, const void *resolved, union etr_sockaddr *out)
{
	for (unsigned i = 0; out && i < c->nrelays; i++)
		out[i] = ((const union etr_sockaddr *)resolved)[i];
	return c->nrelays;
}

/* Addresses of the host a loop check compares with (as the SNI
 * listeners' SNI_LOCAL_MAX). */
#define RELAY_LOCAL_MAX 64

int relay_kind_loops(const struct etr_conf *c, const union etr_sockaddr *up)
{
	union etr_sockaddr local[RELAY_LOCAL_MAX];
	size_t nlocal = net_local_addrs(local, RELAY_LOCAL_MAX);
	struct conf_errors e = {.len = 0};

	if (conf_relay_loops(c, up, local, nlocal, &e) == 0)
		return 0;
	fputs(e.text, stderr);
	return -1;
}

/* Each relay's game server (*out: union etr_sockaddr upstream[i]), then
 * a relay whose resolved upstream is itself is refused. */
static int resolve(const struct etr_conf *c, void **out)
{
	union etr_sockaddr *up = calloc(c->nrelays, sizeof(*up));

	if (!(*out = up)) {
		log_warn("relays");
		return EXIT_FAILURE;
	}
	for (unsigned i = 0; i < c->nrelays; i++) {
		const struct relay_conf *r = &c->relays[i];
		struct resolver_result res;

		if (resolver_lookup(r->upstream_host, r->upstream_port, AF_UNSPEC, &res) != 0) {
			log_warnx("relay %s: upstream %s: cannot resolve (%s)", r->name,
				  r->upstream_host, gai_strerror(res.gai_err));
			return EXIT_FAILURE;
		}
		up[i] = res.addr;
	}
	return relay_kind_loops(c, up) < 0 ? EXIT_CONFIG : 0;
}

/* max-sessions is a total across the workers; each relay's public
 * sockets are the workers' own (main.c). */
static uint64_t fds(const struct etr_conf *c, unsigned workers)
{
	uint64_t n = 0;

	(void)workers;
	for (unsigned i = 0; i < c->nrelays; i++)
		n += c->relays[i].max_sessions + 4;
	return n;
}

static const char *fds_what(const struct etr_conf *c)
{
	(void)c;
	return "the relays' sessions";
}

/* The program for a relay's reuseport group: its masters (the owner's
 * known addresses) steered to worker 0, everyone else by the hash. */
static int attach_program(const struct kind_env *e, const struct relay *owner)
{
	struct reuseport_plan p = {.workers = e->nworkers, .key = e->reuseport_key};

	p.nsteer = relay_master_addrs(owner, p.steer);
	return net_attach_plan(owner->fwd.pub_fd, &p);
}

/* Worker 0's thread, when the owner resolved a master to a new address. */
static void steer_masters(struct relay_shared *sh, const struct relay *owner)
{
	const struct kind_env *e = sh->arg;
	int err;

	if (e->nworkers < 2)
		return;
	err = attach_program(e, owner);
	if (err < 0)
		log_warnx("relay %s: steering the masters' addresses to worker 0: %s; their "
			  "challenges go by the hash",
			  owner->conf->name, strerror(-err));
}

/* Another worker's thread: it has news about a game server for worker 0. */
static void wake_owner(struct relay_shared *sh)
{
	const struct kind_env *e = sh->arg;

	e->post(e, 0);
}

/* Relay i on every worker: worker 0's socket first, with the program
 * attached before the others join the group (their index is their order). */
static int open_one(struct kind_env *e, unsigned i)
{
	const struct relay_conf *c = &e->conf->relays[i];
	struct relay_kind_shared *all = e->shared;
	struct relay_shared *sh = &all->r[i];

	if (relay_shared_init(sh, c, e->nworkers, i) < 0)
		return EXIT_FAILURE;
	all->n = i + 1;
	sh->arg = e;
	sh->prbe = &e->conf->prbe;
	sh->wake_owner = wake_owner;
	sh->masters_moved = steer_masters;
	for (unsigned w = 0; w < e->nworkers; w++) {
		struct relay *r = e->inst(e, w, i);
		int err;

		err = relay_open(r, i, c, (const union etr_sockaddr *)e->resolved + i, e->stats, sh,
				 w);
		e->opened(e, w, i + 1);
		if (err < 0)
			return EXIT_FAILURE;
		if (w == 0 && e->nworkers > 1 && (err = attach_program(e, r)) < 0) {
			log_warnx("relay %s: reuseport program: %s", c->name, strerror(-err));
			return EXIT_FAILURE;
		}
		if (w == 0)
			e->stats->relay[i] = &r->stats;
		else
			e->stats->worker_relay[w][i] = &r->stats;
	}
	return 0;
}

static int open_all(struct kind_env *e)
{
	int rc = 0;

	for (unsigned i = 0; i < e->conf->nrelays && rc == 0; i++)
		rc = open_one(e, i);
	e->stats->nrelays = e->conf->nrelays;
	return rc;
}

static void shared_free(struct kind_env *e)
{
	struct relay_kind_shared *all = e->shared;

	for (unsigned i = 0; i < all->n; i++)
		relay_shared_free(&all->r[i]);
}

static int attach(void *inst, const struct loop_ops *ops, struct loop *loop,
		  struct endpoint_table *ep)
{
	return relay_attach(inst, ops, loop, ep);
}

static void poke(void *inst)
{
	relay_take_news(inst, loop_now());
}

static void take_bans(void *inst, const struct banlist *b)
{
	relay_set_bans(inst, b);
}

static void shutdown_(void *inst)
{
	relay_shutdown(inst);
}

static void close_(void *inst)
{
	relay_close(inst);
}

static uint32_t active(const void *shared, unsigned n)
{
	const struct relay_kind_shared *all = shared;
	uint32_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v += atomic_load_explicit(&all->r[i].sessions, memory_order_relaxed);
	return v;
}

/* The relays the open put into the stats (worker 0's). */
static unsigned running(const struct kind_env *e)
{
	return e->stats->nrelays < STATS_RELAYS_MAX ? e->stats->nrelays : STATS_RELAYS_MAX;
}

/* No address here: /readyz needs no token, and the game server behind the
 * relay is what a relay hides. /lifecycle names it. */
static const char *ready(const struct kind_env *e, unsigned i, char *buf, size_t len)
{
	const struct relay_stats *r = e->stats->relay[i];
	int server;

	if (!r || (server = STAT_GET(r->server)) == SERVER_UP)
		return NULL;
	snprintf(buf, len, "relay %s: the game server %s", r->name,
		 server == SERVER_DOWN ? "did not answer its last probe" : "was not probed yet");
	return buf;
}

/* GET /lifecycle: the sessions of every relay. */
static void lifecycle_details(const struct kind_env *e, FILE *f, bool *first)
{
	uint64_t active = 0;

	for (unsigned i = 0, n = running(e); i < n; i++)
		if (e->stats->relay[i])
			active += stats_sessions_active(e->stats, i);
	fprintf(f, "%s\"active_sessions\":%" PRIu64, *first ? "" : ",", active);
	*first = false;
}

static void lifecycle_relay(FILE *f, struct relay_stats *r, uint32_t active)
{
	struct master_status m[STATS_MASTERS_MAX];
	unsigned nm = stats_relay_masters(r, m);
	int server = STAT_GET(r->server);

	fputs("{\"name\":", f);
	json_string(f, r->name);
	fputs(",\"public_address\":", f);
	json_string(f, r->public_addr);
	fputs(",\"upstream\":", f);
	json_string(f, r->upstream);
	fputs(",\"game\":", f);
	json_string(f, r->game);
	fprintf(f, ",\"server\":\"%s\",\"active_sessions\":%" PRIu32 ",\"masters\":[",
		server == SERVER_UP	? "up"
		: server == SERVER_DOWN ? "down"
					: "unknown",
		active);
	for (unsigned j = 0; j < nm; j++) {
		fputs(j ? ",{\"name\":" : "{\"name\":", f);
		json_string(f, m[j].name);
		fputs(",\"address\":", f);
		if (m[j].addr[0])
			json_string(f, m[j].addr);
		else
			fputs("null", f);
		if (m[j].last_heartbeat)
			fprintf(f, ",\"last_heartbeat\":%" PRIu64, m[j].last_heartbeat);
		else
			fputs(",\"last_heartbeat\":null", f);
		fprintf(f, ",\"last_result\":\"%s\",\"listing_confirmed\":%s",
			stats_hb_result_name(m[j].last_result),
			m[j].listing_confirmed ? "true" : "false");
		if (m[j].last_confirmed)
			fprintf(f, ",\"last_confirmed\":%" PRIu64, m[j].last_confirmed);
		else
			fputs(",\"last_confirmed\":null", f);
		fprintf(f, ",\"quiet\":%s}", m[j].quiet ? "true" : "false");
	}
	fputs("]}", f);
}

/* GET /lifecycle: "relays", each with its game server and masters (an
 * empty array without relays). */
static void lifecycle(const struct kind_env *e, FILE *f)
{
	fputs(",\"relays\":[", f);
	for (unsigned i = 0, n = running(e), comma = 0; i < n; i++) {
		if (!e->stats->relay[i])
			continue;
		if (comma++)
			fputc(',', f);
		lifecycle_relay(f, e->stats->relay[i], stats_sessions_active(e->stats, i));
	}
	fputc(']', f);
}

/* Each relay once the loops run (stats' version: the process's), and the
 * PRBE echo on its port. */
static void log_start(const struct kind_env *e, const char *backend)
{
	const struct etr_conf *conf = e->conf;

	for (unsigned i = 0; i < conf->nrelays; i++) {
		const struct relay *r = e->inst(e, 0, i);
		const struct relay_conf *c = r->conf;
		char a[ADDR_STRLEN], b[ADDR_STRLEN], masters[1024], hp[ADDR_HOSTLEN + 8];
		size_t o = 0;

		masters[0] = '\0';
		for (unsigned m = 0; m < c->nmasters && o < sizeof(masters); m++)
			o += (size_t)snprintf(
			    masters + o, sizeof(masters) - o, "%s%s", m ? " " : "",
			    addr_hostport(c->masters[m].host, c->masters[m].port, hp));
		log_info(
		    "etrelay %s%s%s listening on %s, upstream %s, backend %s, game %s (%s/%s), "
		    "masters %s",
		    e->stats->version, conf->nrelays > 1 ? " relay " : "",
		    conf->nrelays > 1 ? c->name : "", addr_str(&c->listen.sa, a),
		    addr_str(&r->upstream.sa, b), backend, c->game, c->heartbeat,
		    c->flatline[0] ? c->flatline : "none", masters);
	}
	for (unsigned i = 0; i < conf->nrelays; i++)
		if (conf->relays[i].prbe)
			log_info("PRBE echo on %s (relay %s)",
				 ((const struct relay *)e->inst(e, 0, i))->stats.public_addr,
				 conf->relays[i].name);
}

/* Each relay's `stats NAME` line, summed over the workers. */
static void log_stats(const struct kind_env *e)
{
	for (unsigned i = 0; i < e->conf->nrelays; i++) {
		struct relay_stats sum;

		memset(&sum, 0, sizeof(sum));
		for (unsigned w = 0; w < e->nworkers; w++)
			stats_relay_add(&sum, &((const struct relay *)e->inst(e, w, i))->stats);
		relay_log_stats(e->conf->relays[i].name, &sum);
	}
}

static void sessions(const void *inst, FILE *f, uint64_t now, bool *first)
{
	relay_sessions_json(inst, f, now, first);
}

static void listener(const struct kind_env *e, unsigned i, struct kind_listener *out)
{
	out->name = e->conf->relays[i].name;
	out->active = stats_sessions_active(e->stats, i);
	out->max = e->conf->relays[i].max_sessions;
}

/* The kernel's default for IPV6_V6ONLY, which the public socket keeps. */
static bool bindv6only(void)
{
	FILE *f = fopen("/proc/sys/net/ipv6/bindv6only", "re");
	int v = 0;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v == 1;
}

/* An IPv4-mapped address as the IPv4 address it is, for the output. */
static const char *show(const union etr_sockaddr *a, char out[ADDR_STRLEN])
{
	union etr_sockaddr v = *a;
	uint32_t v4;

	if (a->sa.sa_family == AF_INET6 && addrclass_v4(a, &v4)) {
		memset(&v, 0, sizeof(v));
		v.in.sin_family = AF_INET;
		v.in.sin_addr.s_addr = htonl(v4);
		v.in.sin_port = a->in6.sin6_port;
	}
	return addr_str(&v.sa, out);
}

/* Resolve a master as the daemon's resolver does (in the listener's family,
 * IPv4-mapped on IPv6) into *sa. Returns 0, 1 when its only addresses are
 * of a family the listener cannot reach (one of them in *sa), or -1 with
 * *why. */
static int resolve_master(const struct relay_conf *r, const struct conf_master *m,
			  union etr_sockaddr *sa, const char **why)
{
	struct resolver_result res;

	resolver_lookup(m->host, m->port, r->listen.sa.sa_family, &res);
	*sa = res.addr;
	if (res.gai_err == 0 &&
	    conf_listener_reaches(&r->listen, bindv6only(), conf_addr_family(&res.addr)))
		return 0;
	if (res.gai_err == 0 || res.wrong_family)
		return 1;
	*why = gai_strerror(res.gai_err);
	return -1;
}

/* One probe round as the daemon does it: getinfo with a fresh challenge,
 * CONF_PROBE_ATTEMPTS tries. Returns 0 and the infoResponse in info. */
static int probe(const struct relay_conf *r, const union etr_sockaddr *up, char *info,
		 size_t infolen)
{
	char challenge[17], text[40];
	uint8_t pkt[48], buf[LOOP_MAX_DGRAM];
	int fd = net_connect_udp(up), n;

	if (fd < 0)
		return -1;
	snprintf(challenge, sizeof(challenge), "%016llx", (unsigned long long)net_random64());
	snprintf(text, sizeof(text), "getinfo %s", challenge);
	n = q3_build(pkt, sizeof(pkt), text);
	for (int a = 0; a < CONF_PROBE_ATTEMPTS; a++) {
		uint64_t end = loop_now() + r->probe_timeout_ms * NS_PER_MS, now;

		net_send_copy(fd, NULL, pkt, (size_t)n);
		while ((now = loop_now()) < end) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			ssize_t got;

			if (poll(&p, 1, (int)((end - now) / NS_PER_MS) + 1) <= 0)
				continue;
			got = recv(fd, buf, sizeof(buf), 0);
			if (got > 0 && q3_info_response_matches(buf, (size_t)got, challenge)) {
				size_t off = 4 + strlen("infoResponse");
				size_t len;

				/* The info string starts after the newline. */
				while (off < (size_t)got && (buf[off] == '\n' || buf[off] == ' '))
					off++;
				len = (size_t)got > off ? (size_t)got - off : 0;

				snprintf(info, infolen, "%.*s", (int)len, (const char *)buf + off);
				close(fd);
				return 0;
			}
		}
	}
	close(fd);
	return -1;
}

static int check_relay(const struct etr_conf *c, const struct relay_conf *r)
{
	char a[ADDR_STRLEN], hp[ADDR_HOSTLEN + 8], info[2048], v1[64], v2[64];
	struct resolver_result res;
	union etr_sockaddr up, m;
	const char *why;
	int bad = 0;

	addr_hostport(r->upstream_host, r->upstream_port, hp);
	resolver_lookup(r->upstream_host, r->upstream_port, AF_UNSPEC, &res);
	up = res.addr;
	if (res.gai_err != 0) {
		printf("relay %s: upstream %s: FAILED to resolve (%s)\n", r->name, hp,
		       gai_strerror(res.gai_err));
		bad = 1;
	} else if (probe(r, &up, info, sizeof(info)) < 0) {
		printf("relay %s: upstream %s (%s): FAILED, no answer to getinfo in %d tries\n",
		       r->name, hp, addr_str(&up.sa, a), CONF_PROBE_ATTEMPTS);
		bad = 1;
	} else {
		if (q3_info_value(info, strlen(info), "hostname", v1, sizeof(v1)) < 0)
			strcpy(v1, "?");
		if (q3_info_value(info, strlen(info), "mapname", v2, sizeof(v2)) < 0)
			strcpy(v2, "?");
		printf(
		    "relay %s: upstream %s (%s): ok, answered getinfo (hostname '%s', map '%s')\n",
		    r->name, hp, addr_str(&up.sa, a), v1, v2);
	}
	/* What is checked: the name resolves, to an address of a family the
	 * listener can send to. Whether the master answers is not: only a
	 * heartbeat would tell, and -t sends none. */
	for (unsigned i = 0; i < r->nmasters; i++) {
		const struct conf_master *cm = &r->masters[i];
		char l[ADDR_STRLEN], where[300] = "";
		int rc = resolve_master(r, cm, &m, &why);

		addr_hostport(cm->host, cm->port, hp);
		addr_str(&r->listen.sa, l);
		if (cm->line)
			snprintf(where, sizeof(where), " (%s:%u)", c->path ? c->path : "",
				 cm->line);
		if (rc < 0) {
			printf("relay %s: master %s%s: FAILED to resolve (%s)\n", r->name, hp,
			       where, why);
			bad = 1;
		} else if (rc > 0) {
			printf("relay %s: master %s%s: FAILED, resolves only to %s addresses (%s), "
			       "which the listener %s cannot reach\n",
			       r->name, hp, where,
			       conf_addr_family(&m) == AF_INET ? "IPv4" : "IPv6", show(&m, a), l);
			bad = 1;
		} else {
			printf(
			    "relay %s: master %s: resolved to %s, which the listener %s can reach "
			    "(whether it answers heartbeats is not checked)\n",
			    r->name, hp, show(&m, a), l);
		}
	}
	return bad;
}

/* -t: each relay as configured. */
static void report(const struct etr_conf *c)
{
	for (unsigned i = 0; i < c->nrelays; i++) {
		const struct relay_conf *r = &c->relays[i];
		char a[ADDR_STRLEN], hp[ADDR_HOSTLEN + 8];

		printf("relay %s: listen %s, upstream %s, game %s, %u masters, max-sessions %u\n",
		       r->name, addr_str(&r->listen.sa, a),
		       addr_hostport(r->upstream_host, r->upstream_port, hp), r->game, r->nmasters,
		       r->max_sessions);
	}
}

/* -t --probe: each relay's game server answers getinfo, and its masters
 * resolve to addresses the listener can reach. */
static int probe_all(const struct etr_conf *c)
{
	int bad = 0;

	for (unsigned i = 0; i < c->nrelays; i++)
		bad |= check_relay(c, &c->relays[i]);
	return bad;
}

const struct kind relay_kind = {
    .name = "relay",
    .size = sizeof(struct relay),
    .count = count,
    .shared_size = sizeof(struct relay_kind_shared),
    .resolve = resolve,
    .resolved_free = free,
    .dials = dials,
    .open = open_all,
    .shared_free = shared_free,
    .fds = fds,
    .fds_what = fds_what,
    .fds_knob = "max-sessions",
    .attach = attach,
    .poke = poke,
    .take_bans = take_bans,
    .shutdown = shutdown_,
    .close = close_,
    .log_start = log_start,
    .log_stats = log_stats,
    .sessions_key = "sessions",
    .sessions = sessions,
    .listener = listener,
    .running = running,
    .ready = ready,
    .ready_more_one = "relay whose game server is not up",
    .ready_more_many = "relays whose game server is not up",
    .lifecycle_details = lifecycle_details,
    .lifecycle = lifecycle,
    .report = report,
    .probe = probe_all,
    .summary_one = "relay",
    .summary_many = "relays",
    .summary_always = true,
    .active = active,
    .active_one = "session",
    .active_many = "sessions",
};
