/* SPDX-License-Identifier: ISC */
/* The configuration check. Blocking I/O is fine here: no packet loop runs. */
#include "check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "addrclass.h"
#include "banlist.h"
#include "daemon.h"
#include "log.h"
#include "loop.h"
#include "net.h"
#include "ops.h"
#include "secret.h"
#include "q3proto.h"
#include "resolver.h"
#include "tls_reload.h"
#include "turn.h"

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
			struct pollfd p = { .fd = fd, .events = POLLIN };
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
		printf("relay %s: upstream %s (%s): ok, answered getinfo (hostname '%s', map '%s')\n",
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
			snprintf(where, sizeof(where), " (%s:%u)", c->path ? c->path : "", cm->line);
		if (rc < 0) {
			printf("relay %s: master %s%s: FAILED to resolve (%s)\n", r->name, hp, where,
			       why);
			bad = 1;
		} else if (rc > 0) {
			printf("relay %s: master %s%s: FAILED, resolves only to %s addresses (%s), "
			       "which the listener %s cannot reach\n",
			       r->name, hp, where,
			       conf_addr_family(&m) == AF_INET ? "IPv4" : "IPv6", show(&m, a), l);
			bad = 1;
		} else {
			printf("relay %s: master %s: resolved to %s, which the listener %s can reach "
			       "(whether it answers heartbeats is not checked)\n",
			       r->name, hp, show(&m, a), l);
		}
	}
	return bad;
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
		p = (struct pollfd){ .fd = fd, .events = POLLOUT };
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
		printf("sni %s: route %s: upstream %s%s: FAILED to resolve (%s)\n", s->name, r->name,
		       hp, where, gai_strerror(res.gai_err));
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

/* The ban file must load whole, as at startup. */
static int check_bans(const struct etr_conf *c)
{
	struct banlist b = { 0 };
	char err[4096] = "";
	int rc;

	if (c->ban_file[0] == '\0')
		return 0;
	rc = banlist_load_file(&b, c->ban_file, err, sizeof(err));
	if (rc < 0 && rc != -ENOMEM)
		fprintf(stderr, "etrelay: %s\n", err);
	else if (rc != 0)
		fprintf(stderr, "%s%s", err, err[0] && err[strlen(err) - 1] != '\n' ? "\n" : "");
	else
		printf("ban-file %s: %zu entries\n", c->ban_file, b.entries);
	banlist_free(&b);
	return rc != 0 ? EXIT_CONFIG : 0;
}

/* -t as root reads any file; the service may not (the shipped unit runs
 * as a DynamicUser). A file only root can read is refused at start by
 * another user: said here, since "valid" would be false for that start. A
 * file readable by a group may or may not be the service's: nothing said. */
static void root_only_warning(const struct etr_conf *c, const struct turn_conf *t)
{
	const char *file[2] = { t->tls_cert, t->tls_key };
	const char *key[2] = { "tls-cert", "tls-key" };
	const unsigned line[2] = { t->tls_cert_line, t->tls_key_line };
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
static int check_turn_ports(const struct etr_conf *c)
{
	unsigned workers = daemon_workers_wanted(c);
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

/* The control-plane credential a start would take, read and checked by
 * the functions the start calls (secret_from_env, secret_from_file:
 * the ops tokens' rules for mode and length): the variable, else (without
 * a credential file in state-dir) the bootstrap token file. A missing
 * bootstrap file is conf_control_warnings' warning. */
static int check_control_credential(const struct etr_conf *c)
{
	char tok[1024], err[512], cred[CONF_PATH_MAX + sizeof(CONF_CONTROL_STATE_FILE) + 1];
	const char *f = c->control_bootstrap_file;
	size_t len;
	int rc;

	if (!c->control_url[0])
		return 0;
	rc = secret_from_env("control", CONF_CONTROL_ENV_TOKEN, tok, sizeof(tok), &len, err, sizeof(err));
	if (rc == 0) {
		snprintf(cred, sizeof(cred), "%s/%s", c->state_dir, CONF_CONTROL_STATE_FILE);
		if (!f[0] || access(cred, F_OK) == 0 || access(f, F_OK) < 0)
			return 0;
		rc = secret_from_file("control", "control-bootstrap-token-file", f, tok, sizeof(tok), &len,
					 err, sizeof(err));
	}
	explicit_bzero(tok, sizeof(tok));
	if (rc >= 0)
		return 0;
	log_warnx("%s", err);
	return EXIT_CONFIG;
}

/* A warning for a listen address that is not this host's (EADDRNOTAVAIL
 * on a bind to it, port 0): a start here exits 1 on it, but -t may check
 * a file for another host. */
static void warn_not_local(const char *what, const union etr_sockaddr *listen)
{
	union etr_sockaddr a = *listen;
	char s[ADDR_STRLEN];
	int fd = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	a.in.sin_port = 0; /* the same offset in both families */
	if (bind(fd, &a.sa, addr_len(&a)) < 0 && errno == EADDRNOTAVAIL)
		fprintf(stderr,
			"etrelay: warning: %s: listen %s: not an address of this host (a start "
			"on this host exits 1 on it)\n",
			what, addr_str(&listen->sa, s));
	close(fd);
}

static void warn_listens(const struct etr_conf *c)
{
	char what[CONF_NAME_MAX + 32];

	for (unsigned i = 0; i < c->nrelays; i++) {
		snprintf(what, sizeof(what), "relay %s", c->relays[i].name);
		warn_not_local(what, &c->relays[i].listen);
	}
	for (unsigned i = 0; i < c->prbe.nlisten; i++)
		warn_not_local("prbe-listen", &c->prbe.listen[i]);
	for (unsigned i = 0; i < c->nsni; i++) {
		snprintf(what, sizeof(what), "sni %s", c->sni[i].name);
		warn_not_local(what, &c->sni[i].listen);
	}
	for (unsigned i = 0; i < c->nturn; i++) {
		const struct turn_conf *t = &c->turn[i];

		snprintf(what, sizeof(what), "turn %s", t->name);
		warn_not_local(what, &t->listen);
		if (t->tcp_set)
			warn_not_local(what, &t->tcp_listen);
		if (t->tls_set)
			warn_not_local(what, &t->tls_listen);
	}
	if (c->ops_enabled)
		warn_not_local("ops-listen", &c->ops_listen);
}

int check_run(const struct etr_conf *c, bool nofile_ok)
{
	int bad = check_bans(c);

	warn_listens(c);
	if (bad)
		return bad;
	if ((bad = check_control_credential(c)) != 0)
		return bad;
	if ((bad = check_turn_tls(c)) != 0)
		return bad;
	if ((bad = check_turn_ports(c)) != 0)
		return bad;
	if (!nofile_ok)
		return EXIT_CONFIG;

	for (unsigned i = 0; i < c->nrelays; i++) {
		const struct relay_conf *r = &c->relays[i];
		char a[ADDR_STRLEN], hp[ADDR_HOSTLEN + 8];

		printf("relay %s: listen %s, upstream %s, game %s, %u masters, max-sessions %u\n",
		       r->name, addr_str(&r->listen.sa, a),
		       addr_hostport(r->upstream_host, r->upstream_port, hp), r->game, r->nmasters,
		       r->max_sessions);
	}
	for (unsigned i = 0; i < c->prbe.nlisten; i++) {
		char a[ADDR_STRLEN];

		printf("prbe-listen %s\n", addr_str(&c->prbe.listen[i].sa, a));
	}
	if (c->prbe.nports)
		printf("prbe echo on %u port%s: max-size %u, rate %u/s, burst %u, each port %u/s, "
		       "burst %u\n",
		       c->prbe.nports, c->prbe.nports == 1 ? "" : "s", c->prbe.max_size,
		       c->prbe.rate, c->prbe.burst, c->prbe.listener_rate, c->prbe.listener_burst);
	for (unsigned i = 0; i < c->nsni; i++) {
		const struct sni_conf *s = &c->sni[i];
		char a[ADDR_STRLEN], hp[ADDR_HOSTLEN + 8];

		printf("sni %s: listen %s (TCP), %u route%s, max-connections %" PRIu32
		       ", max-connections-per-ip %" PRIu32 "\n",
		       s->name, addr_str(&s->listen.sa, a), s->nroutes, s->nroutes == 1 ? "" : "s",
		       s->max_connections, s->max_per_ip);
		for (unsigned j = 0; j < s->nroutes; j++)
			printf("sni %s: route %s -> %s%s\n", s->name, s->routes[j].name,
			       addr_hostport(s->routes[j].host, s->routes[j].port, hp),
			       s->routes[j].proxy_v2 ? " proxy-v2" : "");
	}
	for (unsigned i = 0; i < c->nturn; i++) {
		const struct turn_conf *t = &c->turn[i];
		char a[ADDR_STRLEN], b[ADDR_STRLEN], r[ADDR_STRLEN], s[ADDR_STRLEN], err[128];

		/* A warning: -t may check a file for another host; a start
		 * refuses it. */
		if (turn_relay_addr_check(t, err, sizeof(err)) < 0)
			fprintf(stderr, "etrelay: warning: turn %s: %s (a start on this host "
					"refuses it)\n", t->name, err);
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
	printf("etrelay: configuration %s is valid (%u relay%s", c->path ? c->path : "(command line)",
	       c->nrelays, c->nrelays == 1 ? "" : "s");
	if (c->nsni)
		printf(", %u SNI listener%s", c->nsni, c->nsni == 1 ? "" : "s");
	if (c->prbe.nlisten)
		printf(", %u echo port%s", c->prbe.nlisten, c->prbe.nlisten == 1 ? "" : "s");
	if (c->nturn)
		printf(", %u TURN listener%s", c->nturn, c->nturn == 1 ? "" : "s");
	printf(")\n");
	if (!c->probe)
		return 0;
	for (unsigned i = 0; i < c->nrelays; i++)
		bad |= check_relay(c, &c->relays[i]);
	for (unsigned i = 0; i < c->nsni; i++)
		for (unsigned j = 0; j < c->sni[i].nroutes; j++)
			bad |= check_sni_route(c, &c->sni[i], &c->sni[i].routes[j]);
	printf("etrelay: probe %s\n", bad ? "FAILED" : "ok");
	return bad ? 1 : 0;
}
