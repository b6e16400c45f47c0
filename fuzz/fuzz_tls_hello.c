/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for tls_hello.c. The input is the first bytes of a TCP
 * stream. Fed whole, in random pieces (chosen by a hash of the input, each
 * piece copied into a buffer of its own size so a sanitizer sees a read past
 * it) and one byte at a time, the reader must give the same answer, the
 * same name and consume the same bytes; never more than it was given or
 * than TLS_HELLO_WIRE_MAX allows; a name it returns must pass the name rule
 * in lower case. Twice: with the default cap and with a small one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tls_hello.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The whole input's answer must hold what the reader promises. */
static void check(const struct tls_hello *h, enum tls_hello_result r, size_t size)
{
	if (h->wire > size || h->wire > TLS_HELLO_WIRE_MAX(h->cap))
		abort();
	if (r == TLS_HELLO_MORE && h->wire != size)
		abort();
	if (r == TLS_HELLO_NAME) {
		if (strlen(h->name) != h->name_len || !tls_hello_name_valid(h->name, h->name_len))
			abort();
		for (size_t i = 0; i < h->name_len; i++)
			if (h->name[i] >= 'A' && h->name[i] <= 'Z')
				abort();
	}
}

static void same(const struct tls_hello *a, enum tls_hello_result ra, const struct tls_hello *b,
		 enum tls_hello_result rb)
{
	if (ra != rb || a->wire != b->wire)
		abort();
	if (ra == TLS_HELLO_NAME && strcmp(a->name, b->name) != 0)
		abort();
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t x = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		x = (x ^ p[i]) * 0x100000001b3ull;
	return x;
}

static uint64_t next(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void run(const uint8_t *data, size_t size, uint32_t cap)
{
	struct tls_hello whole, split, bytes;
	enum tls_hello_result rw, rs = TLS_HELLO_MORE, rb = TLS_HELLO_MORE;
	uint64_t seed = fnv1a(data, size) ^ cap;

	if (tls_hello_init(&whole, cap) != 0 || tls_hello_init(&split, cap) != 0 ||
	    tls_hello_init(&bytes, cap) != 0)
		abort();
	rw = tls_hello_feed(&whole, data, size);
	check(&whole, rw, size);

	for (size_t i = 0; i < size;) {
		/* Mostly small pieces, sometimes large ones. */
		uint64_t x = next(&seed);
		size_t k = 1 + (size_t)(x & 3 ? x % 16 : x % 2048);
		uint8_t *piece;

		if (k > size - i)
			k = size - i;
		piece = malloc(k);
		if (!piece)
			abort();
		memcpy(piece, data + i, k);
		rs = tls_hello_feed(&split, piece, k);
		free(piece);
		i += k;
	}
	same(&whole, rw, &split, rs);

	for (size_t i = 0; i < size; i++) {
		uint8_t b = data[i];

		rb = tls_hello_feed(&bytes, &b, 1);
	}
	same(&whole, rw, &bytes, rb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run(data, size, 0);
	run(data, size, 512);
	return 0;
}
