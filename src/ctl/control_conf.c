/* SPDX-License-Identifier: ISC */
/* The control plane's keys: where it is, the credential's files, its
 * schedule and limits, the private blocks its routes may reach. */
#include "control_conf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "url.h"

static void control_defaults(struct etr_conf *c)
{
	strcpy(c->state_dir, CONF_STATE_DIR);
	c->control_interval_ms = CONF_CONTROL_INTERVAL;
	c->control_timeout_ms = CONF_CONTROL_TIMEOUT;
	c->control_backoff_min_ms = CONF_CONTROL_BACKOFF_MIN;
	c->control_backoff_max_ms = CONF_CONTROL_BACKOFF_MAX;
	c->control_max_answer = CONF_CONTROL_MAX_ANSWER;
	c->control_cert_retry_min_ms = CONF_CONTROL_CERT_RETRY_MIN;
	c->control_cert_retry_max_ms = CONF_CONTROL_CERT_RETRY_MAX;
	c->control_cert_not_offered_ms = CONF_CONTROL_CERT_NOT_OFFERED;
}

/* control-url: http:// or https://, visible ASCII; trailing '/' dropped so
 * the service paths join it with one. */
static const char *set_control_url(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct etr_conf *c = x->c;
	size_t n = strlen(v), hlen;
	const char *host;

	if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
		return "expected a URL starting with http:// or https://";
	if (n >= sizeof(c->control_url))
		return "URL too long";
	for (const char *s = v; *s; s++)
		if (*s <= 0x20 || *s >= 0x7f)
			return "expected a URL of visible ASCII characters";
	if (url_host(v, &host, &hlen) < 0)
		return "expected a host after http:// or https:// (a '[' closed by ']')";
	while (n > 8 && v[n - 1] == '/')
		n--;
	memcpy(c->control_url, v, n);
	c->control_url[n] = '\0';
	return NULL;
}

/* control-allow-upstream: a block, repeatable (a layer replaces the list
 * of the one before). */
static const char *set_control_allow(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct etr_conf *c = x->c;
	struct conf_cidr b;

	if (conf_cidr_parse(v, &b) < 0)
		return "expected an address or a CIDR block such as 10.8.0.0/16";
	if (conf_cidr_host_bits(&b, x->buf, x->n))
		return x->buf;
	if (conf_first(x))
		c->ncontrol_allow = 0;
	if (c->ncontrol_allow == CONF_CONTROL_ALLOW_MAX)
		return "too many blocks (at most " CONF_STR(CONF_CONTROL_ALLOW_MAX) ")";
	b.line = x->line;
	c->control_allow[c->ncontrol_allow++] = b;
	return NULL;
}

/* state-directory: absolute, as the credential's path is logged and the
 * daemon's working directory is no place to keep it. */
static const char *set_state_dir(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	if (v[0] != '/')
		return "expected an absolute path";
	return conf_set_path(x, k, v);
}

#define GK(field) offsetof(struct etr_conf, field)
#define DUR	  "expected a duration above 0 such as 30s, 500ms or 5m"
static const struct conf_key control_keys[] = {
    {"control-url", set_control_url},
    {"control-bootstrap-token-file", conf_set_path, 0, GK(control_bootstrap_file)},
    {"state-directory", set_state_dir, 0, GK(state_dir)},
    {"control-interval", conf_set_duration, 0, GK(control_interval_ms), 0, 0, DUR},
    {"control-timeout", conf_set_duration, 0, GK(control_timeout_ms), 0, 0, DUR},
    {"control-backoff-min", conf_set_duration, 0, GK(control_backoff_min_ms), 0, 0, DUR},
    {"control-backoff-max", conf_set_duration, 0, GK(control_backoff_max_ms), 0, 0, DUR},
    {"control-cert-retry-min", conf_set_duration, 0, GK(control_cert_retry_min_ms), 0, 0, DUR},
    {"control-cert-retry-max", conf_set_duration, 0, GK(control_cert_retry_max_ms), 0, 0, DUR},
    {"control-cert-not-offered", conf_set_duration, 0, GK(control_cert_not_offered_ms), 0, 0, DUR},
    {"control-max-answer", conf_set_bytes, 0, GK(control_max_answer), CONF_CONTROL_MAX_ANSWER_MIN,
     CONF_CONTROL_MAX_ANSWER_MAX, "expected a number of bytes from 4k to 64M, such as 2M"},
    {"control-allow-upstream", set_control_allow},
};

const struct conf_part control_conf_part = {
    .keys = control_keys,
    .nkeys = sizeof(control_keys) / sizeof(control_keys[0]),
    .defaults = control_defaults,
};

void control_conf_finish(struct etr_conf *c, struct conf_errors *e)
{
	char where[CONF_NAME_MAX + 300];

	if (c->control_backoff_min_ms > c->control_backoff_max_ms)
		conf_err(e, "%s: control-backoff-min %llu ms is above control-backoff-max %llu ms",
			 conf_key_origin(c, &c->base, "control-backoff-min", "control-backoff-max",
					 "etrelay", where, sizeof(where)),
			 (unsigned long long)c->control_backoff_min_ms,
			 (unsigned long long)c->control_backoff_max_ms);
	if (c->control_cert_retry_min_ms > c->control_cert_retry_max_ms)
		conf_err(e,
			 "%s: control-cert-retry-min %llu ms is above control-cert-retry-max %llu "
			 "ms",
			 conf_key_origin(c, &c->base, "control-cert-retry-min",
					 "control-cert-retry-max", "etrelay", where, sizeof(where)),
			 (unsigned long long)c->control_cert_retry_min_ms,
			 (unsigned long long)c->control_cert_retry_max_ms);
}

unsigned conf_control_warnings(const struct etr_conf *c, struct conf_errors *w)
{
	char o[CONF_PATH_MAX + 32], cred[CONF_PATH_MAX + sizeof(CONF_CONTROL_STATE_FILE) + 1];
	unsigned before = w->count;
	const char *f = c->control_bootstrap_file;

	if (!c->control_url[0])
		return 0;
	/* Legal: a slow answer only delays the next heartbeat to the tick after
	 * it (ticks are skipped, never bunched); but the control plane may well
	 * take the relay for gone meanwhile. */
	if (c->control_timeout_ms > c->control_interval_ms)
		conf_err(w,
			 "%s: warning: control-timeout %llu ms is above control-interval %llu ms: "
			 "a slow control plane delays heartbeats past their interval",
			 conf_key_where(c, "control-timeout", o, sizeof(o)),
			 (unsigned long long)c->control_timeout_ms,
			 (unsigned long long)c->control_interval_ms);
	for (unsigned i = 0; i < c->ncontrol_allow; i++) {
		const struct conf_cidr *b = &c->control_allow[i];

		if (b->bits != 0)
			continue;
		conf_err(w,
			 "%s: warning: control-allow-upstream %s/0 lets the control plane route "
			 "to every private network and link-local address (the cloud's metadata "
			 "service); list the tunnels your backends are in",
			 conf_line_where(c, b->line, o, sizeof(o)),
			 b->addr.sa.sa_family == AF_INET ? "0.0.0.0" : "::");
	}
	snprintf(cred, sizeof(cred), "%s/%s", c->state_dir, CONF_CONTROL_STATE_FILE);
	if (f[0] && access(f, F_OK) < 0) {
		int err = errno;

		if (access(cred, F_OK) == 0 || getenv(CONF_CONTROL_ENV_TOKEN) ||
		    getenv(CONF_CONTROL_ENV_TOKEN "_FILE"))
			return w->count - before;
		conf_err(w,
			 "%s: warning: control-bootstrap-token-file %s: %s, and there is no %s: "
			 "the start will fail",
			 conf_key_where(c, "control-bootstrap-token-file", o, sizeof(o)), f,
			 strerror(err), cred);
	}
	return w->count - before;
}
