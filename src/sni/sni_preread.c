/* SPDX-License-Identifier: ISC */
/* An SNI listener's new connections: accept (bans, the caps per source,
 * connections and prereads, max-preread's eviction), the ClientHello read
 * and kept, its server name routed, the upstream's connect. */
#include "sni_int.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "proxy_v2.h"

/* A preread this old has had its time for a hello: the first to give way
 * at max-preread (evict_one). */
#define SNI_PREREAD_STALE (1000 * NS_PER_MS)
/* The preread buffer: the most the reader consumes before answering, and
 * the rest of the chunk that ended the hello (0-RTT data may follow it). */
#define SNI_PRE_MAX (TLS_HELLO_WIRE_MAX(TLS_HELLO_CAP_DEFAULT) + LOOP_STREAM_CHUNK)

static enum sni_result hello_result(enum tls_hello_result r)
{
	switch (r) {
	case TLS_HELLO_NOT_TLS:
		return SNI_NOT_TLS;
	case TLS_HELLO_NOT_CLIENT_HELLO:
		return SNI_NOT_CLIENT_HELLO;
	case TLS_HELLO_NO_SNI:
		return SNI_NO_SNI;
	case TLS_HELLO_BAD_NAME:
		return SNI_BAD_NAME;
	case TLS_HELLO_TOO_BIG:
		return SNI_TOO_BIG;
	default:
		return SNI_MALFORMED;
	}
}

static void connect_upstream(struct sni_listener *l, struct sni_conn *c, uint64_t now)
{
	int one = 1, fd;

	fd = socket(c->upstream.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		sni_conn_refuse(l, c, SNI_NO_RESOURCES, now);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd[SIDE_U] = fd;
	if (l->ops->connect(l->loop, fd, &c->upstream.sa, addr_len(&c->upstream),
			    sni_conn_id(l, c, SIDE_U)) < 0) {
		sni_conn_refuse(l, c, SNI_CONNECT_FAILED, now);
		return;
	}
	c->state = C_CONNECTING;
	sni_conn_arm(l, c, now + l->conf->connect_timeout_ms * NS_PER_MS);
}

/* The tunnel's name: its hook takes the connection, fd and bytes read,
 * and the slot is freed without a close (the fd is the hook's now). */
static void hand_to_tunnel(struct sni_listener *l, struct sni_conn *c, uint64_t now)
{
	struct sni_tunnel *t = &l->all->tunnel;
	int fd = c->fd[SIDE_C];

	if (t->take(t->arg, l->worker, fd, &c->peer, c->pre + PROXY_V2_MAX, c->pre_len) < 0) {
		sni_conn_refuse(l, c, SNI_NO_RESOURCES, now);
		return;
	}
	c->fd[SIDE_C] = -1;
	c->dir[SIDE_C] = 0;
	SNI_ADD(l->stats.result[SNI_TUNNEL], 1);
	sni_conn_free(l, c);
}

/* A chunk of the ClientHello: keep it, feed the reader, act on its answer. */
void sni_preread(struct sni_listener *l, struct sni_conn *c, struct loop_dgram *d)
{
	const struct sni_route *r;
	enum tls_hello_result res;
	uint32_t need = c->pre_len + (uint32_t)d->len;

	if (d->len == 0) {
		sni_conn_preread_done(l, c);
		SNI_ADD(l->stats.result[SNI_PREREAD_CLOSED], 1);
		sni_conn_free(l, c);
		return;
	}
	if (need > c->pre_cap) {
		uint8_t *p = need <= SNI_PRE_MAX ? realloc(c->pre, PROXY_V2_MAX + need) : NULL;

		if (!p) {
			sni_conn_preread_done(l, c);
			sni_conn_refuse(l, c, SNI_NO_RESOURCES, d->now);
			return;
		}
		SNI_ADD(l->stats.memory,
			(int64_t)(need - c->pre_cap) + (c->pre ? 0 : (int64_t)PROXY_V2_MAX));
		c->pre = p;
		c->pre_cap = need;
	}
	memcpy(c->pre + PROXY_V2_MAX + c->pre_len, d->data, d->len);
	c->pre_len = need;
	res = tls_hello_feed(&c->hello, d->data, d->len);
	if (res == TLS_HELLO_MORE) {
		if (sni_conn_read(l, c, SIDE_C) < 0)
			sni_conn_free(l, c);
		return;
	}
	if (res != TLS_HELLO_NAME) {
		sni_conn_preread_done(l, c);
		sni_conn_refuse(l, c, hello_result(res), d->now);
		return;
	}
	/* Timed, but still among the prereads (max-preread) until the
	 * upstream answers: connecting, it holds what it read (up to
	 * SNI_PRE_MAX) as a preread does, for up to connect-timeout. */
	sni_conn_preread_timed(l, c);
	/* Again now: a drain that began while the hello was read (the
	 * process's lifecycle, not a copy) splices nothing new. */
	if (sni_draining(l)) {
		sni_conn_refuse(l, c, SNI_DRAINING, d->now);
		return;
	}
	/* The tunnel's name before the routes: exact, never a wildcard's. */
	if (sni_tunnel_match(l->all, &l->tun, c->hello.name, c->hello.name_len)) {
		hand_to_tunnel(l, c, d->now);
		return;
	}
	r = sni_routes_lookup(l->routes, c->hello.name, c->hello.name_len);
	if (!r) {
		sni_conn_refuse(l, c, SNI_UNKNOWN_NAME, d->now);
		return;
	}
	c->upstream = r->upstream;
	c->proxy = r->proxy_v2;
	connect_upstream(l, c, d->now);
}

/* max-preread (or this worker's share of it) is reached: close, without
 * a byte, the worker's oldest preread connection once it has had
 * SNI_PREREAD_STALE for its hello (a real client's comes within a round
 * trip); while every one is younger, the oldest of the address (IPv4,
 * IPv6 /64) that holds the most, ties to the address whose oldest is the
 * oldest (srctab_heaviest: no walk of the prereads). The first rule
 * keeps silent connections from many addresses, one each, from making a
 * real client's parallel connections (a browser's, a NAT's) the heaviest
 * and closing them (attack round 11: 1100 addresses, one silent
 * connection each, let a client keep 1 of its 6); the second churns many
 * young connections from a few addresses. False when the worker holds
 * none. */
static bool evict_one(struct sni_listener *l)
{
	uint32_t v = l->pre_head;

	if (v == SNI_NONE)
		return false;
	if (loop_now() - l->conns[v].start < SNI_PREREAD_STALE)
		v = srctab_heaviest(&l->pre_src);
	if (v == SRCTAB_NONE)
		return false;
	sni_conn_preread_done(l, &l->conns[v]);
	sni_conn_refuse_now(l, &l->conns[v], SNI_PREREAD_EVICTED);
	return true;
}

/* A new connection on the listening socket. */
void sni_preread_accept(void *obj, uint32_t ref, int fd)
{
	struct sni_listener *l = obj;
	uint64_t now = loop_now();
	struct sni_conn *c;
	socklen_t len = sizeof(union etr_sockaddr);
	union etr_sockaddr peer;

	if (ref != SNI_LISTEN_REF) {
		if (fd >= 0)
			close(fd);
		return;
	}
	if (fd < 0) {
		if (now >= l->log_next) {
			log_warnx("sni %s: accept: %s", l->conf->name, strerror(-fd));
			l->log_next = now + 10 * NS_PER_SEC;
		}
		return;
	}
	memset(&peer, 0, sizeof(peer));
	if (getpeername(fd, &peer.sa, &len) < 0) {
		c = NULL;
	} else if (l->bans && banlist_match(l->bans, &peer)) {
		/* ban-file: closed before any slot, cap count or read. */
		SNI_ADD(l->stats.result[SNI_BANNED], 1);
		close(fd);
		return;
	} else {
		c = sni_conn_alloc(l, fd, now);
	}
	if (!c) {
		/* No slot to linger in: close at once. */
		SNI_ADD(l->stats.result[SNI_NO_RESOURCES], 1);
		shutdown(fd, SHUT_WR);
		close(fd);
		return;
	}
	c->peer = peer;
	/* The source first: whatever follows (a linger too) counts for it,
	 * and a source over its cap is closed at once. */
	if (!sni_shared_ip_take(l->sh, &peer)) {
		sni_conn_refuse_now(l, c, SNI_CAP_PER_IP);
		return;
	}
	c->ip_counted = true;
	if (sni_draining(l)) {
		sni_conn_refuse(l, c, SNI_DRAINING, now);
		return;
	}
	if (SNI_ADD(l->sh->active, 1) >= l->conf->max_connections) {
		SNI_SUB(l->sh->active, 1);
		sni_conn_refuse_now(l, c, SNI_CAP_CONNECTIONS);
		return;
	}
	c->counted = true;
	SNI_ADD(l->stats.active, 1);
	/* A worker at its share of max-preread makes room among its own
	 * too: otherwise the workers an attack reaches most would end up
	 * with every preread, and one holding none could only refuse. */
	if (atomic_load_explicit(&l->stats.preread, memory_order_relaxed) >=
	    (l->conf->max_preread + l->all->nworkers - 1) / l->all->nworkers)
		evict_one(l);
	if (!sni_conn_preread_enter(l, c) && (!evict_one(l) || !sni_conn_preread_enter(l, c))) {
		sni_conn_refuse_now(l, c, SNI_CAP_PREREAD);
		return;
	}
	tls_hello_init(&c->hello, 0);
	sni_conn_arm(l, c, now + l->conf->preread_timeout_ms * NS_PER_MS);
	if (sni_conn_read(l, c, SIDE_C) < 0)
		sni_conn_free(l, c);
}
