/* SPDX-License-Identifier: ISC */
/* The server side of RFC 6455 for rung 3 (udpws: WireGuard in a WebSocket
 * over TLS): the HTTP/1.1 upgrade request reader and its answers, and the
 * frame reader and writer. Pure: no sockets, no allocation; both readers
 * take the stream in pieces split anywhere, and no split changes an answer.
 *
 * The upgrade (RFC 6455 4.2.1): `GET <path> HTTP/1.1` (path "/t"), one
 * Host (the tunnel name, any case, an optional port), Upgrade holding the
 * token "websocket", Connection holding the token "upgrade" (both lists,
 * any case), `Sec-WebSocket-Version: 13`, one Sec-WebSocket-Key (the
 * canonical base64 of 16 bytes), and the gateway's rung-3 token as
 * `Authorization: Bearer <token>` (RFC 6750 2.1). No body (a Content-Length
 * other than 0, or a Transfer-Encoding, is refused). Lines end with CRLF; a
 * folded line, a space before a colon, a control character, a NUL: 400.
 * Extensions and subprotocols offered are ignored (none is chosen, so no
 * RSV bit may be set). The reader never reads past the request's blank
 * line: the bytes after it are frames.
 *
 * Messages (RFC 6455 5): each binary message is one WireGuard datagram.
 * Client frames must be masked; RSV bits, reserved opcodes, a control frame
 * over 125 bytes or fragmented, a length not in its shortest form, a
 * continuation with nothing to continue, or a new message inside a
 * fragmented one: 1002. A text message: 1003 (rung 3 carries datagrams).
 * Fragments are reassembled (control frames may come between them) into
 * one message of at most max_msg bytes: over that, 1009, known from the
 * frame header before its payload arrives. A close frame's code must be one
 * a peer may send and its reason UTF-8 (1002, 1007). */
#ifndef ETR_WS_H
#define ETR_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The default path of the tunnel (wss://NAME/t). */
#define WS_PATH_DEFAULT "/t"

/* The upgrade request's cap: bytes from its first to the blank line. Real
 * clients send 200-600; browsers' cookies are not sent to a tunnel. */
#define WS_UP_CAP_DEFAULT 4096
#define WS_UP_CAP_MIN	  256
#define WS_UP_CAP_MAX	  16384

/* The longest line kept (request line or header, CRLF included). */
#define WS_UP_LINE_MAX 1024

/* The longest rung-3 token (token68 characters). */
#define WS_TOKEN_MAX 256

/* Sec-WebSocket-Key: base64 of 16 bytes; Sec-WebSocket-Accept: of 20. */
#define WS_KEY_LEN    24
#define WS_ACCEPT_LEN 28

/* Room for any answer ws_up_answer writes. */
#define WS_UP_ANSWER_MAX 256

/* What the upgrade reader says. Every value but WS_UP_MORE is final. */
enum ws_up_result {
	WS_UP_MORE,	   /* need more bytes */
	WS_UP_OK,	   /* 101: a WebSocket upgrade with a token to check */
	WS_UP_MALFORMED,   /* 400: not an HTTP/1.1 GET, a bad line, Host missing or twice */
	WS_UP_TOO_BIG,	   /* 431: a line over WS_UP_LINE_MAX or the request over the cap */
	WS_UP_NOT_FOUND,   /* 404: another path, or another Host */
	WS_UP_NOT_UPGRADE, /* 426: no "Upgrade: websocket" or no "Connection: upgrade" */
	WS_UP_VERSION,	   /* 426 with Sec-WebSocket-Version: 13 */
	WS_UP_BAD_KEY,	   /* 400: Sec-WebSocket-Key missing, twice, or not 16 bytes */
	WS_UP_NO_TOKEN,	   /* 401: no Authorization: Bearer, or a malformed one */
	WS_UP_FORBIDDEN,   /* 403: the caller's answer for a token not in the set */
	WS_UP_RESULTS
};

/* The upgrade reader's state; set up with ws_up_init, then only fed.
 * About 1.4 KB, for the handshake only. */
struct ws_upgrade {
	const char *path, *host; /* what the request must name (host NULL: any) */
	uint32_t cap;		 /* bytes allowed */
	uint32_t wire;		 /* bytes consumed */
	uint16_t line_len;
	uint16_t lines; /* lines read (the cap keeps it under 2^13) */
	uint16_t seen;	/* WS_SEEN_* flags (ws.c) */
	uint8_t result; /* enum ws_up_result */
	uint16_t token_len;
	char key[WS_KEY_LEN + 1];     /* as sent, NUL-terminated */
	char token[WS_TOKEN_MAX + 1]; /* the Bearer token, NUL-terminated */
	char line[WS_UP_LINE_MAX];
};

/* Start reading a request of at most cap bytes (WS_UP_CAP_MIN..
 * WS_UP_CAP_MAX; 0 means WS_UP_CAP_DEFAULT) for path (NULL: WS_PATH_DEFAULT)
 * on host (NULL: any Host). path and host must outlive u. Returns 0, or
 * -EINVAL for a cap out of bounds. */
int ws_up_init(struct ws_upgrade *u, uint32_t cap, const char *path, const char *host);

/* Read the next n bytes; *used says how many were consumed (all of them
 * unless the answer is known, then up to the blank line's LF). Returns
 * WS_UP_MORE until the answer is known; later calls repeat it and consume
 * nothing. With WS_UP_OK, u->token holds the token to check. */
enum ws_up_result ws_up_feed(struct ws_upgrade *u, const uint8_t *p, size_t n, size_t *used);

/* The HTTP status for a final result (101, 400, 401, 403, 404, 426, 431). */
int ws_up_status(enum ws_up_result r);

/* A short fixed name for a result, for logs and metric labels. */
const char *ws_up_result_name(enum ws_up_result r);

/* The answer to send for r (WS_UP_OK only after ws_up_feed said so: 101
 * with Sec-WebSocket-Accept; the others a short text/plain body and
 * "Connection: close"). Returns its length, or -EINVAL for WS_UP_MORE or
 * an OK before the key is known, -ENOSPC when cap is short. */
int ws_up_answer(const struct ws_upgrade *u, enum ws_up_result r, char *out, size_t cap);

/* Sec-WebSocket-Accept for a key: base64(SHA-1(key GUID)), NUL-terminated. */
void ws_accept(const char key[WS_KEY_LEN], char out[WS_ACCEPT_LEN + 1]);

/* True when the n bytes at s are a token the upgrade reader takes: 1 to
 * WS_TOKEN_MAX bytes of RFC 6750's b64token (token68 characters, then any
 * '=' tail). */
bool ws_token_valid(const char *s, size_t n);

/* Two tokens compared in a time that does not depend on where they differ
 * or on their lengths (their SHA-256 digests, compared with CRYPTO_memcmp). */
bool ws_token_equal(const char *a, size_t alen, const char *b, size_t blen);

/* Opcodes (RFC 6455 5.2). */
enum ws_op {
	WS_OP_CONT = 0x0,
	WS_OP_TEXT = 0x1,
	WS_OP_BINARY = 0x2,
	WS_OP_CLOSE = 0x8,
	WS_OP_PING = 0x9,
	WS_OP_PONG = 0xA,
};

/* Close codes the relay sends or reads (RFC 6455 7.4.1). */
#define WS_CLOSE_NORMAL	     1000
#define WS_CLOSE_GOING_AWAY  1001
#define WS_CLOSE_PROTOCOL    1002
#define WS_CLOSE_UNSUPPORTED 1003
#define WS_CLOSE_NO_STATUS   1005 /* a close frame without a code; never sent */
#define WS_CLOSE_INVALID     1007
#define WS_CLOSE_POLICY	     1008
#define WS_CLOSE_TOO_BIG     1009
#define WS_CLOSE_INTERNAL    1011

/* Bounds of max_msg: a WireGuard datagram over an MTU of 1280 is at most
 * 1280 + 32 bytes of WireGuard; a UDP payload is at most 65507 (IPv4). */
#define WS_MSG_MIN 1312
#define WS_MSG_MAX 65535

/* A control frame's payload (RFC 6455 5.5). */
#define WS_CTL_MAX 125

/* A server frame's header: 2, 4 or 10 bytes (never masked). */
#define WS_OUT_HDR_MAX 10

/* What ws_read hands out. */
enum ws_event_kind {
	WS_EV_MORE,   /* every byte given was consumed; need more */
	WS_EV_BINARY, /* a whole binary message: ev->data, ev->len */
	WS_EV_PING,   /* answer with a pong of ev->data, ev->len */
	WS_EV_PONG,   /* ev->data, ev->len: the payload */
	WS_EV_CLOSE,  /* final: the peer closed with ev->code (1005: none), reason in data */
	WS_EV_ERROR,  /* final: close with ev->code (1002, 1003, 1007, 1009) */
};

struct ws_event {
	const uint8_t *data; /* valid until the next ws_read */
	size_t len;
	uint16_t code;
};

/* The frame reader's state. Messages are reassembled in buf (max_msg
 * bytes, the caller's), control payloads in ctl. */
struct ws_reader {
	uint8_t *buf;
	uint32_t max_msg;
	uint32_t msg_len; /* bytes of the message so far, over its fragments */
	uint32_t left;	  /* payload bytes left in the current frame */
	uint32_t pos;	  /* payload bytes read in the current frame (mask index) */
	uint8_t state;	  /* header, payload, or done (ws.c) */
	uint8_t hdr_len;  /* header bytes read */
	uint8_t hdr_need; /* header bytes this frame has (2..14) */
	uint8_t op;	  /* the current frame's opcode */
	bool fin;	  /* the current frame ends its message */
	bool frag;	  /* inside a fragmented message */
	uint8_t final_ev; /* WS_EV_CLOSE or WS_EV_ERROR once done */
	uint16_t code;	  /* the final event's code */
	uint8_t hdr[14];  /* the current frame's header */
	uint8_t ctl_len;  /* bytes of ctl read */
	uint8_t ctl[WS_CTL_MAX];
};

/* Start reading frames into buf, messages of at most max_msg bytes
 * (WS_MSG_MIN..WS_MSG_MAX). Returns 0 or -EINVAL. */
int ws_reader_init(struct ws_reader *r, uint8_t *buf, uint32_t max_msg);

/* Read from the n bytes at p until an event; *used says how many were
 * consumed. Feed the rest again after handling the event. WS_EV_CLOSE and
 * WS_EV_ERROR are final: later calls consume nothing and repeat them. */
enum ws_event_kind ws_read(struct ws_reader *r, const uint8_t *p, size_t n, size_t *used,
			   struct ws_event *ev);

/* The header of a server frame (FIN set, unmasked) of op and len bytes
 * into out; returns its length (2, 4 or 10). The payload follows it. */
size_t ws_frame_header(uint8_t out[WS_OUT_HDR_MAX], enum ws_op op, size_t len);

/* A whole server frame: header and payload. Returns its length, -EINVAL
 * for a control frame over WS_CTL_MAX or a data opcode other than binary,
 * -ENOSPC when cap is short. */
int ws_encode(uint8_t *out, size_t cap, enum ws_op op, const uint8_t *p, size_t len);

/* A close frame with code (WS_CLOSE_NO_STATUS: an empty one) and a reason
 * of at most 123 bytes (NULL: none). Returns its length, -EINVAL or
 * -ENOSPC. */
int ws_encode_close(uint8_t *out, size_t cap, uint16_t code, const char *reason);

/* True for a code a peer may send in a close frame (RFC 6455 7.4, and the
 * IANA registry's 1012..1014). */
bool ws_close_code_valid(uint16_t code);

/* True when the n bytes at p are well-formed UTF-8 (RFC 3629). */
bool ws_utf8_valid(const uint8_t *p, size_t n);

#endif
