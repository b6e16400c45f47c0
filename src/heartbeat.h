/* SPDX-License-Identifier: ISC */
/* Probe and heartbeat state machine. Pure: hb_step takes `now` and returns
 * what to send; the caller does the I/O. */
#ifndef ETR_HEARTBEAT_H
#define ETR_HEARTBEAT_H

#include <stdbool.h>
#include <stdint.h>

#define HB_CHALLENGE_LEN 16

enum hb_server {
	HB_UNKNOWN, /* never answered yet */
	HB_UP,
	HB_DOWN,
};

enum hb_phase {
	HB_PROBING, /* a probe is out, waiting for its answer */
	HB_IDLE,    /* waiting for the next round */
};

/* Bits of hb_step's result: what the caller must do now. */
enum hb_action {
	HB_SEND_PROBE = 1 << 0,     /* send getinfo <challenge> to the server */
	HB_SEND_HEARTBEAT = 1 << 1, /* send heartbeat <tag> to every master */
	HB_SEND_FLATLINE = 1 << 2,  /* send the flatline tag (if the game has one) */
	HB_LOG_UP = 1 << 3,         /* server state changed to up */
	HB_LOG_DOWN = 1 << 4,       /* server state changed to down */
	HB_ROUND_FAILED = 1 << 5,   /* every attempt of this round timed out */
};

struct hb {
	uint64_t interval;      /* ns between rounds */
	uint64_t probe_timeout; /* ns per attempt */
	unsigned attempts;      /* per round */
	enum hb_phase phase;
	enum hb_server server;
	unsigned attempt; /* 1..attempts while probing */
	uint64_t round_start;
	uint64_t deadline;
	char challenge[HB_CHALLENGE_LEN + 1];
};

/* Set up; the first round starts at the first hb_step. */
void hb_init(struct hb *h, uint64_t interval, uint64_t probe_timeout, unsigned attempts);

/* Advance to `now`. `rnd` seeds the challenge when a round starts. Returns
 * a mask of hb_action. */
unsigned hb_step(struct hb *h, uint64_t now, uint64_t rnd);

/* The game server answered the probe with this challenge. Returns actions. */
unsigned hb_probe_answered(struct hb *h, uint64_t now, const char *challenge);

/* The relay is exiting: HB_SEND_FLATLINE when the server was up. */
unsigned hb_shutdown(struct hb *h);

/* When hb_step wants to run next. */
static inline uint64_t hb_deadline(const struct hb *h)
{
	return h->deadline;
}

const char *hb_server_name(enum hb_server s);

#endif
