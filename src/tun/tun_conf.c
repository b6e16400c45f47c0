/* SPDX-License-Identifier: ISC */
/* The tunnel's keys: one [tunnel] section naming a WireGuard interface,
 * its UDP port, the relay's own tunnel address, and whether the relay
 * makes the interface (a kernel one) or finds it (wireguard-go's); and
 * --wg-KEY (or the same at the file's top level) for a quick start. */
#include "tun_conf.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "addrclass.h"
#include "tun_r3.h"

/* A wrong value of interface or address still counts as given: its
 * error names its line, and "missing" does not follow it (attack round
 * 15, F5). "KEY = VALUE" is a common slip: said so. */
static const char *tun_bad(bool *set, const char *v, const char *why, const char *eq)
{
	*set = true;
	return v[0] == '=' && eq ? eq : why;
}

static const char *tk_interface(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct tun_conf *t = x->obj;
	size_t len = strlen(v);

	(void)k;
	if (len == 0 || len >= CONF_TUN_IFNAME || strcmp(v, ".") == 0 || strcmp(v, "..") == 0 ||
	    strpbrk(v, "/: \t"))
		return tun_bad(&t->ifname_set, v,
			       "expected an interface name such as wg0 (at most 15 characters)",
			       "expected an interface name such as wg0: write the key, a space and "
			       "the value, without '='");
	memcpy(t->ifname, v, len + 1);
	t->ifname_set = true;
	return NULL;
}

static const char *tk_address(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct tun_conf *t = x->obj;
	union etr_sockaddr a;
	unsigned max;

	(void)k;
	if (!strchr(v, '/') || conf_cidr_parse(v, &t->address) < 0)
		return tun_bad(&t->address_set, v,
			       "expected the relay's address with its prefix, such as 10.8.0.1/24",
			       "expected the relay's address with its prefix, such as 10.8.0.1/24: "
			       "write the key, a space and the value, without '='");
	max = t->address.addr.sa.sa_family == AF_INET ? 32 : 128;
	if (t->address.bits == 0 || t->address.bits > max)
		return tun_bad(&t->address_set, v,
			       "expected a prefix from 1 to 32 (IPv4) or 128 (IPv6)", NULL);
	/* An interface given loopback would take routes from lo; multicast,
	 * broadcast and the unspecified address are no host's own. */
	a = t->address.addr;
	a.in.sin_port = htons(1); /* the check is of sources: port 0 is one */
	if (addrclass_bogon(&a, false))
		return tun_bad(
		    &t->address_set, v,
		    "expected an address a host can take as its own, not loopback, "
		    "multicast, broadcast, reserved or unspecified (such as 10.8.0.1/24)",
		    NULL);
	/* An IPv4 subnet's own address and its broadcast are no host's
	 * either (a /31 or /32 has no such addresses). */
	if (a.sa.sa_family == AF_INET && t->address.bits <= 30) {
		uint32_t host = ~0u >> t->address.bits, ip = ntohl(a.in.sin_addr.s_addr);

		if ((ip & host) == 0 || (ip & host) == host)
			return tun_bad(
			    &t->address_set, v,
			    "expected a host's address in its network, not the network's "
			    "own address or its broadcast (such as 10.8.0.1/24)",
			    NULL);
	}
	t->address_set = true;
	return NULL;
}

#define TK(field) offsetof(struct tun_conf, field)
static const struct conf_key tun_keys[] = {
    {"interface", tk_interface, .line_off = TK(ifname_line)},
    {"listen-port", conf_set_u32, 0, TK(listen_port), 1, 65535, "expected a port from 1 to 65535",
     .line_off = TK(port_line)},
    {"address", tk_address},
    {"create", conf_set_bool, 0, TK(create)},
    /* Rung 3's limits on each worker (the file's only: the quick-start
     * tunnel keeps the defaults). */
    {"rung3-max-connections", conf_set_u32, 0, TK(r3.conns), 1, TUN_R3_CONNS_MAX,
     "expected a number of connections per worker from 1 to " CONF_STR(TUN_R3_CONNS_MAX)},
    {"rung3-max-per-source", conf_set_u32, 0, TK(r3.per_source), 1, TUN_R3_CONNS_MAX,
     "expected a number of connections per source and worker from 1 to " CONF_STR(
	 TUN_R3_CONNS_MAX)},
    {"rung3-max-per-token", conf_set_u32, 0, TK(r3.per_token), 1, TUN_R3_CONNS_MAX,
     "expected a number of connections per token and worker from 1 to " CONF_STR(TUN_R3_CONNS_MAX)},
    {"rung3-max-message", conf_set_bytes, 0, TK(r3.max_msg), WS_MSG_MIN, WS_MSG_MAX,
     "expected a message size in bytes from " CONF_STR(WS_MSG_MIN) " to " CONF_STR(
	 WS_MSG_MAX) " (a WireGuard datagram: its MTU and 32)"},
    {"rung3-max-backlog", conf_set_bytes, 0, TK(r3.backlog), TUN_R3_BACKLOG_MIN, TUN_R3_BACKLOG,
     "expected bytes from 4k to 64k"},
    {"rung3-handshake-timeout", conf_set_duration, 0, TK(r3.handshake_ms), TUN_R3_UPGRADE_MS_MIN,
     TUN_R3_UPGRADE_MS_MAX, "expected a duration from 1s to 5m such as 10s"},
    {"rung3-idle-timeout", conf_set_duration, 0, TK(r3.idle_ms), TUN_R3_IDLE_MS_MIN,
     TUN_R3_IDLE_MS_MAX, "expected a duration from 10s to 24h such as 180s"},
    {"rung3-handshake-rate", conf_set_u32, 0, TK(r3.hs_rate), 1, TUN_R3_HS_MAX,
     "expected handshakes per second from 1 to " CONF_STR(TUN_R3_HS_MAX)},
    {"rung3-handshake-burst", conf_set_u32, 0, TK(r3.hs_burst), 1, TUN_R3_HS_MAX,
     "expected a number of handshakes from 1 to " CONF_STR(TUN_R3_HS_MAX)},
    {"rung3-handshake-ip-rate", conf_set_u32, 0, TK(r3.hs_ip_rate), 1, TUN_R3_HS_MAX,
     "expected handshakes per second and source from 1 to " CONF_STR(TUN_R3_HS_MAX)},
    {"rung3-handshake-ip-burst", conf_set_u32, 0, TK(r3.hs_ip_burst), 1, TUN_R3_HS_MAX,
     "expected a number of handshakes per source from 1 to " CONF_STR(TUN_R3_HS_MAX)},
};
/* The keys --wg-KEY also gives: the first TUN_QUICK_KEYS. */
#define TUN_QUICK_KEYS 4

static void tun_init(void *obj)
{
	struct tun_conf *t = obj;

	memset(t, 0, sizeof(*t));
	t->listen_port = CONF_TUN_PORT;
	tun_r3_limits_default(&t->r3);
}

static struct tun_conf tun_discard;

static const struct conf_section tun_section = {
    .name = "tunnel",
    .article = "a",
    .many = "tunnels",
    .keys = tun_keys,
    .nkeys = sizeof(tun_keys) / sizeof(tun_keys[0]),
    .array = offsetof(struct etr_conf, tunnel),
    .count = offsetof(struct etr_conf, ntunnel),
    .size = sizeof(struct tun_conf),
    .max = 1,
    .name_off = offsetof(struct tun_conf, name),
    .line_off = offsetof(struct tun_conf, line),
    .init = tun_init,
    .discard = &tun_discard,
    .bare = true,
};

/* wg-KEY: KEY of the quick-start tunnel (no line kept: the command
 * line's, or the top level's, are named by their key). */
static const char *set_wg(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	const struct conf_key *tk = conf_section_key(&tun_section, k->name + 3);
	struct conf_ctx q = *x;

	x->c->tunnel_cli_set = true;
	q.obj = &x->c->tunnel_cli;
	q.line = 0;
	return tk->set(&q, tk, v);
}

static const struct conf_key tun_top_keys[] = {
    {"wg-interface", set_wg, CONF_LISTENER},
    {"wg-listen-port", set_wg},
    {"wg-address", set_wg},
    {"wg-create", set_wg},
};
_Static_assert(sizeof(tun_top_keys) / sizeof(tun_top_keys[0]) == TUN_QUICK_KEYS,
	       "a wg-KEY for every quick-start KEY of [tunnel]");

static void tun_defaults(struct etr_conf *c)
{
	tun_init(&c->tunnel_cli);
}

static bool tun_listens(const struct etr_conf *c)
{
	return c->ntunnel > 0 || c->tunnel_cli_set;
}

const struct conf_part tun_conf_part = {
    .keys = tun_top_keys,
    .nkeys = sizeof(tun_top_keys) / sizeof(tun_top_keys[0]),
    .section = &tun_section,
    .defaults = tun_defaults,
    .listens = tun_listens,
};

/* WireGuard's port against a UDP listener of the process: the later
 * bind would fail. */
struct tun_clash {
	const struct tun_conf *t;
	const struct conf_listen *hit;
	struct conf_listen l;
};

static void tun_each(void *arg, const struct conf_listen *l)
{
	struct tun_clash *k = arg;

	if (k->hit || !l->addr || conf_port_of(l->addr) != k->t->listen_port)
		return;
	/* UDP listeners: a relay, an echo port, a TURN listener's UDP. */
	if (strcmp(l->key, "relay") == 0 || strcmp(l->key, "prbe-listen") == 0 ||
	    (strcmp(l->key, "turn") == 0 && strcmp(l->what, "TURN listener") == 0)) {
		k->l = *l;
		k->hit = &k->l;
	}
}

/* The quick-start tunnel (--wg-*) becomes the one tunnel, unless the file
 * has a [tunnel]: one interface per process, and two places for its keys
 * would leave an operator guessing which one holds. */
void tun_conf_take(struct etr_conf *c, struct conf_errors *e)
{
	if (!c->tunnel_cli_set)
		return;
	if (c->ntunnel)
		conf_err(e,
			 "etrelay: wg-*: the file has a [tunnel] already (%s:%u); give the "
			 "tunnel there",
			 conf_path(c), c->tunnel[0].line);
	else
		c->tunnel[c->ntunnel++] = c->tunnel_cli;
	c->tunnel_cli_set = false;
}

void tun_conf_finish(struct etr_conf *c, struct conf_errors *e)
{
	for (unsigned i = 0; i < c->ntunnel; i++) {
		const struct tun_conf *t = &c->tunnel[i];
		struct tun_clash k = {.t = t};
		char where[CONF_PATH_MAX + 32];
		/* The quick-start tunnel's keys are its options. */
		const char *p = t->line ? "" : "wg-";

		if (t->line)
			snprintf(where, sizeof(where), "%s:%u: tunnel", conf_path(c), t->line);
		else
			snprintf(where, sizeof(where), "etrelay: tunnel");
		if (!t->ifname_set)
			conf_err(e, "%s: %sinterface: missing (the WireGuard interface, e.g. wg0)",
				 where, p);
		if (!t->address_set)
			conf_err(e,
				 "%s: %saddress: missing (the relay's tunnel address with its "
				 "prefix, e.g. 10.8.0.1/24)",
				 where, p);
		conf_each_listen(c, tun_each, &k);
		/* Named at listen-port's line when the file gives it. */
		if (k.hit && t->port_line)
			snprintf(where, sizeof(where), "%s:%u: tunnel", conf_path(c), t->port_line);
		if (k.hit)
			conf_err(e,
				 "%s: %slisten-port %u is the port of %s%s%s too: WireGuard needs "
				 "a UDP port of its own",
				 where, p, (unsigned)t->listen_port, k.hit->what,
				 k.hit->name && k.hit->name[0] ? " " : "",
				 k.hit->name ? k.hit->name : "");
	}
}
