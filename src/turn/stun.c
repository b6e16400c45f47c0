/* SPDX-License-Identifier: ISC */
/* STUN/TURN codec: message parse and build, integrity (HMAC-SHA1 and
 * HMAC-SHA256 through OpenSSL 3's EVP_MAC), FINGERPRINT (a small CRC-32
 * table), XOR addresses, ChannelData, demux and stream framing. */
#include "stun.h"

#include <pthread.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

uint16_t stun_type(unsigned method, enum stun_class cls)
{
	unsigned c = (unsigned)cls;

	return (uint16_t)((method & 0x000F) | (method & 0x0070) << 1 | (method & 0x0F80) << 2 |
			  (c & 1) << 4 | (c & 2) << 7);
}

/* ---- CRC-32 (reflected 0xEDB88320), the table built once ---- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

uint32_t stun_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	for (size_t i = 0; i < n; i++)
		crc = crc_table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
	return ~crc;
}

/* ---- HMAC over a message whose header Length is replaced ---- */

static EVP_MAC *hmac_alg;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void hmac_init(void)
{
	hmac_alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

/* Digest names for OSSL_PARAM (which wants them writable). */
static char sha1_name[] = "SHA1";
static char sha256_name[] = "SHA256";

/* HMAC(digest, key) over msg[0..n) with bytes 2..3 (the Length) read as
 * length. out gets the full MAC (20 or 32 bytes). */
static bool stun_hmac(char *digest, const uint8_t *key, size_t keylen, const uint8_t *msg, size_t n,
		      uint16_t length, uint8_t out[32])
{
	EVP_MAC_CTX *ctx = NULL;
	OSSL_PARAM params[2];
	uint8_t hdr[STUN_HDR_LEN];
	size_t outlen = 0;
	bool ok = false;

	pthread_once(&hmac_once, hmac_init);
	if (!hmac_alg || n < STUN_HDR_LEN)
		return false;
	memcpy(hdr, msg, STUN_HDR_LEN);
	wr16(hdr + 2, length);
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0);
	params[1] = OSSL_PARAM_construct_end();
	ctx = EVP_MAC_CTX_new(hmac_alg);
	if (!ctx)
		goto out;
	/* An empty key is legal for HMAC; OpenSSL wants a non-NULL pointer. */
	if (!EVP_MAC_init(ctx, keylen ? key : (const uint8_t *)"", keylen, params) ||
	    !EVP_MAC_update(ctx, hdr, STUN_HDR_LEN) ||
	    !EVP_MAC_update(ctx, msg + STUN_HDR_LEN, n - STUN_HDR_LEN) ||
	    !EVP_MAC_final(ctx, out, &outlen, 32))
		goto out;
	ok = true;
out:
	EVP_MAC_CTX_free(ctx);
	return ok;
}

/* ---- parse ---- */

static bool known_required(uint16_t t)
{
	switch (t) {
	case STUN_A_MAPPED_ADDRESS:
	case STUN_A_USERNAME:
	case STUN_A_MESSAGE_INTEGRITY:
	case STUN_A_ERROR_CODE:
	case STUN_A_UNKNOWN_ATTRIBUTES:
	case STUN_A_CHANNEL_NUMBER:
	case STUN_A_LIFETIME:
	case STUN_A_XOR_PEER_ADDRESS:
	case STUN_A_DATA:
	case STUN_A_REALM:
	case STUN_A_NONCE:
	case STUN_A_XOR_RELAYED_ADDRESS:
	case STUN_A_REQUESTED_ADDRESS_FAMILY:
	case STUN_A_EVEN_PORT:
	case STUN_A_REQUESTED_TRANSPORT:
	case STUN_A_DONT_FRAGMENT:
	case STUN_A_MESSAGE_INTEGRITY_SHA256:
	case STUN_A_XOR_MAPPED_ADDRESS:
	case STUN_A_RESERVATION_TOKEN:
		return true;
	default:
		return false;
	}
}

static void keep(struct stun_attr *a, uint32_t off, uint16_t len)
{
	if (!a->off) {
		a->off = off;
		a->len = len;
	}
}

static void add_unknown(struct stun_msg *m, uint16_t t)
{
	for (unsigned i = 0; i < m->n_unknown; i++)
		if (m->unknown[i] == t)
			return;
	if (m->n_unknown < STUN_UNKNOWN_MAX)
		m->unknown[m->n_unknown++] = t;
	else
		m->n_unknown_dropped++;
}

int stun_parse(const uint8_t *p, size_t n, struct stun_msg *m)
{
	size_t length, pos;
	bool after_mi = false, after_mi256 = false;

	memset(m, 0, sizeof(*m));
	if (n < 1)
		return STUN_E_SHORT;
	/* RFC 7983 and RFC 8656 12 demux on 0x00-0x03: a type whose first byte
	 * is 0x04-0x3F would be STUN by its top bits, but no method needs it and
	 * the demux would not hand it here; refuse it the same way. */
	if (p[0] > 0x03)
		return STUN_E_NOT_STUN;
	if (n < STUN_HDR_LEN)
		return STUN_E_SHORT;
	m->raw = p;
	m->type = rd16(p);
	m->method =
	    (uint16_t)((m->type & 0x000F) | (m->type & 0x00E0) >> 1 | (m->type & 0x3E00) >> 2);
	m->cls = (enum stun_class)((m->type >> 4 & 1) | (m->type >> 7 & 2));
	memcpy(m->tid, p + 8, STUN_TID_LEN);
	length = rd16(p + 2);
	if (rd32(p + 4) != STUN_COOKIE)
		return STUN_E_COOKIE;
	if (length & 3)
		return STUN_E_LENGTH;
	if (n < STUN_HDR_LEN + length)
		return STUN_E_SHORT;
	if (n > STUN_HDR_LEN + length)
		return STUN_E_LENGTH;
	m->len = (uint32_t)(STUN_HDR_LEN + length);

	for (pos = STUN_HDR_LEN; pos < m->len;) {
		uint16_t t, alen;
		uint32_t voff;
		size_t padded;

		if (m->len - pos < 4)
			return STUN_E_LENGTH;
		t = rd16(p + pos);
		alen = rd16(p + pos + 2);
		padded = ((size_t)alen + 3) & ~(size_t)3;
		if (padded > m->len - pos - 4)
			return STUN_E_LENGTH;
		voff = (uint32_t)(pos + 4);
		pos += 4 + padded;

		if (m->fingerprint.off)
			return STUN_E_FINGERPRINT; /* something after FINGERPRINT */
		if (t == STUN_A_FINGERPRINT) {
			if (alen != 4 || pos != m->len)
				return STUN_E_FINGERPRINT;
			if ((stun_crc32(0, p, voff - 4) ^ STUN_FP_XOR) != rd32(p + voff))
				return STUN_E_FINGERPRINT;
			keep(&m->fingerprint, voff, alen);
			continue;
		}
		if (after_mi256)
			continue; /* RFC 8489 14.6: ignored */
		if (t == STUN_A_MESSAGE_INTEGRITY_SHA256) {
			if (alen < STUN_MI256_MIN || alen > STUN_MI256_LEN || (alen & 3))
				return STUN_E_INTEGRITY;
			keep(&m->mi256, voff, alen);
			after_mi256 = true;
			continue;
		}
		if (after_mi)
			continue; /* RFC 8489 14.5: ignored */
		if (t == STUN_A_MESSAGE_INTEGRITY) {
			if (alen != STUN_MI_LEN)
				return STUN_E_INTEGRITY;
			keep(&m->mi, voff, alen);
			after_mi = true;
			continue;
		}

		switch (t) {
		case STUN_A_USERNAME:
			keep(&m->username, voff, alen);
			break;
		case STUN_A_REALM:
			keep(&m->realm, voff, alen);
			break;
		case STUN_A_NONCE:
			keep(&m->nonce, voff, alen);
			break;
		case STUN_A_SOFTWARE:
			keep(&m->software, voff, alen);
			break;
		case STUN_A_ERROR_CODE:
			keep(&m->error_code, voff, alen);
			break;
		case STUN_A_LIFETIME:
			keep(&m->lifetime, voff, alen);
			break;
		case STUN_A_REQUESTED_TRANSPORT:
			keep(&m->requested_transport, voff, alen);
			break;
		case STUN_A_EVEN_PORT:
			keep(&m->even_port, voff, alen);
			break;
		case STUN_A_REQUESTED_ADDRESS_FAMILY:
			keep(&m->requested_family, voff, alen);
			break;
		case STUN_A_DATA:
			keep(&m->data, voff, alen);
			break;
		case STUN_A_CHANNEL_NUMBER:
			keep(&m->channel_number, voff, alen);
			break;
		case STUN_A_DONT_FRAGMENT:
			keep(&m->dont_fragment, voff, alen);
			break;
		case STUN_A_RESERVATION_TOKEN:
			keep(&m->reservation_token, voff, alen);
			break;
		case STUN_A_XOR_MAPPED_ADDRESS:
			keep(&m->xor_mapped, voff, alen);
			break;
		case STUN_A_XOR_RELAYED_ADDRESS:
			keep(&m->xor_relayed, voff, alen);
			break;
		case STUN_A_UNKNOWN_ATTRIBUTES:
			keep(&m->unknown_attributes, voff, alen);
			break;
		case STUN_A_XOR_PEER_ADDRESS:
			if (m->n_peer == STUN_PEERS_MAX)
				return STUN_E_TOO_MANY;
			m->peer[m->n_peer].off = voff;
			m->peer[m->n_peer].len = alen;
			m->n_peer++;
			break;
		default:
			if (t < 0x8000 && !known_required(t))
				add_unknown(m, t);
			break;
		}
	}
	return 0;
}

/* ---- attribute readers ---- */

bool stun_get_u32(const struct stun_msg *m, struct stun_attr a, uint32_t *v)
{
	if (!a.off || a.len != 4)
		return false;
	*v = rd32(m->raw + a.off);
	return true;
}

bool stun_get_lifetime(const struct stun_msg *m, uint32_t *seconds)
{
	return stun_get_u32(m, m->lifetime, seconds);
}

bool stun_get_requested_transport(const struct stun_msg *m, uint8_t *proto)
{
	uint32_t v;

	if (!stun_get_u32(m, m->requested_transport, &v))
		return false;
	*proto = (uint8_t)(v >> 24);
	return true;
}

bool stun_get_requested_family(const struct stun_msg *m, uint8_t *family)
{
	uint32_t v;

	if (!stun_get_u32(m, m->requested_family, &v))
		return false;
	*family = (uint8_t)(v >> 24);
	return true;
}

bool stun_get_even_port(const struct stun_msg *m, bool *reserve)
{
	if (!m->even_port.off || m->even_port.len != 1)
		return false;
	*reserve = (m->raw[m->even_port.off] & 0x80) != 0;
	return true;
}

bool stun_get_channel(const struct stun_msg *m, uint16_t *channel)
{
	uint32_t v;

	if (!stun_get_u32(m, m->channel_number, &v))
		return false;
	*channel = (uint16_t)(v >> 16);
	return true;
}

bool stun_get_error(const struct stun_msg *m, int *code, const char **reason, size_t *reason_len)
{
	const uint8_t *v;
	int cls, num;

	if (!m->error_code.off || m->error_code.len < 4)
		return false;
	v = m->raw + m->error_code.off;
	cls = v[2] & 7;
	num = v[3];
	if (cls < 3 || cls > 6 || num > 99)
		return false;
	*code = cls * 100 + num;
	*reason = (const char *)v + 4;
	*reason_len = m->error_code.len - 4u;
	return true;
}

int stun_get_xor_addr(const struct stun_msg *m, struct stun_attr a, union etr_sockaddr *out)
{
	const uint8_t *v;
	uint8_t cookie[4];
	uint16_t port;

	if (!a.off || a.len < 4)
		return -1;
	v = m->raw + a.off;
	wr32(cookie, STUN_COOKIE);
	port = rd16(v + 2) ^ (uint16_t)(STUN_COOKIE >> 16);
	memset(out, 0, sizeof(*out));
	if (v[1] == STUN_FAMILY_IPV4 && a.len == 8) {
		uint8_t *ip = (uint8_t *)&out->in.sin_addr;

		out->in.sin_family = AF_INET;
		out->in.sin_port = htons(port);
		for (int i = 0; i < 4; i++)
			ip[i] = v[4 + i] ^ cookie[i];
		return 0;
	}
	if (v[1] == STUN_FAMILY_IPV6 && a.len == 20) {
		uint8_t *ip = out->in6.sin6_addr.s6_addr;

		out->in6.sin6_family = AF_INET6;
		out->in6.sin6_port = htons(port);
		for (int i = 0; i < 4; i++)
			ip[i] = v[4 + i] ^ cookie[i];
		for (int i = 0; i < 12; i++)
			ip[4 + i] = v[8 + i] ^ m->tid[i];
		return 0;
	}
	return -1;
}

/* ---- integrity ---- */

/* Constant time: the MAC is a secret until it matches. */
static bool same_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}

bool stun_check_mi_sha1(const struct stun_msg *m, const uint8_t *key, size_t keylen)
{
	uint8_t mac[32];
	size_t hdr;

	if (!m->mi.off || m->mi.len != STUN_MI_LEN)
		return false;
	hdr = m->mi.off - 4u; /* the MI attribute's header */
	if (!stun_hmac(sha1_name, key, keylen, m->raw, hdr,
		       (uint16_t)(hdr + 4 + STUN_MI_LEN - STUN_HDR_LEN), mac))
		return false;
	return same_bytes(mac, m->raw + m->mi.off, STUN_MI_LEN);
}

bool stun_check_mi_sha256(const struct stun_msg *m, const uint8_t *key, size_t keylen)
{
	uint8_t mac[32];
	size_t hdr;

	if (!m->mi256.off || m->mi256.len < STUN_MI256_MIN || m->mi256.len > STUN_MI256_LEN ||
	    (m->mi256.len & 3))
		return false;
	hdr = m->mi256.off - 4u;
	if (!stun_hmac(sha256_name, key, keylen, m->raw, hdr,
		       (uint16_t)(hdr + 4 + m->mi256.len - STUN_HDR_LEN), mac))
		return false;
	return same_bytes(mac, m->raw + m->mi256.off, m->mi256.len);
}

bool stun_check_integrity(const struct stun_msg *m, const uint8_t *key, size_t keylen)
{
	if (m->mi256.off)
		return stun_check_mi_sha256(m, key, keylen);
	return stun_check_mi_sha1(m, key, keylen);
}

/* ---- builder ---- */

void stun_build_begin(struct stun_builder *b, uint8_t *buf, size_t cap, uint16_t type,
		      const uint8_t tid[STUN_TID_LEN])
{
	b->buf = buf;
	b->cap = cap;
	b->len = 0;
	b->pad = 0;
	b->overflow = cap < STUN_HDR_LEN;
	if (b->overflow)
		return;
	wr16(buf, type & 0x3FFF);
	wr16(buf + 2, 0);
	wr32(buf + 4, STUN_COOKIE);
	memcpy(buf + 8, tid, STUN_TID_LEN);
	b->len = STUN_HDR_LEN;
}

/* Room for an attribute of len bytes: its header, padded value. Writes the
 * attribute header and padding and updates the message Length; returns the
 * value's place, or NULL (overflow set). */
static uint8_t *reserve(struct stun_builder *b, uint16_t type, size_t len)
{
	size_t padded = (len + 3) & ~(size_t)3;
	uint8_t *v;

	if (b->overflow || len > 0xFFFF || b->cap - b->len < 4 + padded ||
	    b->len - STUN_HDR_LEN + 4 + padded > 0xFFFF) {
		b->overflow = true;
		return NULL;
	}
	wr16(b->buf + b->len, type);
	wr16(b->buf + b->len + 2, (uint16_t)len);
	v = b->buf + b->len + 4;
	memset(v + len, b->pad, padded - len);
	b->len += 4 + padded;
	wr16(b->buf + 2, (uint16_t)(b->len - STUN_HDR_LEN));
	return v;
}

int stun_add_attr(struct stun_builder *b, uint16_t type, const void *value, size_t len)
{
	uint8_t *v = reserve(b, type, len);

	if (!v)
		return -1;
	if (len)
		memcpy(v, value, len);
	return 0;
}

int stun_add_u32(struct stun_builder *b, uint16_t type, uint32_t val)
{
	uint8_t *v = reserve(b, type, 4);

	if (!v)
		return -1;
	wr32(v, val);
	return 0;
}

int stun_add_xor_addr(struct stun_builder *b, uint16_t type, const union etr_sockaddr *sa)
{
	uint8_t cookie[4];
	const uint8_t *tid = b->buf + 8;
	uint8_t *v;

	wr32(cookie, STUN_COOKIE);
	if (sa->sa.sa_family == AF_INET) {
		const uint8_t *ip = (const uint8_t *)&sa->in.sin_addr;

		if (!(v = reserve(b, type, 8)))
			return -1;
		v[0] = 0;
		v[1] = STUN_FAMILY_IPV4;
		wr16(v + 2, ntohs(sa->in.sin_port) ^ (uint16_t)(STUN_COOKIE >> 16));
		for (int i = 0; i < 4; i++)
			v[4 + i] = ip[i] ^ cookie[i];
		return 0;
	}
	if (sa->sa.sa_family == AF_INET6) {
		const uint8_t *ip = sa->in6.sin6_addr.s6_addr;

		if (!(v = reserve(b, type, 20)))
			return -1;
		v[0] = 0;
		v[1] = STUN_FAMILY_IPV6;
		wr16(v + 2, ntohs(sa->in6.sin6_port) ^ (uint16_t)(STUN_COOKIE >> 16));
		for (int i = 0; i < 4; i++)
			v[4 + i] = ip[i] ^ cookie[i];
		for (int i = 0; i < 12; i++)
			v[8 + i] = ip[4 + i] ^ tid[i];
		return 0;
	}
	return -1;
}

int stun_add_error(struct stun_builder *b, int code, const char *reason)
{
	size_t rlen;
	uint8_t *v;

	if (code < 300 || code > 699)
		return -1;
	if (!reason)
		reason = stun_reason(code);
	/* The reason phrase is at most 128 characters (RFC 8489 14.8). */
	rlen = strnlen(reason, 763);
	if (!(v = reserve(b, STUN_A_ERROR_CODE, 4 + rlen)))
		return -1;
	v[0] = 0;
	v[1] = 0;
	v[2] = (uint8_t)(code / 100);
	v[3] = (uint8_t)(code % 100);
	memcpy(v + 4, reason, rlen);
	return 0;
}

int stun_add_unknown_attrs(struct stun_builder *b, const uint16_t *types, unsigned n)
{
	uint8_t *v = reserve(b, STUN_A_UNKNOWN_ATTRIBUTES, 2 * (size_t)n);

	if (!v)
		return -1;
	for (unsigned i = 0; i < n; i++)
		wr16(v + 2 * i, types[i]);
	return 0;
}

static int add_mac(struct stun_builder *b, uint16_t type, char *digest, size_t maclen,
		   const uint8_t *key, size_t keylen)
{
	size_t before = b->len;
	uint8_t mac[32];
	uint8_t *v = reserve(b, type, maclen);

	if (!v)
		return -1;
	/* The Length now ends at this attribute, as the MAC wants it. */
	if (!stun_hmac(digest, key, keylen, b->buf, before, (uint16_t)(b->len - STUN_HDR_LEN),
		       mac)) {
		b->overflow = true;
		return -1;
	}
	memcpy(v, mac, maclen);
	return 0;
}

int stun_add_integrity(struct stun_builder *b, const uint8_t *key, size_t keylen)
{
	return add_mac(b, STUN_A_MESSAGE_INTEGRITY, sha1_name, STUN_MI_LEN, key, keylen);
}

int stun_add_integrity_sha256(struct stun_builder *b, const uint8_t *key, size_t keylen)
{
	return add_mac(b, STUN_A_MESSAGE_INTEGRITY_SHA256, sha256_name, STUN_MI256_LEN, key,
		       keylen);
}

int stun_add_fingerprint(struct stun_builder *b)
{
	size_t before = b->len;
	uint8_t *v = reserve(b, STUN_A_FINGERPRINT, 4);

	if (!v)
		return -1;
	wr32(v, stun_crc32(0, b->buf, before) ^ STUN_FP_XOR);
	return 0;
}

size_t stun_build_finish(const struct stun_builder *b)
{
	return b->overflow ? 0 : b->len;
}

const char *stun_method_name(uint16_t method)
{
	static _Thread_local char other[16];

	switch (method) {
	case STUN_BINDING:
		return "Binding";
	case STUN_ALLOCATE:
		return "Allocate";
	case STUN_REFRESH:
		return "Refresh";
	case STUN_SEND:
		return "Send";
	case STUN_DATA:
		return "Data";
	case STUN_CREATE_PERMISSION:
		return "CreatePermission";
	case STUN_CHANNEL_BIND:
		return "ChannelBind";
	}
	snprintf(other, sizeof(other), "method 0x%03x", method);
	return other;
}

const char *stun_reason(int code)
{
	switch (code) {
	case 300:
		return "Try Alternate";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 420:
		return "Unknown Attribute";
	case 437:
		return "Allocation Mismatch";
	case 438:
		return "Stale Nonce";
	case 440:
		return "Address Family not Supported";
	case 441:
		return "Wrong Credentials";
	case 442:
		return "Unsupported Transport Protocol";
	case 443:
		return "Peer Address Family Mismatch";
	case 486:
		return "Allocation Quota Reached";
	case 500:
		return "Server Error";
	case 508:
		return "Insufficient Capacity";
	default:
		return "Error";
	}
}

/* ---- demux, framing, ChannelData ---- */

enum stun_demux stun_demux(const uint8_t *p, size_t n)
{
	if (n < 1)
		return STUN_DEMUX_OTHER;
	if (p[0] <= 0x03)
		return STUN_DEMUX_STUN;
	if (p[0] >= 0x40 && p[0] <= 0x7F)
		return STUN_DEMUX_CHANNEL;
	return STUN_DEMUX_OTHER;
}

int stun_frame_len(const uint8_t *p, size_t n)
{
	size_t len;

	if (n < 1)
		return 0;
	switch (stun_demux(p, n)) {
	case STUN_DEMUX_STUN:
		if (n >= 8 && rd32(p + 4) != STUN_COOKIE)
			return -1;
		if (n < 4)
			return 0;
		len = rd16(p + 2);
		if (len & 3)
			return -1;
		return (int)(STUN_HDR_LEN + len);
	case STUN_DEMUX_CHANNEL:
		if (n < 4)
			return 0;
		len = rd16(p + 2);
		return (int)(STUN_CHAN_HDR_LEN + len + stun_chan_pad(len));
	default:
		return -1;
	}
}

int stun_chan_parse(const uint8_t *p, size_t n, uint16_t *channel, const uint8_t **data,
		    size_t *len)
{
	uint16_t ch, l;

	if (n < STUN_CHAN_HDR_LEN)
		return -1;
	ch = rd16(p);
	l = rd16(p + 2);
	if (ch < STUN_CHANNEL_MIN || ch > STUN_CHANNEL_MAX)
		return -1;
	if (n < STUN_CHAN_HDR_LEN + (size_t)l ||
	    n > STUN_CHAN_HDR_LEN + (size_t)l + stun_chan_pad(l))
		return -1;
	*channel = ch;
	*data = p + STUN_CHAN_HDR_LEN;
	*len = l;
	return 0;
}

void stun_chan_header(uint8_t hdr[STUN_CHAN_HDR_LEN], uint16_t channel, uint16_t len)
{
	wr16(hdr, channel);
	wr16(hdr + 2, len);
}

size_t stun_chan_build(uint8_t *buf, size_t cap, uint16_t channel, const void *data, size_t len,
		       bool pad)
{
	size_t total, padding = pad ? stun_chan_pad(len) : 0;

	if (len > 0xFFFF)
		return 0;
	total = STUN_CHAN_HDR_LEN + len + padding;
	if (total > cap)
		return 0;
	stun_chan_header(buf, channel, (uint16_t)len);
	if (len)
		memmove(buf + STUN_CHAN_HDR_LEN, data, len);
	memset(buf + STUN_CHAN_HDR_LEN + len, 0, padding);
	return total;
}
