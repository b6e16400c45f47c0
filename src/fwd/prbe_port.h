/* SPDX-License-Identifier: ISC */
/* The PRBE echo on a UDP socket: an echo-only port (prbe-listen) as an
 * endpoint of its own on a worker, and the answer both it and a relay's
 * public socket (prbe yes) give: prbe_check, then a copy of the same bytes
 * back to the source through the loop, counted. Pure: the caller binds the
 * socket and passes it in. */
#ifndef ETR_PRBE_PORT_H
#define ETR_PRBE_PORT_H

#include <stdbool.h>
#include <stdint.h>

#include "addr.h"
#include "banlist.h"
#include "endpoint.h"
#include "loop.h"
#include "prbe.h"
#include "ratelimit.h"
#include "stats.h"

/* Sources tracked per echo port (per relay with prbe yes), for every
 * worker together: 512 KiB; more sources recycle idle buckets. */
#define PRBE_PORT_RL_ENTRIES 16384

/* The rules one echo socket keeps (one worker's part). */
struct prbe_port_conf {
	uint32_t rl_entries;  /* sources tracked (0: PRBE_PORT_RL_ENTRIES) */
	unsigned burst, rate; /* per source IP (IPv6 /64) */
	/* This socket's part of the listener's, every source together (0:
	 * no such bound): prbe_budget. */
	unsigned listener_burst, listener_rate;
	uint16_t len_max;
	const uint16_t *ports; /* every echo port, refused as source ports */
	unsigned nports;
	bool listener_loopback; /* 127/8 and ::1 sources are real here */
};

/* An echo-only port on one worker. */
struct prbe_port {
	struct prbe p;
	struct rl_table rl;
	struct prbe_stats *stats;
	const struct banlist *bans; /* the daemon's current list, NULL: none */
	int fd;
	const struct loop_ops *ops;
	struct loop *loop;
	struct endpoint_table *ep;
	unsigned slot;
	bool attached;
};

/* Endpoints a port registers (prbe_port_attach). */
#define PRBE_PORT_ENDPOINTS 1

/* A rate table and decision for c (key: the table's hash key). Returns 0
 * or -errno; the relay's public socket uses this too. */
int prbe_port_rules(struct prbe *p, struct rl_table *rl, const struct prbe_port_conf *c,
		    const uint8_t key[16]);

/* Set up e for bound UDP socket fd (the caller's to close, after
 * prbe_port_free), counting in st. Returns 0 or -errno. */
int prbe_port_init(struct prbe_port *e, int fd, const struct prbe_port_conf *c,
		   const uint8_t key[16], struct prbe_stats *st);

/* Register its endpoint in ep and its socket with the loop. Returns 0 or
 * -errno (-ENOSPC: the table is full). */
int prbe_port_attach(struct prbe_port *e, const struct loop_ops *ops, struct loop *l,
		     struct endpoint_table *ep);

/* Leave the endpoint table, free the rate table (not the fd). */
void prbe_port_free(struct prbe_port *e);

/* Decide about datagram d from src and, for PRBE_ECHO, queue a copy of its
 * bytes back to src from fd (on_sent: loop id `id`, to be passed to
 * prbe_port_sent). A truncated datagram is over the size cap. Counts every
 * verdict but the echo in st, which prbe_port_sent counts. Returns the
 * verdict (PRBE_ECHO only when the send was queued; a refused one counts
 * as send_error and returns PRBE_VERDICTS). */
unsigned prbe_port_answer(struct prbe *p, struct prbe_stats *st, const struct loop_ops *ops,
			  struct loop *l, int fd, const union etr_sockaddr *src,
			  const struct loop_dgram *d, uint32_t id);

/* The echo queued by prbe_port_answer finished with res (bytes or -errno). */
void prbe_port_sent(struct prbe_stats *st, int res);

/* Whether d starts with the probe's magic (the cheap test before a
 * session lookup on a shared port). */
static inline bool prbe_port_magic(const struct loop_dgram *d)
{
	return d->len >= PRBE_MAGIC_LEN && d->data[0] == 'P' && d->data[1] == 'R' &&
	       d->data[2] == 'B' && d->data[3] == 'E';
}

#endif
