/* SPDX-License-Identifier: ISC */
/* The TURN listener's configuration: [turn NAME] sections, the --turn-KEY
 * options for the quick-start one, their checks (conf_key.h's part). */
#ifndef ETR_TURN_CONF_H
#define ETR_TURN_CONF_H

#include "conf_key.h"

extern const struct conf_part turn_conf_part;

/* A TURN listener's defaults (no listen address). */
void conf_turn_defaults(struct turn_conf *t);

/* conf_finish's step: the quick-start listener, the defaults that follow
 * from other keys, and the checks every TURN listener must pass. */
void turn_conf_finish(struct etr_conf *c, struct conf_errors *e);

/* Warnings for TURN listeners in w, one line each naming FILE:LINE: an
 * allow-peer 0.0.0.0/0 or ::/0, which undoes every refused block. Returns
 * the number of warnings. */
unsigned conf_turn_warnings(const struct etr_conf *c, struct conf_errors *w);

/* Its lines of --help. */
/* clang-format off */
#define TURN_CONF_USAGE \
	"TURN relay (RFC 8656; a [turn NAME] section in a config file, whose keys are\n" \
	"these without turn-):\n" \
	"  --turn-listen ADDR[:PORT] UDP address of a TURN listener (port 3478)\n" \
	"  --turn-tcp-listen ADDR[:PORT]  TURN over TCP too (default off)\n" \
	"  --turn-tls-listen ADDR[:PORT]  TURN over TLS too (default off; give the\n" \
	"                            port, 5349 by convention)\n" \
	"  --turn-tls-cert FILE, --turn-tls-key FILE\n" \
	"                            its certificate chain and key (PEM)\n" \
	"  --turn-tls-reload-interval DUR  look for a new pair this often (60s)\n" \
	"  --turn-realm TEXT         the realm of the credentials (" CONF_TURN_REALM ")\n" \
	"  --turn-relay-address IP   relayed sockets bind here (default: the listen\n" \
	"                            address; required when that is a wildcard)\n" \
	"  --turn-public-ip IP       the address /lifecycle reports (relay-address)\n" \
	"  --turn-ports MIN-MAX      relayed ports (49152-65535; none of another\n" \
	"                            UDP listener's ports)\n" \
	"  --turn-max-allocations N  most allocations at once (4000; 508 beyond, and\n" \
	"                            at most the ports' count)\n" \
	"  --turn-user-quota N       allocations per userid, across the workers\n" \
	"                            (" CONF_STR(CONF_TURN_USER_QUOTA) "; 486 beyond)\n" \
	"  --turn-tcp-max-per-ip N   TCP and TLS connections per IPv4 address or IPv6\n" \
	"                            /64 (" CONF_STR(CONF_TURN_TCP_MAX_PER_IP) "; 4x per /56, 8x per /48; closed at\n" \
	"                            once beyond)\n" \
	"  --turn-tcp-max-connections N  TCP and TLS connections in all, split across\n" \
	"                            the workers (" CONF_STR(CONF_TURN_TCP_MAX_CONNECTIONS) "); when a worker's share is\n" \
	"                            full, its oldest one without an\n" \
	"                            allocation gives way\n" \
	"  --turn-tcp-auth-timeout DUR  a TCP or TLS connection without an\n" \
	"                            authenticated request (TLS handshake included)\n" \
	"                            is closed after this (10s, at most 30s)\n" \
	"  --turn-unauth-ip-burst N  answers to unauthenticated requests (Binding,\n" \
	"                            401, 438, 420, 400) per source IP at once\n" \
	"                            (" CONF_STR(CONF_TURN_UNAUTH_IP_BURST) "; UDP: dropped past it, TCP, TLS: closed)\n" \
	"  --turn-unauth-ip-rate N   ... and per second after that (" CONF_STR(CONF_TURN_UNAUTH_IP_RATE) ")\n" \
	"  --turn-unauth-burst N     such answers per listener in all, at once\n" \
	"                            (" CONF_STR(CONF_TURN_UNAUTH_BURST) ", split across the workers)\n" \
	"  --turn-unauth-rate N      ... and per second after that (" CONF_STR(CONF_TURN_UNAUTH_RATE) ")\n" \
	"  --turn-tls-handshake-ip-burst N  TLS handshakes per source IP at once\n" \
	"                            (" CONF_STR(CONF_TURN_TLS_IP_BURST) "); a TLS connection past it is closed\n" \
	"                            before any crypto\n" \
	"  --turn-tls-handshake-ip-rate N  ... and per second after that (" CONF_STR(CONF_TURN_TLS_IP_RATE) ")\n" \
	"  --turn-tls-handshake-burst N  TLS handshakes per listener at once\n" \
	"                            (" CONF_STR(CONF_TURN_TLS_BURST) ", split across the workers)\n" \
	"  --turn-tls-handshake-rate N  ... and per second after that (" CONF_STR(CONF_TURN_TLS_RATE) ")\n" \
	"  --turn-auth-fail-ip-burst N  failed authentications per source IP at\n" \
	"                            once (" CONF_STR(CONF_TURN_AUTH_FAIL_IP_BURST) "); past it a signed request gets no\n" \
	"                            HMAC work (UDP: dropped; TCP, TLS: closed)\n" \
	"  --turn-auth-fail-ip-rate N  ... and per second after that (" CONF_STR(CONF_TURN_AUTH_FAIL_IP_RATE) ")\n" \
	"  --turn-auth-fail-burst N  failed authentications per listener at once\n" \
	"                            (" CONF_STR(CONF_TURN_AUTH_FAIL_BURST) ", split across the workers); past it only\n" \
	"                            usernames that passed before are checked\n" \
	"  --turn-auth-fail-rate N   ... and per second after that (" CONF_STR(CONF_TURN_AUTH_FAIL_RATE) ")\n" \
	"  --turn-max-lifetime DUR   longest allocation lifetime (1h)\n" \
	"  --turn-nonce-lifetime DUR a nonce is good this long, then 438 (1h)\n" \
	"  --turn-allow-peer CIDR    relay to this block although the default refused\n" \
	"                            set has it (loopback, private...); repeatable;\n" \
	"                            an address of this host only when given alone\n" \
	"                            (/32), never the daemon's own ports\n" \
	"                            0.0.0.0/0 or ::/0 undoes that set (a warning)\n" \
	"  --turn-deny-peer CIDR     never relay to this block (wins over allow-peer);\n" \
	"                            repeatable\n" \
	"  --turn-strict-expiry yes|no\n" \
	"                            end allocations when their credential expires (no:\n" \
	"                            only new allocations are refused)\n" \
	"  The secrets come from ETRELAY_TURN_SECRET and ETRELAY_TURN_SECRET_NEXT (or\n" \
	"  their _FILE forms), at least 32 bytes each, both accepted, reread on SIGHUP.\n"
/* clang-format on */

#endif
