/* SPDX-License-Identifier: ISC */
/* When the control-plane client tries next, and what it logs. Pure: times
 * are CLOCK_MONOTONIC nanoseconds passed in. Enrolment backs off from a
 * minimum, doubling to a maximum (a refused token waits the maximum);
 * heartbeats keep a fixed rhythm from the first, and a late or failed one
 * is followed by the next tick, never by a burst of missed ones. */
#ifndef ETR_CONTROL_SCHED_H
#define ETR_CONTROL_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control_stats.h"

struct ctl_sched {
	uint64_t interval, backoff_min, backoff_max; /* ns */
	bool enrolled;
	uint32_t failures; /* consecutive, of the current phase */
	uint64_t next;	   /* the next attempt (a heartbeat: its tick) */
};

/* The wait after the failures-th failed enrolment in a row (1: min), doubling
 * up to max. 0 failures: 0. */
uint64_t ctl_backoff_delay(uint64_t min, uint64_t max, uint32_t failures);

/* The first attempt is now: an enrolment, or a heartbeat when enrolled. */
void ctl_sched_init(struct ctl_sched *s, uint64_t interval, uint64_t backoff_min,
		    uint64_t backoff_max, bool enrolled, uint64_t now);

/* An enrolment ended at now with r: on success the first heartbeat is
 * due at once. */
void ctl_sched_enrolment(struct ctl_sched *s, enum ctl_result r, uint64_t now);

/* A heartbeat that was due at s->next ended at now with r. */
void ctl_sched_heartbeat(struct ctl_sched *s, enum ctl_result r, uint64_t now);

/* The result of an HTTP status: 2xx ok (the answer may still be bad), 4xx
 * but 429 refused, any other an HTTP error. */
enum ctl_result ctl_result_of_status(long status);

/* The last result logged. */
struct ctl_logstate {
	bool any;
	enum ctl_result result;
	size_t routes;
	uint64_t why; /* ctl_reason_sig of the reason */
};

/* A digest of a failure's reason, as the log compares them: the text,
 * but for the number after "after " (libcurl's "Failed to connect ...
 * after 3 ms": the time taken is not another reason). NULL or "": 0. */
uint64_t ctl_reason_sig(const char *why);

/* True when this result, route count or reason (why: NULL for none)
 * differs from the last logged (or none was): log it. Records it either
 * way. */
bool ctl_log_changed(struct ctl_logstate *l, enum ctl_result r, size_t routes, const char *why);

#endif
