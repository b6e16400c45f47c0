/* SPDX-License-Identifier: ISC */
/* The tunnel's keys: a [tunnel] section (one), --wg-KEY for a quick
 * start, its defaults and checks (conf_key.h's part). */
#ifndef ETR_TUN_CONF_H
#define ETR_TUN_CONF_H

#include "conf_key.h"

extern const struct conf_part tun_conf_part;

/* conf_finish's first step: the quick-start tunnel (--wg-*) becomes
 * c->tunnel[0] (refused beside a file's [tunnel]), before the checks
 * between kinds read the listeners. */
void tun_conf_take(struct etr_conf *c, struct conf_errors *e);

/* conf_finish's step: interface and address given, and WireGuard's port
 * on no UDP listener of the process. */
void tun_conf_finish(struct etr_conf *c, struct conf_errors *e);

/* Its lines of --help. */
/* clang-format off */
#define TUN_CONF_USAGE \
	"Tunnel (WireGuard for gateways; a [tunnel] section in a config file, whose\n" \
	"keys are these without wg-):\n" \
	"  --wg-interface IFNAME     the WireGuard interface (e.g. wg0) whose peers the\n" \
	"                            control plane gives\n" \
	"  --wg-listen-port PORT     its UDP port (" CONF_STR(CONF_TUN_PORT) ")\n" \
	"  --wg-address CIDR         the relay's tunnel address (e.g. 10.8.0.1/24;\n" \
	"                            required)\n" \
	"  --wg-create yes|no        make a kernel interface (needs CAP_NET_ADMIN), or use\n" \
	"                            an existing one, e.g. wireguard-go's (no)\n"
/* clang-format on */

#endif
