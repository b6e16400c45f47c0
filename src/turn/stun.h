/* SPDX-License-Identifier: ISC */
/* STUN (RFC 8489) and TURN (RFC 8656) messages: parse, build, integrity,
 * fingerprint, XOR addresses, ChannelData framing and the demux of a
 * TURN port. Pure: no sockets, no clock, no allocation; the MACs come from
 * OpenSSL 3 libcrypto.
 *
 * A parsed message keeps pointers into the caller's bytes: the caller keeps
 * them alive while it reads the message. */
#ifndef ETR_STUN_H
#define ETR_STUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"

#define STUN_COOKIE  0x2112A442u
#define STUN_HDR_LEN 20
#define STUN_TID_LEN 12
/* Largest message: 20-byte header + a 16-bit Length. */
#define STUN_MSG_MAX (STUN_HDR_LEN + 0xFFFF)

/* Message classes (RFC 8489 5): the C1 C0 bits of the type. */
enum stun_class {
	STUN_REQUEST = 0,
	STUN_INDICATION = 1,
	STUN_SUCCESS = 2,
	STUN_ERROR = 3,
};

/* Methods: Binding (RFC 8489), the TURN ones (RFC 8656). */
enum stun_method {
	STUN_BINDING = 0x001,
	STUN_ALLOCATE = 0x003,
	STUN_REFRESH = 0x004,
	STUN_SEND = 0x006,
	STUN_DATA = 0x007,
	STUN_CREATE_PERMISSION = 0x008,
	STUN_CHANNEL_BIND = 0x009,
};

/* Attribute types this codec knows. Below 0x8000 an unknown one is
 * comprehension-required (answered 420); above, it is skipped. */
enum stun_attr_type {
	STUN_A_MAPPED_ADDRESS = 0x0001,
	STUN_A_USERNAME = 0x0006,
	STUN_A_MESSAGE_INTEGRITY = 0x0008,
	STUN_A_ERROR_CODE = 0x0009,
	STUN_A_UNKNOWN_ATTRIBUTES = 0x000A,
	STUN_A_CHANNEL_NUMBER = 0x000C,
	STUN_A_LIFETIME = 0x000D,
	STUN_A_XOR_PEER_ADDRESS = 0x0012,
	STUN_A_DATA = 0x0013,
	STUN_A_REALM = 0x0014,
	STUN_A_NONCE = 0x0015,
	STUN_A_XOR_RELAYED_ADDRESS = 0x0016,
	STUN_A_REQUESTED_ADDRESS_FAMILY = 0x0017,
	STUN_A_EVEN_PORT = 0x0018,
	STUN_A_REQUESTED_TRANSPORT = 0x0019,
	STUN_A_DONT_FRAGMENT = 0x001A,
	STUN_A_MESSAGE_INTEGRITY_SHA256 = 0x001C,
	STUN_A_XOR_MAPPED_ADDRESS = 0x0020,
	STUN_A_RESERVATION_TOKEN = 0x0022,
	STUN_A_SOFTWARE = 0x8022,
	STUN_A_FINGERPRINT = 0x8028,
};

#define STUN_MI_LEN    20
#define STUN_MI256_LEN 32
/* A received MESSAGE-INTEGRITY-SHA256 may be truncated to 16..32 bytes in
 * steps of 4 (RFC 8489 14.6). */
#define STUN_MI256_MIN 16
#define STUN_FP_XOR    0x5354554Eu

/* REQUESTED-TRANSPORT's protocol for UDP; REQUESTED-ADDRESS-FAMILY values. */
#define STUN_TRANSPORT_UDP 17
#define STUN_FAMILY_IPV4   0x01
#define STUN_FAMILY_IPV6   0x02

/* Channel numbers accepted: RFC 8656 narrows them to 0x4000-0x4FFF, but
 * deployed clients (coturn's turnutils_uclient) still pick from RFC 5766's
 * 0x4000-0x7FFF. */
#define STUN_CHANNEL_MIN  0x4000
#define STUN_CHANNEL_MAX  0x7FFF
#define STUN_CHAN_HDR_LEN 4

/* Most XOR-PEER-ADDRESS attributes kept from one message (CreatePermission
 * may carry several); more makes the parse fail (STUN_E_TOO_MANY). */
#define STUN_PEERS_MAX 8
/* Most unknown comprehension-required types kept for UNKNOWN-ATTRIBUTES;
 * the rest are counted in n_unknown_dropped (the answer is 420 anyway). */
#define STUN_UNKNOWN_MAX 16

/* Parse errors (negative). */
enum stun_err {
	STUN_E_NOT_STUN = -1,	 /* first byte not 0x00-0x03 (see stun_demux) */
	STUN_E_SHORT = -2,	 /* fewer bytes than the header or its Length */
	STUN_E_LENGTH = -3,	 /* Length not a multiple of 4, bytes beyond it, or an
				    attribute running past the end */
	STUN_E_COOKIE = -4,	 /* not the RFC 5389/8489 magic cookie */
	STUN_E_FINGERPRINT = -5, /* FINGERPRINT wrong, of bad length, or not last */
	STUN_E_INTEGRITY = -6,	 /* MESSAGE-INTEGRITY(-SHA256) of bad length */
	STUN_E_TOO_MANY = -7,	 /* more than STUN_PEERS_MAX XOR-PEER-ADDRESS */
};

/* Where one attribute's value is in the message: off is from the message's
 * first byte (0: absent; a present value is at 24 or beyond), len is the
 * value's length without padding. */
struct stun_attr {
	uint32_t off;
	uint16_t len;
};

/* A parsed message. Only the first of each single-valued attribute is kept.
 * Attributes after MESSAGE-INTEGRITY other than MESSAGE-INTEGRITY-SHA256 and
 * FINGERPRINT, and after MESSAGE-INTEGRITY-SHA256 other than FINGERPRINT,
 * are ignored (RFC 8489 14.5, 14.6): not kept, not counted as unknown. */
struct stun_msg {
	const uint8_t *raw;
	uint32_t len; /* 20 + Length */
	uint16_t type;
	uint16_t method; /* enum stun_method, or another 12-bit method */
	enum stun_class cls;
	uint8_t tid[STUN_TID_LEN];

	struct stun_attr username, realm, nonce, software, error_code;
	struct stun_attr mi, mi256, fingerprint;
	struct stun_attr lifetime, requested_transport, even_port, requested_family;
	struct stun_attr data, channel_number, dont_fragment, reservation_token;
	struct stun_attr xor_mapped, xor_relayed, unknown_attributes;
	struct stun_attr peer[STUN_PEERS_MAX];
	unsigned n_peer;

	uint16_t unknown[STUN_UNKNOWN_MAX]; /* distinct, in order of appearance */
	unsigned n_unknown;
	unsigned n_unknown_dropped;
};

/* The type for a method and class. */
uint16_t stun_type(unsigned method, enum stun_class cls);

/* Parse exactly one message of n bytes (a datagram, or a frame cut by
 * stun_frame_len). Checks the FINGERPRINT when there is one; checks the
 * integrity only in stun_check_integrity (the key depends on the user).
 * Returns 0 or an enum stun_err. m is filled (partly) even on error. */
int stun_parse(const uint8_t *p, size_t n, struct stun_msg *m);

/* Present? */
static inline bool stun_has(struct stun_attr a)
{
	return a.off != 0;
}

/* Pointer to an attribute's value. */
static inline const uint8_t *stun_attr_ptr(const struct stun_msg *m, struct stun_attr a)
{
	return m->raw + a.off;
}

/* Readers of single attributes; false when absent or malformed (the server
 * answers 400 then). */
bool stun_get_u32(const struct stun_msg *m, struct stun_attr a, uint32_t *v);
/* LIFETIME in seconds. */
bool stun_get_lifetime(const struct stun_msg *m, uint32_t *seconds);
/* REQUESTED-TRANSPORT's protocol number (17 = UDP). */
bool stun_get_requested_transport(const struct stun_msg *m, uint8_t *proto);
/* REQUESTED-ADDRESS-FAMILY: STUN_FAMILY_IPV4 or _IPV6 (other values are
 * returned as sent; the server answers 440). */
bool stun_get_requested_family(const struct stun_msg *m, uint8_t *family);
/* EVEN-PORT's R bit (reserve the next port too). */
bool stun_get_even_port(const struct stun_msg *m, bool *reserve);
/* CHANNEL-NUMBER's number (not range-checked: see STUN_CHANNEL_MIN/MAX). */
bool stun_get_channel(const struct stun_msg *m, uint16_t *channel);
/* ERROR-CODE's code (300..699) and reason phrase (not NUL-terminated). */
bool stun_get_error(const struct stun_msg *m, int *code, const char **reason, size_t *reason_len);

/* A XOR-*-ADDRESS value into out (port and address un-XORed with the
 * cookie and, for IPv6, the transaction ID). 0, or -1 when malformed or of
 * an unknown family. */
int stun_get_xor_addr(const struct stun_msg *m, struct stun_attr a, union etr_sockaddr *out);

/* Check MESSAGE-INTEGRITY-SHA256 when present, else MESSAGE-INTEGRITY,
 * against key (the long-term key: 16 bytes of MD5; or a short-term
 * password). False when neither is present or the one checked is wrong. */
bool stun_check_integrity(const struct stun_msg *m, const uint8_t *key, size_t keylen);
/* Only MESSAGE-INTEGRITY (HMAC-SHA1); false when absent. */
bool stun_check_mi_sha1(const struct stun_msg *m, const uint8_t *key, size_t keylen);
/* Only MESSAGE-INTEGRITY-SHA256 (truncated ones compared on their length);
 * false when absent. */
bool stun_check_mi_sha256(const struct stun_msg *m, const uint8_t *key, size_t keylen);

/* The CRC-32 (ISO-HDLC, as zlib's crc32) of n bytes, continuing from crc
 * (start with 0). */
uint32_t stun_crc32(uint32_t crc, const uint8_t *p, size_t n);

/* A builder writes one message into the caller's buffer; the header's
 * Length follows every attribute added, so MESSAGE-INTEGRITY and FINGERPRINT
 * cover what came before. Any add that does not fit sets overflow, and
 * finish then returns 0. pad is the byte used for attribute padding (0 by
 * default; RFC 5769's vectors use 0x20). */
struct stun_builder {
	uint8_t *buf;
	size_t cap;
	size_t len;
	uint8_t pad;
	bool overflow;
};

/* Start a message of this type and transaction ID. */
void stun_build_begin(struct stun_builder *b, uint8_t *buf, size_t cap, uint16_t type,
		      const uint8_t tid[STUN_TID_LEN]);
/* Any attribute (value copied, padded to 4). 0 or -1. */
int stun_add_attr(struct stun_builder *b, uint16_t type, const void *value, size_t len);
/* A 4-byte attribute (LIFETIME...). */
int stun_add_u32(struct stun_builder *b, uint16_t type, uint32_t v);
/* XOR-MAPPED-ADDRESS, XOR-RELAYED-ADDRESS or XOR-PEER-ADDRESS (uses the
 * transaction ID already written by begin). */
int stun_add_xor_addr(struct stun_builder *b, uint16_t type, const union etr_sockaddr *sa);
/* ERROR-CODE with code and reason (NULL: stun_reason(code)). */
int stun_add_error(struct stun_builder *b, int code, const char *reason);
/* UNKNOWN-ATTRIBUTES listing n types (for 420). */
int stun_add_unknown_attrs(struct stun_builder *b, const uint16_t *types, unsigned n);
/* MESSAGE-INTEGRITY: HMAC-SHA1 over the message so far, with the header
 * Length covering it. */
int stun_add_integrity(struct stun_builder *b, const uint8_t *key, size_t keylen);
/* MESSAGE-INTEGRITY-SHA256 (32 bytes). */
int stun_add_integrity_sha256(struct stun_builder *b, const uint8_t *key, size_t keylen);
/* FINGERPRINT: the last attribute. */
int stun_add_fingerprint(struct stun_builder *b);
/* The message's length, or 0 when something did not fit. */
size_t stun_build_finish(const struct stun_builder *b);

/* The reason phrase for an error code the server sends (400, 401, 403,
 * 420, 437, 438, 440, 441, 442, 486, 500, 508); "Error" for others. */
const char *stun_reason(int code);

/* A method's name ("Allocate", "ChannelBind"...), or "method 0x0NN". The
 * unknown form is in a static buffer: for logs of one thread at a time. */
const char *stun_method_name(uint16_t method);

/* What the first bytes of a datagram or stream frame are (RFC 8656 12,
 * RFC 7983): 0x00-0x03 STUN, 0x40-0x7F ChannelData, else not ours. */
enum stun_demux {
	STUN_DEMUX_OTHER = 0,
	STUN_DEMUX_STUN,
	STUN_DEMUX_CHANNEL,
};
enum stun_demux stun_demux(const uint8_t *p, size_t n);

/* For TCP/TLS: the length of the frame at the start of a stream of n bytes.
 * A STUN message is 20 + Length; ChannelData is 4 + Length rounded up to
 * 4 (padding is mandatory over streams, RFC 8656 12.5). Returns the frame's
 * length (it may exceed n: wait for it), 0 when fewer than 4 bytes are
 * there, -1 for garbage (not STUN or ChannelData, a STUN Length not a
 * multiple of 4, a wrong cookie once 8 bytes are there): close then. */
int stun_frame_len(const uint8_t *p, size_t n);

/* A ChannelData message of n bytes: its channel (0x4000-0x7FFF) and data.
 * Up to 3 padding bytes beyond the Length are tolerated (streams must have
 * them, UDP may). Returns 0 or -1 (not ChannelData, channel out of range,
 * Length past the end, more than padding after it). */
int stun_chan_parse(const uint8_t *p, size_t n, uint16_t *channel, const uint8_t **data,
		    size_t *len);
/* Write the 4-byte ChannelData header for len bytes of data on channel. */
void stun_chan_header(uint8_t hdr[STUN_CHAN_HDR_LEN], uint16_t channel, uint16_t len);
/* Bytes of padding after len bytes of data over a stream (0 over UDP). */
static inline size_t stun_chan_pad(size_t len)
{
	return (4 - (len & 3)) & 3;
}
/* A whole ChannelData message into buf: header, data and, when pad, zero
 * padding to 4. Returns its length, or 0 when it does not fit or len is
 * over 65535. */
size_t stun_chan_build(uint8_t *buf, size_t cap, uint16_t channel, const void *data, size_t len,
		       bool pad);

#endif
