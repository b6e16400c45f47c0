/* SPDX-License-Identifier: ISC */
/* The tunnel as a listener kind: the WireGuard interface opened and keyed
 * at start (before the workers serve), its peers reconciled from the
 * control thread. The private key lives in memory only: a relay holds
 * nothing worth keeping, and a restart is a new key the next heartbeat
 * reports. */
#include "tun_kind.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_key.h"
#include "log.h"
#include "stats.h"
#include "tun_cert.h"
#include "wgdev.h"

/* Each request to the interface waits at most this long. */
#define TUN_TIMEOUT_MS 2000

struct tun_shared {
	pthread_mutex_t lock; /* the device and the arrays: the control thread's */
	bool up, lock_init;
	struct wgdev dev;
	uint8_t priv[WGP_KEY_LEN];
	char pub[WGP_KEY_B64_LEN + 1];
	uint16_t port;
	struct wgp_peer *cur; /* TUN_PEERS_MAX: the interface's, for a reconcile */
	struct wgp_op *ops;   /* 2 * TUN_PEERS_MAX */
	struct tun_stats st;  /* the ops plane reads it (etr_stats.tunnel) */
	struct tun_cert cert; /* the tunnel certificate (tun_cert.h) */
};

/* A worker's instance: none of its own yet (rung 3's socket will be). */
struct tun_inst {
	int unused;
};

static unsigned count(const struct etr_conf *c)
{
	return c->ntunnel;
}

/* The netlink or userspace-API socket, one at a time (the control thread's
 * requests are one after another); the rtnetlink one at start is closed. */
static uint64_t fds(const struct etr_conf *c, unsigned workers)
{
	(void)workers;
	return c->ntunnel;
}

static const char *fds_what(const struct etr_conf *c)
{
	(void)c;
	return "the tunnel's interface socket";
}

static const char *way_name(enum wgdev_way w)
{
	return w == WGDEV_UAPI ? "uapi" : "kernel";
}

/* Why a step on the interface failed, and the fix. */
static void open_fail(const struct tun_conf *t, const char *step, int rc)
{
	const char *fix = "";

	if (rc == -EPERM || rc == -EACCES)
		fix = ": etrelay needs CAP_NET_ADMIN for it (a systemd drop-in: "
		      "AmbientCapabilities=CAP_NET_ADMIN and CapabilityBoundingSet=CAP_NET_ADMIN; "
		      "see TUNNEL in etrelay(8))";
	else if (rc == -ENODEV && !t->create)
		fix = ": no such WireGuard interface: start wireguard-go for it (a unit), or set "
		      "create yes in [tunnel] (a kernel interface)";
	else if (rc == -ENODEV || rc == -EOPNOTSUPP)
		fix = ": this kernel has no WireGuard: run wireguard-go for the interface and set "
		      "create no";
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
	int rc;

	s->dev.nl = -1;
	if (pthread_mutex_init(&s->lock, NULL) != 0)
		return EXIT_FAILURE;
	s->lock_init = true;
	if (tun_cert_init(&s->cert) < 0) {
		log_warnx("tunnel %s: its certificate holder", t->ifname);
		return EXIT_FAILURE;
	}
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
	if ((rc = wgdev_open(&s->dev, t->ifname, NULL)) < 0) {
		open_fail(t, "open", rc);
		return EXIT_FAILURE;
	}
	if (wgp_keypair(s->priv, pub) < 0) {
		log_warnx("tunnel %s: no key pair (libcrypto)", t->ifname);
		return EXIT_FAILURE;
	}
	wgp_key_to_b64(pub, s->pub);
	s->port = (uint16_t)t->listen_port;
	if ((rc = wgdev_set_device(&s->dev, s->priv, s->port)) < 0) {
		open_fail(t, "private key and listen-port", rc);
		return EXIT_FAILURE;
	}
	/* Already there after a restart: the same address, fine. */
	rc = wgdev_address(t->ifname, a->addr.sa.sa_family, ab, a->bits, TUN_TIMEOUT_MS);
	if (rc < 0 && rc != -EEXIST) {
		open_fail(t, "address", rc);
		return EXIT_FAILURE;
	}
	s->up = true;
	e->stats->tunnel = &s->st;
	return 0;
}

static void shared_free(struct kind_env *e)
{
	struct tun_shared *s = e->shared;

	if (!s || !s->lock_init) /* open was not called: nothing there */
		return;
	wgdev_close(&s->dev);
	tun_cert_free(&s->cert);
	explicit_bzero(s->priv, sizeof(s->priv));
	free(s->cur);
	free(s->ops);
	if (s->lock_init)
		pthread_mutex_destroy(&s->lock);
}

static int attach(void *inst, const struct loop_ops *ops, struct loop *loop,
		  struct endpoint_table *ep)
{
	(void)inst, (void)ops, (void)loop, (void)ep;
	return 0;
}

static void take_bans(void *inst, const struct banlist *b)
{
	(void)inst, (void)b;
}

static void close_(void *inst)
{
	(void)inst;
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
	fprintf(stderr, "etrelay: %s:%u: tunnel %s: %s%s\n", conf_path(c), t->line, t->ifname,
		strerror(-rc),
		rc == -ENODEV
		    ? ": no such WireGuard interface: start wireguard-go for it (a unit), "
		      "or set create yes in [tunnel] (a kernel interface)"
		    : "");
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

int tun_set_peers(void *shared, struct wgp_peer *want, size_t n, char *err, size_t errlen)
{
	struct tun_shared *s = shared;
	struct wgdev_result r;
	int rc;

	if (!s || !s->up) {
		snprintf(err, errlen, "no tunnel");
		return -ENODEV;
	}
	pthread_mutex_lock(&s->lock);
	rc = wgdev_reconcile(&s->dev, want, n, s->cur, TUN_PEERS_MAX, s->ops, &r);
	if (rc == 0) {
		__atomic_store_n(&s->st.peers, (uint64_t)n, __ATOMIC_RELAXED);
		if (r.removed + r.updated + r.added)
			log_info("tunnel %s: peers %zu (%u added, %u updated, %u removed)",
				 s->dev.ifname, n, r.added, r.updated, r.removed);
	} else {
		snprintf(err, errlen, "tunnel %s: reconcile: %s", s->dev.ifname, strerror(-rc));
	}
	__atomic_add_fetch(&s->st.reconciles[rc == 0 ? TUN_RECONCILE_OK : TUN_RECONCILE_FAILED], 1,
			   __ATOMIC_RELAXED);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void tun_counters(const void *shared, uint64_t *peers, uint64_t reconciles[TUN_RECONCILE_RESULTS])
{
	const struct tun_shared *s = shared;

	*peers = s ? __atomic_load_n(&s->st.peers, __ATOMIC_RELAXED) : 0;
	for (unsigned i = 0; i < TUN_RECONCILE_RESULTS; i++)
		reconciles[i] = s ? __atomic_load_n(&s->st.reconciles[i], __ATOMIC_RELAXED) : 0;
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
    .take_bans = take_bans,
    .close = close_,
    .log_start = log_start,
    .log_stats = log_stats,
    .check = check,
    .report = report,
    .summary_one = "tunnel",
    .summary_many = "tunnels",
};
