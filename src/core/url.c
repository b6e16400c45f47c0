/* SPDX-License-Identifier: ISC */
/* A URL's host and its loggable form: the authority is what lies between
 * "//" and the next '/', '?' or '#'; its host follows the last '@' (the
 * userinfo, RFC 3986 3.2.1) and ends at ':' (the port), or is the
 * bracketed IPv6 literal. */
#include "url.h"

#include <stdio.h>
#include <string.h>

/* The authority of url: [*a, *end). -1 without "://". */
static int authority(const char *url, const char **a, const char **end)
{
	const char *s = strstr(url, "://");

	if (!s)
		return -1;
	*a = s + 3;
	*end = *a + strcspn(*a, "/?#");
	return 0;
}

/* The last '@' in [a, end), or NULL. */
static const char *last_at(const char *a, const char *end)
{
	const char *at = NULL;

	for (const char *p = a; p < end; p++)
		if (*p == '@')
			at = p;
	return at;
}

int url_host(const char *url, const char **host, size_t *len)
{
	const char *a, *end, *at, *h, *he;

	if (authority(url, &a, &end) < 0)
		return -1;
	at = last_at(a, end);
	h = at ? at + 1 : a;
	if (h < end && *h == '[') {
		h++;
		he = memchr(h, ']', (size_t)(end - h));
		if (!he)
			return -1;
	} else {
		he = memchr(h, ':', (size_t)(end - h));
		if (!he)
			he = end;
	}
	if (he == h)
		return -1;
	*host = h;
	*len = (size_t)(he - h);
	return 0;
}

void url_redact(const char *url, char *out, size_t outlen)
{
	const char *a, *end, *at, *colon;

	if (authority(url, &a, &end) < 0 || !(at = last_at(a, end))) {
		snprintf(out, outlen, "%s", url);
		return;
	}
	colon = memchr(a, ':', (size_t)(at - a));
	if (colon)
		snprintf(out, outlen, "%.*s:***%s", (int)(colon - url), url, at);
	else
		snprintf(out, outlen, "%.*s***%s", (int)(a - url), url, at);
}
