/* SPDX-License-Identifier: ISC */
/* The WireGuard interface's two ways: the userspace API text over a Unix
 * socket (one connection per request, as wg(8) does) and generic netlink
 * datagrams. Every wait is bounded by SO_RCVTIMEO/SO_SNDTIMEO. */
#include "wgdev.h"

#include <errno.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "nlmsg.h"
#include "rtnl.h"

/* The largest answer to a get taken from wireguard-go: about 400 bytes a
 * peer, so room for tens of thousands. */
#define WGDEV_ANSWER_MAX (64u << 20)

static void set_timeouts(int fd, int ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* A timed-out socket call says EAGAIN: say what it was. */
static int sock_err(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
}

/* userspace API */

/* One request on a fresh connection; the answer (up to and with its empty
 * line) in d->ans, its length in *got. */
static int uapi_ask(struct wgdev *d, const char *req, size_t len, size_t *got)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, rc = 0;

	*got = 0;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	set_timeouts(fd, d->timeout_ms);
	memcpy(sa.sun_path, d->sock, sizeof(sa.sun_path));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = sock_err();
		goto out;
	}
	for (size_t off = 0; off < len;) {
		ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);

		if (w < 0) {
			rc = sock_err();
			goto out;
		}
		off += (size_t)w;
	}
	while (*got < 2 || memcmp(d->ans + *got - 2, "\n\n", 2) != 0) {
		ssize_t r;

		if (*got == d->ans_cap) {
			size_t ncap = d->ans_cap ? d->ans_cap * 2 : 65536;
			char *n;

			if (ncap > WGDEV_ANSWER_MAX || !(n = realloc(d->ans, ncap))) {
				rc = -E2BIG;
				goto out;
			}
			d->ans = n;
			d->ans_cap = ncap;
		}
		r = recv(fd, d->ans + *got, d->ans_cap - *got, 0);
		if (r <= 0) {
			rc = r == 0 ? -EPROTO : sock_err();
			goto out;
		}
		*got += (size_t)r;
	}
out:
	close(fd);
	return rc;
}

/* The first request's buffer: a set's text, at most max_req bytes. */
static int uapi_set(struct wgdev *d, const char *req, size_t len)
{
	size_t got;
	int rc = uapi_ask(d, req, len, &got);

	return rc ? rc : wgp_uapi_errno(d->ans, got);
}

/* generic netlink */

static int nl_open(struct wgdev *d)
{
	_Alignas(4) uint8_t buf[WGNL_MSG_MAX];
	int len, rc;
	ssize_t r;

	d->nl = nl_socket(NETLINK_GENERIC, d->timeout_ms);
	if (d->nl < 0)
		return d->nl;
	len = wgnl_family_request(buf, sizeof(buf), ++d->seq);
	if (len < 0)
		return len;
	if ((rc = nl_send(d->nl, buf, (size_t)len)) != 0)
		return rc;
	if ((r = nl_recv(d->nl, buf, sizeof(buf))) < 0)
		return (int)r;
	rc = wgnl_family_parse(buf, (size_t)r);
	if (rc == -ENOENT)
		return -ENODEV;
	if (rc < 0)
		return rc;
	d->family = (uint16_t)rc;
	return 0;
}

int wgdev_open(struct wgdev *d, const char *ifname, const char *uapi_dir)
{
	struct stat st;
	int n, rc;

	memset(d, 0, sizeof(*d));
	d->nl = -1;
	d->timeout_ms = 2000;
	d->max_req = WGNL_MSG_MAX;
	if (strnlen(ifname, WGNL_IFNAME_MAX + 1) > WGNL_IFNAME_MAX || !ifname[0] ||
	    strchr(ifname, '/') || strcmp(ifname, ".") == 0 || strcmp(ifname, "..") == 0)
		return -EINVAL;
	memcpy(d->ifname, ifname, strlen(ifname) + 1);
	n = snprintf(d->sock, sizeof(d->sock), "%s/%s.sock", uapi_dir ? uapi_dir : WGDEV_UAPI_DIR,
		     ifname);
	if (n < 0 || (size_t)n >= sizeof(d->sock))
		return -ENAMETOOLONG;
	if (stat(d->sock, &st) == 0 && S_ISSOCK(st.st_mode)) {
		d->way = WGDEV_UAPI;
		return 0;
	}
	d->way = WGDEV_KERNEL;
	rc = nl_open(d);
	if (rc != 0) {
		wgdev_close(d);
		d->nl = -1;
	}
	return rc;
}

static int nl_get(struct wgdev *d, struct wgp_device *dev, struct wgp_peer *peers, size_t cap,
		  size_t *npeers)
{
	static _Thread_local _Alignas(4) uint8_t buf[1 << 16];
	struct wgnl_get g = {.dev = dev, .peers = peers, .cap = cap};
	uint32_t seq = ++d->seq;
	int len = wgnl_get_request(buf, sizeof(buf), d->family, seq, d->ifname), rc = 0;

	if (len < 0)
		return len;
	if ((rc = nl_send(d->nl, buf, (size_t)len)) != 0)
		return rc;
	while (!g.done) {
		ssize_t r = nl_recv(d->nl, buf, sizeof(buf));

		if (r < 0)
			return (int)r;
		if ((rc = wgnl_get_parse(&g, buf, (size_t)r, seq)) != 0)
			return rc;
	}
	*npeers = g.n;
	return g.over ? -E2BIG : 0;
}

int wgdev_get(struct wgdev *d, struct wgp_device *dev, struct wgp_peer *peers, size_t cap,
	      size_t *npeers)
{
	size_t got;
	int rc;

	memset(dev, 0, sizeof(*dev));
	*npeers = 0;
	if (d->way == WGDEV_KERNEL)
		return nl_get(d, dev, peers, cap, npeers);
	rc = uapi_ask(d, "get=1\n\n", 7, &got);
	if (rc == 0)
		rc = wgp_uapi_parse_get(d->ans, got, dev, peers, cap, npeers);
	/* The answer held the private key. */
	if (d->ans)
		explicit_bzero(d->ans, got);
	return rc;
}

int wgdev_apply(struct wgdev *d, const struct wgp_op *ops, size_t nops, unsigned *requests)
{
	size_t cap = d->max_req < 256 ? 256 : d->max_req, done;
	char *req = malloc(cap);
	int rc = 0;

	*requests = 0;
	if (!req)
		return -ENOMEM;
	for (size_t off = 0; off < nops && rc == 0; off += done) {
		int len;

		if (d->way == WGDEV_KERNEL) {
			uint32_t seq = ++d->seq;

			len = wgnl_set_request((uint8_t *)req, cap, d->family, seq, d->ifname,
					       ops + off, nops - off, &done);
			rc = len < 0 ? len : nl_request(d->nl, req, (size_t)len, seq);
		} else {
			len = wgp_uapi_set(req, cap, ops + off, nops - off, &done);
			rc = len < 0 ? len : uapi_set(d, req, (size_t)len);
		}
		if (len >= 0)
			(*requests)++;
	}
	free(req);
	return rc;
}

int wgdev_set_device(struct wgdev *d, const uint8_t priv[WGP_KEY_LEN], uint16_t port)
{
	_Alignas(4) uint8_t req[512];
	int len, rc;

	if (d->way == WGDEV_KERNEL) {
		uint32_t seq = ++d->seq;

		len = wgnl_device_request(req, sizeof(req), d->family, seq, d->ifname, priv, port);
		rc = len < 0 ? len : nl_request(d->nl, req, (size_t)len, seq);
	} else {
		len = wgp_uapi_device((char *)req, sizeof(req), priv, port);
		rc = len < 0 ? len : uapi_set(d, (char *)req, (size_t)len);
	}
	explicit_bzero(req, sizeof(req));
	if (rc == 0 && priv != d->priv) {
		memcpy(d->priv, priv, sizeof(d->priv));
		d->port = port;
		d->keyed = true;
	}
	return rc;
}

int wgdev_reconcile(struct wgdev *d, struct wgp_peer *want, size_t nwant, struct wgp_peer *cur,
		    size_t cap, struct wgp_op *ops, struct wgdev_result *r)
{
	struct wgp_device dev;
	size_t ncur;
	int n, rc;

	memset(r, 0, sizeof(*r));
	rc = wgdev_get(d, &dev, cur, cap, &ncur);
	if (rc == 0 && d->keyed && wgp_device_differs(&dev, d->priv, d->port)) {
		/* Its peers are what the get read: a new device has none, and
		 * the plan adds them all. */
		rc = wgdev_set_device(d, d->priv, d->port);
		r->restored = rc == 0;
	}
	explicit_bzero(&dev, sizeof(dev));
	if (rc != 0)
		return rc;
	r->current = ncur;
	n = wgp_plan(cur, ncur, want, nwant, ops, cap + nwant);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		r->removed += ops[i].kind == WGP_OP_REMOVE;
		r->updated += ops[i].kind == WGP_OP_UPDATE;
		r->added += ops[i].kind == WGP_OP_ADD;
	}
	return wgdev_apply(d, ops, (size_t)n, &r->requests);
}

void wgdev_close(struct wgdev *d)
{
	if (d->nl >= 0)
		close(d->nl);
	d->nl = -1;
	free(d->ans);
	d->ans = NULL;
	d->ans_cap = 0;
	explicit_bzero(d->priv, sizeof(d->priv));
	d->keyed = false;
}

int wgdev_create(const char *ifname, int timeout_ms)
{
	_Alignas(4) uint8_t msg[256];
	int fd = nl_socket(NETLINK_ROUTE, timeout_ms), rc;

	if (fd < 0)
		return fd;
	rc = rtnl_do(fd, msg, rtnl_link_add_msg(msg, sizeof(msg), 1, ifname, "wireguard"), 1);
	close(fd);
	return rc;
}

/* A route socket and the index of ifname, for one request on it: the
 * socket, or -errno (the name unknown, no socket). */
static int rtnl_for(const char *ifname, int timeout_ms, unsigned *idx)
{
	*idx = if_nametoindex(ifname);
	if (*idx == 0)
		return -errno;
	return nl_socket(NETLINK_ROUTE, timeout_ms);
}

int wgdev_delete(const char *ifname, int timeout_ms)
{
	_Alignas(4) uint8_t msg[256];
	unsigned idx;
	int fd = rtnl_for(ifname, timeout_ms, &idx), rc;

	if (fd < 0)
		return fd;
	rc = rtnl_do(fd, msg, rtnl_link_del_msg(msg, sizeof(msg), 1, idx), 1);
	close(fd);
	return rc;
}

int wgdev_address(const char *ifname, int family, const uint8_t *addr, unsigned prefix,
		  int timeout_ms)
{
	_Alignas(4) uint8_t msg[256];
	unsigned idx;
	int fd = rtnl_for(ifname, timeout_ms, &idx), rc;

	if (fd < 0)
		return fd;
	rc = rtnl_do(fd, msg, rtnl_addr_add_msg(msg, sizeof(msg), 1, idx, family, addr, prefix), 1);
	if (rc == 0 || rc == -EEXIST) {
		int up = rtnl_do(fd, msg, rtnl_link_up_msg(msg, sizeof(msg), 2, idx), 2);

		if (up < 0)
			rc = up;
	}
	close(fd);
	return rc;
}

int wgdev_address_del(const char *ifname, int family, const uint8_t *addr, unsigned prefix,
		      int timeout_ms)
{
	_Alignas(4) uint8_t msg[256];
	unsigned idx;
	int fd = rtnl_for(ifname, timeout_ms, &idx), rc;

	if (fd < 0)
		return fd;
	rc = rtnl_do(fd, msg, rtnl_addr_del_msg(msg, sizeof(msg), 1, idx, family, addr, prefix), 1);
	close(fd);
	return rc;
}
