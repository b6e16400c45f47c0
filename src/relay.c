/* SPDX-License-Identifier: ISC */
/* What to do with a datagram: find or open the client's session, forward,
 * count. Plus the heartbeat round's I/O and master resolution. */
#include "relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "q3proto.h"
#include "resolver.h"
#include "version.h"

static const char *const drop_names[RELAY_DROP_COUNT] = {
	[RELAY_DROP_QUEUE_FULL] = "queue_full",
	[RELAY_DROP_TRUNCATED] = "truncated",
	[RELAY_DROP_TABLE_FULL] = "table_full",
	[RELAY_DROP_SOCKET] = "socket",
	[RELAY_DROP_SEND_ERROR] = "send_error",
	[RELAY_DROP_BAD_SOURCE] = "bad_source",
};

static const char *const close_names[SESSION_CLOSE_REASON_COUNT] = {
	[SESSION_CLOSE_IDLE] = "idle",
	[SESSION_CLOSE_SHUTDOWN] = "shutdown",
	[SESSION_CLOSE_ERROR] = "error",
};

const char *relay_drop_name(enum relay_drop d)
{
	return (unsigned)d < RELAY_DROP_COUNT ? drop_names[d] : "unknown";
}

static uint64_t random64(void)
{
	uint64_t v = 0;

	/* getrandom with GRND_NONBLOCK never blocks after boot; on failure a
	 * clock-derived value still differs per round. */
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = loop_now() * 0x9e3779b97f4a7c15ull;
	return v;
}

int relay_open(struct relay *r, const struct etr_conf *conf, const union etr_sockaddr *upstream)
{
	char a[ADDR_STRLEN];
	uint8_t key[16];
	int err;

	memset(r, 0, sizeof(*r));
	r->conf = conf;
	r->upstream = *upstream;
	r->pub_addr = conf->listen;
	r->pub_fd = r->probe_fd = r->res_fd = r->sig_fd = -1;
	r->session_timeout = conf->session_timeout_ms * NS_PER_MS;
	hb_init(&r->hb, conf->heartbeat_interval_ms * NS_PER_MS,
		conf->probe_timeout_ms * NS_PER_MS, CONF_PROBE_ATTEMPTS);

	for (unsigned i = 0; i < 2; i++) {
		uint64_t v = random64();
		memcpy(key + 8 * i, &v, 8);
	}
	err = session_table_init(&r->st, conf->max_sessions, key);
	if (err < 0) {
		log_warnx("session table for %u sessions: %s", conf->max_sessions, strerror(-err));
		return err;
	}

	r->pub_fd = net_bind_public(&conf->listen);
	if (r->pub_fd < 0) {
		log_warnx("bind %s: %s%s", addr_str(&conf->listen.sa, a), strerror(-r->pub_fd),
			  r->pub_fd == -EADDRINUSE ? " (another process owns the port)" : "");
		return r->pub_fd;
	}
	r->probe_fd = net_connect_udp(upstream);
	if (r->probe_fd < 0) {
		log_warnx("probe socket to %s: %s", addr_str(&upstream->sa, a),
			  strerror(-r->probe_fd));
		return r->probe_fd;
	}
	err = resolver_create(&r->res, conf->listen.sa.sa_family, &r->res_fd);
	if (err < 0) {
		log_warnx("resolver: %s", strerror(-err));
		return err;
	}

	r->nmasters = conf->nmasters;
	for (unsigned i = 0; i < conf->nmasters; i++) {
		struct relay_master *m = &r->masters[i];
		char lit[ADDR_HOSTLEN + 8];

		memcpy(m->host, conf->masters[i].host, sizeof(m->host));
		m->port = conf->masters[i].port;
		m->last_err = -1; /* nothing logged yet */
		/* Literals need no resolver; map IPv4 for an IPv6 public socket. */
		addr_hostport(m->host, m->port, lit);
		if (addr_parse_numeric(lit, &m->addr) == 0) {
			if (m->addr.sa.sa_family == AF_INET && r->pub_addr.sa.sa_family == AF_INET6) {
				struct sockaddr_in in = m->addr.in;
				memset(&m->addr, 0, sizeof(m->addr));
				m->addr.in6.sin6_family = AF_INET6;
				m->addr.in6.sin6_port = in.sin_port;
				m->addr.in6.sin6_addr.s6_addr[10] = 0xff;
				m->addr.in6.sin6_addr.s6_addr[11] = 0xff;
				memcpy(&m->addr.in6.sin6_addr.s6_addr[12], &in.sin_addr, 4);
			}
			m->numeric = m->have_addr =
				m->addr.sa.sa_family == r->pub_addr.sa.sa_family;
		}
	}
	return 0;
}

int relay_attach(struct relay *r, const struct loop_ops *ops, struct loop *l, int sig_fd)
{
	int err;

	r->ops = ops;
	r->loop = l;
	r->sig_fd = sig_fd;
	err = ops->add_socket(l, r->pub_fd, RELAY_ID(RELAY_ID_PUBLIC, 0));
	if (!err)
		err = ops->add_socket(l, r->probe_fd, RELAY_ID(RELAY_ID_PROBE, 0));
	if (!err)
		err = ops->watch(l, r->res_fd, RELAY_ID(RELAY_ID_RESOLVER, 0));
	if (!err && sig_fd >= 0)
		err = ops->watch(l, sig_fd, RELAY_ID(RELAY_ID_SIGNAL, 0));
	return err;
}

static void session_close(struct relay *r, uint32_t idx, enum session_close_reason why)
{
	struct session *s = &r->st.s[idx];
	uint32_t id = RELAY_ID(RELAY_ID_SESSION, session_ref(&r->st, idx));
	char a[ADDR_STRLEN];
	int fd;

	if (log_debug_on)
		addr_str(&s->client.sa, a);
	r->ops->del_socket(r->loop, s->fd, id);
	fd = session_remove(&r->st, idx);
	close(fd);
	r->c.sessions_closed[why]++;
	log_debug("session - %s (%s, %u active)", a, close_names[why], r->st.active);
}

static void expire_sessions(struct relay *r, uint64_t now)
{
	uint32_t idx;

	while ((idx = session_expired(&r->st, now, r->session_timeout)) != SESSION_NONE)
		session_close(r, idx, SESSION_CLOSE_IDLE);
}

static uint32_t session_open(struct relay *r, const union etr_sockaddr *client, uint64_t now)
{
	uint32_t idx;
	int fd, err;

	/* Expired sessions make room before a new one is refused. */
	expire_sessions(r, now);
	if (r->st.active >= r->st.cap) {
		r->c.drops[RELAY_DROP_TABLE_FULL]++;
		return SESSION_NONE;
	}
	fd = net_connect_udp(&r->upstream);
	if (fd < 0) {
		r->c.drops[RELAY_DROP_SOCKET]++;
		log_debug("session socket: %s", strerror(-fd));
		return SESSION_NONE;
	}
	idx = session_insert(&r->st, client, fd, now);
	err = r->ops->add_socket(r->loop, fd,
				 RELAY_ID(RELAY_ID_SESSION, session_ref(&r->st, idx)));
	if (err < 0) {
		session_remove(&r->st, idx);
		close(fd);
		r->c.drops[RELAY_DROP_SOCKET]++;
		return SESSION_NONE;
	}
	r->c.sessions_opened++;
	if (log_debug_on) {
		char a[ADDR_STRLEN];
		log_debug("session + %s (%u active)", addr_str(&client->sa, a), r->st.active);
	}
	return idx;
}

static void log_packet(const struct relay *r, const union etr_sockaddr *client,
		       const struct loop_dgram *d, const char *dir)
{
	char a[ADDR_STRLEN], w[Q3_WORD_MAX];

	if (!log_debug_on || !q3_is_connectionless(d->data, d->len))
		return;
	q3_word(d->data, d->len, w);
	log_debug("%s %s %-3s %s (%zu B)", addr_str(&client->sa, a), dir, r->conf->game, w,
		  d->len);
}

/* Hand d to the kernel for session idx; counts the drop when it cannot. */
static bool forward(struct relay *r, uint32_t idx, int fd, const union etr_sockaddr *dst,
		    struct loop_dgram *d)
{
	struct session *s = &r->st.s[idx];
	uint32_t id = RELAY_ID(RELAY_ID_SESSION, session_ref(&r->st, idx));

	if (s->queued >= SESSION_QUEUE_MAX) {
		r->c.drops[RELAY_DROP_QUEUE_FULL]++;
		return false;
	}
	if (r->ops->forward(r->loop, fd, dst ? &dst->sa : NULL, dst ? addr_len(dst) : 0, d,
			    id) < 0) {
		r->c.drops[RELAY_DROP_SEND_ERROR]++;
		return false;
	}
	s->queued++;
	session_touch(&r->st, idx, d->now);
	return true;
}

static void from_client(struct relay *r, struct loop_dgram *d)
{
	union etr_sockaddr client;
	uint32_t idx;

	if (!d->from || !addr_from(&client, d->from, d->fromlen)) {
		r->c.drops[RELAY_DROP_BAD_SOURCE]++;
		return;
	}
	if (d->truncated) {
		r->c.drops[RELAY_DROP_TRUNCATED]++;
		return;
	}
	idx = session_lookup(&r->st, &client);
	if (idx != SESSION_NONE &&
	    r->st.s[idx].last_active + r->session_timeout <= d->now) {
		session_close(r, idx, SESSION_CLOSE_IDLE);
		idx = SESSION_NONE;
	}
	if (idx == SESSION_NONE && (idx = session_open(r, &client, d->now)) == SESSION_NONE)
		return;
	log_packet(r, &client, d, "->");
	if (forward(r, idx, r->st.s[idx].fd, NULL, d)) {
		r->st.s[idx].pkts_up++;
		r->c.up_pkts++;
		r->c.up_bytes += d->len;
	}
}

static void from_server(struct relay *r, uint32_t ref, struct loop_dgram *d)
{
	uint32_t idx = session_deref(&r->st, ref);
	struct session *s;

	if (idx == SESSION_NONE)
		return; /* the session closed while this was queued */
	if (d->truncated) {
		r->c.drops[RELAY_DROP_TRUNCATED]++;
		return;
	}
	s = &r->st.s[idx];
	log_packet(r, &s->client, d, "<-");
	if (forward(r, idx, r->pub_fd, &s->client, d)) {
		s->pkts_down++;
		r->c.down_pkts++;
		r->c.down_bytes += d->len;
	}
}

static void send_heartbeat(struct relay *r, struct relay_master *m, const char *tag)
{
	char a[ADDR_STRLEN], hp[ADDR_HOSTLEN + 8], text[CONF_TAG_MAX + 16];
	uint8_t pkt[CONF_TAG_MAX + 20];
	int n, err;

	snprintf(text, sizeof(text), "heartbeat %s\n", tag);
	n = q3_build(pkt, sizeof(pkt), text);
	err = net_send_copy(r->pub_fd, &m->addr, pkt, (size_t)n);
	addr_str(&m->addr.sa, a);
	addr_hostport(m->host, m->port, hp);
	if (err < 0) {
		r->c.heartbeats_failed++;
		log_warnx("heartbeat %s -> %s (%s): %s", tag, hp, a, strerror(-err));
		return;
	}
	if (strcmp(tag, r->conf->heartbeat) == 0) {
		r->c.heartbeats_sent++;
		log_debug("heartbeat %s -> %s (%s)", tag, hp, a);
	} else {
		r->c.flatlines_sent++;
		log_info("flatline %s -> %s (%s)", tag, hp, a);
	}
}

static void send_flatline(struct relay *r)
{
	if (r->conf->flatline[0] == '\0')
		return;
	/* Last good addresses: a flatline must not wait for DNS. */
	for (unsigned i = 0; i < r->nmasters; i++)
		if (r->masters[i].have_addr)
			send_heartbeat(r, &r->masters[i], r->conf->flatline);
}

/* Heartbeat every master, resolving names first (the heartbeat leaves when
 * the answer comes back; see on_resolved). */
static void heartbeat_masters(struct relay *r)
{
	for (unsigned i = 0; i < r->nmasters; i++) {
		struct relay_master *m = &r->masters[i];

		if (m->numeric) {
			send_heartbeat(r, m, r->conf->heartbeat);
			continue;
		}
		m->heartbeat_due = true;
		if (resolver_start(r->res, i, m->host, m->port) == -EBUSY)
			log_debug("master %s: still resolving", m->host);
	}
}

static void on_resolved(struct relay *r)
{
	struct resolver_result res;
	char a[ADDR_STRLEN];

	resolver_ack(r->res);
	while (resolver_take(r->res, &res)) {
		struct relay_master *m = &r->masters[res.slot];

		if (res.gai_err == 0) {
			char hp[ADDR_HOSTLEN + 8];

			if (m->last_err != 0 || !m->have_addr || !addr_equal(&m->addr, &res.addr))
				log_info("master %s is %s", addr_hostport(m->host, m->port, hp),
					 addr_str(&res.addr.sa, a));
			m->addr = res.addr;
			m->have_addr = true;
		} else if (res.gai_err != m->last_err) {
			/* Logged once per change, not once per heartbeat. */
			if (m->have_addr)
				log_warnx("master %s: cannot resolve (%s); keeping %s", m->host,
					  gai_strerror(res.gai_err), addr_str(&m->addr.sa, a));
			else
				log_warnx("master %s: cannot resolve (%s); no address yet",
					  m->host, gai_strerror(res.gai_err));
		}
		m->last_err = res.gai_err;
		if (m->heartbeat_due && m->have_addr && r->hb.server == HB_UP)
			send_heartbeat(r, m, r->conf->heartbeat);
		m->heartbeat_due = false;
	}
}

static void hb_actions(struct relay *r, unsigned act)
{
	char a[ADDR_STRLEN];

	if (act & HB_SEND_PROBE) {
		char text[32];
		uint8_t pkt[40];
		int n, err;

		snprintf(text, sizeof(text), "getinfo %s", r->hb.challenge);
		n = q3_build(pkt, sizeof(pkt), text);
		err = net_send_copy(r->probe_fd, NULL, pkt, (size_t)n);
		r->c.probes_sent++;
		if (err < 0 && err != -ECONNREFUSED)
			log_debug("probe: %s", strerror(-err));
	}
	if (act & HB_LOG_UP)
		log_info("server up: %s answered the probe", addr_str(&r->upstream.sa, a));
	if (act & HB_LOG_DOWN)
		log_warnx("server down: %s did not answer %u probes", addr_str(&r->upstream.sa, a),
			  r->hb.attempts);
	if (act & HB_SEND_HEARTBEAT)
		heartbeat_masters(r);
	if (act & HB_SEND_FLATLINE)
		send_flatline(r);
}

static void from_probe(struct relay *r, struct loop_dgram *d)
{
	if (!d->truncated && q3_info_response_matches(d->data, d->len, r->hb.challenge)) {
		unsigned act = hb_probe_answered(&r->hb, d->now, r->hb.challenge);

		if (act)
			r->c.probes_answered++;
		hb_actions(r, act);
	}
}

static void on_dgram(void *arg, uint32_t id, struct loop_dgram *d)
{
	struct relay *r = arg;

	switch (RELAY_ID_KIND(id)) {
	case RELAY_ID_PUBLIC:
		from_client(r, d);
		break;
	case RELAY_ID_SESSION:
		from_server(r, id & ((1u << SESSION_REF_BITS) - 1), d);
		break;
	case RELAY_ID_PROBE:
		from_probe(r, d);
		break;
	default:
		break;
	}
}

static void on_recv_error(void *arg, uint32_t id, int err)
{
	struct relay *r = arg;

	/* A closed game-server port shows up on its connected sockets; the
	 * session stays, the server may come back. */
	if (err == -ECONNREFUSED) {
		r->c.refused++;
		return;
	}
	log_debug("receive on %s: %s",
		  RELAY_ID_KIND(id) == RELAY_ID_PUBLIC ? "public socket" : "session socket",
		  strerror(-err));
}

static void on_sent(void *arg, uint32_t id, int res)
{
	struct relay *r = arg;
	uint32_t idx;

	if (RELAY_ID_KIND(id) != RELAY_ID_SESSION)
		return;
	idx = session_deref(&r->st, id & ((1u << SESSION_REF_BITS) - 1));
	if (idx != SESSION_NONE && r->st.s[idx].queued > 0)
		r->st.s[idx].queued--;
	if (res >= 0)
		return;
	if (res == -ECONNREFUSED)
		r->c.refused++;
	else
		r->c.drops[RELAY_DROP_SEND_ERROR]++;
}

static void on_tick(void *arg, uint64_t now)
{
	struct relay *r = arg;

	expire_sessions(r, now);
	if (now >= hb_deadline(&r->hb))
		hb_actions(r, hb_step(&r->hb, now, random64()));
}

static void on_signal(struct relay *r)
{
	struct signalfd_siginfo si;

	while (read(r->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			log_info("SIGHUP: nothing to reload");
			continue;
		}
		r->exit_signal = (int)si.ssi_signo;
		r->ops->stop(r->loop);
	}
}

static void on_readable(void *arg, uint32_t id)
{
	struct relay *r = arg;

	if (RELAY_ID_KIND(id) == RELAY_ID_RESOLVER)
		on_resolved(r);
	else if (RELAY_ID_KIND(id) == RELAY_ID_SIGNAL)
		on_signal(r);
}

static uint64_t next_deadline(void *arg)
{
	struct relay *r = arg;
	uint64_t e = session_next_expiry(&r->st, r->session_timeout);
	uint64_t h = hb_deadline(&r->hb);

	return e < h ? e : h;
}

const struct loop_handler relay_handler_template = {
	.on_dgram = on_dgram,
	.on_recv_error = on_recv_error,
	.on_sent = on_sent,
	.on_tick = on_tick,
	.on_readable = on_readable,
	.next_deadline = next_deadline,
};

void relay_shutdown(struct relay *r)
{
	if (hb_shutdown(&r->hb) & HB_SEND_FLATLINE)
		send_flatline(r);
	while (r->st.lru_head != SESSION_NONE)
		session_close(r, r->st.lru_head, SESSION_CLOSE_SHUTDOWN);
}

void relay_close(struct relay *r)
{
	if (r->pub_fd >= 0)
		close(r->pub_fd);
	if (r->probe_fd >= 0)
		close(r->probe_fd);
	resolver_destroy(r->res);
	session_table_free(&r->st);
	r->pub_fd = r->probe_fd = -1;
	r->res = NULL;
}

void relay_log_stats(const struct relay *r)
{
	const struct relay_counters *c = &r->c;
	uint64_t dropped = 0, closed = 0;

	for (int i = 0; i < RELAY_DROP_COUNT; i++)
		dropped += c->drops[i];
	for (int i = 0; i < SESSION_CLOSE_REASON_COUNT; i++)
		closed += c->sessions_closed[i];
	log_info("stats: sessions opened %llu closed %llu active %u; up %llu pkts %llu B; "
		 "down %llu pkts %llu B; refused %llu; dropped %llu (queue %llu, truncated %llu, "
		 "full %llu, socket %llu, send %llu, source %llu); heartbeats %llu, flatlines %llu",
		 (unsigned long long)c->sessions_opened, (unsigned long long)closed, r->st.active,
		 (unsigned long long)c->up_pkts, (unsigned long long)c->up_bytes,
		 (unsigned long long)c->down_pkts, (unsigned long long)c->down_bytes,
		 (unsigned long long)c->refused, (unsigned long long)dropped,
		 (unsigned long long)c->drops[RELAY_DROP_QUEUE_FULL],
		 (unsigned long long)c->drops[RELAY_DROP_TRUNCATED],
		 (unsigned long long)c->drops[RELAY_DROP_TABLE_FULL],
		 (unsigned long long)c->drops[RELAY_DROP_SOCKET],
		 (unsigned long long)c->drops[RELAY_DROP_SEND_ERROR],
		 (unsigned long long)c->drops[RELAY_DROP_BAD_SOURCE],
		 (unsigned long long)c->heartbeats_sent, (unsigned long long)c->flatlines_sent);
}
