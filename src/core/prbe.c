/* SPDX-License-Identifier: ISC */
/* The PRBE echo decision: cheap checks first, then the source's bucket and
 * the listener's, then whether it is an echo coming back. */
#include "prbe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "addrclass.h"

static const char *const verdict_names[PRBE_VERDICTS] = {
    [PRBE_ECHO] = "echoed",
    [PRBE_NOT_PROBE] = "not_probe",
    [PRBE_DROP_SOURCE] = "source",
    [PRBE_DROP_PORT] = "low_port",
    [PRBE_DROP_LOOP] = "loop",
    [PRBE_DROP_SIZE] = "size",
    [PRBE_DROP_RATE] = "rate",
    [PRBE_DROP_REFLECTOR] = "reflector_port",
    [PRBE_DROP_BUDGET] = "listener_rate",
    [PRBE_DROP_BOUNCE] = "bounce",
};

/* Sorted: prbe.h says why each. */
static const uint16_t reflector_ports[] = {
    1434, 1900, 3283, 3702, 5353, 5683, 10001, 11211, 51820, 51821,
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

void prbe_budget(struct prbe *p, unsigned burst, unsigned per_sec)
{
	/* Full from the start: a refill never goes over the burst. */
	rl_bucket_init(&p->budget, burst, per_sec, 0);
	p->budget_on = true;
}

bool prbe_reflector_port(uint16_t port)
{
	for (size_t i = 0; i < sizeof(reflector_ports) / sizeof(reflector_ports[0]); i++)
		if (port == reflector_ports[i])
			return true;
	return false;
}

/* A keyed hash of the source (address and port) and the datagram's bytes:
 * the source's hash keys the hash of the bytes, so neither is copied. */
static uint64_t echo_tag(const struct prbe *p, const union etr_sockaddr *src, const uint8_t *data,
			 size_t len)
{
	uint8_t who[18], key[16];
	size_t n;
	uint64_t h;

	if (src->sa.sa_family == AF_INET) {
		memcpy(who, &src->in.sin_addr, 4);
		memcpy(who + 4, &src->in.sin_port, 2);
		n = 6;
	} else {
		memcpy(who, &src->in6.sin6_addr, 16);
		memcpy(who + 16, &src->in6.sin6_port, 2);
		n = 18;
	}
	h = addr_siphash(who, n, p->rl->key);
	memcpy(key, &h, 8);
	memcpy(key + 8, p->rl->key + 8, 8);
	return addr_siphash(data, len, key) | 1;
}

static enum prbe_verdict decide(struct prbe *p, const union etr_sockaddr *src, const uint8_t *data,
				size_t len, uint64_t now)
{
	struct prbe_echo *slot;
	uint64_t tag;
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
	if (prbe_reflector_port(port))
		return PRBE_DROP_REFLECTOR;
	if (len > p->len_max)
		return PRBE_DROP_SIZE;
	if (!rl_table_allow(p->rl, src, now))
		return PRBE_DROP_RATE;
	if (p->budget_on && !rl_take(&p->budget, now))
		return PRBE_DROP_BUDGET;
	/* Hashed only within the buckets: a flood costs no hashing. */
	tag = echo_tag(p, src, data, len);
	slot = &p->recent[tag & (PRBE_RECENT - 1)];
	if (slot->tag == tag && now - slot->when < PRBE_BOUNCE_NS)
		return PRBE_DROP_BOUNCE;
	slot->tag = tag;
	slot->when = now;
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
