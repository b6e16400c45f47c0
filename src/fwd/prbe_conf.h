/* SPDX-License-Identifier: ISC */
/* The PRBE echo's keys: prbe (per relay), the echo-only ports and the
 * rules of every echo port (conf_key.h's part). */
#ifndef ETR_PRBE_CONF_H
#define ETR_PRBE_CONF_H

#include "conf_key.h"

extern const struct conf_part prbe_conf_part;

/* Its lines of --help. */
/* clang-format off */
#define PRBE_CONF_USAGE \
	"PRBE echo (a gateway's UDP path test: a datagram that starts with PRBE goes\n" \
	"back to its source as it came; never to a source port below 1024, an echo\n" \
	"port or a known reflector's, never larger, never the same bytes twice to one\n" \
	"source within 0.5 s, at a rate per source IP and per echo port):\n" \
	"  --prbe yes|no             echo on the relay's port, for sources without a\n" \
	"                            session (per relay; no)\n" \
	"  --prbe-listen ADDR:PORT   an echo-only UDP port, repeatable (at most " CONF_STR(CONF_PRBE_LISTEN_MAX) ")\n" \
	"  --prbe-max-size N         largest probe echoed (1472 bytes)\n" \
	"  --prbe-rate N             probes per second per source IP, IPv6 per /64 (10)\n" \
	"  --prbe-burst N            ... and at once (20)\n" \
	"  --prbe-listener-rate N    probes per second per echo port, every source\n" \
	"                            together, split across the workers (" CONF_STR(CONF_PRBE_LISTENER_RATE) ")\n" \
	"  --prbe-listener-burst N   ... and at once (" CONF_STR(CONF_PRBE_LISTENER_BURST) ")\n"
/* clang-format on */

#endif
