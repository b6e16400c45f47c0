/* SPDX-License-Identifier: ISC */
/* One rung-3 connection above its sockets: the client's ciphertext in,
 * through TLS (a tls_conn on the tunnel certificate's context) and udpws
 * (upgrade, token, frames), and what it asks of its owner out: a datagram
 * for WireGuard, more bytes, or the end. The ciphertext owed to the client
 * is tls_conn_pending_out's (the owner sends it after each call). No
 * socket, no clock: the tunnel kind's worker instance will own those
 * (src/README.md, "Rung 3"); not used by it yet. */
#ifndef ETR_R3CONN_H
#define ETR_R3CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tls_server.h"
#include "udpws.h"

/* Plaintext read from TLS at once: a record's most. */
#define R3_PLAIN 16384

enum r3_ev {
	R3_MORE,     /* nothing more to do until more ciphertext comes */
	R3_DATAGRAM, /* a datagram for WireGuard (r3conn_next's *dg, *len) */
	R3_CLOSE,    /* send what pending_out has, then close (final) */
};

struct r3conn {
	struct tls_conn *tls;
	struct udpws ws;
	bool closed;
	uint32_t off, len; /* plain[off..len) read, not yet fed to udpws */
	uint8_t plain[R3_PLAIN];
};

/* A connection on srv's context for name host (outlives c), messages of
 * at most max_msg bytes into msg (the caller's, WS_MSG_MIN..WS_MSG_MAX).
 * Returns 0, -ENOENT when srv has no context yet (or memory ran out),
 * -EINVAL. */
int r3conn_init(struct r3conn *c, struct tls_server *srv, const char *host, uint8_t *msg,
		uint32_t max_msg);
void r3conn_free(struct r3conn *c);

/* n bytes of ciphertext from the client. 0, or -1: the connection ends
 * (send pending_out, an alert maybe, then close). */
int r3conn_feed(struct r3conn *c, const void *cipher, size_t n);

/* What the bytes fed so far ask for, against token set t: call until
 * R3_MORE or R3_CLOSE. R3_DATAGRAM's bytes are valid until the next call.
 * The token a connection was let in with: c->ws.token (its index in t). */
enum r3_ev r3conn_next(struct r3conn *c, const struct udpws_tokens *t, const uint8_t **dg,
		       size_t *len);

/* A datagram from WireGuard to the client, as one binary message. 0;
 * -ENOBUFS: the client is slow (too much ciphertext waits), dropped;
 * -EMSGSIZE over WS_MSG_MAX; -ENOTCONN before the upgrade or after the
 * end. */
int r3conn_send(struct r3conn *c, const uint8_t *p, size_t n);

/* End it from the relay's side: a close frame with code (WS_CLOSE_POLICY
 * for a token that left the set) when open, then TLS's close_notify. */
void r3conn_close(struct r3conn *c, uint16_t code);

#endif
