/* SPDX-License-Identifier: ISC */
/* Query cache. The server builds its reply from "getinfo <challenge>" as
 * "\xff\xff\xff\xffinfoResponse\n<info>" and from "getstatus <challenge>" as
 * "...statusResponse\n<info>\n<player lines>", with the challenge echoed as
 * one \challenge\ pair in <info>: last in ioquake3's infoResponse, first in
 * its statusResponse and ET: Legacy's infoResponse, in the middle of ET:
 * Legacy's statusResponse. The rest of the reply does not depend on who asks. */
#include "qcache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CHAL_KEY    "challenge"
#define CHAL_KEYLEN (sizeof(CHAL_KEY) - 1)

int qcache_init(struct qcache *c, uint64_t ttl_ns, uint64_t stale_ns, size_t max_reply)
{
	memset(c, 0, sizeof(*c));
	c->info.buf = malloc(QCACHE_REPLY_MAX);
	c->status.buf = malloc(QCACHE_REPLY_MAX);
	if (!c->info.buf || !c->status.buf) {
		qcache_free(c);
		return -ENOMEM;
	}
	c->ttl = ttl_ns;
	c->stale = stale_ns;
	c->max_reply = max_reply < QCACHE_REPLY_MAX ? max_reply : QCACHE_REPLY_MAX;
	return 0;
}

void qcache_free(struct qcache *c)
{
	free(c->info.buf);
	free(c->status.buf);
	memset(c, 0, sizeof(*c));
}

static void entry_copy(struct qcache_entry *dst, const struct qcache_entry *src)
{
	uint8_t *buf = dst->buf;

	if (src->len)
		memcpy(buf, src->buf, src->len);
	*dst = *src;
	dst->buf = buf;
}

void qcache_copy(struct qcache *dst, const struct qcache *src)
{
	entry_copy(&dst->info, &src->info);
	entry_copy(&dst->status, &src->status);
}

void qcache_invalidate(struct qcache *c)
{
	c->info.len = 0;
	c->status.len = 0;
	c->info.refresh = 0;
	c->status.refresh = 0;
}

static const struct qcache_entry *entry_for(const struct qcache *c, enum q3_cmd query_kind)
{
	if (query_kind == Q3_GETINFO)
		return &c->info;
	if (query_kind == Q3_GETSTATUS)
		return &c->status;
	return NULL;
}

bool qcache_refresh_due(const struct qcache *c, enum q3_cmd query_kind, uint64_t now)
{
	const struct qcache_entry *e = entry_for(c, query_kind);

	if (!e || c->ttl == 0)
		return false;
	/* A clock that went back wraps to a huge age: due. */
	if (e->refresh && now - e->refresh < QCACHE_REFRESH_TIMEOUT)
		return false;
	return e->len == 0 || now - e->stored >= c->ttl;
}

void qcache_refresh_sent(struct qcache *c, enum q3_cmd query_kind, uint64_t now)
{
	struct qcache_entry *e = query_kind == Q3_GETINFO     ? &c->info
				 : query_kind == Q3_GETSTATUS ? &c->status
							      : NULL;

	/* 0 means none out; a clock at 0 is only ever seen in tests. */
	if (e)
		e->refresh = now ? now : 1;
}

/* Where the info string of a reply lies and where its challenge pair is, in
 * e (buffer untouched). The info string is "\k\v\k\v..." up to a newline, a
 * NUL or the end; anything else is refused rather than guessed at. */
static int parse_reply(struct qcache_entry *e, const uint8_t *p, size_t n, size_t word)
{
	size_t i = 4 + word, end;
	bool found = false;

	if (i >= n || p[i] != '\n')
		return -EINVAL;
	e->info = ++i;
	for (end = i; end < n && p[end] != '\n' && p[end] != '\0'; end++)
		;
	e->chal = e->chal_val = e->chal_end = e->info;
	while (i < end) {
		size_t ks = i + 1, ke = ks, ve;

		if (p[i] != '\\')
			return -EINVAL;
		while (ke < end && p[ke] != '\\')
			ke++;
		if (ke >= end)
			return -EINVAL; /* a key with no value */
		for (ve = ke + 1; ve < end && p[ve] != '\\'; ve++)
			;
		if (ke - ks == CHAL_KEYLEN &&
		    strncasecmp((const char *)p + ks, CHAL_KEY, CHAL_KEYLEN) == 0) {
			if (found)
				return -EINVAL; /* which one would the client read? */
			found = true;
			e->chal = i;
			e->chal_val = ke + 1;
			e->chal_end = ve;
		}
		i = ve;
	}
	return 0;
}

int qcache_store(struct qcache *c, enum q3_cmd reply_kind, const uint8_t *reply, size_t len,
		 uint64_t now)
{
	struct qcache_entry *e, parsed;
	size_t word;

	if (reply_kind == Q3_INFORESPONSE) {
		e = &c->info;
		word = strlen("infoResponse");
	} else if (reply_kind == Q3_STATUSRESPONSE) {
		e = &c->status;
		word = strlen("statusResponse");
	} else {
		return -EINVAL;
	}
	e->refresh = 0; /* answered, whatever it holds */
	if (len > c->max_reply) {
		e->len = 0;
		return -EMSGSIZE;
	}
	if (q3_classify(reply, len) != reply_kind || parse_reply(&parsed, reply, len, word) < 0)
		return -EINVAL;
	memcpy(e->buf, reply, len);
	e->len = len;
	e->stored = now;
	e->info = parsed.info;
	e->chal = parsed.chal;
	e->chal_val = parsed.chal_val;
	e->chal_end = parsed.chal_end;
	return 0;
}

/* A character the server keeps as is in Cmd_Argv(1) and in an info value:
 * not a separator (<= ' '), not '"' (quotes), '%' (turned into '.'), '\\' or
 * ';' (refused in info strings), nor 8-bit. '/' is fine alone: old dpmaster
 * challenges have it. */
static bool chal_char(uint8_t ch)
{
	return ch > ' ' && ch < 0x7f && ch != '"' && ch != '%' && ch != '\\' && ch != ';';
}

/* The command word of a query matched against `cmd`: the server tokenizes
 * the first line ("\n" or NUL ends it) and splits on bytes <= ' '. */
static bool query_is(const uint8_t *q, size_t end, const char *cmd)
{
	size_t len = strlen(cmd);

	if (end - 4 < len || strncasecmp((const char *)q + 4, cmd, len) != 0)
		return false;
	return 4 + len == end || q[4 + len] <= ' ';
}

/* The challenge (Cmd_Argv(1)) of a query into *chal and *clen (0 when there
 * is none); -1 when the server might read it differently than we would. */
static int query_challenge(const uint8_t *q, size_t end, size_t i, const uint8_t **chal,
			   size_t *clen)
{
	size_t s;

	while (i < end && q[i] <= ' ')
		i++;
	for (s = i; i < end && q[i] > ' '; i++) {
		if (!chal_char(q[i]))
			return -1;
		/* A slash before '/' or '*' opens a comment, except that ET:
		 * Legacy keeps "://" in a word and ioquake3 does not: leave
		 * those to the server. */
		if (q[i] == '/' && i + 1 < end && (q[i + 1] == '/' || q[i + 1] == '*'))
			return -1;
	}
	if (i - s > QCACHE_CHALLENGE_MAX)
		return -1;
	*chal = q + s;
	*clen = i - s;
	return 0;
}

int qcache_answer(const struct qcache *c, const uint8_t *query, size_t qlen, uint64_t now,
		  uint8_t *out, size_t outlen)
{
	static const char pair[] = "\\" CHAL_KEY "\\";
	const struct qcache_entry *e;
	const uint8_t *chal;
	size_t end, clen, head, tail, n, o;

	if (!q3_is_connectionless(query, qlen))
		return -1;
	for (end = 4; end < qlen && query[end] != '\n' && query[end] != '\0'; end++)
		;
	if (query_is(query, end, "getinfo")) {
		e = &c->info;
		head = 4 + strlen("getinfo");
	} else if (query_is(query, end, "getstatus")) {
		e = &c->status;
		head = 4 + strlen("getstatus");
	} else {
		return -1;
	}
	/* A clock that went back wraps to a huge age: expired. */
	if (e->len == 0 || c->ttl == 0 || now - e->stored >= c->ttl + c->stale)
		return -1;
	if (query_challenge(query, end, head, &chal, &clen) < 0)
		return -1;

	/* out = buf[0, head) + new pair or value + buf[tail, len) */
	if (e->chal_end > e->chal) {
		head = clen ? e->chal_val : e->chal;
		tail = e->chal_end;
	} else {
		head = tail = e->info;
	}
	n = head + (clen && e->chal_end == e->chal ? sizeof(pair) - 1 : 0) + clen + (e->len - tail);
	if (n > outlen)
		return -1;
	memcpy(out, e->buf, head);
	o = head;
	if (clen && e->chal_end == e->chal) {
		memcpy(out + o, pair, sizeof(pair) - 1);
		o += sizeof(pair) - 1;
	}
	memcpy(out + o, chal, clen);
	o += clen;
	memcpy(out + o, e->buf + tail, e->len - tail);
	return (int)n;
}
