/* SPDX-License-Identifier: ISC */
/* One rung-3 connection's protocol (udpws: WireGuard in a WebSocket over
 * TLS), on the plaintext after TLS: the upgrade, the gateway's token
 * checked against the set of the last heartbeat, then each binary message
 * one WireGuard datagram, and the answers the relay owes (101 or a refusal,
 * pongs, the closing handshake). Pure: the caller carries the bytes (TLS
 * one way, a connected UDP socket to the local WireGuard port the other)
 * and decides about time.
 *
 * The token set: SHA-256 digests of the tokens, so that a lookup scans
 * every entry with a comparison that takes the same time wherever they
 * differ; a token is known by its index in the set it was found in. */
#ifndef ETR_UDPWS_H
#define ETR_UDPWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ws.h"

#define UDPWS_DIGEST_LEN 32

struct udpws_tokens {
	uint8_t (*digest)[UDPWS_DIGEST_LEN];
	size_t n;
};

/* The set of tokens[0..n) (lens[i] bytes each). Returns 0, -EINVAL for an
 * empty token or one over WS_TOKEN_MAX, or -ENOMEM. */
int udpws_tokens_build(struct udpws_tokens *t, const char *const *tokens, const size_t *lens,
		       size_t n);
void udpws_tokens_free(struct udpws_tokens *t);

/* The index of tok in t, or -1; the time taken depends on t->n only. */
long udpws_token_find(const struct udpws_tokens *t, const char *tok, size_t len);

/* What udpws_feed asks of the caller. */
enum udpws_ev {
	UDPWS_MORE,	/* every byte given was consumed: read more */
	UDPWS_SEND,	/* send out.data to the client, then feed the rest */
	UDPWS_DATAGRAM, /* send out.data to WireGuard, then feed the rest */
	UDPWS_CLOSE,	/* send out.data (may be empty) to the client and close */
};

struct udpws_out {
	const uint8_t *data; /* valid until the next call */
	size_t len;
	int status; /* UDPWS_CLOSE before the upgrade: the HTTP status sent */
};

enum udpws_state { UDPWS_UPGRADE, UDPWS_OPEN, UDPWS_CLOSED };

/* A connection: about 1.6 KB and the message buffer the caller gives. */
struct udpws {
	uint8_t state;	 /* enum udpws_state */
	uint16_t status; /* the upgrade's answer (101, or a refusal's); 0 before */
	long token;	 /* its index in the set it was found in; -1 before */
	union {
		struct ws_upgrade up; /* UDPWS_UPGRADE */
		struct ws_reader rd;  /* UDPWS_OPEN */
	} u;
	uint8_t *msg;
	uint32_t max_msg;
	uint8_t out[WS_UP_ANSWER_MAX];
};

/* A connection to name host at path (NULL: WS_PATH_DEFAULT), messages of
 * at most max_msg bytes into msg (WS_MSG_MIN..WS_MSG_MAX), the upgrade
 * request at most up_cap bytes (0: WS_UP_CAP_DEFAULT). Returns 0 or
 * -EINVAL. host and path must outlive u. */
int udpws_init(struct udpws *u, const char *host, const char *path, uint8_t *msg, uint32_t max_msg,
	       uint32_t up_cap);

/* Read the n bytes at p against the token set t; *used says how many were
 * consumed. Call again with the rest after each event but UDPWS_MORE;
 * UDPWS_CLOSE is final (later calls consume nothing and repeat it with
 * nothing to send). */
enum udpws_ev udpws_feed(struct udpws *u, const struct udpws_tokens *t, const uint8_t *p, size_t n,
			 size_t *used, struct udpws_out *out);

/* The header of the binary frame carrying a datagram of len bytes back to
 * the gateway; returns its length (2, 4 or 10). */
size_t udpws_datagram_header(uint8_t out[WS_OUT_HDR_MAX], size_t len);

/* End an open connection from the relay's side (a token that left the set:
 * WS_CLOSE_POLICY; the relay going away: WS_CLOSE_GOING_AWAY): the close
 * frame to send into out (at least WS_CTL_MAX + 2 bytes); its length, or 0
 * when the connection is not open. The connection is closed after it. */
size_t udpws_close(struct udpws *u, uint16_t code, uint8_t *out, size_t cap);

#endif
