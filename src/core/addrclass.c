/* SPDX-License-Identifier: ISC */
/* Address classes: client keys, bogons, private ranges. Each rule is
 * written once here; the session table, the rate limiter, admission and the
 * ops plane all ask this file. */
#include "addrclass.h"

#include <arpa/inet.h>
#include <string.h>

static const uint8_t mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool addrclass_v4(const union etr_sockaddr *a, uint32_t *v4)
{
	const uint8_t *b;

	if (a->sa.sa_family == AF_INET) {
		*v4 = ntohl(a->in.sin_addr.s_addr);
		return true;
	}
	if (a->sa.sa_family != AF_INET6)
		return false;
	b = a->in6.sin6_addr.s6_addr;
	if (memcmp(b, mapped_prefix, sizeof(mapped_prefix)) != 0)
		return false;
	*v4 = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
	return true;
}

bool addrclass_prefix(const union etr_sockaddr *a, unsigned v4_bits, unsigned v6_bits,
		      uint8_t key[ADDRCLASS_KEY_LEN])
{
	uint32_t v4;

	if (addrclass_v4(a, &v4)) {
		if (v4_bits < 32)
			v4 &= v4_bits ? ~0u << (32 - v4_bits) : 0;
		v4 = htonl(v4);
		memcpy(key, mapped_prefix, sizeof(mapped_prefix));
		memcpy(key + 12, &v4, 4);
		return true;
	}
	memset(key, 0, ADDRCLASS_KEY_LEN);
	if (a->sa.sa_family != AF_INET6)
		return false;
	if (v6_bits > 128)
		v6_bits = 128;
	memcpy(key, a->in6.sin6_addr.s6_addr, v6_bits / 8);
	if (v6_bits % 8)
		key[v6_bits / 8] =
		    (uint8_t)(a->in6.sin6_addr.s6_addr[v6_bits / 8] & (0xff << (8 - v6_bits % 8)));
	return true;
}

bool addrclass_key(const union etr_sockaddr *a, uint8_t key[ADDRCLASS_KEY_LEN])
{
	return addrclass_prefix(a, 32, ADDRCLASS_V6_PREFIX, key);
}

bool addrclass_key_is_v4(const uint8_t key[ADDRCLASS_KEY_LEN])
{
	return memcmp(key, mapped_prefix, sizeof(mapped_prefix)) == 0;
}

void addrclass_map_v4(union etr_sockaddr *a)
{
	struct sockaddr_in in;

	if (a->sa.sa_family != AF_INET)
		return;
	in = a->in;
	memset(a, 0, sizeof(*a));
	a->in6.sin6_family = AF_INET6;
	a->in6.sin6_port = in.sin_port;
	memcpy(a->in6.sin6_addr.s6_addr, mapped_prefix, sizeof(mapped_prefix));
	memcpy(&a->in6.sin6_addr.s6_addr[12], &in.sin_addr, 4);
}

/* v4 in host byte order. */
static bool bogon_v4(uint32_t v4, bool listener_loopback)
{
	uint8_t first = (uint8_t)(v4 >> 24);

	if (first == 0)
		return true; /* "this network": only a source during DHCP */
	if (first == 127)
		return !listener_loopback;
	/* 224/4 multicast and 240/4 reserved, 255.255.255.255 among them:
	 * a sender address is always unicast. */
	return first >= 224;
}

bool addrclass_bogon(const union etr_sockaddr *src, bool listener_loopback)
{
	static const uint8_t zero[15] = {0};
	const uint8_t *b;
	uint32_t v4;

	if (src->sa.sa_family != AF_INET && src->sa.sa_family != AF_INET6)
		return true;
	/* sin_port and sin6_port sit at the same offset. */
	if (src->in.sin_port == 0)
		return true;
	if (addrclass_v4(src, &v4))
		return bogon_v4(v4, listener_loopback);
	b = src->in6.sin6_addr.s6_addr;
	if (memcmp(b, zero, sizeof(zero)) == 0) {
		if (b[15] == 0)
			return true; /* :: */
		if (b[15] == 1)
			return !listener_loopback; /* ::1 */
	}
	return b[0] == 0xff;
}

bool addrclass_loopback(const union etr_sockaddr *a)
{
	uint32_t v4;

	if (addrclass_v4(a, &v4))
		return v4 >> 24 == 127;
	return a->sa.sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&a->in6.sin6_addr);
}

/* v4 in host byte order. */
static bool private_v4(uint32_t a)
{
	return (a >> 24) == 127 ||		 /* loopback */
	       (a >> 24) == 10 ||		 /* RFC 1918 */
	       (a >> 20) == (172u << 4 | 1) ||	 /* RFC 1918 172.16/12 */
	       (a >> 16) == (192u << 8 | 168) || /* RFC 1918 */
	       (a >> 22) == (100u << 2 | 1) ||	 /* CGNAT 100.64/10 */
	       (a >> 16) == (169u << 8 | 254);	 /* link-local */
}

bool addrclass_private(const union etr_sockaddr *a)
{
	const uint8_t *b;
	uint32_t v4;

	if (addrclass_v4(a, &v4))
		return private_v4(v4);
	if (a->sa.sa_family != AF_INET6)
		return false;
	b = a->in6.sin6_addr.s6_addr;
	return IN6_IS_ADDR_LOOPBACK(&a->in6.sin6_addr) ||
	       (b[0] & 0xfe) == 0xfc ||			/* ULA fc00::/7 */
	       (b[0] == 0xfe && (b[1] & 0xc0) == 0x80); /* fe80::/10 */
}

bool addrclass_v4_embedded(const union etr_sockaddr *a, uint32_t *v4)
{
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
	static const uint8_t nat64_local[6] = {0, 0x64, 0xff, 0x9b, 0, 1};
	static const uint8_t translated[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
	static const uint8_t zero[12] = {0};
	const uint8_t *b;

	if (addrclass_v4(a, v4))
		return true;
	if (a->sa.sa_family != AF_INET6)
		return false;
	b = a->in6.sin6_addr.s6_addr;
	/* SIIT's IPv4-translated ::ffff:0:a.b.c.d (RFC 2765), and the
	 * local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) as translators
	 * use it, a /96 of it with the IPv4 in the last 32 bits. */
	if (memcmp(b, translated, 12) == 0 || (memcmp(b, nat64_local, 6) == 0 && b[8] == 0)) {
		*v4 = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
		return true;
	}
	if (b[0] == 0x20 && b[1] == 0x02) { /* 6to4: the IPv4 in bits 16-47 */
		*v4 = (uint32_t)b[2] << 24 | (uint32_t)b[3] << 16 | (uint32_t)b[4] << 8 | b[5];
		return true;
	}
	/* :: and ::1 are IPv6's own, not IPv4-compatible addresses. */
	if ((memcmp(b, nat64, 12) == 0 || memcmp(b, zero, 12) == 0) &&
	    !(memcmp(b, zero, 12) == 0 && b[12] == 0 && b[13] == 0 && b[14] == 0 && b[15] <= 1)) {
		*v4 = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
		return true;
	}
	return false;
}

bool addrclass_reduce(const union etr_sockaddr *a, uint8_t ip[16])
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	uint32_t v4;

	if (addrclass_v4_embedded(a, &v4)) {
		v4 = htonl(v4);
		memcpy(ip, mapped, sizeof(mapped));
		memcpy(ip + 12, &v4, 4);
		return true;
	}
	if (a->sa.sa_family != AF_INET6)
		return false;
	memcpy(ip, a->in6.sin6_addr.s6_addr, 16);
	return true;
}

/* v4 in host byte order: the ranges beyond bogons and private ones. */
static bool reserved_v4(uint32_t a)
{
	return (a >> 8) == (192u << 16 | 0 << 8 | 0) ||	       /* 192.0.0/24 */
	       (a >> 8) == (192u << 16 | 0 << 8 | 2) ||	       /* 192.0.2/24 TEST-NET-1 */
	       (a >> 8) == (192u << 16 | 88 << 8 | 99) ||      /* 6to4 relay anycast */
	       (a >> 17) == (198u << 7 | 18 >> 1) ||	       /* 198.18/15 benchmarking */
	       (a >> 8) == (198u << 16 | 51 << 8 | 100) ||     /* TEST-NET-2 */
	       (a >> 8) == (203u << 16 | 0 << 8 | 113) ||      /* TEST-NET-3 */
	       a == (168u << 24 | 63u << 16 | 129u << 8 | 16); /* Azure's WireServer */
}

bool addrclass_reserved(const union etr_sockaddr *a)
{
	static const uint8_t zero[15] = {0};
	const uint8_t *b;
	uint32_t v4;

	if (addrclass_v4(a, &v4))
		return bogon_v4(v4, false) || private_v4(v4) || reserved_v4(v4);
	if (a->sa.sa_family != AF_INET6)
		return true;
	b = a->in6.sin6_addr.s6_addr;
	if (memcmp(b, zero, sizeof(zero)) == 0 && b[15] <= 1)
		return true;							 /* :: and ::1 */
	return addrclass_private(a) || b[0] == 0xff ||				 /* multicast */
	       (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) ||			 /* fec0::/10 */
	       (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) || /* 2001:db8::/32 */
	       (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) || /* Teredo 2001::/32 */
	       (b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 &&
		b[5] == 1) ||				      /* 64:ff9b:1::/48 */
	       (b[0] == 0x01 && memcmp(b + 1, zero, 7) == 0); /* 100::/64 */
}

static bool host_of(const union etr_sockaddr *a, uint8_t out[16], uint16_t *port)
{
	if (a->sa.sa_family == AF_INET) {
		memset(out, 0, 10);
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &a->in.sin_addr, 4);
		*port = ntohs(a->in.sin_port);
		return true;
	}
	if (a->sa.sa_family == AF_INET6) {
		memcpy(out, &a->in6.sin6_addr, 16);
		*port = ntohs(a->in6.sin6_port);
		return true;
	}
	return false;
}

static bool host_any(const uint8_t h[16])
{
	static const uint8_t v4any[16] = {[10] = 0xff, [11] = 0xff};
	static const uint8_t v6any[16] = {0};

	return memcmp(h, v4any, 16) == 0 || memcmp(h, v6any, 16) == 0;
}

static bool host_loopback(const uint8_t h[16])
{
	static const uint8_t v4[12] = {[10] = 0xff, [11] = 0xff};
	static const uint8_t v6[16] = {[15] = 1};

	return (memcmp(h, v4, 12) == 0 && h[12] == 127) || memcmp(h, v6, 16) == 0;
}

bool addrclass_loops(const union etr_sockaddr *up, const union etr_sockaddr *listen,
		     const union etr_sockaddr *local, size_t nlocal)
{
	uint8_t u[16], l[16], x[16];
	uint16_t up_port, listen_port, p;
	bool up_local;

	if (!host_of(up, u, &up_port) || !host_of(listen, l, &listen_port) ||
	    up_port != listen_port)
		return false;
	if (memcmp(u, l, 16) == 0)
		return true;
	/* A connect to 0.0.0.0 or :: reaches the loopback. */
	up_local = host_any(u) || host_loopback(u);
	for (size_t i = 0; i < nlocal && !up_local; i++)
		up_local = host_of(&local[i], x, &p) && memcmp(u, x, 16) == 0;
	if (host_any(l))
		return up_local;
	return host_any(u) && host_loopback(l);
}

bool addr_cidr_match(const struct addr_cidr *c, const uint8_t ip[16])
{
	unsigned full = c->bits / 8, rest = c->bits % 8;

	if (memcmp(c->net, ip, full) != 0)
		return false;
	return rest == 0 || ((c->net[full] ^ ip[full]) & (0xff << (8 - rest))) == 0;
}
