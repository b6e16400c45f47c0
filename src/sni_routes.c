/* SPDX-License-Identifier: ISC */
/* The route table: the routes, and an open-addressing index of their keys
 * (an exact name, or a wildcard's suffix with a mark) at most half full. */
#include "sni_routes.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sni_routes {
	size_t count;
	uint32_t mask;		 /* index slots - 1 */
	uint32_t *index;	 /* route number + 1; 0 is empty */
	struct sni_route *route; /* names lower case */
};

/* The key of a route: its name, or for "*.suffix" the suffix. Operators
 * cannot be fooled by a client here: the client picks the names looked
 * up, not the keys in the table, so an unkeyed hash cannot be flooded. */
static uint64_t key_hash(bool wild, const char *s, size_t len)
{
	uint64_t x = 0xcbf29ce484222325ull ^ (wild ? 0x9e3779b97f4a7c15ull : 0);

	for (size_t i = 0; i < len; i++)
		x = (x ^ (uint8_t)s[i]) * 0x100000001b3ull;
	return x ^ (x >> 29);
}

static bool is_wild(const struct sni_route *r)
{
	return r->name[0] == '*';
}

/* The key's text: the name, or the suffix after "*.". */
static const char *key_of(const struct sni_route *r, size_t *len)
{
	const char *s = is_wild(r) ? r->name + 2 : r->name;

	*len = strlen(s);
	return s;
}

static const struct sni_route *find(const struct sni_routes *t, bool wild, const char *s,
				    size_t len)
{
	if (t->count == 0)
		return NULL;
	for (uint32_t i = (uint32_t)key_hash(wild, s, len) & t->mask;; i = (i + 1) & t->mask) {
		const struct sni_route *r;
		const char *k;
		size_t klen;

		if (t->index[i] == 0)
			return NULL;
		r = &t->route[t->index[i] - 1];
		k = key_of(r, &klen);
		if (is_wild(r) == wild && klen == len && memcmp(k, s, len) == 0)
			return r;
	}
}

bool sni_routes_name_valid(const char *s)
{
	size_t len = strnlen(s, SNI_ROUTE_NAME_MAX + 1);

	if (len > SNI_ROUTE_NAME_MAX)
		return false;
	if (s[0] == '*')
		return s[1] == '.' && len - 2 <= TLS_NAME_MAX - 2 &&
		       tls_hello_name_valid(s + 2, len - 2);
	return tls_hello_name_valid(s, len);
}

int sni_routes_build(struct sni_routes **out, const struct sni_route *list, size_t n, char *err,
		     size_t errlen)
{
	struct sni_routes *t;
	uint32_t slots = 2;
	int rc = -ENOMEM;

	*out = NULL;
	if (n > SNI_ROUTES_MAX) {
		snprintf(err, errlen, "%zu routes: at most %u", n, SNI_ROUTES_MAX);
		return -EINVAL;
	}
	while (slots < 2 * n)
		slots *= 2;
	t = calloc(1, sizeof(*t));
	if (!t)
		goto nomem;
	t->index = calloc(slots, sizeof(*t->index));
	t->route = calloc(n ? n : 1, sizeof(*t->route));
	if (!t->index || !t->route)
		goto nomem;
	t->mask = slots - 1;

	for (size_t i = 0; i < n; i++) {
		struct sni_route *r = &t->route[i];
		const char *k;
		size_t klen;
		uint32_t j;

		if (!sni_routes_name_valid(list[i].name)) {
			snprintf(err, errlen, "route %zu \"%.*s\": not a host name or *.suffix",
				 i + 1, SNI_ROUTE_NAME_MAX, list[i].name);
			rc = -EINVAL;
			goto out;
		}
		*r = list[i];
		for (char *c = r->name; *c; c++)
			if (*c >= 'A' && *c <= 'Z')
				*c = (char)(*c - 'A' + 'a');
		k = key_of(r, &klen);
		t->count = i; /* find() looks only at the routes placed so far */
		if (i && find(t, is_wild(r), k, klen)) {
			snprintf(err, errlen, "route %zu \"%s\": listed twice", i + 1, r->name);
			rc = -EEXIST;
			goto out;
		}
		for (j = (uint32_t)key_hash(is_wild(r), k, klen) & t->mask; t->index[j];
		     j = (j + 1) & t->mask)
			;
		t->index[j] = (uint32_t)i + 1;
	}
	t->count = n;
	*out = t;
	return 0;
nomem:
	snprintf(err, errlen, "%zu routes: out of memory", n);
out:
	sni_routes_free(t);
	return rc;
}

const struct sni_route *sni_routes_lookup(const struct sni_routes *t, const char *name, size_t len)
{
	const struct sni_route *r;

	if (!t)
		return NULL;
	r = find(t, false, name, len);
	/* Wildcards, longest suffix first: the part after each dot. */
	for (size_t i = 0; !r && i < len; i++)
		if (name[i] == '.')
			r = find(t, true, name + i + 1, len - i - 1);
	return r;
}

size_t sni_routes_count(const struct sni_routes *t)
{
	return t ? t->count : 0;
}

void sni_routes_free(struct sni_routes *t)
{
	if (!t)
		return;
	free(t->index);
	free(t->route);
	free(t);
}

/* The address of a as 16 bytes (IPv4 as v4-mapped IPv6) and its port;
 * false for another family. */
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
	static const uint8_t v4any[16] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t v6any[16] = { 0 };

	return memcmp(h, v4any, 16) == 0 || memcmp(h, v6any, 16) == 0;
}

static bool host_loopback(const uint8_t h[16])
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t v6[16] = { [15] = 1 };

	return (memcmp(h, v4, 12) == 0 && h[12] == 127) || memcmp(h, v6, 16) == 0;
}

bool sni_route_loops(const union etr_sockaddr *up, const union etr_sockaddr *listen,
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
