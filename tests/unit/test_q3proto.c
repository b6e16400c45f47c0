/* SPDX-License-Identifier: ISC */
/* Unit tests for q3proto.c: classify, command words, build, info strings. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <string.h>

#include "huffman.h"
#include "q3proto.h"

/* A string literal as packet bytes and length (embedded NULs kept). */
#define PKT(s) (const uint8_t *)(s), (sizeof(s) - 1)
#define FF     "\xff\xff\xff\xff"

static void assert_classifies(const char *text, enum q3_cmd want)
{
	uint8_t buf[256];
	size_t n = strlen(text);

	assert_true(n + 4 <= sizeof(buf));
	memcpy(buf, FF, 4);
	memcpy(buf + 4, text, n);
	assert_int_equal(q3_classify(buf, n + 4), want);
}

/* q3_is_connectionless */

static void test_q3_is_connectionless_needs_four_ff_bytes(void **state)
{
	(void)state;
	assert_true(q3_is_connectionless(PKT(FF "getinfo")));
	assert_true(q3_is_connectionless(PKT(FF)));
	assert_false(q3_is_connectionless(PKT("\xff\xff\xff")));
	assert_false(q3_is_connectionless(PKT("\xff\xff\xff\xfe"
					      "getinfo")));
	assert_false(q3_is_connectionless(PKT("getinfo xyz")));
	assert_false(q3_is_connectionless(PKT("")));
}

/* q3_classify: every command */

static void test_q3_classify_knows_getchallenge_in_any_case(void **state)
{
	(void)state;
	assert_classifies("getchallenge", Q3_GETCHALLENGE);
	assert_classifies("getChallenge", Q3_GETCHALLENGE);
	assert_classifies("GETCHALLENGE", Q3_GETCHALLENGE);
	assert_classifies("getchallenge 1234 ET", Q3_GETCHALLENGE);
	assert_classifies("getChallenge\n", Q3_GETCHALLENGE);
}

static void test_q3_classify_knows_challenge_response(void **state)
{
	(void)state;
	assert_classifies("challengeResponse 123456789", Q3_CHALLENGERESPONSE);
	assert_classifies("challengeResponse -42 84", Q3_CHALLENGERESPONSE);
	assert_classifies("CHALLENGERESPONSE", Q3_CHALLENGERESPONSE);
}

static void test_q3_classify_knows_getinfo_and_info_response(void **state)
{
	(void)state;
	assert_classifies("getinfo xxx", Q3_GETINFO);
	assert_classifies("getInfo xxx", Q3_GETINFO);
	assert_classifies("getinfo", Q3_GETINFO);
	assert_classifies("infoResponse\n\\challenge\\xxx\\hostname\\srv", Q3_INFORESPONSE);
	assert_classifies("inforesponse\n", Q3_INFORESPONSE);
}

static void test_q3_classify_knows_getstatus_and_status_response(void **state)
{
	(void)state;
	assert_classifies("getstatus", Q3_GETSTATUS);
	assert_classifies("getStatus 1", Q3_GETSTATUS);
	assert_classifies("statusResponse\n\\sv_hostname\\x\n0 0 \"player\"\n", Q3_STATUSRESPONSE);
}

static void test_q3_classify_knows_connect_followed_by_binary(void **state)
{
	(void)state;
	/* ET/Q3 send the userinfo Huffman-compressed: arbitrary bytes. */
	assert_int_equal(q3_classify(PKT(FF "connect \x00\x81\xfe\x22\\\n\xff\x01")), Q3_CONNECT);
	assert_int_equal(q3_classify(PKT(FF "connect \"\\challenge\\1\\qport\\2\"")), Q3_CONNECT);
	assert_int_equal(q3_classify(PKT(FF "Connect \xff\xff")), Q3_CONNECT);
	assert_classifies("connect", Q3_CONNECT);
}

static void test_q3_classify_knows_connect_response(void **state)
{
	(void)state;
	assert_classifies("connectResponse", Q3_CONNECTRESPONSE);
	assert_classifies("connectResponse 123456", Q3_CONNECTRESPONSE);
	assert_classifies("CONNECTRESPONSE\n", Q3_CONNECTRESPONSE);
}

static void test_q3_classify_knows_the_remaining_commands(void **state)
{
	(void)state;
	assert_classifies("heartbeat EnemyTerritory-1\n", Q3_HEARTBEAT);
	assert_classifies("heartbeat ETFlatline-1\n", Q3_HEARTBEAT);
	assert_classifies("rcon secret status", Q3_RCON);
	assert_classifies("print\nbad rconpassword.\n", Q3_PRINT);
	assert_classifies("disconnect", Q3_DISCONNECT);
	assert_classifies("getservers 84 empty full", Q3_GETSERVERS);
	assert_classifies("getserversResponse\\\x7f\x00\x00\x01\x6d\x38\\EOT",
			  Q3_GETSERVERSRESPONSE);
	assert_classifies("GetServersResponse", Q3_GETSERVERSRESPONSE);
}

static void test_q3_classify_accepts_every_word_end(void **state)
{
	(void)state;
	assert_classifies("getinfo", Q3_GETINFO);
	assert_classifies("getinfo\n", Q3_GETINFO);
	assert_classifies("getinfo ", Q3_GETINFO);
	assert_classifies("getinfo\t", Q3_GETINFO);
	assert_classifies("getinfo\r\n", Q3_GETINFO);
	assert_classifies("getinfo\"x\"", Q3_GETINFO);
	assert_classifies("getinfo//x", Q3_GETINFO);
	assert_classifies("getinfo/*x*/", Q3_GETINFO);
	assert_classifies("getserversResponse\\", Q3_GETSERVERSRESPONSE);
	assert_classifies("statusResponse\n", Q3_STATUSRESPONSE);
	assert_classifies("disconnect ", Q3_DISCONNECT);
}

static void test_q3_classify_short_packets_are_game_traffic(void **state)
{
	(void)state;
	assert_int_equal(q3_classify(PKT("")), Q3_GAME);
	assert_int_equal(q3_classify(PKT("\xff")), Q3_GAME);
	assert_int_equal(q3_classify(PKT("\xff\xff\xff")), Q3_GAME);
}

static void test_q3_classify_bare_prefix_is_unknown(void **state)
{
	(void)state;
	assert_int_equal(q3_classify(PKT(FF)), Q3_UNKNOWN);
}

static void test_q3_classify_without_prefix_is_game_traffic(void **state)
{
	(void)state;
	assert_int_equal(q3_classify(PKT("getinfo xxx")), Q3_GAME);
	assert_int_equal(q3_classify(PKT("\xff\xff\xff\xfegetinfo")), Q3_GAME);
	assert_int_equal(q3_classify(PKT("\x01\x00\x00\x00\x12\x34\x56")), Q3_GAME);
	assert_int_equal(q3_classify(PKT("\x00\xff\xff\xff\xffgetinfo")), Q3_GAME);
}

static void test_q3_classify_word_that_only_starts_with_a_command_is_unknown(void **state)
{
	(void)state;
	assert_classifies("getinfox", Q3_UNKNOWN);
	assert_classifies("getinfox 1", Q3_UNKNOWN);
	assert_classifies("getinf", Q3_UNKNOWN);
	assert_classifies("connectx", Q3_UNKNOWN);
	assert_classifies("printer\n", Q3_UNKNOWN);
	assert_classifies("rcons a", Q3_UNKNOWN);
	assert_classifies("xgetinfo", Q3_UNKNOWN);
	/* The engines end a word only at whitespace, '"' and comments. */
	assert_classifies("getinfo\\", Q3_UNKNOWN);
	assert_classifies("getinfo/", Q3_UNKNOWN);
	assert_classifies("getinfo%", Q3_UNKNOWN);
	assert_classifies("getinfo.", Q3_UNKNOWN);
	assert_classifies("hello", Q3_UNKNOWN);
}

static void test_q3_classify_does_not_read_past_length(void **state)
{
	(void)state;
	/* The bytes after n spell "info", but they are not in the packet. */
	assert_int_equal(q3_classify((const uint8_t *)FF "getinfo", 7), Q3_UNKNOWN);
	assert_int_equal(q3_classify((const uint8_t *)FF "getinfo", 3), Q3_GAME);
	assert_int_equal(q3_classify((const uint8_t *)FF "getinfox", 11), Q3_GETINFO);
}

/* q3_classify: the command as the engines read it (MSG_ReadStringLine, then
 * the first token of Cmd_TokenizeString), the union where they differ */

static void test_q3_classify_skips_leading_spaces_as_the_engine_does(void **state)
{
	(void)state;
	assert_classifies(" getinfo", Q3_GETINFO);
	assert_classifies("     getstatus xyz", Q3_GETSTATUS);
	assert_classifies(" rcon pass status", Q3_RCON);
	assert_classifies("  getchallenge 1 ET", Q3_GETCHALLENGE);
}

static void test_q3_classify_skips_leading_tabs_and_carriage_returns(void **state)
{
	(void)state;
	assert_classifies("\tgetinfo", Q3_GETINFO);
	assert_classifies("\r\t getstatus\t", Q3_GETSTATUS);
}

static void test_q3_classify_skips_leading_control_bytes(void **state)
{
	(void)state;
	assert_classifies("\x01\x02\x1f getinfo", Q3_GETINFO);
	assert_classifies("\x1b[0mrcon x", Q3_UNKNOWN); /* '[' starts a word */
	assert_classifies("\x0b\x0c"
			  "disconnect",
			  Q3_DISCONNECT);
}

static void test_q3_classify_ends_the_word_at_a_trailing_control_byte(void **state)
{
	(void)state;
	assert_classifies("getstatus\x01", Q3_GETSTATUS);
	assert_classifies("getinfo\x1f"
			  "abc",
			  Q3_GETINFO);
	assert_classifies("rcon\x05pass cmd", Q3_RCON);
	assert_classifies("getinfo\x7f", Q3_UNKNOWN); /* DEL is a word byte */
}

static void test_q3_classify_treats_high_bytes_as_whitespace_as_rtcw_does(void **state)
{
	(void)state;
	/* RTCW keeps bytes > 127 in the line and its tokenizer (signed char
	 * <= ' ') skips them before a word and ends a word at one; ET: Legacy
	 * does the first always, the second up to 2.76; ioquake3 reads '.'. */
	assert_classifies("\x80getinfo", Q3_GETINFO);
	assert_classifies("\xff\xfe getstatus", Q3_GETSTATUS);
	assert_classifies("getinfo\x80", Q3_GETINFO);
	assert_classifies("getinfo\xc3\xa9", Q3_GETINFO);
	assert_classifies("get\x80info", Q3_UNKNOWN);
}

static void test_q3_classify_reads_a_quoted_command(void **state)
{
	(void)state;
	assert_classifies("\"getinfo\"", Q3_GETINFO);
	assert_classifies("\"getinfo\" xyz", Q3_GETINFO);
	assert_classifies("\"getinfo\"xyz", Q3_GETINFO);
	assert_classifies("\"getinfo", Q3_GETINFO); /* to the end of the line */
	assert_classifies("  \"rcon\" pass cmd", Q3_RCON);
	assert_classifies("\"get\"info", Q3_UNKNOWN);
	assert_classifies("\"getinfo \"", Q3_UNKNOWN);	   /* a quoted space stays */
	assert_classifies("\"\"getinfo", Q3_UNKNOWN);	   /* the empty token */
	assert_classifies("\"/*x*/getinfo\"", Q3_UNKNOWN); /* no comments inside */
}

static void test_q3_classify_skips_block_comments_before_the_command(void **state)
{
	(void)state;
	assert_classifies("/*x*/getinfo", Q3_GETINFO);
	assert_classifies("/**/ /* a */ getstatus", Q3_GETSTATUS);
	assert_classifies("/*\n*/getinfo", Q3_UNKNOWN); /* the line ends inside */
	/* The engines look for the end from the opening slash on. */
	assert_classifies("/*/getinfo", Q3_GETINFO);
	assert_classifies("/* getinfo", Q3_UNKNOWN);
	assert_classifies("/*\x80*/rcon x", Q3_RCON);
}

static void test_q3_classify_stops_at_a_line_comment(void **state)
{
	(void)state;
	assert_classifies("//getinfo", Q3_UNKNOWN);
	assert_classifies("  // getinfo", Q3_UNKNOWN);
	assert_classifies("/getinfo", Q3_UNKNOWN);
	assert_classifies("getinfo//", Q3_GETINFO);
}

static void test_q3_classify_ignores_ascii_case_in_every_command(void **state)
{
	(void)state;
	assert_classifies("GeTiNfO", Q3_GETINFO);
	assert_classifies("GETSTATUS", Q3_GETSTATUS);
	assert_classifies("RCON x", Q3_RCON);
	assert_classifies("DisConnect", Q3_DISCONNECT);
	assert_classifies("cOnNeCt \"\\\\name\\\\x\"", Q3_CONNECT);
	assert_classifies("InfoResponse\n", Q3_INFORESPONSE);
}

static void test_q3_classify_empty_line_is_unknown(void **state)
{
	(void)state;
	assert_classifies("", Q3_UNKNOWN);
	assert_classifies("    ", Q3_UNKNOWN);
	assert_classifies("\ngetinfo", Q3_UNKNOWN);
	assert_classifies(" \x01\x80\t", Q3_UNKNOWN);
	assert_int_equal(q3_classify(PKT(FF "\x00getinfo")), Q3_UNKNOWN);
}

static void test_q3_classify_only_prefix_is_unknown(void **state)
{
	(void)state;
	assert_int_equal(q3_classify(PKT(FF)), Q3_UNKNOWN);
	assert_int_equal(q3_classify(PKT(FF "\xff\xff\xff\xff")), Q3_UNKNOWN);
}

static void test_q3_classify_reads_only_the_first_1023_bytes_of_a_line(void **state)
{
	uint8_t pkt[4 + 1100];

	(void)state;
	memcpy(pkt, FF, 4);
	/* 1016 spaces + "getinfoX": the engine's line ends before the X. */
	memset(pkt + 4, ' ', 1016);
	memcpy(pkt + 4 + 1016, "getinfoX", 8);
	assert_int_equal(q3_classify(pkt, 4 + 1016 + 8), Q3_GETINFO);
	/* 1017 spaces: the line holds "getinf". */
	memset(pkt + 4, ' ', 1017);
	memcpy(pkt + 4 + 1017, "getinfo", 7);
	assert_int_equal(q3_classify(pkt, 4 + 1017 + 7), Q3_UNKNOWN);
	/* A long word is nothing, however it ends. */
	memset(pkt + 4, 'a', 1100);
	assert_int_equal(q3_classify(pkt, sizeof(pkt)), Q3_UNKNOWN);
}

static void test_q3_classify_ends_the_line_at_a_nul_inside(void **state)
{
	(void)state;
	assert_int_equal(q3_classify(PKT(FF "getinfo\x00xyz")), Q3_GETINFO);
	assert_int_equal(q3_classify(PKT(FF "get\x00info")), Q3_UNKNOWN);
	assert_int_equal(q3_classify(PKT(FF " \x00 getstatus")), Q3_UNKNOWN);
	assert_int_equal(q3_classify(PKT(FF "\"getinfo\x00\" x")), Q3_GETINFO);
}

static void test_q3_classify_connect_not_at_byte_4_is_read_as_text(void **state)
{
	(void)state;
	/* Only "connect" at byte 4, case and all, is Huffman-decoded: the
	 * server runs any other spelling of it on the text as sent. */
	assert_classifies(" connect \"\\name\\x\"", Q3_CONNECT);
	assert_classifies("CONNECT \"\\name\\x\"", Q3_CONNECT);
	assert_classifies("\"connect\"", Q3_CONNECT);
	assert_classifies("/**/connect x", Q3_CONNECT);
}

static void test_q3_classify_coded_connect_is_connect_when_byte_11_ends_the_word(void **state)
{
	(void)state;
	assert_int_equal(q3_classify(PKT(FF "connect")), Q3_CONNECT);
	assert_int_equal(q3_classify(PKT(FF "connect\x00\x00\x05xx")), Q3_CONNECT);
	assert_int_equal(q3_classify(PKT(FF "connect\t\x00\x05xx")), Q3_CONNECT);
	assert_int_equal(q3_classify(PKT(FF "connect\"\x00\x05xx")), Q3_CONNECT);
	assert_int_equal(q3_classify(PKT(FF "connect\x90\x00\x05xx")), Q3_CONNECT);
	assert_int_equal(q3_classify(PKT(FF "connectx\x00\x05xx")), Q3_UNKNOWN);
	assert_int_equal(q3_classify(PKT(FF "connect%\x00\x05xx")), Q3_UNKNOWN);
	assert_int_equal(q3_classify(PKT(FF "connectResponse 1")), Q3_CONNECTRESPONSE);
}

/* "\xff\xff\xff\xffconnect/" and the userinfo coded as the client does. */
static size_t coded_connect_slash(uint8_t *pkt, size_t len, const char *info)
{
	int n;

	memcpy(pkt, FF "connect/", 12);
	n = huffman_encode(info, strlen(info), pkt + 12, len - 12);
	assert_true(n > 0);
	return 12 + (size_t)n;
}

static void test_q3_classify_coded_connect_slash_needs_a_decoded_comment(void **state)
{
	uint8_t pkt[256];

	(void)state;
	/* The server's line is "connect/" and the decoded bytes. */
	assert_int_equal(q3_classify(pkt, coded_connect_slash(pkt, sizeof(pkt), "/x")), Q3_CONNECT);
	assert_int_equal(q3_classify(pkt, coded_connect_slash(pkt, sizeof(pkt), "*/")), Q3_CONNECT);
	assert_int_equal(q3_classify(pkt, coded_connect_slash(pkt, sizeof(pkt), "\\name\\x")),
			 Q3_UNKNOWN);
	assert_int_equal(q3_classify(pkt, coded_connect_slash(pkt, sizeof(pkt), "")), Q3_UNKNOWN);
	/* Its raw bytes spell "connect//", but that is not what it reads. */
	assert_int_equal(q3_classify(PKT(FF "connect//xyz")), Q3_UNKNOWN);
	/* Too short to decode a byte from the packet: the server reads stale
	 * bytes, so it may be a connect. */
	assert_int_equal(q3_classify(PKT(FF "connect/\x00\x01")), Q3_CONNECT);
	assert_int_equal(q3_classify(PKT(FF "connect/\x00")), Q3_UNKNOWN);
	assert_int_equal(q3_classify(PKT(FF "connect/")), Q3_UNKNOWN);
}

/* q3_cmd_name */

static void test_q3_cmd_name_is_lower_case_canonical(void **state)
{
	(void)state;
	assert_string_equal(q3_cmd_name(Q3_GAME), "game");
	assert_string_equal(q3_cmd_name(Q3_UNKNOWN), "unknown");
	assert_string_equal(q3_cmd_name(Q3_GETCHALLENGE), "getchallenge");
	assert_string_equal(q3_cmd_name(Q3_CHALLENGERESPONSE), "challengeresponse");
	assert_string_equal(q3_cmd_name(Q3_GETINFO), "getinfo");
	assert_string_equal(q3_cmd_name(Q3_INFORESPONSE), "inforesponse");
	assert_string_equal(q3_cmd_name(Q3_GETSTATUS), "getstatus");
	assert_string_equal(q3_cmd_name(Q3_STATUSRESPONSE), "statusresponse");
	assert_string_equal(q3_cmd_name(Q3_CONNECT), "connect");
	assert_string_equal(q3_cmd_name(Q3_CONNECTRESPONSE), "connectresponse");
	assert_string_equal(q3_cmd_name(Q3_HEARTBEAT), "heartbeat");
	assert_string_equal(q3_cmd_name(Q3_RCON), "rcon");
	assert_string_equal(q3_cmd_name(Q3_PRINT), "print");
	assert_string_equal(q3_cmd_name(Q3_DISCONNECT), "disconnect");
	assert_string_equal(q3_cmd_name(Q3_GETSERVERS), "getservers");
	assert_string_equal(q3_cmd_name(Q3_GETSERVERSRESPONSE), "getserversresponse");
}

static void test_q3_cmd_name_round_trips_through_classify(void **state)
{
	int c;

	(void)state;
	for (c = Q3_GETCHALLENGE; c < Q3_CMD_COUNT; c++)
		assert_classifies(q3_cmd_name((enum q3_cmd)c), (enum q3_cmd)c);
}

/* q3_word */

static void test_q3_word_returns_the_word_as_sent(void **state)
{
	char out[Q3_WORD_MAX];

	(void)state;
	assert_int_equal(q3_word(PKT(FF "getChallenge 123 ET"), out), 12);
	assert_string_equal(out, "getChallenge");
	assert_int_equal(q3_word(PKT(FF "infoResponse\n\\a\\b"), out), 12);
	assert_string_equal(out, "infoResponse");
	/* The list follows the word unbroken; the client compares a prefix. */
	assert_int_equal(q3_word(PKT(FF "getserversResponse\\\x01\x02"), out), 18);
	assert_string_equal(out, "getserversResponse");
	assert_int_equal(q3_word(PKT(FF "disconnect"), out), 10);
	assert_string_equal(out, "disconnect");
	assert_int_equal(q3_word(PKT(FF "connect \x00\x81\xfe"), out), 7);
	assert_string_equal(out, "connect");
	assert_int_equal(q3_word(PKT(FF "frobnicate 1"), out), 10);
	assert_string_equal(out, "frobnicate");
}

static void test_q3_word_strips_non_printables(void **state)
{
	char out[Q3_WORD_MAX];
	size_t n;
	size_t i;

	(void)state;
	/* Control bytes end the word, as for the engine; DEL does not. */
	n = q3_word(PKT(FF "\x01get\x7f"
			   "Challenge\x1b 1"),
		    out);
	assert_int_equal(n, 12);
	assert_string_equal(out, "getChallenge");

	n = q3_word(PKT(FF "\x80\x81\x82"), out);
	assert_int_equal(n, strlen(out));
	for (i = 0; i < n; i++)
		assert_true(isprint((unsigned char)out[i]));

	n = q3_word(PKT(FF "ab\x00"
			   "cd"),
		    out);
	assert_int_equal(n, strlen(out));
	assert_true(n <= 4);
}

static void test_q3_word_is_bounded_to_word_max_minus_one(void **state)
{
	uint8_t pkt[4 + 100 + 2];
	char out[Q3_WORD_MAX + 8];
	size_t n;

	(void)state;
	memcpy(pkt, FF, 4);
	memset(pkt + 4, 'a', 100);
	pkt[104] = ' ';
	pkt[105] = 'b';
	memset(out, 'Z', sizeof(out));
	n = q3_word(pkt, sizeof(pkt), out);
	assert_int_equal(n, Q3_WORD_MAX - 1);
	assert_int_equal(strlen(out), Q3_WORD_MAX - 1);
	assert_int_equal(out[Q3_WORD_MAX - 1], '\0');
	assert_int_equal(out[Q3_WORD_MAX], 'Z'); /* nothing written past out */
	assert_int_equal(out[0], 'a');
}

static void test_q3_word_of_exactly_max_minus_one_chars_is_whole(void **state)
{
	uint8_t pkt[4 + Q3_WORD_MAX - 1];
	char out[Q3_WORD_MAX];

	(void)state;
	memcpy(pkt, FF, 4);
	memset(pkt + 4, 'q', Q3_WORD_MAX - 1);
	assert_int_equal(q3_word(pkt, sizeof(pkt), out), Q3_WORD_MAX - 1);
	assert_int_equal(strspn(out, "q"), Q3_WORD_MAX - 1);
}

static void test_q3_word_is_empty_for_non_connectionless_packets(void **state)
{
	char out[Q3_WORD_MAX];

	(void)state;
	memset(out, 'Z', sizeof(out));
	assert_int_equal(q3_word(PKT("getinfo xxx"), out), 0);
	assert_int_equal(out[0], '\0');
	memset(out, 'Z', sizeof(out));
	assert_int_equal(q3_word(PKT("\xff\xff\xff"), out), 0);
	assert_int_equal(out[0], '\0');
}

static void test_q3_word_is_empty_without_a_word(void **state)
{
	char out[Q3_WORD_MAX];

	(void)state;
	memset(out, 'Z', sizeof(out));
	assert_int_equal(q3_word(PKT(FF), out), 0);
	assert_int_equal(out[0], '\0');
	memset(out, 'Z', sizeof(out));
	assert_int_equal(q3_word(PKT(FF "\n"), out), 0);
	assert_int_equal(out[0], '\0');
}

/* q3_build */

static void test_q3_build_prefixes_text(void **state)
{
	uint8_t out[64];

	(void)state;
	assert_int_equal(q3_build(out, sizeof(out), "getinfo abc"), 15);
	assert_memory_equal(out, FF "getinfo abc", 15);
	assert_int_equal(q3_build(out, sizeof(out), "heartbeat EnemyTerritory-1\n"), 31);
	assert_memory_equal(out, FF "heartbeat EnemyTerritory-1\n", 31);
	assert_int_equal(q3_build(out, sizeof(out), ""), 4);
	assert_memory_equal(out, FF, 4);
}

static void test_q3_build_fits_exactly(void **state)
{
	uint8_t out[32];

	(void)state;
	memset(out, 0xaa, sizeof(out));
	assert_int_equal(q3_build(out, 15, "getinfo abc"), 15);
	assert_memory_equal(out, FF "getinfo abc", 15);
	assert_int_equal(out[15], 0xaa);
}

static void test_q3_build_fails_when_it_does_not_fit(void **state)
{
	uint8_t out[32];

	(void)state;
	memset(out, 0xaa, sizeof(out));
	assert_int_equal(q3_build(out, 14, "getinfo abc"), -1);
	assert_int_equal(out[14], 0xaa);
	assert_int_equal(q3_build(out, 3, ""), -1);
	assert_int_equal(out[3], 0xaa);
	assert_int_equal(q3_build(out, 0, "x"), -1);
}

/* q3_info_value */

static const char info[] = "\\sv_hostname\\My Server\\challenge\\abc123\\protocol\\84";

static void test_q3_info_value_finds_first_key(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(q3_info_value(info, strlen(info), "sv_hostname", out, sizeof(out)), 9);
	assert_string_equal(out, "My Server");
}

static void test_q3_info_value_finds_middle_key(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(q3_info_value(info, strlen(info), "challenge", out, sizeof(out)), 6);
	assert_string_equal(out, "abc123");
}

static void test_q3_info_value_finds_last_key(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(q3_info_value(info, strlen(info), "protocol", out, sizeof(out)), 2);
	assert_string_equal(out, "84");
}

static void test_q3_info_value_misses_absent_key(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(q3_info_value(info, strlen(info), "mapname", out, sizeof(out)), -1);
	assert_int_equal(q3_info_value(info, strlen(info), "challeng", out, sizeof(out)), -1);
	assert_int_equal(q3_info_value(info, strlen(info), "challenge2", out, sizeof(out)), -1);
	assert_int_equal(q3_info_value(info, strlen(info), "hostname", out, sizeof(out)), -1);
	assert_int_equal(q3_info_value("", 0, "challenge", out, sizeof(out)), -1);
}

static void test_q3_info_value_does_not_take_a_value_for_a_key(void **state)
{
	static const char kv[] = "\\a\\challenge\\challenge\\xyz";
	static const char kv2[] = "\\name\\abc123\\abc123\\v";
	char out[64];

	(void)state;
	assert_int_equal(q3_info_value(kv, strlen(kv), "challenge", out, sizeof(out)), 3);
	assert_string_equal(out, "xyz");
	assert_int_equal(q3_info_value(kv2, strlen(kv2), "abc123", out, sizeof(out)), 1);
	assert_string_equal(out, "v");
	assert_int_equal(q3_info_value(kv2, strlen(kv2), "v", out, sizeof(out)), -1);
}

static void test_q3_info_value_fails_when_value_too_long(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(q3_info_value(info, strlen(info), "challenge", out, 3), -1);
	assert_int_equal(q3_info_value(info, strlen(info), "sv_hostname", out, 9), -1);
	assert_int_equal(q3_info_value(info, strlen(info), "challenge", out, 7), 6);
	assert_string_equal(out, "abc123");
}

static void test_q3_info_value_reads_empty_value(void **state)
{
	static const char kv[] = "\\a\\\\b\\2";
	char out[8];

	(void)state;
	memset(out, 'Z', sizeof(out));
	assert_int_equal(q3_info_value(kv, strlen(kv), "a", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(q3_info_value(kv, strlen(kv), "b", out, sizeof(out)), 1);
	assert_string_equal(out, "2");
}

static void test_q3_info_value_stops_at_length(void **state)
{
	static const char kv[] = "\\a\\123456\\b\\2";
	char out[16];

	(void)state;
	/* n cuts inside a's value and before b. */
	assert_int_equal(q3_info_value(kv, 6, "a", out, sizeof(out)), 3);
	assert_string_equal(out, "123");
	assert_int_equal(q3_info_value(kv, 9, "b", out, sizeof(out)), -1);
}

/* q3_info_response_matches */

static void test_q3_info_response_matches_exact_challenge(void **state)
{
	(void)state;
	assert_true(q3_info_response_matches(
	    PKT(FF "infoResponse\n\\challenge\\abc123\\hostname\\srv\\protocol\\84"), "abc123"));
	assert_true(q3_info_response_matches(
	    PKT(FF "infoResponse\n\\hostname\\srv\\challenge\\abc123\\protocol\\84"), "abc123"));
	assert_true(q3_info_response_matches(
	    PKT(FF "infoResponse\n\\hostname\\srv\\protocol\\84\\challenge\\abc123"), "abc123"));
}

static void test_q3_info_response_does_not_match_prefix_or_extension(void **state)
{
	(void)state;
	assert_false(q3_info_response_matches(
	    PKT(FF "infoResponse\n\\challenge\\abc123\\hostname\\srv"), "abc12"));
	assert_false(q3_info_response_matches(
	    PKT(FF "infoResponse\n\\challenge\\abc123\\hostname\\srv"), "abc1234"));
	assert_false(q3_info_response_matches(
	    PKT(FF "infoResponse\n\\challenge\\abc12\\hostname\\srv"), "abc123"));
	assert_false(q3_info_response_matches(
	    PKT(FF "infoResponse\n\\challenge\\ABC123\\hostname\\srv"), "abc123"));
}

static void test_q3_info_response_does_not_match_other_packets(void **state)
{
	(void)state;
	assert_false(q3_info_response_matches(
	    PKT(FF "statusResponse\n\\challenge\\abc123\\hostname\\srv"), "abc123"));
	assert_false(q3_info_response_matches(PKT(FF "getinfo abc123"), "abc123"));
	assert_false(q3_info_response_matches(PKT("infoResponse\n\\challenge\\abc123"), "abc123"));
	assert_false(
	    q3_info_response_matches(PKT(FF "infoResponsex\n\\challenge\\abc123"), "abc123"));
}

static void test_q3_info_response_does_not_match_without_challenge_key(void **state)
{
	(void)state;
	assert_false(q3_info_response_matches(
	    PKT(FF "infoResponse\n\\hostname\\abc123\\protocol\\84"), "abc123"));
	assert_false(
	    q3_info_response_matches(PKT(FF "infoResponse\n\\abc123\\challenge"), "abc123"));
	assert_false(q3_info_response_matches(PKT(FF "infoResponse\n"), "abc123"));
	assert_false(q3_info_response_matches(PKT(FF "infoResponse"), "abc123"));
}

static void test_q3_info_response_reads_the_info_after_the_command_line(void **state)
{
	(void)state;
	assert_true(q3_info_response_matches(PKT(FF " infoResponse \n\\challenge\\abc"), "abc"));
	assert_true(q3_info_response_matches(PKT(FF "infoResponse\x00\\challenge\\abc"), "abc"));
	/* Without a line end the client reads an empty info string. */
	assert_false(q3_info_response_matches(PKT(FF "infoResponse\\challenge\\abc"), "abc"));
	assert_false(q3_info_response_matches(PKT(FF "infoResponse \\challenge\\abc"), "abc"));
}

static void test_q3_info_response_honours_length(void **state)
{
	static const char pkt[] = FF "infoResponse\n\\challenge\\abc123\\x\\y";

	(void)state;
	/* Cut after "abc": the challenge in the packet is "abc". */
	assert_false(q3_info_response_matches((const uint8_t *)pkt, 4 + 13 + 11 + 3, "abc123"));
	assert_true(q3_info_response_matches((const uint8_t *)pkt, 4 + 13 + 11 + 6, "abc123"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_q3_is_connectionless_needs_four_ff_bytes),
	    cmocka_unit_test(test_q3_classify_knows_getchallenge_in_any_case),
	    cmocka_unit_test(test_q3_classify_knows_challenge_response),
	    cmocka_unit_test(test_q3_classify_knows_getinfo_and_info_response),
	    cmocka_unit_test(test_q3_classify_knows_getstatus_and_status_response),
	    cmocka_unit_test(test_q3_classify_knows_connect_followed_by_binary),
	    cmocka_unit_test(test_q3_classify_knows_connect_response),
	    cmocka_unit_test(test_q3_classify_knows_the_remaining_commands),
	    cmocka_unit_test(test_q3_classify_accepts_every_word_end),
	    cmocka_unit_test(test_q3_classify_short_packets_are_game_traffic),
	    cmocka_unit_test(test_q3_classify_bare_prefix_is_unknown),
	    cmocka_unit_test(test_q3_classify_without_prefix_is_game_traffic),
	    cmocka_unit_test(test_q3_classify_word_that_only_starts_with_a_command_is_unknown),
	    cmocka_unit_test(test_q3_classify_does_not_read_past_length),
	    cmocka_unit_test(test_q3_classify_skips_leading_spaces_as_the_engine_does),
	    cmocka_unit_test(test_q3_classify_skips_leading_tabs_and_carriage_returns),
	    cmocka_unit_test(test_q3_classify_skips_leading_control_bytes),
	    cmocka_unit_test(test_q3_classify_ends_the_word_at_a_trailing_control_byte),
	    cmocka_unit_test(test_q3_classify_treats_high_bytes_as_whitespace_as_rtcw_does),
	    cmocka_unit_test(test_q3_classify_reads_a_quoted_command),
	    cmocka_unit_test(test_q3_classify_skips_block_comments_before_the_command),
	    cmocka_unit_test(test_q3_classify_stops_at_a_line_comment),
	    cmocka_unit_test(test_q3_classify_ignores_ascii_case_in_every_command),
	    cmocka_unit_test(test_q3_classify_empty_line_is_unknown),
	    cmocka_unit_test(test_q3_classify_only_prefix_is_unknown),
	    cmocka_unit_test(test_q3_classify_reads_only_the_first_1023_bytes_of_a_line),
	    cmocka_unit_test(test_q3_classify_ends_the_line_at_a_nul_inside),
	    cmocka_unit_test(test_q3_classify_connect_not_at_byte_4_is_read_as_text),
	    cmocka_unit_test(test_q3_classify_coded_connect_is_connect_when_byte_11_ends_the_word),
	    cmocka_unit_test(test_q3_classify_coded_connect_slash_needs_a_decoded_comment),
	    cmocka_unit_test(test_q3_cmd_name_is_lower_case_canonical),
	    cmocka_unit_test(test_q3_cmd_name_round_trips_through_classify),
	    cmocka_unit_test(test_q3_word_returns_the_word_as_sent),
	    cmocka_unit_test(test_q3_word_strips_non_printables),
	    cmocka_unit_test(test_q3_word_is_bounded_to_word_max_minus_one),
	    cmocka_unit_test(test_q3_word_of_exactly_max_minus_one_chars_is_whole),
	    cmocka_unit_test(test_q3_word_is_empty_for_non_connectionless_packets),
	    cmocka_unit_test(test_q3_word_is_empty_without_a_word),
	    cmocka_unit_test(test_q3_build_prefixes_text),
	    cmocka_unit_test(test_q3_build_fits_exactly),
	    cmocka_unit_test(test_q3_build_fails_when_it_does_not_fit),
	    cmocka_unit_test(test_q3_info_value_finds_first_key),
	    cmocka_unit_test(test_q3_info_value_finds_middle_key),
	    cmocka_unit_test(test_q3_info_value_finds_last_key),
	    cmocka_unit_test(test_q3_info_value_misses_absent_key),
	    cmocka_unit_test(test_q3_info_value_does_not_take_a_value_for_a_key),
	    cmocka_unit_test(test_q3_info_value_fails_when_value_too_long),
	    cmocka_unit_test(test_q3_info_value_reads_empty_value),
	    cmocka_unit_test(test_q3_info_value_stops_at_length),
	    cmocka_unit_test(test_q3_info_response_matches_exact_challenge),
	    cmocka_unit_test(test_q3_info_response_does_not_match_prefix_or_extension),
	    cmocka_unit_test(test_q3_info_response_does_not_match_other_packets),
	    cmocka_unit_test(test_q3_info_response_does_not_match_without_challenge_key),
	    cmocka_unit_test(test_q3_info_response_honours_length),
	    cmocka_unit_test(test_q3_info_response_reads_the_info_after_the_command_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
