/* SPDX-License-Identifier: ISC */
/* One table of keys for the command line and the file. Layers, lowest first:
 * built-in defaults, the file's top-level keys, a [relay NAME] section, the
 * command line. Every error names its flag or file:line and the value. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>
#include <unistd.h>

#include "addrclass.h"
#include "url.h"

_Static_assert(CONF_SNI_NAME_MAX == ADDR_NAME_MAX, "route names");

const char
    conf_usage[] =
	"usage: etrelay --upstream HOST:PORT [options]\n"
	"       etrelay [-c FILE] [-t [--probe]] [options]\n"
	"\n"
	"Relay a game server's UDP port from this host and send its master-server\n"
	"heartbeats from here, so masters list this host's address.\n"
	"\n"
	"Relay options (in a config file: the same names without --):\n"
	"  --listen ADDR:PORT        public UDP address (default " CONF_DEFAULT_LISTEN ";\n"
	"                            [::]:27960 for IPv6)\n"
	"  --upstream HOST:PORT      the game server (required, unless --sni-listen,\n"
	"                            --turn-listen or --prbe-listen gives a process\n"
	"                            without a relay)\n"
	"  --master HOST[:PORT]      master server, repeatable (default: the game's own,\n"
	"                            for et etmaster.idsoftware.com and etmaster.net;\n"
	"                            port 27950 when omitted)\n"
	"  --game et|rtcw|q3|dp      heartbeat and flatline tags (default et):\n"
	"                            et EnemyTerritory-1/ETFlatline-1, rtcw Wolfenstein-1/\n"
	"                            WolfFlatline-1, q3 QuakeArena-1, dp DarkPlaces\n"
	"  --heartbeat TAG           heartbeat tag instead of the game's\n"
	"  --flatline TAG            flatline tag instead of the game's (\"\" for none)\n"
	"  --heartbeat-interval DUR  time between probe and heartbeat rounds (300s)\n"
	"  --probe-timeout DUR       wait per probe attempt, 3 attempts (3s)\n"
	"  --session-timeout DUR     close a session idle this long (120s)\n"
	"  --max-sessions N          most sessions at once (4000)\n"
	"  --session-ports MIN-MAX   bind session sockets in this port range\n"
	"                            (default: the kernel's ephemeral ports)\n"
	"\n"
	"Abuse resistance (per relay):\n"
	"  --sessions-per-ip N       most sessions from one IP address, IPv6 from one\n"
	"                            /64 (8)\n"
	"  --unassured-timeout DUR   close a session the game server has not taken as a\n"
	"                            player within this time (10s)\n"
	"  --ip-session-rate N       new sessions per second from one IP address, IPv6\n"
	"                            from one /64 (8; as many at once)\n"
	"  --session-rate N          new sessions per second in all (100; as many at\n"
	"                            once); in-game packets and unknown commands only\n"
	"                            while more than half are left\n"
	"  --master-queries N        packets from each master's address passed as the\n"
	"                            master's per heartbeat interval (2; each heartbeat\n"
	"                            refills them); past them only its getinfo and\n"
	"                            getstatus, served as a browser's\n"
	"  --ip-query-burst N        connectionless packets (any command) per source IP\n"
	"                            at once (10)\n"
	"  --ip-query-rate N         ... and per second after that (1)\n"
	"  --server-query-burst N    queries passed to the game server at once (9;\n"
	"                            the game server allows the relay's address 10)\n"
	"  --server-query-rate N     ... and per second after that (1); 2 tokens per\n"
	"                            master and 3 are kept for masters and players\n"
	"                            (the last of them for returning players, the\n"
	"                            second last for a network, /24 or /48, that took\n"
	"                            none in 2.5 s); browsers and rcon get the rest\n"
	"  --query-cache DUR         answer getinfo/getstatus from a copy this fresh\n"
	"                            (1s; 0 turns the cache off)\n"
	"  --query-cache-stale DUR   ... and from an older one, up to this much older,\n"
	"                            while one refresh is out or the budget is spent (5s)\n"
	"  --query-cache-rate N      answers from the cache per second, per relay (200)\n"
	"  --query-cache-bytes N     ... and bytes per second (256k; k and M allowed)\n"
	"  --query-cache-max-reply N largest answer served from the cache (4096 bytes)\n"
	"\n"
	"PRBE echo (a gateway's UDP path test: a datagram that starts with PRBE goes\n"
	"back to its source as it came; never to a source port below 1024, an echo\n"
	"port or a known reflector's, never larger, never the same bytes twice to one\n"
	"source within 0.5 s, at a rate per source IP and per echo port):\n"
	"  --prbe yes|no             echo on the relay's port, for sources without a\n"
	"                            session (per relay; no)\n"
	"  --prbe-listen ADDR:PORT   an echo-only UDP port, repeatable (at most " CONF_STR(
	    CONF_PRBE_LISTEN_MAX) ")\n"
				  "  --prbe-max-size N         largest probe echoed (1472 bytes)\n"
				  "  --prbe-rate N             probes per second per source IP, "
				  "IPv6 per /64 (10)\n"
				  "  --prbe-burst N            ... and at once (20)\n"
				  "  --prbe-listener-rate N    probes per second per echo port, "
				  "every source\n"
				  "                            together, split across the workers "
				  "(" CONF_STR(
				      CONF_PRBE_LISTENER_RATE) ")\n"
							       "  --prbe-listener-burst N   ... "
							       "and at once (" CONF_STR(
								   CONF_PRBE_LISTENER_BURST) ")\n"
											     "TLS "
											     "servi"
											     "ces "
											     "(SNI "
											     "relay"
											     "; a "
											     "[sni "
											     "NAME]"
											     " sect"
											     "ion "
											     "in a "
											     "confi"
											     "g "
											     "file)"
											     ":\n"
											     "  "
											     "--"
											     "sni-"
											     "liste"
											     "n "
											     "ADDR:"
											     "PORT "
											     "   "
											     "TCP "
											     "addre"
											     "ss "
											     "whose"
											     " TLS "
											     "conne"
											     "ction"
											     "s "
											     "are "
											     "splic"
											     "ed, "
											     "by\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "the "
											     "serve"
											     "r "
											     "name "
											     "of "
											     "their"
											     " Clie"
											     "ntHel"
											     "lo, "
											     "unrea"
											     "d\n"
											     "  "
											     "--"
											     "sni-"
											     "route"
											     " NAME"
											     "=HOST"
											     ":PORT"
											     "[,"
											     "proxy"
											     "-v2]"
											     "\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "where"
											     " the "
											     "name "
											     "NAME "
											     "(or "
											     "*."
											     "suffi"
											     "x) "
											     "goes;"
											     " prox"
											     "y-"
											     "v2\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "sends"
											     " a "
											     "PROXY"
											     " v2 "
											     "heade"
											     "r "
											     "first"
											     "; "
											     "repea"
											     "table"
											     "\n"
											     "  In "
											     "a "
											     "[sni "
											     "NAME]"
											     " sect"
											     "ion: "
											     " list"
											     "en "
											     "ADDR:"
											     "PORT,"
											     " rout"
											     "e "
											     "NAME "
											     "HOST:"
											     "PORT "
											     "[prox"
											     "y-v2]"
											     ",\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "prere"
											     "ad-"
											     "timeo"
											     "ut "
											     "DUR "
											     "(10s)"
											     ", "
											     "conne"
											     "ct-"
											     "timeo"
											     "ut "
											     "DUR\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "(5s),"
											     " idle"
											     "-time"
											     "out "
											     "DUR "
											     "(300s"
											     "), "
											     "send-"
											     "timeo"
											     "ut "
											     "DUR\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "(60s;"
											     " a "
											     "side "
											     "that "
											     "takes"
											     " no "
											     "splic"
											     "ed "
											     "byte "
											     "so "
											     "long"
											     "\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "is "
											     "reset"
											     "), "
											     "max-"
											     "conne"
											     "ction"
											     "s N "
											     "(4096"
											     "),\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "max-"
											     "conne"
											     "ction"
											     "s-"
											     "per-"
											     "ip N "
											     "(64, "
											     "per "
											     "IPv4 "
											     "addre"
											     "ss "
											     "or\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "IPv6 "
											     "/64; "
											     "4x "
											     "per "
											     "/56, "
											     "8x "
											     "per "
											     "/48),"
											     " max-"
											     "prere"
											     "ad "
											     "N\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "(1024"
											     "), "
											     "splic"
											     "e "
											     "yes|"
											     "no "
											     "(no; "
											     "yes: "
											     "splic"
											     "ed "
											     "bytes"
											     " by\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "splic"
											     "e(2) "
											     "throu"
											     "gh 2 "
											     "pipes"
											     " a "
											     "conne"
											     "ction"
											     ", 4 "
											     "more"
											     "\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "descr"
											     "iptor"
											     "s "
											     "each)"
											     ", "
											     "max-"
											     "splic"
											     "ed N "
											     "(a "
											     "quart"
											     "er "
											     "of\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "max-"
											     "conne"
											     "ction"
											     "s: "
											     "conne"
											     "ction"
											     "s "
											     "with "
											     "pipes"
											     " at "
											     "once;"
											     "\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "the "
											     "rest "
											     "copy)"
											     "; a "
											     "refus"
											     "ed "
											     "conne"
											     "ction"
											     " is "
											     "close"
											     "d\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "witho"
											     "ut a "
											     "byte"
											     "\n"
											     "TURN "
											     "relay"
											     " ("
											     "RFC "
											     "8656;"
											     " a "
											     "[turn"
											     " NAME"
											     "] "
											     "secti"
											     "on "
											     "in a "
											     "confi"
											     "g "
											     "file,"
											     " whos"
											     "e "
											     "keys "
											     "are\n"
											     "these"
											     " with"
											     "out "
											     "turn-"
											     "):\n"
											     "  "
											     "--"
											     "turn-"
											     "liste"
											     "n "
											     "ADDR["
											     ":PORT"
											     "] "
											     "UDP "
											     "addre"
											     "ss "
											     "of a "
											     "TURN "
											     "liste"
											     "ner "
											     "(port"
											     " 3478"
											     ")\n"
											     "  "
											     "--"
											     "turn-"
											     "tcp-"
											     "liste"
											     "n "
											     "ADDR["
											     ":PORT"
											     "]  "
											     "TURN "
											     "over "
											     "TCP "
											     "too "
											     "(defa"
											     "ult "
											     "off)"
											     "\n"
											     "  "
											     "--"
											     "turn-"
											     "tls-"
											     "liste"
											     "n "
											     "ADDR["
											     ":PORT"
											     "]  "
											     "TURN "
											     "over "
											     "TLS "
											     "too "
											     "(defa"
											     "ult "
											     "off; "
											     "give "
											     "the\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "port,"
											     " 5349"
											     " by "
											     "conve"
											     "ntion"
											     ")\n"
											     "  "
											     "--"
											     "turn-"
											     "tls-"
											     "cert "
											     "FILE,"
											     " --"
											     "turn-"
											     "tls-"
											     "key "
											     "FILE"
											     "\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "its "
											     "certi"
											     "ficat"
											     "e "
											     "chain"
											     " and "
											     "key "
											     "(PEM)"
											     "\n"
											     "  "
											     "--"
											     "turn-"
											     "tls-"
											     "reloa"
											     "d-"
											     "inter"
											     "val "
											     "DUR  "
											     "look "
											     "for "
											     "a "
											     "new "
											     "pair "
											     "this "
											     "often"
											     " ("
											     "60s)"
											     "\n"
											     "  "
											     "--"
											     "turn-"
											     "realm"
											     " TEXT"
											     "     "
											     "    "
											     "the "
											     "realm"
											     " of "
											     "the "
											     "crede"
											     "ntial"
											     "s "
											     "(" CONF_TURN_REALM
											     ")\n"
											     "  "
											     "--"
											     "turn-"
											     "relay"
											     "-addr"
											     "ess "
											     "IP   "
											     "relay"
											     "ed "
											     "socke"
											     "ts "
											     "bind "
											     "here "
											     "(defa"
											     "ult: "
											     "the "
											     "liste"
											     "n\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "addre"
											     "ss; "
											     "requi"
											     "red "
											     "when "
											     "that "
											     "is a "
											     "wildc"
											     "ard)"
											     "\n"
											     "  "
											     "--"
											     "turn-"
											     "publi"
											     "c-ip "
											     "IP   "
											     "    "
											     "the "
											     "addre"
											     "ss "
											     "/life"
											     "cycle"
											     " repo"
											     "rts "
											     "(rela"
											     "y-"
											     "addre"
											     "ss)\n"
											     "  "
											     "--"
											     "turn-"
											     "ports"
											     " MIN-"
											     "MAX  "
											     "    "
											     "relay"
											     "ed "
											     "ports"
											     " ("
											     "49152"
											     "-6553"
											     "5; "
											     "none "
											     "of "
											     "anoth"
											     "er\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "UDP "
											     "liste"
											     "ner'"
											     "s "
											     "ports"
											     ")\n"
											     "  "
											     "--"
											     "turn-"
											     "max-"
											     "alloc"
											     "ation"
											     "s N  "
											     "most "
											     "alloc"
											     "ation"
											     "s at "
											     "once "
											     "(4000"
											     "; "
											     "508 "
											     "beyon"
											     "d, "
											     "and\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "at "
											     "most "
											     "the "
											     "ports"
											     "' "
											     "count"
											     ")\n"
											     "  "
											     "--"
											     "turn-"
											     "user-"
											     "quota"
											     " N   "
											     "    "
											     "alloc"
											     "ation"
											     "s "
											     "per "
											     "useri"
											     "d, "
											     "acros"
											     "s "
											     "the "
											     "worke"
											     "rs\n"
											     "     "
											     "     "
											     "     "
											     "     "
											     "     "
											     "   "
											     "(" CONF_STR(
												 CONF_TURN_USER_QUOTA) "; 486 beyond)\n"
														       "  --turn-tcp-max-per-ip N   TCP and TLS connections per IPv4 address or IPv6\n"
														       "                            /64 (" CONF_STR(
															   CONF_TURN_TCP_MAX_PER_IP) "; 4x per /56, 8x per /48; closed at\n"
																		     "                            once beyond)\n"
																		     "  --turn-tcp-max-connections N  TCP and TLS connections in all, split across\n"
																		     "                            the workers (" CONF_STR(CONF_TURN_TCP_MAX_CONNECTIONS) "); when a worker's share is\n"
																													 "                            full, its oldest one without an\n"
																													 "                            allocation gives way\n"
																													 "  --turn-tcp-auth-timeout DUR  a TCP or TLS connection without an\n"
																													 "                            authenticated request (TLS handshake included)\n"
																													 "                            is closed after this (10s, at most 30s)\n"
																													 "  --turn-unauth-ip-burst N  answers to unauthenticated requests (Binding,\n"
																													 "                            401, 438, 420, 400) per source IP at once\n"
																													 "                            (" CONF_STR(CONF_TURN_UNAUTH_IP_BURST) "; UDP: dropped past it, TCP, TLS: closed)\n"
																																					     "  --turn-unauth-ip-rate N   ... and per second after that (" CONF_STR(CONF_TURN_UNAUTH_IP_RATE) ")\n"
																																																	      "  --turn-unauth-burst N     such answers per listener in all, at once\n"
																																																	      "                            (" CONF_STR(CONF_TURN_UNAUTH_BURST) ", split across the workers)\n"
																																																									       "  --turn-unauth-rate N      ... and per second after that (" CONF_STR(CONF_TURN_UNAUTH_RATE) ")\n"
																																																																					     "  --turn-tls-handshake-ip-burst N  TLS handshakes per source IP at once\n"
																																																																					     "                            (" CONF_STR(CONF_TURN_TLS_IP_BURST) "); a TLS connection past it is closed\n"
																																																																													      "                            before any crypto\n"
																																																																													      "  --turn-tls-handshake-ip-rate N  ... and per second after that (" CONF_STR(
																																																																														  CONF_TURN_TLS_IP_RATE) ")\n"
																																																																																	 "  --turn-tls-handshake-burst N  TLS handshakes per listener at once\n"
																																																																																	 "                            (" CONF_STR(
																																																																																	     CONF_TURN_TLS_BURST) ", split across the workers)\n"
																																																																																				  "  --turn-tls-handshake-rate N  ... and per second after that (" CONF_STR(
																																																																																				      CONF_TURN_TLS_RATE) ")\n"
																																																																																							  "  --turn-auth-fail-ip-burst N  failed authentications per source IP at\n"
																																																																																							  "                            once (" CONF_STR(CONF_TURN_AUTH_FAIL_IP_BURST) "); past it a signed request gets no\n"
																																																																																																      "                            HMAC work (UDP: dropped; TCP, TLS: closed)\n"
																																																																																																      "  --turn-auth-fail-ip-rate N  ... and per second after that (" CONF_STR(
																																																																																																	  CONF_TURN_AUTH_FAIL_IP_RATE) ")\n"
																																																																																																				       "  --turn-auth-fail-burst N  failed authentications per listener at once\n"
																																																																																																				       "                            (" CONF_STR(CONF_TURN_AUTH_FAIL_BURST) ", split across the workers); past it only\n"
																																																																																																													   "                            usernames that passed before are checked\n"
																																																																																																													   "  --turn-auth-fail-rate N   ... and per second after that (" CONF_STR(
																																																																																																													       CONF_TURN_AUTH_FAIL_RATE) ")\n"
																																																																																																																	 "  --turn-max-lifetime DUR   longest allocation lifetime (1h)\n"
																																																																																																																	 "  --turn-nonce-lifetime DUR a nonce is good this long, then 438 (1h)\n"
																																																																																																																	 "  --turn-allow-peer CIDR    relay to this block although the default refused\n"
																																																																																																																	 "                            set has it (loopback, private...); repeatable;\n"
																																																																																																																	 "                            an address of this host only when given alone\n"
																																																																																																																	 "                            (/32), never the daemon's own ports\n"
																																																																																																																	 "                            0.0.0.0/0 or ::/0 undoes that set (a warning)\n"
																																																																																																																	 "  --turn-deny-peer CIDR     never relay to this block (wins over allow-peer);\n"
																																																																																																																	 "                            repeatable\n"
																																																																																																																	 "  --turn-strict-expiry yes|no\n"
																																																																																																																	 "                            end allocations when their credential expires (no:\n"
																																																																																																																	 "                            only new allocations are refused)\n"
																																																																																																																	 "  The secrets come from ETRELAY_TURN_SECRET and ETRELAY_TURN_SECRET_NEXT (or\n"
																																																																																																																	 "  their _FILE forms), at least 32 bytes each, both accepted, reread on SIGHUP.\n"
																																																																																																																	 "Control plane (see CONTROL PLANE in etrelay(8)):\n"
																																																																																																																	 "  --control-url URL         enrol with this control plane, then send it\n"
																																																																																																																	 "                            heartbeats and take the SNI routes it answers\n"
																																																																																																																	 "                            (https://, checked against the system CA\n"
																																																																																																																	 "                            store; http:// is warned about unless the\n"
																																																																																																																	 "                            host is loopback; default off)\n"
																																																																																																																	 "  --control-bootstrap-token-file FILE\n"
																																																																																																																	 "                            the one-time enrolment token (mode 600 or 640)\n"
																																																																																																																	 "  --state-directory DIR     where the credential from enrolment is kept, an\n"
																																																																																																																	 "                            absolute path\n"
																																																																																																																	 "                            (" CONF_STATE_DIR
																																																																																																																	 "; owned by etrelay's user,\n"
																																																																																																																	 "                            not group- or world-writable)\n"
																																																																																																																	 "  --control-interval DUR    time between heartbeats (30s)\n"
																																																																																																																	 "  --control-timeout DUR     longest wait for one answer (10s; warned about\n"
																																																																																																																	 "                            above --control-interval)\n"
																																																																																																																	 "  --control-backoff-min DUR first wait after a failed enrolment (1m), doubling\n"
																																																																																																																	 "  --control-backoff-max DUR ... up to this (30m)\n"
																																																																																																																	 "  --control-max-answer BYTES  longest answer read (2M, 4k to 64M); a longer one\n"
																																																																																																																	 "                            is cut off and the heartbeat fails (too_large)\n"
																																																																																																																	 "  --control-allow-upstream CIDR\n"
																																																																																																																	 "                            a block the control plane's routes may reach\n"
																																																																																																																	 "                            although private (your tunnel, e.g. 10.8.0.0/16);\n"
																																																																																																																	 "                            repeatable; an address of this host only when\n"
																																																																																																																	 "                            given alone (/32); never the daemon's own ports\n"
																																																																																																																	 "\n"
																																																																																																																	 "Process options:\n"
																																																																																																																	 "  --backend auto|io_uring|epoll\n"
																																																																																																																	 "                            event loop (auto: io_uring, else epoll)\n"
																																																																																																																	 "  --gso yes|no              send runs of datagrams to one destination as one\n"
																																																																																																																	 "                            UDP GSO train (yes; needs Linux 4.18)\n"
																																																																																																																	 "  --workers N|auto          packet loops, one thread each, 1 to " CONF_STR(CONF_WORKERS_MAX) "; a\n"
																																																																																																																												       "                            client's address picks its worker (auto: the CPUs\n"
																																																																																																																												       "                            the process may run on, at most " CONF_STR(CONF_WORKERS_MAX) ")\n"
																																																																																																																																								 "  --ops-listen ADDR:PORT    HTTP health, lifecycle and metrics (default off)\n"
																																																																																																																																								 "  --ops-allow-public        let --ops-listen bind a public address\n"
																																																																																																																																								 "  --drain-timeout DUR       on SIGTERM, wait this long for sessions to end (0)\n"
																																																																																																																																								 "  --ban-file FILE           IPs and CIDRs refused on every listener, one per line\n"
																																																																																																																																								 "                            (reread on SIGHUP)\n"
																																																																																																																																								 "  --xdp-interface IFACE     drop floods to the UDP listeners in an XDP program\n"
																																																																																																																																								 "                            on IFACE, repeatable (needs CAP_BPF, CAP_NET_ADMIN)\n"
																																																																																																																																								 "  --xdp-rate N              ... packets a second per source it does not know\n"
																																																																																																																																								 "                            (an IPv4 address, an IPv6 /64) (" CONF_STR(
																																																																																																																																								     CONF_XDP_RDEF) ")\n"
																																																																																																																																										    "  --xdp-burst N             ... and at once (" CONF_STR(
																																																																																																																																											CONF_XDP_BHELP) ")\n"
																																																																																																																																													"  --debug                   log heartbeats, sessions and connectionless packets\n"
																																																																																																																																													"                            (a refused one with the reason)\n"
																																																																																																																																													"  --log-time yes|no|auto    start log lines with the ISO 8601 time (auto: unless\n"
																																																																																																																																													"                            stderr is the journal)\n"
																																																																																																																																													"  -c, --config FILE         config file (default " CONF_DEFAULT_PATH
																																																																																																																																													" when\n"
																																																																																																																																													"                            no --upstream, --sni-listen, --turn-listen or\n"
																																																																																																																																													"                            --prbe-listen is given)\n"
																																																																																																																																													"  -t, --test                check the configuration and exit (0 valid, 78 not)\n"
																																																																																																																																													"  --probe                   with -t: also resolve masters (to an address the\n"
																																																																																																																																													"                            listener can reach), probe game servers, resolve\n"
																																																																																																																																													"                            and connect to SNI route upstreams (exit 1 if any\n"
																																																																																																																																													"                            of that fails)\n"
																																																																																																																																													"  -h, --help                this text\n"
																																																																																																																																													"  -V, --version             print the version\n"
																																																																																																																																													"\n"
																																																																																																																																													"DUR is a number of seconds or a number with ms, s, m or h.\n"
																																																																																																																																													"Tokens for the ops plane come from ETRELAY_LIFECYCLE_TOKEN,\n"
																																																																																																																																													"ETRELAY_LIFECYCLE_READ_TOKEN and ETRELAY_METRICS_TOKEN (or their _FILE forms,\n"
																																																																																																																																													"mode 600 or 640); without any, /lifecycle and /sessions are open. The ops\n"
																																																																																																																																													"listener takes 64 connections, 8 per address, 5 s per request.\n"
																																																																																																																																													"ETRELAY_CONTROL_TOKEN (or ETRELAY_CONTROL_TOKEN_FILE) gives the control\n"
																																																																																																																																													"plane's credential and skips enrolment.\n"
																																																																																																																																													"\n"
																																																																																																																																													"Exit status:\n"
																																																																																																																																													"  0   stopped by SIGTERM or SIGINT; --help, --version; -t, configuration valid\n"
																																																																																																																																													"  1   startup failed or the event loop failed; -t --probe found a failure\n"
																																																																																																																																													"  64  usage error\n"
																																																																																																																																													"  69  --backend io_uring, and io_uring is not available\n"
																																																																																																																																													"  78  the configuration is invalid\n";

/* Each game's tags and the masters its own servers heartbeat by default
 * (ET's; iortcw's; ioquake3's and OpenArena's; DarkPlaces'), all on
 * port CONF_MASTER_PORT. */
static const struct {
	const char *name, *short_name, *heartbeat, *flatline;
	const char *masters[2];
} games[] = {
    {"et", "ET", "EnemyTerritory-1", "ETFlatline-1", {"etmaster.idsoftware.com", "etmaster.net"}},
    {"rtcw",
     "RTCW",
     "Wolfenstein-1",
     "WolfFlatline-1",
     {"wolfmaster.idsoftware.com", "wolfmaster.s4ndmod.com"}},
    {"q3", "Q3", "QuakeArena-1", "", {"master.ioquake3.org", "dpmaster.deathmask.net"}},
    {"dp", "DP", "DarkPlaces", "", {"dpmaster.deathmask.net", "dpmaster.tchr.no"}},
};
#define NGAMES (sizeof(games) / sizeof(games[0]))

static void base_defaults(struct relay_conf *r)
{
	memset(r, 0, sizeof(*r));
	strcpy(r->name, "default");
	addr_parse_numeric(CONF_DEFAULT_LISTEN, &r->listen);
	/* The masters come from the game at relay_finish, unless given. */
	strcpy(r->game, "ET");
	r->heartbeat_interval_ms = CONF_HEARTBEAT_INTERVAL;
	r->session_timeout_ms = CONF_SESSION_TIMEOUT;
	r->probe_timeout_ms = CONF_PROBE_TIMEOUT;
	r->max_sessions = CONF_MAX_SESSIONS;
	r->sessions_per_ip = CONF_SESSIONS_PER_IP;
	r->unassured_timeout_ms = CONF_UNASSURED_TIMEOUT;
	r->ip_session_rate = CONF_IP_SESSION_RATE;
	r->session_rate = CONF_SESSION_RATE;
	r->master_queries = CONF_MASTER_QUERIES;
	r->ip_query_burst = CONF_IP_QUERY_BURST;
	r->ip_query_rate = CONF_IP_QUERY_RATE;
	r->server_query_burst = CONF_SERVER_QUERY_BURST;
	r->server_query_rate = CONF_SERVER_QUERY_RATE;
	r->query_cache_ms = CONF_QUERY_CACHE;
	r->query_cache_stale_ms = CONF_QUERY_CACHE_STALE;
	r->query_cache_rate = CONF_QUERY_CACHE_RATE;
	r->query_cache_bytes = CONF_QUERY_CACHE_BYTES;
	r->query_cache_max_reply = CONF_QUERY_CACHE_MAX_REPLY;
}

void conf_defaults(struct etr_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->backend = CONF_BACKEND_AUTO;
	c->gso = true;
	c->log_time = CONF_LOG_TIME;
	c->prbe.max_size = CONF_PRBE_MAX_SIZE;
	c->prbe.rate = CONF_PRBE_RATE;
	c->prbe.burst = CONF_PRBE_BURST;
	c->prbe.listener_rate = CONF_PRBE_LISTENER_RATE;
	c->prbe.listener_burst = CONF_PRBE_LISTENER_BURST;
	c->xdp.rate = CONF_XDP_RATE;
	c->xdp.burst = CONF_XDP_BURST;
	strcpy(c->state_dir, CONF_STATE_DIR);
	c->control_interval_ms = CONF_CONTROL_INTERVAL;
	c->control_timeout_ms = CONF_CONTROL_TIMEOUT;
	c->control_backoff_min_ms = CONF_CONTROL_BACKOFF_MIN;
	c->control_backoff_max_ms = CONF_CONTROL_BACKOFF_MAX;
	c->control_max_answer = CONF_CONTROL_MAX_ANSWER;
	base_defaults(&c->base);
	conf_sni_defaults(&c->sni_cli);
	snprintf(c->sni_cli.name, sizeof(c->sni_cli.name), "%s", CONF_SNI_QUICK_NAME);
	conf_turn_defaults(&c->turn_cli);
	snprintf(c->turn_cli.name, sizeof(c->turn_cli.name), "%s", CONF_TURN_QUICK_NAME);
}

static int parse_bool(const char *v, bool *out);

void conf_turn_defaults(struct turn_conf *t)
{
	memset(t, 0, sizeof(*t));
	t->tls_reload_ms = CONF_TURN_TLS_RELOAD;
	snprintf(t->realm, sizeof(t->realm), "%s", CONF_TURN_REALM);
	t->port_min = CONF_TURN_PORT_MIN;
	t->port_max = CONF_TURN_PORT_MAX;
	t->max_allocations = CONF_TURN_MAX_ALLOCATIONS;
	t->user_quota = CONF_TURN_USER_QUOTA;
	t->unauth_rate = CONF_TURN_UNAUTH_RATE;
	t->unauth_burst = CONF_TURN_UNAUTH_BURST;
	t->unauth_ip_rate = CONF_TURN_UNAUTH_IP_RATE;
	t->unauth_ip_burst = CONF_TURN_UNAUTH_IP_BURST;
	t->tls_rate = CONF_TURN_TLS_RATE;
	t->tls_burst = CONF_TURN_TLS_BURST;
	t->tls_ip_rate = CONF_TURN_TLS_IP_RATE;
	t->tls_ip_burst = CONF_TURN_TLS_IP_BURST;
	t->authf_rate = CONF_TURN_AUTH_FAIL_RATE;
	t->authf_burst = CONF_TURN_AUTH_FAIL_BURST;
	t->authf_ip_rate = CONF_TURN_AUTH_FAIL_IP_RATE;
	t->authf_ip_burst = CONF_TURN_AUTH_FAIL_IP_BURST;
	t->tcp_max_per_ip = CONF_TURN_TCP_MAX_PER_IP;
	t->tcp_max_conns = CONF_TURN_TCP_MAX_CONNECTIONS;
	t->tcp_auth_timeout_ms = CONF_TURN_TCP_AUTH_TIMEOUT;
	t->max_lifetime_ms = CONF_TURN_MAX_LIFETIME;
	t->nonce_lifetime_ms = CONF_TURN_NONCE_LIFETIME;
}

/* An IP address alone (no port) into a, port 0. 0 or -1. */
static int parse_ip(const char *s, union etr_sockaddr *a)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, s, &a->in.sin_addr) == 1) {
		a->in.sin_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, &a->in6.sin6_addr) == 1) {
		a->in6.sin6_family = AF_INET6;
		return 0;
	}
	return -1;
}

static bool ip_wildcard(const union etr_sockaddr *a)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;

	return a->sa.sa_family == AF_INET ? a->in.sin_addr.s_addr == INADDR_ANY
					  : memcmp(&a->in6.sin6_addr, &any6, 16) == 0;
}

/* Whether b has bits set past its prefix (10.0.0.1/8): then "did you mean
 * 10.0.0.0/8?" in buf, as a ban-file says. */
static bool cidr_host_bits(const struct conf_cidr *b, char *buf, size_t n)
{
	bool v4 = b->addr.sa.sa_family == AF_INET;
	uint8_t ip[16], net[16];
	size_t len = v4 ? 4 : 16;
	char a[INET6_ADDRSTRLEN];

	memcpy(ip, v4 ? (const void *)&b->addr.in.sin_addr : (const void *)&b->addr.in6.sin6_addr,
	       len);
	memcpy(net, ip, len);
	for (size_t i = 0; i < len; i++) {
		unsigned keep = b->bits > i * 8 ? b->bits - (unsigned)i * 8 : 0;

		if (keep < 8)
			net[i] &= (uint8_t)(0xff00u >> keep);
	}
	if (memcmp(ip, net, len) == 0)
		return false;
	inet_ntop(v4 ? AF_INET : AF_INET6, net, a, sizeof(a));
	snprintf(buf, n, "host bits set; did you mean %s/%u?", a, b->bits);
	return true;
}

int conf_cidr_parse(const char *s, struct conf_cidr *out)
{
	char ip[64];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	unsigned long bits;
	unsigned max;
	char *end;

	if (n == 0 || n >= sizeof(ip))
		return -1;
	memcpy(ip, s, n);
	ip[n] = '\0';
	if (parse_ip(ip, &out->addr) < 0)
		return -1;
	max = out->addr.sa.sa_family == AF_INET ? 32 : 128;
	if (!slash) {
		out->bits = (uint8_t)max;
		return 0;
	}
	if (slash[1] < '0' || slash[1] > '9')
		return -1;
	errno = 0;
	bits = strtoul(slash + 1, &end, 10);
	if (*end || errno || bits > max)
		return -1;
	out->bits = (uint8_t)bits;
	return 0;
}

/* A TURN listen address: ADDR:PORT, or ADDR alone for port 3478. */
static int turn_listen_parse(const char *v, union etr_sockaddr *a)
{
	char buf[80];

	if (addr_parse_numeric(v, a) == 0)
		return 0;
	if (parse_ip(v, a) < 0)
		return -1;
	snprintf(buf, sizeof(buf), strchr(v, ':') ? "[%s]:%d" : "%s:%d", v, CONF_TURN_PORT);
	return addr_parse_numeric(buf, a);
}

/* A number in [min, max]. */
static const char *turn_count(const char *v, uint32_t min, uint32_t max, uint32_t *out, char *buf,
			      size_t n)
{
	unsigned long long x;
	char *end;

	errno = 0;
	x = strtoull(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || x < min || x > max) {
		snprintf(buf, n, "expected a number from %u to %u", min, max);
		return buf;
	}
	*out = (uint32_t)x;
	return NULL;
}

/* The values of a [turn NAME] section's keys (and of --turn-KEY) that are
 * more than a number or a duration. Each returns NULL, or why v is wrong
 * (a constant, or buf). */
static const char turn_addr_why[] = "expected IP:PORT, [IPv6]:PORT, or an address alone for "
				    "port " CONF_STR(CONF_TURN_PORT);
static const char turn_port0_why[] = "port 0: expected a port from 1 to 65535";

/* ADDR:0 is one error, about its port. */
static bool port_zero(const char *v)
{
	size_t vlen = strlen(v);

	return vlen > 2 && strcmp(v + vlen - 2, ":0") == 0;
}

/* listen: ADDR:0 counts as given (port 0, which turn_finish passes over)
 * so that "listen: missing" and its consequences do not follow. */
static const char *tk_listen(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	(void)buf, (void)n;
	if (turn_listen_parse(v, &t->listen) < 0) {
		if (!port_zero(v))
			return turn_addr_why;
		memset(&t->listen, 0, sizeof(t->listen));
		t->listen_set = true;
		return turn_port0_why;
	}
	t->listen_set = true;
	return NULL;
}

static const char *tk_tcp_listen(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	(void)buf, (void)n;
	if (turn_listen_parse(v, &t->tcp_listen) < 0)
		return port_zero(v) ? turn_port0_why : turn_addr_why;
	t->tcp_set = true;
	return NULL;
}

static const char *tk_tls_listen(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	(void)buf, (void)n;
	if (turn_listen_parse(v, &t->tls_listen) < 0)
		return port_zero(v) ? turn_port0_why : turn_addr_why;
	t->tls_set = true;
	return NULL;
}

static const char *tk_path(char *dst, const char *v)
{
	if (strlen(v) >= CONF_PATH_MAX)
		return "path too long";
	strcpy(dst, v);
	return NULL;
}

static const char *tk_tls_cert(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	(void)buf, (void)n;
	return tk_path(t->tls_cert, v);
}

static const char *tk_tls_key(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	(void)buf, (void)n;
	return tk_path(t->tls_key, v);
}

static const char *tk_tls_reload(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	(void)buf, (void)n;
	if (conf_parse_duration(v, &t->tls_reload_ms, false) < 0)
		return "expected a duration above 0 such as 60s or 5m";
	t->tls_reload_set = true;
	return NULL;
}

static const char *tk_realm(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	size_t len = strlen(v);

	(void)buf, (void)n;
	if (len == 0 || len >= CONF_TURN_REALM_MAX)
		return "expected 1 to " CONF_STR(CONF_TURN_REALM_MAX) " characters less one";
	for (const char *p = v; *p; p++)
		if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\')
			return "expected printable ASCII without '\"' or '\\'";
	strcpy(t->realm, v);
	return NULL;
}

static const char *tk_relay_address(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	(void)buf, (void)n;
	if (parse_ip(v, &t->relay_addr) < 0)
		return "expected an IP address";
	t->relay_set = true;
	return NULL;
}

static const char *tk_public_ip(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	(void)buf, (void)n;
	if (parse_ip(v, &t->public_ip) < 0)
		return "expected an IP address";
	/* Clients would be told to send to 0.0.0.0. */
	if (ip_wildcard(&t->public_ip))
		return "expected the specific address clients reach, not 0.0.0.0 or ::";
	t->public_set = true;
	return NULL;
}

static const char *tk_ports(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	unsigned long lo, hi;
	char *end;

	(void)buf, (void)n;
	if (*v < '0' || *v > '9')
		return "expected MIN-MAX such as 49152-65535";
	lo = strtoul(v, &end, 10);
	if (*end != '-' || end[1] < '0' || end[1] > '9')
		return "expected MIN-MAX such as 49152-65535";
	hi = strtoul(end + 1, &end, 10);
	if (*end || lo < 1024 || hi > 65535 || lo > hi)
		return "expected MIN-MAX within 1024-65535 with MIN <= MAX";
	t->port_min = (uint16_t)lo;
	t->port_max = (uint16_t)hi;
	t->ports_set = true;
	return NULL;
}

static const char *tk_peer(struct turn_conf *t, bool allow, const char *v, char *buf, size_t n)
{
	struct conf_cidr *list = allow ? t->allow : t->deny;
	unsigned *cnt = allow ? &t->nallow : &t->ndeny;

	if (*cnt == CONF_TURN_PEERS_MAX)
		return "too many blocks (at most " CONF_STR(CONF_TURN_PEERS_MAX) ")";
	if (conf_cidr_parse(v, &list[*cnt]) < 0)
		return "expected an address or a CIDR block such as 10.0.0.0/8";
	if (cidr_host_bits(&list[*cnt], buf, n))
		return buf;
	list[*cnt].line = 0;
	(*cnt)++;
	return NULL;
}

static const char *tk_allow_peer(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	return tk_peer(t, true, v, buf, n);
}

static const char *tk_deny_peer(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	return tk_peer(t, false, v, buf, n);
}

static const char *tk_strict_expiry(struct turn_conf *t, const char *v, char *buf, size_t n)
{
	(void)buf, (void)n;
	return parse_bool(v, &t->strict_expiry) < 0 ? "expected yes or no" : NULL;
}

/* A [turn NAME] section's keys, in the order an unknown key's message
 * lists them: a function, or a number (min..max) or a duration in ms
 * (min..max, why) at off in struct turn_conf; line_off: where the line
 * that set it is kept (0: nowhere). */
#define TK_OFF(f) offsetof(struct turn_conf, f)
static const struct turn_key_def {
	const char *name;
	const char *(*fn)(struct turn_conf *t, const char *v, char *buf, size_t n);
	size_t off;
	bool duration;
	uint64_t min, max;
	const char *why;
	size_t line_off;
} turn_keys[] = {
    {"listen", tk_listen},
    {"tcp-listen", tk_tcp_listen},
    {"tls-listen", tk_tls_listen},
    {"tls-cert", tk_tls_cert, .line_off = TK_OFF(tls_cert_line)},
    {"tls-key", tk_tls_key, .line_off = TK_OFF(tls_key_line)},
    {"tls-reload-interval", tk_tls_reload, .line_off = TK_OFF(tls_reload_line)},
    {"realm", tk_realm},
    {"relay-address", tk_relay_address},
    {"public-ip", tk_public_ip},
    {"ports", tk_ports, .line_off = TK_OFF(ports_line)},
    {"max-allocations", NULL, TK_OFF(max_allocations), false, 1, 65536},
    {"user-quota", NULL, TK_OFF(user_quota), false, 1, 65536},
    {"unauth-rate", NULL, TK_OFF(unauth_rate), false, 1, 1000000},
    {"unauth-burst", NULL, TK_OFF(unauth_burst), false, 1, 1000000},
    {"unauth-ip-rate", NULL, TK_OFF(unauth_ip_rate), false, 1, 1000000},
    {"unauth-ip-burst", NULL, TK_OFF(unauth_ip_burst), false, 1, 1000000},
    {"tls-handshake-rate", NULL, TK_OFF(tls_rate), false, 1, 1000000},
    {"tls-handshake-burst", NULL, TK_OFF(tls_burst), false, 1, 1000000},
    {"tls-handshake-ip-rate", NULL, TK_OFF(tls_ip_rate), false, 1, 1000000},
    {"tls-handshake-ip-burst", NULL, TK_OFF(tls_ip_burst), false, 1, 1000000},
    {"auth-fail-rate", NULL, TK_OFF(authf_rate), false, 1, 1000000},
    {"auth-fail-burst", NULL, TK_OFF(authf_burst), false, 1, 1000000},
    {"auth-fail-ip-rate", NULL, TK_OFF(authf_ip_rate), false, 1, 1000000},
    {"auth-fail-ip-burst", NULL, TK_OFF(authf_ip_burst), false, 1, 1000000},
    {"tcp-max-per-ip", NULL, TK_OFF(tcp_max_per_ip), false, 1, 65536},
    {"tcp-max-connections", NULL, TK_OFF(tcp_max_conns), false, 1,
     CONF_TURN_TCP_MAX_CONNECTIONS_MAX},
    {"tcp-auth-timeout", NULL, TK_OFF(tcp_auth_timeout_ms), true, 100, 30000,
     "expected a duration from 100ms to 30s such as 10s"},
    {"max-lifetime", NULL, TK_OFF(max_lifetime_ms), true, 1000, 86400 * 1000ull,
     "expected a duration from 1s to 24h such as 3600 or 1h"},
    {"nonce-lifetime", NULL, TK_OFF(nonce_lifetime_ms), true, 1000, 86400 * 1000ull,
     "expected a duration from 1s to 24h such as 600 or 10m"},
    {"allow-peer", tk_allow_peer},
    {"deny-peer", tk_deny_peer},
    {"strict-expiry", tk_strict_expiry},
};

static const struct turn_key_def *turn_key_find(const char *key)
{
	for (size_t i = 0; i < sizeof(turn_keys) / sizeof(turn_keys[0]); i++)
		if (strcmp(turn_keys[i].name, key) == 0)
			return &turn_keys[i];
	return NULL;
}

const char *conf_turn_key(struct turn_conf *t, const char *key, const char *v, char *buf, size_t n)
{
	const struct turn_key_def *k = turn_key_find(key);
	char *at;

	if (!k) {
		snprintf(buf, n, "unknown key");
		return buf;
	}
	if (k->fn)
		return k->fn(t, v, buf, n);
	at = (char *)t + k->off;
	if (k->duration) {
		uint64_t ms;

		if (conf_parse_duration(v, &ms, false) < 0 || ms < k->min || ms > k->max)
			return k->why;
		memcpy(at, &ms, sizeof(ms));
		return NULL;
	}
	return turn_count(v, (uint32_t)k->min, (uint32_t)k->max, (uint32_t *)(void *)at, buf, n);
}

void conf_sni_defaults(struct sni_conf *s)
{
	memset(s, 0, sizeof(*s));
	s->preread_timeout_ms = CONF_SNI_PREREAD_TIMEOUT;
	s->connect_timeout_ms = CONF_SNI_CONNECT_TIMEOUT;
	s->idle_timeout_ms = CONF_SNI_IDLE_TIMEOUT;
	s->send_timeout_ms = CONF_SNI_SEND_TIMEOUT;
	s->max_connections = CONF_SNI_MAX_CONNECTIONS;
	s->max_per_ip = CONF_SNI_MAX_PER_IP;
	s->max_preread = CONF_SNI_MAX_PREREAD;
}

const char *conf_sni_route_parse(const char *v, char sep, struct sni_route_conf *r)
{
	const char *e = strchr(v, sep), *opt;
	char hp[ADDR_HOSTLEN + 8];
	size_t n;

	memset(r, 0, sizeof(*r));
	if (sep == ' ' && !e)
		e = strchr(v, '\t');
	if (!e || e == v)
		return sep == '=' ? "expected NAME=HOST:PORT[,proxy-v2]"
				  : "expected NAME HOST:PORT [proxy-v2]";
	n = (size_t)(e - v);
	if (n > CONF_SNI_NAME_MAX)
		return "route name too long";
	memcpy(r->name, v, n);
	r->name[n] = '\0';
	for (char *p = r->name; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	if (!addr_host_pattern_valid(r->name))
		return "route name: expected a host name or *.suffix (letters, digits, '-', "
		       "dots)";
	v = e + 1;
	while (sep == ' ' && (*v == ' ' || *v == '\t'))
		v++;
	opt = v + strcspn(v, sep == '=' ? "," : " \t");
	n = (size_t)(opt - v);
	if (n == 0 || n >= sizeof(hp))
		return "expected HOST:PORT after the name";
	memcpy(hp, v, n);
	hp[n] = '\0';
	if (addr_split(hp, r->host, &r->port, -1) < 0 || r->port == 0)
		return "expected HOST:PORT after the name";
	while (*opt == ',' || *opt == ' ' || *opt == '\t')
		opt++;
	if (*opt == '\0')
		return NULL;
	if (strcmp(opt, "proxy-v2") != 0)
		return "the only route option is proxy-v2";
	r->proxy_v2 = true;
	return NULL;
}

int conf_parse_duration(const char *s, uint64_t *ms, bool allow_zero)
{
	static const struct {
		const char *suffix;
		uint64_t mul;
	} units[] = {{"", 1000}, {"s", 1000}, {"ms", 1}, {"m", 60000}, {"h", 3600000}};
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || (v == 0 && !allow_zero))
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			/* Cap at a year: anything longer is a typo. */
			if (v > 366ull * 24 * 3600 * 1000 / units[i].mul)
				return -1;
			*ms = v * units[i].mul;
			return 0;
		}
	}
	return -1;
}

/* Per relay and per layer: the first master of a layer replaces the list
 * it inherited, later ones add to it. */
struct layer {
	bool masters_replaced;
	bool prbe_replaced;	     /* the same for prbe-listen */
	bool control_allow_replaced; /* ... and control-allow-upstream */
	bool xdp_replaced;	     /* ... and xdp-interface */
	unsigned line;		     /* of the key being applied; 0: command line */
};

struct key;
typedef const char *(*key_set_fn)(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				  const char *v, struct layer *ly);

enum key_scope { SCOPE_GLOBAL, SCOPE_RELAY };

struct key {
	const char *name;
	enum key_scope scope;
	bool flag;	/* no value on the command line; yes/no in the file */
	size_t off;	/* field for the generic setters */
	key_set_fn set; /* returns NULL, or why the value is wrong */
};

/* A tag goes into "heartbeat <tag>\n": printable, no spaces or backslashes.
 * TAG_LEN_MAX spells CONF_TAG_MAX - 1 for the message. */
#define TAG_LEN_MAX 63
_Static_assert(TAG_LEN_MAX == CONF_TAG_MAX - 1, "the tag's length in the message");
static bool valid_tag(const char *s, bool may_be_empty)
{
	size_t n = strlen(s);

	if ((n == 0 && !may_be_empty) || n >= CONF_TAG_MAX)
		return false;
	for (; *s; s++)
		if (*s <= 0x20 || *s >= 0x7f || *s == '\\' || *s == '"')
			return false;
	return true;
}

static int parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};

	for (size_t i = 0; i < 4; i++) {
		if (strcmp(v, yes[i]) == 0)
			return *out = true, 0;
		if (strcmp(v, no[i]) == 0)
			return *out = false, 0;
	}
	return -1;
}

static const char *set_listen(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			      const char *v, struct layer *ly)
{
	return addr_parse_numeric(v, &r->listen) < 0 ? "expected IP:PORT or [IPv6]:PORT" : NULL;
}

static const char *set_upstream(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				const char *v, struct layer *ly)
{
	return addr_split(v, r->upstream_host, &r->upstream_port, -1) < 0 ? "expected HOST:PORT"
									  : NULL;
}

static const char *set_master(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			      const char *v, struct layer *ly)
{
	struct conf_master m;

	if (addr_split(v, m.host, &m.port, CONF_MASTER_PORT) < 0)
		return "expected HOST or HOST:PORT";
	if (!ly->masters_replaced)
		r->nmasters = 0, ly->masters_replaced = true;
	r->masters_set = true;
	if (r->nmasters == CONF_MASTERS_MAX)
		return "too many masters (at most " CONF_STR(CONF_MASTERS_MAX) ")";
	m.line = ly->line;
	r->masters[r->nmasters++] = m;
	return NULL;
}

static const char *set_game(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			    const char *v, struct layer *ly)
{
	for (size_t i = 0; i < NGAMES; i++) {
		if (strcmp(v, games[i].name) == 0) {
			strcpy(r->game, games[i].short_name);
			return NULL;
		}
	}
	return "expected et, rtcw, q3 or dp";
}

static const char *set_tag(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			   const char *v, struct layer *ly)
{
	static const char why[] = "expected a tag of at most " CONF_STR(
	    TAG_LEN_MAX) " printable characters, without spaces, backslashes or double quotes";
	bool flat = k->off == offsetof(struct relay_conf, flatline);

	if (!valid_tag(v, flat))
		return why;
	strcpy((char *)r + k->off, v);
	if (flat)
		r->flatline_set = true;
	else
		r->heartbeat_set = true;
	return NULL;
}

static const char *set_duration(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				const char *v, struct layer *ly)
{
	return conf_parse_duration(v, (uint64_t *)(void *)((char *)r + k->off), false) < 0
		   ? "expected a duration above 0 such as 30s, 500ms or 5m"
		   : NULL;
}

/* A count in [1, 100000] into the uint32_t at k->off. */
static const char *set_count(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			     const char *v, struct layer *ly)
{
	unsigned long long n;
	char *end;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || n == 0 || n > 100000)
		return "expected a number from 1 to 100000";
	*(uint32_t *)(void *)((char *)r + k->off) = (uint32_t)n;
	return NULL;
}

static const char *set_cache(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			     const char *v, struct layer *ly)
{
	return conf_parse_duration(v, &r->query_cache_ms, true) < 0
		   ? "expected a duration such as 1s or 500ms, 0 for no cache"
		   : NULL;
}

static const char *set_stale(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			     const char *v, struct layer *ly)
{
	return conf_parse_duration(v, &r->query_cache_stale_ms, true) < 0 ||
		       r->query_cache_stale_ms > 60000
		   ? "expected a duration from 0 to 60s such as 5s"
		   : NULL;
}

/* A byte count with an optional k (1024) or M (1048576) into the uint32_t
 * at k->off, within [min, max] of the key. */
static const char *set_bytes(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			     const char *v, struct layer *ly)
{
	bool reply = k->off == offsetof(struct relay_conf, query_cache_max_reply);
	unsigned long long n, min = reply ? 64 : 1, max = reply ? 65535 : 1ull << 30;
	char *end;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (*end == 'k' && end[1] == '\0')
		n <<= 10, end++;
	else if (*end == 'M' && end[1] == '\0')
		n <<= 20, end++;
	if (*v < '0' || *v > '9' || *end || errno || n < min || n > max)
		return reply ? "expected a number of bytes from 64 to 65535"
			     : "expected a number of bytes from 1 to 1024M, such as 256k";
	*(uint32_t *)(void *)((char *)r + k->off) = (uint32_t)n;
	return NULL;
}

static const char *set_ban_file(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				const char *v, struct layer *ly)
{
	if (strlen(v) >= sizeof(c->ban_file))
		return "path too long";
	strcpy(c->ban_file, v);
	return NULL;
}

static const char *set_ports(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			     const char *v, struct layer *ly)
{
	unsigned long lo, hi;
	char *end;

	if (*v < '0' || *v > '9')
		return "expected MIN-MAX such as 40000-44999";
	lo = strtoul(v, &end, 10);
	if (*end != '-' || end[1] < '0' || end[1] > '9')
		return "expected MIN-MAX such as 40000-44999";
	hi = strtoul(end + 1, &end, 10);
	if (*end || lo < 1024 || hi > 65535 || lo > hi)
		return "expected MIN-MAX within 1024-65535 with MIN <= MAX";
	r->port_min = (uint16_t)lo;
	r->port_max = (uint16_t)hi;
	return NULL;
}

static const char *set_backend(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			       const char *v, struct layer *ly)
{
	if (strcmp(v, "auto") == 0)
		c->backend = CONF_BACKEND_AUTO;
	else if (strcmp(v, "io_uring") == 0)
		c->backend = CONF_BACKEND_URING;
	else if (strcmp(v, "epoll") == 0)
		c->backend = CONF_BACKEND_EPOLL;
	else
		return "expected auto, io_uring or epoll";
	return NULL;
}

static const char *set_workers(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			       const char *v, struct layer *ly)
{
	unsigned long n;
	char *end;

	if (strcmp(v, "auto") == 0) {
		c->workers = CONF_WORKERS_AUTO;
		return NULL;
	}
	errno = 0;
	n = strtoul(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || n < 1 || n > CONF_WORKERS_MAX)
		return "expected auto or a number from 1 to " CONF_STR(CONF_WORKERS_MAX);
	c->workers = (unsigned)n;
	return NULL;
}

static const char *set_bool(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			    const char *v, struct layer *ly)
{
	return parse_bool(v, (bool *)(void *)((char *)c + k->off)) < 0 ? "expected yes or no"
								       : NULL;
}

static const char *set_log_time(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				const char *v, struct layer *ly)
{
	bool b;

	if (strcmp(v, "auto") == 0)
		c->log_time = CONF_LOG_TIME_AUTO;
	else if (parse_bool(v, &b) == 0)
		c->log_time = b ? CONF_LOG_TIME_YES : CONF_LOG_TIME_NO;
	else
		return "expected yes, no or auto";
	return NULL;
}

static const char *set_ops_listen(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				  const char *v, struct layer *ly)
{
	if (addr_parse_numeric(v, &c->ops_listen) < 0)
		return "expected IP:PORT or [IPv6]:PORT";
	c->ops_enabled = true;
	return NULL;
}

static const char *set_drain(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			     const char *v, struct layer *ly)
{
	return conf_parse_duration(v, &c->drain_timeout_ms, true) < 0
		   ? "expected a duration such as 0, 30s or 5m"
		   : NULL;
}

static const char *set_prbe(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			    const char *v, struct layer *ly)
{
	return parse_bool(v, &r->prbe) < 0 ? "expected yes or no" : NULL;
}

static uint16_t port_of(const union etr_sockaddr *a)
{
	return ntohs(a->sa.sa_family == AF_INET ? a->in.sin_port : a->in6.sin6_port);
}

/* Repeatable: the first of a layer replaces the list it inherited. */
static const char *set_prbe_listen(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				   const char *v, struct layer *ly)
{
	union etr_sockaddr a;

	if (addr_parse_numeric(v, &a) < 0 || port_of(&a) == 0)
		return "expected IP:PORT or [IPv6]:PORT with a port above 0";
	if (!ly->prbe_replaced)
		c->prbe.nlisten = 0, ly->prbe_replaced = true;
	if (c->prbe.nlisten == CONF_PRBE_LISTEN_MAX)
		return "too many echo ports (at most " CONF_STR(CONF_PRBE_LISTEN_MAX) ")";
	c->prbe.listen_line[c->prbe.nlisten] = ly->line;
	c->prbe.listen[c->prbe.nlisten++] = a;
	return NULL;
}

/* prbe-max-size, prbe-rate, prbe-burst, prbe-listener-rate, prbe-listener-burst. */
static const char *set_prbe_number(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				   const char *v, struct layer *ly)
{
	bool size = k->off == offsetof(struct etr_conf, prbe.max_size);
	unsigned long long n, min = size ? 4 : 1, max = size ? 65507 : 100000;
	char *end;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || n < min || n > max)
		return size ? "expected a number of bytes from 4 to 65507"
			    : "expected a number from 1 to 100000";
	*(uint32_t *)(void *)((char *)c + k->off) = (uint32_t)n;
	return NULL;
}

static const char *set_sni_listen(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				  const char *v, struct layer *ly)
{
	if (addr_parse_numeric(v, &c->sni_cli.listen) < 0)
		return "expected IP:PORT or [IPv6]:PORT";
	c->sni_cli.listen_set = true;
	return NULL;
}

static const char *set_sni_route(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				 const char *v, struct layer *ly)
{
	struct sni_route_conf rc;
	const char *why = conf_sni_route_parse(v, '=', &rc);

	if (why)
		return why;
	if (c->sni_cli.nroutes == CONF_SNI_ROUTES_MAX)
		return "too many routes (at most " CONF_STR(CONF_SNI_ROUTES_MAX) ")";
	rc.line = ly->line;
	c->sni_cli.routes[c->sni_cli.nroutes++] = rc;
	return NULL;
}

/* turn-KEY: KEY of the quick-start TURN listener. */
static const char *set_turn(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			    const char *v, struct layer *ly)
{
	static char buf[128];

	(void)r;
	(void)ly;
	c->turn_cli_set = true;
	return conf_turn_key(&c->turn_cli, k->name + 5, v, buf, sizeof(buf));
}

/* control-url: http:// or https://, visible ASCII; trailing '/' dropped so
 * the service paths join it with one. */
static const char *set_control_url(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				   const char *v, struct layer *ly)
{
	size_t n = strlen(v), hlen;
	const char *host;

	if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
		return "expected a URL starting with http:// or https://";
	if (n >= sizeof(c->control_url))
		return "URL too long";
	for (const char *s = v; *s; s++)
		if (*s <= 0x20 || *s >= 0x7f)
			return "expected a URL of visible ASCII characters";
	if (url_host(v, &host, &hlen) < 0)
		return "expected a host after http:// or https:// (a '[' closed by ']')";
	while (n > 8 && v[n - 1] == '/')
		n--;
	memcpy(c->control_url, v, n);
	c->control_url[n] = '\0';
	return NULL;
}

/* control-max-answer: bytes, with k or M. */
static const char *set_control_max_answer(struct etr_conf *c, struct relay_conf *r,
					  const struct key *k, const char *v, struct layer *ly)
{
	unsigned long long n;
	char *end;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (*end == 'k' && end[1] == '\0')
		n <<= 10, end++;
	else if (*end == 'M' && end[1] == '\0')
		n <<= 20, end++;
	if (*v < '0' || *v > '9' || *end || errno || n < CONF_CONTROL_MAX_ANSWER_MIN ||
	    n > CONF_CONTROL_MAX_ANSWER_MAX)
		return "expected a number of bytes from 4k to 64M, such as 2M";
	c->control_max_answer = (uint32_t)n;
	return NULL;
}

/* control-allow-upstream: a block, repeatable (a layer replaces the list
 * of the one before). */
static const char *set_control_allow(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				     const char *v, struct layer *ly)
{
	static char buf[128];
	struct conf_cidr b;

	if (conf_cidr_parse(v, &b) < 0)
		return "expected an address or a CIDR block such as 10.8.0.0/16";
	if (cidr_host_bits(&b, buf, sizeof(buf)))
		return buf;
	if (!ly->control_allow_replaced)
		c->ncontrol_allow = 0, ly->control_allow_replaced = true;
	if (c->ncontrol_allow == CONF_CONTROL_ALLOW_MAX)
		return "too many blocks (at most " CONF_STR(CONF_CONTROL_ALLOW_MAX) ")";
	b.line = ly->line;
	c->control_allow[c->ncontrol_allow++] = b;
	return NULL;
}

/* xdp-interface: an interface name, repeatable (a layer replaces the list
 * it inherited). Whether it exists is the start's and -t's check. */
static const char *set_xdp_interface(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				     const char *v, struct layer *ly)
{
	size_t len = strlen(v);

	if (len == 0 || len >= CONF_XDP_IFNAME || strcmp(v, ".") == 0 || strcmp(v, "..") == 0 ||
	    strpbrk(v, "/: \t"))
		return "expected an interface name such as eth0 (at most 15 characters)";
	if (!ly->xdp_replaced)
		c->xdp.n = 0, ly->xdp_replaced = true;
	for (unsigned i = 0; i < c->xdp.n; i++)
		if (strcmp(c->xdp.iface[i], v) == 0)
			return "interface given twice";
	if (c->xdp.n == CONF_XDP_IFACES_MAX)
		return "too many interfaces (at most " CONF_STR(CONF_XDP_IFACES_MAX) ")";
	memcpy(c->xdp.iface[c->xdp.n], v, len + 1);
	c->xdp.line[c->xdp.n++] = ly->line;
	return NULL;
}

/* xdp-rate, xdp-burst: packets, 1 to 1000000. */
static const char *set_xdp_number(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				  const char *v, struct layer *ly)
{
	unsigned long long n;
	char *end;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || n < 1 || n > 1000000)
		return "expected a number of packets from 1 to 1000000";
	*(uint32_t *)(void *)((char *)c + k->off) = (uint32_t)n;
	return NULL;
}

/* A path into the CONF_PATH_MAX array at k->off of struct etr_conf. */
static const char *set_gpath(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			     const char *v, struct layer *ly)
{
	if (strlen(v) >= CONF_PATH_MAX)
		return "path too long";
	strcpy((char *)c + k->off, v);
	return NULL;
}

/* state-directory: absolute, as the credential's path is logged and the
 * daemon's working directory is no place to keep it. */
static const char *set_state_dir(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				 const char *v, struct layer *ly)
{
	if (v[0] != '/')
		return "expected an absolute path";
	return set_gpath(c, r, k, v, ly);
}

/* A duration above 0 into the uint64_t at k->off of struct etr_conf. */
static const char *set_gduration(struct etr_conf *c, struct relay_conf *r, const struct key *k,
				 const char *v, struct layer *ly)
{
	return conf_parse_duration(v, (uint64_t *)(void *)((char *)c + k->off), false) < 0
		   ? "expected a duration above 0 such as 30s, 500ms or 5m"
		   : NULL;
}

#define RK(field) offsetof(struct relay_conf, field)
#define GK(field) offsetof(struct etr_conf, field)
static const struct key keys[] = {
    {"listen", SCOPE_RELAY, false, 0, set_listen},
    {"upstream", SCOPE_RELAY, false, 0, set_upstream},
    {"master", SCOPE_RELAY, false, 0, set_master},
    {"game", SCOPE_RELAY, false, 0, set_game},
    {"heartbeat", SCOPE_RELAY, false, RK(heartbeat), set_tag},
    {"flatline", SCOPE_RELAY, false, RK(flatline), set_tag},
    {"heartbeat-interval", SCOPE_RELAY, false, RK(heartbeat_interval_ms), set_duration},
    {"probe-timeout", SCOPE_RELAY, false, RK(probe_timeout_ms), set_duration},
    {"session-timeout", SCOPE_RELAY, false, RK(session_timeout_ms), set_duration},
    {"max-sessions", SCOPE_RELAY, false, RK(max_sessions), set_count},
    {"session-ports", SCOPE_RELAY, false, 0, set_ports},
    {"sessions-per-ip", SCOPE_RELAY, false, RK(sessions_per_ip), set_count},
    {"unassured-timeout", SCOPE_RELAY, false, RK(unassured_timeout_ms), set_duration},
    {"ip-session-rate", SCOPE_RELAY, false, RK(ip_session_rate), set_count},
    {"session-rate", SCOPE_RELAY, false, RK(session_rate), set_count},
    {"master-queries", SCOPE_RELAY, false, RK(master_queries), set_count},
    {"ip-query-burst", SCOPE_RELAY, false, RK(ip_query_burst), set_count},
    {"ip-query-rate", SCOPE_RELAY, false, RK(ip_query_rate), set_count},
    {"server-query-burst", SCOPE_RELAY, false, RK(server_query_burst), set_count},
    {"server-query-rate", SCOPE_RELAY, false, RK(server_query_rate), set_count},
    {"query-cache", SCOPE_RELAY, false, 0, set_cache},
    {"query-cache-stale", SCOPE_RELAY, false, 0, set_stale},
    {"query-cache-rate", SCOPE_RELAY, false, RK(query_cache_rate), set_count},
    {"query-cache-bytes", SCOPE_RELAY, false, RK(query_cache_bytes), set_bytes},
    {"query-cache-max-reply", SCOPE_RELAY, false, RK(query_cache_max_reply), set_bytes},
    {"prbe", SCOPE_RELAY, false, 0, set_prbe},
    {"ban-file", SCOPE_GLOBAL, false, 0, set_ban_file},
    {"backend", SCOPE_GLOBAL, false, 0, set_backend},
    {"gso", SCOPE_GLOBAL, false, GK(gso), set_bool},
    {"workers", SCOPE_GLOBAL, false, 0, set_workers},
    {"ops-listen", SCOPE_GLOBAL, false, 0, set_ops_listen},
    {"ops-allow-public", SCOPE_GLOBAL, true, GK(ops_allow_public), set_bool},
    {"drain-timeout", SCOPE_GLOBAL, false, 0, set_drain},
    {"debug", SCOPE_GLOBAL, true, GK(debug), set_bool},
    {"log-time", SCOPE_GLOBAL, false, 0, set_log_time},
    {"prbe-listen", SCOPE_GLOBAL, false, 0, set_prbe_listen},
    {"prbe-max-size", SCOPE_GLOBAL, false, GK(prbe.max_size), set_prbe_number},
    {"prbe-rate", SCOPE_GLOBAL, false, GK(prbe.rate), set_prbe_number},
    {"prbe-burst", SCOPE_GLOBAL, false, GK(prbe.burst), set_prbe_number},
    {"prbe-listener-rate", SCOPE_GLOBAL, false, GK(prbe.listener_rate), set_prbe_number},
    {"prbe-listener-burst", SCOPE_GLOBAL, false, GK(prbe.listener_burst), set_prbe_number},
    {"xdp-interface", SCOPE_GLOBAL, false, 0, set_xdp_interface},
    {"xdp-rate", SCOPE_GLOBAL, false, GK(xdp.rate), set_xdp_number},
    {"xdp-burst", SCOPE_GLOBAL, false, GK(xdp.burst), set_xdp_number},
    {"sni-listen", SCOPE_GLOBAL, false, 0, set_sni_listen},
    {"sni-route", SCOPE_GLOBAL, false, 0, set_sni_route},
    {"turn-listen", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-tcp-listen", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-tls-listen", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-tls-cert", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-tls-key", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-tls-reload-interval", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-realm", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-relay-address", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-public-ip", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-ports", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-max-allocations", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-user-quota", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-unauth-rate", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-unauth-burst", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-unauth-ip-rate", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-unauth-ip-burst", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-tls-handshake-rate", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-tls-handshake-burst", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-tls-handshake-ip-rate", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-tls-handshake-ip-burst", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-auth-fail-rate", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-auth-fail-burst", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-auth-fail-ip-rate", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-auth-fail-ip-burst", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-tcp-max-per-ip", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-tcp-max-connections", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-tcp-auth-timeout", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-max-lifetime", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-nonce-lifetime", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-allow-peer", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-deny-peer", SCOPE_GLOBAL, false, 0, set_turn},
    {"turn-strict-expiry", SCOPE_GLOBAL, false, 0, set_turn},
    {"control-url", SCOPE_GLOBAL, false, 0, set_control_url},
    {"control-bootstrap-token-file", SCOPE_GLOBAL, false, GK(control_bootstrap_file), set_gpath},
    {"state-directory", SCOPE_GLOBAL, false, GK(state_dir), set_state_dir},
    {"control-interval", SCOPE_GLOBAL, false, GK(control_interval_ms), set_gduration},
    {"control-timeout", SCOPE_GLOBAL, false, GK(control_timeout_ms), set_gduration},
    {"control-backoff-min", SCOPE_GLOBAL, false, GK(control_backoff_min_ms), set_gduration},
    {"control-backoff-max", SCOPE_GLOBAL, false, GK(control_backoff_max_ms), set_gduration},
    {"control-max-answer", SCOPE_GLOBAL, false, 0, set_control_max_answer},
    {"control-allow-upstream", SCOPE_GLOBAL, false, 0, set_control_allow},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))
_Static_assert(NKEYS <= CONF_KEYS_MAX, "raise CONF_KEYS_MAX");

static const struct key *key_find(const char *name)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

static void err_add(struct conf_errors *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void err_add(struct conf_errors *e, const char *fmt, ...)
{
	va_list ap;
	int n;

	e->count++;
	if (e->len >= sizeof(e->text) - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(e->text + e->len, sizeof(e->text) - e->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	e->len += (size_t)n;
	if (e->len < sizeof(e->text) - 1) {
		e->text[e->len++] = '\n';
		e->text[e->len] = '\0';
	} else {
		e->len = sizeof(e->text) - 1;
	}
}

/* Apply one key; *why is set when the value is wrong. */
static const char *apply(struct etr_conf *c, struct relay_conf *r, const struct key *k,
			 const char *v, struct layer *ly)
{
	r->key_line[k - keys] = ly->line ? ly->line : CONF_LINE_CLI;
	return k->set(c, r, k, v, ly);
}

/* Where the first of keys a, b that is set in r was set, for an error about
 * the two: "FILE:LINE", "etrelay: command line", or `where` for defaults. */
static const char *key_origin(const struct etr_conf *c, const struct relay_conf *r, const char *a,
			      const char *b, const char *where, char *buf, size_t n)
{
	const char *names[2] = {a, b};

	for (unsigned i = 0; i < 2 && names[i]; i++) {
		const struct key *k = key_find(names[i]);
		unsigned line = k ? r->key_line[k - keys] : 0;

		if (line == CONF_LINE_CLI) {
			snprintf(buf, n, "etrelay: command line");
			return buf;
		}
		if (line) {
			snprintf(buf, n, "%s:%u", c->path ? c->path : "", line);
			return buf;
		}
	}
	return where;
}

const char *conf_key_where(const struct etr_conf *c, const char *key, char *buf, size_t n)
{
	return key_origin(c, &c->base, key, NULL, "etrelay", buf, n);
}

const char *conf_turn_tls_where(const struct etr_conf *c, const struct turn_conf *t,
				const char *msg, char *buf, size_t n)
{
	size_t kl = strlen(t->tls_key), cl = strlen(t->tls_cert);
	unsigned line = 0;

	/* The longer path first: one may be a prefix of the other. */
	if (kl >= cl && kl && strncmp(msg, t->tls_key, kl) == 0)
		line = t->tls_key_line;
	else if (cl && strncmp(msg, t->tls_cert, cl) == 0)
		line = t->tls_cert_line;
	else if (kl && strncmp(msg, t->tls_key, kl) == 0)
		line = t->tls_key_line;
	if (!line)
		return NULL;
	snprintf(buf, n, "%s:%u", c->path ? c->path : "", line);
	return buf;
}

/* Where line (of a key that can repeat) is: "FILE:LINE", or "etrelay"
 * for 0, the command line. */
static const char *line_origin(const struct etr_conf *c, unsigned line, char *buf, size_t n)
{
	if (!line)
		return "etrelay";
	snprintf(buf, n, "%s:%u", c->path ? c->path : "", line);
	return buf;
}

/* Command-line only options. */
enum { OPT_CONFIG = 'c', OPT_TEST = 't', OPT_HELP = 'h', OPT_VERSION = 'V', OPT_PROBE = 1000 };

int conf_parse_args(struct etr_conf *c, int argc, char **argv, struct conf_errors *e)
{
	struct option longopts[NKEYS + 6];
	struct etr_conf scratch;
	struct layer cli_layer;
	size_t n = 0;
	int opt;

	for (size_t i = 0; i < NKEYS; i++)
		longopts[n++] =
		    (struct option){keys[i].name, keys[i].flag ? no_argument : required_argument,
				    NULL, 256 + (int)i};
	longopts[n++] = (struct option){"config", required_argument, NULL, OPT_CONFIG};
	longopts[n++] = (struct option){"test", no_argument, NULL, OPT_TEST};
	longopts[n++] = (struct option){"probe", no_argument, NULL, OPT_PROBE};
	longopts[n++] = (struct option){"help", no_argument, NULL, OPT_HELP};
	longopts[n++] = (struct option){"version", no_argument, NULL, OPT_VERSION};
	longopts[n] = (struct option){NULL, 0, NULL, 0};

	/* Values are checked at once against a scratch copy, so a bad flag
	 * fails before any file is read; they are applied in conf_finish. */
	conf_defaults(&scratch);
	memset(&cli_layer, 0, sizeof(cli_layer)); /* every list replaced anew, line 0 */
	optind = 0; /* full reset, so the parser can run more than once */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":c:thV", longopts, NULL)) != -1) {
		const char *arg = argv[optind - 1];
		const struct key *k;
		const char *why;

		switch (opt) {
		case OPT_CONFIG:
			c->path = optarg;
			c->path_given = true;
			continue;
		case OPT_TEST:
			c->test = true;
			continue;
		case OPT_PROBE:
			c->probe = true;
			continue;
		case OPT_HELP:
			c->help = true;
			continue;
		case OPT_VERSION:
			c->version = true;
			continue;
		case ':':
			err_add(e, "etrelay: %s: missing value", argv[optind - 1]);
			return -1;
		case '?':
			if (strncmp(arg, "--", 2) == 0 && strchr(arg, '='))
				err_add(e, "etrelay: %.*s: takes no value (see --help)",
					(int)(strchr(arg, '=') - arg), arg);
			else if (strncmp(arg, "--", 2) == 0)
				err_add(e, "etrelay: %s: unknown option (see --help)", arg);
			else if (optopt > 0x20 && optopt < 0x7f)
				/* A short option inside a cluster ("-zV") has not
				 * advanced optind: name it by its letter. */
				err_add(e, "etrelay: -%c: unknown option (see --help)", optopt);
			else
				err_add(e, "etrelay: %s: unknown option (see --help)", arg);
			return -1;
		default:
			break;
		}
		k = &keys[opt - 256];
		if (c->ncli == CONF_CLI_MAX) {
			err_add(e, "etrelay: too many options");
			return -1;
		}
		why = apply(&scratch, &scratch.base, k, k->flag ? "yes" : optarg, &cli_layer);
		if (why) {
			err_add(e, "etrelay: --%s: invalid value '%s' (%s)", k->name, optarg, why);
			return -1;
		}
		c->cli[c->ncli++] = (struct conf_cli){k->name, k->flag ? NULL : optarg};
		if (strcmp(k->name, "upstream") == 0)
			c->cli_upstream = true;
		if (strcmp(k->name, "sni-listen") == 0 || strcmp(k->name, "prbe-listen") == 0 ||
		    strcmp(k->name, "turn-listen") == 0)
			c->cli_listener = true;
	}
	if (optind < argc) {
		err_add(e, "etrelay: unexpected argument '%s' (see --help)", argv[optind]);
		return -1;
	}
	if (c->probe && !c->test) {
		err_add(e, "etrelay: --probe: only with -t");
		return -1;
	}
	return 0;
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= CONF_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

/* Trim spaces and tabs at both ends, in place. */
static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/* An [sni NAME] header: the section its keys go to (a copy thrown away
 * when the header is refused, so that its lines are still checked). */
static struct sni_conf *sni_section(struct etr_conf *c, const char *name, const char *path,
				    unsigned lineno, struct sni_conf *discard,
				    struct conf_errors *e)
{
	struct sni_conf *s;

	conf_sni_defaults(discard);
	if (!valid_name(name)) {
		err_add(e, "%s:%u: sni name '%s': use 1 to %d letters, digits, '-', '_' or '.'",
			path, lineno, name, CONF_NAME_MAX - 1);
		return discard;
	}
	for (unsigned i = 0; i < c->nsni; i++)
		if (strcmp(c->sni[i].name, name) == 0) {
			err_add(e, "%s:%u: sni '%s' already defined at line %u", path, lineno, name,
				c->sni[i].line);
			return discard;
		}
	if (c->nsni == CONF_SNI_MAX) {
		err_add(e, "%s:%u: too many sni listeners (at most %d)", path, lineno,
			CONF_SNI_MAX);
		return discard;
	}
	s = &c->sni[c->nsni++];
	conf_sni_defaults(s);
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->line = lineno;
	return s;
}

/* A [turn NAME] header, as sni_section. */
static struct turn_conf *turn_section(struct etr_conf *c, const char *name, const char *path,
				      unsigned lineno, struct turn_conf *discard,
				      struct conf_errors *e)
{
	struct turn_conf *t;

	conf_turn_defaults(discard);
	if (!valid_name(name)) {
		err_add(e, "%s:%u: turn name '%s': use 1 to %d letters, digits, '-', '_' or '.'",
			path, lineno, name, CONF_NAME_MAX - 1);
		return discard;
	}
	for (unsigned i = 0; i < c->nturn; i++)
		if (strcmp(c->turn[i].name, name) == 0) {
			err_add(e, "%s:%u: turn '%s' already defined at line %u", path, lineno,
				name, c->turn[i].line);
			return discard;
		}
	if (c->nturn == CONF_TURN_MAX) {
		err_add(e, "%s:%u: too many turn listeners (at most %d)", path, lineno,
			CONF_TURN_MAX);
		return discard;
	}
	t = &c->turn[c->nturn++];
	conf_turn_defaults(t);
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->line = lineno;
	return t;
}

/* One key of a [turn NAME] section. */
static void turn_key(struct turn_conf *t, const char *key, const char *v, const char *path,
		     unsigned lineno, struct conf_errors *e)
{
	const struct turn_key_def *k;
	char buf[128];
	const char *why;

	if (*v == '\0') {
		err_add(e, "%s:%u: %s: missing value", path, lineno, key);
		return;
	}
	why = conf_turn_key(t, key, v, buf, sizeof(buf));
	k = turn_key_find(key);
	if (!why && k && k->line_off)
		memcpy((char *)t + k->line_off, &lineno, sizeof(lineno));
	if (!why && strcmp(key, "allow-peer") == 0)
		t->allow[t->nallow - 1].line = lineno;
	if (!k) {
		char list[1024];
		size_t o = 0;

		for (size_t i = 0; i < sizeof(turn_keys) / sizeof(turn_keys[0]) && o < sizeof(list);
		     i++)
			o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "",
					      turn_keys[i].name);
		err_add(e, "%s:%u: unknown key '%s' in a [turn] section (%s)", path, lineno, key,
			list);
	} else if (why) {
		err_add(e, "%s:%u: %s: invalid value '%s' (%s)", path, lineno, key, v, why);
	}
}

/* Add route r to listener s unless its name is there already. */
static const char *sni_add_route(struct sni_conf *s, const struct sni_route_conf *r, char *buf,
				 size_t n)
{
	for (unsigned i = 0; i < s->nroutes; i++)
		if (strcmp(s->routes[i].name, r->name) == 0) {
			if (s->routes[i].line)
				snprintf(buf, n, "route %s already given at line %u", r->name,
					 s->routes[i].line);
			else
				snprintf(buf, n, "route %s given twice", r->name);
			return buf;
		}
	if (s->nroutes == CONF_SNI_ROUTES_MAX)
		return "too many routes (at most " CONF_STR(CONF_SNI_ROUTES_MAX) ")";
	s->routes[s->nroutes++] = *r;
	return NULL;
}

/* A count in [1, CONF_SNI_CONNECTIONS_LIMIT]. */
static const char *sni_count(const char *v, uint32_t *out)
{
	unsigned long long n;
	char *end;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || n == 0 || n > CONF_SNI_CONNECTIONS_LIMIT)
		return "expected a number from 1 to " CONF_STR(CONF_SNI_CONNECTIONS_LIMIT);
	*out = (uint32_t)n;
	return NULL;
}

/* One key of an [sni NAME] section. */
static void sni_key(struct etr_conf *c, struct sni_conf *s, const char *key, const char *v,
		    const char *path, unsigned lineno, struct conf_errors *e)
{
	static const char dur[] = "expected a duration above 0 such as 10s or 500ms";
	char buf[CONF_SNI_NAME_MAX + 64];
	const char *why = NULL;

	(void)c;
	if (*v == '\0') {
		err_add(e, "%s:%u: %s: missing value", path, lineno, key);
		return;
	}
	if (strcmp(key, "listen") == 0) {
		if (addr_parse_numeric(v, &s->listen) < 0)
			why = "expected IP:PORT or [IPv6]:PORT";
		else
			s->listen_set = true;
	} else if (strcmp(key, "route") == 0) {
		struct sni_route_conf r;

		why = conf_sni_route_parse(v, ' ', &r);
		r.line = lineno;
		if (!why)
			why = sni_add_route(s, &r, buf, sizeof(buf));
	} else if (strcmp(key, "preread-timeout") == 0) {
		why = conf_parse_duration(v, &s->preread_timeout_ms, false) < 0 ? dur : NULL;
	} else if (strcmp(key, "connect-timeout") == 0) {
		why = conf_parse_duration(v, &s->connect_timeout_ms, false) < 0 ? dur : NULL;
	} else if (strcmp(key, "idle-timeout") == 0) {
		why = conf_parse_duration(v, &s->idle_timeout_ms, false) < 0 ? dur : NULL;
	} else if (strcmp(key, "send-timeout") == 0) {
		why = conf_parse_duration(v, &s->send_timeout_ms, false) < 0 ? dur : NULL;
	} else if (strcmp(key, "max-connections") == 0) {
		why = sni_count(v, &s->max_connections);
	} else if (strcmp(key, "max-connections-per-ip") == 0) {
		why = sni_count(v, &s->max_per_ip);
	} else if (strcmp(key, "max-preread") == 0) {
		why = sni_count(v, &s->max_preread);
	} else if (strcmp(key, "splice") == 0) {
		why = parse_bool(v, &s->splice) < 0 ? "expected yes or no" : NULL;
	} else if (strcmp(key, "max-spliced") == 0) {
		why = sni_count(v, &s->max_spliced);
	} else {
		err_add(e,
			"%s:%u: unknown key '%s' in an [sni] section (listen, route, "
			"preread-timeout, connect-timeout, idle-timeout, send-timeout, "
			"max-connections, max-connections-per-ip, max-preread, splice, "
			"max-spliced)",
			path, lineno, key);
		return;
	}
	if (why)
		err_add(e, "%s:%u: %s: invalid value '%s' (%s)", path, lineno, key, v, why);
}

int conf_load(struct etr_conf *c, const char *text, size_t len, const char *path,
	      struct conf_errors *e)
{
	struct relay_conf *r = &c->base, discard;
	struct sni_conf *sni = NULL, sni_discard;
	struct turn_conf *turn = NULL;
	static struct turn_conf turn_discard; /* 8 KiB of paths: not on the stack */
	struct layer ly = {false};
	unsigned lineno = 0, before = e->count;
	bool in_section = false;
	size_t pos = 0;

	if (!c->path)
		c->path = path;

	while (pos < len) {
		char line[1024], *s, *key, *val;
		size_t end = pos, n;
		const struct key *k;
		const char *why;

		while (end < len && text[end] != '\n')
			end++;
		n = end - pos;
		lineno++;
		if (n >= sizeof(line)) {
			err_add(e, "%s:%u: line longer than %zu bytes", path, lineno,
				sizeof(line) - 1);
			pos = end + 1;
			continue;
		}
		memcpy(line, text + pos, n);
		line[n] = '\0';
		pos = end + 1;
		if (memchr(line, '\0', n)) {
			err_add(e, "%s:%u: NUL byte in line", path, lineno);
			continue;
		}
		s = trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		if (*s == '[') {
			char *close = strchr(s, ']'), *name;

			if (close && *trim(close + 1) == '\0' && strncmp(s, "[sni", 4) == 0 &&
			    (s[4] == ' ' || s[4] == '\t')) {
				*close = '\0';
				in_section = true;
				turn = NULL;
				sni = sni_section(c, trim(s + 4), path, lineno, &sni_discard, e);
				continue;
			}
			if (close && *trim(close + 1) == '\0' && strncmp(s, "[turn", 5) == 0 &&
			    (s[5] == ' ' || s[5] == '\t')) {
				*close = '\0';
				in_section = true;
				sni = NULL;
				turn = turn_section(c, trim(s + 5), path, lineno, &turn_discard, e);
				continue;
			}
			if (!close || *trim(close + 1) != '\0' || strncmp(s, "[relay", 6) != 0 ||
			    (s[6] != ' ' && s[6] != '\t')) {
				err_add(
				    e,
				    "%s:%u: expected a section header [relay NAME], [sni NAME] or "
				    "[turn NAME]",
				    path, lineno);
				continue;
			}
			sni = NULL;
			turn = NULL;
			*close = '\0';
			name = trim(s + 6);
			if (!valid_name(name)) {
				err_add(e,
					"%s:%u: relay name '%s': use 1 to %d letters, digits, '-', "
					"'_' or '.'",
					path, lineno, name, CONF_NAME_MAX - 1);
				continue;
			}
			in_section = true;
			/* A rejected section's lines are still checked, into a
			 * copy that is thrown away. */
			r = &discard;
			*r = c->base;
			ly.masters_replaced = false;
			for (unsigned i = 0; i < c->nrelays && name; i++)
				if (strcmp(c->relays[i].name, name) == 0) {
					err_add(e, "%s:%u: relay '%s' already defined at line %u",
						path, lineno, name, c->relays[i].line);
					name = NULL;
				}
			if (!name)
				continue;
			if (c->nrelays == CONF_RELAYS_MAX) {
				err_add(e, "%s:%u: too many relays (at most %d)", path, lineno,
					CONF_RELAYS_MAX);
				continue;
			}
			r = &c->relays[c->nrelays++];
			*r = c->base;
			snprintf(r->name, sizeof(r->name), "%s", name);
			r->line = lineno;
			continue;
		}
		/* key [value]: the value is the rest of the line, "" allowed. */
		key = s;
		val = s + strcspn(s, " \t");
		if (*val)
			*val++ = '\0';
		val = trim(val);
		if (val[0] == '"' && strlen(val) >= 2 && val[strlen(val) - 1] == '"') {
			val[strlen(val) - 1] = '\0';
			val++;
		}
		if (sni) {
			sni_key(c, sni, key, val, path, lineno, e);
			continue;
		}
		if (turn) {
			turn_key(turn, key, val, path, lineno, e);
			continue;
		}
		k = key_find(key);
		if (!k) {
			err_add(e, "%s:%u: unknown key '%s'", path, lineno, key);
			continue;
		}
		if (k->scope == SCOPE_GLOBAL && in_section) {
			err_add(e, "%s:%u: %s: a process-wide key, put it before the first [relay]",
				path, lineno, k->name);
			continue;
		}
		if (*val == '\0' && strcmp(k->name, "flatline") != 0) {
			err_add(e, "%s:%u: %s: missing value", path, lineno, k->name);
			continue;
		}
		ly.line = lineno;
		why = apply(c, r, k, val, &ly);
		if (why)
			err_add(e, "%s:%u: %s: invalid value '%s' (%s)", path, lineno, k->name, val,
				why);
	}
	return e->count == before ? 0 : -1;
}

int conf_addr_family(const union etr_sockaddr *a)
{
	if (a->sa.sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a->in6.sin6_addr))
		return AF_INET;
	return a->sa.sa_family;
}

bool conf_listener_reaches(const union etr_sockaddr *listen, bool v6only, int family)
{
	int lf = conf_addr_family(listen);

	if (lf == family)
		return true;
	/* Only an IPv6 socket bound to :: sends to IPv4-mapped addresses. */
	return lf == AF_INET6 && family == AF_INET && !v6only &&
	       IN6_IS_ADDR_UNSPECIFIED(&listen->in6.sin6_addr);
}

/* An address literal of a family the listener cannot send to: every
 * heartbeat would fail, so the configuration is refused. */
static void check_master_family(const struct etr_conf *c, const struct relay_conf *r,
				const struct conf_master *m, struct conf_errors *e)
{
	char hp[ADDR_HOSTLEN + 8], a[ADDR_STRLEN];
	union etr_sockaddr sa;
	int fam;

	addr_hostport(m->host, m->port, hp);
	if (addr_parse_numeric(hp, &sa) < 0)
		return; /* a name: resolved at run time, and by -t --probe */
	fam = conf_addr_family(&sa);
	if (conf_listener_reaches(&r->listen, false, fam))
		return;
	addr_str(&r->listen.sa, a);
	if (m->line)
		err_add(e,
			"%s:%u: master %s: an %s address; relay %s listens on %s, which "
			"cannot reach it (listen on %s, or give an %s master)",
			c->path ? c->path : "", m->line, hp, fam == AF_INET ? "IPv4" : "IPv6",
			r->name, a, fam == AF_INET ? "0.0.0.0 or [::]" : "an IPv6 address",
			conf_addr_family(&r->listen) == AF_INET ? "IPv4" : "IPv6");
	else
		err_add(e,
			"etrelay: --master %s: an %s address; relay %s listens on %s, which "
			"cannot reach it (listen on %s, or give an %s master)",
			hp, fam == AF_INET ? "IPv4" : "IPv6", r->name, a,
			fam == AF_INET ? "0.0.0.0 or [::]" : "an IPv6 address",
			conf_addr_family(&r->listen) == AF_INET ? "IPv4" : "IPv6");
}

/* A relay whose upstream is its own listen address (or, listening on a
 * wildcard, an address of this host on the same port: loopback, or one of
 * local[0..nlocal)) sends its players' packets to itself, and they get no
 * answer. up: the resolved upstream, or NULL for a numeric one (a name is
 * not checked then). Returns whether it loops (the error is added). */
static bool relay_loops(const struct etr_conf *c, const struct relay_conf *r,
			const union etr_sockaddr *up, const union etr_sockaddr *local,
			size_t nlocal, const char *where, struct conf_errors *e)
{
	union etr_sockaddr num;
	char hp[ADDR_HOSTLEN + 8], a[ADDR_STRLEN], o[CONF_NAME_MAX + 300];

	addr_hostport(r->upstream_host, r->upstream_port, hp);
	if (!up) {
		if (r->upstream_host[0] == '\0' || addr_parse_numeric(hp, &num) < 0)
			return false;
		up = &num;
	}
	if (addrclass_loops(up, &r->listen, local, nlocal)) {
		err_add(e,
			"%s: upstream %s (relay %s) is its own listen address %s: a loop, "
			"players would get no answer",
			key_origin(c, r, "upstream", "listen", where, o, sizeof(o)), hp, r->name,
			addr_str(&r->listen.sa, a));
		return true;
	}
	return false;
}

/* Relay i's upstream: resolved (up), else numeric (in num), else NULL. */
static const union etr_sockaddr *relay_up(const struct etr_conf *c, unsigned i,
					  const union etr_sockaddr *up, union etr_sockaddr *num)
{
	char hp[ADDR_HOSTLEN + 8];

	if (up)
		return &up[i];
	if (c->relays[i].upstream_host[0] == '\0')
		return NULL;
	addr_hostport(c->relays[i].upstream_host, c->relays[i].upstream_port, hp);
	return addr_parse_numeric(hp, num) < 0 ? NULL : num;
}

/* Relays whose upstreams lead from one to the next and back (a to b, b to
 * a): each passes the other's datagrams and no game server gets one. A
 * chain that ends at a game server is left alone. */
static bool relay_cycle(const struct etr_conf *c, unsigned i, const union etr_sockaddr *up,
			const union etr_sockaddr *local, size_t nlocal, const char *where,
			struct conf_errors *e)
{
	union etr_sockaddr num;
	unsigned cur = i;
	char hp[ADDR_HOSTLEN + 8], o[CONF_NAME_MAX + 300];

	for (unsigned step = 0; step < c->nrelays; step++) {
		const union etr_sockaddr *u = relay_up(c, cur, up, &num);
		unsigned j;

		if (!u)
			return false;
		for (j = 0; j < c->nrelays; j++)
			if (j != cur && addrclass_loops(u, &c->relays[j].listen, local, nlocal))
				break;
		if (j == c->nrelays)
			return false;
		if (j == i) {
			const struct relay_conf *r = &c->relays[i];

			addr_hostport(r->upstream_host, r->upstream_port, hp);
			err_add(e,
				"%s: upstream %s (relay %s) leads through relay %s back to it: "
				"a loop, the game server would get no datagram",
				key_origin(c, r, "upstream", "listen", where, o, sizeof(o)), hp,
				r->name, c->relays[cur == i ? j : cur].name);
			return true;
		}
		cur = j;
	}
	return false;
}

int conf_relay_loops(const struct etr_conf *c, const union etr_sockaddr *up,
		     const union etr_sockaddr *local, size_t nlocal, struct conf_errors *e)
{
	int rc = 0;

	for (unsigned i = 0; i < c->nrelays; i++)
		if (relay_loops(c, &c->relays[i], up ? &up[i] : NULL, local, nlocal, "etrelay",
				e) ||
		    relay_cycle(c, i, up, local, nlocal, "etrelay", e))
			rc = -1;
	return rc;
}

/* Tags from the game unless given, and the checks a relay must pass. */
static void relay_finish(struct etr_conf *c, struct relay_conf *r, const char *where,
			 struct conf_errors *e)
{
	char o[CONF_NAME_MAX + 300];

	for (size_t i = 0; i < NGAMES; i++) {
		if (strcmp(r->game, games[i].short_name) != 0)
			continue;
		if (!r->heartbeat_set)
			strcpy(r->heartbeat, games[i].heartbeat);
		if (!r->flatline_set)
			strcpy(r->flatline, games[i].flatline);
		if (!r->masters_set) {
			for (unsigned m = 0; m < 2; m++) {
				strcpy(r->masters[m].host, games[i].masters[m]);
				r->masters[m].port = CONF_MASTER_PORT;
				r->masters[m].line = 0;
			}
			r->nmasters = 2;
		}
	}
	if (r->server_query_burst <= RELAY_RESERVE_MASTER + RELAY_RESERVE_PLAYER)
		err_add(e,
			"%s: server-query-burst %u (relay %s) must be above %u: that many tokens "
			"are kept for a master and for players",
			key_origin(c, r, "server-query-burst", NULL, where, o, sizeof(o)),
			r->server_query_burst, r->name,
			RELAY_RESERVE_MASTER + RELAY_RESERVE_PLAYER);
	if (r->upstream_host[0] == '\0')
		err_add(e, "%s: upstream: missing (the game server's HOST:PORT)", where);
	relay_loops(c, r, NULL, NULL, 0, where, e);
	for (unsigned i = 0; i < r->nmasters; i++)
		check_master_family(c, r, &r->masters[i], e);
	if (r->port_min && r->max_sessions > (uint32_t)(r->port_max - r->port_min + 1))
		err_add(e,
			"%s: max-sessions %u (relay %s) is more than the %u ports of "
			"session-ports %u-%u",
			key_origin(c, r, "max-sessions", "session-ports", where, o, sizeof(o)),
			r->max_sessions, r->name, r->port_max - r->port_min + 1, r->port_min,
			r->port_max);
}

/* Two UDP listeners on one port: the same address, or either a wildcard. */
static bool listeners_overlap(const union etr_sockaddr *a, const union etr_sockaddr *b)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;
	bool wild_a, wild_b;

	if (port_of(a) != port_of(b))
		return false;
	if (addr_equal(a, b))
		return true;
	wild_a = a->sa.sa_family == AF_INET ? a->in.sin_addr.s_addr == INADDR_ANY
					    : memcmp(&a->in6.sin6_addr, &any6, 16) == 0;
	wild_b = b->sa.sa_family == AF_INET ? b->in.sin_addr.s_addr == INADDR_ANY
					    : memcmp(&b->in6.sin6_addr, &any6, 16) == 0;
	return wild_a || wild_b;
}

static void prbe_add_port(struct etr_conf *c, uint16_t port, struct conf_errors *e)
{
	for (unsigned i = 0; i < c->prbe.nports; i++)
		if (c->prbe.ports[i] == port)
			return;
	if (c->prbe.nports == CONF_PRBE_PORTS_MAX) {
		err_add(e,
			"etrelay: PRBE echo on more than " CONF_STR(
			    CONF_PRBE_PORTS_MAX) " ports (prbe-listen, and relays with prbe yes)");
		return;
	}
	c->prbe.ports[c->prbe.nports++] = port;
}

/* The echo-only ports against each other and the relays; every echo port. */
static void prbe_finish(struct etr_conf *c, struct conf_errors *e)
{
	char a[ADDR_STRLEN], o[CONF_PATH_MAX + 32];
	unsigned before = e->count;

	c->prbe.nports = 0;
	for (unsigned i = 0; i < c->prbe.nlisten; i++) {
		const union etr_sockaddr *l = &c->prbe.listen[i];
		const char *where = line_origin(c, c->prbe.listen_line[i], o, sizeof(o));

		addr_str(&l->sa, a);
		for (unsigned j = 0; j < i; j++)
			if (listeners_overlap(l, &c->prbe.listen[j])) {
				if (c->prbe.listen_line[j])
					err_add(
					    e, "%s: prbe-listen %s: given twice (first on line %u)",
					    where, a, c->prbe.listen_line[j]);
				else
					err_add(e, "%s: prbe-listen %s: given twice", where, a);
			}
		for (unsigned j = 0; j < c->nrelays; j++)
			if (listeners_overlap(l, &c->relays[j].listen))
				err_add(e,
					"%s: prbe-listen %s: relay %s listens there; set prbe "
					"yes in that relay instead",
					where, a, c->relays[j].name);
		if (e->count == before)
			prbe_add_port(c, port_of(l), e);
	}
	for (unsigned j = 0; j < c->nrelays && e->count == before; j++)
		if (c->relays[j].prbe)
			prbe_add_port(c, port_of(&c->relays[j].listen), e);
}

/* The quick-start listener, and the checks every SNI listener must pass. */
static void sni_finish(struct etr_conf *c, struct conf_errors *e)
{
	struct sni_conf *q = &c->sni_cli;
	const char *path = c->path ? c->path : "";
	char where[CONF_NAME_MAX + 300];

	if (q->nroutes && !q->listen_set)
		err_add(e, "%s: sni-route %s: no sni-listen ADDR:PORT to route from",
			line_origin(c, q->routes[0].line, where, sizeof(where)), q->routes[0].name);
	if (q->listen_set) {
		bool taken = false;

		for (unsigned i = 0; i < c->nsni; i++)
			taken |= strcmp(c->sni[i].name, q->name) == 0;
		if (taken)
			err_add(e,
				"etrelay: sni-listen: the file has an [sni %s] already; "
				"give the listener there",
				q->name);
		else if (c->nsni == CONF_SNI_MAX)
			err_add(e, "etrelay: sni-listen: too many sni listeners (at most %d)",
				CONF_SNI_MAX);
		else
			c->sni[c->nsni++] = *q;
		q->listen_set = false;
		q->nroutes = 0;
	}
	for (unsigned i = 0; i < c->nsni; i++) {
		struct sni_conf *s = &c->sni[i];

		if (s->line)
			snprintf(where, sizeof(where), "%s:%u: sni %s", path, s->line, s->name);
		else
			snprintf(where, sizeof(where), "etrelay: sni %s", s->name);
		if (!s->listen_set)
			err_add(e, "%s: listen: missing (the TCP ADDR:PORT to listen on)", where);
		for (unsigned r = 1; r < s->nroutes; r++)
			for (unsigned p = 0; p < r; p++)
				if (strcmp(s->routes[r].name, s->routes[p].name) == 0)
					err_add(e, "%s: route %s given twice", where,
						s->routes[r].name);
	}
}

/* Whether listener l's port is in t's relayed ports on an address they
 * share (relay-address, or l a wildcard). */
static bool turn_range_holds(const struct turn_conf *t, const union etr_sockaddr *l)
{
	uint16_t p = port_of(l);

	if (p < t->port_min || p > t->port_max)
		return false;
	return ip_wildcard(l) || (l->sa.sa_family == AF_INET &&
				  l->in.sin_addr.s_addr == t->relay_addr.in.sin_addr.s_addr);
}

/* Where t's ports range comes from, for an error about it: "FILE:LINE:
 * turn NAME: ports A-B" on the key's own line, the command line's
 * --turn-ports, or the section with "(the default)". */
static const char *turn_ports_where(const struct etr_conf *c, const struct turn_conf *t,
				    const char *where, char *buf, size_t n)
{
	char o[CONF_PATH_MAX + 32];

	if (t->ports_line)
		snprintf(buf, n, "%s:%u: turn %s: ports %u-%u", c->path ? c->path : "",
			 t->ports_line, t->name, t->port_min, t->port_max);
	else if (t->ports_set && t->line == 0)
		snprintf(buf, n, "%s: turn %s: turn-ports %u-%u",
			 strcmp(conf_key_where(c, "turn-ports", o, sizeof(o)),
				"etrelay: command line") == 0
			     ? "etrelay"
			     : o,
			 t->name, t->port_min, t->port_max);
	else
		snprintf(buf, n, "%s: ports %u-%u%s", where, t->port_min, t->port_max,
			 t->ports_set ? "" : " (the default)");
	return buf;
}

/* One listener against t's relayed ports: what the listener is ("relay oa
 * listen 0.0.0.0:27960") and where it was set (or ""). */
static void turn_port_clash(const struct etr_conf *c, const struct turn_conf *t,
			    const union etr_sockaddr *l, const char *what, const char *at,
			    const char *where, struct conf_errors *e)
{
	char w[CONF_PATH_MAX + CONF_NAME_MAX + 400];

	if (!turn_range_holds(t, l))
		return;
	err_add(e, "%s hold port %u of %s%s%s%s", turn_ports_where(c, t, where, w, sizeof(w)),
		port_of(l), what, at[0] ? " (" : "", at, at[0] ? ")" : "");
}

/* A relayed port that is another UDP listener's port would be skipped at
 * run time, silently: name both instead. TCP ports (tcp-listen,
 * ops-listen) take nothing from the relayed sockets, which are UDP. */
static void turn_ports_clash(const struct etr_conf *c, const struct turn_conf *t, const char *where,
			     struct conf_errors *e)
{
	char what[CONF_NAME_MAX + 64 + ADDR_STRLEN], at[CONF_PATH_MAX + 48], a[ADDR_STRLEN];

	if (!t->relay_set || t->relay_addr.sa.sa_family != AF_INET)
		return;
	for (unsigned j = 0; j < c->nrelays; j++) {
		const struct relay_conf *r = &c->relays[j];

		snprintf(what, sizeof(what), "relay %s listen %s", r->name,
			 addr_str(&r->listen.sa, a));
		turn_port_clash(c, t, &r->listen, what,
				key_origin(c, r, "listen", NULL, "", at, sizeof(at)), where, e);
	}
	for (unsigned j = 0; j < c->nturn; j++) {
		const struct turn_conf *o = &c->turn[j];

		snprintf(what, sizeof(what), "turn %s listen %s", o->name,
			 addr_str(&o->listen.sa, a));
		if (o->line)
			line_origin(c, o->line, at, sizeof(at));
		else
			at[0] = '\0';
		turn_port_clash(c, t, &o->listen, what, at, where, e);
	}
	for (unsigned j = 0; j < c->prbe.nlisten; j++) {
		snprintf(what, sizeof(what), "prbe-listen %s", addr_str(&c->prbe.listen[j].sa, a));
		if (c->prbe.listen_line[j])
			line_origin(c, c->prbe.listen_line[j], at, sizeof(at));
		else
			snprintf(at, sizeof(at), "etrelay: command line");
		turn_port_clash(c, t, &c->prbe.listen[j], what, at, where, e);
	}
}

/* tls-cert, tls-key or tls-reload-interval without tls-listen: nothing
 * would load (or reload) the pair (a start would not read it, -t would not
 * check it), so it is not what the operator meant. Named with the key's own
 * line. */
static void turn_tls_unused(const struct etr_conf *c, const struct turn_conf *t,
			    struct conf_errors *e)
{
	const char *key[3] = {"tls-cert", "tls-key", "tls-reload-interval"};
	const unsigned line[3] = {t->tls_cert_line, t->tls_key_line, t->tls_reload_line};
	const bool given[3] = {t->tls_cert[0] != '\0', t->tls_key[0] != '\0', t->tls_reload_set};
	char o[CONF_PATH_MAX + 32];

	for (unsigned k = 0; k < 3; k++)
		if (given[k])
			err_add(e,
				"%s: turn %s: %s: given without tls-listen (add tls-listen "
				"ADDR:PORT for TURN over TLS, or remove it)",
				line_origin(c, line[k], o, sizeof(o)), t->name, key[k]);
}

/* One TCP listening address of the configuration, for tcp_listeners_clash. */
struct tcp_listener {
	const union etr_sockaddr *addr;
	const char *kind, *name, *key; /* kind "": the ops plane */
	unsigned line;		       /* of the section's header; 0: command line */
};

/* Whether a comes after b in the file (the command line after the file). */
static bool tcp_listener_after(const struct tcp_listener *a, const struct tcp_listener *b)
{
	unsigned la = a->line ? a->line : ~0u, lb = b->line ? b->line : ~0u;

	if (!a->kind[0] || !b->kind[0])
		return b->kind[0] == '\0' && a->kind[0] != '\0';
	return la > lb;
}

/* Every pair of TCP listeners on one port (the same address, or either a
 * wildcard): the ops plane, each SNI listener, each TURN listener's
 * tcp-listen and tls-listen. A start would fail on the second one (each
 * first socket checks that nobody listens there, which our own first
 * listener does), blaming another process; -t would pass. Said here
 * instead, once per pair, at the later listener in the file (the
 * command line's come last), naming the earlier one and its line. */
static void tcp_listeners_clash(const struct etr_conf *c, struct conf_errors *e)
{
	struct tcp_listener l[1 + CONF_SNI_MAX + 2 * CONF_TURN_MAX];
	const char *path = c->path ? c->path : "";
	char where[CONF_NAME_MAX + 300], a[ADDR_STRLEN], other[CONF_NAME_MAX + 80];
	unsigned n = 0;

	if (c->ops_enabled)
		l[n++] = (struct tcp_listener){&c->ops_listen, "", "", "ops-listen", 0};
	for (unsigned i = 0; i < c->nsni; i++)
		if (c->sni[i].listen_set)
			l[n++] = (struct tcp_listener){&c->sni[i].listen, "sni", c->sni[i].name,
						       "listen", c->sni[i].line};
	for (unsigned i = 0; i < c->nturn; i++) {
		const struct turn_conf *t = &c->turn[i];

		if (t->tcp_set)
			l[n++] = (struct tcp_listener){&t->tcp_listen, "turn", t->name,
						       "tcp-listen", t->line};
		if (t->tls_set)
			l[n++] = (struct tcp_listener){&t->tls_listen, "turn", t->name,
						       "tls-listen", t->line};
	}
	/* In file order, stable; the ops plane first (it has no section). */
	for (unsigned j = 1; j < n; j++)
		for (unsigned i = j; i > 0 && tcp_listener_after(&l[i - 1], &l[i]); i--) {
			struct tcp_listener x = l[i];

			l[i] = l[i - 1];
			l[i - 1] = x;
		}
	for (unsigned j = 1; j < n; j++) {
		if (port_of(l[j].addr) == 0)
			continue; /* given, wrong, and said so */
		if (l[j].line)
			snprintf(where, sizeof(where), "%s:%u: %s %s", path, l[j].line, l[j].kind,
				 l[j].name);
		else
			snprintf(where, sizeof(where), "etrelay: %s %s", l[j].kind, l[j].name);
		for (unsigned i = 0; i < j; i++) {
			if (!listeners_overlap(l[j].addr, l[i].addr))
				continue;
			if (!l[i].kind[0] ||
			    (l[i].kind == l[j].kind && strcmp(l[i].name, l[j].name) == 0))
				other[0] = '\0'; /* the ops plane, or the same section */
			else if (l[i].line)
				snprintf(other, sizeof(other), " of %s %s (line %u)", l[i].kind,
					 l[i].name, l[i].line);
			else
				snprintf(other, sizeof(other), " of %s %s (command line)",
					 l[i].kind, l[i].name);
			err_add(e, "%s: %s %s: the %s address%s", where, l[j].key,
				addr_str(&l[j].addr->sa, a), l[i].key, other);
		}
	}
}

/* The ops plane serves /metrics and /lifecycle: a public address must be
 * asked for. Here and not at the start only, so that -t refuses it too;
 * named where it was set, in the words of that place. */
static void ops_finish(const struct etr_conf *c, struct conf_errors *e)
{
	char where[CONF_PATH_MAX + 32], a[ADDR_STRLEN];
	bool cli;

	if (!c->ops_enabled || c->ops_allow_public || addrclass_private(&c->ops_listen))
		return;
	conf_key_where(c, "ops-listen", where, sizeof(where));
	cli = strcmp(where, "etrelay: command line") == 0;
	err_add(e,
		"%s: %sops-listen %s: not a private address (loopback, RFC 1918, CGNAT, ULA, "
		"link-local): bind one, or %s to serve the ops plane on it anyway",
		cli ? "etrelay" : where, cli ? "--" : "", addr_str(&c->ops_listen.sa, a),
		cli ? "pass --ops-allow-public" : "set ops-allow-public yes");
}

/* The quick-start listener, the defaults that follow from other keys, and
 * the checks every TURN listener must pass. */
static void turn_finish(struct etr_conf *c, struct conf_errors *e)
{
	struct turn_conf *q = &c->turn_cli;
	const char *path = c->path ? c->path : "";
	char where[CONF_NAME_MAX + 300], a[ADDR_STRLEN];

	if (c->turn_cli_set && !q->listen_set)
		err_add(e, "etrelay: turn-*: no turn-listen ADDR:PORT for the TURN listener");
	if (c->turn_cli_set && q->listen_set) {
		bool taken = false;

		for (unsigned i = 0; i < c->nturn; i++)
			taken |= strcmp(c->turn[i].name, q->name) == 0;
		if (taken)
			err_add(e,
				"etrelay: turn-listen: the file has a [turn %s] already; "
				"give the listener there",
				q->name);
		else if (c->nturn == CONF_TURN_MAX)
			err_add(e, "etrelay: turn-listen: too many turn listeners (at most %d)",
				CONF_TURN_MAX);
		else
			c->turn[c->nturn++] = *q;
		c->turn_cli_set = false;
	}
	for (unsigned i = 0; i < c->nturn; i++) {
		struct turn_conf *t = &c->turn[i];
		unsigned width;

		if (t->line)
			snprintf(where, sizeof(where), "%s:%u: turn %s", path, t->line, t->name);
		else
			snprintf(where, sizeof(where), "etrelay: turn %s", t->name);
		if (!t->listen_set) {
			err_add(e, "%s: listen: missing (the UDP ADDR:PORT to listen on)", where);
			continue;
		}
		if (port_of(&t->listen) == 0)
			continue; /* given, wrong, and said so */
		if (!t->relay_set && !ip_wildcard(&t->listen)) {
			t->relay_addr = t->listen;
			t->relay_addr.in.sin_port = 0; /* the same offset in both */
			t->relay_set = true;
		}
		if (!t->relay_set)
			err_add(e,
				"%s: relay-address: missing (listen %s is a wildcard; give the "
				"address relayed sockets bind to)",
				where, addr_str(&t->listen.sa, a));
		else if (t->relay_addr.sa.sa_family != AF_INET || ip_wildcard(&t->relay_addr))
			err_add(e,
				"%s: relay-address %s: expected a specific IPv4 address (IPv6 "
				"relayed addresses are not supported)",
				where, addr_str(&t->relay_addr.sa, a));
		if (!t->public_set)
			t->public_ip = t->relay_addr;
		width = (unsigned)t->port_max - t->port_min + 1;
		if (t->max_allocations > width)
			err_add(e,
				"%s: max-allocations %u is more than the %u ports of ports %u-%u",
				where, t->max_allocations, width, t->port_min, t->port_max);
		if (t->tls_set && (!t->tls_cert[0] || !t->tls_key[0]))
			err_add(e, "%s: tls-listen: needs tls-cert and tls-key", where);
		if (!t->tls_set)
			turn_tls_unused(c, t, e);
		for (unsigned j = 0; j < c->nrelays; j++) {
			const struct relay_conf *r = &c->relays[j];

			if (listeners_overlap(&t->listen, &r->listen))
				err_add(e, "%s: listen %s: relay %s listens there", where,
					addr_str(&t->listen.sa, a), r->name);
			if (r->port_min && r->port_min <= t->port_max && t->port_min <= r->port_max)
				err_add(e, "%s: ports %u-%u overlap the session-ports of relay %s",
					where, t->port_min, t->port_max, r->name);
		}
		for (unsigned j = 0; j < c->prbe.nlisten; j++)
			if (listeners_overlap(&t->listen, &c->prbe.listen[j]))
				err_add(e, "%s: listen %s: a prbe-listen port", where,
					addr_str(&t->listen.sa, a));
		turn_ports_clash(c, t, where, e);
		for (unsigned j = 0; j < i; j++) {
			const struct turn_conf *o = &c->turn[j];

			if (listeners_overlap(&t->listen, &o->listen))
				err_add(e, "%s: listen %s: already used by turn %s", where,
					addr_str(&t->listen.sa, a), o->name);
			if (o->port_min <= t->port_max && t->port_min <= o->port_max &&
			    addr_equal(&o->relay_addr, &t->relay_addr))
				err_add(e, "%s: ports %u-%u overlap those of turn %s", where,
					t->port_min, t->port_max, o->name);
		}
	}
}

int conf_finish(struct etr_conf *c, struct conf_errors *e)
{
	unsigned before = e->count;
	char where[CONF_NAME_MAX + 300];
	struct layer global_layer = {false};

	bool other_listener = c->nsni > 0 || c->sni_cli.listen_set || c->prbe.nlisten > 0 ||
			      c->nturn > 0 || c->turn_cli.listen_set;

	for (unsigned i = 0; i < c->ncli; i++)
		if (strcmp(c->cli[i].key, "sni-listen") == 0 ||
		    strcmp(c->cli[i].key, "prbe-listen") == 0 ||
		    strcmp(c->cli[i].key, "turn-listen") == 0)
			other_listener = true;
	/* No [relay] section: the top level (or the command line) is the one,
	 * unless it names no game server and there is another listener (an
	 * SNI listener or an echo port): any listener makes a process. */
	if (c->nrelays == 0 && (!other_listener || c->cli_upstream || c->base.upstream_host[0])) {
		c->relays[0] = c->base;
		c->nrelays = 1;
	}
	for (unsigned i = 0; i < c->ncli; i++) {
		const struct key *k = key_find(c->cli[i].key);
		const char *v = c->cli[i].value ? c->cli[i].value : "yes";

		if (k->scope == SCOPE_GLOBAL) {
			apply(c, &c->base, k, v, &global_layer);
			continue;
		}
		for (unsigned j = 0; j < c->nrelays; j++) {
			/* Each relay's command-line layer starts with the first
			 * --master seen for it. */
			struct layer ly = {true};
			bool first_master = strcmp(k->name, "master") == 0;

			for (unsigned p = 0; p < i && first_master; p++)
				if (strcmp(c->cli[p].key, "master") == 0)
					first_master = false;
			ly.masters_replaced = !first_master;
			apply(c, &c->relays[j], k, v, &ly);
		}
	}
	sni_finish(c, e);
	if (c->control_backoff_min_ms > c->control_backoff_max_ms)
		err_add(e, "%s: control-backoff-min %llu ms is above control-backoff-max %llu ms",
			key_origin(c, &c->base, "control-backoff-min", "control-backoff-max",
				   "etrelay", where, sizeof(where)),
			(unsigned long long)c->control_backoff_min_ms,
			(unsigned long long)c->control_backoff_max_ms);
	for (unsigned i = 0; i < c->nrelays; i++) {
		struct relay_conf *r = &c->relays[i];

		if (r->line)
			snprintf(where, sizeof(where), "%s:%u: relay %s", c->path ? c->path : "",
				 r->line, r->name);
		else
			snprintf(where, sizeof(where), "etrelay");
		relay_finish(c, r, where, e);
		for (unsigned j = 0; j < i; j++) {
			const struct relay_conf *o = &c->relays[j];

			/* The same port on a wildcard and any address too: a
			 * start cannot bind both (attack13 F3: -t passed
			 * [::]:P beside 0.0.0.0:P, the start failed). */
			if (listeners_overlap(&r->listen, &o->listen)) {
				char a[ADDR_STRLEN];

				err_add(e, "%s: listen %s: already used by relay %s", where,
					addr_str(&r->listen.sa, a), o->name);
			}
			if (r->port_min && o->port_min && r->port_min <= o->port_max &&
			    o->port_min <= r->port_max)
				err_add(e, "%s: session-ports %u-%u overlap those of relay %s",
					where, r->port_min, r->port_max, o->name);
		}
	}
	prbe_finish(c, e);
	turn_finish(c, e);
	tcp_listeners_clash(c, e);
	ops_finish(c, e);
	return e->count == before ? 0 : -1;
}

unsigned conf_turn_warnings(const struct etr_conf *c, struct conf_errors *w)
{
	unsigned before = w->count;

	for (unsigned i = 0; i < c->nturn; i++)
		for (unsigned j = 0; j < c->turn[i].nallow; j++) {
			const struct conf_cidr *b = &c->turn[i].allow[j];
			bool v4 = b->addr.sa.sa_family == AF_INET;
			char where[CONF_PATH_MAX + 32];

			if (b->bits != 0)
				continue;
			if (b->line)
				snprintf(where, sizeof(where), "%s:%u", c->path ? c->path : "",
					 b->line);
			else
				snprintf(where, sizeof(where), "etrelay: --turn-allow-peer");
			err_add(w,
				"%s: warning: turn %s: allow-peer %s/0 lets clients relay to "
				"every refused address (loopback, private networks, this host)",
				where, c->turn[i].name, v4 ? "0.0.0.0" : "::");
		}
	return w->count - before;
}

/* The game whose default masters list host, or NULL. */
static const char *master_game(const char *host)
{
	for (size_t i = 0; i < NGAMES; i++)
		for (unsigned m = 0; m < 2; m++)
			if (strcasecmp(host, games[i].masters[m]) == 0)
				return games[i].short_name;
	return NULL;
}

unsigned conf_master_warnings(const struct etr_conf *c, struct conf_errors *w)
{
	unsigned before = w->count;

	for (unsigned i = 0; i < c->nrelays; i++) {
		const struct relay_conf *r = &c->relays[i];

		for (unsigned m = 0; m < r->nmasters; m++) {
			const char *g = master_game(r->masters[m].host);
			char where[CONF_PATH_MAX + 32];
			bool ours = false;

			for (size_t k = 0; k < NGAMES && g; k++)
				if (strcmp(games[k].short_name, r->game) == 0)
					for (unsigned j = 0; j < 2; j++)
						ours |= strcasecmp(r->masters[m].host,
								   games[k].masters[j]) == 0;
			if (!g || ours)
				continue;
			if (r->masters[m].line)
				snprintf(where, sizeof(where), "%s:%u", c->path ? c->path : "",
					 r->masters[m].line);
			else
				snprintf(where, sizeof(where), "etrelay: --master");
			err_add(w,
				"%s: warning: relay %s: master %s lists %s servers, not %s ones "
				"(game %s): check game",
				where, r->name, r->masters[m].host, g, r->game, r->game);
		}
	}
	return w->count - before;
}

unsigned conf_control_warnings(const struct etr_conf *c, struct conf_errors *w)
{
	char o[CONF_PATH_MAX + 32], cred[CONF_PATH_MAX + sizeof(CONF_CONTROL_STATE_FILE) + 1];
	unsigned before = w->count;
	const char *f = c->control_bootstrap_file;

	if (!c->control_url[0])
		return 0;
	/* Legal: a slow answer only delays the next heartbeat to the tick after
	 * it (ticks are skipped, never bunched); but the control plane may well
	 * take the relay for gone meanwhile. */
	if (c->control_timeout_ms > c->control_interval_ms)
		err_add(w,
			"%s: warning: control-timeout %llu ms is above control-interval %llu ms: "
			"a slow control plane delays heartbeats past their interval",
			conf_key_where(c, "control-timeout", o, sizeof(o)),
			(unsigned long long)c->control_timeout_ms,
			(unsigned long long)c->control_interval_ms);
	for (unsigned i = 0; i < c->ncontrol_allow; i++) {
		const struct conf_cidr *b = &c->control_allow[i];

		if (b->bits != 0)
			continue;
		err_add(w,
			"%s: warning: control-allow-upstream %s/0 lets the control plane route "
			"to every private network and link-local address (the cloud's metadata "
			"service); list the tunnels your backends are in",
			line_origin(c, b->line, o, sizeof(o)),
			b->addr.sa.sa_family == AF_INET ? "0.0.0.0" : "::");
	}
	snprintf(cred, sizeof(cred), "%s/%s", c->state_dir, CONF_CONTROL_STATE_FILE);
	if (f[0] && access(f, F_OK) < 0) {
		int err = errno;

		if (access(cred, F_OK) == 0 || getenv(CONF_CONTROL_ENV_TOKEN) ||
		    getenv(CONF_CONTROL_ENV_TOKEN "_FILE"))
			return w->count - before;
		err_add(w,
			"%s: warning: control-bootstrap-token-file %s: %s, and there is no %s: "
			"the start will fail",
			conf_key_where(c, "control-bootstrap-token-file", o, sizeof(o)), f,
			strerror(err), cred);
	}
	return w->count - before;
}

#define CONF_FILE_MAX (1 << 20)

char *conf_read_file(const char *path, size_t *len)
{
	struct stat st;
	char *buf = NULL;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), saved;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0)
		goto out;
	if (st.st_size > CONF_FILE_MAX) {
		errno = EFBIG;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		goto out;
	n = read(fd, buf, (size_t)st.st_size);
	if (n < 0) {
		free(buf);
		buf = NULL;
		goto out;
	}
	buf[n] = '\0';
	*len = (size_t)n;
out:
	saved = errno;
	close(fd);
	errno = saved;
	return buf;
}

void conf_each_listen(const struct etr_conf *c,
		      void (*each)(void *arg, const struct conf_listen *l), void *arg)
{
	struct conf_listen l;

	for (unsigned i = 0; i < c->nrelays; i++) {
		l = (struct conf_listen){"relay", "game relay", c->relays[i].name,
					 &c->relays[i].listen};
		each(arg, &l);
	}
	for (unsigned i = 0; i < c->prbe.nlisten; i++) {
		l = (struct conf_listen){"prbe-listen", "PRBE echo port", "", &c->prbe.listen[i]};
		each(arg, &l);
	}
	for (unsigned i = 0; i < c->nsni; i++) {
		l = (struct conf_listen){"sni", "SNI listener", c->sni[i].name, &c->sni[i].listen};
		each(arg, &l);
	}
	for (unsigned i = 0; i < c->nturn; i++) {
		const struct turn_conf *t = &c->turn[i];

		l = (struct conf_listen){"turn", "TURN listener", t->name, &t->listen};
		each(arg, &l);
		if (t->tcp_set) {
			l = (struct conf_listen){"turn", "TURN TCP listener", t->name,
						 &t->tcp_listen};
			each(arg, &l);
		}
		if (t->tls_set) {
			l = (struct conf_listen){"turn", "TURN TLS listener", t->name,
						 &t->tls_listen};
			each(arg, &l);
		}
	}
	if (c->ops_enabled) {
		l = (struct conf_listen){"ops-listen", "ops listener", "", &c->ops_listen};
		each(arg, &l);
	}
}
