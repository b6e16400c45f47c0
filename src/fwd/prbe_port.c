/* SPDX-License-Identifier: ISC */
/* The PRBE echo on a socket: decide (prbe.c), send the same bytes back,
 * count; and the echo-only port's endpoint. */
#include "prbe_port.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "log.h"

_Static_assert(CONF_PRBE_PORTS_MAX <= PRBE_PORTS_MAX, "every echo port fits one decision");

static const struct endpoint_ops prbe_port_ops;

int prbe_port_rules(struct prbe *p, struct rl_table *rl, const struct prbe_port_conf *c,
		    const uint8_t key[16])
{
	int err = rl_table_init(rl, c->rl_entries ? c->rl_entries : PRBE_PORT_RL_ENTRIES, c->burst,
				c->rate, key);

	if (err < 0)
		return err;
	err = prbe_init(p, rl, c->len_max, c->ports, c->nports, c->listener_loopback);
	if (err < 0)
		rl_table_free(rl);
	else if (c->listener_burst)
		prbe_budget(p, c->listener_burst, c->listener_rate);
	return err;
}

int prbe_port_init(struct prbe_port *e, int fd, const struct prbe_port_conf *c,
		   const uint8_t key[16], struct prbe_stats *st)
{
	memset(e, 0, sizeof(*e));
	e->fd = fd;
	e->stats = st;
	return prbe_port_rules(&e->p, &e->rl, c, key);
}

int prbe_port_attach(struct prbe_port *e, const struct loop_ops *ops, struct loop *l,
		     struct endpoint_table *ep)
{
	int slot = endpoint_add(ep, &prbe_port_ops, e);

	if (slot < 0)
		return slot;
	e->ops = ops;
	e->loop = l;
	e->ep = ep;
	e->slot = (unsigned)slot;
	e->attached = true;
	return ops->add_socket(l, e->fd, endpoint_id(ep, e->slot));
}

void prbe_port_free(struct prbe_port *e)
{
	if (e->attached)
		endpoint_del(e->ep, e->slot);
	e->attached = false;
	rl_table_free(&e->rl);
}

unsigned prbe_port_answer(struct prbe *p, struct prbe_stats *st, const struct loop_ops *ops,
			  struct loop *l, int fd, const union etr_sockaddr *src,
			  const struct loop_dgram *d, uint32_t id)
{
	/* A datagram that did not fit the buffer is over any cap. */
	size_t len = d->truncated ? SIZE_MAX : d->len, reply;
	enum prbe_verdict v = prbe_check(p, src, d->data, len, d->now, &reply);

	if (v != PRBE_ECHO) {
		STAT_ADD(st->result[v], 1);
		return v;
	}
	/* A copy: the received buffer goes back to the ring at once, and the
	 * reply is exactly the bytes that came (reply == d->len). */
	if (ops->send(l, fd, &src->sa, addr_len(src), d->data, reply, id) < 0) {
		STAT_ADD(st->result[STATS_PRBE_SEND_ERROR], 1);
		return STATS_PRBE_SEND_ERROR;
	}
	return v;
}

void prbe_port_sent(struct prbe_stats *st, int res)
{
	STAT_ADD(st->result[res < 0 ? STATS_PRBE_SEND_ERROR : PRBE_ECHO], 1);
}

/* The endpoint: whatever arrives is a probe or nothing (a TURN listener
 * sharing the port later takes the rest). */

static void port_dgram(void *obj, uint32_t ref, struct loop_dgram *d)
{
	struct prbe_port *e = obj;
	union etr_sockaddr src;

	if (!d->from || !addr_from(&src, d->from, d->fromlen)) {
		STAT_ADD(e->stats->result[PRBE_DROP_SOURCE], 1);
		return;
	}
	/* ban-file covers every listener: a banned source gets no echo (nor
	 * spends a token), whatever it sent. */
	if (e->bans && banlist_match(e->bans, &src)) {
		STAT_ADD(e->stats->result[STATS_PRBE_BANNED], 1);
		return;
	}
	prbe_port_answer(&e->p, e->stats, e->ops, e->loop, e->fd, &src, d,
			 endpoint_id(e->ep, e->slot));
	(void)ref;
}

static void port_recv_error(void *obj, uint32_t ref, int err)
{
	(void)obj;
	(void)ref;
	log_debug("receive on a PRBE echo port: %s", strerror(-err));
}

static void port_sent(void *obj, uint32_t ref, int res)
{
	struct prbe_port *e = obj;

	(void)ref;
	prbe_port_sent(e->stats, res);
}

static const struct endpoint_ops prbe_port_ops = {
    .name = "prbe",
    .on_dgram = port_dgram,
    .on_recv_error = port_recv_error,
    .on_sent = port_sent,
};
