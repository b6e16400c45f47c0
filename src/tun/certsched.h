/* SPDX-License-Identifier: ISC */
/* When the relay asks the control plane for its tunnel certificate again
 * (seed 002): at start; after a failure 1 minute later, doubling up to 30
 * minutes; when the control plane answers that it offers no certificates,
 * 60 minutes later; with a certificate, at two thirds of its lifetime (the
 * last good pair is served until a new one loads); a certificate with
 * less than certsched_floor left is refused as a failure. Pure: times in,
 * times out. The periods are fields, so that a test can scale them down. */
#ifndef ETR_CERTSCHED_H
#define ETR_CERTSCHED_H

#include <stdint.h>

enum certsched_result {
	CERTSCHED_OK,	       /* a certificate was taken */
	CERTSCHED_FAILED,      /* the request or the certificate failed */
	CERTSCHED_NOT_OFFERED, /* the control plane has no certificates to give */
	CERTSCHED_SHORT,       /* a good chain with less than certsched_floor left: a failure */
};

struct certsched {
	/* The periods, in milliseconds (certsched_init: 1 min, 30 min, 60 min). */
	uint64_t retry_first, retry_max, not_offered;
	uint64_t retry; /* the wait after the next failure */
	uint64_t due;	/* when to ask next (monotonic milliseconds) */
};

/* Ask at once (now), with the periods above. */
void certsched_init(struct certsched *s, uint64_t now);

/* The answer to the request made at now. For CERTSCHED_OK: valid_for, the
 * milliseconds from now to the certificate's notAfter, and age, from its
 * notBefore to now (0 when that is later): it is renewed at two thirds of
 * its lifetime, and not sooner than retry_first from now. Returns the new
 * due time. */
/* The least lifetime left (ms) a certificate must have to be put in
 * force: ten times retry_first, at most 10 minutes. A shorter one would be
 * renewed every retry_first (attack round 15, F7); refused, it is a
 * failure (CERTSCHED_SHORT) and the pair in force stays. */
uint64_t certsched_floor(const struct certsched *s);

uint64_t certsched_done(struct certsched *s, uint64_t now, enum certsched_result r,
			uint64_t valid_for, uint64_t age);

#endif
