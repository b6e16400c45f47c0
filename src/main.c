/* SPDX-License-Identifier: ISC */
/* etrelay: argv, resolve the game server, bind, pick a backend, run, and
 * leave with a flatline on SIGTERM or SIGINT. */
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "loop.h"
#include "relay.h"
#include "version.h"

static int resolve_upstream(const struct etr_conf *c, union etr_sockaddr *sa)
{
	struct addrinfo hints = { .ai_socktype = SOCK_DGRAM }, *res;
	char port[8];
	int err;

	snprintf(port, sizeof(port), "%u", c->upstream_port);
	err = getaddrinfo(c->upstream_host, port, &hints, &res);
	if (err) {
		log_warnx("--upstream %s: cannot resolve (%s)", c->upstream_host,
			  gai_strerror(err));
		return -1;
	}
	err = addr_from(sa, res->ai_addr, res->ai_addrlen) ? 0 : -1;
	freeaddrinfo(res);
	return err;
}

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

static int signals_fd(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

static void masters_str(const struct etr_conf *c, char *buf, size_t len)
{
	char hp[ADDR_HOSTLEN + 8];
	size_t o = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < c->nmasters && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? " " : "",
				      addr_hostport(c->masters[i].host, c->masters[i].port, hp));
}

int main(int argc, char **argv)
{
	struct etr_conf conf;
	union etr_sockaddr upstream;
	const struct loop_ops *ops;
	struct loop *loop = NULL;
	struct relay relay;
	struct loop_handler h;
	char err[512], why[256] = "", a[ADDR_STRLEN], b[ADDR_STRLEN], masters[1024];
	int rc, sig_fd;
	rlim_t nofile;

	conf_defaults(&conf);
	if (conf_parse_args(&conf, argc, argv, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return EXIT_USAGE;
	}
	if (conf.help) {
		fputs(conf_usage, stdout);
		return 0;
	}
	if (conf.version) {
		printf("etrelay %s\n", ETRELAY_VERSION);
		return 0;
	}
	log_init(conf.debug);

	nofile = raise_nofile();
	/* public + probe + resolver + signals + a margin for the loop itself */
	if ((rlim_t)conf.max_sessions + 16 > nofile) {
		log_warnx("--max-sessions %u needs %u file descriptors, the limit is %llu "
			  "(raise LimitNOFILE= or ulimit -n)",
			  conf.max_sessions, conf.max_sessions + 16, (unsigned long long)nofile);
		return EXIT_FAILURE;
	}
	if (resolve_upstream(&conf, &upstream) < 0)
		return EXIT_FAILURE;
	sig_fd = signals_fd();
	if (sig_fd < 0) {
		log_warn("signalfd");
		return EXIT_FAILURE;
	}
	if (relay_open(&relay, &conf, &upstream) < 0)
		return EXIT_FAILURE;

	h = relay_handler_template;
	h.arg = &relay;
	ops = conf.backend == CONF_BACKEND_EPOLL ? &loop_epoll_ops : &loop_uring_ops;
	rc = ops->create(&loop, &h, conf.max_sessions + 16, why, sizeof(why));
	if (rc < 0 && conf.backend == CONF_BACKEND_URING) {
		log_warnx("io_uring unavailable: %s", why);
		return EXIT_UNAVAILABLE;
	}
	if (rc < 0 && conf.backend == CONF_BACKEND_AUTO) {
		log_info("io_uring unavailable: %s; falling back to epoll", why);
		ops = &loop_epoll_ops;
		rc = ops->create(&loop, &h, conf.max_sessions + 16, why, sizeof(why));
	}
	if (rc < 0) {
		log_warnx("%s", why);
		return EXIT_FAILURE;
	}
	if ((rc = relay_attach(&relay, ops, loop, sig_fd)) < 0) {
		log_warnx("%s: registering sockets: %s", ops->name, strerror(-rc));
		return EXIT_FAILURE;
	}

	masters_str(&conf, masters, sizeof(masters));
	log_info("etrelay %s listening on %s, upstream %s, backend %s, game %s (%s/%s), masters %s",
		 ETRELAY_VERSION, addr_str(&conf.listen.sa, a), addr_str(&upstream.sa, b),
		 ops->name, conf.game, conf.heartbeat, conf.flatline[0] ? conf.flatline : "none",
		 masters);

	rc = ops->run(loop);
	if (rc < 0)
		log_warnx("%s loop: %s", ops->name, strerror(-rc));
	else if (relay.exit_signal)
		log_info("exiting on %s", sigabbrev_np(relay.exit_signal) ?
			 (snprintf(err, sizeof(err), "SIG%s", sigabbrev_np(relay.exit_signal)), err) :
			 "signal");
	relay_shutdown(&relay);
	relay_log_stats(&relay);
	ops->destroy(loop);
	relay_close(&relay);
	close(sig_fd);
	return rc < 0 ? EXIT_FAILURE : 0;
}
