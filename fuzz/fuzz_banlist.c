/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for banlist_load and banlist_match. Input: the text of
 * a ban list file. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "banlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp(struct banlist_u128 a, struct banlist_u128 b)
{
	if (a.hi != b.hi)
		return a.hi < b.hi ? -1 : 1;
	return a.lo < b.lo ? -1 : a.lo > b.lo;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct banlist b;
	union etr_sockaddr sa;
	char *text = malloc(size ? size : 1);
	int r;

	if (!text)
		abort();
	memcpy(text, data, size);
	memset(err, 'x', sizeof(err));
	r = banlist_load(&b, text, size, "fuzz", err, sizeof(err));
	if (r < 0 || memchr(err, '\0', sizeof(err)) == NULL)
		abort();
	if (r > 0 && (b.n != 0 || b.range != NULL || err[0] == '\0'))
		abort();
	/* Sorted, disjoint, not adjacent: each range starts past the one
	 * before it ends, plus one. */
	for (size_t i = 0; i < b.n; i++) {
		if (cmp(b.range[i].first, b.range[i].last) > 0)
			abort();
		if (i > 0) {
			struct banlist_u128 next = b.range[i - 1].last;

			if (++next.lo == 0)
				next.hi++;
			if (cmp(b.range[i].first, next) <= 0)
				abort();
		}
	}
	/* Every range's ends match; the address before the first does not. */
	memset(&sa, 0, sizeof(sa));
	sa.in6.sin6_family = AF_INET6;
	for (size_t i = 0; i < b.n && i < 64; i++) {
		for (int k = 0; k < 8; k++) {
			sa.in6.sin6_addr.s6_addr[k] = (uint8_t)(b.range[i].last.hi >> (56 - 8 * k));
			sa.in6.sin6_addr.s6_addr[8 + k] =
			    (uint8_t)(b.range[i].last.lo >> (56 - 8 * k));
		}
		if (!banlist_match(&b, &sa))
			abort();
		for (int k = 0; k < 8; k++) {
			sa.in6.sin6_addr.s6_addr[k] =
			    (uint8_t)(b.range[i].first.hi >> (56 - 8 * k));
			sa.in6.sin6_addr.s6_addr[8 + k] =
			    (uint8_t)(b.range[i].first.lo >> (56 - 8 * k));
		}
		if (!banlist_match(&b, &sa))
			abort();
	}
	sa.in.sin_family = AF_INET;
	sa.in.sin_addr.s_addr = htonl(0xc0000201); /* 192.0.2.1 */
	banlist_match(&b, &sa);
	banlist_free(&b);
	free(text);
	return 0;
}
