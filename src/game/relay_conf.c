/* SPDX-License-Identifier: ISC */
/* The game relay's keys (per relay: the top level's are every [relay
 * NAME]'s defaults), the games' tags and masters, and a relay's checks. */
#include "relay_conf.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "addrclass.h"

/* Each game's tags and the masters its own servers heartbeat by default
 * (ET's; iortcw's; ioquake3's and OpenArena's; DarkPlaces'), all on
 * port CONF_MASTER_PORT. */
static const struct {
	const char *name, *short_name, *heartbeat, *flatline;
	const char *masters[2];
} games[] = {
    {"et", "ET", "EnemyTerritory-1", "ETFlatline-1", {"etmaster.idsoftware.com", "etmaster.net"}},
    {"rtcw",
     "RTCW",
     "Wolfenstein-1",
     "WolfFlatline-1",
     {"wolfmaster.idsoftware.com", "wolfmaster.s4ndmod.com"}},
    {"q3", "Q3", "QuakeArena-1", "", {"master.ioquake3.org", "dpmaster.deathmask.net"}},
    {"dp", "DP", "DarkPlaces", "", {"dpmaster.deathmask.net", "dpmaster.tchr.no"}},
};
#define NGAMES (sizeof(games) / sizeof(games[0]))

void conf_relay_defaults(struct relay_conf *r)
{
	memset(r, 0, sizeof(*r));
	strcpy(r->name, "default");
	addr_parse_numeric(CONF_DEFAULT_LISTEN, &r->listen);
	/* The masters come from the game at relay_finish, unless given. */
	strcpy(r->game, "ET");
	r->heartbeat_interval_ms = CONF_HEARTBEAT_INTERVAL;
	r->session_timeout_ms = CONF_SESSION_TIMEOUT;
	r->probe_timeout_ms = CONF_PROBE_TIMEOUT;
	r->max_sessions = CONF_MAX_SESSIONS;
	r->sessions_per_ip = CONF_SESSIONS_PER_IP;
	r->unassured_timeout_ms = CONF_UNASSURED_TIMEOUT;
	r->ip_session_rate = CONF_IP_SESSION_RATE;
	r->session_rate = CONF_SESSION_RATE;
	r->master_queries = CONF_MASTER_QUERIES;
	r->ip_query_burst = CONF_IP_QUERY_BURST;
	r->ip_query_rate = CONF_IP_QUERY_RATE;
	r->server_query_burst = CONF_SERVER_QUERY_BURST;
	r->server_query_rate = CONF_SERVER_QUERY_RATE;
	r->query_cache_ms = CONF_QUERY_CACHE;
	r->query_cache_stale_ms = CONF_QUERY_CACHE_STALE;
	r->query_cache_rate = CONF_QUERY_CACHE_RATE;
	r->query_cache_bytes = CONF_QUERY_CACHE_BYTES;
	r->query_cache_max_reply = CONF_QUERY_CACHE_MAX_REPLY;
}

static void relay_defaults(struct etr_conf *c)
{
	conf_relay_defaults(&c->base);
}

/* A tag goes into "heartbeat <tag>\n": printable, no spaces or backslashes.
 * TAG_LEN_MAX spells CONF_TAG_MAX - 1 for the message. */
#define TAG_LEN_MAX 63
_Static_assert(TAG_LEN_MAX == CONF_TAG_MAX - 1, "the tag's length in the message");
static bool valid_tag(const char *s, bool may_be_empty)
{
	size_t n = strlen(s);

	if ((n == 0 && !may_be_empty) || n >= CONF_TAG_MAX)
		return false;
	for (; *s; s++)
		if (*s <= 0x20 || *s >= 0x7f || *s == '\\' || *s == '"')
			return false;
	return true;
}

static const char *set_listen(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	return addr_parse_numeric(v, &x->r->listen) < 0 ? "expected IP:PORT or [IPv6]:PORT" : NULL;
}

static const char *set_upstream(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct relay_conf *r = x->r;

	return addr_split(v, r->upstream_host, &r->upstream_port, -1) < 0 ? "expected HOST:PORT"
									  : NULL;
}

/* Repeatable: the first of a layer replaces the list it inherited. */
static const char *set_master(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct relay_conf *r = x->r;
	struct conf_master m;

	if (addr_split(v, m.host, &m.port, CONF_MASTER_PORT) < 0)
		return "expected HOST or HOST:PORT";
	if (conf_first(x))
		r->nmasters = 0;
	r->masters_set = true;
	if (r->nmasters == CONF_MASTERS_MAX)
		return "too many masters (at most " CONF_STR(CONF_MASTERS_MAX) ")";
	m.line = x->line;
	r->masters[r->nmasters++] = m;
	return NULL;
}

static const char *set_game(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	for (size_t i = 0; i < NGAMES; i++) {
		if (strcmp(v, games[i].name) == 0) {
			strcpy(x->r->game, games[i].short_name);
			return NULL;
		}
	}
	return "expected et, rtcw, q3 or dp";
}

static const char *set_tag(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	static const char why[] = "expected a tag of at most " CONF_STR(
	    TAG_LEN_MAX) " printable characters, without spaces, backslashes or double quotes";
	struct relay_conf *r = x->r;
	bool flat = k->off == offsetof(struct relay_conf, flatline);

	if (!valid_tag(v, flat))
		return why;
	strcpy((char *)r + k->off, v);
	if (flat)
		r->flatline_set = true;
	else
		r->heartbeat_set = true;
	return NULL;
}

static const char *set_ports(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	return conf_parse_ports(v, &x->r->port_min, &x->r->port_max,
				"expected MIN-MAX such as 40000-44999");
}

#define RK(field) offsetof(struct relay_conf, field)
#define DUR	  "expected a duration above 0 such as 30s, 500ms or 5m"
#define COUNT(name, field)                                                                         \
	{                                                                                          \
		name, conf_set_u32, CONF_RELAY, RK(field), 1, 100000                               \
	}
#define DURATION(name, field)                                                                      \
	{                                                                                          \
		name, conf_set_duration, CONF_RELAY, RK(field), 0, 0, DUR                          \
	}
static const struct conf_key relay_keys[] = {
    {"listen", set_listen, CONF_RELAY},
    {"upstream", set_upstream, CONF_RELAY | CONF_UPSTREAM},
    {"master", set_master, CONF_RELAY},
    {"game", set_game, CONF_RELAY},
    {"heartbeat", set_tag, CONF_RELAY, RK(heartbeat)},
    {"flatline", set_tag, CONF_RELAY | CONF_EMPTY, RK(flatline)},
    DURATION("heartbeat-interval", heartbeat_interval_ms),
    DURATION("probe-timeout", probe_timeout_ms),
    DURATION("session-timeout", session_timeout_ms),
    COUNT("max-sessions", max_sessions),
    {"session-ports", set_ports, CONF_RELAY},
    COUNT("sessions-per-ip", sessions_per_ip),
    DURATION("unassured-timeout", unassured_timeout_ms),
    COUNT("ip-session-rate", ip_session_rate),
    COUNT("session-rate", session_rate),
    COUNT("master-queries", master_queries),
    COUNT("ip-query-burst", ip_query_burst),
    COUNT("ip-query-rate", ip_query_rate),
    COUNT("server-query-burst", server_query_burst),
    COUNT("server-query-rate", server_query_rate),
    {"query-cache", conf_set_duration, CONF_RELAY | CONF_ZERO, RK(query_cache_ms), 0, 0,
     "expected a duration such as 1s or 500ms, 0 for no cache"},
    {"query-cache-stale", conf_set_duration, CONF_RELAY | CONF_ZERO, RK(query_cache_stale_ms), 0,
     60000, "expected a duration from 0 to 60s such as 5s"},
    COUNT("query-cache-rate", query_cache_rate),
    {"query-cache-bytes", conf_set_bytes, CONF_RELAY, RK(query_cache_bytes), 1, 1ull << 30,
     "expected a number of bytes from 1 to 1024M, such as 256k"},
    {"query-cache-max-reply", conf_set_bytes, CONF_RELAY, RK(query_cache_max_reply), 64, 65535,
     "expected a number of bytes from 64 to 65535"},
};

const struct conf_part relay_conf_part = {
    .keys = relay_keys,
    .nkeys = sizeof(relay_keys) / sizeof(relay_keys[0]),
    .defaults = relay_defaults,
};

/* An address literal of a family the listener cannot send to: every
 * heartbeat would fail, so the configuration is refused. */
static void check_master_family(const struct etr_conf *c, const struct relay_conf *r,
				const struct conf_master *m, struct conf_errors *e)
{
	char hp[ADDR_HOSTLEN + 8], a[ADDR_STRLEN];
	union etr_sockaddr sa;
	int fam;

	addr_hostport(m->host, m->port, hp);
	if (addr_parse_numeric(hp, &sa) < 0)
		return; /* a name: resolved at run time, and by -t --probe */
	fam = conf_addr_family(&sa);
	if (conf_listener_reaches(&r->listen, false, fam))
		return;
	addr_str(&r->listen.sa, a);
	if (m->line)
		conf_err(e,
			 "%s:%u: master %s: an %s address; relay %s listens on %s, which "
			 "cannot reach it (listen on %s, or give an %s master)",
			 conf_path(c), m->line, hp, fam == AF_INET ? "IPv4" : "IPv6", r->name, a,
			 fam == AF_INET ? "0.0.0.0 or [::]" : "an IPv6 address",
			 conf_addr_family(&r->listen) == AF_INET ? "IPv4" : "IPv6");
	else
		conf_err(e,
			 "etrelay: --master %s: an %s address; relay %s listens on %s, which "
			 "cannot reach it (listen on %s, or give an %s master)",
			 hp, fam == AF_INET ? "IPv4" : "IPv6", r->name, a,
			 fam == AF_INET ? "0.0.0.0 or [::]" : "an IPv6 address",
			 conf_addr_family(&r->listen) == AF_INET ? "IPv4" : "IPv6");
}

/* A relay whose upstream is its own listen address (or, listening on a
 * wildcard, an address of this host on the same port: loopback, or one of
 * local[0..nlocal)) sends its players' packets to itself, and they get no
 * answer. up: the resolved upstream, or NULL for a numeric one (a name is
 * not checked then). Returns whether it loops (the error is added). */
static bool relay_loops(const struct etr_conf *c, const struct relay_conf *r,
			const union etr_sockaddr *up, const union etr_sockaddr *local,
			size_t nlocal, const char *where, struct conf_errors *e)
{
	union etr_sockaddr num;
	char hp[ADDR_HOSTLEN + 8], a[ADDR_STRLEN], o[CONF_NAME_MAX + 300];

	addr_hostport(r->upstream_host, r->upstream_port, hp);
	if (!up) {
		if (r->upstream_host[0] == '\0' || addr_parse_numeric(hp, &num) < 0)
			return false;
		up = &num;
	}
	if (addrclass_loops(up, &r->listen, local, nlocal)) {
		conf_err(e,
			 "%s: upstream %s (relay %s) is its own listen address %s: a loop, "
			 "players would get no answer",
			 conf_key_origin(c, r, "upstream", "listen", where, o, sizeof(o)), hp,
			 r->name, addr_str(&r->listen.sa, a));
		return true;
	}
	/* This process's other UDP listeners: a PRBE echo port, a TURN
	 * listener (attack13 F8: accepted, and the players' packets went to
	 * them instead of a game server). Another relay: relay_cycle. */
	for (unsigned i = 0; i < c->prbe.nlisten; i++)
		if (addrclass_loops(up, &c->prbe.listen[i], local, nlocal)) {
			conf_err(e,
				 "%s: upstream %s (relay %s) is this process's PRBE echo port "
				 "%s, not a game server",
				 conf_key_origin(c, r, "upstream", NULL, where, o, sizeof(o)), hp,
				 r->name, addr_str(&c->prbe.listen[i].sa, a));
			return true;
		}
	for (unsigned i = 0; i < c->nturn; i++)
		if (addrclass_loops(up, &c->turn[i].listen, local, nlocal)) {
			conf_err(e,
				 "%s: upstream %s (relay %s) is this process's TURN listener %s "
				 "%s, not a game server",
				 conf_key_origin(c, r, "upstream", NULL, where, o, sizeof(o)), hp,
				 r->name, c->turn[i].name, addr_str(&c->turn[i].listen.sa, a));
			return true;
		}
	return false;
}

/* Relay i's upstream: resolved (up), else numeric (in num), else NULL. */
static const union etr_sockaddr *relay_up(const struct etr_conf *c, unsigned i,
					  const union etr_sockaddr *up, union etr_sockaddr *num)
{
	char hp[ADDR_HOSTLEN + 8];

	if (up)
		return &up[i];
	if (c->relays[i].upstream_host[0] == '\0')
		return NULL;
	addr_hostport(c->relays[i].upstream_host, c->relays[i].upstream_port, hp);
	return addr_parse_numeric(hp, num) < 0 ? NULL : num;
}

/* Relays whose upstreams lead from one to the next and back (a to b, b to
 * a): each passes the other's datagrams and no game server gets one. A
 * chain that ends at a game server is left alone. */
static bool relay_cycle(const struct etr_conf *c, unsigned i, const union etr_sockaddr *up,
			const union etr_sockaddr *local, size_t nlocal, const char *where,
			struct conf_errors *e)
{
	union etr_sockaddr num;
	unsigned cur = i;
	char hp[ADDR_HOSTLEN + 8], o[CONF_NAME_MAX + 300];

	for (unsigned step = 0; step < c->nrelays; step++) {
		const union etr_sockaddr *u = relay_up(c, cur, up, &num);
		unsigned j;

		if (!u)
			return false;
		for (j = 0; j < c->nrelays; j++)
			if (j != cur && addrclass_loops(u, &c->relays[j].listen, local, nlocal))
				break;
		if (j == c->nrelays)
			return false;
		if (j == i) {
			const struct relay_conf *r = &c->relays[i];

			addr_hostport(r->upstream_host, r->upstream_port, hp);
			conf_err(e,
				 "%s: upstream %s (relay %s) leads through relay %s back to it: "
				 "a loop, the game server would get no datagram",
				 conf_key_origin(c, r, "upstream", "listen", where, o, sizeof(o)),
				 hp, r->name, c->relays[cur == i ? j : cur].name);
			return true;
		}
		cur = j;
	}
	return false;
}

int conf_relay_loops(const struct etr_conf *c, const union etr_sockaddr *up,
		     const union etr_sockaddr *local, size_t nlocal, struct conf_errors *e)
{
	int rc = 0;

	for (unsigned i = 0; i < c->nrelays; i++)
		if (relay_loops(c, &c->relays[i], up ? &up[i] : NULL, local, nlocal, "etrelay",
				e) ||
		    relay_cycle(c, i, up, local, nlocal, "etrelay", e))
			rc = -1;
	return rc;
}

/* Tags from the game unless given, and the checks a relay must pass. */
static void relay_finish(struct etr_conf *c, struct relay_conf *r, const char *where,
			 struct conf_errors *e)
{
	char o[CONF_NAME_MAX + 300];

	for (size_t i = 0; i < NGAMES; i++) {
		if (strcmp(r->game, games[i].short_name) != 0)
			continue;
		if (!r->heartbeat_set)
			strcpy(r->heartbeat, games[i].heartbeat);
		if (!r->flatline_set)
			strcpy(r->flatline, games[i].flatline);
		if (!r->masters_set) {
			for (unsigned m = 0; m < 2; m++) {
				strcpy(r->masters[m].host, games[i].masters[m]);
				r->masters[m].port = CONF_MASTER_PORT;
				r->masters[m].line = 0;
			}
			r->nmasters = 2;
		}
	}
	if (r->server_query_burst <= RELAY_RESERVE_MASTER + RELAY_RESERVE_PLAYER)
		conf_err(e,
			 "%s: server-query-burst %u (relay %s) must be above %u: that many tokens "
			 "are kept for a master and for players",
			 conf_key_origin(c, r, "server-query-burst", NULL, where, o, sizeof(o)),
			 r->server_query_burst, r->name,
			 RELAY_RESERVE_MASTER + RELAY_RESERVE_PLAYER);
	if (r->upstream_host[0] == '\0')
		conf_err(e, "%s: upstream: missing (the game server's HOST:PORT)", where);
	relay_loops(c, r, NULL, NULL, 0, where, e);
	for (unsigned i = 0; i < r->nmasters; i++)
		check_master_family(c, r, &r->masters[i], e);
	if (r->port_min && r->max_sessions > (uint32_t)(r->port_max - r->port_min + 1))
		conf_err(
		    e,
		    "%s: max-sessions %u (relay %s) is more than the %u ports of "
		    "session-ports %u-%u",
		    conf_key_origin(c, r, "max-sessions", "session-ports", where, o, sizeof(o)),
		    r->max_sessions, r->name, r->port_max - r->port_min + 1, r->port_min,
		    r->port_max);
}

void relay_conf_finish(struct etr_conf *c, struct conf_errors *e)
{
	char where[CONF_NAME_MAX + 300];

	for (unsigned i = 0; i < c->nrelays; i++) {
		struct relay_conf *r = &c->relays[i];

		if (r->line)
			snprintf(where, sizeof(where), "%s:%u: relay %s", conf_path(c), r->line,
				 r->name);
		else
			snprintf(where, sizeof(where), "etrelay");
		relay_finish(c, r, where, e);
		for (unsigned j = 0; j < i; j++) {
			const struct relay_conf *o = &c->relays[j];

			/* The same port on a wildcard and any address too: a
			 * start cannot bind both (attack13 F3: -t passed
			 * [::]:P beside 0.0.0.0:P, the start failed). */
			if (conf_listeners_overlap(&r->listen, &o->listen)) {
				char a[ADDR_STRLEN];

				conf_err(e, "%s: listen %s: already used by relay %s", where,
					 addr_str(&r->listen.sa, a), o->name);
			}
			if (r->port_min && o->port_min && r->port_min <= o->port_max &&
			    o->port_min <= r->port_max)
				conf_err(e, "%s: session-ports %u-%u overlap those of relay %s",
					 where, r->port_min, r->port_max, o->name);
		}
	}
}

/* The game whose default masters list host, or NULL. */
static const char *master_game(const char *host)
{
	for (size_t i = 0; i < NGAMES; i++)
		for (unsigned m = 0; m < 2; m++)
			if (strcasecmp(host, games[i].masters[m]) == 0)
				return games[i].short_name;
	return NULL;
}

unsigned conf_master_warnings(const struct etr_conf *c, struct conf_errors *w)
{
	unsigned before = w->count;

	for (unsigned i = 0; i < c->nrelays; i++) {
		const struct relay_conf *r = &c->relays[i];

		for (unsigned m = 0; m < r->nmasters; m++) {
			const char *g = master_game(r->masters[m].host);
			char where[CONF_PATH_MAX + 32];
			bool ours = false;

			for (size_t k = 0; k < NGAMES && g; k++)
				if (strcmp(games[k].short_name, r->game) == 0)
					for (unsigned j = 0; j < 2; j++)
						ours |= strcasecmp(r->masters[m].host,
								   games[k].masters[j]) == 0;
			if (!g || ours)
				continue;
			if (r->masters[m].line)
				snprintf(where, sizeof(where), "%s:%u", conf_path(c),
					 r->masters[m].line);
			else
				snprintf(where, sizeof(where), "etrelay: --master");
			conf_err(w,
				 "%s: warning: relay %s: master %s lists %s servers, not %s ones "
				 "(game %s): check game",
				 where, r->name, r->masters[m].host, g, r->game, r->game);
		}
	}
	return w->count - before;
}
