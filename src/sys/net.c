/* SPDX-License-Identifier: ISC */
/* Socket setup for the relay. */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "timers.h"

/* Big enough to ride out a burst while the loop is busy elsewhere. */
#define NET_PUBLIC_BUF (4 << 20)

static void set_buf(int fd, int opt, int force_opt, int size)
{
	/* The FORCE variant passes net.core.[rw]mem_max when we may (root,
	 * CAP_NET_ADMIN); otherwise the plain one is capped by the sysctl. */
	if (setsockopt(fd, SOL_SOCKET, force_opt, &size, sizeof(size)) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &size, sizeof(size));
}

int net_bind_public(const union etr_sockaddr *sa, bool reuseport)
{
	int fd, one = 1, err;

	fd = socket(sa->sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* No SO_REUSEADDR: on UDP it would let a second process bind the
	 * same port and take part of its traffic. SO_REUSEPORT only with
	 * several workers; net_port_free() first makes sure that the group
	 * is ours alone. */
	if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	set_buf(fd, SO_RCVBUF, SO_RCVBUFFORCE, NET_PUBLIC_BUF);
	set_buf(fd, SO_SNDBUF, SO_SNDBUFFORCE, NET_PUBLIC_BUF);
	if (bind(fd, &sa->sa, addr_len(sa)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int net_listen_tcp(const union etr_sockaddr *sa, bool reuseport)
{
	int fd, one = 1, err;

	fd = socket(sa->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* SO_REUSEADDR on TCP only lets a restart bind past the last run's
	 * TIME_WAIT connections; it never shares a listening port. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) ||
	    bind(fd, &sa->sa, addr_len(sa)) < 0 || listen(fd, SOMAXCONN) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int net_port_free(const union etr_sockaddr *sa)
{
	int fd = socket(sa->sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;

	if (fd < 0)
		return -errno;
	if (bind(fd, &sa->sa, addr_len(sa)) < 0)
		err = -errno;
	close(fd);
	return err;
}

int net_tcp_port_free(const union etr_sockaddr *sa)
{
	int fd = socket(sa->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, err = 0;

	if (fd < 0)
		return -errno;
	/* SO_REUSEADDR as the listener has it: the last run's TIME_WAIT
	 * connections do not count; any listening socket does, one in a
	 * SO_REUSEPORT group too (which our first socket would join). */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, &sa->sa, addr_len(sa)) < 0)
		err = -errno;
	close(fd);
	return err;
}

int net_attach_reuseport(int fd, const struct sock_filter *prog, unsigned len)
{
	struct sock_fprog fp = {.len = (unsigned short)len};

	/* The kernel only reads the program; sock_fprog has no const. */
	memcpy(&fp.filter, &prog, sizeof(prog));

	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fp, sizeof(fp)) < 0)
		return -errno;
	return 0;
}

int net_attach_plan(int fd, const struct reuseport_plan *p)
{
	struct sock_filter prog[REUSEPORT_PROG_MAX];
	int n = reuseport_build(p, prog);

	return n < 0 ? n : net_attach_reuseport(fd, prog, (unsigned)n);
}

int net_reuseport_check(const struct sock_filter *prog, unsigned len)
{
	int fd, one = 1, err;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* An unbound socket with SO_REUSEPORT gets a group of its own for
	 * the program: no address needed (a network namespace without
	 * loopback has none). */
	err = setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ? -errno : 0;
	if (!err)
		err = net_attach_reuseport(fd, prog, len);
	close(fd);
	return err;
}

int net_connect_udp(const union etr_sockaddr *sa)
{
	int fd, err;

	fd = socket(sa->sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, &sa->sa, addr_len(sa)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int net_connect_udp_range(const union etr_sockaddr *sa, uint16_t min, uint16_t max, uint16_t *next)
{
	unsigned width = (unsigned)(max - min) + 1;
	union etr_sockaddr local;
	int fd, err = -EADDRINUSE;

	fd = socket(sa->sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&local, 0, sizeof(local));
	local.sa.sa_family = sa->sa.sa_family;
	/* Round-robin from the cursor: a port just freed is tried last, so a
	 * late datagram for the old session does not reach a new one. */
	for (unsigned i = 0; i < width; i++) {
		uint16_t port = *next < min || *next > max ? min : *next;

		*next = port == max ? min : (uint16_t)(port + 1);
		if (local.sa.sa_family == AF_INET)
			local.in.sin_port = htons(port);
		else
			local.in6.sin6_port = htons(port);
		if (bind(fd, &local.sa, addr_len(&local)) == 0) {
			err = connect(fd, &sa->sa, addr_len(sa)) == 0 ? 0 : -errno;
			break;
		}
		err = -errno;
		if (err != -EADDRINUSE)
			break;
	}
	if (err == 0)
		return fd;
	close(fd);
	return err;
}

uint16_t net_local_port(int fd)
{
	union etr_sockaddr sa;
	socklen_t len = sizeof(sa);

	if (getsockname(fd, &sa.sa, &len) < 0)
		return 0;
	return ntohs(sa.sa.sa_family == AF_INET ? sa.in.sin_port : sa.in6.sin6_port);
}

int net_send_copy(int fd, const union etr_sockaddr *dst, const void *buf, size_t len)
{
	ssize_t n =
	    sendto(fd, buf, len, MSG_DONTWAIT, dst ? &dst->sa : NULL, dst ? addr_len(dst) : 0);

	return n < 0 ? -errno : 0;
}

uint64_t net_random64(void)
{
	uint64_t v = 0;

	/* getrandom with GRND_NONBLOCK never blocks after boot; on failure a
	 * clock-derived value still differs per call. */
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v)) {
		v = mono_ns() * 0x9e3779b97f4a7c15ull;
	}
	return v;
}

size_t net_local_addrs(union etr_sockaddr *out, size_t max)
{
	struct ifaddrs *all, *i;
	size_t n = 0;

	if (getifaddrs(&all) < 0)
		return 0;
	for (i = all; i && n < max; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			memcpy(&out[n++].in, i->ifa_addr, sizeof(struct sockaddr_in));
		else if (i->ifa_addr->sa_family == AF_INET6)
			memcpy(&out[n++].in6, i->ifa_addr, sizeof(struct sockaddr_in6));
	}
	freeifaddrs(all);
	return n;
}
