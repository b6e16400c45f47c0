/* SPDX-License-Identifier: ISC */
/* Masters and the game server's health: resolution, heartbeats and
 * flatlines, the probe, and each master's listing. */
#include "masters.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "addrclass.h"
#include "log.h"
#include "net.h"
#include "q3proto.h"
#include "resolver.h"
#include "udprelay.h"

static const struct endpoint_ops masters_probe_ops, masters_resolver_ops;

void masters_init(struct masters *ms, const struct relay_conf *c,
		  const union etr_sockaddr *upstream, struct relay_stats *stats,
		  const struct etr_stats *global)
{
	memset(ms, 0, sizeof(*ms));
	ms->conf = c;
	ms->stats = stats;
	ms->global = global;
	ms->upstream = *upstream;
	ms->probe_fd = ms->res_fd = -1;
	ms->owner = true;
	hb_init(&ms->hb, c->heartbeat_interval_ms * NS_PER_MS, c->probe_timeout_ms * NS_PER_MS,
		CONF_PROBE_ATTEMPTS);
	ms->n = c->nmasters;
	stats->nmasters = c->nmasters;
	for (unsigned i = 0; i < c->nmasters; i++) {
		struct master *m = &ms->m[i];
		char lit[ADDR_HOSTLEN + 8];

		memcpy(m->host, c->masters[i].host, sizeof(m->host));
		m->port = c->masters[i].port;
		m->last_err = -1; /* nothing logged yet */
		addr_hostport(m->host, m->port, lit);
		snprintf(stats->masters[i].name, sizeof(stats->masters[i].name), "%s", lit);
		/* Literals need no resolver. */
		if (addr_parse_numeric(lit, &m->addr) == 0) {
			if (m->addr.sa.sa_family == AF_INET && c->listen.sa.sa_family == AF_INET6)
				addrclass_map_v4(&m->addr);
			m->numeric = m->have_addr = m->addr.sa.sa_family == c->listen.sa.sa_family;
			if (m->have_addr)
				addr_str(&m->addr.sa, stats->masters[i].addr);
		}
	}
}

void masters_share(struct masters *ms, struct masters_shared *sh, bool owner,
		   const struct masters_hooks *hooks, void *arg)
{
	ms->sh = sh;
	ms->owner = owner;
	ms->hooks = hooks;
	ms->hooks_arg = arg;
	/* The masters are the owner's; their traffic is steered to it. */
	if (!owner) {
		ms->n = 0;
		ms->stats->nmasters = 0;
	}
}

unsigned masters_addrs(const struct masters *ms, union etr_sockaddr *out)
{
	unsigned n = 0;

	for (unsigned i = 0; i < ms->n; i++)
		if (ms->m[i].have_addr)
			out[n++] = ms->m[i].addr;
	return n;
}

void masters_set_events(struct masters *ms, const struct masters_events *ev, void *arg,
			struct udprelay *fwd)
{
	ms->ev = ev;
	ms->ev_arg = arg;
	ms->fwd = fwd;
}

int masters_open(struct masters *ms)
{
	char a[ADDR_STRLEN];
	int err;

	if (!ms->owner)
		return 0;
	ms->probe_fd = net_connect_udp(&ms->upstream);
	if (ms->probe_fd < 0) {
		log_warnx("relay %s: probe socket to %s: %s", ms->conf->name,
			  addr_str(&ms->upstream.sa, a), strerror(-ms->probe_fd));
		return ms->probe_fd;
	}
	err = resolver_create(&ms->res, ms->conf->listen.sa.sa_family, &ms->res_fd);
	if (err < 0) {
		log_warnx("relay %s: resolver: %s", ms->conf->name, strerror(-err));
		return err;
	}
	return 0;
}

/* The probe endpoint's refs: a master's index under what the send was. */
#define MASTERS_IDX_BITS  8
#define MASTERS_KIND_BITS 16
_Static_assert(REF_FITS(MASTERS_IDX_BITS, MASTERS_KIND_BITS, ENDPOINT_REF_BITS) &&
		   CONF_MASTERS_MAX <= 1u << MASTERS_IDX_BITS,
	       "probe refs");

static uint32_t probe_id(const struct masters *ms, unsigned kind, unsigned master)
{
	return endpoint_ref_id(ms->ep_probe,
			       ref_pack(master, MASTERS_IDX_BITS, kind, MASTERS_KIND_BITS));
}

/* Arm the timer when the next deadline may have come earlier (a probe
 * round brought forward, a heartbeat sent); one that moved later leaves
 * the timer to fire early once, and masters_on_tick re-arms it exactly. */
static void masters_arm(struct masters *ms)
{
	uint64_t at;

	if (!ms->attached)
		return;
	at = masters_next_deadline(ms);
	if (timer_sooner(&ms->timer, at))
		ms->ops->timer_set(ms->loop, &ms->timer, at);
}

int masters_attach(struct masters *ms, const struct loop_ops *ops, struct loop *l,
		   struct endpoint_table *ep)
{
	int p, r, err;

	ms->ops = ops;
	ms->loop = l;
	if (!ms->owner)
		return 0;
	p = endpoint_add(ep, &masters_probe_ops, ms);
	r = endpoint_add(ep, &masters_resolver_ops, ms);
	if (p < 0 || r < 0) {
		if (p >= 0)
			endpoint_del(ep, (unsigned)p);
		if (r >= 0)
			endpoint_del(ep, (unsigned)r);
		return -ENOSPC;
	}
	ms->ep = ep;
	ms->ep_probe = (unsigned)p;
	ms->ep_resolver = (unsigned)r;
	ms->attached = true;
	timer_init(&ms->timer, probe_id(ms, MASTERS_REF_PROBE, 0));
	err = ops->add_socket(l, ms->probe_fd, probe_id(ms, MASTERS_REF_PROBE, 0));
	if (!err)
		err = ops->watch(l, ms->res_fd, endpoint_id(ep, ms->ep_resolver));
	masters_arm(ms);
	return err;
}

uint8_t masters_of(const struct masters *ms, const union etr_sockaddr *client)
{
	for (unsigned i = 0; i < ms->n; i++)
		if (ms->m[i].have_addr && addr_equal(&ms->m[i].addr, client))
			return (uint8_t)(i + 1);
	return 0;
}

/* Say when an event brought the next probe round forward (once per move:
 * later events that change nothing say nothing). */
static void log_early_round(const struct masters *ms, uint64_t before, uint64_t now,
			    const char *why)
{
	uint64_t at = hb_deadline(&ms->hb);

	if (!log_debug_on || at >= before)
		return;
	if (at <= now)
		log_debug("relay %s: %s: probe round now", ms->conf->name, why);
	else
		log_debug("relay %s: %s: probe round in %llu ms", ms->conf->name, why,
			  (unsigned long long)((at - now) / NS_PER_MS));
}

/* Another worker's news, for the owner: its loop woken once until it has
 * taken what came. */
static void tell_owner(struct masters *ms, unsigned news)
{
	if (atomic_fetch_or_explicit(&ms->sh->news, news, memory_order_release) == 0 && ms->hooks &&
	    ms->hooks->wake_owner)
		ms->hooks->wake_owner(ms->hooks_arg);
}

void masters_heard(struct masters *ms, uint64_t now)
{
	uint64_t before = hb_deadline(&ms->hb);

	if (!ms->owner) {
		if (!masters_server_up(ms))
			tell_owner(ms, MASTERS_NEWS_HEARD);
		return;
	}
	if (ms->hb.server == HB_UP)
		return;
	hb_heard(&ms->hb, now);
	log_early_round(ms, before, now, "game server heard from");
	masters_arm(ms);
}

void masters_refused(struct masters *ms, uint64_t now)
{
	uint64_t before = hb_deadline(&ms->hb);

	if (!ms->owner) {
		tell_owner(ms, MASTERS_NEWS_REFUSED);
		return;
	}
	hb_refused(&ms->hb, now);
	log_early_round(ms, before, now, "game server refused a send");
	masters_arm(ms);
}

void masters_take_news(struct masters *ms, uint64_t now)
{
	unsigned news;

	if (!ms->owner || !ms->sh)
		return;
	news = atomic_exchange_explicit(&ms->sh->news, 0, memory_order_acquire);
	if (news & MASTERS_NEWS_HEARD)
		masters_heard(ms, now);
	if (news & MASTERS_NEWS_REFUSED)
		masters_refused(ms, now);
}

/* Publish one master's health for the ops plane. */
static void master_publish(struct masters *ms, unsigned i, bool stamp)
{
	struct master_status *st = &ms->stats->masters[i];
	enum hb_master_state state = ms->m[i].health.state;

	pthread_mutex_lock(&ms->stats->lock);
	st->listing_confirmed = state == HB_MASTER_LISTED;
	st->quiet = state == HB_MASTER_QUIET;
	if (stamp)
		st->last_confirmed = (uint64_t)time(NULL);
	pthread_mutex_unlock(&ms->stats->lock);
}

void masters_confirm_listing(struct masters *ms, unsigned i, uint64_t now)
{
	unsigned ev = hb_master_challenged(&ms->m[i].health, now);

	master_publish(ms, i, true);
	if (ev & HB_MASTER_CONFIRMED)
		log_info("relay %s: master %s challenged us and got its answer", ms->conf->name,
			 ms->stats->masters[i].name);
	else if (ev & HB_MASTER_BACK)
		log_info("relay %s: master %s challenges again: it lists this relay",
			 ms->conf->name, ms->stats->masters[i].name);
}

/* Masters that left two intervals of heartbeats unanswered: said once. */
static void check_masters(struct masters *ms, uint64_t now)
{
	for (unsigned i = 0; i < ms->n; i++) {
		if (!hb_master_check(&ms->m[i].health, now, ms->hb.interval))
			continue;
		master_publish(ms, i, false);
		log_warnx(
		    "relay %s: master %s is quiet: no challenge within %llu s of a "
		    "heartbeat; it does not list this relay",
		    ms->conf->name, ms->stats->masters[i].name,
		    (unsigned long long)(HB_MASTER_QUIET_INTERVALS * ms->hb.interval / NS_PER_SEC));
	}
}

static void master_result(struct masters *ms, unsigned i, enum stats_hb_result res)
{
	struct master_status *st = &ms->stats->masters[i];

	pthread_mutex_lock(&ms->stats->lock);
	st->last_heartbeat = (uint64_t)time(NULL);
	st->last_result = res;
	st->heartbeats[res]++;
	if (ms->m[i].have_addr)
		addr_str(&ms->m[i].addr.sa, st->addr);
	pthread_mutex_unlock(&ms->stats->lock);
}

/* What became of a heartbeat (or flatline) to master i: 0, sent, or
 * -errno. Told by the loop's on_sent, or at once when it was not queued. */
static void heartbeat_done(struct masters *ms, unsigned i, bool flat, int err)
{
	struct master *m = &ms->m[i];
	const char *tag = flat ? ms->conf->flatline : ms->conf->heartbeat;
	char a[ADDR_STRLEN], hp[ADDR_HOSTLEN + 8];

	addr_str(&m->addr.sa, a);
	addr_hostport(m->host, m->port, hp);
	if (err < 0 && conf_addr_family(&m->addr) != conf_addr_family(&ms->conf->listen) &&
	    (err == -ENETUNREACH || err == -EAFNOSUPPORT || err == -EINVAL)) {
		/* [::] with IPV6_V6ONLY (net.ipv6.bindv6only=1): no IPv4. */
		if (!flat)
			master_result(ms, i, HB_RESULT_WRONG_FAMILY);
		if (!m->v6only_said)
			log_warnx("master %s: %s is an IPv4 address, which the IPv6-only listener "
				  "cannot reach (net.ipv6.bindv6only); no heartbeats to it",
				  hp, a);
		m->v6only_said = true;
		return;
	}
	if (!flat)
		master_result(ms, i, err < 0 ? HB_RESULT_SEND_ERROR : HB_RESULT_SENT);
	if (!flat && err == 0) {
		hb_master_heartbeat(&m->health, loop_now());
		masters_arm(ms);
	}
	if (err < 0) {
		log_warnx("heartbeat %s -> %s (%s): %s", tag, hp, a, strerror(-err));
		return;
	}
	if (flat) {
		STAT_ADD(ms->stats->flatlines, 1);
		log_info("flatline %s -> %s (%s)", tag, hp, a);
	} else {
		log_debug("heartbeat %s -> %s (%s)", tag, hp, a);
	}
}

/* Queue a heartbeat (or flatline) to master i from the public socket: the
 * master lists the address it came from. Its fate comes in heartbeat_done;
 * the master's allowance is full again from now (its challenge may come
 * back within the same millisecond). */
static void send_heartbeat(struct masters *ms, unsigned i, const char *tag)
{
	struct master *m = &ms->m[i];
	char text[CONF_TAG_MAX + 16];
	uint8_t pkt[CONF_TAG_MAX + 20];
	bool flat = strcmp(tag, ms->conf->heartbeat) != 0;
	int n, err;

	snprintf(text, sizeof(text), "heartbeat %s\n", tag);
	n = q3_build(pkt, sizeof(pkt), text);
	err = udprelay_send(ms->fwd, &m->addr, pkt, (size_t)n,
			    probe_id(ms, flat ? MASTERS_REF_FLATLINE : MASTERS_REF_HEARTBEAT, i));
	if (err < 0)
		heartbeat_done(ms, i, flat, err);
	else if (!flat && ms->ev && ms->ev->invited)
		ms->ev->invited(ms->ev_arg, i);
}

static void send_flatline(struct masters *ms)
{
	if (ms->conf->flatline[0] == '\0')
		return;
	/* Last good addresses: a flatline must not wait for DNS. */
	for (unsigned i = 0; i < ms->n; i++)
		if (ms->m[i].have_addr)
			send_heartbeat(ms, i, ms->conf->flatline);
}

/* Heartbeat every master, resolving names first (the heartbeat leaves when
 * the answer comes back; see on_resolved). */
static void heartbeat_masters(struct masters *ms)
{
	/* A draining relay refuses new sessions: inviting masters (and the
	 * players they send) would only get them refused. */
	if (STAT_GET(ms->global->lifecycle) != LIFECYCLE_ACTIVE) {
		log_debug("relay %s: draining, no heartbeat this round", ms->conf->name);
		return;
	}
	for (unsigned i = 0; i < ms->n; i++) {
		struct master *m = &ms->m[i];

		if (m->numeric) {
			send_heartbeat(ms, i, ms->conf->heartbeat);
			continue;
		}
		m->heartbeat_due = true;
		if (resolver_start(ms->res, i, m->host, m->port) == -EBUSY)
			log_debug("master %s: still resolving", m->host);
	}
}

static void on_resolved(struct masters *ms)
{
	struct resolver_result res;
	char a[ADDR_STRLEN], l[ADDR_STRLEN], hp[ADDR_HOSTLEN + 8];

	resolver_ack(ms->res);
	while (resolver_take(ms->res, &res)) {
		struct master *m = &ms->m[res.slot];

		addr_hostport(m->host, m->port, hp);
		/* Addresses of a family the listener cannot send to are no
		 * address at all, and are said to be once, as such. */
		if (res.gai_err == 0 &&
		    !conf_listener_reaches(&ms->conf->listen, false, conf_addr_family(&res.addr)))
			res.gai_err = EAI_ADDRFAMILY, res.wrong_family = true;
		if (res.wrong_family) {
			if (!m->wrong_family)
				log_warnx(
				    "master %s: only %s addresses (%s), which the listener %s "
				    "cannot reach; no heartbeats to it%s",
				    hp, conf_addr_family(&res.addr) == AF_INET ? "IPv4" : "IPv6",
				    addr_str(&res.addr.sa, a), addr_str(&ms->conf->listen.sa, l),
				    m->have_addr ? " but to its last good address" : "");
		} else if (res.gai_err == 0) {
			bool moved = !m->have_addr || !addr_equal(&m->addr, &res.addr);

			if (m->last_err != 0 || moved)
				log_info("master %s is %s", hp, addr_str(&res.addr.sa, a));
			m->addr = res.addr;
			m->have_addr = true;
			/* Its challenge must reach this worker: steered before
			 * the heartbeat leaves. */
			if (moved && ms->hooks && ms->hooks->moved)
				ms->hooks->moved(ms->hooks_arg);
		} else if (res.gai_err != m->last_err) {
			/* Logged once per change, not once per heartbeat. */
			if (m->have_addr)
				log_warnx("master %s: cannot resolve (%s); keeping %s", m->host,
					  gai_strerror(res.gai_err), addr_str(&m->addr.sa, a));
			else
				log_warnx("master %s: cannot resolve (%s); no address yet", m->host,
					  gai_strerror(res.gai_err));
		}
		m->last_err = res.gai_err;
		m->wrong_family = res.wrong_family;
		if (m->heartbeat_due && ms->hb.server == HB_UP &&
		    STAT_GET(ms->global->lifecycle) == LIFECYCLE_ACTIVE) {
			if (m->have_addr)
				send_heartbeat(ms, res.slot, ms->conf->heartbeat);
			else
				master_result(ms, res.slot,
					      res.wrong_family ? HB_RESULT_WRONG_FAMILY
							       : HB_RESULT_UNRESOLVED);
		}
		m->heartbeat_due = false;
	}
}

static void hb_actions(struct masters *ms, unsigned act, uint64_t now)
{
	char a[ADDR_STRLEN];

	/* No ghost listing: answers about a server that stopped answering are
	 * not served from the cache. */
	if ((act & HB_ROUND_FAILED) && ms->ev && ms->ev->round_failed)
		ms->ev->round_failed(ms->ev_arg);
	if (act & HB_SEND_PROBE) {
		char text[32];
		uint8_t pkt[40];
		int n, err;

		/* The probe spends from the game server's budget like a
		 * master's query: never refused, but counted. */
		if (ms->ev && ms->ev->probe_sent)
			ms->ev->probe_sent(ms->ev_arg, now);
		snprintf(text, sizeof(text), "getinfo %s", ms->hb.challenge);
		n = q3_build(pkt, sizeof(pkt), text);
		err = ms->ops->send(ms->loop, ms->probe_fd, NULL, 0, pkt, (size_t)n,
				    probe_id(ms, MASTERS_REF_PROBE, 0));
		STAT_ADD(ms->stats->probes_sent, 1);
		if (err < 0)
			log_debug("probe: %s", strerror(-err));
	}
	/* Published before it is announced: whoever reads the log line and
	 * then asks /readyz must see the same state. */
	if (act & (HB_LOG_UP | HB_LOG_DOWN)) {
		STAT_SET(ms->stats->server, (int)ms->hb.server);
		if (ms->sh)
			atomic_store_explicit(&ms->sh->server, (int)ms->hb.server,
					      memory_order_relaxed);
	}
	/* Down: the listings are withdrawn (flatline) or die out; no master
	 * owes a challenge until the next heartbeat. */
	if (act & HB_LOG_DOWN)
		for (unsigned i = 0; i < ms->n; i++) {
			hb_master_withdrawn(&ms->m[i].health);
			master_publish(ms, i, false);
		}
	if (act & HB_LOG_UP)
		log_info("server up: %s answered the probe", addr_str(&ms->upstream.sa, a));
	if (act & HB_LOG_DOWN)
		log_warnx("server down: %s did not answer %u probes", addr_str(&ms->upstream.sa, a),
			  ms->hb.attempts);
	if (act & HB_SEND_HEARTBEAT)
		heartbeat_masters(ms);
	if (act & HB_SEND_FLATLINE)
		send_flatline(ms);
}

static void from_probe(struct masters *ms, struct loop_dgram *d)
{
	unsigned act;

	if (d->truncated || !q3_info_response_matches(d->data, d->len, ms->hb.challenge))
		return;
	act = hb_probe_answered(&ms->hb, d->now, ms->hb.challenge);
	if (act)
		STAT_ADD(ms->stats->probe_rounds_ok, 1);
	if (ms->ev && ms->ev->probe_answer)
		ms->ev->probe_answer(ms->ev_arg, d->data, d->len, d->now);
	hb_actions(ms, act, d->now);
	masters_arm(ms);
}

void masters_on_tick(struct masters *ms, uint64_t now)
{
	if (now >= hb_deadline(&ms->hb)) {
		unsigned act = hb_step(&ms->hb, now, net_random64());

		if (act & HB_ROUND_FAILED)
			STAT_ADD(ms->stats->probe_rounds_failed, 1);
		hb_actions(ms, act, now);
	}
	check_masters(ms, now);
	if (!ms->attached)
		return;
	/* Exactly, now: the deadline may have moved later meanwhile. */
	now = masters_next_deadline(ms);
	if (now == UINT64_MAX)
		ms->ops->timer_cancel(ms->loop, &ms->timer);
	else
		ms->ops->timer_set(ms->loop, &ms->timer, now);
}

uint64_t masters_next_deadline(const struct masters *ms)
{
	uint64_t h = hb_deadline(&ms->hb);

	for (unsigned i = 0; i < ms->n; i++) {
		uint64_t m = hb_master_deadline(&ms->m[i].health, ms->hb.interval);

		if (m < h)
			h = m;
	}
	return h;
}

void masters_shutdown(struct masters *ms)
{
	if (ms->owner && hb_shutdown(&ms->hb) & HB_SEND_FLATLINE)
		send_flatline(ms);
}

void masters_close(struct masters *ms)
{
	if (ms->probe_fd >= 0)
		close(ms->probe_fd);
	resolver_destroy(ms->res);
	if (ms->attached) {
		endpoint_del(ms->ep, ms->ep_probe);
		endpoint_del(ms->ep, ms->ep_resolver);
		ms->attached = false;
	}
	ms->probe_fd = -1;
	ms->res = NULL;
}

/* The masters' endpoints: the probe socket and the resolver's eventfd. */

static void probe_dgram(void *obj, uint32_t ref, struct loop_dgram *d)
{
	(void)ref;
	from_probe(obj, d);
}

/* The probe's own refusals show in the probe rounds, not as refused sends;
 * a closed port ends the attempt early. */
static void probe_recv_error(void *obj, uint32_t ref, int err)
{
	struct masters *ms = obj;

	(void)ref;
	if (err == -ECONNREFUSED) {
		hb_probe_refused(&ms->hb, loop_now());
		masters_arm(ms);
	}
}

/* Sends under the probe endpoint: the probe (a refusal shows in the next
 * receive, probe_recv_error), and heartbeats and flatlines, which report
 * to their master. */
static void probe_sent(void *obj, uint32_t ref, int res)
{
	struct masters *ms = obj;
	unsigned kind = ref_gen(ref, MASTERS_IDX_BITS, MASTERS_KIND_BITS);
	unsigned m = ref_idx(ref, MASTERS_IDX_BITS);

	if ((kind == MASTERS_REF_HEARTBEAT || kind == MASTERS_REF_FLATLINE) && m < ms->n)
		heartbeat_done(ms, m, kind == MASTERS_REF_FLATLINE, res < 0 ? res : 0);
	else if (kind == MASTERS_REF_PROBE && res < 0 && res != -ECONNREFUSED)
		log_debug("probe: %s", strerror(-res));
}

static void probe_timer(void *obj, uint32_t ref, uint64_t now)
{
	(void)ref;
	masters_on_tick(obj, now);
}

static void resolver_readable(void *obj, uint32_t ref)
{
	(void)ref;
	on_resolved(obj);
}

static const struct endpoint_ops masters_probe_ops = {
    .name = "probe",
    .multi = true,
    .on_dgram = probe_dgram,
    .on_recv_error = probe_recv_error,
    .on_sent = probe_sent,
    .on_timer = probe_timer,
};

static const struct endpoint_ops masters_resolver_ops = {
    .name = "resolver",
    .on_readable = resolver_readable,
};
