/* SPDX-License-Identifier: ISC */
/* The TURN listener's keys: a [turn NAME] section's, and the same with
 * turn- in front (--turn-KEY, or at the file's top level) for the
 * quick-start listener; the checks every TURN listener must pass. */
#include "turn_conf.h"

#include <stdio.h>
#include <string.h>

void conf_turn_defaults(struct turn_conf *t)
{
	memset(t, 0, sizeof(*t));
	t->tls_reload_ms = CONF_TURN_TLS_RELOAD;
	snprintf(t->realm, sizeof(t->realm), "%s", CONF_TURN_REALM);
	t->port_min = CONF_TURN_PORT_MIN;
	t->port_max = CONF_TURN_PORT_MAX;
	t->max_allocations = CONF_TURN_MAX_ALLOCATIONS;
	t->user_quota = CONF_TURN_USER_QUOTA;
	t->unauth_rate = CONF_TURN_UNAUTH_RATE;
	t->unauth_burst = CONF_TURN_UNAUTH_BURST;
	t->unauth_ip_rate = CONF_TURN_UNAUTH_IP_RATE;
	t->unauth_ip_burst = CONF_TURN_UNAUTH_IP_BURST;
	t->tls_rate = CONF_TURN_TLS_RATE;
	t->tls_burst = CONF_TURN_TLS_BURST;
	t->tls_ip_rate = CONF_TURN_TLS_IP_RATE;
	t->tls_ip_burst = CONF_TURN_TLS_IP_BURST;
	t->authf_rate = CONF_TURN_AUTH_FAIL_RATE;
	t->authf_burst = CONF_TURN_AUTH_FAIL_BURST;
	t->authf_ip_rate = CONF_TURN_AUTH_FAIL_IP_RATE;
	t->authf_ip_burst = CONF_TURN_AUTH_FAIL_IP_BURST;
	t->tcp_max_per_ip = CONF_TURN_TCP_MAX_PER_IP;
	t->tcp_max_conns = CONF_TURN_TCP_MAX_CONNECTIONS;
	t->tcp_auth_timeout_ms = CONF_TURN_TCP_AUTH_TIMEOUT;
	t->max_lifetime_ms = CONF_TURN_MAX_LIFETIME;
	t->nonce_lifetime_ms = CONF_TURN_NONCE_LIFETIME;
}

/* A TURN listen address: ADDR:PORT, or ADDR alone for port 3478. */
static int turn_listen_parse(const char *v, union etr_sockaddr *a)
{
	char buf[80];

	if (addr_parse_numeric(v, a) == 0)
		return 0;
	if (conf_parse_ip(v, a) < 0)
		return -1;
	snprintf(buf, sizeof(buf), strchr(v, ':') ? "[%s]:%d" : "%s:%d", v, CONF_TURN_PORT);
	return addr_parse_numeric(buf, a);
}

/* The values of a [turn NAME] section's keys (and of --turn-KEY) that are
 * more than a number or a duration. Each returns NULL, or why v is wrong
 * (a constant, or x->buf). */
static const char turn_addr_why[] = "expected IP:PORT, [IPv6]:PORT, or an address alone for "
				    "port " CONF_STR(CONF_TURN_PORT);
static const char turn_port0_why[] = "port 0: expected a port from 1 to 65535";

/* ADDR:0 is one error, about its port. */
static bool port_zero(const char *v)
{
	size_t vlen = strlen(v);

	return vlen > 2 && strcmp(v + vlen - 2, ":0") == 0;
}

/* listen: ADDR:0 counts as given (port 0, which turn_finish passes over)
 * so that "listen: missing" and its consequences do not follow. */
static const char *tk_listen(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct turn_conf *t = x->obj;

	if (turn_listen_parse(v, &t->listen) < 0) {
		if (!port_zero(v))
			return turn_addr_why;
		memset(&t->listen, 0, sizeof(t->listen));
		t->listen_set = true;
		return turn_port0_why;
	}
	t->listen_set = true;
	return NULL;
}

static const char *tk_tcp_listen(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct turn_conf *t = x->obj;

	if (turn_listen_parse(v, &t->tcp_listen) < 0)
		return port_zero(v) ? turn_port0_why : turn_addr_why;
	t->tcp_set = true;
	return NULL;
}

static const char *tk_tls_listen(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct turn_conf *t = x->obj;

	if (turn_listen_parse(v, &t->tls_listen) < 0)
		return port_zero(v) ? turn_port0_why : turn_addr_why;
	t->tls_set = true;
	return NULL;
}

static const char *tk_tls_reload(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct turn_conf *t = x->obj;

	if (conf_parse_duration(v, &t->tls_reload_ms, false) < 0)
		return "expected a duration above 0 such as 60s or 5m";
	t->tls_reload_set = true;
	return NULL;
}

static const char *tk_realm(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct turn_conf *t = x->obj;
	size_t len = strlen(v);

	if (len == 0 || len >= CONF_TURN_REALM_MAX)
		return "expected 1 to " CONF_STR(CONF_TURN_REALM_MAX) " characters less one";
	for (const char *p = v; *p; p++)
		if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\')
			return "expected printable ASCII without '\"' or '\\'";
	strcpy(t->realm, v);
	return NULL;
}

static const char *tk_relay_address(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct turn_conf *t = x->obj;

	if (conf_parse_ip(v, &t->relay_addr) < 0)
		return "expected an IP address";
	t->relay_set = true;
	return NULL;
}

static const char *tk_public_ip(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct turn_conf *t = x->obj;

	if (conf_parse_ip(v, &t->public_ip) < 0)
		return "expected an IP address";
	/* Clients would be told to send to 0.0.0.0. */
	if (conf_ip_wildcard(&t->public_ip))
		return "expected the specific address clients reach, not 0.0.0.0 or ::";
	t->public_set = true;
	return NULL;
}

static const char *tk_ports(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct turn_conf *t = x->obj;
	const char *why =
	    conf_parse_ports(v, &t->port_min, &t->port_max, "expected MIN-MAX such as 49152-65535");

	if (!why)
		t->ports_set = true;
	return why;
}

/* allow-peer, deny-peer: a block, repeatable. Only a section's allow-peer
 * keeps its line (conf_turn_warnings names it). */
static const char *tk_peer(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct turn_conf *t = x->obj;
	bool allow = strcmp(k->name, "allow-peer") == 0;
	struct conf_cidr *list = allow ? t->allow : t->deny;
	unsigned *cnt = allow ? &t->nallow : &t->ndeny;

	if (*cnt == CONF_TURN_PEERS_MAX)
		return "too many blocks (at most " CONF_STR(CONF_TURN_PEERS_MAX) ")";
	if (conf_cidr_parse(v, &list[*cnt]) < 0)
		return "expected an address or a CIDR block such as 10.0.0.0/8";
	if (conf_cidr_host_bits(&list[*cnt], x->buf, x->n))
		return x->buf;
	list[*cnt].line = allow ? x->line : 0;
	(*cnt)++;
	return NULL;
}

/* A [turn NAME] section's keys, in the order an unknown key's message
 * lists them. */
#define TK(f) offsetof(struct turn_conf, f)
#define RATE(name, f)                                                                              \
	{                                                                                          \
		name, conf_set_u32, 0, TK(f), 1, 1000000                                           \
	}
static const struct conf_key turn_keys[] = {
    {"listen", tk_listen},
    {"tcp-listen", tk_tcp_listen},
    {"tls-listen", tk_tls_listen},
    {"tls-cert", conf_set_path, 0, TK(tls_cert), .line_off = TK(tls_cert_line)},
    {"tls-key", conf_set_path, 0, TK(tls_key), .line_off = TK(tls_key_line)},
    {"tls-reload-interval", tk_tls_reload, .line_off = TK(tls_reload_line)},
    {"realm", tk_realm},
    {"relay-address", tk_relay_address},
    {"public-ip", tk_public_ip},
    {"ports", tk_ports, .line_off = TK(ports_line)},
    {"max-allocations", conf_set_u32, 0, TK(max_allocations), 1, 65536,
     .line_off = TK(max_allocations_line)},
    {"user-quota", conf_set_u32, 0, TK(user_quota), 1, 65536},
    RATE("unauth-rate", unauth_rate),
    RATE("unauth-burst", unauth_burst),
    RATE("unauth-ip-rate", unauth_ip_rate),
    RATE("unauth-ip-burst", unauth_ip_burst),
    RATE("tls-handshake-rate", tls_rate),
    RATE("tls-handshake-burst", tls_burst),
    RATE("tls-handshake-ip-rate", tls_ip_rate),
    RATE("tls-handshake-ip-burst", tls_ip_burst),
    RATE("auth-fail-rate", authf_rate),
    RATE("auth-fail-burst", authf_burst),
    RATE("auth-fail-ip-rate", authf_ip_rate),
    RATE("auth-fail-ip-burst", authf_ip_burst),
    {"tcp-max-per-ip", conf_set_u32, 0, TK(tcp_max_per_ip), 1, 65536},
    {"tcp-max-connections", conf_set_u32, 0, TK(tcp_max_conns), 1,
     CONF_TURN_TCP_MAX_CONNECTIONS_MAX},
    {"tcp-auth-timeout", conf_set_duration, 0, TK(tcp_auth_timeout_ms), 100, 30000,
     "expected a duration from 100ms to 30s such as 10s"},
    {"max-lifetime", conf_set_duration, 0, TK(max_lifetime_ms), 1000, 86400 * 1000ull,
     "expected a duration from 1s to 24h such as 3600 or 1h"},
    {"nonce-lifetime", conf_set_duration, 0, TK(nonce_lifetime_ms), 1000, 86400 * 1000ull,
     "expected a duration from 1s to 24h such as 600 or 10m"},
    {"allow-peer", tk_peer},
    {"deny-peer", tk_peer},
    {"strict-expiry", conf_set_bool, 0, TK(strict_expiry)},
};

static void turn_init(void *obj)
{
	conf_turn_defaults(obj);
}

static struct turn_conf turn_discard; /* 8 KiB of paths: not on the stack */

static const struct conf_section turn_section = {
    .name = "turn",
    .article = "a",
    .many = "turn listeners",
    .keys = turn_keys,
    .nkeys = sizeof(turn_keys) / sizeof(turn_keys[0]),
    .array = offsetof(struct etr_conf, turn),
    .count = offsetof(struct etr_conf, nturn),
    .size = sizeof(struct turn_conf),
    .max = CONF_TURN_MAX,
    .name_off = offsetof(struct turn_conf, name),
    .line_off = offsetof(struct turn_conf, line),
    .init = turn_init,
    .discard = &turn_discard,
};

/* turn-KEY: KEY of the quick-start TURN listener (no line kept: the
 * command line's, or the top level's, are named by their key). */
static const char *set_turn(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	const struct conf_key *tk = conf_section_key(&turn_section, k->name + 5);
	struct conf_ctx q = *x;

	x->c->turn_cli_set = true;
	q.obj = &x->c->turn_cli;
	q.line = 0;
	return tk->set(&q, tk, v);
}

static const struct conf_key turn_top_keys[] = {
    {"turn-listen", set_turn, CONF_LISTENER},
    {"turn-tcp-listen", set_turn},
    {"turn-tls-listen", set_turn},
    {"turn-tls-cert", set_turn},
    {"turn-tls-key", set_turn},
    {"turn-tls-reload-interval", set_turn},
    {"turn-realm", set_turn},
    {"turn-relay-address", set_turn},
    {"turn-public-ip", set_turn},
    {"turn-ports", set_turn},
    {"turn-max-allocations", set_turn},
    {"turn-user-quota", set_turn},
    {"turn-unauth-rate", set_turn},
    {"turn-unauth-burst", set_turn},
    {"turn-unauth-ip-rate", set_turn},
    {"turn-unauth-ip-burst", set_turn},
    {"turn-tls-handshake-rate", set_turn},
    {"turn-tls-handshake-burst", set_turn},
    {"turn-tls-handshake-ip-rate", set_turn},
    {"turn-tls-handshake-ip-burst", set_turn},
    {"turn-auth-fail-rate", set_turn},
    {"turn-auth-fail-burst", set_turn},
    {"turn-auth-fail-ip-rate", set_turn},
    {"turn-auth-fail-ip-burst", set_turn},
    {"turn-tcp-max-per-ip", set_turn},
    {"turn-tcp-max-connections", set_turn},
    {"turn-tcp-auth-timeout", set_turn},
    {"turn-max-lifetime", set_turn},
    {"turn-nonce-lifetime", set_turn},
    {"turn-allow-peer", set_turn},
    {"turn-deny-peer", set_turn},
    {"turn-strict-expiry", set_turn},
};
_Static_assert(sizeof(turn_top_keys) / sizeof(turn_top_keys[0]) ==
		   sizeof(turn_keys) / sizeof(turn_keys[0]),
	       "a turn-KEY for every KEY of [turn]");

static void turn_defaults(struct etr_conf *c)
{
	conf_turn_defaults(&c->turn_cli);
	snprintf(c->turn_cli.name, sizeof(c->turn_cli.name), "%s", CONF_TURN_QUICK_NAME);
}

static bool turn_listens(const struct etr_conf *c)
{
	return c->nturn > 0 || c->turn_cli.listen_set;
}

const struct conf_part turn_conf_part = {
    .keys = turn_top_keys,
    .nkeys = sizeof(turn_top_keys) / sizeof(turn_top_keys[0]),
    .section = &turn_section,
    .defaults = turn_defaults,
    .listens = turn_listens,
};

/* More allocations than relayed ports: said at the line of the later of
 * the two keys (a file's), and whether max-allocations is the default. */
static void turn_alloc_over_ports(const struct etr_conf *c, const struct turn_conf *t,
				  unsigned width, struct conf_errors *e)
{
	unsigned line =
	    t->max_allocations_line > t->ports_line ? t->max_allocations_line : t->ports_line;
	bool dflt = !t->max_allocations_line && t->max_allocations == CONF_TURN_MAX_ALLOCATIONS;
	char where[CONF_PATH_MAX + CONF_NAME_MAX + 32];

	if (t->line)
		snprintf(where, sizeof(where), "%s:%u: turn %s", conf_path(c),
			 line ? line : t->line, t->name);
	else
		snprintf(where, sizeof(where), "etrelay: turn %s", t->name);
	conf_err(e,
		 "%s: max-allocations %u%s is more than the %u ports of ports %u-%u: widen "
		 "ports or lower max-allocations",
		 where, t->max_allocations, dflt ? " (the default)" : "", width, t->port_min,
		 t->port_max);
}

/* tls-cert, tls-key or tls-reload-interval without tls-listen: nothing
 * would load (or reload) the pair (a start would not read it, -t would not
 * check it), so it is not what the operator meant. Named with the key's own
 * line. */
static void turn_tls_unused(const struct etr_conf *c, const struct turn_conf *t,
			    struct conf_errors *e)
{
	const char *key[3] = {"tls-cert", "tls-key", "tls-reload-interval"};
	const unsigned line[3] = {t->tls_cert_line, t->tls_key_line, t->tls_reload_line};
	const bool given[3] = {t->tls_cert[0] != '\0', t->tls_key[0] != '\0', t->tls_reload_set};
	char o[CONF_PATH_MAX + 32];

	for (unsigned k = 0; k < 3; k++)
		if (given[k])
			conf_err(e,
				 "%s: turn %s: %s: given without tls-listen (add tls-listen "
				 "ADDR:PORT for TURN over TLS, or remove it)",
				 conf_line_where(c, line[k], o, sizeof(o)), t->name, key[k]);
}

void turn_conf_finish(struct etr_conf *c, struct conf_errors *e)
{
	struct turn_conf *q = &c->turn_cli;
	char where[CONF_NAME_MAX + 300], a[ADDR_STRLEN];

	if (c->turn_cli_set && !q->listen_set)
		conf_err(e, "etrelay: turn-*: no turn-listen ADDR:PORT for the TURN listener");
	if (c->turn_cli_set && q->listen_set) {
		bool taken = false;

		for (unsigned i = 0; i < c->nturn; i++)
			taken |= strcmp(c->turn[i].name, q->name) == 0;
		if (taken)
			conf_err(e,
				 "etrelay: turn-listen: the file has a [turn %s] already; "
				 "give the listener there",
				 q->name);
		else if (c->nturn == CONF_TURN_MAX)
			conf_err(e, "etrelay: turn-listen: too many turn listeners (at most %d)",
				 CONF_TURN_MAX);
		else
			c->turn[c->nturn++] = *q;
		c->turn_cli_set = false;
	}
	for (unsigned i = 0; i < c->nturn; i++) {
		struct turn_conf *t = &c->turn[i];
		unsigned width;

		if (t->line)
			snprintf(where, sizeof(where), "%s:%u: turn %s", conf_path(c), t->line,
				 t->name);
		else
			snprintf(where, sizeof(where), "etrelay: turn %s", t->name);
		if (!t->listen_set) {
			conf_err(e, "%s: listen: missing (the UDP ADDR:PORT to listen on)", where);
			continue;
		}
		if (conf_port_of(&t->listen) == 0)
			continue; /* given, wrong, and said so */
		if (!t->relay_set && !conf_ip_wildcard(&t->listen)) {
			t->relay_addr = t->listen;
			t->relay_addr.in.sin_port = 0; /* the same offset in both */
			t->relay_set = true;
		}
		if (!t->relay_set)
			conf_err(e,
				 "%s: relay-address: missing (listen %s is a wildcard; give the "
				 "address relayed sockets bind to)",
				 where, addr_str(&t->listen.sa, a));
		else if (t->relay_addr.sa.sa_family != AF_INET || conf_ip_wildcard(&t->relay_addr))
			conf_err(e,
				 "%s: relay-address %s: expected a specific IPv4 address (IPv6 "
				 "relayed addresses are not supported)",
				 where, addr_str(&t->relay_addr.sa, a));
		if (!t->public_set)
			t->public_ip = t->relay_addr;
		width = (unsigned)t->port_max - t->port_min + 1;
		if (t->max_allocations > width)
			turn_alloc_over_ports(c, t, width, e);
		if (t->tls_set && (!t->tls_cert[0] || !t->tls_key[0]))
			conf_err(e, "%s: tls-listen: needs tls-cert and tls-key", where);
		if (!t->tls_set)
			turn_tls_unused(c, t, e);
		conf_turn_clash(c, i, where, e);
	}
}

unsigned conf_turn_warnings(const struct etr_conf *c, struct conf_errors *w)
{
	unsigned before = w->count;

	for (unsigned i = 0; i < c->nturn; i++)
		for (unsigned j = 0; j < c->turn[i].nallow; j++) {
			const struct conf_cidr *b = &c->turn[i].allow[j];
			bool v4 = b->addr.sa.sa_family == AF_INET;
			char where[CONF_PATH_MAX + 32];

			if (b->bits != 0)
				continue;
			if (b->line)
				snprintf(where, sizeof(where), "%s:%u", conf_path(c), b->line);
			else
				snprintf(where, sizeof(where), "etrelay: --turn-allow-peer");
			conf_err(w,
				 "%s: warning: turn %s: allow-peer %s/0 lets clients relay to "
				 "every refused address (loopback, private networks, this host)",
				 where, c->turn[i].name, v4 ? "0.0.0.0" : "::");
		}
	return w->count - before;
}
