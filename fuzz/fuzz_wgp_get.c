/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for wgpeers.c's reader of the userspace API's get=1
 * answer (what wireguard-go's socket says back). Bounds: at most cap
 * peers, at most WGP_ALLOWED_MAX allowed IPs each, prefixes within their
 * family. Round trip: the peers read (when no key repeats), planned
 * against nothing, written as set=1 requests, turned into a get answer
 * (the set lines a get does not show dropped) and read again, plan
 * nothing against the first reading: what the relay writes, it reads back
 * as unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "wgpeers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP 16

static struct wgp_peer peers[CAP], again[CAP], none[1];
static struct wgp_op ops[2 * CAP];
static char req[CAP * 2048], get[CAP * 2048 + 16];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wgp_device dev;
	size_t n, m, done, g = 0;
	int rc, nops, len;

	rc = wgp_uapi_parse_get((const char *)data, size, &dev, peers, CAP, &n);
	if (n > CAP)
		abort();
	for (size_t i = 0; i < n; i++) {
		if (peers[i].n_allowed > WGP_ALLOWED_MAX)
			abort();
		for (size_t j = 0; j < peers[i].n_allowed; j++) {
			const struct wgp_cidr *c = &peers[i].allowed[j];

			if (c->bits > (c->family == AF_INET ? 32 : 128))
				abort();
		}
	}
	if (rc != 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		peers[i].allowed_over = false; /* the tail was not kept: compare what was */
	nops = wgp_plan(none, 0, peers, n, ops, 2 * CAP);
	if (nops == -22)
		return 0; /* a key twice */
	if (nops != (int)n)
		abort();
	for (int off = 0; off < nops; off += (int)done) {
		len = wgp_uapi_set(req, sizeof(req), ops + off, (size_t)(nops - off), &done);
		if (len < 0 || done == 0)
			abort();
		/* set=1 and replace_allowed_ips=true are not in a get's answer. */
		for (char *l = req; l < req + len - 1;) {
			char *nl = memchr(l, '\n', (size_t)(req + len - l));
			size_t ll = (size_t)(nl - l) + 1;

			if (strncmp(l, "set=", 4) != 0 &&
			    strncmp(l, "replace_allowed_ips=", 20) != 0) {
				memcpy(get + g, l, ll);
				g += ll;
			}
			l = nl + 1;
		}
	}
	memcpy(get + g, "errno=0\n\n", 9);
	g += 9;
	if (wgp_uapi_parse_get(get, g, &dev, again, CAP, &m) != 0 || m != n)
		abort();
	if (wgp_plan(again, m, peers, n, ops, 2 * CAP) != 0)
		abort();
	return 0;
}
