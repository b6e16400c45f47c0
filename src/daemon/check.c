/* SPDX-License-Identifier: ISC */
/* The configuration check. Blocking I/O is fine here: no packet loop runs. */
#include "check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "addrclass.h"
#include "banlist.h"
#include "daemon.h"
#include "kinds.h"
#include "log.h"
#include "loop.h"
#include "net.h"
#include "ops.h"
#include "secret.h"
#include "q3proto.h"
#include "resolver.h"
#include "tls_reload.h"
#include "turn.h"
#include "xdp.h"

/* The ban file must load whole, as at startup. */
static int check_bans(const struct etr_conf *c)
{
	struct banlist b = {0};
	char err[4096] = "";
	int rc;

	if (c->ban_file[0] == '\0')
		return 0;
	rc = banlist_load_file(&b, c->ban_file, err, sizeof(err));
	if (rc < 0 && rc != -ENOMEM)
		fprintf(stderr, "etrelay: %s\n", err);
	else if (rc != 0)
		fprintf(stderr, "%s%s", err, err[0] && err[strlen(err) - 1] != '\n' ? "\n" : "");
	else
		printf("ban-file %s: %zu entries\n", c->ban_file, b.entries);
	banlist_free(&b);
	return rc != 0 ? EXIT_CONFIG : 0;
}

/* The XDP interfaces must exist, as at startup (whether the program
 * loads and attaches is the host's: a start without it runs without). */
static int check_xdp(const struct etr_conf *c)
{
	char err[256];
	uint32_t rate, burst, brate, bburst;

	xdp_rates(c, &rate, &burst);
	xdp_budget(c, &brate, &bburst);
	if (xdp_check(c, err, sizeof(err)) < 0) {
		fprintf(stderr, "etrelay: %s\n", err);
		return EXIT_CONFIG;
	}
	for (unsigned i = 0; i < c->xdp.n; i++)
		printf("xdp-interface %s: %u packets/s per source, %u at once%s; from sources not "
		       "known %u/s, %u at once, per CPU\n",
		       c->xdp.iface[i], rate, burst,
		       c->xdp.rate && c->xdp.burst ? ""
						   : " (from the listeners' per-source limits)",
		       brate, bburst);
	return 0;
}

/* The control-plane credential a start would take, read and checked by
 * the functions the start calls (secret_from_env, secret_from_file:
 * the ops tokens' rules for mode and length): the variable, else (without
 * a credential file in state-dir) the bootstrap token file. A missing
 * bootstrap file is conf_control_warnings' warning. */
static int check_control_credential(const struct etr_conf *c)
{
	char tok[1024], err[512], cred[CONF_PATH_MAX + sizeof(CONF_CONTROL_STATE_FILE) + 1];
	const char *f = c->control_bootstrap_file;
	size_t len;
	int rc;

	if (!c->control_url[0])
		return 0;
	rc = secret_from_env("control", CONF_CONTROL_ENV_TOKEN, tok, sizeof(tok), &len, err,
			     sizeof(err));
	if (rc == 0) {
		snprintf(cred, sizeof(cred), "%s/%s", c->state_dir, CONF_CONTROL_STATE_FILE);
		if (!f[0] || access(cred, F_OK) == 0 || access(f, F_OK) < 0)
			return 0;
		rc = secret_from_file("control", "control-bootstrap-token-file", f, tok,
				      sizeof(tok), &len, err, sizeof(err));
	}
	explicit_bzero(tok, sizeof(tok));
	if (rc >= 0)
		return 0;
	log_warnx("%s", err);
	return EXIT_CONFIG;
}

/* A warning for a listen address that is not this host's (EADDRNOTAVAIL
 * on a bind to it, port 0): a start here exits 1 on it, but -t may check
 * a file for another host. */
static void warn_not_local(const char *what, const union etr_sockaddr *listen)
{
	union etr_sockaddr a = *listen;
	char s[ADDR_STRLEN];
	int fd = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	a.in.sin_port = 0; /* the same offset in both families */
	if (bind(fd, &a.sa, addr_len(&a)) < 0 && errno == EADDRNOTAVAIL)
		fprintf(stderr,
			"etrelay: warning: %s: listen %s: not an address of this host (a start "
			"on this host exits 1 on it)\n",
			what, addr_str(&listen->sa, s));
	close(fd);
}

static void warn_listen(void *arg, const struct conf_listen *l)
{
	char what[CONF_NAME_MAX + 32];

	(void)arg;
	snprintf(what, sizeof(what), "%s%s%s", l->key, l->name[0] ? " " : "", l->name);
	warn_not_local(what, l->addr);
}

static void warn_listens(const struct etr_conf *c)
{
	conf_each_listen(c, warn_listen, NULL);
}

int check_run(const struct etr_conf *c, bool nofile_ok)
{
	int bad = check_bans(c);

	warn_listens(c);
	if (bad)
		return bad;
	if ((bad = check_xdp(c)) != 0)
		return bad;
	if ((bad = check_control_credential(c)) != 0)
		return bad;
	for (unsigned k = 0; k < KINDS; k++)
		if (kinds[k]->check && kinds[k]->count(c) &&
		    (bad = kinds[k]->check(c, daemon_workers_wanted(c))) != 0)
			return bad;
	if (!nofile_ok)
		return EXIT_CONFIG;

	for (unsigned k = 0; k < KINDS; k++)
		if (kinds[k]->report)
			kinds[k]->report(c);
	printf("etrelay: configuration %s is valid (", c->path ? c->path : "(command line)");
	for (unsigned k = 0, said = 0; k < KINDS; k++) {
		unsigned n = kinds[k]->count(c);

		if (n || kinds[k]->summary_always)
			printf("%s%u %s", said++ ? ", " : "", n,
			       n == 1 ? kinds[k]->summary_one : kinds[k]->summary_many);
	}
	printf(")\n");
	if (!c->probe)
		return 0;
	for (unsigned k = 0; k < KINDS; k++)
		if (kinds[k]->probe && kinds[k]->count(c))
			bad |= kinds[k]->probe(c);
	printf("etrelay: probe %s\n", bad ? "FAILED" : "ok");
	return bad ? 1 : 0;
}
