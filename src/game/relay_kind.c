/* SPDX-License-Identifier: ISC */
/* The game relay as a listener kind (loop/kind.h). */
#include "relay_kind.h"

#include "loop.h"
#include "relay.h"

static unsigned count(const struct etr_conf *c)
{
	return c->nrelays;
}

/* max-sessions is a total across the workers; each relay's public
 * sockets are the workers' own (main.c). */
static uint64_t fds(const struct etr_conf *c, unsigned workers)
{
	uint64_t n = 0;

	(void)workers;
	for (unsigned i = 0; i < c->nrelays; i++)
		n += c->relays[i].max_sessions + 4;
	return n;
}

static const char *fds_what(const struct etr_conf *c)
{
	(void)c;
	return "the relays' sessions";
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

/* shared: the relays' struct relay_shared, n of them. */
static uint32_t active(const void *shared, unsigned n)
{
	const struct relay_shared *sh = shared;
	uint32_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v += atomic_load_explicit(&sh[i].sessions, memory_order_relaxed);
	return v;
}

const struct kind relay_kind = {
	.name = "relay",
	.size = sizeof(struct relay),
	.count = count,
	.fds = fds,
	.fds_what = fds_what,
	.fds_knob = "max-sessions",
	.attach = attach,
	.poke = poke,
	.take_bans = take_bans,
	.shutdown = shutdown_,
	.close = close_,
	.active = active,
	.active_one = "session",
	.active_many = "sessions",
};
