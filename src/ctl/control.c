/* SPDX-License-Identifier: ISC */
/* The control-plane client's thread: blocking libcurl easy calls (HTTP/1.1,
 * a timeout on each) paced by control_sched.c. Connect's unary protocol
 * over HTTP/1.1 is a JSON POST, so nothing more than libcurl is needed.
 * The bootstrap token travels as "Authorization: Bearer", as the API
 * token does; it is wiped from memory once enrolment succeeded. */
#include "control.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "certsched.h"
#include "control_sched.h"
#include "control_state.h"
#include "log.h"
#include "net.h"
#include "secret.h"
#include "timers.h"
#include "tun_cert.h"
#include "url.h"

#define NS_PER_MS_ 1000000ull

/* The least a certificate request may wait for its answer, bounded
 * otherwise by the time to the next heartbeat (cert_timeout): the most a
 * request held open delays a heartbeat. */
#define CONTROL_CERT_WAIT_MIN_MS 1000ull

struct control {
	struct control_config cfg;
	struct control_stats *st;
	pthread_t thread;
	pthread_mutex_t lock; /* guards stop, with wake */
	pthread_cond_t wake;
	bool stop;
	_Atomic bool stopping;	/* read by libcurl's progress callback */
	_Atomic bool enrolling; /* an Enroll is under way: stop waits for it */
	bool started;		/* the thread runs */
	CURL *curl;
	char hostname[256];
	char state_path[CONF_PATH_MAX + sizeof(CONTROL_STATE_FILE) + 1];
	char routes_path[CONF_PATH_MAX + sizeof(CONTROL_ROUTES_FILE) + 1];
	int dfd;	    /* the state directory, opened once at the start */
	bool from_env;	    /* the credential came from ETRELAY_CONTROL_TOKEN */
	bool write_pending; /* enrolled, the state file not written yet */
	char bootstrap[1024];
	size_t bootstrap_len; /* 0: spent or none */
	struct ctl_credential cred;
	bool enrolled;
	struct ctl_sched sched;
	struct ctl_logstate log_enrol, log_hb;
	size_t routes;	   /* in force */
	bool routes_stale; /* from the route file; no good heartbeat since */
	uint64_t disk_sig; /* ctl_msg_routes_sig of the route file's set; 0: unknown */
	int routes_werr;   /* the last route file write's error logged; 0: none */
	struct ctl_upstream_policy upstream;
	uint64_t refused_sig;  /* of the refused routes last logged; 0: none */
	char wg_refused[512];  /* why the last peer set was refused, logged; "": taken */
	char wg_failed[512];   /* why the last reconcile failed, logged; "": it did not */
	char tok_refused[512]; /* likewise for the last rung-3 token set */
	bool hosts_warned;     /* the host list outgrew the policy, said once */
	struct certsched cert; /* with cfg.cert: when to ask for it next (ms) */
	struct ctl_logstate log_cert;
	uint64_t call_ms; /* post's bound when not 0 (else control-timeout) */
};

/* State directory and file */

/* Read the credential file: 1 when read, 0 when there is none, -1 with err.
 * A file that is there but unusable (a link, another owner, readable by
 * others, not a credential) stops the start: enrolling again would spend
 * the one-time bootstrap token on a mistake someone must look at. */
static int state_read(struct control *c, char *err, size_t errlen)
{
	char buf[4096], why[256];
	ssize_t n;
	int fd, rc = ctl_state_open(c->dfd, CONTROL_STATE_FILE, c->state_path, "credential",
				    "the control-plane credential", &fd, err, errlen);

	if (rc <= 0) {
		/* The fix for a link or another kind of file. */
		if (rc < 0 && (strstr(err, "symbolic link") || strstr(err, "not a regular file")))
			snprintf(err + strlen(err), errlen - strlen(err),
				 "; `rm %s`, then put the credential file itself there or enrol "
				 "again",
				 c->state_path);
		return rc;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0 || (size_t)n == sizeof(buf) ||
	    ctl_msg_credential(buf, (size_t)n, &c->cred, why, sizeof(why)) < 0) {
		snprintf(err, errlen,
			 "%s: not a usable credential: %s (etrelay does not enrol again by "
			 "itself; remove the file to enrol with a new bootstrap token)",
			 c->state_path,
			 n < 0			    ? strerror(errno)
			 : (size_t)n == sizeof(buf) ? "too long"
						    : why);
		explicit_bzero(buf, sizeof(buf));
		return -1;
	}
	explicit_bzero(buf, sizeof(buf));
	return 1;
}

/* The credential, as ctl_state_write writes it. Returns 0 or -errno. */
static int state_write(struct control *c)
{
	char *text = ctl_msg_credential_json(&c->cred);
	int rc;

	if (!text)
		return -ENOMEM;
	rc = ctl_state_write(c->dfd, CONTROL_STATE_FILE, text);
	explicit_bzero(text, strlen(text));
	free(text);
	return rc;
}

/* HTTP */

struct answer {
	char *buf;
	size_t len, cap;
	size_t max;	/* control-max-answer */
	CURL *curl;	/* for the status, in on_data */
	bool checked;	/* the status was read */
	bool error;	/* not 2xx: CONTROL_ERROR_BODY_MAX bytes kept, no more read */
	bool cut;	/* the transfer was cut off (error: after what was kept) */
	bool too_large; /* a 2xx past max: cut off */
};

/* Returning less than it was given ends the transfer (CURLE_WRITE_ERROR):
 * nothing past the cap is read, let alone kept. */
static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct answer *a = arg;
	size_t add = size * n, limit;

	if (!a->checked) {
		long st = 0;

		curl_easy_getinfo(a->curl, CURLINFO_RESPONSE_CODE, &st);
		a->error = st < 200 || st > 299;
		a->checked = true;
	}
	limit = a->error ? CONTROL_ERROR_BODY_MAX : a->max;
	if (add > limit - a->len) {
		if (!a->error) {
			a->too_large = true;
			return 0;
		}
		add = limit - a->len;
		a->cut = true;
	}
	if (a->len + add + 1 > a->cap) {
		size_t cap = a->cap ? a->cap : 4096;
		char *b;

		while (cap < a->len + add + 1)
			cap *= 2;
		if (!(b = realloc(a->buf, cap)))
			return 0;
		a->buf = b;
		a->cap = cap;
	}
	memcpy(a->buf + a->len, p, add);
	a->len += add;
	a->buf[a->len] = '\0';
	return a->cut ? 0 : add;
}

/* A stop cuts a call short, but not an Enroll once any of it was sent:
 * the control plane may spend the bootstrap token on it, and then its
 * answer is the only credential there will be. */
static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct control *c = arg;

	(void)dt;
	(void)dn;
	(void)ut;
	if (!atomic_load(&c->stopping))
		return 0;
	return atomic_load(&c->enrolling) && un > 0 ? 0 : 1;
}

/* POST body to url + path with the token; the answer in a (the caller
 * frees a->buf), its status in *status. Returns the result of the
 * exchange (CTL_OK for any 2xx), with why in err when not. */
static enum ctl_result post(struct control *c, const char *path, const char *token,
			    const char *body, struct answer *a, long *status, char *err,
			    size_t errlen)
{
	char url[CONF_URL_MAX + 64], auth[1100], cerr[CURL_ERROR_SIZE] = "";
	char ua[64], msg[CONTROL_ERROR_BODY_MAX + 4];
	struct curl_slist *h = NULL, *t;
	uint64_t tmo = c->call_ms ? c->call_ms : c->cfg.timeout_ms;
	enum ctl_result r;
	CURLcode cc;

	*status = 0;
	memset(a, 0, sizeof(*a));
	a->max = c->cfg.max_answer;
	a->curl = c->curl;
	snprintf(url, sizeof(url), "%s%s", c->cfg.url, path);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	snprintf(ua, sizeof(ua), "etrelay/%s", c->cfg.version);
	static const char *const fixed[] = {"Content-Type: application/json",
					    "Accept: application/json",
					    "Connect-Protocol-Version: 1",
					    /* No 100-continue round trip. */
					    "Expect:"};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if (!(t = curl_slist_append(h, fixed[i])))
			goto nomem;
		h = t;
	}
	if (!(t = curl_slist_append(h, auth)))
		goto nomem;
	h = t;
	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c->curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)tmo);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)tmo);
	/* A redirect would carry the token to wherever it points: a 3xx is a
	 * failed call. The peer's certificate and name are checked against the
	 * system's CA store (libcurl's defaults, set again here on purpose). */
	curl_easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(c->curl, CURLOPT_USERAGENT, ua);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	/* A Content-Length past the cap fails before the body; a chunked or
	 * unsized body is cut by on_data. No decoding: what arrives is what
	 * is counted. */
	curl_easy_setopt(c->curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)c->cfg.max_answer);
	curl_easy_setopt(c->curl, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, c);
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, cerr);
	cc = curl_easy_perform(c->curl);
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, status);
	/* The header list holds the token. */
	for (t = h; t; t = t->next)
		explicit_bzero(t->data, strlen(t->data));
	curl_slist_free_all(h);
	explicit_bzero(auth, sizeof(auth));
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, NULL);
	/* An error answer cut off after its first bytes, or one whose
	 * Content-Length is past the cap, is still that error. */
	if ((cc == CURLE_WRITE_ERROR && a->error) ||
	    (cc == CURLE_FILESIZE_EXCEEDED && *status && (*status < 200 || *status > 299)))
		cc = CURLE_OK;
	switch (cc) {
	case CURLE_OK:
		r = ctl_result_of_status(*status);
		if (r != CTL_OK) {
			ctl_msg_error_text(a->buf ? a->buf : "", a->len, a->cut, msg, sizeof(msg));
			snprintf(err, errlen, "HTTP %ld%s%s", *status, msg[0] ? ": " : "", msg);
		}
		return r;
	case CURLE_FILESIZE_EXCEEDED:
		snprintf(err, errlen,
			 "answer of a Content-Length over %u bytes (control-max-answer)",
			 (unsigned)c->cfg.max_answer);
		return CTL_TOO_LARGE;
	case CURLE_OPERATION_TIMEDOUT:
		snprintf(err, errlen, "no answer within %llu ms", (unsigned long long)tmo);
		return CTL_TIMEOUT;
	case CURLE_WRITE_ERROR:
		if (!a->too_large) {
			snprintf(err, errlen, "out of memory for the answer");
			return CTL_NETWORK;
		}
		snprintf(err, errlen, "answer over %u bytes (control-max-answer), cut off",
			 (unsigned)c->cfg.max_answer);
		return CTL_TOO_LARGE;
	default:
		snprintf(err, errlen, "%s", cerr[0] ? cerr : curl_easy_strerror(cc));
		return CTL_NETWORK;
	}
nomem:
	curl_slist_free_all(h);
	explicit_bzero(auth, sizeof(auth));
	snprintf(err, errlen, "out of memory");
	return CTL_NETWORK;
}

/* Published state */

static void publish(struct control *c, uint64_t now)
{
	struct control_stats *s = c->st;
	uint64_t wait = c->sched.next > now ? (c->sched.next - now) / 1000000000ull : 0;

	pthread_mutex_lock(&s->lock);
	s->enrolled = c->enrolled;
	snprintf(s->relay_id, sizeof(s->relay_id), "%s", c->cred.relay_id);
	s->failures = c->sched.failures;
	s->next_attempt = (uint64_t)time(NULL) + wait;
	s->routes = c->routes;
	s->routes_stale = c->routes_stale;
	pthread_mutex_unlock(&s->lock);
}

static void enrol(struct control *c)
{
	char err[512] = "", *body = ctl_msg_enroll_request(c->cfg.version, c->hostname);
	struct answer a = {0};
	enum ctl_result r = CTL_NETWORK;
	long status = 0;
	uint64_t now;
	int werr = 0;

	if (body) {
		atomic_store(&c->enrolling, true);
		r = post(c, CONTROL_PATH_ENROLL, c->bootstrap, body, &a, &status, err, sizeof(err));
		atomic_store(&c->enrolling, false);
	} else
		snprintf(err, sizeof(err), "out of memory");
	if (r == CTL_OK &&
	    ctl_msg_credential(a.buf ? a.buf : "", a.len, &c->cred, err, sizeof(err)) < 0)
		r = CTL_BAD_ANSWER;
	if (r == CTL_OK && (werr = state_write(c)) < 0) {
		r = CTL_STATE_ERROR;
		c->write_pending = true;
	}
	if (a.buf)
		explicit_bzero(a.buf, a.len);
	free(a.buf);
	free(body);
	now = mono_ns();
	ctl_sched_enrolment(&c->sched, r, now);
	if (c->sched.enrolled) {
		/* Spent: never again, whatever happens to the file. */
		c->enrolled = true;
		explicit_bzero(c->bootstrap, sizeof(c->bootstrap));
		c->bootstrap_len = 0;
	}
	pthread_mutex_lock(&c->st->lock);
	c->st->enrolments[r]++;
	pthread_mutex_unlock(&c->st->lock);
	publish(c, now);
	if (r == CTL_OK)
		log_info("control: enrolled as relay %s; credential kept in %s", c->cred.relay_id,
			 c->state_path);
	else if (r == CTL_STATE_ERROR)
		log_warnx("control: enrolled as relay %s, but writing %s failed (%s): the "
			  "credential lives in memory only until a write succeeds (tried again "
			  "each heartbeat); a restart before that cannot enrol again",
			  c->cred.relay_id, c->state_path, strerror(-werr));
	else if (ctl_log_changed(&c->log_enrol, r, 0, err))
		log_warnx("control: enrolment %s (%s)%s; next attempt in %llu ms",
			  r == CTL_REFUSED ? "refused" : "failed", err,
			  r == CTL_REFUSED ? ": the control plane refused the bootstrap token" : "",
			  (unsigned long long)((c->sched.next - now) / NS_PER_MS_));
	else
		log_debug("control: enrolment %s (%s); next attempt in %llu ms", ctl_result_name(r),
			  err, (unsigned long long)((c->sched.next - now) / NS_PER_MS_));
}

/* Lines for the refused routes of one answer: the rest in the count. */
#define CONTROL_REFUSED_LOGGED 8

/* Drop the routes whose upstream the policy refuses (the others apply),
 * count them by why in refused, and log them when the refused set differs
 * from the one logged last (else at debug level). Returns how many are
 * left in list. */
/* The host's addresses, read again (getifaddrs, on this thread) before a
 * route set is judged: one added since the start (a tunnel's that came up
 * after etrelay) is the host's too. A list past the policy's room is said
 * once. */
static void hosts_refresh(struct control *c)
{
	union etr_sockaddr *local = malloc((CTL_UPSTREAM_HOST_MAX + 1) * sizeof(*local));
	size_t n;

	if (!local)
		return;
	n = net_local_addrs(local, CTL_UPSTREAM_HOST_MAX + 1);
	if (n && ctl_upstream_set_hosts(&c->upstream, local, n) && !c->hosts_warned) {
		c->hosts_warned = true;
		log_warnx("control: the host has more than %u addresses: routes to the others are "
			  "not refused as the host's",
			  CTL_UPSTREAM_HOST_MAX);
	}
	free(local);
}

static size_t routes_filter(struct control *c, struct sni_route *list, size_t n,
			    uint64_t refused[CTL_UPSTREAM_WHYS])
{
	uint64_t sig = 1469598103934665603ull; /* FNV-1a over the refused */
	size_t m = 0, nrefused = 0, logged = 0;
	char why[256], a[ADDR_STRLEN];
	bool log;

	memset(refused, 0, CTL_UPSTREAM_WHYS * sizeof(refused[0]));
	hosts_refresh(c);
	for (size_t i = 0; i < n; i++) {
		enum ctl_upstream_why w =
		    ctl_upstream_check(&c->upstream, &list[i].upstream, why, sizeof(why));

		if (ctl_upstream_ok(w))
			continue;
		refused[w]++;
		nrefused++;
		for (const unsigned char *p = (const unsigned char *)list[i].name; *p; p++)
			sig = (sig ^ *p) * 1099511628211ull;
		for (size_t k = 0; k < sizeof(list[i].upstream); k++)
			sig = (sig ^ ((const unsigned char *)&list[i].upstream)[k]) *
			      1099511628211ull;
	}
	if (!nrefused)
		sig = 0;
	log = sig != c->refused_sig;
	c->refused_sig = sig;
	for (size_t i = 0; i < n; i++) {
		enum ctl_upstream_why w =
		    ctl_upstream_check(&c->upstream, &list[i].upstream, why, sizeof(why));

		if (ctl_upstream_ok(w)) {
			list[m++] = list[i];
			continue;
		}
		addr_str(&list[i].upstream.sa, a);
		if (log && logged++ < CONTROL_REFUSED_LOGGED)
			log_warnx("control: route %s: upstream %s refused (%s): %s; the other "
				  "routes apply",
				  list[i].name, a, ctl_upstream_why_name(w), why);
		else
			log_debug("control: route %s: upstream %s refused (%s): %s", list[i].name,
				  a, ctl_upstream_why_name(w), why);
	}
	if (log && nrefused > CONTROL_REFUSED_LOGGED)
		log_warnx("control: %zu more routes refused (debug shows each)",
			  nrefused - CONTROL_REFUSED_LOGGED);
	return m;
}

/* The route file */

/* Write the set just put in force (text, its digest sig) to the route file,
 * logging a failure once per error (tried again each heartbeat: the file's
 * digest stays the old one). */
static void routes_save(struct control *c, const char *text, uint64_t sig)
{
	int rc = text ? ctl_state_write(c->dfd, CONTROL_ROUTES_FILE, text) : -ENOMEM;

	if (rc == 0) {
		c->disk_sig = sig;
		if (c->routes_werr)
			log_info("control: route set written to %s", c->routes_path);
		c->routes_werr = 0;
		return;
	}
	if (rc != c->routes_werr)
		log_warnx("control: writing %s: %s; a restart would not have this route set "
			  "while the control plane is away (tried again each heartbeat)",
			  c->routes_path, strerror(-rc));
	else
		log_debug("control: writing %s: %s", c->routes_path, strerror(-rc));
	c->routes_werr = rc;
}

/* Put the route file's set in force, marked stale until a heartbeat
 * succeeds: the services behind the relay stay reachable while the control
 * plane is away at a start. The set goes through the route check a
 * heartbeat's goes through, under the configuration of this start. A file
 * that cannot be used is logged with the fix and left out (it is written
 * again by the next good heartbeat): routes are not a secret, and the
 * start without them is the start there was before the file. */
static void routes_load(struct control *c)
{
	uint64_t refused[CTL_UPSTREAM_WHYS] = {0};
	char err[sizeof(((struct control *)0)->routes_path) + 1024] = "", why[512];
	struct sni_route *list = NULL;
	size_t n = 0, len = 0;
	char *buf = NULL;
	struct stat st;
	int fd = -1, rc = ctl_state_open(c->dfd, CONTROL_ROUTES_FILE, c->routes_path, "route file",
					 "the route set", &fd, err, sizeof(err));

	if (rc == 0)
		return;
	if (rc < 0)
		goto bad;
	if (fstat(fd, &st) < 0) {
		snprintf(err, sizeof(err), "%s: %s", c->routes_path, strerror(errno));
		goto bad;
	}
	if ((uint64_t)st.st_size > CONTROL_ROUTES_FILE_MAX) {
		snprintf(err, sizeof(err), "%s: %lld bytes, more than a route set takes (%u)",
			 c->routes_path, (long long)st.st_size, CONTROL_ROUTES_FILE_MAX);
		goto bad;
	}
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		snprintf(err, sizeof(err), "%s: out of memory", c->routes_path);
		goto bad;
	}
	while (len < (size_t)st.st_size) {
		ssize_t got = read(fd, buf + len, (size_t)st.st_size - len);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			snprintf(err, sizeof(err), "%s: %s", c->routes_path, strerror(errno));
			goto bad;
		}
		if (got == 0)
			break;
		len += (size_t)got;
	}
	if (ctl_msg_routes(buf, len, &list, &n, why, sizeof(why)) < 0) {
		snprintf(err, sizeof(err), "%s: not a route set: %s", c->routes_path, why);
		goto bad;
	}
	c->disk_sig = ctl_msg_routes_sig(list, n);
	n = routes_filter(c, list, n, refused);
	if (c->cfg.routes && c->cfg.routes(c->cfg.arg, list, n, why, sizeof(why)) < 0) {
		snprintf(err, sizeof(err), "%s: %s", c->routes_path, why);
		goto bad;
	}
	c->routes = n;
	c->routes_stale = true;
	pthread_mutex_lock(&c->st->lock);
	memcpy(c->st->routes_refused, refused, sizeof(refused));
	pthread_mutex_unlock(&c->st->lock);
	log_info("control: %zu route%s from %s in force, stale until a heartbeat succeeds", n,
		 n == 1 ? "" : "s", c->routes_path);
	goto out;
bad:
	log_warnx("control: %s; starting without the last route set (the next good heartbeat "
		  "brings the routes and writes the file again)",
		  err);
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(list);
}

/* The control thread: a good answer's WireGuard peers, apart from the
 * rest of it. A set that does not parse is refused whole (the interface
 * keeps its peers: a peer left out would be revoked, a bad entry is no
 * revocation) and the routes are taken all the same: a gateway's bad
 * entry must not freeze every SNI route. Both that and an interface that
 * fails are the tunnel's (counted, and shown in /lifecycle); the
 * heartbeat stands and the next one brings the whole set again. A refusal
 * is logged once per reason. */
static void wg_take(struct control *c, const char *body, size_t len)
{
	struct wgp_peer *peers = NULL;
	size_t n = 0;
	char err[512] = "";

	if (ctl_msg_wg_peers(body, len, &peers, &n, err, sizeof(err)) == 0) {
		c->wg_refused[0] = '\0';
		/* Said once per reason (attack round 16: the same refusal
		 * or a stopped wireguard-go was a line every heartbeat). */
		if (c->cfg.wg_peers(c->cfg.arg, peers, n, err, sizeof(err)) < 0) {
			if (strcmp(err, c->wg_failed) != 0)
				log_warnx("control: %s; the next heartbeat tries again", err);
			else
				log_debug("control: %s", err);
			snprintf(c->wg_failed, sizeof(c->wg_failed), "%s", err);
		} else if (c->wg_failed[0]) {
			log_info("control: the tunnel's peers are reconciled again");
			c->wg_failed[0] = '\0';
		}
		free(peers);
		return;
	}
	if (c->cfg.wg_refused)
		c->cfg.wg_refused(c->cfg.arg, err);
	if (strcmp(err, c->wg_refused) != 0)
		log_warnx("control: wireguardPeers refused (%s): the tunnel keeps its peers, "
			  "the routes are taken",
			  err);
	else
		log_debug("control: wireguardPeers refused (%s)", err);
	snprintf(c->wg_refused, sizeof(c->wg_refused), "%s", err);
	free(peers);
}

/* The control thread: a good answer's rung-3 tokens, apart from the rest
 * of it, as its peers are. A set that does not parse leaves the one in
 * force (a token left out would close its gateway's connections); logged
 * once per reason. */
static void tokens_take(struct control *c, const char *body, size_t len)
{
	char **list = NULL, err[512] = "";
	size_t n = 0;

	if (ctl_msg_tunnel_tokens(body, len, &list, &n, err, sizeof(err)) == 0 &&
	    c->cfg.tun_tokens(c->cfg.arg, list, n, err, sizeof(err)) == 0) {
		c->tok_refused[0] = '\0';
		free(list);
		return;
	}
	free(list);
	if (strcmp(err, c->tok_refused) != 0)
		log_warnx("control: tunnelTokens refused (%s): the tunnel keeps its tokens", err);
	else
		log_debug("control: tunnelTokens refused (%s)", err);
	snprintf(c->tok_refused, sizeof(c->tok_refused), "%s", err);
}

static void heartbeat(struct control *c)
{
	uint64_t refused[CTL_UPSTREAM_WHYS] = {0};
	struct control_report rep;
	struct sni_route *list = NULL;
	struct answer a = {0};
	enum ctl_result r = CTL_NETWORK;
	char err[512] = "", *body;
	long status = 0;
	size_t n = 0;
	uint64_t now, sig = 0;
	char *saved = NULL;
	int werr;

	memset(&rep, 0, sizeof(rep));
	if (c->cfg.report)
		c->cfg.report(c->cfg.arg, &rep);
	body = ctl_msg_heartbeat_request(c->cfg.version, c->hostname, &rep);
	if (body)
		r = post(c, CONTROL_PATH_HEARTBEAT, c->cred.api_token, body, &a, &status, err,
			 sizeof(err));
	else
		snprintf(err, sizeof(err), "out of memory");
	if (r == CTL_OK &&
	    ctl_msg_routes(a.buf ? a.buf : "", a.len, &list, &n, err, sizeof(err)) < 0)
		r = CTL_BAD_ANSWER;
	/* The set as given (the route check runs again on it at a start,
	 * under the configuration of then), for the route file when it
	 * differs from the file's. */
	if (r == CTL_OK && (sig = ctl_msg_routes_sig(list, n)) != c->disk_sig)
		saved = ctl_msg_routes_json(list, n);
	if (r == CTL_OK)
		n = routes_filter(c, list, n, refused);
	if (r == CTL_OK && c->cfg.routes &&
	    c->cfg.routes(c->cfg.arg, list, n, err, sizeof(err)) < 0)
		r = CTL_BAD_ANSWER;
	if (r == CTL_OK) {
		c->routes = n;
		c->routes_stale = false;
		if (sig != c->disk_sig)
			routes_save(c, saved, sig);
	}
	if (r == CTL_OK && c->cfg.wg_peers)
		wg_take(c, a.buf ? a.buf : "", a.len);
	if (r == CTL_OK && c->cfg.tun_tokens)
		tokens_take(c, a.buf ? a.buf : "", a.len);
	free(saved);
	free(list);
	free(a.buf);
	free(body);
	if (c->write_pending && (werr = state_write(c)) == 0) {
		c->write_pending = false;
		log_info("control: credential written to %s", c->state_path);
	}
	now = mono_ns();
	ctl_sched_heartbeat(&c->sched, r, now);
	pthread_mutex_lock(&c->st->lock);
	c->st->heartbeats[r]++;
	c->st->any_heartbeat = true;
	c->st->last_result = r;
	c->st->last_heartbeat = (uint64_t)time(NULL);
	if (r == CTL_OK) {
		c->st->last_success = c->st->last_heartbeat;
		memcpy(c->st->routes_refused, refused, sizeof(refused));
	}
	pthread_mutex_unlock(&c->st->lock);
	publish(c, now);
	/* A failure is logged again when its reason changes: two bad answers
	 * in a row are two lines. */
	if (!ctl_log_changed(&c->log_hb, r, c->routes, r == CTL_OK ? NULL : err))
		log_debug("control: heartbeat %s%s%s%s, %zu route%s", ctl_result_name(r),
			  r == CTL_OK ? "" : " (", r == CTL_OK ? "" : err, r == CTL_OK ? "" : ")",
			  c->routes, c->routes == 1 ? "" : "s");
	else if (r == CTL_OK)
		log_info("control: heartbeat ok, %zu route%s", c->routes,
			 c->routes == 1 ? "" : "s");
	else
		log_warnx("control: heartbeat %s (%s)%s; keeping the last %zu route%s, next in "
			  "%llu ms",
			  r == CTL_REFUSED ? "refused" : "failed", err,
			  r == CTL_REFUSED ? ": the control plane refused the credential" : "",
			  c->routes, c->routes == 1 ? "" : "s",
			  (unsigned long long)((c->sched.next - now) / NS_PER_MS_));
}

/* The tunnel certificate */

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How long a certificate request may wait at now: control-timeout, but
 * not past the next heartbeat's time (at least CONTROL_CERT_WAIT_MIN_MS):
 * both are the control thread's, and a control plane holding
 * RequestCertificate open must not hold the heartbeat, and with it
 * revocation, for control-timeout (attack round 15). Cut short, the
 * request is a failure, tried again on its schedule. */
static uint64_t cert_timeout(const struct control *c, uint64_t now)
{
	uint64_t left = c->sched.next > now ? (c->sched.next - now) / NS_PER_MS_ : 0;

	if (left < CONTROL_CERT_WAIT_MIN_MS)
		left = CONTROL_CERT_WAIT_MIN_MS;
	return left < c->cfg.timeout_ms ? left : c->cfg.timeout_ms;
}

/* Ask for the tunnel certificate (a new key, a request naming nothing),
 * put the answer in force when it checks, and schedule the next request:
 * a failure keeps the pair in force, if any, and is tried again after
 * cert_retry_min_ms, doubling; "no certificates offered" after
 * cert_not_offered_ms; a certificate is renewed at two thirds of its life.
 * One with less than certsched_floor left is a failure of its own
 * (CERTSCHED_SHORT), not put in force. */
static void cert_request(struct control *c)
{
	enum certsched_result res = CERTSCHED_FAILED;
	struct tun_cert_taken t = {0};
	int took = -1;
	char err[512] = "", *csr = NULL, *body = NULL, *chain = NULL;
	char name[TLS_CERT_NAME_MAX];
	struct answer a = {0};
	enum ctl_result r = CTL_NETWORK;
	long status = 0;
	size_t len = 0;
	uint64_t now, due;
	bool had;

	had = tun_cert_name(c->cfg.cert, (int64_t)time(NULL), name);
	if (tun_cert_request(c->cfg.cert, &csr, err, sizeof(err)) < 0)
		r = CTL_BAD_ANSWER; /* not the control plane's: counted as failed */
	else if (!(body = ctl_msg_cert_request(csr)))
		snprintf(err, sizeof(err), "out of memory");
	else {
		c->call_ms = cert_timeout(c, mono_ns());
		r = post(c, CONTROL_PATH_CERT, c->cred.api_token, body, &a, &status, err,
			 sizeof(err));
		c->call_ms = 0;
	}
	if (r != CTL_OK && status >= 400 &&
	    ctl_msg_cert_not_offered(status, a.buf ? a.buf : "", a.len))
		res = CERTSCHED_NOT_OFFERED;
	else if (r == CTL_OK && ctl_msg_cert_answer(a.buf ? a.buf : "", a.len, &chain, &len, err,
						    sizeof(err)) == 0)
		took = tun_cert_take_floor(c->cfg.cert, chain, len,
					   c->cred.relay_id[0] ? c->cred.relay_id : NULL, wall_ms(),
					   certsched_floor(&c->cert), &t, err, sizeof(err));
	if (took == 0)
		res = CERTSCHED_OK;
	else if (took == TUN_CERT_SHORT)
		res = CERTSCHED_SHORT;
	free(chain);
	free(a.buf);
	free(body);
	free(csr);
	now = mono_ns();
	due = certsched_done(&c->cert, now / NS_PER_MS_, res, t.valid_for_ms, t.age_ms);
	pthread_mutex_lock(&c->st->lock);
	c->st->cert_requests[res]++;
	if (res == CERTSCHED_OK)
		c->st->cert_not_after = (uint64_t)t.not_after;
	pthread_mutex_unlock(&c->st->lock);
	due = due > now / NS_PER_MS_ ? due - now / NS_PER_MS_ : 0;
	if (res == CERTSCHED_OK && c->cfg.cert_taken)
		c->cfg.cert_taken(c->cfg.arg);
	if (res == CERTSCHED_OK) {
		tun_cert_name(c->cfg.cert, (int64_t)time(NULL), name);
		log_info("control: tunnel certificate for %s in force, %llu s left, renewed in "
			 "%.1f s",
			 name, (unsigned long long)(t.valid_for_ms / 1000), (double)due / 1000);
		ctl_log_changed(&c->log_cert, CTL_OK, 0, NULL);
	} else if (res == CERTSCHED_NOT_OFFERED) {
		if (ctl_log_changed(&c->log_cert, CTL_HTTP_ERROR, 0, "not offered"))
			log_info("control: the control plane offers no tunnel certificate (%s); "
				 "asking again in %.1f s",
				 err, (double)due / 1000);
	} else if (ctl_log_changed(&c->log_cert, r, 0, err)) {
		log_warnx("control: tunnel certificate request failed (%s); %s%s, next in %llu ms",
			  err, had ? "keeping the one in force for " : "no certificate yet",
			  had ? name : "", (unsigned long long)due);
	} else {
		log_debug("control: tunnel certificate request failed (%s)", err);
	}
}

static void *control_thread(void *arg)
{
	struct control *c = arg;

	if (gethostname(c->hostname, sizeof(c->hostname) - 1) < 0)
		snprintf(c->hostname, sizeof(c->hostname), "unknown");
	for (;;) {
		uint64_t next = c->sched.next, cert = UINT64_MAX;
		struct timespec until;
		bool stop;

		/* The certificate once enrolled, on its own schedule; a
		 * heartbeat due at the same time goes first. */
		if (c->enrolled && c->cfg.cert && c->cert.due <= UINT64_MAX / NS_PER_MS_)
			cert = c->cert.due * NS_PER_MS_;
		if (cert < next)
			next = cert;
		until = (struct timespec){.tv_sec = (time_t)(next / 1000000000ull),
					  .tv_nsec = (long)(next % 1000000000ull)};

		pthread_mutex_lock(&c->lock);
		while (!c->stop && mono_ns() < next)
			if (pthread_cond_timedwait(&c->wake, &c->lock, &until) == ETIMEDOUT)
				break;
		stop = c->stop;
		pthread_mutex_unlock(&c->lock);
		if (stop)
			break;
		if (!c->enrolled)
			enrol(c);
		else if (mono_ns() >= c->sched.next)
			heartbeat(c);
		else if (mono_ns() >= cert)
			cert_request(c);
	}
	return NULL;
}

/* Start */

/* The credential: the environment, else the state file, else the
 * bootstrap token to enrol with. */
static int credential_take(struct control *c, char *err, size_t errlen)
{
	size_t len;
	int rc;

	rc = secret_from_env("control", CONTROL_ENV_TOKEN, c->cred.api_token,
			     sizeof(c->cred.api_token), &len, err, errlen);
	if (rc != 0) {
		c->from_env = rc > 0;
		c->enrolled = rc > 0;
		return rc < 0 ? -1 : 0;
	}
	rc = state_read(c, err, errlen);
	if (rc != 0) {
		c->enrolled = rc > 0;
		return rc < 0 ? -1 : 0;
	}
	if (!c->cfg.bootstrap_file || !c->cfg.bootstrap_file[0]) {
		snprintf(err, errlen,
			 "control-url: no credential: set control-bootstrap-token-file to enrol "
			 "(or %s / %s_FILE), or put back %s",
			 CONTROL_ENV_TOKEN, CONTROL_ENV_TOKEN, c->state_path);
		return -1;
	}
	rc = secret_from_file("control", "control-bootstrap-token-file", c->cfg.bootstrap_file,
			      c->bootstrap, sizeof(c->bootstrap), &c->bootstrap_len, err, errlen);
	return rc < 0 ? -1 : 0;
}

static void control_free(struct control *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	if (c->dfd >= 0)
		close(c->dfd);
	pthread_cond_destroy(&c->wake);
	pthread_mutex_destroy(&c->lock);
	explicit_bzero(c, sizeof(*c));
	free(c);
}

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

int control_open(struct control **out, const struct control_config *cfg, char *err, size_t errlen)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_condattr_t ca;
	char host[256], shown[CONF_URL_MAX];
	struct control *c;
	unsigned lost;

	*out = NULL;
	/* curl_global_init is not thread-safe: here, before the thread. */
	pthread_once(&once, curl_init_once);
	if (!(c = calloc(1, sizeof(*c)))) {
		snprintf(err, errlen, "control: %s", strerror(errno));
		return -1;
	}
	c->cfg = *cfg;
	c->dfd = -1;
	c->st = cfg->stats;
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->wake, &ca);
	pthread_condattr_destroy(&ca);
	snprintf(c->state_path, sizeof(c->state_path), "%s/%s", cfg->state_dir, CONTROL_STATE_FILE);
	snprintf(c->routes_path, sizeof(c->routes_path), "%s/%s", cfg->state_dir,
		 CONTROL_ROUTES_FILE);
	if (ctl_state_dir_open(cfg->state_dir, &c->dfd, err, errlen) < 0)
		goto fail;
	if (credential_take(c, err, errlen) < 0)
		goto fail;
	if (!(c->curl = curl_easy_init())) {
		snprintf(err, errlen, "control: libcurl did not start");
		goto fail;
	}
	if (cfg->conf &&
	    (lost = ctl_upstream_from_conf(&c->upstream, cfg->conf, cfg->local, cfg->nlocal)))
		log_warnx("control: %u of the host's addresses and listeners past the route "
			  "check's lists (%u, %u) are not refused as such",
			  lost, CTL_UPSTREAM_HOST_MAX, CTL_UPSTREAM_LISTENERS_MAX);
	memset(c->st, 0, sizeof(*c->st));
	pthread_mutex_init(&c->st->lock, NULL);
	ctl_sched_init(&c->sched, cfg->interval_ms * NS_PER_MS_, cfg->backoff_min_ms * NS_PER_MS_,
		       cfg->backoff_max_ms * NS_PER_MS_, c->enrolled, mono_ns());
	if (cfg->cert) {
		/* The first request right after the first heartbeat. */
		certsched_init(&c->cert, mono_ns() / NS_PER_MS_);
		c->cert.retry_first = c->cert.retry = cfg->cert_retry_min_ms;
		c->cert.retry_max = cfg->cert_retry_max_ms;
		c->cert.not_offered = cfg->cert_not_offered_ms;
		c->st->cert_on = true;
	}
	publish(c, mono_ns());
	/* A password in the URL stays out of the log. */
	url_redact(cfg->url, shown, sizeof(shown));
	log_info("control: %s, %s", shown,
		 c->from_env   ? "credential from " CONTROL_ENV_TOKEN
		 : c->enrolled ? "enrolled (credential from the state directory)"
			       : "not enrolled yet: enrolling with the bootstrap token");
	if (ctl_url_cleartext_remote(cfg->url, host, sizeof(host)))
		log_warnx("control: control-url %s is http:// to %s, not a loopback address: "
			  "the bootstrap and API tokens and the route set cross the network in "
			  "clear, for anyone on the path to read and change; use https://",
			  shown, host);
	/* Before any listener accepts: they start with the last set. */
	routes_load(c);
	publish(c, mono_ns());
	*out = c;
	return 0;
fail:
	control_free(c);
	return -1;
}

int control_run(struct control *c)
{
	sigset_t all, old;
	int rc;

	/* Signals stay with the packet loop. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&c->thread, NULL, control_thread, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return -rc;
	c->started = true;
	return 0;
}

void control_stop(struct control *c)
{
	if (!c)
		return;
	if (c->started) {
		atomic_store(&c->stopping, true);
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_cond_signal(&c->wake);
		pthread_mutex_unlock(&c->lock);
		if (atomic_load(&c->enrolling))
			log_info("control: waiting for the enrolment under way (at most %llu ms): "
				 "its answer is the credential",
				 (unsigned long long)c->cfg.timeout_ms);
		pthread_join(c->thread, NULL);
	}
	control_free(c);
}
