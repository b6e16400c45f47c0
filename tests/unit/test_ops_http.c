/* SPDX-License-Identifier: ISC */
/* The ops listener over real TCP on loopback: every route and status code,
 * the token rules, drain and resume, and the bounds on time, size and
 * connections. The stats are filled by hand (the relay and SNI kinds read
 * them); no relay runs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ops.h"
#include "relay_kind.h"
#include "sni.h"
#include "sni_conf.h"
#include "sni_kind.h"

#define TOKEN_L	    "lifecycle-0123456789abcdef0123456789"
#define TOKEN_R	    "readonly-0123456789abcdef0123456789"
#define TOKEN_M	    "metrics-0123456789abcdef0123456789"
#define TOKEN_X	    "wrong-000-0123456789abcdef0123456789"
#define CONNECTIONS 1000

static struct relay_stats et1, oa;
static struct etr_stats st;
static struct sni_conf tls_conf;
static struct sni_shared sni;
static struct ops *op;
/* The kinds whose part of /readyz and /lifecycle the ops plane asks for,
 * reading the stats filled by hand, as the daemon's table would. */
static const struct kind *const kinds[] = {&relay_kind, &sni_kind};
static struct kind_env kenv[] = {{.stats = &st}, {.stats = &st}};
static int port;
static char dir[] = "/tmp/etrelay-test-ops-http-XXXXXX";

struct reply {
	int status; /* -1: closed without an answer */
	char head[4096];
	const char *body;
	size_t body_len;
	char raw[256 * 1024];
};

static struct reply rep;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int connect_to(int family, int p)
{
	union etr_sockaddr a = {0};
	struct timeval tv = {.tv_sec = 10};
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	if (family == AF_INET) {
		a.in.sin_family = AF_INET;
		a.in.sin_port = htons((uint16_t)p);
		a.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	} else {
		a.in6.sin6_family = AF_INET6;
		a.in6.sin6_port = htons((uint16_t)p);
		a.in6.sin6_addr = in6addr_loopback;
	}
	assert_int_equal(connect(fd, &a.sa, addr_len(&a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Send req, read to EOF, split the answer. */
static int exchange_on(int fd, const char *req, size_t len, struct reply *r)
{
	size_t n = 0;
	ssize_t k;
	char *end;

	memset(r->head, 0, sizeof(r->head));
	r->status = -1;
	r->body = "";
	r->body_len = 0;
	while (len && (k = send(fd, req, len, MSG_NOSIGNAL)) > 0)
		req += k, len -= (size_t)k;
	while (n < sizeof(r->raw) - 1 && (k = recv(fd, r->raw + n, sizeof(r->raw) - 1 - n, 0)) > 0)
		n += (size_t)k;
	close(fd);
	r->raw[n] = '\0';
	if (sscanf(r->raw, "HTTP/1.%*d %d", &r->status) != 1 ||
	    !(end = strstr(r->raw, "\r\n\r\n"))) {
		r->status = -1;
		return -1;
	}
	memcpy(r->head, r->raw,
	       (size_t)(end - r->raw) < sizeof(r->head) - 1 ? (size_t)(end - r->raw)
							    : sizeof(r->head) - 1);
	r->body = end + 4;
	r->body_len = n - (size_t)(end + 4 - r->raw);
	return r->status;
}

static int request_extra(const char *method, const char *path, const char *auth, const char *extra)
{
	char req[1024];
	int n;

	n = snprintf(req, sizeof(req),
		     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%s%s\r\n",
		     method, path, auth ? "Authorization: Bearer " : "", auth ? auth : "",
		     auth ? "\r\n" : "", extra);
	return exchange_on(connect_to(AF_INET, port), req, (size_t)n, &rep);
}

static int request(const char *method, const char *path, const char *auth)
{
	return request_extra(method, path, auth, "");
}

/* The value of a response header, or NULL. */
static const char *header(const char *name)
{
	static char value[256];
	size_t n = strlen(name);

	for (const char *p = strstr(rep.head, "\r\n"); p; p = strstr(p + 2, "\r\n"))
		if (strncasecmp(p + 2, name, n) == 0 && p[2 + n] == ':') {
			p += 3 + n;
			p += strspn(p, " ");
			snprintf(value, sizeof(value), "%.*s", (int)strcspn(p, "\r"), p);
			return value;
		}
	return NULL;
}

static void assert_body_has(const char *s)
{
	if (!strstr(rep.body, s))
		fail_msg("body lacks %s:\n%s", s, rep.body);
}

static void set_tokens(const char *l, const char *r, const char *m)
{
	const char *vals[] = {l, r, m};
	const char *vars[] = {OPS_ENV_LIFECYCLE, OPS_ENV_READ, OPS_ENV_METRICS};
	char name[64], err[256] = "";

	for (unsigned i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "%s_FILE", vars[i]);
		unsetenv(name);
		if (vals[i])
			setenv(vars[i], vals[i], 1);
		else
			unsetenv(vars[i]);
	}
	/* It answers how many tokens are set. */
	if (ops_reload_tokens(op, err, sizeof(err)) != (l != NULL) + (r != NULL) + (m != NULL))
		fail_msg("ops_reload_tokens: %s", err);
}

static void fill_stats(void)
{
	atomic_store(&st.lifecycle, LIFECYCLE_ACTIVE);
	st.backend = "epoll";
	st.version = "0.1.0";
	st.started_unix = (uint64_t)time(NULL) - 12;
	st.nrelays = 2;
	st.relay[0] = &et1;
	st.relay[1] = &oa;

	pthread_mutex_init(&et1.lock, NULL);
	strcpy(et1.name, "et1");
	strcpy(et1.public_addr, "203.0.113.10:27960");
	strcpy(et1.upstream, "10.8.0.2:27960");
	strcpy(et1.game, "ET");
	et1.nmasters = 2;
	strcpy(et1.masters[0].name, "etmaster.net:27950");
	strcpy(et1.masters[0].addr, "1.2.3.4:27950");
	et1.masters[0].last_heartbeat = 1764450000;
	et1.masters[0].last_result = HB_RESULT_SENT;
	et1.masters[0].listing_confirmed = true;
	et1.masters[0].last_confirmed = 1764450012;
	et1.masters[0].heartbeats[HB_RESULT_SENT] = 9;
	strcpy(et1.masters[1].name, "nowhere.example:27950");
	et1.masters[1].last_result = HB_RESULT_UNRESOLVED;
	et1.masters[1].quiet = true;
	STAT_SET(et1.sessions_active, 3);

	/* A name JSON and Prometheus both have to escape. */
	pthread_mutex_init(&oa.lock, NULL);
	strcpy(oa.name, "o\"a\\");
	strcpy(oa.public_addr, "[2001:db8::10]:27960");
	strcpy(oa.upstream, "[fd00::2]:27960");
	strcpy(oa.game, "Q3");
	STAT_SET(oa.sessions_active, 2);

	/* One SNI listener with a route and two connections. */
	{
		struct sni_route r = {.name = "a.example"};
		char err[128];

		conf_sni_defaults(&tls_conf);
		strcpy(tls_conf.name, "tls");
		tls_conf.max_connections = 100;
		assert_int_equal(addr_parse_numeric("[::1]:8443", &tls_conf.listen), 0);
		assert_int_equal(addr_parse_numeric("127.0.0.1:9001", &r.upstream), 0);
		assert_int_equal(sni_shared_init(&sni, 0, &tls_conf, &r, 1, 1, err, sizeof(err)),
				 0);
		atomic_store(&sni.l[0].active, 2);
		st.sni = &sni;
	}
}

static int group_setup(void **state)
{
	struct ops_config cfg = {0};
	char err[512] = "";

	if (!mkdtemp(dir))
		return -1;
	unsetenv(OPS_ENV_LIFECYCLE);
	unsetenv(OPS_ENV_READ);
	unsetenv(OPS_ENV_METRICS);
	fill_stats();
	cfg.kinds = (struct ops_kinds){2, kinds, kenv};
	cfg.listen.in.sin_family = AF_INET;
	cfg.listen.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (ops_start(&op, &cfg, &st, err, sizeof(err)) != 0) {
		fprintf(stderr, "ops_start: %s\n", err);
		return -1;
	}
	port = ops_port(op);
	return port > 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	char cmd[128];

	ops_stop(op);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Each test starts active, with every game server up and no token. */
static int setup(void **state)
{
	atomic_store(&st.lifecycle, LIFECYCLE_ACTIVE);
	STAT_SET(et1.server, SERVER_UP);
	STAT_SET(oa.server, SERVER_UP);
	set_tokens(NULL, NULL, NULL);
	return 0;
}

/* Routes and status codes */

static void test_http_healthz_answers_200_and_head_has_no_body(void **state)
{
	assert_int_equal(request("GET", "/healthz", NULL), 200);
	assert_string_equal(rep.body, "ok\n");
	assert_int_equal(request("HEAD", "/healthz", NULL), 200);
	assert_int_equal(rep.body_len, 0);
}

static void test_http_readyz_answers_200_while_every_game_server_is_up(void **state)
{
	assert_int_equal(request("GET", "/readyz", NULL), 200);
	assert_string_equal(rep.body, "ready\n");
}

/* /readyz needs no token: it says why in words, never the hidden game
 * server's address (that is under /lifecycle). */
static void test_http_readyz_names_the_relay_whose_game_server_is_down(void **state)
{
	STAT_SET(oa.server, SERVER_DOWN);
	assert_int_equal(request("GET", "/readyz", NULL), 503);
	assert_string_equal(rep.body,
			    "relay o\"a\\: the game server did not answer its last probe\n");
	STAT_SET(oa.server, SERVER_UNKNOWN);
	assert_int_equal(request("GET", "/readyz", NULL), 503);
	assert_string_equal(rep.body, "relay o\"a\\: the game server was not probed yet\n");
	assert_null(strstr(rep.body, "fd00"));
	assert_null(strstr(rep.body, "27960"));
}

/* A process with SNI listeners and no game relay is ready while active. */
static void test_http_readyz_answers_200_with_only_sni_listeners(void **state)
{
	st.nrelays = 0;
	assert_int_equal(request("GET", "/readyz", NULL), 200);
	assert_string_equal(rep.body, "ready\n");
	st.sni = NULL;
	assert_int_equal(request("GET", "/readyz", NULL), 503);
	assert_string_equal(rep.body, "no relay yet\n");
	st.sni = &sni;
	st.nrelays = 2;
}

static void test_http_lifecycle_is_json_about_every_relay_and_master(void **state)
{
	char path[128], cmd[256];
	FILE *f;

	assert_int_equal(request("GET", "/lifecycle", NULL), 200);
	assert_string_equal(header("Content-Type"), "application/json");
	assert_body_has("{\"role\":\"relay\",\"state\":\"active\",\"version\":\"0.1.0\","
			"\"backend\":\"epoll\",\"workers\":1,\"uptime_seconds\":");
	assert_body_has("\"details\":{\"active_sessions\":5}");
	assert_body_has("{\"name\":\"et1\",\"public_address\":\"203.0.113.10:27960\","
			"\"upstream\":\"10.8.0.2:27960\",\"game\":\"ET\",\"server\":\"up\","
			"\"active_sessions\":3,\"masters\":[");
	assert_body_has("{\"name\":\"etmaster.net:27950\",\"address\":\"1.2.3.4:27950\","
			"\"last_heartbeat\":1764450000,\"last_result\":\"sent\","
			"\"listing_confirmed\":true,\"last_confirmed\":1764450012,"
			"\"quiet\":false}");
	assert_body_has("{\"name\":\"nowhere.example:27950\",\"address\":null,"
			"\"last_heartbeat\":null,\"last_result\":\"unresolved\","
			"\"listing_confirmed\":false,\"last_confirmed\":null,\"quiet\":true}");
	assert_body_has("\"name\":\"o\\\"a\\\\\"");
	assert_body_has("\"sni_listeners\":[{\"name\":\"tls\",\"listen\":\"[::1]:8443\","
			"\"routes\":1,\"active_connections\":2,\"max_connections\":100}]}");

	/* And a JSON parser agrees, when there is one. */
	if (system("command -v python3 >/dev/null 2>&1") != 0)
		return;
	snprintf(path, sizeof(path), "%s/lifecycle.json", dir);
	assert_non_null(f = fopen(path, "w"));
	fwrite(rep.body, 1, rep.body_len, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
		 "assert d[\"relays\"][1][\"name\"] == \"o\\\"a\\\\\"' %s",
		 path);
	assert_int_equal(system(cmd), 0);
}

static void test_http_metrics_is_prometheus_text_with_process_metrics(void **state)
{
	static const char *const process[] = {
	    "process_cpu_seconds_total ",
	    "process_resident_memory_bytes ",
	    "process_virtual_memory_bytes ",
	    "process_open_fds ",
	    "process_max_fds ",
	    "process_start_time_seconds ",
	};
	char path[128], cmd[256];
	FILE *f;

	assert_int_equal(request("GET", "/metrics", NULL), 200);
	assert_string_equal(header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
	assert_body_has("\netrelay_sessions_active{relay=\"et1\"} 3\n");
	assert_body_has("\netrelay_backend_info{backend=\"epoll\"} 1\n");
	for (unsigned i = 0; i < sizeof(process) / sizeof(process[0]); i++)
		assert_body_has(process[i]);
	assert_null(strstr(rep.body, "process_open_fds 0\n"));

	if (system("command -v promtool >/dev/null 2>&1") != 0)
		return;
	snprintf(path, sizeof(path), "%s/metrics.txt", dir);
	assert_non_null(f = fopen(path, "w"));
	fwrite(rep.body, 1, rep.body_len, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "promtool check metrics <%s 2>&1 | grep . && exit 1; exit 0",
		 path);
	assert_int_equal(system(cmd), 0);
}

static void test_http_unknown_path_is_404(void **state)
{
	assert_int_equal(request("GET", "/", NULL), 404);
	assert_int_equal(request("GET", "/healthz/", NULL), 404);
	assert_int_equal(request("GET", "/lifecycle/nothing", NULL), 404);
	assert_int_equal(request("GET", "/../etc/passwd", NULL), 404);
}

static void test_http_query_string_does_not_change_the_route(void **state)
{
	assert_int_equal(request("GET", "/healthz?verbose=1", NULL), 200);
}

static void test_http_wrong_method_is_405_with_allow(void **state)
{
	assert_int_equal(request("POST", "/healthz", NULL), 405);
	assert_string_equal(header("Allow"), "GET, HEAD");
	assert_int_equal(request("DELETE", "/metrics", NULL), 405);
	assert_string_equal(header("Allow"), "GET, HEAD");
	set_tokens(TOKEN_L, NULL, NULL);
	assert_int_equal(request("GET", "/lifecycle/drain", TOKEN_L), 405);
	assert_string_equal(header("Allow"), "POST");
	assert_int_equal(atomic_load(&st.lifecycle), LIFECYCLE_ACTIVE);
}

/* Tokens */

static void test_http_reads_need_no_token_when_none_is_configured(void **state)
{
	assert_int_equal(request("GET", "/lifecycle", NULL), 200);
	assert_int_equal(request("GET", "/metrics", NULL), 200);
}

static void test_http_drain_does_not_exist_without_a_lifecycle_token(void **state)
{
	assert_int_equal(request("POST", "/lifecycle/drain", NULL), 404);
	set_tokens(NULL, TOKEN_R, TOKEN_M);
	assert_int_equal(request("POST", "/lifecycle/drain", TOKEN_R), 404);
	assert_int_equal(request("POST", "/lifecycle/resume", TOKEN_R), 404);
	assert_int_equal(atomic_load(&st.lifecycle), LIFECYCLE_ACTIVE);
}

static void test_http_missing_or_wrong_token_is_401_with_www_authenticate(void **state)
{
	set_tokens(TOKEN_L, TOKEN_R, TOKEN_M);
	assert_int_equal(request("GET", "/lifecycle", NULL), 401);
	assert_non_null(header("WWW-Authenticate"));
	assert_int_equal(strncmp(header("WWW-Authenticate"), "Bearer", 6), 0);
	assert_int_equal(request("GET", "/lifecycle", TOKEN_X), 401);
	assert_int_equal(request("GET", "/metrics", NULL), 401);
	assert_int_equal(request("GET", "/metrics", TOKEN_X), 401);
	assert_int_equal(request("POST", "/lifecycle/drain", NULL), 401);
	assert_int_equal(request("POST", "/lifecycle/drain", TOKEN_X), 401);
	/* A prefix, or the token with more after it, is another token. */
	assert_int_equal(request("GET", "/lifecycle",
				 "lifecycle-0123456789abcdef0123456789"
				 "x"),
			 401);
	assert_int_equal(request("GET", "/lifecycle", "lifecycle-0123456789abcdef012345678"), 401);
	/* Not a Bearer header at all. */
	assert_int_equal(
	    request_extra("GET", "/lifecycle", NULL, "Authorization: Basic " TOKEN_L "\r\n"), 401);
	assert_int_equal(atomic_load(&st.lifecycle), LIFECYCLE_ACTIVE);
}

static void test_http_health_and_readiness_never_need_a_token(void **state)
{
	set_tokens(TOKEN_L, TOKEN_R, TOKEN_M);
	assert_int_equal(request("GET", "/healthz", NULL), 200);
	assert_int_equal(request("GET", "/readyz", NULL), 200);
	assert_int_equal(request("GET", "/healthz", TOKEN_X), 200);
}

static void test_http_lifecycle_token_reads_and_drains(void **state)
{
	set_tokens(TOKEN_L, TOKEN_R, TOKEN_M);
	assert_int_equal(request("GET", "/lifecycle", TOKEN_L), 200);
	assert_int_equal(request("GET", "/metrics", TOKEN_L), 200);
	assert_int_equal(request("POST", "/lifecycle/drain", TOKEN_L), 200);
	assert_int_equal(atomic_load(&st.lifecycle), LIFECYCLE_DRAINING);
}

static void test_http_read_token_reads_but_cannot_drain(void **state)
{
	set_tokens(TOKEN_L, TOKEN_R, TOKEN_M);
	assert_int_equal(request("GET", "/lifecycle", TOKEN_R), 200);
	assert_int_equal(request("GET", "/metrics", TOKEN_R), 200);
	assert_int_equal(request("POST", "/lifecycle/drain", TOKEN_R), 401);
	assert_int_equal(atomic_load(&st.lifecycle), LIFECYCLE_ACTIVE);
	atomic_store(&st.lifecycle, LIFECYCLE_DRAINING);
	assert_int_equal(request("POST", "/lifecycle/resume", TOKEN_R), 401);
	assert_int_equal(atomic_load(&st.lifecycle), LIFECYCLE_DRAINING);
}

static void test_http_metrics_token_cannot_read_lifecycle(void **state)
{
	set_tokens(TOKEN_L, TOKEN_R, TOKEN_M);
	assert_int_equal(request("GET", "/metrics", TOKEN_M), 200);
	assert_int_equal(request("GET", "/lifecycle", TOKEN_M), 401);
	assert_int_equal(request("POST", "/lifecycle/drain", TOKEN_M), 401);
	assert_int_equal(atomic_load(&st.lifecycle), LIFECYCLE_ACTIVE);
}

static void test_http_a_metrics_token_alone_closes_lifecycle_too(void **state)
{
	/* Once a token is set nothing that needs a grant is open: the metrics
	 * token does not grant /lifecycle, and no token means 401. */
	set_tokens(NULL, NULL, TOKEN_M);
	assert_int_equal(request("GET", "/lifecycle", NULL), 401);
	assert_int_equal(request("GET", "/lifecycle", TOKEN_M), 401);
	assert_int_equal(request("GET", "/healthz", NULL), 200);
	assert_int_equal(request("GET", "/metrics", NULL), 401);
	assert_int_equal(request("GET", "/metrics", TOKEN_M), 200);
}

static void test_http_bearer_scheme_is_case_insensitive(void **state)
{
	set_tokens(TOKEN_L, NULL, NULL);
	assert_int_equal(
	    request_extra("GET", "/lifecycle", NULL, "authorization: bearer  " TOKEN_L "\r\n"),
	    200);
}

static void test_http_reload_keeps_old_tokens_when_new_ones_are_bad(void **state)
{
	char path[128], err[256] = "";
	FILE *f;

	set_tokens(TOKEN_L, NULL, NULL);
	setenv(OPS_ENV_LIFECYCLE, "short", 1);
	assert_int_equal(ops_reload_tokens(op, err, sizeof(err)), -1);
	assert_null(strstr(err, "short"));
	assert_int_equal(request("GET", "/lifecycle", TOKEN_L), 200);

	/* A rotation through the file: the old token stops working. */
	snprintf(path, sizeof(path), "%s/lifecycle.token", dir);
	assert_non_null(f = fopen(path, "w"));
	fputs(TOKEN_X "\n", f);
	fclose(f);
	unsetenv(OPS_ENV_LIFECYCLE);
	setenv(OPS_ENV_LIFECYCLE "_FILE", path, 1);
	/* Every user may read it: refused, named, the old token stays. */
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(ops_reload_tokens(op, err, sizeof(err)), -1);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "chmod 600"));
	assert_int_equal(request("GET", "/lifecycle", TOKEN_L), 200);
	assert_int_equal(request("GET", "/lifecycle", TOKEN_X), 401);
	assert_int_equal(chmod(path, 0600), 0);
	assert_true(ops_reload_tokens(op, err, sizeof(err)) >= 1); /* the file's token */
	assert_int_equal(request("GET", "/lifecycle", TOKEN_L), 401);
	assert_int_equal(request("GET", "/lifecycle", TOKEN_X), 200);
	unsetenv(OPS_ENV_LIFECYCLE "_FILE");
}

static void test_http_start_refuses_a_short_token(void **state)
{
	struct ops_config cfg = {0};
	struct ops *other;
	char err[512] = "";

	cfg.listen.in.sin_family = AF_INET;
	cfg.listen.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setenv(OPS_ENV_READ, "0123456789abcdef0123456789abcde", 1);
	assert_int_equal(ops_start(&other, &cfg, &st, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, OPS_ENV_READ));
	assert_null(strstr(err, "0123456789"));
	unsetenv(OPS_ENV_READ);
}

/* Lifecycle */

static void test_http_drain_flips_lifecycle_and_readiness_at_once(void **state)
{
	set_tokens(TOKEN_L, TOKEN_R, NULL);
	assert_int_equal(request("POST", "/lifecycle/drain", TOKEN_L), 200);
	assert_string_equal(header("Content-Type"), "application/json");
	assert_body_has("\"state\":\"draining\"");
	assert_int_equal(atomic_load(&st.lifecycle), LIFECYCLE_DRAINING);
	assert_int_equal(request("GET", "/readyz", NULL), 503);
	assert_string_equal(rep.body, "draining\n");
	assert_int_equal(request("GET", "/healthz", NULL), 200);
	assert_int_equal(request("GET", "/lifecycle", TOKEN_R), 200);
	assert_body_has("\"state\":\"draining\"");
	assert_int_equal(request("GET", "/metrics", TOKEN_R), 200);
	assert_body_has("\netrelay_lifecycle_state{state=\"draining\"} 1\n");
	/* Draining twice is still draining. */
	assert_int_equal(request("POST", "/lifecycle/drain", TOKEN_L), 200);
	assert_int_equal(atomic_load(&st.lifecycle), LIFECYCLE_DRAINING);

	assert_int_equal(request("POST", "/lifecycle/resume", TOKEN_L), 200);
	assert_body_has("\"state\":\"active\"");
	assert_int_equal(atomic_load(&st.lifecycle), LIFECYCLE_ACTIVE);
	assert_int_equal(request("GET", "/readyz", NULL), 200);
}

static void test_http_drain_with_a_body_is_answered(void **state)
{
	set_tokens(TOKEN_L, NULL, NULL);
	assert_int_equal(request_extra("POST", "/lifecycle/drain", TOKEN_L,
				       "Content-Type: application/json\r\n"
				       "Content-Length: 2\r\n\r\n{}"),
			 200);
	assert_int_equal(atomic_load(&st.lifecycle), LIFECYCLE_DRAINING);
}

/* Bounds */

static void test_http_a_request_that_never_ends_is_closed_by_the_deadline(void **state)
{
	static const char part[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";
	int fd = connect_to(AF_INET, port);
	double t0, waited;
	char buf[256];

	assert_int_equal(send(fd, part, strlen(part), MSG_NOSIGNAL), (ssize_t)strlen(part));
	t0 = now();
	/* EOF or a reset, and nothing served. */
	while (recv(fd, buf, sizeof(buf), 0) > 0)
		;
	waited = now() - t0;
	close(fd);
	if (waited < OPS_DEADLINE_SEC - 1 || waited > OPS_DEADLINE_SEC + 1.5)
		fail_msg("closed after %.1f s, expected about %d s", waited, OPS_DEADLINE_SEC);
	assert_int_equal(request("GET", "/healthz", NULL), 200);
}

static int headers_of(size_t bytes)
{
	size_t len = bytes + 256, n;
	char *req = malloc(len);
	int status;

	assert_non_null(req);
	n = (size_t)snprintf(req, len,
			     "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			     "Connection: close\r\nX-Pad: ");
	memset(req + n, 'a', bytes);
	n += bytes;
	memcpy(req + n, "\r\n\r\n", 4);
	status = exchange_on(connect_to(AF_INET, port), req, n + 4, &rep);
	free(req);
	return status;
}

static void test_http_headers_over_the_bound_are_refused(void **state)
{
	int status;

	assert_int_equal(headers_of(4096), 200);
	assert_int_equal(headers_of(OPS_REQUEST_MAX + 1024), 431);
	/* Far beyond: answered 431 or closed, never served. */
	status = headers_of(64 * 1024);
	if (status != 431 && status != -1)
		fail_msg("64 KiB of headers answered %d", status);
	assert_int_equal(request("GET", "/healthz", NULL), 200);
}

/* Start CONNECTIONS requests at once: each one is served or closed, none
 * hangs, and the listener answers afterwards. */
static void test_http_a_thousand_connections_do_not_break_it(void **state)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
				  "Connection: close\r\n\r\n";
	static struct pollfd pfd[CONNECTIONS];
	static char first[CONNECTIONS][16];
	static size_t got[CONNECTIONS];
	unsigned open_ = 0, served = 0, closed = 0;
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct rlimit rl;
	double deadline;

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < CONNECTIONS + OPS_CONNECTIONS_MAX + 64)
		skip();
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (unsigned i = 0; i < CONNECTIONS; i++) {
		pfd[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		assert_true(pfd[i].fd >= 0);
		pfd[i].events = POLLOUT;
		got[i] = 0;
		if (connect(pfd[i].fd, (struct sockaddr *)&a, sizeof(a)) < 0 &&
		    errno != EINPROGRESS)
			fail_msg("connect %u: %s", i, strerror(errno));
		open_++;
	}
	deadline = now() + 8;
	while (open_ && now() < deadline) {
		assert_true(poll(pfd, CONNECTIONS, 100) >= 0);
		for (unsigned i = 0; i < CONNECTIONS; i++) {
			char buf[4096];
			ssize_t k;

			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			if (pfd[i].events == POLLOUT) {
				/* Connected (or failed: send says which). */
				if (send(pfd[i].fd, req, strlen(req), MSG_NOSIGNAL) ==
				    (ssize_t)strlen(req)) {
					pfd[i].events = POLLIN;
					continue;
				}
				k = -1;
			} else {
				k = recv(pfd[i].fd, buf, sizeof(buf), 0);
				if (k < 0 && errno == EAGAIN)
					continue;
				if (k > 0 && got[i] < sizeof(first[i]) - 1) {
					size_t c = (size_t)k < sizeof(first[i]) - 1 - got[i]
						       ? (size_t)k
						       : sizeof(first[i]) - 1 - got[i];
					memcpy(first[i] + got[i], buf, c);
					got[i] += c;
				}
				if (k > 0)
					continue;
			}
			first[i][got[i]] = '\0';
			if (strncmp(first[i], "HTTP/1.1 200", 12) == 0)
				served++;
			else
				closed++;
			close(pfd[i].fd);
			pfd[i].fd = -1;
			open_--;
		}
	}
	for (unsigned i = 0; i < CONNECTIONS; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
	print_message("%u connections: %u served, %u closed unserved, %u still open\n", CONNECTIONS,
		      served, closed, open_);
	assert_int_equal(open_, 0);
	assert_true(served > 0);
	assert_int_equal(request("GET", "/healthz", NULL), 200);
}

/* Addresses */

static void test_http_a_taken_port_is_named_in_the_error(void **state)
{
	struct ops_config cfg = {0};
	struct ops *other;
	char err[512] = "";

	cfg.listen.in.sin_family = AF_INET;
	cfg.listen.in.sin_port = htons((uint16_t)port);
	cfg.listen.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(ops_start(&other, &cfg, &st, err, sizeof(err)), -EIO);
	if (!strstr(err, "in use") || !strstr(err, "127.0.0.1"))
		fail_msg("error does not say the address is in use: %s", err);
}

static void test_http_ipv6_loopback_listener_answers(void **state)
{
	struct ops_config cfg = {0};
	struct ops *v6;
	char err[512] = "";
	int fd = socket(AF_INET6, SOCK_STREAM, 0);

	cfg.listen.in6.sin6_family = AF_INET6;
	cfg.listen.in6.sin6_addr = in6addr_loopback;
	if (fd < 0 || bind(fd, &cfg.listen.sa, sizeof(cfg.listen.in6)) < 0) {
		if (fd >= 0)
			close(fd);
		skip(); /* no IPv6 loopback here */
	}
	close(fd);
	assert_int_equal(ops_start(&v6, &cfg, &st, err, sizeof(err)), 0);
	assert_int_equal(exchange_on(connect_to(AF_INET6, ops_port(v6)),
				     "GET /healthz HTTP/1.1\r\nHost: [::1]\r\n"
				     "Connection: close\r\n\r\n",
				     57, &rep),
			 200);
	ops_stop(v6);
}

static void test_http_public_address_is_refused(void **state)
{
	struct ops_config cfg = {0};
	struct ops *pub;
	char err[512] = "";

	cfg.listen.in.sin_family = AF_INET; /* 0.0.0.0 */
	assert_int_equal(ops_start(&pub, &cfg, &st, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--ops-allow-public"));
}

int main(void)
{
#define T(name) cmocka_unit_test_setup(name, setup)
	const struct CMUnitTest tests[] = {
	    T(test_http_healthz_answers_200_and_head_has_no_body),
	    T(test_http_readyz_answers_200_while_every_game_server_is_up),
	    T(test_http_readyz_answers_200_with_only_sni_listeners),
	    T(test_http_readyz_names_the_relay_whose_game_server_is_down),
	    T(test_http_lifecycle_is_json_about_every_relay_and_master),
	    T(test_http_metrics_is_prometheus_text_with_process_metrics),
	    T(test_http_unknown_path_is_404),
	    T(test_http_query_string_does_not_change_the_route),
	    T(test_http_wrong_method_is_405_with_allow),
	    T(test_http_reads_need_no_token_when_none_is_configured),
	    T(test_http_drain_does_not_exist_without_a_lifecycle_token),
	    T(test_http_missing_or_wrong_token_is_401_with_www_authenticate),
	    T(test_http_health_and_readiness_never_need_a_token),
	    T(test_http_lifecycle_token_reads_and_drains),
	    T(test_http_read_token_reads_but_cannot_drain),
	    T(test_http_metrics_token_cannot_read_lifecycle),
	    T(test_http_a_metrics_token_alone_closes_lifecycle_too),
	    T(test_http_bearer_scheme_is_case_insensitive),
	    T(test_http_reload_keeps_old_tokens_when_new_ones_are_bad),
	    T(test_http_start_refuses_a_short_token),
	    T(test_http_drain_flips_lifecycle_and_readiness_at_once),
	    T(test_http_drain_with_a_body_is_answered),
	    T(test_http_a_request_that_never_ends_is_closed_by_the_deadline),
	    T(test_http_headers_over_the_bound_are_refused),
	    T(test_http_a_thousand_connections_do_not_break_it),
	    T(test_http_a_taken_port_is_named_in_the_error),
	    T(test_http_ipv6_loopback_listener_answers),
	    T(test_http_public_address_is_refused),
	};
#undef T

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
