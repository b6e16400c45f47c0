/* SPDX-License-Identifier: ISC */
/* The tunnel's keys: one [tunnel] section naming a WireGuard interface,
 * its UDP port, the relay's own tunnel address, and whether the relay
 * makes the interface (a kernel one) or finds it (wireguard-go's). */
#include "tun_conf.h"

#include <stdio.h>
#include <string.h>

static const char *tk_interface(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct tun_conf *t = x->obj;
	size_t len = strlen(v);

	(void)k;
	if (len == 0 || len >= CONF_TUN_IFNAME || strcmp(v, ".") == 0 || strcmp(v, "..") == 0 ||
	    strpbrk(v, "/: \t"))
		return "expected an interface name such as wg0 (at most 15 characters)";
	memcpy(t->ifname, v, len + 1);
	t->ifname_set = true;
	return NULL;
}

static const char *tk_address(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct tun_conf *t = x->obj;
	unsigned max;

	(void)k;
	if (!strchr(v, '/') || conf_cidr_parse(v, &t->address) < 0)
		return "expected the relay's address with its prefix, such as 10.8.0.1/24";
	max = t->address.addr.sa.sa_family == AF_INET ? 32 : 128;
	if (t->address.bits == 0 || t->address.bits > max)
		return "expected a prefix from 1 to 32 (IPv4) or 128 (IPv6)";
	t->address_set = true;
	return NULL;
}

#define TK(field) offsetof(struct tun_conf, field)
static const struct conf_key tun_keys[] = {
    {"interface", tk_interface},
    {"listen-port", conf_set_u32, 0, TK(listen_port), 1, 65535, "expected a port from 1 to 65535"},
    {"address", tk_address},
    {"create", conf_set_bool, 0, TK(create)},
};

static void tun_init(void *obj)
{
	struct tun_conf *t = obj;

	memset(t, 0, sizeof(*t));
	t->listen_port = CONF_TUN_PORT;
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

static bool tun_listens(const struct etr_conf *c)
{
	return c->ntunnel > 0;
}

const struct conf_part tun_conf_part = {
    .section = &tun_section,
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

void tun_conf_finish(struct etr_conf *c, struct conf_errors *e)
{
	for (unsigned i = 0; i < c->ntunnel; i++) {
		const struct tun_conf *t = &c->tunnel[i];
		struct tun_clash k = {.t = t};
		char where[CONF_PATH_MAX + 32];

		snprintf(where, sizeof(where), "%s:%u: tunnel", conf_path(c), t->line);
		if (!t->ifname_set)
			conf_err(e, "%s: interface: missing (the WireGuard interface, e.g. wg0)",
				 where);
		if (!t->address_set)
			conf_err(e,
				 "%s: address: missing (the relay's tunnel address with its "
				 "prefix, e.g. 10.8.0.1/24)",
				 where);
		conf_each_listen(c, tun_each, &k);
		if (k.hit)
			conf_err(e,
				 "%s: listen-port %u is the port of %s%s%s too: WireGuard needs "
				 "a UDP port of its own",
				 where, (unsigned)t->listen_port, k.hit->what,
				 k.hit->name && k.hit->name[0] ? " " : "",
				 k.hit->name ? k.hit->name : "");
	}
}
