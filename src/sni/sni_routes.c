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

		if (!addr_host_pattern_valid(list[i].name)) {
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
