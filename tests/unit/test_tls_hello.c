/* SPDX-License-Identifier: ISC */
/* Unit tests for tls_hello.c: real ClientHellos from OpenSSL's s_client
 * (tests/data/client_hello_*.bin, see capture_client_hello.sh), the same
 * re-framed and fed in small pieces, synthetic hellos up to and over the
 * cap, and every refusal. The data directory is argv[1]. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls_hello.h"

static const char *data_dir = "tests/data";

/* Big enough for a 17 KiB hello in records. */
#define WIRE_MAX (24 * 1024)

struct bytes {
	uint8_t b[WIRE_MAX];
	size_t n;
};

static void load(struct bytes *out, const char *file)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", data_dir, file);
	f = fopen(path, "rb");
	if (!f)
		fail_msg("%s: %s", path, strerror(errno));
	out->n = fread(out->b, 1, sizeof(out->b), f);
	fclose(f);
	assert_true(out->n > 5);
}

/* Feed p in pieces of `step` bytes (0: whole), each piece copied into a
 * buffer of its exact size so a sanitizer sees a read past it. */
static enum tls_hello_result feed_steps(struct tls_hello *h, const uint8_t *p, size_t n,
					size_t step, uint32_t cap)
{
	enum tls_hello_result r = TLS_HELLO_MORE;

	assert_int_equal(tls_hello_init(h, cap), 0);
	if (step == 0)
		return tls_hello_feed(h, p, n);
	for (size_t i = 0; i < n; i += step) {
		size_t k = n - i < step ? n - i : step;
		uint8_t *piece = malloc(k);

		assert_non_null(piece);
		memcpy(piece, p + i, k);
		r = tls_hello_feed(h, piece, k);
		free(piece);
	}
	return r;
}

static enum tls_hello_result feed(struct tls_hello *h, const struct bytes *w)
{
	return feed_steps(h, w->b, w->n, 0, 0);
}

/* Re-frame the handshake bytes of a one-record hello into records of at
 * most the given sizes (the last takes the rest). */
static void reframe(struct bytes *out, const struct bytes *in, const size_t *sizes, size_t count)
{
	size_t hs = in->n - 5, off = 0;

	out->n = 0;
	for (size_t i = 0; off < hs; i++) {
		size_t k = i < count && sizes[i] < hs - off ? sizes[i] : hs - off;

		memcpy(out->b + out->n, in->b, 3);
		out->b[out->n + 3] = (uint8_t)(k >> 8);
		out->b[out->n + 4] = (uint8_t)k;
		memcpy(out->b + out->n + 5, in->b + 5 + off, k);
		out->n += 5 + k;
		off += k;
	}
}

/* A synthetic ClientHello whose handshake message (header included) is
 * exactly hs_total bytes, padded with extension 21 (RFC 7685), with a GREASE
 * extension and an ECH-like one before the server_name, framed into records
 * of at most TLS_RECORD_MAX bytes. name NULL: no server_name extension. */
static void synth(struct bytes *out, const char *name, size_t hs_total)
{
	uint8_t hs[WIRE_MAX];
	size_t n = 0, ext_len_at, nl = name ? strlen(name) : 0;

	assert_true(hs_total <= sizeof(hs));
	hs[n++] = 1;
	n += 3; /* length, below */
	hs[n++] = 3, hs[n++] = 3;
	for (int i = 0; i < 32; i++)
		hs[n++] = (uint8_t)(i * 7);
	hs[n++] = 32;
	for (int i = 0; i < 32; i++)
		hs[n++] = (uint8_t)(i * 13);
	hs[n++] = 0, hs[n++] = 4, hs[n++] = 0x13, hs[n++] = 0x01, hs[n++] = 0x0a, hs[n++] = 0x0a;
	hs[n++] = 1, hs[n++] = 0;
	ext_len_at = n;
	n += 2;
	/* GREASE (RFC 8701), empty. */
	hs[n++] = 0x3a, hs[n++] = 0x3a, hs[n++] = 0, hs[n++] = 0;
	/* ECH (0xfe0d) with opaque content that holds another name. */
	hs[n++] = 0xfe, hs[n++] = 0x0d, hs[n++] = 0, hs[n++] = 12;
	memcpy(hs + n, "\0\0\0\x08inner.ex", 12);
	n += 12;
	if (name) {
		hs[n++] = 0, hs[n++] = 0;
		hs[n++] = (uint8_t)((nl + 5) >> 8), hs[n++] = (uint8_t)(nl + 5);
		hs[n++] = (uint8_t)((nl + 3) >> 8), hs[n++] = (uint8_t)(nl + 3);
		hs[n++] = 0;
		hs[n++] = (uint8_t)(nl >> 8), hs[n++] = (uint8_t)nl;
		memcpy(hs + n, name, nl);
		n += nl;
	}
	/* supported_versions: TLS 1.3. */
	memcpy(hs + n, "\x00\x2b\x00\x03\x02\x03\x04", 7);
	n += 7;
	assert_true(hs_total >= n + 4);
	size_t pad = hs_total - n - 4;
	hs[n++] = 0, hs[n++] = 21, hs[n++] = (uint8_t)(pad >> 8), hs[n++] = (uint8_t)pad;
	memset(hs + n, 0, pad);
	n += pad;
	hs[1] = (uint8_t)((n - 4) >> 16), hs[2] = (uint8_t)((n - 4) >> 8), hs[3] = (uint8_t)(n - 4);
	hs[ext_len_at] = (uint8_t)((n - ext_len_at - 2) >> 8);
	hs[ext_len_at + 1] = (uint8_t)(n - ext_len_at - 2);
	assert_int_equal(n, hs_total);

	out->n = 0;
	for (size_t off = 0; off < n;) {
		size_t k = n - off < TLS_RECORD_MAX ? n - off : TLS_RECORD_MAX;

		memcpy(out->b + out->n, "\x16\x03\x01", 3);
		out->b[out->n + 3] = (uint8_t)(k >> 8), out->b[out->n + 4] = (uint8_t)k;
		memcpy(out->b + out->n + 5, hs + off, k);
		out->n += 5 + k;
		off += k;
	}
}

static void test_tls_hello_reads_the_name_of_a_real_s_client_hello(void **state)
{
	const char *files[] = {"client_hello_s_client.bin", "client_hello_s_client_bugs.bin"};
	struct tls_hello h;
	struct bytes w;

	for (size_t i = 0; i < 2; i++) {
		load(&w, files[i]);
		assert_int_equal(feed(&h, &w), TLS_HELLO_NAME);
		assert_string_equal(h.name, "x");
		assert_int_equal(h.wire, w.n);
	}
	/* The -bugs one carries the padding extension: 517 bytes on the wire. */
	assert_int_equal(w.n, 517);
}

static void test_tls_hello_real_hello_in_three_records_fed_one_to_seven_bytes(void **state)
{
	const size_t sizes[] = {100, 200};
	struct tls_hello h;
	struct bytes w, framed;

	load(&w, "client_hello_s_client_bugs.bin");
	reframe(&framed, &w, sizes, 2);
	assert_int_equal(framed.n, w.n + 10);
	for (size_t step = 1; step <= 7; step++) {
		assert_int_equal(feed_steps(&h, framed.b, framed.n, step, 0), TLS_HELLO_NAME);
		assert_string_equal(h.name, "x");
		assert_int_equal(h.records, 3);
		assert_int_equal(h.wire, framed.n);
	}
}

static void test_tls_hello_records_split_inside_every_field(void **state)
{
	struct tls_hello h;
	struct bytes w, framed;

	/* A record boundary after each handshake byte in turn. */
	load(&w, "client_hello_s_client.bin");
	for (size_t cut = 1; cut < w.n - 5; cut++) {
		size_t sizes[] = {cut};

		reframe(&framed, &w, sizes, 1);
		assert_int_equal(feed_steps(&h, framed.b, framed.n, 3, 0), TLS_HELLO_NAME);
		assert_string_equal(h.name, "x");
	}
}

static void test_tls_hello_every_truncation_of_a_real_hello_needs_more(void **state)
{
	const char *files[] = {"client_hello_s_client.bin", "client_hello_s_client_bugs.bin"};
	struct tls_hello h;
	struct bytes w;

	const size_t sizes[] = {100, 200};
	struct bytes real;

	/* The two hellos, then the second in three records. */
	for (size_t f = 0; f < 3; f++) {
		if (f < 2) {
			load(&w, files[f]);
		} else {
			load(&real, files[1]);
			reframe(&w, &real, sizes, 2);
		}
		for (size_t n = 0; n < w.n; n++) {
			uint8_t *p = malloc(n ? n : 1);

			memcpy(p, w.b, n);
			assert_int_equal(tls_hello_init(&h, 0), 0);
			assert_int_equal(tls_hello_feed(&h, p, n), TLS_HELLO_MORE);
			free(p);
			assert_int_equal(h.wire, n);
		}
	}
}

static void test_tls_hello_stops_at_the_end_of_the_hello(void **state)
{
	struct tls_hello h;
	struct bytes w;

	/* Whatever follows the hello in the stream is not read. */
	load(&w, "client_hello_s_client.bin");
	memcpy(w.b + w.n, "\x14\x03\x03\x00\x01\x01GARBAGE", 13);
	assert_int_equal(feed_steps(&h, w.b, w.n + 13, 0, 0), TLS_HELLO_NAME);
	assert_int_equal(h.wire, w.n);
	/* Final answers repeat. */
	assert_int_equal(tls_hello_feed(&h, (const uint8_t *)"x", 1), TLS_HELLO_NAME);
	assert_int_equal(h.wire, w.n);
}

static void test_tls_hello_synthetic_hellos_up_to_the_cap_pass(void **state)
{
	const size_t sizes[] = {1800, 5 * 1024, 16 * 1024};
	struct tls_hello h;
	static struct bytes w;

	for (size_t i = 0; i < 3; i++) {
		synth(&w, "Svc1.Example.COM", sizes[i]);
		for (size_t step = 0; step <= 7; step += 7) {
			assert_int_equal(feed_steps(&h, w.b, w.n, step, 0), TLS_HELLO_NAME);
			assert_string_equal(h.name, "svc1.example.com");
		}
	}
	/* 16 KiB of handshake is exactly one full record. */
	assert_int_equal(h.records, 1);
	assert_int_equal(w.n, 16 * 1024 + 5);
	assert_true(w.n <= TLS_HELLO_WIRE_MAX(TLS_HELLO_CAP_DEFAULT));
}

static void test_tls_hello_over_the_cap_is_refused_from_its_length(void **state)
{
	struct tls_hello h;
	static struct bytes w;

	synth(&w, "svc1.example.com", 17 * 1024);
	assert_int_equal(w.n, 17 * 1024 + 10); /* two records */
	assert_int_equal(feed(&h, &w), TLS_HELLO_TOO_BIG);
	/* Known from the 4-byte handshake header, before the body. */
	assert_int_equal(h.wire, 9);
	synth(&w, "svc1.example.com", 16 * 1024 + 1);
	assert_int_equal(feed(&h, &w), TLS_HELLO_TOO_BIG);
	/* The cap is configurable. */
	synth(&w, "svc1.example.com", 1800);
	assert_int_equal(feed_steps(&h, w.b, w.n, 0, 1799), TLS_HELLO_TOO_BIG);
	assert_int_equal(feed_steps(&h, w.b, w.n, 0, 1800), TLS_HELLO_NAME);
	synth(&w, "svc1.example.com", 17 * 1024);
	assert_int_equal(feed_steps(&h, w.b, w.n, 0, 32 * 1024), TLS_HELLO_NAME);
}

static void test_tls_hello_rejects_a_cap_out_of_bounds(void **state)
{
	struct tls_hello h;

	assert_int_equal(tls_hello_init(&h, TLS_HELLO_CAP_MIN - 1), -EINVAL);
	assert_int_equal(tls_hello_init(&h, TLS_HELLO_CAP_MAX + 1), -EINVAL);
	assert_int_equal(tls_hello_init(&h, 0), 0);
	assert_int_equal(h.cap, TLS_HELLO_CAP_DEFAULT);
}

static enum tls_hello_result feed_str(struct tls_hello *h, const char *s, size_t n)
{
	assert_int_equal(tls_hello_init(h, 0), 0);
	return tls_hello_feed(h, (const uint8_t *)s, n);
}

static void test_tls_hello_http_and_sslv2_are_not_tls(void **state)
{
	struct tls_hello h;
	/* An SSLv2-framed ClientHello (what SSLv23 clients once sent). */
	const char v2[] = "\x80\x2e\x01\x00\x02\x00\x15\x00\x00\x00\x10";

	assert_int_equal(feed_str(&h, "GET / HTTP/1.1\r\n", 16), TLS_HELLO_NOT_TLS);
	assert_int_equal(h.wire, 1); /* known from the first byte */
	assert_int_equal(feed_str(&h, v2, sizeof(v2) - 1), TLS_HELLO_NOT_TLS);
	/* Alert and application data records. */
	assert_int_equal(feed_str(&h, "\x15\x03\x01\x00\x02", 5), TLS_HELLO_NOT_TLS);
	assert_int_equal(feed_str(&h, "\x17\x03\x03\x00\x10", 5), TLS_HELLO_NOT_TLS);
	/* SSL 3.0 and unknown record versions. */
	assert_int_equal(feed_str(&h, "\x16\x03\x00\x00\x10", 5), TLS_HELLO_NOT_TLS);
	assert_int_equal(feed_str(&h, "\x16\x03\x05\x00\x10", 5), TLS_HELLO_NOT_TLS);
	assert_int_equal(feed_str(&h, "\x16\x02\x01\x00\x10", 5), TLS_HELLO_NOT_TLS);
	/* All four accepted versions read on. */
	for (char v = 1; v <= 4; v++) {
		char r[5] = {0x16, 3, v, 0, 16};

		assert_int_equal(feed_str(&h, r, 5), TLS_HELLO_MORE);
	}
}

static void test_tls_hello_another_handshake_message_is_not_a_client_hello(void **state)
{
	struct tls_hello h;

	/* A ServerHello (2), and a Certificate (11). */
	assert_int_equal(feed_str(&h, "\x16\x03\x03\x00\x04\x02\x00\x00\x00", 9),
			 TLS_HELLO_NOT_CLIENT_HELLO);
	assert_int_equal(feed_str(&h, "\x16\x03\x03\x00\x04\x0b\x00\x00\x00", 9),
			 TLS_HELLO_NOT_CLIENT_HELLO);
}

/* A hello built from the real one with one change, in one record. */
static void edit_real(struct bytes *w, size_t at, const uint8_t *with, size_t n)
{
	load(w, "client_hello_s_client.bin");
	memcpy(w->b + at, with, n);
}

static void test_tls_hello_no_server_name_is_no_sni(void **state)
{
	struct tls_hello h;
	static struct bytes w;
	struct bytes real;

	synth(&w, NULL, 600);
	assert_int_equal(feed(&h, &w), TLS_HELLO_NO_SNI);
	/* The real hello with its server_name renamed to an unknown type
	 * (0x00 0x00 at offset 0x90 -> 0xaa 0xaa). */
	load(&real, "client_hello_s_client.bin");
	assert_int_equal(real.b[0x90], 0);
	assert_int_equal(real.b[0x91], 0);
	assert_int_equal(real.b[0x99], 'x');
	edit_real(&w, 0x90, (const uint8_t *)"\xaa\xaa", 2);
	assert_int_equal(feed(&h, &w), TLS_HELLO_NO_SNI);
	/* A server_name holding only a name of another type (1). */
	edit_real(&w, 0x96, (const uint8_t *)"\x01", 1);
	assert_int_equal(feed(&h, &w), TLS_HELLO_NO_SNI);
}

static void test_tls_hello_a_hello_without_extensions_is_no_sni(void **state)
{
	struct tls_hello h;
	uint8_t m[5 + 4 + 2 + 32 + 1 + 4 + 2];
	size_t n = 0;

	memcpy(m, "\x16\x03\x01\x00\x2d\x01\x00\x00\x29\x03\x03", 11);
	n = 11;
	memset(m + n, 7, 32);
	n += 32;
	memcpy(m + n, "\x00\x00\x02\x00\x2f\x01\x00", 7);
	n += 7;
	assert_int_equal(n, sizeof(m));
	assert_int_equal(tls_hello_init(&h, 0), 0);
	assert_int_equal(tls_hello_feed(&h, m, n), TLS_HELLO_NO_SNI);
}

static void test_tls_hello_bad_names_are_refused(void **state)
{
	struct tls_hello h;
	static struct bytes w;
	char long_name[TLS_NAME_MAX + 2];

	synth(&w, "1.2.3.4", 600);
	assert_int_equal(feed(&h, &w), TLS_HELLO_BAD_NAME);
	synth(&w, "x.example.com.", 600);
	assert_int_equal(feed(&h, &w), TLS_HELLO_BAD_NAME);
	synth(&w, "*.example.com", 600);
	assert_int_equal(feed(&h, &w), TLS_HELLO_BAD_NAME);
	synth(&w, "a\tb.example.com", 600);
	assert_int_equal(feed(&h, &w), TLS_HELLO_BAD_NAME);
	/* 254 bytes: over the DNS limit. */
	memset(long_name, 'a', sizeof(long_name));
	for (size_t i = 50; i < sizeof(long_name) - 1; i += 50)
		long_name[i] = '.';
	long_name[TLS_NAME_MAX + 1] = '\0';
	synth(&w, long_name, 600);
	assert_int_equal(feed(&h, &w), TLS_HELLO_BAD_NAME);
	long_name[TLS_NAME_MAX] = '\0';
	synth(&w, long_name, 600);
	assert_int_equal(feed(&h, &w), TLS_HELLO_NAME);
	assert_int_equal(strlen(h.name), TLS_NAME_MAX);
	/* A NUL inside the real hello's name "x". */
	edit_real(&w, 0x99, (const uint8_t *)"\0", 1);
	assert_int_equal(feed(&h, &w), TLS_HELLO_BAD_NAME);
}

static void test_tls_hello_name_rule(void **state)
{
	const char *good[] = {"x",	   "localhost",	  "a.b",     "xn--bcher-kva.example",
			      "a-b.c-d.e", "EXAMPLE.com", "1.2.3.x", "123.example.com",
			      "a1"};
	const char *bad[] = {"",      ".",    "a..b",  ".a",	  "a.",
			     "-a.b",  "a-.b", "a_b.c", "1.2.3.4", "a.123",
			     "*.a.b", "a b",  "a:b",   "[::1]",	  "\xc3\xa9.fr"};
	char label[70];

	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		assert_true(addr_host_name_valid(good[i], strlen(good[i])));
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		if (addr_host_name_valid(bad[i], strlen(bad[i])))
			fail_msg("accepted \"%s\"", bad[i]);
	memset(label, 'a', sizeof(label));
	assert_true(addr_host_name_valid(label, 63));
	assert_false(addr_host_name_valid(label, 64));
}

static void test_tls_hello_malformed_framing_and_lengths(void **state)
{
	struct tls_hello h;
	static struct bytes w;
	struct bytes real;
	const size_t sizes[] = {100};

	/* An empty record and one over 2^14. */
	assert_int_equal(feed_str(&h, "\x16\x03\x01\x00\x00", 5), TLS_HELLO_MALFORMED);
	assert_int_equal(feed_str(&h, "\x16\x03\x01\x40\x01", 5), TLS_HELLO_MALFORMED);
	/* A handshake message too short for its fixed fields. */
	assert_int_equal(feed_str(&h, "\x16\x03\x01\x00\x05\x01\x00\x00\x01\x03", 10),
			 TLS_HELLO_MALFORMED);
	/* An alert record between two records of the hello. */
	load(&real, "client_hello_s_client.bin");
	reframe(&w, &real, sizes, 1);
	w.b[105] = 21;
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	/* ... or a bad version there. */
	reframe(&w, &real, sizes, 1);
	w.b[107] = 0;
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	/* legacy_version not 3.x. */
	edit_real(&w, 9, (const uint8_t *)"\x02", 1);
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	/* A session id over 32 bytes (offset 43 holds 32). */
	assert_int_equal(real.b[43], 32);
	edit_real(&w, 43, (const uint8_t *)"\x21", 1);
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	/* An odd cipher suite length (offset 76..77). */
	edit_real(&w, 77, (const uint8_t *)"\x3d", 1);
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	/* Extensions length one short and one long (offset 0x8e..0x8f). */
	assert_int_equal(real.b[0x8f], 0xa3);
	edit_real(&w, 0x8f, (const uint8_t *)"\xa2", 1);
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	edit_real(&w, 0x8f, (const uint8_t *)"\xa4", 1);
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	/* server_name list length that disagrees with the extension's. */
	edit_real(&w, 0x95, (const uint8_t *)"\x05", 1);
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	/* A name length past the list. */
	edit_real(&w, 0x98, (const uint8_t *)"\x02", 1);
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	/* An extension length past the block (ec_point_formats at 0x9a). */
	edit_real(&w, 0x9c, (const uint8_t *)"\xff", 1);
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	/* Two server_name extensions: ec_point_formats renamed. */
	edit_real(&w, 0x9a, (const uint8_t *)"\x00\x00", 2);
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
}

/* A one-record ClientHello with the given extensions block. */
static void with_exts(struct bytes *w, const char *exts, size_t n)
{
	size_t hs = 4 + 2 + 32 + 1 + 4 + 2 + 2 + n;

	memcpy(w->b, "\x16\x03\x01", 3);
	w->b[3] = (uint8_t)(hs >> 8), w->b[4] = (uint8_t)hs;
	w->b[5] = 1, w->b[6] = 0, w->b[7] = (uint8_t)((hs - 4) >> 8), w->b[8] = (uint8_t)(hs - 4);
	w->b[9] = 3, w->b[10] = 3;
	memset(w->b + 11, 7, 32);
	memcpy(w->b + 43, "\x00\x00\x02\x13\x01\x01\x00", 7);
	w->b[50] = (uint8_t)(n >> 8), w->b[51] = (uint8_t)n;
	memcpy(w->b + 52, exts, n);
	w->n = 52 + n;
}

#define EXTS(w, s) with_exts(w, s, sizeof(s) - 1)

static void test_tls_hello_two_host_names_are_malformed(void **state)
{
	struct tls_hello h;
	struct bytes w;

	EXTS(&w, "\x00\x00\x00\x0a\x00\x08\x00\x00\x01"
		 "a\x00\x00\x01"
		 "b");
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	/* A host_name and a name of another type: the host_name counts. */
	EXTS(&w, "\x00\x00\x00\x0a\x00\x08\x00\x00\x01"
		 "a\x07\x00\x01"
		 "b");
	assert_int_equal(feed(&h, &w), TLS_HELLO_NAME);
	assert_string_equal(h.name, "a");
	EXTS(&w, "\x00\x00\x00\x06\x00\x04\x00\x00\x01"
		 "A");
	assert_int_equal(feed(&h, &w), TLS_HELLO_NAME);
	assert_string_equal(h.name, "a");
	/* An empty name, an empty list, an empty extension. */
	EXTS(&w, "\x00\x00\x00\x05\x00\x03\x00\x00\x00");
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	EXTS(&w, "\x00\x00\x00\x02\x00\x00");
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	EXTS(&w, "\x00\x00\x00\x00");
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
	/* An empty extensions block: no SNI. A block cut mid-header. */
	with_exts(&w, "", 0);
	assert_int_equal(feed(&h, &w), TLS_HELLO_NO_SNI);
	EXTS(&w, "\x00\x15\x00");
	assert_int_equal(feed(&h, &w), TLS_HELLO_MALFORMED);
}

static void test_tls_hello_too_many_records_is_too_big(void **state)
{
	struct tls_hello h;
	struct bytes real;
	static struct bytes w;
	size_t sizes[TLS_HELLO_RECORDS_MAX];

	load(&real, "client_hello_s_client.bin");
	for (size_t i = 0; i < TLS_HELLO_RECORDS_MAX; i++)
		sizes[i] = 2;
	/* 64 records: the last holds the rest. */
	reframe(&w, &real, sizes, TLS_HELLO_RECORDS_MAX - 1);
	assert_int_equal(feed(&h, &w), TLS_HELLO_NAME);
	assert_int_equal(h.records, TLS_HELLO_RECORDS_MAX);
	reframe(&w, &real, sizes, TLS_HELLO_RECORDS_MAX);
	assert_int_equal(feed(&h, &w), TLS_HELLO_TOO_BIG);
}

static void test_tls_hello_result_names(void **state)
{
	assert_string_equal(tls_hello_result_name(TLS_HELLO_NO_SNI), "no_sni");
	assert_string_equal(tls_hello_result_name(TLS_HELLO_TOO_BIG), "too_big");
	assert_string_equal(tls_hello_result_name(TLS_HELLO_RESULTS), "unknown");
	for (int r = 0; r < TLS_HELLO_RESULTS; r++)
		assert_non_null(tls_hello_result_name((enum tls_hello_result)r));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tls_hello_reads_the_name_of_a_real_s_client_hello),
	    cmocka_unit_test(test_tls_hello_real_hello_in_three_records_fed_one_to_seven_bytes),
	    cmocka_unit_test(test_tls_hello_records_split_inside_every_field),
	    cmocka_unit_test(test_tls_hello_every_truncation_of_a_real_hello_needs_more),
	    cmocka_unit_test(test_tls_hello_stops_at_the_end_of_the_hello),
	    cmocka_unit_test(test_tls_hello_synthetic_hellos_up_to_the_cap_pass),
	    cmocka_unit_test(test_tls_hello_over_the_cap_is_refused_from_its_length),
	    cmocka_unit_test(test_tls_hello_rejects_a_cap_out_of_bounds),
	    cmocka_unit_test(test_tls_hello_http_and_sslv2_are_not_tls),
	    cmocka_unit_test(test_tls_hello_another_handshake_message_is_not_a_client_hello),
	    cmocka_unit_test(test_tls_hello_no_server_name_is_no_sni),
	    cmocka_unit_test(test_tls_hello_a_hello_without_extensions_is_no_sni),
	    cmocka_unit_test(test_tls_hello_bad_names_are_refused),
	    cmocka_unit_test(test_tls_hello_name_rule),
	    cmocka_unit_test(test_tls_hello_malformed_framing_and_lengths),
	    cmocka_unit_test(test_tls_hello_two_host_names_are_malformed),
	    cmocka_unit_test(test_tls_hello_too_many_records_is_too_big),
	    cmocka_unit_test(test_tls_hello_result_names),
	};

	if (argc > 1)
		data_dir = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
