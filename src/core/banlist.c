/* SPDX-License-Identifier: ISC */
/* Ban list: lines into 128-bit ranges (IPv4 as ::ffff:0:0/96), sorted and
 * merged once at load, then a binary search per lookup. */
#include "banlist.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addrclass.h"
#include "config.h"

/* Longest token we try to read: an IPv6 address with IPv4 tail and /128. */
#define TOKEN_MAX (INET6_ADDRSTRLEN + 4)

/* Room kept at the end of err for "path: N more errors not shown". */
#define ERR_TRAILER 64

struct errbuf {
	char *buf;
	size_t len, used;
	const char *path;
	unsigned count, dropped;
};

/* Append "path:line: message" on a line of its own. Once a message does not
 * fit, it and all later ones are only counted, so what is shown stays in
 * order. */
static void report(struct errbuf *e, unsigned line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	size_t room;
	int n;

	e->count++;
	if (!e->buf || e->len == 0 || e->dropped) {
		e->dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Keep room to say how many did not fit. */
	room = e->len - e->used - (e->len >= 2 * ERR_TRAILER ? ERR_TRAILER : 0);
	n = snprintf(e->buf + e->used, e->len - e->used, "%s%s:%u: %s", e->used ? "\n" : "",
		     e->path, line, msg);
	if (n < 0 || (size_t)n >= room) {
		e->buf[e->used] = '\0';
		e->dropped++;
		return;
	}
	e->used += (size_t)n;
}

/* The bad input, quoted: printable ASCII as is, the rest as \xNN, cut at 48
 * bytes. */
static const char *quote(const char *s, size_t n, char out[256])
{
	size_t o = 0;

	out[o++] = '"';
	for (size_t i = 0; i < n && i < 48; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch >= ' ' && ch < 0x7f && ch != '"' && ch != '\\')
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, 5, "\\x%02x", ch);
	}
	if (n > 48) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o++] = '"';
	out[o] = '\0';
	return out;
}

static struct banlist_u128 from_bytes(const uint8_t a[16])
{
	struct banlist_u128 v = {0, 0};

	for (int i = 0; i < 8; i++) {
		v.hi = v.hi << 8 | a[i];
		v.lo = v.lo << 8 | a[8 + i];
	}
	return v;
}

static void to_bytes(struct banlist_u128 v, uint8_t a[16])
{
	for (int i = 0; i < 8; i++) {
		a[7 - i] = (uint8_t)(v.hi >> (8 * i));
		a[15 - i] = (uint8_t)(v.lo >> (8 * i));
	}
}

/* The host part of a /prefix block: its low 128 - prefix bits set. */
static struct banlist_u128 host_mask(unsigned prefix)
{
	struct banlist_u128 m = {0, 0};

	/* Shifting a 64-bit value by 64 is undefined: 0 and 64 apart. */
	if (prefix < 64) {
		m.hi = prefix ? UINT64_MAX >> prefix : UINT64_MAX;
		m.lo = UINT64_MAX;
	} else if (prefix < 128) {
		m.lo = prefix > 64 ? UINT64_MAX >> (prefix - 64) : UINT64_MAX;
	}
	return m;
}

/* The IPv4 block that r, written in an IPv6 form embedding IPv4, names:
 * SIIT ::ffff:0:a.b.c.d, NAT64 64:ff9b::a.b.c.d and IPv4-compatible
 * ::a.b.c.d (the IPv4 in the last 32 bits), 6to4 2002:a.b.c.d::/48 (in bits
 * 16-47), as its mapped range in *out. False for any other entry, and for
 * one that is the form's prefix alone (64:ff9b::/96 names no IPv4 block)
 * or holds :: or ::1 (IPv6's own). */
static bool embedded_v4(const struct banlist_range *r, struct banlist_range *out)
{
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
	static const uint8_t siit[12] = {[8] = 0xff, [9] = 0xff};
	static const uint8_t zero[12] = {0};
	unsigned prefix = 128 - (unsigned)(__builtin_popcountll(r->first.hi ^ r->last.hi) +
					   __builtin_popcountll(r->first.lo ^ r->last.lo));
	unsigned v4p;
	uint8_t a[16], m[16] = {[10] = 0xff, [11] = 0xff};
	struct banlist_u128 hm;

	to_bytes(r->first, a);
	if (prefix > 96 &&
	    (memcmp(a, nat64, 12) == 0 || memcmp(a, siit, 12) == 0 || memcmp(a, zero, 12) == 0)) {
		if (memcmp(a, zero, 12) == 0 && a[12] == 0 && a[13] == 0 && a[14] == 0 &&
		    a[15] <= 1)
			return false;
		memcpy(m + 12, a + 12, 4);
		v4p = prefix - 96;
	} else if (prefix > 16 && a[0] == 0x20 && a[1] == 0x02) {
		memcpy(m + 12, a + 2, 4);
		v4p = prefix - 16 > 32 ? 32 : prefix - 16;
	} else {
		return false;
	}
	out->first = from_bytes(m);
	hm = host_mask(96 + v4p);
	out->first.lo &= ~hm.lo;
	out->last.hi = out->first.hi;
	out->last.lo = out->first.lo | hm.lo;
	return true;
}

static int cmp(struct banlist_u128 a, struct banlist_u128 b)
{
	if (a.hi != b.hi)
		return a.hi < b.hi ? -1 : 1;
	if (a.lo != b.lo)
		return a.lo < b.lo ? -1 : 1;
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	return cmp(((const struct banlist_range *)a)->first,
		   ((const struct banlist_range *)b)->first);
}

/* Read one token as an address or CIDR into r. Returns 0, or -1 with the
 * reason reported. */
static int parse_entry(struct errbuf *e, unsigned line, const char *tok, size_t n,
		       struct banlist_range *r)
{
	char buf[TOKEN_MAX + 1], q[256], net[INET6_ADDRSTRLEN];
	uint8_t a[16] = {0};
	struct banlist_u128 v, m;
	unsigned prefix, max, base;
	bool v6;
	char *slash;

	if (n > TOKEN_MAX || memchr(tok, '\0', n)) {
		report(e, line, "%s: not an IPv4 or IPv6 address or CIDR block", quote(tok, n, q));
		return -1;
	}
	memcpy(buf, tok, n);
	buf[n] = '\0';
	slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	v6 = strchr(buf, ':') != NULL;
	if (v6 ? inet_pton(AF_INET6, buf, a) != 1 : inet_pton(AF_INET, buf, a + 12) != 1) {
		report(e, line, "%s: not an IPv4 or IPv6 address", quote(tok, n, q));
		return -1;
	}
	if (!v6)
		a[10] = a[11] = 0xff;
	max = v6 ? 128 : 32;
	base = v6 ? 0 : 96;
	prefix = max;
	if (slash) {
		const char *p = slash + 1;

		/* Digits only: no sign, no space, no hex, at most three. */
		if (*p == '\0' || strspn(p, "0123456789") != strlen(p) || strlen(p) > 3 ||
		    (prefix = (unsigned)atoi(p)) > max) {
			report(e, line, "%s: prefix length must be 0 to %u", quote(tok, n, q), max);
			return -1;
		}
	}
	v = from_bytes(a);
	m = host_mask(base + prefix);
	if ((v.hi & m.hi) || (v.lo & m.lo)) {
		v.hi &= ~m.hi;
		v.lo &= ~m.lo;
		to_bytes(v, a);
		inet_ntop(v6 ? AF_INET6 : AF_INET, v6 ? a : a + 12, net, sizeof(net));
		report(e, line, "%s: host bits set; did you mean %s/%u?", quote(tok, n, q), net,
		       prefix);
		return -1;
	}
	r->first = v;
	r->last.hi = v.hi | m.hi;
	r->last.lo = v.lo | m.lo;
	return 0;
}

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Sort, then fold overlapping and adjacent ranges into one. */
static void merge(struct banlist *b)
{
	size_t o = 0;

	if (b->n == 0)
		return;
	qsort(b->range, b->n, sizeof(*b->range), cmp_range);
	for (size_t i = 1; i < b->n; i++) {
		struct banlist_range *cur = &b->range[o], *nx = &b->range[i];
		struct banlist_u128 next = cur->last;

		/* next = cur->last + 1; when last is the top address, all is
		 * covered already. */
		if (++next.lo == 0 && ++next.hi == 0)
			continue;
		if (cmp(nx->first, next) <= 0) {
			if (cmp(nx->last, cur->last) > 0)
				cur->last = nx->last;
		} else {
			b->range[++o] = *nx;
		}
	}
	b->n = o + 1;
}

int banlist_load(struct banlist *b, const char *text, size_t len, const char *path, char *err,
		 size_t errlen)
{
	struct errbuf e = {err, errlen, 0, path, 0, 0};
	size_t cap = 0, i = 0;
	unsigned line = 0;
	int ret = 0;

	memset(b, 0, sizeof(*b));
	if (err && errlen)
		err[0] = '\0';
	while (i < len) {
		const char *s = text + i, *nl = memchr(s, '\n', len - i), *hash, *end, *tok;
		size_t ll = nl ? (size_t)(nl - s) : len - i;
		struct banlist_range r;

		line++;
		i += ll + 1;
		hash = memchr(s, '#', ll);
		end = hash ? hash : s + ll;
		while (s < end && is_space(*s))
			s++;
		while (end > s && is_space(end[-1]))
			end--;
		if (s == end)
			continue;
		for (tok = s; tok < end && !is_space(*tok); tok++)
			;
		if (tok != end) {
			char q[256];

			report(&e, line, "%s: one address or CIDR block per line",
			       quote(s, (size_t)(end - s), q));
			continue;
		}
		if (parse_entry(&e, line, s, (size_t)(end - s), &r) < 0)
			continue;
		/* Room for r and the IPv4 block it may embed. */
		if (b->n + 2 > cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct banlist_range *nr = realloc(b->range, ncap * sizeof(*nr));

			if (!nr) {
				ret = -ENOMEM;
				goto out;
			}
			b->range = nr;
			cap = ncap;
		}
		b->range[b->n++] = r;
		if (embedded_v4(&r, &b->range[b->n]))
			b->n++;
		b->entries++;
	}
	if (e.count) {
		char more[128];
		int n = snprintf(more, sizeof(more), "%s%s: %u more errors not shown",
				 e.used ? "\n" : "", path, e.dropped);

		if (e.dropped && err && n > 0 && (size_t)n < sizeof(more) &&
		    (size_t)n < errlen - e.used)
			memcpy(err + e.used, more, (size_t)n + 1);
		ret = e.count > INT_MAX ? INT_MAX : (int)e.count;
		goto out;
	}
	merge(b);
	return 0;
out:
	banlist_free(b);
	return ret;
}

static bool lookup(const struct banlist *b, struct banlist_u128 v)
{
	size_t lo = 0, hi = b->n;

	/* The last range whose first address is <= v. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cmp(b->range[mid].first, v) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && cmp(v, b->range[lo - 1].last) <= 0;
}

bool banlist_match(const struct banlist *b, const union etr_sockaddr *sa)
{
	uint8_t a[16] = {0};
	uint32_t v4;

	if (sa->sa.sa_family == AF_INET) {
		a[10] = a[11] = 0xff;
		memcpy(a + 12, &sa->in.sin_addr, 4);
		return lookup(b, from_bytes(a));
	}
	if (sa->sa.sa_family != AF_INET6)
		return false;
	memcpy(a, &sa->in6.sin6_addr, 16);
	if (lookup(b, from_bytes(a)))
		return true;
	/* An IPv6 form that embeds IPv4 (NAT64, 6to4, ...): as that IPv4. */
	if (!addrclass_v4_embedded(sa, &v4))
		return false;
	memset(a, 0, sizeof(a));
	a[10] = a[11] = 0xff;
	a[12] = (uint8_t)(v4 >> 24);
	a[13] = (uint8_t)(v4 >> 16);
	a[14] = (uint8_t)(v4 >> 8);
	a[15] = (uint8_t)v4;
	return lookup(b, from_bytes(a));
}

void banlist_free(struct banlist *b)
{
	free(b->range);
	memset(b, 0, sizeof(*b));
}

int banlist_load_file(struct banlist *b, const char *path, char *err, size_t errlen)
{
	size_t len = 0;
	char *text = conf_read_file(path, &len);
	int rc;

	if (!text) {
		rc = -errno;
		if (err && errlen)
			snprintf(err, errlen, "ban-file %s: %s", path, strerror(errno));
		return rc;
	}
	rc = banlist_load(b, text, len, path, err, errlen);
	free(text);
	return rc;
}
