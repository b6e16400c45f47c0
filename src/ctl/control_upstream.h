/* SPDX-License-Identifier: ISC */
/* Which upstreams the control plane's routes may name. The control plane
 * is another party: a route it sends must not turn the relay into a way
 * into the host (loopback, its own listeners), the cloud's metadata service
 * or the private networks behind it, unless the operator listed the block
 * (control-allow-upstream). The ranges are addrclass.c's, as for TURN
 * peers. Pure. */
#ifndef ETR_CONTROL_UPSTREAM_H
#define ETR_CONTROL_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "config.h"
#include "addrclass.h"

/* The daemon's listening sockets, and the host's addresses. */
#define CTL_UPSTREAM_LISTENERS_MAX 64
#define CTL_UPSTREAM_HOST_MAX	   256

/* Why an upstream is taken or refused (a metric label each). */
enum ctl_upstream_why {
	CTL_UPSTREAM_OK,       /* a globally reachable address */
	CTL_UPSTREAM_ALLOWED,  /* in a control-allow-upstream block */
	CTL_UPSTREAM_LISTENER, /* one of the relay's own listeners, whatever is allowed */
	CTL_UPSTREAM_HOST,     /* this host (loopback, an interface), not listed alone */
	CTL_UPSTREAM_PRIVATE,  /* private or link-local (metadata), not listed */
	CTL_UPSTREAM_RESERVED, /* another address that is not global unicast */
	CTL_UPSTREAM_WHYS
};

struct ctl_upstream_policy {
	struct addr_cidr allow[CONF_CONTROL_ALLOW_MAX];
	uint8_t host[CTL_UPSTREAM_HOST_MAX][16]; /* IPv4 as ::ffff:a.b.c.d */
	struct {
		uint8_t ip[16]; /* all zero: a wildcard, every address of the host */
		uint16_t port;	/* host order */
		char what[CONF_NAME_MAX + 16];
	} listener[CTL_UPSTREAM_LISTENERS_MAX];
	unsigned nallow, nhost, nlisteners;
};

/* True for the verdicts that let a route through. */
static inline bool ctl_upstream_ok(enum ctl_upstream_why w)
{
	return w == CTL_UPSTREAM_OK || w == CTL_UPSTREAM_ALLOWED;
}

/* The metric label of w: "ok", "allowed", "listener", "host", "private",
 * "reserved" (inline: the ops plane names them without linking the check). */
static inline const char *ctl_upstream_why_name(enum ctl_upstream_why w)
{
	static const char *const names[CTL_UPSTREAM_WHYS] = {
	    [CTL_UPSTREAM_OK] = "ok",
	    [CTL_UPSTREAM_ALLOWED] = "allowed",
	    [CTL_UPSTREAM_LISTENER] = "listener",
	    [CTL_UPSTREAM_HOST] = "host",
	    [CTL_UPSTREAM_PRIVATE] = "private",
	    [CTL_UPSTREAM_RESERVED] = "reserved",
	};
	return (unsigned)w < CTL_UPSTREAM_WHYS ? names[w] : "unknown";
}

/* The host's addresses are local[0..nlocal) now (the control thread reads
 * them again before each route set: an address added after the start, a
 * tunnel's, counts as the host's). Those past CTL_UPSTREAM_HOST_MAX are
 * dropped and counted in the return value. */
unsigned ctl_upstream_set_hosts(struct ctl_upstream_policy *p, const union etr_sockaddr *local,
				size_t nlocal);

/* The policy of a configuration: its control-allow-upstream blocks, every
 * listener (relays, echo ports, SNI, TURN UDP, TCP and TLS, ops) and the
 * host's addresses local[0..nlocal). Entries past the maxima are dropped
 * and counted in the return value (0: all kept). */
unsigned ctl_upstream_from_conf(struct ctl_upstream_policy *p, const struct etr_conf *c,
				const union etr_sockaddr *local, size_t nlocal);

/* Judge up, in this order: not IPv4 or IPv6, or port 0: RESERVED; IPv4
 * embeddings (mapped, compatible, NAT64, 6to4) reduced to the IPv4 address;
 * one of the listeners (a wildcard one on any host address) on its port:
 * LISTENER; an address of the host (loopback, 0.0.0.0, ::, an interface)
 * unless a block is that address alone: HOST; in a block: ALLOWED; in
 * addrclass_reserved: PRIVATE when addrclass_private, else RESERVED; else
 * OK. When refused, why[0..whylen) says so for the log (the listener's
 * name, or the block that would allow it). */
enum ctl_upstream_why ctl_upstream_check(const struct ctl_upstream_policy *p,
					 const union etr_sockaddr *up, char *why, size_t whylen);

#endif
