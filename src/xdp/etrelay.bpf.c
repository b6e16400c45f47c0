/* SPDX-License-Identifier: ISC */
/* The XDP front door: UDP to the relay's own ports, judged before the
 * kernel builds an skb. In order: bogon sources, banned sources, known
 * sources (pass at once), then a token bucket per source (an IPv4
 * address, an IPv6 /64). Everything else passes untouched. Built with
 * clang -target bpf; loaded by xdp.c, which fills the maps. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xdp_maps.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XDP_PORTS_MAX);
	__type(key, __u16); /* network byte order */
	__type(value, __u8);
} etr_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, XDP_BANS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct xdp_lpm_key);
	__type(value, __u8);
} etr_bans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XDP_KNOWN_MAX);
	__type(key, struct xdp_addr);
	__type(value, __u32); /* its sessions (the loader counts) */
} etr_known SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, XDP_BUCKETS_MAX);
	__type(key, struct xdp_addr);
	__type(value, __u64); /* GCRA: the theoretical arrival time, ns */
} etr_buckets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xdp_params);
} etr_params SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XDP_RESULTS);
	__type(key, __u32);
	__type(value, __u64);
} etr_counts SEC(".maps");

static __always_inline int count(__u32 result, int verdict)
{
	__u64 *n = bpf_map_lookup_elem(&etr_counts, &result);

	if (n)
		*n += 1; /* per CPU: no atomics */
	return verdict;
}

/* addrclass_bogon's rules for a source seen on a public interface: a
 * loopback source is always a bogon here (the relay's own rule lets it
 * in on a loopback listener, which never sees this program). */
static __always_inline int bogon_v4(__u32 a /* network order */)
{
	__u8 first = (__u8)(bpf_ntohl(a) >> 24);

	return first == 0 || first == 127 || first >= 224;
}

static __always_inline int bogon_v6(const struct xdp_addr *s)
{
	const __u8 *b = s->b;
	__u32 z = 0;

	if (b[0] == 0xff)
		return 1;
#pragma unroll
	for (int i = 0; i < 15; i++)
		z |= b[i];
	return z == 0 && b[15] <= 1; /* :: and ::1 */
}

static __always_inline int judge(struct xdp_md *ctx, struct xdp_addr *src, int v4, __u16 sport)
{
	struct xdp_lpm_key lk;
	struct xdp_params *p;
	__u64 now, *tat, t, next;
	__u32 zero = 0;

	if (sport == 0 || (v4 ? bogon_v4(*(__u32 *)&src->b[12]) : bogon_v6(src)))
		return count(XDP_R_BOGON, XDP_DROP);
	lk.prefixlen = 128;
	__builtin_memcpy(lk.addr, src->b, 16);
	if (bpf_map_lookup_elem(&etr_bans, &lk))
		return count(XDP_R_BANNED, XDP_DROP);
	if (bpf_map_lookup_elem(&etr_known, src))
		return count(XDP_R_KNOWN, XDP_PASS);
	p = bpf_map_lookup_elem(&etr_params, &zero);
	if (!p || p->interval_ns == 0)
		return count(XDP_R_PASSED, XDP_PASS);
	/* The source's key: an IPv6 /64, an IPv4 address. */
	if (!v4)
		__builtin_memset(&src->b[8], 0, 8);
	now = bpf_ktime_get_ns();
	tat = bpf_map_lookup_elem(&etr_buckets, src);
	if (!tat) {
		next = now + p->interval_ns;
		bpf_map_update_elem(&etr_buckets, src, &next, BPF_ANY);
		return count(XDP_R_PASSED, XDP_PASS);
	}
	/* GCRA: one number per source; a race between CPUs loses at most a
	 * packet's worth of tokens either way. */
	t = *tat > now ? *tat : now;
	if (t - now > p->tolerance_ns)
		return count(XDP_R_RATE, XDP_DROP);
	*tat = t + p->interval_ns;
	return count(XDP_R_PASSED, XDP_PASS);
}

SEC("xdp")
int etrelay_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct xdp_addr src;
	struct udphdr *udp;
	__u16 proto;
	void *l3;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	proto = eth->h_proto;
	l3 = eth + 1;
	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		__u16 *vlan = l3;

		if ((void *)(vlan + 2) > end)
			return XDP_PASS;
		proto = vlan[1];
		l3 = vlan + 2;
	}
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;

		if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl < 5)
			return XDP_PASS;
		/* A later fragment carries no UDP header. */
		if (ip->frag_off & bpf_htons(0x1fff))
			return XDP_PASS;
		udp = (void *)ip + ip->ihl * 4;
		if ((void *)(udp + 1) > end)
			return XDP_PASS;
		if (!bpf_map_lookup_elem(&etr_ports, &udp->dest))
			return XDP_PASS;
		__builtin_memset(&src, 0, sizeof(src));
		src.b[10] = src.b[11] = 0xff;
		__builtin_memcpy(&src.b[12], &ip->saddr, 4);
		return judge(ctx, &src, 1, udp->source);
	}
	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;

		/* Extension headers are not walked: such a packet passes. */
		if ((void *)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP)
			return XDP_PASS;
		udp = (void *)(ip6 + 1);
		if ((void *)(udp + 1) > end)
			return XDP_PASS;
		if (!bpf_map_lookup_elem(&etr_ports, &udp->dest))
			return XDP_PASS;
		__builtin_memcpy(src.b, &ip6->saddr, 16);
		/* An IPv4-mapped source is judged as IPv4. */
		{
			__u32 z = 0;

#pragma unroll
			for (int i = 0; i < 10; i++)
				z |= src.b[i];
			return judge(ctx, &src, z == 0 && src.b[10] == 0xff && src.b[11] == 0xff,
				     udp->source);
		}
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
