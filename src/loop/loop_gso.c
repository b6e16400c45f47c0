/* SPDX-License-Identifier: ISC */
/* The two calls of the GSO helpers that touch the kernel's interface. */
#include "loop_gso.h"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <string.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

bool gso_supported(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int v = 0;
	socklen_t len = sizeof(v);
	bool ok;

	if (fd < 0)
		return false;
	/* Linux 4.18+. Before it, an unknown SOL_UDP cmsg would be ignored and
	 * a train would leave as one big datagram: never guess. */
	ok = getsockopt(fd, SOL_UDP, UDP_SEGMENT, &v, &len) == 0;
	close(fd);
	return ok;
}

void gso_set_segment(struct msghdr *m, union gso_ctl *ctl, uint16_t seg)
{
	struct cmsghdr *c;

	memset(ctl, 0, sizeof(*ctl));
	m->msg_control = ctl->buf;
	m->msg_controllen = sizeof(ctl->buf);
	c = CMSG_FIRSTHDR(m);
	c->cmsg_level = SOL_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(seg));
	memcpy(CMSG_DATA(c), &seg, sizeof(seg));
}

void gro_enable(int fd)
{
	int one = 1;

	/* Without it the kernel never sends us trains: nothing to handle. */
	(void)setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
}

size_t gro_size(const struct cmsghdr *c)
{
	int v;

	if (c->cmsg_level != SOL_UDP || c->cmsg_type != UDP_GRO ||
	    c->cmsg_len < CMSG_LEN(sizeof(v)))
		return 0;
	memcpy(&v, CMSG_DATA(c), sizeof(v));
	return v > 0 ? (size_t)v : 0;
}

size_t gro_msg_size(struct msghdr *m)
{
	size_t seg = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c && !seg; c = CMSG_NXTHDR(m, c))
		seg = gro_size(c);
	return seg;
}
