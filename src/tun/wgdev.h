/* SPDX-License-Identifier: ISC */
/* A WireGuard interface, reached one of two ways behind the same calls:
 * wireguard-go's userspace API socket (DIR/IFNAME.sock) when there is one,
 * else the kernel's generic netlink family. Each call is blocking and
 * bounded by the device's timeout: the thread that reads the heartbeat's
 * answer reconciles, never a worker. */
#ifndef ETR_WGDEV_H
#define ETR_WGDEV_H

#include <stddef.h>
#include <stdint.h>

#include "wgnl.h"
#include "wgpeers.h"

/* Where wireguard-go puts its sockets. */
#define WGDEV_UAPI_DIR "/var/run/wireguard"

enum wgdev_way {
	WGDEV_UAPI,   /* wireguard-go: the userspace API socket */
	WGDEV_KERNEL, /* the kernel's "wireguard" generic netlink family */
};

struct wgdev {
	enum wgdev_way way;
	char ifname[WGNL_IFNAME_MAX + 1];
	char sock[108]; /* WGDEV_UAPI: the socket's path */
	int nl;		/* WGDEV_KERNEL: the netlink socket */
	uint16_t family;
	uint32_t seq;
	int timeout_ms; /* per request (default 2 000) */
	size_t max_req; /* bytes per set request (default: WGNL_MSG_MAX) */
	char *ans;	/* WGDEV_UAPI: the last answer */
	size_t ans_cap;
	/* What wgdev_set_device gave it, put back by a reconcile that finds
	 * another (keyed: it was given). Wiped at close. */
	bool keyed;
	uint16_t port;
	uint8_t priv[WGP_KEY_LEN];
};

/* What one reconcile did. */
struct wgdev_result {
	unsigned removed, updated, added, requests;
	size_t current; /* peers the get read (cur[0..current), sorted by key) */
	bool restored;	/* the device had lost its key or port: given again */
};

/* Open interface ifname: its socket in uapi_dir (NULL: WGDEV_UAPI_DIR)
 * when there is one, else the kernel's family. Returns 0, -EINVAL for a
 * bad name, -ENODEV when neither way has the interface's family (no
 * socket, and no WireGuard in the kernel), or -errno. Whether the kernel
 * has the interface itself shows at the first get (-ENODEV). */
int wgdev_open(struct wgdev *d, const char *ifname, const char *uapi_dir);

/* The device and its peers (cap of them). Returns 0, -E2BIG when it has
 * more, -ETIMEDOUT, -EPROTO, or the device's -errno. */
int wgdev_get(struct wgdev *d, struct wgp_device *dev, struct wgp_peer *peers, size_t cap,
	      size_t *npeers);

/* Carry out a plan, in requests of at most max_req bytes. Returns 0 or
 * the first failure (the ops before it are done; *requests says how many
 * requests went out). */
int wgdev_apply(struct wgdev *d, const struct wgp_op *ops, size_t nops, unsigned *requests);

/* Give the device its private key and listen port (kept in d: a
 * reconcile puts them back on a device that lost them). */
int wgdev_set_device(struct wgdev *d, const uint8_t priv[WGP_KEY_LEN], uint16_t port);

/* Make the device's peers the set want[0..nwant): a get into cur[0..cap),
 * the plan (ops: room for cap + nwant), the sets. An unchanged peer is not
 * touched. After a wgdev_set_device, a device the get finds without that
 * key or port (wireguard-go restarted: a new device, no key, a random
 * port, no peers) is given them again first (r->restored). Sorts want.
 * Returns 0, or what failed (-EINVAL: a key twice in want; the device
 * keeps its peers then). */
int wgdev_reconcile(struct wgdev *d, struct wgp_peer *want, size_t nwant, struct wgp_peer *cur,
		    size_t cap, struct wgp_op *ops, struct wgdev_result *r);

void wgdev_close(struct wgdev *d);

/* A kernel interface ifname of the "wireguard" kind (rtnetlink; needs
 * CAP_NET_ADMIN): 0, -EEXIST when there is one, -EOPNOTSUPP where the
 * kernel has no WireGuard, -EPERM. */
int wgdev_create(const char *ifname, int timeout_ms);

/* Interface ifname deleted (at exit, when wgdev_create made it): 0 or
 * -errno (-ENODEV: it is gone already). */
int wgdev_delete(const char *ifname, int timeout_ms);

/* Interface ifname (either way's) gets addr (4 or 16 bytes of family) with
 * prefix, the relay's own tunnel address, and goes up: 0, -EEXIST when it
 * had the address already (up all the same), or -errno. */
int wgdev_address(const char *ifname, int family, const uint8_t *addr, unsigned prefix,
		  int timeout_ms);

/* The same address off interface ifname (at exit, when wgdev_address
 * added it): 0 or -errno (-ENODEV: the interface is gone, and the address
 * with it). */
int wgdev_address_del(const char *ifname, int family, const uint8_t *addr, unsigned prefix,
		      int timeout_ms);

#endif
