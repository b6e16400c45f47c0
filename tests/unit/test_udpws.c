/* SPDX-License-Identifier: ISC */
/* Unit tests for udpws.c: a rung-3 connection from its upgrade (a token of
 * the set, or a refusal that names nothing else) to datagrams, pongs and
 * the closing handshake, whole and one byte at a time. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "udpws.h"

#define HOST "tunnel.r1.example.net"

static const char *const tokens[] = {"tok-a", "tok-bbbbbbbb", "tok-c"};
static const size_t lens[] = {5, 12, 5};
static uint8_t msg[2048];
static uint8_t wire[16384];

static size_t request(char *out, const char *path, const char *token)
{
	int n = snprintf(out, 1024,
			 "GET %s HTTP/1.1\r\nHost: " HOST "\r\nUpgrade: websocket\r\n"
			 "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
			 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n%s%s%s\r\n",
			 path, token ? "Authorization: Bearer " : "", token ? token : "",
			 token ? "\r\n" : "");

	return (size_t)n;
}

/* A masked client frame, FIN set. */
static size_t cframe(uint8_t *out, uint8_t op, const void *payload, size_t len)
{
	static const uint8_t key[4] = {0x11, 0x22, 0x33, 0x44};
	const uint8_t *p = payload;
	size_t h = 0;

	out[h++] = 0x80 | op;
	if (len < 126) {
		out[h++] = 0x80 | (uint8_t)len;
	} else {
		out[h++] = 0x80 | 126;
		out[h++] = (uint8_t)(len >> 8);
		out[h++] = (uint8_t)len;
	}
	memcpy(out + h, key, 4);
	h += 4;
	for (size_t i = 0; i < len; i++)
		out[h + i] = p[i] ^ key[i % 4];
	return h + len;
}

/* Everything udpws_feed says about wire[0..n), fed in pieces of step
 * bytes (0: whole), as one line per event into log. */
static void run(const struct udpws_tokens *t, size_t n, size_t step, char *log, size_t cap)
{
	struct udpws u;
	size_t off = 0, o = 0;

	assert_int_equal(udpws_init(&u, HOST, NULL, msg, sizeof(msg), 0), 0);
	log[0] = '\0';
	while (off < n) {
		size_t lim = step && n - off > step ? step : n - off, used;
		struct udpws_out out;
		enum udpws_ev e = udpws_feed(&u, t, wire + off, lim, &used, &out);

		off += used;
		switch (e) {
		case UDPWS_MORE:
			assert_int_equal(used, lim);
			continue;
		case UDPWS_SEND:
			o +=
			    (size_t)snprintf(log + o, cap - o, "send %.*s %zu\n",
					     (int)(out.len < 12 ? out.len : 12), out.data, out.len);
			break;
		case UDPWS_DATAGRAM:
			o += (size_t)snprintf(log + o, cap - o, "dgram %.*s\n", (int)out.len,
					      out.data);
			break;
		case UDPWS_CLOSE:
			o += (size_t)snprintf(
			    log + o, cap - o, "close %d %zu %02x%02x%02x%02x\n", out.status,
			    out.len, out.len > 0 ? out.data[0] : 0, out.len > 1 ? out.data[1] : 0,
			    out.len > 3 ? out.data[2] : 0, out.len > 3 ? out.data[3] : 0);
			return;
		}
	}
}

static void test_udpws_a_known_token_opens_and_carries_datagrams(void **state)
{
	struct udpws_tokens t;
	char log[4096], again[4096];
	size_t n;

	(void)state;
	assert_int_equal(udpws_tokens_build(&t, tokens, lens, 3), 0);
	n = request((char *)wire, "/t", "tok-bbbbbbbb");
	n += cframe(wire + n, 0x2, "wg-handshake", 12);
	n += cframe(wire + n, 0x9, "hi", 2);
	n += cframe(wire + n, 0xA, "pong", 4); /* unasked pong: nothing owed */
	n += cframe(wire + n, 0x2, "wg-data", 7);
	n += cframe(wire + n, 0x8, "\x03\xe8", 2); /* close 1000 */
	run(&t, n, 0, log, sizeof(log));
	/* 101, the datagrams in order, a pong for the ping (0x8a 02 "hi"), the
	 * close answered with its code (0x88 02 03 e8). */
	assert_string_equal(log, "send HTTP/1.1 101 129\n"
				 "dgram wg-handshake\n"
				 "send \x8a\x02hi 4\n"
				 "dgram wg-data\n"
				 "close 0 4 880203e8\n");
	/* One byte at a time: the same events. */
	run(&t, n, 1, again, sizeof(again));
	assert_string_equal(again, log);
	udpws_tokens_free(&t);
}

static void test_udpws_refuses_without_naming_anything_else(void **state)
{
	static const struct {
		const char *path, *token;
		int status;
	} bad[] = {
	    {"/t", "tok-zzz", 403}, /* not in the set */
	    {"/t", NULL, 401},	    /* no token */
	    {"/admin", "tok-a", 404},
	    {"/t", "tok-a\x01", 400},
	};
	struct udpws_tokens t;
	char log[4096], want[64];

	(void)state;
	assert_int_equal(udpws_tokens_build(&t, tokens, lens, 3), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = request((char *)wire, bad[i].path, bad[i].token);

		n += cframe(wire + n, 0x2, "wg", 2); /* never read as a datagram */
		run(&t, n, 0, log, sizeof(log));
		snprintf(want, sizeof(want), "close %d ", bad[i].status);
		if (strncmp(log, want, strlen(want)) != 0)
			fail_msg("case %zu: %s", i, log);
		assert_null(strstr(log, "dgram"));
	}
	/* An empty set refuses every token. */
	{
		struct udpws_tokens none = {0};
		size_t n = request((char *)wire, "/t", "tok-a");

		run(&none, n, 0, log, sizeof(log));
		assert_int_equal(strncmp(log, "close 403 ", 10), 0);
	}
	udpws_tokens_free(&t);
}

static void test_udpws_closes_on_a_text_message_and_on_relay_close(void **state)
{
	struct udpws_tokens t;
	struct udpws u;
	struct udpws_out out;
	uint8_t fr[WS_CTL_MAX + 2];
	char log[4096];
	size_t n, used;

	(void)state;
	assert_int_equal(udpws_tokens_build(&t, tokens, lens, 3), 0);
	n = request((char *)wire, "/t", "tok-a");
	n += cframe(wire + n, 0x1, "text", 4);
	run(&t, n, 0, log, sizeof(log));
	/* 1003: rung 3 carries datagrams only. */
	assert_non_null(strstr(log, "close 0 4 880203eb"));

	/* The relay ends an open connection (its token left the set). */
	assert_int_equal(udpws_init(&u, HOST, NULL, msg, sizeof(msg), 0), 0);
	n = request((char *)wire, "/t", "tok-c");
	assert_int_equal(udpws_feed(&u, &t, wire, n, &used, &out), UDPWS_SEND);
	assert_int_equal(u.token, 2);
	assert_int_equal(udpws_close(&u, WS_CLOSE_POLICY, fr, sizeof(fr)), 4);
	assert_memory_equal(fr, "\x88\x02\x03\xf0", 4);
	assert_int_equal(udpws_close(&u, WS_CLOSE_POLICY, fr, sizeof(fr)), 0);
	assert_int_equal(udpws_feed(&u, &t, wire, 1, &used, &out), UDPWS_CLOSE);
	assert_int_equal(used, 0);
	udpws_tokens_free(&t);
}

static void test_udpws_token_set(void **state)
{
	static const char *const empty[] = {""};
	static const size_t zero[] = {0};
	struct udpws_tokens t;
	uint8_t h[WS_OUT_HDR_MAX];

	(void)state;
	assert_int_equal(udpws_tokens_build(&t, tokens, lens, 3), 0);
	assert_int_equal(udpws_token_find(&t, "tok-a", 5), 0);
	assert_int_equal(udpws_token_find(&t, "tok-c", 5), 2);
	assert_int_equal(udpws_token_find(&t, "tok-", 4), -1);
	assert_int_equal(udpws_token_find(&t, "tok-aa", 6), -1);
	assert_int_equal(udpws_token_find(&t, "", 0), -1);
	udpws_tokens_free(&t);
	assert_int_equal(udpws_tokens_build(&t, empty, zero, 1), -EINVAL);
	assert_null(t.digest);
	/* A datagram's frame header back to the gateway. */
	assert_int_equal(udpws_datagram_header(h, 148), 4);
	assert_memory_equal(h, "\x82\x7e\x00\x94", 4);
	assert_int_equal(udpws_init(&(struct udpws){0}, HOST, NULL, msg, 100, 0), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_udpws_a_known_token_opens_and_carries_datagrams),
	    cmocka_unit_test(test_udpws_refuses_without_naming_anything_else),
	    cmocka_unit_test(test_udpws_closes_on_a_text_message_and_on_relay_close),
	    cmocka_unit_test(test_udpws_token_set),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
