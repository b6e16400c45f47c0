/* SPDX-License-Identifier: ISC */
#include "hello.h"

#include <string.h>

static uint8_t *put16(uint8_t *p, size_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return p + 2;
}

static uint8_t *ext(uint8_t *p, unsigned kind, const void *body, size_t len)
{
	p = put16(p, kind);
	p = put16(p, len);
	if (len)
		memcpy(p, body, len);
	return p + len;
}

size_t hello_build(uint8_t *out, size_t room, const char *name, size_t size, size_t record)
{
	/* The handshake message, then cut into records in place from the back. */
	static const uint8_t suites[] = {0x00, 0x06, 0x13, 0x01, 0x13, 0x02, 0x13, 0x03};
	static const uint8_t versions[] = {0x04, 0x03, 0x04, 0x03, 0x03};
	static const uint8_t groups[] = {0x00, 0x04, 0x00, 0x1d, 0x00, 0x17};
	uint8_t hs[HELLO_MAX], *p = hs + 4, *xlen, sni[HELLO_NAME_MAX + 5];
	size_t nlen = strlen(name), used, pad, recs, wire;

	if (nlen == 0 || nlen > HELLO_NAME_MAX || size < HELLO_MIN + nlen || size > HELLO_MAX ||
	    record == 0 || record > 16384)
		return 0;
	recs = (size + record - 1) / record;
	wire = size + 5 * recs;
	if (wire > room)
		return 0;
	*p++ = 0x03; /* legacy_version TLS 1.2 */
	*p++ = 0x03;
	for (unsigned i = 0; i < 32; i++)
		*p++ = (uint8_t)(i * 7 + 1); /* random */
	*p++ = 32;			     /* legacy_session_id */
	memset(p, 0xa5, 32);
	p += 32;
	memcpy(p, suites, sizeof(suites));
	p += sizeof(suites);
	*p++ = 1; /* compression: null */
	*p++ = 0;
	xlen = p; /* extensions length, below */
	p += 2;
	put16(sni, nlen + 3);
	sni[2] = 0; /* host_name */
	put16(sni + 3, nlen);
	memcpy(sni + 5, name, nlen);
	p = ext(p, 0x0000, sni, nlen + 5);
	p = ext(p, 0x002b, versions, sizeof(versions));
	p = ext(p, 0x000a, groups, sizeof(groups));
	used = (size_t)(p - hs);
	if (used + 4 > size)
		return 0;
	pad = size - used - 4;
	p = put16(p, 0x0015);
	p = put16(p, pad);
	memset(p, 0, pad);
	p += pad;
	put16(xlen, (size_t)(p - xlen) - 2);
	hs[0] = 0x01; /* client_hello */
	hs[1] = (uint8_t)((size - 4) >> 16);
	hs[2] = (uint8_t)((size - 4) >> 8);
	hs[3] = (uint8_t)(size - 4);
	for (size_t off = 0, o = 0; off < size; off += record) {
		size_t k = size - off < record ? size - off : record;

		out[o] = 0x16;
		out[o + 1] = 0x03;
		out[o + 2] = 0x01;
		put16(out + o + 3, k);
		memcpy(out + o + 5, hs + off, k);
		o += 5 + k;
	}
	return wire;
}

size_t hello_end_feed(struct hello_end *e, const uint8_t *p, size_t n)
{
	size_t used = 0;

	while (used < n && !e->done && !e->bad) {
		if (e->rec_left == 0) {
			e->rec_hdr[e->rec_got++] = p[used++];
			if (e->rec_got < 5)
				continue;
			e->rec_got = 0;
			e->rec_left = (size_t)e->rec_hdr[3] << 8 | e->rec_hdr[4];
			if (e->rec_hdr[0] != 0x16 || e->rec_hdr[1] != 0x03 || e->rec_left == 0 ||
			    e->rec_left > 16384 + 2048)
				e->bad = true;
			continue;
		}
		if (e->hs_got < 4) {
			e->hs_hdr[e->hs_got++] = p[used++];
			e->rec_left--;
			if (e->hs_got == 4) {
				e->hs_left = (size_t)e->hs_hdr[1] << 16 |
					     (size_t)e->hs_hdr[2] << 8 | e->hs_hdr[3];
				if (e->hs_hdr[0] != 0x01)
					e->bad = true;
				else if (e->hs_left == 0)
					e->done = true;
			}
			continue;
		}
		size_t k = n - used;

		if (k > e->rec_left)
			k = e->rec_left;
		if (k > e->hs_left)
			k = e->hs_left;
		used += k;
		e->rec_left -= k;
		e->hs_left -= k;
		if (e->hs_left == 0)
			e->done = true;
	}
	return used;
}
