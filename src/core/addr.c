/* SPDX-License-Identifier: ISC */
/* Socket address parsing, printing, comparison and keyed hashing. */
#include "addr.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_port(const char *s, uint16_t *port)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9')
		return -1;
	v = strtoul(s, &end, 10);
	if (*end != '\0' || v == 0 || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

int addr_split(const char *s, char host[ADDR_HOSTLEN], uint16_t *port, int defport)
{
	const char *colon, *hs = s, *he;

	if (s[0] == '[') {
		he = strchr(s, ']');
		if (!he)
			return -1;
		hs = s + 1;
		colon = he[1] == ':' ? he + 1 : NULL;
		if (!colon && he[1] != '\0')
			return -1;
	} else {
		colon = strrchr(s, ':');
		/* A bare IPv6 address has several colons: only valid without a port. */
		if (colon && strchr(s, ':') != colon)
			colon = NULL;
		he = colon ? colon : s + strlen(s);
	}
	if (he == hs || (size_t)(he - hs) >= ADDR_HOSTLEN)
		return -1;
	/* A name's letters, digits, '-', '_' and '.', an address's ':' and
	 * a scope's '%': "= host" (a config line's typo) is no host. */
	for (const char *c = hs; c < he; c++)
		if (!isalnum((unsigned char)*c) && !strchr("-_.:%", *c))
			return -1;
	if (colon) {
		if (parse_port(colon + 1, port) < 0)
			return -1;
	} else {
		if (defport <= 0 || defport > 65535)
			return -1;
		*port = (uint16_t)defport;
	}
	memcpy(host, hs, (size_t)(he - hs));
	host[he - hs] = '\0';
	return 0;
}

int addr_parse_numeric(const char *s, union etr_sockaddr *sa)
{
	char host[ADDR_HOSTLEN];
	uint16_t port;

	if (addr_split(s, host, &port, -1) < 0)
		return -1;
	memset(sa, 0, sizeof(*sa));
	if (inet_pton(AF_INET, host, &sa->in.sin_addr) == 1) {
		sa->in.sin_family = AF_INET;
		sa->in.sin_port = htons(port);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &sa->in6.sin6_addr) == 1) {
		sa->in6.sin6_family = AF_INET6;
		sa->in6.sin6_port = htons(port);
		return 0;
	}
	return -1;
}

socklen_t addr_len(const union etr_sockaddr *sa)
{
	switch (sa->sa.sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;
	}
}

const char *addr_str(const struct sockaddr *sa, char buf[ADDR_STRLEN])
{
	char ip[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(buf, ADDR_STRLEN, "%s:%u", ip, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, ADDR_STRLEN, "[%s]:%u", ip, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, ADDR_STRLEN, "(family %d)", sa->sa_family);
	}
	return buf;
}

const char *addr_hostport(const char *host, uint16_t port, char buf[ADDR_HOSTLEN + 8])
{
	snprintf(buf, ADDR_HOSTLEN + 8, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
	return buf;
}

bool addr_equal(const union etr_sockaddr *a, const union etr_sockaddr *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return false;
	if (a->sa.sa_family == AF_INET)
		return a->in.sin_port == b->in.sin_port &&
		       a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
	if (a->sa.sa_family == AF_INET6)
		return a->in6.sin6_port == b->in6.sin6_port &&
		       a->in6.sin6_scope_id == b->in6.sin6_scope_id &&
		       memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, 16) == 0;
	return false;
}

bool addr_from(union etr_sockaddr *dst, const struct sockaddr *src, socklen_t len)
{
	memset(dst, 0, sizeof(*dst));
	if (src->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		memcpy(&dst->in, src, sizeof(struct sockaddr_in));
		return true;
	}
	if (src->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		memcpy(&dst->in6, src, sizeof(struct sockaddr_in6));
		return true;
	}
	return false;
}

/* SipHash-2-4 (Aumasson and Bernstein), over at most 24 bytes of key
 * material: family, port, address, scope. */
#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
	do {                                                                                       \
		v0 += v1;                                                                          \
		v1 = ROTL(v1, 13);                                                                 \
		v1 ^= v0;                                                                          \
		v0 = ROTL(v0, 32);                                                                 \
		v2 += v3;                                                                          \
		v3 = ROTL(v3, 16);                                                                 \
		v3 ^= v2;                                                                          \
		v0 += v3;                                                                          \
		v3 = ROTL(v3, 21);                                                                 \
		v3 ^= v0;                                                                          \
		v2 += v1;                                                                          \
		v1 = ROTL(v1, 17);                                                                 \
		v1 ^= v2;                                                                          \
		v2 = ROTL(v2, 32);                                                                 \
	} while (0)

static uint64_t load64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v; /* host order: the hash need not be portable, only keyed */
}

uint64_t addr_siphash(const void *data, size_t len, const uint8_t key[16])
{
	const uint8_t *in = data;
	uint64_t k0 = load64(key), k1 = load64(key + 8);
	uint64_t v0 = 0x736f6d6570736575ull ^ k0, v1 = 0x646f72616e646f6dull ^ k1;
	uint64_t v2 = 0x6c7967656e657261ull ^ k0, v3 = 0x7465646279746573ull ^ k1;
	uint64_t b = (uint64_t)len << 56, m;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		m = load64(in + i);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t j = 0; i + j < len; j++)
		b |= (uint64_t)in[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t addr_hash(const union etr_sockaddr *sa, const uint8_t key[16])
{
	uint8_t m[24] = {0};
	size_t n;

	m[0] = (uint8_t)sa->sa.sa_family;
	if (sa->sa.sa_family == AF_INET) {
		memcpy(m + 2, &sa->in.sin_port, 2);
		memcpy(m + 4, &sa->in.sin_addr, 4);
		n = 8;
	} else {
		memcpy(m + 2, &sa->in6.sin6_port, 2);
		memcpy(m + 4, &sa->in6.sin6_addr, 16);
		memcpy(m + 20, &sa->in6.sin6_scope_id, 4);
		n = 24;
	}
	return addr_siphash(m, n, key);
}

/* Any EACCES: the port is the usual cause, and net.ipv4.ip_unprivileged_port_start
 * may put the line elsewhere than 1024, so the port is not looked at. */
const char *addr_bind_hint(int err)
{
	return err == EACCES || err == -EACCES ? ADDR_BIND_HINT : "";
}

static bool is_ldh(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-';
}

bool addr_host_name_valid(const char *s, size_t len)
{
	size_t label = 0; /* start of the current label */
	bool digits = true;

	if (len == 0 || len > ADDR_NAME_MAX)
		return false;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || s[i] == '.') {
			size_t n = i - label;

			/* Empty labels: a leading, trailing or doubled dot. */
			if (n == 0 || n > 63 || s[label] == '-' || s[i - 1] == '-')
				return false;
			if (i == len)
				break;
			label = i + 1;
			digits = true;
			continue;
		}
		if (!is_ldh(s[i]))
			return false;
		if (s[i] < '0' || s[i] > '9')
			digits = false;
	}
	return !digits;
}

bool addr_host_pattern_valid(const char *s)
{
	size_t len = strnlen(s, ADDR_NAME_MAX + 1);

	if (len > ADDR_NAME_MAX)
		return false;
	if (s[0] == '*')
		return s[1] == '.' && len - 2 <= ADDR_NAME_MAX - 2 &&
		       addr_host_name_valid(s + 2, len - 2);
	return addr_host_name_valid(s, len);
}
