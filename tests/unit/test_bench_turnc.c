/* SPDX-License-Identifier: ISC */
/* etrelay-load's TURN client (bench/turnc.c): a bare Allocate draws the
 * challenge, the signed one passes the relay's own credential check, answers
 * are matched to their transaction and checked, 401/438 retry only with a
 * new nonce, and ChannelBind names the channel and the peer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <string.h>

#include "../../bench/turnc.h"

static const char secret[] = "a-bench-secret-of-at-least-32-bytes!";
static const char realm[] = "bench.realm";

static struct turnc_cred cred;

static int setup(void **state)
{
	(void)state;
	return turnc_cred_init(&cred, (const uint8_t *)secret, strlen(secret), "load", 4000000000u);
}

/* The server's answer to the request in buf: class cls, an ERROR-CODE when
 * code, REALM and NONCE when nonce, signed with key when key. */
static size_t answer(uint8_t *out, const uint8_t *req, enum stun_class cls, int code,
		     const char *nonce, const uint8_t *key, const union etr_sockaddr *relayed)
{
	struct stun_msg m;
	struct stun_builder b;

	assert_int_equal(stun_parse(req, STUN_HDR_LEN + (req[2] << 8 | req[3]), &m), 0);
	stun_build_begin(&b, out, 1024, stun_type(m.method, cls), m.tid);
	if (code)
		stun_add_error(&b, code, NULL);
	if (nonce) {
		stun_add_attr(&b, STUN_A_REALM, realm, strlen(realm));
		stun_add_attr(&b, STUN_A_NONCE, nonce, strlen(nonce));
	}
	if (relayed)
		stun_add_xor_addr(&b, STUN_A_XOR_RELAYED_ADDRESS, relayed);
	if (key)
		stun_add_integrity(&b, key, TURN_KEY_LEN);
	return stun_build_finish(&b);
}

static void test_allocate_goes_bare_then_signed_after_401(void **state)
{
	struct turnc t;
	uint8_t req[TURNC_REQ_MAX], ans[1024];
	struct stun_msg m;
	struct turn_secrets s = {.secret = {(const uint8_t *)secret}, .len = {strlen(secret)}};
	struct turn_auth a;
	union etr_sockaddr rel = {.in = {.sin_family = AF_INET, .sin_port = htons(25001)}};
	union bench_sockaddr got;
	char reason[64];
	size_t n;
	int code;

	(void)state;
	rel.in.sin_addr.s_addr = htonl(0x7f000001);
	turnc_init(&t, &cred, 7);
	n = turnc_allocate(&t, req);
	assert_int_equal(stun_parse(req, n, &m), 0);
	assert_int_equal(m.method, STUN_ALLOCATE);
	assert_true(stun_has(m.requested_transport));
	assert_false(stun_has(m.mi));

	n = answer(ans, req, STUN_ERROR, 401, "nonce-1", NULL, NULL);
	assert_int_equal(turnc_answer(&t, ans, n, &code, reason, NULL), TURNC_RETRY);
	assert_int_equal(code, 401);

	/* Signed now: the relay's own check takes it. */
	n = turnc_allocate(&t, req);
	assert_int_equal(stun_parse(req, n, &m), 0);
	assert_int_equal(turn_auth_check(&s, &m, realm, strlen(realm), 1700000000u, &a),
			 TURN_AUTH_OK);

	/* A success signed with the key: OK, and the relayed address. */
	n = answer(ans, req, STUN_SUCCESS, 0, NULL, a.key, &rel);
	assert_int_equal(turnc_answer(&t, ans, n, &code, reason, &got), TURNC_OK);
	assert_int_equal(ntohs(got.in.sin_port), 25001);
	assert_int_equal(ntohl(got.in.sin_addr.s_addr), 0x7f000001);
}

static void test_answers_are_matched_and_checked(void **state)
{
	struct turnc t;
	uint8_t req[TURNC_REQ_MAX], old[TURNC_REQ_MAX], ans[1024], bad_key[TURN_KEY_LEN];
	char reason[64];
	size_t n, oldn;
	int code;

	(void)state;
	memset(bad_key, 0x5a, sizeof(bad_key));
	turnc_init(&t, &cred, 9);
	oldn = turnc_allocate(&t, old);
	n = answer(ans, old, STUN_ERROR, 401, "nonce-1", NULL, NULL);
	assert_int_equal(turnc_answer(&t, ans, n, &code, reason, NULL), TURNC_RETRY);
	n = turnc_refresh(&t, req, 0);
	assert_true(n > 0 && oldn > 0);

	/* The answer to the earlier transaction is not this one's. */
	n = answer(ans, old, STUN_SUCCESS, 0, NULL, NULL, NULL);
	assert_int_equal(turnc_answer(&t, ans, n, &code, reason, NULL), TURNC_IGNORE);
	/* A success with the wrong key fails its integrity. */
	n = answer(ans, req, STUN_SUCCESS, 0, NULL, bad_key, NULL);
	assert_int_equal(turnc_answer(&t, ans, n, &code, reason, NULL), TURNC_BAD);
	/* Garbage. */
	assert_int_equal(
	    turnc_answer(&t, (const uint8_t *)"\x40\x00\x00\x00", 4, &code, reason, NULL),
	    TURNC_BAD);
}

static void test_401_with_the_same_nonce_is_an_error_438_retries(void **state)
{
	struct turnc t;
	uint8_t req[TURNC_REQ_MAX], ans[1024];
	char reason[64];
	size_t n;
	int code;

	(void)state;
	turnc_init(&t, &cred, 11);
	n = turnc_allocate(&t, req);
	n = answer(ans, req, STUN_ERROR, 401, "nonce-1", NULL, NULL);
	assert_int_equal(turnc_answer(&t, ans, n, &code, reason, NULL), TURNC_RETRY);
	/* Signed, and refused again with the same nonce: the secret is wrong. */
	turnc_allocate(&t, req);
	n = answer(ans, req, STUN_ERROR, 401, "nonce-1", NULL, NULL);
	assert_int_equal(turnc_answer(&t, ans, n, &code, reason, NULL), TURNC_ERROR);
	assert_int_equal(code, 401);
	assert_string_equal(reason, "Unauthorized");
	/* A stale nonce: try again with the new one. */
	turnc_allocate(&t, req);
	n = answer(ans, req, STUN_ERROR, 438, "nonce-2", NULL, NULL);
	assert_int_equal(turnc_answer(&t, ans, n, &code, reason, NULL), TURNC_RETRY);
	/* Any other error is a verdict. */
	turnc_allocate(&t, req);
	n = answer(ans, req, STUN_ERROR, 508, NULL, NULL, NULL);
	assert_int_equal(turnc_answer(&t, ans, n, &code, reason, NULL), TURNC_ERROR);
	assert_int_equal(code, 508);
	/* Forgotten: the next request goes bare again. */
	turnc_forget(&t);
	n = turnc_allocate(&t, req);
	{
		struct stun_msg m;

		assert_int_equal(stun_parse(req, n, &m), 0);
		assert_false(stun_has(m.mi));
		assert_false(stun_has(m.username));
	}
}

static void test_channel_bind_names_channel_and_peer(void **state)
{
	struct turnc t;
	uint8_t req[TURNC_REQ_MAX];
	union bench_sockaddr peer = {.in = {.sin_family = AF_INET, .sin_port = htons(27961)}};
	union etr_sockaddr got;
	struct stun_msg m;
	uint16_t ch;
	size_t n;

	(void)state;
	peer.in.sin_addr.s_addr = htonl(0x7f000001);
	turnc_init(&t, &cred, 13);
	n = turnc_channel_bind(&t, req, TURNC_CHANNEL, &peer);
	assert_int_equal(stun_parse(req, n, &m), 0);
	assert_int_equal(m.method, STUN_CHANNEL_BIND);
	assert_true(stun_get_channel(&m, &ch));
	assert_int_equal(ch, TURNC_CHANNEL);
	assert_int_equal(m.n_peer, 1);
	assert_int_equal(stun_get_xor_addr(&m, m.peer[0], &got), 0);
	assert_int_equal(ntohs(got.in.sin_port), 27961);
	assert_int_equal(ntohl(got.in.sin_addr.s_addr), 0x7f000001);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_allocate_goes_bare_then_signed_after_401),
	    cmocka_unit_test(test_answers_are_matched_and_checked),
	    cmocka_unit_test(test_401_with_the_same_nonce_is_an_error_438_retries),
	    cmocka_unit_test(test_channel_bind_names_channel_and_peer),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
