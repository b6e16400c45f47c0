/* SPDX-License-Identifier: ISC */
/* Connectionless packets of the Quake 3 family: "\xff\xff\xff\xff" then a
 * command word ended by whitespace, a backslash or the end of the packet. */
#include "q3proto.h"

#include <string.h>
#include <strings.h>

static const char *const names[Q3_CMD_COUNT] = {
	[Q3_GAME] = "game",
	[Q3_UNKNOWN] = "unknown",
	[Q3_GETCHALLENGE] = "getchallenge",
	[Q3_CHALLENGERESPONSE] = "challengeresponse",
	[Q3_GETINFO] = "getinfo",
	[Q3_INFORESPONSE] = "inforesponse",
	[Q3_GETSTATUS] = "getstatus",
	[Q3_STATUSRESPONSE] = "statusresponse",
	[Q3_CONNECT] = "connect",
	[Q3_CONNECTRESPONSE] = "connectresponse",
	[Q3_HEARTBEAT] = "heartbeat",
	[Q3_RCON] = "rcon",
	[Q3_PRINT] = "print",
	[Q3_DISCONNECT] = "disconnect",
	[Q3_GETSERVERS] = "getservers",
	[Q3_GETSERVERSRESPONSE] = "getserversresponse",
};

bool q3_is_connectionless(const uint8_t *p, size_t n)
{
	return n >= 4 && p[0] == 0xff && p[1] == 0xff && p[2] == 0xff && p[3] == 0xff;
}

static bool word_end(uint8_t c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\\' || c == '\0' ||
	       c == '"';
}

/* Length of the command word after the prefix. */
static size_t word_len(const uint8_t *p, size_t n)
{
	size_t i = 4;

	while (i < n && !word_end(p[i]))
		i++;
	return i - 4;
}

enum q3_cmd q3_classify(const uint8_t *p, size_t n)
{
	size_t len;

	if (!q3_is_connectionless(p, n))
		return Q3_GAME;
	len = word_len(p, n);
	for (int c = Q3_GETCHALLENGE; c < Q3_CMD_COUNT; c++)
		if (strlen(names[c]) == len &&
		    strncasecmp((const char *)p + 4, names[c], len) == 0)
			return (enum q3_cmd)c;
	return Q3_UNKNOWN;
}

const char *q3_cmd_name(enum q3_cmd c)
{
	return (unsigned)c < Q3_CMD_COUNT ? names[c] : "unknown";
}

size_t q3_word(const uint8_t *p, size_t n, char out[Q3_WORD_MAX])
{
	size_t len, o = 0;

	out[0] = '\0';
	if (!q3_is_connectionless(p, n))
		return 0;
	len = word_len(p, n);
	for (size_t i = 0; i < len && o < Q3_WORD_MAX - 1; i++)
		if (p[4 + i] > 0x20 && p[4 + i] < 0x7f)
			out[o++] = (char)p[4 + i];
	out[o] = '\0';
	return o;
}

int q3_build(uint8_t *out, size_t outlen, const char *text)
{
	size_t len = strlen(text);

	if (outlen < 4 || len > outlen - 4)
		return -1;
	memset(out, 0xff, 4);
	memcpy(out + 4, text, len);
	return (int)(len + 4);
}

int q3_info_value(const char *info, size_t n, const char *key, char *out, size_t outlen)
{
	size_t klen = strlen(key), i = 0;

	/* Pairs are "\key\value"; a leading backslash is optional. */
	if (i < n && info[i] == '\\')
		i++;
	while (i < n) {
		size_t ks = i, vs, ve;

		while (i < n && info[i] != '\\')
			i++;
		if (i >= n)
			return -1;
		vs = ++i;
		while (i < n && info[i] != '\\' && info[i] != '\n' && info[i] != '\0')
			i++;
		ve = i;
		if (vs - 1 - ks == klen && strncasecmp(info + ks, key, klen) == 0) {
			if (ve - vs >= outlen)
				return -1;
			memcpy(out, info + vs, ve - vs);
			out[ve - vs] = '\0';
			return (int)(ve - vs);
		}
		if (i >= n || info[i] != '\\')
			return -1;
		i++;
	}
	return -1;
}

bool q3_info_response_matches(const uint8_t *p, size_t n, const char *challenge)
{
	char v[64];
	size_t off;

	if (q3_classify(p, n) != Q3_INFORESPONSE)
		return false;
	off = 4 + word_len(p, n);
	/* The info string starts after the newline. */
	while (off < n && (p[off] == '\n' || p[off] == ' '))
		off++;
	if (q3_info_value((const char *)p + off, n - off, "challenge", v, sizeof(v)) < 0)
		return false;
	return strcmp(v, challenge) == 0;
}
