/* SPDX-License-Identifier: ISC */
/* The process: its workers (one loop each, see worker.c), signals, the drain
 * on the way out, the ops plane and systemd's notify protocol. */
#include "daemon.h"

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
#include "version.h"
#include "worker.h"
#include "xdp.h"

/* How often STATUS= is refreshed when no watchdog asks for more. */
#define DAEMON_STATUS_PERIOD (5 * NS_PER_SEC)
/* While draining on the way out, how often to look for the last session. */
#define DAEMON_LEAVE_CHECK (100 * NS_PER_MS)

/* What every kind shares across the workers (struct kind's active). */
static const void *kind_shared(const struct daemon *d, unsigned k)
{
	switch (k) {
	case KIND_RELAY:
		return d->shared;
	case KIND_SNI:
		return &d->sni;
	case KIND_TURN:
		return &d->turn;
	default:
		return NULL;
	}
}

static uint32_t kind_active(const struct daemon *d, unsigned k)
{
	const struct kind *kd = kinds[k];

	return kd->active && kd->count(d->conf) ? kd->active(kind_shared(d, k), kd->count(d->conf))
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

/* A worker's relays and listeners take the current ban list (on its own
 * thread): ban-file covers every listener, and a reload closes what the
 * SNI and TURN listeners hold open for a newly banned source. */
static void daemon_take_bans(void *owner, struct worker *w)
{
	struct daemon *d = owner;

	WORKER_EACH (w, k, i)
		kinds[k]->take_bans(worker_inst(w, k, i), d->bans);
	atomic_store_explicit(&w->bans_gen, d->bans_gen, memory_order_release);
	if (w->index != 0)
		worker_post(d->workers[0], WORKER_BANS_TAKEN);
}

static int load_bans(struct daemon *d);

/* Worker 0: free the list before once no worker reads it, then do a reload
 * asked meanwhile. */
static void daemon_bans_taken(void *owner)
{
	struct daemon *d = owner;

	if (!d->bans_old)
		return;
	for (unsigned w = 0; w < d->nworkers; w++)
		if (atomic_load_explicit(&d->workers[w]->bans_gen, memory_order_acquire) !=
		    d->bans_gen)
			return;
	banlist_free(d->bans_old);
	free(d->bans_old);
	d->bans_old = NULL;
	/* A SIGHUP came while the list before was still read: its reload is
	 * done now that the last worker let go (load_bans). */
	if (d->bans_again) {
		d->bans_again = false;
		if (load_bans(d) < 0)
			log_warnx("SIGHUP: keeping the previous ban list");
		else
			log_info("ban-file %s: the reload asked while the last was being taken "
				 "in is done",
				 d->conf->ban_file);
	}
}

/* Read the ban file into a new list; the current one is replaced only
 * when the whole file is good. Returns 0 or -1 (errors logged). */
static int load_bans(struct daemon *d)
{
	struct banlist *fresh;
	char err[2048] = "";
	int rc;

	if (d->conf->ban_file[0] == '\0')
		return 0;
	/* A reload a moment after the last, before every worker took it: the
	 * list before is still read, so this one is done when the last worker
	 * posts that it took the new list (daemon_bans_taken). */
	if (d->bans_old) {
		d->bans_again = true;
		return 0;
	}
	fresh = calloc(1, sizeof(*fresh));
	if (!fresh) {
		log_warn("ban-file %s", d->conf->ban_file);
		return -1;
	}
	rc = banlist_load_file(fresh, d->conf->ban_file, err, sizeof(err));
	if (rc != 0) {
		/* err holds every bad line (or why the file could not be read),
		 * newline-separated. */
		for (char *line = strtok(err, "\n"); line; line = strtok(NULL, "\n"))
			log_warnx("%s", line);
		banlist_free(fresh);
		free(fresh);
		return -1;
	}
	d->bans_old = d->bans;
	d->bans = fresh;
	d->bans_gen++;
	log_info("ban-file %s: %zu entries", d->conf->ban_file, d->bans->entries);
	xdp_bans(d->xdp, d->bans);
	daemon_take_bans(d, d->workers[0]);
	for (unsigned w = 1; w < d->nworkers; w++)
		worker_post(d->workers[w], WORKER_BANS);
	daemon_bans_taken(d);
	return 0;
}

static void on_signal(struct daemon *d)
{
	struct signalfd_siginfo si;

	while (read(d->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			char err[256];
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
			if (load_bans(d) < 0)
				log_warnx("SIGHUP: keeping the previous ban list");
			if (d->turn.n && turn_shared_reload(&d->turn, err, sizeof(err)) < 0)
				log_warnx("SIGHUP: %s; keeping the previous TURN secrets", err);
			else if (d->turn.n)
				log_info("SIGHUP: TURN secrets reloaded");
			if (d->turn.n)
				turn_shared_reload_tls(&d->turn, loop_now());
			if (!d->ops_plane && d->conf->ban_file[0] == '\0' && !d->turn.n &&
			    !d->hup_none_said) {
				log_info("SIGHUP: nothing to reload (no ops tokens, no ban-file)");
				d->hup_none_said = true;
			}
			continue;
		}
		begin_leave(d, (int)si.ssi_signo, loop_now());
	}
}

/* How long the ops thread waits for the workers to list the sessions. */
#define DAEMON_CALL_TIMEOUT_MS 2000
/* GET /sessions renders at most this often (the loops walk every session). */
#define DAEMON_SESSIONS_EVERY_NS (200 * NS_PER_MS)

/* Ops thread: ask every worker for its sessions, wait (bounded), and join
 * their parts into one list. */
static int sessions_call(void *arg, char **buf, size_t *len)
{
	struct daemon *d = arg;
	static uint64_t gens;
	struct timespec until;
	char *out = NULL;
	size_t outlen = 0;
	uint64_t wait;
	int rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += DAEMON_CALL_TIMEOUT_MS / 1000;
	pthread_mutex_lock(&d->call.lock);
	while (d->call.busy && rc == 0) /* one request at a time */
		rc = pthread_cond_timedwait(&d->call.done_cond, &d->call.lock, &until);
	if (rc != 0) { /* another request held the workers all along */
		pthread_mutex_unlock(&d->call.lock);
		return -1;
	}
	d->call.busy = true;
	d->call.gen = ++gens;
	d->call.pending = d->nworkers;
	wait = d->call.last + DAEMON_SESSIONS_EVERY_NS > mono_ns()
		   ? d->call.last + DAEMON_SESSIONS_EVERY_NS - mono_ns()
		   : 0;
	pthread_mutex_unlock(&d->call.lock);
	/* Each render walks every session on the packet loops: however many
	 * clients ask, at most one every DAEMON_SESSIONS_EVERY_NS (the ops
	 * thread waits; the loops do not). */
	if (wait) {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)wait};

		nanosleep(&ts, NULL);
	}
	for (unsigned w = 0; w < d->nworkers; w++)
		worker_post(d->workers[w], WORKER_SESSIONS);
	pthread_mutex_lock(&d->call.lock);
	while (rc == 0 && d->call.pending > 0)
		rc = pthread_cond_timedwait(&d->call.done_cond, &d->call.lock, &until);
	if (d->call.pending == 0) {
		FILE *f = open_memstream(&out, &outlen);
		bool any = false;

		if (f) {
			fputs("{\"sessions\":[", f);
			/* Each part is "\n{...}" or "\n{...},\n{...}"... */
			for (unsigned w = 0; w < d->nworkers; w++) {
				struct worker *wk = d->workers[w];

				if (wk->call_len == 0)
					continue;
				if (any)
					fputc(',', f);
				fwrite(wk->call_buf, 1, wk->call_len, f);
				any = true;
			}
			fputs(any ? "\n],\"allocations\":[" : "],\"allocations\":[", f);
			any = false;
			for (unsigned w = 0; w < d->nworkers; w++) {
				struct worker *wk = d->workers[w];

				if (wk->call_alloc_len == 0)
					continue;
				if (any)
					fputc(',', f);
				fwrite(wk->call_alloc_buf, 1, wk->call_alloc_len, f);
				any = true;
			}
			fputs(any ? "\n]}\n" : "]}\n", f);
			if (fclose(f) != 0) {
				free(out);
				out = NULL;
			}
		}
	}
	/* Ours to clear: a late render sees another gen and does nothing. */
	for (unsigned w = 0; w < d->nworkers; w++) {
		free(d->workers[w]->call_buf);
		free(d->workers[w]->call_alloc_buf);
		d->workers[w]->call_buf = d->workers[w]->call_alloc_buf = NULL;
		d->workers[w]->call_len = d->workers[w]->call_alloc_len = 0;
	}
	d->call.gen = 0;
	d->call.busy = false;
	d->call.last = mono_ns();
	pthread_cond_broadcast(&d->call.done_cond);
	pthread_mutex_unlock(&d->call.lock);
	if (!out)
		return -1;
	*buf = out;
	*len = outlen;
	return 0;
}

/* A worker's thread: render its sessions for the request under way. */
static void daemon_render_sessions(void *owner, struct worker *w)
{
	struct daemon *d = owner;
	uint64_t gen, now = loop_now();
	bool first = true, afirst = true;
	char *buf = NULL, *abuf = NULL;
	size_t len = 0, alen = 0;
	FILE *f, *af;

	pthread_mutex_lock(&d->call.lock);
	gen = d->call.gen;
	pthread_mutex_unlock(&d->call.lock);
	if (gen == 0 || w->call_gen == gen || !(f = open_memstream(&buf, &len)))
		return;
	for (unsigned i = 0; i < w->kind[KIND_RELAY].n; i++)
		relay_sessions_json(W_RELAY(w, i), f, now, &first);
	if (fclose(f) != 0) {
		free(buf);
		buf = NULL;
		len = 0;
	}
	/* The TURN allocations (at most max-allocations per listener). A
	 * render that fails leaves this worker's part out. */
	if ((af = open_memstream(&abuf, &alen)) != NULL) {
		for (unsigned i = 0; i < w->kind[KIND_TURN].n; i++)
			turn_allocations_json(W_TURN(w, i), af, now, &afirst);
		if (fclose(af) != 0) {
			free(abuf);
			abuf = NULL;
		}
	}
	pthread_mutex_lock(&d->call.lock);
	if (d->call.gen == gen && w->call_gen != gen) {
		w->call_gen = gen;
		w->call_buf = buf;
		w->call_len = buf ? len : 0;
		w->call_alloc_buf = abuf;
		w->call_alloc_len = abuf ? alen : 0;
		buf = abuf = NULL;
		if (--d->call.pending == 0)
			pthread_cond_broadcast(&d->call.done_cond);
	}
	pthread_mutex_unlock(&d->call.lock);
	free(buf);
	free(abuf);
}

static void daemon_worker_failed(void *owner)
{
	struct daemon *d = owner;

	atomic_store(&d->failed, true);
	worker_post(d->workers[0], WORKER_STOP);
}

/* What the workers ask of the daemon, on their own threads. */
static const struct worker_host daemon_worker_host = {
    .take_bans = daemon_take_bans,
    .bans_taken = daemon_bans_taken,
    .render_sessions = daemon_render_sessions,
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

/* Every kind's listeners on every worker, in the table's order. The game
 * relays', SNI's and TURN's shared state is the daemon's (the control
 * plane, SIGHUP and the ops plane read it); a kind may keep its own. */
static int open_kinds(struct daemon *d, const union etr_sockaddr *upstreams,
		      struct sni_route *const *sni_routes)
{
	const struct etr_conf *c = d->conf;
	size_t ndials = c->nrelays;
	int rc = 0;

	for (unsigned i = 0; i < c->nsni; i++)
		ndials += c->sni[i].nroutes;
	if (ndials && !(d->dials = calloc(ndials, sizeof(*d->dials)))) {
		log_warn("upstreams");
		return EXIT_FAILURE;
	}
	ndials = 0;
	for (unsigned i = 0; i < c->nrelays; i++)
		d->dials[ndials++] = upstreams[i];
	for (unsigned i = 0; i < c->nsni; i++)
		for (unsigned j = 0; j < c->sni[i].nroutes; j++)
			d->dials[ndials++] = sni_routes[i][j].upstream;
	for (unsigned k = 0; k < KINDS && rc == 0; k++) {
		struct kind_env *e = &d->kenv[k];

		*e = (struct kind_env){.conf = c,
				       .stats = &d->stats,
				       .nworkers = d->nworkers,
				       .reuseport_key = d->reuseport_key,
				       .dials = d->dials,
				       .ndials = ndials,
				       .inst = env_inst,
				       .opened = env_opened,
				       .post = env_post,
				       .daemon = d,
				       .id = k};
		switch (k) {
		case KIND_RELAY:
			e->shared = d->shared;
			e->resolved = upstreams;
			break;
		case KIND_SNI:
			e->shared = &d->sni;
			e->resolved = sni_routes;
			break;
		case KIND_TURN:
			e->shared = &d->turn;
			break;
		default:
			break;
		}
		if (kinds[k]->count(c))
			rc = kinds[k]->open(e);
	}
	/* The relays whose shared part was set up (and is freed at close). */
	d->nrelays = d->workers[0]->kind[KIND_RELAY].n;
	return rc;
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

/* The control thread: the heartbeat's report, from the counters the ops
 * plane reads too; its health is what /readyz answers. */
static void control_report(void *arg, struct control_report *r)
{
	struct daemon *d = arg;
	struct ops_readiness rd;

	ops_readiness(&d->stats, &rd);
	r->health = rd.ready	  ? CTL_HEALTH_READY
		    : rd.draining ? CTL_HEALTH_DRAINING
				  : CTL_HEALTH_DEGRADED;
	for (unsigned i = 0; i < rd.n && r->nreasons < CTL_REASONS_MAX; i++)
		snprintf(r->reasons[r->nreasons++], sizeof(r->reasons[0]), "%s", rd.reason[i]);
	for (unsigned i = 0; i < d->nrelays && r->nlisteners < CTL_LISTENERS_MAX; i++) {
		struct ctl_listener *l = &r->listeners[r->nlisteners++];

		l->kind = CTL_LISTENER_GAME;
		snprintf(l->name, sizeof(l->name), "%s", d->conf->relays[i].name);
		l->active = stats_sessions_active(&d->stats, i);
		l->max = d->conf->relays[i].max_sessions;
	}
	for (unsigned i = 0; i < d->sni.n && r->nlisteners < CTL_LISTENERS_MAX; i++) {
		struct ctl_listener *l = &r->listeners[r->nlisteners++];
		uint32_t active, max, routes;

		sni_listener_info(&d->sni, i, &active, &max, &routes);
		l->kind = CTL_LISTENER_SNI;
		snprintf(l->name, sizeof(l->name), "%s", d->conf->sni[i].name);
		l->active = active;
		l->max = max;
	}
	for (unsigned i = 0; i < d->turn.n && r->nlisteners < CTL_LISTENERS_MAX; i++) {
		struct ctl_listener *l = &r->listeners[r->nlisteners++];

		l->kind = CTL_LISTENER_TURN;
		snprintf(l->name, sizeof(l->name), "%s", d->turn.l[i].conf->name);
		l->active = atomic_load_explicit(&d->turn.l[i].active, memory_order_relaxed);
		l->max = d->turn.l[i].conf->max_allocations;
	}
}

/* The control thread: a good heartbeat's whole route set replaces the
 * control plane's routes of every SNI listener (a bad set changes nothing). */
static int control_routes(void *arg, const struct sni_route *list, size_t n, char *err,
			  size_t errlen)
{
	struct daemon *d = arg;

	return sni_set_control_routes(&d->sni, list, n, err, errlen);
}

/* The control-plane client, when control-url is set; its thread starts
 * with control_run, once every listener is up. Returns 0 or the exit
 * status. */
static int open_control(struct daemon *d)
{
	const struct etr_conf *conf = d->conf;
	struct control_config cc = {.url = conf->control_url,
				    .bootstrap_file = conf->control_bootstrap_file,
				    .state_dir = conf->state_dir,
				    .interval_ms = conf->control_interval_ms,
				    .timeout_ms = conf->control_timeout_ms,
				    .backoff_min_ms = conf->control_backoff_min_ms,
				    .backoff_max_ms = conf->control_backoff_max_ms,
				    .max_answer = conf->control_max_answer,
				    .conf = conf,
				    .local = d->sni.local,
				    .nlocal = d->sni.nlocal,
				    .version = ETRELAY_VERSION,
				    .report = control_report,
				    .routes = control_routes,
				    .arg = d,
				    .stats = &d->control_stats};
	char err[1024];

	if (!conf->control_url[0])
		return 0;
	if (control_open(&d->control, &cc, err, sizeof(err)) < 0) {
		log_warnx("%s", err);
		return EXIT_CONFIG;
	}
	d->stats.control = &d->control_stats;
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

int daemon_open(struct daemon *d, const struct etr_conf *conf, const union etr_sockaddr *upstreams,
		struct sni_route *const *sni_routes)
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
	if ((rc = open_kinds(d, upstreams, sni_routes)) != 0)
		return rc;
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
		for (unsigned i = 0; i < d->nrelays; i++) {
			W_RELAY(d->workers[w], i)->fwd.st.known = daemon_xdp_known;
			W_RELAY(d->workers[w], i)->fwd.st.known_arg = d->xdp;
		}
	for (unsigned w = 0; d->xdp && w < d->nworkers; w++)
		for (unsigned i = 0; i < d->workers[w]->kind[KIND_TURN].n; i++) {
			W_TURN(d->workers[w], i)->t.known = daemon_xdp_known;
			W_TURN(d->workers[w], i)->t.known_arg = d->xdp;
		}
	if (load_bans(d) < 0)
		return EXIT_CONFIG;
	/* Before the loops: the route file's set is in force when the
	 * listeners attach (the workers' loops run from create_loops on). */
	if ((rc = open_control(d)) != 0)
		return rc;
	if ((rc = create_loops(d)) != 0)
		return rc;
	if (conf->ops_enabled) {
		struct ops_config oc = {.listen = conf->ops_listen,
					.allow_public = conf->ops_allow_public,
					.sessions = sessions_call,
					.sessions_arg = d};
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

static void log_start(const struct daemon *d)
{
	if (d->nworkers > 1)
		log_info("workers %u: a client's address picks its worker (reuseport key 0x%08x)",
			 d->nworkers, d->reuseport_key);
	for (unsigned i = 0; i < d->nrelays; i++) {
		const struct relay *r = W_RELAY(d->workers[0], i);
		const struct relay_conf *c = r->conf;
		char a[ADDR_STRLEN], b[ADDR_STRLEN], masters[1024], hp[ADDR_HOSTLEN + 8];
		size_t o = 0;

		masters[0] = '\0';
		for (unsigned m = 0; m < c->nmasters && o < sizeof(masters); m++)
			o += (size_t)snprintf(
			    masters + o, sizeof(masters) - o, "%s%s", m ? " " : "",
			    addr_hostport(c->masters[m].host, c->masters[m].port, hp));
		log_info(
		    "etrelay %s%s%s listening on %s, upstream %s, backend %s, game %s (%s/%s), "
		    "masters %s",
		    ETRELAY_VERSION, d->nrelays > 1 ? " relay " : "", d->nrelays > 1 ? c->name : "",
		    addr_str(&c->listen.sa, a), addr_str(&r->upstream.sa, b), d->ops->name, c->game,
		    c->heartbeat, c->flatline[0] ? c->flatline : "none", masters);
	}
	for (unsigned i = 0; i < d->conf->nrelays; i++)
		if (d->conf->relays[i].prbe)
			log_info("PRBE echo on %s (relay %s)",
				 W_RELAY(d->workers[0], i)->stats.public_addr,
				 d->conf->relays[i].name);
	for (unsigned i = 0; i < d->conf->prbe.nlisten; i++)
		log_info("PRBE echo on %s", d->stats.prbe_port[0][i]->port);
}

static void log_start_sni(const struct daemon *d)
{
	for (unsigned i = 0; i < d->conf->nsni; i++) {
		const struct sni_conf *c = &d->conf->sni[i];
		char a[ADDR_STRLEN];

		log_info("sni %s listening on %s (TCP), backend %s, %u route%s, up to %u "
			 "connections",
			 c->name, addr_str(&c->listen.sa, a), d->ops->name, c->nroutes,
			 c->nroutes == 1 ? "" : "s", c->max_connections);
	}
	for (unsigned i = 0; i < d->conf->nturn; i++) {
		const struct turn_conf *c = &d->conf->turn[i];
		char a[ADDR_STRLEN], t[ADDR_STRLEN], r[ADDR_STRLEN], s[ADDR_STRLEN];

		log_info("turn %s listening on %s (UDP)%s%s%s%s%s%s, backend %s, relaying from %s "
			 "ports %u-%u, realm %s, up to %u allocations",
			 c->name, addr_str(&c->listen.sa, a), c->tcp_set ? " and " : "",
			 c->tcp_set ? addr_str(&c->tcp_listen.sa, t) : "",
			 c->tcp_set ? " (TCP)" : "", c->tls_set ? " and " : "",
			 c->tls_set ? addr_str(&c->tls_listen.sa, s) : "",
			 c->tls_set ? " (TLS)" : "", d->ops->name, addr_str(&c->relay_addr.sa, r),
			 c->port_min, c->port_max, c->realm, c->max_allocations);
	}
}

/* "name n, ..." of the non-zero counters among n of them, after o bytes of
 * buf; returns the new length. */
static size_t stats_list(char *buf, size_t size, size_t o, const uint64_t *v, unsigned n,
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

static const char *sni_result_at(unsigned i)
{
	return sni_result_name((enum sni_result)i);
}

static const char *turn_drop_at(unsigned i)
{
	return turn_drop_name((enum turn_drop)i);
}

static const char *turn_tcp_drop_at(unsigned i)
{
	return turn_tcp_drop_name((enum turn_tcp_drop)i);
}

static const char *turn_reject_at(unsigned i)
{
	return turn_reject_name((enum turn_reject)i);
}

/* At exit, each SNI and TURN listener's line beside the relays' `stats
 * NAME`: what it served and what it refused, summed over the workers. */
static void log_listener_stats(const struct daemon *d)
{
	char why[512], drops[512];

	for (unsigned i = 0; i < d->conf->nsni; i++) {
		struct sni_totals sum;
		uint64_t refused = 0;

		sni_listener_totals(&d->sni, i, &sum);
		for (unsigned k = 0; k < SNI_RESULTS; k++)
			refused += k == SNI_SPLICED ? 0 : sum.result[k];
		why[0] = '\0';
		stats_list(why, sizeof(why), 0, sum.result, SNI_RESULTS, sni_result_at,
			   SNI_SPLICED);
		log_info(
		    "stats sni %s: connections spliced %llu, refused %llu%s; client to upstream "
		    "%llu B, upstream to client %llu B",
		    d->conf->sni[i].name, (unsigned long long)sum.result[SNI_SPLICED],
		    (unsigned long long)refused, why, (unsigned long long)sum.bytes_in,
		    (unsigned long long)sum.bytes_out);
	}
	for (unsigned i = 0; i < d->conf->nturn; i++) {
		struct turn_stats t;
		uint64_t rej[TURN_REJECTS], drop[TURN_DROPS], tdrop[TURN_TCP_DROPS];
		uint64_t rejected = 0, dropped = 0, tcp = 0;

		turn_listener_totals(&d->turn.l[i], d->nworkers, &t);
		for (unsigned k = 0; k < TURN_REJECTS; k++)
			rejected += rej[k] = STAT_GET(t.rejected[k]);
		for (unsigned k = 0; k < TURN_DROPS; k++)
			dropped += drop[k] = STAT_GET(t.dropped[k]);
		for (unsigned k = 0; k < TURN_TCP_DROPS; k++)
			tcp += tdrop[k] = STAT_GET(t.tcp_dropped[k]);
		why[0] = drops[0] = '\0';
		stats_list(why, sizeof(why), 0, rej, TURN_REJECTS, turn_reject_at, UINT32_MAX);
		{
			size_t o = stats_list(drops, sizeof(drops), 0, drop, TURN_DROPS,
					      turn_drop_at, UINT32_MAX);

			if (o < sizeof(drops))
				o += (size_t)snprintf(drops + o, sizeof(drops) - o,
						      "; TCP and TLS connections dropped %llu",
						      (unsigned long long)tcp);
			stats_list(drops, sizeof(drops), o, tdrop, TURN_TCP_DROPS, turn_tcp_drop_at,
				   UINT32_MAX);
		}
		log_info("stats turn %s: allocations %llu, rejected %llu%s; to peers %llu pkts "
			 "%llu B; to clients %llu pkts %llu B; dropped %llu%s; TLS failed %llu",
			 d->conf->turn[i].name, (unsigned long long)STAT_GET(t.allocations),
			 (unsigned long long)rejected, why,
			 (unsigned long long)STAT_GET(t.dgrams_to_peer),
			 (unsigned long long)STAT_GET(t.bytes_to_peer),
			 (unsigned long long)STAT_GET(t.dgrams_to_client),
			 (unsigned long long)STAT_GET(t.bytes_to_client),
			 (unsigned long long)dropped, drops,
			 (unsigned long long)STAT_GET(t.tls_failed));
	}
}

int daemon_run(struct daemon *d)
{
	int rc = 0;

	log_start(d);
	log_start_sni(d);
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
	for (unsigned i = 0; i < d->nrelays; i++) {
		struct relay_stats sum;

		memset(&sum, 0, sizeof(sum));
		for (unsigned w = 0; w < d->nworkers; w++)
			stats_relay_add(&sum, &W_RELAY(d->workers[w], i)->stats);
		relay_log_stats(d->conf->relays[i].name, &sum);
	}
	log_listener_stats(d);
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
	for (unsigned i = 0; i < d->nrelays; i++)
		relay_shared_free(&d->shared[i]);
	sni_shared_free(&d->sni);
	turn_shared_free(&d->turn);
	for (unsigned k = 0; k < KINDS; k++)
		if (kinds[k]->shared_free && d->kenv[k].daemon)
			kinds[k]->shared_free(&d->kenv[k]);
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
