/* SPDX-License-Identifier: ISC */
/* The SNI listener's keys: an [sni NAME] section's, and --sni-listen and
 * --sni-route (or the same keys at the file's top level) for the
 * quick-start listener; the checks every SNI listener must pass. */
#include "sni_conf.h"

#include <stdio.h>
#include <string.h>

_Static_assert(CONF_SNI_NAME_MAX == ADDR_NAME_MAX, "route names");

void conf_sni_defaults(struct sni_conf *s)
{
	memset(s, 0, sizeof(*s));
	s->preread_timeout_ms = CONF_SNI_PREREAD_TIMEOUT;
	s->connect_timeout_ms = CONF_SNI_CONNECT_TIMEOUT;
	s->idle_timeout_ms = CONF_SNI_IDLE_TIMEOUT;
	s->send_timeout_ms = CONF_SNI_SEND_TIMEOUT;
	s->max_connections = CONF_SNI_MAX_CONNECTIONS;
	s->max_per_ip = CONF_SNI_MAX_PER_IP;
	s->max_preread = CONF_SNI_MAX_PREREAD;
}

const char *conf_sni_route_parse(const char *v, char sep, struct sni_route_conf *r)
{
	const char *e = strchr(v, sep), *opt;
	char hp[ADDR_HOSTLEN + 8];
	size_t n;

	memset(r, 0, sizeof(*r));
	if (sep == ' ' && !e)
		e = strchr(v, '\t');
	if (!e || e == v)
		return sep == '=' ? "expected NAME=HOST:PORT[,proxy-v2]"
				  : "expected NAME HOST:PORT [proxy-v2]";
	n = (size_t)(e - v);
	if (n > CONF_SNI_NAME_MAX)
		return "route name too long";
	memcpy(r->name, v, n);
	r->name[n] = '\0';
	for (char *p = r->name; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	if (!addr_host_pattern_valid(r->name))
		return "route name: expected a host name or *.suffix (letters, digits, '-', "
		       "dots)";
	v = e + 1;
	while (sep == ' ' && (*v == ' ' || *v == '\t'))
		v++;
	opt = v + strcspn(v, sep == '=' ? "," : " \t");
	n = (size_t)(opt - v);
	if (n == 0 || n >= sizeof(hp))
		return "expected HOST:PORT after the name";
	memcpy(hp, v, n);
	hp[n] = '\0';
	if (addr_split(hp, r->host, &r->port, -1) < 0 || r->port == 0)
		return "expected HOST:PORT after the name";
	while (*opt == ',' || *opt == ' ' || *opt == '\t')
		opt++;
	if (*opt == '\0')
		return NULL;
	if (strcmp(opt, "proxy-v2") != 0)
		return "the only route option is proxy-v2";
	r->proxy_v2 = true;
	return NULL;
}

/* Add route r to listener s unless its name is there already. */
static const char *sni_add_route(struct sni_conf *s, const struct sni_route_conf *r, char *buf,
				 size_t n)
{
	for (unsigned i = 0; i < s->nroutes; i++)
		if (strcmp(s->routes[i].name, r->name) == 0) {
			if (s->routes[i].line)
				snprintf(buf, n, "route %s already given at line %u", r->name,
					 s->routes[i].line);
			else
				snprintf(buf, n, "route %s given twice", r->name);
			return buf;
		}
	if (s->nroutes == CONF_SNI_ROUTES_MAX)
		return "too many routes (at most " CONF_STR(CONF_SNI_ROUTES_MAX) ")";
	s->routes[s->nroutes++] = *r;
	return NULL;
}

static const char *sk_listen(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct sni_conf *s = x->obj;

	if (addr_parse_numeric(v, &s->listen) < 0)
		return "expected IP:PORT or [IPv6]:PORT";
	s->listen_set = true;
	return NULL;
}

static const char *sk_route(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct sni_route_conf r;
	const char *why = conf_sni_route_parse(v, ' ', &r);

	r.line = x->line;
	if (!why)
		why = sni_add_route(x->obj, &r, x->buf, x->n);
	return why;
}

#define SK(field) offsetof(struct sni_conf, field)
#define DUR	  "expected a duration above 0 such as 10s or 500ms"
/* In the order an unknown key's message lists them. */
static const struct conf_key sni_keys[] = {
    {"listen", sk_listen},
    {"route", sk_route},
    {"preread-timeout", conf_set_duration, 0, SK(preread_timeout_ms), 0, 0, DUR},
    {"connect-timeout", conf_set_duration, 0, SK(connect_timeout_ms), 0, 0, DUR},
    {"idle-timeout", conf_set_duration, 0, SK(idle_timeout_ms), 0, 0, DUR},
    {"send-timeout", conf_set_duration, 0, SK(send_timeout_ms), 0, 0, DUR},
    {"max-connections", conf_set_u32, 0, SK(max_connections), 1, CONF_SNI_CONNECTIONS_LIMIT},
    {"max-connections-per-ip", conf_set_u32, 0, SK(max_per_ip), 1, CONF_SNI_CONNECTIONS_LIMIT},
    {"max-preread", conf_set_u32, 0, SK(max_preread), 1, CONF_SNI_CONNECTIONS_LIMIT},
    {"splice", conf_set_bool, 0, SK(splice)},
    {"max-spliced", conf_set_u32, 0, SK(max_spliced), 1, CONF_SNI_CONNECTIONS_LIMIT,
     .line_off = SK(max_spliced_line)},
};

static void sni_init(void *obj)
{
	conf_sni_defaults(obj);
}

static struct sni_conf sni_discard; /* 33 KiB of routes: not on the stack */

static const struct conf_section sni_section = {
    .name = "sni",
    .article = "an",
    .many = "sni listeners",
    .keys = sni_keys,
    .nkeys = sizeof(sni_keys) / sizeof(sni_keys[0]),
    .array = offsetof(struct etr_conf, sni),
    .count = offsetof(struct etr_conf, nsni),
    .size = sizeof(struct sni_conf),
    .max = CONF_SNI_MAX,
    .name_off = offsetof(struct sni_conf, name),
    .line_off = offsetof(struct sni_conf, line),
    .init = sni_init,
    .discard = &sni_discard,
};

/* sni-listen, sni-route: the quick-start listener's. */
static const char *set_sni_listen(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct sni_conf *s = &x->c->sni_cli;

	if (addr_parse_numeric(v, &s->listen) < 0)
		return "expected IP:PORT or [IPv6]:PORT";
	s->listen_set = true;
	return NULL;
}

static const char *set_sni_route(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct sni_conf *s = &x->c->sni_cli;
	struct sni_route_conf rc;
	const char *why = conf_sni_route_parse(v, '=', &rc);

	if (why)
		return why;
	if (s->nroutes == CONF_SNI_ROUTES_MAX)
		return "too many routes (at most " CONF_STR(CONF_SNI_ROUTES_MAX) ")";
	rc.line = x->line;
	s->routes[s->nroutes++] = rc;
	return NULL;
}

static const struct conf_key sni_top_keys[] = {
    {"sni-listen", set_sni_listen, CONF_LISTENER},
    {"sni-route", set_sni_route},
};

static void sni_defaults(struct etr_conf *c)
{
	conf_sni_defaults(&c->sni_cli);
	snprintf(c->sni_cli.name, sizeof(c->sni_cli.name), "%s", CONF_SNI_QUICK_NAME);
}

static bool sni_listens(const struct etr_conf *c)
{
	return c->nsni > 0 || c->sni_cli.listen_set;
}

const struct conf_part sni_conf_part = {
    .keys = sni_top_keys,
    .nkeys = sizeof(sni_top_keys) / sizeof(sni_top_keys[0]),
    .section = &sni_section,
    .defaults = sni_defaults,
    .listens = sni_listens,
};

void sni_conf_finish(struct etr_conf *c, struct conf_errors *e)
{
	struct sni_conf *q = &c->sni_cli;
	char where[CONF_NAME_MAX + 300];

	if (q->nroutes && !q->listen_set)
		conf_err(e, "%s: sni-route %s: no sni-listen ADDR:PORT to route from",
			 conf_line_where(c, q->routes[0].line, where, sizeof(where)),
			 q->routes[0].name);
	if (q->listen_set) {
		bool taken = false;

		for (unsigned i = 0; i < c->nsni; i++)
			taken |= strcmp(c->sni[i].name, q->name) == 0;
		if (taken)
			conf_err(e,
				 "etrelay: sni-listen: the file has an [sni %s] already; "
				 "give the listener there",
				 q->name);
		else if (c->nsni == CONF_SNI_MAX)
			conf_err(e, "etrelay: sni-listen: too many sni listeners (at most %d)",
				 CONF_SNI_MAX);
		else
			c->sni[c->nsni++] = *q;
		q->listen_set = false;
		q->nroutes = 0;
	}
	for (unsigned i = 0; i < c->nsni; i++) {
		struct sni_conf *s = &c->sni[i];

		if (s->line)
			snprintf(where, sizeof(where), "%s:%u: sni %s", conf_path(c), s->line,
				 s->name);
		else
			snprintf(where, sizeof(where), "etrelay: sni %s", s->name);
		if (!s->listen_set)
			conf_err(e, "%s: listen: missing (the TCP ADDR:PORT to listen on)", where);
		for (unsigned r = 1; r < s->nroutes; r++)
			for (unsigned p = 0; p < r; p++)
				if (strcmp(s->routes[r].name, s->routes[p].name) == 0)
					conf_err(e, "%s: route %s given twice", where,
						 s->routes[r].name);
	}
}

unsigned conf_sni_warnings(const struct etr_conf *c, struct conf_errors *w)
{
	unsigned before = w->count;

	for (unsigned i = 0; i < c->nsni; i++) {
		const struct sni_conf *s = &c->sni[i];
		char where[CONF_PATH_MAX + 32];

		if (!s->max_spliced || s->splice)
			continue;
		if (s->max_spliced_line)
			snprintf(where, sizeof(where), "%s:%u", conf_path(c), s->max_spliced_line);
		else
			snprintf(where, sizeof(where), "etrelay");
		conf_err(w,
			 "%s: warning: sni %s: max-spliced %u without splice yes: no connection is "
			 "spliced, the setting does nothing",
			 where, s->name, s->max_spliced);
	}
	return w->count - before;
}
