/* SPDX-License-Identifier: ISC */
/* Test-only: reconcile a wireguard-go interface with a set of peers through
 * its userspace API socket, as the tunnel kind will (src/tun/wgpeers.c):
 * get=1, the plan, set=1 in requests of at most CHUNK bytes, errno read.
 * Prints "remove=R update=U add=A requests=N". With "device PORT", gives the
 * interface a new key pair and the port instead, and prints its public key.
 *   wgp_apply SOCKET CHUNK [KEY_B64,CIDR[,CIDR...][,psk=PSK_B64]]...
 *   wgp_apply SOCKET device PORT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "wgpeers.h"

#define PEERS_MAX 4096

static struct wgp_peer cur[PEERS_MAX], want[PEERS_MAX];
static struct wgp_op ops[2 * PEERS_MAX];
static char answer[4 << 20];

/* One request on a fresh connection (wireguard-go answers one per line
 * group; a connection per request keeps the reading simple). */
static int ask(const char *path, const char *req, size_t len, size_t *got)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0), rc = -1;

	*got = 0;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		goto out;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, req + off, len - off);

		if (w <= 0)
			goto out;
		off += (size_t)w;
	}
	/* The answer ends with an empty line. */
	while (*got < 2 || memcmp(answer + *got - 2, "\n\n", 2) != 0) {
		ssize_t r = read(fd, answer + *got, sizeof(answer) - *got);

		if (r <= 0)
			goto out;
		*got += (size_t)r;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

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
	static char req[1 << 20];
	struct wgp_device dev;
	size_t ncur, nwant = 0, got, done, chunk;
	int n, rc, count[3] = {0}, requests = 0;

	if (argc < 3)
		return 64;
	if (strcmp(argv[2], "device") == 0 && argc == 4) {
		uint8_t priv[WGP_KEY_LEN], pub[WGP_KEY_LEN];
		char b64[WGP_KEY_B64_LEN + 1];
		int len;

		if (wgp_keypair(priv, pub) != 0)
			return 1;
		len = wgp_uapi_device(req, sizeof(req), priv, (uint16_t)atoi(argv[3]));
		if (len < 0 || ask(argv[1], req, (size_t)len, &got) != 0 ||
		    wgp_uapi_errno(answer, got) != 0) {
			fprintf(stderr, "wgp_apply: device set failed\n");
			return 1;
		}
		wgp_key_to_b64(pub, b64);
		printf("%s\n", b64);
		return 0;
	}
	chunk = strtoul(argv[2], NULL, 10);
	if (chunk < 256 || chunk > sizeof(req))
		return 64;
	for (int i = 3; i < argc; i++) {
		if (nwant == PEERS_MAX || parse_peer(argv[i], &want[nwant++]) != 0) {
			fprintf(stderr, "wgp_apply: bad peer %s\n", argv[i]);
			return 64;
		}
	}
	if (ask(argv[1], "get=1\n\n", 7, &got) != 0) {
		perror("wgp_apply: get");
		return 1;
	}
	rc = wgp_uapi_parse_get(answer, got, &dev, cur, PEERS_MAX, &ncur);
	if (rc != 0) {
		fprintf(stderr, "wgp_apply: get answer: %s\n", strerror(-rc));
		return 1;
	}
	n = wgp_plan(cur, ncur, want, nwant, ops, sizeof(ops) / sizeof(ops[0]));
	if (n < 0) {
		fprintf(stderr, "wgp_apply: plan: %s\n", strerror(-n));
		return 1;
	}
	for (int i = 0; i < n; i++)
		count[ops[i].kind]++;
	for (size_t off = 0; off < (size_t)n; off += done) {
		int len = wgp_uapi_set(req, chunk, ops + off, (size_t)n - off, &done);

		if (len < 0 || ask(argv[1], req, (size_t)len, &got) != 0) {
			fprintf(stderr, "wgp_apply: set failed\n");
			return 1;
		}
		requests++;
		rc = wgp_uapi_errno(answer, got);
		if (rc != 0) {
			fprintf(stderr, "wgp_apply: set: errno %d\n", -rc);
			return 1;
		}
	}
	printf("remove=%d update=%d add=%d requests=%d\n", count[WGP_OP_REMOVE],
	       count[WGP_OP_UPDATE], count[WGP_OP_ADD], requests);
	return 0;
}
