/* SPDX-License-Identifier: ISC */
/* The tunnel certificate's schedule. */
#include "certsched.h"

#define MIN_MS (60u * 1000u)

void certsched_init(struct certsched *s, uint64_t now)
{
	s->retry_first = 1 * MIN_MS;
	s->retry_max = 30 * MIN_MS;
	s->not_offered = 60 * MIN_MS;
	s->retry = s->retry_first;
	s->due = now;
}

uint64_t certsched_floor(const struct certsched *s)
{
	uint64_t cap = 10 * MIN_MS;

	return s->retry_first > cap / 10 ? cap : s->retry_first * 10;
}

uint64_t certsched_done(struct certsched *s, uint64_t now, enum certsched_result r,
			uint64_t valid_for, uint64_t age)
{
	uint64_t wait;

	switch (r) {
	case CERTSCHED_OK:
		/* Two thirds of the whole lifetime (age + valid_for) from
		 * its start, that is from now: two thirds less the age. */
		s->retry = s->retry_first;
		wait = (age + valid_for) / 3 * 2;
		wait = wait > age ? wait - age : 0;
		if (wait < s->retry_first)
			wait = s->retry_first;
		break;
	case CERTSCHED_NOT_OFFERED:
		s->retry = s->retry_first;
		wait = s->not_offered;
		break;
	case CERTSCHED_FAILED:
	case CERTSCHED_SHORT:
	default:
		wait = s->retry;
		s->retry = s->retry > s->retry_max / 2 ? s->retry_max : s->retry * 2;
		break;
	}
	s->due = now + wait;
	return s->due;
}
