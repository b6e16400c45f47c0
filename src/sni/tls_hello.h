/* SPDX-License-Identifier: ISC */
/* An incremental reader of a TLS ClientHello, for routing a TCP connection
 * by its server name (SNI) without decrypting it. Pure: no sockets, no
 * allocation; about 300 bytes of state per connection.
 *
 * Fed the first bytes of a TCP stream as they arrive, split anywhere (down
 * to one byte per call), it follows the TLS record layer (content type 22,
 * record version 0x0301..0x0304, 1..2^14 bytes per record: a ClientHello is
 * always a TLSPlaintext record, RFC 8446 5.1 and RFC 5246 6.2.1, so the
 * +256/+2048 of protected records never applies), reassembles the
 * handshake message across records and parses it as a stream, keeping only
 * the server name and a few counters. The caller keeps the bytes: it
 * forwards them unchanged once the name is known. The answer waits for the
 * end of the ClientHello (so a refusal found late in it still counts), and
 * no split of the same bytes can change it.
 *
 * Refused, each with its reason (the relay closes without sending a byte):
 * - not TLS: the first byte is not 22 (HTTP, SSLv2's 0x80 header) or the
 *   first record's version is not 3.1..3.4 (SSL 3.0 is dead, RFC 7568);
 * - not a ClientHello: the first handshake message is of another type;
 * - no SNI: no server_name extension, or one with no host_name (type 0);
 * - bad name: see addr_host_name_valid (addr.h); a name no route can match;
 * - malformed: a length that overruns its container, an empty or oversized
 *   record, a non-handshake record inside the hello, an extension block
 *   that does not end with the message, two server_name extensions or two
 *   host_names (RFC 6066 3), a session id over 32 bytes;
 * - too big: a ClientHello (4-byte header included) over the cap, 16 KiB
 *   unless configured, known from its length field before its body
 *   arrives; or more than TLS_HELLO_RECORDS_MAX records, so the bytes the
 *   caller holds stay below TLS_HELLO_WIRE_MAX(cap).
 * Unknown extensions (GREASE, padding, ECH 0xfe0d) are skipped: with ECH
 * the name read is the outer, public one, as it must be for a relay that
 * cannot decrypt. */
#ifndef ETR_TLS_HELLO_H
#define ETR_TLS_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"

/* Longest host name: 253 characters is the longest DNS name written
 * without its trailing dot (255 octets in wire form, RFC 1035 2.3.4). */
#define TLS_NAME_MAX ADDR_NAME_MAX

/* The default cap: bytes of ClientHello handshake message, header included.
 * nginx's preread buffer and Envoy's max_client_hello_size are 16 KiB. */
#define TLS_HELLO_CAP_DEFAULT 16384

/* The cap's bounds: the smallest ClientHello with an SNI is about 50 bytes;
 * above 1 MiB a hello is no longer a hello. */
#define TLS_HELLO_CAP_MIN 64
#define TLS_HELLO_CAP_MAX (1u << 20)

/* Largest TLSPlaintext record body (RFC 8446 5.1). */
#define TLS_RECORD_MAX 16384

/* Most records one ClientHello may span: real clients use one, or two past
 * 16 KiB; a hello split into many tiny records would make the caller hold
 * 5 header bytes per record more. */
#define TLS_HELLO_RECORDS_MAX 64

/* The most bytes of the stream the reader consumes before it answers: what
 * a caller must be able to hold for a given cap. */
#define TLS_HELLO_WIRE_MAX(cap) ((size_t)(cap) + 5u * TLS_HELLO_RECORDS_MAX)

/* What tls_hello_feed says. Every value but TLS_HELLO_MORE is final. */
enum tls_hello_result {
	TLS_HELLO_MORE,		    /* need more bytes */
	TLS_HELLO_NAME,		    /* the server name is in h->name */
	TLS_HELLO_NOT_TLS,	    /* not a TLS handshake record */
	TLS_HELLO_NOT_CLIENT_HELLO, /* a handshake, but not a ClientHello */
	TLS_HELLO_NO_SNI,	    /* no host_name in the ClientHello */
	TLS_HELLO_BAD_NAME,	    /* a host_name no route can match */
	TLS_HELLO_MALFORMED,	    /* lengths or framing that do not add up */
	TLS_HELLO_TOO_BIG,	    /* over the cap */
	TLS_HELLO_RESULTS
};

/* The reader's state; set up with tls_hello_init, then only fed. */
struct tls_hello {
	uint32_t cap;	   /* bytes of handshake message allowed */
	uint32_t wire;	   /* stream bytes consumed */
	uint32_t rec_left; /* body bytes left in the current record */
	uint16_t records;  /* record headers read */
	uint8_t hdr[5];	   /* the record header being read */
	uint8_t hdr_len;
	uint8_t result;			     /* enum tls_hello_result */
	uint8_t state;			     /* the handshake field being read */
	uint8_t got;			     /* bytes of an integer field read so far */
	bool sni_ext;			     /* a server_name extension was seen */
	uint32_t acc;			     /* the integer field being read */
	uint32_t pos;			     /* handshake body bytes consumed */
	uint32_t left;			     /* bytes left in the field being skipped or copied */
	uint32_t msg_end, ext_end, list_end; /* container ends, as body offsets */
	uint16_t ext_type;
	uint8_t name_type;
	uint16_t name_len;	     /* 0 until a host_name is copied */
	char name[TLS_NAME_MAX + 1]; /* lower case, NUL-terminated */
};

/* Start reading a new stream with a cap of `cap` handshake bytes
 * (TLS_HELLO_CAP_MIN..TLS_HELLO_CAP_MAX; 0 means TLS_HELLO_CAP_DEFAULT).
 * Returns 0, or -EINVAL for a cap out of bounds. */
int tls_hello_init(struct tls_hello *h, uint32_t cap);

/* Read the next n bytes of the stream. Returns TLS_HELLO_MORE until the
 * answer is known, then the answer, which later calls repeat without
 * reading. Reads no byte past p[n - 1] and none after the ClientHello. */
enum tls_hello_result tls_hello_feed(struct tls_hello *h, const uint8_t *p, size_t n);

/* A short fixed name for a result, for logs and metric labels. */
const char *tls_hello_result_name(enum tls_hello_result r);

#endif
