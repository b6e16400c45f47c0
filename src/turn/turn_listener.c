/* SPDX-License-Identifier: ISC */
/* The TURN listener on one worker, the top of turn/: its sockets (open,
 * attach, bans, shutdown, free), the callbacks of its UDP socket and
 * timer, expiry and the certificate reload. A client's message goes to
 * turn_req.c (the dispatch, and the requests) or turn_data.c (the data
 * path); answers and authentication are turn_answer.c; TCP and TLS
 * turn_conn.c (connections) and turn_stream.c (frames); the protocol's
 * pure parts stun.c, turn_auth.c, turn_alloc.c and turn_peer.c. */
#include "turn_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "net.h"
#include "stats.h"

static void on_timer(void *obj, uint32_t ref, uint64_t now)
{
	struct turn_listener *l = obj;
	uint32_t idx;

	(void)ref;
	l->timer_at = UINT64_MAX;
	while ((idx = turn_alloc_expire(&l->t, now / NS_PER_MS)) != TURN_ALLOC_NONE) {
		turn_allocation_end(l, idx);
		STAT_ADD(l->stats.expired, 1);
	}
	/* No authenticated request within tcp-auth-timeout (oldest first). */
	while (l->ua_head != UINT32_MAX &&
	       now >= l->conns[l->ua_head].opened + l->sh->conf->tcp_auth_timeout_ms * NS_PER_MS) {
		STAT_ADD(l->stats.tcp_dropped[TURN_TCP_AUTH_TIMEOUT], 1);
		turn_conn_close(l, l->ua_head);
	}
	if (l->nopen && now >= l->sweep_at) {
		/* A connection without an allocation for TURN_CONN_IDLE_MS is
		 * closed: it would hold its fd and slot for good. */
		for (uint32_t i = 0; i < l->nconns; i++) {
			struct turn_conn *c = &l->conns[i];

			if (c->fd >= 0 && c->alloc == TURN_ALLOC_NONE &&
			    now - c->since >= TURN_CONN_IDLE_MS * NS_PER_MS) {
				STAT_ADD(l->stats.conns_idle, 1);
				turn_conn_close(l, i);
			}
		}
		l->sweep_at = now + TURN_CONN_SWEEP_MS * NS_PER_MS;
	}
	turn_timer_arm(l);
}

/* The listener's UDP socket. */
static void udp_dgram(void *obj, uint32_t ref, struct loop_dgram *d)
{
	struct turn_listener *l = obj;
	struct turn_ctx x;

	(void)ref;
	if (d->truncated) {
		STAT_ADD(l->stats.dropped[TURN_DROP_TRUNCATED], 1);
		return;
	}
	if (!d->from || !addr_from(&x.client, d->from, d->fromlen)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_NOT_TURN], 1);
		return;
	}
	/* Before any parsing: a banned client gets no answer, and its
	 * allocation (if a reload banned it while it lived) no Refresh. */
	if (turn_banned(l, &x.client)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_BANNED], 1);
		return;
	}
	turn_ctx_init(&x, l, d->now, 0);
	turn_on_message(&x, d->data, d->len, d);
}

static void udp_recv_error(void *obj, uint32_t ref, int err)
{
	(void)obj;
	(void)ref;
	log_debug("turn: receive: %s", strerror(-err));
}

static const struct endpoint_ops turn_udp_ops = {
    .name = "turn",
    .on_dgram = udp_dgram,
    .on_recv_error = udp_recv_error,
    .on_timer = on_timer,
};

static const struct endpoint_ops turn_relay_ops = {
    .name = "turn-relay",
    .multi = true,
    .on_dgram = turn_data_relay_dgram,
    .on_recv_error = turn_data_relay_recv_error,
};

static const struct endpoint_ops turn_tcp_ops = {
    .name = "turn-tcp",
    .on_accept = turn_conn_tcp_accept,
};

/* The certificate reload, on worker 0's TLS listener: read the pair again
 * every tls-reload-interval, put it in force when it changed and loads. */
static void tls_reload_tick(void *obj, uint32_t ref, uint64_t now)
{
	struct turn_listener *l = obj;
	struct turn_lshared *sh = l->sh;

	(void)ref;
	switch (tls_reload_check(&sh->reload, now)) {
	case TLS_RELOAD_LOADED:
		log_info("turn %s: certificate reloaded from %s", sh->conf->name,
			 sh->conf->tls_cert);
		break;
	case TLS_RELOAD_FAILED:
		log_warnx("turn %s: certificate reload: %s (the last good pair stays in force)",
			  sh->conf->name, sh->reload.error);
		break;
	default:
		break;
	}
	if (l->ops->timer_set(l->loop, &l->reload_timer,
			      now + sh->conf->tls_reload_ms * NS_PER_MS) < 0)
		log_warnx("turn %s: reload timer: out of memory", sh->conf->name);
}

static const struct endpoint_ops turn_tls_ops = {
    .name = "turn-tls",
    .on_accept = turn_conn_tls_accept,
    .on_timer = tls_reload_tick,
};

static const struct endpoint_ops turn_conn_ops = {
    .name = "turn-conn",
    .multi = true,
    .on_stream = turn_stream_in,
    .on_sent = turn_conn_sent,
    .on_recv_error = turn_conn_recv_error,
};

int turn_listener_open(struct turn_listener *l, struct turn_shared *all, unsigned i, unsigned w,
		       bool reuseport)
{
	struct turn_lshared *sh = &all->l[i];
	const struct turn_conf *c = sh->conf;
	uint16_t lo = sh->worker_min[w], hi = sh->worker_max[w];
	uint32_t cap = c->max_allocations, width = (uint32_t)hi - lo + 1;
	uint8_t key[16];
	char a[ADDR_STRLEN];
	int err;

	memset(l, 0, sizeof(*l));
	l->all = all;
	l->sh = sh;
	l->index = i;
	l->worker = w;
	l->fd = l->tcp_fd = l->tls_fd = -1;
	l->timer_at = UINT64_MAX;
	l->conn_free = UINT32_MAX;
	sh->stats[w] = &l->stats;
	if (cap > width)
		cap = width;
	if (cap > TURN_ALLOC_CAP_MAX)
		cap = TURN_ALLOC_CAP_MAX;
	rl_random_key(net_random64, key);
	err = turn_alloc_init(&l->t, cap, lo, hi, key, net_random64());
	if (err < 0) {
		log_warnx("turn %s: allocation table: %s", c->name, strerror(-err));
		return -1;
	}
	l->tid_base[0] = net_random64();
	l->tid_base[1] = net_random64();
	l->scratch = malloc(TURN_SCRATCH);
	l->relay_fd = malloc(cap * sizeof(*l->relay_fd));
	l->relay_conn = calloc(cap, sizeof(*l->relay_conn));
	if (!l->relay_fd || !l->relay_conn || !l->scratch) {
		log_warnx("turn %s: out of memory", c->name);
		return -1;
	}
	for (uint32_t k = 0; k < cap; k++)
		l->relay_fd[k] = -1;
	for (int k = 0; k < 2; k++) {
		rl_random_key(net_random64, key);
		err = rl_table_init(&l->rl401[k], rl_worker_entries(TURN_RL_ENTRIES, all->nworkers),
				    c->unauth_ip_burst, c->unauth_ip_rate, key);
		if (err < 0) {
			log_warnx("turn %s: rate table: %s", c->name, strerror(-err));
			return -1;
		}
		rl_bucket_init(&l->unauth_rl[k], rl_worker_part(c->unauth_burst, all->nworkers),
			       rl_worker_part(c->unauth_rate, all->nworkers), 0);
	}
	rl_random_key(net_random64, key);
	err = rl_table_init(&l->authf_ip_rl, rl_worker_entries(TURN_RL_ENTRIES, all->nworkers),
			    c->authf_ip_burst, c->authf_ip_rate, key);
	if (err == 0) {
		rl_random_key(net_random64, key);
		err = turn_key_cache_init(&l->keys, TURN_KEY_CACHE, key);
	}
	if (err == 0) {
		rl_random_key(net_random64, key);
		err =
		    rl_stamps_init(&l->authf_net, rl_worker_entries(TURN_RL_ENTRIES, all->nworkers),
				   24, 48, TURN_AUTHF_NET_TTL, key);
	}
	if (err < 0) {
		log_warnx("turn %s: failed-authentication tables: %s", c->name, strerror(-err));
		return -1;
	}
	rl_bucket_init(&l->authf_rl, rl_worker_part(c->authf_burst, all->nworkers),
		       rl_worker_part(c->authf_rate, all->nworkers), 0);
	addr_str(&c->listen.sa, a);
	/* As for a relay: the first socket must not join a group another
	 * process holds. */
	l->fd = reuseport && w == 0 ? net_port_free(&c->listen) : 0;
	if (l->fd == 0)
		l->fd = net_bind_public(&c->listen, reuseport);
	if (l->fd < 0) {
		log_warnx("turn %s: listen %s: bind: %s%s", c->name, a, strerror(-l->fd),
			  addr_bind_hint(l->fd));
		l->fd = -1;
		return -1;
	}
	l->ua_head = l->ua_tail = UINT32_MAX;
	l->na_head = l->na_tail = UINT32_MAX;
	if (c->tcp_set || c->tls_set) {
		/* tcp-max-connections is the listener's total, split evenly
		 * as the rates are: the descriptors it takes do not grow with
		 * the CPU count (a config checked on 2 CPUs starts on 64). */
		uint32_t slots;

		l->tcp_cap = rl_worker_part(c->tcp_max_conns, all->nworkers);
		slots = TURN_CONN_SLOTS(l->tcp_cap);
		l->conns = calloc(slots, sizeof(*l->conns));
		if (!l->conns) {
			log_warnx("turn %s: out of memory", c->name);
			return -1;
		}
		l->nconns = slots;
		if (srctab_init(&l->ips, slots, c->tcp_max_per_ip, 0) < 0) {
			log_warnx("turn %s: out of memory", c->name);
			return -1;
		}
		for (uint32_t k = slots; k-- > 0;) {
			l->conns[k].fd = -1;
			l->conns[k].alloc = TURN_ALLOC_NONE;
			l->conns[k].next_free = l->conn_free;
			l->conn_free = k;
		}
	}
	if (c->tcp_set) {
		l->tcp_fd = w == 0 ? net_tcp_port_free(&c->tcp_listen) : 0;
		if (l->tcp_fd == 0)
			l->tcp_fd = net_listen_tcp(&c->tcp_listen, reuseport);
		if (l->tcp_fd < 0) {
			addr_str(&c->tcp_listen.sa, a);
			log_warnx("turn %s: tcp-listen %s: %s%s", c->name, a, strerror(-l->tcp_fd),
				  l->tcp_fd == -EADDRINUSE ? " (another process listens there)"
							   : addr_bind_hint(l->tcp_fd));
			l->tcp_fd = -1;
			return -1;
		}
	}
	if (c->tls_set) {
		rl_random_key(net_random64, key);
		err =
		    rl_table_init(&l->tls_ip_rl, rl_worker_entries(TURN_RL_ENTRIES, all->nworkers),
				  c->tls_ip_burst, c->tls_ip_rate, key);
		if (err < 0) {
			log_warnx("turn %s: rate table: %s", c->name, strerror(-err));
			return -1;
		}
		rl_bucket_init(&l->tls_rl, rl_worker_part(c->tls_burst, all->nworkers),
			       rl_worker_part(c->tls_rate, all->nworkers), loop_now());
		l->tls_rx = malloc(TURN_TLS_RX);
		l->tls_tx = malloc(TURN_CONN_RX_MAX);
		if (!l->tls_rx || !l->tls_tx) {
			log_warnx("turn %s: out of memory", c->name);
			return -1;
		}
		l->tls_fd = w == 0 ? net_tcp_port_free(&c->tls_listen) : 0;
		if (l->tls_fd == 0)
			l->tls_fd = net_listen_tcp(&c->tls_listen, reuseport);
		if (l->tls_fd < 0) {
			addr_str(&c->tls_listen.sa, a);
			log_warnx("turn %s: tls-listen %s: %s%s", c->name, a, strerror(-l->tls_fd),
				  l->tls_fd == -EADDRINUSE ? " (another process listens there)"
							   : addr_bind_hint(l->tls_fd));
			l->tls_fd = -1;
			return -1;
		}
	}
	return 0;
}

int turn_listener_attach(struct turn_listener *l, const struct loop_ops *ops, struct loop *loop,
			 struct endpoint_table *ep)
{
	int s;

	l->ops = ops;
	l->loop = loop;
	l->ep = ep;
	/* The daemon has added the host's addresses and its sockets by now;
	 * the worker reads the former again (turn_data_peer_ok). */
	l->policy = l->sh->policy;
	l->hosts_at = loop_now();
	if ((s = endpoint_add(ep, &turn_udp_ops, l)) < 0)
		return s;
	l->slot_udp = (unsigned)s;
	l->attached = true;
	if ((s = endpoint_add(ep, &turn_relay_ops, l)) < 0)
		return s;
	l->slot_relay = (unsigned)s;
	timer_init(&l->timer, endpoint_id(ep, l->slot_udp));
	if ((s = ops->add_socket(loop, l->fd, endpoint_id(ep, l->slot_udp))) < 0)
		return s;
	if (l->tcp_fd < 0 && l->tls_fd < 0)
		return 0;
	if (!ops->listen || !ops->stream_read)
		return -EOPNOTSUPP;
	if ((s = endpoint_add(ep, &turn_conn_ops, l)) < 0)
		return s;
	l->slot_conn = (unsigned)s;
	if (l->tcp_fd >= 0) {
		if ((s = endpoint_add(ep, &turn_tcp_ops, l)) < 0)
			return s;
		l->slot_tcp = (unsigned)s;
		if ((s = ops->listen(loop, l->tcp_fd, endpoint_id(ep, l->slot_tcp))) < 0)
			return s;
	}
	if (l->tls_fd >= 0) {
		if ((s = endpoint_add(ep, &turn_tls_ops, l)) < 0)
			return s;
		l->slot_tls = (unsigned)s;
		if ((s = ops->listen(loop, l->tls_fd, endpoint_id(ep, l->slot_tls))) < 0)
			return s;
		/* One worker looks at the files; the others see the context
		 * it puts in force. */
		timer_init(&l->reload_timer, endpoint_id(ep, l->slot_tls));
		if (l->worker == 0 &&
		    (s = ops->timer_set(loop, &l->reload_timer,
					loop_now() + l->sh->conf->tls_reload_ms * NS_PER_MS)) < 0)
			return s;
	}
	return 0;
}

void turn_listener_take_bans(struct turn_listener *l, const struct banlist *b)
{
	l->bans = b;
	if (!l->attached || !b)
		return;
	for (uint32_t i = 0; i < l->nconns; i++)
		if (l->conns[i].used && l->conns[i].fd >= 0 &&
		    turn_banned(l, &l->conns[i].client)) {
			STAT_ADD(l->stats.tcp_dropped[TURN_TCP_BANNED], 1);
			turn_conn_close(l, i);
		}
	for (uint32_t idx = 0; idx < l->t.cap; idx++)
		if (l->t.a[idx].live && l->t.a[idx].tuple.transport == TURN_UDP &&
		    turn_banned(l, &l->t.a[idx].tuple.client))
			turn_allocation_end(l, idx);
	turn_timer_arm(l);
}

void turn_listener_shutdown(struct turn_listener *l)
{
	if (!l->attached)
		return;
	for (uint32_t i = 0; i < l->nconns; i++)
		if (l->conns[i].fd >= 0)
			turn_conn_close(l, i);
	for (uint32_t i = 0; i < l->t.cap; i++)
		if (l->t.a[i].live)
			turn_allocation_end(l, i);
	l->ops->timer_cancel(l->loop, &l->timer);
	l->timer_at = UINT64_MAX;
	if (l->tls_fd >= 0)
		l->ops->timer_cancel(l->loop, &l->reload_timer);
}

void turn_allocations_json(const struct turn_listener *l, FILE *f, uint64_t now, bool *first)
{
	static const char *const transport[] = {"udp", "tcp", "tls"};
	const struct turn_alloc_table *t = &l->t;
	uint64_t now_ms = now / NS_PER_MS;
	char a[ADDR_STRLEN];

	/* At most the worker's max-allocations entries, in table order. */
	for (uint32_t i = 0; i < t->cap; i++) {
		const struct turn_alloc *al = &t->a[i];
		union etr_sockaddr relayed = l->sh->conf->relay_addr;
		unsigned perms, chans;

		if (!al->live)
			continue;
		turn_alloc_counts(t, i, now_ms, &perms, &chans);
		relayed.in.sin_port = htons(al->port);
		fputs(*first ? "\n" : ",\n", f);
		*first = false;
		fputs("{\"turn\":", f);
		json_string(f, l->sh->conf->name);
		fprintf(f, ",\"worker\":%u,\"client\":", l->worker);
		json_string(f, addr_str(&al->tuple.client.sa, a));
		fprintf(f, ",\"transport\":\"%s\",\"relayed\":", transport[al->tuple.transport]);
		json_string(f, addr_str(&relayed.sa, a));
		fputs(",\"username\":", f);
		json_string(f, al->username);
		fprintf(
		    f,
		    ",\"age_seconds\":%llu,\"lifetime_seconds\":%llu,\"permissions\":%u,"
		    "\"channels\":%u,\"datagrams_to_peer\":%llu,\"bytes_to_peer\":%llu,"
		    "\"datagrams_to_client\":%llu,\"bytes_to_client\":%llu}",
		    (unsigned long long)((now_ms - al->created) / 1000),
		    (unsigned long long)(al->expires > now_ms ? (al->expires - now_ms) / 1000 : 0),
		    perms, chans, (unsigned long long)al->dgrams_to_peer,
		    (unsigned long long)al->bytes_to_peer, (unsigned long long)al->dgrams_to_client,
		    (unsigned long long)al->bytes_to_client);
	}
}

void turn_listener_free(struct turn_listener *l)
{
	/* The loop is gone by now (worker_free): close and free, no more. */
	if (l->attached) {
		endpoint_del(l->ep, l->slot_udp);
		endpoint_del(l->ep, l->slot_relay);
		if (l->tcp_fd >= 0)
			endpoint_del(l->ep, l->slot_tcp);
		if (l->tls_fd >= 0)
			endpoint_del(l->ep, l->slot_tls);
		if (l->tcp_fd >= 0 || l->tls_fd >= 0)
			endpoint_del(l->ep, l->slot_conn);
	}
	l->attached = false;
	if (l->fd >= 0)
		close(l->fd);
	if (l->tcp_fd >= 0)
		close(l->tcp_fd);
	if (l->tls_fd >= 0)
		close(l->tls_fd);
	l->fd = l->tcp_fd = l->tls_fd = -1;
	turn_conns_free(l);
	for (uint32_t i = 0; l->relay_fd && i < l->t.cap; i++)
		if (l->relay_fd[i] >= 0)
			close(l->relay_fd[i]);
	free(l->relay_fd);
	free(l->relay_conn);
	free(l->scratch);
	free(l->tls_rx);
	free(l->tls_tx);
	l->scratch = l->tls_rx = l->tls_tx = NULL;
	l->relay_fd = NULL;
	l->relay_conn = NULL;
	if (l->t.a)
		turn_alloc_free(&l->t);
	rl_table_free(&l->rl401[0]);
	rl_table_free(&l->rl401[1]);
	rl_table_free(&l->tls_ip_rl);
	rl_table_free(&l->authf_ip_rl);
	rl_stamps_free(&l->authf_net);
	turn_key_cache_free(&l->keys);
}
