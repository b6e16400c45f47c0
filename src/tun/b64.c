/* SPDX-License-Identifier: ISC */
/* Base64 for the tunnel: encode with OpenSSL, decode strictly by hand
 * (EVP_DecodeBlock skips blanks and pads its output with zero bytes). */
#include <openssl/evp.h>

#include "b64.h"

size_t b64_encode(char *out, const uint8_t *in, size_t n)
{
	return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

/* The value of a character of the alphabet, or -1. */
static int b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

bool b64_decode(const char *s, size_t n, uint8_t *out, size_t want)
{
	size_t pad = (3 - want % 3) % 3, o = 0;
	uint32_t acc = 0;
	int bits = 0;

	if (n != B64_LEN(want))
		return false;
	for (size_t i = 0; i < n; i++) {
		int v;

		if (i >= n - pad) {
			if (s[i] != '=')
				return false;
			continue;
		}
		v = b64_value(s[i]);
		if (v < 0)
			return false;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	/* The bits left over (2 or 4 with padding) must be zero. */
	return o == want && (acc & ((1u << bits) - 1)) == 0;
}
