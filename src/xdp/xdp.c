/* SPDX-License-Identifier: ISC */
/* The XDP program's loader: open it from the bytes built into the binary,
 * fill its maps, attach it by a BPF link per interface (so it leaves with
 * the process, even a killed one), read its counters. */
#include "xdp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addrclass.h"
#include "log.h"
#include "xdp_maps.h"

_Static_assert(XDP_REASONS == XDP_RESULTS && XDP_LISTENERS == SHAPE_KINDS &&
		   XDP_LISTENER_GAME == SHAPE_GAME,
	       "xdp.h's counters are xdp_maps.h's");
/* A per-CPU map's values are 8-byte aligned, one after the other. */
_Static_assert(sizeof(struct xdp_walk) % 8 == 0, "struct xdp_walk as the kernel lays it out");

const char *xdp_listener_name(unsigned l)
{
	static const char *const names[SHAPE_KINDS] = {
	    [SHAPE_GAME] = "game",
	    [SHAPE_TURN] = "turn",
	    [SHAPE_PRBE] = "prbe",
	};

	return l < SHAPE_KINDS ? names[l] : "?";
}

const char *xdp_result_name(unsigned r)
{
	static const char *const names[XDP_RESULTS] = {
	    [XDP_R_PASSED] = "passed", [XDP_R_KNOWN] = "known", [XDP_R_BOGON] = "bogon",
	    [XDP_R_BANNED] = "banned", [XDP_R_SHAPE] = "shape", [XDP_R_RATE] = "rate",
	    [XDP_R_BUDGET] = "budget",
	};

	return r < XDP_RESULTS ? names[r] : "?";
}

void xdp_rates(const struct etr_conf *c, uint32_t *rate, uint32_t *burst)
{
	uint64_t r = 0, b = 0;

	for (unsigned i = 0; i < c->nrelays; i++) {
		r += c->relays[i].ip_query_rate;
		b += c->relays[i].ip_query_burst;
	}
	/* Each echo port has a bucket per source (prbe.h). */
	r += (uint64_t)c->prbe.rate * c->prbe.nports;
	b += (uint64_t)c->prbe.burst * c->prbe.nports;
	for (unsigned i = 0; i < c->nturn; i++) {
		r += (uint64_t)c->turn[i].unauth_ip_rate + c->turn[i].authf_ip_rate;
		b += (uint64_t)c->turn[i].unauth_ip_burst + c->turn[i].authf_ip_burst;
	}
	*rate = c->xdp.rate ? c->xdp.rate : r < 1 ? 1 : r > 1000000 ? 1000000 : (uint32_t)r;
	*burst = c->xdp.burst ? c->xdp.burst : b < 1 ? 1 : b > 1000000 ? 1000000 : (uint32_t)b;
}

void xdp_budget(const struct etr_conf *c, uint32_t *rate, uint32_t *burst)
{
	uint64_t r = 0, b = 0;

	for (unsigned i = 0; i < c->nrelays; i++) {
		const struct relay_conf *g = &c->relays[i];
		/* The cache's answers have no burst: a second's worth. */
		uint32_t cache = g->query_cache_ms ? g->query_cache_rate : 0;

		r += (uint64_t)g->server_query_rate + g->session_rate + cache;
		b += (uint64_t)g->server_query_burst + g->session_rate + cache;
	}
	r += (uint64_t)c->prbe.listener_rate * c->prbe.nports;
	b += (uint64_t)c->prbe.listener_burst * c->prbe.nports;
	for (unsigned i = 0; i < c->nturn; i++) {
		r += (uint64_t)c->turn[i].unauth_rate + c->turn[i].authf_rate;
		b += (uint64_t)c->turn[i].unauth_burst + c->turn[i].authf_burst;
	}
	*rate = r < 1 ? 1 : r > 1000000 ? 1000000 : (uint32_t)r;
	*burst = b < 1 ? 1 : b > XDP_BUDGET_BURST_MAX ? XDP_BUDGET_BURST_MAX : (uint32_t)b;
}

/* Whether interface name is a loopback one (IFF_LOOPBACK). */
static bool is_loopback(const char *name)
{
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool lo = false;

	if (fd < 0)
		return false;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
		lo = (ifr.ifr_flags & IFF_LOOPBACK) != 0;
	close(fd);
	return lo;
}

int xdp_check(const struct etr_conf *c, char *err, size_t n)
{
	for (unsigned i = 0; i < c->xdp.n; i++) {
		const char *why;
		char where[CONF_PATH_MAX + 32];
		int rc;

		if (if_nametoindex(c->xdp.iface[i]) == 0) {
			why = "no such interface";
			rc = -ENODEV;
		} else if (is_loopback(c->xdp.iface[i])) {
			/* Every source there is a loopback address, a bogon
			 * to the program (attack14: the game went dark). */
			why = "a loopback interface: the program belongs on the public one";
			rc = -EINVAL;
		} else {
			continue;
		}
		if (c->xdp.line[i])
			snprintf(where, sizeof(where), "%s:%u: xdp-interface",
				 c->path ? c->path : "", c->xdp.line[i]);
		else
			snprintf(where, sizeof(where), "--xdp-interface");
		snprintf(err, n, "%s %s: %s", where, c->xdp.iface[i], why);
		return rc;
	}
	return 0;
}

#ifdef ETR_XDP

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <pthread.h>
#include <stdarg.h>
#include <unistd.h>

#include "etrelay_bpf.h" /* etrelay_bpf_o[], generated from etrelay.bpf.o */

struct xdp {
	struct bpf_object *obj;
	int ports, bans, known, params, counts, walk; /* map fds */
	int link[CONF_XDP_IFACES_MAX];		      /* -1: not attached */
	bool native[CONF_XDP_IFACES_MAX];
	unsigned n;
	/* The banned map's keys, sorted: a reload adds the new ones, then
	 * removes the ones gone (never an empty map in between). */
	struct xdp_lpm_key *ban;
	size_t nban;
	int ncpus;
	uint64_t *vals;		/* one counter's per-CPU values, read under lock */
	struct xdp_walk *walks; /* the walk budgets' per-CPU values, likewise */
	pthread_mutex_t lock;
};

/* libbpf's own lines (the verifier's log among them) at debug level: our
 * message says what failed. */
static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[512];

	if (!log_debug_on || level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_debug("xdp: libbpf: %s", line);
	return 0;
}

/* A UDP listener's port and its kind (XDP_PORT_*), added to those the
 * port already has (a game relay with prbe yes has two). */
static void add_port(struct xdp *x, const union etr_sockaddr *a, uint8_t kind)
{
	uint16_t port = a->in.sin_port; /* network order, either family */
	uint8_t kinds = 0;

	(void)bpf_map_lookup_elem(x->ports, &port, &kinds);
	kinds |= kind;
	if (bpf_map_update_elem(x->ports, &port, &kinds, BPF_ANY) < 0)
		log_warn("xdp: port %u", ntohs(port));
}

/* The UDP listeners: game relays, PRBE echo ports, TURN over UDP. */
static void add_ports(struct xdp *x, const struct etr_conf *c)
{
	for (unsigned i = 0; i < c->nrelays; i++)
		add_port(x, &c->relays[i].listen,
			 XDP_PORT_GAME | (c->relays[i].prbe ? XDP_PORT_PRBE : 0));
	for (unsigned i = 0; i < c->prbe.nlisten; i++)
		add_port(x, &c->prbe.listen[i], XDP_PORT_PRBE);
	for (unsigned i = 0; i < c->nturn; i++)
		add_port(x, &c->turn[i].listen, XDP_PORT_TURN);
}

static int map_fd(struct xdp *x, const char *name)
{
	return bpf_object__find_map_fd_by_name(x->obj, name);
}

/* Attach to one interface: native mode, else generic. 0 or -errno. */
static int attach(struct xdp *x, unsigned i, int prog, const char *name)
{
	int ifindex = (int)if_nametoindex(name), fd;
	LIBBPF_OPTS(bpf_link_create_opts, opts, .flags = XDP_FLAGS_DRV_MODE);

	if (ifindex == 0)
		return -errno;
	fd = bpf_link_create(prog, ifindex, BPF_XDP, &opts);
	x->native[i] = fd >= 0;
	if (fd < 0) {
		opts.flags = XDP_FLAGS_SKB_MODE;
		fd = bpf_link_create(prog, ifindex, BPF_XDP, &opts);
	}
	if (fd < 0)
		return -errno;
	x->link[i] = fd;
	return 0;
}

int xdp_start(struct xdp **out, const struct etr_conf *c, char *why, size_t n)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "etrelay");
	struct xdp_params p = {0};
	struct bpf_program *prog;
	struct xdp *x;
	char err[256];
	uint32_t zero = 0, rate, burst, brate, bburst;
	int rc;

	*out = NULL;
	if (c->xdp.n == 0)
		return 0;
	xdp_rates(c, &rate, &burst);
	xdp_budget(c, &brate, &bburst);
	if (xdp_check(c, err, sizeof(err)) < 0) {
		log_warnx("%s", err);
		return -ENODEV;
	}
	libbpf_set_print(libbpf_log);
	snprintf(why, n, "out of memory");
	if (!(x = calloc(1, sizeof(*x)))) {
		log_warn("xdp");
		return 0;
	}
	for (unsigned i = 0; i < CONF_XDP_IFACES_MAX; i++)
		x->link[i] = -1;
	pthread_mutex_init(&x->lock, NULL);
	x->ncpus = libbpf_num_possible_cpus();
	if (x->ncpus > 0 && (!(x->vals = calloc((size_t)x->ncpus, sizeof(*x->vals))) ||
			     !(x->walks = calloc((size_t)x->ncpus, sizeof(*x->walks))))) {
		log_warn("xdp");
		goto fail;
	}
	x->obj = bpf_object__open_mem(etrelay_bpf_o, sizeof(etrelay_bpf_o), &oo);
	if (!x->obj || x->ncpus <= 0) {
		rc = x->obj ? x->ncpus : -errno;
		x->obj = NULL;
		snprintf(why, n, "opening the program: %s", strerror(-rc));
		log_warnx("xdp: %s; running without XDP", why);
		goto fail;
	}
	if ((rc = bpf_object__load(x->obj)) < 0) {
		snprintf(why, n, "loading the program: %s%s", strerror(-rc),
			 rc == -EPERM ? " (needs CAP_BPF and CAP_NET_ADMIN)" : "");
		log_warnx("xdp: %s; running without XDP", why);
		goto fail;
	}
	x->ports = map_fd(x, "etr_ports");
	x->bans = map_fd(x, "etr_bans");
	x->known = map_fd(x, "etr_known");
	x->params = map_fd(x, "etr_params");
	x->counts = map_fd(x, "etr_counts");
	x->walk = map_fd(x, "etr_walk");
	prog = bpf_object__find_program_by_name(x->obj, "etrelay_xdp");
	if (x->ports < 0 || x->bans < 0 || x->known < 0 || x->params < 0 || x->counts < 0 ||
	    x->walk < 0 || !prog) {
		snprintf(why, n, "the program lacks a map or its entry");
		log_warnx("xdp: %s; running without XDP", why);
		goto fail;
	}
	add_ports(x, c);
	p.interval_ns = 1000000000ull / rate;
	p.tolerance_ns = p.interval_ns * (burst > 1 ? burst - 1 : 0);
	p.walk_steps = XDP_WALK_STEPS;
	p.budget_interval_ns = 1000000000ull / brate;
	p.budget_tolerance_ns = p.budget_interval_ns * (bburst - 1);
	if (bpf_map_update_elem(x->params, &zero, &p, BPF_ANY) < 0) {
		snprintf(why, n, "the bucket's parameters: %s", strerror(errno));
		log_warnx("xdp: %s; running without XDP", why);
		goto fail;
	}
	for (unsigned i = 0; i < c->xdp.n; i++) {
		if ((rc = attach(x, i, bpf_program__fd(prog), c->xdp.iface[i])) < 0) {
			snprintf(why, n, "attaching to %s: %s%s", c->xdp.iface[i], strerror(-rc),
				 rc == -EBUSY || rc == -EEXIST ? " (another XDP program is there)"
							       : "");
			log_warnx("xdp: %s; running without XDP", why);
			goto fail;
		}
		x->n = i + 1;
		log_info("xdp: on %s in %s mode (%u packets/s per source, %u at once; from "
			 "sources not known %u/s, %u at once, per CPU)",
			 c->xdp.iface[i], x->native[i] ? "native" : "generic", rate, burst, brate,
			 bburst);
	}
	*out = x;
	return 0;
fail:
	xdp_stop(x);
	return 0;
}

/* [first, last] as the fewest prefixes, each into keys (at most 256). */
static size_t range_prefixes(unsigned __int128 first, unsigned __int128 last,
			     struct xdp_lpm_key *keys)
{
	size_t n = 0;

	for (;;) {
		unsigned bits = 0; /* host bits of the block at first */

		while (bits < 128) {
			unsigned __int128 size = (unsigned __int128)1 << bits;
			unsigned __int128 mask = size - 1;

			/* The next block: aligned at first, within last. */
			if ((first & ((mask << 1) | 1)) != 0 || first + ((mask << 1) | 1) > last ||
			    first + ((mask << 1) | 1) < first)
				break;
			bits++;
		}
		keys[n].prefixlen = 128 - bits;
		for (int b = 0; b < 16; b++)
			keys[n].addr[b] = (uint8_t)(first >> (8 * (15 - b)));
		n++;
		if (bits == 128)
			break;
		first += (unsigned __int128)1 << bits;
		if (first == 0 || first > last)
			break;
	}
	return n;
}

static int key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct xdp_lpm_key));
}

int xdp_bans(struct xdp *x, const struct banlist *b)
{
	struct xdp_lpm_key *keys = NULL;
	size_t n = 0, cap = 0;
	uint8_t one = 1;
	int rc = 0;

	if (!x)
		return 0;
	for (size_t i = 0; b && i < b->n; i++) {
		const struct banlist_range *r = &b->range[i];
		unsigned __int128 first = (unsigned __int128)r->first.hi << 64 | r->first.lo;
		unsigned __int128 last = (unsigned __int128)r->last.hi << 64 | r->last.lo;

		if (cap - n < 256) {
			struct xdp_lpm_key *k = realloc(keys, (cap + 1024) * sizeof(*k));

			if (!k) {
				free(keys);
				log_warn("xdp: ban list");
				return -ENOMEM;
			}
			keys = k;
			cap += 1024;
		}
		n += range_prefixes(first, last, keys + n);
	}
	if (n > XDP_BANS_MAX) {
		log_warnx("xdp: the ban list is %zu prefixes, the map holds %u: the first %u only",
			  n, XDP_BANS_MAX, XDP_BANS_MAX);
		n = XDP_BANS_MAX;
	}
	if (n)
		qsort(keys, n, sizeof(*keys), key_cmp);
	/* New first, then the ones gone: the map only grows in between. */
	for (size_t i = 0; i < n; i++)
		if (bpf_map_update_elem(x->bans, &keys[i], &one, BPF_ANY) < 0 && rc == 0)
			rc = -errno;
	for (size_t i = 0; i < x->nban; i++)
		if (!n || !bsearch(&x->ban[i], keys, n, sizeof(*keys), key_cmp))
			bpf_map_delete_elem(x->bans, &x->ban[i]);
	if (rc < 0)
		log_warnx("xdp: the banned map: %s", strerror(-rc));
	free(x->ban);
	x->ban = keys;
	x->nban = n;
	log_info("xdp: %zu banned prefixes", n);
	return rc;
}

static bool addr_key(const union etr_sockaddr *a, struct xdp_addr *k)
{
	uint32_t v4;

	memset(k, 0, sizeof(*k));
	if (addrclass_v4(a, &v4)) {
		k->b[10] = k->b[11] = 0xff;
		v4 = htonl(v4);
		memcpy(&k->b[12], &v4, 4);
		return true;
	}
	if (a->sa.sa_family != AF_INET6)
		return false;
	memcpy(k->b, a->in6.sin6_addr.s6_addr, 16);
	return true;
}

/* The map's value counts the source's sessions: it stays known until its
 * last one ends. */
int xdp_known_add(struct xdp *x, const union etr_sockaddr *a)
{
	struct xdp_addr k;
	uint32_t n = 0;
	int rc = 0;

	if (!x || !addr_key(a, &k))
		return 0;
	pthread_mutex_lock(&x->lock);
	(void)bpf_map_lookup_elem(x->known, &k, &n);
	n++;
	if (bpf_map_update_elem(x->known, &k, &n, BPF_ANY) < 0)
		rc = errno == E2BIG ? -ENOSPC : -errno;
	pthread_mutex_unlock(&x->lock);
	return rc;
}

int xdp_known_del(struct xdp *x, const union etr_sockaddr *a)
{
	struct xdp_addr k;
	uint32_t n = 0;
	int rc = 0;

	if (!x || !addr_key(a, &k))
		return 0;
	pthread_mutex_lock(&x->lock);
	if (bpf_map_lookup_elem(x->known, &k, &n) == 0) {
		if (n > 1) {
			n--;
			rc = bpf_map_update_elem(x->known, &k, &n, BPF_EXIST);
		} else {
			rc = bpf_map_delete_elem(x->known, &k);
		}
	}
	pthread_mutex_unlock(&x->lock);
	return rc < 0 ? -errno : 0;
}

void xdp_counts(struct xdp *x, uint64_t out[XDP_COUNTS])
{
	uint32_t zero = 0;

	memset(out, 0, XDP_COUNTS * sizeof(*out));
	if (!x)
		return;
	pthread_mutex_lock(&x->lock);
	for (uint32_t k = 0; k < XDP_UNWALKED; k++) {
		/* A per-CPU map's lookup fills one value per possible CPU. */
		if (bpf_map_lookup_elem(x->counts, &k, x->vals) < 0)
			continue;
		for (int c = 0; c < x->ncpus; c++)
			out[k] += x->vals[c];
	}
	if (bpf_map_lookup_elem(x->walk, &zero, x->walks) == 0)
		for (int c = 0; c < x->ncpus; c++)
			out[XDP_UNWALKED] += x->walks[c].unwalked;
	pthread_mutex_unlock(&x->lock);
}

const char *xdp_mode(const struct xdp *x)
{
	unsigned native = 0;

	for (unsigned i = 0; i < x->n; i++)
		native += x->native[i];
	return native == x->n ? "native" : native == 0 ? "generic" : "mixed";
}

void xdp_stop(struct xdp *x)
{
	if (!x)
		return;
	for (unsigned i = 0; i < CONF_XDP_IFACES_MAX; i++)
		if (x->link[i] >= 0)
			close(x->link[i]);
	bpf_object__close(x->obj);
	free(x->ban);
	free(x->vals);
	free(x->walks);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

#else /* built without XDP (meson -Dxdp=disabled, or no clang or libbpf) */

int xdp_start(struct xdp **out, const struct etr_conf *c, char *why, size_t n)
{
	char err[256];

	*out = NULL;
	if (c->xdp.n == 0)
		return 0;
	if (xdp_check(c, err, sizeof(err)) < 0) {
		log_warnx("%s", err);
		return -ENODEV;
	}
	snprintf(why, n, "this etrelay was built without XDP (meson -Dxdp)");
	log_warnx("xdp: %s; running without it", why);
	return 0;
}

int xdp_bans(struct xdp *x, const struct banlist *b)
{
	return 0;
}

int xdp_known_add(struct xdp *x, const union etr_sockaddr *a)
{
	return 0;
}

int xdp_known_del(struct xdp *x, const union etr_sockaddr *a)
{
	return 0;
}

void xdp_counts(struct xdp *x, uint64_t out[XDP_COUNTS])
{
	memset(out, 0, XDP_COUNTS * sizeof(*out));
}

const char *xdp_mode(const struct xdp *x)
{
	return "off";
}

void xdp_stop(struct xdp *x)
{
}

#endif
