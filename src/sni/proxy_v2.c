/* SPDX-License-Identifier: ISC */
/* Building the PROXY v2 header: signature, version and command, family,
 * length, then source and destination address and port, all big-endian. */
#include "proxy_v2.h"

#include <arpa/inet.h>
#include <string.h>

#include "addrclass.h"

#define PROXY_V2_VER_CMD 0x21 /* version 2, PROXY */
#define PROXY_V2_TCP4	 0x11 /* AF_INET, STREAM */
#define PROXY_V2_TCP6	 0x21 /* AF_INET6, STREAM */

/* The 16 bytes of an IPv6 address, an IPv4 one mapped; false for another
 * family. */
static bool v6_bytes(const union etr_sockaddr *a, uint8_t out[16])
{
	if (a->sa.sa_family == AF_INET6) {
		memcpy(out, &a->in6.sin6_addr, 16);
		return true;
	}
	if (a->sa.sa_family == AF_INET) {
		memset(out, 0, 10);
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &a->in.sin_addr, 4);
		return true;
	}
	return false;
}

/* The port, in network order, of an AF_INET or AF_INET6 address. */
static uint16_t port_of(const union etr_sockaddr *a)
{
	return a->sa.sa_family == AF_INET ? a->in.sin_port : a->in6.sin6_port;
}

int proxy_v2_build(uint8_t *buf, size_t cap, const union etr_sockaddr *client,
		   const union etr_sockaddr *local)
{
	uint32_t c4, l4;
	uint16_t cport, lport;
	uint8_t *p = buf + 16;

	if ((client->sa.sa_family != AF_INET && client->sa.sa_family != AF_INET6) ||
	    (local->sa.sa_family != AF_INET && local->sa.sa_family != AF_INET6))
		return -1;
	cport = port_of(client);
	lport = port_of(local);
	if (addrclass_v4(client, &c4) && addrclass_v4(local, &l4)) {
		if (cap < PROXY_V2_LEN_TCP4)
			return -1;
		c4 = htonl(c4);
		l4 = htonl(l4);
		memcpy(p, &c4, 4);
		memcpy(p + 4, &l4, 4);
		memcpy(p + 8, &cport, 2);
		memcpy(p + 10, &lport, 2);
		buf[13] = PROXY_V2_TCP4;
	} else {
		if (cap < PROXY_V2_LEN_TCP6)
			return -1;
		v6_bytes(client, p);
		v6_bytes(local, p + 16);
		memcpy(p + 32, &cport, 2);
		memcpy(p + 34, &lport, 2);
		buf[13] = PROXY_V2_TCP6;
	}
	memcpy(buf, PROXY_V2_SIG, PROXY_V2_SIG_LEN);
	buf[12] = PROXY_V2_VER_CMD;
	buf[14] = 0;
	buf[15] = buf[13] == PROXY_V2_TCP4 ? 12 : 36;
	return 16 + buf[15];
}
