/* SPDX-License-Identifier: ISC */
/* The kernel's way to a WireGuard interface: generic netlink messages of
 * the "wireguard" family (linux/wireguard.h), written and read here
 * without a library. Pure: buffers in, buffers out, no sockets.
 *
 * A get is a dump: the kernel may split one device over several messages,
 * the first with the device's attributes, the rest with its name and more
 * peers; a peer whose allowed IPs did not fit continues in the next
 * message under the same public key, and is joined here. A set carries as
 * many whole operations of a plan (wgp_plan) as fit in one message; the
 * caller sends the rest in the next (sys/nlmsg.h's nl_request waits for
 * each acknowledgement). Buffers are 4-byte aligned, as netlink's are. */
#ifndef ETR_WGNL_H
#define ETR_WGNL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wgpeers.h"

/* Room for one request: wg(8) splits its sets at the same size. */
#define WGNL_MSG_MAX 8192

/* The longest interface name (IFNAMSIZ less its NUL). */
#define WGNL_IFNAME_MAX 15

/* CTRL_CMD_GETFAMILY for "wireguard" into out. Returns its length or
 * -ENOSPC. */
int wgnl_family_request(uint8_t *out, size_t cap, uint32_t seq);

/* The family's id from the controller's answer (one message): > 0, the
 * kernel's -errno when it answered an error (-ENOENT: no WireGuard in this
 * kernel), -EPROTO when malformed. */
int wgnl_family_parse(const uint8_t *msg, size_t len);

/* The dump request of interface ifname's device and peers. Returns its
 * length, -EINVAL for a name too long, or -ENOSPC. */
int wgnl_get_request(uint8_t *out, size_t cap, uint16_t family, uint32_t seq, const char *ifname);

/* What a get has read so far. Set dev, peers and cap, zero the rest. */
struct wgnl_get {
	struct wgp_device *dev;
	struct wgp_peer *peers;
	size_t cap, n;
	bool done;
	bool over; /* the device has more than cap peers (the rest skipped) */
};

/* Read one datagram of the dump's answer (one or more messages). Returns
 * 0 (more to come; g->done once NLMSG_DONE was read; g->over when peers
 * past cap were skipped), the kernel's -errno when it answered an error,
 * -EPROTO for a malformed message or one of another sequence. */
int wgnl_get_parse(struct wgnl_get *g, const uint8_t *buf, size_t len, uint32_t seq);

/* A set of ifname carrying ops[0..nops) from the first: as many whole ops
 * as fit in cap, *done of them. Returns its length, -EINVAL for a name
 * too long, or -ENOSPC when not even one op fits. */
int wgnl_set_request(uint8_t *out, size_t cap, uint16_t family, uint32_t seq, const char *ifname,
		     const struct wgp_op *ops, size_t nops, size_t *done);

/* A set of the device itself: its private key and listen port. */
int wgnl_device_request(uint8_t *out, size_t cap, uint16_t family, uint32_t seq, const char *ifname,
			const uint8_t priv[WGP_KEY_LEN], uint16_t port);

#endif
