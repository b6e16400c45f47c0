/* SPDX-License-Identifier: ISC */
/* Routes loop events through the endpoint table, and owns what belongs to
 * the whole process: signals, the drain on the way out, the ops
 * plane and systemd's notify protocol. */
#include "daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "ops.h"
#include "sdnotify.h"
#include "version.h"

/* How often STATUS= is refreshed when no watchdog asks for more. */
#define DAEMON_STATUS_PERIOD (5 * NS_PER_SEC)
/* While draining on the way out, how often to look for the last session. */
#define DAEMON_LEAVE_CHECK (100 * NS_PER_MS)

static uint32_t sessions_active(const struct daemon *d)
{
	uint32_t n = 0;

	for (unsigned i = 0; i < d->nrelays; i++)
		n += d->relays[i].fwd.st.active;
	return n;
}

/* The daemon's own timer: the next STATUS=/WATCHDOG=1, and while leaving
 * the next look for the last session. */
static void daemon_arm(struct daemon *d)
{
	uint64_t t = d->next_notify ? d->next_notify : UINT64_MAX;

	if (d->leaving && d->leave_check < t)
		t = d->leave_check;
	if (t == UINT64_MAX)
		d->ops->timer_cancel(d->loop, &d->timer);
	else if (d->ops->timer_set(d->loop, &d->timer, t) < 0)
		log_warnx("daemon timer: out of memory");
}

static void notify_status(struct daemon *d)
{
	sdnotify("STATUS=%s, %u sessions",
		 STAT_GET(d->stats.lifecycle) == LIFECYCLE_ACTIVE ? "active" : "draining",
		 sessions_active(d));
}

/* SIGTERM, SIGINT: stop taking sessions, leave when the last one ends or
 * the drain timeout passes; a second signal leaves at once. */
static void begin_leave(struct daemon *d, int sig, uint64_t now)
{
	uint32_t n = sessions_active(d);

	STAT_SET(d->stats.lifecycle, LIFECYCLE_STOPPING);
	if (d->leaving || n == 0 || d->conf->drain_timeout_ms == 0) {
		d->exit_signal = sig;
		d->ops->stop(d->loop);
		return;
	}
	d->leaving = true;
	d->exit_signal = sig;
	d->leave_deadline = now + d->conf->drain_timeout_ms * NS_PER_MS;
	d->leave_check = now + DAEMON_LEAVE_CHECK;
	daemon_arm(d);
	sdnotify("STOPPING=1");
	notify_status(d);
	log_info("SIG%s: draining %u sessions for up to %llu ms",
		 sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", n,
		 (unsigned long long)d->conf->drain_timeout_ms);
}

/* Read the ban file into a new list; the current one is replaced only
 * when the whole file is good. Returns 0 or -1 (errors logged). */
static int load_bans(struct daemon *d)
{
	struct banlist fresh = { 0 };
	char err[2048] = "";

	if (d->conf->ban_file[0] == '\0')
		return 0;
	if (banlist_load_file(&fresh, d->conf->ban_file, err, sizeof(err)) != 0) {
		/* err holds every bad line (or why the file could not be read),
		 * newline-separated. */
		for (char *line = strtok(err, "\n"); line; line = strtok(NULL, "\n"))
			log_warnx("%s", line);
		banlist_free(&fresh);
		return -1;
	}
	banlist_free(&d->bans);
	d->bans = fresh;
	for (unsigned i = 0; i < d->nrelays; i++)
		relay_set_bans(&d->relays[i], &d->bans);
	log_info("ban-file %s: %zu entries", d->conf->ban_file, d->bans.entries);
	return 0;
}

static void on_signal(struct daemon *d)
{
	struct signalfd_siginfo si;

	while (read(d->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			char err[256];

			if (d->ops_plane && ops_reload_tokens(d->ops_plane, err, sizeof(err)) < 0)
				log_warnx("SIGHUP: %s; keeping the previous tokens", err);
			else if (d->ops_plane)
				log_info("SIGHUP: tokens reloaded");
			if (load_bans(d) < 0)
				log_warnx("SIGHUP: keeping the previous ban list");
			if (!d->ops_plane && d->conf->ban_file[0] == '\0')
				log_info("SIGHUP: nothing to reload (no ops tokens, no ban-file)");
			continue;
		}
		begin_leave(d, (int)si.ssi_signo, loop_now());
	}
}

/* How long the ops thread waits for the loop to list the sessions. */
#define DAEMON_CALL_TIMEOUT_MS 2000

/* Ops thread: ask the loop for the session list and wait, bounded. */
static int sessions_call(void *arg, char **buf, size_t *len)
{
	struct daemon *d = arg;
	struct timespec until;
	uint64_t one = 1;
	int rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += DAEMON_CALL_TIMEOUT_MS / 1000;
	pthread_mutex_lock(&d->call.lock);
	while (d->call.pending && rc == 0) /* one request at a time */
		rc = pthread_cond_timedwait(&d->call.done_cond, &d->call.lock, &until);
	if (rc == 0) {
		d->call.pending = true;
		d->call.done = false;
		if (write(d->call.efd, &one, sizeof(one)) < 0)
			rc = -1;
	}
	if (rc != 0) { /* another request held the loop all along */
		pthread_mutex_unlock(&d->call.lock);
		return -1;
	}
	while (rc == 0 && !d->call.done)
		rc = pthread_cond_timedwait(&d->call.done_cond, &d->call.lock, &until);
	if (d->call.done && d->call.buf) {
		*buf = d->call.buf;
		*len = d->call.len;
		rc = 0;
	} else {
		rc = -1;
	}
	/* Ours to clear: a late render sees pending false and does nothing. */
	d->call.buf = NULL;
	d->call.pending = d->call.done = false;
	pthread_cond_broadcast(&d->call.done_cond);
	pthread_mutex_unlock(&d->call.lock);
	return rc;
}

/* Loop thread: render the list asked for, if the asker still waits. */
static void sessions_render(struct daemon *d)
{
	uint64_t v, now = loop_now();
	bool first = true;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (read(d->call.efd, &v, sizeof(v)) < 0)
		return;
	pthread_mutex_lock(&d->call.lock);
	if (d->call.pending && !d->call.done && (f = open_memstream(&buf, &len))) {
		fputs("{\"sessions\":[", f);
		for (unsigned i = 0; i < d->nrelays; i++)
			relay_sessions_json(&d->relays[i], f, now, &first);
		fputs(first ? "]}\n" : "\n]}\n", f);
		if (fclose(f) == 0) {
			d->call.buf = buf;
			d->call.len = len;
		} else {
			free(buf);
		}
		d->call.done = true;
		pthread_cond_broadcast(&d->call.done_cond);
	}
	pthread_mutex_unlock(&d->call.lock);
}

static void signal_readable(void *obj, uint32_t ref)
{
	(void)ref;
	on_signal(obj);
}

static void call_readable(void *obj, uint32_t ref)
{
	(void)ref;
	sessions_render(obj);
}

static void daemon_timer(void *obj, uint32_t ref, uint64_t now);

static const struct endpoint_ops daemon_signal_ops = {
	.name = "signal",
	.on_readable = signal_readable,
	.on_timer = daemon_timer,
};

static const struct endpoint_ops daemon_call_ops = {
	.name = "call",
	.on_readable = call_readable,
};

/* Loop events: through the endpoint table, to whoever registered the id. */
static void h_dgram(void *arg, uint32_t id, struct loop_dgram *dg)
{
	endpoint_dgram(&((struct daemon *)arg)->ep, id, dg);
}

static void h_recv_error(void *arg, uint32_t id, int err)
{
	endpoint_recv_error(&((struct daemon *)arg)->ep, id, err);
}

static void h_sent(void *arg, uint32_t id, int res)
{
	endpoint_sent(&((struct daemon *)arg)->ep, id, res);
}

static void h_readable(void *arg, uint32_t id)
{
	endpoint_readable(&((struct daemon *)arg)->ep, id);
}

static void h_timer(void *arg, uint32_t id, uint64_t now)
{
	endpoint_timer(&((struct daemon *)arg)->ep, id, now);
}

static void daemon_timer(void *obj, uint32_t ref, uint64_t now)
{
	struct daemon *d = obj;

	(void)ref;
	if (d->next_notify && now >= d->next_notify) {
		if (d->watchdog_period)
			sdnotify("WATCHDOG=1");
		notify_status(d);
		d->next_notify = now + (d->watchdog_period ? d->watchdog_period / 2
							   : DAEMON_STATUS_PERIOD);
	}
	if (d->leaving && (sessions_active(d) == 0 || now >= d->leave_deadline))
		d->ops->stop(d->loop);
	/* While leaving, look again each 100 ms for the last session to go. */
	if (d->leaving && now >= d->leave_check)
		d->leave_check = now + DAEMON_LEAVE_CHECK;
	daemon_arm(d);
}

static int signals_fd(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

static int create_loop(struct daemon *d)
{
	const struct loop_handler h = {
		.arg = d,
		.on_dgram = h_dgram,
		.on_recv_error = h_recv_error,
		.on_sent = h_sent,
		.on_readable = h_readable,
		.on_timer = h_timer,
	};
	struct loop_conf lc = { .max_sockets = 16, .gso = d->conf->gso };
	char why[256] = "";
	int rc;

	for (unsigned i = 0; i < d->conf->nrelays; i++)
		lc.max_sockets += d->conf->relays[i].max_sessions + 4;
	d->ops = d->conf->backend == CONF_BACKEND_EPOLL ? &loop_epoll_ops : &loop_uring_ops;
	rc = d->ops->create(&d->loop, &h, &lc, why, sizeof(why));
	if (rc < 0 && d->conf->backend == CONF_BACKEND_URING) {
		log_warnx("io_uring unavailable: %s", why);
		return EXIT_UNAVAILABLE;
	}
	if (rc < 0 && d->conf->backend == CONF_BACKEND_AUTO) {
		log_info("io_uring unavailable: %s; falling back to epoll", why);
		d->ops = &loop_epoll_ops;
		rc = d->ops->create(&d->loop, &h, &lc, why, sizeof(why));
	}
	if (rc < 0) {
		log_warnx("%s", why);
		return EXIT_FAILURE;
	}
	return 0;
}

int daemon_open(struct daemon *d, const struct etr_conf *conf,
		const union etr_sockaddr *upstreams)
{
	int rc;

	pthread_condattr_t ca;

	memset(d, 0, sizeof(*d));
	timer_init(&d->timer, 0);
	endpoint_table_init(&d->ep);
	d->conf = conf;
	d->sig_fd = -1;
	pthread_mutex_init(&d->call.lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->call.done_cond, &ca);
	pthread_condattr_destroy(&ca);
	d->call.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->call.efd < 0) {
		log_warn("eventfd");
		return EXIT_FAILURE;
	}
	d->stats.version = ETRELAY_VERSION;
	d->stats.started_unix = (uint64_t)time(NULL);
	STAT_SET(d->stats.lifecycle, LIFECYCLE_ACTIVE);

	for (unsigned i = 0; i < conf->nrelays; i++) {
		if (relay_open(&d->relays[i], i, &conf->relays[i], &upstreams[i], &d->stats) < 0) {
			d->nrelays = i + 1;
			return EXIT_FAILURE;
		}
		d->nrelays = i + 1;
		d->stats.relay[i] = &d->relays[i].stats;
	}
	d->stats.nrelays = d->nrelays;
	if (load_bans(d) < 0)
		return EXIT_CONFIG;
	if ((rc = create_loop(d)) != 0)
		return rc;
	d->stats.backend = d->ops->name;
	d->stats.loop = d->ops->stats(d->loop);
	d->sig_fd = signals_fd();
	if (d->sig_fd < 0) {
		log_warn("signalfd");
		return EXIT_FAILURE;
	}
	rc = endpoint_add(&d->ep, &daemon_signal_ops, d);
	if (rc >= 0) {
		d->timer.id = endpoint_id(&d->ep, (unsigned)rc);
		rc = d->ops->watch(d->loop, d->sig_fd, endpoint_id(&d->ep, (unsigned)rc));
	}
	if (rc == 0)
		rc = endpoint_add(&d->ep, &daemon_call_ops, d);
	if (rc >= 0)
		rc = d->ops->watch(d->loop, d->call.efd, endpoint_id(&d->ep, (unsigned)rc));
	for (unsigned i = 0; i < d->nrelays && rc == 0; i++)
		rc = relay_attach(&d->relays[i], d->ops, d->loop, &d->ep);
	if (rc < 0) {
		log_warnx("%s: registering sockets: %s", d->ops->name, strerror(-rc));
		return EXIT_FAILURE;
	}
	if (conf->ops_enabled) {
		struct ops_config oc = { .listen = conf->ops_listen,
					 .allow_public = conf->ops_allow_public,
					 .sessions = sessions_call,
					 .sessions_arg = d };
		char err[256];

		if (ops_start(&d->ops_plane, &oc, &d->stats, err, sizeof(err)) < 0) {
			log_warnx("ops plane: %s", err);
			return EXIT_CONFIG;
		}
	}
	d->watchdog_period = sdnotify_watchdog_ns();
	if (getenv("NOTIFY_SOCKET"))
		d->next_notify = loop_now() + (d->watchdog_period ? d->watchdog_period / 2
								  : DAEMON_STATUS_PERIOD);
	daemon_arm(d);
	return 0;
}

static void log_start(const struct daemon *d)
{
	for (unsigned i = 0; i < d->nrelays; i++) {
		const struct relay_conf *c = d->relays[i].conf;
		char a[ADDR_STRLEN], b[ADDR_STRLEN], masters[1024], hp[ADDR_HOSTLEN + 8];
		size_t o = 0;

		masters[0] = '\0';
		for (unsigned m = 0; m < c->nmasters && o < sizeof(masters); m++)
			o += (size_t)snprintf(masters + o, sizeof(masters) - o, "%s%s", m ? " " : "",
					      addr_hostport(c->masters[m].host, c->masters[m].port, hp));
		log_info("etrelay %s%s%s listening on %s, upstream %s, backend %s, game %s (%s/%s), "
			 "masters %s",
			 ETRELAY_VERSION, d->nrelays > 1 ? " relay " : "",
			 d->nrelays > 1 ? c->name : "", addr_str(&c->listen.sa, a),
			 addr_str(&d->relays[i].upstream.sa, b), d->ops->name, c->game, c->heartbeat,
			 c->flatline[0] ? c->flatline : "none", masters);
	}
}

int daemon_run(struct daemon *d)
{
	int rc;

	log_start(d);
	sdnotify("READY=1");
	notify_status(d);
	rc = d->ops->run(d->loop);
	if (rc < 0) {
		log_warnx("%s loop: %s", d->ops->name, strerror(-rc));
		return EXIT_FAILURE;
	}
	sdnotify("STOPPING=1");
	log_info("exiting on SIG%s", sigabbrev_np(d->exit_signal) ? sigabbrev_np(d->exit_signal)
								   : "?");
	for (unsigned i = 0; i < d->nrelays; i++)
		relay_shutdown(&d->relays[i]);
	/* The flatlines leave (and are counted) before the last stats. */
	d->ops->flush(d->loop);
	for (unsigned i = 0; i < d->nrelays; i++)
		relay_log_stats(&d->relays[i]);
	return 0;
}

void daemon_close(struct daemon *d)
{
	if (d->ops_plane)
		ops_stop(d->ops_plane);
	if (d->loop) {
		d->ops->timer_cancel(d->loop, &d->timer);
		d->ops->destroy(d->loop);
	}
	for (unsigned i = 0; i < d->nrelays; i++)
		relay_close(&d->relays[i]);
	banlist_free(&d->bans);
	if (d->sig_fd >= 0)
		close(d->sig_fd);
	if (d->call.efd >= 0)
		close(d->call.efd);
	free(d->call.buf);
	pthread_cond_destroy(&d->call.done_cond);
	pthread_mutex_destroy(&d->call.lock);
}
