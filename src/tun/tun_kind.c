/* SPDX-License-Identifier: ISC */
/* The tunnel as a listener kind: the WireGuard interface opened and keyed
 * at start (before the workers serve), its peers reconciled from the
 * control thread. The private key lives in memory only: a relay holds
 * nothing worth keeping, and a restart is a new key the next heartbeat
 * reports. */
#include "tun_kind.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conf_key.h"
#include "json.h"
#include "log.h"
#include "stats.h"
#include "tun_cert.h"
#include "ratelimit.h"
#include "tun_r3.h"
#include "wgdev.h"

/* Each request to the interface waits at most this long. */
#define TUN_TIMEOUT_MS 2000

struct tun_shared {
	pthread_mutex_t lock; /* the device and the arrays: the control thread's */
	bool up, lock_init;
	struct wgdev dev;
	uint8_t priv[WGP_KEY_LEN];
	char pub[WGP_KEY_B64_LEN + 1];
	uint8_t own[WGP_KEY_LEN]; /* the public key, for wgp_set_check */
	struct conf_cidr self;	  /* the tunnel address, for wgp_set_check_self */
	bool self_added;	  /* the interface had it not: taken away at exit */
	bool readdress;		  /* a restore's address and link up still to do */
	bool made;		  /* create yes made the interface: deleted at exit */
	uint16_t port;
	struct wgp_peer *cur; /* TUN_PEERS_MAX: the interface's, for a reconcile */
	struct wgp_op *ops;   /* 2 * TUN_PEERS_MAX */
	struct tun_stats st;  /* the ops plane reads it (etr_stats.tunnel) */
	/* The last reconcile, for /lifecycle: the control thread writes it,
	 * the ops thread reads it, never waiting on the device's lock. */
	pthread_mutex_t last_lock;
	bool last_lock_init, reconciled, last_ok;
	uint64_t last_at;     /* unix seconds */
	char last_err[256];   /* why, when it failed */
	struct tun_cert cert; /* the tunnel certificate (tun_cert.h) */
	/* Rung 3's tokens, from the control thread's heartbeats. */
	struct tun_tokens tokens;
	bool tokens_init;
	const struct kind_env *env; /* to tell the workers of a new token set */
};

/* A worker's instance: its rung-3 connections (tun_r3.h). */
struct tun_inst {
	struct tun_r3 r3;
};

static unsigned count(const struct etr_conf *c)
{
	return c->ntunnel;
}

/* The netlink or userspace-API socket, one at a time (the control thread's
 * requests are one after another); the rtnetlink one at start is closed.
 * With an SNI listener, rung 3's connections: a stream and a socket to
 * WireGuard each, rung3-max-connections per worker. */
static uint64_t fds(const struct etr_conf *c, unsigned workers)
{
	return c->ntunnel + (c->ntunnel && c->nsni ? 2ull * c->tunnel[0].r3.conns * workers : 0);
}

static const char *fds_what(const struct etr_conf *c)
{
	return c->nsni ? "the tunnel's interface socket and rung 3's connections"
		       : "the tunnel's interface socket";
}

static const char *way_name(enum wgdev_way w)
{
	return w == WGDEV_UAPI ? "uapi" : "kernel";
}

/* How the fix names the create key: the [tunnel]'s, or the quick-start
 * tunnel's option (its line is 0). */
static const char *tun_create_key(const struct tun_conf *t)
{
	return t->line ? "set create" : "give --wg-create";
}

static const char *tun_create_where(const struct tun_conf *t)
{
	return t->line ? " in [tunnel]" : "";
}

/* Why a step on the interface failed, and the fix. */
static void open_fail(const struct tun_conf *t, const char *step, int rc)
{
	char fix[256] = "";

	if (rc == -EPERM || rc == -EACCES)
		snprintf(fix, sizeof(fix), "%s",
			 ": etrelay needs CAP_NET_ADMIN for it (a systemd drop-in: "
			 "AmbientCapabilities=CAP_NET_ADMIN and "
			 "CapabilityBoundingSet=CAP_NET_ADMIN; see TUNNEL in etrelay(8))");
	else if (rc == -ENODEV && !t->create)
		snprintf(fix, sizeof(fix),
			 ": no such WireGuard interface: start wireguard-go for it (a unit), or "
			 "%s yes%s (a kernel interface)",
			 tun_create_key(t), tun_create_where(t));
	else if (rc == -ENODEV || rc == -EOPNOTSUPP)
		snprintf(fix, sizeof(fix),
			 ": this kernel has no WireGuard: run wireguard-go for the interface and "
			 "%s no",
			 tun_create_key(t));
	log_warnx("tunnel %s: %s: %s%s", t->ifname, step, strerror(-rc), fix);
}

static int open_(struct kind_env *e)
{
	const struct tun_conf *t = &e->conf->tunnel[0];
	struct tun_shared *s = e->shared;
	const struct conf_cidr *a = &t->address;
	const uint8_t *ab = a->addr.sa.sa_family == AF_INET
				? (const uint8_t *)&a->addr.in.sin_addr
				: (const uint8_t *)&a->addr.in6.sin6_addr;
	uint8_t pub[WGP_KEY_LEN];
	int rc = 0;

	s->dev.nl = -1;
	if (pthread_mutex_init(&s->lock, NULL) != 0)
		return EXIT_FAILURE;
	s->lock_init = true;
	if (pthread_mutex_init(&s->last_lock, NULL) != 0)
		return EXIT_FAILURE;
	s->last_lock_init = true;
	if (tun_cert_init(&s->cert) < 0) {
		log_warnx("tunnel %s: its certificate holder", t->ifname);
		return EXIT_FAILURE;
	}
	if (tun_tokens_init(&s->tokens) < 0) {
		log_warnx("tunnel %s: its token set", t->ifname);
		return EXIT_FAILURE;
	}
	s->tokens_init = true;
	s->env = e;
	s->cur = calloc(TUN_PEERS_MAX, sizeof(*s->cur));
	s->ops = calloc(2 * TUN_PEERS_MAX, sizeof(*s->ops));
	if (!s->cur || !s->ops) {
		log_warn("tunnel %s: its peer tables", t->ifname);
		return EXIT_FAILURE;
	}
	if (t->create && (rc = wgdev_create(t->ifname, TUN_TIMEOUT_MS)) < 0 && rc != -EEXIST) {
		open_fail(t, "create", rc);
		return EXIT_FAILURE;
	}
	/* One there before (an operator's, or left by a crash) is kept at
	 * exit; one made now is deleted then, peers, address and all. */
	s->made = t->create && rc == 0;
	if ((rc = wgdev_open(&s->dev, t->ifname, NULL)) < 0) {
		open_fail(t, "open", rc);
		return EXIT_FAILURE;
	}
	if (wgp_keypair(s->priv, pub) < 0) {
		log_warnx("tunnel %s: no key pair (libcrypto)", t->ifname);
		return EXIT_FAILURE;
	}
	wgp_key_to_b64(pub, s->pub);
	memcpy(s->own, pub, sizeof(s->own));
	s->port = (uint16_t)t->listen_port;
	s->self = *a;
	if ((rc = wgdev_set_device(&s->dev, s->priv, s->port)) < 0) {
		open_fail(t, "private key and listen-port", rc);
		return EXIT_FAILURE;
	}
	/* Already there (an operator's, or a restart after a crash): kept,
	 * and left at exit. */
	rc = wgdev_address(t->ifname, a->addr.sa.sa_family, ab, a->bits, TUN_TIMEOUT_MS);
	if (rc < 0 && rc != -EEXIST) {
		open_fail(t, "address", rc);
		return EXIT_FAILURE;
	}
	s->self_added = rc == 0;
	/* Rung 3 on every worker: connections come from its SNI listeners
	 * (none until the daemon hands them over). */
	for (unsigned w = 0; w < e->nworkers; w++) {
		struct tun_inst *in = e->inst(e, w, 0);
		struct tun_r3_limits lim = t->r3;

		/* The relay's handshake budget, each worker its share. */
		lim.hs_rate = rl_worker_part(t->r3.hs_rate, e->nworkers);
		lim.hs_burst = rl_worker_part(t->r3.hs_burst, e->nworkers);
		rc = tun_r3_open(&in->r3, &s->cert, &s->tokens, s->port, &lim);
		e->opened(e, w, 1);
		if (rc < 0) {
			log_warnx("tunnel %s: rung 3's connections: %s", t->ifname, strerror(-rc));
			return EXIT_FAILURE;
		}
		if (w < STATS_WORKERS_MAX)
			s->st.r3[w] = &in->r3.st;
	}
	s->st.r3_on = e->conf->nsni > 0;
	s->up = true;
	e->stats->tunnel = &s->st;
	return 0;
}

/* At exit: the tunnel address off the interface, when the start put it
 * there (attack round 15: it stayed, routes and all). */
static void tun_self_remove(struct tun_shared *s)
{
	const union etr_sockaddr *a = &s->self.addr;
	const uint8_t *ab = a->sa.sa_family == AF_INET ? (const uint8_t *)&a->in.sin_addr
						       : (const uint8_t *)&a->in6.sin6_addr;
	int rc;

	if (!s->self_added)
		return;
	s->self_added = false;
	rc = wgdev_address_del(s->dev.ifname, a->sa.sa_family, ab, s->self.bits, TUN_TIMEOUT_MS);
	/* An interface gone (wireguard-go stopped first) took it along. */
	if (rc < 0 && rc != -ENODEV)
		log_warnx("tunnel %s: taking the address away at exit: %s", s->dev.ifname,
			  strerror(-rc));
}

/* At exit: the interface create yes made, deleted. */
static void tun_made_remove(struct tun_shared *s)
{
	int rc;

	if (!s->made)
		return;
	s->made = false;
	rc = wgdev_delete(s->dev.ifname, TUN_TIMEOUT_MS);
	if (rc < 0 && rc != -ENODEV)
		log_warnx("tunnel %s: deleting the interface at exit: %s", s->dev.ifname,
			  strerror(-rc));
}

static void shared_free(struct kind_env *e)
{
	struct tun_shared *s = e->shared;

	if (!s || !s->lock_init) /* open was not called: nothing there */
		return;
	tun_self_remove(s);
	wgdev_close(&s->dev);
	tun_made_remove(s);
	tun_cert_free(&s->cert);
	if (s->tokens_init)
		tun_tokens_free(&s->tokens);
	explicit_bzero(s->priv, sizeof(s->priv));
	free(s->cur);
	free(s->ops);
	if (s->lock_init)
		pthread_mutex_destroy(&s->lock);
	if (s->last_lock_init)
		pthread_mutex_destroy(&s->last_lock);
}

static int attach(void *inst, const struct loop_ops *ops, struct loop *loop,
		  struct endpoint_table *ep)
{
	return tun_r3_attach(&((struct tun_inst *)inst)->r3, ops, loop, ep);
}

/* The token set in force moved (tun_set_tokens). */
static void poke(void *inst)
{
	tun_r3_tokens(&((struct tun_inst *)inst)->r3);
}

static void take_bans(void *inst, const struct banlist *b)
{
	tun_r3_bans(&((struct tun_inst *)inst)->r3, b);
}

static void shutdown_(void *inst)
{
	tun_r3_shutdown(&((struct tun_inst *)inst)->r3);
}

static void close_(void *inst)
{
	tun_r3_close(&((struct tun_inst *)inst)->r3);
}

int tun_kind_take(void *inst, int fd, const union etr_sockaddr *peer, const uint8_t *pre,
		  size_t len)
{
	return tun_r3_take(&((struct tun_inst *)inst)->r3, fd, peer, pre, len, loop_now());
}

/* The relay's tunnel address, without a port. */
static const char *cidr_ip(const struct conf_cidr *c, char buf[INET6_ADDRSTRLEN])
{
	const void *a = c->addr.sa.sa_family == AF_INET ? (const void *)&c->addr.in.sin_addr
							: (const void *)&c->addr.in6.sin6_addr;

	return inet_ntop(c->addr.sa.sa_family, a, buf, INET6_ADDRSTRLEN) ? buf : "?";
}

static void log_start(const struct kind_env *e, const char *backend)
{
	const struct tun_shared *s = e->shared;
	char a[INET6_ADDRSTRLEN];

	if (!s->up)
		return;
	log_info("tunnel on %s (%s), WireGuard port %u, address %s/%u, backend %s, public key %s",
		 s->dev.ifname, way_name(s->dev.way), s->port,
		 cidr_ip(&e->conf->tunnel[0].address, a), e->conf->tunnel[0].address.bits, backend,
		 s->pub);
}

static void log_stats(const struct kind_env *e)
{
	struct tun_shared *s = e->shared;
	uint64_t peers, r[TUN_RECONCILE_RESULTS];

	tun_counters(s, &peers, r);
	log_info("tunnel %s: %llu peers, %llu reconciles (%llu failed)", s->dev.ifname,
		 (unsigned long long)peers,
		 (unsigned long long)(r[TUN_RECONCILE_OK] + r[TUN_RECONCILE_FAILED]),
		 (unsigned long long)r[TUN_RECONCILE_FAILED]);
	if (s->st.r3_on) {
		struct tun_r3_stats t;
		uint64_t n = 0, drops = 0;

		tun_r3_totals(&s->st, &t);
		for (unsigned k = 0; k < TUN_R3_RESULTS; k++)
			n += t.result[k];
		for (unsigned k = 0; k < TUN_R3_DROPS; k++)
			drops += t.dropped[k];
		log_info("tunnel %s: rung 3: %llu connections (%llu upgraded), %llu datagrams to "
			 "WireGuard, %llu to gateways, %llu dropped",
			 s->dev.ifname, (unsigned long long)n,
			 (unsigned long long)t.result[TUN_R3_UPGRADED],
			 (unsigned long long)t.dgrams[0], (unsigned long long)t.dgrams[1],
			 (unsigned long long)drops);
	}
}

/* GET /lifecycle: "tunnel", when there is one: the interface, how it is
 * reached, its port, address and key, its peers, and the last reconcile
 * (null before the first, with why). */
static void lifecycle(const struct kind_env *e, FILE *f)
{
	struct tun_shared *s = e->shared;
	const struct tun_conf *t = &e->conf->tunnel[0];
	char a[INET6_ADDRSTRLEN];

	if (!s || !s->up)
		return;
	fputs(",\"tunnel\":{\"interface\":", f);
	json_string(f, s->dev.ifname);
	fprintf(f,
		",\"backend\":\"%s\",\"listen_port\":%u,\"address\":\"%s/%u\",\"public_key\":"
		"\"%s\",\"peers\":%" PRIu64 ",\"last_reconcile\":",
		s->dev.way == WGDEV_UAPI ? "wireguard-go" : "kernel", s->port,
		cidr_ip(&t->address, a), t->address.bits, s->pub,
		__atomic_load_n(&s->st.peers, __ATOMIC_RELAXED));
	pthread_mutex_lock(&s->last_lock);
	if (s->reconciled) {
		fprintf(f, "{\"result\":\"%s\",\"at\":%" PRIu64 ",\"error\":",
			s->last_ok ? "ok" : "failed", s->last_at);
		if (s->last_ok)
			fputs("null", f);
		else
			json_string(f, s->last_err);
		fputc('}', f);
	} else {
		fputs("null,\"why\":", f);
		json_string(f, e->conf->control_url[0]
				   ? "no good heartbeat answer yet"
				   : "no control plane (control-url): the peers come with its "
				     "heartbeats");
	}
	pthread_mutex_unlock(&s->last_lock);
	fputc('}', f);
}

/* -t: what a start refuses of the interface without changing it. With
 * create no, the interface must be there and reachable one way or the
 * other; with create yes, whether the kernel makes one shows at the start
 * only. */
static int check(const struct etr_conf *c, unsigned workers)
{
	const struct tun_conf *t = &c->tunnel[0];
	struct wgdev d;
	int rc;

	(void)workers;
	if (t->create)
		return 0;
	rc = wgdev_open(&d, t->ifname, NULL);
	if (rc == 0 && d.way == WGDEV_KERNEL && if_nametoindex(t->ifname) == 0)
		rc = -ENODEV;
	wgdev_close(&d);
	if (rc == 0)
		return 0;
	/* The line of interface (the last one given holds), else of [tunnel]. */
	if (t->line)
		fprintf(stderr, "etrelay: %s:%u: tunnel %s: %s", conf_path(c),
			t->ifname_line ? t->ifname_line : t->line, t->ifname, strerror(-rc));
	else
		fprintf(stderr, "etrelay: tunnel %s: %s", t->ifname, strerror(-rc));
	if (rc == -ENODEV)
		fprintf(stderr,
			": no such WireGuard interface: start wireguard-go for it (a unit), or "
			"%s yes%s (a kernel interface)",
			tun_create_key(t), tun_create_where(t));
	fputc('\n', stderr);
	return EXIT_CONFIG;
}

/* -t: the tunnel as configured. */
static void report(const struct etr_conf *c)
{
	for (unsigned i = 0; i < c->ntunnel; i++) {
		const struct tun_conf *t = &c->tunnel[i];
		char a[INET6_ADDRSTRLEN];

		printf("tunnel %s: listen-port %u, address %s/%u, create %s\n", t->ifname,
		       (unsigned)t->listen_port, cidr_ip(&t->address, a), t->address.bits,
		       t->create ? "yes" : "no");
		/* Rung 3 serves what the SNI listeners hand over. */
		if (c->nsni)
			printf(
			    "tunnel %s: rung 3 per worker: %u connections, %u per source, %u per "
			    "token, messages of %u bytes, backlog %u bytes, handshake-timeout "
			    "%llu ms, idle-timeout %llu ms\n",
			    t->ifname, t->r3.conns, t->r3.per_source, t->r3.per_token,
			    t->r3.max_msg, t->r3.backlog, (unsigned long long)t->r3.handshake_ms,
			    (unsigned long long)t->r3.idle_ms);
		if (c->nsni)
			printf("tunnel %s: rung-3 handshakes %u/s (burst %u) split across the "
			       "workers, %u/s (burst %u) per source\n",
			       t->ifname, t->r3.hs_rate, t->r3.hs_burst, t->r3.hs_ip_rate,
			       t->r3.hs_ip_burst);
	}
}

bool tun_wireguard(const void *shared, char pub[WGP_KEY_B64_LEN + 1], uint16_t *port)
{
	const struct tun_shared *s = shared;

	if (!s || !s->up)
		return false;
	memcpy(pub, s->pub, sizeof(s->pub));
	*port = s->port;
	return true;
}

/* WireGuard starts a new handshake every 2 min while a session is used
 * (REKEY_AFTER_TIME) and drops a session after 3 min without one
 * (REJECT_AFTER_TIME): the buckets part live peers (120, 180) from the
 * gone (an hour, a day). */
const uint64_t tun_age_bound_ns[STATS_TUN_AGE_BUCKETS] = {
    10000000000ull,  30000000000ull,  60000000000ull,	120000000000ull,   180000000000ull,
    300000000000ull, 900000000000ull, 3600000000000ull, 86400000000000ull,
};

/* The interface's peers as the reconcile's get read them, less those it
 * removed: their handshake ages for /metrics. Read with the reconcile,
 * never per scrape: a get of thousands of peers is the control thread's
 * work once a heartbeat. */
static void tun_read_ages(struct tun_shared *s, const struct wgdev_result *r)
{
	bool skip[TUN_PEERS_MAX];
	uint64_t hist[STATS_TUN_AGE_BUCKETS + 1], sum, never, count = 0;
	size_t nops = (size_t)r->removed + r->updated + r->added;
	struct timespec ts;

	memset(skip, 0, r->current * sizeof(skip[0]));
	for (size_t i = 0; i < nops; i++)
		if (s->ops[i].kind == WGP_OP_REMOVE)
			skip[s->ops[i].peer - s->cur] = true;
	clock_gettime(CLOCK_REALTIME, &ts);
	wgp_ages(s->cur, r->current, skip, ts.tv_sec, (uint32_t)ts.tv_nsec, tun_age_bound_ns,
		 STATS_TUN_AGE_BUCKETS, hist, &sum, &never);
	for (unsigned b = 0; b <= STATS_TUN_AGE_BUCKETS; b++) {
		__atomic_store_n(&s->st.age_hist[b], hist[b], __ATOMIC_RELAXED);
		count += hist[b];
	}
	__atomic_store_n(&s->st.age_sum_ns, sum, __ATOMIC_RELAXED);
	__atomic_store_n(&s->st.age_count, count, __ATOMIC_RELAXED);
	__atomic_store_n(&s->st.no_handshake, never, __ATOMIC_RELAXED);
	__atomic_store_n(&s->st.ages_read, (uint64_t)ts.tv_sec, __ATOMIC_RELAXED);
}

/* The last reconcile's result, its time and why it failed, for
 * /lifecycle. */
static void tun_note(struct tun_shared *s, bool ok, const char *why)
{
	pthread_mutex_lock(&s->last_lock);
	s->reconciled = true;
	s->last_ok = ok;
	s->last_at = (uint64_t)time(NULL);
	snprintf(s->last_err, sizeof(s->last_err), "%s", ok ? "" : why);
	pthread_mutex_unlock(&s->last_lock);
}

/* A set with a peer that claims the relay's own tunnel address (attack
 * round 15, F3b): refused whole, as wgp_set_check's. */
static int tun_self_check(const struct tun_shared *s, const struct wgp_peer *want, size_t n,
			  char *why, size_t len)
{
	const union etr_sockaddr *a = &s->self.addr;
	const uint8_t *ab = a->sa.sa_family == AF_INET ? (const uint8_t *)&a->in.sin_addr
						       : (const uint8_t *)&a->in6.sin6_addr;

	return wgp_set_check_self(want, n, a->sa.sa_family, ab, s->self.bits, why, len);
}

/* A reconcile that failed on the interface, said with what is missing:
 * wireguard-go's socket (gone or dead while it restarts), or the kernel's
 * interface. */
static void tun_reconcile_err(const struct tun_shared *s, int rc, char *err, size_t errlen)
{
	if (s->dev.way == WGDEV_UAPI && (rc == -ENOENT || rc == -ECONNREFUSED))
		snprintf(err, errlen, "tunnel %s: reconcile: %s: %s (is wireguard-go running?)",
			 s->dev.ifname, s->dev.sock, strerror(-rc));
	else if (s->dev.way == WGDEV_KERNEL && rc == -ENODEV)
		snprintf(err, errlen, "tunnel %s: reconcile: %s (the interface is gone)",
			 s->dev.ifname, strerror(-rc));
	else
		snprintf(err, errlen, "tunnel %s: reconcile: %s", s->dev.ifname, strerror(-rc));
}

/* After a restore: the tunnel address and the link up again, as at the
 * start (a new device has neither). Kept for the next reconcile when it
 * fails: the key and port are back by then, and would not say so again. */
static int tun_readdress(struct tun_shared *s, char *err, size_t errlen)
{
	const union etr_sockaddr *a = &s->self.addr;
	const uint8_t *ab = a->sa.sa_family == AF_INET ? (const uint8_t *)&a->in.sin_addr
						       : (const uint8_t *)&a->in6.sin6_addr;
	int rc = wgdev_address(s->dev.ifname, a->sa.sa_family, ab, s->self.bits, TUN_TIMEOUT_MS);

	if (rc < 0 && rc != -EEXIST) {
		snprintf(err, errlen, "tunnel %s: the address and link up again: %s", s->dev.ifname,
			 strerror(-rc));
		return rc;
	}
	/* Put there now: the relay's to take away at exit. */
	s->self_added |= rc == 0;
	s->readdress = false;
	return 0;
}

int tun_set_peers(void *shared, struct wgp_peer *want, size_t n, char *err, size_t errlen)
{
	struct tun_shared *s = shared;
	struct wgdev_result r;
	char why[256];
	int rc;

	if (!s || !s->up) {
		snprintf(err, errlen, "no tunnel");
		return -ENODEV;
	}
	pthread_mutex_lock(&s->lock);
	if (wgp_set_check(want, n, s->own, why, sizeof(why)) < 0 ||
	    tun_self_check(s, want, n, why, sizeof(why)) < 0) {
		pthread_mutex_unlock(&s->lock);
		snprintf(err, errlen, "tunnel %s: the control plane's peer set refused: %s",
			 s->dev.ifname, why);
		tun_peers_refused(s, why);
		return -EINVAL;
	}
	rc = wgdev_reconcile(&s->dev, want, n, s->cur, TUN_PEERS_MAX, s->ops, &r);
	if (r.restored) {
		log_warnx("tunnel %s: the interface lost the relay's key and port (wireguard-go "
			  "restarted?); set again",
			  s->dev.ifname);
		__atomic_add_fetch(&s->st.restores, 1, __ATOMIC_RELAXED);
		s->readdress = true;
	}
	if (rc != 0)
		tun_reconcile_err(s, rc, err, errlen);
	else if (s->readdress)
		rc = tun_readdress(s, err, errlen);
	if (rc == 0) {
		__atomic_store_n(&s->st.peers, (uint64_t)n, __ATOMIC_RELAXED);
		tun_read_ages(s, &r);
		if (r.removed + r.updated + r.added)
			log_info("tunnel %s: peers %zu (%u added, %u updated, %u removed)",
				 s->dev.ifname, n, r.added, r.updated, r.removed);
	}
	__atomic_add_fetch(&s->st.reconciles[rc == 0 ? TUN_RECONCILE_OK : TUN_RECONCILE_FAILED], 1,
			   __ATOMIC_RELAXED);
	tun_note(s, rc == 0, err);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void tun_peers_refused(void *shared, const char *why)
{
	struct tun_shared *s = shared;
	char err[sizeof(s->last_err)];

	if (!s || !s->up)
		return;
	snprintf(err, sizeof(err), "tunnel %s: the control plane's peer set refused: %s",
		 s->dev.ifname, why);
	__atomic_add_fetch(&s->st.reconciles[TUN_RECONCILE_FAILED], 1, __ATOMIC_RELAXED);
	tun_note(s, false, err);
}

void tun_counters(const void *shared, uint64_t *peers, uint64_t reconciles[TUN_RECONCILE_RESULTS])
{
	const struct tun_shared *s = shared;

	*peers = s ? __atomic_load_n(&s->st.peers, __ATOMIC_RELAXED) : 0;
	for (unsigned i = 0; i < TUN_RECONCILE_RESULTS; i++)
		reconciles[i] = s ? __atomic_load_n(&s->st.reconciles[i], __ATOMIC_RELAXED) : 0;
}

int tun_set_tokens(void *shared, char *const *list, size_t n, char *err, size_t errlen)
{
	struct tun_shared *s = shared;
	int rc;

	if (!s || !s->up) {
		snprintf(err, errlen, "no tunnel");
		return -1;
	}
	rc = tun_tokens_set(&s->tokens, list, n);
	if (rc < 0) {
		snprintf(err, errlen, "%s",
			 rc == -ENOMEM ? "out of memory" : "a token empty or too long");
		return -1;
	}
	if (rc == 1) {
		log_info("tunnel %s: %zu rung-3 token%s in force", s->dev.ifname, n,
			 n == 1 ? "" : "s");
		for (unsigned w = 0; w < s->env->nworkers; w++)
			s->env->post(s->env, w);
	}
	return 0;
}

struct tun_cert *tun_kind_cert(void *shared)
{
	struct tun_shared *s = shared;

	return s && s->up ? &s->cert : NULL;
}

const struct kind tun_kind = {
    .name = "tunnel",
    .size = sizeof(struct tun_inst),
    .count = count,
    .shared_size = sizeof(struct tun_shared),
    .open = open_,
    .shared_free = shared_free,
    .fds = fds,
    .fds_what = fds_what,
    .attach = attach,
    .poke = poke,
    .take_bans = take_bans,
    .shutdown = shutdown_,
    .close = close_,
    .log_start = log_start,
    .log_stats = log_stats,
    .lifecycle = lifecycle,
    .check = check,
    .report = report,
    .summary_one = "tunnel",
    .summary_many = "tunnels",
};
