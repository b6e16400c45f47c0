/* SPDX-License-Identifier: ISC */
/* An echo-only PRBE port (prbe-listen) as a listener kind (loop/kind.h). */
#include "prbe_kind.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "addrclass.h"
#include "log.h"
#include "net.h"
#include "prbe_port.h"
#include "ratelimit.h"

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

/* The workers' program (a source address picks its worker) on fd, the
 * first socket of its group. */
static int attach_workers(const struct kind_env *e, int fd)
{
	const struct reuseport_plan p = {.workers = e->nworkers, .key = e->reuseport_key};

	return net_attach_plan(fd, &p);
}

/* Echo-only port i on every worker, in one reuseport group with the
 * workers' program: the echo needs no affinity, but a source's rate bucket
 * is per worker, and the hash of the source address sends each source to
 * one worker (the kernel's own 4-tuple hash would spread one IP's ports
 * over all of them, multiplying its rate by the workers). The port's
 * bucket for every source is split across the workers. */
static int open_one(struct kind_env *e, struct prbe_stats *all, unsigned i)
{
	const struct conf_prbe *cp = &e->conf->prbe;
	const union etr_sockaddr *l = &cp->listen[i];
	struct prbe_port_conf pc = {
	    .rl_entries = rl_worker_entries(PRBE_PORT_RL_ENTRIES, e->nworkers),
	    .burst = cp->burst,
	    .rate = cp->rate,
	    .listener_burst = rl_worker_part(cp->listener_burst, e->nworkers),
	    .listener_rate = rl_worker_part(cp->listener_rate, e->nworkers),
	    .len_max = (uint16_t)cp->max_size,
	    .ports = cp->ports,
	    .nports = cp->nports,
	    .listener_loopback = addrclass_bogon(l, false) && !addrclass_bogon(l, true),
	};
	char a[ADDR_STRLEN];

	addr_str(&l->sa, a);
	for (unsigned w = 0; w < e->nworkers; w++) {
		struct prbe_port *port = e->inst(e, w, i);
		struct prbe_stats *st = &all[(size_t)w * e->conf->prbe.nlisten + i];
		uint8_t key[16];
		int fd, err;

		/* As for a relay: the first socket must not join a group
		 * another process holds. */
		fd = e->nworkers > 1 && w == 0 ? net_port_free(l) : 0;
		if (fd == 0)
			fd = net_bind_public(l, e->nworkers > 1);
		if (fd < 0) {
			log_warnx("prbe-listen %s: bind: %s%s", a, strerror(-fd),
				  addr_bind_hint(fd));
			return EXIT_FAILURE;
		}
		snprintf(st->port, sizeof(st->port), "%s", a);
		rl_random_key(net_random64, key);
		err = prbe_port_init(port, fd, &pc, key, st);
		if (err < 0)
			close(fd);
		else
			e->opened(e, w, i + 1);
		if (err == 0 && w == 0 && e->nworkers > 1)
			err = attach_workers(e, fd);
		if (err < 0) {
			log_warnx("prbe-listen %s: %s", a, strerror(-err));
			return EXIT_FAILURE;
		}
		e->stats->prbe_port[w][i] = st;
	}
	e->stats->nprbe_ports = i + 1;
	return 0;
}

/* e->shared: the ports' counters, this kind's own (nworkers x ports). */
static int open_all(struct kind_env *e)
{
	unsigned n = e->conf->prbe.nlisten;
	int rc = 0;

	if (!(e->shared = calloc((size_t)e->nworkers * n, sizeof(struct prbe_stats)))) {
		log_warn("prbe-listen: counters");
		return EXIT_FAILURE;
	}
	for (unsigned i = 0; i < n && rc == 0; i++)
		rc = open_one(e, e->shared, i);
	return rc;
}

static void shared_free(struct kind_env *e)
{
	free(e->shared);
	e->shared = NULL;
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

static void log_start(const struct kind_env *e, const char *backend)
{
	(void)backend;
	for (unsigned i = 0; i < e->conf->prbe.nlisten; i++)
		log_info("PRBE echo on %s", e->stats->prbe_port[0][i]->port);
}

/* An echo-only process (prbe-listen alone) is ready while it runs. */
static unsigned running(const struct kind_env *e)
{
	return e->stats->nprbe_ports;
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
    .open = open_all,
    .shared_free = shared_free,
    .fds = fds,
    .fds_what = fds_what,
    .attach = attach,
    .take_bans = take_bans,
    .close = close_,
    .running = running,
    .log_start = log_start,
    .report = report,
    .summary_one = "echo port",
    .summary_many = "echo ports",
};
