/* SPDX-License-Identifier: ISC */
/* RFC 6455, the server side, for rung 3: the upgrade request read line by
 * line (only what the answer needs is kept), its answers, and the frame
 * reader and writer. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "b64.h"
#include "ws.h"

/* What the header lines said (struct ws_upgrade's seen). */
enum {
	WS_SEEN_PATH_OK = 1 << 0,
	WS_SEEN_HOST = 1 << 1,
	WS_SEEN_HOST_OK = 1 << 2,
	WS_SEEN_UPGRADE = 1 << 3,    /* Upgrade lists websocket */
	WS_SEEN_CONNECTION = 1 << 4, /* Connection lists upgrade */
	WS_SEEN_VERSION = 1 << 5,
	WS_SEEN_VERSION_OK = 1 << 6,
	WS_SEEN_KEY = 1 << 7,
	WS_SEEN_KEY_OK = 1 << 8,
	WS_SEEN_AUTH = 1 << 9,
	WS_SEEN_TOKEN_OK = 1 << 10,
};

/* RFC 6455 1.3: the GUID appended to the key before hashing. */
static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

int ws_up_init(struct ws_upgrade *u, uint32_t cap, const char *path, const char *host)
{
	if (cap == 0)
		cap = WS_UP_CAP_DEFAULT;
	if (cap < WS_UP_CAP_MIN || cap > WS_UP_CAP_MAX)
		return -EINVAL;
	memset(u, 0, sizeof(*u));
	u->cap = cap;
	u->path = path ? path : WS_PATH_DEFAULT;
	u->host = host;
	u->result = WS_UP_MORE;
	return 0;
}

/* RFC 7230 3.2.6: the characters of a token (a header name, a list item). */
static bool ws_tchar(uint8_t c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* RFC 6750 2.1: the characters of a Bearer token (before its '=' tail). */
static bool ws_token68_char(uint8_t c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("-._~+/", c) != NULL;
}

bool ws_token_valid(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && ws_token68_char((uint8_t)s[i]))
		i++;
	if (i == 0)
		return false;
	while (i < n && s[i] == '=')
		i++;
	return i == n && n <= WS_TOKEN_MAX;
}

static bool ws_is(const char *v, size_t n, const char *word)
{
	return strlen(word) == n && strncasecmp(v, word, n) == 0;
}

/* True when the comma-separated list v (RFC 7230 7) holds word, any case. */
static bool ws_list_has(const char *v, size_t n, const char *word)
{
	size_t i = 0;

	while (i < n) {
		size_t a = i, b;

		while (i < n && v[i] != ',')
			i++;
		b = i++;
		while (a < b && (v[a] == ' ' || v[a] == '\t'))
			a++;
		while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
			b--;
		if (ws_is(v + a, b - a, word))
			return true;
	}
	return false;
}

/* Host: the name, any case, and an optional port of 1..5 digits. */
static bool ws_host_ok(const char *want, const char *v, size_t n)
{
	size_t hl = strlen(want);

	if (n < hl || strncasecmp(v, want, hl) != 0)
		return false;
	if (n == hl)
		return true;
	if (v[hl] != ':' || n - hl - 1 < 1 || n - hl - 1 > 5)
		return false;
	for (size_t i = hl + 1; i < n; i++)
		if (v[i] < '0' || v[i] > '9')
			return false;
	return true;
}

/* Authorization: "Bearer" (any case), spaces, a token68 of at most
 * WS_TOKEN_MAX characters. */
static void ws_authorization(struct ws_upgrade *u, const char *v, size_t n)
{
	size_t i = 6, t;

	if (n < 8 || strncasecmp(v, "Bearer", 6) != 0 || v[6] != ' ')
		return;
	while (i < n && v[i] == ' ')
		i++;
	t = i;
	while (i < n && ws_token68_char((uint8_t)v[i]))
		i++;
	if (i == t)
		return;
	while (i < n && v[i] == '=')
		i++;
	if (i != n || n - t > WS_TOKEN_MAX)
		return;
	memcpy(u->token, v + t, n - t);
	u->token[n - t] = '\0';
	u->token_len = (uint16_t)(n - t);
	u->seen |= WS_SEEN_TOKEN_OK;
}

/* "GET <target> HTTP/1.1". */
static enum ws_up_result ws_request_line(struct ws_upgrade *u, const char *l, size_t n)
{
	const char *sp;
	size_t tl;

	if (n < 4 || memcmp(l, "GET ", 4) != 0)
		return WS_UP_MALFORMED;
	sp = memchr(l + 4, ' ', n - 4);
	if (!sp || sp == l + 4)
		return WS_UP_MALFORMED;
	tl = (size_t)(sp - (l + 4));
	if ((size_t)(l + n - (sp + 1)) != 8 || memcmp(sp + 1, "HTTP/1.1", 8) != 0)
		return WS_UP_MALFORMED;
	if (strlen(u->path) == tl && memcmp(l + 4, u->path, tl) == 0)
		u->seen |= WS_SEEN_PATH_OK;
	return WS_UP_MORE;
}

static enum ws_up_result ws_header(struct ws_upgrade *u, const char *l, size_t n)
{
	const char *colon = memchr(l, ':', n), *v;
	size_t nl, vn;
	uint8_t key[16];

	/* A line starting with a blank continues the last (obs-fold): refused. */
	if (!colon || colon == l)
		return WS_UP_MALFORMED;
	nl = (size_t)(colon - l);
	for (size_t i = 0; i < nl; i++)
		if (!ws_tchar((uint8_t)l[i]))
			return WS_UP_MALFORMED;
	v = colon + 1;
	vn = n - nl - 1;
	while (vn && (*v == ' ' || *v == '\t'))
		v++, vn--;
	while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
		vn--;

	if (ws_is(l, nl, "Host")) {
		if (u->seen & WS_SEEN_HOST)
			return WS_UP_MALFORMED;
		u->seen |= WS_SEEN_HOST;
		if (!u->host || ws_host_ok(u->host, v, vn))
			u->seen |= WS_SEEN_HOST_OK;
	} else if (ws_is(l, nl, "Upgrade")) {
		if (ws_list_has(v, vn, "websocket"))
			u->seen |= WS_SEEN_UPGRADE;
	} else if (ws_is(l, nl, "Connection")) {
		if (ws_list_has(v, vn, "upgrade"))
			u->seen |= WS_SEEN_CONNECTION;
	} else if (ws_is(l, nl, "Sec-WebSocket-Version")) {
		if (u->seen & WS_SEEN_VERSION)
			u->seen &= ~WS_SEEN_VERSION_OK; /* twice: not one version */
		else if (vn == 2 && memcmp(v, "13", 2) == 0)
			u->seen |= WS_SEEN_VERSION_OK;
		u->seen |= WS_SEEN_VERSION;
	} else if (ws_is(l, nl, "Sec-WebSocket-Key")) {
		if (u->seen & WS_SEEN_KEY) {
			u->seen &= ~WS_SEEN_KEY_OK;
		} else if (b64_decode(v, vn, key, sizeof(key))) {
			memcpy(u->key, v, WS_KEY_LEN);
			u->key[WS_KEY_LEN] = '\0';
			u->seen |= WS_SEEN_KEY_OK;
		}
		u->seen |= WS_SEEN_KEY;
	} else if (ws_is(l, nl, "Authorization")) {
		if (u->seen & WS_SEEN_AUTH)
			return WS_UP_MALFORMED;
		u->seen |= WS_SEEN_AUTH;
		ws_authorization(u, v, vn);
	} else if (ws_is(l, nl, "Content-Length")) {
		/* A GET with a body would put its bytes where frames go. */
		if (!(vn == 1 && v[0] == '0'))
			return WS_UP_MALFORMED;
	} else if (ws_is(l, nl, "Transfer-Encoding")) {
		return WS_UP_MALFORMED;
	}
	return WS_UP_MORE;
}

/* The blank line: the answer, checks in a fixed order. */
static enum ws_up_result ws_up_end(const struct ws_upgrade *u)
{
	uint16_t s = u->seen;

	if (!(s & WS_SEEN_HOST))
		return WS_UP_MALFORMED; /* RFC 7230 5.4 */
	if (!(s & WS_SEEN_PATH_OK) || !(s & WS_SEEN_HOST_OK))
		return WS_UP_NOT_FOUND;
	if (!(s & WS_SEEN_UPGRADE) || !(s & WS_SEEN_CONNECTION))
		return WS_UP_NOT_UPGRADE;
	if (!(s & WS_SEEN_VERSION_OK))
		return WS_UP_VERSION;
	if (!(s & WS_SEEN_KEY_OK))
		return WS_UP_BAD_KEY;
	if (!(s & WS_SEEN_TOKEN_OK))
		return WS_UP_NO_TOKEN;
	return WS_UP_OK;
}

/* One line, its CRLF included. */
static enum ws_up_result ws_up_line(struct ws_upgrade *u)
{
	const char *l = u->line;
	size_t n = u->line_len;

	if (n < 2 || l[n - 2] != '\r')
		return WS_UP_MALFORMED; /* a bare LF */
	n -= 2;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)l[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return WS_UP_MALFORMED; /* NUL, a bare CR, controls */
	}
	if (u->lines++ == 0)
		return ws_request_line(u, l, n);
	if (n == 0)
		return ws_up_end(u);
	return ws_header(u, l, n);
}

enum ws_up_result ws_up_feed(struct ws_upgrade *u, const uint8_t *p, size_t n, size_t *used)
{
	size_t i = 0;

	while (u->result == WS_UP_MORE && i < n) {
		uint8_t c = p[i++];

		if (++u->wire > u->cap || u->line_len == WS_UP_LINE_MAX) {
			u->result = WS_UP_TOO_BIG;
			break;
		}
		u->line[u->line_len++] = (char)c;
		if (c != '\n')
			continue;
		u->result = ws_up_line(u);
		u->line_len = 0;
	}
	*used = i;
	return u->result;
}

int ws_up_status(enum ws_up_result r)
{
	static const int status[WS_UP_RESULTS] = {
	    [WS_UP_MORE] = 0,	     [WS_UP_OK] = 101,	      [WS_UP_MALFORMED] = 400,
	    [WS_UP_TOO_BIG] = 431,   [WS_UP_NOT_FOUND] = 404, [WS_UP_NOT_UPGRADE] = 426,
	    [WS_UP_VERSION] = 426,   [WS_UP_BAD_KEY] = 400,   [WS_UP_NO_TOKEN] = 401,
	    [WS_UP_FORBIDDEN] = 403,
	};

	return (unsigned)r < WS_UP_RESULTS ? status[r] : 0;
}

const char *ws_up_result_name(enum ws_up_result r)
{
	static const char *const names[WS_UP_RESULTS] = {
	    [WS_UP_MORE] = "more",	     [WS_UP_OK] = "ok",
	    [WS_UP_MALFORMED] = "malformed", [WS_UP_TOO_BIG] = "too_big",
	    [WS_UP_NOT_FOUND] = "not_found", [WS_UP_NOT_UPGRADE] = "not_upgrade",
	    [WS_UP_VERSION] = "version",     [WS_UP_BAD_KEY] = "bad_key",
	    [WS_UP_NO_TOKEN] = "no_token",   [WS_UP_FORBIDDEN] = "forbidden",
	};

	return (unsigned)r < WS_UP_RESULTS ? names[r] : "unknown";
}

static const char *ws_reason(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 426:
		return "Upgrade Required";
	default:
		return "Request Header Fields Too Large";
	}
}

void ws_accept(const char key[WS_KEY_LEN], char out[WS_ACCEPT_LEN + 1])
{
	uint8_t in[WS_KEY_LEN + sizeof(ws_guid) - 1], md[20];
	unsigned int mdlen = 0;

	memcpy(in, key, WS_KEY_LEN);
	memcpy(in + WS_KEY_LEN, ws_guid, sizeof(ws_guid) - 1);
	/* SHA-1 is what RFC 6455 names; it proves nothing, it only shows the
	 * server read the key. Fails only without memory: then the accept is
	 * wrong and the client closes. */
	if (!EVP_Digest(in, sizeof(in), md, &mdlen, EVP_sha1(), NULL))
		memset(md, 0, sizeof(md));
	b64_encode(out, md, sizeof(md));
}

int ws_up_answer(const struct ws_upgrade *u, enum ws_up_result r, char *out, size_t cap)
{
	int status = ws_up_status(r), len;
	const char *extra = "";

	if (status == 0)
		return -EINVAL;
	if (r == WS_UP_OK) {
		char accept[WS_ACCEPT_LEN + 1];

		if (u->result != WS_UP_OK)
			return -EINVAL;
		ws_accept(u->key, accept);
		len = snprintf(out, cap,
			       "HTTP/1.1 101 Switching Protocols\r\n"
			       "Upgrade: websocket\r\n"
			       "Connection: Upgrade\r\n"
			       "Sec-WebSocket-Accept: %s\r\n\r\n",
			       accept);
	} else {
		const char *reason = ws_reason(status);

		if (status == 426)
			extra = "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n";
		else if (status == 401)
			extra = "WWW-Authenticate: Bearer\r\n";
		len = snprintf(out, cap,
			       "HTTP/1.1 %d %s\r\n"
			       "Content-Type: text/plain\r\n"
			       "Content-Length: %zu\r\n"
			       "Connection: close\r\n"
			       "%s\r\n%s\n",
			       status, reason, strlen(reason) + 1, extra, reason);
	}
	if (len < 0 || (size_t)len >= cap)
		return -ENOSPC;
	return len;
}

bool ws_token_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	uint8_t da[32], db[32];
	unsigned int la = 0, lb = 0;

	if (!EVP_Digest(a, alen, da, &la, EVP_sha256(), NULL) ||
	    !EVP_Digest(b, blen, db, &lb, EVP_sha256(), NULL))
		return false;
	return CRYPTO_memcmp(da, db, sizeof(da)) == 0;
}

/* The frame reader's states. */
enum { WS_RS_HDR, WS_RS_PAYLOAD, WS_RS_DONE };

int ws_reader_init(struct ws_reader *r, uint8_t *buf, uint32_t max_msg)
{
	if (!buf || max_msg < WS_MSG_MIN || max_msg > WS_MSG_MAX)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	r->buf = buf;
	r->max_msg = max_msg;
	r->state = WS_RS_HDR;
	r->hdr_need = 2;
	return 0;
}

static enum ws_event_kind ws_fail(struct ws_reader *r, uint16_t code, struct ws_event *ev)
{
	r->state = WS_RS_DONE;
	r->final_ev = WS_EV_ERROR;
	r->code = code;
	ev->code = code;
	return WS_EV_ERROR;
}

static bool ws_is_control(uint8_t op)
{
	return op & 0x8;
}

/* The first two bytes: everything but the length's extension and the mask. */
static enum ws_event_kind ws_hdr_first(struct ws_reader *r, struct ws_event *ev)
{
	uint8_t b0 = r->hdr[0], b1 = r->hdr[1], len7 = b1 & 0x7f;

	r->op = b0 & 0x0f;
	r->fin = b0 & 0x80;
	if (b0 & 0x70)
		return ws_fail(r, WS_CLOSE_PROTOCOL, ev); /* no extension was agreed */
	if (!(b1 & 0x80))
		return ws_fail(r, WS_CLOSE_PROTOCOL, ev); /* RFC 6455 5.1: clients mask */
	switch (r->op) {
	case WS_OP_CONT:
		if (!r->frag)
			return ws_fail(r, WS_CLOSE_PROTOCOL, ev);
		break;
	case WS_OP_TEXT:
	case WS_OP_BINARY:
		if (r->frag)
			return ws_fail(r, WS_CLOSE_PROTOCOL, ev); /* 5.4: no interleaving */
		if (r->op == WS_OP_TEXT)
			return ws_fail(r, WS_CLOSE_UNSUPPORTED, ev);
		break;
	case WS_OP_CLOSE:
	case WS_OP_PING:
	case WS_OP_PONG:
		if (!r->fin || len7 > WS_CTL_MAX)
			return ws_fail(r, WS_CLOSE_PROTOCOL, ev); /* 5.5 */
		break;
	default:
		return ws_fail(r, WS_CLOSE_PROTOCOL, ev);
	}
	r->hdr_need = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + 4;
	return WS_EV_MORE;
}

static enum ws_event_kind ws_frame_done(struct ws_reader *r, struct ws_event *ev)
{
	uint16_t code;

	r->state = WS_RS_HDR;
	r->hdr_len = 0;
	r->hdr_need = 2;
	switch (r->op) {
	case WS_OP_PING:
	case WS_OP_PONG:
		ev->data = r->ctl;
		ev->len = r->ctl_len;
		return r->op == WS_OP_PING ? WS_EV_PING : WS_EV_PONG;
	case WS_OP_CLOSE:
		if (r->ctl_len == 1)
			return ws_fail(r, WS_CLOSE_PROTOCOL, ev);
		code = r->ctl_len ? (uint16_t)(r->ctl[0] << 8 | r->ctl[1]) : WS_CLOSE_NO_STATUS;
		if (r->ctl_len && !ws_close_code_valid(code))
			return ws_fail(r, WS_CLOSE_PROTOCOL, ev);
		if (r->ctl_len > 2 && !ws_utf8_valid(r->ctl + 2, r->ctl_len - 2u))
			return ws_fail(r, WS_CLOSE_INVALID, ev);
		r->state = WS_RS_DONE;
		r->final_ev = WS_EV_CLOSE;
		r->code = code;
		ev->code = code;
		ev->data = r->ctl_len ? r->ctl + 2 : r->ctl;
		ev->len = r->ctl_len ? r->ctl_len - 2u : 0;
		return WS_EV_CLOSE;
	default: /* binary or continuation */
		if (!r->fin) {
			r->frag = true;
			return WS_EV_MORE;
		}
		r->frag = false;
		ev->data = r->buf;
		ev->len = r->msg_len;
		r->msg_len = 0;
		return WS_EV_BINARY;
	}
}

/* The whole header: the length in its shortest form, within the bound. */
static enum ws_event_kind ws_hdr_done(struct ws_reader *r, struct ws_event *ev)
{
	uint8_t len7 = r->hdr[1] & 0x7f;
	uint64_t len = len7;

	if (len7 == 126) {
		len = (uint64_t)r->hdr[2] << 8 | r->hdr[3];
		if (len < 126)
			return ws_fail(r, WS_CLOSE_PROTOCOL, ev);
	} else if (len7 == 127) {
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | r->hdr[2 + i];
		if (len >> 63 || len <= 0xffff)
			return ws_fail(r, WS_CLOSE_PROTOCOL, ev);
	}
	if (!ws_is_control(r->op) && len > r->max_msg - r->msg_len)
		return ws_fail(r, WS_CLOSE_TOO_BIG, ev);
	r->left = (uint32_t)len;
	r->pos = 0;
	r->ctl_len = ws_is_control(r->op) ? 0 : r->ctl_len;
	r->state = WS_RS_PAYLOAD;
	if (r->left == 0)
		return ws_frame_done(r, ev);
	return WS_EV_MORE;
}

enum ws_event_kind ws_read(struct ws_reader *r, const uint8_t *p, size_t n, size_t *used,
			   struct ws_event *ev)
{
	enum ws_event_kind k = WS_EV_MORE;
	size_t i = 0;

	memset(ev, 0, sizeof(*ev));
	if (r->state == WS_RS_DONE) {
		*used = 0;
		ev->code = r->code;
		if (r->final_ev == WS_EV_CLOSE && r->ctl_len >= 2) {
			ev->data = r->ctl + 2;
			ev->len = r->ctl_len - 2u;
		}
		return (enum ws_event_kind)r->final_ev;
	}
	while (k == WS_EV_MORE && i < n) {
		if (r->state == WS_RS_HDR) {
			r->hdr[r->hdr_len++] = p[i++];
			if (r->hdr_len == 2)
				k = ws_hdr_first(r, ev);
			if (k == WS_EV_MORE && r->hdr_len == r->hdr_need)
				k = ws_hdr_done(r, ev);
			continue;
		}
		/* Payload: unmask as it is copied (RFC 6455 5.3). */
		const uint8_t *mask = r->hdr + r->hdr_need - 4;
		size_t take = n - i < r->left ? n - i : r->left;
		uint8_t *dst = ws_is_control(r->op) ? r->ctl + r->ctl_len : r->buf + r->msg_len;

		for (size_t j = 0; j < take; j++)
			dst[j] = p[i + j] ^ mask[(r->pos + j) & 3];
		i += take;
		r->left -= (uint32_t)take;
		r->pos += (uint32_t)take;
		if (ws_is_control(r->op))
			r->ctl_len += (uint8_t)take;
		else
			r->msg_len += (uint32_t)take;
		if (r->left == 0)
			k = ws_frame_done(r, ev);
	}
	*used = i;
	return k;
}

size_t ws_frame_header(uint8_t out[WS_OUT_HDR_MAX], enum ws_op op, size_t len)
{
	out[0] = (uint8_t)(0x80 | op);
	if (len < 126) {
		out[1] = (uint8_t)len;
		return 2;
	}
	if (len <= 0xffff) {
		out[1] = 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		return 4;
	}
	out[1] = 127;
	for (int i = 0; i < 8; i++)
		out[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
	return 10;
}

int ws_encode(uint8_t *out, size_t cap, enum ws_op op, const uint8_t *p, size_t len)
{
	uint8_t hdr[WS_OUT_HDR_MAX];
	size_t h;

	if (op != WS_OP_BINARY && op != WS_OP_CLOSE && op != WS_OP_PING && op != WS_OP_PONG)
		return -EINVAL;
	if ((ws_is_control(op) && len > WS_CTL_MAX) || len > WS_MSG_MAX)
		return -EINVAL;
	h = ws_frame_header(hdr, op, len);
	if (cap < h + len)
		return -ENOSPC;
	memcpy(out, hdr, h);
	if (len)
		memcpy(out + h, p, len);
	return (int)(h + len);
}

int ws_encode_close(uint8_t *out, size_t cap, uint16_t code, const char *reason)
{
	uint8_t payload[WS_CTL_MAX];
	size_t rl = reason ? strlen(reason) : 0;

	if (code == WS_CLOSE_NO_STATUS) {
		if (rl)
			return -EINVAL;
		return ws_encode(out, cap, WS_OP_CLOSE, NULL, 0);
	}
	if (!ws_close_code_valid(code) || rl > WS_CTL_MAX - 2 ||
	    !ws_utf8_valid((const uint8_t *)reason, rl))
		return -EINVAL;
	payload[0] = (uint8_t)(code >> 8);
	payload[1] = (uint8_t)code;
	if (rl)
		memcpy(payload + 2, reason, rl);
	return ws_encode(out, cap, WS_OP_CLOSE, payload, rl + 2);
}

bool ws_close_code_valid(uint16_t code)
{
	/* 1004 is reserved; 1005, 1006 and 1015 are never sent (7.4.1). */
	return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
	       (code >= 3000 && code <= 4999);
}

bool ws_utf8_valid(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = p[i];
		uint32_t cp, min;
		size_t k;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			k = 1, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			k = 2, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			k = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (n - i - 1 < k)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((p[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i + j] & 0x3f);
		}
		/* Overlong forms, UTF-16 surrogates, beyond U+10FFFF. */
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}
