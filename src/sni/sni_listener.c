/* SPDX-License-Identifier: ISC */
/* An SNI listener on one worker: accept, read the ClientHello (keeping its
 * bytes), route, connect, send a PROXY v2 header and the bytes read, then
 * splice both ways one chunk at a time; a refusal closes without a byte.
 * Here the listener's life: open, attach, new routes and bans, shutdown,
 * close. Its connections: sni_conn.c (slots, reads, ends), sni_preread.c
 * (accept to connect), sni_relay.c (both ways, the loop's events); their
 * states in sni_int.h. */
#include "sni_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "net.h"

/* One multi endpoint per listener: its connections' refs, and
 * SNI_LISTEN_REF for the listening socket. */
static const struct endpoint_ops conn_ops = {
    .name = "sni",
    .multi = true,
    .on_recv_error = sni_relay_recv_error,
    .on_sent = sni_relay_sent,
    .on_timer = sni_relay_timer,
    .on_accept = sni_preread_accept,
    .on_connected = sni_relay_connected,
    .on_stream = sni_relay_stream,
};

int sni_listener_open(struct sni_listener *l, struct sni_shared *all, unsigned i, unsigned w,
		      bool reuseport)
{
	const struct sni_conf *conf = all->l[i].conf;
	char a[ADDR_STRLEN];
	/* Every worker may get every connection (reuseport hashes), so each
	 * has room for them all: max-connections and SNI_LINGER_MAX, both
	 * counted across the workers (and so the fds main.c reserves), and a
	 * margin for connections closed as they are accepted. */
	uint32_t n = conf->max_connections + SNI_LINGER_MAX(conf->max_connections) + 16;

	memset(l, 0, sizeof(*l));
	l->fd = -1;
	l->all = all;
	l->sh = &all->l[i];
	l->conf = conf;
	l->worker = w;
	l->sh->stats[w] = &l->stats;
	/* The first socket, with one worker too: nobody may listen there
	 * already (another etrelay, a program with SO_REUSEPORT would
	 * otherwise share the port and take part of its connections). */
	l->fd = w == 0 ? net_tcp_port_free(&conf->listen) : 0;
	if (l->fd == 0)
		l->fd = net_listen_tcp(&conf->listen, reuseport);
	if (l->fd < 0) {
		log_warnx("sni %s: listen on %s (TCP): %s%s", conf->name,
			  addr_str(&conf->listen.sa, a), strerror(-l->fd),
			  l->fd == -EADDRINUSE ? " (another process listens there)"
					       : addr_bind_hint(l->fd));
		return l->fd;
	}
	l->conns = calloc(n, sizeof(*l->conns));
	/* Prereads are at most max-preread across the workers. */
	if (!l->conns || srctab_init(&l->pre_src, conf->max_preread, 0, n) < 0) {
		log_warn("sni %s: %u connections", conf->name, n);
		return -ENOMEM;
	}
	l->nconns = n;
	for (uint32_t k = 0; k < n; k++) {
		l->conns[k].fd[0] = l->conns[k].fd[1] = -1;
		l->conns[k].pipe[0][0] = l->conns[k].pipe[0][1] = -1;
		l->conns[k].pipe[1][0] = l->conns[k].pipe[1][1] = -1;
		l->conns[k].next_free = k + 1 < n ? k + 1 : SNI_NONE;
		timer_init(&l->conns[k].timer, 0);
	}
	l->free_head = 0;
	l->free_tail = n - 1;
	l->pre_head = l->pre_tail = SNI_NONE;
	return 0;
}

int sni_listener_attach(struct sni_listener *l, const struct loop_ops *ops, struct loop *loop,
			struct endpoint_table *ep)
{
	uint64_t sip[2] = {net_random64(), net_random64()};
	uint32_t pool = LOOP_STREAM_CHUNKS;
	int a;

	if (!ops->listen || !ops->stream_read)
		return -EOPNOTSUPP; /* a backend without streams */
	l->ops = ops;
	l->loop = loop;
	l->ep = ep;
	l->lst = ops->stats ? ops->stats(loop) : NULL;
	l->splice = l->conf->splice && ops->stream_splice_in && ops->stream_splice_out;
	if (l->conf->splice && !l->splice && l->worker == 0)
		log_warnx("sni %s: splice yes: the %s loop does not splice yet, its bytes are "
			  "copied",
			  l->conf->name, ops->name);
	if (l->lst && atomic_load_explicit(&l->lst->stream_pool, memory_order_relaxed))
		pool = (uint32_t)atomic_load_explicit(&l->lst->stream_pool, memory_order_relaxed);
	if (sni_pin_init(&l->pin, pool, l->nconns, (const uint8_t *)sip) < 0)
		return -ENOMEM;
	if ((a = endpoint_add(ep, &conn_ops, l)) < 0)
		return a;
	l->slot_conns = (unsigned)a;
	l->routes = sni_shared_take(l->all, l->sh, l->worker, &l->gen);
	l->attached = true;
	return ops->listen(loop, l->fd, endpoint_ref_id(l->slot_conns, SNI_LISTEN_REF));
}

void sni_listener_take_routes(struct sni_listener *l)
{
	uint64_t gen, now = loop_now();
	const struct sni_routes *t = sni_shared_take(l->all, l->sh, l->worker, &gen);

	if (gen == l->gen)
		return;
	l->routes = t;
	l->gen = gen;
	for (uint32_t k = 0; k < l->nconns; k++) {
		struct sni_conn *c = &l->conns[k];
		const struct sni_route *r;

		if (c->state != C_CONNECTING && c->state != C_SENDPRE && c->state != C_SPLICE)
			continue;
		r = sni_routes_lookup(t, c->hello.name, c->hello.name_len);
		if (r && addr_equal(&r->upstream, &c->upstream) && r->proxy_v2 == c->proxy)
			continue;
		log_debug("sni %s: %s: route gone or changed, closing", l->conf->name,
			  c->hello.name);
		if (c->state == C_CONNECTING)
			sni_conn_refuse(l, c, SNI_ROUTE_GONE, now);
		else
			sni_conn_end(l, c, SNI_END_REVOKED);
	}
}

void sni_listener_take_bans(struct sni_listener *l, const struct banlist *b)
{
	l->bans = b;
	if (!l->attached || !b)
		return;
	for (uint32_t k = 0; k < l->nconns; k++) {
		struct sni_conn *c = &l->conns[k];

		if (c->state == C_FREE || c->state == C_LINGER || c->state == C_GONE ||
		    !banlist_match(b, &c->peer))
			continue;
		if (c->state == C_PREREAD) {
			sni_conn_preread_done(l, c);
			sni_conn_refuse_now(l, c, SNI_BANNED);
		} else if (c->state == C_CONNECTING) {
			sni_conn_refuse_now(l, c, SNI_BANNED);
		} else {
			sni_conn_end(l, c, SNI_END_BANNED);
		}
	}
}

void sni_listener_shutdown(struct sni_listener *l)
{
	for (uint32_t k = 0; k < l->nconns && l->attached; k++) {
		struct sni_conn *c = &l->conns[k];

		if (c->state == C_SENDPRE || c->state == C_SPLICE)
			sni_conn_end(l, c, SNI_END_SHUTDOWN);
		else if (c->state != C_FREE)
			sni_conn_free(l, c);
	}
	if (l->attached && l->fd >= 0)
		l->ops->del_socket(l->loop, l->fd, endpoint_ref_id(l->slot_conns, SNI_LISTEN_REF));
}

void sni_listener_close(struct sni_listener *l)
{
	for (uint32_t k = 0; k < l->nconns; k++) {
		for (int s = 0; s < 2; s++)
			if (l->conns[k].fd[s] >= 0)
				close(l->conns[k].fd[s]);
		sni_conn_pipes_close(&l->conns[k]);
	}
	for (uint32_t k = 0; k < l->nconns; k++)
		free(l->conns[k].pre);
	free(l->conns);
	l->conns = NULL;
	srctab_free(&l->pre_src);
	sni_pin_free(&l->pin);
	l->nconns = 0;
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}
