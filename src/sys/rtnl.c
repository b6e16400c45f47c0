/* SPDX-License-Identifier: ISC */
/* rtnetlink: an interface, an address, up, and the interface gone. */
#include "rtnl.h"

#include <errno.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>

#include "nlmsg.h"

int rtnl_link_add_msg(uint8_t *out, size_t cap, uint32_t seq, const char *ifname, const char *kind)
{
	struct nl_wr w = {out, cap, 0, false};
	size_t n = strnlen(ifname, IFNAMSIZ), info;

	if (n == 0 || n >= IFNAMSIZ || !kind[0])
		return -EINVAL;
	if (!nl_msg_start(&w, RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
			  seq, sizeof(struct ifinfomsg)))
		return -ENOSPC;
	nl_put_str(&w, IFLA_IFNAME, ifname);
	info = nl_nest_start(&w, IFLA_LINKINFO);
	nl_put_str(&w, IFLA_INFO_KIND, kind);
	nl_nest_end(&w, info);
	return nl_msg_end(&w);
}

/* An address message of type (RTM_NEWADDR, RTM_DELADDR) with flags. */
static int rtnl_addr_msg(uint8_t *out, size_t cap, uint16_t type, uint16_t flags, uint32_t seq,
			 unsigned ifindex, int family, const uint8_t *addr, unsigned prefix)
{
	struct nl_wr w = {out, cap, 0, false};
	size_t alen = family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
	struct ifaddrmsg *ifa;

	if (!alen || prefix > alen * 8 || ifindex == 0)
		return -EINVAL;
	ifa = nl_msg_start(&w, type, NLM_F_REQUEST | NLM_F_ACK | flags, seq, sizeof(*ifa));
	if (!ifa)
		return -ENOSPC;
	ifa->ifa_family = (uint8_t)family;
	ifa->ifa_prefixlen = (uint8_t)prefix;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = ifindex;
	nl_put(&w, IFA_LOCAL, addr, alen);
	nl_put(&w, IFA_ADDRESS, addr, alen);
	return nl_msg_end(&w);
}

/* Exclusive: an address that is there already says so (-EEXIST), so that
 * the caller knows whether the one at exit is its own to take away. */
int rtnl_addr_add_msg(uint8_t *out, size_t cap, uint32_t seq, unsigned ifindex, int family,
		      const uint8_t *addr, unsigned prefix)
{
	return rtnl_addr_msg(out, cap, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, seq, ifindex, family,
			     addr, prefix);
}

int rtnl_addr_del_msg(uint8_t *out, size_t cap, uint32_t seq, unsigned ifindex, int family,
		      const uint8_t *addr, unsigned prefix)
{
	return rtnl_addr_msg(out, cap, RTM_DELADDR, 0, seq, ifindex, family, addr, prefix);
}

/* A link message of type for ifindex, its flags changed by change. */
static int rtnl_link_msg(uint8_t *out, size_t cap, uint16_t type, uint32_t seq, unsigned ifindex,
			 unsigned change)
{
	struct nl_wr w = {out, cap, 0, false};
	struct ifinfomsg *ifi;

	if (ifindex == 0 || ifindex > INT32_MAX)
		return -EINVAL;
	ifi = nl_msg_start(&w, type, NLM_F_REQUEST | NLM_F_ACK, seq, sizeof(*ifi));
	if (!ifi)
		return -ENOSPC;
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = (int)ifindex;
	ifi->ifi_flags = change;
	ifi->ifi_change = change;
	return nl_msg_end(&w);
}

int rtnl_link_up_msg(uint8_t *out, size_t cap, uint32_t seq, unsigned ifindex)
{
	return rtnl_link_msg(out, cap, RTM_NEWLINK, seq, ifindex, IFF_UP);
}

int rtnl_link_del_msg(uint8_t *out, size_t cap, uint32_t seq, unsigned ifindex)
{
	return rtnl_link_msg(out, cap, RTM_DELLINK, seq, ifindex, 0);
}

int rtnl_do(int fd, const uint8_t *msg, int len, uint32_t seq)
{
	return len < 0 ? len : nl_request(fd, msg, (size_t)len, seq);
}
