/* SPDX-License-Identifier: ISC */
/* The parts of an http:// or https:// URL that config checks and logs
 * need: its host, and the URL with any password in it hidden. Pure. */
#ifndef ETR_URL_H
#define ETR_URL_H

#include <stddef.h>

/* The host of url (after "scheme://" and any "userinfo@", without a
 * bracketed IPv6 literal's brackets) in *host, *len bytes, not
 * NUL-terminated. Returns 0, or -1 when url has no "://", the host is
 * empty or a '[' is not closed. */
int url_host(const char *url, const char **host, size_t *len);

/* url into out (outlen > 0; truncated to fit) with the userinfo's
 * password, or a userinfo with no ':', replaced by "***": user:***@host,
 * ***@host. Everything else is copied as is. */
void url_redact(const char *url, char *out, size_t outlen);

#endif
