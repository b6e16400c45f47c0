/* SPDX-License-Identifier: ISC */
/* The PRBE echo decision: cheap checks first, the source's bucket last. */
#include "prbe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "addrclass.h"

static const char *const verdict_names[PRBE_VERDICTS] = {
    [PRBE_ECHO] = "echoed",	   [PRBE_NOT_PROBE] = "not_probe", [PRBE_DROP_SOURCE] = "source",
    [PRBE_DROP_PORT] = "low_port", [PRBE_DROP_LOOP] = "loop",	   [PRBE_DROP_SIZE] = "size",
    [PRBE_DROP_RATE] = "rate",
};

const char *prbe_verdict_name(enum prbe_verdict v)
{
	return (unsigned)v < PRBE_VERDICTS ? verdict_names[v] : "unknown";
}

int prbe_init(struct prbe *p, struct rl_table *rl, uint16_t len_max, const uint16_t *ports,
	      unsigned nports, bool listener_loopback)
{
	if (len_max == 0)
		len_max = PRBE_LEN_MAX_DEFAULT;
	if (!rl || len_max < PRBE_MAGIC_LEN || nports > PRBE_PORTS_MAX)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->rl = rl;
	p->len_max = len_max;
	p->nports = (uint16_t)nports;
	if (nports)
		memcpy(p->ports, ports, nports * sizeof(*ports));
	p->listener_loopback = listener_loopback;
	return 0;
}

static enum prbe_verdict decide(struct prbe *p, const union etr_sockaddr *src, const uint8_t *data,
				size_t len, uint64_t now)
{
	uint16_t port;

	if (len < PRBE_MAGIC_LEN || memcmp(data, PRBE_MAGIC, PRBE_MAGIC_LEN) != 0)
		return PRBE_NOT_PROBE;
	/* Unknown families, port 0, multicast, broadcast... */
	if (addrclass_bogon(src, p->listener_loopback))
		return PRBE_DROP_SOURCE;
	port = ntohs(src->sa.sa_family == AF_INET ? src->in.sin_port : src->in6.sin6_port);
	if (port < 1024)
		return PRBE_DROP_PORT;
	for (unsigned i = 0; i < p->nports; i++)
		if (port == p->ports[i])
			return PRBE_DROP_LOOP;
	if (len > p->len_max)
		return PRBE_DROP_SIZE;
	if (!rl_table_allow(p->rl, src, now))
		return PRBE_DROP_RATE;
	return PRBE_ECHO;
}

enum prbe_verdict prbe_check(struct prbe *p, const union etr_sockaddr *src, const uint8_t *data,
			     size_t len, uint64_t now, size_t *reply_len)
{
	enum prbe_verdict v = decide(p, src, data, len, now);

	p->count[v]++;
	*reply_len = v == PRBE_ECHO ? len : 0;
	return v;
}
