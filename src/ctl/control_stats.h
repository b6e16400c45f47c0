/* SPDX-License-Identifier: ISC */
/* What the control-plane client publishes and the ops plane reads
 * (/lifecycle's control section, the etrelay_control_* metrics). One
 * writer, the control thread, under the mutex; readers copy under it. */
#ifndef ETR_CONTROL_STATS_H
#define ETR_CONTROL_STATS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "certsched.h"
#include "control_upstream.h"

/* The result of one enrolment or heartbeat (a metric label each). */
enum ctl_result {
	CTL_OK,		 /* 2xx and a good answer */
	CTL_REFUSED,	 /* 4xx other than 429: the token was refused */
	CTL_HTTP_ERROR,	 /* another status (5xx, 429, 3xx) */
	CTL_TIMEOUT,	 /* no whole answer within control-timeout */
	CTL_NETWORK,	 /* no connection (refused, unreachable, name, TLS) */
	CTL_BAD_ANSWER,	 /* 2xx with malformed JSON or a bad route */
	CTL_STATE_ERROR, /* enrolled, but the credential could not be written */
	CTL_TOO_LARGE,	 /* an answer past control-max-answer, cut off unread */
	CTL_RESULT_COUNT
};

/* Metric label and log word of a result. */
static inline const char *ctl_result_name(enum ctl_result r)
{
	static const char *const names[CTL_RESULT_COUNT] = {
	    [CTL_OK] = "ok",
	    [CTL_REFUSED] = "refused",
	    [CTL_HTTP_ERROR] = "http_error",
	    [CTL_TIMEOUT] = "timeout",
	    [CTL_NETWORK] = "network_error",
	    [CTL_BAD_ANSWER] = "bad_answer",
	    [CTL_STATE_ERROR] = "state_error",
	    [CTL_TOO_LARGE] = "too_large",
	};
	return (unsigned)r < CTL_RESULT_COUNT ? names[r] : "unknown";
}

/* A certificate request's results: enum certsched_result's. */
#define CTL_CERT_RESULTS 4

/* Metric label and log word of a certificate request's result. */
static inline const char *ctl_cert_result_name(enum certsched_result r)
{
	static const char *const names[CTL_CERT_RESULTS] = {
	    [CERTSCHED_OK] = "ok",
	    [CERTSCHED_FAILED] = "failed",
	    [CERTSCHED_NOT_OFFERED] = "not_offered",
	    [CERTSCHED_SHORT] = "short_lived",
	};
	return (unsigned)r < CTL_CERT_RESULTS ? names[r] : "unknown";
}

struct control_stats {
	pthread_mutex_t lock;
	bool enrolled;	    /* a credential is held */
	char relay_id[128]; /* from enrolment, "" when the token came from the environment */
	bool any_heartbeat; /* one was tried */
	enum ctl_result last_result;
	uint64_t last_heartbeat; /* unix seconds of the last heartbeat's end, 0 = never */
	uint64_t last_success;	 /* unix seconds of the last good heartbeat, 0 = never */
	uint64_t next_attempt;	 /* unix seconds of the next enrolment or heartbeat */
	uint32_t failures;	 /* consecutive failed heartbeats (or enrolments, before) */
	uint64_t routes;	 /* routes in the set in force */
	/* The set in force came from the route file at the start: no
	 * heartbeat succeeded since. */
	bool routes_stale;
	/* Routes of the last good answer dropped, by why (the refused ones). */
	uint64_t routes_refused[CTL_UPSTREAM_WHYS];
	uint64_t heartbeats[CTL_RESULT_COUNT];
	uint64_t enrolments[CTL_RESULT_COUNT];
	/* The tunnel certificate, with a tunnel only (cert_on): its requests
	 * by result (enum certsched_result), and the notAfter (unix seconds)
	 * of the one in force, 0: none. */
	bool cert_on;
	uint64_t cert_requests[CTL_CERT_RESULTS];
	uint64_t cert_not_after;
};

#endif
