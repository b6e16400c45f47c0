/* SPDX-License-Identifier: ISC */
/* Command-line options into struct etr_conf. Pure: no resolution, no I/O
 * beyond the error text it returns. */
#ifndef ETR_CONFIG_H
#define ETR_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"

#define CONF_MASTERS_MAX 8
#define CONF_TAG_MAX 64
#define CONF_DEFAULT_LISTEN "0.0.0.0:27960"
#define CONF_MASTER_PORT 27950
#define CONF_HEARTBEAT_INTERVAL (300 * 1000ull) /* ms */
#define CONF_SESSION_TIMEOUT (120 * 1000ull)    /* ms */
#define CONF_PROBE_TIMEOUT (3 * 1000ull)        /* ms */
#define CONF_PROBE_ATTEMPTS 3
#define CONF_MAX_SESSIONS 4000

/* Exit statuses (sysexits.h). */
#define EXIT_USAGE 64
#define EXIT_UNAVAILABLE 69 /* requested backend not available */

enum conf_backend { CONF_BACKEND_AUTO, CONF_BACKEND_URING, CONF_BACKEND_EPOLL };

struct conf_master {
	char host[ADDR_HOSTLEN];
	uint16_t port;
};

struct etr_conf {
	union etr_sockaddr listen;
	char upstream_host[ADDR_HOSTLEN];
	uint16_t upstream_port;
	struct conf_master masters[CONF_MASTERS_MAX];
	unsigned nmasters;
	char game[8];        /* short name for logs: ET, RTCW, Q3, DP */
	char heartbeat[CONF_TAG_MAX];
	char flatline[CONF_TAG_MAX]; /* empty: the game has none */
	uint64_t heartbeat_interval_ms;
	uint64_t session_timeout_ms;
	uint64_t probe_timeout_ms;
	uint32_t max_sessions;
	enum conf_backend backend;
	bool debug;
	bool help, version;
};

/* Fill defaults. */
void conf_defaults(struct etr_conf *c);

/* Parse argv. Returns 0, or -1 with one line naming the flag and the value
 * in err. */
int conf_parse_args(struct etr_conf *c, int argc, char **argv, char *err, size_t errlen);

/* Parse a duration: "300", "300s", "500ms", "5m", "1h" (bare = seconds) into
 * ms. Returns 0 or -1. */
int conf_parse_duration(const char *s, uint64_t *ms);

/* The --help text. */
extern const char conf_usage[];

#endif
