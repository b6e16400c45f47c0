/* SPDX-License-Identifier: ISC */
/* The SNI listener's configuration: [sni NAME] sections, --sni-listen and
 * --sni-route for the quick-start one, their checks (conf_key.h's part). */
#ifndef ETR_SNI_CONF_H
#define ETR_SNI_CONF_H

#include "conf_key.h"

extern const struct conf_part sni_conf_part;

/* A listener's defaults (no listen address, no route). */
void conf_sni_defaults(struct sni_conf *s);

/* Parse "NAME=HOST:PORT[,proxy-v2]" (sep '=') or "NAME HOST:PORT
 * [proxy-v2]" (sep ' ') into r. Returns NULL or why the value is wrong. */
const char *conf_sni_route_parse(const char *v, char sep, struct sni_route_conf *r);

/* conf_finish's step: the quick-start listener, and the checks every SNI
 * listener must pass. */
void sni_conf_finish(struct etr_conf *c, struct conf_errors *e);

/* -t's and the start's warnings: max-spliced without splice yes (it has
 * no effect; attack14 found it said nothing). Returns how many. */
unsigned conf_sni_warnings(const struct etr_conf *c, struct conf_errors *w);

/* Its lines of --help. */
/* clang-format off */
#define SNI_CONF_USAGE \
	"TLS services (SNI relay; a [sni NAME] section in a config file):\n" \
	"  --sni-listen ADDR:PORT    TCP address whose TLS connections are spliced, by\n" \
	"                            the server name of their ClientHello, unread\n" \
	"  --sni-route NAME=HOST:PORT[,proxy-v2]\n" \
	"                            where the name NAME (or *.suffix) goes; proxy-v2\n" \
	"                            sends a PROXY v2 header first; repeatable\n" \
	"  In a [sni NAME] section:  listen ADDR:PORT, route NAME HOST:PORT [proxy-v2],\n" \
	"                            preread-timeout DUR (10s), connect-timeout DUR\n" \
	"                            (5s), idle-timeout DUR (300s), send-timeout DUR\n" \
	"                            (60s; a side that takes no spliced byte so long\n" \
	"                            is reset), max-connections N (4096),\n" \
	"                            max-connections-per-ip N (64, per IPv4 address or\n" \
	"                            IPv6 /64; 4x per /56, 8x per /48), max-preread N\n" \
	"                            (1024), splice yes|no (no; yes: spliced bytes by\n" \
	"                            splice(2) through 2 pipes a connection, 4 more\n" \
	"                            descriptors each), max-spliced N (a quarter of\n" \
	"                            max-connections: connections with pipes at once;\n" \
	"                            the rest copy); a refused connection is closed\n" \
	"                            without a byte\n"
/* clang-format on */

#endif
