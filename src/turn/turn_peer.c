/* SPDX-License-Identifier: ISC */
/* TURN peer policy. The ranges themselves live in addrclass.c, the one
 * place address rules are written; this file orders the operator's lists
 * around them. Checked on CreatePermission, ChannelBind and Send, never per
 * relayed datagram (a permission stands for the check). */
#include "turn_peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "addrclass.h"

static const uint8_t mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

const char *turn_peer_why_str(enum turn_peer_why w)
{
	switch (w) {
	case TURN_PEER_OK:
		return "ok";
	case TURN_PEER_ALLOWED:
		return "allowed";
	case TURN_PEER_OWN:
		return "own";
	case TURN_PEER_DENIED:
		return "denied";
	case TURN_PEER_HOST:
		return "host";
	case TURN_PEER_PLUMBING:
		return "plumbing";
	case TURN_PEER_RESERVED:
		return "reserved";
	case TURN_PEER_PORT:
		return "port";
	case TURN_PEER_FAMILY:
		return "family";
	}
	return "unknown";
}

void turn_peer_init(struct turn_peer_policy *p)
{
	memset(p, 0, sizeof(*p));
}

int turn_cidr_parse(const char *key, const char *text, struct addr_cidr *c, char *err,
		    size_t errlen)
{
	char buf[INET6_ADDRSTRLEN + 8], net[INET6_ADDRSTRLEN];
	unsigned bits, max, base;
	const char *why;
	char *slash;
	bool v6;

	memset(c, 0, sizeof(*c));
	if (strlen(text) >= sizeof(buf)) {
		why = "not an IPv4 or IPv6 address or CIDR block";
		goto bad;
	}
	strcpy(buf, text);
	slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	v6 = strchr(buf, ':') != NULL;
	if (v6 ? inet_pton(AF_INET6, buf, c->net) != 1
	       : inet_pton(AF_INET, buf, c->net + 12) != 1) {
		why = v6 ? "not an IPv6 address" : "not an IPv4 address";
		goto bad;
	}
	if (!v6)
		memcpy(c->net, mapped_prefix, sizeof(mapped_prefix));
	max = v6 ? 128 : 32;
	base = v6 ? 0 : 96;
	bits = max;
	if (slash) {
		const char *d = slash + 1;

		/* Digits only: no sign, no space, no hex. */
		if (*d == '\0' || strspn(d, "0123456789") != strlen(d) || strlen(d) > 3) {
			why = "prefix length is not a number";
			goto bad;
		}
		for (bits = 0; *d; d++)
			bits = bits * 10 + (unsigned)(*d - '0');
		if (bits > max) {
			why = v6 ? "prefix longer than 128" : "prefix longer than 32";
			goto bad;
		}
	}
	c->bits = (uint8_t)(base + bits);
	{
		struct addr_cidr m = *c;
		unsigned full = c->bits / 8, rest = c->bits % 8;

		if (full < 16) {
			m.net[full] &= (uint8_t)(rest ? 0xff << (8 - rest) : 0);
			memset(m.net + full + 1, 0, 15 - full);
		}
		if (memcmp(m.net, c->net, 16) != 0) {
			inet_ntop(v6 ? AF_INET6 : AF_INET, v6 ? m.net : m.net + 12, net,
				  sizeof(net));
			snprintf(err, errlen, "%s: '%s': host bits set; did you mean %s/%u?", key,
				 text, net, bits);
			return -1;
		}
	}
	return 0;
bad:
	snprintf(err, errlen, "%s: '%s': %s", key, text, why);
	return -1;
}

int turn_peer_allow(struct turn_peer_policy *p, const struct addr_cidr *c)
{
	if (p->nallow >= TURN_PEER_LIST_MAX)
		return -ENOSPC;
	p->allow[p->nallow++] = *c;
	return 0;
}

int turn_peer_deny(struct turn_peer_policy *p, const struct addr_cidr *c)
{
	if (p->ndeny >= TURN_PEER_LIST_MAX)
		return -ENOSPC;
	p->deny[p->ndeny++] = *c;
	return 0;
}

int turn_peer_own(struct turn_peer_policy *p, const union etr_sockaddr *a)
{
	if (p->nown >= TURN_PEER_OWN_MAX)
		return -ENOSPC;
	if (!addrclass_reduce(a, p->own[p->nown]))
		return -EAFNOSUPPORT;
	p->nown++;
	return 0;
}

void turn_peer_ports(struct turn_peer_policy *p, uint16_t min, uint16_t max)
{
	p->port_min = min;
	p->port_max = max;
}

int turn_peer_host(struct turn_peer_policy *p, const union etr_sockaddr *a)
{
	if (p->nhost >= TURN_PEER_HOST_MAX)
		return -ENOSPC;
	if (!addrclass_reduce(a, p->host[p->nhost]))
		return -EAFNOSUPPORT;
	p->nhost++;
	return 0;
}

void turn_peer_hosts_clear(struct turn_peer_policy *p)
{
	p->nhost = 0;
}

void turn_peer_live_ports(struct turn_peer_policy *p, _Atomic uint64_t *live)
{
	p->live = live;
}

void turn_peer_port_set(_Atomic uint64_t *live, uint16_t port, bool on)
{
	uint64_t bit = 1ull << (port % 64);

	if (on)
		atomic_fetch_or_explicit(&live[port / 64], bit, memory_order_relaxed);
	else
		atomic_fetch_and_explicit(&live[port / 64], ~bit, memory_order_relaxed);
}

bool turn_peer_port_live(const struct turn_peer_policy *p, uint16_t port)
{
	return !p->live ||
	       (atomic_load_explicit(&p->live[port / 64], memory_order_relaxed) >> (port % 64) & 1);
}

int turn_peer_plumbing(struct turn_peer_policy *p, const union etr_sockaddr *a)
{
	static const uint8_t any4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	uint8_t *ip;

	if (p->nplumb >= TURN_PEER_PLUMB_MAX)
		return -ENOSPC;
	ip = p->plumb[p->nplumb].ip;
	if (!addrclass_reduce(a, ip))
		return -EAFNOSUPPORT;
	if (memcmp(ip, any4, 16) == 0) /* 0.0.0.0: as :: */
		memset(ip, 0, 16);
	p->plumb[p->nplumb++].port = ntohs(a->in.sin_port);
	return 0;
}

static bool in_list(const struct addr_cidr *l, unsigned n, const uint8_t ip[16])
{
	for (unsigned i = 0; i < n; i++)
		if (addr_cidr_match(&l[i], ip))
			return true;
	return false;
}

static bool in_addrs(const uint8_t (*l)[16], unsigned n, const uint8_t ip[16])
{
	for (unsigned i = 0; i < n; i++)
		if (memcmp(l[i], ip, 16) == 0)
			return true;
	return false;
}

bool turn_peer_own_dead(const struct turn_peer_policy *p, const union etr_sockaddr *peer)
{
	uint16_t port = ntohs(peer->in.sin_port);
	uint8_t ip[16];

	return p->live && port >= p->port_min && port <= p->port_max &&
	       addrclass_reduce(peer, ip) && in_addrs(p->own, p->nown, ip) &&
	       !turn_peer_port_live(p, port);
}

/* ip (reduced) is the host: an interface address, an own address, or one
 * every host answers on (loopback, 0.0.0.0, ::). */
static bool is_host(const struct turn_peer_policy *p, const uint8_t ip[16])
{
	static const uint8_t zero[16], v6_loop[16] = {[15] = 1};

	if (addrclass_key_is_v4(ip) && (ip[12] == 127 || memcmp(ip + 12, zero, 4) == 0))
		return true;
	if (memcmp(ip, zero, 16) == 0 || memcmp(ip, v6_loop, 16) == 0)
		return true;
	return in_addrs(p->own, p->nown, ip) || in_addrs(p->host, p->nhost, ip);
}

/* An allow-peer entry that is ip alone. */
static bool allowed_alone(const struct turn_peer_policy *p, const uint8_t ip[16])
{
	for (unsigned i = 0; i < p->nallow; i++)
		if (p->allow[i].bits == 128 && memcmp(p->allow[i].net, ip, 16) == 0)
			return true;
	return false;
}

static bool is_plumbing(const struct turn_peer_policy *p, const uint8_t ip[16], uint16_t port,
			bool host)
{
	static const uint8_t zero[16];

	for (unsigned i = 0; i < p->nplumb; i++)
		if (p->plumb[i].port == port && (memcmp(p->plumb[i].ip, ip, 16) == 0 ||
						 (host && memcmp(p->plumb[i].ip, zero, 16) == 0)))
			return true;
	return false;
}

enum turn_peer_why turn_peer_check(const struct turn_peer_policy *p, const union etr_sockaddr *peer,
				   bool ip_only)
{
	uint16_t port = ntohs(peer->in.sin_port);
	bool host, reserved;
	union etr_sockaddr v4 = {.in = {.sin_family = AF_INET}};
	uint8_t raw[16], ip[16];

	if (peer->sa.sa_family != AF_INET && peer->sa.sa_family != AF_INET6)
		return TURN_PEER_FAMILY;
	/* sin_port and sin6_port sit at the same offset. */
	if (!ip_only && peer->in.sin_port == 0)
		return TURN_PEER_PORT;
	addrclass_prefix(peer, 32, 128, raw);
	addrclass_reduce(peer, ip);
	if (in_list(p->deny, p->ndeny, raw) || in_list(p->deny, p->ndeny, ip))
		return TURN_PEER_DENIED;
	host = is_host(p, ip);
	if (!ip_only && is_plumbing(p, ip, port, host))
		return TURN_PEER_PLUMBING;
	if (in_addrs(p->own, p->nown, ip) &&
	    (ip_only || (port >= p->port_min && port <= p->port_max && p->port_max &&
			 turn_peer_port_live(p, port))))
		return TURN_PEER_OWN;
	if (host && allowed_alone(p, ip))
		return TURN_PEER_ALLOWED;
	if (!host && in_list(p->allow, p->nallow, ip))
		return TURN_PEER_ALLOWED;
	/* The form as sent counts too: the local-use NAT64 prefix is
	 * refused whatever IPv4 it carries. */
	reserved = addrclass_reserved(peer);
	if (!reserved && addrclass_key_is_v4(ip)) {
		memcpy(&v4.in.sin_addr, ip + 12, 4);
		reserved = addrclass_reserved(&v4);
	}
	/* The host refused by the default set anyway keeps that reason. */
	return reserved ? TURN_PEER_RESERVED : host ? TURN_PEER_HOST : TURN_PEER_OK;
}

bool turn_peer_allowed(const struct turn_peer_policy *p, const union etr_sockaddr *peer)
{
	return turn_peer_ok(turn_peer_check(p, peer, false));
}
