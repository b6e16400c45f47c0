/* SPDX-License-Identifier: ISC */
/* Test-only: reconcile a WireGuard interface with a set of peers through
 * src/tun/wgdev.c, the way the tunnel reaches it: wireguard-go's socket in
 * DIR when there is one, else the kernel's generic netlink family (run it
 * in the interface's namespace then). Set requests of at most CHUNK bytes.
 * Prints "remove=R update=U add=A requests=N way=uapi|kernel us=T" (T: the
 * reconcile's microseconds: get, plan and sets). With
 * "device PORT", gives the interface a new key pair and the port instead,
 * and prints its public key; with "address ADDR/PREFIX", gives the
 * interface that address and brings it up; with "create", creates a
 * kernel interface (exit 77 where the kernel has no WireGuard).
 *   wgp_apply DIR IFNAME CHUNK [KEY_B64,CIDR[,CIDR...][,psk=PSK_B64]]...
 *   wgp_apply DIR IFNAME device PORT
 *   wgp_apply DIR IFNAME address ADDR/PREFIX
 *   wgp_apply DIR IFNAME create */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wgdev.h"

#define PEERS_MAX 4096

static struct wgp_peer cur[PEERS_MAX], want[PEERS_MAX];
static struct wgp_op ops[2 * PEERS_MAX];

static int parse_peer(char *arg, struct wgp_peer *p)
{
	char *tok = strtok(arg, ",");

	memset(p, 0, sizeof(*p));
	if (!tok || !wgp_key_from_b64(tok, strlen(tok), p->key))
		return -1;
	while ((tok = strtok(NULL, ",")) != NULL) {
		if (strncmp(tok, "psk=", 4) == 0) {
			if (!wgp_key_from_b64(tok + 4, strlen(tok + 4), p->psk))
				return -1;
		} else if (p->n_allowed == WGP_ALLOWED_MAX ||
			   wgp_cidr_parse(tok, strlen(tok), &p->allowed[p->n_allowed++]) != 0) {
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct wgdev d;
	struct wgdev_result r;
	struct timespec t0, t1;
	size_t nwant = 0;
	int rc;

	if (argc < 4)
		return 64;
	if (strcmp(argv[3], "create") == 0) {
		rc = wgdev_create(argv[2], 2000);
		if (rc != 0)
			fprintf(stderr, "wgp_apply: create %s: %s\n", argv[2], strerror(-rc));
		return rc == -EOPNOTSUPP ? 77 : rc != 0;
	}
	if (strcmp(argv[3], "address") == 0 && argc == 5) {
		uint8_t a[16];
		char *slash = strchr(argv[4], '/');
		int fam = strchr(argv[4], ':') ? AF_INET6 : AF_INET;

		if (!slash)
			return 64;
		*slash = '\0';
		if (inet_pton(fam, argv[4], a) != 1)
			return 64;
		rc = wgdev_address(argv[2], fam, a, (unsigned)atoi(slash + 1), 2000);
		if (rc != 0)
			fprintf(stderr, "wgp_apply: address: %s\n", strerror(-rc));
		return rc != 0;
	}
	rc = wgdev_open(&d, argv[2], argv[1]);
	if (rc != 0) {
		fprintf(stderr, "wgp_apply: %s: %s\n", argv[2], strerror(-rc));
		return rc == -ENODEV ? 77 : 1;
	}
	if (strcmp(argv[3], "device") == 0 && argc == 5) {
		uint8_t priv[WGP_KEY_LEN], pub[WGP_KEY_LEN];
		char b64[WGP_KEY_B64_LEN + 1];

		if (wgp_keypair(priv, pub) != 0)
			return 1;
		rc = wgdev_set_device(&d, priv, (uint16_t)atoi(argv[4]));
		if (rc != 0) {
			fprintf(stderr, "wgp_apply: device set: %s\n", strerror(-rc));
			return 1;
		}
		wgp_key_to_b64(pub, b64);
		printf("%s\n", b64);
		wgdev_close(&d);
		return 0;
	}
	d.max_req = strtoul(argv[3], NULL, 10);
	if (d.max_req < 256 || d.max_req > (1u << 20))
		return 64;
	for (int i = 4; i < argc; i++) {
		if (nwant == PEERS_MAX || parse_peer(argv[i], &want[nwant++]) != 0) {
			fprintf(stderr, "wgp_apply: bad peer %s\n", argv[i]);
			return 64;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = wgdev_reconcile(&d, want, nwant, cur, PEERS_MAX, ops, &r);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc != 0) {
		fprintf(stderr, "wgp_apply: reconcile: %s (%u requests)\n", strerror(-rc),
			r.requests);
		return 1;
	}
	printf("remove=%u update=%u add=%u requests=%u way=%s us=%lld\n", r.removed, r.updated,
	       r.added, r.requests, d.way == WGDEV_KERNEL ? "kernel" : "uapi",
	       (long long)(t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
	wgdev_close(&d);
	return 0;
}
