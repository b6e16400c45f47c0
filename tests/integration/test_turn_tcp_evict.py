#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""TURN over TCP and TLS cannot be locked out by connections that never
authenticate (attacker7 finding 1). Silent connections from many 127/8
addresses fill tcp-max-connections on every worker; new ones then evict
the oldest unauthenticated connection (counted evicted), so while they keep coming turnutils_uclient -t and -t -S
still allocate and relay every message. etrelay_turn_tcp_connections shows
the table full. tcp-auth-timeout closes a silent connection at its deadline
(counted auth_timeout) and not one whose request passed MESSAGE-INTEGRITY;
when every slot of a worker holds an authenticated connection without an
allocation a new one makes the oldest of them give way (evicted: only an
allocation protects, test_turn_tcp_quota). A request signed with an
expired credential does not make its connection authenticated (attacker8
finding 1)."""

import collections
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import tlsutil  # noqa: E402
import turnutil as T  # noqa: E402

CAP, PER_IP, AUTH_S = 32, 4, 3.0
# Filling addresses per worker: more than CAP / PER_IP (the table fills),
# fewer than CAP (each holds several, as an attack under the default caps
# of 4096 and 64 does; a real client holds one).
FILL_IPS = 12


def silent(src, port):
    """A connection from src that never sends (connect in progress)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    return s


def stun_tcp(s, data):
    """Send a STUN request on stream s, read its answer: (class, code)."""
    cls, _, _, a = T.stun_tcp(s, data)
    return cls, T.error_code(a), a


def signed(src, port, lifetime=86400):
    """A TCP connection from src that sent a Refresh signed with a REST
    credential of that lifetime (negative: expired). (socket, its answer's
    error code)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(3 * H.SLOW)
    s.connect(("127.0.0.1", port))
    cls, code, a = stun_tcp(s, T.message(T.ALLOCATE, os.urandom(12),
                                         [T.u32(T.A_TRANSPORT, 17 << 24)]))
    H.expect_eq((cls, code), (T.ERROR, 401), "answer to an unsigned Allocate over TCP")
    realm, nonce = a[T.A_REALM][0], a[T.A_NONCE][0]
    user, pw = T.rest_credentials(T.SECRET, "held", lifetime=lifetime)
    cls, code, _ = stun_tcp(s, T.message(T.REFRESH, os.urandom(12),
                                         T.signed(user, realm, nonce),
                                         key=T.longterm_key(user, pw, realm.decode())))
    return s, code


def authenticated(src, port):
    """A TCP connection from src whose signed Refresh passed
    MESSAGE-INTEGRITY (437: it has no allocation)."""
    s, code = signed(src, port)
    H.expect_eq(code, 437, "a signed Refresh without an allocation")
    return s


def test(ctx):
    T.require_coturn()
    H.require_tool("openssl")
    key, cert = tlsutil.make_cert(ctx.tmpdir(), "turn.test")
    port, tls_port, ops = T.free_port(), H.free_tcp_port(), H.free_tcp_port()
    peer = T.Peer()
    ctx.objs.append(peer)
    # tcp-max-connections is the listener's total, split evenly across the
    # workers: CAP slots on each worker.
    asked = int(H.WORKERS) if H.WORKERS.isdigit() else 1
    relay = T.start_relay(ctx, port, "--turn-tls-listen", f"127.0.0.1:{tls_port}",
                          "--turn-tls-cert", cert, "--turn-tls-key", key,
                          "--turn-tcp-max-connections", str(CAP * asked),
                          "--turn-tcp-max-per-ip", str(PER_IP),
                          "--turn-tcp-auth-timeout", f"{AUTH_S:g}s",
                          "--turn-allow-peer", "127.0.0.1/32", *H.turn_ports(100),
                          "--ops-listen", f"127.0.0.1:{ops}")
    nw, rkey = H.relay_workers(relay)
    H.expect_eq(nw, asked, "workers")
    worker = lambda ip: H.reuseport_worker(rkey, ip, nw)  # noqa: E731

    def m():
        return T.metrics(ops)[1]

    def open_now(s):
        return (T.value(s, "etrelay_turn_tcp_connections", transport="tcp") +
                T.value(s, "etrelay_turn_tcp_connections", transport="tls"))

    # Fill: FILL_IPS addresses per worker x PER_IP silent connections, TCP
    # and TLS ports in turn: each worker gets 48 for its 32 slots.
    ips, per_worker = [], collections.Counter()
    for ip in (H.spread_ip(i) for i in range(1000)):
        if per_worker[worker(ip)] < FILL_IPS:
            per_worker[worker(ip)] += 1
            ips.append(ip)
    H.expect_eq(len(ips), FILL_IPS * nw, f"filling addresses per worker {per_worker}")
    held = []
    for k in range(PER_IP):
        for ip in ips:
            held.append(silent(ip, port if k % 2 == 0 else tls_port))
    n = len(held)
    H.wait_until(lambda: T.value(m(), "etrelay_turn_tcp_dropped_total", reason="evicted")
                 >= n - nw * CAP, 5 * H.SLOW, "the fill to evict")
    s = m()
    H.expect_eq(open_now(s), nw * CAP, "connections open (the gauge) after the fill")
    H.expect_eq(T.value(s, "etrelay_turn_tcp_unauthenticated_connections"), nw * CAP,
                "unauthenticated connections after the fill")
    H.expect_eq(T.value(s, "etrelay_turn_tcp_dropped_total", reason="evicted"), n - nw * CAP,
                "connections evicted by the fill")
    H.expect_eq(T.value(s, "etrelay_turn_tcp_dropped_total", reason="full"), 0,
                "connections refused as full")

    # While silent connections keep coming (about 200/s; under valgrind,
    # ETRELAY_SLOW 5, 8/s), coturn's client over TCP and over TLS allocates and relays
    # every message: the oldest unauthenticated connection gives way, so a
    # real client is safe while fewer than CAP newcomers arrive within its
    # authentication (a few round trips; valgrind makes them slow: at
    # 200/s the 32 slots turned over before its Allocate and it was reset).
    stop = threading.Event()
    churned = [0]

    def churn():
        q = collections.deque()
        i = 0
        while not stop.is_set() and i < 5000:
            ip = ips[i % len(ips)]
            q.append(silent(ip, port if i % 2 else tls_port))
            if len(q) > 300:
                q.popleft().close()
            i += 1
            time.sleep(0.005 * H.SLOW * H.SLOW)
        churned[0] = i
        for c in q:
            c.close()

    t = threading.Thread(target=churn, daemon=True)
    t.start()
    try:
        runs = T.parallel([lambda: T.uclient(port, "tcp", peer_port=peer.port, opts=["-t"]),
                           lambda: T.uclient(tls_port, "tls", peer_port=peer.port,
                                             opts=["-t", "-S"])])
    finally:
        stop.set()
        t.join(10)
    for r, what in zip(runs, ("TCP", "TLS")):
        H.check(r.ok(10), f"a real client over {what} while the table is churned: {r!r}")
    s = m()
    H.check(churned[0] > 100 / H.SLOW, f"only {churned[0]} connections churned")
    H.check(T.value(s, "etrelay_turn_tcp_dropped_total", reason="evicted") >=
            n - nw * CAP + churned[0] // 2, "the churn did not evict")
    H.expect_eq(T.value(s, "etrelay_turn_tcp_dropped_total", reason="full"), 0,
                "refused as full while unauthenticated ones could give way")
    for c in held:
        c.close()

    # tcp-auth-timeout: a silent connection is closed at its deadline, an
    # authenticated one (no allocation) stays.
    a = authenticated("127.0.0.2", port)
    t0 = time.monotonic()
    q = silent("127.0.0.3", port)
    H.wait_until(lambda: T.closed_by_server(q), AUTH_S + 2 * H.SLOW,
                 "the silent connection's auth timeout", interval=0.02)
    took = time.monotonic() - t0
    H.check(AUTH_S - 0.3 <= took <= AUTH_S + 1.0 * H.SLOW,
            f"a silent connection closed after {took:.2f} s (tcp-auth-timeout {AUTH_S:g} s)")
    H.check(not T.closed_by_server(a), "the authenticated connection was closed")
    q.close()
    H.wait_until(lambda: T.value(m(), "etrelay_turn_tcp_unauthenticated_connections") == 0,
                 AUTH_S + 2 * H.SLOW, "every unauthenticated connection to time out")
    s = m()
    H.check(T.value(s, "etrelay_turn_tcp_dropped_total", reason="auth_timeout") >= 1,
            "the auth timeout was not counted")
    H.expect_eq(open_now(s), 1, "connections open: the authenticated one")

    # A request signed with a credential that expired a week ago passes
    # MESSAGE-INTEGRITY but gets nothing: its connection stays
    # unauthenticated (evictable, and closed at the auth timeout). It made
    # connections that could not give way before (attacker8: a week-old
    # credential filled the table and locked real clients out).
    e, code = signed("127.0.0.4", port, lifetime=-7 * 86400)
    H.check(code in (401, 437), f"a Refresh signed with an expired credential: {code}")
    H.expect_eq(T.value(m(), "etrelay_turn_tcp_unauthenticated_connections"), 1,
                "unauthenticated connections after an expired credential's request")
    H.wait_until(lambda: T.closed_by_server(e), AUTH_S + 2 * H.SLOW,
                 "the expired credential's connection to reach its auth timeout",
                 interval=0.05)
    e.close()

    # Every slot of a worker authenticated, none with an allocation: a new
    # connection there makes the oldest (a) give way; the others stay.
    w = worker("127.0.0.2")
    mine = [ip for ip in (H.spread_ip(i) for i in range(100, 400)) if worker(ip) == w]
    auth = [a] + [authenticated(mine[k // PER_IP], port) for k in range(CAP - 1)]
    evicted = T.value(m(), "etrelay_turn_tcp_dropped_total", reason="evicted")
    extra = silent(mine[CAP], port)
    H.wait_until(lambda: T.closed_by_server(a), 2 * H.SLOW,
                 "the oldest authenticated connection without an allocation to give way")
    s = m()
    H.expect_eq(T.value(s, "etrelay_turn_tcp_dropped_total", reason="evicted"), evicted + 1,
                "evicted with every slot authenticated, none allocated")
    H.expect_eq(T.value(s, "etrelay_turn_tcp_dropped_total", reason="full"), 0,
                "refused as full while one without an allocation could give way")
    H.check(not any(T.closed_by_server(c) for c in auth[1:] + [extra]),
            "a connection other than the oldest was closed")
    H.expect_eq(open_now(s), CAP, "connections open with every slot authenticated")
    for c in auth + [extra]:
        c.close()
    H.check(relay.alive(), "etrelay died")


if __name__ == "__main__":
    H.main(test)
