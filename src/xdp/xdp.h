/* SPDX-License-Identifier: ISC */
/* The XDP front door: the program (etrelay.bpf.c) loaded from the binary,
 * attached to the interfaces xdp-interface names, its maps filled from the
 * configuration and the ban file, its counters read for /metrics. Without
 * the capability, kernel support or a build with it, etrelay runs as
 * without it and says why once. */
#ifndef ETR_XDP_H
#define ETR_XDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "banlist.h"
#include "config.h"

struct xdp;

/* The counters, etrelay_xdp_packets_total{listener,result}: a listener's
 * results together, listener by listener (out[l * XDP_REASONS + r]); then
 * etrelay_xdp_lines_unwalked_total, the game's lines the walk budget left
 * unwalked (out[XDP_UNWALKED]). */
#define XDP_LISTENERS	  3
#define XDP_LISTENER_GAME 0 /* the listener whose lines are walked */
#define XDP_REASONS	  7
#define XDP_UNWALKED	  (XDP_LISTENERS * XDP_REASONS)
#define XDP_COUNTS	  (XDP_UNWALKED + 1)

/* Listener l's label value: game, turn, prbe. */
const char *xdp_listener_name(unsigned l);

/* Result r's label value: passed, known, bogon, banned, shape, rate,
 * budget. */
const char *xdp_result_name(unsigned r);

/* The bucket of each source the program does not know: xdp-rate and
 * xdp-burst where given, else the sum of the listeners' own per-source
 * limits on what they take from such a source (each game relay's
 * ip-query-rate and ip-query-burst, each echo port's prbe-rate and
 * prbe-burst, each TURN listener's unauth-ip-* and auth-fail-ip-*), so
 * that the program never drops what the relay would take. */
void xdp_rates(const struct etr_conf *c, uint32_t *rate, uint32_t *burst);

/* The budget, per CPU, of frames from every source not known together
 * (each also within its own bucket): the sum of the listeners' own limits
 * on what they take from all such sources (each game relay's
 * server-query-rate and -burst, session-rate and its query cache's
 * query-cache-rate, each echo port's prbe-listener-rate and -burst, each
 * TURN listener's unauth-* and auth-fail-*), the burst at most
 * XDP_BUDGET_BURST_MAX (256): what a listener's receive queue takes. */
void xdp_budget(const struct etr_conf *c, uint32_t *rate, uint32_t *burst);

/* What a start refuses: an interface that does not exist, said as
 * "PATH:LINE: xdp-interface IF: no such interface" in err. 0, or -ENODEV. */
int xdp_check(const struct etr_conf *c, char *err, size_t n);

/* Load the program, fill its ports and bucket from c, attach it to every
 * xdp-interface (native mode where the driver has it, else generic; each
 * said in the log). *out is NULL when c names no interface or XDP cannot
 * run here (said once, and in why). 0, or -ENODEV for an interface
 * xdp_check refuses (logged). */
int xdp_start(struct xdp **out, const struct etr_conf *c, char *why, size_t n);

/* The banned map from b (x NULL: nothing). 0 or -errno (logged). */
int xdp_bans(struct xdp *x, const struct banlist *b);

/* A source the program passes at once (a known session's), and its end:
 * counted, it stays known until its last session ends. 0 or -errno
 * (-ENOSPC: the map is full, the source goes by its bucket). Any thread. */
int xdp_known_add(struct xdp *x, const union etr_sockaddr *a);
int xdp_known_del(struct xdp *x, const union etr_sockaddr *a);

/* The counters, summed over the CPUs, into out[XDP_COUNTS]. Any thread. */
void xdp_counts(struct xdp *x, uint64_t out[XDP_COUNTS]);

/* "native", "generic" or "mixed" over the attached interfaces. */
const char *xdp_mode(const struct xdp *x);

/* Detach from every interface and free x (NULL: nothing). */
void xdp_stop(struct xdp *x);

#endif
