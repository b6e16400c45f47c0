/* SPDX-License-Identifier: ISC */
/* The SNI listener as a listener kind (loop/kind.h). */
#include "sni_kind.h"

#include "sni.h"

static unsigned count(const struct etr_conf *c)
{
	return c->nsni;
}

static int attach(void *inst, const struct loop_ops *ops, struct loop *loop,
		  struct endpoint_table *ep)
{
	return sni_listener_attach(inst, ops, loop, ep);
}

/* The route tables in force changed (sni_shared's publish). */
static void poke(void *inst)
{
	sni_listener_take_routes(inst);
}

static void take_bans(void *inst, const struct banlist *b)
{
	sni_listener_take_bans(inst, b);
}

static void shutdown_(void *inst)
{
	sni_listener_shutdown(inst);
}

static void close_(void *inst)
{
	sni_listener_close(inst);
}

const struct kind sni_kind = {
	.name = "sni",
	.size = sizeof(struct sni_listener),
	.count = count,
	.attach = attach,
	.poke = poke,
	.take_bans = take_bans,
	.shutdown = shutdown_,
	.close = close_,
};
