/* SPDX-License-Identifier: ISC */
/* Differential libFuzzer harness for q3_classify: plain models of how
 * ioquake3, RTCW and ET: Legacy (before and since 2.77) read the command of a
 * connectionless packet, on the server and on the client. Whenever a model
 * names a command the relay knows, q3_classify must name the same; whenever
 * q3_classify names one, some model must too. Input: one datagram. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "huffman.h"
#include "q3proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* MAX_STRING_CHARS in every engine. */
#define LINE_CHARS 1024

/* What one engine does differently. */
struct engine {
	const char *name;
	/* MSG_ReadStringLine writes '.' for a byte > 127. */
	bool high_to_dot;
	/* The word loop reads UTF-8 code points, not signed chars. */
	bool utf8_words;
	/* "//" right after ':' does not end the command (for "http://"). */
	bool colon_slashes;
};

static const struct engine engines[] = {
    {"ioquake3", true, false, false},
    {"rtcw (id's reader, high bytes kept)", false, false, false},
    {"etlegacy-2.76 (legacy mod)", false, false, true},
    {"etlegacy-2.77+", false, true, true},
};
#define N_ENGINES (sizeof(engines) / sizeof(engines[0]))

/* A model's answer: a command it runs, none, or cannot say (it would read
 * bytes the packet does not hold). */
enum verdict { V_NONE = -1, V_UNSURE = -2 };

static void fail(const char *what, const char *engine, const uint8_t *p, size_t n, int want,
		 enum q3_cmd got)
{
	fprintf(stderr,
		"fuzz_q3classify: %s (%s): model says %s, q3_classify says %s; packet:", what,
		engine, want >= 0 ? q3_cmd_name((enum q3_cmd)want) : "nothing", q3_cmd_name(got));
	for (size_t i = 0; i < n && i < 64; i++)
		fprintf(stderr, " %02x", p[i]);
	fprintf(stderr, "\n");
	abort();
}

/* ASCII case-insensitive equality, as Q_stricmp. */
static bool same_word(const char *a, const char *b)
{
	for (;; a++, b++) {
		int x = (unsigned char)*a, y = (unsigned char)*b;

		if (x >= 'a' && x <= 'z')
			x -= 'a' - 'A';
		if (y >= 'a' && y <= 'z')
			y -= 'a' - 'A';
		if (x != y)
			return false;
		if (!x)
			return true;
	}
}

/* MSG_ReadStringLine over msg[4..len): into line, NUL-terminated and padded
 * with NULs (the ET: Legacy word loop can step one byte past the NUL). */
static void read_line(const struct engine *e, const uint8_t *msg, size_t len,
		      char line[LINE_CHARS + 8])
{
	size_t l = 0;

	memset(line, 0, LINE_CHARS + 8);
	for (size_t i = 4; i < len; i++) {
		int c = msg[i];

		if (c == 0 || c == '\n')
			break;
		if (c == '%' || (e->high_to_dot && c > 127))
			c = '.';
		if (l >= LINE_CHARS - 1)
			break;
		line[l++] = (char)c;
	}
}

/* Bytes ET: Legacy's Q_UTF8_Width says the character at s takes: the lead,
 * then as many as the lead promises, counting on while the byte it looks at
 * (the lead first) is not NUL. */
static int utf8_width(const unsigned char *s)
{
	int extra = 0, w = 1;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		extra = 1;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		extra = 2;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		extra = 3;
	for (int k = 0; k < extra && s[k]; k++)
		w++;
	return w;
}

/* The code point at s the way ET: Legacy's tokenizer sees it: a well-formed
 * sequence decoded (overlong ones too), anything else its first byte. */
static uint32_t utf8_point(const unsigned char *s)
{
	int extra;
	uint32_t cp;

	if (s[0] < 0x80)
		return s[0];
	if ((s[0] & 0xe0) == 0xc0) {
		extra = 1;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		if (s[0] == 0xed && (s[1] & 0xa0) == 0xa0)
			return s[0]; /* a surrogate */
		extra = 2;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		extra = 3;
		cp = s[0] & 0x07;
	} else {
		return s[0];
	}
	for (int k = 1; k <= extra; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return s[0];
		cp = cp << 6 | (s[k] & 0x3f);
	}
	return cp;
}

/* Does a "//" at t end the command? ET: Legacy lets "://" through. */
static bool slashes_end(const struct engine *e, const char *line, const signed char *t)
{
	return !e->colon_slashes || (const char *)t == line || t[-1] != ':';
}

/* Cmd_TokenizeString's first token of line into tok; false when none. The
 * engines are built for x86, where char is signed: model that. */
static bool first_token(const struct engine *e, const char *line, char *tok, size_t toklen)
{
	const signed char *t = (const signed char *)line;
	size_t o = 0;

	for (;;) {
		while (*t && *t <= ' ')
			t++;
		if (!*t)
			return false;
		if (t[0] == '/' && t[1] == '/' && slashes_end(e, line, t))
			return false;
		if (t[0] == '/' && t[1] == '*') {
			while (*t && (t[0] != '*' || t[1] != '/'))
				t++;
			if (!*t)
				return false;
			t += 2;
		} else {
			break;
		}
	}
	if (*t == '"') {
		for (t++; *t && *t != '"' && o < toklen - 1; t++)
			tok[o++] = (char)*t;
		tok[o] = '\0';
		return true;
	}
	for (;;) {
		uint32_t cp;
		int w;

		if (e->utf8_words) {
			cp = utf8_point((const unsigned char *)t);
			w = utf8_width((const unsigned char *)t);
		} else {
			if (*t <= ' ')
				break;
			cp = (unsigned char)*t;
			w = 1;
		}
		if (cp <= ' ' || cp == '"')
			break;
		if (cp == '/' && t[1] == '/' && slashes_end(e, line, t))
			break;
		if (cp == '/' && t[1] == '*')
			break;
		for (; w > 0; w--) {
			if (o < toklen - 1)
				tok[o++] = (char)*t;
			t++;
		}
	}
	tok[o] = '\0';
	return true;
}

/* What the engine's first line is, for the server: it Huffman-decodes from
 * byte 12 when bytes 4..10 are exactly "connect". Returns the message length
 * in msg, or -1 when the engine would read bytes the packet lacks. */
static long server_message(const uint8_t *p, size_t n, uint8_t *msg, size_t msglen)
{
	/* Only short streams are decoded in full (the coverage-instrumented
	 * decoder is slow); of a longer one the first byte is modelled. */
	static uint8_t out[64];
	size_t cch;
	int got;
	uint8_t first = 0;

	memcpy(msg, p, n < msglen ? n : msglen);
	if (n > msglen)
		return -1;
	if (n < 11 || memcmp(p + 4, "connect", 7) != 0 || n <= 12)
		return (long)n;
	if (n == 13) {
		/* With one coded byte the decoder stops before the first
		 * symbol and writes a NUL (or, with a stale length of 0, cuts
		 * the message at 12): either way the line ends at byte 12. */
		msg[12] = 0;
		return 13;
	}
	cch = (size_t)p[12] << 8 | p[13];
	if (cch == 0)
		return 12;
	if (n == 14)
		return -1; /* the first symbol comes from a stale byte 14 */
	/* An empty adaptive tree is a lone "not yet transmitted" node: the
	 * first symbol is 8 raw bits, taken low bit first from byte 14 on,
	 * the first one the most significant. */
	for (int b = 0; b < 8; b++)
		first = (uint8_t)(first << 1 | ((p[14] >> b) & 1));
	got = cch <= sizeof(out) ? huffman_decode(p + 12, n - 12, out, sizeof(out)) : -1;
	if (got > 0 && out[0] != first) {
		fprintf(stderr, "fuzz_q3classify: huffman_decode's first byte %02x, model %02x\n",
			out[0], first);
		abort();
	}
	if (got > 0 && (size_t)got + 12 <= msglen) {
		memcpy(msg + 12, out, (size_t)got);
		return 12 + got;
	}
	/* Only the first decoded byte can matter to the command. */
	msg[12] = first;
	msg[13] = 0;
	return 14;
}

struct named {
	const char *word;
	enum q3_cmd cmd;
};

/* What SV_ConnectionlessPacket runs (of what the relay knows). */
static const struct named server_cmds[] = {
    {"getstatus", Q3_GETSTATUS}, {"getinfo", Q3_GETINFO}, {"getchallenge", Q3_GETCHALLENGE},
    {"connect", Q3_CONNECT},	 {"rcon", Q3_RCON},	  {"disconnect", Q3_DISCONNECT},
};

/* What CL_ConnectionlessPacket runs by Q_stricmp. */
static const struct named client_cmds[] = {
    {"challengeResponse", Q3_CHALLENGERESPONSE},
    {"connectResponse", Q3_CONNECTRESPONSE},
    {"infoResponse", Q3_INFORESPONSE},
    {"statusResponse", Q3_STATUSRESPONSE},
    {"print", Q3_PRINT},
    {"disconnect", Q3_DISCONNECT},
};

/* The server command e runs for packet p, V_NONE or V_UNSURE. */
static int server_model(const struct engine *e, const uint8_t *p, size_t n)
{
	static uint8_t msg[65536 + 16];
	char line[LINE_CHARS + 8], tok[LINE_CHARS + 8];
	long len = server_message(p, n, msg, sizeof(msg));

	if (len < 0)
		return V_UNSURE;
	read_line(e, msg, (size_t)len, line);
	if (!first_token(e, line, tok, sizeof(tok)))
		return V_NONE;
	for (size_t i = 0; i < sizeof(server_cmds) / sizeof(server_cmds[0]); i++)
		if (same_word(tok, server_cmds[i].word))
			return server_cmds[i].cmd;
	return V_NONE;
}

/* The client command e runs for packet p (no decompression there). */
static int client_model(const struct engine *e, const uint8_t *p, size_t n)
{
	char line[LINE_CHARS + 8], tok[LINE_CHARS + 8];

	read_line(e, p, n, line);
	if (!first_token(e, line, tok, sizeof(tok)))
		return V_NONE;
	for (size_t i = 0; i < sizeof(client_cmds) / sizeof(client_cmds[0]); i++)
		if (same_word(tok, client_cmds[i].word))
			return client_cmds[i].cmd;
	/* A case-sensitive prefix: the address list follows unbroken. */
	if (strncmp(tok, "getserversResponse", 18) == 0)
		return Q3_GETSERVERSRESPONSE;
	return V_NONE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum q3_cmd got = q3_classify(data, size);
	bool server_named = false, client_named = false, unsure = false;
	char word[Q3_WORD_MAX];

	if (!q3_is_connectionless(data, size)) {
		if (got != Q3_GAME)
			fail("not connectionless", "-", data, size, V_NONE, got);
		return 0;
	}
	for (size_t i = 0; i < N_ENGINES; i++) {
		int s = server_model(&engines[i], data, size);
		int c = client_model(&engines[i], data, size);

		if (s == V_UNSURE)
			unsure = true;
		else if (s >= 0 && (enum q3_cmd)s != got)
			fail("server", engines[i].name, data, size, s, got);
		if (c >= 0 && (enum q3_cmd)c != got)
			fail("client", engines[i].name, data, size, c, got);
		server_named |= s >= 0;
		client_named |= c >= 0;
	}
	/* The other way: no command that no engine runs. Master commands and
	 * the case of getserversResponse are the relay's own. */
	switch (got) {
	case Q3_GETSTATUS:
	case Q3_GETINFO:
	case Q3_GETCHALLENGE:
	case Q3_RCON:
		if (!server_named)
			fail("no engine runs it", "all", data, size, V_NONE, got);
		break;
	case Q3_CONNECT:
		if (!server_named && !unsure)
			fail("no engine runs it", "all", data, size, V_NONE, got);
		break;
	case Q3_DISCONNECT:
		if (!server_named && !client_named)
			fail("no engine runs it", "all", data, size, V_NONE, got);
		break;
	case Q3_CHALLENGERESPONSE:
	case Q3_CONNECTRESPONSE:
	case Q3_INFORESPONSE:
	case Q3_STATUSRESPONSE:
	case Q3_PRINT:
		if (!client_named)
			fail("no client runs it", "all", data, size, V_NONE, got);
		break;
	default:
		break;
	}
	/* The word logged is the command named. */
	q3_word(data, size, word);
	if (got != Q3_UNKNOWN && !same_word(word, q3_cmd_name(got)))
		fail("q3_word differs", word, data, size, V_NONE, got);
	return 0;
}
