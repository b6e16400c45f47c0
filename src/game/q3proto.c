/* SPDX-License-Identifier: ISC */
/* Connectionless packets of the Quake 3 family: "\xff\xff\xff\xff" then a
 * line whose first token, read the way the engines read it, is the command. */
#include "q3proto.h"

#include <string.h>
#include <strings.h>

#include "shape.h"

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

/*
 * How the engines read a command (SV_ConnectionlessPacket on the server,
 * CL_ConnectionlessPacket on the client, both the same in ioquake3, ET:
 * Legacy, RTCW and ET 2.60):
 *
 * 1. MSG_ReadStringLine takes the bytes after the prefix up to the first NUL,
 *    '\n' or the end of the packet, at most 1023 of them (MAX_STRING_CHARS).
 *    '%' becomes '.'. ioquake3 turns bytes > 127 into '.'; RTCW's GPL source
 *    keeps them, and so does ET: Legacy (before 2.77 only with the legacy
 *    mod, since then always).
 * 2. Cmd_TokenizeString takes the first token: it skips bytes <= ' ' (a
 *    signed char, so on x86 every byte > 127 too); "//" ends the line; a
 *    block comment (slash star ... star slash) is skipped, its end looked
 *    for from the opening slash on, so slash star slash is a whole comment;
 *    a '"' starts a token that runs to the next '"' or the end of the line;
 *    any other token ends at a byte <= ' ', at '"', "//" or slash star.
 *    Inside a word ioquake3 sees no byte > 127 (they are '.'); id's
 *    tokenizer (RTCW, ET 2.60, ET: Legacy before 2.77) ends the word at one
 *    (signed char <= ' '); ET: Legacy 2.77 on reads UTF-8 there and keeps
 *    such bytes in the word.
 * 3. The token is compared without regard to ASCII case. The client takes
 *    any token that starts with "getserversResponse" (case-sensitively).
 * 4. Before all this the server Huffman-decodes the packet from byte 12 on
 *    when bytes 4..10 are exactly "connect": the line is then "connect",
 *    byte 11 as sent, and the decoded userinfo.
 *
 * Where the engines differ the relay takes the union: a packet is command X
 * when any of them would run X for it. So a byte > 127 is whitespace before
 * and inside a word here: "\x80getinfo" is getinfo for ET: Legacy, ".getinfo"
 * for ioquake3; "getinfo\x80" is getinfo for RTCW and for ET: Legacy 2.76
 * with the legacy mod. Any engine that names a command names the same one
 * (the tokens differ only where one of them holds a byte > 127), so the
 * union is well defined.
 * The result never names a command the game server runs (getchallenge,
 * getinfo, getstatus, connect, rcon, disconnect) that no engine would run,
 * except "connect/" then a coded stream too short to say (the server then
 * reads stale buffer bytes): that is a connect.
 */

/* MAX_STRING_CHARS - 1: the longest line MSG_ReadStringLine returns. */
#define Q3_LINE_MAX SHAPE_Q3_LINE_MAX

/* The byte classes of the line reader and the tokenizer, one table lookup
 * a byte, are shape.h's (shape_q3_cls, SHAPE_C_*): the XDP program reads
 * them too. */
#define cls shape_q3_cls

/* A comment ("//" or slash star) starts at p[i], within p[..end). */
static bool tok_comment(const uint8_t *p, size_t i, size_t end)
{
	return i + 1 < end && (p[i + 1] == '/' || p[i + 1] == '*');
}

/* The first token of the line after the prefix as Cmd_TokenizeString reads
 * it, as an offset and length into p. False when the line has none. The
 * line ends at NUL, '\n', the packet's end or Q3_LINE_MAX bytes. */
static bool first_token(const uint8_t *p, size_t n, size_t *off, size_t *len)
{
	size_t end = n - 4 > Q3_LINE_MAX ? 4 + Q3_LINE_MAX : n, i = 4, s;

	for (;;) {
		while (i < end && cls[p[i]] == SHAPE_C_SPACE)
			i++;
		if (i >= end || cls[p[i]] == SHAPE_C_END)
			return false;
		if (cls[p[i]] != SHAPE_C_SLASH || !tok_comment(p, i, end))
			break;
		if (p[i + 1] == '/')
			return false;
		/* The end is looked for from the opening slash on. */
		while (i + 1 < end && cls[p[i]] != SHAPE_C_END && !(p[i] == '*' && p[i + 1] == '/'))
			i++;
		if (i + 1 >= end || cls[p[i]] == SHAPE_C_END)
			return false;
		i += 2;
	}
	if (p[i] == '"') {
		for (s = ++i; i < end && p[i] != '"' && cls[p[i]] != SHAPE_C_END; i++)
			;
	} else {
		for (s = i; i < end && (cls[p[i]] == SHAPE_C_WORD ||
					(cls[p[i]] == SHAPE_C_SLASH && !tok_comment(p, i, end)));
		     i++)
			;
	}
	*off = s;
	*len = i - s;
	return true;
}

/* The command named by the token p[off..off+len). */
static enum q3_cmd token_cmd(const uint8_t *p, size_t off, size_t len)
{
	static const char gsr[] = "getserversResponse";

	static const uint8_t name_len[Q3_CMD_COUNT] = {
	    [Q3_GETCHALLENGE] = 12, [Q3_CHALLENGERESPONSE] = 17,
	    [Q3_GETINFO] = 7,	    [Q3_INFORESPONSE] = 12,
	    [Q3_GETSTATUS] = 9,	    [Q3_STATUSRESPONSE] = 14,
	    [Q3_CONNECT] = 7,	    [Q3_CONNECTRESPONSE] = 15,
	    [Q3_HEARTBEAT] = 9,	    [Q3_RCON] = 4,
	    [Q3_PRINT] = 5,	    [Q3_DISCONNECT] = 10,
	    [Q3_GETSERVERS] = 10,   [Q3_GETSERVERSRESPONSE] = 18,
	};

	for (int c = Q3_GETCHALLENGE; c < Q3_CMD_COUNT; c++)
		if (name_len[c] == len && strncasecmp((const char *)p + off, names[c], len) == 0)
			return (enum q3_cmd)c;
	/* The client's strncmp: the binary list may follow without a break. */
	if (len > sizeof(gsr) - 1 && memcmp(p + off, gsr, sizeof(gsr) - 1) == 0)
		return Q3_GETSERVERSRESPONSE;
	return Q3_UNKNOWN;
}

/* Bytes 4..10 are "connect": the server Huffman-decodes the rest. */
static bool coded_connect(const uint8_t *p, size_t n)
{
	return n >= 11 && memcmp(p + 4, "connect", 7) == 0;
}

/* The server's line is "connect", p[11], then the decoded stream: it names
 * connect when p[11] ends the word. A '/' does when the first decoded byte
 * is '/' or '*'. That byte is the first symbol of an adaptive Huffman stream
 * whose tree is still empty: 8 raw bits from byte 14 on (after the 2-byte
 * length), least significant first, so byte 14 bit-reversed. */
static bool coded_connect_is_connect(const uint8_t *p, size_t n)
{
	uint8_t c, r = 0;

	if (n == 11 || cls[p[11]] == SHAPE_C_SPACE || cls[p[11]] == SHAPE_C_END || p[11] == '"')
		return true;
	if (p[11] != '/' || n < 14 || (p[12] == 0 && p[13] == 0))
		return false; /* nothing decoded: the line is "connect/" */
	if (n == 14)
		return true; /* the server reads byte 14 from a stale buffer */
	c = p[14];
	for (int b = 0; b < 8; b++)
		r = (uint8_t)(r << 1 | ((c >> b) & 1));
	return r == '/' || r == '*';
}

/* The command and the token that names it (off, len into p). */
static enum q3_cmd classify(const uint8_t *p, size_t n, size_t *off, size_t *len)
{
	enum q3_cmd c;

	*off = 4;
	*len = 0;
	if (!q3_is_connectionless(p, n))
		return Q3_GAME;
	if (coded_connect(p, n) && coded_connect_is_connect(p, n)) {
		*len = 7;
		return Q3_CONNECT;
	}
	if (!first_token(p, n, off, len))
		return Q3_UNKNOWN;
	c = token_cmd(p, *off, *len);
	if (c == Q3_GETSERVERSRESPONSE)
		*len = strlen(names[c]);
	/* A coded connect's raw token is not what the server reads. */
	return c == Q3_CONNECT && coded_connect(p, n) ? Q3_UNKNOWN : c;
}

enum q3_cmd q3_classify(const uint8_t *p, size_t n)
{
	size_t off, len;

	return classify(p, n, &off, &len);
}

bool q3_served(enum q3_cmd c)
{
	return c == Q3_GETCHALLENGE || c == Q3_GETINFO || c == Q3_GETSTATUS || c == Q3_CONNECT ||
	       c == Q3_RCON || c == Q3_DISCONNECT;
}

bool q3_shape(const uint8_t *p, size_t n)
{
	if (!q3_is_connectionless(p, n))
		return n >= SHAPE_Q3_GAME_MIN;
	return q3_served(q3_classify(p, n));
}

const char *q3_cmd_name(enum q3_cmd c)
{
	return (unsigned)c < Q3_CMD_COUNT ? names[c] : "unknown";
}

size_t q3_word(const uint8_t *p, size_t n, char out[Q3_WORD_MAX])
{
	size_t off, len, o = 0;

	out[0] = '\0';
	if (!q3_is_connectionless(p, n))
		return 0;
	classify(p, n, &off, &len);
	for (size_t i = 0; i < len && o < Q3_WORD_MAX - 1; i++)
		if (p[off + i] > 0x20 && p[off + i] < 0x7f)
			out[o++] = (char)p[off + i];
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
	/* The client reads the info string after the command's line. */
	for (off = 4; off < n && p[off] != '\n' && p[off] != '\0'; off++)
		;
	if (++off >= n)
		return false;
	if (q3_info_value((const char *)p + off, n - off, "challenge", v, sizeof(v)) < 0)
		return false;
	return strcmp(v, challenge) == 0;
}
