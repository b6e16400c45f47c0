/* SPDX-License-Identifier: ISC */
/* Names of the stats enums, as they appear in logs, /lifecycle and metric
 * labels: lower case, underscores, stable once published. */
#include "stats.h"

#include <stdio.h>
#include <string.h>

uint64_t stats_relay_sum(const struct etr_stats *st, unsigned i, size_t off)
{
	uint64_t n = 0;

	for (unsigned w = 0; w < stats_workers(st); w++) {
		const struct relay_stats *r = stats_relay_of(st, w, i);

		if (r)
			n += atomic_load_explicit(
			    (const _Atomic uint64_t *)(const void *)((const char *)r + off),
			    memory_order_relaxed);
	}
	return n;
}

uint32_t stats_sessions_active(const struct etr_stats *st, unsigned i)
{
	uint32_t n = 0;

	for (unsigned w = 0; w < stats_workers(st); w++) {
		const struct relay_stats *r = stats_relay_of(st, w, i);

		if (r)
			n += STAT_GET(r->sessions_active);
	}
	return n;
}

unsigned stats_relay_masters(struct relay_stats *r, struct master_status out[STATS_MASTERS_MAX])
{
	unsigned n;

	pthread_mutex_lock(&r->lock);
	n = r->nmasters < STATS_MASTERS_MAX ? r->nmasters : STATS_MASTERS_MAX;
	memcpy(out, r->masters, n * sizeof(*out));
	pthread_mutex_unlock(&r->lock);
	return n;
}

void stats_relay_add(struct relay_stats *to, const struct relay_stats *from)
{
#define ADD(f) STAT_SET(to->f, STAT_GET(to->f) + STAT_GET(from->f))
	ADD(up_pkts);
	ADD(up_bytes);
	ADD(down_pkts);
	ADD(down_bytes);
	for (int d = 0; d < DROP_COUNT; d++)
		ADD(drops[d]);
	ADD(refused);
	ADD(cache_answers);
	ADD(qport_collisions);
	ADD(sessions_opened);
	for (int c = 0; c < CLOSE_COUNT; c++)
		ADD(sessions_closed[c]);
	ADD(sessions_active);
	ADD(probes_sent);
	ADD(probe_rounds_ok);
	ADD(probe_rounds_failed);
	ADD(flatlines);
	for (int r = 0; r < STATS_PRBE_RESULTS; r++)
		ADD(prbe.result[r]);
#undef ADD
}

const char *stats_drop_name(enum stats_drop d)
{
	static const char *const names[DROP_COUNT] = {
	    [DROP_QUEUE_FULL] = "queue_full",
	    [DROP_TRUNCATED] = "truncated",
	    [DROP_TABLE_FULL] = "table_full",
	    [DROP_DRAINING] = "draining",
	    [DROP_SOCKET] = "socket",
	    [DROP_SEND_ERROR] = "send_error",
	    [DROP_BAD_SOURCE] = "bad_source",
	    [DROP_BOGON] = "bogon",
	    [DROP_BANNED] = "banned",
	    [DROP_IP_RATE] = "ip_rate",
	    [DROP_SERVER_RATE] = "server_rate",
	    [DROP_IP_SESSIONS] = "ip_sessions",
	    [DROP_MASTER_RATE] = "master_rate",
	    [DROP_IP_SESSION_RATE] = "ip_session_rate",
	    [DROP_SESSION_RATE] = "session_rate",
	    [DROP_CACHE_RATE] = "cache_rate",
	    [DROP_NET_RATE] = "net_rate",
	    [DROP_QPORT_MISMATCH] = "qport_mismatch",
	    [DROP_QPORT_OWNED] = "qport_owned",
	    [DROP_CONNECT_UNREAD] = "connect_unread",
	    [DROP_CONNECT_UNCHALLENGED] = "connect_unchallenged",
	    [DROP_PRBE] = "prbe",
	};

	return (unsigned)d < DROP_COUNT ? names[d] : "unknown";
}

const char *stats_close_name(enum stats_close c)
{
	static const char *const names[CLOSE_COUNT] = {
	    [CLOSE_IDLE] = "idle",	     [CLOSE_SHUTDOWN] = "shutdown", [CLOSE_ERROR] = "error",
	    [CLOSE_UNASSURED] = "unassured", [CLOSE_EVICTED] = "evicted",
	};

	return (unsigned)c < CLOSE_COUNT ? names[c] : "unknown";
}

const char *stats_hb_result_name(enum stats_hb_result r)
{
	static const char *const names[HB_RESULT_COUNT] = {
	    [HB_RESULT_NONE] = "none",
	    [HB_RESULT_SENT] = "sent",
	    [HB_RESULT_SEND_ERROR] = "send_error",
	    [HB_RESULT_UNRESOLVED] = "unresolved",
	    [HB_RESULT_WRONG_FAMILY] = "wrong_family",
	};

	return (unsigned)r < HB_RESULT_COUNT ? names[r] : "unknown";
}

const char *stats_prbe_result_name(unsigned r)
{
	if (r == STATS_PRBE_SEND_ERROR)
		return "send_error";
	if (r == STATS_PRBE_BANNED)
		return "banned";
	return prbe_verdict_name((enum prbe_verdict)r);
}

size_t stats_list(char *buf, size_t size, size_t o, const uint64_t *v, unsigned n,
		  const char *(*name)(unsigned), unsigned skip)
{
	bool first = true;

	for (unsigned i = 0; i < n && o < size; i++) {
		uint64_t x = v[i];

		if (!x || i == skip)
			continue;
		o += (size_t)snprintf(buf + o, size - o, "%s%s %llu", first ? " (" : ", ", name(i),
				      (unsigned long long)x);
		first = false;
	}
	if (!first && o < size)
		o += (size_t)snprintf(buf + o, size - o, ")");
	return o;
}
