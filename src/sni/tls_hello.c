/* SPDX-License-Identifier: ISC */
/* The ClientHello reader: a record layer that hands the handshake bytes,
 * in order and however split, to a field-by-field parser of the message. */
#include "tls_hello.h"

#include "addr.h"

#include <errno.h>
#include <string.h>

/* The handshake field being read. Integer fields accumulate big-endian into
 * acc; the others are skipped, or (the host name) copied. */
enum {
	S_TYPE,		/* msg_type (1) */
	S_LEN,		/* length (3) */
	S_VERSION,	/* legacy_version (2) */
	S_RANDOM,	/* random (32): skip */
	S_SID_LEN,	/* legacy_session_id length (1) */
	S_SID,		/* skip */
	S_CS_LEN,	/* cipher_suites length (2) */
	S_CS,		/* skip */
	S_COMP_LEN,	/* legacy_compression_methods length (1) */
	S_COMP,		/* skip */
	S_EXTS_LEN,	/* extensions length (2) */
	S_EXT_TYPE,	/* extension_type (2) */
	S_EXT_LEN,	/* extension_data length (2) */
	S_EXT_SKIP,	/* an extension we do not read */
	S_SNI_LIST_LEN, /* server_name_list length (2) */
	S_SNI_TYPE,	/* name_type (1) */
	S_SNI_LEN,	/* name length (2) */
	S_SNI_NAME,	/* host_name: copy */
	S_SNI_SKIP,	/* a name of another type */
	S_COUNT
};

/* Bytes of each integer field; 0 for the skipped and copied ones. */
static const uint8_t field_width[S_COUNT] = {
    [S_TYPE] = 1,    [S_LEN] = 3,	   [S_VERSION] = 2,  [S_SID_LEN] = 1,
    [S_CS_LEN] = 2,  [S_COMP_LEN] = 1,	   [S_EXTS_LEN] = 2, [S_EXT_TYPE] = 2,
    [S_EXT_LEN] = 2, [S_SNI_LIST_LEN] = 2, [S_SNI_TYPE] = 1, [S_SNI_LEN] = 2,
};

#define EXT_SERVER_NAME 0
#define NAME_TYPE_HOST	0

static const char *const result_names[TLS_HELLO_RESULTS] = {
    [TLS_HELLO_MORE] = "more",		 [TLS_HELLO_NAME] = "name",
    [TLS_HELLO_NOT_TLS] = "not_tls",	 [TLS_HELLO_NOT_CLIENT_HELLO] = "not_client_hello",
    [TLS_HELLO_NO_SNI] = "no_sni",	 [TLS_HELLO_BAD_NAME] = "bad_name",
    [TLS_HELLO_MALFORMED] = "malformed", [TLS_HELLO_TOO_BIG] = "too_big",
};

const char *tls_hello_result_name(enum tls_hello_result r)
{
	return (unsigned)r < TLS_HELLO_RESULTS ? result_names[r] : "unknown";
}

int tls_hello_init(struct tls_hello *h, uint32_t cap)
{
	if (cap == 0)
		cap = TLS_HELLO_CAP_DEFAULT;
	if (cap < TLS_HELLO_CAP_MIN || cap > TLS_HELLO_CAP_MAX)
		return -EINVAL;
	memset(h, 0, sizeof(*h));
	h->cap = cap;
	h->result = TLS_HELLO_MORE;
	h->state = S_TYPE;
	return 0;
}

static bool fail(struct tls_hello *h, enum tls_hello_result r)
{
	h->result = (uint8_t)r;
	return false;
}

/* Start an integer field that must end by body offset `end`. */
static bool enter(struct tls_hello *h, uint8_t state, uint32_t end)
{
	h->state = state;
	h->got = 0;
	h->acc = 0;
	if (field_width[state] > end - h->pos)
		return fail(h, TLS_HELLO_MALFORMED);
	return true;
}

/* Start a field of len bytes to skip (or copy) that must end by `end`. */
static bool enter_skip(struct tls_hello *h, uint8_t state, uint32_t len, uint32_t end)
{
	h->state = state;
	h->left = len;
	if (len > end - h->pos)
		return fail(h, TLS_HELLO_MALFORMED);
	return true;
}

/* The whole ClientHello is read. */
static void finish(struct tls_hello *h)
{
	h->result = h->name_len ? TLS_HELLO_NAME : TLS_HELLO_NO_SNI;
}

static void next_ext(struct tls_hello *h)
{
	if (h->pos == h->ext_end)
		finish(h);
	else
		enter(h, S_EXT_TYPE, h->ext_end);
}

static void next_name(struct tls_hello *h)
{
	if (h->pos == h->list_end)
		next_ext(h);
	else
		enter(h, S_SNI_TYPE, h->list_end);
}

/* A field is complete: check it and start the next one. */
static void field_done(struct tls_hello *h)
{
	uint32_t v = h->acc;

	switch (h->state) {
	case S_TYPE:
		if (v != 1) {
			fail(h, TLS_HELLO_NOT_CLIENT_HELLO);
			return;
		}
		h->state = S_LEN;
		h->got = 0;
		h->acc = 0;
		return;
	case S_LEN:
		if (v > h->cap - 4) {
			fail(h, TLS_HELLO_TOO_BIG);
			return;
		}
		h->msg_end = v;
		enter(h, S_VERSION, h->msg_end);
		return;
	case S_VERSION:
		/* Any 3.x: TLS 1.3 says 0x0303 here, SSL 3.0 clients 0x0300
		 * (refused already by the record version). */
		if (v >> 8 != 3) {
			fail(h, TLS_HELLO_MALFORMED);
			return;
		}
		enter_skip(h, S_RANDOM, 32, h->msg_end);
		return;
	case S_RANDOM:
		enter(h, S_SID_LEN, h->msg_end);
		return;
	case S_SID_LEN:
		if (v > 32) {
			fail(h, TLS_HELLO_MALFORMED);
			return;
		}
		enter_skip(h, S_SID, v, h->msg_end);
		return;
	case S_SID:
		enter(h, S_CS_LEN, h->msg_end);
		return;
	case S_CS_LEN:
		if (v < 2 || v % 2) {
			fail(h, TLS_HELLO_MALFORMED);
			return;
		}
		enter_skip(h, S_CS, v, h->msg_end);
		return;
	case S_CS:
		enter(h, S_COMP_LEN, h->msg_end);
		return;
	case S_COMP_LEN:
		if (v < 1) {
			fail(h, TLS_HELLO_MALFORMED);
			return;
		}
		enter_skip(h, S_COMP, v, h->msg_end);
		return;
	case S_COMP:
		/* No extensions at all (SSL 3.0 style): no SNI. */
		if (h->pos == h->msg_end)
			finish(h);
		else
			enter(h, S_EXTS_LEN, h->msg_end);
		return;
	case S_EXTS_LEN:
		if (v != h->msg_end - h->pos) {
			fail(h, TLS_HELLO_MALFORMED);
			return;
		}
		h->ext_end = h->msg_end;
		next_ext(h);
		return;
	case S_EXT_TYPE:
		h->ext_type = (uint16_t)v;
		enter(h, S_EXT_LEN, h->ext_end);
		return;
	case S_EXT_LEN:
		if (v > h->ext_end - h->pos) {
			fail(h, TLS_HELLO_MALFORMED);
			return;
		}
		if (h->ext_type != EXT_SERVER_NAME) {
			enter_skip(h, S_EXT_SKIP, v, h->ext_end);
			return;
		}
		/* RFC 8446 4.2: no extension type twice. */
		if (h->sni_ext) {
			fail(h, TLS_HELLO_MALFORMED);
			return;
		}
		h->sni_ext = true;
		h->list_end = h->pos + v;
		enter(h, S_SNI_LIST_LEN, h->list_end);
		return;
	case S_EXT_SKIP:
		next_ext(h);
		return;
	case S_SNI_LIST_LEN:
		if (v == 0 || v != h->list_end - h->pos) {
			fail(h, TLS_HELLO_MALFORMED);
			return;
		}
		next_name(h);
		return;
	case S_SNI_TYPE:
		h->name_type = (uint8_t)v;
		enter(h, S_SNI_LEN, h->list_end);
		return;
	case S_SNI_LEN:
		if (v == 0 || v > h->list_end - h->pos) {
			fail(h, TLS_HELLO_MALFORMED);
			return;
		}
		if (h->name_type != NAME_TYPE_HOST) {
			enter_skip(h, S_SNI_SKIP, v, h->list_end);
			return;
		}
		/* RFC 6066 3: one name of each type. */
		if (h->name_len) {
			fail(h, TLS_HELLO_MALFORMED);
			return;
		}
		if (v > TLS_NAME_MAX) {
			fail(h, TLS_HELLO_BAD_NAME);
			return;
		}
		h->name_len = (uint16_t)v;
		enter_skip(h, S_SNI_NAME, v, h->list_end);
		return;
	case S_SNI_NAME:
		h->name[h->name_len] = '\0';
		if (!addr_host_name_valid(h->name, h->name_len)) {
			fail(h, TLS_HELLO_BAD_NAME);
			return;
		}
		for (uint16_t i = 0; i < h->name_len; i++)
			if (h->name[i] >= 'A' && h->name[i] <= 'Z')
				h->name[i] = (char)(h->name[i] - 'A' + 'a');
		next_name(h);
		return;
	case S_SNI_SKIP:
		next_name(h);
		return;
	}
}

/* Parse up to n handshake bytes; returns how many were used (fewer than n
 * only when the answer is known). */
static size_t hs_feed(struct tls_hello *h, const uint8_t *p, size_t n)
{
	size_t used = 0;

	while (h->result == TLS_HELLO_MORE) {
		uint8_t w = field_width[h->state];

		if (w == 0 && h->left == 0) {
			field_done(h);
			continue;
		}
		if (used == n)
			break;
		if (w) {
			h->acc = h->acc << 8 | p[used++];
			/* The 4-byte header is not part of the body. */
			if (h->state != S_TYPE && h->state != S_LEN)
				h->pos++;
			if (++h->got == w)
				field_done(h);
			continue;
		}
		size_t k = n - used < h->left ? n - used : h->left;

		if (h->state == S_SNI_NAME)
			memcpy(h->name + (h->name_len - h->left), p + used, k);
		used += k;
		h->pos += (uint32_t)k;
		h->left -= (uint32_t)k;
	}
	return used;
}

/* A complete record header: check it; the first one decides "not TLS". */
static void record_header(struct tls_hello *h)
{
	const uint8_t *r = h->hdr;
	uint32_t len = (uint32_t)r[3] << 8 | r[4];
	bool first = h->records == 0;

	h->hdr_len = 0;
	if (r[1] != 3 || r[2] < 1 || r[2] > 4) {
		fail(h, first ? TLS_HELLO_NOT_TLS : TLS_HELLO_MALFORMED);
		return;
	}
	/* RFC 8446 5.1: no empty handshake fragment, none over 2^14. */
	if (len == 0 || len > TLS_RECORD_MAX) {
		fail(h, TLS_HELLO_MALFORMED);
		return;
	}
	if (++h->records > TLS_HELLO_RECORDS_MAX) {
		fail(h, TLS_HELLO_TOO_BIG);
		return;
	}
	h->rec_left = len;
}

enum tls_hello_result tls_hello_feed(struct tls_hello *h, const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (h->result == TLS_HELLO_MORE && i < n) {
		if (h->rec_left == 0) {
			h->hdr[h->hdr_len++] = p[i++];
			h->wire++;
			/* Content type: handshake (22). Refused at the first
			 * byte, so "GET " or an SSLv2 header is known at once;
			 * inside a hello, RFC 8446 5.1 forbids interleaving. */
			if (h->hdr_len == 1 && h->hdr[0] != 22)
				fail(h, h->records == 0 ? TLS_HELLO_NOT_TLS : TLS_HELLO_MALFORMED);
			else if (h->hdr_len == 5)
				record_header(h);
			continue;
		}
		size_t k = n - i < h->rec_left ? n - i : h->rec_left;
		size_t used = hs_feed(h, p + i, k);

		i += used;
		h->rec_left -= (uint32_t)used;
		h->wire += (uint32_t)used;
	}
	return (enum tls_hello_result)h->result;
}
