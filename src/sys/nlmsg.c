/* SPDX-License-Identifier: ISC */
/* Netlink messages and a bounded socket. */
#include "nlmsg.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

void *nl_room(struct nl_wr *w, size_t n)
{
	size_t al = NLA_ALIGN(n);
	void *at;

	if (w->over || al > w->cap - w->len) {
		w->over = true;
		return NULL;
	}
	at = w->p + w->len;
	memset(at, 0, al);
	w->len += al;
	return at;
}

void nl_put(struct nl_wr *w, uint16_t type, const void *data, size_t n)
{
	struct nlattr *a;

	if (n > UINT16_MAX - NLA_HDRLEN) {
		w->over = true;
		return;
	}
	a = nl_room(w, NLA_HDRLEN + n);
	if (!a)
		return;
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + n);
	memcpy((uint8_t *)a + NLA_HDRLEN, data, n);
}

void nl_put_u8(struct nl_wr *w, uint16_t type, uint8_t v)
{
	nl_put(w, type, &v, sizeof(v));
}

void nl_put_u16(struct nl_wr *w, uint16_t type, uint16_t v)
{
	nl_put(w, type, &v, sizeof(v));
}

void nl_put_u32(struct nl_wr *w, uint16_t type, uint32_t v)
{
	nl_put(w, type, &v, sizeof(v));
}

void nl_put_str(struct nl_wr *w, uint16_t type, const char *s)
{
	nl_put(w, type, s, strlen(s) + 1);
}

size_t nl_nest_start(struct nl_wr *w, uint16_t type)
{
	struct nlattr *a = nl_room(w, NLA_HDRLEN);

	if (!a)
		return 0;
	a->nla_type = type | NLA_F_NESTED;
	return (size_t)((uint8_t *)a - w->p);
}

void nl_nest_end(struct nl_wr *w, size_t at)
{
	if (w->over)
		return;
	if (w->len - at > UINT16_MAX) {
		w->over = true;
		return;
	}
	((struct nlattr *)(w->p + at))->nla_len = (uint16_t)(w->len - at);
}

void *nl_msg_start(struct nl_wr *w, uint16_t type, uint16_t flags, uint32_t seq, size_t hdr_len)
{
	struct nlmsghdr *h = nl_room(w, NLMSG_HDRLEN);
	void *fam = nl_room(w, hdr_len);

	if (!h || !fam)
		return NULL;
	h->nlmsg_type = type;
	h->nlmsg_flags = flags;
	h->nlmsg_seq = seq;
	return fam;
}

int nl_msg_end(struct nl_wr *w)
{
	if (w->over || w->len > INT32_MAX || w->len < NLMSG_HDRLEN)
		return -ENOSPC;
	((struct nlmsghdr *)w->p)->nlmsg_len = (uint32_t)w->len;
	return (int)w->len;
}

const struct nlattr *nl_attr_next(struct nl_attrs *it)
{
	const struct nlattr *a;
	size_t left = (size_t)(it->end - it->p), step;

	if (left < NLA_HDRLEN)
		return NULL;
	a = (const struct nlattr *)it->p;
	if (a->nla_len < NLA_HDRLEN || a->nla_len > left) {
		it->bad = true;
		return NULL;
	}
	step = (size_t)NLA_ALIGN(a->nla_len);
	it->p += step < left ? step : left;
	return a;
}

struct nl_attrs nl_attrs_in(const struct nlattr *a)
{
	const uint8_t *p = (const uint8_t *)a + NLA_HDRLEN;

	return (struct nl_attrs){p, p + (a->nla_len - NLA_HDRLEN), false};
}

bool nl_msg_attrs(const struct nlmsghdr *h, size_t hdr_len, struct nl_attrs *it)
{
	const uint8_t *p = (const uint8_t *)h;
	size_t at = NLMSG_HDRLEN + NLMSG_ALIGN(hdr_len);

	if (h->nlmsg_len < at)
		return false;
	*it = (struct nl_attrs){p + at, p + h->nlmsg_len, false};
	return true;
}

bool nl_attr_get(const struct nlattr *a, void *out, size_t n)
{
	if (nl_attr_len(a) != n)
		return false;
	memcpy(out, nl_attr_data(a), n);
	return true;
}

const struct nlmsghdr *nl_msg_next(const uint8_t **p, const uint8_t *end, bool *bad)
{
	const struct nlmsghdr *h;
	size_t left = (size_t)(end - *p), step;

	if (left < NLMSG_HDRLEN)
		return NULL;
	h = (const struct nlmsghdr *)*p;
	if (h->nlmsg_len < NLMSG_HDRLEN || h->nlmsg_len > left) {
		*bad = true;
		return NULL;
	}
	step = (size_t)NLMSG_ALIGN(h->nlmsg_len);
	*p += step < left ? step : left;
	return h;
}

int nl_msg_error(const struct nlmsghdr *h)
{
	const struct nlmsgerr *e = NLMSG_DATA(h);

	if (h->nlmsg_len < NLMSG_HDRLEN + sizeof(*e) || e->error > 0)
		return -EPROTO;
	return e->error;
}

int nl_ack_parse(const uint8_t *buf, size_t len, uint32_t seq)
{
	const uint8_t *p = buf;
	const struct nlmsghdr *h;
	bool bad = false;

	while ((h = nl_msg_next(&p, buf + len, &bad)) != NULL)
		if (h->nlmsg_seq == seq && h->nlmsg_type == NLMSG_ERROR)
			return nl_msg_error(h);
	return bad ? -EPROTO : 1;
}

/* A timed-out socket call says EAGAIN: say what it was. */
static int sock_err(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
}

int nl_socket(int protocol, int timeout_ms)
{
	struct sockaddr_nl me = {.nl_family = AF_NETLINK};
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol), err;

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
	    bind(fd, (struct sockaddr *)&me, sizeof(me)) != 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int nl_send(int fd, const void *msg, size_t len)
{
	struct sockaddr_nl to = {.nl_family = AF_NETLINK};

	if (sendto(fd, msg, len, 0, (struct sockaddr *)&to, sizeof(to)) < 0)
		return sock_err();
	return 0;
}

ssize_t nl_recv(int fd, void *buf, size_t cap)
{
	ssize_t r = recv(fd, buf, cap, 0);

	if (r < 0)
		return sock_err();
	return r == 0 ? -EPROTO : r;
}

int nl_request(int fd, const void *msg, size_t len, uint32_t seq)
{
	_Alignas(4) uint8_t buf[8192];
	int rc = nl_send(fd, msg, len);

	while (rc == 0) {
		ssize_t r = nl_recv(fd, buf, sizeof(buf));

		if (r < 0)
			return (int)r;
		rc = nl_ack_parse(buf, (size_t)r, seq);
		if (rc <= 0)
			return rc;
		rc = 0; /* another request's: read on */
	}
	return rc;
}
