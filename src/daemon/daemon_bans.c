/* SPDX-License-Identifier: ISC */
/* The ban file: read at start and on SIGHUP, taken by every worker's
 * listeners on their own threads, the list before freed once none reads
 * it. */
#include <stdlib.h>
#include <string.h>

#include "daemon_int.h"
#include "log.h"
#include "xdp.h"

/* A worker's relays and listeners take the current ban list (on its own
 * thread): ban-file covers every listener, and a reload closes what the
 * SNI and TURN listeners hold open for a newly banned source. */
void daemon_bans_take(void *owner, struct worker *w)
{
	struct daemon *d = owner;

	WORKER_EACH (w, k, i)
		kinds[k]->take_bans(worker_inst(w, k, i), d->bans);
	atomic_store_explicit(&w->bans_gen, d->bans_gen, memory_order_release);
	if (w->index != 0)
		worker_post(d->workers[0], WORKER_BANS_TAKEN);
}

/* Worker 0: free the list before once no worker reads it, then do a reload
 * asked meanwhile. */
void daemon_bans_taken(void *owner)
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
	 * done now that the last worker let go (daemon_bans_load). */
	if (d->bans_again) {
		d->bans_again = false;
		if (daemon_bans_load(d) < 0)
			log_warnx("SIGHUP: keeping the previous ban list");
		else
			log_info("ban-file %s: the reload asked while the last was being taken "
				 "in is done",
				 d->conf->ban_file);
	}
}

int daemon_bans_load(struct daemon *d)
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
	daemon_bans_take(d, d->workers[0]);
	for (unsigned w = 1; w < d->nworkers; w++)
		worker_post(d->workers[w], WORKER_BANS);
	daemon_bans_taken(d);
	return 0;
}
