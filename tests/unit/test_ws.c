/* SPDX-License-Identifier: ISC */
/* Unit tests for ws.c (rung 3's WebSocket, server side) and b64.c: the
 * upgrade request and its answers (RFC 6455 1.3's key and accept), every
 * refusal with its status, splits that change nothing, and the frame
 * reader on masked client frames built here byte by byte. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "ws.h"

#define HOST "tunnel.r1.example.net"

static const char good[] = "GET /t HTTP/1.1\r\n"
			   "Host: tunnel.r1.example.net\r\n"
			   "Upgrade: websocket\r\n"
			   "Connection: Upgrade\r\n"
			   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
			   "Sec-WebSocket-Version: 13\r\n"
			   "Authorization: Bearer tok-123_abc.def~+/==\r\n"
			   "\r\n";

/* The whole request in one piece. */
static enum ws_up_result up(const char *req, uint32_t cap, struct ws_upgrade *u)
{
	size_t used;

	assert_int_equal(ws_up_init(u, cap, NULL, HOST), 0);
	return ws_up_feed(u, (const uint8_t *)req, strlen(req), &used);
}

/* req with the line starting with `line` replaced by `with` (NULL: the
 * line dropped). */
static enum ws_up_result up_with(const char *line, const char *with)
{
	static struct ws_upgrade u;
	char req[2048], *at;

	snprintf(req, sizeof(req), "%s", good);
	at = strstr(req, line);
	assert_non_null(at);
	char *end = strstr(at, "\r\n") + 2;
	char rest[2048];

	snprintf(rest, sizeof(rest), "%s", end);
	snprintf(at, sizeof(req) - (size_t)(at - req), "%s%s", with ? with : "", rest);
	return up(req, 0, &u);
}

static void test_ws_up_accepts_the_rfc_example_and_answers_its_accept(void **state)
{
	struct ws_upgrade u;
	char ans[WS_UP_ANSWER_MAX], accept[WS_ACCEPT_LEN + 1];
	int n;

	assert_int_equal(up(good, 0, &u), WS_UP_OK);
	assert_string_equal(u.token, "tok-123_abc.def~+/==");
	assert_int_equal(u.token_len, strlen("tok-123_abc.def~+/=="));
	ws_accept("dGhlIHNhbXBsZSBub25jZQ==", accept);
	assert_string_equal(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="); /* RFC 6455 1.3 */
	n = ws_up_answer(&u, WS_UP_OK, ans, sizeof(ans));
	assert_true(n > 0);
	assert_string_equal(ans, "HTTP/1.1 101 Switching Protocols\r\n"
				 "Upgrade: websocket\r\n"
				 "Connection: Upgrade\r\n"
				 "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n");
	assert_int_equal(ws_up_answer(&u, WS_UP_OK, ans, 40), -ENOSPC);
	assert_int_equal(ws_up_answer(&u, WS_UP_MORE, ans, sizeof(ans)), -EINVAL);
}

static void test_ws_up_no_split_changes_the_answer_nor_what_is_consumed(void **state)
{
	char req[1024];
	size_t len, used, total;
	struct ws_upgrade u;

	/* A frame's first bytes right behind the request: never consumed. */
	len = (size_t)snprintf(req, sizeof(req), "%s\x82\x85", good);
	for (size_t cut = 0; cut <= len; cut++) {
		assert_int_equal(ws_up_init(&u, 0, NULL, HOST), 0);
		enum ws_up_result r = ws_up_feed(&u, (const uint8_t *)req, cut, &used);
		total = used;
		if (r == WS_UP_MORE) {
			assert_int_equal(used, cut);
			r = ws_up_feed(&u, (const uint8_t *)req + cut, len - cut, &used);
			total += used;
		}
		assert_int_equal(r, WS_UP_OK);
		assert_int_equal(total, len - 2);
		/* Final: later calls consume nothing. */
		assert_int_equal(ws_up_feed(&u, (const uint8_t *)req, len, &used), WS_UP_OK);
		assert_int_equal(used, 0);
	}
	assert_int_equal(ws_up_init(&u, 0, NULL, HOST), 0);
	for (size_t i = 0; i < len - 2; i++) {
		assert_int_equal(ws_up_feed(&u, (const uint8_t *)req + i, 1, &used),
				 i == len - 3 ? WS_UP_OK : WS_UP_MORE);
		assert_int_equal(used, 1);
	}
}

static void test_ws_up_reads_names_in_any_case_and_lists_of_tokens(void **state)
{
	struct ws_upgrade u;
	const char *req = "GET /t HTTP/1.1\r\n"
			  "host: TUNNEL.r1.example.net:443\r\n"
			  "UPGRADE: WebSocket\r\n"
			  "connection:keep-alive ,  upgrade\r\n"
			  "sec-websocket-key:   dGhlIHNhbXBsZSBub25jZQ==  \r\n"
			  "Sec-Websocket-Version: 13\r\n"
			  "Sec-WebSocket-Extensions: permessage-deflate\r\n"
			  "User-Agent: Python/3.11 websockets/10.4\r\n"
			  "authorization: bearer   abc\r\n"
			  "Content-Length: 0\r\n"
			  "\r\n";

	assert_int_equal(up(req, 0, &u), WS_UP_OK);
	assert_string_equal(u.token, "abc");
	assert_string_equal(u.key, "dGhlIHNhbXBsZSBub25jZQ==");
	/* Any Host when none is required. */
	size_t used;
	assert_int_equal(ws_up_init(&u, 0, NULL, NULL), 0);
	assert_int_equal(ws_up_feed(&u, (const uint8_t *)req, strlen(req), &used), WS_UP_OK);
}

static void test_ws_up_refuses_a_missing_or_malformed_token_with_401(void **state)
{
	char ans[WS_UP_ANSWER_MAX];
	struct ws_upgrade u;
	char big[WS_TOKEN_MAX + 40];

	assert_int_equal(up_with("Authorization", NULL), WS_UP_NO_TOKEN);
	assert_int_equal(up_with("Authorization", "Authorization: Basic dXNlcjpwYXNz\r\n"),
			 WS_UP_NO_TOKEN);
	assert_int_equal(up_with("Authorization", "Authorization: Bearer\r\n"), WS_UP_NO_TOKEN);
	assert_int_equal(up_with("Authorization", "Authorization: Bearer a b\r\n"), WS_UP_NO_TOKEN);
	assert_int_equal(up_with("Authorization", "Authorization: Bearer a=b\r\n"), WS_UP_NO_TOKEN);
	assert_int_equal(up_with("Authorization", "Authorization: Bearer ===\r\n"), WS_UP_NO_TOKEN);
	memset(big, 'a', sizeof(big));
	memcpy(big, "Authorization: Bearer ", 22);
	strcpy(big + 22 + WS_TOKEN_MAX + 1, "\r\n");
	assert_int_equal(up_with("Authorization", big), WS_UP_NO_TOKEN);
	strcpy(big + 22 + WS_TOKEN_MAX, "\r\n");
	assert_int_equal(up_with("Authorization", big), WS_UP_OK);
	/* Two Authorization headers: which one would count? Neither. */
	assert_int_equal(
	    up_with("Authorization", "Authorization: Bearer a\r\nAuthorization: Bearer b\r\n"),
	    WS_UP_MALFORMED);

	assert_int_equal(ws_up_status(WS_UP_NO_TOKEN), 401);
	assert_true(ws_up_answer(&u, WS_UP_NO_TOKEN, ans, sizeof(ans)) > 0);
	assert_non_null(strstr(ans, "HTTP/1.1 401 Unauthorized\r\n"));
	assert_non_null(strstr(ans, "WWW-Authenticate: Bearer\r\n"));
	assert_non_null(strstr(ans, "Connection: close\r\n"));
	assert_true(ws_up_answer(&u, WS_UP_FORBIDDEN, ans, sizeof(ans)) > 0);
	assert_string_equal(ans, "HTTP/1.1 403 Forbidden\r\n"
				 "Content-Type: text/plain\r\n"
				 "Content-Length: 10\r\n"
				 "Connection: close\r\n"
				 "\r\n"
				 "Forbidden\n");
}

static void test_ws_up_answers_404_for_another_path_or_host(void **state)
{
	assert_int_equal(up_with("GET", "GET /x HTTP/1.1\r\n"), WS_UP_NOT_FOUND);
	assert_int_equal(up_with("GET", "GET /t/ HTTP/1.1\r\n"), WS_UP_NOT_FOUND);
	assert_int_equal(up_with("GET", "GET /t?a=b HTTP/1.1\r\n"), WS_UP_NOT_FOUND);
	assert_int_equal(up_with("GET", "GET https://tunnel.r1.example.net/t HTTP/1.1\r\n"),
			 WS_UP_NOT_FOUND);
	assert_int_equal(up_with("Host", "Host: other.example.net\r\n"), WS_UP_NOT_FOUND);
	assert_int_equal(up_with("Host", "Host: tunnel.r1.example.net.evil\r\n"), WS_UP_NOT_FOUND);
	assert_int_equal(up_with("Host", "Host: tunnel.r1.example.net:\r\n"), WS_UP_NOT_FOUND);
	assert_int_equal(up_with("Host", "Host: tunnel.r1.example.net:443444\r\n"),
			 WS_UP_NOT_FOUND);
	/* The path before the token: a wrong path without a token is a 404. */
	assert_int_equal(up_with("GET", "GET /x HTTP/1.1\r\n"), WS_UP_NOT_FOUND);
	assert_int_equal(ws_up_status(WS_UP_NOT_FOUND), 404);
}

static void test_ws_up_answers_426_without_an_upgrade_or_version_13(void **state)
{
	char ans[WS_UP_ANSWER_MAX];
	struct ws_upgrade u;

	assert_int_equal(up_with("Upgrade", NULL), WS_UP_NOT_UPGRADE);
	assert_int_equal(up_with("Upgrade", "Upgrade: h2c\r\n"), WS_UP_NOT_UPGRADE);
	assert_int_equal(up_with("Connection", NULL), WS_UP_NOT_UPGRADE);
	assert_int_equal(up_with("Connection", "Connection: keep-alive\r\n"), WS_UP_NOT_UPGRADE);
	assert_int_equal(up_with("Connection", "Connection: upgraded\r\n"), WS_UP_NOT_UPGRADE);
	assert_int_equal(up_with("Sec-WebSocket-Version", NULL), WS_UP_VERSION);
	assert_int_equal(up_with("Sec-WebSocket-Version", "Sec-WebSocket-Version: 8\r\n"),
			 WS_UP_VERSION);
	assert_int_equal(up_with("Sec-WebSocket-Version",
				 "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Version: 13\r\n"),
			 WS_UP_VERSION);
	assert_true(ws_up_answer(&u, WS_UP_VERSION, ans, sizeof(ans)) > 0);
	assert_non_null(strstr(ans, "HTTP/1.1 426 Upgrade Required\r\n"));
	assert_non_null(strstr(ans, "Sec-WebSocket-Version: 13\r\n"));
	assert_non_null(strstr(ans, "Upgrade: websocket\r\n"));
}

static void test_ws_up_refuses_a_key_that_is_not_16_bytes_of_base64(void **state)
{
	assert_int_equal(up_with("Sec-WebSocket-Key", NULL), WS_UP_BAD_KEY);
	/* 15 bytes, 17 bytes, a character outside the alphabet, non-canonical
	 * padding bits, missing padding. */
	assert_int_equal(
	    up_with("Sec-WebSocket-Key", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25j\r\n"),
	    WS_UP_BAD_KEY);
	assert_int_equal(
	    up_with("Sec-WebSocket-Key", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQAB\r\n"),
	    WS_UP_BAD_KEY);
	assert_int_equal(
	    up_with("Sec-WebSocket-Key", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25j*Q==\r\n"),
	    WS_UP_BAD_KEY);
	assert_int_equal(
	    up_with("Sec-WebSocket-Key", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZR==\r\n"),
	    WS_UP_BAD_KEY);
	assert_int_equal(
	    up_with("Sec-WebSocket-Key", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ\r\n"),
	    WS_UP_BAD_KEY);
	assert_int_equal(up_with("Sec-WebSocket-Key",
				 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
				 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"),
			 WS_UP_BAD_KEY);
}

static void test_ws_up_refuses_what_is_not_a_plain_http11_get_with_400(void **state)
{
	assert_int_equal(up_with("GET", "POST /t HTTP/1.1\r\n"), WS_UP_MALFORMED);
	assert_int_equal(up_with("GET", "get /t HTTP/1.1\r\n"), WS_UP_MALFORMED);
	assert_int_equal(up_with("GET", "GET /t HTTP/1.0\r\n"), WS_UP_MALFORMED);
	assert_int_equal(up_with("GET", "GET  /t HTTP/1.1\r\n"), WS_UP_MALFORMED);
	assert_int_equal(up_with("GET", "GET /t HTTP/1.1 \r\n"), WS_UP_MALFORMED);
	assert_int_equal(up_with("GET", "GET /t HTTP/1.1\n"), WS_UP_MALFORMED);
	assert_int_equal(up_with("GET", "\r\nGET /t HTTP/1.1\r\n"), WS_UP_MALFORMED);
	assert_int_equal(up_with("Host", NULL), WS_UP_MALFORMED);
	assert_int_equal(up_with("Host", "Host: a\r\nHost: tunnel.r1.example.net\r\n"),
			 WS_UP_MALFORMED);
	assert_int_equal(up_with("Upgrade", "Upgrade : websocket\r\n"), WS_UP_MALFORMED);
	assert_int_equal(up_with("Upgrade", "Upgrade: websocket\r\n continued\r\n"),
			 WS_UP_MALFORMED);
	assert_int_equal(up_with("Upgrade", "Upgrade: web\x01socket\r\n"), WS_UP_MALFORMED);
	assert_int_equal(up_with("Upgrade", "Upgrade: web\rsocket\r\n"), WS_UP_MALFORMED);
	assert_int_equal(up_with("Upgrade", "Upgrade websocket\r\n"), WS_UP_MALFORMED);
	assert_int_equal(up_with("Upgrade", "Upgrade: websocket\r\nContent-Length: 5\r\n"),
			 WS_UP_MALFORMED);
	assert_int_equal(up_with("Upgrade", "Upgrade: websocket\r\nTransfer-Encoding: x\r\n"),
			 WS_UP_MALFORMED);

	/* A NUL inside a value. */
	struct ws_upgrade u;
	const char req[] = "GET /t HTTP/1.1\r\nHost: a\0b\r\n\r\n";
	size_t used;

	assert_int_equal(ws_up_init(&u, 0, NULL, NULL), 0);
	assert_int_equal(ws_up_feed(&u, (const uint8_t *)req, sizeof(req) - 1, &used),
			 WS_UP_MALFORMED);
	assert_int_equal(ws_up_status(WS_UP_MALFORMED), 400);
}

static void test_ws_up_refuses_a_request_over_its_cap_with_431(void **state)
{
	char req[8192];
	struct ws_upgrade u;
	size_t n, used;

	/* Many small headers: over the cap (4096), known at its byte. */
	n = (size_t)snprintf(req, sizeof(req), "GET /t HTTP/1.1\r\n");
	while (n < 5000)
		n += (size_t)snprintf(req + n, sizeof(req) - n, "X-Pad: 0123456789\r\n");
	assert_int_equal(ws_up_init(&u, 0, NULL, NULL), 0);
	assert_int_equal(ws_up_feed(&u, (const uint8_t *)req, n, &used), WS_UP_TOO_BIG);
	assert_int_equal(used, 4097);
	/* One line over WS_UP_LINE_MAX, inside the cap. */
	n = (size_t)snprintf(req, sizeof(req), "GET /t HTTP/1.1\r\nX-Long: ");
	memset(req + n, 'a', 1100);
	assert_int_equal(ws_up_init(&u, 16384, NULL, NULL), 0);
	assert_int_equal(ws_up_feed(&u, (const uint8_t *)req, n + 1100, &used), WS_UP_TOO_BIG);
	assert_int_equal(ws_up_init(&u, 255, NULL, NULL), -EINVAL);
	assert_int_equal(ws_up_status(WS_UP_TOO_BIG), 431);
}

static void test_ws_token_equal_compares_whole_tokens(void **state)
{
	assert_true(ws_token_equal("abc", 3, "abc", 3));
	assert_false(ws_token_equal("abc", 3, "abd", 3));
	assert_false(ws_token_equal("abc", 3, "abcd", 4));
	assert_false(ws_token_equal("", 0, "a", 1));
	assert_true(ws_token_equal("", 0, "", 0));
}

static void test_b64_decodes_only_the_canonical_spelling(void **state)
{
	uint8_t out[32], in[20] = {0};
	char s[B64_LEN(20) + 1];

	for (size_t n = 0; n <= 20; n++) {
		for (size_t i = 0; i < n; i++)
			in[i] = (uint8_t)(i * 37 + n);
		assert_int_equal(b64_encode(s, in, n), B64_LEN(n));
		assert_true(b64_decode(s, B64_LEN(n), out, n));
		assert_memory_equal(out, in, n);
		if (n)
			assert_false(b64_decode(s, B64_LEN(n), out, n - 1));
	}
	assert_true(b64_decode("YQ==", 4, out, 1));
	assert_false(b64_decode("YR==", 4, out, 1)); /* unused bits set */
	assert_false(b64_decode("YQ=a", 4, out, 1));
	assert_false(b64_decode("Y===", 4, out, 1));
	assert_false(b64_decode("YQ", 2, out, 1));
	assert_false(b64_decode("Y Q=", 4, out, 1));
	assert_true(b64_decode("+/+/", 4, out, 3));
	assert_false(b64_decode("-_-_", 4, out, 3)); /* not the URL alphabet */
}

/* A client frame: masked with a fixed key; len_form 0 = shortest, 16 or 64
 * forces that encoding; mask false leaves it unmasked. */
static size_t cframe(uint8_t *out, uint8_t b0, const void *payload, size_t len, int len_form,
		     bool mask)
{
	static const uint8_t key[4] = {0x37, 0xfa, 0x21, 0x3d};
	const uint8_t *p = payload;
	size_t h = 0;

	out[h++] = b0;
	uint8_t m = mask ? 0x80 : 0;
	if (len_form == 0 && len < 126) {
		out[h++] = m | (uint8_t)len;
	} else if (len_form == 16 || (len_form == 0 && len <= 0xffff)) {
		out[h++] = m | 126;
		out[h++] = (uint8_t)(len >> 8);
		out[h++] = (uint8_t)len;
	} else {
		out[h++] = m | 127;
		for (int i = 0; i < 8; i++)
			out[h++] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
	}
	if (mask) {
		memcpy(out + h, key, 4);
		h += 4;
	}
	for (size_t i = 0; i < len; i++)
		out[h + i] = mask ? p[i] ^ key[i & 3] : p[i];
	return h + len;
}

struct events {
	int n;
	enum ws_event_kind kind[16];
	size_t len[16];
	uint16_t code[16];
	uint8_t data[4][70000];
};

/* Feed the stream in pieces of `piece` bytes (0: whole), collecting events. */
static void feed(struct ws_reader *r, const uint8_t *p, size_t n, size_t piece, struct events *e)
{
	size_t off = 0;

	memset(e, 0, sizeof(*e));
	while (off < n) {
		size_t chunk = piece && n - off > piece ? piece : n - off;
		size_t used;
		struct ws_event ev;

		for (;;) {
			enum ws_event_kind k = ws_read(r, p + off, chunk, &used, &ev);

			off += used;
			chunk -= used;
			if (k == WS_EV_MORE) {
				assert_int_equal(chunk, 0);
				break;
			}
			assert_true(e->n < 16);
			e->kind[e->n] = k;
			e->len[e->n] = ev.len;
			e->code[e->n] = ev.code;
			if (e->n < 4 && ev.len)
				memcpy(e->data[e->n], ev.data, ev.len);
			e->n++;
			if (k == WS_EV_CLOSE || k == WS_EV_ERROR)
				return;
		}
	}
}

static uint8_t msgbuf[WS_MSG_MAX];
static uint8_t stream[200000];
static struct events ev_whole, ev_bytes;

/* The same events whole and one byte at a time. */
static void both(const uint8_t *p, size_t n, uint32_t max_msg)
{
	struct ws_reader r;

	assert_int_equal(ws_reader_init(&r, msgbuf, max_msg), 0);
	feed(&r, p, n, 0, &ev_whole);
	assert_int_equal(ws_reader_init(&r, msgbuf, max_msg), 0);
	feed(&r, p, n, 1, &ev_bytes);
	assert_int_equal(ev_whole.n, ev_bytes.n);
	for (int i = 0; i < ev_whole.n; i++) {
		assert_int_equal(ev_whole.kind[i], ev_bytes.kind[i]);
		assert_int_equal(ev_whole.len[i], ev_bytes.len[i]);
		assert_int_equal(ev_whole.code[i], ev_bytes.code[i]);
		if (i < 4)
			assert_memory_equal(ev_whole.data[i], ev_bytes.data[i], ev_whole.len[i]);
	}
}

static void test_ws_read_hands_out_binary_messages_of_each_length_form(void **state)
{
	static uint8_t payload[WS_MSG_MAX];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 1);
	n += cframe(stream + n, 0x82, payload, 148, 0, true); /* a WireGuard handshake */
	n += cframe(stream + n, 0x82, payload, 125, 0, true);
	n += cframe(stream + n, 0x82, payload, 1500, 0, true);
	n += cframe(stream + n, 0x82, payload, 65535, 0, true);
	both(stream, n, WS_MSG_MAX);
	assert_int_equal(ev_whole.n, 4);
	assert_int_equal(ev_whole.kind[0], WS_EV_BINARY);
	assert_int_equal(ev_whole.len[0], 148);
	assert_memory_equal(ev_whole.data[0], payload, 148);
	assert_int_equal(ev_whole.len[1], 125);
	assert_int_equal(ev_whole.len[2], 1500);
	assert_memory_equal(ev_whole.data[2], payload, 1500);
	assert_int_equal(ev_whole.len[3], 65535);
	assert_memory_equal(ev_whole.data[3], payload, 65535);
}

static void test_ws_read_reassembles_fragments_around_control_frames(void **state)
{
	uint8_t a[600], b[700];
	size_t n = 0;

	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	n += cframe(stream + n, 0x02, a, sizeof(a), 0, true); /* binary, not FIN */
	n += cframe(stream + n, 0x89, "hi", 2, 0, true);      /* ping between */
	n += cframe(stream + n, 0x00, b, 0, 0, true);	      /* empty continuation */
	n += cframe(stream + n, 0x8A, "", 0, 0, true);	      /* pong */
	n += cframe(stream + n, 0x80, b, sizeof(b), 0, true); /* last fragment */
	n += cframe(stream + n, 0x88,
		    "\x03\xe8"
		    "bye",
		    5, 0, true);
	both(stream, n, 1500);
	assert_int_equal(ev_whole.n, 4);
	assert_int_equal(ev_whole.kind[0], WS_EV_PING);
	assert_int_equal(ev_whole.len[0], 2);
	assert_memory_equal(ev_whole.data[0], "hi", 2);
	assert_int_equal(ev_whole.kind[1], WS_EV_PONG);
	assert_int_equal(ev_whole.kind[2], WS_EV_BINARY);
	assert_int_equal(ev_whole.len[2], 1300);
	assert_memory_equal(ev_whole.data[2], a, 600);
	assert_memory_equal(ev_whole.data[2] + 600, b, 700);
	assert_int_equal(ev_whole.kind[3], WS_EV_CLOSE);
	assert_int_equal(ev_whole.code[3], 1000);
	assert_int_equal(ev_whole.len[3], 3);
	assert_memory_equal(ev_whole.data[3], "bye", 3);
}

/* One frame alone: the single event it makes. */
static void one(const uint8_t *p, size_t n, uint32_t max_msg, enum ws_event_kind k, uint16_t code)
{
	both(p, n, max_msg);
	assert_int_equal(ev_whole.n, 1);
	assert_int_equal(ev_whole.kind[0], k);
	assert_int_equal(ev_whole.code[0], code);
}

static void test_ws_read_closes_1002_on_each_framing_error(void **state)
{
	uint8_t x[200] = {0};
	size_t n;

	one(stream, cframe(stream, 0x82, x, 10, 0, false), 1500, WS_EV_ERROR, 1002); /* unmasked */
	one(stream, cframe(stream, 0xC2, x, 10, 0, true), 1500, WS_EV_ERROR, 1002);  /* RSV1 */
	one(stream, cframe(stream, 0xA2, x, 10, 0, true), 1500, WS_EV_ERROR, 1002);  /* RSV2 */
	one(stream, cframe(stream, 0x92, x, 10, 0, true), 1500, WS_EV_ERROR, 1002);  /* RSV3 */
	one(stream, cframe(stream, 0x83, x, 10, 0, true), 1500, WS_EV_ERROR, 1002);  /* op 3 */
	one(stream, cframe(stream, 0x8B, x, 10, 0, true), 1500, WS_EV_ERROR, 1002);  /* op B */
	one(stream, cframe(stream, 0x80, x, 10, 0, true), 1500, WS_EV_ERROR, 1002);  /* lone cont */
	one(stream, cframe(stream, 0x09, x, 10, 0, true), 1500, WS_EV_ERROR, 1002);  /* frag ping */
	one(stream, cframe(stream, 0x89, x, 126, 0, true), 1500, WS_EV_ERROR, 1002); /* big ping */
	one(stream, cframe(stream, 0x82, x, 100, 16, true), 1500, WS_EV_ERROR, 1002); /* long 16 */
	one(stream, cframe(stream, 0x82, x, 200, 64, true), 1500, WS_EV_ERROR, 1002); /* long 64 */
	/* A 64-bit length with its top bit set. */
	n = cframe(stream, 0x82, x, 0, 64, true);
	stream[2] = 0x80;
	one(stream, n, 1500, WS_EV_ERROR, 1002);
	/* A new message inside a fragmented one. */
	n = cframe(stream, 0x02, x, 10, 0, true);
	n += cframe(stream + n, 0x82, x, 10, 0, true);
	one(stream, n, 1500, WS_EV_ERROR, 1002);
	/* A close with a one-byte payload, or a code no peer may send. */
	one(stream, cframe(stream, 0x88, "\x03", 1, 0, true), 1500, WS_EV_ERROR, 1002);
	one(stream, cframe(stream, 0x88, "\x03\xed", 2, 0, true), 1500, WS_EV_ERROR, 1002);
	one(stream, cframe(stream, 0x88, "\x03\xee", 2, 0, true), 1500, WS_EV_ERROR, 1002);
	one(stream, cframe(stream, 0x88, "\x03\xe7", 2, 0, true), 1500, WS_EV_ERROR, 1002);
	one(stream, cframe(stream, 0x88, "\x13\x88", 2, 0, true), 1500, WS_EV_ERROR, 1002);
}

static void test_ws_read_refuses_text_1003_and_a_bad_reason_1007(void **state)
{
	one(stream, cframe(stream, 0x81, "hello", 5, 0, true), 1500, WS_EV_ERROR, 1003);
	one(stream, cframe(stream, 0x88, "\x03\xe8\xc0\xaf", 4, 0, true), 1500, WS_EV_ERROR, 1007);
	one(stream, cframe(stream, 0x88, "", 0, 0, true), 1500, WS_EV_CLOSE, 1005);
	one(stream, cframe(stream, 0x88, "\x0f\xa0", 2, 0, true), 1500, WS_EV_CLOSE, 4000);
}

static void test_ws_read_refuses_1009_from_the_header_before_the_payload(void **state)
{
	static uint8_t big[1600];
	struct ws_reader r;
	struct ws_event ev;
	size_t n, used;

	n = cframe(stream, 0x82, big, 1501, 0, true);
	assert_int_equal(ws_reader_init(&r, msgbuf, 1500), 0);
	/* The header alone (2 + 2 + 4 bytes) decides. */
	assert_int_equal(ws_read(&r, stream, 8, &used, &ev), WS_EV_ERROR);
	assert_int_equal(ev.code, 1009);
	assert_int_equal(used, 8);
	/* Final: consumes nothing more, says it again. */
	assert_int_equal(ws_read(&r, stream + 8, n - 8, &used, &ev), WS_EV_ERROR);
	assert_int_equal(used, 0);
	assert_int_equal(ev.code, 1009);
	/* The bound counts every fragment of one message. */
	n = cframe(stream, 0x02, big, 800, 0, true);
	n += cframe(stream + n, 0x80, big, 701, 0, true);
	one(stream, n, 1500, WS_EV_ERROR, 1009);
	n = cframe(stream, 0x02, big, 800, 0, true);
	n += cframe(stream + n, 0x80, big, 700, 0, true);
	one(stream, n, 1500, WS_EV_BINARY, 0);
	assert_int_equal(ev_whole.len[0], 1500);
	/* The bounds of max_msg. */
	assert_int_equal(ws_reader_init(&r, msgbuf, WS_MSG_MIN - 1), -EINVAL);
	assert_int_equal(ws_reader_init(&r, msgbuf, WS_MSG_MAX + 1), -EINVAL);
	assert_int_equal(ws_reader_init(&r, NULL, 1500), -EINVAL);
}

static void test_ws_encode_writes_unmasked_server_frames(void **state)
{
	uint8_t out[70000], payload[70000] = {1, 2, 3};

	assert_int_equal(ws_encode(out, sizeof(out), WS_OP_BINARY, payload, 3), 5);
	assert_memory_equal(out, "\x82\x03\x01\x02\x03", 5);
	assert_int_equal(ws_encode(out, sizeof(out), WS_OP_BINARY, payload, 126), 130);
	assert_memory_equal(out, "\x82\x7e\x00\x7e", 4);
	assert_int_equal(ws_encode(out, sizeof(out), WS_OP_BINARY, payload, 65535), 65539);
	assert_memory_equal(out, "\x82\x7e\xff\xff", 4);
	assert_int_equal(ws_frame_header(out, WS_OP_BINARY, 65536), 10);
	assert_memory_equal(out, "\x82\x7f\x00\x00\x00\x00\x00\x01\x00\x00", 10);
	assert_int_equal(ws_encode(out, sizeof(out), WS_OP_BINARY, payload, 65536), -EINVAL);
	assert_int_equal(ws_encode(out, 4, WS_OP_BINARY, payload, 3), -ENOSPC);
	assert_int_equal(ws_encode(out, sizeof(out), WS_OP_PONG, (const uint8_t *)"hi", 2), 4);
	assert_memory_equal(out, "\x8a\x02hi", 4);
	assert_int_equal(ws_encode(out, sizeof(out), WS_OP_PING, payload, 126), -EINVAL);
	assert_int_equal(ws_encode(out, sizeof(out), WS_OP_TEXT, payload, 1), -EINVAL);
	assert_int_equal(ws_encode(out, sizeof(out), WS_OP_CONT, payload, 1), -EINVAL);
	assert_int_equal(ws_encode_close(out, sizeof(out), 1003, "text"), 8);
	assert_memory_equal(out, "\x88\x06\x03\xebtext", 8);
	assert_int_equal(ws_encode_close(out, sizeof(out), WS_CLOSE_NO_STATUS, NULL), 2);
	assert_memory_equal(out, "\x88\x00", 2);
	assert_int_equal(ws_encode_close(out, sizeof(out), 1006, NULL), -EINVAL);
	assert_int_equal(ws_encode_close(out, sizeof(out), 1000, "\xff"), -EINVAL);
	char reason[125];
	memset(reason, 'r', 124);
	reason[124] = '\0';
	assert_int_equal(ws_encode_close(out, sizeof(out), 1000, reason), -EINVAL);
	reason[123] = '\0';
	assert_int_equal(ws_encode_close(out, sizeof(out), 1000, reason), 127);
}

static void test_ws_utf8_valid_refuses_overlongs_surrogates_and_beyond(void **state)
{
	assert_true(ws_utf8_valid((const uint8_t *)"", 0));
	assert_true(
	    ws_utf8_valid((const uint8_t *)"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14));
	assert_true(ws_utf8_valid((const uint8_t *)"\xf4\x8f\xbf\xbf", 4)); /* U+10FFFF */
	assert_false(ws_utf8_valid((const uint8_t *)"\xc0\xaf", 2));
	assert_false(ws_utf8_valid((const uint8_t *)"\xe0\x80\xaf", 3));
	assert_false(ws_utf8_valid((const uint8_t *)"\xed\xa0\x80", 3));
	assert_false(ws_utf8_valid((const uint8_t *)"\xf4\x90\x80\x80", 4));
	assert_false(ws_utf8_valid((const uint8_t *)"\xc3", 1));
	assert_false(ws_utf8_valid((const uint8_t *)"\x80", 1));
	assert_false(ws_utf8_valid((const uint8_t *)"\xf8\x88\x80\x80\x80", 5));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ws_up_accepts_the_rfc_example_and_answers_its_accept),
	    cmocka_unit_test(test_ws_up_no_split_changes_the_answer_nor_what_is_consumed),
	    cmocka_unit_test(test_ws_up_reads_names_in_any_case_and_lists_of_tokens),
	    cmocka_unit_test(test_ws_up_refuses_a_missing_or_malformed_token_with_401),
	    cmocka_unit_test(test_ws_up_answers_404_for_another_path_or_host),
	    cmocka_unit_test(test_ws_up_answers_426_without_an_upgrade_or_version_13),
	    cmocka_unit_test(test_ws_up_refuses_a_key_that_is_not_16_bytes_of_base64),
	    cmocka_unit_test(test_ws_up_refuses_what_is_not_a_plain_http11_get_with_400),
	    cmocka_unit_test(test_ws_up_refuses_a_request_over_its_cap_with_431),
	    cmocka_unit_test(test_ws_token_equal_compares_whole_tokens),
	    cmocka_unit_test(test_b64_decodes_only_the_canonical_spelling),
	    cmocka_unit_test(test_ws_read_hands_out_binary_messages_of_each_length_form),
	    cmocka_unit_test(test_ws_read_reassembles_fragments_around_control_frames),
	    cmocka_unit_test(test_ws_read_closes_1002_on_each_framing_error),
	    cmocka_unit_test(test_ws_read_refuses_text_1003_and_a_bad_reason_1007),
	    cmocka_unit_test(test_ws_read_refuses_1009_from_the_header_before_the_payload),
	    cmocka_unit_test(test_ws_encode_writes_unmasked_server_frames),
	    cmocka_unit_test(test_ws_utf8_valid_refuses_overlongs_surrogates_and_beyond),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
