/* SPDX-License-Identifier: ISC */
/* Unit tests for rtnl.c: each rtnetlink request the tunnel makes, read
 * back field by field (header, flags, the interface or address message,
 * its attributes), bad arguments refused, a buffer too small refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>

#include "rtnl.h"

static _Alignas(4) uint8_t buf[512];

/* The header of a message of len bytes, checked against type, flags, seq. */
static const struct nlmsghdr *header(int len, uint16_t type, uint16_t flags, uint32_t seq)
{
	const struct nlmsghdr *h = (const struct nlmsghdr *)buf;

	assert_true(len >= (int)NLMSG_HDRLEN);
	assert_int_equal(h->nlmsg_len, len);
	assert_int_equal(h->nlmsg_type, type);
	assert_int_equal(h->nlmsg_flags, flags);
	assert_int_equal(h->nlmsg_seq, seq);
	return h;
}

/* The attribute of type t among [p, end), or NULL; every length checked. */
static const struct rtattr *find(const uint8_t *p, const uint8_t *end, uint16_t t)
{
	while (end - p >= (long)RTA_LENGTH(0)) {
		const struct rtattr *a = (const struct rtattr *)p;

		assert_true(a->rta_len >= RTA_LENGTH(0) && a->rta_len <= end - p);
		if ((a->rta_type & NLA_TYPE_MASK) == t)
			return a;
		p += RTA_ALIGN(a->rta_len);
	}
	return NULL;
}

static void link_add(void **state)
{
	int len = rtnl_link_add_msg(buf, sizeof(buf), 7, "wg0", "wireguard");
	const struct nlmsghdr *h;
	const struct rtattr *a, *info, *kind;
	const uint8_t *p, *end;

	(void)state;
	h = header(len, RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, 7);
	p = (const uint8_t *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct ifinfomsg));
	end = buf + len;
	assert_non_null(a = find(p, end, IFLA_IFNAME));
	assert_string_equal((const char *)RTA_DATA(a), "wg0");
	assert_non_null(info = find(p, end, IFLA_LINKINFO));
	p = (const uint8_t *)RTA_DATA(info);
	assert_non_null(kind = find(p, (const uint8_t *)info + info->rta_len, IFLA_INFO_KIND));
	assert_string_equal((const char *)RTA_DATA(kind), "wireguard");

	assert_int_equal(rtnl_link_add_msg(buf, sizeof(buf), 1, "", "wireguard"), -EINVAL);
	assert_int_equal(rtnl_link_add_msg(buf, sizeof(buf), 1, "a-name-of-16-chr", "wireguard"),
			 -EINVAL);
	assert_int_equal(rtnl_link_add_msg(buf, sizeof(buf), 1, "wg0", ""), -EINVAL);
	assert_int_equal(rtnl_link_add_msg(buf, 16, 1, "wg0", "wireguard"), -ENOSPC);
}

/* An address message of type with flags: family, prefix, index, and the
 * address as IFA_LOCAL and IFA_ADDRESS. */
static void addr_check(int len, uint16_t type, uint16_t flags, int family, const uint8_t *addr,
		       size_t alen, unsigned prefix, unsigned idx)
{
	const struct nlmsghdr *h = header(len, type, NLM_F_REQUEST | NLM_F_ACK | flags, 3);
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);
	const uint8_t *p = (const uint8_t *)ifa + NLMSG_ALIGN(sizeof(*ifa)), *end = buf + len;
	const struct rtattr *a;

	assert_int_equal(ifa->ifa_family, family);
	assert_int_equal(ifa->ifa_prefixlen, prefix);
	assert_int_equal(ifa->ifa_index, idx);
	for (uint16_t t = IFA_ADDRESS; t <= IFA_LOCAL; t++) {
		assert_non_null(a = find(p, end, t));
		assert_int_equal(RTA_PAYLOAD(a), alen);
		assert_memory_equal(RTA_DATA(a), addr, alen);
	}
}

static void addr_add_del(void **state)
{
	static const uint8_t v4[4] = {10, 8, 0, 1};
	static const uint8_t v6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

	(void)state;
	addr_check(rtnl_addr_add_msg(buf, sizeof(buf), 3, 5, AF_INET, v4, 24), RTM_NEWADDR,
		   NLM_F_CREATE | NLM_F_EXCL, AF_INET, v4, 4, 24, 5);
	/* The address taken away at exit: the same fields, no create. */
	addr_check(rtnl_addr_del_msg(buf, sizeof(buf), 3, 5, AF_INET, v4, 24), RTM_DELADDR, 0,
		   AF_INET, v4, 4, 24, 5);
	addr_check(rtnl_addr_del_msg(buf, sizeof(buf), 3, 9, AF_INET6, v6, 64), RTM_DELADDR, 0,
		   AF_INET6, v6, 16, 64, 9);
	assert_int_equal(rtnl_addr_del_msg(buf, sizeof(buf), 3, 5, AF_INET, v4, 33), -EINVAL);
	assert_int_equal(rtnl_addr_del_msg(buf, sizeof(buf), 3, 5, AF_INET6, v6, 129), -EINVAL);
	assert_int_equal(rtnl_addr_del_msg(buf, sizeof(buf), 3, 0, AF_INET, v4, 24), -EINVAL);
	assert_int_equal(rtnl_addr_del_msg(buf, sizeof(buf), 3, 5, AF_UNIX, v4, 24), -EINVAL);
	assert_int_equal(rtnl_addr_del_msg(buf, 24, 3, 5, AF_INET, v4, 24), -ENOSPC);
	assert_int_equal(rtnl_addr_add_msg(buf, 24, 3, 5, AF_INET, v4, 24), -ENOSPC);
}

/* Up: IFF_UP in flags and change; deleted: the index only. */
static void link_up_del(void **state)
{
	const struct ifinfomsg *ifi;
	int len;

	(void)state;
	len = rtnl_link_up_msg(buf, sizeof(buf), 3, 5);
	ifi = NLMSG_DATA(header(len, RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, 3));
	assert_int_equal(len, NLMSG_LENGTH(sizeof(*ifi)));
	assert_int_equal(ifi->ifi_index, 5);
	assert_int_equal(ifi->ifi_flags, IFF_UP);
	assert_int_equal(ifi->ifi_change, IFF_UP);
	len = rtnl_link_del_msg(buf, sizeof(buf), 3, 5);
	ifi = NLMSG_DATA(header(len, RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK, 3));
	assert_int_equal(len, NLMSG_LENGTH(sizeof(*ifi)));
	assert_int_equal(ifi->ifi_family, AF_UNSPEC);
	assert_int_equal(ifi->ifi_index, 5);
	assert_int_equal(ifi->ifi_flags, 0);
	assert_int_equal(ifi->ifi_change, 0);
	assert_int_equal(rtnl_link_del_msg(buf, sizeof(buf), 3, 0), -EINVAL);
	assert_int_equal(rtnl_link_del_msg(buf, sizeof(buf), 3, 1u << 31), -EINVAL);
	assert_int_equal(rtnl_link_del_msg(buf, 16, 3, 5), -ENOSPC);
	assert_int_equal(rtnl_link_up_msg(buf, 16, 3, 5), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(link_add),
	    cmocka_unit_test(addr_add_del),
	    cmocka_unit_test(link_up_del),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
