/* SPDX-License-Identifier: ISC */
/* The adaptive Huffman coding Quake 3 family clients apply to the userinfo of
 * a "connect" packet, both ways, bit-compatible with the engine. Pure. */
#ifndef ETR_HUFFMAN_H
#define ETR_HUFFMAN_H

#include <stddef.h>
#include <stdint.h>

/* Longest userinfo the engines send (MAX_INFO_STRING). */
#define HUFFMAN_INFO_MAX 1024

/* Where the coded stream starts in a connect packet: after
 * "\xff\xff\xff\xffconnect ". */
#define HUFFMAN_CONNECT_OFFSET 12

/* Code len bytes of in the engine's way: a 2-byte big-endian length, then
 * the bits. Returns bytes written to out, or -1 when len > 65535 or out is
 * too small. */
int huffman_encode(const char *in, size_t len, uint8_t *out, size_t outlen);

/* Decode a stream made by huffman_encode (or the engine) into out. Returns
 * the decoded length, or -1 when the stream is truncated or malformed or its
 * length does not fit outlen. Bytes after the last symbol are ignored. */
int huffman_decode(const uint8_t *in, size_t len, uint8_t *out, size_t outlen);

/* The userinfo of a whole connect packet, without its quotes, into out
 * (NUL-terminated). Returns its length, or -1 when pkt is not a connect
 * packet, the stream is malformed, the userinfo is longer than
 * HUFFMAN_INFO_MAX or does not fit outlen. */
int huffman_decode_connect(const uint8_t *pkt, size_t len, char *out, size_t outlen);

#endif
