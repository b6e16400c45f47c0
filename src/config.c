/* SPDX-License-Identifier: ISC */
/* Command-line parsing. Every error is one line that names the flag and the
 * value, so the operator can fix it without reading the source. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char conf_usage[] =
	"usage: etrelay --upstream HOST:PORT [options]\n"
	"\n"
	"Relay a game server's UDP port from this host and send its master-server\n"
	"heartbeats from here, so masters list this host's address.\n"
	"\n"
	"  --listen ADDR:PORT        public UDP address (default " CONF_DEFAULT_LISTEN ";\n"
	"                            [::]:27960 for IPv6)\n"
	"  --upstream HOST:PORT      the game server (required)\n"
	"  --master HOST[:PORT]      master server, repeatable (default\n"
	"                            etmaster.idsoftware.com:27950 and etmaster.net:27950;\n"
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
	"  --backend auto|io_uring|epoll\n"
	"                            event loop (auto: io_uring, else epoll)\n"
	"  --debug                   log heartbeats, sessions and connectionless packets\n"
	"  -h, --help                this text\n"
	"  -V, --version             print the version\n"
	"\n"
	"DUR is a number of seconds or a number with ms, s, m or h.\n";

void conf_defaults(struct etr_conf *c)
{
	memset(c, 0, sizeof(*c));
	addr_parse_numeric(CONF_DEFAULT_LISTEN, &c->listen);
	strcpy(c->masters[0].host, "etmaster.idsoftware.com");
	c->masters[0].port = CONF_MASTER_PORT;
	strcpy(c->masters[1].host, "etmaster.net");
	c->masters[1].port = CONF_MASTER_PORT;
	c->nmasters = 2;
	strcpy(c->game, "ET");
	strcpy(c->heartbeat, "EnemyTerritory-1");
	strcpy(c->flatline, "ETFlatline-1");
	c->heartbeat_interval_ms = CONF_HEARTBEAT_INTERVAL;
	c->session_timeout_ms = CONF_SESSION_TIMEOUT;
	c->probe_timeout_ms = CONF_PROBE_TIMEOUT;
	c->max_sessions = CONF_MAX_SESSIONS;
	c->backend = CONF_BACKEND_AUTO;
}

int conf_parse_duration(const char *s, uint64_t *ms)
{
	static const struct {
		const char *suffix;
		uint64_t mul;
	} units[] = { { "", 1000 }, { "s", 1000 }, { "ms", 1 }, { "m", 60000 }, { "h", 3600000 } };
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || v == 0)
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

static const struct {
	const char *name, *short_name, *heartbeat, *flatline;
} games[] = {
	{ "et", "ET", "EnemyTerritory-1", "ETFlatline-1" },
	{ "rtcw", "RTCW", "Wolfenstein-1", "WolfFlatline-1" },
	{ "q3", "Q3", "QuakeArena-1", "" },
	{ "dp", "DP", "DarkPlaces", "" },
};

enum {
	OPT_LISTEN = 256,
	OPT_UPSTREAM,
	OPT_MASTER,
	OPT_GAME,
	OPT_HEARTBEAT,
	OPT_FLATLINE,
	OPT_HB_INTERVAL,
	OPT_PROBE_TIMEOUT,
	OPT_SESSION_TIMEOUT,
	OPT_MAX_SESSIONS,
	OPT_BACKEND,
	OPT_DEBUG,
};

static const struct option longopts[] = {
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "upstream", required_argument, NULL, OPT_UPSTREAM },
	{ "master", required_argument, NULL, OPT_MASTER },
	{ "game", required_argument, NULL, OPT_GAME },
	{ "heartbeat", required_argument, NULL, OPT_HEARTBEAT },
	{ "flatline", required_argument, NULL, OPT_FLATLINE },
	{ "heartbeat-interval", required_argument, NULL, OPT_HB_INTERVAL },
	{ "probe-timeout", required_argument, NULL, OPT_PROBE_TIMEOUT },
	{ "session-timeout", required_argument, NULL, OPT_SESSION_TIMEOUT },
	{ "max-sessions", required_argument, NULL, OPT_MAX_SESSIONS },
	{ "backend", required_argument, NULL, OPT_BACKEND },
	{ "debug", no_argument, NULL, OPT_DEBUG },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

/* A tag goes into "heartbeat <tag>\n": printable, no spaces or backslashes. */
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

int conf_parse_args(struct etr_conf *c, int argc, char **argv, char *err, size_t errlen)
{
	const char *heartbeat = NULL, *flatline = NULL, *why = NULL;
	bool masters_given = false;
	int opt, gi = 0;

	optind = 0; /* full reset, so the parser can run more than once */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
		const char *v = optarg;
		unsigned long long n;
		char *end;

		switch (opt) {
		case OPT_LISTEN:
			if (addr_parse_numeric(v, &c->listen) < 0)
				why = "expected IP:PORT or [IPv6]:PORT";
			break;
		case OPT_UPSTREAM:
			if (addr_split(v, c->upstream_host, &c->upstream_port, -1) < 0)
				why = "expected HOST:PORT";
			break;
		case OPT_MASTER:
			if (!masters_given)
				c->nmasters = 0, masters_given = true;
			if (c->nmasters == CONF_MASTERS_MAX)
				why = "too many masters (at most 8)";
			else if (addr_split(v, c->masters[c->nmasters].host,
					    &c->masters[c->nmasters].port, CONF_MASTER_PORT) < 0)
				why = "expected HOST or HOST:PORT";
			else
				c->nmasters++;
			break;
		case OPT_GAME:
			for (gi = 0; gi < (int)(sizeof(games) / sizeof(games[0])); gi++)
				if (strcmp(v, games[gi].name) == 0)
					break;
			if (gi == (int)(sizeof(games) / sizeof(games[0]))) {
				why = "expected et, rtcw, q3 or dp";
				break;
			}
			strcpy(c->game, games[gi].short_name);
			strcpy(c->heartbeat, games[gi].heartbeat);
			strcpy(c->flatline, games[gi].flatline);
			break;
		case OPT_HEARTBEAT:
			if (!valid_tag(v, false))
				why = "expected a tag of printable characters without spaces";
			heartbeat = v;
			break;
		case OPT_FLATLINE:
			if (!valid_tag(v, true))
				why = "expected a tag of printable characters without spaces";
			flatline = v;
			break;
		case OPT_HB_INTERVAL:
			if (conf_parse_duration(v, &c->heartbeat_interval_ms) < 0)
				why = "expected a duration above 0 such as 300s or 5m";
			break;
		case OPT_PROBE_TIMEOUT:
			if (conf_parse_duration(v, &c->probe_timeout_ms) < 0)
				why = "expected a duration above 0 such as 3s or 500ms";
			break;
		case OPT_SESSION_TIMEOUT:
			if (conf_parse_duration(v, &c->session_timeout_ms) < 0)
				why = "expected a duration above 0 such as 120s or 2m";
			break;
		case OPT_MAX_SESSIONS:
			errno = 0;
			n = strtoull(v, &end, 10);
			if (*v < '0' || *v > '9' || *end || errno || n == 0 || n > 1000000)
				why = "expected a number from 1 to 1000000";
			else
				c->max_sessions = (uint32_t)n;
			break;
		case OPT_BACKEND:
			if (strcmp(v, "auto") == 0)
				c->backend = CONF_BACKEND_AUTO;
			else if (strcmp(v, "io_uring") == 0)
				c->backend = CONF_BACKEND_URING;
			else if (strcmp(v, "epoll") == 0)
				c->backend = CONF_BACKEND_EPOLL;
			else
				why = "expected auto, io_uring or epoll";
			break;
		case OPT_DEBUG:
			c->debug = true;
			break;
		case 'h':
			c->help = true;
			break;
		case 'V':
			c->version = true;
			break;
		case ':':
			snprintf(err, errlen, "etrelay: %s: missing value", argv[optind - 1]);
			return -1;
		default:
			/* A short option inside a cluster ("-zV") has not advanced
			 * optind: name it by its letter. */
			if (optopt)
				snprintf(err, errlen, "etrelay: -%c: unknown option (see --help)",
					 optopt);
			else
				snprintf(err, errlen, "etrelay: %s: unknown option (see --help)",
					 argv[optind - 1]);
			return -1;
		}
		if (why) {
			snprintf(err, errlen, "etrelay: --%s: invalid value '%s' (%s)",
				 longopts[opt - OPT_LISTEN].name, v, why);
			return -1;
		}
	}
	if (optind < argc) {
		snprintf(err, errlen, "etrelay: unexpected argument '%s' (see --help)", argv[optind]);
		return -1;
	}
	if (c->help || c->version)
		return 0;
	if (heartbeat)
		strcpy(c->heartbeat, heartbeat);
	if (flatline)
		strcpy(c->flatline, flatline);
	if (c->upstream_host[0] == '\0') {
		snprintf(err, errlen, "etrelay: --upstream: missing (the game server's HOST:PORT)");
		return -1;
	}
	return 0;
}
