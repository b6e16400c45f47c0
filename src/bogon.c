/* SPDX-License-Identifier: ISC */
/* Source addresses that cannot be real. Private ranges (10/8, 192.168/16,
 * fc00::/7) are not bogons here: a relay on a LAN or a tunnel sees them. */
#include "bogon.h"

#include <arpa/inet.h>
#include <string.h>

/* a is the address in host byte order. */
static bool bogon_v4(uint32_t a, bool listener_loopback)
{
	uint8_t first = (uint8_t)(a >> 24);

	if (first == 0)
		return true; /* "this network": only a source during DHCP */
	if (first == 127)
		return !listener_loopback;
	/* 224/4 multicast and 240/4 reserved, 255.255.255.255 among them:
	 * a sender address is always unicast. */
	return first >= 224;
}

static bool bogon_v6(const struct in6_addr *a, bool listener_loopback)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t zero[15] = {0};
	const uint8_t *b = a->s6_addr;

	if (memcmp(b, mapped, 12) == 0) {
		uint32_t v4;

		memcpy(&v4, b + 12, 4);
		return bogon_v4(ntohl(v4), listener_loopback);
	}
	if (memcmp(b, zero, 15) == 0) {
		if (b[15] == 0)
			return true; /* :: */
		if (b[15] == 1)
			return !listener_loopback; /* ::1 */
	}
	return b[0] == 0xff;
}

bool bogon_source(const union etr_sockaddr *src, bool listener_loopback)
{
	switch (src->sa.sa_family) {
	case AF_INET:
		if (src->in.sin_port == 0)
			return true;
		return bogon_v4(ntohl(src->in.sin_addr.s_addr), listener_loopback);
	case AF_INET6:
		if (src->in6.sin6_port == 0)
			return true;
		return bogon_v6(&src->in6.sin6_addr, listener_loopback);
	default:
		return true;
	}
}
