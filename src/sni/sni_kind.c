/* SPDX-License-Identifier: ISC */
/* The SNI listener as a listener kind (loop/kind.h). */
#include "sni_kind.h"

#include "sni.h"

static unsigned count(const struct etr_conf *c)
{
	return c->nsni;
}

/* A connection holds two sockets, a refused one lingering one
 * (SNI_LINGER_MAX: a quarter of max-connections). Both caps count across
 * the workers, so this holds whatever the workers' tables: a worker's
 * slots are memory, its sockets come out of these; one more per worker for
 * a connection closed as it is accepted. */
static uint64_t fds(const struct etr_conf *c, unsigned workers)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < c->nsni; i++)
		n += 2ull * (c->sni[i].max_connections + SNI_LINGER_MAX(c->sni[i].max_connections)) +
		     workers;
	return n;
}

static const char *fds_what(const struct etr_conf *c)
{
	(void)c;
	return "the SNI listeners' connections";
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

static uint32_t active(const void *shared, unsigned n)
{
	(void)n;
	return sni_active_total(shared);
}

const struct kind sni_kind = {
	.name = "sni",
	.size = sizeof(struct sni_listener),
	.count = count,
	.fds = fds,
	.fds_what = fds_what,
	.fds_knob = "max-connections",
	.attach = attach,
	.poke = poke,
	.take_bans = take_bans,
	.shutdown = shutdown_,
	.close = close_,
	.active = active,
	.active_one = "SNI connection",
	.active_many = "SNI connections",
};
