/* SPDX-License-Identifier: ISC */
/* Base64 (RFC 4648 section 4, the standard alphabet with padding) for the
 * tunnel: WireGuard keys as the control plane sends them, the WebSocket
 * key and accept. The decoder is strict: one canonical spelling per value. */
#ifndef ETR_B64_H
#define ETR_B64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Characters of the encoding of n bytes, without the NUL. */
#define B64_LEN(n) ((((size_t)(n) + 2) / 3) * 4)

/* Encode n bytes into out (B64_LEN(n) + 1 bytes, NUL-terminated); returns
 * the length without the NUL. */
size_t b64_encode(char *out, const uint8_t *in, size_t n);

/* Decode the n characters at s into exactly want bytes: true only when s is
 * the canonical padded encoding of want bytes (B64_LEN(want) characters,
 * the alphabet, '=' only as the padding, and unused bits zero). */
bool b64_decode(const char *s, size_t n, uint8_t *out, size_t want);

#endif
