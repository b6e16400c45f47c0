/* SPDX-License-Identifier: ISC */
/* The control-plane client: a thread of its own that enrols once (the
 * bootstrap token buys a durable credential, kept in the state directory),
 * then sends a heartbeat every interval and hands the whole SNI route set
 * of each good answer to the daemon; with a tunnel, it asks for the tunnel
 * certificate and renews it. It never runs in a loop thread: its
 * HTTP calls block, bounded by the timeout. */
#ifndef ETR_CONTROL_H
#define ETR_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "control_msg.h"
#include "control_stats.h"
#include "sni_routes.h"

/* The credential's environment variable (and its _FILE form). */
#define CONTROL_ENV_TOKEN CONF_CONTROL_ENV_TOKEN
/* The credential's file in the state directory. */
#define CONTROL_STATE_FILE CONF_CONTROL_STATE_FILE
/* The last good route set, in the state directory beside the credential
 * (the same rules: written whole, mode 600, read only when etrelay's user
 * owns it and no one else may read it). */
#define CONTROL_ROUTES_FILE "control-routes.json"
/* The route file's largest size: SNI_CONTROL_ROUTES_MAX routes of the
 * longest names, as ctl_msg_routes_json writes them. */
#define CONTROL_ROUTES_FILE_MAX (SNI_CONTROL_ROUTES_MAX * 384u + 64u)
/* The services' paths under control-url. */
#define CONTROL_PATH_ENROLL    "/etrelay.v1.RelayEnrollmentService/Enroll"
#define CONTROL_PATH_HEARTBEAT "/etrelay.v1.RelayService/Heartbeat"
#define CONTROL_PATH_CERT      "/etrelay.v1.RelayService/RequestCertificate"
/* The bytes of an error answer (not 2xx) kept for the log; the rest is
 * not read. */
#define CONTROL_ERROR_BODY_MAX 256

struct control;
struct tun_cert;

struct control_config {
	const char *url;	    /* no trailing '/' */
	const char *bootstrap_file; /* "" or NULL: none */
	const char *state_dir;
	uint64_t interval_ms, timeout_ms, backoff_min_ms, backoff_max_ms;
	uint32_t max_answer; /* bytes: a longer answer is cut off */
	/* The route check's: control-allow-upstream and every listener of
	 * conf, and the host's addresses local[0..nlocal). */
	const struct etr_conf *conf;
	const union etr_sockaddr *local;
	size_t nlocal;
	const char *version;
	/* Fill the heartbeat's report (on the control thread). */
	void (*report)(void *arg, struct control_report *r);
	/* A good answer's whole route set replaces the one in force (on the
	 * control thread; the route file's at control_open, on its caller's).
	 * Returns 0, or -1 with why in err: the heartbeat counts as failed
	 * and the set before stays. */
	int (*routes)(void *arg, const struct sni_route *list, size_t n, char *err, size_t errlen);
	/* A good answer's whole WireGuard peer set (wireguardPeers, absent:
	 * none; sorted in place): the tunnel's interface is made to hold
	 * exactly it (on the control thread, blocking). NULL: no tunnel, the
	 * field is not read. A failed call returns -1 with why in err,
	 * logged, and the heartbeat stands. */
	int (*wg_peers)(void *arg, struct wgp_peer *list, size_t n, char *err, size_t errlen);
	/* A good answer's peer set that does not parse, and why: refused
	 * whole (the interface keeps its peers), the rest of the answer
	 * taken, the heartbeat good (on the control thread). NULL: logged
	 * only. */
	void (*wg_refused)(void *arg, const char *why);
	/* A good answer's whole rung-3 token set (tunnelTokens, absent:
	 * none): the tunnel's set in force from now on (on the control
	 * thread). NULL: no tunnel, the field is not read. A set that does
	 * not parse, or that the call refuses (-1, why in err), is logged and
	 * the set in force stays; the heartbeat stands. */
	int (*tun_tokens)(void *arg, char *const *list, size_t n, char *err, size_t errlen);
	void *arg;
	/* The tunnel certificate's holder (tun_cert.h; NULL: no tunnel, no
	 * certificate asked for): once enrolled, RequestCertificate on
	 * certsched.h's schedule with these waits (ms), each answer's chain
	 * checked and put in force there. */
	struct tun_cert *cert;
	/* A certificate just put in force (on the control thread): served
	 * from now, not from the next heartbeat. NULL: nothing to tell. */
	void (*cert_taken)(void *arg);
	uint64_t cert_retry_min_ms, cert_retry_max_ms, cert_not_offered_ms;
	struct control_stats *stats; /* initialised by control_start */
};

/* Open the state directory (made 0700 when missing; refused unless it
 * belongs to the effective uid and no group or other may write it), take
 * the credential (the environment, else the state file: a regular file of
 * the same owner, no group or other bits, a valid credential, or the start
 * is refused; else the bootstrap token file for an enrolment), warn when
 * an http:// URL leaves the host, and initialise cfg->stats. The last
 * good route set, when the route file holds one, goes through the route
 * check and cfg->routes now (on the caller's thread), marked stale until
 * a heartbeat succeeds; a route file that cannot be used is logged and
 * left out. Nothing is sent yet. Returns 0, or -1 with a message naming
 * the fix in err. */
int control_open(struct control **out, const struct control_config *cfg, char *err, size_t errlen);

/* Start the thread, once every listener is up: a start that fails later
 * must not have spent the bootstrap token. Returns 0 or -errno. */
int control_run(struct control *c);

/* Stop the thread and free. An HTTP call under way is cut short, but for
 * an enrolment already sent: the control plane may have spent the
 * bootstrap token on it, so its answer is awaited (at most timeout_ms)
 * and the credential kept. */
void control_stop(struct control *c);

#endif
