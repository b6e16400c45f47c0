/* SPDX-License-Identifier: ISC */
/* TURN REST credentials, long-term keys and stateless nonces (OpenSSL 3:
 * EVP_Q_mac for the HMACs, EVP_Digest for MD5, EVP_EncodeBlock for base64). */
#include "turn_auth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

int turn_rest_split(const char *user, size_t len, uint64_t *expiry, const char **userid,
		    size_t *userid_len)
{
	const char *colon = memchr(user, ':', len);
	uint64_t v = 0;
	size_t digits;

	if (!colon)
		return -1;
	digits = (size_t)(colon - user);
	if (digits == 0 || digits > 20)
		return -1;
	for (size_t i = 0; i < digits; i++) {
		unsigned d;

		if (user[i] < '0' || user[i] > '9')
			return -1;
		d = (unsigned)(user[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	/* An empty userid would share one user-quota among every such
	 * credential; a control character (NUL, newline) would reach the
	 * logs and the ops plane as it came. */
	if (len - digits - 1 == 0)
		return -1;
	for (const char *p = colon + 1; p < user + len; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return -1;
	*expiry = v;
	*userid = colon + 1;
	*userid_len = len - digits - 1;
	return 0;
}

int turn_rest_password(const uint8_t *secret, size_t secret_len, const char *user, size_t user_len,
		       char out[TURN_PASSWORD_SIZE])
{
	uint8_t mac[20];
	size_t maclen = 0;

	if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA1", NULL, secret_len ? secret : (const uint8_t *)"",
		       secret_len, (const unsigned char *)user, user_len, mac, sizeof(mac),
		       &maclen) ||
	    maclen != sizeof(mac))
		return -1;
	return EVP_EncodeBlock((unsigned char *)out, mac, (int)sizeof(mac));
}

int turn_longterm_key(const char *user, size_t user_len, const char *realm, size_t realm_len,
		      const char *password, size_t password_len, uint8_t key[TURN_KEY_LEN])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned int n = 0;
	int rc = -1;

	if (!ctx)
		return -1;
	if (EVP_DigestInit_ex(ctx, EVP_md5(), NULL) && EVP_DigestUpdate(ctx, user, user_len) &&
	    EVP_DigestUpdate(ctx, ":", 1) && EVP_DigestUpdate(ctx, realm, realm_len) &&
	    EVP_DigestUpdate(ctx, ":", 1) && EVP_DigestUpdate(ctx, password, password_len) &&
	    EVP_DigestFinal_ex(ctx, key, &n) && n == TURN_KEY_LEN)
		rc = 0;
	EVP_MD_CTX_free(ctx);
	return rc;
}

int turn_key_cache_init(struct turn_key_cache *c, uint32_t entries, const uint8_t hkey[16])
{
	uint32_t n = 2;

	memset(c, 0, sizeof(*c));
	if (entries == 0 || entries > (1u << 20))
		return -EINVAL;
	while (n < entries)
		n *= 2;
	c->e = calloc(n, sizeof(*c->e));
	if (!c->e)
		return -ENOMEM;
	c->mask = n - 1;
	memcpy(c->hkey, hkey, sizeof(c->hkey));
	return 0;
}

void turn_key_cache_free(struct turn_key_cache *c)
{
	if (c->e)
		explicit_bzero(c->e, (size_t)(c->mask + 1) * sizeof(*c->e));
	free(c->e);
	c->e = NULL;
}

/* user's entry, or NULL; *slot is where it would go (an empty or stale one
 * of its two, else the second: the older by insertion, roughly). */
static struct turn_key_entry *cache_find(const struct turn_key_cache *c, const char *user,
					 size_t len, uint64_t gen, struct turn_key_entry **slot)
{
	uint64_t h;
	struct turn_key_entry *e[2];

	*slot = NULL;
	if (!c || !c->e || len > TURN_KEY_CACHE_USER_MAX)
		return NULL;
	h = addr_siphash(user, len, c->hkey);
	e[0] = &c->e[h & c->mask];
	e[1] = &c->e[(h >> 32) & c->mask];
	for (int k = 0; k < 2; k++)
		if (e[k]->gen == gen + 1 && e[k]->len == len && memcmp(e[k]->user, user, len) == 0)
			return e[k];
	*slot = e[0]->gen != gen + 1 ? e[0] : e[1]->gen != gen + 1 ? e[1] : e[(h >> 63) & 1];
	return NULL;
}

bool turn_key_cache_has(const struct turn_key_cache *c, const char *user, size_t len, uint64_t gen)
{
	struct turn_key_entry *slot;

	return cache_find(c, user, len, gen, &slot) != NULL;
}

enum turn_auth_result turn_auth_check_cached(const struct turn_secrets *s, uint64_t gen,
					     struct turn_key_cache *c, bool cached_only,
					     const struct stun_msg *m, const char *realm,
					     size_t realm_len, uint64_t now, struct turn_auth *out)
{
	struct turn_key_entry *e, *slot;
	uint8_t keys[TURN_SECRETS_MAX][TURN_KEY_LEN];
	uint8_t have = 0;
	const char *user;
	size_t ulen;

	memset(out, 0, sizeof(*out));
	out->secret = -1;
	if (!stun_has(m->username) || m->username.len > TURN_AUTH_USERNAME_MAX)
		return TURN_AUTH_BAD_USERNAME;
	user = (const char *)stun_attr_ptr(m, m->username);
	ulen = m->username.len;
	if (turn_rest_split(user, ulen, &out->expiry, &out->userid, &out->userid_len) != 0)
		return TURN_AUTH_BAD_USERNAME;
	if (!stun_has(m->mi) && !stun_has(m->mi256))
		return TURN_AUTH_NO_INTEGRITY;
	memset(keys, 0, sizeof(keys));
	e = cache_find(c, user, ulen, gen, &slot);
	if (e) {
		have = e->have;
		memcpy(keys, e->key, sizeof(keys));
	} else if (cached_only) {
		return TURN_AUTH_UNCACHED;
	}
	for (int i = 0; i < TURN_SECRETS_MAX; i++) {
		char pw[TURN_PASSWORD_SIZE];
		int pwlen;

		if (!s->len[i])
			continue;
		if (have & (1u << i)) {
			c->hits++;
		} else {
			/* A username kept under the other secret only: derive
			 * this one's too, unless nothing may be derived now. */
			if (cached_only)
				continue;
			pwlen = turn_rest_password(s->secret[i], s->len[i], user, ulen, pw);
			if (pwlen < 0 || turn_longterm_key(user, ulen, realm, realm_len, pw,
							   (size_t)pwlen, keys[i]) != 0)
				continue;
			have |= (uint8_t)(1u << i);
			if (c)
				c->derived++;
		}
		if (!stun_check_integrity(m, keys[i], TURN_KEY_LEN))
			continue;
		memcpy(out->key, keys[i], TURN_KEY_LEN);
		out->secret = i;
		if (!e)
			e = slot;
		if (e) {
			e->gen = gen + 1;
			e->len = (uint8_t)ulen;
			memcpy(e->user, user, ulen);
			e->have = have;
			memcpy(e->key, keys, sizeof(keys));
		}
		explicit_bzero(keys, sizeof(keys));
		return now > out->expiry ? TURN_AUTH_EXPIRED : TURN_AUTH_OK;
	}
	explicit_bzero(keys, sizeof(keys));
	return TURN_AUTH_BAD_INTEGRITY;
}

enum turn_auth_result turn_auth_check(const struct turn_secrets *s, const struct stun_msg *m,
				      const char *realm, size_t realm_len, uint64_t now,
				      struct turn_auth *out)
{
	return turn_auth_check_cached(s, 0, NULL, false, m, realm, realm_len, now, out);
}

void turn_nonce_key_init(struct turn_nonce_key *key, const uint8_t random[32])
{
	memcpy(key->k, random, sizeof(key->k));
}

static const char hexd[] = "0123456789abcdef";

/* The 16 MAC bytes for this client and time; false for an unknown family. */
static bool nonce_mac(const struct turn_nonce_key *key, const union etr_sockaddr *client,
		      uint64_t t, uint8_t mac16[16])
{
	uint8_t in[1 + 16 + 2 + 8], mac[32];
	size_t n = 0, maclen = 0;

	if (client->sa.sa_family == AF_INET) {
		in[n++] = 4;
		memcpy(in + n, &client->in.sin_addr, 4);
		n += 4;
		memcpy(in + n, &client->in.sin_port, 2);
	} else if (client->sa.sa_family == AF_INET6) {
		in[n++] = 6;
		memcpy(in + n, &client->in6.sin6_addr, 16);
		n += 16;
		memcpy(in + n, &client->in6.sin6_port, 2);
	} else {
		return false;
	}
	n += 2;
	for (int i = 7; i >= 0; i--)
		in[n++] = (uint8_t)(t >> (8 * i));
	if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key->k, sizeof(key->k), in, n, mac,
		       sizeof(mac), &maclen) ||
	    maclen != sizeof(mac))
		return false;
	memcpy(mac16, mac, 16);
	return true;
}

int turn_nonce_make(const struct turn_nonce_key *key, const union etr_sockaddr *client,
		    uint64_t now, char out[TURN_NONCE_SIZE])
{
	uint8_t mac[16];

	if (!nonce_mac(key, client, now, mac))
		return -1;
	for (int i = 0; i < 16; i++)
		out[i] = hexd[(now >> (4 * (15 - i))) & 0xF];
	for (int i = 0; i < 16; i++) {
		out[16 + 2 * i] = hexd[mac[i] >> 4];
		out[17 + 2 * i] = hexd[mac[i] & 0xF];
	}
	out[TURN_NONCE_LEN] = '\0';
	return TURN_NONCE_LEN;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1; /* only the lower case we make */
}

enum turn_nonce_result turn_nonce_check(const struct turn_nonce_key *key,
					const union etr_sockaddr *client, const char *nonce,
					size_t len, uint64_t now, uint32_t lifetime)
{
	uint8_t got[16], want[16];
	uint64_t t = 0;

	if (len != TURN_NONCE_LEN)
		return TURN_NONCE_BAD;
	for (int i = 0; i < 16; i++) {
		int v = hexval(nonce[i]);

		if (v < 0)
			return TURN_NONCE_BAD;
		t = t << 4 | (uint64_t)v;
	}
	for (int i = 0; i < 16; i++) {
		int hi = hexval(nonce[16 + 2 * i]), lo = hexval(nonce[17 + 2 * i]);

		if (hi < 0 || lo < 0)
			return TURN_NONCE_BAD;
		got[i] = (uint8_t)(hi << 4 | lo);
	}
	if (!nonce_mac(key, client, t, want) || CRYPTO_memcmp(got, want, sizeof(got)) != 0)
		return TURN_NONCE_BAD;
	if (t > now)
		return TURN_NONCE_BAD;
	if (now - t > lifetime)
		return TURN_NONCE_STALE;
	return TURN_NONCE_OK;
}
