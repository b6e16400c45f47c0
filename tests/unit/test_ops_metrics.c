/* SPDX-License-Identifier: ISC */
/* Unit tests for ops_metrics.c: render a hand-built struct etr_stats and
 * read the lines back; with --promtool, lint the output with promtool. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control_stats.h"
#include "loop.h"
#include "ops_metrics.h"
#include "sni.h"
#include "sni_conf.h"
#include "turn.h"
#include "tun_r3.h"
#include "turn_conf.h"
#include "xdp.h"

static struct relay_stats et1, oa;
static struct etr_stats st;
static struct control_stats ctl;
static struct prbe_stats echo_port;
/* One SNI listener, "tls", on two workers. */
static struct sni_conf tls_conf;
static struct sni_shared sni;
static struct sni_stats sni_w0, sni_w1;
static struct loop_stats loop0;

static const struct ops_process proc = {
    .have_stat = true,
    .cpu_seconds = 1.25,
    .start_time = 1764449000.5,
    .resident_bytes = 4 << 20,
    .virtual_bytes = 64 << 20,
    .have_fds = true,
    .open_fds = 12,
    .max_fds = 20000,
};

static void master(struct master_status *m, const char *name, const char *addr, uint64_t last,
		   enum stats_hb_result res, bool confirmed)
{
	snprintf(m->name, sizeof(m->name), "%s", name);
	snprintf(m->addr, sizeof(m->addr), "%s", addr);
	m->last_heartbeat = last;
	m->last_result = res;
	m->listing_confirmed = confirmed;
	m->last_confirmed = confirmed ? last + 1 : 0;
}

static int setup(void **state)
{
	memset(&st, 0, sizeof(st));
	memset(&et1, 0, sizeof(et1));
	memset(&oa, 0, sizeof(oa));
	pthread_mutex_init(&et1.lock, NULL);
	pthread_mutex_init(&oa.lock, NULL);

	strcpy(et1.name, "et1");
	strcpy(et1.public_addr, "203.0.113.10:27960");
	strcpy(et1.upstream, "10.8.0.2:27960");
	strcpy(et1.game, "ET");
	STAT_SET(et1.up_pkts, 1000);
	STAT_SET(et1.up_bytes, 64000);
	STAT_SET(et1.down_pkts, 2000);
	STAT_SET(et1.down_bytes, 900000);
	STAT_SET(et1.drops[DROP_TABLE_FULL], 7);
	STAT_SET(et1.drops[DROP_DRAINING], 3);
	STAT_SET(et1.drops[DROP_SEND_ERROR], 2);
	STAT_SET(et1.refused, 4);
	STAT_SET(et1.sessions_opened, 40);
	STAT_SET(et1.sessions_closed[CLOSE_IDLE], 36);
	STAT_SET(et1.sessions_closed[CLOSE_ERROR], 1);
	STAT_SET(et1.sessions_active, 3);
	STAT_SET(et1.probes_sent, 22);
	STAT_SET(et1.probe_rounds_ok, 20);
	STAT_SET(et1.probe_rounds_failed, 1);
	STAT_SET(et1.flatlines, 1);
	STAT_SET(et1.server, SERVER_UP);
	et1.nmasters = 2;
	master(&et1.masters[0], "etmaster.net:27950", "1.2.3.4:27950", 1764450000, HB_RESULT_SENT,
	       true);
	et1.masters[0].heartbeats[HB_RESULT_SENT] = 5;
	et1.masters[0].heartbeats[HB_RESULT_SEND_ERROR] = 1;
	master(&et1.masters[1], "master.example:27950", "", 0, HB_RESULT_UNRESOLVED, false);
	et1.masters[1].heartbeats[HB_RESULT_UNRESOLVED] = 6;

	/* A name with every character the format escapes. */
	strcpy(oa.name, "o\"a\\b\nc");
	strcpy(oa.public_addr, "[2001:db8::10]:27960");
	strcpy(oa.upstream, "[fd00::2]:27960");
	strcpy(oa.game, "Q3");
	STAT_SET(oa.server, SERVER_DOWN);

	/* The SNI listener: two routes, counters on two workers. */
	{
		struct sni_route r[2] = {{.name = "a.example"}, {.name = "*.b.example"}};
		char err[128];

		conf_sni_defaults(&tls_conf);
		strcpy(tls_conf.name, "tls");
		assert_int_equal(addr_parse_numeric("127.0.0.1:8443", &tls_conf.listen), 0);
		assert_int_equal(addr_parse_numeric("127.0.0.1:9001", &r[0].upstream), 0);
		assert_int_equal(addr_parse_numeric("127.0.0.1:9002", &r[1].upstream), 0);
		memset(&sni, 0, sizeof(sni));
		assert_int_equal(sni_shared_init(&sni, 0, &tls_conf, r, 2, 2, err, sizeof(err)), 0);
		memset(&sni_w0, 0, sizeof(sni_w0));
		memset(&sni_w1, 0, sizeof(sni_w1));
		STAT_SET(sni_w0.result[SNI_SPLICED], 5);
		STAT_SET(sni_w1.result[SNI_SPLICED], 2);
		STAT_SET(sni_w1.result[SNI_CAP_PER_IP], 1);
		STAT_SET(sni_w0.ended[SNI_END_DONE], 4);
		STAT_SET(sni_w0.bytes_in, 1000);
		STAT_SET(sni_w1.bytes_out, 8000);
		STAT_SET(sni_w0.active, 1);
		STAT_SET(sni_w1.active, 2);
		STAT_SET(sni_w1.preread, 1);
		STAT_SET(sni_w0.memory, 32768);
		STAT_SET(sni_w1.memory, 16384);
		/* Prereads of 0.5 ms, 3 ms (w0), 3 ms and 20 s (w1). */
		STAT_SET(sni_w0.preread_hist[0], 1);
		STAT_SET(sni_w0.preread_hist[1], 1);
		STAT_SET(sni_w1.preread_hist[1], 1);
		STAT_SET(sni_w1.preread_hist[SNI_PREREAD_BUCKETS], 1);
		STAT_SET(sni_w0.preread_count, 2);
		STAT_SET(sni_w1.preread_count, 2);
		STAT_SET(sni_w0.preread_ns, 3500000);
		STAT_SET(sni_w1.preread_ns, 20003000000ull);
		sni.l[0].stats[0] = &sni_w0;
		sni.l[0].stats[1] = &sni_w1;
		st.sni = &sni;
	}
	memset(&loop0, 0, sizeof(loop0));
	STAT_SET(loop0.stream_chunks, 3);
	STAT_SET(loop0.stream_rx_bytes, 9000);
	st.loop = &loop0;

	atomic_store(&st.lifecycle, LIFECYCLE_ACTIVE);
	st.backend = "io_uring";
	st.version = "0.1.0";
	st.started_unix = 1764449000;
	st.nrelays = 2;
	st.relay[0] = &et1;
	st.relay[1] = &oa;

	memset(&ctl, 0, sizeof(ctl));
	pthread_mutex_init(&ctl.lock, NULL);
	ctl.enrolled = true;
	ctl.routes = 3;
	ctl.last_success = 1764450100;
	ctl.heartbeats[CTL_OK] = 40;
	ctl.heartbeats[CTL_TIMEOUT] = 2;
	ctl.enrolments[CTL_HTTP_ERROR] = 3;
	ctl.enrolments[CTL_OK] = 1;
	st.control = &ctl;

	/* PRBE: et1 with prbe yes, and one echo-only port. */
	et1.prbe_on = true;
	strcpy(et1.prbe.port, et1.public_addr);
	STAT_SET(et1.prbe.result[PRBE_ECHO], 9);
	STAT_SET(et1.prbe.result[PRBE_DROP_RATE], 2);
	memset(&echo_port, 0, sizeof(echo_port));
	strcpy(echo_port.port, "0.0.0.0:51821");
	STAT_SET(echo_port.result[PRBE_ECHO], 5);
	STAT_SET(echo_port.result[PRBE_NOT_PROBE], 1);
	STAT_SET(echo_port.result[STATS_PRBE_SEND_ERROR], 1);
	st.nprbe_ports = 1;
	st.prbe_port[0][0] = &echo_port;
	return 0;
}

static int teardown(void **state)
{
	pthread_mutex_destroy(&et1.lock);
	pthread_mutex_destroy(&oa.lock);
	sni_shared_free(&sni);
	return 0;
}

static char *render(const struct ops_process *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(ops_metrics_render(f, &st, p), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

/* True when text holds exactly this line. */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

static void assert_line(const char *text, const char *line)
{
	if (!has_line(text, line))
		fail_msg("missing line: %s\n--- output ---\n%s", line, text);
}

static void test_ops_metrics_renders_sessions_per_relay(void **state)
{
	char *t = render(NULL);

	assert_line(t, "# TYPE etrelay_sessions_active gauge");
	assert_line(t, "etrelay_sessions_active{relay=\"et1\"} 3");
	assert_line(t, "etrelay_sessions_opened_total{relay=\"et1\"} 40");
	assert_line(t, "etrelay_sessions_closed_total{relay=\"et1\",reason=\"idle\"} 36");
	assert_line(t, "etrelay_sessions_closed_total{relay=\"et1\",reason=\"shutdown\"} 0");
	assert_line(t, "etrelay_sessions_closed_total{relay=\"et1\",reason=\"error\"} 1");
	free(t);
}

/* Two workers: counters are each worker's, summed; the worker families
 * show each; the masters and the game server are worker 0's. */
static void test_ops_metrics_sums_the_workers(void **state)
{
	static struct relay_stats et1_w1, oa_w1;
	struct loop_stats l0 = {0}, l1 = {0};
	char *t;

	memset(&et1_w1, 0, sizeof(et1_w1));
	memset(&oa_w1, 0, sizeof(oa_w1));
	STAT_SET(et1_w1.up_pkts, 500);
	STAT_SET(et1_w1.drops[DROP_TABLE_FULL], 1);
	STAT_SET(et1_w1.sessions_active, 4);
	STAT_SET(et1_w1.sessions_closed[CLOSE_IDLE], 4);
	STAT_SET(l0.gso_trains, 2);
	STAT_SET(l1.gso_trains, 3);
	st.nworkers = 2;
	st.worker_relay[1][0] = &et1_w1;
	st.worker_relay[1][1] = &oa_w1;
	st.loop = &l0;
	st.worker_loop[1] = &l1;
	t = render(NULL);
	assert_line(t, "etrelay_workers 2");
	assert_line(t, "etrelay_sessions_active{relay=\"et1\"} 7");
	assert_line(t, "etrelay_forwarded_datagrams_total{relay=\"et1\",direction=\"up\"} 1500");
	assert_line(t, "etrelay_dropped_datagrams_total{relay=\"et1\",reason=\"table_full\"} 8");
	assert_line(t, "etrelay_sessions_refused_total{relay=\"et1\"} 8");
	assert_line(t, "etrelay_sessions_closed_total{relay=\"et1\",reason=\"idle\"} 40");
	assert_line(t, "etrelay_worker_sessions_active{relay=\"et1\",worker=\"0\"} 3");
	assert_line(t, "etrelay_worker_sessions_active{relay=\"et1\",worker=\"1\"} 4");
	assert_line(t, "etrelay_worker_forwarded_datagrams_total{relay=\"et1\",worker=\"1\","
		       "direction=\"up\"} 500");
	assert_line(t, "etrelay_gso_trains_total 5");
	assert_line(t, "etrelay_game_server_up{relay=\"et1\"} 1");
	free(t);
}

/* Rung 3's families: each worker's counters summed, fixed label sets,
 * with the tunnel serving rung 3 (an SNI listener) only. */
static void test_ops_metrics_sums_rung3_over_the_workers(void **state)
{
	static struct tun_stats tun;
	static struct tun_r3_stats r0, r1;
	char *t;

	(void)state;
	memset(&tun, 0, sizeof(tun));
	memset(&r0, 0, sizeof(r0));
	memset(&r1, 0, sizeof(r1));
	STAT_SET(r0.open, 2);
	STAT_SET(r1.open, 1);
	STAT_SET(r0.result[TUN_R3_UPGRADED], 5);
	STAT_SET(r1.result[TUN_R3_UPGRADED], 6);
	STAT_SET(r1.result[TUN_R3_BAD_TOKEN], 3);
	STAT_SET(r0.ended[TUN_R3_END_IDLE], 4);
	STAT_SET(r1.dgrams[0], 10);
	STAT_SET(r0.dgrams[1], 7);
	STAT_SET(r0.bytes[0], 1000);
	STAT_SET(r1.bytes[0], 24);
	STAT_SET(r1.dropped[TUN_R3_DROP_BACKLOG], 9);
	tun.r3[0] = &r0;
	tun.r3[1] = &r1;
	tun.r3_on = true;
	st.nworkers = 2;
	st.tunnel = &tun;
	t = render(NULL);
	assert_line(t, "etrelay_tunnel_rung3_connections 3");
	assert_line(t, "etrelay_tunnel_rung3_connections_total{result=\"upgraded\"} 11");
	assert_line(t, "etrelay_tunnel_rung3_connections_total{result=\"bad_token\"} 3");
	assert_line(t, "etrelay_tunnel_rung3_connections_total{result=\"limit_source\"} 0");
	assert_line(t, "etrelay_tunnel_rung3_connections_ended_total{reason=\"idle\"} 4");
	assert_line(t, "etrelay_tunnel_rung3_datagrams_total{direction=\"to_wireguard\"} 10");
	assert_line(t, "etrelay_tunnel_rung3_datagrams_total{direction=\"to_client\"} 7");
	assert_line(t, "etrelay_tunnel_rung3_bytes_total{direction=\"to_wireguard\"} 1024");
	assert_line(t, "etrelay_tunnel_rung3_dropped_total{reason=\"backlog_full\"} 9");
	free(t);
	/* A tunnel without an SNI listener has no rung 3, nor its families. */
	tun.r3_on = false;
	t = render(NULL);
	assert_non_null(strstr(t, "etrelay_tunnel_peers "));
	assert_null(strstr(t, "etrelay_tunnel_rung3"));
	free(t);
	st.tunnel = NULL;
}

static void test_ops_metrics_counts_prbe_by_port_and_result(void **state)
{
	static struct relay_stats et1_w1, oa_w1;
	static struct prbe_stats echo_w1;
	char *t;

	memset(&et1_w1, 0, sizeof(et1_w1));
	memset(&oa_w1, 0, sizeof(oa_w1));
	memset(&echo_w1, 0, sizeof(echo_w1));
	STAT_SET(et1_w1.prbe.result[PRBE_ECHO], 1);
	STAT_SET(echo_w1.result[PRBE_DROP_PORT], 3);
	st.nworkers = 2;
	st.worker_relay[1][0] = &et1_w1;
	st.worker_relay[1][1] = &oa_w1;
	st.prbe_port[1][0] = &echo_w1;
	t = render(NULL);
	assert_line(t,
		    "etrelay_prbe_packets_total{port=\"203.0.113.10:27960\",result=\"echoed\"} 10");
	assert_line(t, "etrelay_prbe_packets_total{port=\"203.0.113.10:27960\",result=\"rate\"} 2");
	assert_line(t, "etrelay_prbe_packets_total{port=\"0.0.0.0:51821\",result=\"echoed\"} 5");
	assert_line(t, "etrelay_prbe_packets_total{port=\"0.0.0.0:51821\",result=\"not_probe\"} 1");
	assert_line(t, "etrelay_prbe_packets_total{port=\"0.0.0.0:51821\",result=\"low_port\"} 3");
	assert_line(t,
		    "etrelay_prbe_packets_total{port=\"0.0.0.0:51821\",result=\"send_error\"} 1");
	/* A relay without prbe has no such line. */
	assert_null(strstr(t, "etrelay_prbe_packets_total{port=\"[2001:db8::10]:27960\""));
	free(t);
	/* No echo port at all: no family. */
	et1.prbe_on = false;
	st.nprbe_ports = 0;
	t = render(NULL);
	assert_null(strstr(t, "etrelay_prbe_packets_total"));
	free(t);
}

static void test_ops_metrics_counts_each_direction(void **state)
{
	char *t = render(NULL);

	assert_line(t, "# TYPE etrelay_forwarded_datagrams_total counter");
	assert_line(t, "etrelay_forwarded_datagrams_total{relay=\"et1\",direction=\"up\"} 1000");
	assert_line(t, "etrelay_forwarded_datagrams_total{relay=\"et1\",direction=\"down\"} 2000");
	assert_line(t, "etrelay_forwarded_bytes_total{relay=\"et1\",direction=\"up\"} 64000");
	assert_line(t, "etrelay_forwarded_bytes_total{relay=\"et1\",direction=\"down\"} 900000");
	free(t);
}

static void test_ops_metrics_lists_every_drop_reason(void **state)
{
	char line[160];
	char *t = render(NULL);

	for (unsigned d = 0; d < DROP_COUNT; d++) {
		snprintf(line, sizeof(line),
			 "etrelay_dropped_datagrams_total{relay=\"et1\",reason=\"%s\"} %u",
			 stats_drop_name(d),
			 d == DROP_TABLE_FULL	? 7
			 : d == DROP_DRAINING	? 3
			 : d == DROP_SEND_ERROR ? 2
						: 0);
		assert_line(t, line);
	}
	free(t);
}

static void test_ops_metrics_exports_refusals_beside_the_drops(void **state)
{
	char *t = render(NULL);

	assert_line(t, "etrelay_sessions_refused_total{relay=\"et1\"} 7");
	assert_line(t, "etrelay_lifecycle_work_refused_total{relay=\"et1\"} 3");
	assert_line(t, "etrelay_upstream_refused_total{relay=\"et1\"} 4");
	free(t);
}

static void test_ops_metrics_reports_probes_and_game_server(void **state)
{
	char *t = render(NULL);

	assert_line(t, "etrelay_probes_sent_total{relay=\"et1\"} 22");
	assert_line(t, "etrelay_probe_rounds_total{relay=\"et1\",result=\"ok\"} 20");
	assert_line(t, "etrelay_probe_rounds_total{relay=\"et1\",result=\"failed\"} 1");
	assert_line(t, "etrelay_flatlines_total{relay=\"et1\"} 1");
	assert_line(t, "etrelay_game_server_up{relay=\"et1\"} 1");
	assert_line(t, "etrelay_game_server_up{relay=\"o\\\"a\\\\b\\nc\"} 0");
	STAT_SET(et1.server, SERVER_UNKNOWN);
	free(t);
	t = render(NULL);
	assert_line(t, "etrelay_game_server_up{relay=\"et1\"} 0");
	free(t);
}

static void test_ops_metrics_counts_heartbeats_by_master_and_result(void **state)
{
	char *t = render(NULL);

	assert_line(t, "etrelay_heartbeats_total{relay=\"et1\",master=\"etmaster.net:27950\","
		       "result=\"sent\"} 5");
	assert_line(t, "etrelay_heartbeats_total{relay=\"et1\",master=\"etmaster.net:27950\","
		       "result=\"send_error\"} 1");
	assert_line(t, "etrelay_heartbeats_total{relay=\"et1\",master=\"master.example:27950\","
		       "result=\"unresolved\"} 6");
	assert_null(strstr(t, "result=\"none\""));
	assert_line(t, "etrelay_master_last_heartbeat_timestamp_seconds{relay=\"et1\","
		       "master=\"etmaster.net:27950\"} 1764450000");
	assert_line(t, "etrelay_master_listing_confirmed{relay=\"et1\","
		       "master=\"etmaster.net:27950\"} 1");
	assert_line(t, "etrelay_master_listing_confirmed{relay=\"et1\","
		       "master=\"master.example:27950\"} 0");
	assert_line(t, "etrelay_master_listing_confirmed_timestamp_seconds{relay=\"et1\","
		       "master=\"etmaster.net:27950\"} 1764450001");
	assert_null(strstr(t, "etrelay_master_listing_confirmed_timestamp_seconds{relay=\"et1\","
			      "master=\"master.example:27950\"}"));
	free(t);
}

static void test_ops_metrics_omits_last_heartbeat_before_the_first(void **state)
{
	char *t = render(NULL);

	assert_null(strstr(t, "etrelay_master_last_heartbeat_timestamp_seconds{relay=\"et1\","
			      "master=\"master.example:27950\"}"));
	free(t);
}

static void test_ops_metrics_lifecycle_state_follows_draining(void **state)
{
	char *t = render(NULL);

	assert_line(t, "etrelay_lifecycle_state{state=\"active\"} 1");
	assert_line(t, "etrelay_lifecycle_state{state=\"draining\"} 0");
	free(t);
	atomic_store(&st.lifecycle, LIFECYCLE_DRAINING);
	t = render(NULL);
	assert_line(t, "etrelay_lifecycle_state{state=\"active\"} 0");
	assert_line(t, "etrelay_lifecycle_state{state=\"draining\"} 1");
	free(t);
}

static void test_ops_metrics_names_backend_version_and_relay(void **state)
{
	char *t = render(NULL);

	assert_line(t, "etrelay_backend_info{backend=\"io_uring\"} 1");
	assert_line(t, "etrelay_build_info{version=\"0.1.0\"} 1");
	assert_line(t, "etrelay_relay_info{relay=\"et1\",game=\"ET\",upstream=\"10.8.0.2:27960\","
		       "public_address=\"203.0.113.10:27960\"} 1");
	free(t);
}

static void test_ops_metrics_escapes_label_values(void **state)
{
	char *t = render(NULL);

	assert_line(t, "etrelay_sessions_active{relay=\"o\\\"a\\\\b\\nc\"} 0");
	/* No raw newline inside a sample: every line is a comment or a sample. */
	for (char *l = t; *l; l = strchr(l, '\n') + 1)
		assert_true(l[0] == '#' || strncmp(l, "etrelay_", 8) == 0 ||
			    strncmp(l, "process_", 8) == 0);
	free(t);
}

static void test_ops_metrics_renders_process_metrics_only_when_given(void **state)
{
	char *t = render(NULL);

	assert_null(strstr(t, "process_"));
	free(t);
	t = render(&proc);
	assert_line(t, "process_cpu_seconds_total 1.25");
	assert_line(t, "process_resident_memory_bytes 4194304");
	assert_line(t, "process_virtual_memory_bytes 67108864");
	assert_line(t, "process_open_fds 12");
	assert_line(t, "process_max_fds 20000");
	assert_line(t, "process_start_time_seconds 1764449000.50");
	free(t);
}

static void test_ops_metrics_gives_every_sample_help_and_type(void **state)
{
	char name[128], help[160], type[160];
	char *t = render(&proc);

	for (char *l = t; *l; l = strchr(l, '\n') + 1) {
		size_t n = strcspn(l, "{ ");

		if (l[0] == '#')
			continue;
		assert_true(n < sizeof(name));
		memcpy(name, l, n);
		name[n] = '\0';
		/* A histogram's samples are its family's name and a suffix. */
		for (const char *const *x =
			 (const char *const[]){"_bucket", "_sum", "_count", NULL};
		     *x; x++) {
			size_t k = strlen(*x);

			snprintf(type, sizeof(type), "# TYPE %.*s histogram", (int)(n - k), name);
			if (n > k && !strcmp(name + n - k, *x) && strstr(t, type)) {
				n -= k;
				name[n] = '\0';
				break;
			}
		}
		snprintf(help, sizeof(help), "# HELP %s ", name);
		snprintf(type, sizeof(type), "# TYPE %s ", name);
		assert_non_null(strstr(t, help));
		assert_non_null(strstr(t, type));
		/* Prometheus conventions: counters and only counters end in _total. */
		if (strstr(t, strcat(type, "counter")))
			assert_string_equal(name + n - 6, "_total");
		else
			assert_null(strstr(name, "_total"));
	}
	free(t);
}

/* The SNI listener's families: every result and end reason, summed over
 * the workers; the preread histogram cumulative. */
static void test_ops_metrics_sni_listener(void **state)
{
	char line[200];
	char *t = render(NULL);

	assert_line(t,
		    "etrelay_sni_listener_info{listener=\"tls\",listen_address=\"127.0.0.1:8443\","
		    "max_connections=\"4096\"} 1");
	for (unsigned r = 0; r < SNI_RESULTS; r++) {
		snprintf(line, sizeof(line),
			 "etrelay_sni_connections_total{listener=\"tls\",result=\"%s\"} ",
			 sni_result_name(r));
		assert_non_null(strstr(t, line));
	}
	assert_line(t, "etrelay_sni_connections_total{listener=\"tls\",result=\"spliced\"} 7");
	assert_line(t, "etrelay_sni_connections_total{listener=\"tls\",result=\"cap_per_ip\"} 1");
	assert_line(t, "etrelay_sni_connections_total{listener=\"tls\",result=\"unknown_name\"} 0");
	for (unsigned e = 0; e < SNI_ENDS; e++) {
		snprintf(line, sizeof(line),
			 "etrelay_sni_connections_ended_total{listener=\"tls\",reason=\"%s\"} ",
			 sni_end_name(e));
		assert_non_null(strstr(t, line));
	}
	assert_line(t, "etrelay_sni_connections_ended_total{listener=\"tls\",reason=\"done\"} 4");
	assert_line(t, "etrelay_sni_bytes_total{listener=\"tls\",direction=\"up\"} 1000");
	assert_line(t, "etrelay_sni_bytes_total{listener=\"tls\",direction=\"down\"} 8000");
	assert_line(t, "etrelay_sni_active_connections{listener=\"tls\"} 3");
	assert_line(t, "etrelay_sni_preread_connections{listener=\"tls\"} 1");
	assert_line(t, "etrelay_sni_routes{listener=\"tls\"} 2");
	assert_line(t, "etrelay_sni_memory_bytes{listener=\"tls\"} 49152");
	assert_line(t, "# TYPE etrelay_sni_preread_seconds histogram");
	assert_line(t, "etrelay_sni_preread_seconds_bucket{listener=\"tls\",le=\"0.001\"} 1");
	assert_line(t, "etrelay_sni_preread_seconds_bucket{listener=\"tls\",le=\"0.005\"} 3");
	assert_line(t, "etrelay_sni_preread_seconds_bucket{listener=\"tls\",le=\"10\"} 3");
	assert_line(t, "etrelay_sni_preread_seconds_bucket{listener=\"tls\",le=\"+Inf\"} 4");
	assert_line(t, "etrelay_sni_preread_seconds_count{listener=\"tls\"} 4");
	assert_line(t, "etrelay_sni_preread_seconds_sum{listener=\"tls\"} 20.006500000");
	assert_line(t, "etrelay_stream_chunks 3");
	assert_line(t, "etrelay_stream_received_bytes_total 9000");
	free(t);
	/* Without a listener, no family of theirs. */
	st.sni = NULL;
	t = render(NULL);
	assert_null(strstr(t, "etrelay_sni_"));
	free(t);
}

/* The bucket a preread falls in: at most the bound. */
static void test_ops_metrics_sni_preread_buckets(void **state)
{
	assert_int_equal(sni_preread_bucket(0), 0);
	assert_int_equal(sni_preread_bucket(1000000), 0);
	assert_int_equal(sni_preread_bucket(1000001), 1);
	assert_int_equal(sni_preread_bucket(10000000000ull), SNI_PREREAD_BUCKETS - 1);
	assert_int_equal(sni_preread_bucket(10000000001ull), SNI_PREREAD_BUCKETS);
}

static void test_ops_metrics_masters_copies_under_the_bound(void **state)
{
	struct master_status m[STATS_MASTERS_MAX];

	et1.nmasters = STATS_MASTERS_MAX + 5; /* a writer bug must not overrun us */
	assert_int_equal(stats_relay_masters(&et1, m), STATS_MASTERS_MAX);
	assert_string_equal(m[0].name, "etmaster.net:27950");
}

static void test_ops_metrics_control_plane_results_routes_and_last_success(void **state)
{
	char *t = render(NULL);

	assert_line(t, "etrelay_control_heartbeats_total{result=\"ok\"} 40");
	assert_line(t, "etrelay_control_heartbeats_total{result=\"timeout\"} 2");
	assert_line(t, "etrelay_control_heartbeats_total{result=\"bad_answer\"} 0");
	/* state_error is an enrolment's alone */
	assert_null(strstr(t, "etrelay_control_heartbeats_total{result=\"state_error\"}"));
	assert_line(t, "etrelay_control_enrolments_total{result=\"ok\"} 1");
	assert_line(t, "etrelay_control_enrolments_total{result=\"http_error\"} 3");
	assert_line(t, "etrelay_control_enrolments_total{result=\"state_error\"} 0");
	assert_line(t, "etrelay_control_routes 3");
	assert_line(t, "etrelay_control_last_success_timestamp_seconds 1764450100");
	free(t);
}

static void test_ops_metrics_no_control_family_without_a_control_plane(void **state)
{
	char *t;

	st.control = NULL;
	t = render(NULL);
	assert_null(strstr(t, "etrelay_control_"));
	free(t);
}

/* A whole world for the golden file and the timing: every relay, worker,
 * master, reason and listener holds a distinct non-zero value (a
 * sequence), so that a sample that reads the wrong field, worker or index
 * shows in the text. The sizes are arguments: the golden file is small,
 * the timing large. */
#define W_WORKERS 8
static struct etr_stats wst;
static struct relay_stats w_relay[W_WORKERS][STATS_RELAYS_MAX];
static struct prbe_stats w_prbe[W_WORKERS][CONF_PRBE_LISTEN_MAX];
static struct loop_stats w_loop[W_WORKERS];
static struct sni_conf w_sni_conf[CONF_SNI_MAX];
static struct sni_shared w_sni;
static struct sni_stats w_sni_stats[CONF_SNI_MAX][W_WORKERS];
static struct turn_conf w_turn_conf[CONF_TURN_MAX];
static struct turn_shared w_turn;
static struct turn_stats w_turn_stats[CONF_TURN_MAX][W_WORKERS];
static struct control_stats w_ctl;
static struct tun_stats w_tun;
static struct tun_r3_stats w_r3[W_WORKERS];
static uint64_t w_seq;
static uint64_t w_xdp[XDP_COUNTS];

/* The XDP program's counters as xdp_counts would sum them. */
static void w_xdp_counts(struct xdp *x, uint64_t *out)
{
	memcpy(out, x, sizeof(w_xdp));
}

/* Above 65535: no value in the golden file reads as a port. */
static uint64_t next(void)
{
	return 1000000 + ++w_seq * 1009;
}

/* Every _Atomic uint64_t of a struct made of them alone. */
static void fill_u64s(void *p, size_t size)
{
	_Atomic uint64_t *v = p;

	for (size_t k = 0; k < size / sizeof(*v); k++)
		STAT_SET(v[k], next());
}

static void fill_relay(struct relay_stats *r, unsigned i, unsigned w, unsigned nmasters)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	/* Names with the characters the format escapes, on one relay. */
	if (i == 1)
		strcpy(r->name, "r\"1\\x\ny");
	else
		snprintf(r->name, sizeof(r->name), "relay%u", i);
	snprintf(r->public_addr, sizeof(r->public_addr), "203.0.113.%u:%u", i + 1, 27960 + i);
	snprintf(r->upstream, sizeof(r->upstream), "10.8.0.%u:27960", i + 2);
	snprintf(r->game, sizeof(r->game), "%s", i % 2 ? "Q3" : "ET");
	STAT_SET(r->up_pkts, next());
	STAT_SET(r->up_bytes, next());
	STAT_SET(r->down_pkts, next());
	STAT_SET(r->down_bytes, next());
	for (unsigned d = 0; d < DROP_COUNT; d++)
		STAT_SET(r->drops[d], next());
	STAT_SET(r->refused, next());
	STAT_SET(r->cache_answers, next());
	STAT_SET(r->qport_collisions, next());
	STAT_SET(r->sessions_opened, next());
	for (unsigned c = 0; c < CLOSE_COUNT; c++)
		STAT_SET(r->sessions_closed[c], next());
	STAT_SET(r->sessions_active, (uint32_t)next());
	STAT_SET(r->probes_sent, next());
	STAT_SET(r->probe_rounds_ok, next());
	STAT_SET(r->probe_rounds_failed, next());
	STAT_SET(r->flatlines, next());
	STAT_SET(r->server, i % 3 == 0 ? SERVER_UP : i % 3 == 1 ? SERVER_DOWN : SERVER_UNKNOWN);
	r->prbe_on = i % 2 == 0;
	strcpy(r->prbe.port, r->public_addr);
	for (unsigned v = 0; v < STATS_PRBE_RESULTS; v++)
		STAT_SET(r->prbe.result[v], next());
	if (w)
		return;
	r->nmasters = nmasters;
	for (unsigned j = 0; j < nmasters; j++) {
		struct master_status *m = &r->masters[j];

		snprintf(m->name, sizeof(m->name), "master%u.example:%u", j, 27950 + i);
		snprintf(m->addr, sizeof(m->addr), "192.0.2.%u:27950", j + 1);
		/* The third of each never heard: no timestamps. */
		m->last_heartbeat = j % 3 == 2 ? 0 : 1764450000 + next();
		m->last_result = (enum stats_hb_result)(j % HB_RESULT_COUNT);
		m->listing_confirmed = j % 2 == 0;
		m->last_confirmed = j % 3 == 2 ? 0 : 1764450000 + next();
		for (unsigned h = 0; h < HB_RESULT_COUNT; h++)
			m->heartbeats[h] = next();
	}
}

static void fill_sni_stats(struct sni_stats *s)
{
	for (unsigned r = 0; r < SNI_RESULTS; r++)
		STAT_SET(s->result[r], next());
	for (unsigned e = 0; e < SNI_ENDS; e++)
		STAT_SET(s->ended[e], next());
	STAT_SET(s->bytes_in, next());
	STAT_SET(s->bytes_out, next());
	STAT_SET(s->preread_ns, next() * 1000);
	STAT_SET(s->preread_count, next());
	for (unsigned b = 0; b <= SNI_PREREAD_BUCKETS; b++)
		STAT_SET(s->preread_hist[b], next());
	STAT_SET(s->deferred, next());
	STAT_SET(s->memory, (int64_t)next());
	STAT_SET(s->active, (uint32_t)next());
	STAT_SET(s->preread, (uint32_t)next());
	STAT_SET(s->lingering, (uint32_t)next());
	STAT_SET(s->relayed[0], next());
	STAT_SET(s->relayed[1], next());
	STAT_SET(s->pipes, (uint32_t)next());
}

/* Outside cmocka's tests (--golden, --bench) an assert cannot fail. */
static void must_parse(const char *s, union etr_sockaddr *a)
{
	if (addr_parse_numeric(s, a) != 0) {
		fprintf(stderr, "bad address %s\n", s);
		exit(1);
	}
}

/* nrelays relays (the one at index 2 absent: a gap) with nmasters masters
 * each, on nworkers workers, nprbe echo-only ports, nsni SNI listeners,
 * nturn TURN listeners, a control plane; returns the stats. */
static struct etr_stats *world(unsigned nrelays, unsigned nworkers, unsigned nmasters,
			       unsigned nprbe, unsigned nsni, unsigned nturn)
{
	struct etr_stats *s = &wst;

	w_seq = 0;
	memset(s, 0, sizeof(*s));
	atomic_store(&s->lifecycle, LIFECYCLE_ACTIVE);
	s->backend = "io_uring";
	s->version = "1.2.3";
	s->started_unix = 1764449000;
	s->nrelays = nrelays;
	s->nworkers = nworkers > 1 ? nworkers : 0;
	for (unsigned w = 0; w < nworkers; w++) {
		for (unsigned i = 0; i < nrelays; i++) {
			fill_relay(&w_relay[w][i], i, w, nmasters);
			if (i == 2 && nrelays > 3)
				continue;
			if (w == 0)
				s->relay[i] = &w_relay[w][i];
			else
				s->worker_relay[w][i] = &w_relay[w][i];
		}
		for (unsigned p = 0; p < nprbe; p++) {
			memset(&w_prbe[w][p], 0, sizeof(w_prbe[w][p]));
			snprintf(w_prbe[w][p].port, sizeof(w_prbe[w][p].port), "0.0.0.0:%u",
				 27970 + p);
			for (unsigned v = 0; v < STATS_PRBE_RESULTS; v++)
				STAT_SET(w_prbe[w][p].result[v], next());
			s->prbe_port[w][p] = &w_prbe[w][p];
		}
		fill_u64s(&w_loop[w], sizeof(w_loop[w]));
		if (w == 0)
			s->loop = &w_loop[w];
		else
			s->worker_loop[w] = &w_loop[w];
	}
	s->nprbe_ports = nprbe;

	memset(&w_sni, 0, sizeof(w_sni));
	w_sni.n = nsni;
	w_sni.nworkers = nworkers;
	for (unsigned i = 0; i < nsni; i++) {
		conf_sni_defaults(&w_sni_conf[i]);
		snprintf(w_sni_conf[i].name, sizeof(w_sni_conf[i].name), "sni%u", i);
		w_sni_conf[i].max_connections = 1000 + i;
		must_parse(i % 2 ? "[::1]:8443" : "127.0.0.1:8443", &w_sni_conf[i].listen);
		w_sni.l[i].conf = &w_sni_conf[i];
		STAT_SET(w_sni.l[i].nroutes, (uint32_t)next());
		for (unsigned w = 0; w < nworkers; w++) {
			memset(&w_sni_stats[i][w], 0, sizeof(w_sni_stats[i][w]));
			fill_sni_stats(&w_sni_stats[i][w]);
			w_sni.l[i].stats[w] = &w_sni_stats[i][w];
		}
	}
	s->sni = nsni ? &w_sni : NULL;

	memset(&w_turn, 0, sizeof(w_turn));
	w_turn.n = nturn;
	w_turn.nworkers = nworkers;
	for (unsigned i = 0; i < nturn; i++) {
		struct turn_conf *c = &w_turn_conf[i];
		struct turn_lshared *l = &w_turn.l[i];

		conf_turn_defaults(c);
		snprintf(c->name, sizeof(c->name), "turn%u", i);
		c->max_allocations = 2000 + i;
		must_parse("127.0.0.1:3478", &c->listen);
		must_parse(i ? "[2001:db8::7]:1" : "198.51.100.7:1", &c->relay_addr);
		/* The first with TCP and TLS, the second with TCP alone. */
		c->tcp_set = true;
		c->tls_set = i == 0;
		l->conf = c;
		l->tls_on = i == 0;
		STAT_SET(l->active, (uint32_t)next());
		STAT_SET(l->reload.counts.loaded, next());
		STAT_SET(l->reload.counts.failed, next());
		for (unsigned w = 0; w < nworkers; w++) {
			fill_u64s(&w_turn_stats[i][w], sizeof(w_turn_stats[i][w]));
			l->stats[w] = &w_turn_stats[i][w];
		}
	}
	s->turn = nturn ? &w_turn : NULL;

	memset(&w_ctl, 0, sizeof(w_ctl));
	pthread_mutex_init(&w_ctl.lock, NULL);
	w_ctl.enrolled = true;
	w_ctl.routes = next();
	w_ctl.routes_stale = true;
	w_ctl.last_success = 1764450000 + next();
	for (unsigned r = 0; r < CTL_RESULT_COUNT; r++) {
		w_ctl.heartbeats[r] = next();
		w_ctl.enrolments[r] = next();
	}
	for (unsigned r = 0; r < CTL_UPSTREAM_WHYS; r++)
		w_ctl.routes_refused[r] = next();
	s->control = &w_ctl;
	for (unsigned r = 0; r < XDP_COUNTS; r++)
		w_xdp[r] = next();
	s->xdp = (struct xdp *)w_xdp;
	s->xdp_counts = w_xdp_counts;
	w_tun.peers = next();
	w_tun.reconciles[0] = next();
	w_tun.reconciles[1] = next();
	w_tun.age_count = 0;
	for (unsigned b = 0; b <= STATS_TUN_AGE_BUCKETS; b++)
		w_tun.age_count += (w_tun.age_hist[b] = next());
	w_tun.age_sum_ns = next() * 1000000000ull;
	w_tun.no_handshake = next();
	w_tun.ages_read = next();
	s->tunnel = &w_tun;
	w_ctl.cert_on = true;
	for (unsigned r = 0; r < CTL_CERT_RESULTS; r++)
		w_ctl.cert_requests[r] = next();
	w_ctl.cert_not_after = 1764450000 + next();
	/* Rung 3 on every worker, serving with an SNI listener. */
	for (unsigned w = 0; w < STATS_WORKERS_MAX; w++)
		w_tun.r3[w] = NULL;
	for (unsigned w = 0; w < nworkers; w++) {
		fill_u64s(&w_r3[w], sizeof(w_r3[w]));
		w_tun.r3[w] = &w_r3[w];
	}
	w_tun.r3_on = nsni > 0;
	w_tun.restores = next(); /* last: the values before it keep their places */
	return s;
}

static char *render_world(struct etr_stats *s, const struct ops_process *p, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f || ops_metrics_render(f, s, p) != 0 || fclose(f) != 0) {
		fprintf(stderr, "render failed\n");
		exit(1);
	}
	return buf;
}

/* The golden text: two worlds one after the other. The first: 4 relays
 * (one absent) with 3 masters on 2 workers, 2 echo-only ports, 2 SNI and 2
 * TURN listeners, the control plane, the process. The second, what the
 * first has not: one worker, draining, no names, a TURN listener without
 * TCP or TLS, no control plane, the process's fds alone. */
static char *render_golden(size_t *len)
{
	static const struct ops_process fds_only = {.have_fds = true, .open_fds = 7, .max_fds = 9};
	struct etr_stats *s;
	size_t len2;
	char *a, *b;

	a = render_world(world(4, 2, 3, 2, 2, 2), &proc, len);
	s = world(1, 1, 1, 0, 0, 1);
	atomic_store(&s->lifecycle, LIFECYCLE_DRAINING);
	s->backend = s->version = NULL;
	s->control = NULL;
	w_turn_conf[0].tcp_set = w_turn_conf[0].tls_set = false;
	w_turn.l[0].tls_on = false;
	b = render_world(s, &fds_only, &len2);
	a = realloc(a, *len + len2 + 1);
	memcpy(a + *len, b, len2 + 1);
	*len += len2;
	free(b);
	return a;
}

/* The first world alone, for promtool (one family once). */
static char *render_golden_first(size_t *len)
{
	return render_world(world(4, 2, 3, 2, 2, 2), &proc, len);
}

/* --write-golden FILE writes the rendering; --golden FILE compares with
 * it byte for byte and names the first line that differs. */
static int golden(const char *path, bool write)
{
	size_t len, glen;
	char *t = render_golden(&len), *g;
	FILE *f = fopen(path, write ? "w" : "r");
	long n;

	if (!f) {
		perror(path);
		return 1;
	}
	if (write) {
		fwrite(t, 1, len, f);
		free(t);
		return fclose(f) ? 1 : 0;
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	g = malloc((size_t)n + 1);
	glen = fread(g, 1, (size_t)n, f);
	fclose(f);
	if (glen == len && memcmp(g, t, len) == 0) {
		printf("%s: %zu bytes, identical\n", path, len);
		free(g);
		free(t);
		return 0;
	}
	for (size_t k = 0, line = 1, start = 0; k <= len && k <= glen; k++) {
		if (k == len || k == glen || g[k] != t[k]) {
			fprintf(stderr,
				"%s: differs at line %zu (%zu bytes, golden %zu)\n"
				"  golden: %.*s\n  now:    %.*s\n",
				path, line, len, glen, (int)strcspn(g + start, "\n"), g + start,
				(int)strcspn(t + start, "\n"), t + start);
			break;
		}
		if (t[k] == '\n') {
			line++;
			start = k + 1;
		}
	}
	free(g);
	free(t);
	return 1;
}

/* --bench: the CPU time of one rendering of the largest world (every
 * relay with every master on 8 workers, every listener), best of a few
 * rounds (CPU time: the machine that runs it is often busy). A
 * measurement for the log, no assertion. */
static int bench(void)
{
	struct etr_stats *s = world(STATS_RELAYS_MAX, W_WORKERS, STATS_MASTERS_MAX,
				    CONF_PRBE_LISTEN_MAX, CONF_SNI_MAX, CONF_TURN_MAX);
	double best = 1e9;
	size_t len = 0;
	enum { ROUNDS = 10, EACH = 10 };

	for (unsigned r = 0; r < ROUNDS; r++) {
		struct timespec a, b;
		double us;

		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
		for (unsigned k = 0; k < EACH; k++)
			free(render_world(s, &proc, &len));
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
		us = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3 /
		     EACH;
		if (us < best)
			best = us;
	}
	printf("render of %zu bytes: %.1f us CPU (best of %d rounds of %d)\n", len, best, ROUNDS,
	       EACH);
	return 0;
}

/* Pipe text through `promtool check metrics`: it must say nothing and
 * exit 0. Returns 0 or 1. */
static int promtool_lint(const char *what, const char *text)
{
	char out[] = "/tmp/etrelay-promtool-XXXXXX", cmd[256], said[4096];
	size_t n;
	FILE *p, *f;
	int fd, status;

	if ((fd = mkstemp(out)) < 0)
		return 1;
	close(fd);
	snprintf(cmd, sizeof(cmd), "promtool check metrics >%s 2>&1", out);
	if (!(p = popen(cmd, "w")))
		return 1;
	fputs(text, p);
	status = pclose(p);
	f = fopen(out, "r");
	n = f ? fread(said, 1, sizeof(said) - 1, f) : 0;
	said[n] = '\0';
	if (f)
		fclose(f);
	unlink(out);
	if (status != 0 || n) {
		fprintf(stderr, "promtool check metrics, %s (status %d):\n%s", what, status, said);
		return 1;
	}
	printf("promtool check metrics, %s: clean\n", what);
	return 0;
}

/* The full rendering of the test's world and of the golden world through
 * promtool. 77 (skip) without promtool. */
static int promtool_check(void)
{
	size_t n;
	char *t;
	int bad;

	if (system("command -v promtool >/dev/null 2>&1") != 0) {
		fprintf(stderr, "promtool not found (Debian: apt install prometheus): skipped\n");
		return 77;
	}
	if (setup(NULL) != 0)
		return 1;
	t = render(&proc);
	bad = promtool_lint("the unit tests' world", t);
	free(t);
	teardown(NULL);
	t = render_golden_first(&n);
	bad |= promtool_lint("the golden world", t);
	free(t);
	return bad;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_ops_metrics_renders_sessions_per_relay, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_sums_the_workers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_sums_rung3_over_the_workers, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_counts_each_direction, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_counts_prbe_by_port_and_result, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_lists_every_drop_reason, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_exports_refusals_beside_the_drops,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_reports_probes_and_game_server, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_counts_heartbeats_by_master_and_result,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_omits_last_heartbeat_before_the_first,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_lifecycle_state_follows_draining,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_names_backend_version_and_relay, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_escapes_label_values, setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_ops_metrics_renders_process_metrics_only_when_given, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_gives_every_sample_help_and_type,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_sni_listener, setup, teardown),
	    cmocka_unit_test(test_ops_metrics_sni_preread_buckets),
	    cmocka_unit_test_setup_teardown(test_ops_metrics_masters_copies_under_the_bound, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(
		test_ops_metrics_control_plane_results_routes_and_last_success, setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_ops_metrics_no_control_family_without_a_control_plane, setup, teardown),
	};

	if (argc > 1 && strcmp(argv[1], "--promtool") == 0)
		return promtool_check();
	if (argc > 2 && strcmp(argv[1], "--golden") == 0)
		return golden(argv[2], false);
	if (argc > 2 && strcmp(argv[1], "--write-golden") == 0)
		return golden(argv[2], true);
	if (argc > 1 && strcmp(argv[1], "--bench") == 0)
		return bench();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
