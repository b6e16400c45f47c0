/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for tls_hello.c. The input is the first bytes of a TCP
 * stream. Fed whole, in random pieces (chosen by a hash of the input, each
 * piece copied into a buffer of its own size so a sanitizer sees a read past
 * it) and one byte at a time, the reader must give the same answer, the
 * same name and consume the same bytes; never more than it was given or
 * than TLS_HELLO_WIRE_MAX allows; a name it returns must pass the name rule
 * in lower case. Twice: with the default cap and with a small one.
 * Differential too: a plain reader (records joined first, then the message
 * parsed whole with bounds checks) must agree on the name, on "no SNI",
 * and on refusing; where it still needs more, the reader cannot have
 * answered with a name. */
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
		if (strlen(h->name) != h->name_len || !addr_host_name_valid(h->name, h->name_len))
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

enum ref_result { REF_MORE, REF_NAME, REF_NO_SNI, REF_REFUSED };

#define REF_NEED(n)                                                                                \
	do {                                                                                       \
		if ((size_t)(n) > len - p)                                                         \
			return REF_REFUSED;                                                        \
	} while (0)
#define REF_U8()  (p++, b[p - 1])
#define REF_U16() (p += 2, (size_t)b[p - 2] << 8 | b[p - 1])

/* The ClientHello body b[0..len) parsed whole. */
static enum ref_result ref_body(const uint8_t *b, size_t len, char name[TLS_NAME_MAX + 1])
{
	size_t p = 0, n, end;
	bool sni = false, have = false;

	REF_NEED(2);
	if (REF_U8() != 3)
		return REF_REFUSED;
	p++;
	REF_NEED(33);
	p += 32;
	n = REF_U8();
	if (n > 32)
		return REF_REFUSED;
	REF_NEED(n + 2);
	p += n;
	n = REF_U16();
	if (n < 2 || n % 2)
		return REF_REFUSED;
	REF_NEED(n + 1);
	p += n;
	n = REF_U8();
	if (n < 1)
		return REF_REFUSED;
	REF_NEED(n);
	p += n;
	if (p == len)
		return REF_NO_SNI;
	REF_NEED(2);
	size_t exts = REF_U16(); /* apart: p moves in it, and the right side reads p */

	if (exts != len - p)
		return REF_REFUSED;
	while (p < len) {
		size_t type, elen;

		REF_NEED(4);
		type = REF_U16();
		elen = REF_U16();
		REF_NEED(elen);
		if (type != 0) {
			p += elen;
			continue;
		}
		if (sni || elen < 2)
			return REF_REFUSED;
		sni = true;
		end = p + elen;
		if (REF_U16() != elen - 2 || elen == 2)
			return REF_REFUSED;
		while (p < end) {
			size_t t, nl;

			if (end - p < 3)
				return REF_REFUSED;
			t = REF_U8();
			nl = REF_U16();
			if (nl == 0 || nl > end - p)
				return REF_REFUSED;
			if (t == 0) {
				if (have || nl > TLS_NAME_MAX)
					return REF_REFUSED;
				have = true;
				memcpy(name, b + p, nl);
				name[nl] = '\0';
				if (!addr_host_name_valid(name, nl))
					return REF_REFUSED;
				for (size_t i = 0; i < nl; i++)
					if (name[i] >= 'A' && name[i] <= 'Z')
						name[i] = (char)(name[i] - 'A' + 'a');
			}
			p += nl;
		}
	}
	return have ? REF_NAME : REF_NO_SNI;
}

/* The stream: records joined, then the message parsed whole. */
static enum ref_result ref_read(const uint8_t *d, size_t size, uint32_t cap,
				char name[TLS_NAME_MAX + 1])
{
	static uint8_t hs[TLS_HELLO_CAP_DEFAULT + 4 + TLS_RECORD_MAX];
	size_t have = 0, i = 0, records = 0, want = 0;

	for (;;) {
		size_t rlen;

		if (i == size)
			return REF_MORE;
		if (d[i] != 22)
			return REF_REFUSED;
		if (size - i < 5)
			return REF_MORE;
		rlen = (size_t)d[i + 3] << 8 | d[i + 4];
		if (d[i + 1] != 3 || d[i + 2] < 1 || d[i + 2] > 4 || rlen == 0 ||
		    rlen > TLS_RECORD_MAX || ++records > TLS_HELLO_RECORDS_MAX)
			return REF_REFUSED;
		i += 5;
		while (rlen && i < size) {
			hs[have++] = d[i++];
			rlen--;
			if (have == 1 && hs[0] != 1)
				return REF_REFUSED;
			if (have == 4) {
				want = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3]);
				if (want > cap)
					return REF_REFUSED;
			}
			if (have >= 4 && have == want)
				return ref_body(hs + 4, want - 4, name);
		}
		if (rlen)
			return REF_MORE;
	}
}

static void differ(const struct tls_hello *h, enum tls_hello_result r, const uint8_t *data,
		   size_t size, uint32_t cap)
{
	char name[TLS_NAME_MAX + 1];
	enum ref_result ref = ref_read(data, size, cap ? cap : TLS_HELLO_CAP_DEFAULT, name);

	switch (ref) {
	case REF_MORE:
		if (r == TLS_HELLO_NAME || r == TLS_HELLO_NO_SNI)
			abort();
		break;
	case REF_NAME:
		if (r != TLS_HELLO_NAME || strcmp(name, h->name) != 0)
			abort();
		break;
	case REF_NO_SNI:
		if (r != TLS_HELLO_NO_SNI)
			abort();
		break;
	case REF_REFUSED:
		if (r == TLS_HELLO_MORE || r == TLS_HELLO_NAME || r == TLS_HELLO_NO_SNI)
			abort();
		break;
	}
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
	differ(&whole, rw, data, size, cap);

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
