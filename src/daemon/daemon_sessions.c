/* SPDX-License-Identifier: ISC */
/* GET /sessions: the ops thread asks every worker, each renders what its
 * instances hold (struct kind's sessions), and the parts join into one
 * document with an array per kind that lists any. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "daemon_int.h"

/* How long the ops thread waits for the workers to list the sessions. */
#define DAEMON_CALL_TIMEOUT_MS 2000
/* GET /sessions renders at most this often (the loops walk every session). */
#define DAEMON_SESSIONS_EVERY_NS (200 * NS_PER_MS)

/* {"sessions":[...],"allocations":[...]}: each kind's array, in the
 * table's order, every worker's part of it. */
static void join(const struct daemon *d, FILE *f)
{
	bool key = false;

	fputc('{', f);
	for (unsigned k = 0; k < KINDS; k++) {
		bool any = false;

		if (!kinds[k]->sessions)
			continue;
		fprintf(f, "%s\"%s\":[", key ? "," : "", kinds[k]->sessions_key);
		key = true;
		/* Each part is "\n{...}" or "\n{...},\n{...}"... */
		for (unsigned w = 0; w < d->nworkers; w++) {
			const struct worker *wk = d->workers[w];

			if (wk->call_len[k] == 0)
				continue;
			if (any)
				fputc(',', f);
			fwrite(wk->call_buf[k], 1, wk->call_len[k], f);
			any = true;
		}
		fputs(any ? "\n]" : "]", f);
	}
	fputs("}\n", f);
}

int daemon_sessions_call(void *arg, char **buf, size_t *len)
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

		if (f) {
			join(d, f);
			if (fclose(f) != 0) {
				free(out);
				out = NULL;
			}
		}
	}
	/* Ours to clear: a late render sees another gen and does nothing. */
	for (unsigned w = 0; w < d->nworkers; w++)
		worker_call_clear(d->workers[w]);
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

void daemon_sessions_render(void *owner, struct worker *w)
{
	struct daemon *d = owner;
	uint64_t gen, now = loop_now();
	char *buf[KINDS] = {NULL};
	size_t len[KINDS] = {0};

	pthread_mutex_lock(&d->call.lock);
	gen = d->call.gen;
	pthread_mutex_unlock(&d->call.lock);
	if (gen == 0 || w->call_gen == gen)
		return;
	/* A render that fails leaves this worker's part of that kind out. */
	for (unsigned k = 0; k < KINDS; k++) {
		bool first = true;
		FILE *f;

		if (!kinds[k]->sessions || !(f = open_memstream(&buf[k], &len[k])))
			continue;
		for (unsigned i = 0; i < w->kind[k].n; i++)
			kinds[k]->sessions(worker_inst(w, k, i), f, now, &first);
		if (fclose(f) != 0) {
			free(buf[k]);
			buf[k] = NULL;
			len[k] = 0;
		}
	}
	pthread_mutex_lock(&d->call.lock);
	if (d->call.gen == gen && w->call_gen != gen) {
		w->call_gen = gen;
		for (unsigned k = 0; k < KINDS; k++) {
			w->call_buf[k] = buf[k];
			w->call_len[k] = buf[k] ? len[k] : 0;
			buf[k] = NULL;
		}
		if (--d->call.pending == 0)
			pthread_cond_broadcast(&d->call.done_cond);
	}
	pthread_mutex_unlock(&d->call.lock);
	for (unsigned k = 0; k < KINDS; k++)
		free(buf[k]);
}
