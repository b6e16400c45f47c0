/* SPDX-License-Identifier: ISC */
/* The rtnetlink requests the tunnel makes of the kernel: an interface of
 * a kind (the kernel's "wireguard"), an address on it (and off it at
 * exit), the interface up, and deleted at exit when the start made it.
 * Each message is written by a pure function; rtnl_do sends one on a
 * NETLINK_ROUTE socket (nl_socket) and waits for its acknowledgement.
 * Needs CAP_NET_ADMIN. */
#ifndef ETR_RTNL_H
#define ETR_RTNL_H

#include <stddef.h>
#include <stdint.h>

/* RTM_NEWLINK creating interface ifname of kind ("wireguard"); the kernel
 * answers -EEXIST when there is one. */
int rtnl_link_add_msg(uint8_t *out, size_t cap, uint32_t seq, const char *ifname, const char *kind);

/* RTM_NEWADDR: addr (4 or 16 bytes of family)/prefix on ifindex; the
 * kernel answers -EEXIST when ifindex has it (left as it is). */
int rtnl_addr_add_msg(uint8_t *out, size_t cap, uint32_t seq, unsigned ifindex, int family,
		      const uint8_t *addr, unsigned prefix);

/* RTM_DELADDR: the same address off ifindex. */
int rtnl_addr_del_msg(uint8_t *out, size_t cap, uint32_t seq, unsigned ifindex, int family,
		      const uint8_t *addr, unsigned prefix);

/* RTM_NEWLINK setting IFF_UP on ifindex. */
int rtnl_link_up_msg(uint8_t *out, size_t cap, uint32_t seq, unsigned ifindex);

/* RTM_DELLINK: interface ifindex deleted (one the start made, at exit). */
int rtnl_link_del_msg(uint8_t *out, size_t cap, uint32_t seq, unsigned ifindex);

/* Each message above returns its length, -EINVAL for a bad argument, or
 * -ENOSPC. rtnl_do: one of them out on fd, its acknowledgement in: 0 or
 * the kernel's -errno. */
int rtnl_do(int fd, const uint8_t *msg, int len, uint32_t seq);

#endif
