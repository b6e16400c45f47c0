/* SPDX-License-Identifier: ISC */
/* Probe and heartbeat state machine. Pure: hb_step takes `now` and returns
 * what to send; the caller does the I/O. */
#ifndef ETR_HEARTBEAT_H
#define ETR_HEARTBEAT_H

#include <stdbool.h>
#include <stdint.h>

#define HB_CHALLENGE_LEN 16

/* A round started early (a refused send, or the game server heard from
 * while it was not up) starts at most this long after the previous early
 * round: a client hammering a closed port makes one probe round per
 * HB_KICK_GAP, not one per packet. */
#define HB_KICK_GAP (5 * 1000000000ull)

/* While the game server is down, a round starts this long after the last
 * one failed (or at the interval, if sooner): its return is announced within seconds, as the
 * game server itself heartbeats on its first frame. Three probes per round
 * to a closed port cost nothing. */
#define HB_DOWN_RETRY (5 * 1000000000ull)

/* A refused probe (the port is closed) ends its attempt this soon rather
 * than after the whole probe timeout. Every attempt still has to fail, so
 * a port closed for less than (attempts - 1) * HB_REFUSED_WAIT, as in a
 * quick restart, is not reported down. */
#define HB_REFUSED_WAIT (1000000000ull)

/* A master that has not challenged within this many heartbeat intervals
 * of a heartbeat is quiet. */
#define HB_MASTER_QUIET_INTERVALS 2

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
	HB_SEND_PROBE = 1 << 0,	    /* send getinfo <challenge> to the server */
	HB_SEND_HEARTBEAT = 1 << 1, /* send heartbeat <tag> to every master */
	HB_SEND_FLATLINE = 1 << 2,  /* send the flatline tag (if the game has one) */
	HB_LOG_UP = 1 << 3,	    /* server state changed to up */
	HB_LOG_DOWN = 1 << 4,	    /* server state changed to down */
	HB_ROUND_FAILED = 1 << 5,   /* every attempt of this round timed out */
};

struct hb {
	uint64_t interval;	/* ns between rounds */
	uint64_t probe_timeout; /* ns per attempt */
	unsigned attempts;	/* per round */
	enum hb_phase phase;
	enum hb_server server;
	unsigned attempt; /* 1..attempts while probing */
	uint64_t round_start;
	uint64_t deadline;
	uint64_t early_start; /* start of the last early round; 0 = none */
	bool early;	      /* the deadline was brought forward */
	char challenge[HB_CHALLENGE_LEN + 1];
};

/* What the relay knows of one master's listing. */
enum hb_master_state {
	HB_MASTER_NEW,	  /* no challenge since start, or since the server went down */
	HB_MASTER_LISTED, /* its challenge was answered through the relay */
	HB_MASTER_QUIET,  /* heartbeats for HB_MASTER_QUIET_INTERVALS, no challenge */
};

/* Bits of the hb_master_* results: what to log. */
enum hb_master_event {
	HB_MASTER_CONFIRMED = 1 << 0, /* first challenge (or first after a down) */
	HB_MASTER_BACK = 1 << 1,      /* a challenge after being quiet */
	HB_MASTER_WENT_QUIET = 1 << 2,
};

struct hb_master {
	enum hb_master_state state;
	uint64_t last_challenge; /* ns, 0 = never */
	uint64_t unanswered;	 /* first heartbeat since its last challenge; 0 = none */
};

/* Set up; the first round starts at the first hb_step. */
void hb_init(struct hb *h, uint64_t interval, uint64_t probe_timeout, unsigned attempts);

/* Advance to `now`. `rnd` seeds the challenge when a round starts. Returns
 * a mask of hb_action. */
unsigned hb_step(struct hb *h, uint64_t now, uint64_t rnd);

/* The game server answered the probe with this challenge. Returns actions. */
unsigned hb_probe_answered(struct hb *h, uint64_t now, const char *challenge);

/* A send to the game server was refused (ECONNREFUSED: its port is
 * closed). Unless it is known down, the next round starts now, or
 * HB_KICK_GAP after the last round started. */
void hb_refused(struct hb *h, uint64_t now);

/* The game server sent a session a datagram. If it was not up, the next
 * round starts now (limited as hb_refused), so that coming back is
 * announced at once. */
void hb_heard(struct hb *h, uint64_t now);

/* The probe socket reported ECONNREFUSED: the running attempt ends within
 * HB_REFUSED_WAIT. */
void hb_probe_refused(struct hb *h, uint64_t now);

/* The relay is exiting: HB_SEND_FLATLINE when the server was up. */
unsigned hb_shutdown(struct hb *h);

/* When hb_step wants to run next. */
static inline uint64_t hb_deadline(const struct hb *h)
{
	return h->deadline;
}

const char *hb_server_name(enum hb_server s);

/* A heartbeat left for this master. */
void hb_master_heartbeat(struct hb_master *m, uint64_t now);

/* The master's challenge was answered through the relay. Returns
 * HB_MASTER_CONFIRMED, HB_MASTER_BACK or 0 (already listed). */
unsigned hb_master_challenged(struct hb_master *m, uint64_t now);

/* Returns HB_MASTER_WENT_QUIET, once, when the master has not challenged
 * within HB_MASTER_QUIET_INTERVALS heartbeat intervals of a heartbeat. */
unsigned hb_master_check(struct hb_master *m, uint64_t now, uint64_t interval);

/* When hb_master_check has something to decide; UINT64_MAX: never. */
uint64_t hb_master_deadline(const struct hb_master *m, uint64_t interval);

/* The game server went down: the listing is withdrawn (or dies out), and
 * the master owes no challenge until the next heartbeat. */
void hb_master_withdrawn(struct hb_master *m);

#endif
