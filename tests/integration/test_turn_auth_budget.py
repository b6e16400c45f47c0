#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""What an outside attacker costs a TURN listener before it authenticates
(attacker9 findings 3, 4 and 8).

Half frames (finding 3): 300 connections per worker each send the 4 bytes
of a header announcing 64 KiB (ChannelData, or a STUN message) and hold,
150 more announce 512 bytes. They used to spend the worker's 16 MiB of
frame memory (counted by the length announced), and a real client whose
frames came in two segments was closed. Now an unauthenticated connection may send neither ChannelData
nor a frame over 1500 bytes (closed, tcp_dropped unauth_channel and
unauth_large) and memory counts the bytes that came: the client allocates.

Forged MACs (finding 4): connections from one address sending requests
with a wrong MESSAGE-INTEGRITY were checked without limit over TCP; now
that source's failures pass auth-fail-ip-burst and the connections are
closed (tcp_dropped auth_rate_ip) while a valid client allocates; a player
behind the same address keeps refreshing its allocation (its own key, one
MAC), a new allocation from there is dropped unchecked. With the
listener's auth-fail budget spent by failures from many addresses, a
username that passed before is still checked (its key is kept) while a new
one is refused without HMAC work (auth_rate).

Pipelined requests (the rule for the game's thread): unsigned Allocates
pipelined over TCP, 3000 a read, each 401 an HMAC, moved a UDP Binding's
median from 0.07 to 52 ms; unauthenticated answers over TCP and TLS now
take the unauth-ip-rate and unauth-rate tokens UDP's do, and past them the
connection is closed (tcp_dropped unauth_rate_ip, unauth_rate).

Own address (finding 8): the relay's address is a peer on relayed ports
with a live allocation only: a ChannelBind to a port of the range where
another service listens (WireGuard's 51820 in the default range) gets 403,
and a Send indication there is dropped; to another client's relayed port
both go through, and a channel bound there carries until that allocation
ends, then nothing."""

import collections
import os
import resource
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import turnutil as T  # noqa: E402

A_DATA, SEND, DATA, A_CHANNEL = 0x0013, 0x006, 0x007, 0x000C
INDICATION = 1


def m_value(ops, name, **labels):
    return T.value(T.metrics(ops)[1], name, **labels)


def tcp_dropped(ops, reason):
    return m_value(ops, "etrelay_turn_tcp_dropped_total", reason=reason)


def connect(src, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(3 * H.SLOW)
    s.connect(("127.0.0.1", port))
    return s


def read_msg(s):
    """One whole STUN message from stream s: parse()'s tuple."""
    got = b""
    deadline = time.monotonic() + 3 * H.SLOW
    while time.monotonic() < deadline:
        if len(got) >= 20 and len(got) >= 20 + int.from_bytes(got[2:4], "big"):
            return T.parse(got)
        b = s.recv(4096)
        if not b:
            break
        got += b
    H.fail(f"no STUN answer on TCP: {got!r}")


def ask_split(s, data):
    """Send a request in two segments (its first 10 bytes, 30 ms, the
    rest) and read the answer."""
    s.sendall(data[:10])
    time.sleep(0.03)
    s.sendall(data[10:])
    return read_msg(s)


def xor_addr(v):
    port = struct.unpack("!H", v[2:4])[0] ^ (T.COOKIE >> 16)
    ip = struct.unpack("!I", v[4:8])[0] ^ T.COOKIE
    return socket.inet_ntoa(struct.pack("!I", ip)), port


UDP = [T.u32(T.A_TRANSPORT, 17 << 24)]


def allocate_tcp(s, userid, split=False):
    """An Allocate on TCP connection s (401, then signed): the answer's
    (class, error code, attrs)."""
    ask = (lambda d: ask_split(s, d)) if split else (lambda d: T.stun_tcp(s, d))
    cls, _, _, a = ask(T.message(T.ALLOCATE, os.urandom(12), UDP))
    H.expect_eq((cls, T.error_code(a)), (T.ERROR, 401), "an unsigned Allocate over TCP")
    realm, nonce = a[T.A_REALM][0], a[T.A_NONCE][0]
    user, pw = T.rest_credentials(T.SECRET, userid)
    cls, _, _, a = ask(T.message(T.ALLOCATE, os.urandom(12), UDP + T.signed(user, realm, nonce),
                                 key=T.longterm_key(user, pw, realm.decode())))
    return cls, T.error_code(a), a


# --------------------------------------------------------------------------


def half_frames(ctx):
    """Finding 3."""
    # 450 connections a worker, held at once by this process.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 4096:
        want = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    port, ops = T.free_port(), H.free_tcp_port()
    lo, hi = H.free_udp_range(20)
    asked = int(H.WORKERS) if H.WORKERS.isdigit() else 1
    relay = T.start_relay(ctx, port, "--turn-ports", f"{lo}-{hi}", "--turn-max-allocations", str(hi - lo + 1),
                          "--turn-tcp-max-connections", str(600 * asked),
                          "--turn-tcp-max-per-ip", "64", "--turn-tcp-auth-timeout", "30s",
                          "--ops-listen", f"127.0.0.1:{ops}")
    nw, key = H.relay_workers(relay)
    per_worker, ips = collections.Counter(), []
    for ip in (H.spread_ip(i) for i in range(2000)):
        w = H.reuseport_worker(key, ip, nw)
        if per_worker[w] < 10:  # 10 x 45 = 450 connections a worker
            per_worker[w] += 1
            ips.append(ip)
    H.expect_eq(len(ips), 10 * nw, f"addresses per worker {per_worker}")
    # 300 a worker announce 64 KiB: ChannelData, or an Allocate. Then 150
    # announce 512 bytes (a request's size), which used to fill what the
    # large ones left of the 16 MiB to the last 512 bytes.
    headers = (struct.pack("!HH", 0x4000, 0xFFFF), struct.pack("!HH", 0x0003, 0xFFFC),
               struct.pack("!HH", 0x0001, 512 - 20))
    held, small = [], []
    for k in range(45):
        for ip in ips:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((ip, 0))
            s.settimeout(3 * H.SLOW)
            s.connect(("127.0.0.1", port))
            s.sendall(headers[2 if k >= 30 else (k + len(held)) % 2])
            (small if k >= 30 else held).append(s)
    n = len(held)
    H.check(n >= 300 * nw, f"only {n} connections")

    def seen():
        """Half frames the relay has taken in: held open, or closed."""
        s = T.metrics(ops)[1]
        v = [H.metric_value(s, "etrelay_turn_tcp_connections", listener="default",
                            transport="tcp"),
             H.metric_value(s, "etrelay_turn_tcp_dropped_total", listener="default",
                            reason="unauth_channel"),
             H.metric_value(s, "etrelay_turn_tcp_dropped_total", listener="default",
                            reason="unauth_large"),
             H.metric_value(s, "etrelay_turn_tcp_dropped_total", listener="default",
                            reason="frame_memory")]
        return sum(x or 0 for x in v) >= n + len(small)
    H.wait_until(seen, 10 * H.SLOW, "every half frame's connection to be taken in")
    # A real client (from an address of its own, on every worker), whose
    # every frame arrives in two segments, allocates.
    for w in range(nw):
        src = next(ip for ip in (H.spread_ip(i) for i in range(3000, 4000))
                   if H.reuseport_worker(key, ip, nw) == w)
        c = connect(src, port)
        cls, code, a = allocate_tcp(c, f"split{w}", split=True)
        H.expect_eq((cls, code), (T.SUCCESS, None), f"worker {w}: Allocate in two segments")
        H.check(T.A_RELAYED in a, "no XOR-RELAYED-ADDRESS")
        c.close()
    H.expect_eq(tcp_dropped(ops, "frame_memory"), 0, "connections closed for frame memory")
    H.wait_until(lambda: tcp_dropped(ops, "unauth_channel") + tcp_dropped(ops, "unauth_large")
                 >= n, 10 * H.SLOW, "every unauthenticated half frame to be refused")
    H.check(tcp_dropped(ops, "unauth_channel") >= n // 3, "ChannelData before authentication")
    H.check(tcp_dropped(ops, "unauth_large") >= n // 3, "a large frame before authentication")
    H.wait_until(lambda: all(T.closed_by_server(s) for s in held), 5 * H.SLOW,
                 "the half frames' connections to be closed")
    H.check(not any(T.closed_by_server(s) for s in small),
            "a connection that announced a request's size was closed")
    for s in held + small:
        s.close()
    H.check(relay.alive(), "etrelay died")
    relay.expect_exit = True
    relay.close()


# --------------------------------------------------------------------------


def forged_flood(port, src, stop, userid="forger", conns=4, sent=None):
    """conns connections from src sending Refreshes signed with a wrong
    password, about 200 bytes each, as fast as they are answered, again on
    a new connection when closed; until stop is set (at most 30 s)."""
    user, _ = T.rest_credentials(T.SECRET, userid)
    wrong = T.longterm_key(user, "not-the-password")
    pad = T.attr(0x8022, b"x" * 40)  # SOFTWARE: a 200-byte request

    def one():
        t_end = time.monotonic() + 30
        while not stop.is_set() and time.monotonic() < t_end:
            try:
                s = connect(src, port)
                _, _, _, a = T.stun_tcp(s, T.message(T.ALLOCATE, os.urandom(12), UDP))
                realm, nonce = a[T.A_REALM][0], a[T.A_NONCE][0]
                for _ in range(100000):
                    if stop.is_set() or time.monotonic() > t_end:
                        break
                    s.sendall(T.message(T.REFRESH, os.urandom(12),
                                        [pad] + T.signed(user, realm, nonce), key=wrong))
                    if sent is not None:
                        sent[0] += 1
                    read_msg(s)
            except (OSError, H.TestFailure):
                pass
            finally:
                try:
                    s.close()
                except (OSError, UnboundLocalError):
                    pass
            time.sleep(0.01)

    ts = [threading.Thread(target=one, daemon=True) for _ in range(conns)]
    for t in ts:
        t.start()
    return ts


def binding_rtt(port, n=200):
    """Median round trip (ms) of n Bindings over UDP to the listener, ten
    from each source address (within unauth-ip-burst)."""
    rtts = []
    s = None
    deadline = time.monotonic() + 10 * H.SLOW
    for i in range(n):
        if time.monotonic() > deadline:
            break
        if i % 10 == 0:
            if s:
                s.close()
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((f"127.10.{i // 2500 % 250}.{i // 10 % 250 + 1}", 0))
            s.settimeout(0.5 * H.SLOW)
        tid = os.urandom(12)
        t0 = time.perf_counter()
        s.sendto(T.message(T.BINDING, tid, [], fingerprint=False), ("127.0.0.1", port))
        try:
            while s.recv(2048)[8:20] != tid:
                pass
        except socket.timeout:
            pass  # lost: counted as late as the wait
        rtts.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.002)
    s.close()
    rtts.sort()
    return rtts[len(rtts) // 2] if rtts else float("inf")


def forged_macs(ctx):
    """Finding 4: one source's failures."""
    port, ops = T.free_port(), H.free_tcp_port()
    lo, hi = H.free_udp_range(10)
    relay = T.start_relay(ctx, port, "--turn-ports", f"{lo}-{hi}", "--turn-max-allocations", str(hi - lo + 1), "--turn-unauth-ip-rate",
                          "100000", "--turn-unauth-ip-burst", "100000",
                          "--turn-auth-fail-ip-rate", "1", "--ops-listen", f"127.0.0.1:{ops}")
    base = binding_rtt(port)
    # A player behind the forger's NAT address, with an allocation.
    neighbour = udp_client(port, "127.0.0.5")
    key, attrs, _ = udp_allocate(neighbour, "neighbour")
    stop = threading.Event()
    sent = [0]
    t0 = time.monotonic()
    ts = forged_flood(port, "127.0.0.5", stop, sent=sent)
    try:
        H.wait_until(lambda: sent[0] >= 300, 20 * H.SLOW, "300 forged requests sent")
        during = binding_rtt(port)
        c = connect("127.0.0.1", port)
        cls, code, _ = allocate_tcp(c, "valid")
        H.expect_eq((cls, code), (T.SUCCESS, None), "a valid client's Allocate during the flood")
        c.close()
        # The neighbour's allocation is checked with its own key (one MAC)
        # while the address is over its budget: its Refresh passes.
        _, (cls, _, _, a) = neighbour.request(T.REFRESH, attrs, key=key)
        H.expect_eq(cls, T.SUCCESS, f"the neighbour's Refresh during the flood: {a}")
        # New allocations from that address get no check (dropped). The
        # forgers keep the source's bucket near empty, but a token comes
        # back every second (auth-fail-ip-rate 1) and a slow machine lets
        # one or two wait between the forgers' tries: six Allocates sent at
        # once, at most three checked (before the budget, six).
        dropped = m_value(ops, "etrelay_turn_dropped_total", reason="auth_rate_ip")
        newcomer = udp_client(port, "127.0.0.5")
        realm, nonce = newcomer.challenge()
        user, pw = T.rest_credentials(T.SECRET, "newcomer")
        key = T.longterm_key(user, pw, realm.decode())
        tids = {os.urandom(12) for _ in range(6)}
        for tid in tids:
            newcomer.s.sendto(T.message(T.ALLOCATE, tid, UDP + T.signed(user, realm, nonce),
                                        key=key), ("127.0.0.1", port))
        answered = set()
        end = time.monotonic() + 1.0 * H.SLOW
        while time.monotonic() < end and len(answered) < len(tids):
            try:
                got = newcomer.s.recv(2048)
            except socket.timeout:
                break
            answered |= {got[8:20]} & tids
        H.check(len(answered) <= 3, f"{len(answered)} of {len(tids)} new allocations from "
                "the flooding address were checked")
        H.check(m_value(ops, "etrelay_turn_dropped_total", reason="auth_rate_ip") > dropped,
                "its drop was not counted")
    finally:
        stop.set()
        for t in ts:
            t.join(10)
    took = time.monotonic() - t0
    s = T.metrics(ops)[1]
    failures = T.value(s, "etrelay_turn_auth_failures_total", reason="bad_integrity")
    closed = H.metric_value(s, "etrelay_turn_tcp_dropped_total", listener="default",
                            reason="auth_rate_ip")
    ctx.note(f"forged MACs: {sent[0]} sent in {took:.1f} s, {failures:.0f} checked, {closed} "
             f"connections closed; Binding p50 {base:.3f} ms before, {during:.3f} ms during")
    # Past auth-fail-ip-burst (10) the source gets one check a second
    # (auth-fail-ip-rate 1): the rest were closed unchecked.
    H.check(failures <= 10 + took + 5, f"{failures:.0f} of {sent[0]} forged MACs checked "
            f"in {took:.1f} s")
    H.check(closed is not None and closed >= 4, f"forger's connections closed: {closed}")
    # The thread the game shares: a ratio in the same run, with room for a
    # loaded machine (the finding: 0.24 ms to 6.5 ms, 27 times).
    H.check(during < 5 * base + 1.0, f"Binding p50 {base:.3f} ms before the flood, "
            f"{during:.3f} ms during")
    H.check(relay.alive(), "etrelay died")
    relay.expect_exit = True
    relay.close()


def pipelined(ctx):
    """Unauthenticated requests pipelined over TCP: each 401 costs the
    nonce's HMAC, and a 64 KiB read holds 3000 of them."""
    port, ops = T.free_port(), H.free_tcp_port()
    lo, hi = H.free_udp_range(10)
    relay = T.start_relay(ctx, port, "--turn-ports", f"{lo}-{hi}", "--turn-max-allocations",
                          "10", "--ops-listen", f"127.0.0.1:{ops}")
    base = binding_rtt(port)
    blob = b"".join(T.message(T.ALLOCATE, os.urandom(12), [], fingerprint=False)
                    for _ in range(3000))
    stop, sent = threading.Event(), [0]

    def one():
        t_end = time.monotonic() + 30
        while not stop.is_set() and time.monotonic() < t_end:
            try:
                s = connect("127.0.0.8", port)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                for _ in range(20):
                    if stop.is_set():
                        break
                    s.sendall(blob)
                    sent[0] += 3000
            except OSError:
                pass
            finally:
                s.close()
            time.sleep(0.005)

    ts = [threading.Thread(target=one, daemon=True) for _ in range(4)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    try:
        H.wait_until(lambda: sent[0] >= 30000, 10 * H.SLOW, "30000 unsigned Allocates sent")
        during = binding_rtt(port)
    finally:
        stop.set()
        for t in ts:
            t.join(10)
    took = time.monotonic() - t0
    s = T.metrics(ops)[1]
    answered = T.value(s, "etrelay_turn_challenges_total")
    closed = H.metric_value(s, "etrelay_turn_tcp_dropped_total", listener="default",
                            reason="unauth_rate_ip")
    ctx.note(f"pipelined unsigned Allocates: {sent[0]} sent in {took:.1f} s, {answered:.0f} "
             f"answered, {closed} connections closed; Binding p50 {base:.3f} ms before, "
             f"{during:.3f} ms during")
    # The source's bucket: 20 at once, 10 a second (the listener's: 4000,
    # 2000/s, split across the workers).
    H.check(answered <= 20 + 10 * took + 5, f"{answered:.0f} unsigned Allocates answered in "
            f"{took:.1f} s")
    # The count above is what the old binary fails (501 644 answered); the
    # latency bound is for a relay that answers within its buckets but
    # works hard anyway: the old binary moved the median to 52 ms; 4 flood
    # threads beside the measuring one in this process, on a machine loaded
    # past 15, moved it to 4-6 ms (two fresh runs), so 10x + 8 ms.
    H.check(during < 10 * base + 8.0, f"Binding p50 {base:.3f} ms before, {during:.3f} ms "
            "during the pipelined flood")
    # Attack round 12: a connection that authenticated got every 401 (one
    # credential, 300 000 a second). It takes the same tokens; past them
    # the answers are withheld and its connection stays.
    c = connect("127.0.0.9", port)
    try:
        cls, code, _ = allocate_tcp(c, "authed")
        H.expect_eq((cls, code), (T.SUCCESS, None), "the authenticated client's Allocate")
        before = T.value(T.metrics(ops)[1], "etrelay_turn_challenges_total")
        t0 = time.monotonic()
        c.sendall(blob)
        time.sleep(0.5)
        took = time.monotonic() - t0
        after = T.value(T.metrics(ops)[1], "etrelay_turn_challenges_total")
        H.check(after - before <= 20 + 10 * took + 5, f"{after - before:.0f} 401s to an "
                f"authenticated connection's {len(blob) // 20}-odd unsigned Allocates")
        # still open: a Binding is answered once its source's bucket refills
        H.wait_until(lambda: T.value(T.metrics(ops)[1], "etrelay_turn_tcp_connections",
                                     transport="tcp") >= 1, 2, "the connection to stay open")
    finally:
        c.close()
    H.check(relay.alive(), "etrelay died")
    relay.expect_exit = True
    relay.close()


def listener_budget(ctx):
    """Finding 4: the listener's failures, from many sources."""
    port, ops = T.free_port(), H.free_tcp_port()
    lo, hi = H.free_udp_range(10)
    relay = T.start_relay(ctx, port, "--turn-ports", f"{lo}-{hi}", "--turn-max-allocations", str(hi - lo + 1),
                          "--turn-auth-fail-rate", "2", "--turn-auth-fail-burst", "2",
                          "--turn-auth-fail-ip-rate", "1000", "--turn-auth-fail-ip-burst",
                          "1000", "--ops-listen", f"127.0.0.1:{ops}",
                          # every 401 here is from one address, the flood's
                          # reconnects too: this part is about failures
                          "--turn-unauth-ip-rate", "100000", "--turn-unauth-ip-burst", "100000",
                          "--turn-unauth-rate", "100000", "--turn-unauth-burst", "100000")
    nw, key = H.relay_workers(relay)
    # Everything from one address: one worker, the listener's part there.
    src = "127.0.0.6"
    known = connect(src, port)
    cls, code, a = allocate_tcp(known, "known")
    H.expect_eq((cls, code), (T.SUCCESS, None), "the known client's Allocate")
    stop = threading.Event()
    ts = forged_flood(port, src, stop, conns=2)
    try:
        H.wait_until(lambda: tcp_dropped(ops, "auth_rate") >= 2, 5 * H.SLOW,
                     "failures past the listener's auth-fail-burst to be refused")
        # The known username's key is kept: its Refresh (a new connection,
        # no allocation there: 437) is checked. A new username is refused
        # unchecked while the flood goes on.
        def known_ok():
            c = connect(src, port)
            try:
                _, _, _, a = T.stun_tcp(c, T.message(T.ALLOCATE, os.urandom(12), UDP))
                realm, nonce = a[T.A_REALM][0], a[T.A_NONCE][0]
                user, pw = T.rest_credentials(T.SECRET, "known")
                _, _, _, a = T.stun_tcp(c, T.message(T.REFRESH, os.urandom(12),
                                                     T.signed(user, realm, nonce),
                                                     key=T.longterm_key(user, pw,
                                                                        realm.decode())))
                return T.error_code(a) == 437
            except (OSError, H.TestFailure):
                return False
            finally:
                c.close()
        # Each within a bounded wait: the flood's own connections come and
        # go from the same address (under valgrind or a loaded machine one
        # try could meet a moment where its connection is refused at
        # accept); a username the relay stopped checking never passes.
        # 15 s: a suite run on a machine loaded past 15 (two suites and
        # builds on 2 CPUs) once missed 5 s on epoll.
        for i in range(5):
            H.wait_until(known_ok, 15 * H.SLOW,
                         f"a request of a known username during the flood ({i})",
                         interval=0.05)
        before = tcp_dropped(ops, "auth_rate")

        def new_refused():
            c = connect(src, port)
            try:
                cls, code, _ = allocate_tcp(c, f"new{os.urandom(3).hex()}")
                return False
            except (OSError, H.TestFailure):
                return T.closed_by_server(c)
            finally:
                c.close()
        H.wait_until(new_refused, 5 * H.SLOW, "a new username to be refused unchecked")
        H.check(tcp_dropped(ops, "auth_rate") > before, "auth_rate did not count it")
        # A new username from another network (IPv4 /24) with no failure
        # of its own is still checked: sources failing at their own rate
        # must not shut every new credential out (attack round 12: 500
        # sources at 2/s let 0 of 10 new TCP clients in).
        fresh = connect("127.1.0.9", port)
        try:
            cls, code, _ = allocate_tcp(fresh, "fresh")
            H.expect_eq((cls, code), (T.SUCCESS, None),
                        "a new username from another network during the flood")
        finally:
            fresh.close()
    finally:
        stop.set()
        for t in ts:
            t.join(10)
    known.close()
    H.check(relay.alive(), "etrelay died")
    relay.expect_exit = True
    relay.close()


# --------------------------------------------------------------------------


def udp_client(port, src):
    """A StunClient sending from src."""
    c = T.StunClient(port)
    c.s.close()
    c.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    c.s.bind((src, 0))
    c.s.settimeout(1.0)
    return c


def udp_allocate(c, userid):
    """An allocation over UDP StunClient c: (key, realm, nonce, relayed port)."""
    realm, nonce = c.challenge()
    user, pw = T.rest_credentials(T.SECRET, userid)
    key = T.longterm_key(user, pw, realm.decode())
    _, (cls, _, _, a) = c.request(T.ALLOCATE, UDP + T.signed(user, realm, nonce), key=key)
    H.expect_eq(cls, T.SUCCESS, f"Allocate of {userid}: {a}")
    return key, T.signed(user, realm, nonce), xor_addr(a[T.A_RELAYED][0])[1]


def _try_bind(s, port):
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False


def own_address(ctx):
    """Finding 8."""
    port, ops = T.free_port(), H.free_tcp_port()
    lo, hi = H.free_udp_range(8)
    # A service of the host inside the relayed range (WireGuard's 51820 in
    # the default, the dynamic range): the relay cannot bind its port.
    wg = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    wg.bind(("127.0.0.1", hi))
    wg.settimeout(0.5)
    relay = T.start_relay(ctx, port, "--turn-ports", f"{lo}-{hi}", "--turn-max-allocations", str(hi - lo + 1), "--turn-relay-address",
                          "127.0.0.1", "--ops-listen", f"127.0.0.1:{ops}", tcp=False)
    a, b = T.StunClient(port), T.StunClient(port)
    ka, sa, _ = udp_allocate(a, "alice")
    kb, sb, pb = udp_allocate(b, "bob")
    H.check(pb != hi, "an allocation on the port another service holds")
    for c, k, s in ((a, ka, sa), (b, kb, sb)):
        _, (cls, _, _, r) = c.request(T.CREATE_PERMISSION, [T.xor_peer("127.0.0.1", 1)] + s,
                                      key=k)
        H.expect_eq(cls, T.SUCCESS, f"CreatePermission for the relay's address: {r}")
    # ChannelBind: to bob's relayed port yes, to the service's port no.
    _, (cls, _, _, r) = a.request(T.CHANNEL_BIND, [T.u32(A_CHANNEL, 0x4000 << 16),
                                                   T.xor_peer("127.0.0.1", pb)] + sa, key=ka)
    H.expect_eq(cls, T.SUCCESS, f"ChannelBind to a live relayed port: {r}")
    _, (cls, _, _, r) = a.request(T.CHANNEL_BIND, [T.u32(A_CHANNEL, 0x4001 << 16),
                                                   T.xor_peer("127.0.0.1", hi)] + sa, key=ka)
    H.expect_eq((cls, T.error_code(r)), (T.ERROR, 403),
                "ChannelBind to a relayed port without an allocation")
    # Send indications: to bob's port relayed (a Data indication), to the
    # service's port dropped.
    refused = m_value(ops, "etrelay_turn_dropped_total", reason="peer_refused")
    for port_to, payload in ((hi, b"to-the-service"), (pb, b"to-bob")):
        a.s.sendto(T.message(SEND, os.urandom(12), [T.xor_peer("127.0.0.1", port_to),
                                                    T.attr(A_DATA, payload)],
                             cls=INDICATION, fingerprint=False), a.addr)
    got = b""
    deadline = time.monotonic() + 3 * H.SLOW
    while time.monotonic() < deadline and b"to-bob" not in got:
        try:
            got += b.s.recv(2048)
        except socket.timeout:
            pass
    H.check(b"to-bob" in got, "a Send to a live relayed port of the relay's address")
    try:
        leaked = wg.recv(2048)
    except socket.timeout:
        leaked = b""
    H.expect_eq(leaked, b"", "what the service on a relayed port received")
    H.wait_until(lambda: m_value(ops, "etrelay_turn_dropped_total", reason="peer_refused")
                 >= refused + 1, 2 * H.SLOW, "the Send to the service's port counted refused")
    # The channel to bob's port carries while bob's allocation lives...
    a.s.sendto(struct.pack("!HH", 0x4000, 8) + b"chan-bob", a.addr)
    got = b""
    deadline = time.monotonic() + 3 * H.SLOW
    while time.monotonic() < deadline and b"chan-bob" not in got:
        try:
            got += b.s.recv(2048)
        except socket.timeout:
            pass
    H.check(b"chan-bob" in got, "ChannelData to a live relayed port of the relay's address")
    # ...and no more once it ended, whatever holds the port then.
    _, (cls, _, _, r) = b.request(T.REFRESH, [T.u32(T.A_LIFETIME, 0)] + sb, key=kb)
    H.expect_eq(cls, T.SUCCESS, f"bob's Refresh to 0: {r}")
    later = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    H.wait_until(lambda: _try_bind(later, pb), 2 * H.SLOW, "bob's relayed port to be free")
    later.settimeout(0.5)
    refused = m_value(ops, "etrelay_turn_dropped_total", reason="peer_refused")
    a.s.sendto(struct.pack("!HH", 0x4000, 10) + b"after-end!", a.addr)
    H.wait_until(lambda: m_value(ops, "etrelay_turn_dropped_total", reason="peer_refused")
                 >= refused + 1, 2 * H.SLOW, "ChannelData to an ended allocation's port refused")
    try:
        leaked = later.recv(2048)
    except socket.timeout:
        leaked = b""
    H.expect_eq(leaked, b"", "what a service on an ended allocation's port received")
    later.close()
    wg.close()
    H.check(relay.alive(), "etrelay died")
    relay.expect_exit = True
    relay.close()


def udp_spends_not_tcp(ctx):
    """Attack round 12: unsigned UDP requests in a client's name (forged
    off-path: they need no answer) spent the per-source budget of
    unauthenticated answers that its TCP and TLS connections use too, and
    closed them. A TCP source is proven: its budget is its own."""
    port, ops = T.free_port(), H.free_tcp_port()
    relay = T.start_relay(ctx, port, *H.turn_ports(4), "--ops-listen", f"127.0.0.1:{ops}")
    src = "127.0.0.7"
    u = udp_client(port, src)
    u.s.settimeout(0.05)
    for _ in range(100):  # unauth-ip-burst 20: 80 past it
        u.s.sendto(T.message(T.BINDING, os.urandom(12), []), u.addr)
    u.close()
    H.wait_until(lambda: (m_value(ops, "etrelay_turn_dropped_total", reason="throttled") or 0)
                 >= 50, 5 * H.SLOW, "the UDP Bindings past the source's burst dropped")
    c = connect(src, port)
    try:
        cls, code, _ = allocate_tcp(c, "victim")
        H.expect_eq((cls, code), (T.SUCCESS, None), "the same address's Allocate over TCP")
    finally:
        c.close()
    H.expect_eq(tcp_dropped(ops, "unauth_rate_ip") or 0, 0, "TCP connections closed unauth_rate_ip")
    H.check(relay.alive(), "etrelay died")
    relay.expect_exit = True
    relay.close()


def test(ctx):
    udp_spends_not_tcp(ctx)
    own_address(ctx)
    half_frames(ctx)
    forged_macs(ctx)
    pipelined(ctx)
    listener_budget(ctx)


if __name__ == "__main__":
    H.main(test)
