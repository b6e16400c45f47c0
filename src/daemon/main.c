/* SPDX-License-Identifier: ISC */
/* etrelay: argv and the config file, resolve the game servers, check the
 * limits, then hand over to the daemon. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "conf_schema.h"
#include "config.h"
#include "daemon.h"
#include "kinds.h"
#include "log.h"
#include "ops.h"
#include "relay_kind.h"
#include "sni_kind.h"
#include "turn.h"
#include "version.h"

/* Every session holds a socket: take all the descriptors we are allowed. */
static rlim_t raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1024;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur;
}

/* The descriptors the configuration may hold at once, against the limit:
 * each listener kind named in the message (kinds.h), with the setting that
 * lowers it, so that an SNI-only or echo-only process is not told about
 * relays. */
static int check_nofile(const struct etr_conf *conf, rlim_t nofile)
{
	unsigned workers = daemon_workers_wanted(conf);
	uint64_t need, own, ops, part[KINDS];
	char parts[400], lower[128];
	size_t o = 0, l = 0;
	unsigned nknob = 0, knobs = 0;

	/* Each worker has its own public sockets, loop and control
	 * eventfd; a few more for the process (signalfd, logs). The ops
	 * plane's connections come out of the same limit: a full listener
	 * must not leave a session without its socket. */
	own = 16 + (uint64_t)workers * (conf->nrelays + 4);
	ops = conf->ops_enabled ? OPS_FDS_MAX : 0;
	need = own + ops;
	for (unsigned k = 0; k < KINDS; k++) {
		part[k] = kinds[k]->count(conf) ? kinds[k]->fds(conf, workers) : 0;
		need += part[k];
		knobs += part[k] && kinds[k]->fds_knob;
	}
	if (need <= nofile)
		return 0;
	parts[0] = lower[0] = '\0';
	for (unsigned k = 0; k < KINDS; k++) {
		if (!part[k])
			continue;
		if (o < sizeof(parts))
			o +=
			    (size_t)snprintf(parts + o, sizeof(parts) - o, "%llu for %s, ",
					     (unsigned long long)part[k], kinds[k]->fds_what(conf));
		if (kinds[k]->fds_knob && l < sizeof(lower)) {
			nknob++;
			l += (size_t)snprintf(lower + l, sizeof(lower) - l, "%s%s",
					      nknob == 1       ? ""
					      : nknob == knobs ? " or "
							       : ", ",
					      kinds[k]->fds_knob);
		}
	}
	if (ops && o < sizeof(parts))
		o += (size_t)snprintf(parts + o, sizeof(parts) - o, "%llu for the ops plane, ",
				      (unsigned long long)ops);
	if (o < sizeof(parts))
		snprintf(parts + o, sizeof(parts) - o, "%llu for the workers' own",
			 (unsigned long long)own);
	log_warnx("the configuration needs %llu file descriptors (%s), the limit is %llu: raise "
		  "LimitNOFILE= (systemd) or ulimit -n%s%s%s",
		  (unsigned long long)need, parts, (unsigned long long)nofile,
		  lower[0] ? ", or lower " : "", lower,
		  part[KIND_TURN] && strstr(kinds[KIND_TURN]->fds_what(conf), "TCP")
		      ? ", or lower the TURN tcp-max-connections"
		      : "");
	return -1;
}

/* Parse argv and the file; returns 0 or the exit status. */
static int configure(struct etr_conf *c, int argc, char **argv)
{
	struct conf_errors e = {.len = 0};
	char *text = NULL;
	size_t len = 0;
	int rc = 0;

	if (conf_parse_args(c, argc, argv, &e) < 0) {
		fputs(e.text, stderr);
		return EXIT_USAGE;
	}
	if (c->help || c->version)
		return 0;
	/* The default file is read when the command line names no listener:
	 * `etrelay --upstream ...` alone never picks up /etc. */
	if (!c->path_given && !c->cli_upstream && !c->cli_listener)
		c->path = CONF_DEFAULT_PATH;
	if (c->path) {
		text = conf_read_file(c->path, &len);
		if (!text) {
			fprintf(stderr, "etrelay: %s: %s%s\n", c->path, strerror(errno),
				c->path_given ? "" : " (give --upstream HOST:PORT, or -c FILE)");
			return c->path_given || c->test ? EXIT_CONFIG : EXIT_USAGE;
		}
		if (conf_load(c, text, len, c->path, &e) < 0)
			rc = EXIT_CONFIG;
		free(text);
	}
	if (conf_finish(c, &e) < 0 && rc == 0)
		rc = c->path ? EXIT_CONFIG : EXIT_USAGE;
	if (rc)
		fputs(e.text, stderr);
	return rc;
}

int main(int argc, char **argv)
{
	static struct etr_conf conf;
	static struct daemon d;
	void *resolved[KINDS] = {NULL};
	char err[512];
	rlim_t nofile;
	bool nofile_ok;
	int rc;

	conf_defaults(&conf, &etr_conf_schema);
	if ((rc = configure(&conf, argc, argv)) != 0)
		return rc;
	if (conf.help) {
		fputs(conf_usage, stdout);
		return 0;
	}
	if (conf.version) {
		printf("etrelay %s\n", ETRELAY_VERSION);
		return 0;
	}
	log_init(conf.debug, conf.log_time == CONF_LOG_TIME_YES	 ? LOG_TIME_YES
			     : conf.log_time == CONF_LOG_TIME_NO ? LOG_TIME_NO
								 : LOG_TIME_AUTO);
	if (conf.ops_enabled && ops_tokens_check(err, sizeof(err)) < 0) {
		log_warnx("ops plane: %s", err);
		return EXIT_CONFIG;
	}
	if (sni_kind_loops(&conf, NULL) < 0 || relay_kind_loops(&conf, NULL) < 0)
		return EXIT_CONFIG;
	if (conf.nturn) {
		struct turn_secret_set *s = malloc(sizeof(*s));

		if (!s || turn_secrets_read(s, err, sizeof(err)) < 0) {
			log_warnx("turn: %s", s ? err : "out of memory");
			free(s);
			return EXIT_CONFIG;
		}
		explicit_bzero(s, sizeof(*s));
		free(s);
	}
	{
		struct conf_errors w = {.len = 0};

		/* -t prints them with the check; a start logs them. */
		unsigned n = conf_warnings(&conf, &w);

		if (n && conf.test)
			fputs(w.text, stderr);
		else
			for (char *l = w.text, *nl; *l; l = nl + 1) {
				nl = strchr(l, '\n');
				*nl = '\0';
				log_warnx("%s", l);
			}
	}
	/* -t refuses what a start under this hard limit refuses: a "valid"
	 * the start then contradicts is worse than a refusal that names the
	 * unit's setting (the service's limit is its LimitNOFILE=, not this
	 * shell's). */
	nofile = raise_nofile();
	nofile_ok = check_nofile(&conf, nofile) == 0;
	if (!nofile_ok && !conf.test)
		return EXIT_CONFIG;
	if (!nofile_ok)
		log_warnx("-t: refused, as a start under this limit (%llu) refuses it; "
			  "the service's limit is its unit's LimitNOFILE=: raise that",
			  (unsigned long long)nofile);
	if (conf.test)
		return check_run(&conf, nofile_ok);
	/* What each kind opens its listeners with (kind_env.resolved). */
	for (unsigned k = 0; k < KINDS && rc == 0; k++)
		if (kinds[k]->resolve && kinds[k]->count(&conf))
			rc = kinds[k]->resolve(&conf, &resolved[k]);
	if (rc != 0)
		goto out;
	rc = daemon_open(&d, &conf, (const void *const *)resolved);
	if (rc == 0)
		rc = daemon_run(&d);
	daemon_close(&d);
out:
	for (unsigned k = 0; k < KINDS; k++)
		if (resolved[k])
			kinds[k]->resolved_free(resolved[k]);
	return rc;
}
