/* SPDX-License-Identifier: ISC */
/* The XDP front door: UDP to the relay's own ports, judged before the
 * kernel builds an skb. In order: bogon sources, banned sources, known
 * sources (pass at once), then a token bucket per source (an IPv4
 * address, an IPv6 /64), a budget per CPU for every such source together
 * and the listener's shape (shape.h, the tables the relay's classifiers
 * read): the shape last, as its walk costs most. Everything else passes
 * untouched. Built with
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
	__type(key, __u16);  /* network byte order */
	__type(value, __u8); /* its listeners: XDP_PORT_* */
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
	__uint(max_entries, SHAPE_KINDS *XDP_RESULTS);
	__type(key, __u32);
	__type(value, __u64);
} etr_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xdp_walk);
} etr_walk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64); /* GCRA: the budget's theoretical arrival time */
} etr_budget SEC(".maps");

/* The datagram at hand: its listener (the label), its payload. */
struct pkt {
	__u32 listener, kinds;
	__u32 off, n; /* the payload: offset in the frame, length */
	__u8 head[8]; /* its first bytes (zeros past n) */
};

static __always_inline int count(const struct pkt *k, __u32 result, int verdict)
{
	__u32 i = k->listener * XDP_RESULTS + result;
	__u64 *n = bpf_map_lookup_elem(&etr_counts, &i);

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

/* The walk of a Quake 3 line for its first token, as q3proto.c's
 * first_token reads it, a byte (or a comment's two) per bpf_loop step: a
 * loop the verifier checks once, whatever the line's length. Each step
 * reads its bytes with bpf_xdp_load_bytes: an offset the verifier need not
 * know (an index into a buffer it would track, value by value, through
 * every step). */
enum { W_SKIP, W_COMMENT, W_QUOTE, W_WORD };

struct walk {
	struct xdp_md *ctx;
	__u32 off; /* the payload's */
	__u32 i, end, state, s, len, found;
};

static long walk_step(__u32 step, void *arg)
{
	struct walk *w = arg;
	__u32 i = w->i, end = w->end;
	__u8 b[2] = {0, 0}, c, c1, k;
	int comment;

	if (i >= end) {
		w->found = w->state == W_QUOTE || w->state == W_WORD;
		w->len = i - w->s;
		return 1;
	}
	if (bpf_xdp_load_bytes(w->ctx, w->off + i, b, i + 1 < end ? 2 : 1) < 0)
		return 1;
	c = b[0];
	c1 = b[1];
	k = shape_q3_cls[c];
	/* A comment ("//" or slash star) starts here. */
	comment = k == SHAPE_C_SLASH && i + 1 < end && (c1 == '/' || c1 == '*');
	switch (w->state) {
	case W_SKIP:
		if (k == SHAPE_C_SPACE) {
			w->i = i + 1;
			return 0;
		}
		if (k == SHAPE_C_END || (comment && c1 == '/'))
			return 1; /* no token */
		if (comment) {
			/* Its end is looked for from the opening slash on. */
			w->state = W_COMMENT;
			return 0;
		}
		w->state = c == '"' ? W_QUOTE : W_WORD;
		w->s = c == '"' ? i + 1 : i;
		w->i = i + 1;
		return 0;
	case W_COMMENT:
		if (i + 1 >= end || k == SHAPE_C_END)
			return 1; /* never closed: no token */
		if (c == '*' && c1 == '/') {
			w->state = W_SKIP;
			w->i = i + 2;
		} else {
			w->i = i + 1;
		}
		return 0;
	case W_QUOTE:
		if (c != '"' && k != SHAPE_C_END) {
			w->i = i + 1;
			return 0;
		}
		break;
	default:
		if (k == SHAPE_C_WORD || (k == SHAPE_C_SLASH && !comment)) {
			w->i = i + 1;
			return 0;
		}
		break;
	}
	w->found = 1;
	w->len = i - w->s;
	return 1;
}

/* q3proto.c's coded_connect_is_connect over the first bytes h (n >= 11). */
static __always_inline int coded_connect_is_connect(const __u8 *h, __u32 n)
{
	__u8 c, r = 0;

	if (n == 11)
		return 1;
	c = h[11];
	if (shape_q3_cls[c] == SHAPE_C_SPACE || shape_q3_cls[c] == SHAPE_C_END || c == '"')
		return 1;
	if (c != '/' || n < 14 || (h[12] == 0 && h[13] == 0))
		return 0;
	if (n == 14)
		return 1;
	c = h[14];
#pragma unroll
	for (int b = 0; b < 8; b++)
		r = (__u8)(r << 1 | ((c >> b) & 1));
	return r == '/' || r == '*';
}

/* The game relay's shape (q3proto.c's q3_shape): an in-game packet long
 * enough for its sequence and qport, or a connectionless one whose command
 * a game server runs for a client. */
static __always_inline int game_shape(struct xdp_md *ctx, const struct pkt *k)
{
	__u8 h[SHAPE_Q3_CONNECT_BYTES + 1] = {0}, tok[16] = {0};
	struct xdp_walk *wb = NULL;
	__u64 t0, t1;
	struct walk w = {0};
	__u32 hn, zero = 0;
	long steps;

	if (k->n < SHAPE_Q3_PREFIX || (k->head[0] & k->head[1] & k->head[2] & k->head[3]) != 0xff)
		return k->n >= SHAPE_Q3_GAME_MIN;
	/* A coded connect: bytes 4..10 "connect", the rest Huffman. Its raw
	 * token is never one served (q3proto.c's classify). */
	hn = k->n < SHAPE_Q3_CONNECT_BYTES ? k->n : SHAPE_Q3_CONNECT_BYTES;
	if (hn < 1 || bpf_xdp_load_bytes(ctx, k->off, h, hn) < 0)
		return 1;
	if (hn >= 11 && h[4] == 'c' && h[5] == 'o' && h[6] == 'n' && h[7] == 'n' && h[8] == 'e' &&
	    h[9] == 'c' && h[10] == 't')
		return coded_connect_is_connect(h, k->n);
	w.ctx = ctx;
	w.off = k->off;
	w.i = w.s = SHAPE_Q3_PREFIX;
	/* No byte past the line's longest names the command. */
	w.end =
	    k->n < SHAPE_Q3_PREFIX + SHAPE_Q3_LINE_MAX ? k->n : SHAPE_Q3_PREFIX + SHAPE_Q3_LINE_MAX;
	/* A long line is walked within this CPU's budget only (a step costs
	 * some 11 ns: 1 400 bytes of spaces, 12 us): past it, it goes by the
	 * bucket alone. */
	if (w.end - SHAPE_Q3_PREFIX > XDP_WALK_FREE) {
		struct xdp_params *p = bpf_map_lookup_elem(&etr_params, &zero);
		__u64 now = bpf_ktime_get_ns();

		wb = bpf_map_lookup_elem(&etr_walk, &zero);
		if (p && p->walk_steps && wb) {
			if (now - wb->window_ns >= 1000000000ull) {
				wb->window_ns = now;
				wb->steps = 0;
			}
			if (wb->steps >= p->walk_steps) {
				wb->unwalked++; /* per CPU: no atomics */
				return 1;
			}
		} else {
			wb = NULL;
		}
	}
	/* A step moves on at least a byte but at a comment's start. */
	steps = bpf_loop(2 * (SHAPE_Q3_LINE_MAX + 2), walk_step, &w, 0);
	if (wb && steps > 0)
		wb->steps += (__u64)steps;
	if (!w.found || w.len == 0 || w.len > SHAPE_Q3_WORD_MAX)
		return 0;
	if (bpf_xdp_load_bytes(ctx, k->off + w.s, tok, w.len) < 0)
		return 1;
		/* As the engines compare: without regard to ASCII case. */
#pragma unroll
	for (int j = 0; j < SHAPE_Q3_WORD_MAX; j++)
		tok[j] += (__u8)((__u8)(tok[j] - 'A') < 26) << 5;
	__builtin_memcpy(&t0, tok, 8);
	__builtin_memcpy(&t1, tok + 8, 8);
#pragma unroll
	for (int c = 0; c < SHAPE_Q3_SERVED; c++) {
		__u64 n0, n1;

		__builtin_memcpy(&n0, shape_q3_served[c], 8);
		__builtin_memcpy(&n1, shape_q3_served[c] + 8, 8);
		if (t0 == n0 && t1 == n1)
			return 1;
	}
	return 0;
}

/* The TURN listener's shape: a STUN header with the magic cookie, or a
 * ChannelData header whose channel is in range. */
static __always_inline int turn_shape(const struct pkt *k)
{
	const __u8 *h = k->head;
	__u32 cookie = (__u32)h[4] << 24 | (__u32)h[5] << 16 | (__u32)h[6] << 8 | h[7];
	__u16 chan = (__u16)(h[0] << 8 | h[1]);

	if (h[0] <= 0x03)
		return k->n >= SHAPE_STUN_HDR && cookie == SHAPE_STUN_COOKIE;
	return k->n >= SHAPE_CHANNEL_HDR && chan >= SHAPE_CHANNEL_MIN && chan <= SHAPE_CHANNEL_MAX;
}

static __always_inline int prbe_shape(const struct pkt *k)
{
	return k->n >= SHAPE_PRBE_LEN && k->head[0] == SHAPE_PRBE_MAGIC[0] &&
	       k->head[1] == SHAPE_PRBE_MAGIC[1] && k->head[2] == SHAPE_PRBE_MAGIC[2] &&
	       k->head[3] == SHAPE_PRBE_MAGIC[3];
}

static __always_inline int shape(struct xdp_md *ctx, const struct pkt *k)
{
	switch (k->listener) {
	case SHAPE_GAME:
		return game_shape(ctx, k);
	case SHAPE_TURN:
		return turn_shape(k);
	default:
		return prbe_shape(k);
	}
}

static __always_inline int judge(struct xdp_md *ctx, struct xdp_addr *src, int v4, __u16 sport,
				 struct pkt *k)
{
	struct xdp_lpm_key lk;
	struct xdp_params *p;
	__u64 now, *tat = NULL, *budget = NULL, t = 0, bt = 0, next;
	__u32 zero = 0;

	if (sport == 0 || (v4 ? bogon_v4(*(__u32 *)&src->b[12]) : bogon_v6(src)))
		return count(k, XDP_R_BOGON, XDP_DROP);
	lk.prefixlen = 128;
	__builtin_memcpy(lk.addr, src->b, 16);
	if (bpf_map_lookup_elem(&etr_bans, &lk))
		return count(k, XDP_R_BANNED, XDP_DROP);
	if (bpf_map_lookup_elem(&etr_known, src))
		return count(k, XDP_R_KNOWN, XDP_PASS);
	p = bpf_map_lookup_elem(&etr_params, &zero);
	if (!p || p->interval_ns == 0)
		return shape(ctx, k) ? count(k, XDP_R_PASSED, XDP_PASS)
				     : count(k, XDP_R_SHAPE, XDP_DROP);
	/* The bucket and the budget before the shape: a lookup costs little,
	 * a line's walk much; a packet over either is dropped unwalked, and
	 * neither is charged until the packet passes (the same verdicts as
	 * the shape first). The source's key: an IPv6 /64, an IPv4
	 * address. */
	if (!v4)
		__builtin_memset(&src->b[8], 0, 8);
	now = bpf_ktime_get_ns();
	tat = bpf_map_lookup_elem(&etr_buckets, src);
	/* GCRA: one number per source; a race between CPUs loses at most a
	 * packet's worth of tokens either way. */
	t = tat && *tat > now ? *tat : now;
	if (t - now > p->tolerance_ns)
		return count(k, XDP_R_RATE, XDP_DROP);
	/* Within its bucket: within this CPU's budget for every source not
	 * known together too (a source it refuses stays as it was: a fresh
	 * one gets no bucket). Per CPU: no atomics. */
	if (p->budget_interval_ns)
		budget = bpf_map_lookup_elem(&etr_budget, &zero);
	if (budget) {
		bt = *budget > now ? *budget : now;
		if (bt - now > p->budget_tolerance_ns)
			return count(k, XDP_R_BUDGET, XDP_DROP);
	}
	if (!shape(ctx, k))
		return count(k, XDP_R_SHAPE, XDP_DROP);
	if (budget)
		*budget = bt + p->budget_interval_ns;
	next = t + p->interval_ns;
	if (tat)
		*tat = next;
	else
		bpf_map_update_elem(&etr_buckets, src, &next, BPF_ANY);
	return count(k, XDP_R_PASSED, XDP_PASS);
}

/* The payload after udp and its listener, from the port's entry. 0, or -1
 * for a datagram the kernel drops anyway (a UDP length it lacks). */
static __always_inline int payload(struct xdp_md *ctx, struct udphdr *udp, __u8 kinds,
				   struct pkt *k)
{
	void *data = (void *)(long)ctx->data;
	__u16 ulen = bpf_ntohs(udp->len);
	__u32 hn;

	if (ulen < sizeof(*udp))
		return -1;
	k->kinds = kinds;
	k->off = (__u32)((void *)(udp + 1) - data);
	k->n = ulen - sizeof(*udp);
	hn = k->n < sizeof(k->head) ? k->n : sizeof(k->head);
	__builtin_memset(k->head, 0, sizeof(k->head));
	if (hn > 0 && bpf_xdp_load_bytes(ctx, k->off, k->head, hn) < 0)
		return -1;
	/* A probe on a shared port is the echo's; the rest the game's. */
	if ((kinds & XDP_PORT_PRBE) && prbe_shape(k))
		k->listener = SHAPE_PRBE;
	else if (kinds & XDP_PORT_GAME)
		k->listener = SHAPE_GAME;
	else if (kinds & XDP_PORT_TURN)
		k->listener = SHAPE_TURN;
	else
		k->listener = SHAPE_PRBE;
	return 0;
}

SEC("xdp")
int etrelay_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct xdp_addr src;
	struct udphdr *udp;
	struct pkt k;
	__u8 *kinds;
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
		kinds = bpf_map_lookup_elem(&etr_ports, &udp->dest);
		if (!kinds || payload(ctx, udp, *kinds, &k) < 0)
			return XDP_PASS;
		__builtin_memset(&src, 0, sizeof(src));
		src.b[10] = src.b[11] = 0xff;
		__builtin_memcpy(&src.b[12], &ip->saddr, 4);
		return judge(ctx, &src, 1, udp->source, &k);
	}
	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;

		/* Extension headers are not walked: such a packet passes. */
		if ((void *)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP)
			return XDP_PASS;
		udp = (void *)(ip6 + 1);
		if ((void *)(udp + 1) > end)
			return XDP_PASS;
		kinds = bpf_map_lookup_elem(&etr_ports, &udp->dest);
		if (!kinds || payload(ctx, udp, *kinds, &k) < 0)
			return XDP_PASS;
		__builtin_memcpy(src.b, &ip6->saddr, 16);
		/* An IPv4-mapped source is judged as IPv4. */
		{
			__u32 z = 0;

#pragma unroll
			for (int i = 0; i < 10; i++)
				z |= src.b[i];
			return judge(ctx, &src, z == 0 && src.b[10] == 0xff && src.b[11] == 0xff,
				     udp->source, &k);
		}
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
