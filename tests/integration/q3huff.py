# SPDX-License-Identifier: ISC
"""The adaptive Huffman coding of a Quake 3 family "connect" packet, encoder
only, for tests that join a real game server: the same model as
src/game/huffman.c (read it for the why of each step), in Python.

    connect_packet('\\challenge\\123\\qport\\4711\\protocol\\71\\name\\p1')
"""

NYT = 256
INTERNAL = 257
NONE = -1


class _Node:
    __slots__ = ("left", "right", "parent", "next", "prev", "block", "symbol", "weight")

    def __init__(self, symbol, weight=0, parent=NONE):
        self.left = self.right = NONE
        self.parent = parent
        self.next = self.prev = NONE
        self.block = NONE
        self.symbol = symbol
        self.weight = weight


class _Model:
    def __init__(self):
        self.node = [_Node(NYT)]
        self.leaf = {NYT: 0}
        self.leader = []
        self.free = []
        self.root = self.nyt = 0

    def slot_new(self, leader):
        if self.free:
            s = self.free.pop()
            self.leader[s] = leader
        else:
            s = len(self.leader)
            self.leader.append(leader)
        return s

    def slot_free(self, s):
        self.leader[s] = NONE
        self.free.append(s)

    def link(self, a, b):
        if a != NONE:
            self.node[a].next = b
        if b != NONE:
            self.node[b].prev = a

    def list_swap(self, a, b):
        if a == b:
            return
        N = self.node
        pa, na, pb, nb = N[a].prev, N[a].next, N[b].prev, N[b].next
        if na == b:
            self.link(pa, b), self.link(b, a), self.link(a, nb)
        elif nb == a:
            self.link(pb, a), self.link(a, b), self.link(b, na)
        else:
            self.link(pa, b), self.link(b, na), self.link(pb, a), self.link(a, nb)

    def tree_swap(self, a, b):
        N = self.node
        pa, pb = N[a].parent, N[b].parent
        if pa == NONE:
            self.root = b
        elif N[pa].left == a:
            N[pa].left = b
        else:
            N[pa].right = b
        if pb == NONE:
            self.root = a
        elif N[pb].left == b:
            N[pb].left = a
        else:
            N[pb].right = a
        N[a].parent, N[b].parent = pb, pa

    def raise_(self, n):
        N = self.node
        x = N[n]
        if x.next != NONE and N[x.next].weight == x.weight:
            lead = self.leader[x.block]
            if lead != x.parent:
                self.tree_swap(lead, n)
            self.list_swap(lead, n)
        if x.prev != NONE and N[x.prev].weight == x.weight:
            self.leader[x.block] = x.prev
        else:
            self.slot_free(x.block)
        x.weight += 1
        if x.next != NONE and N[x.next].weight == x.weight:
            x.block = N[x.next].block
        else:
            x.block = self.slot_new(n)

    def increment(self, n):
        path = []
        while n != NONE:
            self.raise_(n)
            path.append(n)
            n = self.node[n].parent
        for i in range(len(path) - 2, -1, -1):
            x = self.node[path[i]]
            p = x.parent
            if p != NONE and x.prev == p:
                self.list_swap(path[i], p)
                if self.leader[x.block] == path[i]:
                    self.leader[x.block] = p

    def add(self, c):
        N = self.node
        if c in self.leaf and c != NYT:
            self.increment(self.leaf[c])
            return
        nyt = self.nyt
        leaf, inner = len(N), len(N) + 1
        first = N[nyt].next
        inn = _Node(INTERNAL, 1, N[nyt].parent)
        inn.left, inn.right = nyt, leaf
        if first != NONE and N[first].weight == 1:
            inn.block = N[first].block
        else:
            inn.block = NONE
        N.append(_Node(c, 1, inner))
        N.append(inn)
        if inn.block == NONE:
            inn.block = self.slot_new(inner)
        N[leaf].block = inn.block
        self.link(inner, first)
        self.link(leaf, inner)
        self.link(nyt, leaf)
        par = N[nyt].parent
        if par == NONE:
            self.root = inner
        elif N[par].left == nyt:
            N[par].left = inner
        else:
            N[par].right = inner
        N[nyt].parent = inner
        self.leaf[c] = leaf
        self.increment(inn.parent)

    def path(self, n):
        bits = []
        while self.node[n].parent != NONE:
            p = self.node[n].parent
            bits.append(1 if self.node[p].right == n else 0)
            n = p
        return bits[::-1]


def encode(data):
    """data (bytes) as the engine's Huff_Compress writes it: a 2-byte length,
    then the bits, least significant first in each byte."""
    m = _Model()
    bits = []
    for c in data:
        if c not in m.leaf:
            bits += m.path(m.nyt)
            bits += [(c >> k) & 1 for k in range(7, -1, -1)]
        else:
            bits += m.path(m.leaf[c])
        m.add(c)
    out = bytearray(len(bits) // 8 + 1)
    for i, b in enumerate(bits):
        out[i >> 3] |= b << (i & 7)
    return bytes([len(data) >> 8 & 0xff, len(data) & 0xff]) + bytes(out)


def connect_packet(userinfo):
    """A whole connect packet carrying userinfo (str), quoted."""
    text = ('"' + userinfo + '"').encode("latin-1")
    return b"\xff\xff\xff\xffconnect " + encode(text)
