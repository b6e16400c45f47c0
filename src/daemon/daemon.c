/* SPDX-License-Identifier: ISC */
/* The process: its workers (one loop each, see worker.c), signals, the drain
 * on the way out, the ops plane and systemd's notify protocol. */
#include "daemon_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "addrclass.h"
#include "control.h"
#include "log.h"
#include "net.h"
#include "ops.h"
#include "reuseport.h"
#include "sdnotify.h"
#include "tun_kind.h"
#include "version.h"
#include "worker.h"
#include "xdp.h"

/* How often STATUS= is refreshed when no watchdog asks for more. */
#define DAEMON_STATUS_PERIOD (5 * NS_PER_SEC)
/* While draining on the way out, how often to look for the last session. */
#define DAEMON_LEAVE_CHECK (100 * NS_PER_MS)

static uint32_t kind_active(const struct daemon *d, unsigned k)
{
	const struct kind *kd = kinds[k];

	return kd->active && kd->count(d->conf) ? kd->active(d->kenv[k].shared, kd->count(d->conf))
						: 0;
}

static uint32_t sessions_active(const struct daemon *d)
{
	uint32_t n = 0;

	for (unsigned k = 0; k < KINDS; k++)
		n += kind_active(d, k);
	return n;
}

/* What a drain waits for, each kind by its name: "3 sessions, 1 SNI
 * connection, 2 TURN allocations" (the kinds with none left out). */
static void draining_what(const struct daemon *d, char *out, size_t n)
{
	size_t o = 0;

	out[0] = '\0';
	for (unsigned k = 0; k < KINDS && o < n; k++) {
		uint32_t v = kind_active(d, k);

		if (v)
			o +=
			    (size_t)snprintf(out + o, n - o, "%s%u %s", o ? ", " : "", v,
					     v == 1 ? kinds[k]->active_one : kinds[k]->active_many);
	}
}

static void notify_status(struct daemon *d)
{
	sdnotify("STATUS=%s, %u sessions",
		 STAT_GET(d->stats.lifecycle) == LIFECYCLE_ACTIVE ? "active" : "draining",
		 sessions_active(d));
}

/* The daemon's own timer on worker 0: the next STATUS=/WATCHDOG=1, and
 * while leaving the next look for the last session. */
static void daemon_arm(struct daemon *d)
{
	uint64_t t = d->next_notify ? d->next_notify : UINT64_MAX;
	struct loop *l = d->workers[0]->loop;

	if (d->leaving && d->leave_check < t)
		t = d->leave_check;
	if (t == UINT64_MAX)
		d->ops->timer_cancel(l, &d->timer);
	else if (d->ops->timer_set(l, &d->timer, t) < 0)
		log_warnx("daemon timer: out of memory");
}

/* Worker 0's thread: every loop leaves (the others when they take the
 * request). */
static void stop_all(struct daemon *d)
{
	for (unsigned w = 1; w < d->nworkers; w++)
		worker_post(d->workers[w], WORKER_STOP);
	d->ops->stop(d->workers[0]->loop);
}

/* SIGTERM, SIGINT: stop taking sessions, leave when the last one ends or
 * the drain timeout passes; a second signal leaves at once. */
static void begin_leave(struct daemon *d, int sig, uint64_t now)
{
	uint32_t n = sessions_active(d);

	STAT_SET(d->stats.lifecycle, LIFECYCLE_STOPPING);
	if (d->leaving || n == 0 || d->conf->drain_timeout_ms == 0) {
		d->exit_signal = sig;
		stop_all(d);
		return;
	}
	d->leaving = true;
	d->exit_signal = sig;
	d->leave_deadline = now + d->conf->drain_timeout_ms * NS_PER_MS;
	d->leave_check = now + DAEMON_LEAVE_CHECK;
	sdnotify("STOPPING=1");
	notify_status(d);
	{
		char what[128];

		draining_what(d, what, sizeof(what));
		log_info("SIG%s: draining %s for up to %llu ms",
			 sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", what,
			 (unsigned long long)d->conf->drain_timeout_ms);
	}
	daemon_arm(d);
}

static void on_signal(struct daemon *d)
{
	struct signalfd_siginfo si;

	while (read(d->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			char err[256];
			bool reloads = false;
			int set =
			    d->ops_plane ? ops_reload_tokens(d->ops_plane, err, sizeof(err)) : 0;

			/* A SIGHUP loop (a reload per config-management run) must
			 * not fill the log: the "none" lines are said once until
			 * tokens are set again. */
			if (set < 0) {
				log_warnx("SIGHUP: %s; keeping the previous tokens", err);
			} else if (set > 0) {
				log_info("SIGHUP: tokens reloaded");
				d->hup_none_said = false;
			} else if (d->ops_plane && !d->hup_none_said) {
				log_info("SIGHUP: no ops tokens set");
				d->hup_none_said = true;
			}
			if (daemon_bans_load(d) < 0)
				log_warnx("SIGHUP: keeping the previous ban list");
			for (unsigned k = 0; k < KINDS; k++)
				if (kinds[k]->reload && kinds[k]->count(d->conf)) {
					kinds[k]->reload(&d->kenv[k]);
					reloads = true;
				}
			if (!d->ops_plane && d->conf->ban_file[0] == '\0' && !reloads &&
			    !d->hup_none_said) {
				log_info("SIGHUP: nothing to reload (no ops tokens, no ban-file)");
				d->hup_none_said = true;
			}
			continue;
		}
		begin_leave(d, (int)si.ssi_signo, loop_now());
	}
}

static void daemon_worker_failed(void *owner)
{
	struct daemon *d = owner;

	atomic_store(&d->failed, true);
	worker_post(d->workers[0], WORKER_STOP);
}

/* What the workers ask of the daemon, on their own threads. */
static const struct worker_host daemon_worker_host = {
    .take_bans = daemon_bans_take,
    .bans_taken = daemon_bans_taken,
    .render_sessions = daemon_sessions_render,
    .failed = daemon_worker_failed,
};

static void signal_readable(void *obj, uint32_t ref)
{
	(void)ref;
	on_signal(obj);
}

static void daemon_timer(void *obj, uint32_t ref, uint64_t now);

static const struct endpoint_ops daemon_signal_ops = {
    .name = "signal",
    .on_readable = signal_readable,
    .on_timer = daemon_timer,
};

static void daemon_timer(void *obj, uint32_t ref, uint64_t now)
{
	struct daemon *d = obj;

	(void)ref;
	if (d->next_notify && now >= d->next_notify) {
		if (d->watchdog_period)
			sdnotify("WATCHDOG=1");
		notify_status(d);
		d->next_notify =
		    now + (d->watchdog_period ? d->watchdog_period / 2 : DAEMON_STATUS_PERIOD);
	}
	if (d->leaving && (sessions_active(d) == 0 || now >= d->leave_deadline))
		stop_all(d);
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
	/* Before any thread starts: every thread inherits the mask, so the
	 * signals reach worker 0's signalfd alone. */
	sigprocmask(SIG_BLOCK, &set, NULL);
	return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

unsigned daemon_workers_wanted(const struct etr_conf *conf)
{
	cpu_set_t set;
	int n;

	if (conf->workers != CONF_WORKERS_AUTO)
		return conf->workers;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return 1;
	n = CPU_COUNT(&set);
	return n < 1 ? 1 : n > CONF_WORKERS_MAX ? CONF_WORKERS_MAX : (unsigned)n;
}

/* Whether the kernel takes the reuseport program (Linux 4.6 for UDP; some
 * seccomp policies refuse it). */
static int reuseport_probe(struct daemon *d)
{
	struct reuseport_plan p = {.workers = 2, .key = d->reuseport_key};
	struct sock_filter prog[REUSEPORT_PROG_MAX];
	int n = reuseport_build(&p, prog);

	return n < 0 ? n : net_reuseport_check(prog, (unsigned)n);
}

/* How many workers, and whether the kernel lets them share a port the way
 * we need. Returns 0 or the exit status. */
static int choose_workers(struct daemon *d)
{
	unsigned n = daemon_workers_wanted(d->conf);
	uint32_t rnd = 0;
	int err;

	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = (uint32_t)loop_now();
	d->reuseport_key = reuseport_key(rnd);
	d->nworkers = n;
	if (n < 2 || (err = reuseport_probe(d)) == 0)
		return 0;
	/* Without the program, the kernel's own hash would send one
	 * client's ports to different workers, and every per-IP rule would
	 * hold per worker: the default takes one worker, an explicit count
	 * does not start. */
	if (d->conf->workers == CONF_WORKERS_AUTO) {
		log_info("workers: the kernel refused the reuseport program (%s); one worker",
			 strerror(-err));
		d->nworkers = 1;
		return 0;
	}
	log_warnx("--workers %u: the kernel refused the reuseport program that picks a worker "
		  "by client address (%s); use --workers 1",
		  n, strerror(-err));
	return EXIT_UNAVAILABLE;
}

/* A kind's view of the workers (struct kind_env's callbacks). */
static void *env_inst(const struct kind_env *e, unsigned w, unsigned i)
{
	const struct daemon *d = e->daemon;

	return worker_inst(d->workers[w], e->id, i);
}

static void env_opened(const struct kind_env *e, unsigned w, unsigned n)
{
	struct daemon *d = e->daemon;

	d->workers[w]->kind[e->id].n = n;
}

static void env_post(const struct kind_env *e, unsigned w)
{
	const struct daemon *d = e->daemon;

	worker_post(d->workers[w], WORKER_POKE(e->id));
}

/* Every kind's listeners on every worker, in the table's order, each
 * with what the workers share (the kind's, allocated here, zeroed) and
 * what main resolved for it. */
static int open_kinds(struct daemon *d, const void *const *resolved)
{
	const struct etr_conf *c = d->conf;
	size_t ndials = 0;
	int rc = 0;

	for (unsigned k = 0; k < KINDS; k++)
		if (kinds[k]->dials && kinds[k]->count(c))
			ndials += kinds[k]->dials(c, resolved[k], NULL);
	if (ndials && !(d->dials = calloc(ndials, sizeof(*d->dials)))) {
		log_warn("upstreams");
		return EXIT_FAILURE;
	}
	ndials = 0;
	for (unsigned k = 0; k < KINDS; k++)
		if (kinds[k]->dials && kinds[k]->count(c))
			ndials += kinds[k]->dials(c, resolved[k], d->dials + ndials);
	for (unsigned k = 0; k < KINDS && rc == 0; k++) {
		struct kind_env *e = &d->kenv[k];

		*e = (struct kind_env){.conf = c,
				       .stats = &d->stats,
				       .nworkers = d->nworkers,
				       .reuseport_key = d->reuseport_key,
				       .resolved = resolved[k],
				       .dials = d->dials,
				       .ndials = ndials,
				       .inst = env_inst,
				       .opened = env_opened,
				       .post = env_post,
				       .daemon = d,
				       .id = k};
		if (kinds[k]->shared_size && !(e->shared = calloc(1, kinds[k]->shared_size))) {
			log_warn("%s", kinds[k]->name);
			return EXIT_FAILURE;
		}
		if (kinds[k]->count(c))
			rc = kinds[k]->open(e);
	}
	return rc;
}

/* A worker's SNI listener: a connection for the tunnel's name goes to the
 * same worker's tunnel instance (rung 3). */
static int daemon_tunnel_take(void *arg, unsigned worker, int fd, const union etr_sockaddr *peer,
			      const uint8_t *pre, size_t len)
{
	struct daemon *d = arg;

	return tun_kind_take(worker_inst(d->workers[worker], KIND_TUN, 0), fd, peer, pre, len) < 0
		   ? -1
		   : 0;
}

/* A worker's listeners of every kind register with its loop (on its own
 * thread). */
static int attach_listeners(struct worker *w)
{
	WORKER_EACH (w, k, i) {
		int rc = kinds[k]->attach(worker_inst(w, k, i), w->ops, w->loop, &w->ep);

		if (rc < 0) {
			log_warnx("%s: registering sockets of %s %u: %s", w->ops->name,
				  kinds[k]->name, i, strerror(-rc));
			return EXIT_FAILURE;
		}
	}
	((struct daemon *)w->owner)->stats.worker_loop[w->index] = w->ops->stats(w->loop);
	return 0;
}

/* Worker 0's loop here (it picks the backend), then each other worker's,
 * on the same backend, in its own thread. */
static int create_loops(struct daemon *d)
{
	uint64_t want = 16;
	unsigned hint;
	int rc;

	/* Each loop's fd table starts as large as the whole process may hold
	 * (it grows past the hint if need be). */
	for (unsigned k = 0; k < KINDS; k++)
		if (kinds[k]->count(d->conf))
			want += kinds[k]->fds(d->conf, d->nworkers);
	hint = want > UINT32_MAX / 2 ? UINT32_MAX / 2 : (unsigned)want;
	if ((rc = worker_create_loop(d->workers[0], NULL, hint)) != 0)
		return rc;
	d->ops = d->workers[0]->ops;
	d->stats.backend = d->ops->name;
	d->stats.loop = d->ops->stats(d->workers[0]->loop);
	rc = endpoint_add(&d->workers[0]->ep, &daemon_signal_ops, d);
	if (rc >= 0) {
		d->ep_signal = (unsigned)rc;
		d->timer.id = endpoint_id(&d->workers[0]->ep, d->ep_signal);
		rc = d->ops->watch(d->workers[0]->loop, d->sig_fd,
				   endpoint_id(&d->workers[0]->ep, d->ep_signal));
	}
	if (rc < 0) {
		log_warnx("%s: signalfd: %s", d->ops->name, strerror(-rc));
		return EXIT_FAILURE;
	}
	if ((rc = attach_listeners(d->workers[0])) != 0)
		return rc;
	d->stats.worker_loop[0] = NULL;
	for (unsigned w = 1; w < d->nworkers; w++)
		if ((rc = worker_spawn(d->workers[w], d->ops, hint, attach_listeners)) != 0)
			return rc;
	return 0;
}

/* A game session assured or a TURN allocation over UDP made, or one such
 * ended (a worker's thread): the XDP program passes its source at once
 * while it has one. */
static void daemon_xdp_known(void *arg, const union etr_sockaddr *client, bool on)
{
	if (on)
		xdp_known_add(arg, client);
	else
		xdp_known_del(arg, client);
}

int daemon_open(struct daemon *d, const struct etr_conf *conf, const void *const *resolved)
{
	pthread_condattr_t ca;
	char why[160] = "";
	int rc;

	memset(d, 0, sizeof(*d));
	timer_init(&d->timer, 0);
	d->conf = conf;
	d->sig_fd = -1;
	pthread_mutex_init(&d->call.lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->call.done_cond, &ca);
	pthread_condattr_destroy(&ca);
	d->stats.version = ETRELAY_VERSION;
	d->stats.started_unix = (uint64_t)time(NULL);
	STAT_SET(d->stats.lifecycle, LIFECYCLE_ACTIVE);
	/* Before the first listener and the first thread (the workers', the
	 * ops plane's): a SIGHUP or SIGTERM while the start goes on waits in
	 * the signalfd, read once the loops run (attack13 F4: a SIGHUP there
	 * killed the process, status 129). */
	d->sig_fd = signals_fd();
	if (d->sig_fd < 0) {
		log_warn("signalfd");
		return EXIT_FAILURE;
	}
	if ((rc = choose_workers(d)) != 0)
		return rc;
	for (unsigned w = 0; w < d->nworkers; w++)
		if (!(d->workers[w] = worker_new(d->conf, &daemon_worker_host, d, w))) {
			d->nworkers = w;
			return EXIT_FAILURE;
		}
	d->stats.nworkers = d->nworkers;
	if ((rc = open_kinds(d, resolved)) != 0)
		return rc;
	/* Rung 3: the SNI listeners hand the tunnel's name over (the name
	 * itself comes with the tunnel certificate, daemon_control.c). */
	if (kinds[KIND_TUN]->count(conf) && conf->nsni) {
		struct sni_shared *sh = d->kenv[KIND_SNI].shared;

		sh->tunnel.arg = d;
		sh->tunnel.take = daemon_tunnel_take;
	}
	d->bans = calloc(1, sizeof(*d->bans));
	if (!d->bans) {
		log_warn("ban list");
		return EXIT_FAILURE;
	}
	for (unsigned w = 0; w < d->nworkers; w++)
		WORKER_EACH (d->workers[w], k, i)
			kinds[k]->take_bans(worker_inst(d->workers[w], k, i), d->bans);
	/* Before the bans, which it takes too. */
	if (xdp_start(&d->xdp, conf, why, sizeof(why)) < 0)
		return EXIT_CONFIG;
	if (conf->xdp.n)
		snprintf(d->stats.xdp_mode, sizeof(d->stats.xdp_mode), "%s%s",
			 d->xdp ? xdp_mode(d->xdp) : "off: ", d->xdp ? "" : why);
	d->stats.xdp = d->xdp;
	d->stats.xdp_counts = xdp_counts;
	for (unsigned w = 0; d->xdp && w < d->nworkers; w++)
		for (unsigned i = 0; i < d->workers[w]->kind[KIND_RELAY].n; i++) {
			W_RELAY(d->workers[w], i)->fwd.st.known = daemon_xdp_known;
			W_RELAY(d->workers[w], i)->fwd.st.known_arg = d->xdp;
		}
	for (unsigned w = 0; d->xdp && w < d->nworkers; w++)
		for (unsigned i = 0; i < d->workers[w]->kind[KIND_TURN].n; i++) {
			struct turn_listener *t = worker_inst(d->workers[w], KIND_TURN, i);

			t->t.known = daemon_xdp_known;
			t->t.known_arg = d->xdp;
		}
	if (daemon_bans_load(d) < 0)
		return EXIT_CONFIG;
	/* Before the loops: the route file's set is in force when the
	 * listeners attach (the workers' loops run from create_loops on). */
	if ((rc = daemon_control_open(d)) != 0)
		return rc;
	if ((rc = create_loops(d)) != 0)
		return rc;
	if (conf->ops_enabled) {
		struct ops_config oc = {.listen = conf->ops_listen,
					.allow_public = conf->ops_allow_public,
					.sessions = daemon_sessions_call,
					.sessions_arg = d,
					.kinds = {KINDS, kinds, d->kenv}};
		char err[512]; /* libmicrohttpd's message and addr_bind_hint's */

		/* A port in use is the host's state, as for every other
		 * listener (exit 1); a refused address or token the file's. */
		if ((rc = ops_start(&d->ops_plane, &oc, &d->stats, err, sizeof(err))) < 0) {
			log_warnx("ops plane: %s", err);
			return rc == -EINVAL ? EXIT_CONFIG : EXIT_FAILURE;
		}
	}
	/* Last: an enrolment spends the bootstrap token, so none is sent by a
	 * start that could still fail. */
	if (d->control && (rc = control_run(d->control)) < 0) {
		log_warnx("control: thread: %s", strerror(-rc));
		return EXIT_FAILURE;
	}
	d->watchdog_period = sdnotify_watchdog_ns();
	if (getenv("NOTIFY_SOCKET"))
		d->next_notify = loop_now() + (d->watchdog_period ? d->watchdog_period / 2
								  : DAEMON_STATUS_PERIOD);
	daemon_arm(d);
	return 0;
}

/* Once the loops run: the workers, then each kind's listeners. */
static void log_start(const struct daemon *d)
{
	if (d->nworkers > 1)
		log_info("workers %u: a client's address picks its worker (reuseport key 0x%08x)",
			 d->nworkers, d->reuseport_key);
	for (unsigned k = 0; k < KINDS; k++)
		if (kinds[k]->log_start && kinds[k]->count(d->conf))
			kinds[k]->log_start(&d->kenv[k], d->ops->name);
}

int daemon_run(struct daemon *d)
{
	int rc = 0;

	log_start(d);
	sdnotify("READY=1");
	notify_status(d);
	rc = worker_run(d->workers[0]);
	/* Worker 0 left (a signal, the drain, a failure): so do the others. */
	for (unsigned w = 1; w < d->nworkers; w++)
		worker_post(d->workers[w], WORKER_STOP);
	for (unsigned w = 1; w < d->nworkers; w++) {
		worker_join(d->workers[w]);
		if (d->workers[w]->run_rc < 0)
			rc = d->workers[w]->run_rc;
	}
	if (rc < 0 || atomic_load(&d->failed))
		return EXIT_FAILURE;
	sdnotify("STOPPING=1");
	log_info("exiting on SIG%s",
		 sigabbrev_np(d->exit_signal) ? sigabbrev_np(d->exit_signal) : "?");
	/* The flatlines leave (and are counted) before the last stats. The
	 * other workers closed their sessions on their own threads. */
	worker_shutdown(d->workers[0]);
	for (unsigned k = 0; k < KINDS; k++)
		if (kinds[k]->log_stats && kinds[k]->count(d->conf))
			kinds[k]->log_stats(&d->kenv[k]);
	return 0;
}

void daemon_close(struct daemon *d)
{
	if (d->ops_plane)
		ops_stop(d->ops_plane);
	control_stop(d->control);
	if (d->nworkers && d->workers[0]->loop)
		d->ops->timer_cancel(d->workers[0]->loop, &d->timer);
	for (unsigned w = 0; w < d->nworkers; w++)
		worker_free(d->workers[w]);
	/* After the ops plane, which reads its counters, and the sessions,
	 * which leave its known map. */
	xdp_stop(d->xdp);
	for (unsigned k = 0; k < KINDS; k++) {
		/* Not reached by open_kinds, or its shared state not allocated. */
		if (!d->kenv[k].daemon || (kinds[k]->shared_size && !d->kenv[k].shared))
			continue;
		if (kinds[k]->shared_free)
			kinds[k]->shared_free(&d->kenv[k]);
		if (kinds[k]->shared_size)
			free(d->kenv[k].shared);
	}
	free(d->dials);
	if (d->bans)
		banlist_free(d->bans);
	free(d->bans);
	if (d->bans_old)
		banlist_free(d->bans_old);
	free(d->bans_old);
	if (d->sig_fd >= 0)
		close(d->sig_fd);
	pthread_cond_destroy(&d->call.done_cond);
	pthread_mutex_destroy(&d->call.lock);
}
