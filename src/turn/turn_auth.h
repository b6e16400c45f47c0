/* SPDX-License-Identifier: ISC */
/* TURN credentials: the TURN REST convention (username "<expiry>:<userid>",
 * password base64(HMAC-SHA1(secret, username))), the long-term key
 * MD5(username ":" realm ":" password) (RFC 8489 9.2.2), a check of a
 * request's integrity against the current and next secrets, and stateless
 * nonces bound to the client's address. Pure: `now` is passed in; the MACs
 * come from OpenSSL 3 libcrypto. */
#ifndef ETR_TURN_AUTH_H
#define ETR_TURN_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "stun.h"

/* Secrets tried: the current one and the next (rotation). */
#define TURN_SECRETS_MAX 2
/* The long-term key: MD5, 16 bytes. */
#define TURN_KEY_LEN 16
/* base64 of a 20-byte HMAC-SHA1 is 28 characters; with the NUL. */
#define TURN_PASSWORD_SIZE 29
/* A nonce: 16 hex digits of time, 32 of MAC; with the NUL. */
#define TURN_NONCE_LEN	48
#define TURN_NONCE_SIZE (TURN_NONCE_LEN + 1)
/* The default nonce lifetime (RFC 8656 5: at most an hour is a good rule). */
#define TURN_NONCE_LIFETIME_DEFAULT 3600
/* Longest USERNAME accepted (RFC 8489 14.3: less than 509 bytes). */
#define TURN_AUTH_USERNAME_MAX 508

/* Split a REST username "<expiry>:<userid>" at its FIRST ':' (coturn's
 * default separator; the userid may hold more ':'). The expiry is decimal
 * unix seconds, 1 to 20 digits, no sign; the userid is not empty and has
 * no control character (below 0x20, 0x7f). 0, or -1 when there is no ':',
 * the expiry is not a number or the userid is refused. */
int turn_rest_split(const char *user, size_t len, uint64_t *expiry, const char **userid,
		    size_t *userid_len);

/* The REST password for username under secret: base64(HMAC-SHA1) into out
 * (NUL-terminated). Returns its length (28), or -1 when the MAC fails. */
int turn_rest_password(const uint8_t *secret, size_t secret_len, const char *user, size_t user_len,
		       char out[TURN_PASSWORD_SIZE]);

/* The long-term key MD5(user ":" realm ":" password). 0 or -1. */
int turn_longterm_key(const char *user, size_t user_len, const char *realm, size_t realm_len,
		      const char *password, size_t password_len, uint8_t key[TURN_KEY_LEN]);

/* The secrets a listener accepts: [0] current, [1] next; a secret of
 * length 0 is not configured. The caller owns the bytes. */
struct turn_secrets {
	const uint8_t *secret[TURN_SECRETS_MAX];
	size_t len[TURN_SECRETS_MAX];
};

enum turn_auth_result {
	TURN_AUTH_OK = 0,
	TURN_AUTH_EXPIRED,	 /* integrity good, but now is past the expiry */
	TURN_AUTH_BAD_USERNAME,	 /* no USERNAME, too long, or not "<expiry>:<userid>" */
	TURN_AUTH_NO_INTEGRITY,	 /* no MESSAGE-INTEGRITY(-SHA256) */
	TURN_AUTH_BAD_INTEGRITY, /* no configured secret makes the MAC match */
	TURN_AUTH_UNCACHED,	 /* cached_only, and no key kept for the username */
};

/* What a check found. secret: which one matched (0 current, 1 next; -1
 * none). key: the long-term key that matched (sign the answer with it).
 * userid points into the message. */
struct turn_auth {
	int secret;
	uint64_t expiry;
	const char *userid;
	size_t userid_len;
	uint8_t key[TURN_KEY_LEN];
};

/* Long-term keys derived for usernames that passed a check, so that a
 * client's next request costs one MAC, not the HMAC-SHA1, base64 and MD5 of
 * a derivation per secret. One cache per realm (a listener's, on one
 * worker: no lock). A username enters only after its MAC matched, so a
 * flood of made-up names evicts nothing; an entry holds until a later one
 * takes its place or the secrets change (gen). Usernames longer than
 * TURN_KEY_CACHE_USER_MAX are not kept. */
#define TURN_KEY_CACHE_USER_MAX 128

struct turn_key_entry {
	uint64_t gen; /* the secrets' generation + 1; 0: empty */
	uint8_t have; /* bit i: key[i] derived under secret i */
	uint8_t len;
	char user[TURN_KEY_CACHE_USER_MAX];
	uint8_t key[TURN_SECRETS_MAX][TURN_KEY_LEN];
};

struct turn_key_cache {
	struct turn_key_entry *e;
	uint32_t mask; /* entries - 1 */
	uint8_t hkey[16];
	uint64_t hits;	  /* MACs checked with a kept key */
	uint64_t derived; /* keys derived */
};

/* Room for entries usernames (rounded up to a power of two, at least 2),
 * hashed under hkey (random). 0, -EINVAL or -ENOMEM. */
int turn_key_cache_init(struct turn_key_cache *c, uint32_t entries, const uint8_t hkey[16]);
void turn_key_cache_free(struct turn_key_cache *c);

/* Whether the cache holds user's key under the secrets of generation gen. */
bool turn_key_cache_has(const struct turn_key_cache *c, const char *user, size_t len, uint64_t gen);

/* turn_auth_check with a cache (NULL: none) for the secrets of generation
 * gen (which changes whenever they do). cached_only: derive nothing; a
 * username without a kept key gets TURN_AUTH_UNCACHED. */
enum turn_auth_result turn_auth_check_cached(const struct turn_secrets *s, uint64_t gen,
					     struct turn_key_cache *c, bool cached_only,
					     const struct stun_msg *m, const char *realm,
					     size_t realm_len, uint64_t now, struct turn_auth *out);

/* Check a request's USERNAME and integrity (MESSAGE-INTEGRITY-SHA256 when
 * present, else MESSAGE-INTEGRITY, see stun_check_integrity) with the
 * realm given (the listener's), trying each configured secret in order.
 * The expiry is checked after the MAC, against now (unix seconds): a
 * credential is good through its expiry second, expired when now > expiry,
 * so the caller can tell an expired but genuine credential (refreshes may
 * go on) from a forged one. Nothing in out is meaningful unless the result
 * is OK or EXPIRED. */
enum turn_auth_result turn_auth_check(const struct turn_secrets *s, const struct stun_msg *m,
				      const char *realm, size_t realm_len, uint64_t now,
				      struct turn_auth *out);

/* Stateless nonces: "<16 hex digits of the time><32 hex digits of
 * HMAC-SHA256(key, family, address, port, time) truncated to 16 bytes>",
 * printable and quoted-string safe. The key is per process: random bytes
 * from the caller. The time is whatever clock `now` is in (seconds); the
 * checker must use the same one. */
struct turn_nonce_key {
	uint8_t k[32];
};

/* Set the key from 32 random bytes. */
void turn_nonce_key_init(struct turn_nonce_key *key, const uint8_t random[32]);

/* A nonce for this client at now into out (NUL-terminated). Returns its
 * length (TURN_NONCE_LEN), or -1 (an address of unknown family, MAC
 * failure). */
int turn_nonce_make(const struct turn_nonce_key *key, const union etr_sockaddr *client,
		    uint64_t now, char out[TURN_NONCE_SIZE]);

enum turn_nonce_result {
	TURN_NONCE_OK = 0,
	TURN_NONCE_STALE, /* genuine, made more than lifetime seconds ago: 438 */
	TURN_NONCE_BAD,	  /* not ours: malformed, tampered, another client's, or
			     from the future */
};

/* Check a nonce (len bytes, as the NONCE attribute carries it) from
 * client at now; lifetime in seconds (TURN_NONCE_LIFETIME_DEFAULT). */
enum turn_nonce_result turn_nonce_check(const struct turn_nonce_key *key,
					const union etr_sockaddr *client, const char *nonce,
					size_t len, uint64_t now, uint32_t lifetime);

#endif
