/* SPDX-License-Identifier: ISC */
/* Netlink messages written and read without a library: attributes with
 * every length checked, nested ones, the messages of a datagram, errors
 * and acknowledgements; and a socket whose every wait is bounded. For the
 * kernel's WireGuard family (tun/wgnl.c) and rtnetlink (rtnl.c). Buffers
 * are 4-byte aligned, as netlink's are. */
#ifndef ETR_NLMSG_H
#define ETR_NLMSG_H

#include <linux/netlink.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A message being written: len grows; over is set once something did not
 * fit (the message is then discarded whole). */
struct nl_wr {
	uint8_t *p;
	size_t cap, len;
	bool over;
};

/* n bytes (zeroed, padded to 4) at the end, or NULL (over set). */
void *nl_room(struct nl_wr *w, size_t n);
void nl_put(struct nl_wr *w, uint16_t type, const void *data, size_t n);
void nl_put_u8(struct nl_wr *w, uint16_t type, uint8_t v);
void nl_put_u16(struct nl_wr *w, uint16_t type, uint16_t v);
void nl_put_u32(struct nl_wr *w, uint16_t type, uint32_t v);
/* A string with its NUL. */
void nl_put_str(struct nl_wr *w, uint16_t type, const char *s);
/* A nested attribute: its offset, closed by nl_nest_end. */
size_t nl_nest_start(struct nl_wr *w, uint16_t type);
void nl_nest_end(struct nl_wr *w, size_t at);
/* The message's header, then hdr_len bytes of the family's own (zeroed,
 * returned to be filled; NULL when over). */
void *nl_msg_start(struct nl_wr *w, uint16_t type, uint16_t flags, uint32_t seq, size_t hdr_len);
/* Its length into the header: the length, or -ENOSPC when over. */
int nl_msg_end(struct nl_wr *w);

/* Attributes in [p, end): each nl_attr_next yields the next whole one, or
 * NULL at the end or at one that does not fit (bad set then). */
struct nl_attrs {
	const uint8_t *p, *end;
	bool bad;
};

const struct nlattr *nl_attr_next(struct nl_attrs *it);
/* The attributes inside a nested one. */
struct nl_attrs nl_attrs_in(const struct nlattr *a);
/* The attributes after a message's header and hdr_len bytes of the
 * family's; false when the message is too short. */
bool nl_msg_attrs(const struct nlmsghdr *h, size_t hdr_len, struct nl_attrs *it);

static inline uint16_t nl_attr_type(const struct nlattr *a)
{
	return a->nla_type & NLA_TYPE_MASK;
}

static inline size_t nl_attr_len(const struct nlattr *a)
{
	return a->nla_len - NLA_HDRLEN;
}

static inline const void *nl_attr_data(const struct nlattr *a)
{
	return (const uint8_t *)a + NLA_HDRLEN;
}

/* The value of exactly n bytes into out; false otherwise. */
bool nl_attr_get(const struct nlattr *a, void *out, size_t n);

/* The messages of one datagram: each call yields the next whole one. */
const struct nlmsghdr *nl_msg_next(const uint8_t **p, const uint8_t *end, bool *bad);
/* An NLMSG_ERROR's code: 0 (an acknowledgement) or -errno. */
int nl_msg_error(const struct nlmsghdr *h);
/* The acknowledgement of request seq in a datagram: 0, the kernel's
 * -errno, -EPROTO; 1 when it holds none (read on). */
int nl_ack_parse(const uint8_t *buf, size_t len, uint32_t seq);

/* A netlink socket of protocol, bound, each wait at most timeout_ms.
 * Returns the descriptor or -errno. */
int nl_socket(int protocol, int timeout_ms);
/* One message out: 0 or -errno (-ETIMEDOUT when the wait ran out). */
int nl_send(int fd, const void *msg, size_t len);
/* One datagram in: its length or -errno (-ETIMEDOUT). */
ssize_t nl_recv(int fd, void *buf, size_t cap);
/* A request out and its acknowledgement in: 0 or -errno. */
int nl_request(int fd, const void *msg, size_t len, uint32_t seq);

#endif
