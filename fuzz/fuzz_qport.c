/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for qport.c, differential. Input: a userinfo text; then
 * the same bytes as the decoded stream of a connect. Whenever the relay
 * reads a qport, a plain model of the engine (Info_ValueForKey, then atoi)
 * must read the same one: a connect the relay read wrong could take another
 * player's slot. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "qport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ioquake3's Info_ValueForKey on a NUL-terminated string, then atoi. */
static long engine_qport(const char *s)
{
	char key[2048], value[2048];
	char *o;

	if (*s == '\\')
		s++;
	for (;;) {
		o = key;
		while (*s != '\\') {
			if (!*s)
				return atoi("");
			*o++ = *s++;
		}
		*o = '\0';
		s++;
		o = value;
		while (*s != '\\' && *s)
			*o++ = *s++;
		*o = '\0';
		if (strcasecmp(key, "qport") == 0)
			return atoi(value);
		if (!*s)
			return atoi("");
		s++;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[1100];
	size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1, start = 0;
	int q, len;

	if (memchr(data, '\0', n) == NULL) {
		memcpy(text, data, n);
		text[n] = '\0';
		q = qport_of_userinfo(text, n);
		if (q < -1 || q > 65535 || (q >= 0 && engine_qport(text) != q))
			abort();
	}
	/* As the decoded stream: the userinfo is what lies inside the quotes,
	 * within the line the engine reads. */
	len = qport_connect_userinfo(data, size, &start);
	if (len >= 0) {
		if (start != 1 || data[0] != '"' || start + (size_t)len >= size ||
		    data[start + (size_t)len] != '"' ||
		    start + (size_t)len >= QPORT_CONNECT_TEXT_MAX ||
		    memchr(data + start, '"', (size_t)len) ||
		    memchr(data + start, '\n', (size_t)len) ||
		    memchr(data + start, '\0', (size_t)len))
			abort();
		memcpy(text, data + start, (size_t)len);
		text[len] = '\0';
		q = qport_of_userinfo(text, (size_t)len);
		if (q >= 0 && engine_qport(text) != q)
			abort();
	}
	return 0;
}
