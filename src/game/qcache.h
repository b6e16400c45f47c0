/* SPDX-License-Identifier: ISC */
/* The last infoResponse and statusResponse of the game server, served again
 * for getinfo and getstatus with each query's challenge written in; a copy
 * past its TTL is still served for a bounded time while one refresh query
 * is out (stale-while-refresh). Pure: `now` is CLOCK_MONOTONIC in
 * nanoseconds, passed in. */
#ifndef ETR_QCACHE_H
#define ETR_QCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "q3proto.h"

/* Largest reply kept: one UDP datagram. */
#define QCACHE_REPLY_MAX 65535

/* Longest query challenge answered from the cache; ioquake3 and ET: Legacy
 * refuse more than 128, real masters and browsers send 10 or so. */
#define QCACHE_CHALLENGE_MAX 64

/* How long a reply is served: 1 s. */
#define QCACHE_TTL_DEFAULT 1000000000ull

/* A refresh query with no answer after this long is taken as lost: the
 * next query may refresh. The game server answers in milliseconds. */
#define QCACHE_REFRESH_TIMEOUT 1000000000ull

/* One cached reply and where its info string and challenge pair lie. */
struct qcache_entry {
	uint8_t *buf;	  /* QCACHE_REPLY_MAX bytes from init */
	size_t len;	  /* 0: nothing cached */
	uint64_t stored;  /* monotonic ns */
	size_t info;	  /* first byte of the info string */
	size_t chal;	  /* the "\challenge\value" pair, or info when none */
	size_t chal_val;  /* first byte of its value */
	size_t chal_end;  /* one past its value (== chal when none) */
	uint64_t refresh; /* monotonic ns a refresh query left, 0: none out */
};

/* The cache: an infoResponse for getinfo, a statusResponse for getstatus. */
struct qcache {
	struct qcache_entry info;
	struct qcache_entry status;
	uint64_t ttl;	  /* ns: fresh */
	uint64_t stale;	  /* ns past ttl a copy is still served */
	size_t max_reply; /* longest reply kept (and answer given) */
};

/* Allocate both reply buffers; replies are fresh for ttl_ns (0 serves
 * nothing), served stale for stale_ns more, and kept only up to max_reply
 * bytes (at most QCACHE_REPLY_MAX). Returns 0 or -ENOMEM. */
int qcache_init(struct qcache *c, uint64_t ttl_ns, uint64_t stale_ns, size_t max_reply);

/* Release the buffers. */
void qcache_free(struct qcache *c);

/* Keep a copy of a reply from the game server; reply_kind is
 * Q3_INFORESPONSE or Q3_STATUSRESPONSE. Any reply of that kind ends the
 * refresh that was out. Returns 0, -EINVAL when the reply is not a
 * well-formed reply of that kind (the previous one is kept), or -EMSGSIZE
 * when it is longer than max_reply (the previous one is forgotten: a
 * server whose reply outgrew the cap is asked itself). */
int qcache_store(struct qcache *c, enum q3_cmd reply_kind, const uint8_t *reply, size_t len,
		 uint64_t now);

/* Answer a getinfo or getstatus query from a reply younger than TTL +
 * stale, with the info string's challenge set to the query's (removed when
 * the query has none). Returns the answer's length in out, or -1: a miss, an
 * expired reply, another command, a challenge the server might read
 * differently, or out too small. The query then goes to the game server.
 * The answer is larger than the query: rate-limit the source first, or the
 * relay is an amplifier for spoofed sources. */
int qcache_answer(const struct qcache *c, const uint8_t *query, size_t qlen, uint64_t now,
		  uint8_t *out, size_t outlen);

/* The query kind (Q3_GETINFO or Q3_GETSTATUS) wants a refresh: its copy
 * is missing or past the TTL, and no refresh is out (or the last one is
 * older than QCACHE_REFRESH_TIMEOUT). False for other kinds and when the
 * cache is off. */
bool qcache_refresh_due(const struct qcache *c, enum q3_cmd query_kind, uint64_t now);

/* A query of that kind went to the game server to refresh the copy. */
void qcache_refresh_sent(struct qcache *c, enum q3_cmd query_kind, uint64_t now);

/* Make dst (initialised with the same max_reply) a copy of src: both
 * replies, their ages and the refreshes out. For workers that share what
 * any of them learnt. */
void qcache_copy(struct qcache *dst, const struct qcache *src);

/* Forget both replies: the server stopped answering, list no ghost. */
void qcache_invalidate(struct qcache *c);

#endif
