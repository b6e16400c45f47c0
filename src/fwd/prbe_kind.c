/* SPDX-License-Identifier: ISC */
/* An echo-only PRBE port (prbe-listen) as a listener kind (loop/kind.h). */
#include "prbe_kind.h"

#include <stdio.h>

#include <unistd.h>

#include "prbe_port.h"

static unsigned count(const struct etr_conf *c)
{
	return c->prbe.nlisten;
}

/* One socket per port and worker. */
static uint64_t fds(const struct etr_conf *c, unsigned workers)
{
	return (uint64_t)workers * c->prbe.nlisten;
}

static const char *fds_what(const struct etr_conf *c)
{
	(void)c;
	return "echo ports";
}

static int attach(void *inst, const struct loop_ops *ops, struct loop *loop,
		  struct endpoint_table *ep)
{
	return prbe_port_attach(inst, ops, loop, ep);
}

static void take_bans(void *inst, const struct banlist *b)
{
	((struct prbe_port *)inst)->bans = b;
}

static void close_(void *inst)
{
	struct prbe_port *e = inst;

	prbe_port_free(e);
	close(e->fd);
}

/* -t: each echo-only port, and the echo on every port. */
static void report(const struct etr_conf *c)
{
	for (unsigned i = 0; i < c->prbe.nlisten; i++) {
		char a[ADDR_STRLEN];

		printf("prbe-listen %s\n", addr_str(&c->prbe.listen[i].sa, a));
	}
	if (c->prbe.nports)
		printf("prbe echo on %u port%s: max-size %u, rate %u/s, burst %u, each port %u/s, "
		       "burst %u\n",
		       c->prbe.nports, c->prbe.nports == 1 ? "" : "s", c->prbe.max_size,
		       c->prbe.rate, c->prbe.burst, c->prbe.listener_rate, c->prbe.listener_burst);
}

const struct kind prbe_kind = {
	.name = "prbe-listen",
	.size = sizeof(struct prbe_port),
	.count = count,
	.fds = fds,
	.fds_what = fds_what,
	.attach = attach,
	.take_bans = take_bans,
	.close = close_,
	.report = report,
	.summary_one = "echo port",
	.summary_many = "echo ports",
};
