/* SPDX-License-Identifier: ISC */
/* etrelay: argv and the config file, resolve the game servers, check the
 * limits, then hand over to the daemon. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "conf_schema.h"
#include "config.h"
#include "daemon.h"
#include "kinds.h"
#include "log.h"
#include "net.h"
#include "ops.h"
#include "relay_conf.h"
#include "resolver.h"
#include "sni.h"
#include "turn.h"
#include "version.h"

/* Every session holds a socket: take all the descriptors we are allowed. */
static rlim_t raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1024;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur;
}

/* The descriptors the configuration may hold at once, against the limit:
 * each listener kind named in the message (kinds.h), with the setting that
 * lowers it, so that an SNI-only or echo-only process is not told about
 * relays. */
static int check_nofile(const struct etr_conf *conf, rlim_t nofile)
{
	unsigned workers = daemon_workers_wanted(conf);
	uint64_t need, own, ops, part[KINDS];
	char parts[400], lower[128];
	size_t o = 0, l = 0;
	unsigned nknob = 0, knobs = 0;

	/* Each worker has its own public sockets, loop and control
	 * eventfd; a few more for the process (signalfd, logs). The ops
	 * plane's connections come out of the same limit: a full listener
	 * must not leave a session without its socket. */
	own = 16 + (uint64_t)workers * (conf->nrelays + 4);
	ops = conf->ops_enabled ? OPS_FDS_MAX : 0;
	need = own + ops;
	for (unsigned k = 0; k < KINDS; k++) {
		part[k] = kinds[k]->count(conf) ? kinds[k]->fds(conf, workers) : 0;
		need += part[k];
		knobs += part[k] && kinds[k]->fds_knob;
	}
	if (need <= nofile)
		return 0;
	parts[0] = lower[0] = '\0';
	for (unsigned k = 0; k < KINDS; k++) {
		if (!part[k])
			continue;
		if (o < sizeof(parts))
			o +=
			    (size_t)snprintf(parts + o, sizeof(parts) - o, "%llu for %s, ",
					     (unsigned long long)part[k], kinds[k]->fds_what(conf));
		if (kinds[k]->fds_knob && l < sizeof(lower)) {
			nknob++;
			l += (size_t)snprintf(lower + l, sizeof(lower) - l, "%s%s",
					      nknob == 1       ? ""
					      : nknob == knobs ? " or "
							       : ", ",
					      kinds[k]->fds_knob);
		}
	}
	if (ops && o < sizeof(parts))
		o += (size_t)snprintf(parts + o, sizeof(parts) - o, "%llu for the ops plane, ",
				      (unsigned long long)ops);
	if (o < sizeof(parts))
		snprintf(parts + o, sizeof(parts) - o, "%llu for the workers' own",
			 (unsigned long long)own);
	log_warnx("the configuration needs %llu file descriptors (%s), the limit is %llu: raise "
		  "LimitNOFILE= (systemd) or ulimit -n%s%s%s",
		  (unsigned long long)need, parts, (unsigned long long)nofile,
		  lower[0] ? ", or lower " : "", lower,
		  part[KIND_TURN] && strstr(kinds[KIND_TURN]->fds_what(conf), "TCP")
		      ? ", or lower the TURN tcp-max-connections"
		      : "");
	return -1;
}

static int resolve_upstream(const struct relay_conf *r, union etr_sockaddr *sa)
{
	struct resolver_result res;

	if (resolver_lookup(r->upstream_host, r->upstream_port, AF_UNSPEC, &res) != 0) {
		log_warnx("relay %s: upstream %s: cannot resolve (%s)", r->name, r->upstream_host,
			  gai_strerror(res.gai_err));
		return -1;
	}
	*sa = res.addr;
	return 0;
}

/* The SNI listeners' config routes with their upstreams resolved, as the
 * game servers' are: at start, blocking. Returns 0 or -1 (logged). */
static int resolve_sni(const struct etr_conf *c, struct sni_route *out[CONF_SNI_MAX])
{
	for (unsigned i = 0; i < c->nsni; i++) {
		const struct sni_conf *s = &c->sni[i];

		out[i] = calloc(s->nroutes + 1, sizeof(*out[i]));
		if (!out[i]) {
			log_warn("sni %s", s->name);
			return -1;
		}
		for (unsigned j = 0; j < s->nroutes; j++) {
			const struct sni_route_conf *r = &s->routes[j];
			struct resolver_result res;

			if (resolver_lookup(r->host, r->port, AF_UNSPEC, &res) != 0) {
				log_warnx("sni %s: route %s: upstream %s: cannot resolve (%s)",
					  s->name, r->name, r->host, gai_strerror(res.gai_err));
				return -1;
			}
			snprintf(out[i][j].name, sizeof(out[i][j].name), "%s", r->name);
			out[i][j].upstream = res.addr;
			out[i][j].proxy_v2 = r->proxy_v2;
		}
	}
	return 0;
}

/* A route whose upstream is one of the SNI listeners (or, on a wildcard
 * listener's port, an address of this host) would chain connections until
 * the caps run out, and one to the ops listener would publish it: refused,
 * naming its line. Without resolved (-t, and
 * before the names are resolved) only numeric upstreams are checked.
 * Returns 0 or -1 (written to stderr). */
static int sni_loops(const struct etr_conf *c, struct sni_route *const *resolved)
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

/* A relay whose upstream is itself (conf_relay_loops), with the host's
 * addresses: up NULL checks the numeric upstreams (-t, before resolving).
 * Returns 0 or -1 (written to stderr). */
static int relay_loops(const struct etr_conf *c, const union etr_sockaddr *up)
{
	union etr_sockaddr local[SNI_LOCAL_MAX];
	size_t nlocal = net_local_addrs(local, SNI_LOCAL_MAX);
	struct conf_errors e = {.len = 0};

	if (conf_relay_loops(c, up, local, nlocal, &e) == 0)
		return 0;
	fputs(e.text, stderr);
	return -1;
}

/* Parse argv and the file; returns 0 or the exit status. */
static int configure(struct etr_conf *c, int argc, char **argv)
{
	struct conf_errors e = {.len = 0};
	char *text = NULL;
	size_t len = 0;
	int rc = 0;

	if (conf_parse_args(c, argc, argv, &e) < 0) {
		fputs(e.text, stderr);
		return EXIT_USAGE;
	}
	if (c->help || c->version)
		return 0;
	/* The default file is read when the command line names no listener:
	 * `etrelay --upstream ...` alone never picks up /etc. */
	if (!c->path_given && !c->cli_upstream && !c->cli_listener)
		c->path = CONF_DEFAULT_PATH;
	if (c->path) {
		text = conf_read_file(c->path, &len);
		if (!text) {
			fprintf(stderr, "etrelay: %s: %s%s\n", c->path, strerror(errno),
				c->path_given ? "" : " (give --upstream HOST:PORT, or -c FILE)");
			return c->path_given || c->test ? EXIT_CONFIG : EXIT_USAGE;
		}
		if (conf_load(c, text, len, c->path, &e) < 0)
			rc = EXIT_CONFIG;
		free(text);
	}
	if (conf_finish(c, &e) < 0 && rc == 0)
		rc = c->path ? EXIT_CONFIG : EXIT_USAGE;
	if (rc)
		fputs(e.text, stderr);
	return rc;
}

int main(int argc, char **argv)
{
	static struct etr_conf conf;
	static struct daemon d;
	union etr_sockaddr upstream[CONF_RELAYS_MAX];
	struct sni_route *sni_routes[CONF_SNI_MAX] = {NULL};
	char err[512];
	rlim_t nofile;
	bool nofile_ok;
	int rc;

	conf_defaults(&conf, &etr_conf_schema);
	if ((rc = configure(&conf, argc, argv)) != 0)
		return rc;
	if (conf.help) {
		fputs(conf_usage, stdout);
		return 0;
	}
	if (conf.version) {
		printf("etrelay %s\n", ETRELAY_VERSION);
		return 0;
	}
	log_init(conf.debug, conf.log_time == CONF_LOG_TIME_YES	 ? LOG_TIME_YES
			     : conf.log_time == CONF_LOG_TIME_NO ? LOG_TIME_NO
								 : LOG_TIME_AUTO);
	if (conf.ops_enabled && ops_tokens_check(err, sizeof(err)) < 0) {
		log_warnx("ops plane: %s", err);
		return EXIT_CONFIG;
	}
	if (sni_loops(&conf, NULL) < 0 || relay_loops(&conf, NULL) < 0)
		return EXIT_CONFIG;
	if (conf.nturn) {
		struct turn_secret_set *s = malloc(sizeof(*s));

		if (!s || turn_secrets_read(s, err, sizeof(err)) < 0) {
			log_warnx("turn: %s", s ? err : "out of memory");
			free(s);
			return EXIT_CONFIG;
		}
		explicit_bzero(s, sizeof(*s));
		free(s);
	}
	{
		struct conf_errors w = {.len = 0};

		/* -t prints them with the check; a start logs them. */
		unsigned n = conf_warnings(&conf, &w);

		if (n && conf.test)
			fputs(w.text, stderr);
		else
			for (char *l = w.text, *nl; *l; l = nl + 1) {
				nl = strchr(l, '\n');
				*nl = '\0';
				log_warnx("%s", l);
			}
	}
	/* -t refuses what a start under this hard limit refuses: a "valid"
	 * the start then contradicts is worse than a refusal that names the
	 * unit's setting (the service's limit is its LimitNOFILE=, not this
	 * shell's). */
	nofile = raise_nofile();
	nofile_ok = check_nofile(&conf, nofile) == 0;
	if (!nofile_ok && !conf.test)
		return EXIT_CONFIG;
	if (!nofile_ok)
		log_warnx("-t: refused, as a start under this limit (%llu) refuses it; "
			  "the service's limit is its unit's LimitNOFILE=: raise that",
			  (unsigned long long)nofile);
	if (conf.test)
		return check_run(&conf, nofile_ok);
	for (unsigned i = 0; i < conf.nrelays; i++)
		if (resolve_upstream(&conf.relays[i], &upstream[i]) < 0)
			return EXIT_FAILURE;
	if (relay_loops(&conf, upstream) < 0)
		return EXIT_CONFIG;
	if (resolve_sni(&conf, sni_routes) < 0) {
		rc = EXIT_FAILURE;
		goto out;
	}
	if (sni_loops(&conf, sni_routes) < 0) {
		rc = EXIT_CONFIG;
		goto out;
	}
	{
		/* What each kind opens its listeners with (kind_env.resolved). */
		const void *resolved[KINDS] = {[KIND_RELAY] = upstream, [KIND_SNI] = sni_routes};

		rc = daemon_open(&d, &conf, resolved);
	}
	if (rc == 0)
		rc = daemon_run(&d);
	daemon_close(&d);
out:
	for (unsigned i = 0; i < CONF_SNI_MAX; i++)
		free(sni_routes[i]);
	return rc;
}
