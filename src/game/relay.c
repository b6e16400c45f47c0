/* SPDX-License-Identifier: ISC */
/* One configured relay: the generic forwarder with real sockets, the
 * Quake 3 policy and the masters, wired together; its /sessions and its
 * stats line. */
#include "relay.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "addrclass.h"
#include "json.h"
#include "log.h"
#include "net.h"
#include "prbe_port.h"

/* The daemon's session sockets: connected to the game server, from the
 * configured port range if there is one. */
static int relay_sock_open(void *arg)
{
	struct relay *r = arg;

	if (r->conf->port_min)
		return net_connect_udp_range(&r->upstream, r->conf->port_min, r->conf->port_max,
					     &r->port_next);
	return net_connect_udp(&r->upstream);
}

static void relay_sock_close(void *arg, int fd)
{
	(void)arg;
	close(fd);
}

static const struct udprelay_sockops relay_sockops = {
    .open = relay_sock_open,
    .close = relay_sock_close,
};

int relay_shared_init(struct relay_shared *sh, const struct relay_conf *c, unsigned workers,
		      unsigned index)
{
	int err;

	memset(sh, 0, sizeof(*sh));
	sh->workers = workers;
	sh->index = index;
	err = q3p_shared_init(&sh->q3, c, workers, loop_now());
	if (err < 0)
		log_warnx("relay %s: query budget: %s", c->name, strerror(-err));
	return err;
}

void relay_shared_free(struct relay_shared *sh)
{
	q3p_shared_free(&sh->q3);
}

/* The masters' hooks into the daemon (arg: the relay's instance). */
static void relay_wake_owner(void *arg)
{
	struct relay *r = arg;

	if (r->shared->wake_owner)
		r->shared->wake_owner(r->shared);
}

static void relay_masters_moved(void *arg)
{
	struct relay *r = arg;

	if (r->shared->masters_moved)
		r->shared->masters_moved(r->shared, r);
}

static const struct masters_hooks relay_masters_hooks = {
    .wake_owner = relay_wake_owner,
    .moved = relay_masters_moved,
};

/* prbe yes: per worker, the rate table holds this worker's share of the
 * sources (the reuseport program picks a worker by source address, so a
 * source's bucket is whole), and the port's bucket for every source is
 * split across the workers. */
static int relay_prbe_open(struct relay *r, bool loopback)
{
	const struct conf_prbe *cp = r->shared->prbe;
	struct prbe_port_conf pc = {
	    .rl_entries = rl_worker_entries(PRBE_PORT_RL_ENTRIES, r->shared->workers),
	    .burst = cp->burst,
	    .rate = cp->rate,
	    .listener_burst = rl_worker_part(cp->listener_burst, r->shared->workers),
	    .listener_rate = rl_worker_part(cp->listener_rate, r->shared->workers),
	    .len_max = (uint16_t)cp->max_size,
	    .ports = cp->ports,
	    .nports = cp->nports,
	    .listener_loopback = loopback,
	};
	uint8_t key[16];
	int err;

	rl_random_key(net_random64, key);
	err = prbe_port_rules(&r->prbe, &r->prbe_rl, &pc, key);
	if (err < 0)
		return err;
	snprintf(r->stats.prbe.port, sizeof(r->stats.prbe.port), "%s", r->stats.public_addr);
	r->stats.prbe_on = true;
	udprelay_set_prbe(&r->fwd, &r->prbe, &r->stats.prbe);
	return 0;
}

int relay_open(struct relay *r, unsigned index, const struct relay_conf *conf,
	       const union etr_sockaddr *upstream, struct etr_stats *global,
	       struct relay_shared *shared, unsigned worker)
{
	/* Per worker: the rate of new sessions is split evenly (a total
	 * without a shared counter on the path a flood takes); the per-IP
	 * tables hold this worker's share of the sources. */
	struct udprelay_conf fc = {
	    .name = conf->name,
	    .max_sessions = conf->max_sessions,
	    .sessions_per_ip = conf->sessions_per_ip,
	    .session_rate = rl_worker_part(conf->session_rate, shared->workers),
	    .ip_session_rate = conf->ip_session_rate,
	    .ip_entries = rl_worker_entries(UDPRELAY_IP_ENTRIES, shared->workers),
	    .session_timeout = conf->session_timeout_ms * NS_PER_MS,
	    .unassured_timeout = conf->unassured_timeout_ms * NS_PER_MS,
	    .listener_loopback =
		addrclass_bogon(&conf->listen, false) && !addrclass_bogon(&conf->listen, true),
	};
	char a[ADDR_STRLEN];
	uint8_t key[16], key2[16];
	int err, fd;

	memset(r, 0, sizeof(*r));
	r->conf = conf;
	r->index = index;
	r->global = global;
	r->shared = shared;
	r->worker = worker;
	r->upstream = *upstream;
	r->port_next = conf->port_min;
	r->fwd.pub_fd = r->masters.probe_fd = r->masters.res_fd = -1;
	pthread_mutex_init(&r->stats.lock, NULL);
	snprintf(r->stats.name, sizeof(r->stats.name), "%s", conf->name);
	addr_str(&conf->listen.sa, r->stats.public_addr);
	addr_str(&upstream->sa, r->stats.upstream);
	snprintf(r->stats.game, sizeof(r->stats.game), "%s", conf->game);
	masters_init(&r->masters, conf, upstream, &r->stats, global);
	masters_share(&r->masters, &shared->ms, worker == 0, &relay_masters_hooks, r);

	rl_random_key(net_random64, key);
	rl_random_key(net_random64, key2);
	err = udprelay_init(&r->fwd, &fc, -1, key, key2, &r->stats, global, loop_now());
	udprelay_share_count(&r->fwd, &shared->sessions);
	udprelay_set_sockops(&r->fwd, &relay_sockops, r);
	udprelay_set_policy(&r->fwd, &q3policy_ops, &r->policy);
	masters_set_events(&r->masters, &q3policy_masters_events, &r->policy, &r->fwd);
	if (!err)
		err = q3policy_init(&r->policy, conf, &r->fwd, &r->masters, &shared->q3, worker,
				    net_random64, loop_now());
	if (!err && conf->prbe)
		err = relay_prbe_open(r, fc.listener_loopback);
	if (err < 0) {
		log_warnx("relay %s: tables for %u sessions: %s", conf->name, conf->max_sessions,
			  strerror(-err));
		return err;
	}
	/* The first worker's socket would join any group on the port: make
	 * sure there is none (a process still draining, say). */
	fd = shared->workers > 1 && worker == 0 ? net_port_free(&conf->listen) : 0;
	if (fd == 0)
		fd = net_bind_public(&conf->listen, shared->workers > 1);
	if (fd < 0) {
		log_warnx("relay %s: bind %s: %s%s", conf->name, addr_str(&conf->listen.sa, a),
			  strerror(-fd),
			  fd == -EADDRINUSE ? " (another process owns the port)"
					    : addr_bind_hint(fd));
		return fd;
	}
	r->fwd.pub_fd = fd;
	return masters_open(&r->masters);
}

int relay_attach(struct relay *r, const struct loop_ops *ops, struct loop *l,
		 struct endpoint_table *ep)
{
	int err = udprelay_attach(&r->fwd, ops, l, ep);

	if (!err)
		err = masters_attach(&r->masters, ops, l, ep);
	return err;
}

void relay_take_news(struct relay *r, uint64_t now)
{
	masters_take_news(&r->masters, now);
}

unsigned relay_master_addrs(const struct relay *r, union etr_sockaddr *out)
{
	return masters_addrs(&r->masters, out);
}

void relay_set_bans(struct relay *r, const struct banlist *bans)
{
	r->fwd.bans = bans;
}

void relay_shutdown(struct relay *r)
{
	masters_shutdown(&r->masters);
	udprelay_shutdown(&r->fwd);
}

void relay_close(struct relay *r)
{
	masters_close(&r->masters);
	udprelay_free(&r->fwd);
	q3policy_free(&r->policy);
	if (r->stats.prbe_on)
		rl_table_free(&r->prbe_rl);
	pthread_mutex_destroy(&r->stats.lock);
}

void relay_sessions_json(const struct relay *r, FILE *f, uint64_t now, bool *first)
{
	const struct session_table *st = &r->fwd.st;
	char a[ADDR_STRLEN];

	/* Oldest activity first: the LRU order is the one we have for free. */
	for (uint32_t i = st->lru_head; i != SESSION_NONE; i = st->s[i].next) {
		const struct session *s = &st->s[i];
		const struct q3p_session *q = &r->policy.ss[i];

		fputs(*first ? "\n" : ",\n", f);
		*first = false;
		fputs("{\"relay\":", f);
		json_string(f, r->conf->name);
		/* Asked of the kernel only here, so opening a session (which a
		 * spoofed flood does at line rate) costs no extra syscall. */
		fprintf(f, ",\"worker\":%u,\"server_port\":%u,\"client\":", r->worker,
			net_local_port(s->fd));
		json_string(f, addr_str(&s->client.sa, a));
		fprintf(f,
			",\"age_seconds\":%llu,\"idle_seconds\":%llu,\"packets_up\":%llu,"
			"\"packets_down\":%llu,\"assured\":%s,\"qport\":",
			(unsigned long long)((now - s->opened) / NS_PER_SEC),
			(unsigned long long)((now - s->last_active) / NS_PER_SEC),
			(unsigned long long)s->pkts_up, (unsigned long long)s->pkts_down,
			s->assured ? "true" : "false");
		if (q->qport_known)
			fprintf(f, "%u", q->qport);
		else
			fputs("null", f);
		fputs(",\"name\":", f);
		if (r->policy.names[i][0])
			json_string(f, r->policy.names[i]);
		else
			fputs("null", f);
		fputc('}', f);
	}
}

void relay_log_stats(const char *name, const struct relay_stats *s)
{
	uint64_t dropped = 0, closed = 0;
	char why[512] = "";
	size_t o = 0;

	for (int i = 0; i < DROP_COUNT; i++) {
		uint64_t n = STAT_GET(s->drops[i]);

		dropped += n;
		if (n && o < sizeof(why))
			o += (size_t)snprintf(why + o, sizeof(why) - o, "%s%s %llu",
					      o ? ", " : " (", stats_drop_name((enum stats_drop)i),
					      (unsigned long long)n);
	}
	if (o && o < sizeof(why) - 1)
		strcat(why, ")");
	for (int i = 0; i < CLOSE_COUNT; i++)
		closed += STAT_GET(s->sessions_closed[i]);
	log_info("stats %s: sessions opened %llu closed %llu active %u; up %llu pkts %llu B; "
		 "down %llu pkts %llu B (%llu from cache); refused %llu; dropped %llu%s; "
		 "flatlines %llu",
		 name, (unsigned long long)STAT_GET(s->sessions_opened), (unsigned long long)closed,
		 (unsigned)STAT_GET(s->sessions_active), (unsigned long long)STAT_GET(s->up_pkts),
		 (unsigned long long)STAT_GET(s->up_bytes),
		 (unsigned long long)STAT_GET(s->down_pkts),
		 (unsigned long long)STAT_GET(s->down_bytes),
		 (unsigned long long)STAT_GET(s->cache_answers),
		 (unsigned long long)STAT_GET(s->refused), (unsigned long long)dropped, why,
		 (unsigned long long)STAT_GET(s->flatlines));
}
