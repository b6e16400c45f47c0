/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for wgnl.c's reader of the kernel's answer to a
 * WireGuard get (generic netlink, one datagram of the dump). Bounds: at
 * most cap peers, at most WGP_ALLOWED_MAX allowed IPs each, prefixes
 * within their family. Round trip: the peers read (when no key repeats)
 * planned against nothing, written as set messages, read again and
 * planned against the first reading: nothing to do. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "wgnl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP 16

static struct wgp_peer peers[CAP], again[CAP], none[1];
static struct wgp_op ops[2 * CAP];
static _Alignas(4) uint8_t in[1 << 16], msg[CAP * WGNL_MSG_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wgp_device dev = {0};
	struct wgnl_get g = {.dev = &dev, .peers = peers, .cap = CAP};
	size_t done, len = 0;
	int rc, nops;

	if (size > sizeof(in))
		return 0;
	memcpy(in, data, size); /* netlink's buffers are aligned */
	rc = wgnl_get_parse(&g, in, size, 1);
	if (g.n > CAP)
		abort();
	for (size_t i = 0; i < g.n; i++) {
		if (peers[i].n_allowed > WGP_ALLOWED_MAX)
			abort();
		for (size_t j = 0; j < peers[i].n_allowed; j++) {
			const struct wgp_cidr *c = &peers[i].allowed[j];

			if (c->bits > (c->family == AF_INET ? 32 : 128))
				abort();
		}
	}
	if (rc != 0 || g.over)
		return 0;
	for (size_t i = 0; i < g.n; i++)
		peers[i].allowed_over = false;
	nops = wgp_plan(none, 0, peers, g.n, ops, 2 * CAP);
	if (nops == -22)
		return 0; /* a key twice (not joined: not next to each other) */
	if (nops != (int)g.n)
		abort();
	for (int off = 0; off < nops; off += (int)done) {
		int n = wgnl_set_request(msg + len, WGNL_MSG_MAX, 0x1d, 1, "wg0", ops + off,
					 (size_t)(nops - off), &done);

		if (n < 0 || done == 0)
			abort();
		len += (size_t)n;
	}
	g = (struct wgnl_get){.dev = &dev, .peers = again, .cap = CAP};
	if (wgnl_get_parse(&g, msg, len, 1) != 0 || g.n != (size_t)nops)
		abort();
	if (wgp_plan(again, g.n, peers, (size_t)nops, ops, 2 * CAP) != 0)
		abort();
	return 0;
}
