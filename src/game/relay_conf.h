/* SPDX-License-Identifier: ISC */
/* The game relay's configuration: its keys (each [relay NAME]'s, and their
 * defaults at the top level), the games' tags and masters, the checks of a
 * relay (conf_key.h's part and finish step). */
#ifndef ETR_RELAY_CONF_H
#define ETR_RELAY_CONF_H

#include "conf_key.h"

extern const struct conf_part relay_conf_part;

/* A relay's built-in defaults (no upstream; the game's masters come at
 * conf_finish). */
void conf_relay_defaults(struct relay_conf *r);

/* conf_finish's step: each relay's tags and masters from its game, and the
 * checks a relay must pass, alone and against the relays before it. */
void relay_conf_finish(struct etr_conf *c, struct conf_errors *e);

/* A relay's upstream that is its own listen address, or, on a wildcard
 * listen, an address of this host (loopback, local[0..nlocal)) on its port:
 * each one added to e, naming the line or option. up: every relay's
 * resolved upstream (c->relays order), or NULL to check numeric ones only.
 * Returns 0 or -1. */
int conf_relay_loops(const struct etr_conf *c, const union etr_sockaddr *up,
		     const union etr_sockaddr *local, size_t nlocal, struct conf_errors *e);

/* Warnings for masters known to list another game's servers than their
 * relay's game (a copied ET list under game q3, say). */
unsigned conf_master_warnings(const struct etr_conf *c, struct conf_errors *w);

/* Its lines of --help. */
/* clang-format off */
#define RELAY_CONF_USAGE \
	"Relay options (in a config file: the same names without --):\n" \
	"  --listen ADDR:PORT        public UDP address (default " CONF_DEFAULT_LISTEN ";\n" \
	"                            [::]:27960 for IPv6)\n" \
	"  --upstream HOST:PORT      the game server (required, unless --sni-listen,\n" \
	"                            --turn-listen or --prbe-listen gives a process\n" \
	"                            without a relay)\n" \
	"  --master HOST[:PORT]      master server, repeatable (default: the game's own,\n" \
	"                            for et etmaster.idsoftware.com and etmaster.net;\n" \
	"                            port 27950 when omitted)\n" \
	"  --game et|rtcw|q3|dp      heartbeat and flatline tags (default et):\n" \
	"                            et EnemyTerritory-1/ETFlatline-1, rtcw Wolfenstein-1/\n" \
	"                            WolfFlatline-1, q3 QuakeArena-1, dp DarkPlaces\n" \
	"  --heartbeat TAG           heartbeat tag instead of the game's\n" \
	"  --flatline TAG            flatline tag instead of the game's (\"\" for none)\n" \
	"  --heartbeat-interval DUR  time between probe and heartbeat rounds (300s)\n" \
	"  --probe-timeout DUR       wait per probe attempt, 3 attempts (3s)\n" \
	"  --session-timeout DUR     close a session idle this long (120s)\n" \
	"  --max-sessions N          most sessions at once (4000)\n" \
	"  --session-ports MIN-MAX   bind session sockets in this port range\n" \
	"                            (default: the kernel's ephemeral ports)\n" \
	"\n" \
	"Abuse resistance (per relay):\n" \
	"  --sessions-per-ip N       most sessions from one IP address, IPv6 from one\n" \
	"                            /64 (8)\n" \
	"  --unassured-timeout DUR   close a session the game server has not taken as a\n" \
	"                            player within this time (10s)\n" \
	"  --ip-session-rate N       new sessions per second from one IP address, IPv6\n" \
	"                            from one /64 (8; as many at once)\n" \
	"  --session-rate N          new sessions per second in all (100; as many at\n" \
	"                            once); in-game packets and unknown commands only\n" \
	"                            while more than half are left\n" \
	"  --master-queries N        packets from each master's address passed as the\n" \
	"                            master's per heartbeat interval (2; each heartbeat\n" \
	"                            refills them); past them only its getinfo and\n" \
	"                            getstatus, served as a browser's\n" \
	"  --ip-query-burst N        connectionless packets (any command) per source IP\n" \
	"                            at once (10)\n" \
	"  --ip-query-rate N         ... and per second after that (1)\n" \
	"  --server-query-burst N    queries passed to the game server at once (9;\n" \
	"                            the game server allows the relay's address 10)\n" \
	"  --server-query-rate N     ... and per second after that (1); 2 tokens per\n" \
	"                            master and 3 are kept for masters and players\n" \
	"                            (the last of them for returning players, the\n" \
	"                            second last for a network, /24 or /48, that took\n" \
	"                            none in 2.5 s); browsers and rcon get the rest\n" \
	"  --query-cache DUR         answer getinfo/getstatus from a copy this fresh\n" \
	"                            (1s; 0 turns the cache off)\n" \
	"  --query-cache-stale DUR   ... and from an older one, up to this much older,\n" \
	"                            while one refresh is out or the budget is spent (5s)\n" \
	"  --query-cache-rate N      answers from the cache per second, per relay (200)\n" \
	"  --query-cache-bytes N     ... and bytes per second (256k; k and M allowed)\n" \
	"  --query-cache-max-reply N largest answer served from the cache (4096 bytes)\n" \
	"\n"
/* clang-format on */

#endif
