/* SPDX-License-Identifier: ISC */
/* The ops plane's keys: where it listens, and whether a public address is
 * meant. */
#include "ops_conf.h"

#include <string.h>

#include "addrclass.h"

static const char *set_ops_listen(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	if (addr_parse_numeric(v, &x->c->ops_listen) < 0)
		return "expected IP:PORT or [IPv6]:PORT";
	x->c->ops_enabled = true;
	return NULL;
}

static const struct conf_key ops_keys[] = {
    {"ops-listen", set_ops_listen},
    {"ops-allow-public", conf_set_bool, CONF_FLAG, offsetof(struct etr_conf, ops_allow_public)},
};

const struct conf_part ops_conf_part = {
    .keys = ops_keys,
    .nkeys = sizeof(ops_keys) / sizeof(ops_keys[0]),
};

/* The ops plane serves /metrics and /lifecycle: a public address must be
 * asked for. Here and not at the start only, so that -t refuses it too;
 * named where it was set, in the words of that place. */
void ops_conf_finish(struct etr_conf *c, struct conf_errors *e)
{
	char where[CONF_PATH_MAX + 32], a[ADDR_STRLEN];
	bool cli;

	if (!c->ops_enabled || c->ops_allow_public || addrclass_private(&c->ops_listen))
		return;
	conf_key_where(c, "ops-listen", where, sizeof(where));
	cli = strcmp(where, "etrelay: command line") == 0;
	conf_err(e,
		 "%s: %sops-listen %s: not a private address (loopback, RFC 1918, CGNAT, ULA, "
		 "link-local): bind one, or %s to serve the ops plane on it anyway",
		 cli ? "etrelay" : where, cli ? "--" : "", addr_str(&c->ops_listen.sa, a),
		 cli ? "pass --ops-allow-public" : "set ops-allow-public yes");
}
