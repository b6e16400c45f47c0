/* SPDX-License-Identifier: ISC */
/* Unit tests for qcache.c: store, answer byte for byte, expire, refuse. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "qcache.h"

#define FF  "\xff\xff\xff\xff"
#define SEC 1000000000ull
#define MS  1000000ull
#define T0  (1000 * SEC)
/* A string literal as bytes and length (embedded NULs kept). */
#define PKT(s) (const uint8_t *)(s), (sizeof(s) - 1)

/* OpenArena (ioquake3): the challenge is set first and every later key is
 * put in front of it, so it ends up last. */
#define OA_INFO                                                                                    \
	FF "infoResponse\n\\voip\\opus\\g_needpass\\0\\pure\\1\\gametype\\0"                       \
	   "\\sv_maxclients\\12\\g_humanplayers\\0\\clients\\0\\mapname\\oasago2"                  \
	   "\\hostname\\OA behind etrelay\\protocol\\71\\gamename\\Quake3Arena"                    \
	   "\\challenge\\2105733597"

/* ET: Legacy: keys are appended, so the challenge comes first. */
#define ETL_INFO                                                                                   \
	FF "infoResponse\n\\challenge\\xyz\\version\\ET Legacy v2.83.1 linux-x86_64"               \
	   "\\protocol\\84\\hostname\\^1ET^7 relay\\serverload\\0\\mapname\\oasis"                 \
	   "\\clients\\2\\humans\\1\\sv_maxclients\\20\\gametype\\4\\pure\\1"

/* ET: Legacy status: the challenge goes after the server info and before
 * "version", which it sets again; players follow the info line. */
#define ETL_STATUS                                                                                 \
	FF "statusResponse\n\\g_gametype\\4\\sv_hostname\\^1ET^7 relay\\mapname\\oasis"            \
	   "\\challenge\\1234\\version\\ET Legacy v2.83.1\n"                                       \
	   "12 48 \"^2player\"\n0 0 \"challenge\\\\evil\"\n"

static struct qcache c;

static int setup(void **state)
{
	(void)state;
	return qcache_init(&c, QCACHE_TTL_DEFAULT, 0, QCACHE_REPLY_MAX);
}

static int teardown(void **state)
{
	(void)state;
	qcache_free(&c);
	return 0;
}

static void store(enum q3_cmd kind, const char *reply, size_t len, uint64_t now)
{
	assert_int_equal(qcache_store(&c, kind, (const uint8_t *)reply, len, now), 0);
}

#define STORE(kind, lit, now) store(kind, lit, sizeof(lit) - 1, now)

/* Answer `query` at `now` and compare it with `want`, byte for byte. */
static void answers(const char *query, size_t qlen, uint64_t now, const char *want, size_t wlen)
{
	uint8_t out[QCACHE_REPLY_MAX + 128];
	int n = qcache_answer(&c, (const uint8_t *)query, qlen, now, out, sizeof(out));

	assert_int_equal(n, (int)wlen);
	assert_memory_equal(out, want, wlen);
}

#define ANSWERS(q, now, want)	   answers(q, sizeof(q) - 1, now, want, sizeof(want) - 1)
#define ANSWERS_BUF(q, qlen, want) answers(q, qlen, T0, want, sizeof(want) - 1)

static void misses(const char *query, size_t qlen, uint64_t now)
{
	uint8_t out[QCACHE_REPLY_MAX + 128];

	assert_int_equal(qcache_answer(&c, (const uint8_t *)query, qlen, now, out, sizeof(out)),
			 -1);
}

#define MISSES(q, now) misses(q, sizeof(q) - 1, now)

static void test_qcache_rewrites_a_trailing_challenge(void **state)
{
	(void)state;
	STORE(Q3_INFORESPONSE, OA_INFO, T0);
	ANSWERS(FF "getinfo abc", T0,
		FF "infoResponse\n\\voip\\opus\\g_needpass\\0\\pure\\1\\gametype\\0"
		   "\\sv_maxclients\\12\\g_humanplayers\\0\\clients\\0\\mapname\\oasago2"
		   "\\hostname\\OA behind etrelay\\protocol\\71\\gamename\\Quake3Arena"
		   "\\challenge\\abc");
	/* A longer challenge than the cached one. */
	ANSWERS(FF "getinfo 0123456789abcdef0123", T0,
		FF "infoResponse\n\\voip\\opus\\g_needpass\\0\\pure\\1\\gametype\\0"
		   "\\sv_maxclients\\12\\g_humanplayers\\0\\clients\\0\\mapname\\oasago2"
		   "\\hostname\\OA behind etrelay\\protocol\\71\\gamename\\Quake3Arena"
		   "\\challenge\\0123456789abcdef0123");
}

/* A worker's copy taken from another's: the same answers, the same age,
 * the refresh out seen; an empty source empties the copy. */
static void test_qcache_copy_gives_the_same_answers_and_refresh(void **state)
{
	struct qcache other;
	uint8_t a[QCACHE_REPLY_MAX], b[QCACHE_REPLY_MAX];
	int na, nb;

	(void)state;
	assert_int_equal(qcache_init(&other, QCACHE_TTL_DEFAULT, 0, QCACHE_REPLY_MAX), 0);
	STORE(Q3_INFORESPONSE, OA_INFO, T0);
	qcache_refresh_sent(&c, Q3_GETSTATUS, T0);
	qcache_copy(&other, &c);
	na = qcache_answer(&c, (const uint8_t *)FF "getinfo xy", 12, T0 + 5, a, sizeof(a));
	nb = qcache_answer(&other, (const uint8_t *)FF "getinfo xy", 12, T0 + 5, b, sizeof(b));
	assert_true(na > 0);
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, (size_t)na);
	assert_false(qcache_refresh_due(&other, Q3_GETSTATUS, T0 + 10));
	assert_true(qcache_refresh_due(&other, Q3_GETINFO, T0 + QCACHE_TTL_DEFAULT + 1));
	assert_false(qcache_refresh_due(&other, Q3_GETINFO, T0 + 1));
	qcache_invalidate(&c);
	qcache_copy(&other, &c);
	assert_int_equal(
	    qcache_answer(&other, (const uint8_t *)FF "getinfo xy", 12, T0 + 5, b, sizeof(b)), -1);
	qcache_free(&other);
}

static void test_qcache_rewrites_a_leading_challenge(void **state)
{
	(void)state;
	STORE(Q3_INFORESPONSE, ETL_INFO, T0);
	ANSWERS(FF "getinfo Q-7~x", T0,
		FF "infoResponse\n\\challenge\\Q-7~x\\version\\ET Legacy v2.83.1 linux-x86_64"
		   "\\protocol\\84\\hostname\\^1ET^7 relay\\serverload\\0\\mapname\\oasis"
		   "\\clients\\2\\humans\\1\\sv_maxclients\\20\\gametype\\4\\pure\\1");
}

static void test_qcache_rewrites_the_status_info_line_and_keeps_the_players(void **state)
{
	(void)state;
	STORE(Q3_STATUSRESPONSE, ETL_STATUS, T0);
	ANSWERS(FF "getstatus 77", T0,
		FF "statusResponse\n\\g_gametype\\4\\sv_hostname\\^1ET^7 relay\\mapname\\oasis"
		   "\\challenge\\77\\version\\ET Legacy v2.83.1\n"
		   "12 48 \"^2player\"\n0 0 \"challenge\\\\evil\"\n");
	ANSWERS(FF "getstatus", T0,
		FF "statusResponse\n\\g_gametype\\4\\sv_hostname\\^1ET^7 relay\\mapname\\oasis"
		   "\\version\\ET Legacy v2.83.1\n"
		   "12 48 \"^2player\"\n0 0 \"challenge\\\\evil\"\n");
}

static void test_qcache_removes_the_pair_when_the_query_has_no_challenge(void **state)
{
	(void)state;
	STORE(Q3_INFORESPONSE, OA_INFO, T0);
	ANSWERS(FF "getinfo", T0,
		FF "infoResponse\n\\voip\\opus\\g_needpass\\0\\pure\\1\\gametype\\0"
		   "\\sv_maxclients\\12\\g_humanplayers\\0\\clients\\0\\mapname\\oasago2"
		   "\\hostname\\OA behind etrelay\\protocol\\71\\gamename\\Quake3Arena");
	STORE(Q3_INFORESPONSE, ETL_INFO, T0);
	ANSWERS(FF "getinfo \t \n", T0,
		FF "infoResponse\n\\version\\ET Legacy v2.83.1 linux-x86_64"
		   "\\protocol\\84\\hostname\\^1ET^7 relay\\serverload\\0\\mapname\\oasis"
		   "\\clients\\2\\humans\\1\\sv_maxclients\\20\\gametype\\4\\pure\\1");
	/* The first line is all the server reads. */
	ANSWERS(FF "getinfo\nabc", T0,
		FF "infoResponse\n\\version\\ET Legacy v2.83.1 linux-x86_64"
		   "\\protocol\\84\\hostname\\^1ET^7 relay\\serverload\\0\\mapname\\oasis"
		   "\\clients\\2\\humans\\1\\sv_maxclients\\20\\gametype\\4\\pure\\1");
}

static void test_qcache_inserts_a_challenge_the_cached_reply_lacks(void **state)
{
	(void)state;
	/* What ioquake3 says to a bare "getstatus": no pair at all. */
	STORE(Q3_STATUSRESPONSE,
	      FF "statusResponse\n\\sv_hostname\\noname\\mapname\\q3dm17\n5 0 \"bot\"\n", T0);
	ANSWERS(FF "getstatus abc", T0,
		FF "statusResponse\n\\challenge\\abc\\sv_hostname\\noname\\mapname\\q3dm17\n"
		   "5 0 \"bot\"\n");
	ANSWERS(FF "getstatus", T0,
		FF "statusResponse\n\\sv_hostname\\noname\\mapname\\q3dm17\n5 0 \"bot\"\n");
	/* An empty info string gets the pair as its whole content. */
	STORE(Q3_INFORESPONSE, FF "infoResponse\n", T0);
	ANSWERS(FF "getinfo abc", T0, FF "infoResponse\n\\challenge\\abc");
}

static void test_qcache_takes_the_first_word_after_the_command(void **state)
{
	(void)state;
	STORE(Q3_INFORESPONSE, FF "infoResponse\n\\hostname\\x\\challenge\\old", T0);
	ANSWERS(FF "getinfo\tabc\r\n", T0, FF "infoResponse\n\\hostname\\x\\challenge\\abc");
	ANSWERS(FF "getinfo   abc def", T0, FF "infoResponse\n\\hostname\\x\\challenge\\abc");
	ANSWERS(FF "getinfo abc\0junk", T0, FF "infoResponse\n\\hostname\\x\\challenge\\abc");
	/* The server would end the word at the quote; we do not guess. */
	MISSES(FF "getinfo abc\"def\"", T0);
}

static void test_qcache_passes_a_lone_slash_in_a_challenge(void **state)
{
	(void)state;
	/* dpmaster 1.x draws challenges from 33..126 without excluding '/'. */
	STORE(Q3_INFORESPONSE, FF "infoResponse\n\\challenge\\old", T0);
	ANSWERS(FF "getinfo a/b/", T0, FF "infoResponse\n\\challenge\\a/b/");
	ANSWERS(FF "getinfo /x", T0, FF "infoResponse\n\\challenge\\/x");
}

static void test_qcache_matches_commands_in_any_case(void **state)
{
	(void)state;
	STORE(Q3_INFORESPONSE, FF "infoResponse\n\\challenge\\old\\hostname\\x", T0);
	STORE(Q3_STATUSRESPONSE, FF "statusResponse\n\\challenge\\old\\hostname\\x\n", T0);
	ANSWERS(FF "getInfo 1", T0, FF "infoResponse\n\\challenge\\1\\hostname\\x");
	ANSWERS(FF "GETINFO 2", T0, FF "infoResponse\n\\challenge\\2\\hostname\\x");
	ANSWERS(FF "getStatus 3", T0, FF "statusResponse\n\\challenge\\3\\hostname\\x\n");
}

static void test_qcache_serves_until_the_ttl_then_misses(void **state)
{
	(void)state;
	STORE(Q3_INFORESPONSE, FF "infoResponse\n\\challenge\\old", T0);
	ANSWERS(FF "getinfo a", T0, FF "infoResponse\n\\challenge\\a");
	ANSWERS(FF "getinfo a", T0 + SEC - 1, FF "infoResponse\n\\challenge\\a");
	MISSES(FF "getinfo a", T0 + SEC);
	MISSES(FF "getinfo a", T0 + 60 * SEC);
	/* A clock before the store is no proof of freshness. */
	MISSES(FF "getinfo a", T0 - 1);
	/* A fresh store serves again. */
	STORE(Q3_INFORESPONSE, FF "infoResponse\n\\challenge\\old\\clients\\3", T0 + 60 * SEC);
	ANSWERS(FF "getinfo a", T0 + 60 * SEC, FF "infoResponse\n\\challenge\\a\\clients\\3");
}

static void test_qcache_with_zero_ttl_serves_nothing(void **state)
{
	struct qcache z;
	uint8_t out[256];

	(void)state;
	assert_int_equal(qcache_init(&z, 0, 0, QCACHE_REPLY_MAX), 0);
	assert_int_equal(qcache_store(&z, Q3_INFORESPONSE, PKT(FF "infoResponse\n\\a\\b"), T0), 0);
	assert_int_equal(qcache_answer(&z, PKT(FF "getinfo x"), T0, out, sizeof(out)), -1);
	qcache_free(&z);
}

static void test_qcache_misses_when_empty_or_for_the_other_kind(void **state)
{
	(void)state;
	MISSES(FF "getinfo a", T0);
	MISSES(FF "getstatus a", T0);
	STORE(Q3_INFORESPONSE, FF "infoResponse\n\\challenge\\old", T0);
	MISSES(FF "getstatus a", T0);
	ANSWERS(FF "getinfo a", T0, FF "infoResponse\n\\challenge\\a");
}

static void test_qcache_misses_after_invalidate(void **state)
{
	(void)state;
	STORE(Q3_INFORESPONSE, FF "infoResponse\n\\challenge\\old", T0);
	STORE(Q3_STATUSRESPONSE, FF "statusResponse\n\\challenge\\old\n", T0);
	qcache_invalidate(&c);
	MISSES(FF "getinfo a", T0);
	MISSES(FF "getstatus a", T0);
}

static void test_qcache_never_answers_other_commands(void **state)
{
	(void)state;
	STORE(Q3_INFORESPONSE, FF "infoResponse\n\\challenge\\old", T0);
	STORE(Q3_STATUSRESPONSE, FF "statusResponse\n\\challenge\\old\n", T0);
	MISSES(FF "getchallenge 123 ET", T0);
	MISSES(FF "connect \"\\qport\\1\"", T0);
	MISSES(FF "rcon secret status", T0);
	MISSES(FF "getinfos a", T0);
	MISSES(FF "getin", T0);
	MISSES(FF "getinfo\"a\"", T0);
	MISSES(FF "getinfo\\a", T0);
	MISSES(FF " getinfo a", T0);
	MISSES(FF "infoResponse\n\\challenge\\a", T0);
	MISSES("getinfo a", T0);
	MISSES("\xff\xff\xff", T0);
}

static void test_qcache_refuses_challenges_the_server_could_read_otherwise(void **state)
{
	char q[128];

	(void)state;
	STORE(Q3_INFORESPONSE, FF "infoResponse\n\\challenge\\old", T0);
	MISSES(FF "getinfo a\\b", T0);
	MISSES(FF "getinfo \"ab\"", T0);
	MISSES(FF "getinfo a;b", T0);
	MISSES(FF "getinfo a//b", T0);
	MISSES(FF "getinfo a://b", T0);
	MISSES(FF "getinfo a/*b", T0);
	MISSES(FF "getinfo /*x*/ abc", T0);
	MISSES(FF "getinfo //abc", T0);
	MISSES(FF "getinfo a%sb", T0);
	MISSES(FF "getinfo a\x7f", T0);
	MISSES(FF "getinfo a\xe9", T0);
	/* 64 characters are fine, 65 are not. */
	memcpy(q, FF "getinfo ", 12);
	memset(q + 12, 'c', 65);
	misses(q, 12 + 65, T0);
	q[12 + 64] = '\0';
	ANSWERS_BUF(q, 12 + 64,
		    FF "infoResponse\n\\challenge\\"
		       "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc");
}

static void test_qcache_answer_needs_room_in_out(void **state)
{
	const char want[] = FF "infoResponse\n\\challenge\\abc";
	uint8_t out[sizeof(want) - 1];

	(void)state;
	STORE(Q3_INFORESPONSE, FF "infoResponse\n\\challenge\\old", T0);
	assert_int_equal(qcache_answer(&c, PKT(FF "getinfo abcd"), T0, out, sizeof(out)), -1);
	assert_int_equal(qcache_answer(&c, PKT(FF "getinfo abc"), T0, out, sizeof(out)),
			 (int)sizeof(out));
	assert_memory_equal(out, want, sizeof(out));
}

static void test_qcache_store_refuses_malformed_replies_and_keeps_the_last(void **state)
{
	(void)state;
	STORE(Q3_INFORESPONSE, FF "infoResponse\n\\challenge\\old\\v\\1", T0);
	assert_int_equal(
	    qcache_store(&c, Q3_INFORESPONSE, PKT(FF "statusResponse\n\\challenge\\x\n"), T0),
	    -EINVAL);
	assert_int_equal(
	    qcache_store(&c, Q3_STATUSRESPONSE, PKT(FF "infoResponse\n\\challenge\\x"), T0),
	    -EINVAL);
	assert_int_equal(qcache_store(&c, Q3_GETINFO, PKT(FF "getinfo x"), T0), -EINVAL);
	assert_int_equal(qcache_store(&c, Q3_INFORESPONSE, PKT("infoResponse\n\\a\\b"), T0),
			 -EINVAL);
	/* No newline after the command, no leading backslash, a key without
	 * a value, two challenges. */
	assert_int_equal(qcache_store(&c, Q3_INFORESPONSE, PKT(FF "infoResponse \\a\\b"), T0),
			 -EINVAL);
	assert_int_equal(qcache_store(&c, Q3_INFORESPONSE, PKT(FF "infoResponse\\a\\b"), T0),
			 -EINVAL);
	assert_int_equal(qcache_store(&c, Q3_INFORESPONSE, PKT(FF "infoResponse\na\\b"), T0),
			 -EINVAL);
	assert_int_equal(qcache_store(&c, Q3_INFORESPONSE, PKT(FF "infoResponse\n\\a\\b\\c"), T0),
			 -EINVAL);
	assert_int_equal(qcache_store(&c, Q3_INFORESPONSE, PKT(FF "infoResponse\n\\a\\b\\"), T0),
			 -EINVAL);
	assert_int_equal(qcache_store(&c, Q3_INFORESPONSE,
				      PKT(FF "infoResponse\n\\challenge\\1\\Challenge\\2"), T0),
			 -EINVAL);
	ANSWERS(FF "getinfo new", T0, FF "infoResponse\n\\challenge\\new\\v\\1");
}

static void test_qcache_store_takes_65535_bytes_and_no_more(void **state)
{
	static const char head[] = FF "statusResponse\n\\challenge\\old\\hostname\\x\n";
	size_t hl = sizeof(head) - 1;
	uint8_t *big = malloc(QCACHE_REPLY_MAX + 1);
	uint8_t *out = malloc(QCACHE_REPLY_MAX + 1);

	(void)state;
	assert_non_null(big);
	assert_non_null(out);
	memcpy(big, head, hl);
	memset(big + hl, 'p', QCACHE_REPLY_MAX + 1 - hl);
	assert_int_equal(qcache_store(&c, Q3_STATUSRESPONSE, big, QCACHE_REPLY_MAX + 1, T0),
			 -EMSGSIZE);
	assert_int_equal(qcache_store(&c, Q3_STATUSRESPONSE, big, QCACHE_REPLY_MAX, T0), 0);
	/* "old" becomes "ab": one byte shorter, the rest intact. */
	assert_int_equal(qcache_answer(&c, PKT(FF "getstatus ab"), T0, out, QCACHE_REPLY_MAX + 1),
			 QCACHE_REPLY_MAX - 1);
	assert_memory_equal(out, FF "statusResponse\n\\challenge\\ab\\hostname\\x\n", hl - 1);
	assert_memory_equal(out + hl - 1, big + hl, QCACHE_REPLY_MAX - hl);
	free(big);
	free(out);
}

static void test_qcache_store_keeps_its_own_copy(void **state)
{
	char reply[] = FF "infoResponse\n\\challenge\\old\\hostname\\mine";

	(void)state;
	store(Q3_INFORESPONSE, reply, sizeof(reply) - 1, T0);
	memset(reply + 4, 'X', sizeof(reply) - 5);
	ANSWERS(FF "getinfo 9", T0, FF "infoResponse\n\\challenge\\9\\hostname\\mine");
}

static void test_qcache_serves_a_stale_copy_up_to_its_bound(void **state)
{
	struct qcache z;
	uint8_t out[256];

	(void)state;
	assert_int_equal(qcache_init(&z, SEC, 5 * SEC, QCACHE_REPLY_MAX), 0);
	assert_int_equal(
	    qcache_store(&z, Q3_INFORESPONSE, PKT(FF "infoResponse\n\\challenge\\o\\a\\b"), T0), 0);
	assert_true(qcache_answer(&z, PKT(FF "getinfo x"), T0 + 5999 * MS, out, sizeof(out)) > 0);
	assert_int_equal(qcache_answer(&z, PKT(FF "getinfo x"), T0 + 6 * SEC, out, sizeof(out)),
			 -1);
	qcache_free(&z);
}

static void test_qcache_wants_one_refresh_at_a_time(void **state)
{
	struct qcache z;

	(void)state;
	assert_int_equal(qcache_init(&z, SEC, 5 * SEC, QCACHE_REPLY_MAX), 0);
	/* Empty: due, for the query kinds only. */
	assert_true(qcache_refresh_due(&z, Q3_GETINFO, T0));
	assert_true(qcache_refresh_due(&z, Q3_GETSTATUS, T0));
	assert_false(qcache_refresh_due(&z, Q3_GETCHALLENGE, T0));
	qcache_refresh_sent(&z, Q3_GETSTATUS, T0);
	assert_false(qcache_refresh_due(&z, Q3_GETSTATUS, T0 + 10 * MS));
	assert_true(qcache_refresh_due(&z, Q3_GETINFO, T0 + 10 * MS));
	/* The answer ends the refresh; fresh, nothing is due. */
	assert_int_equal(qcache_store(&z, Q3_STATUSRESPONSE,
				      PKT(FF "statusResponse\n\\challenge\\o\n"), T0 + 20 * MS),
			 0);
	assert_false(qcache_refresh_due(&z, Q3_GETSTATUS, T0 + 20 * MS));
	assert_false(qcache_refresh_due(&z, Q3_GETSTATUS, T0 + 1019 * MS));
	/* Past the TTL: one refresh, then none while it is out... */
	assert_true(qcache_refresh_due(&z, Q3_GETSTATUS, T0 + 1020 * MS));
	qcache_refresh_sent(&z, Q3_GETSTATUS, T0 + 1020 * MS);
	assert_false(qcache_refresh_due(&z, Q3_GETSTATUS, T0 + 1500 * MS));
	/* ...until it is given up for lost. */
	assert_false(qcache_refresh_due(&z, Q3_GETSTATUS, T0 + 2019 * MS));
	assert_true(qcache_refresh_due(&z, Q3_GETSTATUS, T0 + 2020 * MS));
	/* The cache off: never due. */
	qcache_free(&z);
	assert_int_equal(qcache_init(&z, 0, 5 * SEC, QCACHE_REPLY_MAX), 0);
	assert_false(qcache_refresh_due(&z, Q3_GETINFO, T0));
	qcache_free(&z);
}

static void test_qcache_keeps_no_reply_above_its_cap(void **state)
{
	struct qcache z;
	uint8_t out[256];

	(void)state;
	assert_int_equal(qcache_init(&z, SEC, 0, 40), 0);
	assert_int_equal(
	    qcache_store(&z, Q3_INFORESPONSE, PKT(FF "infoResponse\n\\challenge\\o"), T0), 0);
	assert_true(qcache_answer(&z, PKT(FF "getinfo x"), T0, out, sizeof(out)) > 0);
	/* A reply that outgrew the cap replaces the copy with nothing. */
	assert_int_equal(
	    qcache_store(&z, Q3_INFORESPONSE,
			 PKT(FF "infoResponse\n\\challenge\\o\\hostname\\0123456789abc"), T0 + MS),
	    -EMSGSIZE);
	assert_int_equal(qcache_answer(&z, PKT(FF "getinfo x"), T0 + MS, out, sizeof(out)), -1);
	assert_true(qcache_refresh_due(&z, Q3_GETINFO, T0 + MS));
	qcache_free(&z);
}

/* Each test gets a fresh cache. */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_qcache_copy_gives_the_same_answers_and_refresh),
	    T(test_qcache_rewrites_a_trailing_challenge),
	    T(test_qcache_rewrites_a_leading_challenge),
	    T(test_qcache_rewrites_the_status_info_line_and_keeps_the_players),
	    T(test_qcache_removes_the_pair_when_the_query_has_no_challenge),
	    T(test_qcache_inserts_a_challenge_the_cached_reply_lacks),
	    T(test_qcache_takes_the_first_word_after_the_command),
	    T(test_qcache_passes_a_lone_slash_in_a_challenge),
	    T(test_qcache_matches_commands_in_any_case),
	    T(test_qcache_serves_until_the_ttl_then_misses),
	    T(test_qcache_with_zero_ttl_serves_nothing),
	    T(test_qcache_misses_when_empty_or_for_the_other_kind),
	    T(test_qcache_misses_after_invalidate),
	    T(test_qcache_never_answers_other_commands),
	    T(test_qcache_refuses_challenges_the_server_could_read_otherwise),
	    T(test_qcache_answer_needs_room_in_out),
	    T(test_qcache_store_refuses_malformed_replies_and_keeps_the_last),
	    T(test_qcache_store_takes_65535_bytes_and_no_more),
	    T(test_qcache_store_keeps_its_own_copy),
	    T(test_qcache_serves_a_stale_copy_up_to_its_bound),
	    T(test_qcache_wants_one_refresh_at_a_time),
	    T(test_qcache_keeps_no_reply_above_its_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
