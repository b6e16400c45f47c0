/* SPDX-License-Identifier: ISC */
/* The ops listener: GNU libmicrohttpd in a thread of its own, so that the
 * packet loop never waits on an HTTP client, and MHD because it is a
 * well-kept, fuzzed HTTP parser that bounds memory, time and connections. */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <limits.h>
#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "addrclass.h"
#include "control_stats.h"
#include "json.h"
#include "kind.h"
#include "log.h"
#include "ops_metrics.h"
#include "secret.h"
#include "timers.h"

/* Longest token kept: far above any sane secret, far below a header. */
/* MHD keeps a request's headers and its response headers in one pool per
 * connection; twice the request bound leaves room for both, and a request
 * that outgrows the pool is answered 431 and closed by MHD itself. */
#define OPS_MEMORY_LIMIT (2 * OPS_REQUEST_MAX)
#define OPS_LOG_PER_SEC	 5

enum ops_token_kind { OPS_TOKEN_LIFECYCLE, OPS_TOKEN_READ, OPS_TOKEN_METRICS, OPS_TOKEN_KINDS };

/* What a route needs and what a token grants. */
enum {
	OPS_GRANT_METRICS = 1, /* GET /metrics */
	OPS_GRANT_READ = 2,    /* GET /lifecycle */
	OPS_GRANT_WRITE = 4,   /* POST /lifecycle/drain, /lifecycle/resume */
};

static const struct {
	const char *env;
	unsigned grants;
} token_kinds[OPS_TOKEN_KINDS] = {
    [OPS_TOKEN_LIFECYCLE] = {OPS_ENV_LIFECYCLE,
			     OPS_GRANT_METRICS | OPS_GRANT_READ | OPS_GRANT_WRITE},
    [OPS_TOKEN_READ] = {OPS_ENV_READ, OPS_GRANT_METRICS | OPS_GRANT_READ},
    [OPS_TOKEN_METRICS] = {OPS_ENV_METRICS, OPS_GRANT_METRICS},
};

struct ops {
	struct MHD_Daemon *mhd;
	struct etr_stats *st;
	struct ops_config cfg;
	pthread_mutex_t lock; /* guards tok: SIGHUP replaces them under requests */
	struct secret tok[OPS_TOKEN_KINDS];
	/* MHD's messages: kept for the error while starting, rate-limited after. */
	_Atomic bool starting;
	pthread_t starter;
	char start_msg[256];
	time_t log_sec;
	unsigned log_lines, log_dropped;
	/* The listener's thread runs MHD and keeps the slots; only it
	 * touches conns. */
	pthread_t thread;
	int wake; /* eventfd: ops_stop asks the thread to leave */
	struct ops_conns conns;
};

/* Addresses */

bool ops_addr_is_private(const union etr_sockaddr *sa)
{
	return addrclass_private(sa);
}

/* Tokens */

/* All three or none: a half-read set is wiped. say: log what is worth
 * knowing about the files (not in the check before the start). */
static int tokens_read(struct secret tok[OPS_TOKEN_KINDS], bool say, char *err, size_t errlen)
{
	for (unsigned k = 0; k < OPS_TOKEN_KINDS; k++)
		if (secret_read(&tok[k], token_kinds[k].env, say ? "ops" : NULL, true, err,
				errlen) < 0) {
			explicit_bzero(tok, OPS_TOKEN_KINDS * sizeof(*tok));
			return -1;
		}
	return 0;
}

int ops_tokens_check(char *err, size_t errlen)
{
	struct secret tok[OPS_TOKEN_KINDS];
	int rc = tokens_read(tok, false, err, errlen);

	explicit_bzero(tok, sizeof(tok));
	return rc;
}

/* Runs over the whole configured token whatever was presented, so the
 * time taken says nothing about how much of a guess was right. */
static bool token_equal(const struct secret *t, const char *given, size_t glen)
{
	unsigned char diff = glen != t->len;

	for (size_t i = 0; i < t->len; i++)
		diff |= (unsigned char)(t->s[i] ^ (i < glen ? given[i] : 0));
	return diff == 0;
}

/* "Bearer <token>": the scheme is case-insensitive (RFC 7235). */
static const char *bearer(const char *h, size_t *len)
{
	size_t n;

	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return NULL;
	for (h += 7; *h == ' '; h++)
		;
	for (n = strlen(h); n && (h[n - 1] == ' ' || h[n - 1] == '\t'); n--)
		;
	*len = n;
	return h;
}

/* Grants that some configured token gives (*configured) and that the
 * presented one gives (returned). Every configured token is compared. */
static unsigned token_grants(struct ops *op, struct MHD_Connection *c, unsigned *configured)
{
	const char *given;
	unsigned grants = 0;
	size_t glen = 0;

	given = bearer(
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION), &glen);
	*configured = 0;
	pthread_mutex_lock(&op->lock);
	for (unsigned k = 0; k < OPS_TOKEN_KINDS; k++) {
		if (!op->tok[k].len)
			continue;
		*configured |= token_kinds[k].grants;
		if (given && token_equal(&op->tok[k], given, glen))
			grants |= token_kinds[k].grants;
	}
	pthread_mutex_unlock(&op->lock);
	return grants;
}

/* Responses */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
			     char *body, size_t len, const char *hname, const char *hvalue)
{
	struct MHD_Response *r;
	enum MHD_Result ok;

	/* MHD frees body with free() once sent. */
	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (hname)
		MHD_add_response_header(r, hname, hvalue);
	ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

__attribute__((format(printf, 5, 6))) static enum MHD_Result
reply_text(struct MHD_Connection *c, unsigned status, const char *hname, const char *hvalue,
	   const char *fmt, ...)
{
	char *body;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&body, fmt, ap);
	va_end(ap);
	if (n < 0)
		return MHD_NO;
	return reply(c, status, "text/plain; charset=utf-8", body, (size_t)n, hname, hvalue);
}

/* Routes */

static enum MHD_Result serve_healthz(struct ops *op, struct MHD_Connection *c)
{
	return reply_text(c, MHD_HTTP_OK, NULL, NULL, "ok\n");
}

/* Kind k's listeners that are not ready: a reason each while there is
 * room, the last slot saying how many more. */
static void kind_reasons(const struct kind *k, const struct kind_env *e, unsigned n,
			 struct ops_readiness *out)
{
	char buf[OPS_REASON_LEN];
	unsigned more = 0;

	for (unsigned i = 0; i < n; i++) {
		const char *why = k->ready(e, i, buf, sizeof(buf));

		if (!why)
			continue;
		if (out->n < OPS_REASONS_MAX - 1)
			snprintf(out->reason[out->n++], OPS_REASON_LEN, "%s", why);
		else
			more++;
	}
	if (more && out->n < OPS_REASONS_MAX)
		snprintf(out->reason[out->n++], OPS_REASON_LEN, "and %u more %s", more,
			 more == 1 ? k->ready_more_one : k->ready_more_many);
}

void ops_readiness(struct etr_stats *st, const struct ops_kinds *k, struct ops_readiness *out)
{
	unsigned nk = k ? k->n : 0, any = 0;

	memset(out, 0, sizeof(*out));
	if (atomic_load(&st->lifecycle) != LIFECYCLE_ACTIVE) {
		out->draining = true;
		snprintf(out->reason[out->n++], OPS_REASON_LEN, "draining");
		return;
	}
	for (unsigned i = 0; i < nk; i++)
		any += k->kind[i]->running ? k->kind[i]->running(&k->env[i]) : 0;
	if (!any) {
		snprintf(out->reason[out->n++], OPS_REASON_LEN, "no relay yet");
		return;
	}
	for (unsigned i = 0; i < nk; i++)
		if (k->kind[i]->running && k->kind[i]->ready)
			kind_reasons(k->kind[i], &k->env[i], k->kind[i]->running(&k->env[i]), out);
	out->ready = out->n == 0;
}

static enum MHD_Result serve_readyz(struct ops *op, struct MHD_Connection *c)
{
	struct ops_readiness r;

	ops_readiness(op->st, &op->cfg.kinds, &r);
	if (r.ready)
		return reply_text(c, MHD_HTTP_OK, NULL, NULL, "ready\n");
	/* One line: the first reason. */
	return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, NULL, "%s\n", r.reason[0]);
}

/* The control plane's part of /lifecycle. */
static void json_control(FILE *f, struct control_stats *cs)
{
	struct control_stats s;

	pthread_mutex_lock(&cs->lock);
	s = *cs;
	pthread_mutex_unlock(&cs->lock);
	fprintf(f, ",\"control\":{\"enrolled\":%s,\"relay_id\":", s.enrolled ? "true" : "false");
	if (s.relay_id[0])
		json_string(f, s.relay_id);
	else
		fputs("null", f);
	if (s.last_heartbeat)
		fprintf(f, ",\"last_heartbeat\":%" PRIu64 ",\"last_result\":\"%s\"",
			s.last_heartbeat, ctl_result_name(s.last_result));
	else
		fputs(",\"last_heartbeat\":null,\"last_result\":null", f);
	if (s.last_success)
		fprintf(f, ",\"last_success\":%" PRIu64, s.last_success);
	else
		fputs(",\"last_success\":null", f);
	fprintf(f,
		",\"consecutive_failures\":%" PRIu32 ",\"next_attempt\":%" PRIu64
		",\"routes\":%" PRIu64 ",\"routes_stale\":%s}",
		s.failures, s.next_attempt, s.routes, s.routes_stale ? "true" : "false");
}

static enum MHD_Result serve_lifecycle(struct ops *op, struct MHD_Connection *c)
{
	struct etr_stats *st = op->st;
	const struct ops_kinds *k = &op->cfg.kinds;
	uint64_t now = (uint64_t)time(NULL);
	char *body = NULL;
	size_t len = 0;
	bool first = true;
	FILE *f;

	if (!(f = open_memstream(&body, &len)))
		return MHD_NO;
	fprintf(f, "{\"role\":\"relay\",\"state\":\"%s\",\"version\":",
		atomic_load(&st->lifecycle) == LIFECYCLE_ACTIVE ? "active" : "draining");
	json_string(f, st->version ? st->version : "unknown");
	fputs(",\"backend\":", f);
	json_string(f, st->backend ? st->backend : "unknown");
	fprintf(f, ",\"workers\":%u,\"uptime_seconds\":%" PRIu64 ",\"details\":{",
		stats_workers(st), now > st->started_unix ? now - st->started_unix : 0);
	for (unsigned i = 0; i < k->n; i++)
		if (k->kind[i]->lifecycle_details)
			k->kind[i]->lifecycle_details(&k->env[i], f, &first);
	fputc('}', f);
	for (unsigned i = 0; i < k->n; i++)
		if (k->kind[i]->lifecycle)
			k->kind[i]->lifecycle(&k->env[i], f);
	if (st->control)
		json_control(f, st->control);
	if (st->xdp_mode[0]) {
		/* "native", "generic", "mixed", or "off: why". */
		bool off = strncmp(st->xdp_mode, "off: ", 5) == 0;

		fputs(",\"xdp\":{\"mode\":", f);
		json_string(f, off ? "off" : st->xdp_mode);
		if (off) {
			fputs(",\"why\":", f);
			json_string(f, st->xdp_mode + 5);
		}
		fputc('}', f);
	}
	fputs("}\n", f);
	if (fclose(f) != 0) {
		free(body);
		return MHD_NO;
	}
	return reply(c, MHD_HTTP_OK, "application/json", body, len, NULL, NULL);
}

static enum MHD_Result lifecycle_set(struct ops *op, struct MHD_Connection *c, int state)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char peer[ADDR_STRLEN] = "?";
	int from = state == LIFECYCLE_DRAINING ? LIFECYCLE_ACTIVE : LIFECYCLE_DRAINING;

	/* Only active <-> draining: a process stopping on SIGTERM stays so. */
	if (!atomic_compare_exchange_strong(&op->st->lifecycle, &from, state) && from != state) {
		if (from == LIFECYCLE_STOPPING)
			return reply_text(c, MHD_HTTP_CONFLICT, NULL, NULL,
					  "stopping: the process is exiting\n");
	} else if (from != state) {
		if (ci && ci->client_addr)
			addr_str(ci->client_addr, peer);
		log_info("ops: lifecycle %s (asked by %s)",
			 state == LIFECYCLE_DRAINING ? "draining: new sessions refused"
						     : "active: new sessions accepted",
			 peer);
	}
	return serve_lifecycle(op, c);
}

static enum MHD_Result serve_drain(struct ops *op, struct MHD_Connection *c)
{
	return lifecycle_set(op, c, LIFECYCLE_DRAINING);
}

static enum MHD_Result serve_resume(struct ops *op, struct MHD_Connection *c)
{
	return lifecycle_set(op, c, LIFECYCLE_ACTIVE);
}

static void process_sample(struct ops_process *p)
{
	unsigned long utime, stime, vsize;
	unsigned long long start, btime = 0;
	long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE), rss;
	char line[1024], *s;
	struct rlimit rl;
	struct dirent *e;
	FILE *f;
	DIR *d;

	memset(p, 0, sizeof(*p));
	if ((f = fopen("/proc/stat", "re"))) {
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "btime %llu", &btime) == 1)
				break;
		fclose(f);
	}
	/* proc(5): the command name in parentheses may hold anything, so the
	 * fields are counted from the last ')'. */
	if ((f = fopen("/proc/self/stat", "re"))) {
		if (fgets(line, sizeof(line), f) && (s = strrchr(line, ')')) &&
		    sscanf(
			s + 1,
			" %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d"
			" %*d %llu %lu %ld",
			&utime, &stime, &start, &vsize, &rss) == 5 &&
		    ticks > 0 && btime) {
			p->have_stat = true;
			p->cpu_seconds = (double)(utime + stime) / (double)ticks;
			p->start_time = (double)btime + (double)start / (double)ticks;
			p->virtual_bytes = vsize;
			p->resident_bytes = (uint64_t)rss * (uint64_t)page;
		}
		fclose(f);
	}
	if ((d = opendir("/proc/self/fd"))) {
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				p->open_fds++;
		closedir(d);
		p->open_fds--; /* the directory's own descriptor */
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
			p->max_fds = rl.rlim_cur;
			p->have_fds = true;
		}
	}
}

static enum MHD_Result serve_metrics(struct ops *op, struct MHD_Connection *c)
{
	struct ops_process proc;
	char *body = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	process_sample(&proc);
	if (!(f = open_memstream(&body, &len)))
		return MHD_NO;
	rc = ops_metrics_render(f, op->st, &proc);
	if (fclose(f) != 0 || rc < 0) {
		free(body);
		return MHD_NO;
	}
	return reply(c, MHD_HTTP_OK, OPS_METRICS_CONTENT_TYPE, body, len, NULL, NULL);
}

/* The live sessions: rendered by the packet loop (only it may read the
 * session table) through the daemon's callback, which waits a bounded time. */
static enum MHD_Result serve_sessions(struct ops *op, struct MHD_Connection *c)
{
	char *body = NULL;
	size_t len = 0;

	if (!op->cfg.sessions || op->cfg.sessions(op->cfg.sessions_arg, &body, &len) < 0)
		return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, NULL,
				  "the packet loop did not answer in time\n");
	return reply(c, MHD_HTTP_OK, "application/json", body, len, NULL, NULL);
}

static const struct ops_route {
	const char *path;
	const char *method; /* GET also answers HEAD */
	unsigned need;	    /* a grant; needed only if some configured token gives it */
	enum MHD_Result (*serve)(struct ops *op, struct MHD_Connection *c);
} ops_routes[] = {
    {"/healthz", "GET", 0, serve_healthz},
    {"/readyz", "GET", 0, serve_readyz},
    {"/lifecycle", "GET", OPS_GRANT_READ, serve_lifecycle},
    {"/lifecycle/drain", "POST", OPS_GRANT_WRITE, serve_drain},
    {"/lifecycle/resume", "POST", OPS_GRANT_WRITE, serve_resume},
    {"/metrics", "GET", OPS_GRANT_METRICS, serve_metrics},
    {"/sessions", "GET", OPS_GRANT_READ, serve_sessions},
};

static enum MHD_Result count_bytes(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	*(size_t *)cls += strlen(key) + (value ? strlen(value) : 0) + 4;
	return MHD_YES;
}

/* MHD calls this once the headers are in. The answer goes out at once,
 * before any body: no route reads one, and MHD then closes the
 * connection instead of reading it. */
static enum MHD_Result ops_request(void *cls, struct MHD_Connection *c, const char *url,
				   const char *method, const char *version, const char *upload_data,
				   size_t *upload_data_size, void **req)
{
	struct ops *op = cls;
	const struct ops_route *rt = NULL;
	size_t bytes = strlen(method) + strlen(url) + strlen(version) + 4;
	unsigned configured, grants;
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	bool health = strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0;

	/* A reserve slot (ops_conn.h) serves health checks only: anything
	 * else there would take the room they are kept. */
	if (ci && ci->socket_context &&
	    !ops_conn_asked(&op->conns, (int)((intptr_t)ci->socket_context - 1), health))
		return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, MHD_HTTP_HEADER_CONNECTION,
				  "close", "busy: only /healthz and /readyz for now\n");
	MHD_get_connection_values(c, MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND, count_bytes, &bytes);
	if (bytes > OPS_REQUEST_MAX)
		return reply_text(c, MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE, NULL, NULL,
				  "request headers over %d bytes\n", OPS_REQUEST_MAX);
	for (size_t i = 0; !rt && i < sizeof(ops_routes) / sizeof(ops_routes[0]); i++)
		if (strcmp(url, ops_routes[i].path) == 0)
			rt = &ops_routes[i];
	grants = token_grants(op, c, &configured);
	/* Drain and resume exist only when a lifecycle token is set. */
	if (!rt || (rt->need == OPS_GRANT_WRITE && !(configured & OPS_GRANT_WRITE)))
		return reply_text(c, MHD_HTTP_NOT_FOUND, NULL, NULL, "not found\n");
	if (strcmp(method, rt->method) != 0 &&
	    !(strcmp(rt->method, "GET") == 0 && strcmp(method, "HEAD") == 0))
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, MHD_HTTP_HEADER_ALLOW,
				  strcmp(rt->method, "GET") == 0 ? "GET, HEAD" : rt->method,
				  "method not allowed\n");
	/* Once any token is set, every route that needs a grant asks for a
	 * token that gives it: setting only a metrics token must not leave
	 * /lifecycle open. */
	if (configured && rt->need && !(grants & rt->need))
		return reply_text(c, MHD_HTTP_UNAUTHORIZED, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
				  "Bearer realm=\"etrelay\"", "unauthorized\n");
	return rt->serve(op, c);
}

/* The listener's complaints are about single clients (connection limits,
 * resets): at most OPS_LOG_PER_SEC lines a second, then a count. */
static void log_limited(struct ops *op, const char *line)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	if (ts.tv_sec != op->log_sec) {
		if (op->log_dropped)
			log_warnx("ops: %u more listener messages suppressed", op->log_dropped);
		op->log_sec = ts.tv_sec;
		op->log_lines = op->log_dropped = 0;
	}
	if (op->log_lines++ < OPS_LOG_PER_SEC)
		log_warnx("ops: %s", line);
	else
		op->log_dropped++;
}

/* MHD's own messages: the first one while starting becomes the error;
 * afterwards they are about single clients (connection limit, resets), so
 * a flood of them is capped. */
__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct ops *op = cls;
	char line[256];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	for (n = strlen(line); n && (line[n - 1] == '\n' || line[n - 1] == '\r'); n--)
		line[n - 1] = '\0';
	if (atomic_load(&op->starting) && pthread_equal(pthread_self(), op->starter)) {
		if (!op->start_msg[0])
			snprintf(op->start_msg, sizeof(op->start_msg), "%s", line);
		return;
	}
	log_limited(op, line);
}

/* Connections: slots, deadlines, shares per address (ops_conn.c). Every
 * callback below runs in the listener's thread. */

/* Ends a connection MHD still holds: it sees end-of-file (or EPIPE) on its
 * next turn and closes the socket itself, in this same thread, so the
 * descriptor cannot have been reused in between. */
static void conn_cut(struct ops *op, int i)
{
	shutdown(op->conns.c[i].fd, SHUT_RDWR);
}

/* Whether a whole request waits in fd's receive queue: MHD reads it on its
 * next turn, after the accepts of that turn. */
static bool request_waiting(int fd)
{
	char buf[2048];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);

	return n > 0 && memmem(buf, (size_t)n, "\r\n\r\n", 4);
}

/* With every slot taken, a reserve connection whose request is in already
 * counts as asked: a burst of newcomers accepted before MHD reads it must
 * not push a health check out between its handshake and its answer. At
 * most OPS_CONN_RESERVE peeks, at the cap only. */
static void reserve_mark_waiting(struct ops *op)
{
	struct ops_conns *t = &op->conns;

	if (t->live - t->reserved < OPS_CONN_MAX || t->reserved < OPS_CONN_RESERVE)
		return;
	for (int i = 0; i < OPS_CONN_SLOTS; i++) {
		struct ops_conn *c = &t->c[i];

		if (c->used && !c->closing && c->reserve && !c->asked && request_waiting(c->fd))
			ops_conn_asked(t, i, true);
	}
}

static enum MHD_Result conn_accept(void *cls, const struct sockaddr *sa, socklen_t len)
{
	struct ops *op = cls;
	union etr_sockaddr from;
	char who[ADDR_STRLEN] = "?";
	char line[200];
	int victim;

	if (!addr_from(&from, sa, len))
		return MHD_NO;
	reserve_mark_waiting(op);
	switch (ops_conn_admit(&op->conns, &from, mono_ns(), &victim)) {
	case OPS_CONN_ACCEPT:
		return MHD_YES;
	case OPS_CONN_EVICT:
		conn_cut(op, victim);
		return MHD_YES;
	case OPS_CONN_REFUSE_IP:
		addr_str(&from.sa, who);
		snprintf(line, sizeof(line),
			 "refused a connection from %s: it holds %d already (IPv6: per /64)", who,
			 OPS_CONN_PER_IP);
		break;
	case OPS_CONN_REFUSE_FULL:
		addr_str(&from.sa, who);
		snprintf(line, sizeof(line),
			 "refused a connection from %s: all %d connections are busy (none for "
			 "%d ms yet), and so are the %d kept for health checks",
			 who, OPS_CONN_MAX, OPS_CONN_SLOW_MS, OPS_CONN_RESERVE);
		break;
	}
	log_limited(op, line);
	return MHD_NO;
}

static void conn_notify(void *cls, struct MHD_Connection *c, void **ctx,
			enum MHD_ConnectionNotificationCode what)
{
	struct ops *op = cls;
	const union MHD_ConnectionInfo *fd, *addr;
	union etr_sockaddr from;
	int i;

	if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (*ctx)
			ops_conn_remove(&op->conns, (int)((intptr_t)*ctx - 1));
		*ctx = NULL;
		return;
	}
	fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	addr = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	*ctx = NULL;
	if (!fd)
		return;
	/* The accept check let it in, so a slot is free: -1 is a surprise. */
	if (!addr || !addr->client_addr ||
	    !addr_from(&from, addr->client_addr,
		       addr->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
								: sizeof(struct sockaddr_in)) ||
	    (i = ops_conn_add(&op->conns, &from, fd->connect_fd, c, mono_ns())) < 0) {
		shutdown(fd->connect_fd, SHUT_RDWR);
		return;
	}
	/* The kernel hands over a connection once bytes came (ops_defer): a
	 * health check's whole request is in already, and it is never the
	 * one that gives way, however late MHD reads it. */
	if (request_waiting(fd->connect_fd))
		ops_conn_asked(&op->conns, i, true);
	*ctx = (void *)(intptr_t)(i + 1);
}

/* An answer went out in full (or the request ended otherwise): the next
 * request on this connection gets a deadline of its own. */
static void conn_completed(void *cls, struct MHD_Connection *c, void **req,
			   enum MHD_RequestTerminationCode why)
{
	struct ops *op = cls;
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	if (ci && ci->socket_context)
		ops_conn_answered(&op->conns, (int)((intptr_t)ci->socket_context - 1), mono_ns());
}

/* The listener's thread: MHD's epoll, its timeouts and the deadlines. */
static void *ops_thread(void *arg)
{
	struct ops *op = arg;
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(op->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	struct pollfd p[2] = {{.fd = di ? di->epoll_fd : -1, .events = POLLIN},
			      {.fd = op->wake, .events = POLLIN}};

	for (;;) {
		MHD_UNSIGNED_LONG_LONG mhd_ms;
		uint64_t now = mono_ns(), next;
		long long ms = -1;
		int i;

		while ((i = ops_conn_next_expired(&op->conns, now)) >= 0)
			conn_cut(op, i);
		if ((next = ops_conn_next_deadline(&op->conns)) != UINT64_MAX)
			ms = (long long)((next - now + 999999) / 1000000);
		if (MHD_get_timeout(op->mhd, &mhd_ms) == MHD_YES &&
		    (ms < 0 || (long long)mhd_ms < ms))
			ms = (long long)mhd_ms;
		if (ms > 60000)
			ms = 60000;
		if (poll(p, 2, (int)ms) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		MHD_run(op->mhd);
	}
	return NULL;
}

/* A connection that sends nothing is not accepted (the kernel keeps it
 * until its first bytes, or for a deadline): idle connections take no
 * slot, and a health check arrives with its request, so a burst of
 * newcomers cannot push it out before it is read. Without it the slots
 * still hold, only less well: a warning. */
static void ops_defer(struct ops *op)
{
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(op->mhd, MHD_DAEMON_INFO_LISTEN_FD);
	int secs = OPS_CONN_DEADLINE_SEC;

	if (!di ||
	    setsockopt(di->listen_fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs)) < 0)
		log_warnx("ops: TCP_DEFER_ACCEPT: %s: idle connections take slots",
			  di ? strerror(errno) : "no listening socket");
}

int ops_start(struct ops **opp, const struct ops_config *cfg, struct etr_stats *st, char *err,
	      size_t errlen)
{
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	char where[ADDR_STRLEN];
	sigset_t all, old;
	struct ops *op;
	bool any = false;
	int rc, ret = -EIO;

	*opp = NULL;
	if (!addr_len(&cfg->listen)) {
		snprintf(err, errlen, "--ops-listen: not an IPv4 or IPv6 address");
		return -EINVAL;
	}
	addr_str(&cfg->listen.sa, where);
	if (!cfg->allow_public && !ops_addr_is_private(&cfg->listen)) {
		snprintf(err, errlen,
			 "--ops-listen %s is not a private address (loopback, RFC 1918, CGNAT, "
			 "ULA, link-local): bind one, or pass --ops-allow-public to serve the "
			 "ops plane on it anyway",
			 where);
		return -EINVAL;
	}
	if (!(op = calloc(1, sizeof(*op)))) {
		snprintf(err, errlen, "ops: %s", strerror(errno));
		return -ENOMEM;
	}
	op->st = st;
	op->cfg = *cfg;
	op->wake = -1;
	pthread_mutex_init(&op->lock, NULL);
	if (tokens_read(op->tok, true, err, errlen) < 0) {
		ret = -EINVAL;
		goto fail;
	}
	if ((op->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		snprintf(err, errlen, "ops: eventfd: %s", strerror(errno));
		goto fail;
	}
	if (cfg->listen.sa.sa_family == AF_INET6)
		flags |= MHD_USE_IPv6;

	/* The listener thread inherits this thread's signal mask: with all
	 * blocked, signals stay with the packet loop. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	op->starter = pthread_self();
	atomic_store(&op->starting, true);
	/* The logger goes first, or MHD prints the other options' errors to
	 * stderr itself. MHD binds SOCK_ADDR and only names the port in its
	 * messages, so it gets that too (same offset in both families).
	 * MHD's timeout counts idle time only; the slots (ops_conn.c) add the
	 * absolute deadline and the share per address. MHD's own limit leaves
	 * room for connections told to go that it has not closed yet. */
	op->mhd = MHD_start_daemon(
	    flags, ntohs(cfg->listen.in.sin_port), conn_accept, op, ops_request, op,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, op, MHD_OPTION_SOCK_ADDR, &cfg->listen.sa,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)OPS_CONN_SLOTS, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)OPS_DEADLINE_SEC, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    (size_t)OPS_MEMORY_LIMIT, MHD_OPTION_CONNECTION_MEMORY_INCREMENT, (size_t)1024,
	    MHD_OPTION_NOTIFY_CONNECTION, conn_notify, op, MHD_OPTION_NOTIFY_COMPLETED,
	    conn_completed, op, MHD_OPTION_END);
	atomic_store(&op->starting, false);
	if (op->mhd)
		ops_defer(op);
	rc = op->mhd ? pthread_create(&op->thread, NULL, ops_thread, op) : 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!op->mhd) {
		/* libmicrohttpd binds itself and tells why in its log line only. */
		snprintf(err, errlen, "--ops-listen %s: %s%s", where,
			 op->start_msg[0] ? op->start_msg : "the listener did not start",
			 strstr(op->start_msg, strerror(EACCES)) ? addr_bind_hint(EACCES) : "");
		goto fail;
	}
	if (rc != 0) {
		snprintf(err, errlen, "ops: thread: %s", strerror(rc));
		MHD_stop_daemon(op->mhd);
		goto fail;
	}
	for (unsigned k = 0; k < OPS_TOKEN_KINDS; k++)
		any |= op->tok[k].len > 0;
	if (!any) {
		union etr_sockaddr bound = cfg->listen;

		bound.in.sin_port = htons((uint16_t)ops_port(op)); /* same offset in both */
		addr_str(&bound.sa, where);
		log_warnx("ops: no token is set: whoever reaches %s can read /lifecycle and "
			  "/sessions (the game server's and players' addresses, TURN usernames) "
			  "and /metrics; set %s (or %s_FILE)",
			  where, OPS_ENV_READ, OPS_ENV_READ);
	}
	*opp = op;
	return 0;
fail:
	if (op->wake >= 0)
		close(op->wake);
	explicit_bzero(op->tok, sizeof(op->tok));
	pthread_mutex_destroy(&op->lock);
	free(op);
	return ret;
}

int ops_port(const struct ops *op)
{
	const union MHD_DaemonInfo *i = MHD_get_daemon_info(op->mhd, MHD_DAEMON_INFO_BIND_PORT);

	return i ? i->port : -1;
}

int ops_reload_tokens(struct ops *op, char *err, size_t errlen)
{
	struct secret tok[OPS_TOKEN_KINDS];
	int set = 0;

	if (tokens_read(tok, true, err, errlen) < 0)
		return -1;
	for (unsigned i = 0; i < OPS_TOKEN_KINDS; i++)
		set += tok[i].len > 0;
	pthread_mutex_lock(&op->lock);
	memcpy(op->tok, tok, sizeof(tok));
	pthread_mutex_unlock(&op->lock);
	explicit_bzero(tok, sizeof(tok));
	return set;
}

void ops_stop(struct ops *op)
{
	uint64_t one = 1;

	if (!op)
		return;
	if (write(op->wake, &one, sizeof(one)) == sizeof(one))
		pthread_join(op->thread, NULL);
	MHD_stop_daemon(op->mhd);
	close(op->wake);
	explicit_bzero(op->tok, sizeof(op->tok));
	pthread_mutex_destroy(&op->lock);
	free(op);
}
