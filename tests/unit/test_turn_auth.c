/* SPDX-License-Identifier: ISC */
/* Unit tests for turn_auth.c: REST usernames and passwords (expected values
 * computed independently with Python's hmac/base64/hashlib), the long-term
 * key of RFC 5769 2.4, checks against the current and next secrets,
 * expiry, and stateless nonces (ok, stale, bad, tampered, other client). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "turn_auth.h"

static const char secret_cur[] = "etrelay-test-secret-current-0123456789";
static const char secret_next[] = "etrelay-test-secret-next-0123456789abc";
static const char user[] = "1700000000:player:42";

/* python3 -c 'import hmac,hashlib,base64; print(base64.b64encode(hmac.new(
 *   b"etrelay-test-secret-current-0123456789", b"1700000000:player:42",
 *   hashlib.sha1).digest()))' (and the same with the next secret). */
static const char pw_cur[] = "2JoN+yWzk7qryNVXs+pmv0t+aH0=";
static const char pw_next[] = "iFPVRJzlJE45iCRvvYhTA4YyDsE=";

static const char realm[] = "etrelay.test";

static void test_rest_username_splits_at_the_first_colon(void **state)
{
	uint64_t exp;
	const char *id;
	size_t idlen;

	(void)state;
	assert_int_equal(turn_rest_split(user, strlen(user), &exp, &id, &idlen), 0);
	assert_int_equal(exp, 1700000000u);
	assert_int_equal(idlen, strlen("player:42"));
	assert_memory_equal(id, "player:42", idlen);
	assert_int_equal(turn_rest_split("5:\xc3\xa9", 4, &exp, &id, &idlen), 0);
	assert_int_equal(exp, 5);
	assert_int_equal(idlen, 2);
	assert_int_equal(turn_rest_split("18446744073709551615:x", 22, &exp, &id, &idlen), 0);
	assert_true(exp == UINT64_MAX);
}

static void test_rest_username_without_numeric_expiry_is_refused(void **state)
{
	static const char *const bad[] = {
	    "alice",	":alice",   "x1700000000:alice",      "17000a0000:alice",	 "-1:alice",
	    "+1:alice", " 1:alice", "18446744073709551616:x", "000000000000000000001:x", "",
	};
	uint64_t exp;
	const char *id;
	size_t idlen;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(turn_rest_split(bad[i], strlen(bad[i]), &exp, &id, &idlen), -1);
	/* Only the bytes given count: "12:" cut before the colon. */
	assert_int_equal(turn_rest_split("12:a", 2, &exp, &id, &idlen), -1);
}

static void test_rest_username_with_an_empty_userid_or_control_bytes_is_refused(void **state)
{
	static const struct {
		const char *s;
		size_t len;
	} bad[] = {
	    {"5:", 2}, {"5:a\0b", 5}, {"5:a\nb", 5}, {"5:\r", 3}, {"5:a\x7f", 4}, {"5:\tx", 4},
	};
	uint64_t exp;
	const char *id;
	size_t idlen;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(turn_rest_split(bad[i].s, bad[i].len, &exp, &id, &idlen), -1);
	/* Printable, spaces and ':' inside are a userid. */
	assert_int_equal(turn_rest_split("5:a b:c~", 8, &exp, &id, &idlen), 0);
	assert_int_equal(idlen, 6);
}

static void test_rest_password_matches_python(void **state)
{
	char pw[TURN_PASSWORD_SIZE];

	(void)state;
	assert_int_equal(turn_rest_password((const uint8_t *)secret_cur, strlen(secret_cur), user,
					    strlen(user), pw),
			 28);
	assert_string_equal(pw, pw_cur);
	assert_int_equal(turn_rest_password((const uint8_t *)secret_next, strlen(secret_next), user,
					    strlen(user), pw),
			 28);
	assert_string_equal(pw, pw_next);
}

static void test_long_term_key_of_rfc5769(void **state)
{
	/* RFC 5769 2.4's user (UTF-8 bytes as given), realm and password;
	 * python3 hashlib.md5 of "<user>:example.org:TheMatrIX". */
	static const char u[] = "\xe3\x83\x9e\xe3\x83\x88\xe3\x83\xaa\xe3\x83\x83\xe3\x82\xaf"
				"\xe3\x82\xb9";
	static const uint8_t want[16] = {0xe8, 0xca, 0x7a, 0xd5, 0x9d, 0x5e, 0xb0, 0x51,
					 0x8e, 0x31, 0x29, 0x11, 0xd2, 0xda, 0xb2, 0xa9};
	uint8_t key[TURN_KEY_LEN];

	(void)state;
	assert_int_equal(turn_longterm_key(u, strlen(u), "example.org", 11, "TheMatrIX", 9, key),
			 0);
	assert_memory_equal(key, want, 16);
}

/* A request signed as a client with this password would sign it. */
static size_t signed_request(uint8_t *out, size_t cap, const char *username, const char *pw,
			     bool sha256)
{
	static const uint8_t tid[12] = {1, 2, 3};
	struct stun_builder b;
	uint8_t key[TURN_KEY_LEN];

	assert_int_equal(turn_longterm_key(username, strlen(username), realm, strlen(realm), pw,
					   strlen(pw), key),
			 0);
	stun_build_begin(&b, out, cap, stun_type(STUN_ALLOCATE, STUN_REQUEST), tid);
	stun_add_u32(&b, STUN_A_REQUESTED_TRANSPORT, 17u << 24);
	stun_add_attr(&b, STUN_A_USERNAME, username, strlen(username));
	stun_add_attr(&b, STUN_A_REALM, realm, strlen(realm));
	stun_add_attr(&b, STUN_A_NONCE, "n", 1);
	if (sha256)
		stun_add_integrity_sha256(&b, key, sizeof(key));
	else
		stun_add_integrity(&b, key, sizeof(key));
	stun_add_fingerprint(&b);
	return stun_build_finish(&b);
}

static struct turn_secrets both(void)
{
	struct turn_secrets s = {
	    .secret = {(const uint8_t *)secret_cur, (const uint8_t *)secret_next},
	    .len = {strlen(secret_cur), strlen(secret_next)},
	};
	return s;
}

static void test_check_finds_which_secret_matched(void **state)
{
	struct turn_secrets s = both();
	struct turn_auth a;
	struct stun_msg m;
	uint8_t msg[512], key[16];
	size_t n;

	(void)state;
	n = signed_request(msg, sizeof(msg), user, pw_cur, false);
	assert_int_equal(stun_parse(msg, n, &m), 0);
	assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1700000000u, &a),
			 TURN_AUTH_OK);
	assert_int_equal(a.secret, 0);
	assert_int_equal(a.expiry, 1700000000u);
	assert_int_equal(a.userid_len, 9);
	assert_memory_equal(a.userid, "player:42", 9);
	turn_longterm_key(user, strlen(user), realm, strlen(realm), pw_cur, strlen(pw_cur), key);
	assert_memory_equal(a.key, key, 16);

	/* Signed with the next secret's password (MI-SHA256 this time). */
	n = signed_request(msg, sizeof(msg), user, pw_next, true);
	assert_int_equal(stun_parse(msg, n, &m), 0);
	assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1, &a), TURN_AUTH_OK);
	assert_int_equal(a.secret, 1);

	/* Only the current secret configured: the next one's client fails. */
	s.len[1] = 0;
	assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1, &a),
			 TURN_AUTH_BAD_INTEGRITY);
	assert_int_equal(a.secret, -1);
	/* Only the next one (current slot empty): it still works. */
	s = both();
	s.len[0] = 0;
	assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1, &a), TURN_AUTH_OK);
	assert_int_equal(a.secret, 1);
}

static void test_check_refuses_wrong_password_realm_and_shapes(void **state)
{
	struct turn_secrets s = both();
	struct turn_auth a;
	struct stun_msg m;
	uint8_t msg[512];
	size_t n;

	(void)state;
	n = signed_request(msg, sizeof(msg), user, "not-the-password", false);
	assert_int_equal(stun_parse(msg, n, &m), 0);
	assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1, &a),
			 TURN_AUTH_BAD_INTEGRITY);
	/* The right password, but another realm configured. */
	n = signed_request(msg, sizeof(msg), user, pw_cur, false);
	assert_int_equal(stun_parse(msg, n, &m), 0);
	assert_int_equal(turn_auth_check(&s, &m, "other.test", 10, 1, &a), TURN_AUTH_BAD_INTEGRITY);
	/* A username with no expiry. */
	n = signed_request(msg, sizeof(msg), "alice", "pw", false);
	assert_int_equal(stun_parse(msg, n, &m), 0);
	assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1, &a),
			 TURN_AUTH_BAD_USERNAME);
	/* No integrity at all; no username at all. */
	{
		static const uint8_t tid[12] = {0};
		struct stun_builder b;

		stun_build_begin(&b, msg, sizeof(msg), 0x0003, tid);
		stun_add_attr(&b, STUN_A_USERNAME, user, strlen(user));
		assert_int_equal(stun_parse(msg, stun_build_finish(&b), &m), 0);
		assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1, &a),
				 TURN_AUTH_NO_INTEGRITY);
		stun_build_begin(&b, msg, sizeof(msg), 0x0003, tid);
		stun_add_integrity(&b, (const uint8_t *)"k", 1);
		assert_int_equal(stun_parse(msg, stun_build_finish(&b), &m), 0);
		assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1, &a),
				 TURN_AUTH_BAD_USERNAME);
	}
	/* Nothing configured: nobody gets in. */
	memset(&s, 0, sizeof(s));
	n = signed_request(msg, sizeof(msg), user, pw_cur, false);
	assert_int_equal(stun_parse(msg, n, &m), 0);
	assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1, &a),
			 TURN_AUTH_BAD_INTEGRITY);
}

static void test_expiry_is_checked_against_now_after_the_mac(void **state)
{
	struct turn_secrets s = both();
	struct turn_auth a;
	struct stun_msg m;
	uint8_t msg[512];
	size_t n;

	(void)state;
	n = signed_request(msg, sizeof(msg), user, pw_cur, false);
	assert_int_equal(stun_parse(msg, n, &m), 0);
	/* Good through the expiry second. */
	assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1700000000u, &a),
			 TURN_AUTH_OK);
	assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1700000001u, &a),
			 TURN_AUTH_EXPIRED);
	assert_int_equal(a.secret, 0);
	assert_int_equal(a.expiry, 1700000000u);
	/* Expired and forged is forged. */
	n = signed_request(msg, sizeof(msg), user, "forged", false);
	assert_int_equal(stun_parse(msg, n, &m), 0);
	assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1800000000u, &a),
			 TURN_AUTH_BAD_INTEGRITY);
}

static void test_cache_keeps_a_key_only_after_its_mac_matched(void **state)
{
	struct turn_secrets s = both();
	struct turn_key_cache c;
	struct turn_auth a;
	struct stun_msg m;
	uint8_t msg[512], hkey[16] = {1, 2, 3}, key[16];
	size_t n;

	(void)state;
	assert_int_equal(turn_key_cache_init(&c, 8, hkey), 0);
	/* A wrong password: keys derived, none kept. */
	n = signed_request(msg, sizeof(msg), user, "not-the-password", false);
	assert_int_equal(stun_parse(msg, n, &m), 0);
	assert_int_equal(turn_auth_check_cached(&s, 0, &c, false, &m, realm, strlen(realm), 1, &a),
			 TURN_AUTH_BAD_INTEGRITY);
	assert_int_equal(c.derived, 2);
	assert_false(turn_key_cache_has(&c, user, strlen(user), 0));
	/* ...and with nothing kept, cached_only derives nothing. */
	assert_int_equal(turn_auth_check_cached(&s, 0, &c, true, &m, realm, strlen(realm), 1, &a),
			 TURN_AUTH_UNCACHED);
	assert_int_equal(c.derived, 2);
	/* The right one: derived once, then each request costs its MAC only. */
	n = signed_request(msg, sizeof(msg), user, pw_cur, false);
	assert_int_equal(stun_parse(msg, n, &m), 0);
	assert_int_equal(turn_auth_check_cached(&s, 0, &c, false, &m, realm, strlen(realm), 1, &a),
			 TURN_AUTH_OK);
	assert_int_equal(c.derived, 3);
	assert_true(turn_key_cache_has(&c, user, strlen(user), 0));
	for (int i = 0; i < 3; i++) {
		assert_int_equal(
		    turn_auth_check_cached(&s, 0, &c, i == 2, &m, realm, strlen(realm), 1, &a),
		    TURN_AUTH_OK);
		assert_int_equal(a.secret, 0);
	}
	assert_int_equal(c.derived, 3);
	assert_int_equal(c.hits, 3);
	turn_longterm_key(user, strlen(user), realm, strlen(realm), pw_cur, strlen(pw_cur), key);
	assert_memory_equal(a.key, key, 16);
	/* Signed under the next secret: that key is derived and kept too. */
	n = signed_request(msg, sizeof(msg), user, pw_next, false);
	assert_int_equal(stun_parse(msg, n, &m), 0);
	assert_int_equal(turn_auth_check_cached(&s, 0, &c, false, &m, realm, strlen(realm), 1, &a),
			 TURN_AUTH_OK);
	assert_int_equal(a.secret, 1);
	assert_int_equal(c.derived, 4);
	assert_int_equal(turn_auth_check_cached(&s, 0, &c, true, &m, realm, strlen(realm), 1, &a),
			 TURN_AUTH_OK);
	assert_int_equal(c.derived, 4);
	/* New secrets (another generation): nothing kept counts. */
	assert_false(turn_key_cache_has(&c, user, strlen(user), 1));
	assert_int_equal(turn_auth_check_cached(&s, 1, &c, true, &m, realm, strlen(realm), 1, &a),
			 TURN_AUTH_UNCACHED);
	s.len[1] = 0;
	assert_int_equal(turn_auth_check_cached(&s, 1, &c, false, &m, realm, strlen(realm), 1, &a),
			 TURN_AUTH_BAD_INTEGRITY);
	/* Expired but genuine: EXPIRED, from the cache too. */
	n = signed_request(msg, sizeof(msg), user, pw_cur, false);
	assert_int_equal(stun_parse(msg, n, &m), 0);
	assert_int_equal(
	    turn_auth_check_cached(&s, 0, &c, true, &m, realm, strlen(realm), 1700000001u, &a),
	    TURN_AUTH_EXPIRED);
	turn_key_cache_free(&c);
}

static struct turn_nonce_key test_key(uint8_t seed)
{
	struct turn_nonce_key k;
	uint8_t r[32];

	for (int i = 0; i < 32; i++)
		r[i] = (uint8_t)(seed + i * 7);
	turn_nonce_key_init(&k, r);
	return k;
}

static void test_nonce_ok_then_stale(void **state)
{
	struct turn_nonce_key k = test_key(1);
	union etr_sockaddr c;
	char nonce[TURN_NONCE_SIZE];

	(void)state;
	assert_int_equal(addr_parse_numeric("192.0.2.10:5000", &c), 0);
	assert_int_equal(turn_nonce_make(&k, &c, 1000, nonce), TURN_NONCE_LEN);
	assert_int_equal(strlen(nonce), TURN_NONCE_LEN);
	/* Printable and quoted-string safe: lower-case hex only. */
	for (size_t i = 0; i < TURN_NONCE_LEN; i++)
		assert_non_null(strchr("0123456789abcdef", nonce[i]));
	assert_int_equal(turn_nonce_check(&k, &c, nonce, TURN_NONCE_LEN, 1000, 3600),
			 TURN_NONCE_OK);
	assert_int_equal(turn_nonce_check(&k, &c, nonce, TURN_NONCE_LEN, 4600, 3600),
			 TURN_NONCE_OK);
	assert_int_equal(turn_nonce_check(&k, &c, nonce, TURN_NONCE_LEN, 4601, 3600),
			 TURN_NONCE_STALE);
	/* The lifetime is a parameter. */
	assert_int_equal(turn_nonce_check(&k, &c, nonce, TURN_NONCE_LEN, 1011, 10),
			 TURN_NONCE_STALE);
	/* From the future: not ours. */
	assert_int_equal(turn_nonce_check(&k, &c, nonce, TURN_NONCE_LEN, 999, 3600),
			 TURN_NONCE_BAD);
}

static void test_nonce_of_another_client_or_key_is_bad(void **state)
{
	struct turn_nonce_key k = test_key(1), k2 = test_key(2);
	union etr_sockaddr c, other_port, other_ip, v6;
	char nonce[TURN_NONCE_SIZE], n6[TURN_NONCE_SIZE];

	(void)state;
	assert_int_equal(addr_parse_numeric("192.0.2.10:5000", &c), 0);
	assert_int_equal(addr_parse_numeric("192.0.2.10:5001", &other_port), 0);
	assert_int_equal(addr_parse_numeric("192.0.2.11:5000", &other_ip), 0);
	assert_int_equal(addr_parse_numeric("[2001:db8::10]:5000", &v6), 0);
	turn_nonce_make(&k, &c, 1000, nonce);
	assert_int_equal(turn_nonce_check(&k, &other_port, nonce, TURN_NONCE_LEN, 1000, 3600),
			 TURN_NONCE_BAD);
	assert_int_equal(turn_nonce_check(&k, &other_ip, nonce, TURN_NONCE_LEN, 1000, 3600),
			 TURN_NONCE_BAD);
	assert_int_equal(turn_nonce_check(&k, &v6, nonce, TURN_NONCE_LEN, 1000, 3600),
			 TURN_NONCE_BAD);
	/* Another process (key). */
	assert_int_equal(turn_nonce_check(&k2, &c, nonce, TURN_NONCE_LEN, 1000, 3600),
			 TURN_NONCE_BAD);
	/* IPv6 clients work the same. */
	assert_int_equal(turn_nonce_make(&k, &v6, 1000, n6), TURN_NONCE_LEN);
	assert_int_equal(turn_nonce_check(&k, &v6, n6, TURN_NONCE_LEN, 1000, 3600), TURN_NONCE_OK);
	assert_string_not_equal(n6, nonce);
}

static void test_nonce_tampered_is_bad(void **state)
{
	struct turn_nonce_key k = test_key(1);
	union etr_sockaddr c;
	char nonce[TURN_NONCE_SIZE], t[TURN_NONCE_SIZE];

	(void)state;
	assert_int_equal(addr_parse_numeric("192.0.2.10:5000", &c), 0);
	turn_nonce_make(&k, &c, 100000, nonce);
	/* Every position, changed to another hex digit: bad (a younger time
	 * to escape staleness, a changed MAC). */
	for (size_t i = 0; i < TURN_NONCE_LEN; i++) {
		memcpy(t, nonce, sizeof(t));
		t[i] = t[i] == '0' ? '1' : '0';
		assert_int_equal(turn_nonce_check(&k, &c, t, TURN_NONCE_LEN, 100000, 3600),
				 TURN_NONCE_BAD);
	}
	/* Upper case, non-hex, short, long. */
	memcpy(t, nonce, sizeof(t));
	for (size_t i = 0; i < TURN_NONCE_LEN; i++)
		if (t[i] >= 'a')
			t[i] = (char)(t[i] - 'a' + 'A');
	assert_int_equal(turn_nonce_check(&k, &c, t, TURN_NONCE_LEN, 100000, 3600), TURN_NONCE_BAD);
	memcpy(t, nonce, sizeof(t));
	t[20] = 'g';
	assert_int_equal(turn_nonce_check(&k, &c, t, TURN_NONCE_LEN, 100000, 3600), TURN_NONCE_BAD);
	assert_int_equal(turn_nonce_check(&k, &c, nonce, TURN_NONCE_LEN - 1, 100000, 3600),
			 TURN_NONCE_BAD);
	assert_int_equal(turn_nonce_check(&k, &c, "", 0, 100000, 3600), TURN_NONCE_BAD);
	{
		char longer[TURN_NONCE_SIZE + 1];

		memcpy(longer, nonce, TURN_NONCE_LEN);
		longer[TURN_NONCE_LEN] = '0';
		assert_int_equal(turn_nonce_check(&k, &c, longer, TURN_NONCE_LEN + 1, 100000, 3600),
				 TURN_NONCE_BAD);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rest_username_splits_at_the_first_colon),
	    cmocka_unit_test(test_rest_username_without_numeric_expiry_is_refused),
	    cmocka_unit_test(test_rest_username_with_an_empty_userid_or_control_bytes_is_refused),
	    cmocka_unit_test(test_rest_password_matches_python),
	    cmocka_unit_test(test_long_term_key_of_rfc5769),
	    cmocka_unit_test(test_check_finds_which_secret_matched),
	    cmocka_unit_test(test_check_refuses_wrong_password_realm_and_shapes),
	    cmocka_unit_test(test_expiry_is_checked_against_now_after_the_mac),
	    cmocka_unit_test(test_cache_keeps_a_key_only_after_its_mac_matched),
	    cmocka_unit_test(test_nonce_ok_then_stale),
	    cmocka_unit_test(test_nonce_of_another_client_or_key_is_bad),
	    cmocka_unit_test(test_nonce_tampered_is_bad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
