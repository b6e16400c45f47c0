/* SPDX-License-Identifier: ISC */
/* The TURN listener as a listener kind (loop/kind.h). */
#include "turn_kind.h"

#include "turn.h"

static unsigned count(const struct etr_conf *c)
{
	return c->nturn;
}

static bool any_tcp(const struct etr_conf *c)
{
	for (unsigned i = 0; i < c->nturn; i++)
		if (c->turn[i].tcp_set || c->turn[i].tls_set)
			return true;
	return false;
}

/* An allocation holds its relayed socket (max-allocations counts across
 * the workers), each worker a UDP, a TCP and a TLS listener;
 * tcp-max-connections counts across the workers too (each has its share,
 * at least 1), one more per worker for a connection closed as it is
 * accepted. */
static uint64_t fds(const struct etr_conf *c, unsigned workers)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < c->nturn; i++) {
		bool tcp = c->turn[i].tcp_set || c->turn[i].tls_set;

		n += c->turn[i].max_allocations + 3ull * workers +
		     (tcp ? c->turn[i].tcp_max_conns + 2ull * workers : 0);
	}
	return n;
}

static const char *fds_what(const struct etr_conf *c)
{
	return any_tcp(c) ? "the TURN listeners' allocations and TCP connections"
			  : "the TURN listeners' allocations";
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

static uint32_t active(const void *shared, unsigned n)
{
	(void)n;
	return turn_active_total(shared);
}

const struct kind turn_kind = {
	.name = "turn",
	.size = sizeof(struct turn_listener),
	.count = count,
	.fds = fds,
	.fds_what = fds_what,
	.fds_knob = "max-allocations",
	.attach = attach,
	.take_bans = take_bans,
	.shutdown = shutdown_,
	.close = close_,
	.active = active,
	.active_one = "TURN allocation",
	.active_many = "TURN allocations",
};
