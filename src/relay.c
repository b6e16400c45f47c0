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

static void random_key(uint8_t key[16])
{
	uint64_t v[2] = {net_random64(), net_random64()};

	memcpy(key, v, sizeof(v));
}

int relay_open(struct relay *r, unsigned index, const struct relay_conf *conf,
	       const union etr_sockaddr *upstream, struct etr_stats *global)
{
	struct udprelay_conf fc = {
		.name = conf->name,
		.max_sessions = conf->max_sessions,
		.sessions_per_ip = conf->sessions_per_ip,
		.session_rate = conf->session_rate,
		.ip_session_rate = conf->ip_session_rate,
		.session_timeout = conf->session_timeout_ms * NS_PER_MS,
		.unassured_timeout = conf->unassured_timeout_ms * NS_PER_MS,
		.listener_loopback = addrclass_bogon(&conf->listen, false) &&
				     !addrclass_bogon(&conf->listen, true),
	};
	char a[ADDR_STRLEN];
	uint8_t key[16], key2[16];
	int err, fd;

	memset(r, 0, sizeof(*r));
	r->conf = conf;
	r->index = index;
	r->global = global;
	r->upstream = *upstream;
	r->port_next = conf->port_min;
	r->fwd.pub_fd = r->masters.probe_fd = r->masters.res_fd = -1;
	pthread_mutex_init(&r->stats.lock, NULL);
	snprintf(r->stats.name, sizeof(r->stats.name), "%s", conf->name);
	addr_str(&conf->listen.sa, r->stats.public_addr);
	addr_str(&upstream->sa, r->stats.upstream);
	snprintf(r->stats.game, sizeof(r->stats.game), "%s", conf->game);
	masters_init(&r->masters, conf, upstream, &r->stats, global);

	random_key(key);
	random_key(key2);
	err = udprelay_init(&r->fwd, &fc, -1, key, key2, &r->stats, global, loop_now());
	udprelay_set_sockops(&r->fwd, &relay_sockops, r);
	udprelay_set_policy(&r->fwd, &q3policy_ops, &r->policy);
	masters_set_events(&r->masters, &q3policy_masters_events, &r->policy, &r->fwd);
	if (!err)
		err = q3policy_init(&r->policy, conf, &r->fwd, &r->masters, net_random64,
				    loop_now());
	if (err < 0) {
		log_warnx("relay %s: tables for %u sessions: %s", conf->name, conf->max_sessions,
			  strerror(-err));
		return err;
	}
	fd = net_bind_public(&conf->listen, false);
	if (fd < 0) {
		log_warnx("relay %s: bind %s: %s%s", conf->name, addr_str(&conf->listen.sa, a),
			  strerror(-fd),
			  fd == -EADDRINUSE ? " (another process owns the port)" : "");
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
		fprintf(f, ",\"server_port\":%u,\"client\":", net_local_port(s->fd));
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
void relay_log_stats(const struct relay *r)
{
	const struct relay_stats *s = &r->stats;
	uint64_t dropped = 0, closed = 0;
	char why[512] = "";
	size_t o = 0;

	for (int i = 0; i < DROP_COUNT; i++) {
		uint64_t n = STAT_GET(s->drops[i]);

		dropped += n;
		if (n && o < sizeof(why))
			o += (size_t)snprintf(why + o, sizeof(why) - o, "%s%s %llu", o ? ", " : " (",
					      stats_drop_name((enum stats_drop)i),
					      (unsigned long long)n);
	}
	if (o && o < sizeof(why) - 1)
		strcat(why, ")");
	for (int i = 0; i < CLOSE_COUNT; i++)
		closed += STAT_GET(s->sessions_closed[i]);
	log_info("stats %s: sessions opened %llu closed %llu active %u; up %llu pkts %llu B; "
		 "down %llu pkts %llu B (%llu from cache); refused %llu; dropped %llu%s; "
		 "flatlines %llu",
		 r->conf->name, (unsigned long long)STAT_GET(s->sessions_opened),
		 (unsigned long long)closed, r->fwd.st.active,
		 (unsigned long long)STAT_GET(s->up_pkts), (unsigned long long)STAT_GET(s->up_bytes),
		 (unsigned long long)STAT_GET(s->down_pkts),
		 (unsigned long long)STAT_GET(s->down_bytes),
		 (unsigned long long)STAT_GET(s->cache_answers),
		 (unsigned long long)STAT_GET(s->refused), (unsigned long long)dropped, why,
		 (unsigned long long)STAT_GET(s->flatlines));
}
