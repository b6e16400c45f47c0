/* SPDX-License-Identifier: ISC */
/* The TLS ClientHello of the SNI benchmarks: etrelay-tcpload builds one
 * (synthetic, like fuzz/make_tls_hello_seeds.py's) and etrelay-tcpback finds
 * where it ends in the stream it receives. Never decrypted, never answered
 * as TLS: the relays under test route by its plaintext server name only. */
#ifndef ETR_BENCH_HELLO_H
#define ETR_BENCH_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Handshake message bytes: at least what the fixed fields, the name and
 * the padding extension's header take; at most 16 KiB (the SNI relay's
 * cap) with room for records of 16 KiB. */
#define HELLO_MIN      160
#define HELLO_MAX      (64 * 1024)
#define HELLO_NAME_MAX 253

/* Build a ClientHello for `name` whose handshake message is `size` bytes
 * (padded with an RFC 7685 padding extension), framed in TLS records of at
 * most `record` payload bytes (16384 for one record where it fits). Writes
 * the wire bytes to out (room for size + 5 per record) and returns their
 * count, or 0 when size or name is out of range. */
size_t hello_build(uint8_t *out, size_t room, const char *name, size_t size, size_t record);

/* The receiving end: where the first ClientHello of a stream ends, fed in
 * pieces as they come. */
struct hello_end {
	uint8_t rec_hdr[5], hs_hdr[4];
	unsigned rec_got, hs_got; /* header bytes held */
	size_t rec_left;	  /* payload bytes left in this record */
	size_t hs_left;		  /* handshake body bytes left, once hs_got == 4 */
	bool done, bad;
};

/* Feed n bytes; returns how many of them belong to the hello (all n while
 * it goes on). Sets e->done at its last byte, e->bad (and stops) when the
 * stream is not TLS handshake records starting with a ClientHello. */
size_t hello_end_feed(struct hello_end *e, const uint8_t *p, size_t n);

#endif
