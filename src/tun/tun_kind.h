/* SPDX-License-Identifier: ISC */
/* The tunnel as a listener kind (loop/kind.h): at start, the WireGuard
 * interface of the [tunnel] section keyed with a key made in memory, its
 * port and the relay's tunnel address set; then, on the control thread,
 * the peers of every good heartbeat; on every worker, rung 3's
 * connections (tun_r3.h), handed over by the SNI listeners. */
#ifndef ETR_TUN_KIND_H
#define ETR_TUN_KIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kind.h"
#include "stats.h"
#include "wgpeers.h"

/* The most peers the interface is given (the control plane's set is
 * refused past it). */
#define TUN_PEERS_MAX 4096

/* etrelay_tunnel_reconciles_total's results (struct tun_stats). */
enum tun_reconcile_result { TUN_RECONCILE_OK, TUN_RECONCILE_FAILED, TUN_RECONCILE_RESULTS };

extern const struct kind tun_kind;

/* The bounds of the handshake age histogram (struct tun_stats's age_hist),
 * ns. */
extern const uint64_t tun_age_bound_ns[STATS_TUN_AGE_BUCKETS];

/* What the heartbeat reports: the interface's public key (base64) and
 * listen port. false: no tunnel open (shared NULL, or not configured). */
bool tun_wireguard(const void *shared, char pub[WGP_KEY_B64_LEN + 1], uint16_t *port);

/* The control thread: make the interface's peers want[0..n) (sorted in
 * place), blocking, bounded by the device's timeout. Returns 0, or
 * -errno with why in err (the interface keeps what the failed request had
 * not reached). */
int tun_set_peers(void *shared, struct wgp_peer *want, size_t n, char *err, size_t errlen);

/* The control thread: the control plane's peer set did not parse (why):
 * the interface keeps its peers; counted as a failed reconcile and shown
 * in /lifecycle. */
void tun_peers_refused(void *shared, const char *why);

/* The counters /metrics reads: peers on the interface after the last
 * reconcile, reconciles by result. */
void tun_counters(const void *shared, uint64_t *peers, uint64_t reconciles[TUN_RECONCILE_RESULTS]);

struct tun_cert;

/* The tunnel certificate's holder (tun_cert.h), NULL: no tunnel open. */
struct tun_cert *tun_kind_cert(void *shared);

/* The control thread: the heartbeat's rung-3 tokens list[0..n) are the set
 * in force from now on; when it changed, every worker takes it (a
 * connection whose token left is closed, 1008). Returns 0, or -1 with why
 * in err (the set in force stays). */
int tun_set_tokens(void *shared, char *const *list, size_t n, char *err, size_t errlen);

/* On a worker's thread, its instance inst: a rung-3 connection an SNI
 * listener of that worker hands over (sni_tunnel's take): fd, its peer and
 * the len bytes read from it at pre. 0, or -errno: not taken, the caller
 * closes fd. Nothing calls it yet (the daemon's hook is the next step). */
int tun_kind_take(void *inst, int fd, const union etr_sockaddr *peer, const uint8_t *pre,
		  size_t len);

#endif
