/* SPDX-License-Identifier: ISC */
/* The operations plane: an HTTP listener in a thread of its own serving
 * /healthz, /readyz, /lifecycle, drain and resume, /sessions and /metrics from
 * struct etr_stats (the listener kinds' parts through their hooks, which read
 * it). It never touches the packet loop's memory beyond that. */
#ifndef ETR_OPS_H
#define ETR_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "addr.h"
#include "ops_conn.h"
#include "secret.h"
#include "stats.h"

/* Token environment variables; each also has a _FILE form naming a file. */
#define OPS_ENV_LIFECYCLE "ETRELAY_LIFECYCLE_TOKEN"
#define OPS_ENV_READ	  "ETRELAY_LIFECYCLE_READ_TOKEN"
#define OPS_ENV_METRICS	  "ETRELAY_METRICS_TOKEN"
#define OPS_TOKEN_MIN	  SECRET_MIN

#define OPS_REQUEST_MAX	    8192 /* bytes of request line + headers */
#define OPS_CONNECTIONS_MAX OPS_CONN_MAX
#define OPS_DEADLINE_SEC    OPS_CONN_DEADLINE_SEC
/* Descriptors the ops plane may hold at once: every connection slot, the
 * listener, MHD's epoll, the thread's wake-up eventfd and a token file
 * being read. The fd reserve at startup counts them. */
#define OPS_FDS_MAX (OPS_CONN_SLOTS + 4)

struct ops;
struct kind;
struct kind_env;

/* The listener kinds (loop/kind.h): the daemon's table and each kind's
 * environment, walked in order for their part of /readyz, the heartbeat's
 * health and /lifecycle (n 0: none). */
struct ops_kinds {
	unsigned n;
	const struct kind *const *kind;
	const struct kind_env *env;
};

/* Why the process is not ready, as GET /readyz says it (it answers with
 * the first reason), and the heartbeat's health carries (every reason). */
#define OPS_REASONS_MAX 8
#define OPS_REASON_LEN	160
struct ops_readiness {
	bool ready;    /* /readyz answers 200 */
	bool draining; /* not ready because the process drains */
	unsigned n;    /* reasons in reason[], none when ready */
	char reason[OPS_REASONS_MAX][OPS_REASON_LEN];
};

/* What /readyz answers, from st and the kinds (any thread: atomics only):
 * draining, no relay yet (no kind runs a listener), or each listener a kind
 * says is not ready, as a relay whose game server did not answer its last
 * probe round (up to OPS_REASONS_MAX reasons, a kind's last saying how many
 * more). */
void ops_readiness(struct etr_stats *st, const struct ops_kinds *k, struct ops_readiness *out);

struct ops_config {
	union etr_sockaddr listen;
	bool allow_public; /* bind an address that is not private */
	/* GET /sessions: a JSON document in a malloc'd buffer, from the ops
	 * thread; returns 0 or -1 (the loop did not answer in time). */
	int (*sessions)(void *arg, char **buf, size_t *len);
	void *sessions_arg;
	/* /readyz's reasons and /lifecycle's members of the listener kinds;
	 * the table and its environments outlive the ops plane. */
	struct ops_kinds kinds;
};

/* True for loopback, RFC 1918, CGNAT (100.64/10), ULA (fc00::/7),
 * link-local, and IPv4-mapped forms of these. */
bool ops_addr_is_private(const union etr_sockaddr *sa);

/* Read the tokens from the environment (and _FILE files). Returns 0, or -1
 * with a message in err (a token shorter than OPS_TOKEN_MIN, an unreadable
 * file). Never puts a token into err. */
int ops_tokens_check(char *err, size_t errlen);

/* Bind and start the listener thread. Returns 0, or with a message in err
 * -EINVAL for a fault of the configuration (public address refused, bad
 * token), another -errno for one of the system (bind failure, as a port in
 * use: -EIO, resources). */
int ops_start(struct ops **op, const struct ops_config *cfg, struct etr_stats *st, char *err,
	      size_t errlen);

/* The bound TCP port (useful after listening on port 0), or -1. */
int ops_port(const struct ops *op);

/* SIGHUP: re-read the token files. Returns how many tokens are set now
 * (0: none), or -1 with a message in err (the old tokens stay). */
int ops_reload_tokens(struct ops *op, char *err, size_t errlen);

/* Stop the thread and close the listener. */
void ops_stop(struct ops *op);

#endif
