/* SPDX-License-Identifier: ISC */
/* The daemon's side of the control-plane client: the heartbeat's report
 * (readiness, and each listener of every kind the control plane knows),
 * and the route set a good heartbeat brings, handed to the SNI listeners;
 * the tunnel's peers and its certificate's holder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control.h"
#include "daemon_int.h"
#include "log.h"
#include "ops.h"
#include "tun_cert.h"
#include "tun_kind.h"
#include "version.h"

/* The control thread: the SNI listeners hand over the tunnel
 * certificate's name (rung 3) while it is in force, nothing once none is
 * (expired): at each heartbeat, and at once when a certificate is taken.
 * The report's tunnelUrl (url, when not NULL) is wss://NAME/t only then. */
static void tunnel_serve(struct daemon *d, char *url, size_t urllen)
{
	struct tun_cert *tc = tun_kind_cert(d->kenv[KIND_TUN].shared);
	struct sni_shared *sh = d->kenv[KIND_SNI].shared;
	char name[TLS_CERT_NAME_MAX];

	if (!tc || !d->conf->nsni || !sh->tunnel.take)
		return;
	tun_cert_name(tc, (int64_t)time(NULL), name);
	if (sni_tunnel_set_name(sh, name, strlen(name)) < 0) {
		log_debug("tunnel: %s: not a name the SNI listeners take", name);
		return;
	}
	if (name[0] && url)
		snprintf(url, urllen, "wss://%s%s", name, TUN_CERT_PATH);
}

static void control_cert_taken(void *arg)
{
	tunnel_serve(arg, NULL, 0);
}

/* The control thread: the heartbeat's report, from the counters the ops
 * plane reads too; its health is what /readyz answers. */
static void control_report(void *arg, struct control_report *r)
{
	struct daemon *d = arg;
	struct ops_readiness rd;

	ops_readiness(&d->stats, &(struct ops_kinds){KINDS, kinds, d->kenv}, &rd);
	r->health = rd.ready	  ? CTL_HEALTH_READY
		    : rd.draining ? CTL_HEALTH_DRAINING
				  : CTL_HEALTH_DEGRADED;
	for (unsigned i = 0; i < rd.n && r->nreasons < CTL_REASONS_MAX; i++)
		snprintf(r->reasons[r->nreasons++], sizeof(r->reasons[0]), "%s", rd.reason[i]);
	for (unsigned k = 0; k < KINDS; k++) {
		int ck = ctl_listener_kind(kinds[k]->name);
		unsigned n = kinds[k]->count(d->conf);

		if (!kinds[k]->listener || ck < 0)
			continue;
		for (unsigned i = 0; i < n && r->nlisteners < CTL_LISTENERS_MAX; i++) {
			struct ctl_listener *l = &r->listeners[r->nlisteners++];
			struct kind_listener kl = {.name = ""};

			kinds[k]->listener(&d->kenv[k], i, &kl);
			l->kind = (enum ctl_listener_kind)ck;
			snprintf(l->name, sizeof(l->name), "%s", kl.name);
			l->active = kl.active;
			l->max = kl.max;
		}
	}
	r->wg = tun_wireguard(d->kenv[KIND_TUN].shared, r->wg_public_key, &r->wg_listen_port);
	tunnel_serve(d, r->tunnel_url, sizeof(r->tunnel_url));
}

/* The control thread: a good heartbeat's rung-3 tokens are the tunnel's
 * (by the control plane's protocol). */
static int control_tun_tokens(void *arg, char *const *list, size_t n, char *err, size_t errlen)
{
	struct daemon *d = arg;

	return tun_set_tokens(d->kenv[KIND_TUN].shared, list, n, err, errlen);
}

_Static_assert(CTL_WG_PEERS_MAX <= TUN_PEERS_MAX, "the interface takes every peer of a set");

/* The control thread: a good heartbeat's whole peer set is the tunnel's
 * interface's (a peer left out is removed: revocation). The control
 * plane's peers are the tunnel's by its protocol, as its routes are
 * SNI's. */
static int control_wg_peers(void *arg, struct wgp_peer *list, size_t n, char *err, size_t errlen)
{
	struct daemon *d = arg;

	return tun_set_peers(d->kenv[KIND_TUN].shared, list, n, err, errlen) < 0 ? -1 : 0;
}

/* The control thread: a good heartbeat's peer set did not parse; the
 * tunnel keeps its peers and says why. */
static void control_wg_refused(void *arg, const char *why)
{
	struct daemon *d = arg;

	tun_peers_refused(d->kenv[KIND_TUN].shared, why);
}

/* The control thread: a good heartbeat's whole route set replaces the
 * control plane's routes of every SNI listener (a bad set changes nothing).
 * The control plane's routes are SNI's by its protocol: no other kind
 * takes them. */
static int control_routes(void *arg, const struct sni_route *list, size_t n, char *err,
			  size_t errlen)
{
	struct daemon *d = arg;

	return sni_set_control_routes(d->kenv[KIND_SNI].shared, list, n, err, errlen);
}

int daemon_control_open(struct daemon *d)
{
	const struct etr_conf *conf = d->conf;
	const struct sni_shared *sni = d->kenv[KIND_SNI].shared;
	struct control_config cc = {
	    .url = conf->control_url,
	    .bootstrap_file = conf->control_bootstrap_file,
	    .state_dir = conf->state_dir,
	    .interval_ms = conf->control_interval_ms,
	    .timeout_ms = conf->control_timeout_ms,
	    .backoff_min_ms = conf->control_backoff_min_ms,
	    .backoff_max_ms = conf->control_backoff_max_ms,
	    .max_answer = conf->control_max_answer,
	    .conf = conf,
	    .local = sni->local,
	    .nlocal = sni->nlocal,
	    .version = ETRELAY_VERSION,
	    .report = control_report,
	    .routes = control_routes,
	    .wg_peers = kinds[KIND_TUN]->count(conf) ? control_wg_peers : NULL,
	    .wg_refused = control_wg_refused,
	    .tun_tokens = kinds[KIND_TUN]->count(conf) ? control_tun_tokens : NULL,
	    .arg = d,
	    .cert = tun_kind_cert(d->kenv[KIND_TUN].shared),
	    .cert_taken = control_cert_taken,
	    .cert_retry_min_ms = conf->control_cert_retry_min_ms,
	    .cert_retry_max_ms = conf->control_cert_retry_max_ms,
	    .cert_not_offered_ms = conf->control_cert_not_offered_ms,
	    .stats = &d->control_stats};
	char err[1024];

	if (!conf->control_url[0])
		return 0;
	if (control_open(&d->control, &cc, err, sizeof(err)) < 0) {
		log_warnx("%s", err);
		return EXIT_CONFIG;
	}
	d->stats.control = &d->control_stats;
	return 0;
}
