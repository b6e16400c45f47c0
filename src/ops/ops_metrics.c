/* SPDX-License-Identifier: ISC */
/* Prometheus text rendering of struct etr_stats. Names follow the
 * Prometheus conventions: etrelay_ prefix, counters end in _total, base
 * units. No label carries a client address. Each family is one row of
 * metrics[]: its source (the relays, the SNI listeners...), where its value
 * lives in the source's struct (an offset, summed over the workers, or an
 * accessor), the one label it adds and that label's values; render()
 * writes any row. A new counter is a new row. */
#include "ops_metrics.h"
#include "control_stats.h"
#include "loop.h"
#include "sni_shared.h"
#include "tun_kind.h"
#include "tun_r3.h"
#include "turn.h"
#include "xdp.h"

#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

/* Where a family's samples come from: each source has instances (a relay,
 * a listener...), each a struct the row's offsets point into. RELAY, PRBE
 * and LOOP are summed over the workers; RELAY_WORKER is each relay on each
 * worker; MASTER each relay's masters; SNI and TURN their listeners'
 * totals, SNI_L and TURN_L their shared parts, SNI_CONF and TURN_CONF
 * their configuration; TUNNEL the tunnel's, TUNNEL_R3 rung 3's summed over
 * the workers; GLOBAL is struct mctx itself. */
enum msrc {
	GLOBAL,
	RELAY,
	RELAY_WORKER,
	MASTER,
	PRBE,
	SNI,
	SNI_L,
	SNI_CONF,
	TURN,
	TURN_L,
	TURN_CONF,
	CONTROL,
	TUNNEL,
	TUNNEL_R3,
	XDP,
	LOOP,
	PROC,
	FDS,
	SOURCES
};

/* One rendering: the instances of each source, and what is copied or
 * summed before the first family. */
struct mctx {
	struct etr_stats *st;
	const struct ops_process *proc;
	unsigned n[SOURCES]; /* instances */
	bool on[SOURCES];    /* its families are rendered */
	unsigned nworkers;
	uint64_t state[2]; /* active, draining */
	const char *backend, *version;
	unsigned nm; /* the relay at hand's masters, copied under its lock */
	struct master_status m[STATS_MASTERS_MAX];
	struct sni_totals sni[CONF_SNI_MAX];
	struct turn_stats turn[CONF_TURN_MAX];
	struct control_stats ctl;
	struct tun_stats tun;
	struct tun_r3_stats r3;
	uint64_t xdp[XDP_COUNTS]; /* the program's counters, summed over the CPUs */
};

#define LABEL_LEN  ADDR_STRLEN
#define LABELS_MAX 6

/* Instance i of source s on worker w: the struct its values are read
 * from; NULL on worker 0: no such instance. */
static const void *part(const struct mctx *c, enum msrc s, unsigned i, unsigned w)
{
	const struct etr_stats *st = c->st;
	unsigned nw = c->nworkers, nr = c->n[RELAY];
	const struct relay_stats *r;

	switch (s) {
	case GLOBAL:
		return c;
	case RELAY:
		return st->relay[i] ? stats_relay_of(st, w, i) : NULL;
	case RELAY_WORKER:
		return st->relay[i / nw] ? stats_relay_of(st, i % nw, i / nw) : NULL;
	case MASTER:
		return i % STATS_MASTERS_MAX < c->nm ? &c->m[i % STATS_MASTERS_MAX] : NULL;
	case PRBE: /* each relay port with prbe yes, then each echo-only port */
		if (i >= nr)
			return st->prbe_port[w][i - nr];
		r = st->relay[i] && st->relay[i]->prbe_on ? stats_relay_of(st, w, i) : NULL;
		return r ? &r->prbe : NULL;
	case SNI:
		return &c->sni[i];
	case SNI_L:
		return &st->sni->l[i];
	case SNI_CONF:
		return st->sni->l[i].conf;
	case TURN:
		return &c->turn[i];
	case TURN_L:
		return &st->turn->l[i];
	case TURN_CONF:
		return st->turn->l[i].conf;
	case CONTROL:
		return &c->ctl;
	case TUNNEL:
		return &c->tun;
	case TUNNEL_R3:
		return &c->r3;
	case XDP: /* a listener's results */
		return &c->xdp[i * XDP_REASONS];
	case LOOP:
		return stats_loop_of(st, w);
	default:
		return c->proc;
	}
}

static unsigned pair(const char **kv, const char *label, const char *value)
{
	kv[0] = label;
	kv[1] = value;
	return 2;
}

/* Instance i's label pairs into kv; returns how many strings. */
static unsigned labels(const struct mctx *c, enum msrc s, unsigned i, const char **kv, char *buf)
{
	unsigned nw = c->nworkers, nm = STATS_MASTERS_MAX;

	switch (s) {
	case RELAY:
		return pair(kv, "relay", c->st->relay[i]->name);
	case RELAY_WORKER:
		snprintf(buf, LABEL_LEN, "%u", i % nw);
		return labels(c, RELAY, i / nw, kv, buf) + pair(kv + 2, "worker", buf);
	case MASTER:
		return labels(c, RELAY, i / nm, kv, buf) +
		       pair(kv + 2, "master", c->m[i % nm].name);
	case PRBE:
		return pair(kv, "port", ((const struct prbe_stats *)part(c, s, i, 0))->port);
	case SNI:
	case SNI_L:
	case SNI_CONF:
		return pair(kv, "listener", c->st->sni->l[i].conf->name);
	case TURN:
	case TURN_L:
	case TURN_CONF:
		return pair(kv, "listener", c->st->turn->l[i].conf->name);
	case XDP:
		return pair(kv, "listener", xdp_listener_name(i));
	default:
		return 0;
	}
}

/* The one label a family adds to its source's, and its values: names[k],
 * or name(k); skip(k): no such sample. */
struct mlabel {
	const char *label;
	unsigned n;
	const char *const *names;
	const char *(*name)(unsigned k, char *buf);
	bool (*skip)(unsigned k);
};

#define NAMES(fn, type)                                                                            \
	static const char *fn##_k(unsigned k, char *buf)                                           \
	{                                                                                          \
		return fn((type)k);                                                                \
	}
NAMES(stats_close_name, enum stats_close)
NAMES(stats_drop_name, enum stats_drop)
NAMES(stats_hb_result_name, enum stats_hb_result)
NAMES(stats_prbe_result_name, unsigned)
NAMES(sni_result_name, enum sni_result)
NAMES(sni_end_name, enum sni_end)
NAMES(turn_reject_name, enum turn_reject)
NAMES(turn_authf_name, enum turn_authf)
NAMES(turn_drop_name, enum turn_drop)
NAMES(turn_tcp_drop_name, enum turn_tcp_drop)
NAMES(ctl_result_name, enum ctl_result)
NAMES(ctl_upstream_why_name, enum ctl_upstream_why)
NAMES(ctl_cert_result_name, enum certsched_result)
NAMES(xdp_result_name, unsigned)
NAMES(tun_r3_result_name, enum tun_r3_result)
NAMES(tun_r3_end_name, enum tun_r3_end)
NAMES(tun_r3_drop_name, enum tun_r3_drop)

static const char *turn_code_k(unsigned k, char *buf)
{
	snprintf(buf, LABEL_LEN, "%u", turn_error_codes[k]);
	return buf;
}

static bool hb_none(unsigned k)
{
	return k == HB_RESULT_NONE;
}

/* state_error is an enrolment's alone. */
static bool ctl_state_error(unsigned k)
{
	return k == CTL_STATE_ERROR;
}

static bool ctl_upstream_ok_k(unsigned k)
{
	return ctl_upstream_ok((enum ctl_upstream_why)k);
}

#define LABEL_NAMES(l, ...)                                                                        \
	(&(const struct mlabel){l, sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *),         \
				(const char *const[]){__VA_ARGS__}})
/* name(k), and maybe skip(k). */
#define LABEL_ENUM(l, count, ...) (&(const struct mlabel){l, count, NULL, __VA_ARGS__})

static const struct mlabel *const l_state = LABEL_NAMES("state", "active", "draining");
static const struct mlabel *const l_updown = LABEL_NAMES("direction", "up", "down");
static const struct mlabel *const l_peerclient = LABEL_NAMES("direction", "to_peer", "to_client");
static const struct mlabel *const l_okfailed = LABEL_NAMES("result", "ok", "failed");
static const struct mlabel *const l_loaded = LABEL_NAMES("result", "loaded", "failed");
static const struct mlabel *const l_transport = LABEL_NAMES("transport", "tcp", "tls");
static const struct mlabel *const l_wgclient =
    LABEL_NAMES("direction", "to_wireguard", "to_client");

/* How a value is stored (a double is printed with 2 decimals). */
enum mwidth { MW_U64, MW_U32, MW_I64, MW_BOOL, MW_F2 };

/* A label of an _info family, read at off in the instance's struct: a
 * char array, a string pointer, an address, one without its port, a
 * number. */
enum mattr_kind { MA_STR, MA_PTR, MA_ADDR, MA_HOST, MA_U32 };
struct mattr {
	const char *label;
	size_t off;
	enum mattr_kind kind;
};
#define ATTRS(...) ((const struct mattr[]){__VA_ARGS__, {NULL}})

/* A histogram: n + 1 buckets from the row's offset (the last +Inf),
 * their bounds in ns, the sum in ns and the count. */
struct mhist {
	const uint64_t *bound_ns;
	unsigned n;
	size_t sum_off, count_off;
};

enum mtype { COUNTER, GAUGE, HISTOGRAM };
static const char *const mtype_name[] = {"counter", "gauge", "histogram"};

/* A family. Its value: get(), 1 for an _info family, or the field at off
 * (at off + 8k or offs[k] for the label's value k) summed over the
 * source's workers. */
struct metric {
	const char *name;
	enum mtype type;
	enum msrc src;
	size_t off;
	enum mwidth width;
	const struct mlabel *label;
	const size_t *offs;
	uint64_t (*get)(const struct mctx *c, unsigned i);
	bool (*when)(const struct mctx *c, unsigned i, unsigned k); /* NULL: always */
	bool nonzero;						    /* absent while 0 */
	const struct mattr *attrs; /* an _info family's labels, to { NULL } */
	const struct mhist *hist;
	const char *help;
};

#define OFFS(type, a, b) ((const size_t[]){offsetof(type, a), offsetof(type, b)})
#define X(f)		 offsetof(struct mctx, f)
#define R(f)		 offsetof(struct relay_stats, f)
#define M(f)		 offsetof(struct master_status, f)
#define S(f)		 offsetof(struct sni_totals, f)
#define SC(f)		 offsetof(struct sni_conf, f)
#define T(f)		 offsetof(struct turn_stats, f)
#define TC(f)		 offsetof(struct turn_conf, f)
#define C(f)		 offsetof(struct control_stats, f)
#define TU(f)		 offsetof(struct tun_stats, f)
#define R3(f)		 offsetof(struct tun_r3_stats, f)
#define L(f)		 offsetof(struct loop_stats, f)
#define P(f)		 offsetof(struct ops_process, f)

static uint64_t game_server_up(const struct mctx *c, unsigned i)
{
	return STAT_GET(c->st->relay[i]->server) == SERVER_UP;
}

static bool turn_tls_on(const struct mctx *c, unsigned i, unsigned k)
{
	return c->st->turn->l[i].tls_on;
}

static bool turn_transport_set(const struct mctx *c, unsigned i, unsigned k)
{
	return k == 0 ? c->st->turn->l[i].conf->tcp_set : c->st->turn->l[i].conf->tls_set;
}

static bool turn_tcp_or_tls(const struct mctx *c, unsigned i, unsigned k)
{
	return c->st->turn->l[i].conf->tcp_set || c->st->turn->l[i].conf->tls_set;
}

/* The walk budget's count is the game listener's alone. */
static uint64_t xdp_unwalked(const struct mctx *c, unsigned i)
{
	return c->xdp[XDP_UNWALKED];
}

static bool xdp_game(const struct mctx *c, unsigned i, unsigned k)
{
	return i == XDP_LISTENER_GAME;
}

/* The tunnel certificate's families: with a tunnel only. */
static bool ctl_cert_on(const struct mctx *c, unsigned i, unsigned k)
{
	(void)i, (void)k;
	return c->ctl.cert_on;
}

/* Every family, in the order of the output. */
static const struct metric metrics[] = {
    /* A state set rather than a number: no one has to remember which
     * number means draining, and a new state is a new label value. */
    {"etrelay_lifecycle_state", GAUGE, GLOBAL, X(state), .label = l_state,
     .help = "1 for the current lifecycle state: active (accepts new sessions) or draining "
	     "(refuses new sessions, keeps the open ones)."},
    {"etrelay_backend_info", GAUGE, GLOBAL, .attrs = ATTRS({"backend", X(backend), MA_PTR}),
     .help = "The event loop backend in use; always 1."},
    {"etrelay_build_info", GAUGE, GLOBAL, .attrs = ATTRS({"version", X(version), MA_PTR}),
     .help = "The etrelay version; always 1."},
    {"etrelay_workers", GAUGE, GLOBAL, X(nworkers), MW_U32,
     .help = "Workers: packet loops, one thread each; a client's address picks its worker."},

    /* The relays. */
    {"etrelay_relay_info", GAUGE, RELAY,
     .attrs =
	 ATTRS({"game", R(game)}, {"upstream", R(upstream)}, {"public_address", R(public_addr)}),
     .help = "Each relay: its game, game server and public address; always 1."},
    {"etrelay_sessions_active", GAUGE, RELAY, R(sessions_active), MW_U32,
     .help = "Sessions open now."},
    /* Per worker: whether the clients spread over the cores. */
    {"etrelay_worker_sessions_active", GAUGE, RELAY_WORKER, R(sessions_active), MW_U32,
     .help = "Sessions open now on each worker (a client's address picks its worker)."},
    {"etrelay_worker_forwarded_datagrams_total", COUNTER, RELAY_WORKER, .label = l_updown,
     .offs = OFFS(struct relay_stats, up_pkts, down_pkts),
     .help = "Datagrams forwarded by each worker, by direction as in "
	     "etrelay_forwarded_datagrams_total."},
    {"etrelay_sessions_closed_total", COUNTER, RELAY, R(sessions_closed),
     .label = LABEL_ENUM("reason", CLOSE_COUNT, stats_close_name_k),
     .help = "Sessions closed, by reason: idle (timeout), shutdown, error (socket failed), "
	     "unassured (the game server never answered), evicted (made room when full)."},
    {"etrelay_sessions_opened_total", COUNTER, RELAY, R(sessions_opened),
     .help = "Sessions opened for new clients."},
    {"etrelay_sessions_refused_total", COUNTER, RELAY, R(drops[DROP_TABLE_FULL]),
     .help = "New clients refused because --max-sessions was reached (also in "
	     "etrelay_dropped_datagrams_total{reason=\"table_full\"})."},
    {"etrelay_lifecycle_work_refused_total", COUNTER, RELAY, R(drops[DROP_DRAINING]),
     .help = "Datagrams from new clients refused while draining (also in "
	     "etrelay_dropped_datagrams_total{reason=\"draining\"})."},
    {"etrelay_upstream_refused_total", COUNTER, RELAY, R(refused),
     .help = "Sends to the game server answered with port unreachable (ECONNREFUSED): nothing "
	     "listens on the game port."},
    {"etrelay_probes_sent_total", COUNTER, RELAY, R(probes_sent),
     .help = "getinfo probes sent to the game server."},
    {"etrelay_flatlines_total", COUNTER, RELAY, R(flatlines),
     .help = "Flatline heartbeats sent because the game server stopped answering."},
    {"etrelay_query_cache_answers_total", COUNTER, RELAY, R(cache_answers),
     .help = "getinfo and getstatus queries answered from the relay's copy of the game "
	     "server's reply, without a query to the game server."},
    {"etrelay_qport_collisions_total", COUNTER, RELAY, R(qport_collisions),
     .help = "Datagrams refused for their qport (reasons qport_mismatch and qport_owned): "
	     "another session's, which would have given that player's stream or slot to "
	     "this one."},
    {"etrelay_forwarded_datagrams_total", COUNTER, RELAY, .label = l_updown,
     .offs = OFFS(struct relay_stats, up_pkts, down_pkts),
     .help = "Datagrams forwarded: up = client to game server, down = game server to client."},
    {"etrelay_forwarded_bytes_total", COUNTER, RELAY, .label = l_updown,
     .offs = OFFS(struct relay_stats, up_bytes, down_bytes),
     .help = "UDP payload bytes forwarded, by direction as for datagrams."},
    {"etrelay_dropped_datagrams_total", COUNTER, RELAY, R(drops),
     .label = LABEL_ENUM("reason", DROP_COUNT, stats_drop_name_k),
     .help = "Datagrams not forwarded, by reason."},
    {"etrelay_game_server_up", GAUGE, RELAY, .get = game_server_up,
     .help = "1 when the game server answered the last probe round, 0 when it did not or "
	     "was not probed yet."},
    {"etrelay_probe_rounds_total", COUNTER, RELAY, .label = l_okfailed,
     .offs = OFFS(struct relay_stats, probe_rounds_ok, probe_rounds_failed),
     .help = "Probe rounds, by result: ok (the game server answered) or failed."},
    {"etrelay_heartbeats_total", COUNTER, MASTER, M(heartbeats),
     .label = LABEL_ENUM("result", HB_RESULT_COUNT, stats_hb_result_name_k, hb_none),
     .help = "Heartbeats to each master, by result: sent, send_error, unresolved."},
    {"etrelay_master_last_heartbeat_timestamp_seconds", GAUGE, MASTER, M(last_heartbeat),
     .nonzero = true,
     .help = "Unix time of the last heartbeat to each master; absent before the first."},
    {"etrelay_master_listing_confirmed", GAUGE, MASTER, M(listing_confirmed), MW_BOOL,
     .help = "1 while the master lists the relay's address: its challenge was answered "
	     "from the public socket, and it has not left two heartbeat intervals of "
	     "heartbeats unchallenged since; 0 after that, and while the game server is down."},
    {"etrelay_master_listing_confirmed_timestamp_seconds", GAUGE, MASTER, M(last_confirmed),
     .nonzero = true,
     .help = "Unix time of the master's last challenge answered through the relay; absent "
	     "before the first."},

    {"etrelay_prbe_packets_total", COUNTER, PRBE, offsetof(struct prbe_stats, result),
     .label = LABEL_ENUM("result", STATS_PRBE_RESULTS, stats_prbe_result_name_k),
     .help = "PRBE probes on each echo port (its address), by result: echoed (the kernel took "
	     "the reply), send_error, or why it was dropped: not_probe (no PRBE at its start, "
	     "echo-only ports), source (cannot be real), low_port (source port below 1024), "
	     "loop (source port is an echo port), size (over prbe-max-size), rate (over the "
	     "source's prbe-rate), reflector_port (source port is a well-known reflector's or "
	     "echo port), listener_rate (over the port's prbe-listener-rate, every source "
	     "together), bounce (the bytes just echoed to this source, back within 0.5 s), "
	     "banned (its source is in ban-file)."},

    /* The SNI listeners. */
    {"etrelay_sni_listener_info", GAUGE, SNI_CONF,
     .attrs = ATTRS({"listen_address", SC(listen), MA_ADDR},
		    {"max_connections", SC(max_connections), MA_U32}),
     .help = "Each SNI listener: its TCP listen address and its max-connections; always 1."},
    {"etrelay_sni_connections_total", COUNTER, SNI, S(result),
     .label = LABEL_ENUM("result", SNI_RESULTS, sni_result_name_k),
     .help = "Connections accepted by an SNI listener, by result: spliced (connected to its "
	     "route's upstream), tunnel (the tunnel's name, handed to rung 3) or the reason it "
	     "was closed without a byte."},
    {"etrelay_sni_connections_ended_total", COUNTER, SNI, S(ended),
     .label = LABEL_ENUM("reason", SNI_ENDS, sni_end_name_k),
     .help = "Spliced connections closed, by reason: done (both sides closed), idle "
	     "(idle-timeout), reset (a side reset or failed), revoked (its route was removed "
	     "or changed), shutdown, banned (a ban-file reload banned its source), stalled (a "
	     "side took no byte for send-timeout: both reset)."},
    {"etrelay_sni_reads_deferred_total", COUNTER, SNI, S(deferred),
     .help = "Reads of spliced bytes put off because their source (an IPv4 address, an IPv6 "
	     "/64, /56 or /48) held its share of the worker's stream chunks."},
    {"etrelay_sni_bytes_total", COUNTER, SNI, .label = l_updown,
     .offs = OFFS(struct sni_totals, bytes_in, bytes_out),
     .help = "Bytes spliced: up = client to upstream (the ClientHello included, a PROXY "
	     "header not), down = upstream to client."},
    {"etrelay_sni_relayed_bytes_total", COUNTER, SNI, S(relayed),
     .label = LABEL_NAMES("path", "copy", "splice"),
     .help = "Bytes spliced after the ClientHello, both directions, by path: copy (through "
	     "the worker's stream chunks) or splice (splice(2) through a connection's pipes: "
	     "splice yes)."},
    {"etrelay_sni_pipes", GAUGE, SNI, S(pipes), MW_U32,
     .help = "Pipes open for spliced connections (splice yes: 2 per connection, 2 "
	     "descriptors each)."},
    {"etrelay_sni_active_connections", GAUGE, SNI, S(active), MW_U32,
     .help = "Connections open now (counted by max-connections), prereading ones included, "
	     "refused ones lingering not."},
    {"etrelay_sni_preread_connections", GAUGE, SNI, S(preread), MW_U32,
     .help = "Connections still reading their ClientHello (counted by max-preread)."},
    {"etrelay_sni_lingering_connections", GAUGE, SNI, S(lingering), MW_U32,
     .help = "Refused connections whose last bytes are being read and dropped before the "
	     "close (at most 2 s each)."},
    {"etrelay_sni_preread_seconds", HISTOGRAM, SNI, S(preread_hist),
     .hist = &(const struct mhist){sni_preread_bound_ns, SNI_PREREAD_BUCKETS, S(preread_ns),
				   S(preread_count)},
     .help = "Time from accept to the end of the preread: the whole ClientHello read, "
	     "refused or timed out, or the client gone."},
    {"etrelay_sni_routes", GAUGE, SNI_L, offsetof(struct sni_lshared, nroutes), MW_U32,
     .help = "Routes in force: the config file's and the control plane's."},
    {"etrelay_sni_memory_bytes", GAUGE, SNI, S(memory), MW_I64,
     .help = "Bytes the listener holds for its connections: preread buffers and chunks on "
	     "their way (at most four 64 KiB chunks per spliced connection, two per direction)."},

    /* The TURN listeners. */
    {"etrelay_turn_listener_info", GAUGE, TURN_CONF,
     .attrs =
	 ATTRS({"listen_address", TC(listen), MA_ADDR}, {"relay_address", TC(relay_addr), MA_HOST},
	       {"max_allocations", TC(max_allocations), MA_U32}),
     .help = "Each TURN listener: its UDP listen address, relayed address and max-allocations; "
	     "always 1."},
    {"etrelay_turn_allocations_active", GAUGE, TURN_L, offsetof(struct turn_lshared, active),
     MW_U32, .help = "TURN allocations live now, every worker."},
    {"etrelay_turn_allocations_total", COUNTER, TURN, T(allocations),
     .help = "TURN allocations granted."},
    {"etrelay_turn_allocations_expired_total", COUNTER, TURN, T(expired),
     .help = "TURN allocations ended by their lifetime (not refreshed, or strict-expiry)."},
    {"etrelay_turn_allocations_rejected_total", COUNTER, TURN, T(rejected),
     .label = LABEL_ENUM("reason", TURN_REJECTS, turn_reject_name_k),
     .help = "Allocate requests refused after authentication, by reason: cap (max-allocations, "
	     "508), quota (user-quota, 486), drain (draining, 403; refused work), ports (no "
	     "relayed port, 508), exists (437), bad_request (400, 440, 442)."},
    {"etrelay_turn_auth_failures_total", COUNTER, TURN, T(auth_failures),
     .label = LABEL_ENUM("reason", TURN_AUTHFS, turn_authf_name_k),
     .help = "TURN requests that failed authentication, by reason."},
    {"etrelay_turn_challenges_total", COUNTER, TURN, T(challenges),
     .help = "401 answers with REALM and NONCE sent (the first request of every client gets one)."},
    {"etrelay_turn_401_throttled_total", COUNTER, TURN, T(dropped[TURN_DROP_THROTTLED]),
     .help =
	 "Answers to unauthenticated requests over UDP (401, 438, 420, 400, Binding) withheld by "
	 "the per-source-IP rate (each is larger than its request); the listener's total rate "
	 "counts in etrelay_turn_dropped_total{reason=\"throttled_total\"}."},
    {"etrelay_turn_peer_rejected_total", COUNTER, TURN, T(peer_rejected),
     .help = "CreatePermission and ChannelBind refused (403) for a peer the policy refuses."},
    {"etrelay_turn_relayed_datagrams_total", COUNTER, TURN, .label = l_peerclient,
     .offs = OFFS(struct turn_stats, dgrams_to_peer, dgrams_to_client),
     .help = "Datagrams relayed: to_peer from the client, to_client from a peer."},
    {"etrelay_turn_relayed_bytes_total", COUNTER, TURN, .label = l_peerclient,
     .offs = OFFS(struct turn_stats, bytes_to_peer, bytes_to_client),
     .help = "Payload bytes relayed (without TURN framing), by direction."},
    {"etrelay_turn_dropped_total", COUNTER, TURN, T(dropped),
     .label = LABEL_ENUM("reason", TURN_DROPS, turn_drop_name_k),
     .help = "Datagrams and frames a TURN listener dropped without an answer, by reason "
	     "(auth_rate_ip, auth_rate: a signed request over UDP past the failed-authentication "
	     "budget of its source or of the listener, given no HMAC work)."},
    {"etrelay_turn_tcp_idle_closed_total", COUNTER, TURN, T(conns_idle),
     .help = "TURN TCP connections closed after 30 s without an allocation."},
    {"etrelay_turn_tls_failed_total", COUNTER, TURN, T(tls_failed),
     .help = "TURN TLS connections ended before their handshake finished (a handshake error, "
	     "the client's reset or close, tcp-auth-timeout, an eviction) or by a bad record."},
    {"etrelay_turn_tls_reloads_total", COUNTER, TURN_L, .label = l_loaded,
     .offs = OFFS(struct turn_lshared, reload.counts.loaded, reload.counts.failed),
     .when = turn_tls_on,
     .help = "Certificate reloads of a TURN tls-listen, by result: loaded (the files changed and "
	     "the new pair is in force), failed (they changed and do not load; the last good pair "
	     "stays). The load at start is not counted."},
    {"etrelay_turn_tcp_dropped_total", COUNTER, TURN, T(tcp_dropped),
     .label = LABEL_ENUM("reason", TURN_TCP_DROPS, turn_tcp_drop_name_k),
     .help =
	 "TURN TCP and TLS connections refused at accept, by reason: per_ip "
	 "(tcp-max-per-ip), full (tcp-max-connections, every one holding an allocation), or "
	 "closed: frame_memory (the worker's memory for incomplete frames is spent), evicted "
	 "(without an allocation, gave way to a new one at tcp-max-connections), auth_timeout (no "
	 "authenticated request within tcp-auth-timeout), banned (its source is in ban-file: "
	 "at accept, or open when a reload banned it), or refused before any crypto: "
	 "tls_rate_ip (a TLS connection over its source's tls-handshake-ip-rate), tls_rate "
	 "(over the listener's tls-handshake-rate); before an authenticated request: "
	 "unauth_channel (ChannelData), unauth_large (a frame over 1500 bytes); a signed "
	 "request with no HMAC work left: auth_rate_ip (its source over "
	 "auth-fail-ip-rate), auth_rate (the listener over auth-fail-rate, its username's "
	 "key not kept); an unauthenticated request past its source's unauth-ip-rate: "
	 "unauth_rate_ip, past the listener's unauth-rate: unauth_rate."},
    {"etrelay_turn_tcp_connections", GAUGE, TURN, T(conns_open), .label = l_transport,
     .when = turn_transport_set,
     .help = "TURN TCP and TLS connections open now, by transport (each worker holds at most "
	     "tcp-max-connections of both)."},
    {"etrelay_turn_tcp_unauthenticated_connections", GAUGE, TURN, T(conns_unauth),
     .when = turn_tcp_or_tls,
     .help = "TURN TCP and TLS connections open now without an authenticated request (closed "
	     "after tcp-auth-timeout; the ones that give way at tcp-max-connections)."},
    {"etrelay_turn_errors_total", COUNTER, TURN, T(errors),
     .label = LABEL_ENUM("code", TURN_ERROR_CODES, turn_code_k),
     .help = "TURN error answers sent, by code (0: another code)."},
    {"etrelay_turn_bindings_total", COUNTER, TURN, T(bindings),
     .help = "STUN Binding requests answered."},

    /* The control-plane client's. */
    {"etrelay_control_heartbeats_total", COUNTER, CONTROL, C(heartbeats),
     .label = LABEL_ENUM("result", CTL_RESULT_COUNT, ctl_result_name_k, ctl_state_error),
     .help = "Heartbeats to the control plane, by result (ok, refused: a 4xx other than 429, "
	     "http_error, timeout, network_error, bad_answer: malformed JSON or a bad route, "
	     "too_large: an answer past control-max-answer, cut off unread)."},
    {"etrelay_control_enrolments_total", COUNTER, CONTROL, C(enrolments),
     .label = LABEL_ENUM("result", CTL_RESULT_COUNT, ctl_result_name_k),
     .help = "Enrolments with the bootstrap token, by result (state_error: enrolled, but the "
	     "credential could not be written to the state directory)."},
    {"etrelay_control_routes", GAUGE, CONTROL, C(routes),
     .help = "SNI routes in the set of the last good heartbeat answer (or, at a start, of the "
	     "route file), less those refused for their upstream."},
    {"etrelay_control_routes_stale", GAUGE, CONTROL, C(routes_stale), MW_BOOL,
     .help = "1 while the routes in force came from the route file in the state directory at "
	     "the start (the last good set before it) and no heartbeat has succeeded since; "
	     "else 0."},
    {"etrelay_control_routes_refused", GAUGE, CONTROL, C(routes_refused),
     .label = LABEL_ENUM("reason", CTL_UPSTREAM_WHYS, ctl_upstream_why_name_k, ctl_upstream_ok_k),
     .help = "Routes of the last good heartbeat answer dropped for their upstream, by reason "
	     "(listener: one of the relay's own; host: this host, not allowed alone; private: "
	     "private or link-local, in no control-allow-upstream block; reserved: not global "
	     "unicast); the other routes apply."},
    {"etrelay_control_last_success_timestamp_seconds", GAUGE, CONTROL, C(last_success),
     .help = "Unix time of the last good heartbeat; 0 before the first."},

    {"etrelay_tunnel_certificate_requests_total", COUNTER, CONTROL, C(cert_requests),
     .label = LABEL_ENUM("result", CTL_CERT_RESULTS, ctl_cert_result_name_k), .when = ctl_cert_on,
     .help = "Requests for the tunnel certificate (RequestCertificate), by result (ok: a "
	     "chain for the request's key and one tunnel name, put in force; failed: no answer, "
	     "an error or a chain refused, the certificate in force stays; not_offered: the "
	     "control plane gives none, asked again after control-cert-not-offered; "
	     "short_lived: a good chain with less than ten times control-cert-retry-min (at "
	     "most 10 minutes) left, not put in force, tried again as a failure)."},
    {"etrelay_tunnel_certificate_expiry_timestamp_seconds", GAUGE, CONTROL, C(cert_not_after),
     .when = ctl_cert_on,
     .help = "Unix time the tunnel certificate in force expires (its notAfter); 0 before the "
	     "first. It is renewed at two thirds of its lifetime."},

    /* The tunnel's ([tunnel]). */
    {"etrelay_tunnel_peers", GAUGE, TUNNEL, TU(peers),
     .help = "WireGuard peers on the tunnel's interface after the last good reconcile with the "
	     "control plane's set."},
    {"etrelay_tunnel_reconciles_total", COUNTER, TUNNEL, TU(reconciles), .label = l_okfailed,
     .help = "Reconciles of the tunnel's interface with a good heartbeat's peer set, by result "
	     "(failed: the set did not parse, or the interface refused or did not answer; its "
	     "peers stay until the next)."},
    {"etrelay_tunnel_restores_total", COUNTER, TUNNEL, TU(restores),
     .help = "Reconciles that found the tunnel's interface without the relay's private key or "
	     "listen port (wireguard-go restarted: a new device; or an operator's wg set) and "
	     "set them, the peers, the tunnel address and the link up again."},
    {"etrelay_tunnel_handshake_age_seconds", HISTOGRAM, TUNNEL, TU(age_hist),
     .hist = &(const struct mhist){tun_age_bound_ns, STATS_TUN_AGE_BUCKETS, TU(age_sum_ns),
				   TU(age_count)},
     .help = "Time since each peer's last handshake as the last reconcile read the interface "
	     "(etrelay_tunnel_peers_read_timestamp_seconds): a snapshot, not a count since the "
	     "start; over 180 s, the peer has no session. Peers that never completed one are "
	     "in etrelay_tunnel_peers_without_handshake."},
    {"etrelay_tunnel_peers_without_handshake", GAUGE, TUNNEL, TU(no_handshake),
     .help = "Peers that never completed a handshake, as the last reconcile read the "
	     "interface."},
    {"etrelay_tunnel_peers_read_timestamp_seconds", GAUGE, TUNNEL, TU(ages_read),
     .help = "Unix time the last reconcile read the interface's peers (their handshake "
	     "ages); 0 before the first."},
    /* Rung 3's (with an SNI listener), summed over the workers. */
    {"etrelay_tunnel_rung3_connections", GAUGE, TUNNEL_R3, R3(open),
     .help = "Rung-3 connections open now (handed over by an SNI listener, not ended yet), "
	     "every worker; each worker holds at most rung3-max-connections."},
    {"etrelay_tunnel_rung3_connections_total", COUNTER, TUNNEL_R3, R3(result),
     .label = LABEL_ENUM("result", TUN_R3_RESULTS, tun_r3_result_name_k),
     .help = "Rung-3 connections handed over by an SNI listener, each counted once by result: "
	     "upgraded (TLS, the upgrade and its token done: carries datagrams), or refused at "
	     "the hand-over: no_certificate (none in force), limit_total "
	     "(rung3-max-connections), limit_source (rung3-max-per-source), rate_source "
	     "(rung3-handshake-ip-rate), rate_total (rung3-handshake-rate); after the upgrade: "
	     "limit_token (rung3-max-per-token, closed 1008), internal (no socket to WireGuard, "
	     "1011); the upgrade refused: bad_upgrade (400, 404, 426, 431), no_token (401: no "
	     "Authorization: Bearer), bad_token (403: not in the control plane's set); or ended "
	     "before it: tls_failed, timeout (rung3-handshake-timeout), closed (the client left, "
	     "a ban, the exit), evicted (the oldest not upgraded, for a new one when all were "
	     "held). Counted once known: a connection still in its handshake is in "
	     "etrelay_tunnel_rung3_connections only."},
    {"etrelay_tunnel_rung3_connections_ended_total", COUNTER, TUNNEL_R3, R3(ended),
     .label = LABEL_ENUM("reason", TUN_R3_ENDS, tun_r3_end_name_k),
     .help = "Rung-3 connections ended, each once, by reason: client (its close frame, "
	     "close_notify or EOF), refused (its upgrade, or its token's limit), "
	     "handshake_timeout, idle (rung3-idle-timeout, 1001), token_gone (its token left the "
	     "set, 1008), too_big (a message over rung3-max-message, 1009), error (TLS or "
	     "WebSocket broken, a reset), banned (ban-file), shutdown, evicted (not upgraded "
	     "yet, the oldest, for a new connection when all were held)."},
    {"etrelay_tunnel_rung3_datagrams_total", COUNTER, TUNNEL_R3, R3(dgrams), .label = l_wgclient,
     .help = "WireGuard datagrams carried by rung 3: to_wireguard (a gateway's message, sent "
	     "to the local WireGuard port), to_client (WireGuard's answer, one binary message)."},
    {"etrelay_tunnel_rung3_bytes_total", COUNTER, TUNNEL_R3, R3(bytes), .label = l_wgclient,
     .help = "Bytes of those datagrams (without WebSocket or TLS framing), by direction."},
    {"etrelay_tunnel_rung3_dropped_total", COUNTER, TUNNEL_R3, R3(dropped),
     .label = LABEL_ENUM("reason", TUN_R3_DROPS, tun_r3_drop_name_k),
     .help = "Datagrams rung 3 did not carry, by reason: to WireGuard, wireguard_send (no "
	     "send buffer in the loop, nor room in the socket), wireguard_refused (WireGuard's "
	     "port refused one: not up); to a gateway, backlog_full (rung3-max-backlog of "
	     "ciphertext already waits for it), too_big (over rung3-max-message), closing (its "
	     "connection is closing)."},

    /* The XDP program's (xdp-interface), summed over the CPUs. */
    {"etrelay_xdp_packets_total", COUNTER, XDP, 0,
     .label = LABEL_ENUM("result", XDP_REASONS, xdp_result_name_k),
     .help = "UDP packets to the relay's own ports that the XDP program judged, by listener "
	     "(game, turn, prbe) and result: passed (its listener's shape, within its source's "
	     "bucket, xdp-rate and xdp-burst), known (a known source's, passed at once), or "
	     "dropped: bogon (a source that cannot be real), banned (in ban-file), shape (not "
	     "what its listener takes from a new source), rate (over its source's bucket), "
	     "budget (within its bucket, over the CPU's budget for every source not known "
	     "together: what the listeners take from all of them)."},
    {"etrelay_xdp_lines_unwalked_total", COUNTER, XDP, .get = xdp_unwalked, .when = xdp_game,
     .help = "Quake 3 lines longer than 64 bytes from sources the XDP program does not know "
	     "that it passed to the bucket without reading their command: the CPU's walk budget "
	     "(2000000 steps, about a byte each, a second) was spent. Such a line is counted again "
	     "under "
	     "etrelay_xdp_packets_total as passed or rate."},

    /* The loops', summed over the workers. */
    {"etrelay_gso_trains_total", COUNTER, LOOP, L(gso_trains),
     .help = "Sends that carried a run of datagrams to one destination as one UDP GSO train."},
    {"etrelay_gso_datagrams_total", COUNTER, LOOP, L(gso_datagrams),
     .help = "Datagrams that left in GSO trains."},
    {"etrelay_gso_refused_total", COUNTER, LOOP, L(gso_refused),
     .help = "GSO trains the kernel refused; their datagrams were resent one by one."},
    {"etrelay_receive_stalls_total", COUNTER, LOOP, L(nobufs),
     .help = "Times a socket stopped receiving for lack of free buffers (io_uring)."},
    {"etrelay_send_no_buffer_total", COUNTER, LOOP, L(send_nobufs),
     .help = "Answers, probes or heartbeats the loop refused for lack of a free send buffer "
	     "(io_uring: more than 128 in one loop turn)."},
    {"etrelay_stream_chunks", GAUGE, LOOP, L(stream_chunks),
     .help = "64 KiB stream read chunks in use now (TCP streams of the SNI listeners)."},
    {"etrelay_stream_chunks_peak", GAUGE, LOOP, L(stream_chunks_peak),
     .help = "The most stream read chunks each worker had in use at once, summed over the "
	     "workers."},
    {"etrelay_stream_read_stalls_total", COUNTER, LOOP, L(stream_stalls),
     .help = "Stream reads that waited for a free chunk."},
    {"etrelay_stream_pool_chunks", GAUGE, LOOP, L(stream_pool),
     .help = "Stream read chunks in the pools, summed over the workers; of them, "
	     "etrelay_stream_reserve_chunks are kept for reads that are not spliced bytes "
	     "(ClientHellos, TURN over TCP and TLS)."},
    {"etrelay_stream_reserve_chunks", GAUGE, LOOP, L(stream_reserve),
     .help = "Stream read chunks that spliced bytes never take, summed over the workers."},
    {"etrelay_stream_reserve_waits_total", COUNTER, LOOP, L(stream_reserve_waits),
     .help = "Reads of spliced bytes that waited because only the reserve was free."},
    {"etrelay_accept_pauses_total", COUNTER, LOOP, L(accept_pauses),
     .help = "Times a TCP listener stopped accepting for 100 ms: out of file descriptors or "
	     "memory (EMFILE, ENFILE...)."},
    {"etrelay_stream_received_bytes_total", COUNTER, LOOP, L(stream_rx_bytes),
     .help = "Bytes received on TCP streams."},
    {"etrelay_stream_sent_bytes_total", COUNTER, LOOP, L(stream_tx_bytes),
     .help = "Bytes sent on TCP streams."},
    {"etrelay_stream_spliced_bytes_total", COUNTER, LOOP, L(stream_spliced),
     .help = "Of the bytes received on TCP streams, those spliced into pipes (splice(2); the "
	     "SNI listeners' splice yes), never through a chunk."},

    /* The process, as the caller read it. */
    {"process_cpu_seconds_total", COUNTER, PROC, P(cpu_seconds), MW_F2,
     .help = "Total user and system CPU time spent in seconds."},
    {"process_resident_memory_bytes", GAUGE, PROC, P(resident_bytes),
     .help = "Resident memory size in bytes."},
    {"process_virtual_memory_bytes", GAUGE, PROC, P(virtual_bytes),
     .help = "Virtual memory size in bytes."},
    {"process_start_time_seconds", GAUGE, PROC, P(start_time), MW_F2,
     .help = "Start time of the process since unix epoch in seconds."},
    {"process_open_fds", GAUGE, FDS, P(open_fds), .help = "Number of open file descriptors."},
    {"process_max_fds", GAUGE, FDS, P(max_fds), .help = "Maximum number of open file descriptors."},
};

/* name{k1="v1",k2="v2"} ; kv holds key, value pairs ended by NULL. Label
 * values escape backslash, double quote and newline (format 0.0.4); the
 * runs between them go out whole. */
static void series(FILE *f, const char *name, const char *suffix, const char *const *kv)
{
	fputs(name, f);
	fputs(suffix, f);
	for (unsigned i = 0; kv[i]; i += 2) {
		fputs(i ? "," : "{", f);
		fputs(kv[i], f);
		fputs("=\"", f);
		for (const char *s = kv[i + 1]; *s; s++) {
			size_t n = strcspn(s, "\\\"\n");

			fwrite(s, 1, n, f);
			if (!*(s += n))
				break;
			fputs(*s == '\n' ? "\\n" : *s == '"' ? "\\\"" : "\\\\", f);
		}
		fputc('"', f);
	}
	if (kv[0])
		fputc('}', f);
}

static void sample(FILE *f, const char *name, const char *suffix, const char *const *kv, uint64_t v)
{
	series(f, name, suffix, kv);
	fprintf(f, " %" PRIu64 "\n", v);
}

/* The field at off of instance i, summed over its source's workers. The
 * copies are read as the live counters are: relaxed loads. */
static uint64_t sum(const struct mctx *c, enum msrc s, unsigned i, size_t off, enum mwidth w)
{
	unsigned parts = s == RELAY || s == PRBE || s == LOOP ? c->nworkers : 1;
	uint64_t v = 0;

	for (unsigned p = 0; p < parts; p++) {
		const char *base = part(c, s, i, p);

		if (!base)
			continue;
		base += off;
		if (w == MW_U32)
			v += atomic_load_explicit((const _Atomic uint32_t *)base,
						  memory_order_relaxed);
		else if (w == MW_BOOL)
			v += *(const bool *)base;
		else /* MW_U64, and MW_I64 as its two's complement */
			v += atomic_load_explicit((const _Atomic uint64_t *)base,
						  memory_order_relaxed);
	}
	return w == MW_U32 ? (uint32_t)v : v;
}

static const char *attr(const struct mattr *a, const char *base, char *buf)
{
	const char *p = base + a->off;

	switch (a->kind) {
	case MA_STR:
		return p;
	case MA_PTR:
		return *(const char *const *)p;
	case MA_U32:
		snprintf(buf, LABEL_LEN, "%" PRIu32, *(const uint32_t *)p);
		return buf;
	default:
		addr_str(&((const union etr_sockaddr *)p)->sa, buf);
		if (a->kind == MA_HOST && strrchr(buf, ':'))
			*strrchr(buf, ':') = '\0';
		return buf;
	}
}

static void histogram(FILE *f, const struct mctx *c, const struct metric *m, unsigned i,
		      const char **kv, unsigned nk)
{
	const struct mhist *h = m->hist;
	uint64_t cum = 0;
	char le[24];

	kv[nk] = "le";
	kv[nk + 1] = le;
	kv[nk + 2] = NULL;
	for (unsigned b = 0; b <= h->n; b++) {
		cum += sum(c, m->src, i, m->off + b * sizeof(uint64_t), MW_U64);
		if (b < h->n)
			snprintf(le, sizeof(le), "%g", (double)h->bound_ns[b] / 1e9);
		else
			snprintf(le, sizeof(le), "+Inf");
		sample(f, m->name, "_bucket", kv, cum);
	}
	kv[nk] = NULL;
	series(f, m->name, "_sum", kv);
	fprintf(f, " %.9f\n", (double)sum(c, m->src, i, h->sum_off, MW_U64) / 1e9);
	sample(f, m->name, "_count", kv, sum(c, m->src, i, h->count_off, MW_U64));
}

/* One family: its header, then for each instance of its source and each
 * value of its label, a sample. */
static void render(FILE *f, struct mctx *c, const struct metric *m)
{
	const struct mlabel *l = m->label;

	if (!c->on[m->src])
		return;
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name, mtype_name[m->type]);
	for (unsigned i = 0; i < c->n[m->src]; i++) {
		const char *kv[2 * LABELS_MAX + 1], *base;
		char buf[LABELS_MAX][LABEL_LEN];
		struct relay_stats *r;
		unsigned nk;

		/* One copy of a relay's masters for the family's samples. */
		if (m->src == MASTER && i % STATS_MASTERS_MAX == 0) {
			r = c->st->relay[i / STATS_MASTERS_MAX];
			c->nm = r ? stats_relay_masters(r, c->m) : 0;
		}
		if (!(base = part(c, m->src, i, 0)))
			continue;
		nk = labels(c, m->src, i, kv, buf[0]);
		for (const struct mattr *a = m->attrs; a && a->label; a++, nk += 2)
			pair(kv + nk, a->label, attr(a, base, buf[nk / 2]));
		if (m->hist) {
			histogram(f, c, m, i, kv, nk);
			continue;
		}
		for (unsigned k = 0; k < (l ? l->n : 1); k++) {
			uint64_t v;

			if ((l && l->skip && l->skip(k)) || (m->when && !m->when(c, i, k)))
				continue;
			kv[nk] = l ? l->label : NULL;
			kv[nk + 1] = l ? (l->names ? l->names[k] : l->name(k, buf[nk / 2])) : NULL;
			kv[nk + 2] = NULL;
			if (m->width == MW_F2) {
				series(f, m->name, "", kv);
				fprintf(f, " %.2f\n", *(const double *)(base + m->off));
				continue;
			}
			v = m->get     ? m->get(c, i)
			    : m->attrs ? 1
				       : sum(c, m->src, i, m->offs ? m->offs[k] : m->off + 8 * k,
					     m->width);
			if (!m->nonzero || v)
				sample(f, m->name, "", kv, v);
		}
	}
}

int ops_metrics_render(FILE *out, struct etr_stats *st, const struct ops_process *proc)
{
	struct mctx ctx = {.st = st, .proc = proc}, *c = &ctx;
	unsigned nr = st->nrelays < STATS_RELAYS_MAX ? st->nrelays : STATS_RELAYS_MAX;
	unsigned np =
	    st->nprbe_ports < CONF_PRBE_LISTEN_MAX ? st->nprbe_ports : CONF_PRBE_LISTEN_MAX;
	unsigned nsni = !st->sni ? 0 : st->sni->n < CONF_SNI_MAX ? st->sni->n : CONF_SNI_MAX;
	unsigned nturn = !st->turn ? 0 : st->turn->n < CONF_TURN_MAX ? st->turn->n : CONF_TURN_MAX;
	int lc = atomic_load(&st->lifecycle);
	bool prbe = np > 0;

	for (unsigned s = 0; s < SOURCES; s++) {
		c->n[s] = 1;
		c->on[s] = true;
	}
	c->nworkers = stats_workers(st);
	c->state[0] = lc == LIFECYCLE_ACTIVE;
	c->state[1] = lc != LIFECYCLE_ACTIVE;
	c->backend = st->backend ? st->backend : "unknown";
	c->version = st->version ? st->version : "unknown";
	c->n[RELAY] = nr;
	c->n[RELAY_WORKER] = nr * c->nworkers;
	c->n[MASTER] = nr * STATS_MASTERS_MAX;
	c->n[PRBE] = nr + np;
	for (unsigned i = 0; i < nr; i++)
		prbe |= st->relay[i] && st->relay[i]->prbe_on;
	c->on[PRBE] = prbe;
	c->n[SNI] = c->n[SNI_L] = c->n[SNI_CONF] = nsni;
	c->on[SNI] = c->on[SNI_L] = c->on[SNI_CONF] = st->sni;
	for (unsigned i = 0; i < nsni; i++)
		sni_listener_totals(st->sni, i, &c->sni[i]);
	c->n[TURN] = c->n[TURN_L] = c->n[TURN_CONF] = nturn;
	c->on[TURN] = c->on[TURN_L] = c->on[TURN_CONF] = st->turn;
	for (unsigned i = 0; i < nturn; i++)
		turn_listener_totals(&st->turn->l[i], c->nworkers, &c->turn[i]);
	if ((c->on[CONTROL] = st->control)) {
		pthread_mutex_lock(&st->control->lock);
		c->ctl = *st->control;
		pthread_mutex_unlock(&st->control->lock);
	}
	c->n[XDP] = XDP_LISTENERS;
	if ((c->on[TUNNEL] = st->tunnel)) {
		c->tun.peers = __atomic_load_n(&st->tunnel->peers, __ATOMIC_RELAXED);
		for (unsigned i = 0; i < 2; i++)
			c->tun.reconciles[i] =
			    __atomic_load_n(&st->tunnel->reconciles[i], __ATOMIC_RELAXED);
		c->tun.restores = __atomic_load_n(&st->tunnel->restores, __ATOMIC_RELAXED);
		for (unsigned b = 0; b <= STATS_TUN_AGE_BUCKETS; b++)
			c->tun.age_hist[b] =
			    __atomic_load_n(&st->tunnel->age_hist[b], __ATOMIC_RELAXED);
		c->tun.age_sum_ns = __atomic_load_n(&st->tunnel->age_sum_ns, __ATOMIC_RELAXED);
		c->tun.age_count = __atomic_load_n(&st->tunnel->age_count, __ATOMIC_RELAXED);
		c->tun.no_handshake = __atomic_load_n(&st->tunnel->no_handshake, __ATOMIC_RELAXED);
		c->tun.ages_read = __atomic_load_n(&st->tunnel->ages_read, __ATOMIC_RELAXED);
		tun_r3_totals(st->tunnel, &c->r3);
	}
	c->on[TUNNEL_R3] = st->tunnel && st->tunnel->r3_on;
	if ((c->on[XDP] = st->xdp && st->xdp_counts))
		st->xdp_counts(st->xdp, c->xdp);
	c->on[LOOP] = st->loop;
	c->on[PROC] = proc && proc->have_stat;
	c->on[FDS] = proc && proc->have_fds;
	for (size_t k = 0; k < sizeof(metrics) / sizeof(metrics[0]); k++)
		render(out, c, &metrics[k]);
	return ferror(out) ? -EIO : 0;
}
