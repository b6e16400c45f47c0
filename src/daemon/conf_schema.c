/* SPDX-License-Identifier: ISC */
/* The schema of the configuration: each kind's part, in the order --help
 * shows them, the checks conf_finish runs in their order, and -t's
 * warnings; and the process-wide keys, which belong to no kind. */
#include "conf_schema.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control_conf.h"
#include "ops_conf.h"
#include "prbe_conf.h"
#include "relay_conf.h"
#include "sni_conf.h"
#include "tun_conf.h"
#include "turn_conf.h"

static const char *set_backend(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct etr_conf *c = x->c;

	if (strcmp(v, "auto") == 0)
		c->backend = CONF_BACKEND_AUTO;
	else if (strcmp(v, "io_uring") == 0)
		c->backend = CONF_BACKEND_URING;
	else if (strcmp(v, "epoll") == 0)
		c->backend = CONF_BACKEND_EPOLL;
	else
		return "expected auto, io_uring or epoll";
	return NULL;
}

static const char *set_workers(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	unsigned long n;
	char *end;

	if (strcmp(v, "auto") == 0) {
		x->c->workers = CONF_WORKERS_AUTO;
		return NULL;
	}
	errno = 0;
	n = strtoul(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || n < 1 || n > CONF_WORKERS_MAX)
		return "expected auto or a number from 1 to " CONF_STR(CONF_WORKERS_MAX);
	x->c->workers = (unsigned)n;
	return NULL;
}

static const char *set_log_time(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	bool b;

	if (strcmp(v, "auto") == 0)
		x->c->log_time = CONF_LOG_TIME_AUTO;
	else if (conf_parse_bool(v, &b) == 0)
		x->c->log_time = b ? CONF_LOG_TIME_YES : CONF_LOG_TIME_NO;
	else
		return "expected yes, no or auto";
	return NULL;
}

/* xdp-interface: an interface name, repeatable (a layer replaces the list
 * it inherited). Whether it exists is the start's and -t's check. */
static const char *set_xdp_interface(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	struct conf_xdp *xdp = &x->c->xdp;
	size_t len = strlen(v);

	if (len == 0 || len >= CONF_XDP_IFNAME || strcmp(v, ".") == 0 || strcmp(v, "..") == 0 ||
	    strpbrk(v, "/: \t"))
		return "expected an interface name such as eth0 (at most 15 characters)";
	if (conf_first(x))
		xdp->n = 0;
	for (unsigned i = 0; i < xdp->n; i++)
		if (strcmp(xdp->iface[i], v) == 0)
			return "interface given twice";
	if (xdp->n == CONF_XDP_IFACES_MAX)
		return "too many interfaces (at most " CONF_STR(CONF_XDP_IFACES_MAX) ")";
	memcpy(xdp->iface[xdp->n], v, len + 1);
	xdp->line[xdp->n++] = x->line;
	return NULL;
}

#define GK(field) offsetof(struct etr_conf, field)
#define XDP	  "expected a number of packets from 1 to 1000000"
static const struct conf_key process_keys[] = {
    {"ban-file", conf_set_path, 0, GK(ban_file)},
    {"backend", set_backend},
    {"gso", conf_set_bool, 0, GK(gso)},
    {"workers", set_workers},
    {"drain-timeout", conf_set_duration, CONF_ZERO, GK(drain_timeout_ms), 0, 0,
     "expected a duration such as 0, 30s or 5m"},
    {"debug", conf_set_bool, CONF_FLAG, GK(debug)},
    {"log-time", set_log_time},
    {"xdp-interface", set_xdp_interface},
    {"xdp-rate", conf_set_u32, 0, GK(xdp.rate), 1, 1000000, XDP},
    {"xdp-burst", conf_set_u32, 0, GK(xdp.burst), 1, 1000000, XDP},
};
_Static_assert(sizeof(((struct etr_conf *)0)->ban_file) == CONF_PATH_MAX, "ban-file's room");

static void process_defaults(struct etr_conf *c)
{
	c->backend = CONF_BACKEND_AUTO;
	c->gso = true;
	c->log_time = CONF_LOG_TIME;
	c->xdp.rate = CONF_XDP_RATE;
	c->xdp.burst = CONF_XDP_BURST;
}

static const struct conf_part process_conf_part = {
    .keys = process_keys,
    .nkeys = sizeof(process_keys) / sizeof(process_keys[0]),
    .defaults = process_defaults,
};

static const struct conf_part *const parts[] = {
    &relay_conf_part, &prbe_conf_part,	  &sni_conf_part,
    &turn_conf_part,  &tun_conf_part,	  &control_conf_part,
    &ops_conf_part,   &process_conf_part, NULL,
};

/* In this order, so that -t's errors come as they always did. */
static const conf_finish_fn finish[] = {
    tun_conf_take,
    sni_conf_finish,
    control_conf_finish,
    relay_conf_finish,
    conf_prbe_ports,
    turn_conf_finish,
    conf_tcp_clash,
    conf_session_ports_clash,
    ops_conf_finish,
    tun_conf_finish,
    NULL,
};

static const conf_warn_fn warn[] = {
    conf_sni_warnings, conf_turn_warnings, conf_control_warnings, conf_master_warnings, NULL,
};

const struct conf_schema etr_conf_schema = {parts, finish, warn};

/* clang-format off */
#define CONF_USAGE_INTRO \
	"usage: etrelay --upstream HOST:PORT [options]\n" \
	"       etrelay [-c FILE] [-t [--probe]] [options]\n" \
	"\n" \
	"Relay a game server's UDP port from this host and send its master-server\n" \
	"heartbeats from here, so masters list this host's address.\n" \
	"\n"
/* clang-format on */

/* clang-format off */
#define PROCESS_CONF_USAGE \
	"\n" \
	"Process options:\n" \
	"  --backend auto|io_uring|epoll\n" \
	"                            event loop (auto: io_uring, else epoll)\n" \
	"  --gso yes|no              send runs of datagrams to one destination as one\n" \
	"                            UDP GSO train (yes; needs Linux 4.18)\n" \
	"  --workers N|auto          packet loops, one thread each, 1 to " CONF_STR(CONF_WORKERS_MAX) "; a\n" \
	"                            client's address picks its worker (auto: the CPUs\n" \
	"                            the process may run on, at most " CONF_STR(CONF_WORKERS_MAX) ")\n" \
	"  --ops-listen ADDR:PORT    HTTP health, lifecycle and metrics (default off)\n" \
	"  --ops-allow-public        let --ops-listen bind a public address\n" \
	"  --drain-timeout DUR       on SIGTERM, wait this long for sessions to end (0)\n" \
	"  --ban-file FILE           IPs and CIDRs refused on every listener, one per line\n" \
	"                            (reread on SIGHUP)\n" \
	"  --xdp-interface IFACE     drop floods to the UDP listeners in an XDP program\n" \
	"                            on IFACE, repeatable (needs CAP_BPF, CAP_NET_ADMIN)\n" \
	"  --xdp-rate N              ... packets a second per source it does not know\n" \
	"                            (an IPv4 address, an IPv6 /64) (" CONF_STR(CONF_XDP_RDEF) ")\n" \
	"  --xdp-burst N             ... and at once (" CONF_STR(CONF_XDP_BHELP) ")\n" \
	"  --debug                   log heartbeats, sessions and connectionless packets\n" \
	"                            (a refused one with the reason)\n" \
	"  --log-time yes|no|auto    start log lines with the ISO 8601 time (auto: unless\n" \
	"                            stderr is the journal)\n" \
	"  -c, --config FILE         config file (default " CONF_DEFAULT_PATH " when\n" \
	"                            no --upstream, --sni-listen, --turn-listen,\n" \
	"                            --prbe-listen or --wg-interface is given)\n" \
	"  -t, --test                check the configuration and exit (0 valid, 78 not)\n" \
	"  --probe                   with -t: also resolve masters (to an address the\n" \
	"                            listener can reach), probe game servers, resolve\n" \
	"                            and connect to SNI route upstreams (exit 1 if any\n" \
	"                            of that fails)\n" \
	"  -h, --help                this text\n" \
	"  -V, --version             print the version\n" \
	"\n" \
	"DUR is a number of seconds or a number with ms, s, m or h.\n" \
	"Tokens for the ops plane come from ETRELAY_LIFECYCLE_TOKEN,\n" \
	"ETRELAY_LIFECYCLE_READ_TOKEN and ETRELAY_METRICS_TOKEN (or their _FILE forms,\n" \
	"mode 600 or 640); without any, /lifecycle and /sessions are open. The ops\n" \
	"listener takes 64 connections, 8 per address, 5 s per request.\n" \
	"ETRELAY_CONTROL_TOKEN (or ETRELAY_CONTROL_TOKEN_FILE) gives the control\n" \
	"plane's credential and skips enrolment.\n" \
	"\n" \
	"Exit status:\n" \
	"  0   stopped by SIGTERM or SIGINT; --help, --version; -t, configuration valid\n" \
	"  1   startup failed or the event loop failed; -t --probe found a failure\n" \
	"  64  usage error\n" \
	"  69  --backend io_uring, and io_uring is not available\n" \
	"  78  the configuration is invalid\n"
/* clang-format on */

const char conf_usage[] = CONF_USAGE_INTRO RELAY_CONF_USAGE PRBE_CONF_USAGE SNI_CONF_USAGE
    TURN_CONF_USAGE TUN_CONF_USAGE CONTROL_CONF_USAGE PROCESS_CONF_USAGE;
