/* SPDX-License-Identifier: ISC */
/* What the daemon's files share with each other (daemon.h is what main
 * sees): the ban list, GET /sessions and the control plane's hookup. */
#ifndef ETR_DAEMON_INT_H
#define ETR_DAEMON_INT_H

#include "daemon.h"
#include "worker.h"

/* A worker's listeners take the current ban list (its own thread). */
void daemon_bans_take(void *owner, struct worker *w);
/* Worker 0: free the list before once no worker reads it. */
void daemon_bans_taken(void *owner);
/* Read the ban file into a new list; the current one is replaced only
 * when the whole file is good. Returns 0 or -1 (errors logged). */
int daemon_bans_load(struct daemon *d);

/* The ops thread (struct ops_config's sessions): every worker's part of
 * GET /sessions, joined. Returns 0 or -1. */
int daemon_sessions_call(void *arg, char **buf, size_t *len);
/* A worker's thread: render its part for the request under way. */
void daemon_sessions_render(void *owner, struct worker *w);

/* The control-plane client, when control-url is set; its thread starts
 * with control_run, once every listener is up. Returns 0 or the exit
 * status. */
int daemon_control_open(struct daemon *d);

#endif
