#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""UDP GSO and GRO in the data path.

  trains        a client's GSO train (40 x 100 B + a 37 B tail) reaches the
                relay whole (UDP_GRO), is cut into its datagrams, and leaves
                for the game server as one GSO train; the game server's
                train of 30 x 200 B comes back the same way. Both peers
                read without GRO, so they see every datagram, byte for
                byte and in order; the metrics count the trains.
  ipv6          the same over ::1 (names of 28 bytes beside the GRO cmsg).
  off           --gso no: the same traffic, the same datagrams, no trains.
  refused       in a network namespace whose route to the game server has
                an MTU of 1280, a train of 1400 B segments is refused by the
                kernel (EINVAL): its datagrams are resent one by one and
                arrive (fragmented and reassembled), refused counts 1, the
                socket stops making trains that large, and a train of
                1000 B segments on the same socket still leaves as one.
                Where a namespace cannot be built (H.require_netns), the
                whole test is a skip (exit 77) after the other parts.
"""

import os
import shutil
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

UDP_SEGMENT = 103
INNER = "ETRELAY_GSO_TEST_INNER"


def dgram(i, size):
    """In-game datagram i of exactly size bytes (no connectionless prefix)."""
    head = b"\x07\x00\x00\x00" + f"seg{i:04d}-".encode()
    return (head + os.urandom(size))[:size]


def send_train(sock, dgrams, dst):
    """One sendto carrying dgrams as a GSO train: every one but the last must
    be the size of the first."""
    sock.setsockopt(socket.SOL_UDP, UDP_SEGMENT, len(dgrams[0]))
    try:
        sock.sendto(b"".join(dgrams), dst)
    finally:
        sock.setsockopt(socket.SOL_UDP, UDP_SEGMENT, 0)


def collect(sock, n, what, max_seconds=5.0):
    """The next n in-game datagrams at sock (connectionless ones, such as the
    relay's getinfo probe, are skipped): [(data, src)]."""
    got = []
    for _, data, src in H.drain_socket(sock, quiet=1.0, max_seconds=max_seconds,
                                       max_packets=10 * n + 20):
        if not data.startswith(H.PREFIX):
            got.append((data, src))
            if len(got) == n:
                break
    H.expect_eq(len(got), n, f"{what}: datagrams received")
    return got


def same(got, want, what):
    for i, (g, w) in enumerate(zip(got, want)):
        H.check(g == w, f"{what}: datagram {i} differs ({len(g)} B, want {len(w)} B)")


def udp6_socket(port=0):
    """A UDP socket on [::1] (port 0: a client's), closed with the test."""
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind(("::1", port))
    s.settimeout(1.0)
    H._register(s)
    return s


def start(ctx, *args, upstream_host=H.LOOPBACK, v6=False):
    # the game server: others send to it first, so on a drawn port
    up = udp6_socket(H.free_udp_port()) if v6 else H.udp_socket(upstream_host, H.free_udp_port())
    upstream = f"[::1]:{up.getsockname()[1]}" if v6 else f"{upstream_host}:{up.getsockname()[1]}"
    master = ctx.master(challenge=False)
    ops, tok = H.free_tcp_port(), os.urandom(24).hex()
    listen = ()
    if v6:
        port = H.free_udp_port()
        listen = ("--listen", f"[::1]:{port}")
    # A listener on [::1] cannot reach an IPv4 master (etrelay refuses the
    # configuration): its master is an IPv6 port nobody answers on.
    mhost = f"[::1]:{H.free_udp_port()}" if v6 else f"127.0.0.1:{master.port}"
    relay = H.relay_env(ctx, {"ETRELAY_METRICS_TOKEN": tok}, *listen,
                        "--upstream", upstream,
                        "--master", mhost, "--heartbeat-interval", "1h",
                        "--ops-listen", f"127.0.0.1:{ops}", *args, listen=not v6)
    if v6:
        relay.addr = ("::1", port)
    return relay, up, lambda: H.get_metrics(ops, tok)


def gso(samples):
    return {k: H.counter(samples, f"etrelay_gso_{k}_total")
            for k in ("trains", "datagrams", "refused")}


def round_trip(ctx, relay, up, what, v6=False):
    """Client train up, game-server train down: (datagrams up, down); fails
    on any difference."""
    client = udp6_socket() if v6 else H.udp_socket(H.LOOPBACK)
    upw = [dgram(i, 100) for i in range(40)] + [dgram(40, 37)]
    send_train(client, upw, relay.addr)
    got = collect(up, len(upw), f"{what}: at the game server")
    same([d for d, _ in got], upw, f"{what}: client -> game server")
    session = got[0][1]
    H.check(all(src == session for _, src in got),
            f"{what}: the datagrams came from more than one session socket")
    down = [dgram(100 + i, 200) for i in range(30)]
    send_train(up, down, session)
    back = collect(client, len(down), f"{what}: at the client")
    same([d for d, _ in back], down, f"{what}: game server -> client")
    H.check(all(src[:2] == relay.addr for _, src in back),
            f"{what}: answers came from somewhere else than the relay's public address")
    return len(upw), len(down)


def trains(ctx):
    relay, up, metrics = start(ctx)
    n_up, n_down = round_trip(ctx, relay, up, "trains")
    g = gso(metrics())
    ctx.note(f"trains: {n_up} up and {n_down} down, byte for byte; metrics {g}")
    H.check(g["trains"] >= 2, f"gso trains {g['trains']}, want at least 2 (one each way)")
    H.check(g["datagrams"] >= n_up + n_down,
            f"gso datagrams {g['datagrams']}, want at least {n_up + n_down}")
    H.expect_eq(g["refused"], 0, "gso refused")


def ipv6(ctx):
    try:
        socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).bind(("::1", 0))
    except OSError as e:
        ctx.note(f"ipv6: SKIPPED, no ::1 here: {e}")
        return
    relay, up, metrics = start(ctx, v6=True)
    n_up, n_down = round_trip(ctx, relay, up, "ipv6", v6=True)
    g = gso(metrics())
    ctx.note(f"ipv6: {n_up} up and {n_down} down over ::1, byte for byte; metrics {g}")
    H.check(g["trains"] >= 2, f"gso trains {g['trains']} over IPv6, want at least 2")
    H.expect_eq(g["refused"], 0, "gso refused over IPv6")


def off(ctx):
    relay, up, metrics = start(ctx, "--gso", "no")
    n_up, n_down = round_trip(ctx, relay, up, "off")
    g = gso(metrics())
    ctx.note(f"off: {n_up} up and {n_down} down, byte for byte; metrics {g}")
    H.expect_eq(g, {"trains": 0, "datagrams": 0, "refused": 0}, "gso counters with --gso no")


def refused_inner(ctx):
    """Runs inside the namespace: lo up, 127.0.0.77 behind a 1280 B MTU."""
    ip = shutil.which("ip")
    for step in (["link", "set", "lo", "up"],
                 ["route", "add", "local", "127.0.0.77/32", "dev", "lo", "table", "local",
                  "mtu", "lock", "1280"]):
        r = subprocess.run([ip] + step, capture_output=True, text=True, timeout=10)
        if r.returncode:
            raise H.TestSkip(f"ip {' '.join(step)}: {r.stderr.strip()}")
    relay, up, metrics = start(ctx, upstream_host="127.0.0.77")
    client = H.udp_socket(H.LOOPBACK)
    big = [dgram(i, 1400) for i in range(10)]
    send_train(client, big, relay.addr)
    got = collect(up, len(big), "refused: 1400 B datagrams at the game server")
    same([d for d, _ in got], big, "refused: 1400 B datagrams")
    g1 = gso(metrics())
    H.expect_eq(g1["refused"], 1, "gso refused after the first 1400 B train")

    send_train(client, big, relay.addr)
    got = collect(up, len(big), "refused: second 1400 B train at the game server")
    same([d for d, _ in got], big, "refused: second 1400 B train")
    g2 = gso(metrics())
    H.expect_eq(g2["refused"], 1, "gso refused after a second 1400 B train (the socket learnt)")

    small = [dgram(50 + i, 1000) for i in range(10)]
    send_train(client, small, relay.addr)
    got = collect(up, len(small), "refused: 1000 B datagrams at the game server")
    same([d for d, _ in got], small, "refused: 1000 B datagrams")
    g3 = gso(metrics())
    H.check(g3["trains"] > g2["trains"], "the 1000 B datagrams did not leave as a train")
    H.expect_eq(g3["refused"], 1, "gso refused after the 1000 B train")
    ctx.note(f"refused: metrics after the first train {g1}, the second {g2}, the 1000 B one {g3}")


def refused(ctx):
    ip = H.require_netns()  # a skip of the whole test where namespaces cannot work
    name = f"etrelay-gso{os.getpid() % 100000}"
    r = subprocess.run([ip, "netns", "add", name], capture_output=True, text=True, timeout=10)
    H.check(r.returncode == 0, f"refused: ip netns add {name}: {r.stderr.strip()}")
    try:
        env = dict(os.environ, **{INNER: "1"})
        p = subprocess.run([ip, "netns", "exec", name, sys.executable, os.path.abspath(__file__),
                            ctx.binary, ctx.backend], capture_output=True, text=True,
                           timeout=60, env=env)
    finally:
        subprocess.run([ip, "netns", "del", name], capture_output=True, timeout=10)
    print(p.stdout, end="")
    if p.returncode == H.EXIT_SKIP:
        raise H.TestSkip(f"refused: cannot run in {name}: {p.stdout.strip()[-300:]}")
    H.check(p.returncode == H.EXIT_PASS, f"refused: the run in {name} failed "
                                         f"(exit {p.returncode}): {p.stderr.strip()[-300:]}")


def test(ctx):
    if os.environ.get(INNER):
        refused_inner(ctx)
        return
    H.run_parts(ctx, [trains, ipv6, off, refused])


if __name__ == "__main__":
    H.main(test)
