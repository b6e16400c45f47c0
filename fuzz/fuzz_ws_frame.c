/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for ws.c's frame reader (rung 3). The input is a
 * client's byte stream after the upgrade. Differential between splits:
 * whole, pieces of sizes drawn from the input, and one byte at a time must
 * hand out the same events (kind, length, code, bytes), and a final event
 * must come at the same offset. Bounds: a binary message is at most
 * max_msg bytes, a control payload at most 125; a close's code is one a
 * peer may send (or 1005), an error's one of 1002/1003/1007/1009. Each
 * message re-encoded as a server frame parses back as the same bytes by
 * the header rule of RFC 6455 5.2. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MSG WS_MSG_MIN

static uint8_t bufs[3][MAX_MSG];
static uint8_t out[MAX_MSG + WS_OUT_HDR_MAX];

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static void check_event(enum ws_event_kind k, const struct ws_event *ev)
{
	switch (k) {
	case WS_EV_BINARY: {
		size_t h;
		int n;

		if (ev->len > MAX_MSG)
			abort();
		n = ws_encode(out, sizeof(out), WS_OP_BINARY, ev->data, ev->len);
		h = ev->len < 126 ? 2 : 4;
		if (n < 0 || (size_t)n != h + ev->len || out[0] != 0x82 ||
		    memcmp(out + h, ev->data, ev->len) != 0)
			abort();
		break;
	}
	case WS_EV_PING:
	case WS_EV_PONG:
		if (ev->len > WS_CTL_MAX)
			abort();
		if (ws_encode(out, sizeof(out), WS_OP_PONG, ev->data, ev->len) != (int)ev->len + 2)
			abort();
		break;
	case WS_EV_CLOSE:
		if (ev->len > WS_CTL_MAX - 2 ||
		    (ev->code != WS_CLOSE_NO_STATUS && !ws_close_code_valid(ev->code)) ||
		    !ws_utf8_valid(ev->data, ev->len))
			abort();
		break;
	case WS_EV_ERROR:
		if (ev->code != 1002 && ev->code != 1003 && ev->code != 1007 && ev->code != 1009)
			abort();
		if (ws_encode_close(out, sizeof(out), ev->code, NULL) != 4)
			abort();
		break;
	default:
		abort();
	}
}

/* The events' digest, and the offset of the final event (or size). */
static uint64_t run(const uint8_t *data, size_t size, int mode, size_t *end)
{
	struct ws_reader r;
	uint32_t seed = (uint32_t)size * 2654435761u + 7;
	uint64_t h = 14695981039346656037ull;
	size_t off = 0;

	if (ws_reader_init(&r, bufs[mode], MAX_MSG) != 0)
		abort();
	*end = size;
	while (off < size) {
		size_t piece = size - off;

		if (mode == 1) {
			seed = seed * 1103515245u + 12345u;
			piece = 1 + (seed >> 16) % 300;
			if (piece > size - off)
				piece = size - off;
		} else if (mode == 2) {
			piece = 1;
		}
		while (piece) {
			struct ws_event ev;
			size_t used;
			enum ws_event_kind k = ws_read(&r, data + off, piece, &used, &ev);

			if (used > piece)
				abort();
			off += used;
			piece -= used;
			if (k == WS_EV_MORE) {
				if (piece)
					abort();
				break;
			}
			check_event(k, &ev);
			h = mix(h, &k, sizeof(k));
			h = mix(h, &ev.len, sizeof(ev.len));
			h = mix(h, &ev.code, sizeof(ev.code));
			h = mix(h, ev.data, ev.len);
			if (k == WS_EV_CLOSE || k == WS_EV_ERROR) {
				/* Final: repeated, nothing more consumed. */
				struct ws_event again;

				if (ws_read(&r, data + off, size - off, &used, &again) != k ||
				    used != 0 || again.code != ev.code || again.len != ev.len)
					abort();
				*end = off;
				return h;
			}
		}
	}
	return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t end[3];
	uint64_t h[3];

	for (int m = 0; m < 3; m++)
		h[m] = run(data, size, m, &end[m]);
	if (h[1] != h[0] || h[2] != h[0] || end[1] != end[0] || end[2] != end[0])
		abort();
	return 0;
}
