/* SPDX-License-Identifier: ISC */
/* The control plane's route upstreams: the TURN peer rules (addrclass.c's
 * ranges, IPv4 embeddings reduced first) with the operator's allow list,
 * and the relay's own sockets refused whatever the list says. */
#include "control_upstream.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "addrclass.h"

static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static void cidr_of(const struct conf_cidr *c, struct addr_cidr *out)
{
	memset(out, 0, sizeof(*out));
	if (c->addr.sa.sa_family == AF_INET) {
		memcpy(out->net, mapped, sizeof(mapped));
		memcpy(out->net + 12, &c->addr.in.sin_addr, 4);
		out->bits = (uint8_t)(c->bits + 96);
	} else {
		memcpy(out->net, &c->addr.in6.sin6_addr, 16);
		out->bits = c->bits;
	}
}

static unsigned listener_add(struct ctl_upstream_policy *p, const union etr_sockaddr *a,
			     const char *kind, const char *name)
{
	static const uint8_t any4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (p->nlisteners == CTL_UPSTREAM_LISTENERS_MAX)
		return 1;
	if (!addrclass_reduce(a, p->listener[p->nlisteners].ip))
		return 0;
	if (memcmp(p->listener[p->nlisteners].ip, any4, 16) == 0)
		memset(p->listener[p->nlisteners].ip, 0, 16);
	p->listener[p->nlisteners].port = ntohs(a->in.sin_port);
	snprintf(p->listener[p->nlisteners].what, sizeof(p->listener[0].what), "%s%s%s", kind,
		 name[0] ? " " : "", name);
	p->nlisteners++;
	return 0;
}

unsigned ctl_upstream_set_hosts(struct ctl_upstream_policy *p, const union etr_sockaddr *local,
				size_t nlocal)
{
	unsigned lost = 0;

	p->nhost = 0;
	for (size_t i = 0; i < nlocal; i++) {
		if (p->nhost == CTL_UPSTREAM_HOST_MAX)
			lost++;
		else if (addrclass_reduce(&local[i], p->host[p->nhost]))
			p->nhost++;
	}
	return lost;
}

struct listen_add {
	struct ctl_upstream_policy *p;
	unsigned lost;
};

static void listen_each(void *arg, const struct conf_listen *l)
{
	struct listen_add *a = arg;

	a->lost += listener_add(a->p, l->addr, l->what, l->name);
}

unsigned ctl_upstream_from_conf(struct ctl_upstream_policy *p, const struct etr_conf *c,
				const union etr_sockaddr *local, size_t nlocal)
{
	unsigned lost = 0;

	memset(p, 0, sizeof(*p));
	for (unsigned i = 0; i < c->ncontrol_allow && i < CONF_CONTROL_ALLOW_MAX; i++)
		cidr_of(&c->control_allow[i], &p->allow[p->nallow++]);
	lost += ctl_upstream_set_hosts(p, local, nlocal);
	{
		struct listen_add a = {p, 0};

		conf_each_listen(c, listen_each, &a);
		lost += a.lost;
	}
	return lost;
}

/* ip (reduced) is the host: loopback, 0.0.0.0, ::, or an interface's. */
static bool is_host(const struct ctl_upstream_policy *p, const uint8_t ip[16])
{
	static const uint8_t zero[16], lo6[16] = {[15] = 1};

	if (memcmp(ip, mapped, sizeof(mapped)) == 0 &&
	    (ip[12] == 127 || memcmp(ip + 12, zero, 4) == 0))
		return true;
	if (memcmp(ip, zero, 16) == 0 || memcmp(ip, lo6, 16) == 0)
		return true;
	for (unsigned i = 0; i < p->nhost; i++)
		if (memcmp(p->host[i], ip, 16) == 0)
			return true;
	return false;
}

static void text_of(const uint8_t ip[16], char *out, size_t n)
{
	char a[INET6_ADDRSTRLEN];
	bool v4 = memcmp(ip, mapped, sizeof(mapped)) == 0;

	inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? ip + 12 : ip, a, sizeof(a));
	snprintf(out, n, "%s", a);
}

enum ctl_upstream_why ctl_upstream_check(const struct ctl_upstream_policy *p,
					 const union etr_sockaddr *up, char *why, size_t whylen)
{
	static const uint8_t zero[16];
	union etr_sockaddr v4 = {.in = {.sin_family = AF_INET}};
	uint16_t port = ntohs(up->in.sin_port);
	char a[INET6_ADDRSTRLEN];
	uint8_t ip[16];
	bool host, reserved;

	if (whylen)
		why[0] = '\0';
	if ((up->sa.sa_family != AF_INET && up->sa.sa_family != AF_INET6) || port == 0 ||
	    !addrclass_reduce(up, ip)) {
		snprintf(why, whylen, "not an IPv4 or IPv6 address with a port");
		return CTL_UPSTREAM_RESERVED;
	}
	host = is_host(p, ip);
	text_of(ip, a, sizeof(a));
	for (unsigned i = 0; i < p->nlisteners; i++)
		if (p->listener[i].port == port &&
		    (memcmp(p->listener[i].ip, ip, 16) == 0 ||
		     (host && memcmp(p->listener[i].ip, zero, 16) == 0))) {
			snprintf(why, whylen, "the relay's own %s", p->listener[i].what);
			return CTL_UPSTREAM_LISTENER;
		}
	if (host) {
		for (unsigned i = 0; i < p->nallow; i++)
			if (p->allow[i].bits == 128 && memcmp(p->allow[i].net, ip, 16) == 0)
				return CTL_UPSTREAM_ALLOWED;
		snprintf(why, whylen,
			 "an address of this host (%s); `control-allow-upstream %s` alone allows "
			 "it",
			 a, a);
		return CTL_UPSTREAM_HOST;
	}
	for (unsigned i = 0; i < p->nallow; i++)
		if (addr_cidr_match(&p->allow[i], ip))
			return CTL_UPSTREAM_ALLOWED;
	if (memcmp(ip, mapped, sizeof(mapped)) == 0) {
		memcpy(&v4.in.sin_addr, ip + 12, 4);
		reserved = addrclass_reserved(&v4);
		if (reserved && addrclass_private(&v4))
			goto private;
	} else {
		reserved = addrclass_reserved(up);
		if (reserved && addrclass_private(up))
			goto private;
	}
	if (reserved) {
		snprintf(why, whylen, "%s is not a globally reachable address", a);
		return CTL_UPSTREAM_RESERVED;
	}
	return CTL_UPSTREAM_OK;

      private:
	snprintf(why, whylen,
		 "%s is a private or link-local address; a control-allow-upstream block "
		 "holding it allows it",
		 a);
	return CTL_UPSTREAM_PRIVATE;
}
