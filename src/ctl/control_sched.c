/* SPDX-License-Identifier: ISC */
/* The control-plane client's schedule and its log-once rule. */
#include "control_sched.h"

#include <string.h>

uint64_t ctl_backoff_delay(uint64_t min, uint64_t max, uint32_t failures)
{
	uint64_t d = min;

	if (failures == 0)
		return 0;
	for (uint32_t i = 1; i < failures && d < max; i++)
		d = d > UINT64_MAX / 2 ? UINT64_MAX : d * 2;
	return d < max ? d : max;
}

void ctl_sched_init(struct ctl_sched *s, uint64_t interval, uint64_t backoff_min,
		    uint64_t backoff_max, bool enrolled, uint64_t now)
{
	*s = (struct ctl_sched){.interval = interval ? interval : 1,
				.backoff_min = backoff_min,
				.backoff_max = backoff_max,
				.enrolled = enrolled,
				.next = now};
}

void ctl_sched_enrolment(struct ctl_sched *s, enum ctl_result r, uint64_t now)
{
	if (r == CTL_OK || r == CTL_STATE_ERROR) {
		/* Enrolled (a credential held even when the file failed):
		 * the heartbeats start now. */
		s->enrolled = true;
		s->failures = 0;
		s->next = now;
		return;
	}
	if (s->failures < UINT32_MAX)
		s->failures++;
	/* A refused bootstrap token will not get better soon: the cap. */
	s->next = now + (r == CTL_REFUSED
			     ? s->backoff_max
			     : ctl_backoff_delay(s->backoff_min, s->backoff_max, s->failures));
}

void ctl_sched_heartbeat(struct ctl_sched *s, enum ctl_result r, uint64_t now)
{
	uint64_t next = s->next + s->interval;

	if (r == CTL_OK)
		s->failures = 0;
	else if (s->failures < UINT32_MAX)
		s->failures++;
	/* An answer that took longer than the interval: the first tick of
	 * the rhythm still ahead. */
	if (next <= now)
		next += ((now - next) / s->interval + 1) * s->interval;
	s->next = next;
}

enum ctl_result ctl_result_of_status(long status)
{
	if (status >= 200 && status < 300)
		return CTL_OK;
	if (status >= 400 && status < 500 && status != 429)
		return CTL_REFUSED;
	return CTL_HTTP_ERROR;
}

uint64_t ctl_reason_sig(const char *why)
{
	static const char after[] = "after ";
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	const char *p = why;

	if (!why || !*why)
		return 0;
	while (*p) {
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
		if (strncmp(p, after, sizeof(after) - 1) == 0) {
			for (unsigned k = 1; k < sizeof(after) - 1; k++)
				h = (h ^ (unsigned char)p[k]) * 1099511628211ull;
			p += sizeof(after) - 1;
			while (*p >= '0' && *p <= '9')
				p++;
			continue;
		}
		p++;
	}
	return h ? h : 1;
}

bool ctl_log_changed(struct ctl_logstate *l, enum ctl_result r, size_t routes, const char *why)
{
	uint64_t sig = ctl_reason_sig(why);
	bool changed = !l->any || l->result != r || l->routes != routes || l->why != sig;

	l->any = true;
	l->result = r;
	l->routes = routes;
	l->why = sig;
	return changed;
}
