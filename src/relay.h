/* SPDX-License-Identifier: ISC */
/* One relay: a public socket in front of one game server, its sessions, its
 * heartbeats to the masters, and the counters of everything it decides. */
#ifndef ETR_RELAY_H
#define ETR_RELAY_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "heartbeat.h"
#include "loop.h"
#include "session.h"

/* Why a datagram was not forwarded. */
enum relay_drop {
	RELAY_DROP_QUEUE_FULL,  /* SESSION_QUEUE_MAX already in flight */
	RELAY_DROP_TRUNCATED,   /* larger than LOOP_MAX_DGRAM */
	RELAY_DROP_TABLE_FULL,  /* --max-sessions reached */
	RELAY_DROP_SOCKET,      /* could not open a session socket */
	RELAY_DROP_SEND_ERROR,  /* the kernel refused the send */
	RELAY_DROP_BAD_SOURCE,  /* source address of an unknown family */
	RELAY_DROP_COUNT
};

struct relay_counters {
	uint64_t up_pkts, up_bytes;     /* client -> game server */
	uint64_t down_pkts, down_bytes; /* game server -> client */
	uint64_t drops[RELAY_DROP_COUNT];
	uint64_t refused; /* ECONNREFUSED: game server port closed */
	uint64_t sessions_opened;
	uint64_t sessions_closed[SESSION_CLOSE_REASON_COUNT];
	uint64_t probes_sent, probes_answered;
	uint64_t heartbeats_sent, heartbeats_failed, flatlines_sent;
};

struct relay_master {
	char host[ADDR_HOSTLEN];
	uint16_t port;
	union etr_sockaddr addr; /* last good address */
	bool have_addr;
	bool numeric;            /* an address literal: never resolved */
	bool heartbeat_due;      /* send once the running resolution ends */
	int last_err;            /* last resolution result, to log changes only */
};

struct resolver;

struct relay {
	const struct etr_conf *conf;
	const struct loop_ops *ops;
	struct loop *loop;
	int pub_fd;
	union etr_sockaddr pub_addr;
	union etr_sockaddr upstream;
	int probe_fd;
	struct resolver *res;
	int res_fd;
	struct session_table st;
	struct hb hb;
	struct relay_master masters[CONF_MASTERS_MAX];
	unsigned nmasters;
	uint64_t session_timeout; /* ns */
	int sig_fd;               /* signalfd owned by main, -1 if none */
	int exit_signal;          /* the signal that stopped the loop */
	struct relay_counters c;
};

/* Bind, open the probe socket and the resolver; upstream is resolved. Logs
 * what failed. Returns 0 or -errno. */
int relay_open(struct relay *r, const struct etr_conf *conf, const union etr_sockaddr *upstream);

/* Register the relay's fds (and sig_fd, a signalfd for SIGTERM, SIGINT and
 * SIGHUP, or -1) with a created loop. Returns 0 or -errno. */
int relay_attach(struct relay *r, const struct loop_ops *ops, struct loop *l, int sig_fd);

/* The callbacks the loop calls; arg is the relay. */
extern const struct loop_handler relay_handler_template;

/* Exiting: flatline if the server was up, close every session. */
void relay_shutdown(struct relay *r);

void relay_close(struct relay *r);

/* One line of counters for the log. */
void relay_log_stats(const struct relay *r);

const char *relay_drop_name(enum relay_drop d);

/* Loop ids: the top 4 bits say what the id names. */
#define RELAY_ID_KIND(id) ((id) >> SESSION_REF_BITS)
enum relay_id_kind {
	RELAY_ID_PUBLIC = 1,
	RELAY_ID_SESSION = 2,
	RELAY_ID_PROBE = 3,
	RELAY_ID_RESOLVER = 4,
	RELAY_ID_SIGNAL = 5,
};
#define RELAY_ID(kind, ref) ((uint32_t)(kind) << SESSION_REF_BITS | (ref))

#endif
