/* SPDX-License-Identifier: ISC */
/* The checks between listeners of different kinds (the same port twice,
 * a relayed port range over another's port) and the one list of every
 * listening address: the machinery's, as they read every kind's struct. */
#include "conf_key.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

/* Two UDP listeners on one port: the same address, or either a wildcard. */
bool conf_listeners_overlap(const union etr_sockaddr *a, const union etr_sockaddr *b)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;
	bool wild_a, wild_b;

	if (conf_port_of(a) != conf_port_of(b))
		return false;
	if (addr_equal(a, b))
		return true;
	wild_a = a->sa.sa_family == AF_INET ? a->in.sin_addr.s_addr == INADDR_ANY
					    : memcmp(&a->in6.sin6_addr, &any6, 16) == 0;
	wild_b = b->sa.sa_family == AF_INET ? b->in.sin_addr.s_addr == INADDR_ANY
					    : memcmp(&b->in6.sin6_addr, &any6, 16) == 0;
	return wild_a || wild_b;
}

static void prbe_add_port(struct etr_conf *c, uint16_t port, struct conf_errors *e)
{
	for (unsigned i = 0; i < c->prbe.nports; i++)
		if (c->prbe.ports[i] == port)
			return;
	if (c->prbe.nports == CONF_PRBE_PORTS_MAX) {
		conf_err(e,
			 "etrelay: PRBE echo on more than " CONF_STR(
			     CONF_PRBE_PORTS_MAX) " ports (prbe-listen, and relays with prbe yes)");
		return;
	}
	c->prbe.ports[c->prbe.nports++] = port;
}

void conf_prbe_ports(struct etr_conf *c, struct conf_errors *e)
{
	char a[ADDR_STRLEN], o[CONF_PATH_MAX + 32];
	unsigned before = e->count;

	c->prbe.nports = 0;
	for (unsigned i = 0; i < c->prbe.nlisten; i++) {
		const union etr_sockaddr *l = &c->prbe.listen[i];
		const char *where = conf_line_where(c, c->prbe.listen_line[i], o, sizeof(o));

		addr_str(&l->sa, a);
		for (unsigned j = 0; j < i; j++) {
			const union etr_sockaddr *m = &c->prbe.listen[j];
			char b[ADDR_STRLEN], at[32] = "";

			if (!conf_listeners_overlap(l, m))
				continue;
			if (c->prbe.listen_line[j])
				snprintf(at, sizeof(at), " (line %u)", c->prbe.listen_line[j]);
			/* The same address twice, or a wildcard and another
			 * address on one port (attack13 F7: both said "given
			 * twice"). */
			if (!addr_equal(l, m))
				conf_err(e,
					 "%s: prbe-listen %s: the same port as prbe-listen %s%s (a "
					 "wildcard address takes the port on every address)",
					 where, a, addr_str(&m->sa, b), at);
			else if (c->prbe.listen_line[j])
				conf_err(e, "%s: prbe-listen %s: given twice (first on line %u)",
					 where, a, c->prbe.listen_line[j]);
			else
				conf_err(e, "%s: prbe-listen %s: given twice", where, a);
		}
		for (unsigned j = 0; j < c->nrelays; j++)
			if (conf_listeners_overlap(l, &c->relays[j].listen))
				conf_err(e,
					 "%s: prbe-listen %s: relay %s listens there; set prbe "
					 "yes in that relay instead",
					 where, a, c->relays[j].name);
		if (e->count == before)
			prbe_add_port(c, conf_port_of(l), e);
	}
	for (unsigned j = 0; j < c->nrelays && e->count == before; j++)
		if (c->relays[j].prbe)
			prbe_add_port(c, conf_port_of(&c->relays[j].listen), e);
}

/* Whether listener l's port is in t's relayed ports on an address they
 * share (relay-address, or l a wildcard). */
static bool turn_range_holds(const struct turn_conf *t, const union etr_sockaddr *l)
{
	uint16_t p = conf_port_of(l);

	if (p < t->port_min || p > t->port_max)
		return false;
	return conf_ip_wildcard(l) || (l->sa.sa_family == AF_INET &&
				       l->in.sin_addr.s_addr == t->relay_addr.in.sin_addr.s_addr);
}

/* Where t's ports range comes from, for an error about it: "FILE:LINE:
 * turn NAME: ports A-B" on the key's own line, the command line's
 * --turn-ports, or the section with "(the default)". */
static const char *turn_ports_where(const struct etr_conf *c, const struct turn_conf *t,
				    const char *where, char *buf, size_t n)
{
	char o[CONF_PATH_MAX + 32];

	if (t->ports_line)
		snprintf(buf, n, "%s:%u: turn %s: ports %u-%u", conf_path(c), t->ports_line,
			 t->name, t->port_min, t->port_max);
	else if (t->ports_set && t->line == 0)
		snprintf(buf, n, "%s: turn %s: turn-ports %u-%u",
			 strcmp(conf_key_where(c, "turn-ports", o, sizeof(o)),
				"etrelay: command line") == 0
			     ? "etrelay"
			     : o,
			 t->name, t->port_min, t->port_max);
	else
		snprintf(buf, n, "%s: ports %u-%u%s", where, t->port_min, t->port_max,
			 t->ports_set ? "" : " (the default)");
	return buf;
}

/* One listener against t's relayed ports: what the listener is ("relay oa
 * listen 0.0.0.0:27960") and where it was set (or ""). */
static void turn_port_clash(const struct etr_conf *c, const struct turn_conf *t,
			    const union etr_sockaddr *l, const char *what, const char *at,
			    const char *where, struct conf_errors *e)
{
	char w[CONF_PATH_MAX + CONF_NAME_MAX + 400];

	if (!turn_range_holds(t, l))
		return;
	conf_err(e, "%s hold port %u of %s%s%s%s", turn_ports_where(c, t, where, w, sizeof(w)),
		 conf_port_of(l), what, at[0] ? " (" : "", at, at[0] ? ")" : "");
}

/* A relayed port that is another UDP listener's port would be skipped at
 * run time, silently: name both instead. TCP ports (tcp-listen,
 * ops-listen) take nothing from the relayed sockets, which are UDP. */
static void turn_ports_clash(const struct etr_conf *c, const struct turn_conf *t, const char *where,
			     struct conf_errors *e)
{
	char what[CONF_NAME_MAX + 64 + ADDR_STRLEN], at[CONF_PATH_MAX + 48], a[ADDR_STRLEN];

	if (!t->relay_set || t->relay_addr.sa.sa_family != AF_INET)
		return;
	for (unsigned j = 0; j < c->nrelays; j++) {
		const struct relay_conf *r = &c->relays[j];

		snprintf(what, sizeof(what), "relay %s listen %s", r->name,
			 addr_str(&r->listen.sa, a));
		turn_port_clash(c, t, &r->listen, what,
				conf_key_origin(c, r, "listen", NULL, "", at, sizeof(at)), where,
				e);
	}
	for (unsigned j = 0; j < c->nturn; j++) {
		const struct turn_conf *o = &c->turn[j];

		snprintf(what, sizeof(what), "turn %s listen %s", o->name,
			 addr_str(&o->listen.sa, a));
		if (o->line)
			conf_line_where(c, o->line, at, sizeof(at));
		else
			at[0] = '\0';
		turn_port_clash(c, t, &o->listen, what, at, where, e);
	}
	for (unsigned j = 0; j < c->prbe.nlisten; j++) {
		snprintf(what, sizeof(what), "prbe-listen %s", addr_str(&c->prbe.listen[j].sa, a));
		if (c->prbe.listen_line[j])
			conf_line_where(c, c->prbe.listen_line[j], at, sizeof(at));
		else
			snprintf(at, sizeof(at), "etrelay: command line");
		turn_port_clash(c, t, &c->prbe.listen[j], what, at, where, e);
	}
}

/* One TCP listening address of the configuration, for conf_tcp_clash. */
struct tcp_listener {
	const union etr_sockaddr *addr;
	const char *kind, *name, *key; /* kind "": the ops plane */
	unsigned line;		       /* of the section's header; 0: command line */
};

/* Whether a comes after b in the file (the command line after the file). */
static bool tcp_listener_after(const struct tcp_listener *a, const struct tcp_listener *b)
{
	unsigned la = a->line ? a->line : ~0u, lb = b->line ? b->line : ~0u;

	if (!a->kind[0] || !b->kind[0])
		return b->kind[0] == '\0' && a->kind[0] != '\0';
	return la > lb;
}

/* Every pair of TCP listeners on one port (the same address, or either a
 * wildcard): the ops plane, each SNI listener, each TURN listener's
 * tcp-listen and tls-listen. A start would fail on the second one (each
 * first socket checks that nobody listens there, which our own first
 * listener does), blaming another process; -t would pass. Said here
 * instead, once per pair, at the later listener in the file (the
 * command line's come last), naming the earlier one and its line. */
void conf_tcp_clash(struct etr_conf *c, struct conf_errors *e)
{
	struct tcp_listener l[1 + CONF_SNI_MAX + 2 * CONF_TURN_MAX];
	const char *path = conf_path(c);
	char where[CONF_NAME_MAX + 300], a[ADDR_STRLEN], other[CONF_NAME_MAX + 80];
	unsigned n = 0;

	if (c->ops_enabled)
		l[n++] = (struct tcp_listener){&c->ops_listen, "", "", "ops-listen", 0};
	for (unsigned i = 0; i < c->nsni; i++)
		if (c->sni[i].listen_set)
			l[n++] = (struct tcp_listener){&c->sni[i].listen, "sni", c->sni[i].name,
						       "listen", c->sni[i].line};
	for (unsigned i = 0; i < c->nturn; i++) {
		const struct turn_conf *t = &c->turn[i];

		if (t->tcp_set)
			l[n++] = (struct tcp_listener){&t->tcp_listen, "turn", t->name,
						       "tcp-listen", t->line};
		if (t->tls_set)
			l[n++] = (struct tcp_listener){&t->tls_listen, "turn", t->name,
						       "tls-listen", t->line};
	}
	/* In file order, stable; the ops plane first (it has no section). */
	for (unsigned j = 1; j < n; j++)
		for (unsigned i = j; i > 0 && tcp_listener_after(&l[i - 1], &l[i]); i--) {
			struct tcp_listener x = l[i];

			l[i] = l[i - 1];
			l[i - 1] = x;
		}
	for (unsigned j = 1; j < n; j++) {
		if (conf_port_of(l[j].addr) == 0)
			continue; /* given, wrong, and said so */
		if (l[j].line)
			snprintf(where, sizeof(where), "%s:%u: %s %s", path, l[j].line, l[j].kind,
				 l[j].name);
		else
			snprintf(where, sizeof(where), "etrelay: %s %s", l[j].kind, l[j].name);
		for (unsigned i = 0; i < j; i++) {
			if (!conf_listeners_overlap(l[j].addr, l[i].addr))
				continue;
			if (!l[i].kind[0] ||
			    (l[i].kind == l[j].kind && strcmp(l[i].name, l[j].name) == 0))
				other[0] = '\0'; /* the ops plane, or the same section */
			else if (l[i].line)
				snprintf(other, sizeof(other), " of %s %s (line %u)", l[i].kind,
					 l[i].name, l[i].line);
			else
				snprintf(other, sizeof(other), " of %s %s (command line)",
					 l[i].kind, l[i].name);
			conf_err(e, "%s: %s %s: the %s address%s", where, l[j].key,
				 addr_str(&l[j].addr->sa, a), l[i].key, other);
		}
	}
}

void conf_each_listen(const struct etr_conf *c,
		      void (*each)(void *arg, const struct conf_listen *l), void *arg)
{
	struct conf_listen l;

	for (unsigned i = 0; i < c->nrelays; i++) {
		l = (struct conf_listen){"relay", "game relay", c->relays[i].name,
					 &c->relays[i].listen};
		each(arg, &l);
	}
	for (unsigned i = 0; i < c->prbe.nlisten; i++) {
		l = (struct conf_listen){"prbe-listen", "PRBE echo port", "", &c->prbe.listen[i]};
		each(arg, &l);
	}
	for (unsigned i = 0; i < c->nsni; i++) {
		l = (struct conf_listen){"sni", "SNI listener", c->sni[i].name, &c->sni[i].listen};
		each(arg, &l);
	}
	for (unsigned i = 0; i < c->nturn; i++) {
		const struct turn_conf *t = &c->turn[i];

		l = (struct conf_listen){"turn", "TURN listener", t->name, &t->listen};
		each(arg, &l);
		if (t->tcp_set) {
			l = (struct conf_listen){"turn", "TURN TCP listener", t->name,
						 &t->tcp_listen};
			each(arg, &l);
		}
		if (t->tls_set) {
			l = (struct conf_listen){"turn", "TURN TLS listener", t->name,
						 &t->tls_listen};
			each(arg, &l);
		}
	}
	for (unsigned i = 0; i < c->ntunnel; i++) {
		const struct tun_conf *t = &c->tunnel[i];
		/* WireGuard listens on every address (the callee copies). */
		union etr_sockaddr wg = {.in = {.sin_family = AF_INET}};

		wg.in.sin_port = htons((uint16_t)t->listen_port);
		/* The line of listen-port, else of [tunnel] (its default). */
		l = (struct conf_listen){"tunnel", "WireGuard port", t->name, &wg,
					 t->port_line ? t->port_line : t->line};
		each(arg, &l);
	}
	if (c->ops_enabled) {
		l = (struct conf_listen){"ops-listen", "ops listener", "", &c->ops_listen};
		each(arg, &l);
	}
}

void conf_turn_clash(const struct etr_conf *c, unsigned i, const char *where, struct conf_errors *e)
{
	const struct turn_conf *t = &c->turn[i];
	char a[ADDR_STRLEN];

	for (unsigned j = 0; j < c->nrelays; j++) {
		const struct relay_conf *r = &c->relays[j];

		if (conf_listeners_overlap(&t->listen, &r->listen))
			conf_err(e, "%s: listen %s: relay %s listens there", where,
				 addr_str(&t->listen.sa, a), r->name);
		if (r->port_min && r->port_min <= t->port_max && t->port_min <= r->port_max)
			conf_err(e, "%s: ports %u-%u overlap the session-ports of relay %s", where,
				 t->port_min, t->port_max, r->name);
	}
	for (unsigned j = 0; j < c->prbe.nlisten; j++)
		if (conf_listeners_overlap(&t->listen, &c->prbe.listen[j]))
			conf_err(e, "%s: listen %s: a prbe-listen port", where,
				 addr_str(&t->listen.sa, a));
	turn_ports_clash(c, t, where, e);
	for (unsigned j = 0; j < i; j++) {
		const struct turn_conf *o = &c->turn[j];

		if (conf_listeners_overlap(&t->listen, &o->listen))
			conf_err(e, "%s: listen %s: already used by turn %s", where,
				 addr_str(&t->listen.sa, a), o->name);
		if (o->port_min <= t->port_max && t->port_min <= o->port_max &&
		    addr_equal(&o->relay_addr, &t->relay_addr))
			conf_err(e, "%s: ports %u-%u overlap those of turn %s", where, t->port_min,
				 t->port_max, o->name);
	}
}

/* One UDP listener against every relay's session-ports. */
struct session_clash {
	const struct etr_conf *c;
	struct conf_errors *e;
};

static void session_port_clash(void *arg, const struct conf_listen *l)
{
	const struct session_clash *x = arg;
	uint16_t port = conf_port_of(l->addr);
	char where[CONF_PATH_MAX + 48], a[ADDR_STRLEN], at[32] = "";

	/* The UDP ones: SNI, TURN TCP and TLS and the ops plane are TCP. */
	if (strcmp(l->what, "game relay") != 0 && strcmp(l->what, "PRBE echo port") != 0 &&
	    strcmp(l->what, "TURN listener") != 0 && strcmp(l->what, "WireGuard port") != 0)
		return;
	if (l->line)
		snprintf(at, sizeof(at), " (line %u)", l->line);
	for (unsigned i = 0; i < x->c->nrelays; i++) {
		const struct relay_conf *r = &x->c->relays[i];

		if (!r->port_min || port < r->port_min || port > r->port_max)
			continue;
		conf_err(x->e, "%s: relay %s: session-ports %u-%u hold port %u of the %s%s%s %s%s",
			 conf_key_origin(x->c, r, "session-ports", NULL, "etrelay", where,
					 sizeof(where)),
			 r->name, r->port_min, r->port_max, port, l->what, l->name[0] ? " " : "",
			 l->name, addr_str(&l->addr->sa, a), at);
	}
}

void conf_session_ports_clash(struct etr_conf *c, struct conf_errors *e)
{
	struct session_clash x = {c, e};

	/* (A TURN listener's relayed ports against them: turn_ports_clash.) */
	conf_each_listen(c, session_port_clash, &x);
}
