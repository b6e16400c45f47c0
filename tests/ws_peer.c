/* SPDX-License-Identifier: ISC */
/* Test-only: rung 3's WebSocket server side over stdin/stdout, for
 * ws_interop.py to drive with a real WebSocket library. Reads the stream
 * in pieces of sizes drawn from SEED (0: one byte at a time), answers the
 * upgrade (the token must equal TOKEN, else 403), then echoes each binary
 * message as a binary message, answers pings with pongs, and ends with a
 * close: the peer's code back, or the reader's error code.
 *   ws_peer TOKEN SEED */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ws.h"

#define MAX_MSG 1500

static void put(const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = write(1, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			exit(2);
		b += w;
		n -= (size_t)w;
	}
}

static uint32_t seed;

static size_t piece(size_t cap)
{
	if (seed == 0)
		return 1;
	seed = seed * 1103515245u + 12345u;
	return 1 + (seed >> 16) % cap;
}

int main(int argc, char **argv)
{
	static uint8_t in[4096], msg[MAX_MSG], out[MAX_MSG + WS_OUT_HDR_MAX];
	struct ws_upgrade u;
	struct ws_reader r;
	enum ws_up_result up = WS_UP_MORE;
	char ans[WS_UP_ANSWER_MAX];
	const char *token;

	if (argc != 3)
		return 64;
	token = argv[1];
	seed = (uint32_t)strtoul(argv[2], NULL, 10);
	if (ws_up_init(&u, 0, NULL, "tunnel.r1.example.net") != 0 ||
	    ws_reader_init(&r, msg, MAX_MSG) != 0)
		return 1;
	for (;;) {
		ssize_t got = read(0, in, piece(sizeof(in)));
		size_t off = 0, used;

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return up == WS_UP_OK ? 3 : 4; /* EOF before a close */
		while (off < (size_t)got) {
			struct ws_event ev;
			enum ws_event_kind k;
			int n = 0;

			if (up == WS_UP_MORE) {
				up = ws_up_feed(&u, in + off, (size_t)got - off, &used);
				off += used;
				if (up == WS_UP_MORE)
					break;
				if (up == WS_UP_OK &&
				    !ws_token_equal(u.token, u.token_len, token, strlen(token)))
					up = WS_UP_FORBIDDEN;
				n = ws_up_answer(&u, up, ans, sizeof(ans));
				if (n < 0)
					return 1;
				put(ans, (size_t)n);
				if (up != WS_UP_OK)
					return 0;
				continue;
			}
			k = ws_read(&r, in + off, (size_t)got - off, &used, &ev);
			off += used;
			switch (k) {
			case WS_EV_MORE:
				break;
			case WS_EV_BINARY:
				n = ws_encode(out, sizeof(out), WS_OP_BINARY, ev.data, ev.len);
				break;
			case WS_EV_PING:
				n = ws_encode(out, sizeof(out), WS_OP_PONG, ev.data, ev.len);
				break;
			case WS_EV_PONG:
				break;
			case WS_EV_CLOSE:
			case WS_EV_ERROR:
				n = ws_encode_close(out, sizeof(out), ev.code, NULL);
				if (n < 0)
					return 1;
				put(out, (size_t)n);
				return 0;
			}
			if (n < 0)
				return 1;
			put(out, (size_t)n);
		}
	}
}
