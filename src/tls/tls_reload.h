/* SPDX-License-Identifier: ISC */
/* A certificate and key pair on disk behind a tls_server: loaded at start,
 * read again whenever the caller's timer asks, and put in force when the
 * files' content (a SHA-256 of their bytes, not their mtime) changed and
 * the new pair loads; a pair that does not load leaves the last good one. */
#ifndef ETR_TLS_RELOAD_H
#define ETR_TLS_RELOAD_H

#include <stdint.h>

#include "tls_server.h"

/* The largest certificate chain or key file read (a chain of a few
 * certificates is 10 KiB). */
#define TLS_RELOAD_FILE_MAX (1024 * 1024)

enum tls_reload_result {
	TLS_RELOAD_UNCHANGED, /* same content as last time: no work */
	TLS_RELOAD_LOADED,    /* a new pair in force for new connections */
	TLS_RELOAD_FAILED,    /* changed but does not load; tls_reload_error */
};

/* For etrelay_turn_tls_reloads_total{result}: written by the thread that
 * checks, read by the ops thread. The load at start is not counted. */
struct tls_reload_counts {
	_Atomic uint64_t loaded;
	_Atomic uint64_t failed;
};

struct tls_reload {
	struct tls_server *server;
	char *cert_path, *key_path;
	uint8_t in_force[32]; /* digest of the pair new sessions get */
	uint8_t tried[32];    /* of what the last check found */
	uint64_t loaded_at;   /* now of the load in force */
	uint64_t checked_at;  /* now of the last check */
	struct tls_reload_counts counts;
	char error[512]; /* why the last failure failed */
};

/* Load cert_path (PEM: the certificate, then its chain) and key_path (PEM,
 * unencrypted) into a new context and make it s's. Returns 0, or -errno
 * with err naming the file and OpenSSL's reason (a startup error). */
int tls_reload_init(struct tls_reload *r, struct tls_server *s, const char *cert_path,
		    const char *key_path, uint64_t now, char *err, size_t errlen);
void tls_reload_free(struct tls_reload *r);

/* Read both files again; when their content differs from the last check's,
 * build a new context and, if it loads, put it in force. Counts loaded
 * and failed; a failure names its file and reason in r->error (the
 * caller logs it). A pair that failed is not tried again until it
 * changes. */
enum tls_reload_result tls_reload_check(struct tls_reload *r, uint64_t now);

/* "loaded", "failed", "unchanged": the metric's label. */
const char *tls_reload_result_name(enum tls_reload_result res);

#endif
