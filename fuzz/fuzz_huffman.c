/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for huffman.c. Input: a datagram, decoded as a connect
 * packet and as a bare stream; then the same bytes as text to code, which
 * must decode back to themselves, bare and inside a connect packet. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "huffman.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FF	"\xff\xff\xff\xff"
#define CONNECT FF "connect "

/* Decoding untrusted bytes: bounded, terminated, nothing written past out. */
static void decode_untrusted(const uint8_t *data, size_t size)
{
	static char info[HUFFMAN_INFO_MAX + 1 + 16];
	static uint8_t raw[4096 + 16];
	int n;

	memset(info, 0x5a, sizeof(info));
	n = huffman_decode_connect(data, size, info, HUFFMAN_INFO_MAX + 1);
	if (n < -1 || n > HUFFMAN_INFO_MAX || (n >= 0 && strlen(info) != (size_t)n))
		abort();
	for (size_t i = HUFFMAN_INFO_MAX + 1; i < sizeof(info); i++)
		if (info[i] != 0x5a)
			abort();

	memset(raw, 0x5a, sizeof(raw));
	n = huffman_decode(data, size, raw, 4096);
	if (n < -1 || n > 4096)
		abort();
	for (size_t i = 4096; i < sizeof(raw); i++)
		if (raw[i] != 0x5a)
			abort();
}

/* Coding: always room for 64 bits a byte, far more than any code needs. */
static void round_trip(const uint8_t *data, size_t size)
{
	uint8_t *coded, *back;
	size_t cap = 3 + 8 * size;
	int c, d;

	if (size > 65535)
		return;
	coded = malloc(cap);
	back = malloc(size ? size : 1);
	if (!coded || !back)
		abort();
	c = huffman_encode((const char *)data, size, coded, cap);
	if (c < 3)
		abort();
	d = huffman_decode(coded, (size_t)c, back, size);
	if (d != (int)size || memcmp(back, data, size) != 0)
		abort();
	free(coded);
	free(back);
}

/* Text the server takes whole as a quoted argument goes through a connect
 * packet unchanged. */
static void connect_round_trip(const uint8_t *data, size_t size)
{
	static uint8_t pkt[12 + 3 + 8 * (HUFFMAN_INFO_MAX + 2)];
	static char quoted[HUFFMAN_INFO_MAX + 2], info[HUFFMAN_INFO_MAX + 1];
	int c, n;

	if (size > HUFFMAN_INFO_MAX || memchr(data, '"', size) || memchr(data, '\0', size) ||
	    memchr(data, '\n', size))
		return;
	quoted[0] = '"';
	memcpy(quoted + 1, data, size);
	quoted[size + 1] = '"';
	memcpy(pkt, CONNECT, 12);
	c = huffman_encode(quoted, size + 2, pkt + 12, sizeof(pkt) - 12);
	if (c < 3)
		abort();
	n = huffman_decode_connect(pkt, 12 + (size_t)c, info, sizeof(info));
	if (n != (int)size || memcmp(info, data, size) != 0 || info[size] != '\0')
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	decode_untrusted(data, size);
	round_trip(data, size);
	connect_round_trip(data, size);
	return 0;
}
