#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""PRBE echo: on an echo-only port (--prbe-listen) and on a game relay's
public port (--prbe yes). A datagram that starts with PRBE comes back
byte for byte, never larger and never more than once; 1473 bytes is over
the default cap; a source's burst then refusals (across workers: its other
ports are refused too); source ports below 1024 and an echo port's own
number get nothing; each result counted on /metrics (promtool clean). On a
relay, a player's session keeps its datagrams (a PRBE from it goes to the
game server), and without --prbe a PRBE datagram is forwarded as before."""

import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

SIZES = (4, 5, 64, 512, 1000, 1472)
QUIET = 0.3  # s: how long "no answer" is waited for


def probe(n):
    """A probe of n bytes: PRBE, then random bytes (reordering or a change
    shows)."""
    return b"PRBE" + os.urandom(n - 4)


def recv_all(sock, quiet=QUIET, limit=200, want=0):
    """Every datagram on sock until none came for `quiet` s (bounded);
    until `want` have come, up to 3 s (times ETRELAY_SLOW) for each: the
    answers a test expects are waited for, silence only for `quiet`."""
    out = []
    deadline = time.monotonic() + 3 * H.SLOW
    for _ in range(limit):
        sock.settimeout(quiet if len(out) >= want else max(quiet, deadline - time.monotonic()))
        try:
            data, src = sock.recvfrom(H.MAX_DGRAM)
        except socket.timeout:
            break
        out.append((data, src))
    return out


def metrics(port):
    r = H.http_request(port, "GET", "/metrics")
    H.expect_eq(r.status, 200, "/metrics status")
    return r.text, H.parse_metrics(r.text)


def prbe_count(samples, port, result):
    return H.metric_value(samples, "etrelay_prbe_packets_total", port=f"127.0.0.1:{port}",
                          result=result)


def wait_count(ops, port, result, want, what):
    """The counter reaches want (echoes count when their send completes)."""
    seen = []

    def ok():
        seen[:] = [prbe_count(metrics(ops)[1], port, result)]
        return seen[0] == want
    try:
        H.wait_until(ok, 3.0 * H.SLOW, what, interval=0.05)
    except H.TestFailure:
        H.fail(f"{what}: etrelay_prbe_packets_total{{port=\":{port}\",result=\"{result}\"}} "
               f"is {seen[0] if seen else None}, expected {want}")


def start(ctx, *extra):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    echo_port = H.free_udp_port()
    ops = H.free_tcp_port()
    relay = ctx.relay("--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
                      "--prbe", "yes", "--prbe-listen", f"127.0.0.1:{echo_port}",
                      "--ops-listen", f"127.0.0.1:{ops}", *extra)
    relay.wait_for_line(r"^PRBE echo on 127\.0\.0\.1:%d$" % echo_port, 3.0)
    return gs, relay, echo_port, ops


def exact_echo(ctx):
    gs, relay, echo_port, ops = start(ctx)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    try:
        for port in (echo_port, relay.port):
            dst = ("127.0.0.1", port)
            for n in SIZES:
                p = probe(n)
                s.sendto(p, dst)
                got = recv_all(s, want=1)
                H.expect_eq([(len(d), src) for d, src in got], [(n, dst)],
                            f"answers (length, source) to a {n}-byte probe on :{port}")
                H.check(got[0][0] == p, f"the echo of a {n}-byte probe on :{port} differs "
                        f"from the probe")
            # over the cap: nothing back
            s.sendto(probe(1473), dst)
            H.expect_eq(recv_all(s), [], f"answers to a 1473-byte probe on :{port}")
            # a burst of 10 (within the default burst of 20): ten answers,
            # each the length of its request, no more datagrams than sent
            sent = [probe(40 + i) for i in range(10)]
            for p in sent:
                s.sendto(p, dst)
            got = recv_all(s, want=10)
            H.expect_eq(sorted(d for d, _ in got), sorted(sent),
                        f"echoes of 10 probes in a row on :{port}")
        # not a probe, on the echo-only port: nothing
        s.sendto(b"\xff\xff\xff\xffgetinfo x", ("127.0.0.1", echo_port))
        s.sendto(b"PRB", ("127.0.0.1", echo_port))
        H.expect_eq(recv_all(s), [], "answers to datagrams that are not probes")
    finally:
        s.close()
    # the game server saw none of it
    H.expect_eq([p for p in gs.packets() if p.data.startswith(b"PRBE")], [],
                "PRBE datagrams at the game server")
    for port in (echo_port, relay.port):
        wait_count(ops, port, "echoed", len(SIZES) + 10, f"echoes counted on :{port}")
    text, m = metrics(ops)
    for port in (echo_port, relay.port):
        H.expect_eq(prbe_count(m, port, "size"), 1, f"size drops counted on :{port}")
        H.expect_eq(prbe_count(m, port, "rate"), 0, f"rate drops counted on :{port}")
        H.expect_eq(prbe_count(m, port, "send_error"), 0, f"send errors on :{port}")
    H.expect_eq(prbe_count(m, echo_port, "not_probe"), 2, "not_probe counted on the echo port")
    H.expect_eq(H.metric_value(m, "etrelay_dropped_datagrams_total", reason="prbe"), 1,
                "the relay's dropped_datagrams_total{reason=prbe}")
    promtool = shutil.which("promtool")
    if promtool:
        p = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=20)
        out = (p.stdout + p.stderr).decode("utf-8", "replace").strip()
        H.check(p.returncode == 0 and not out, f"promtool check metrics: {out[:1000]}")
    else:
        ctx.note("promtool not installed: the /metrics page was not linted")


def rate_limit(ctx):
    gs, relay, echo_port, ops = start(ctx, "--prbe-rate", "1", "--prbe-burst", "5")
    for port in (echo_port, relay.port):
        dst = ("127.0.0.1", port)
        a = H.client_on(ctx, dst, "127.0.0.1")
        t0 = time.monotonic()
        for i in range(12):
            a.sock.sendto(probe(20), dst)
        got = recv_all(a.sock, want=5)
        elapsed = time.monotonic() - t0
        # 5 at once, then 1 per second: one more per second the test took
        H.check(5 <= len(got) <= 5 + int(elapsed),
                f":{port}: {len(got)} of 12 probes echoed in {elapsed:.2f} s with burst 5, "
                f"rate 1/s")
        echoed = len(got)
        # the same IP from other ports: the bucket is the IP's (with
        # workers too: the reuseport program sends an IP to one worker)
        others = [H.client_on(ctx, dst, "127.0.0.1") for _ in range(8)]
        for o in others:
            o.sock.sendto(probe(20), dst)
        late = sum(len(recv_all(o.sock, quiet=0.1)) for o in others)
        elapsed = time.monotonic() - t0
        echoed += late
        H.check(echoed <= 5 + int(elapsed),
                f":{port}: {late} of 8 probes from other ports of the same IP echoed after "
                f"its burst ({echoed} in {elapsed:.2f} s with burst 5, rate 1/s)")
        # another IP has a bucket of its own
        b = H.client_on(ctx, dst, "127.0.0.3")
        for i in range(3):
            b.sock.sendto(probe(20), dst)
        H.expect_eq(len(recv_all(b.sock, want=3)), 3, f":{port}: echoes for another source IP")
        echoed += 3
        wait_count(ops, port, "echoed", echoed, f"echoes counted on :{port}")
        wait_count(ops, port, "rate", 12 + 8 + 3 - echoed, f"rate drops counted on :{port}")


def low_and_loop_ports(ctx):
    gs, relay, echo_port, ops = start(ctx)
    # a source port that is an echo port's number: 127.0.0.2 is free on it
    loop = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        loop.bind(("127.0.0.2", echo_port))
        for port in (echo_port, relay.port):
            loop.sendto(probe(30), ("127.0.0.1", port))
        H.expect_eq(recv_all(loop), [], "answers to probes from an echo port's number")
    finally:
        loop.close()
    wait_count(ops, echo_port, "loop", 1, "loop drops on the echo port")
    wait_count(ops, relay.port, "loop", 1, "loop drops on the relay's port")
    if os.geteuid() != 0:
        raise H.TestSkip("not root: cannot bind source port 1000 for the low-port case")
    low = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        low.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        low.bind(("127.0.0.1", 1000))
        for port in (echo_port, relay.port):
            low.sendto(probe(30), ("127.0.0.1", port))
            low.sendto(probe(4), ("127.0.0.1", port))
        H.expect_eq(recv_all(low), [], "answers to probes from source port 1000")
    finally:
        low.close()
    for port in (echo_port, relay.port):
        wait_count(ops, port, "low_port", 2, f"low_port drops on :{port}")
        wait_count(ops, port, "echoed", 0, f"echoes on :{port}")


def relay_keeps_players(ctx):
    """prbe yes: a player's session works on the same port, and its own
    PRBE-looking datagram is the game's, not an echo."""
    gs, relay, echo_port, ops = start(ctx)
    c = ctx.client(relay)
    H.check(c.request(H.cmd("getchallenge")).startswith(H.PREFIX + b"challengeResponse"),
            "a player's getchallenge is answered through a relay with prbe yes")
    for i in range(5):
        payload = c.game(b"play-%d" % i, seq=i + 1)
        H.expect_eq(c.request(payload), b"ECHO:" + payload, f"answer to in-game packet {i}")
    # a newcomer's probe is echoed, between the player's packets
    p = probe(100)
    n = ctx.client(relay)
    H.expect_eq(n.request(p, what="the echo"), p, "echo of a newcomer's probe")
    # the player's in-game packet whose sequence number reads PRBE goes
    # to the game server (its qport follows, as in every in-game packet)
    own = b"PRBE" + c.game(b"-from-a-session")[4:]
    H.expect_eq(c.request(own, what="the game server's answer"), b"ECHO:" + own,
                "a session's PRBE datagram is the game server's")
    payload = c.game(b"after", seq=9)
    H.expect_eq(c.request(payload), b"ECHO:" + payload, "answer to in-game packet after")
    H.expect_eq([q.data for q in gs.packets() if q.data.startswith(b"PRBE")], [own],
                "PRBE datagrams at the game server")
    wait_count(ops, relay.port, "echoed", 1, "echoes counted on the relay's port")


def relay_without_prbe(ctx):
    """prbe no (the default): as before, a PRBE datagram from a newcomer is
    an in-game packet: a session opens and the game server gets it."""
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    ops = H.free_tcp_port()
    relay = ctx.relay("--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
                      "--ops-listen", f"127.0.0.1:{ops}")
    p = probe(64)
    c = ctx.client(relay)
    H.expect_eq(c.request(p, what="the game server's answer"), b"ECHO:" + p,
                "answer to a PRBE datagram without prbe")
    H.expect_eq([q.data for q in gs.packets() if q.data.startswith(b"PRBE")], [p],
                "PRBE datagrams at the game server")
    text, m = metrics(ops)
    H.expect_eq(H.metric_value(m, "etrelay_sessions_opened_total"), 1, "sessions opened")
    H.check("etrelay_prbe_packets_total" not in text,
            "etrelay_prbe_packets_total on /metrics without any echo port")


def echo_only(ctx):
    """A process with echo ports and nothing else is a valid configuration:
    -t passes, it starts, echoes, and /readyz says ready while it runs."""
    echo_port = H.free_udp_port()
    ops = H.free_tcp_port()
    args = ["--prbe-listen", f"127.0.0.1:{echo_port}"]
    status, out, err = H.run_etrelay(ctx, ["-t"] + args)
    H.expect_eq(status, 0, f"-t of an echo-only process (stderr {err.strip()!r})")
    H.check("(0 relays, 1 echo port)" in out, f"-t's summary line: {out!r}")
    relay = ctx.relay(*args, "--ops-listen", f"127.0.0.1:{ops}", listen=False,
                      wait_ready=False, open_limits=False)
    relay.wait_for_line(r"^PRBE echo on 127\.0\.0\.1:%d$" % echo_port, 3.0)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    try:
        p = probe(64)
        s.sendto(p, ("127.0.0.1", echo_port))
        H.expect_eq([d for d, _ in recv_all(s, want=1)], [p], "echo from an echo-only process")
    finally:
        s.close()
    r = H.http_request(ops, "GET", "/readyz")
    H.expect_eq((r.status, r.text), (200, "ready\n"), "/readyz of an echo-only process")


def test(ctx):
    H.run_parts(ctx, [exact_echo, rate_limit, low_and_loop_ports, relay_keeps_players,
                      relay_without_prbe, echo_only])


if __name__ == "__main__":
    H.main(test)
