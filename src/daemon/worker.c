/* SPDX-License-Identifier: ISC */
/* A worker's loop: its events go through its own endpoint table, it runs
 * its relays' timers, and takes requests from other threads through one
 * eventfd and a word of flags. */
#include "worker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"

/* Read the eventfd before taking the flags: a post after the exchange
 * writes the eventfd again, and so wakes the loop once more. */
static void ctl_readable(void *obj, uint32_t ref)
{
	struct worker *w = obj;
	uint64_t v;
	unsigned what;

	(void)ref;
	if (read(w->ctl_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("worker %u: control eventfd", w->index);
	what = atomic_exchange_explicit(&w->ctl, 0, memory_order_acq_rel);
	WORKER_EACH (w, k, i)
		if ((what & WORKER_POKE(k)) && kinds[k]->poke)
			kinds[k]->poke(worker_inst(w, k, i));
	if (what & WORKER_BANS)
		w->host->take_bans(w->owner, w);
	if (what & WORKER_BANS_TAKEN)
		w->host->bans_taken(w->owner);
	if (what & WORKER_SESSIONS)
		w->host->render_sessions(w->owner, w);
	if (what & WORKER_STOP)
		w->ops->stop(w->loop);
}

static const struct endpoint_ops worker_ctl_ops = {
    .name = "control",
    .on_readable = ctl_readable,
};

struct worker *worker_new(const struct etr_conf *conf, const struct worker_host *host, void *owner,
			  unsigned index)
{
	size_t size = (sizeof(struct worker) + 63) / 64 * 64;
	struct worker *w = aligned_alloc(64, size);

	if (!w) {
		log_warn("worker %u", index);
		return NULL;
	}
	memset(w, 0, size);
	pthread_mutex_init(&w->boot.lock, NULL);
	pthread_cond_init(&w->boot.cond, NULL);
	w->index = index;
	w->conf = conf;
	w->host = host;
	w->owner = owner;
	w->ctl_fd = -1;
	endpoint_table_init(&w->ep);
	for (unsigned k = 0; k < KINDS; k++) {
		unsigned n = kinds[k]->count(conf);

		if (n && !(w->kind[k].inst = calloc(n, kinds[k]->size))) {
			log_warn("worker %u: %u %s instances", index, n, kinds[k]->name);
			worker_free(w);
			return NULL;
		}
	}
	w->ctl_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->ctl_fd < 0) {
		log_warn("worker %u: eventfd", index);
		worker_free(w);
		return NULL;
	}
	return w;
}

int worker_create_loop(struct worker *w, const struct loop_ops *ops, unsigned max_sockets)
{
	const struct loop_handler h = endpoint_loop_handler(&w->ep);
	const struct etr_conf *conf = w->conf;
	struct loop_conf lc = {.max_sockets = max_sockets, .gso = conf->gso};
	char why[256] = "";
	int rc, slot;

	if (ops) {
		w->ops = ops;
		rc = ops->create(&w->loop, &h, &lc, why, sizeof(why));
		if (rc < 0) {
			log_warnx("worker %u: %s: %s", w->index, ops->name, why);
			return EXIT_FAILURE;
		}
	} else {
		w->ops = conf->backend == CONF_BACKEND_EPOLL ? &loop_epoll_ops : &loop_uring_ops;
		rc = w->ops->create(&w->loop, &h, &lc, why, sizeof(why));
		if (rc < 0 && conf->backend == CONF_BACKEND_URING) {
			log_warnx("io_uring unavailable: %s", why);
			return EXIT_UNAVAILABLE;
		}
		if (rc < 0 && conf->backend == CONF_BACKEND_AUTO) {
			log_info("io_uring unavailable: %s; falling back to epoll", why);
			w->ops = &loop_epoll_ops;
			rc = w->ops->create(&w->loop, &h, &lc, why, sizeof(why));
		}
		if (rc < 0) {
			log_warnx("%s", why);
			return EXIT_FAILURE;
		}
	}
	slot = endpoint_add(&w->ep, &worker_ctl_ops, w);
	rc = slot < 0 ? slot
		      : w->ops->watch(w->loop, w->ctl_fd, endpoint_id(&w->ep, (unsigned)slot));
	if (rc < 0) {
		log_warnx("worker %u: control eventfd: %s", w->index, strerror(-rc));
		return EXIT_FAILURE;
	}
	return 0;
}

void worker_post(struct worker *w, unsigned what)
{
	uint64_t one = 1;

	if ((atomic_fetch_or_explicit(&w->ctl, what, memory_order_acq_rel) & what) == what)
		return; /* asked already, not yet taken: the eventfd is written */
	if (write(w->ctl_fd, &one, sizeof(one)) < 0)
		log_warn("worker %u: control eventfd", w->index);
}

int worker_run(struct worker *w)
{
	int rc = w->ops->run(w->loop);

	if (rc < 0)
		log_warnx("worker %u: %s loop: %s", w->index, w->ops->name, strerror(-rc));
	return rc;
}

void worker_shutdown(struct worker *w)
{
	WORKER_EACH (w, k, i)
		if (kinds[k]->shutdown)
			kinds[k]->shutdown(worker_inst(w, k, i));
	w->ops->flush(w->loop);
}

static void boot_done(struct worker *w, int rc)
{
	pthread_mutex_lock(&w->boot.lock);
	w->boot.rc = rc;
	w->boot.done = true;
	pthread_cond_broadcast(&w->boot.cond);
	pthread_mutex_unlock(&w->boot.lock);
}

static void *thread_main(void *arg)
{
	struct worker *w = arg;
	int rc = worker_create_loop(w, w->boot.ops, w->boot.max_sockets);

	if (rc == 0 && w->boot.attach)
		rc = w->boot.attach(w);
	boot_done(w, rc);
	if (rc != 0)
		return NULL;
	w->run_rc = worker_run(w);
	/* A worker that failed takes the process down with it. */
	if (w->run_rc < 0)
		w->host->failed(w->owner);
	else
		worker_shutdown(w);
	return NULL;
}

int worker_spawn(struct worker *w, const struct loop_ops *ops, unsigned max_sockets,
		 int (*attach)(struct worker *w))
{
	int rc;

	w->boot.ops = ops;
	w->boot.max_sockets = max_sockets;
	w->boot.attach = attach;
	rc = pthread_create(&w->thread, NULL, thread_main, w);
	if (rc != 0) {
		log_warnx("worker %u: thread: %s", w->index, strerror(rc));
		return EXIT_FAILURE;
	}
	w->thread_started = true;
	pthread_mutex_lock(&w->boot.lock);
	while (!w->boot.done)
		pthread_cond_wait(&w->boot.cond, &w->boot.lock);
	rc = w->boot.rc;
	pthread_mutex_unlock(&w->boot.lock);
	if (rc != 0)
		worker_join(w);
	return rc;
}

void worker_join(struct worker *w)
{
	if (w->thread_started)
		pthread_join(w->thread, NULL);
	w->thread_started = false;
}

void worker_call_clear(struct worker *w)
{
	for (unsigned k = 0; k < KINDS; k++) {
		free(w->call_buf[k]);
		w->call_buf[k] = NULL;
		w->call_len[k] = 0;
	}
}

void worker_free(struct worker *w)
{
	if (!w)
		return;
	if (w->thread_started) {
		worker_post(w, WORKER_STOP);
		worker_join(w);
	}
	if (w->loop)
		w->ops->destroy(w->loop);
	WORKER_EACH (w, k, i)
		kinds[k]->close(worker_inst(w, k, i));
	for (unsigned k = 0; k < KINDS; k++)
		free(w->kind[k].inst);
	if (w->ctl_fd >= 0)
		close(w->ctl_fd);
	worker_call_clear(w);
	pthread_cond_destroy(&w->boot.cond);
	pthread_mutex_destroy(&w->boot.lock);
	free(w);
}
