/* SPDX-License-Identifier: ISC */
/* Banned source addresses and CIDR blocks, IPv4 and IPv6: a text file into
 * sorted ranges, matched by binary search. */
#ifndef ETR_BANLIST_H
#define ETR_BANLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"

/* An address as a 128-bit number; IPv4 as ::ffff:a.b.c.d. */
struct banlist_u128 {
	uint64_t hi, lo;
};

/* Every address from first to last, inclusive. */
struct banlist_range {
	struct banlist_u128 first, last;
};

/* Sorted, disjoint, non-adjacent ranges. An all-zero banlist is empty. */
struct banlist {
	struct banlist_range *range;
	size_t n;	/* ranges after merging */
	size_t entries; /* lines loaded */
};

/* Load a ban list from text: one IPv4 or IPv6 address or CIDR block a line,
 * '#' starts a comment, blank lines are fine. Returns 0 with b ready, the
 * number of bad lines (b left empty; each one described in err as
 * "path:line: message", newline-separated, as many as fit; err may be NULL),
 * or -ENOMEM. */
int banlist_load(struct banlist *b, const char *text, size_t len, const char *path, char *err,
		 size_t errlen);

/* Load the ban file at path the same way. Returns what banlist_load
 * does, or -errno when the file cannot be read ("ban-file PATH: reason" in
 * err then). */
int banlist_load_file(struct banlist *b, const char *path, char *err, size_t errlen);

/* True when the address of sa (port ignored) is banned. An IPv6 address
 * that embeds IPv4 (mapped, compatible, NAT64, 6to4: addrclass_v4_embedded)
 * matches the entries of that IPv4 too, and an entry written in such a form
 * bans the IPv4 block it embeds as well. */
bool banlist_match(const struct banlist *b, const union etr_sockaddr *sa);

/* Release the ranges; b is empty afterwards. */
void banlist_free(struct banlist *b);

#endif
