#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Only an allocation keeps a TURN TCP connection from giving way at
tcp-max-connections (attacker10 finding 1). One address with one credential
fills a worker's share: each connection sends a signed Allocate, QUOTA get
allocations and the rest are answered 486 (user-quota), authenticated but
holding nothing. Newcomers from other addresses of that worker then evict
the 486 ones (counted evicted) and get their allocations; the connections
with allocations stay. When every slot holds an allocation a newcomer is
refused (full), and a warning says so (once a minute)."""

import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import turnutil as T  # noqa: E402

CAP, QUOTA = 12, 3


def allocate(src, port, userid):
    """A TCP connection from src that sent an Allocate signed by userid's
    REST credential: (socket, its answer's class and error code)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(3 * H.SLOW)
    s.connect(("127.0.0.1", port))
    req = [T.u32(T.A_TRANSPORT, 17 << 24)]
    cls, _, _, a = T.stun_tcp(s, T.message(T.ALLOCATE, os.urandom(12), req))
    H.expect_eq((cls, T.error_code(a)), (T.ERROR, 401), "answer to an unsigned Allocate")
    realm, nonce = a[T.A_REALM][0], a[T.A_NONCE][0]
    user, pw = T.rest_credentials(T.SECRET, userid)
    cls, _, _, a = T.stun_tcp(s, T.message(T.ALLOCATE, os.urandom(12),
                                           req + T.signed(user, realm, nonce),
                                           key=T.longterm_key(user, pw, realm.decode())))
    return s, cls, T.error_code(a)


def test(ctx):
    port, ops = T.free_port(), H.free_tcp_port()
    asked = int(H.WORKERS) if H.WORKERS.isdigit() else 1
    relay = T.start_relay(ctx, port, "--turn-tcp-max-connections", str(CAP * asked),
                          "--turn-tcp-max-per-ip", "64", "--turn-user-quota", str(QUOTA),
                          "--turn-allow-peer", "127.0.0.1/32", *H.turn_ports(100),
                          "--ops-listen", f"127.0.0.1:{ops}")
    nw, rkey = H.relay_workers(relay)
    H.expect_eq(nw, asked, "workers")
    worker = lambda ip: H.reuseport_worker(rkey, ip, nw)  # noqa: E731

    def m():
        return T.metrics(ops)[1]

    def dropped(s, why):
        return T.value(s, "etrelay_turn_tcp_dropped_total", reason=why)

    # One address, one credential: the worker's whole share, QUOTA with
    # allocations, the rest answered 486.
    attacker = "127.0.0.2"
    w = worker(attacker)
    held, answered = [], []
    for _ in range(CAP):
        s, cls, code = allocate(attacker, port, "one")
        held.append(s)
        answered.append(code if cls == T.ERROR else 200)
    H.expect_eq(answered, [200] * QUOTA + [486] * (CAP - QUOTA),
                "answers to one credential's Allocates")
    s = m()
    H.expect_eq(T.value(s, "etrelay_turn_tcp_connections", transport="tcp"), CAP,
                "connections open after the fill")
    H.expect_eq(T.value(s, "etrelay_turn_tcp_unauthenticated_connections"), 0,
                "unauthenticated connections after the fill")
    H.expect_eq(dropped(s, "full") + dropped(s, "evicted"), 0, "refused or evicted by the fill")

    # Newcomers on that worker (each its own address and userid) make the
    # 486 connections give way, oldest first, and allocate.
    mine = [ip for ip in (H.spread_ip(i) for i in range(600, 900)) if worker(ip) == w]
    newcomers = []
    for k in range(CAP - QUOTA):
        s, cls, code = allocate(mine[k], port, f"new{k}")
        newcomers.append(s)
        H.expect_eq((cls, code), (T.SUCCESS, None), f"newcomer {k}'s Allocate")
    H.wait_until(lambda: all(T.closed_by_server(c) for c in held[QUOTA:]), 2 * H.SLOW,
                 "the 486 connections to be closed", interval=0.02)
    H.check(not any(T.closed_by_server(c) for c in held[:QUOTA]),
            "a connection with an allocation was evicted")
    H.check(not any(T.closed_by_server(c) for c in newcomers), "a newcomer was closed")
    s = m()
    H.expect_eq(dropped(s, "evicted"), CAP - QUOTA, "connections evicted by the newcomers")
    H.expect_eq(dropped(s, "full"), 0, "newcomers refused as full")
    H.expect_eq(T.value(s, "etrelay_turn_allocations_active"), CAP, "allocations")

    # Every slot holds an allocation: the next one is refused, and said.
    start = len(relay.text_lines())
    extra = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    extra.bind((mine[CAP], 0))
    extra.settimeout(3 * H.SLOW)
    extra.connect(("127.0.0.1", port))
    H.wait_until(lambda: T.closed_by_server(extra), 2 * H.SLOW, "the connection beyond CAP closed",
                 interval=0.02)
    relay.wait_for_line(r"turn default: tcp-max-connections \d+ \(\d+ this worker\) all hold "
                        r"allocations: a connection from 127\.1\.\S+ refused \(full",
                        2 * H.SLOW, start=start, what="the full warning")
    s = m()
    H.expect_eq(dropped(s, "full"), 1, "refused as full with every slot allocated")
    H.check(not any(T.closed_by_server(c) for c in held[:QUOTA] + newcomers),
            "a connection with an allocation was closed")
    for c in held + newcomers + [extra]:
        c.close()
    H.check(relay.alive(), "etrelay died")


if __name__ == "__main__":
    H.main(test)
