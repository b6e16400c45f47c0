/* SPDX-License-Identifier: ISC */
/* The TURN listener as a listener kind (loop/kind.h). */
#include "turn_kind.h"

#include "turn.h"

static unsigned count(const struct etr_conf *c)
{
	return c->nturn;
}

static int attach(void *inst, const struct loop_ops *ops, struct loop *loop,
		  struct endpoint_table *ep)
{
	return turn_listener_attach(inst, ops, loop, ep);
}

static void take_bans(void *inst, const struct banlist *b)
{
	turn_listener_take_bans(inst, b);
}

static void shutdown_(void *inst)
{
	turn_listener_shutdown(inst);
}

static void close_(void *inst)
{
	turn_listener_free(inst);
}

const struct kind turn_kind = {
	.name = "turn",
	.size = sizeof(struct turn_listener),
	.count = count,
	.attach = attach,
	.take_bans = take_bans,
	.shutdown = shutdown_,
	.close = close_,
};
