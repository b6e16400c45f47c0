/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for the connectionless packet parsers in q3proto.c.
 * Input: one datagram, as received. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "q3proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every value read fits its buffer and is a C string of the length returned. */
static void check_value(const char *info, size_t n, const char *key, size_t outlen)
{
	char out[256];
	int r;

	memset(out, 0x5a, sizeof(out));
	r = q3_info_value(info, n, key, out, outlen);
	if (r < -1 || (r >= 0 && ((size_t)r >= outlen || strlen(out) != (size_t)r)))
		abort();
	if (outlen < sizeof(out) && out[outlen] != 0x5a)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const keys[] = {"challenge", "hostname", "sv_hostname",
					   "protocol",	"name",	    ""};
	static const size_t outlens[] = {1, 2, 8, 64, 255};
	char word[Q3_WORD_MAX + 8];
	enum q3_cmd c = q3_classify(data, size);
	size_t w;

	if ((unsigned)c >= Q3_CMD_COUNT || !q3_cmd_name(c))
		abort();
	if (q3_is_connectionless(data, size) != (c != Q3_GAME))
		abort();

	memset(word, 0x5a, sizeof(word));
	w = q3_word(data, size, word);
	if (w >= Q3_WORD_MAX || strlen(word) != w || word[Q3_WORD_MAX] != 0x5a)
		abort();

	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		for (size_t o = 0; o < sizeof(outlens) / sizeof(outlens[0]); o++)
			check_value((const char *)data, size, keys[k], outlens[o]);

	/* A well-formed reply to a master's getinfo matches the challenge it
	 * carries. */
	if (size > 17 && memcmp(data, "\xff\xff\xff\xffinfoResponse\n\\", 18) == 0) {
		char v[64];

		if (q3_info_value((const char *)data + 17, size - 17, "challenge", v, sizeof(v)) >=
			0 &&
		    !q3_info_response_matches(data, size, v))
			abort();
	}
	(void)q3_info_response_matches(data, size, "");
	(void)q3_info_response_matches(data, size, "xyz");

	/* The input as the text of a packet we build. */
	if (size < 2048) {
		char *text = malloc(size + 1);
		uint8_t pkt[2048 + 4];
		int n;

		if (!text)
			abort();
		memcpy(text, data, size);
		text[size] = '\0';
		n = q3_build(pkt, sizeof(pkt), text);
		if (n != (int)strlen(text) + 4 || !q3_is_connectionless(pkt, (size_t)n))
			abort();
		free(text);
	}
	return 0;
}
