/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for ws.c's upgrade reader (rung 3). The input is the
 * start of a TCP stream after TLS. Differential between splits: whole,
 * pieces of sizes drawn from the input, and one byte at a time must give
 * the same answer and consume the same bytes, never past the input nor,
 * once answered, past the blank line; an OK carries a token of at most
 * WS_TOKEN_MAX token68 characters and a key whose accept is 28 characters;
 * every final answer fits WS_UP_ANSWER_MAX. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum ws_up_result run(const uint8_t *data, size_t size, int mode, size_t *consumed,
			     struct ws_upgrade *u)
{
	enum ws_up_result r = WS_UP_MORE;
	uint32_t seed = (uint32_t)size * 2654435761u + 1;
	size_t off = 0;

	/* The tunnel name required in half the runs, so Host both matters and not. */
	if (ws_up_init(u, 0, NULL, size & 1 ? "tunnel.r1.example.net" : NULL) != 0)
		abort();
	while (off < size) {
		size_t piece = size - off, used;

		if (mode == 1) {
			seed = seed * 1103515245u + 12345u;
			piece = 1 + (seed >> 16) % 97;
			if (piece > size - off)
				piece = size - off;
		} else if (mode == 2) {
			piece = 1;
		}
		r = ws_up_feed(u, data + off, piece, &used);
		if (used > piece)
			abort();
		off += used;
		if (r != WS_UP_MORE)
			break;
		if (used != piece)
			abort(); /* MORE consumes everything */
	}
	*consumed = off;
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ws_upgrade u[3];
	enum ws_up_result r[3];
	size_t used[3];
	char ans[WS_UP_ANSWER_MAX];

	for (int m = 0; m < 3; m++)
		r[m] = run(data, size, m, &used[m], &u[m]);
	for (int m = 1; m < 3; m++)
		if (r[m] != r[0] || used[m] != used[0] || u[m].token_len != u[0].token_len)
			abort();
	if (r[0] == WS_UP_MORE) {
		if (used[0] != size || used[0] > WS_UP_CAP_DEFAULT)
			abort();
		return 0;
	}
	if (used[0] > WS_UP_CAP_DEFAULT + 1)
		abort();
	if (r[0] == WS_UP_OK) {
		/* It ended with the blank line. */
		if (used[0] < 4 || memcmp(data + used[0] - 4, "\r\n\r\n", 4) != 0)
			abort();
		/* A token taken here is one the control plane's set may hold
		 * (ws_token_valid, which ctl_msg_tunnel_tokens asks). */
		if (u[0].token_len == 0 || u[0].token_len > WS_TOKEN_MAX ||
		    strlen(u[0].token) != u[0].token_len || strlen(u[0].key) != WS_KEY_LEN ||
		    !ws_token_valid(u[0].token, u[0].token_len))
			abort();
		if (memcmp(u[0].token, u[1].token, u[0].token_len) != 0)
			abort();
	}
	for (int s = WS_UP_OK; s < WS_UP_RESULTS; s++) {
		int n = ws_up_answer(&u[0], (enum ws_up_result)s, ans, sizeof(ans));

		if (s == WS_UP_OK && r[0] != WS_UP_OK) {
			if (n != -22)
				abort();
			continue;
		}
		if (n <= 0 || (size_t)n != strlen(ans) || memcmp(ans, "HTTP/1.1 ", 9) != 0)
			abort();
	}
	return 0;
}
