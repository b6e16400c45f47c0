/* SPDX-License-Identifier: ISC */
/* Secrets given to the process: bearer tokens, the TURN REST secret, the
 * control plane's tokens. Each comes from an environment variable VAR or
 * from the file VAR_FILE names (mode 600 or 640, as ssh wants its keys);
 * checked the same way wherever it is used, and wiped after use. */
#include "secret.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

/* A Bearer header carries visible ASCII only, so a token with a space or a
 * control character could never match: say so at startup instead.
 * optional: unsetting it is a way out (an ops token; not a TURN secret). */
int secret_check(const struct secret *t, const char *from, bool optional, char *err, size_t errlen)
{
	if (t->len < SECRET_MIN) {
		snprintf(err, errlen,
			 "%s: %zu bytes, at least %d are needed (for example "
			 "`openssl rand -hex 32`)%s",
			 from, t->len, SECRET_MIN, optional ? "; unset it to turn it off" : "");
		return -1;
	}
	for (size_t i = 0; i < t->len; i++)
		if (t->s[i] < 0x21 || t->s[i] > 0x7e) {
			snprintf(err, errlen,
				 "%s: byte %zu of the token is not visible ASCII; a Bearer "
				 "header cannot carry it",
				 from, i + 1);
			return -1;
		}
	return 0;
}

/* As ssh does for its keys: a token file that every user may read (or that
 * others may write) is refused, naming the fix. The file read is the one
 * checked, through a symlink too (Kubernetes mounts secrets as symlinks;
 * systemd's credentials are plain files); a symlink is named in the log. */
static int secret_file_check(int fd, const char *var, const char *path, const char *say, char *err,
			     size_t errlen)
{
	char target[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s=%s: %s", var, path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s=%s: not a regular file", var, path);
		return -1;
	}
	if (st.st_mode & (S_IROTH | S_IWOTH | S_IWGRP)) {
		snprintf(err, errlen,
			 "%s=%s: mode %04o lets %s the token; `chmod 600 %s` (or 640 to let "
			 "the file's group read it)",
			 var, path, (unsigned)(st.st_mode & 07777),
			 st.st_mode & S_IROTH	? "every user read"
			 : st.st_mode & S_IWOTH ? "every user write"
						: "its group write",
			 path);
		return -1;
	}
	if (say && (n = readlink(path, target, sizeof(target) - 1)) > 0) {
		target[n] = '\0';
		log_info("%s: %s=%s is a symlink to %s; reading the file it points to", say, var,
			 path, target);
	}
	return 0;
}

int secret_read_file(struct secret *t, const char *var, const char *path, const char *say,
		     char *err, size_t errlen)
{
	char buf[SECRET_CAP + 2];
	size_t n = 0;
	ssize_t r;
	int fd, rc = -1;

	/* O_NONBLOCK: a FIFO in its place must not hang the start. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) < 0) {
		snprintf(err, errlen, "%s=%s: %s", var, path, strerror(errno));
		return -1;
	}
	if (secret_file_check(fd, var, path, say, err, errlen) < 0)
		goto out;
	while (n < sizeof(buf) && (r = read(fd, buf + n, sizeof(buf) - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "%s=%s: %s", var, path, strerror(errno));
			goto out;
		}
		n += (size_t)r;
	}
	/* Editors and `echo` end the file with a newline; it is not part of
	 * the token. */
	if (n && buf[n - 1] == '\n')
		n--;
	if (n && buf[n - 1] == '\r')
		n--;
	if (n >= SECRET_CAP) {
		snprintf(err, errlen, "%s=%s: longer than %d bytes", var, path, SECRET_CAP - 1);
		goto out;
	}
	memcpy(t->s, buf, n);
	t->len = n;
	rc = 0;
out:
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	return rc;
}

int secret_read(struct secret *t, const char *var, const char *say, bool optional, char *err,
		size_t errlen)
{
	char file_var[64], from[320];
	const char *v, *path;

	snprintf(file_var, sizeof(file_var), "%s_FILE", var);
	v = getenv(var);
	path = getenv(file_var);
	t->len = 0;
	if (v && path) {
		snprintf(err, errlen, "%s and %s are both set: keep one", var, file_var);
		return -1;
	}
	if (v) {
		if (strlen(v) >= SECRET_CAP) {
			snprintf(err, errlen, "%s: longer than %d bytes", var, SECRET_CAP - 1);
			return -1;
		}
		t->len = strlen(v);
		memcpy(t->s, v, t->len);
		snprintf(from, sizeof(from), "%s", var);
	} else if (path) {
		if (secret_read_file(t, file_var, path, say, err, errlen) < 0)
			return -1;
		snprintf(from, sizeof(from), "%s=%s", file_var, path);
	} else {
		return 0;
	}
	return secret_check(t, from, optional, err, errlen);
}

/* The same reading and checks for another component's token (the control
 * plane's). */
static int secret_out(const struct secret *t, char *out, size_t cap, size_t *len, char *err,
		      size_t errlen)
{
	if (t->len >= cap) {
		snprintf(err, errlen, "token longer than %zu bytes", cap - 1);
		return -1;
	}
	memcpy(out, t->s, t->len);
	out[t->len] = '\0';
	*len = t->len;
	return 1;
}

int secret_from_env(const char *who, const char *var, char *out, size_t cap, size_t *len, char *err,
		    size_t errlen)
{
	struct secret t;
	int rc = secret_read(&t, var, who, false, err, errlen);

	if (rc == 0)
		rc = t.len ? secret_out(&t, out, cap, len, err, errlen) : 0;
	explicit_bzero(&t, sizeof(t));
	return rc;
}

int secret_from_file(const char *who, const char *what, const char *path, char *out, size_t cap,
		     size_t *len, char *err, size_t errlen)
{
	struct secret t;
	char from[320];
	int rc = secret_read_file(&t, what, path, who, err, errlen);

	snprintf(from, sizeof(from), "%s %s", what, path);
	if (rc == 0)
		rc = secret_check(&t, from, false, err, errlen);
	if (rc == 0)
		rc = secret_out(&t, out, cap, len, err, errlen);
	explicit_bzero(&t, sizeof(t));
	return rc;
}
