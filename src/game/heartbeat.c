/* SPDX-License-Identifier: ISC */
/* Heartbeat rounds: probe the game server (N attempts), then heartbeat the
 * masters if it answered, or flatline once when it stopped answering. Every
 * phase change sets its deadline on the same line. Rounds come early on a
 * sign of change (a refusal, an answer while down), and more often while
 * the server is down. Also each master's health: its challenges against
 * our heartbeats. */
#include "heartbeat.h"

#include <string.h>

void hb_init(struct hb *h, uint64_t interval, uint64_t probe_timeout, unsigned attempts)
{
	memset(h, 0, sizeof(*h));
	h->interval = interval;
	h->probe_timeout = probe_timeout;
	h->attempts = attempts ? attempts : 1;
	h->phase = HB_IDLE;
	h->server = HB_UNKNOWN;
	h->deadline = 0; /* the first hb_step starts a round */
}

static void new_challenge(struct hb *h, uint64_t rnd)
{
	static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";

	/* 12 base-36 characters: printable, no backslash, unguessable enough
	 * to reject stray infoResponses. */
	for (int i = 0; i < 12; i++) {
		h->challenge[i] = digits[rnd % 36];
		rnd /= 36;
	}
	h->challenge[12] = '\0';
}

unsigned hb_step(struct hb *h, uint64_t now, uint64_t rnd)
{
	unsigned act = 0;

	if (now < h->deadline)
		return 0;
	if (h->phase == HB_IDLE) {
		new_challenge(h, rnd);
		h->round_start = now;
		if (h->early)
			h->early_start = now, h->early = false;
		h->attempt = 1;
		h->phase = HB_PROBING, h->deadline = now + h->probe_timeout;
		return HB_SEND_PROBE;
	}
	/* Probing and the attempt timed out. */
	if (h->attempt < h->attempts) {
		h->attempt++;
		h->deadline = now + h->probe_timeout;
		return HB_SEND_PROBE;
	}
	act = HB_ROUND_FAILED;
	if (h->server == HB_UP)
		act |= HB_SEND_FLATLINE | HB_LOG_DOWN;
	else if (h->server == HB_UNKNOWN)
		act |= HB_LOG_DOWN;
	h->server = HB_DOWN;
	h->phase = HB_IDLE, h->deadline = h->round_start + h->interval;
	if (h->deadline > now + HB_DOWN_RETRY)
		h->deadline = now + HB_DOWN_RETRY;
	if (h->deadline < now)
		h->deadline = now;
	return act;
}

unsigned hb_probe_answered(struct hb *h, uint64_t now, const char *challenge)
{
	unsigned act = HB_SEND_HEARTBEAT;

	if (h->phase != HB_PROBING || strcmp(challenge, h->challenge) != 0)
		return 0;
	if (h->server != HB_UP)
		act |= HB_LOG_UP;
	h->server = HB_UP;
	h->phase = HB_IDLE, h->deadline = h->round_start + h->interval;
	if (h->deadline < now)
		h->deadline = now;
	return act;
}

/* Start the next round early, unless one runs (it will tell). */
static void kick(struct hb *h, uint64_t now)
{
	uint64_t at = now;

	if (h->phase != HB_IDLE)
		return;
	if (h->early_start && at < h->early_start + HB_KICK_GAP)
		at = h->early_start + HB_KICK_GAP;
	if (at < h->deadline)
		h->deadline = at, h->early = true;
}

void hb_refused(struct hb *h, uint64_t now)
{
	if (h->server != HB_DOWN)
		kick(h, now);
}

void hb_heard(struct hb *h, uint64_t now)
{
	if (h->server != HB_UP)
		kick(h, now);
}

void hb_probe_refused(struct hb *h, uint64_t now)
{
	if (h->phase == HB_PROBING && h->deadline > now + HB_REFUSED_WAIT)
		h->deadline = now + HB_REFUSED_WAIT;
}

unsigned hb_shutdown(struct hb *h)
{
	return h->server == HB_UP ? HB_SEND_FLATLINE : 0;
}

const char *hb_server_name(enum hb_server s)
{
	switch (s) {
	case HB_UP:
		return "up";
	case HB_DOWN:
		return "down";
	default:
		return "unknown";
	}
}

void hb_master_heartbeat(struct hb_master *m, uint64_t now)
{
	if (!m->unanswered)
		m->unanswered = now ? now : 1;
}

unsigned hb_master_challenged(struct hb_master *m, uint64_t now)
{
	enum hb_master_state was = m->state;

	m->state = HB_MASTER_LISTED;
	m->last_challenge = now;
	m->unanswered = 0;
	if (was == HB_MASTER_QUIET)
		return HB_MASTER_BACK;
	return was == HB_MASTER_NEW ? HB_MASTER_CONFIRMED : 0;
}

uint64_t hb_master_deadline(const struct hb_master *m, uint64_t interval)
{
	if (!m->unanswered || m->state == HB_MASTER_QUIET)
		return UINT64_MAX;
	return m->unanswered + HB_MASTER_QUIET_INTERVALS * interval;
}

unsigned hb_master_check(struct hb_master *m, uint64_t now, uint64_t interval)
{
	if (now < hb_master_deadline(m, interval))
		return 0;
	m->state = HB_MASTER_QUIET;
	return HB_MASTER_WENT_QUIET;
}

void hb_master_withdrawn(struct hb_master *m)
{
	m->state = HB_MASTER_NEW;
	m->unanswered = 0;
}
