/* SPDX-License-Identifier: ISC */
/* The tunnel's keys: a [tunnel] section (one), its defaults and checks
 * (conf_key.h's part). */
#ifndef ETR_TUN_CONF_H
#define ETR_TUN_CONF_H

#include "conf_key.h"

extern const struct conf_part tun_conf_part;

/* conf_finish's step: interface and address given, and WireGuard's port
 * on no UDP listener of the process. */
void tun_conf_finish(struct etr_conf *c, struct conf_errors *e);

/* Its lines of --help. */
/* clang-format off */
#define TUN_CONF_USAGE \
	"Tunnel (WireGuard for gateways; a [tunnel] section in a config file only):\n" \
	"  In the [tunnel] section:  interface IFNAME (required), listen-port PORT\n" \
	"                            (" CONF_STR(CONF_TUN_PORT) "), address CIDR (the relay's tunnel\n" \
	"                            address, e.g. 10.8.0.1/24; required), create yes|no\n" \
	"                            (no: use an existing interface, e.g. wireguard-go's;\n" \
	"                            yes: make a kernel one, needs CAP_NET_ADMIN)\n"
/* clang-format on */

#endif
