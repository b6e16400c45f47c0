/* SPDX-License-Identifier: ISC */
/* The SNI listener as a listener kind (loop/kind.h). */
#include "sni_kind.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addrclass.h"
#include "json.h"
#include "log.h"
#include "net.h"
#include "resolver.h"
#include "stats.h"
#include "sni.h"

static unsigned count(const struct etr_conf *c)
{
	return c->nsni;
}

int sni_kind_loops(const struct etr_conf *c, struct sni_route *const *resolved)
{
	union etr_sockaddr local[SNI_LOCAL_MAX], up;
	size_t nlocal = net_local_addrs(local, SNI_LOCAL_MAX);
	char hp[ADDR_HOSTLEN + 8], a[ADDR_STRLEN], where[CONF_NAME_MAX + 300];
	int rc = 0;

	for (unsigned i = 0; i < c->nsni; i++) {
		for (unsigned j = 0; j < c->sni[i].nroutes; j++) {
			const struct sni_route_conf *r = &c->sni[i].routes[j];

			addr_hostport(r->host, r->port, hp);
			if (resolved && resolved[i])
				up = resolved[i][j].upstream;
			else if (addr_parse_numeric(hp, &up) < 0)
				continue;
			if (r->line)
				snprintf(where, sizeof(where), "%s:%u: sni %s",
					 c->path ? c->path : "", r->line, c->sni[i].name);
			else
				snprintf(where, sizeof(where), "etrelay: sni-route");
			for (unsigned k = 0; k < c->nsni; k++) {
				if (!addrclass_loops(&up, &c->sni[k].listen, local, nlocal))
					continue;
				fprintf(stderr,
					"%s: route %s: upstream %s is the SNI listener %s (%s): a "
					"loop\n",
					where, r->name, hp, c->sni[k].name,
					addr_str(&c->sni[k].listen.sa, a));
				rc = -1;
				break;
			}
			/* The ops plane is private (ops-listen refuses a public
			 * address): a route would put it on the public port. A
			 * control-plane route there is refused too. TURN's TCP
			 * and TLS ports stay routable (TURNS behind 443). */
			if (c->ops_enabled && addrclass_loops(&up, &c->ops_listen, local, nlocal)) {
				fprintf(
				    stderr,
				    "%s: route %s: upstream %s is the ops listener (%s): the "
				    "route would serve the private ops plane on a public port\n",
				    where, r->name, hp, addr_str(&c->ops_listen.sa, a));
				rc = -1;
			}
		}
	}
	return rc;
}

/* The config routes with their upstreams resolved, as the game servers'
 * are (*out: struct sni_route *routes[i], listener i's, NULL after the
 * last), then a route that makes a loop is refused. */
static int resolve(const struct etr_conf *c, void **out)
{
	struct sni_route **routes = calloc(c->nsni + 1, sizeof(*routes));

	if (!(*out = routes)) {
		log_warn("sni");
		return EXIT_FAILURE;
	}
	for (unsigned i = 0; i < c->nsni; i++) {
		const struct sni_conf *s = &c->sni[i];

		routes[i] = calloc(s->nroutes + 1, sizeof(*routes[i]));
		if (!routes[i]) {
			log_warn("sni %s", s->name);
			return EXIT_FAILURE;
		}
		for (unsigned j = 0; j < s->nroutes; j++) {
			const struct sni_route_conf *r = &s->routes[j];
			struct resolver_result res;

			if (resolver_lookup(r->host, r->port, AF_UNSPEC, &res) != 0) {
				log_warnx("sni %s: route %s: upstream %s: cannot resolve (%s)",
					  s->name, r->name, r->host, gai_strerror(res.gai_err));
				return EXIT_FAILURE;
			}
			snprintf(routes[i][j].name, sizeof(routes[i][j].name), "%s", r->name);
			routes[i][j].upstream = res.addr;
			routes[i][j].proxy_v2 = r->proxy_v2;
		}
	}
	return sni_kind_loops(c, routes) < 0 ? EXIT_CONFIG : 0;
}

static void resolved_free(void *resolved)
{
	struct sni_route **routes = resolved;

	for (unsigned i = 0; routes[i]; i++)
		free(routes[i]);
	free(routes);
}

/* Every config route's upstream (resolved: struct sni_route *routes[i],
 * listener i's, resolved). */
static size_t dials(const struct etr_conf *c, const void *resolved, union etr_sockaddr *out)
{
	struct sni_route *const *routes = resolved;
	size_t n = 0;

	for (unsigned i = 0; i < c->nsni; i++)
		for (unsigned j = 0; j < c->sni[i].nroutes; j++, n++)
			if (out)
				out[n] = routes[i][j].upstream;
	return n;
}

/* A connection holds two sockets, a refused one lingering one
 * (SNI_LINGER_MAX: a quarter of max-connections). Both caps count across
 * the workers, so this holds whatever the workers' tables: a worker's
 * slots are memory, its sockets come out of these; one more per worker for
 * a connection closed as it is accepted. With splice yes a spliced
 * connection holds two pipes too, 4 more, for at most max-spliced of them
 * (across the workers: sni_lshared's spliced); the others copy. */
static uint64_t fds(const struct etr_conf *c, unsigned workers)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < c->nsni; i++) {
		n +=
		    2ull * (c->sni[i].max_connections + SNI_LINGER_MAX(c->sni[i].max_connections)) +
		    workers;
		n += 4ull * conf_sni_max_spliced(&c->sni[i]);
	}
	return n;
}

static const char *fds_what(const struct etr_conf *c)
{
	for (unsigned i = 0; i < c->nsni; i++)
		if (c->sni[i].splice)
			return "the SNI listeners' connections (2 sockets each, and 2 pipes "
			       "each of max-spliced)";
	return "the SNI listeners' connections";
}

/* Any thread: the SNI route tables changed; every worker takes them. */
static void sni_publish(struct sni_shared *sh)
{
	const struct kind_env *e = sh->arg;

	for (unsigned w = 0; w < e->nworkers; w++)
		e->post(e, w);
}

/* SNI listener i on every worker, each with its own socket in the port's
 * SO_REUSEPORT group (the kernel spreads the connections). */
static int open_one(struct kind_env *e, unsigned i, const struct sni_route *routes)
{
	const struct sni_conf *c = &e->conf->sni[i];
	struct sni_shared *sh = e->shared;
	char err[512];

	if (sni_shared_init(sh, i, c, routes, c->nroutes, e->nworkers, err, sizeof(err)) < 0) {
		log_warnx("sni %s: %s", c->name, err);
		return EXIT_CONFIG;
	}
	for (unsigned w = 0; w < e->nworkers; w++) {
		int rc = sni_listener_open(e->inst(e, w, i), sh, i, w, e->nworkers > 1);

		e->opened(e, w, i + 1);
		if (rc < 0)
			return EXIT_FAILURE;
	}
	return 0;
}

/* e->shared: the listeners' struct sni_shared (the control plane sets its
 * routes, the ops plane reads it). */
static int open_all(struct kind_env *e)
{
	struct sni_shared *sh = e->shared;
	int rc = 0;

	sh->lifecycle = &e->stats->lifecycle;
	sh->nlocal = net_local_addrs(sh->local, SNI_LOCAL_MAX);
	sh->publish = sni_publish;
	sh->arg = e;
	for (unsigned i = 0; i < e->conf->nsni && rc == 0; i++)
		rc = open_one(e, i, ((struct sni_route *const *)e->resolved)[i]);
	if (e->conf->nsni)
		e->stats->sni = sh;
	return rc;
}

static void shared_free(struct kind_env *e)
{
	sni_shared_free(e->shared);
}

static int attach(void *inst, const struct loop_ops *ops, struct loop *loop,
		  struct endpoint_table *ep)
{
	return sni_listener_attach(inst, ops, loop, ep);
}

/* The route tables in force changed (sni_shared's publish). */
static void poke(void *inst)
{
	sni_listener_take_routes(inst);
}

static void take_bans(void *inst, const struct banlist *b)
{
	sni_listener_take_bans(inst, b);
}

static void shutdown_(void *inst)
{
	sni_listener_shutdown(inst);
}

static void close_(void *inst)
{
	sni_listener_close(inst);
}

static uint32_t active(const void *shared, unsigned n)
{
	(void)n;
	return sni_active_total(shared);
}

static void log_start(const struct kind_env *e, const char *backend)
{
	for (unsigned i = 0; i < e->conf->nsni; i++) {
		const struct sni_conf *c = &e->conf->sni[i];
		char a[ADDR_STRLEN];

		log_info("sni %s listening on %s (TCP), backend %s, %u route%s, up to %u "
			 "connections",
			 c->name, addr_str(&c->listen.sa, a), backend, c->nroutes,
			 c->nroutes == 1 ? "" : "s", c->max_connections);
	}
}

static const char *result_at(unsigned i)
{
	return sni_result_name((enum sni_result)i);
}

/* Each listener's line beside the relays' `stats NAME`: what it served
 * and what it refused, summed over the workers. */
static void log_stats(const struct kind_env *e)
{
	char why[512];

	for (unsigned i = 0; i < e->conf->nsni; i++) {
		struct sni_totals sum;
		uint64_t refused = 0;

		sni_listener_totals(e->shared, i, &sum);
		for (unsigned k = 0; k < SNI_RESULTS; k++)
			refused += k == SNI_SPLICED ? 0 : sum.result[k];
		why[0] = '\0';
		stats_list(why, sizeof(why), 0, sum.result, SNI_RESULTS, result_at, SNI_SPLICED);
		log_info(
		    "stats sni %s: connections spliced %llu, refused %llu%s; client to upstream "
		    "%llu B, upstream to client %llu B",
		    e->conf->sni[i].name, (unsigned long long)sum.result[SNI_SPLICED],
		    (unsigned long long)refused, why, (unsigned long long)sum.bytes_in,
		    (unsigned long long)sum.bytes_out);
	}
}

static void listener(const struct kind_env *e, unsigned i, struct kind_listener *out)
{
	uint32_t routes;

	sni_listener_info(e->shared, i, &out->active, &out->max, &routes);
	out->name = e->conf->sni[i].name;
}

/* The ops plane reads e->stats->sni, set as the listeners open. */
static unsigned running(const struct kind_env *e)
{
	return e->stats->sni ? e->stats->sni->n : 0;
}

/* GET /lifecycle: "sni_listeners" (an empty array without listeners). */
static void lifecycle(const struct kind_env *e, FILE *f)
{
	struct sni_shared *sh = e->stats->sni;

	fputs(",\"sni_listeners\":[", f);
	for (unsigned i = 0; sh && i < sh->n; i++) {
		const struct sni_conf *sc = sh->l[i].conf;
		uint32_t sact, scap, sroutes;
		char a[ADDR_STRLEN];

		sni_listener_info(sh, i, &sact, &scap, &sroutes);
		fputs(i ? ",{\"name\":" : "{\"name\":", f);
		json_string(f, sc->name);
		fputs(",\"listen\":", f);
		json_string(f, addr_str(&sc->listen.sa, a));
		fprintf(f,
			",\"routes\":%" PRIu32 ",\"active_connections\":%" PRIu32
			",\"max_connections\":%" PRIu32 "}",
			sroutes, sact, scap);
	}
	fputc(']', f);
}

/* A TCP connect to a within ms. Returns 0 or an errno value. */
static int tcp_connect(const union etr_sockaddr *a, uint64_t ms)
{
	int fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err = 0;
	socklen_t len = sizeof(err);
	struct pollfd p;

	if (fd < 0)
		return errno;
	if (connect(fd, &a->sa, addr_len(a)) < 0 && errno != EINPROGRESS) {
		err = errno;
	} else {
		p = (struct pollfd){.fd = fd, .events = POLLOUT};
		if (poll(&p, 1, (int)(ms < 60000 ? ms : 60000)) <= 0)
			err = ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
	}
	close(fd);
	return err;
}

/* -t --probe: an SNI route's upstream resolves, as the daemon resolves it
 * at start, and accepts a TCP connection within connect-timeout. */
static int check_sni_route(const struct etr_conf *c, const struct sni_conf *s,
			   const struct sni_route_conf *r)
{
	char a[ADDR_STRLEN], hp[ADDR_HOSTLEN + 8], where[300] = "";
	struct resolver_result res;
	int err;

	addr_hostport(r->host, r->port, hp);
	if (r->line)
		snprintf(where, sizeof(where), " (%s:%u)", c->path ? c->path : "", r->line);
	if (resolver_lookup(r->host, r->port, AF_UNSPEC, &res) != 0) {
		printf("sni %s: route %s: upstream %s%s: FAILED to resolve (%s)\n", s->name,
		       r->name, hp, where, gai_strerror(res.gai_err));
		return 1;
	}
	if ((err = tcp_connect(&res.addr, s->connect_timeout_ms)) != 0) {
		printf("sni %s: route %s: upstream %s (%s): FAILED to connect (%s)\n", s->name,
		       r->name, hp, addr_str(&res.addr.sa, a), strerror(err));
		return 1;
	}
	printf("sni %s: route %s: upstream %s (%s): ok, accepts TCP connections\n", s->name,
	       r->name, hp, addr_str(&res.addr.sa, a));
	return 0;
}

/* -t: each SNI listener and its routes. */
static void report(const struct etr_conf *c)
{
	for (unsigned i = 0; i < c->nsni; i++) {
		const struct sni_conf *s = &c->sni[i];
		char a[ADDR_STRLEN], hp[ADDR_HOSTLEN + 8];

		printf("sni %s: listen %s (TCP), %u route%s, max-connections %" PRIu32
		       ", max-connections-per-ip %" PRIu32 "%s\n",
		       s->name, addr_str(&s->listen.sa, a), s->nroutes, s->nroutes == 1 ? "" : "s",
		       s->max_connections, s->max_per_ip, s->splice ? ", splice" : "");
		if (s->splice)
			printf("sni %s: splice: up to %" PRIu32
			       " connections at once through 2 pipes each (max-spliced)\n",
			       s->name, conf_sni_max_spliced(s));
		for (unsigned j = 0; j < s->nroutes; j++)
			printf("sni %s: route %s -> %s%s\n", s->name, s->routes[j].name,
			       addr_hostport(s->routes[j].host, s->routes[j].port, hp),
			       s->routes[j].proxy_v2 ? " proxy-v2" : "");
	}
}

/* -t --probe: every route's upstream. */
static int probe_all(const struct etr_conf *c)
{
	int bad = 0;

	for (unsigned i = 0; i < c->nsni; i++)
		for (unsigned j = 0; j < c->sni[i].nroutes; j++)
			bad |= check_sni_route(c, &c->sni[i], &c->sni[i].routes[j]);
	return bad;
}

const struct kind sni_kind = {
    .name = "sni",
    .size = sizeof(struct sni_listener),
    .count = count,
    .shared_size = sizeof(struct sni_shared),
    .resolve = resolve,
    .resolved_free = resolved_free,
    .dials = dials,
    .open = open_all,
    .shared_free = shared_free,
    .fds = fds,
    .fds_what = fds_what,
    .fds_knob = "max-connections",
    .attach = attach,
    .poke = poke,
    .take_bans = take_bans,
    .shutdown = shutdown_,
    .close = close_,
    .log_start = log_start,
    .log_stats = log_stats,
    .listener = listener,
    .running = running,
    .lifecycle = lifecycle,
    .report = report,
    .probe = probe_all,
    .summary_one = "SNI listener",
    .summary_many = "SNI listeners",
    .active = active,
    .active_one = "SNI connection",
    .active_many = "SNI connections",
};
