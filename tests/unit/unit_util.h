/* SPDX-License-Identifier: ISC */
/* Helpers several unit tests share: socket addresses from strings. Include
 * after cmocka.h and a header that declares union etr_sockaddr (addr.h). */
#ifndef ETR_TEST_UNIT_UTIL_H
#define ETR_TEST_UNIT_UTIL_H

#include <arpa/inet.h>
#include <string.h>

#include "addr.h"

/* "ip:port" or "[ip6]:port", numeric only. */
static inline union etr_sockaddr sa(const char *s)
{
	union etr_sockaddr a;

	assert_int_equal(addr_parse_numeric(s, &a), 0);
	return a;
}

static inline void sa_v4(union etr_sockaddr *a, const char *ip, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	a->in.sin_family = AF_INET;
	a->in.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, ip, &a->in.sin_addr), 1);
}

static inline void sa_v6(union etr_sockaddr *a, const char *ip, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	a->in6.sin6_family = AF_INET6;
	a->in6.sin6_port = htons(port);
	assert_int_equal(inet_pton(AF_INET6, ip, &a->in6.sin6_addr), 1);
}

#endif
