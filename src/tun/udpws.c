/* SPDX-License-Identifier: ISC */
/* A rung-3 connection's protocol over ws.c's readers and writers. */
#include "udpws.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

static bool digest(const char *s, size_t n, uint8_t out[UDPWS_DIGEST_LEN])
{
	unsigned int len = 0;

	return EVP_Digest(s, n, out, &len, EVP_sha256(), NULL) && len == UDPWS_DIGEST_LEN;
}

int udpws_tokens_build(struct udpws_tokens *t, const char *const *tokens, const size_t *lens,
		       size_t n)
{
	t->n = 0;
	t->digest = n ? calloc(n, sizeof(*t->digest)) : NULL;
	if (n && !t->digest)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (lens[i] == 0 || lens[i] > WS_TOKEN_MAX ||
		    !digest(tokens[i], lens[i], t->digest[i])) {
			udpws_tokens_free(t);
			return -EINVAL;
		}
	}
	t->n = n;
	return 0;
}

void udpws_tokens_free(struct udpws_tokens *t)
{
	free(t->digest);
	t->digest = NULL;
	t->n = 0;
}

long udpws_token_find(const struct udpws_tokens *t, const char *tok, size_t len)
{
	uint8_t d[UDPWS_DIGEST_LEN];
	long found = -1;

	if (!t || len == 0 || len > WS_TOKEN_MAX || !digest(tok, len, d))
		return -1;
	/* Every entry, whichever matches. */
	for (size_t i = 0; i < t->n; i++) {
		long hit = CRYPTO_memcmp(d, t->digest[i], UDPWS_DIGEST_LEN) == 0;

		found = hit && found < 0 ? (long)i : found;
	}
	return found;
}

int udpws_init(struct udpws *u, const char *host, const char *path, uint8_t *msg, uint32_t max_msg,
	       uint32_t up_cap)
{
	memset(u, 0, sizeof(*u));
	u->token = -1;
	if (!host || !msg || max_msg < WS_MSG_MIN || max_msg > WS_MSG_MAX)
		return -EINVAL;
	u->msg = msg;
	u->max_msg = max_msg;
	u->state = UDPWS_UPGRADE;
	return ws_up_init(&u->u.up, up_cap, path, host);
}

/* The answer to the upgrade: 101 and on to the frames, or a refusal. */
static enum udpws_ev upgrade_done(struct udpws *u, const struct udpws_tokens *t,
				  enum ws_up_result r, struct udpws_out *out)
{
	int len;

	if (r == WS_UP_OK) {
		u->token = udpws_token_find(t, u->u.up.token, u->u.up.token_len);
		if (u->token < 0)
			r = WS_UP_FORBIDDEN;
	}
	len = ws_up_answer(&u->u.up, r, (char *)u->out, sizeof(u->out));
	out->status = ws_up_status(r);
	u->status = (uint16_t)out->status;
	out->data = u->out;
	out->len = len > 0 ? (size_t)len : 0;
	/* The token is not kept past its check. */
	OPENSSL_cleanse(u->u.up.token, sizeof(u->u.up.token));
	if (r != WS_UP_OK || len <= 0) {
		u->state = UDPWS_CLOSED;
		return UDPWS_CLOSE;
	}
	u->state = UDPWS_OPEN;
	if (ws_reader_init(&u->u.rd, u->msg, u->max_msg) != 0) {
		u->state = UDPWS_CLOSED;
		return UDPWS_CLOSE;
	}
	return UDPWS_SEND;
}

static enum udpws_ev closing(struct udpws *u, uint16_t code, struct udpws_out *out)
{
	int len = ws_encode_close(u->out, sizeof(u->out), code, NULL);

	u->state = UDPWS_CLOSED;
	out->data = u->out;
	out->len = len > 0 ? (size_t)len : 0;
	return UDPWS_CLOSE;
}

enum udpws_ev udpws_feed(struct udpws *u, const struct udpws_tokens *t, const uint8_t *p, size_t n,
			 size_t *used, struct udpws_out *out)
{
	*out = (struct udpws_out){NULL, 0, 0};
	*used = 0;
	if (u->state == UDPWS_UPGRADE) {
		enum ws_up_result r = ws_up_feed(&u->u.up, p, n, used);

		return r == WS_UP_MORE ? UDPWS_MORE : upgrade_done(u, t, r, out);
	}
	while (u->state == UDPWS_OPEN) {
		struct ws_event ev;
		size_t k = 0;
		enum ws_event_kind e = ws_read(&u->u.rd, p + *used, n - *used, &k, &ev);
		int len;

		*used += k;
		switch (e) {
		case WS_EV_MORE:
			return UDPWS_MORE;
		case WS_EV_BINARY:
			out->data = ev.data;
			out->len = ev.len;
			return UDPWS_DATAGRAM;
		case WS_EV_PING:
			len = ws_encode(u->out, sizeof(u->out), WS_OP_PONG, ev.data, ev.len);
			if (len < 0)
				return closing(u, WS_CLOSE_INTERNAL, out);
			out->data = u->out;
			out->len = (size_t)len;
			return UDPWS_SEND;
		case WS_EV_PONG:
			continue; /* nothing owed */
		case WS_EV_CLOSE:
			/* Answer with the same code (RFC 6455 5.5.1), or an
			 * empty close for none. */
			return closing(u, ev.code, out);
		case WS_EV_ERROR:
		default:
			return closing(u, ev.code, out);
		}
	}
	return UDPWS_CLOSE;
}

size_t udpws_datagram_header(uint8_t out[WS_OUT_HDR_MAX], size_t len)
{
	return ws_frame_header(out, WS_OP_BINARY, len);
}

size_t udpws_close(struct udpws *u, uint16_t code, uint8_t *out, size_t cap)
{
	int len;

	if (u->state != UDPWS_OPEN)
		return 0;
	u->state = UDPWS_CLOSED;
	len = ws_encode_close(out, cap, code, NULL);
	return len > 0 ? (size_t)len : 0;
}
