#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""TURN over TCP: what a connection's queued sends hold is bounded as
memory (attacker8 findings 2 and 5). Connections that never read and send
thousands of Binding requests keep the relay's RSS within a few MiB (a
queued 60-byte answer holds a 2000-byte block, and an unauthenticated
connection may hold 32 KiB); an authenticated client that never reads its
ChannelData frames is counted client_slow once it holds 256 KiB;
and connections the relay closes with a stuck queue give their slots back,
so newcomers evict them and none is refused as full."""

import collections
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import turnutil as T  # noqa: E402

CAP, NCONN, NREQ = 40, 40, 8000


def flooder(src, port, req):
    """A connection from src with a 1 KiB receive window that sends req and
    never reads."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.bind((src, 0))
    s.settimeout(2 * H.SLOW)
    s.connect(("127.0.0.1", port))
    s.setblocking(False)
    try:
        s.send(req)
    except BlockingIOError:
        pass
    return s


def relayed(a):
    v = a[T.A_RELAYED][0]
    port = struct.unpack("!H", v[2:4])[0] ^ (T.COOKIE >> 16)
    ip = socket.inet_ntoa(struct.pack("!I", struct.unpack("!I", v[4:8])[0] ^ T.COOKIE))
    return ip, port


def test(ctx):
    port, ops = T.free_port(), H.free_tcp_port()
    relay = T.start_relay(ctx, port, "--turn-tcp-max-connections", str(CAP),
                          "--turn-tcp-max-per-ip", "64", "--turn-tcp-auth-timeout", "20s",
                          "--turn-allow-peer", "127.0.0.1/32", *H.turn_ports(40, allocations=False),
                          "--turn-max-allocations", "20", "--ops-listen", f"127.0.0.1:{ops}",
                          # Thousands of Bindings a connection: past the
                          # unauthenticated answers' budget a connection
                          # is closed, and this is about the held ones.
                          "--turn-unauth-ip-rate", "1000000", "--turn-unauth-ip-burst",
                          "1000000", "--turn-unauth-rate", "1000000",
                          "--turn-unauth-burst", "1000000")

    nw, rkey = H.relay_workers(relay)
    rss_says_nothing = ctx.asan
    if ctx.asan:
        ctx.note("AddressSanitizer build: its quarantine keeps freed blocks, so the RSS "
                 "bounds are checked by the plain builds only")

    def ips(start, per_worker):
        """per_worker distinct addresses landing on each worker."""
        got, n = [], collections.Counter()
        for i in range(start, start + 20 * per_worker * nw):
            ip = H.spread_ip(i)
            w = H.reuseport_worker(rkey, ip, nw)
            if n[w] < per_worker:
                n[w] += 1
                got.append(ip)
        H.expect_eq(len(got), per_worker * nw, f"addresses per worker {n}")
        return got

    def m():
        return T.metrics(ops)[1]

    def dropped(reason, name="etrelay_turn_tcp_dropped_total"):
        return T.value(m(), name, reason=reason)

    # Finding 2: NCONN never-reading connections x NREQ Bindings (60 kB).
    binding = b"".join(T.message(T.BINDING, os.urandom(12), [], fingerprint=False)
                       for _ in range(NREQ))
    r0 = H.rss_kib(relay.pid)
    held = [flooder(ip, port, binding) for ip in ips(0, NCONN)]
    time.sleep(2 * H.SLOW)
    grew = H.rss_kib(relay.pid) - r0
    H.check(rss_says_nothing or grew < 16 * 1024,
            f"{NCONN} never-reading connections sending {NREQ} Bindings each grew the "
            f"relay's RSS by {grew} kB (bound 16 MiB)")

    # Finding 5: as many fresh connections again: each evicts one of the
    # stuck unauthenticated ones, whose slot comes back; none is full.
    fresh = [flooder(ip, port, b"") for ip in ips(5000, NCONN)]
    time.sleep(1.0 * H.SLOW)
    H.expect_eq(dropped("full"), 0, "refused as full while every open connection was "
                "unauthenticated (closed ones with stuck sends held their slots)")
    H.check(dropped("evicted") >= NCONN * nw, "the fresh connections did not evict")
    for s in held + fresh:
        s.close()

    # An authenticated client that never reads ChannelData of 1 byte: its
    # queue fills at 256 KiB of blocks and the rest is counted client_slow.
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    c.settimeout(3 * H.SLOW)
    c.connect(("127.0.0.1", port))
    transport = T.u32(T.A_TRANSPORT, 17 << 24)
    cls, _, _, a = T.stun_tcp(c, T.message(T.ALLOCATE, os.urandom(12), [transport]))
    H.expect_eq((cls, T.error_code(a)), (T.ERROR, 401), "an unsigned Allocate")
    realm, nonce = a[T.A_REALM][0], a[T.A_NONCE][0]
    user, pw = T.rest_credentials(T.SECRET, "slow")
    key = T.longterm_key(user, pw, realm.decode())
    cls, _, _, a = T.stun_tcp(c, T.message(T.ALLOCATE, os.urandom(12),
                                         [transport] + T.signed(user, realm, nonce), key=key))
    H.expect_eq(cls, T.SUCCESS, "a signed Allocate over TCP")
    rel = relayed(a)
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind(("127.0.0.1", 0))
    chan = struct.pack("!HH", 0x4000, 0)
    cls, _, _, a = T.stun_tcp(c, T.message(T.CHANNEL_BIND, os.urandom(12),
                                         [T.attr(0x000C, chan),
                                          T.xor_peer("127.0.0.1", peer.getsockname()[1])]
                                         + T.signed(user, realm, nonce), key=key))
    H.expect_eq(cls, T.SUCCESS, f"ChannelBind over TCP {T.error_code(a)}")
    r0 = H.rss_kib(relay.pid)
    for i in range(80000):
        peer.sendto(b"x", rel)
        if i % 2000 == 1999:
            time.sleep(0.01)
    time.sleep(1.0 * H.SLOW)
    grew = H.rss_kib(relay.pid) - r0
    H.check(rss_says_nothing or grew < 8 * 1024,
            f"80000 1-byte ChannelData toward a client that never reads grew the RSS by "
            f"{grew} kB (bound 8 MiB)")
    # More than the kernel's send buffer (4 MiB at most) and the queue's
    # 256 KiB: the rest is counted client_slow, and memory stays bounded.
    big = b"y" * 1000
    for i in range(10000):
        peer.sendto(big, rel)
        if i % 500 == 499:
            # paced (more under valgrind) so the relay's receive queue
            # does not drop what must reach the client's queue
            time.sleep(0.01 * H.SLOW * H.SLOW)
    time.sleep(1.0 * H.SLOW)
    slow = dropped("client_slow", "etrelay_turn_dropped_total")
    grew = H.rss_kib(relay.pid) - r0
    H.check(slow > 0, "10 MB of ChannelData toward a client that never reads: none counted "
            "client_slow")
    H.check(rss_says_nothing or grew < 8 * 1024,
            f"a client that never reads its ChannelData grew the RSS by {grew} kB (bound 8 MiB)")
    c.close()
    peer.close()
    H.check(relay.alive(), "etrelay died")


if __name__ == "__main__":
    H.main(test)
