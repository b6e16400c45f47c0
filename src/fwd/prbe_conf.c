/* SPDX-License-Identifier: ISC */
/* The PRBE echo's keys: prbe yes on a relay's port, the echo-only ports
 * (prbe-listen) and the rules every echo port follows. */
#include "prbe_conf.h"

#include <string.h>

static void prbe_defaults(struct etr_conf *c)
{
	c->prbe.max_size = CONF_PRBE_MAX_SIZE;
	c->prbe.rate = CONF_PRBE_RATE;
	c->prbe.burst = CONF_PRBE_BURST;
	c->prbe.listener_rate = CONF_PRBE_LISTENER_RATE;
	c->prbe.listener_burst = CONF_PRBE_LISTENER_BURST;
}

static bool prbe_listens(const struct etr_conf *c)
{
	return c->prbe.nlisten > 0;
}

/* Repeatable: the first of a layer replaces the list it inherited. */
static const char *set_prbe_listen(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct conf_prbe *p = &x->c->prbe;
	union etr_sockaddr a;

	if (addr_parse_numeric(v, &a) < 0 || conf_port_of(&a) == 0)
		return "expected IP:PORT or [IPv6]:PORT with a port above 0";
	if (conf_first(x))
		p->nlisten = 0;
	if (p->nlisten == CONF_PRBE_LISTEN_MAX)
		return "too many echo ports (at most " CONF_STR(CONF_PRBE_LISTEN_MAX) ")";
	p->listen_line[p->nlisten] = x->line;
	p->listen[p->nlisten++] = a;
	return NULL;
}

#define GK(field) offsetof(struct etr_conf, field)
static const struct conf_key prbe_keys[] = {
    {"prbe", conf_set_bool, CONF_RELAY, offsetof(struct relay_conf, prbe)},
    {"prbe-listen", set_prbe_listen, CONF_LISTENER},
    {"prbe-max-size", conf_set_u32, 0, GK(prbe.max_size), 4, 65507,
     "expected a number of bytes from 4 to 65507"},
    {"prbe-rate", conf_set_u32, 0, GK(prbe.rate), 1, 100000},
    {"prbe-burst", conf_set_u32, 0, GK(prbe.burst), 1, 100000},
    {"prbe-listener-rate", conf_set_u32, 0, GK(prbe.listener_rate), 1, 100000},
    {"prbe-listener-burst", conf_set_u32, 0, GK(prbe.listener_burst), 1, 100000},
};

const struct conf_part prbe_conf_part = {
    .keys = prbe_keys,
    .nkeys = sizeof(prbe_keys) / sizeof(prbe_keys[0]),
    .defaults = prbe_defaults,
    .listens = prbe_listens,
};
