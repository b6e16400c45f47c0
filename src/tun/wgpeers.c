/* SPDX-License-Identifier: ISC */
/* WireGuard peers: the reconcile plan (a merge of two key-sorted sets) and
 * the userspace API's text, both ways. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "b64.h"
#include "wgpeers.h"

int wgp_public_key(const uint8_t priv[WGP_KEY_LEN], uint8_t pub[WGP_KEY_LEN])
{
	EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, WGP_KEY_LEN);
	size_t len = WGP_KEY_LEN;
	int rc = -EIO;

	if (k && EVP_PKEY_get_raw_public_key(k, pub, &len) == 1 && len == WGP_KEY_LEN)
		rc = 0;
	EVP_PKEY_free(k);
	return rc;
}

int wgp_keypair(uint8_t priv[WGP_KEY_LEN], uint8_t pub[WGP_KEY_LEN])
{
	if (RAND_priv_bytes(priv, WGP_KEY_LEN) != 1)
		return -EIO;
	/* RFC 7748 5's clamping, as WireGuard's tools store a private key
	 * (X25519 clamps again when it multiplies: the same public key). */
	priv[0] &= 248;
	priv[31] = (uint8_t)((priv[31] & 127) | 64);
	return wgp_public_key(priv, pub);
}

bool wgp_key_from_b64(const char *s, size_t n, uint8_t key[WGP_KEY_LEN])
{
	return b64_decode(s, n, key, WGP_KEY_LEN);
}

void wgp_key_to_b64(const uint8_t key[WGP_KEY_LEN], char out[WGP_KEY_B64_LEN + 1])
{
	b64_encode(out, key, WGP_KEY_LEN);
}

/* Whether two keys differ, in time that does not depend on where. */
static bool wgp_key_differs(const uint8_t a[WGP_KEY_LEN], const uint8_t b[WGP_KEY_LEN])
{
	uint8_t d = 0;

	for (size_t i = 0; i < WGP_KEY_LEN; i++)
		d |= a[i] ^ b[i];
	return d != 0;
}

static bool wgp_key_zero(const uint8_t k[WGP_KEY_LEN])
{
	static const uint8_t zero[WGP_KEY_LEN];

	return !wgp_key_differs(k, zero);
}

bool wgp_device_differs(const struct wgp_device *dev, const uint8_t priv[WGP_KEY_LEN],
			uint16_t port)
{
	return !dev->has_private_key || wgp_key_differs(dev->private_key, priv) ||
	       dev->listen_port != port;
}

static void wgp_cidr_mask(struct wgp_cidr *c)
{
	size_t len = c->family == AF_INET ? 4 : 16;

	for (size_t i = 0; i < len; i++) {
		unsigned keep = c->bits > 8 * i ? c->bits - 8 * i : 0;

		if (keep < 8)
			c->addr[i] &= (uint8_t)(0xff00u >> keep);
	}
}

int wgp_cidr_parse(const char *s, size_t n, struct wgp_cidr *c)
{
	char ip[INET6_ADDRSTRLEN];
	const char *slash = memchr(s, '/', n);
	size_t al = slash ? (size_t)(slash - s) : n;
	unsigned bits = 0, max;

	memset(c, 0, sizeof(*c));
	if (al == 0 || al >= sizeof(ip))
		return -EINVAL;
	memcpy(ip, s, al);
	ip[al] = '\0';
	if (inet_pton(AF_INET, ip, c->addr) == 1) {
		c->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, ip, c->addr) == 1) {
		c->family = AF_INET6;
		max = 128;
	} else {
		return -EINVAL;
	}
	if (!slash) {
		bits = max;
	} else {
		size_t dl = n - al - 1;

		/* 1..3 digits, no leading zero but "0" itself. */
		if (dl < 1 || dl > 3 || (dl > 1 && slash[1] == '0'))
			return -EINVAL;
		for (size_t i = 1; i <= dl; i++) {
			if (slash[i] < '0' || slash[i] > '9')
				return -EINVAL;
			bits = bits * 10 + (unsigned)(slash[i] - '0');
		}
		if (bits > max)
			return -EINVAL;
	}
	c->bits = (uint8_t)bits;
	wgp_cidr_mask(c);
	return 0;
}

size_t wgp_cidr_str(const struct wgp_cidr *c, char out[WGP_CIDR_STRLEN])
{
	char ip[INET6_ADDRSTRLEN] = "";
	int len;

	inet_ntop(c->family == AF_INET ? AF_INET : AF_INET6, c->addr, ip, sizeof(ip));
	len = snprintf(out, WGP_CIDR_STRLEN, "%s/%u", ip, c->bits);
	return len > 0 ? (size_t)len : 0;
}

static int wgp_cidr_cmp(const void *a, const void *b)
{
	const struct wgp_cidr *x = a, *y = b;
	int d;

	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	d = memcmp(x->addr, y->addr, sizeof(x->addr));
	if (d)
		return d;
	return (int)x->bits - (int)y->bits;
}

void wgp_peer_canon(struct wgp_peer *p)
{
	size_t o = 0;

	if (p->n_allowed > WGP_ALLOWED_MAX)
		p->n_allowed = WGP_ALLOWED_MAX;
	qsort(p->allowed, p->n_allowed, sizeof(p->allowed[0]), wgp_cidr_cmp);
	for (size_t i = 0; i < p->n_allowed; i++)
		if (o == 0 || wgp_cidr_cmp(&p->allowed[o - 1], &p->allowed[i]) != 0)
			p->allowed[o++] = p->allowed[i];
	p->n_allowed = (uint16_t)o;
}

/* An allowed IP and the peer that gave it, for wgp_set_check. */
struct wgp_owned {
	struct wgp_cidr c;
	size_t peer;
};

static int wgp_owned_cmp(const void *a, const void *b)
{
	return wgp_cidr_cmp(&((const struct wgp_owned *)a)->c, &((const struct wgp_owned *)b)->c);
}

int wgp_set_check(const struct wgp_peer *p, size_t n, const uint8_t own[WGP_KEY_LEN], char *err,
		  size_t errlen)
{
	struct wgp_owned *all;
	size_t m = 0;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		if (memcmp(p[i].key, own, WGP_KEY_LEN) == 0) {
			snprintf(err, errlen, "peer %zu has the relay's own public key", i + 1);
			return -EINVAL;
		}
		m += p[i].n_allowed < WGP_ALLOWED_MAX ? p[i].n_allowed : WGP_ALLOWED_MAX;
	}
	if (m < 2)
		return 0;
	all = malloc(m * sizeof(*all));
	if (!all) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < p[i].n_allowed && j < WGP_ALLOWED_MAX; j++)
			all[m++] = (struct wgp_owned){p[i].allowed[j], i};
	qsort(all, m, sizeof(*all), wgp_owned_cmp);
	for (size_t k = 1; k < m && rc == 0; k++) {
		char t[WGP_CIDR_STRLEN];

		if (all[k].peer == all[k - 1].peer || wgp_owned_cmp(&all[k - 1], &all[k]) != 0)
			continue;
		wgp_cidr_str(&all[k].c, t);
		snprintf(err, errlen, "allowed IP %s given to two peers", t);
		rc = -EINVAL;
	}
	free(all);
	return rc;
}

/* Whether block c holds address a (c's family, host bits ignored). */
static bool wgp_cidr_holds(const struct wgp_cidr *c, const uint8_t *a)
{
	struct wgp_cidr h = {.family = c->family, .bits = c->bits};

	memcpy(h.addr, a, c->family == AF_INET ? 4 : 16);
	wgp_cidr_mask(&h);
	return memcmp(h.addr, c->addr, sizeof(h.addr)) == 0;
}

int wgp_set_check_self(const struct wgp_peer *p, size_t n, int family, const uint8_t *addr,
		       unsigned prefix, char *err, size_t errlen)
{
	struct wgp_cidr net = {.family = (uint8_t)family, .bits = (uint8_t)prefix};
	unsigned max = family == AF_INET ? 32 : 128;
	char t[WGP_CIDR_STRLEN], a[INET6_ADDRSTRLEN] = "";

	if (family != AF_INET && family != AF_INET6)
		return 0;
	memcpy(net.addr, addr, family == AF_INET ? 4 : 16);
	wgp_cidr_mask(&net);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < p[i].n_allowed && j < WGP_ALLOWED_MAX; j++) {
			const struct wgp_cidr *c = &p[i].allowed[j];
			const uint8_t *hit = NULL;

			if (c->family != family)
				continue;
			if (wgp_cidr_holds(c, addr))
				hit = addr;
			/* A /31 or /127 has no network address of its own
			 * (RFC 3021): both are hosts. */
			else if (prefix + 1 < max && wgp_cidr_holds(c, net.addr))
				hit = net.addr;
			if (!hit)
				continue;
			wgp_cidr_str(c, t);
			inet_ntop(family, hit, a, sizeof(a));
			snprintf(
			    err, errlen, "peer %zu's allowed IP %s holds the relay's %s %s", i + 1,
			    t, hit == addr ? "own tunnel address" : "tunnel network's address", a);
			return -EINVAL;
		}
	return 0;
}

static int wgp_key_cmp(const void *a, const void *b)
{
	return memcmp(((const struct wgp_peer *)a)->key, ((const struct wgp_peer *)b)->key,
		      WGP_KEY_LEN);
}

static bool wgp_sorted_unique(struct wgp_peer *p, size_t n)
{
	if (n > 1) /* none may come as NULL: qsort's array may not be */
		qsort(p, n, sizeof(*p), wgp_key_cmp);
	for (size_t i = 0; i < n; i++) {
		wgp_peer_canon(&p[i]);
		if (i && wgp_key_cmp(&p[i - 1], &p[i]) == 0)
			return false;
	}
	return true;
}

static bool wgp_same_allowed(const struct wgp_peer *a, const struct wgp_peer *b)
{
	return !a->allowed_over && !b->allowed_over && a->n_allowed == b->n_allowed &&
	       memcmp(a->allowed, b->allowed, a->n_allowed * sizeof(a->allowed[0])) == 0;
}

int wgp_plan(struct wgp_peer *cur, size_t ncur, struct wgp_peer *want, size_t nwant,
	     struct wgp_op *ops, size_t cap)
{
	size_t n = 0, i, j;

	if (!wgp_sorted_unique(cur, ncur) || !wgp_sorted_unique(want, nwant))
		return -EINVAL;
	/* Three passes over the merge, so the plan reads removes, updates,
	 * adds: an allowed IP moving from a removed peer to another is
	 * free before it is given (WireGuard would move it either way). */
	for (int pass = WGP_OP_REMOVE; pass <= WGP_OP_ADD; pass++) {
		for (i = 0, j = 0; i < ncur || j < nwant;) {
			int d = i == ncur ? 1 : j == nwant ? -1 : wgp_key_cmp(&cur[i], &want[j]);
			struct wgp_op op = {0};

			if (d < 0) {
				op.kind = WGP_OP_REMOVE;
				op.peer = &cur[i++];
			} else if (d > 0) {
				op.kind = WGP_OP_ADD;
				op.peer = &want[j++];
			} else {
				op.kind = WGP_OP_UPDATE;
				op.psk_changed = memcmp(cur[i].psk, want[j].psk, WGP_KEY_LEN) != 0;
				op.allowed_changed = !wgp_same_allowed(&cur[i], &want[j]);
				op.peer = &want[j];
				i++, j++;
				if (!op.psk_changed && !op.allowed_changed)
					continue; /* unchanged: never touched */
			}
			if (op.kind != pass)
				continue;
			if (n == cap)
				return -ENOSPC;
			ops[n++] = op;
		}
	}
	return (int)n;
}

static void wgp_hex(char out[WGP_KEY_HEX_LEN + 1], const uint8_t key[WGP_KEY_LEN])
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < WGP_KEY_LEN; i++) {
		out[2 * i] = digits[key[i] >> 4];
		out[2 * i + 1] = digits[key[i] & 15];
	}
	out[WGP_KEY_HEX_LEN] = '\0';
}

/* Append to out[*len..cap); false when it does not fit. */
static bool wgp_put(char *out, size_t cap, size_t *len, const char *k, const char *v)
{
	int w = snprintf(out + *len, cap - *len, "%s=%s\n", k, v);

	if (w < 0 || (size_t)w >= cap - *len)
		return false;
	*len += (size_t)w;
	return true;
}

/* One op's lines. */
static bool wgp_put_op(char *out, size_t cap, size_t *len, const struct wgp_op *op)
{
	const struct wgp_peer *p = op->peer;
	char hex[WGP_KEY_HEX_LEN + 1], cidr[WGP_CIDR_STRLEN];
	static const uint8_t zero[WGP_KEY_LEN];
	bool add = op->kind == WGP_OP_ADD;

	wgp_hex(hex, p->key);
	if (!wgp_put(out, cap, len, "public_key", hex))
		return false;
	if (op->kind == WGP_OP_REMOVE)
		return wgp_put(out, cap, len, "remove", "true");
	if ((add && memcmp(p->psk, zero, WGP_KEY_LEN) != 0) || (!add && op->psk_changed)) {
		wgp_hex(hex, p->psk);
		if (!wgp_put(out, cap, len, "preshared_key", hex))
			return false;
	}
	if (add || op->allowed_changed) {
		if (!wgp_put(out, cap, len, "replace_allowed_ips", "true"))
			return false;
		for (size_t i = 0; i < p->n_allowed && i < WGP_ALLOWED_MAX; i++) {
			wgp_cidr_str(&p->allowed[i], cidr);
			if (!wgp_put(out, cap, len, "allowed_ip", cidr))
				return false;
		}
	}
	return true;
}

int wgp_uapi_set(char *out, size_t cap, const struct wgp_op *ops, size_t nops, size_t *done)
{
	size_t len = 0;

	*done = 0;
	if (!wgp_put(out, cap, &len, "set", "1"))
		return -ENOSPC;
	for (size_t i = 0; i < nops; i++) {
		size_t before = len;

		/* Room for this op and the closing empty line. */
		if (!wgp_put_op(out, cap - 1, &len, &ops[i])) {
			len = before;
			break;
		}
		*done = i + 1;
	}
	if (*done == 0 && nops > 0)
		return -ENOSPC;
	out[len++] = '\n';
	if (len < cap)
		out[len] = '\0';
	return (int)len;
}

int wgp_uapi_device(char *out, size_t cap, const uint8_t priv[WGP_KEY_LEN], uint16_t port)
{
	char hex[WGP_KEY_HEX_LEN + 1];
	int len;

	wgp_hex(hex, priv);
	len = snprintf(out, cap, "set=1\nprivate_key=%s\nlisten_port=%u\n\n", hex, port);
	OPENSSL_cleanse(hex, sizeof(hex));
	if (len < 0 || (size_t)len >= cap)
		return -ENOSPC;
	return len;
}

static bool wgp_hex_key(const char *v, size_t n, uint8_t key[WGP_KEY_LEN])
{
	if (n != WGP_KEY_HEX_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = v[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;

		if (d < 0)
			return false;
		if (i % 2 == 0)
			key[i / 2] = (uint8_t)(d << 4);
		else
			key[i / 2] |= (uint8_t)d;
	}
	return true;
}

/* A decimal of at most 19 digits, no sign. */
static bool wgp_num(const char *v, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t x = 0;

	if (n == 0 || n > 19)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return false;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	if (x > max)
		return false;
	*out = x;
	return true;
}

static bool wgp_is(const char *k, size_t n, const char *word)
{
	return strlen(word) == n && memcmp(k, word, n) == 0;
}

int wgp_uapi_parse_get(const char *text, size_t len, struct wgp_device *dev, struct wgp_peer *peers,
		       size_t cap, size_t *npeers)
{
	struct wgp_peer *p = NULL;
	size_t pos = 0;
	bool have_errno = false;
	uint64_t err = 0, x;

	memset(dev, 0, sizeof(*dev));
	*npeers = 0;
	while (pos < len) {
		const char *l = text + pos, *nl = memchr(l, '\n', len - pos), *eq, *v;
		size_t ll, kl, vl;

		if (!nl)
			return -EPROTO; /* truncated */
		ll = (size_t)(nl - l);
		pos += ll + 1;
		if (ll == 0) /* the empty line: the end */
			return !have_errno ? -EPROTO : err ? -(int)err : 0;
		if (have_errno)
			return -EPROTO; /* errno is the last line */
		eq = memchr(l, '=', ll);
		if (!eq || eq == l)
			return -EPROTO;
		kl = (size_t)(eq - l);
		v = eq + 1;
		vl = ll - kl - 1;
		if (wgp_is(l, kl, "errno")) {
			if (!wgp_num(v, vl, 4095, &err))
				return -EPROTO;
			have_errno = true;
		} else if (wgp_is(l, kl, "public_key")) {
			if (*npeers == cap)
				return -E2BIG;
			p = &peers[(*npeers)++];
			memset(p, 0, sizeof(*p));
			if (!wgp_hex_key(v, vl, p->key))
				return -EPROTO;
		} else if (!p) {
			/* The device's keys come before the first peer. */
			if (wgp_is(l, kl, "private_key")) {
				uint8_t k[WGP_KEY_LEN];

				if (!wgp_hex_key(v, vl, k))
					return -EPROTO;
				/* wireguard-go answers all zero for none. */
				dev->has_private_key = !wgp_key_zero(k);
				memcpy(dev->private_key, k, sizeof(k));
				explicit_bzero(k, sizeof(k));
			} else if (wgp_is(l, kl, "listen_port")) {
				if (!wgp_num(v, vl, 65535, &x))
					return -EPROTO;
				dev->listen_port = (uint16_t)x;
			} else if (wgp_is(l, kl, "fwmark")) {
				if (!wgp_num(v, vl, UINT32_MAX, &x))
					return -EPROTO;
				dev->fwmark = (uint32_t)x;
			}
		} else if (wgp_is(l, kl, "preshared_key")) {
			if (!wgp_hex_key(v, vl, p->psk))
				return -EPROTO;
		} else if (wgp_is(l, kl, "allowed_ip")) {
			struct wgp_cidr c;

			if (wgp_cidr_parse(v, vl, &c) != 0)
				return -EPROTO;
			if (p->n_allowed == WGP_ALLOWED_MAX)
				p->allowed_over = true;
			else
				p->allowed[p->n_allowed++] = c;
		} else if (wgp_is(l, kl, "last_handshake_time_sec")) {
			if (!wgp_num(v, vl, INT64_MAX, &x))
				return -EPROTO;
			p->handshake_sec = (int64_t)x;
		} else if (wgp_is(l, kl, "last_handshake_time_nsec")) {
			if (!wgp_num(v, vl, 999999999, &x))
				return -EPROTO;
			p->handshake_nsec = (uint32_t)x;
		}
	}
	return -EPROTO; /* no empty line */
}

int wgp_uapi_errno(const char *text, size_t len)
{
	struct wgp_device dev;
	size_t n;

	return wgp_uapi_parse_get(text, len, &dev, NULL, 0, &n);
}

/* Ages past this are taken as this: 30 years, far from int64_t's ns. */
#define WGP_AGE_MAX_SEC (30ll * 365 * 86400)

void wgp_ages(const struct wgp_peer *p, size_t n, const bool *skip, int64_t now_sec,
	      uint32_t now_nsec, const uint64_t *bound_ns, unsigned nb, uint64_t *hist,
	      uint64_t *sum_ns, uint64_t *never)
{
	memset(hist, 0, (nb + 1) * sizeof(*hist));
	*sum_ns = 0;
	*never = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t ds, age;
		unsigned b = 0;

		if (skip && skip[i])
			continue;
		if (p[i].handshake_sec == 0 && p[i].handshake_nsec == 0) {
			(*never)++;
			continue;
		}
		/* Bounded before the subtraction: a bogus time cannot wrap. */
		if (p[i].handshake_sec > now_sec)
			ds = -1;
		else if (p[i].handshake_sec < now_sec - WGP_AGE_MAX_SEC)
			ds = WGP_AGE_MAX_SEC;
		else
			ds = now_sec - p[i].handshake_sec;
		age = ds * 1000000000ll + (int64_t)now_nsec - (int64_t)p[i].handshake_nsec;
		if (age < 0)
			age = 0;
		while (b < nb && (uint64_t)age > bound_ns[b])
			b++;
		hist[b]++;
		*sum_ns += (uint64_t)age;
	}
}
