/* SPDX-License-Identifier: ISC */
/* Adaptive Huffman coding as the Quake 3 family engines do it: one tree that
 * coder and decoder both grow symbol by symbol, so no table is transmitted. */
#include "huffman.h"

#include <stdbool.h>
#include <string.h>

/*
 * The model, in the engine's terms:
 *
 * - Every node has a weight (how often its subtree was coded) and a rank:
 *   its place in one list ordered by weight, lowest first. The list starts
 *   with the "not yet transmitted" leaf (weight 0), which stands for every
 *   byte not seen so far.
 * - Nodes of equal weight form a block; each block knows its leader, the
 *   member of highest rank. Blocks are identified by a slot number.
 * - A byte already seen is coded as the path from the root to its leaf
 *   (left 0, right 1). A new byte is coded as the path to the NYT leaf,
 *   then its 8 bits, most significant first; the NYT leaf then splits into
 *   an internal node with NYT on the left and the new leaf on the right.
 * - After each byte, the weights on the path from the leaf up are raised by
 *   one. Before a node is raised it trades places with its block leader, so
 *   the list stays sorted.
 *
 * Bit compatibility depends on doing these updates exactly as the engine
 * does, including two of its quirks, marked below; both show up when a byte
 * repeats while the tree is still small. Bits fill each byte from the least
 * significant end.
 */

#define SYM_NYT	     256
#define SYM_INTERNAL 257
#define NODES_MAX    (2 * 256 + 1) /* NYT + a leaf and an inner node per byte */
#define NONE	     (-1)
#define STREAM_MAX   65535 /* the length prefix is 16 bits */

struct huffman_node {
	int16_t left, right, parent; /* tree */
	int16_t next, prev;	     /* rank list, next is higher */
	int16_t block;		     /* slot holding this block's leader */
	int16_t symbol;		     /* byte, SYM_NYT or SYM_INTERNAL */
	int32_t weight;
};

struct huffman_model {
	struct huffman_node node[NODES_MAX];
	int16_t leaf[257]; /* node of each byte, and of SYM_NYT; NONE: unseen */
	int16_t leader[NODES_MAX];
	int16_t free_slot[NODES_MAX];
	int nnodes, nslots_used, nfree;
	int16_t root, nyt;
	bool broken; /* an update found the structures inconsistent */
};

/* A bit cursor: writes go to out, reads come from in. */
struct huffman_bits {
	uint8_t *out;
	const uint8_t *in;
	size_t cap_bits, pos;
};

static void huffman_model_init(struct huffman_model *m)
{
	memset(m, 0, sizeof(*m));
	for (int i = 0; i < 257; i++)
		m->leaf[i] = NONE;
	m->node[0] = (struct huffman_node){
	    .left = NONE,
	    .right = NONE,
	    .parent = NONE,
	    .next = NONE,
	    .prev = NONE,
	    .block = NONE,
	    .symbol = SYM_NYT,
	    .weight = 0,
	};
	m->nnodes = 1;
	m->root = m->nyt = 0;
	m->leaf[SYM_NYT] = 0;
}

/* Block slots are recycled most recently freed first, as in the engine;
 * only their identity matters. */
static int16_t huffman_slot_new(struct huffman_model *m, int16_t leader)
{
	int16_t s;

	if (m->nfree > 0) {
		s = m->free_slot[--m->nfree];
	} else if (m->nslots_used < NODES_MAX) {
		s = (int16_t)m->nslots_used++;
	} else {
		m->broken = true;
		return 0;
	}
	m->leader[s] = leader;
	return s;
}

static void huffman_slot_free(struct huffman_model *m, int16_t s)
{
	if (s < 0 || m->nfree >= NODES_MAX) {
		m->broken = true;
		return;
	}
	m->leader[s] = NONE;
	m->free_slot[m->nfree++] = s;
}

static void huffman_link(struct huffman_model *m, int16_t a, int16_t b)
{
	if (a != NONE)
		m->node[a].next = b;
	if (b != NONE)
		m->node[b].prev = a;
}

/* Exchange the ranks of a and b. */
static void huffman_list_swap(struct huffman_model *m, int16_t a, int16_t b)
{
	int16_t pa = m->node[a].prev, na = m->node[a].next;
	int16_t pb = m->node[b].prev, nb = m->node[b].next;

	if (a == b)
		return;
	if (na == b) {
		huffman_link(m, pa, b);
		huffman_link(m, b, a);
		huffman_link(m, a, nb);
	} else if (nb == a) {
		huffman_link(m, pb, a);
		huffman_link(m, a, b);
		huffman_link(m, b, na);
	} else {
		huffman_link(m, pa, b);
		huffman_link(m, b, na);
		huffman_link(m, pb, a);
		huffman_link(m, a, nb);
	}
}

/* Exchange the places of a and b in the tree; neither is the other's
 * parent. Siblings work too: the second step sees the first's change. */
static void huffman_tree_swap(struct huffman_model *m, int16_t a, int16_t b)
{
	int16_t pa = m->node[a].parent, pb = m->node[b].parent;

	if (pa == NONE)
		m->root = b;
	else if (m->node[pa].left == a)
		m->node[pa].left = b;
	else
		m->node[pa].right = b;
	if (pb == NONE)
		m->root = a;
	else if (m->node[pb].left == b)
		m->node[pb].left = a;
	else
		m->node[pb].right = a;
	m->node[a].parent = pb;
	m->node[b].parent = pa;
}

/* Raise n by one, moving it first to the top of its block. */
static void huffman_raise(struct huffman_model *m, int16_t n)
{
	struct huffman_node *x = &m->node[n];
	int16_t lead;

	if (x->block == NONE) {
		m->broken = true;
		return;
	}
	if (x->next != NONE && m->node[x->next].weight == x->weight) {
		lead = m->leader[x->block];
		if (lead == NONE) {
			m->broken = true;
			return;
		}
		/* The engine moves n in the list even when the leader is its
		 * parent, but leaves the tree alone then. */
		if (lead != x->parent)
			huffman_tree_swap(m, lead, n);
		huffman_list_swap(m, lead, n);
	}
	/* n leaves its block: the node below it leads what remains. */
	if (x->prev != NONE && m->node[x->prev].weight == x->weight)
		m->leader[x->block] = x->prev;
	else
		huffman_slot_free(m, x->block);
	x->weight++;
	if (x->next != NONE && m->node[x->next].weight == x->weight)
		x->block = m->node[x->next].block;
	else
		x->block = huffman_slot_new(m, n);
}

/* Raise n and its ancestors. The engine does this recursively and, on the
 * way back down, lets a node trade ranks with its parent when the parent
 * ended up just below it; the stack replays that order. */
static void huffman_increment(struct huffman_model *m, int16_t n)
{
	int16_t path[NODES_MAX];
	int depth = 0;

	while (n != NONE) {
		if (depth == NODES_MAX) {
			m->broken = true;
			return;
		}
		huffman_raise(m, n);
		if (m->broken)
			return;
		path[depth++] = n;
		n = m->node[n].parent;
	}
	for (int i = depth - 2; i >= 0; i--) {
		struct huffman_node *x = &m->node[path[i]];
		int16_t p = x->parent;

		if (p != NONE && x->prev == p) {
			huffman_list_swap(m, path[i], p);
			if (m->leader[x->block] == path[i])
				m->leader[x->block] = p;
		}
	}
}

/* Count one more occurrence of byte c. */
static void huffman_add(struct huffman_model *m, uint8_t c)
{
	int16_t nyt = m->nyt, first, inner, leaf;

	if (m->leaf[c] != NONE) {
		huffman_increment(m, m->leaf[c]);
		return;
	}
	if (m->nnodes + 2 > NODES_MAX) {
		m->broken = true;
		return;
	}
	leaf = (int16_t)m->nnodes++;
	inner = (int16_t)m->nnodes++;
	first = m->node[nyt].next;

	/* Both enter the list just above NYT with weight 1: leaf, then inner. */
	m->node[inner] = (struct huffman_node){
	    .left = nyt,
	    .right = leaf,
	    .parent = m->node[nyt].parent,
	    .symbol = SYM_INTERNAL,
	    .weight = 1,
	};
	if (first != NONE && m->node[first].weight == 1)
		m->node[inner].block = m->node[first].block;
	else
		m->node[inner].block = huffman_slot_new(m, inner);
	m->node[leaf] = (struct huffman_node){
	    .left = NONE,
	    .right = NONE,
	    .parent = inner,
	    .block = m->node[inner].block,
	    .symbol = c,
	    .weight = 1,
	};
	huffman_link(m, inner, first);
	huffman_link(m, leaf, inner);
	huffman_link(m, nyt, leaf);

	/* inner takes NYT's place in the tree. */
	if (m->node[nyt].parent == NONE)
		m->root = inner;
	else if (m->node[m->node[nyt].parent].left == nyt)
		m->node[m->node[nyt].parent].left = inner;
	else
		m->node[m->node[nyt].parent].right = inner;
	m->node[nyt].parent = inner;
	m->leaf[c] = leaf;
	huffman_increment(m, m->node[inner].parent);
}

static bool huffman_put(struct huffman_bits *b, unsigned bit)
{
	if (b->pos >= b->cap_bits)
		return false;
	if ((b->pos & 7) == 0)
		b->out[b->pos >> 3] = 0;
	b->out[b->pos >> 3] |= (uint8_t)(bit << (b->pos & 7));
	b->pos++;
	return true;
}

static int huffman_get(struct huffman_bits *b)
{
	int bit;

	if (b->pos >= b->cap_bits)
		return -1;
	bit = (b->in[b->pos >> 3] >> (b->pos & 7)) & 1;
	b->pos++;
	return bit;
}

/* The path from the root to node n. */
static bool huffman_put_path(struct huffman_model *m, struct huffman_bits *b, int16_t n)
{
	uint8_t bits[NODES_MAX];
	int depth = 0;

	while (m->node[n].parent != NONE) {
		int16_t p = m->node[n].parent;

		if (depth == NODES_MAX)
			return false;
		bits[depth++] = m->node[p].right == n;
		n = p;
	}
	while (depth > 0)
		if (!huffman_put(b, bits[--depth]))
			return false;
	return true;
}

int huffman_encode(const char *in, size_t len, uint8_t *out, size_t outlen)
{
	struct huffman_model m;
	struct huffman_bits b = {.out = out, .cap_bits = outlen * 8, .pos = 16};
	const uint8_t *s = (const uint8_t *)in;
	size_t total;

	if (len > STREAM_MAX || outlen < 3)
		return -1;
	huffman_model_init(&m);
	out[0] = (uint8_t)(len >> 8);
	out[1] = (uint8_t)len;
	for (size_t i = 0; i < len; i++) {
		if (m.leaf[s[i]] == NONE) {
			if (!huffman_put_path(&m, &b, m.nyt))
				return -1;
			for (int k = 7; k >= 0; k--)
				if (!huffman_put(&b, (s[i] >> k) & 1))
					return -1;
		} else if (!huffman_put_path(&m, &b, m.leaf[s[i]])) {
			return -1;
		}
		huffman_add(&m, s[i]);
		if (m.broken)
			return -1;
	}
	/* The engine sends the byte holding the last bit and, when the bits
	 * end on a byte boundary, one more; we send that one as zero. */
	total = (b.pos >> 3) + 1;
	if (total > outlen)
		return -1;
	if ((b.pos & 7) == 0)
		out[total - 1] = 0;
	return (int)total;
}

int huffman_decode(const uint8_t *in, size_t len, uint8_t *out, size_t outlen)
{
	struct huffman_model m;
	struct huffman_bits b = {.in = in, .cap_bits = len * 8, .pos = 16};
	size_t count;

	if (len < 2)
		return -1;
	count = (size_t)in[0] << 8 | in[1];
	if (count > outlen)
		return -1;
	huffman_model_init(&m);
	for (size_t i = 0; i < count; i++) {
		int16_t n = m.root;
		int c = 0;

		/* Every step takes a bit, so a cycle cannot outlast the input. */
		while (m.node[n].symbol == SYM_INTERNAL) {
			int bit = huffman_get(&b);

			if (bit < 0)
				return -1;
			n = bit ? m.node[n].right : m.node[n].left;
			if (n == NONE)
				return -1;
		}
		if (m.node[n].symbol == SYM_NYT) {
			for (int k = 0; k < 8; k++) {
				int bit = huffman_get(&b);

				if (bit < 0)
					return -1;
				c = c << 1 | bit;
			}
		} else {
			c = m.node[n].symbol;
		}
		out[i] = (uint8_t)c;
		/* A known byte sent again as new is what the engine accepts too:
		 * it counts the existing leaf. */
		huffman_add(&m, (uint8_t)c);
		if (m.broken)
			return -1;
	}
	return (int)count;
}

static const char connect_prefix[] = "\xff\xff\xff\xff"
				     "connect";

int huffman_decode_connect(const uint8_t *pkt, size_t len, char *out, size_t outlen)
{
	/* Quotes around the userinfo, and room for them. */
	uint8_t text[HUFFMAN_INFO_MAX + 2];
	size_t i = 0, start, end;
	int n;

	/* The engine decodes only for this exact, case-sensitive prefix and
	 * does not look at byte 11, the space. */
	if (len < HUFFMAN_CONNECT_OFFSET + 2 || memcmp(pkt, connect_prefix, 11) != 0)
		return -1;
	n = huffman_decode(pkt + HUFFMAN_CONNECT_OFFSET, len - HUFFMAN_CONNECT_OFFSET, text,
			   sizeof(text));
	if (n < 0)
		return -1;
	/* The server reads one line and takes its first argument: quoted up
	 * to the next quote, else up to white space. */
	while (i < (size_t)n && (text[i] == ' ' || text[i] == '\t'))
		i++;
	if (i < (size_t)n && text[i] == '"') {
		start = ++i;
		while (i < (size_t)n && text[i] != '"' && text[i] != '\0' && text[i] != '\n')
			i++;
	} else {
		start = i;
		while (i < (size_t)n && text[i] > ' ')
			i++;
	}
	end = i;
	if (end - start > HUFFMAN_INFO_MAX || end - start >= outlen)
		return -1;
	memcpy(out, text + start, end - start);
	out[end - start] = '\0';
	return (int)(end - start);
}
