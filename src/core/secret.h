/* SPDX-License-Identifier: ISC */
/* Secrets given to the process (bearer tokens, shared secrets): read from
 * VAR or the file VAR_FILE names, checked, never put into a message. */
#ifndef ETR_SECRET_H
#define ETR_SECRET_H

#include <stdbool.h>
#include <stddef.h>

#define SECRET_CAP 1024 /* bytes a secret may take, with its NUL */
#define SECRET_MIN 32	/* bytes a secret needs at least */

struct secret {
	size_t len; /* 0: not configured */
	char s[SECRET_CAP];
};

/* At least SECRET_MIN visible ASCII bytes (a Bearer header carries no
 * other). from names it in err; optional adds "unset it to turn it off". */
int secret_check(const struct secret *t, const char *from, bool optional, char *err, size_t errlen);

/* The file path (named var in messages): a regular file no other user may
 * read and no one else may write; one trailing newline is not part of it.
 * say: who logs that path is a symlink (NULL: quiet). */
int secret_read_file(struct secret *t, const char *var, const char *path, const char *say,
		     char *err, size_t errlen);

/* From var or var_FILE (both set is an error), checked; t->len 0 when
 * neither is set. */
int secret_read(struct secret *t, const char *var, const char *say, bool optional, char *err,
		size_t errlen);

/* A secret for a component (who: its log prefix): from var or var_FILE.
 * Returns 1 with it in out (NUL-terminated, *len bytes), 0 when neither is
 * set, -1 with a message in err (never the secret). */
int secret_from_env(const char *who, const char *var, char *out, size_t cap, size_t *len, char *err,
		    size_t errlen);

/* The same for a file named by the configuration; what names it in
 * messages ("control-bootstrap-token-file"). Returns 1 or -1. */
int secret_from_file(const char *who, const char *what, const char *path, char *out, size_t cap,
		     size_t *len, char *err, size_t errlen);

#endif
