/* SPDX-License-Identifier: ISC */
/* sd_notify without libsystemd: the protocol is one AF_UNIX datagram, and a
 * dependency for that would be larger than the code. */
#include "sdnotify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int sdnotify(const char *fmt, ...)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char msg[512];
	size_t plen;
	va_list ap;
	int fd, err = 0;
	socklen_t len;

	if (!path || (path[0] != '/' && path[0] != '@'))
		return 0;
	plen = strlen(path);
	if (plen >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	memcpy(sun.sun_path, path, plen);
	/* '@' names a socket in the abstract namespace: a leading NUL. */
	if (path[0] == '@')
		sun.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sun, len) < 0)
		err = -errno;
	close(fd);
	return err;
}

uint64_t sdnotify_watchdog_ns(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (!usec)
		return 0;
	if (pid && strtol(pid, NULL, 10) != (long)getpid())
		return 0;
	v = strtoull(usec, &end, 10);
	if (*end || v == 0)
		return 0;
	return (uint64_t)v * 1000;
}
