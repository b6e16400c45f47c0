/* SPDX-License-Identifier: ISC */
/* The control-plane client's state directory and its files (the
 * credential, the route file): opened and checked so that no one but
 * etrelay's user can plant what the relay then trusts, and written whole
 * or not at all. */
#include "control_state.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "uid N (name)" for the messages. */
static void uid_name(uid_t uid, char *out, size_t outlen)
{
	struct passwd pw, *res = NULL;
	char buf[1024];

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res)
		snprintf(out, outlen, "uid %u (%s)", (unsigned)uid, res->pw_name);
	else
		snprintf(out, outlen, "uid %u", (unsigned)uid);
}

/* The name chown(1) takes for uid. */
static void uid_chown(uid_t uid, char *out, size_t outlen)
{
	struct passwd pw, *res = NULL;
	char buf[1024];

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res)
		snprintf(out, outlen, "%s", res->pw_name);
	else
		snprintf(out, outlen, "%u", (unsigned)uid);
}

/* Whoever owns the directory or the file, or may write either, can put a
 * credential of their choosing there and so point the relay at routes of
 * their choosing: both must belong to the user etrelay runs as. */
static int owner_check(const char *what, const char *path, const char *planted,
		       const struct stat *st, char *err, size_t errlen)
{
	char found[300], self[300], name[256];
	uid_t me = geteuid();

	if (st->st_uid == me)
		return 0;
	uid_name(st->st_uid, found, sizeof(found));
	uid_name(me, self, sizeof(self));
	uid_chown(me, name, sizeof(name));
	snprintf(err, errlen,
		 "%s %s: owned by %s, but etrelay runs as %s: its owner could plant %s; "
		 "check its content, then `chown %s %s`",
		 what, path, found, self, planted, name, path);
	return -1;
}

int ctl_state_dir_open(const char *dir, int *dfd, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	*dfd = -1;
	if (lstat(dir, &st) < 0 && errno == ENOENT && mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "state-directory %s: %s (create it, mode 700)", dir,
			 strerror(errno));
		return -1;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR) && lstat(dir, &st) == 0 &&
	    S_ISLNK(st.st_mode)) {
		if (st.st_uid != 0 && st.st_uid != geteuid()) {
			char found[300];

			uid_name(st.st_uid, found, sizeof(found));
			snprintf(err, errlen,
				 "state-directory %s: a symbolic link owned by %s, neither root "
				 "nor the user etrelay runs as; make it a directory of its own",
				 dir, found);
			return -1;
		}
		fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (fd < 0) {
		snprintf(err, errlen, "state-directory %s: %s", dir,
			 errno == ENOTDIR ? "not a directory" : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "state-directory %s: %s", dir, strerror(errno));
		goto fail;
	}
	if (owner_check("state-directory", dir, "the control-plane credential", &st, err, errlen) <
	    0)
		goto fail;
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen,
			 "state-directory %s: mode %04o lets %s write it, and so replace the "
			 "control-plane credential; `chmod 700 %s`",
			 dir, (unsigned)(st.st_mode & 07777),
			 st.st_mode & S_IWOTH ? "every user" : "its group", dir);
		goto fail;
	}
	*dfd = fd;
	return 0;
fail:
	close(fd);
	return -1;
}

int ctl_state_open(int dfd, const char *name, const char *path, const char *role,
		   const char *planted, int *fdp, char *err, size_t errlen)
{
	struct stat st;
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);

	*fdp = -1;
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0 && errno == ELOOP) {
		snprintf(err, errlen, "%s: a symbolic link, refused: the %s must be a regular file",
			 path, role);
		return -1;
	}
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	if (owner_check(role, path, planted, &st, err, errlen) < 0)
		goto fail;
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		snprintf(err, errlen, "%s: mode %04o lets %s use %s; `chmod 600 %s`", path,
			 (unsigned)(st.st_mode & 07777),
			 st.st_mode & S_IRWXO ? "every user" : "its group", planted, path);
		goto fail;
	}
	*fdp = fd;
	return 1;
fail:
	close(fd);
	return -1;
}

int ctl_state_write(int dfd, const char *name, const char *text)
{
	char tmp[64];
	size_t len = strlen(text), off = 0;
	int fd = -1, rc = 0;
	bool made = false;

	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	unlinkat(dfd, tmp, 0);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	made = true;
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		off += (size_t)n;
	}
	if (fchmod(fd, 0600) < 0 || fsync(fd) < 0) {
		rc = -errno;
		goto out;
	}
	rc = close(fd) < 0 ? -errno : 0;
	fd = -1;
	if (rc < 0)
		goto out;
	if (renameat(dfd, tmp, dfd, name) < 0) {
		rc = -errno;
		goto out;
	}
	made = false;
	if (fsync(dfd) < 0)
		rc = -errno;
out:
	if (fd >= 0)
		close(fd);
	if (made)
		unlinkat(dfd, tmp, 0);
	return rc;
}
