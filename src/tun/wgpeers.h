/* SPDX-License-Identifier: ISC */
/* WireGuard peers for the tunnel (seed 002): the set the control plane
 * sends on every heartbeat reconciled with the interface's by a plan of the
 * fewest operations (a peer whose key, allowed IPs and preshared key did
 * not change is never touched: touching it would not reset its session,
 * but replacing the set would), and the text of the cross-platform
 * userspace API (wireguard-go's /var/run/wireguard/IFACE.sock) that carries
 * a plan and reads an interface back. Pure: no sockets, no allocation.
 *
 * The userspace API (wireguard.com/xplatform): a request is `set=1` or
 * `get=1`, then `key=value` lines, then an empty line; keys are hex there
 * (the control plane and wg(8) spell them in base64). A `set` names each
 * peer by `public_key=`, then its changes: `remove=true`,
 * `preshared_key=` (all zero: none), `replace_allowed_ips=true` and
 * `allowed_ip=` lines. The answer to either ends with `errno=N` and an
 * empty line; a `get` answers the device's keys, then per peer
 * `public_key=` and its keys (a peer without a preshared key shows 64
 * zeros). Endpoints are the gateways': the relay never sets one. */
#ifndef ETR_WGPEERS_H
#define ETR_WGPEERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WGP_KEY_LEN	32
#define WGP_KEY_B64_LEN 44 /* base64 of 32 bytes, one '=' */
#define WGP_KEY_HEX_LEN 64

/* Allowed IPs kept per peer: a gateway has its tunnel address, perhaps a
 * network or two behind it. A device reporting more is marked, and its
 * peer is never taken for unchanged. */
#define WGP_ALLOWED_MAX 16

/* Longest text of one CIDR: an IPv6 address (45), '/', three digits. */
#define WGP_CIDR_STRLEN 50

/* An allowed IP: a network, host bits zero (as WireGuard keeps it). */
struct wgp_cidr {
	uint8_t family; /* AF_INET or AF_INET6 */
	uint8_t bits;	/* 0..32 or 0..128 */
	uint8_t addr[16];
};

/* One peer, desired (from the control plane) or current (from a get). */
struct wgp_peer {
	uint8_t key[WGP_KEY_LEN];
	uint8_t psk[WGP_KEY_LEN]; /* all zero: no preshared key */
	uint16_t n_allowed;
	bool allowed_over; /* a get listed more than WGP_ALLOWED_MAX */
	struct wgp_cidr allowed[WGP_ALLOWED_MAX];
	int64_t handshake_sec; /* last handshake (a get's; 0: never) */
	uint32_t handshake_nsec;
};

/* What a get says of the device itself. */
struct wgp_device {
	uint16_t listen_port;
	uint32_t fwmark;
	bool has_private_key;
	uint8_t private_key[WGP_KEY_LEN]; /* when has_private_key (wipe it after) */
};

enum wgp_op_kind {
	WGP_OP_REMOVE, /* a current peer missing from the desired set */
	WGP_OP_UPDATE, /* same key, other allowed IPs or preshared key */
	WGP_OP_ADD,    /* a desired peer the interface lacks */
};

/* One operation of a plan: peer is the desired peer (add, update) or the
 * current one (remove); it points into the arrays given to wgp_plan. */
struct wgp_op {
	uint8_t kind; /* enum wgp_op_kind */
	bool psk_changed, allowed_changed;
	const struct wgp_peer *peer;
};

/* A new key pair for the interface (X25519 via libcrypto, the private key
 * clamped as wg genkey writes it): kept in memory only, the public key
 * reported in the heartbeat. Returns 0 or -EIO. */
int wgp_keypair(uint8_t priv[WGP_KEY_LEN], uint8_t pub[WGP_KEY_LEN]);

/* The public key of a private key. Returns 0 or -EIO. */
int wgp_public_key(const uint8_t priv[WGP_KEY_LEN], uint8_t pub[WGP_KEY_LEN]);

/* Whether the device a get read is not the one the relay keyed: no
 * private key, another one, or another listen port than port (a new
 * device: wireguard-go restarted, or an operator's `wg set`). The keys
 * compare in constant time. */
bool wgp_device_differs(const struct wgp_device *dev, const uint8_t priv[WGP_KEY_LEN],
			uint16_t port);

/* A key as the control plane sends it: the canonical base64 of 32 bytes. */
bool wgp_key_from_b64(const char *s, size_t n, uint8_t key[WGP_KEY_LEN]);

/* The same, written (out: WGP_KEY_B64_LEN + 1 bytes, NUL-terminated). */
void wgp_key_to_b64(const uint8_t key[WGP_KEY_LEN], char out[WGP_KEY_B64_LEN + 1]);

/* "10.8.0.2/32", "fd00::2/128", or an address alone (a host). Host bits
 * are cleared, as WireGuard does, so the same network compares equal.
 * Returns 0 or -EINVAL. */
int wgp_cidr_parse(const char *s, size_t n, struct wgp_cidr *c);

/* The text of c ("10.8.0.0/24"), NUL-terminated; returns its length. */
size_t wgp_cidr_str(const struct wgp_cidr *c, char out[WGP_CIDR_STRLEN]);

/* Sort p's allowed IPs and drop repeats: two lists of the same networks
 * compare equal after it. */
void wgp_peer_canon(struct wgp_peer *p);

/* A control plane's set p[0..n) that WireGuard would not keep as given:
 * a peer with the interface's own public key own (wireguard-go drops it
 * and the count would lie), or one network among two peers' allowed IPs
 * (the interface gives it to the last, and the set would move it at every
 * reconcile). Returns 0, or -EINVAL with why in err; -ENOMEM. */
int wgp_set_check(const struct wgp_peer *p, size_t n, const uint8_t own[WGP_KEY_LEN], char *err,
		  size_t errlen);

/* A control plane's set p[0..n) with an allowed IP that holds the
 * relay's own tunnel address addr (4 or 16 bytes of family; its
 * network's, prefix bits, such as 10.8.0.0/24, or any wider block holds
 * it too) or its network's own address (10.8.0.0): the relay's traffic to
 * itself and from a peer in its name would be that peer's. Returns 0, or
 * -EINVAL with why in err. */
int wgp_set_check_self(const struct wgp_peer *p, size_t n, int family, const uint8_t *addr,
		       unsigned prefix, char *err, size_t errlen);

/* The plan that makes the interface's peers cur[0..ncur) the set
 * want[0..nwant): removes first, then updates, then adds, each in key
 * order. Sorts both arrays by key and canonicalizes their allowed IPs (the
 * ops point into them). Returns the number of ops written to ops (at most
 * ncur + nwant), -EINVAL when a key appears twice in either set (the
 * control plane's set is then refused whole: keep the current peers), or
 * -ENOSPC when cap is short. */
int wgp_plan(struct wgp_peer *cur, size_t ncur, struct wgp_peer *want, size_t nwant,
	     struct wgp_op *ops, size_t cap);

/* A `set=1` request carrying ops[0..nops) into out, as many whole ops as
 * fit, the empty line included; *done says how many (send the rest in the
 * next request). Returns its length, or -ENOSPC when not even one op fits. */
int wgp_uapi_set(char *out, size_t cap, const struct wgp_op *ops, size_t nops, size_t *done);

/* A `set=1` request for the device itself: its private key and listen
 * port (peers untouched). Returns its length, or -ENOSPC. */
int wgp_uapi_device(char *out, size_t cap, const uint8_t priv[WGP_KEY_LEN], uint16_t port);

/* Read the answer to `get=1` (the text up to and with its empty line):
 * the device into dev, the peers into peers[0..cap), their number into
 * *npeers. Unknown keys are skipped. Returns 0, the answer's -errno when
 * it reports one, -EPROTO for a malformed or truncated answer, -E2BIG when
 * the device has more than cap peers. */
int wgp_uapi_parse_get(const char *text, size_t len, struct wgp_device *dev, struct wgp_peer *peers,
		       size_t cap, size_t *npeers);

/* Read the answer to `set=1` ("errno=N" and an empty line): 0, -N, or
 * -EPROTO. */
int wgp_uapi_errno(const char *text, size_t len);

/* How long ago each of peers p[0..n) (skip[i] set: left out; skip may be
 * NULL) last completed a handshake, at unix time now_sec.now_nsec: the ages
 * into hist[0..nb] (hist[b]: up to bound_ns[b], ascending; hist[nb]: the
 * rest), their sum in ns into *sum_ns, and the peers that never did into
 * *never (not in hist). A handshake after now (the clock stepped back) is
 * age 0. */
void wgp_ages(const struct wgp_peer *p, size_t n, const bool *skip, int64_t now_sec,
	      uint32_t now_nsec, const uint64_t *bound_ns, unsigned nb, uint64_t *hist,
	      uint64_t *sum_ns, uint64_t *never);

#endif
