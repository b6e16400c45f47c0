/* SPDX-License-Identifier: ISC */
/* Prometheus text rendering of struct etr_stats. Names follow the
 * Prometheus conventions: etrelay_ prefix, counters end in _total, base
 * units. No label carries a client address. */
#include "ops_metrics.h"
#include "control_stats.h"
#include "loop.h"
#include "sni_shared.h"
#include "turn.h"

#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

/* A relay's counter exported as it is, one sample per relay. */
struct plain_counter {
	const char *name;
	const char *help;
	size_t off; /* of an _Atomic uint64_t in struct relay_stats */
};

static const struct plain_counter plain_counters[] = {
	{ "etrelay_sessions_opened_total", "Sessions opened for new clients.",
	  offsetof(struct relay_stats, sessions_opened) },
	{ "etrelay_sessions_refused_total",
	  "New clients refused because --max-sessions was reached (also in "
	  "etrelay_dropped_datagrams_total{reason=\"table_full\"}).",
	  offsetof(struct relay_stats, drops[DROP_TABLE_FULL]) },
	{ "etrelay_lifecycle_work_refused_total",
	  "Datagrams from new clients refused while draining (also in "
	  "etrelay_dropped_datagrams_total{reason=\"draining\"}).",
	  offsetof(struct relay_stats, drops[DROP_DRAINING]) },
	{ "etrelay_upstream_refused_total",
	  "Sends to the game server answered with port unreachable (ECONNREFUSED): nothing "
	  "listens on the game port.",
	  offsetof(struct relay_stats, refused) },
	{ "etrelay_probes_sent_total", "getinfo probes sent to the game server.",
	  offsetof(struct relay_stats, probes_sent) },
	{ "etrelay_flatlines_total",
	  "Flatline heartbeats sent because the game server stopped answering.",
	  offsetof(struct relay_stats, flatlines) },
	{ "etrelay_query_cache_answers_total",
	  "getinfo and getstatus queries answered from the relay's copy of the game "
	  "server's reply, without a query to the game server.",
	  offsetof(struct relay_stats, cache_answers) },
	{ "etrelay_qport_collisions_total",
	  "Datagrams refused for their qport (reasons qport_mismatch and qport_owned): "
	  "another session's, which would have given that player's stream or slot to "
	  "this one.",
	  offsetof(struct relay_stats, qport_collisions) },
};

/* A relay's counter, summed over the workers. */
#define SUM(field) stats_relay_sum(st, i, offsetof(struct relay_stats, field))

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Label values escape backslash, double quote and newline (format 0.0.4). */
static void put_label_value(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

/* name{k1="v1",k2="v2"} ; kv holds key, value pairs ended by NULL. */
static void series(FILE *f, const char *name, const char *const *kv)
{
	fputs(name, f);
	for (unsigned i = 0; kv[i]; i += 2) {
		fprintf(f, "%s%s=\"", i ? "," : "{", kv[i]);
		put_label_value(f, kv[i + 1]);
		fputc('"', f);
	}
	if (kv[0])
		fputc('}', f);
}

static void sample(FILE *f, const char *name, const char *const *kv, uint64_t v)
{
	series(f, name, kv);
	fprintf(f, " %" PRIu64 "\n", v);
}

#define LABELS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define NO_LABELS ((const char *const[]){ NULL })

unsigned ops_metrics_masters(struct relay_stats *r, struct master_status out[STATS_MASTERS_MAX])
{
	unsigned n;

	pthread_mutex_lock(&r->lock);
	n = r->nmasters < STATS_MASTERS_MAX ? r->nmasters : STATS_MASTERS_MAX;
	memcpy(out, r->masters, n * sizeof(*out));
	pthread_mutex_unlock(&r->lock);
	return n;
}

static void relays(FILE *f, struct etr_stats *st)
{
	unsigned n = st->nrelays < STATS_RELAYS_MAX ? st->nrelays : STATS_RELAYS_MAX;
	struct master_status m[STATS_MASTERS_MAX];
	struct relay_stats *r;
	unsigned nm;

	/* The format wants a family's samples together, so every family
	 * walks the relays. */
#define EACH_RELAY                                                                                 \
	for (unsigned i = 0; i < n; i++)                                                           \
		if ((r = st->relay[i]) != NULL)

	family(f, "etrelay_relay_info", "gauge",
	       "Each relay: its game, game server and public address; always 1.");
	EACH_RELAY
	sample(f, "etrelay_relay_info",
	       LABELS("relay", r->name, "game", r->game, "upstream", r->upstream,
		      "public_address", r->public_addr),
	       1);

	family(f, "etrelay_sessions_active", "gauge", "Sessions open now.");
	EACH_RELAY
	sample(f, "etrelay_sessions_active", LABELS("relay", r->name), stats_sessions_active(st, i));

	/* Per worker: whether the clients spread over the cores (a client's
	 * address picks its worker). */
	family(f, "etrelay_worker_sessions_active", "gauge",
	       "Sessions open now on each worker (a client's address picks its worker).");
	EACH_RELAY
	for (unsigned w = 0; w < stats_workers(st); w++) {
		const struct relay_stats *wr = stats_relay_of(st, w, i);
		char wn[12];

		snprintf(wn, sizeof(wn), "%u", w);
		if (wr)
			sample(f, "etrelay_worker_sessions_active",
			       LABELS("relay", r->name, "worker", wn), STAT_GET(wr->sessions_active));
	}

	family(f, "etrelay_worker_forwarded_datagrams_total", "counter",
	       "Datagrams forwarded by each worker, by direction as in "
	       "etrelay_forwarded_datagrams_total.");
	EACH_RELAY
	for (unsigned w = 0; w < stats_workers(st); w++) {
		const struct relay_stats *wr = stats_relay_of(st, w, i);
		char wn[12];

		snprintf(wn, sizeof(wn), "%u", w);
		if (!wr)
			continue;
		sample(f, "etrelay_worker_forwarded_datagrams_total",
		       LABELS("relay", r->name, "worker", wn, "direction", "up"),
		       STAT_GET(wr->up_pkts));
		sample(f, "etrelay_worker_forwarded_datagrams_total",
		       LABELS("relay", r->name, "worker", wn, "direction", "down"),
		       STAT_GET(wr->down_pkts));
	}

	family(f, "etrelay_sessions_closed_total", "counter",
	       "Sessions closed, by reason: idle (timeout), shutdown, error (socket failed), "
	       "unassured (the game server never answered), evicted (made room when full).");
	EACH_RELAY
	for (unsigned c = 0; c < CLOSE_COUNT; c++)
		sample(f, "etrelay_sessions_closed_total",
		       LABELS("relay", r->name, "reason", stats_close_name(c)),
		       SUM(sessions_closed[c]));

	for (size_t k = 0; k < sizeof(plain_counters) / sizeof(plain_counters[0]); k++) {
		const struct plain_counter *pc = &plain_counters[k];

		family(f, pc->name, "counter", pc->help);
		EACH_RELAY
		sample(f, pc->name, LABELS("relay", r->name), stats_relay_sum(st, i, pc->off));
	}

	family(f, "etrelay_forwarded_datagrams_total", "counter",
	       "Datagrams forwarded: up = client to game server, down = game server to client.");
	EACH_RELAY
	{
		sample(f, "etrelay_forwarded_datagrams_total",
		       LABELS("relay", r->name, "direction", "up"), SUM(up_pkts));
		sample(f, "etrelay_forwarded_datagrams_total",
		       LABELS("relay", r->name, "direction", "down"), SUM(down_pkts));
	}

	family(f, "etrelay_forwarded_bytes_total", "counter",
	       "UDP payload bytes forwarded, by direction as for datagrams.");
	EACH_RELAY
	{
		sample(f, "etrelay_forwarded_bytes_total",
		       LABELS("relay", r->name, "direction", "up"), SUM(up_bytes));
		sample(f, "etrelay_forwarded_bytes_total",
		       LABELS("relay", r->name, "direction", "down"), SUM(down_bytes));
	}

	family(f, "etrelay_dropped_datagrams_total", "counter",
	       "Datagrams not forwarded, by reason.");
	EACH_RELAY
	for (unsigned d = 0; d < DROP_COUNT; d++)
		sample(f, "etrelay_dropped_datagrams_total",
		       LABELS("relay", r->name, "reason", stats_drop_name(d)), SUM(drops[d]));

	family(f, "etrelay_game_server_up", "gauge",
	       "1 when the game server answered the last probe round, 0 when it did not or "
	       "was not probed yet.");
	EACH_RELAY
	sample(f, "etrelay_game_server_up", LABELS("relay", r->name),
	       STAT_GET(r->server) == SERVER_UP);

	family(f, "etrelay_probe_rounds_total", "counter",
	       "Probe rounds, by result: ok (the game server answered) or failed.");
	EACH_RELAY
	{
		sample(f, "etrelay_probe_rounds_total", LABELS("relay", r->name, "result", "ok"),
		       SUM(probe_rounds_ok));
		sample(f, "etrelay_probe_rounds_total",
		       LABELS("relay", r->name, "result", "failed"), SUM(probe_rounds_failed));
	}

	/* The master families read one copy per relay, so that the three agree. */
	family(f, "etrelay_heartbeats_total", "counter",
	       "Heartbeats to each master, by result: sent, send_error, unresolved.");
	EACH_RELAY
	{
		nm = ops_metrics_masters(r, m);
		for (unsigned j = 0; j < nm; j++)
			for (unsigned h = HB_RESULT_NONE + 1; h < HB_RESULT_COUNT; h++)
				sample(f, "etrelay_heartbeats_total",
				       LABELS("relay", r->name, "master", m[j].name, "result",
					      stats_hb_result_name(h)),
				       m[j].heartbeats[h]);
	}

	family(f, "etrelay_master_last_heartbeat_timestamp_seconds", "gauge",
	       "Unix time of the last heartbeat to each master; absent before the first.");
	EACH_RELAY
	{
		nm = ops_metrics_masters(r, m);
		for (unsigned j = 0; j < nm; j++)
			if (m[j].last_heartbeat)
				sample(f, "etrelay_master_last_heartbeat_timestamp_seconds",
				       LABELS("relay", r->name, "master", m[j].name),
				       m[j].last_heartbeat);
	}

	family(f, "etrelay_master_listing_confirmed", "gauge",
	       "1 while the master lists the relay's address: its challenge was answered "
	       "from the public socket, and it has not left two heartbeat intervals of "
	       "heartbeats unchallenged since; 0 after that, and while the game server is down.");
	EACH_RELAY
	{
		nm = ops_metrics_masters(r, m);
		for (unsigned j = 0; j < nm; j++)
			sample(f, "etrelay_master_listing_confirmed",
			       LABELS("relay", r->name, "master", m[j].name),
			       m[j].listing_confirmed);
	}

	family(f, "etrelay_master_listing_confirmed_timestamp_seconds", "gauge",
	       "Unix time of the master's last challenge answered through the relay; absent "
	       "before the first.");
	EACH_RELAY
	{
		nm = ops_metrics_masters(r, m);
		for (unsigned j = 0; j < nm; j++)
			if (m[j].last_confirmed)
				sample(f, "etrelay_master_listing_confirmed_timestamp_seconds",
				       LABELS("relay", r->name, "master", m[j].name),
				       m[j].last_confirmed);
	}
#undef EACH_RELAY
}

/* PRBE echo: each relay port with prbe yes, then each echo-only port,
 * every result, summed over the workers. */
static void prbe_ports(FILE *f, const struct etr_stats *st)
{
	unsigned nr = st->nrelays < STATS_RELAYS_MAX ? st->nrelays : STATS_RELAYS_MAX;
	unsigned np = st->nprbe_ports < CONF_PRBE_LISTEN_MAX ? st->nprbe_ports : CONF_PRBE_LISTEN_MAX;
	bool any = np > 0;

	for (unsigned i = 0; i < nr && !any; i++)
		any = st->relay[i] && st->relay[i]->prbe_on;
	if (!any)
		return;
	family(f, "etrelay_prbe_packets_total", "counter",
	       "PRBE probes on each echo port (its address), by result: echoed (the kernel took "
	       "the reply), send_error, or why it was dropped: not_probe (no PRBE at its start, "
	       "echo-only ports), source (cannot be real), low_port (source port below 1024), "
	       "loop (source port is an echo port), size (over prbe-max-size), rate (over the "
	       "source's prbe-rate), reflector_port (source port is a well-known reflector's or "
	       "echo port), listener_rate (over the port's prbe-listener-rate, every source "
	       "together), bounce (the bytes just echoed to this source, back within 0.5 s), "
	       "banned (its source is in ban-file).");
	for (unsigned i = 0; i < nr; i++) {
		const struct relay_stats *r = st->relay[i];

		if (!r || !r->prbe_on)
			continue;
		for (unsigned v = 0; v < STATS_PRBE_RESULTS; v++)
			sample(f, "etrelay_prbe_packets_total",
			       LABELS("port", r->prbe.port, "result", stats_prbe_result_name(v)),
			       stats_relay_sum(st, i, offsetof(struct relay_stats, prbe.result[v])));
	}
	for (unsigned i = 0; i < np; i++) {
		const struct prbe_stats *p0 = st->prbe_port[0][i];

		if (!p0)
			continue;
		for (unsigned v = 0; v < STATS_PRBE_RESULTS; v++) {
			uint64_t n = 0;

			for (unsigned w = 0; w < stats_workers(st); w++)
				if (st->prbe_port[w][i])
					n += STAT_GET(st->prbe_port[w][i]->result[v]);
			sample(f, "etrelay_prbe_packets_total",
			       LABELS("port", p0->port, "result", stats_prbe_result_name(v)), n);
		}
	}
}

static void process(FILE *f, const struct ops_process *p)
{
	if (p->have_stat) {
		family(f, "process_cpu_seconds_total", "counter",
		       "Total user and system CPU time spent in seconds.");
		fprintf(f, "process_cpu_seconds_total %.2f\n", p->cpu_seconds);
		family(f, "process_resident_memory_bytes", "gauge",
		       "Resident memory size in bytes.");
		fprintf(f, "process_resident_memory_bytes %" PRIu64 "\n", p->resident_bytes);
		family(f, "process_virtual_memory_bytes", "gauge",
		       "Virtual memory size in bytes.");
		fprintf(f, "process_virtual_memory_bytes %" PRIu64 "\n", p->virtual_bytes);
		family(f, "process_start_time_seconds", "gauge",
		       "Start time of the process since unix epoch in seconds.");
		fprintf(f, "process_start_time_seconds %.2f\n", p->start_time);
	}
	if (p->have_fds) {
		family(f, "process_open_fds", "gauge", "Number of open file descriptors.");
		fprintf(f, "process_open_fds %" PRIu64 "\n", p->open_fds);
		family(f, "process_max_fds", "gauge",
		       "Maximum number of open file descriptors.");
		fprintf(f, "process_max_fds %" PRIu64 "\n", p->max_fds);
	}
}

/* A loop counter (an _Atomic uint64_t at off) summed over the workers. */
static uint64_t loop_sum(const struct etr_stats *st, size_t off)
{
	uint64_t n = 0;

	for (unsigned w = 0; w < stats_workers(st); w++) {
		const struct loop_stats *ls = stats_loop_of(st, w);

		if (ls)
			n += atomic_load_explicit(
			    (const _Atomic uint64_t *)(const void *)((const char *)ls + off),
			    memory_order_relaxed);
	}
	return n;
}
#define LOOP_SUM(field) loop_sum(st, offsetof(struct loop_stats, field))

static void loop_counters(FILE *f, const struct etr_stats *st)
{
	family(f, "etrelay_gso_trains_total", "counter",
	       "Sends that carried a run of datagrams to one destination as one UDP GSO train.");
	sample(f, "etrelay_gso_trains_total", NO_LABELS, LOOP_SUM(gso_trains));
	family(f, "etrelay_gso_datagrams_total", "counter", "Datagrams that left in GSO trains.");
	sample(f, "etrelay_gso_datagrams_total", NO_LABELS, LOOP_SUM(gso_datagrams));
	family(f, "etrelay_gso_refused_total", "counter",
	       "GSO trains the kernel refused; their datagrams were resent one by one.");
	sample(f, "etrelay_gso_refused_total", NO_LABELS, LOOP_SUM(gso_refused));
	family(f, "etrelay_receive_stalls_total", "counter",
	       "Times a socket stopped receiving for lack of free buffers (io_uring).");
	sample(f, "etrelay_receive_stalls_total", NO_LABELS, LOOP_SUM(nobufs));
	family(f, "etrelay_send_no_buffer_total", "counter",
	       "Answers, probes or heartbeats the loop refused for lack of a free send buffer "
	       "(io_uring: more than 128 in one loop turn).");
	sample(f, "etrelay_send_no_buffer_total", NO_LABELS, LOOP_SUM(send_nobufs));
	family(f, "etrelay_stream_chunks", "gauge",
	       "64 KiB stream read chunks in use now (TCP streams of the SNI listeners).");
	sample(f, "etrelay_stream_chunks", NO_LABELS, LOOP_SUM(stream_chunks));
	family(f, "etrelay_stream_chunks_peak", "gauge",
	       "The most stream read chunks each worker had in use at once, summed over the "
	       "workers.");
	sample(f, "etrelay_stream_chunks_peak", NO_LABELS, LOOP_SUM(stream_chunks_peak));
	family(f, "etrelay_stream_read_stalls_total", "counter",
	       "Stream reads that waited for a free chunk.");
	sample(f, "etrelay_stream_read_stalls_total", NO_LABELS, LOOP_SUM(stream_stalls));
	family(f, "etrelay_stream_pool_chunks", "gauge",
	       "Stream read chunks in the pools, summed over the workers; of them, "
	       "etrelay_stream_reserve_chunks are kept for reads that are not spliced bytes "
	       "(ClientHellos, TURN over TCP and TLS).");
	sample(f, "etrelay_stream_pool_chunks", NO_LABELS, LOOP_SUM(stream_pool));
	family(f, "etrelay_stream_reserve_chunks", "gauge",
	       "Stream read chunks that spliced bytes never take, summed over the workers.");
	sample(f, "etrelay_stream_reserve_chunks", NO_LABELS, LOOP_SUM(stream_reserve));
	family(f, "etrelay_stream_reserve_waits_total", "counter",
	       "Reads of spliced bytes that waited because only the reserve was free.");
	sample(f, "etrelay_stream_reserve_waits_total", NO_LABELS, LOOP_SUM(stream_reserve_waits));
	family(f, "etrelay_accept_pauses_total", "counter",
	       "Times a TCP listener stopped accepting for 100 ms: out of file descriptors or "
	       "memory (EMFILE, ENFILE...).");
	sample(f, "etrelay_accept_pauses_total", NO_LABELS, LOOP_SUM(accept_pauses));
	family(f, "etrelay_stream_received_bytes_total", "counter",
	       "Bytes received on TCP streams.");
	sample(f, "etrelay_stream_received_bytes_total", NO_LABELS, LOOP_SUM(stream_rx_bytes));
	family(f, "etrelay_stream_sent_bytes_total", "counter", "Bytes sent on TCP streams.");
	sample(f, "etrelay_stream_sent_bytes_total", NO_LABELS, LOOP_SUM(stream_tx_bytes));
}

/* The SNI listeners: every family walks them, as relays() does relays. */
static void turn_listeners(FILE *f, const struct etr_stats *st)
{
	const struct turn_shared *sh = st->turn;
	unsigned n = sh->n < CONF_TURN_MAX ? sh->n : CONF_TURN_MAX, nw = stats_workers(st);
	struct turn_stats t[CONF_TURN_MAX];
	char buf[ADDR_STRLEN];

	for (unsigned i = 0; i < n; i++)
		turn_listener_totals(&sh->l[i], nw, &t[i]);
#define EACH_TURN for (unsigned i = 0; i < n; i++)
#define TNAME sh->l[i].conf->name
#define TSUM(field) atomic_load_explicit(&t[i].field, memory_order_relaxed)

	family(f, "etrelay_turn_listener_info", "gauge",
	       "Each TURN listener: its UDP listen address, relayed address and max-allocations; "
	       "always 1.");
	EACH_TURN
	{
		char cap[12], relay[ADDR_STRLEN];

		snprintf(cap, sizeof(cap), "%" PRIu32, sh->l[i].conf->max_allocations);
		addr_str(&sh->l[i].conf->relay_addr.sa, relay);
		if (strrchr(relay, ':'))
			*strrchr(relay, ':') = '\0';
		sample(f, "etrelay_turn_listener_info",
		       LABELS("listener", TNAME, "listen_address",
			      addr_str(&sh->l[i].conf->listen.sa, buf), "relay_address", relay,
			      "max_allocations", cap),
		       1);
	}
	family(f, "etrelay_turn_allocations_active", "gauge",
	       "TURN allocations live now, every worker.");
	EACH_TURN
	sample(f, "etrelay_turn_allocations_active", LABELS("listener", TNAME),
	       atomic_load_explicit(&sh->l[i].active, memory_order_relaxed));
	family(f, "etrelay_turn_allocations_total", "counter", "TURN allocations granted.");
	EACH_TURN
	sample(f, "etrelay_turn_allocations_total", LABELS("listener", TNAME), TSUM(allocations));
	family(f, "etrelay_turn_allocations_expired_total", "counter",
	       "TURN allocations ended by their lifetime (not refreshed, or strict-expiry).");
	EACH_TURN
	sample(f, "etrelay_turn_allocations_expired_total", LABELS("listener", TNAME),
	       TSUM(expired));
	family(f, "etrelay_turn_allocations_rejected_total", "counter",
	       "Allocate requests refused after authentication, by reason: cap (max-allocations, "
	       "508), quota (user-quota, 486), drain (draining, 403; refused work), ports (no "
	       "relayed port, 508), exists (437), bad_request (400, 440, 442).");
	EACH_TURN
	for (unsigned r = 0; r < TURN_REJECTS; r++)
		sample(f, "etrelay_turn_allocations_rejected_total",
		       LABELS("listener", TNAME, "reason", turn_reject_name(r)), TSUM(rejected[r]));
	family(f, "etrelay_turn_auth_failures_total", "counter",
	       "TURN requests that failed authentication, by reason.");
	EACH_TURN
	for (unsigned r = 0; r < TURN_AUTHFS; r++)
		sample(f, "etrelay_turn_auth_failures_total",
		       LABELS("listener", TNAME, "reason", turn_authf_name(r)),
		       TSUM(auth_failures[r]));
	family(f, "etrelay_turn_challenges_total", "counter",
	       "401 answers with REALM and NONCE sent (the first request of every client gets one).");
	EACH_TURN
	sample(f, "etrelay_turn_challenges_total", LABELS("listener", TNAME), TSUM(challenges));
	family(f, "etrelay_turn_401_throttled_total", "counter",
	       "Answers to unauthenticated requests over UDP (401, 438, 420, 400, Binding) withheld by "
	       "the per-source-IP rate (each is larger than its request); the listener's total rate "
	       "counts in etrelay_turn_dropped_total{reason=\"throttled_total\"}.");
	EACH_TURN
	sample(f, "etrelay_turn_401_throttled_total", LABELS("listener", TNAME),
	       TSUM(dropped[TURN_DROP_THROTTLED]));
	family(f, "etrelay_turn_peer_rejected_total", "counter",
	       "CreatePermission and ChannelBind refused (403) for a peer the policy refuses.");
	EACH_TURN
	sample(f, "etrelay_turn_peer_rejected_total", LABELS("listener", TNAME),
	       TSUM(peer_rejected));
	family(f, "etrelay_turn_relayed_datagrams_total", "counter",
	       "Datagrams relayed: to_peer from the client, to_client from a peer.");
	EACH_TURN
	{
		sample(f, "etrelay_turn_relayed_datagrams_total",
		       LABELS("listener", TNAME, "direction", "to_peer"), TSUM(dgrams_to_peer));
		sample(f, "etrelay_turn_relayed_datagrams_total",
		       LABELS("listener", TNAME, "direction", "to_client"), TSUM(dgrams_to_client));
	}
	family(f, "etrelay_turn_relayed_bytes_total", "counter",
	       "Payload bytes relayed (without TURN framing), by direction.");
	EACH_TURN
	{
		sample(f, "etrelay_turn_relayed_bytes_total",
		       LABELS("listener", TNAME, "direction", "to_peer"), TSUM(bytes_to_peer));
		sample(f, "etrelay_turn_relayed_bytes_total",
		       LABELS("listener", TNAME, "direction", "to_client"), TSUM(bytes_to_client));
	}
	family(f, "etrelay_turn_dropped_total", "counter",
	       "Datagrams and frames a TURN listener dropped without an answer, by reason "
	       "(auth_rate_ip, auth_rate: a signed request over UDP past the failed-authentication "
	       "budget of its source or of the listener, given no HMAC work).");
	EACH_TURN
	for (unsigned r = 0; r < TURN_DROPS; r++)
		sample(f, "etrelay_turn_dropped_total",
		       LABELS("listener", TNAME, "reason", turn_drop_name(r)), TSUM(dropped[r]));
	family(f, "etrelay_turn_tcp_idle_closed_total", "counter",
	       "TURN TCP connections closed after 30 s without an allocation.");
	EACH_TURN
	sample(f, "etrelay_turn_tcp_idle_closed_total", LABELS("listener", TNAME),
	       TSUM(conns_idle));
	family(f, "etrelay_turn_tls_failed_total", "counter",
	       "TURN TLS connections ended before their handshake finished (a handshake error, "
	       "the client's reset or close, tcp-auth-timeout, an eviction) or by a bad record.");
	EACH_TURN
	sample(f, "etrelay_turn_tls_failed_total", LABELS("listener", TNAME), TSUM(tls_failed));
	family(f, "etrelay_turn_tls_reloads_total", "counter",
	       "Certificate reloads of a TURN tls-listen, by result: loaded (the files changed and "
	       "the new pair is in force), failed (they changed and do not load; the last good pair "
	       "stays). The load at start is not counted.");
	EACH_TURN
	if (sh->l[i].tls_on) {
		sample(f, "etrelay_turn_tls_reloads_total",
		       LABELS("listener", TNAME, "result", "loaded"),
		       atomic_load(&sh->l[i].reload.counts.loaded));
		sample(f, "etrelay_turn_tls_reloads_total",
		       LABELS("listener", TNAME, "result", "failed"),
		       atomic_load(&sh->l[i].reload.counts.failed));
	}
	family(f, "etrelay_turn_tcp_dropped_total", "counter",
	       "TURN TCP and TLS connections refused at accept, by reason: per_ip "
	       "(tcp-max-per-ip), full (tcp-max-connections, every one holding an allocation), or closed: "
	       "frame_memory (the worker's memory for incomplete frames is spent), evicted "
	       "(without an allocation, gave way to a new one at tcp-max-connections), auth_timeout (no "
	       "authenticated request within tcp-auth-timeout), banned (its source is in ban-file: "
	       "at accept, or open when a reload banned it), or refused before any crypto: "
	       "tls_rate_ip (a TLS connection over its source's tls-handshake-ip-rate), tls_rate "
	       "(over the listener's tls-handshake-rate); before an authenticated request: "
	       "unauth_channel (ChannelData), unauth_large (a frame over 1500 bytes); a signed "
	       "request with no HMAC work left: auth_rate_ip (its source over "
	       "auth-fail-ip-rate), auth_rate (the listener over auth-fail-rate, its username's "
	       "key not kept); an unauthenticated request past its source's unauth-ip-rate: "
	       "unauth_rate_ip, past the listener's unauth-rate: unauth_rate.");
	EACH_TURN
	for (unsigned r = 0; r < TURN_TCP_DROPS; r++)
		sample(f, "etrelay_turn_tcp_dropped_total",
		       LABELS("listener", TNAME, "reason", turn_tcp_drop_name(r)),
		       TSUM(tcp_dropped[r]));
	family(f, "etrelay_turn_tcp_connections", "gauge",
	       "TURN TCP and TLS connections open now, by transport (each worker holds at most "
	       "tcp-max-connections of both).");
	EACH_TURN
	{
		if (sh->l[i].conf->tcp_set)
			sample(f, "etrelay_turn_tcp_connections",
			       LABELS("listener", TNAME, "transport", "tcp"), TSUM(conns_open[0]));
		if (sh->l[i].conf->tls_set)
			sample(f, "etrelay_turn_tcp_connections",
			       LABELS("listener", TNAME, "transport", "tls"), TSUM(conns_open[1]));
	}
	family(f, "etrelay_turn_tcp_unauthenticated_connections", "gauge",
	       "TURN TCP and TLS connections open now without an authenticated request (closed "
	       "after tcp-auth-timeout; the ones that give way at tcp-max-connections).");
	EACH_TURN
	if (sh->l[i].conf->tcp_set || sh->l[i].conf->tls_set)
		sample(f, "etrelay_turn_tcp_unauthenticated_connections", LABELS("listener", TNAME),
		       TSUM(conns_unauth));
	family(f, "etrelay_turn_errors_total", "counter",
	       "TURN error answers sent, by code (0: another code).");
	EACH_TURN
	for (unsigned r = 0; r < TURN_ERROR_CODES; r++) {
		char code[8];

		snprintf(code, sizeof(code), "%u", turn_error_codes[r]);
		sample(f, "etrelay_turn_errors_total", LABELS("listener", TNAME, "code", code),
		       TSUM(errors[r]));
	}
	family(f, "etrelay_turn_bindings_total", "counter", "STUN Binding requests answered.");
	EACH_TURN
	sample(f, "etrelay_turn_bindings_total", LABELS("listener", TNAME), TSUM(bindings));
#undef EACH_TURN
#undef TNAME
#undef TSUM
}

static void sni_listeners(FILE *f, struct sni_shared *sh)
{
	unsigned n = sh->n < CONF_SNI_MAX ? sh->n : CONF_SNI_MAX;
	struct sni_totals t[CONF_SNI_MAX];
	char buf[ADDR_STRLEN];

	for (unsigned i = 0; i < n; i++)
		sni_listener_totals(sh, i, &t[i]);
#define EACH_SNI for (unsigned i = 0; i < n; i++)
#define NAME sh->l[i].conf->name

	family(f, "etrelay_sni_listener_info", "gauge",
	       "Each SNI listener: its TCP listen address and its max-connections; always 1.");
	EACH_SNI
	{
		char cap[12];

		snprintf(cap, sizeof(cap), "%" PRIu32, sh->l[i].conf->max_connections);
		sample(f, "etrelay_sni_listener_info",
		       LABELS("listener", NAME, "listen_address",
			      addr_str(&sh->l[i].conf->listen.sa, buf), "max_connections", cap),
		       1);
	}

	family(f, "etrelay_sni_connections_total", "counter",
	       "Connections accepted by an SNI listener, by result: spliced (connected to its "
	       "route's upstream) or the reason it was closed without a byte.");
	EACH_SNI
	for (unsigned r = 0; r < SNI_RESULTS; r++)
		sample(f, "etrelay_sni_connections_total",
		       LABELS("listener", NAME, "result", sni_result_name(r)), t[i].result[r]);

	family(f, "etrelay_sni_connections_ended_total", "counter",
	       "Spliced connections closed, by reason: done (both sides closed), idle "
	       "(idle-timeout), reset (a side reset or failed), revoked (its route was removed "
	       "or changed), shutdown, banned (a ban-file reload banned its source), stalled (a "
	       "side took no byte for send-timeout: both reset).");
	EACH_SNI
	for (unsigned e = 0; e < SNI_ENDS; e++)
		sample(f, "etrelay_sni_connections_ended_total",
		       LABELS("listener", NAME, "reason", sni_end_name(e)), t[i].ended[e]);

	family(f, "etrelay_sni_reads_deferred_total", "counter",
	       "Reads of spliced bytes put off because their source (an IPv4 address, an IPv6 "
	       "/64, /56 or /48) held its share of the worker's stream chunks.");
	EACH_SNI
	sample(f, "etrelay_sni_reads_deferred_total", LABELS("listener", NAME), t[i].deferred);

	family(f, "etrelay_sni_bytes_total", "counter",
	       "Bytes spliced: up = client to upstream (the ClientHello included, a PROXY "
	       "header not), down = upstream to client.");
	EACH_SNI
	{
		sample(f, "etrelay_sni_bytes_total", LABELS("listener", NAME, "direction", "up"),
		       t[i].bytes_in);
		sample(f, "etrelay_sni_bytes_total", LABELS("listener", NAME, "direction", "down"),
		       t[i].bytes_out);
	}

	family(f, "etrelay_sni_active_connections", "gauge",
	       "Connections open now (counted by max-connections), prereading ones included, "
	       "refused ones lingering not.");
	EACH_SNI
	sample(f, "etrelay_sni_active_connections", LABELS("listener", NAME), t[i].active);

	family(f, "etrelay_sni_preread_connections", "gauge",
	       "Connections still reading their ClientHello (counted by max-preread).");
	EACH_SNI
	sample(f, "etrelay_sni_preread_connections", LABELS("listener", NAME), t[i].preread);

	family(f, "etrelay_sni_lingering_connections", "gauge",
	       "Refused connections whose last bytes are being read and dropped before the "
	       "close (at most 2 s each).");
	EACH_SNI
	sample(f, "etrelay_sni_lingering_connections", LABELS("listener", NAME), t[i].lingering);

	family(f, "etrelay_sni_preread_seconds", "histogram",
	       "Time from accept to the end of the preread: the whole ClientHello read, "
	       "refused or timed out, or the client gone.");
	EACH_SNI
	{
		uint64_t cum = 0;
		char le[24];

		for (unsigned b = 0; b <= SNI_PREREAD_BUCKETS; b++) {
			cum += t[i].preread_hist[b];
			if (b < SNI_PREREAD_BUCKETS)
				snprintf(le, sizeof(le), "%g", (double)sni_preread_bound_ns[b] / 1e9);
			else
				snprintf(le, sizeof(le), "+Inf");
			sample(f, "etrelay_sni_preread_seconds_bucket",
			       LABELS("listener", NAME, "le", le), cum);
		}
		series(f, "etrelay_sni_preread_seconds_sum", LABELS("listener", NAME));
		fprintf(f, " %.9f\n", (double)t[i].preread_ns / 1e9);
		sample(f, "etrelay_sni_preread_seconds_count", LABELS("listener", NAME),
		       t[i].preread_count);
	}

	family(f, "etrelay_sni_routes", "gauge",
	       "Routes in force: the config file's and the control plane's.");
	EACH_SNI
	sample(f, "etrelay_sni_routes", LABELS("listener", NAME),
	       atomic_load_explicit(&sh->l[i].nroutes, memory_order_relaxed));

	family(f, "etrelay_sni_memory_bytes", "gauge",
	       "Bytes the listener holds for its connections: preread buffers and chunks on "
	       "their way (at most four 64 KiB chunks per spliced connection, two per direction).");
	EACH_SNI
	sample(f, "etrelay_sni_memory_bytes", LABELS("listener", NAME), (uint64_t)t[i].memory);
#undef NAME
#undef EACH_SNI
}

/* The control-plane client's, copied under its lock. */
static void control(FILE *f, struct control_stats *cs)
{
	struct control_stats s;

	pthread_mutex_lock(&cs->lock);
	s = *cs;
	pthread_mutex_unlock(&cs->lock);
	family(f, "etrelay_control_heartbeats_total", "counter",
	       "Heartbeats to the control plane, by result (ok, refused: a 4xx other than 429, "
	       "http_error, timeout, network_error, bad_answer: malformed JSON or a bad route, "
	       "too_large: an answer past control-max-answer, cut off unread).");
	for (unsigned r = 0; r < CTL_RESULT_COUNT; r++)
		if (r != CTL_STATE_ERROR)
			sample(f, "etrelay_control_heartbeats_total",
			       LABELS("result", ctl_result_name(r)), s.heartbeats[r]);
	family(f, "etrelay_control_enrolments_total", "counter",
	       "Enrolments with the bootstrap token, by result (state_error: enrolled, but the "
	       "credential could not be written to the state directory).");
	for (unsigned r = 0; r < CTL_RESULT_COUNT; r++)
		sample(f, "etrelay_control_enrolments_total", LABELS("result", ctl_result_name(r)),
		       s.enrolments[r]);
	family(f, "etrelay_control_routes", "gauge",
	       "SNI routes in the set of the last good heartbeat answer (or, at a start, of the "
	       "route file), less those refused for their upstream.");
	sample(f, "etrelay_control_routes", NO_LABELS, s.routes);
	family(f, "etrelay_control_routes_stale", "gauge",
	       "1 while the routes in force came from the route file in the state directory at "
	       "the start (the last good set before it) and no heartbeat has succeeded since; "
	       "else 0.");
	sample(f, "etrelay_control_routes_stale", NO_LABELS, s.routes_stale ? 1 : 0);
	family(f, "etrelay_control_routes_refused", "gauge",
	       "Routes of the last good heartbeat answer dropped for their upstream, by reason "
	       "(listener: one of the relay's own; host: this host, not allowed alone; private: "
	       "private or link-local, in no control-allow-upstream block; reserved: not global "
	       "unicast); the other routes apply.");
	for (unsigned w = 0; w < CTL_UPSTREAM_WHYS; w++)
		if (!ctl_upstream_ok((enum ctl_upstream_why)w))
			sample(f, "etrelay_control_routes_refused",
			       LABELS("reason", ctl_upstream_why_name((enum ctl_upstream_why)w)),
			       s.routes_refused[w]);
	family(f, "etrelay_control_last_success_timestamp_seconds", "gauge",
	       "Unix time of the last good heartbeat; 0 before the first.");
	sample(f, "etrelay_control_last_success_timestamp_seconds", NO_LABELS, s.last_success);
}

int ops_metrics_render(FILE *out, struct etr_stats *st, const struct ops_process *proc)
{
	int lc = atomic_load(&st->lifecycle);

	/* A state set rather than a number: no one has to remember which
	 * number means draining, and a new state is a new label value. */
	family(out, "etrelay_lifecycle_state", "gauge",
	       "1 for the current lifecycle state: active (accepts new sessions) or draining "
	       "(refuses new sessions, keeps the open ones).");
	sample(out, "etrelay_lifecycle_state", LABELS("state", "active"), lc == LIFECYCLE_ACTIVE);
	sample(out, "etrelay_lifecycle_state", LABELS("state", "draining"),
	       lc != LIFECYCLE_ACTIVE);

	family(out, "etrelay_backend_info", "gauge", "The event loop backend in use; always 1.");
	sample(out, "etrelay_backend_info", LABELS("backend", st->backend ? st->backend : "unknown"),
	       1);
	family(out, "etrelay_build_info", "gauge", "The etrelay version; always 1.");
	sample(out, "etrelay_build_info", LABELS("version", st->version ? st->version : "unknown"),
	       1);

	family(out, "etrelay_workers", "gauge",
	       "Workers: packet loops, one thread each; a client's address picks its worker.");
	sample(out, "etrelay_workers", NO_LABELS, stats_workers(st));

	relays(out, st);
	prbe_ports(out, st);
	if (st->sni)
		sni_listeners(out, st->sni);
	if (st->turn)
		turn_listeners(out, st);
	if (st->control)
		control(out, st->control);
	if (st->loop)
		loop_counters(out, st);
	if (proc)
		process(out, proc);
	return ferror(out) ? -EIO : 0;
}
