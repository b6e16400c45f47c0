/* SPDX-License-Identifier: ISC */
/* The game relay as a listener kind (loop/kind.h). */
#include "relay_kind.h"

#include "loop.h"
#include "relay.h"

static unsigned count(const struct etr_conf *c)
{
	return c->nrelays;
}

static int attach(void *inst, const struct loop_ops *ops, struct loop *loop,
		  struct endpoint_table *ep)
{
	return relay_attach(inst, ops, loop, ep);
}

static void poke(void *inst)
{
	relay_take_news(inst, loop_now());
}

static void take_bans(void *inst, const struct banlist *b)
{
	relay_set_bans(inst, b);
}

static void shutdown_(void *inst)
{
	relay_shutdown(inst);
}

static void close_(void *inst)
{
	relay_close(inst);
}

const struct kind relay_kind = {
	.name = "relay",
	.size = sizeof(struct relay),
	.count = count,
	.attach = attach,
	.poke = poke,
	.take_bans = take_bans,
	.shutdown = shutdown_,
	.close = close_,
};
