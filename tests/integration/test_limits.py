#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Session limits.

- --max-sessions 3: a 4th client gets nothing, never reaches the game
  server, and is counted in dropped{reason="table_full"} and
  sessions_refused_total; the 3 keep being served.
- A full table whose sessions have expired makes room for a new client.
- --session-ports P-P+9 --max-sessions 10: the game server sees every
  session from a port in the range, ten different ports; an 11th client
  is refused; once they expire, ten new clients reuse the range. (P is
  drawn at random below the kernel's ephemeral ports: the three copies of
  this test that run at once took the same fixed range of ten ports, and
  one of them found every port taken.)
- --session-ports 21000-21004 --max-sessions 10 is a startup error naming
  both.
- Under `prlimit --nofile=200:200`, --max-sessions 5000 is a startup error
  about file descriptors, and --max-sessions 150 starts and holds 150
  sessions; with --ops-listen the listener's 88 descriptors count too:
  150 sessions are refused at startup, 60 sessions and 64 ops connections
  fit at once."""

import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def metrics(port, tok):
    r = H.http_request(port, "GET", "/metrics", token=tok)
    H.expect_eq(r.status, 200, "/metrics status")
    return H.parse_metrics(r.text)


def echo(c, payload, what):
    payload = c.game(payload)   # with the client's own qport
    H.expect_eq(c.request(payload, what=what), b"ECHO:" + payload, what)
    return payload


_next_ip = [0]


def new_client(ctx, relay):
    """A client with a loopback address of its own: the limits under test
    are per relay, not per source IP."""
    _next_ip[0] += 1
    return H.client_on(ctx, relay, H.spread_ip(_next_ip[0]))


def refused_client(ctx, relay, gs, n=3, tag=b"extra"):
    """A new client sends n datagrams and must get nothing back; none of
    them may reach the game server."""
    c = new_client(ctx, relay)
    sent = [b"\x05%s-%d-" % (tag, i) + os.urandom(6).hex().encode() for i in range(n)]
    for p in sent:
        c.send(p)
        got = c.try_recv(0.2)
        H.check(got is None, f"client over the limit got an answer: {H.short(got)}")
    H.check(c.try_recv(0.3) is None, "client over the limit got a late answer")
    H.expect_eq(gs.sources_for(sent), set(), "game-server sources of the refused client's datagrams")
    return c


def max_sessions(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    port = H.free_tcp_port()
    tok = os.urandom(24).hex()
    relay = H.relay_env(ctx, {"ETRELAY_METRICS_TOKEN": tok},
                        "--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
                        "--ops-listen", f"127.0.0.1:{port}", "--max-sessions", "3")
    clients = [new_client(ctx, relay) for _ in range(3)]
    for i, c in enumerate(clients):
        echo(c, b"\x05in-%d" % i, f"answer to client {i} of 3")
    refused_client(ctx, relay, gs, n=3, tag=b"fourth")
    for i, c in enumerate(clients):
        echo(c, b"\x05still-%d" % i, f"answer to client {i} once the table is full")
    s = metrics(port, tok)
    for name, labels, want in (
            ("etrelay_dropped_datagrams_total", {"reason": "table_full"}, 3),
            ("etrelay_sessions_refused_total", {}, 3),
            ("etrelay_dropped_datagrams_total", {}, 3),
            ("etrelay_sessions_active", {}, 3),
            ("etrelay_sessions_opened_total", {}, 3)):
        H.expect_eq(H.metric_value(s, name, relay="default", **labels), float(want),
                    f"{name}{labels or ''} with a 4th client over --max-sessions 3")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status")
    relay._join_readers()
    H.check(relay.count(r"^stats default: sessions opened 3 closed 3 active 0; .*full 3\b") == 1,
            f"stats line at exit: {relay.text_lines()[-1:]}")

    # a full table of expired sessions makes room
    relay = ctx.relay("--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
                      "--max-sessions", "2", "--session-timeout", "1s", "--debug")
    a, b = new_client(ctx, relay), new_client(ctx, relay)
    echo(a, b"\x05a", "answer to a")
    echo(b, b"\x05b", "answer to b")
    refused_client(ctx, relay, gs, n=1, tag=b"third-early")
    time.sleep(1.2)
    c = new_client(ctx, relay)
    echo(c, b"\x05third-late", "answer to a 3rd client once the two sessions expired")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status")
    gs.stop()
    master.stop()


def session_ports(ctx):
    lo, hi = H.free_udp_range(10)
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    relay = ctx.relay("--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
                      "--session-ports", f"{lo}-{hi}", "--max-sessions", "10",
                      "--session-timeout", "1s")

    def generation(name):
        clients = [new_client(ctx, relay) for _ in range(10)]
        payloads = []
        for i, c in enumerate(clients):
            p = b"\x06%s-%d-" % (name.encode(), i) + os.urandom(4).hex().encode()
            p = echo(c, p, f"answer to {name} client {i}")
            payloads.append(p)
        srcs = {}
        for p in gs.packets(lambda p: p.data in set(payloads)):
            srcs.setdefault(p.data, set()).add(p.addr)
        ports = []
        for i, p in enumerate(payloads):
            s = srcs.get(p, set())
            H.expect_eq(len(s), 1, f"game-server sources of {name} client {i}'s datagram")
            ports.append(next(iter(s))[1])
        outside = [p for p in ports if not lo <= p <= hi]
        H.check(not outside, f"{name}: session ports {outside} outside --session-ports {lo}-{hi} "
                f"(all: {sorted(ports)})")
        H.expect_eq(len(set(ports)), 10, f"{name}: distinct session ports for 10 clients ({sorted(ports)})")
        return clients, ports

    first, ports1 = generation("first")
    refused_client(ctx, relay, gs, n=2, tag=b"eleventh")
    # the same clients again: same sessions, same ports
    for i, c in enumerate(first):
        echo(c, b"\x06again-%d" % i, f"second answer to client {i}")
    again = gs.packets(lambda p: p.data[6:].startswith(b"\x06again-"))
    H.expect_eq(sorted(p.addr[1] for p in again), sorted(ports1), "ports of the same clients' second datagrams")
    # let them expire: the range is free again for ten new clients (a
    # checker slows the relay's expiry sweep as much as the rest)
    time.sleep(1.3 * H.SLOW)
    second, ports2 = generation("second")
    ctx.note(f"session ports: first {sorted(ports1)}, after expiry {sorted(ports2)}")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status")
    relay._join_readers()
    H.check(relay.count(r"^stats default: sessions opened 20 closed 20 active 0; .*full 2\b") == 1
            and relay.count(r"^stats default: .*\bsocket [1-9]") == 0,
            f"stats line at exit: {relay.text_lines()[-1:]}")
    gs.stop()
    master.stop()


def ports_too_few(ctx):
    up = f"127.0.0.1:{H.free_udp_port()}"
    args = ["--listen", f"127.0.0.1:{H.free_udp_port()}", "--upstream", up,
            "--master", f"127.0.0.1:{H.free_udp_port()}", "--backend", ctx.backend,
            "--session-ports", "21000-21004", "--max-sessions", "10"]
    rc, out, err = H.run_etrelay(ctx, args, timeout=5)
    H.check(rc in (64, 78), f"--session-ports 21000-21004 --max-sessions 10: exit {rc}, expected 64 "
            f"or 78; stderr {err.strip()!r}")
    lines = [l for l in err.splitlines() if l.strip()]
    H.expect_eq(len(lines), 1, f"stderr lines for --session-ports 21000-21004 --max-sessions 10 ({lines})")
    for w in ("max-sessions", "10", "session-ports", "21000-21004"):
        H.check(w in lines[0], f"the error {lines[0]!r} does not mention {w!r}")
    H.check("listening on" not in err, "etrelay started anyway")
    ctx.note(f"session-ports too small: exit {rc}: {lines[0]}")
    # the same range with --max-sessions 5 is fine (positive control)
    rc, out, err = H.run_etrelay(ctx, args[:-1] + ["5", "-t"], timeout=5)
    H.expect_eq(rc, 0, f"-t with --session-ports 21000-21004 --max-sessions 5 (stderr {err.strip()!r})")


def fd_limit(ctx):
    prlimit = H.require_tool("prlimit")
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    wrapper = [prlimit, "--nofile=200:200"]
    args = ["--listen", f"127.0.0.1:{H.free_udp_port()}", "--upstream", f"127.0.0.1:{gs.port}",
            "--master", f"127.0.0.1:{master.port}", "--backend", ctx.backend,
            "--max-sessions", "5000"]
    rc, out, err = H.run_etrelay(ctx, args, timeout=5, wrapper=wrapper)
    H.check(rc not in (0, None), f"--max-sessions 5000 under RLIMIT_NOFILE 200: exit {rc}, expected "
            f"a startup error; stderr {err.strip()!r}")
    H.check("file descriptors" in err and "200" in err and "max-sessions" in err,
            f"--max-sessions 5000 under RLIMIT_NOFILE 200: the error should say that the "
            f"descriptor limit (200) cannot hold max-sessions: {err.strip()!r}")
    H.check("listening on" not in err, "etrelay started anyway")
    ctx.note(f"fd limit: exit {rc}: {err.strip()}")

    # positive control under the same limit: 150 sessions fit, and work
    relay = ctx.relay("--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
                      "--max-sessions", "150", wrapper=wrapper)
    clients = [new_client(ctx, relay) for _ in range(150)]
    for i, c in enumerate(clients):
        echo(c, b"\x07fd-%d" % i, f"answer to client {i} of 150 under RLIMIT_NOFILE 200")
    refused_client(ctx, relay, gs, n=1, tag=b"fd-151")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status (150 sessions under RLIMIT_NOFILE 200)")
    relay._join_readers()
    H.check(relay.count(r"^stats default: sessions opened 150 closed 150 active 0; .*full 1\b") == 1
            and relay.count(r"^stats default: .*\bsocket [1-9]") == 0,
            f"stats line at exit: {relay.text_lines()[-1:]}")

    # the ops plane's connections (64, 8 for health checks and 16 closing) count too: 150
    # sessions and the listener do not fit in 200
    ops = ["--ops-listen", f"127.0.0.1:{H.free_tcp_port()}"]
    rc, out, err = H.run_etrelay(ctx, args[:-1] + ["150"] + ops, timeout=5, wrapper=wrapper)
    H.check(rc == 78 and "file descriptors" in err and "ops plane" in err and "listening on" not in err,
            f"--max-sessions 150 and --ops-listen under RLIMIT_NOFILE 200: expected exit 78 and an "
            f"error naming the ops plane's descriptors, seen exit {rc}, stderr {err.strip()!r}")
    ctx.note(f"fd limit with the ops plane: exit {rc}: {err.strip()}")
    # 60 sessions and 64 ops connections (8 addresses) at once do fit (not
    # 90: under valgrind, which keeps descriptors of its own, they would not)
    port = H.free_tcp_port()
    relay = ctx.relay("--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
                      "--max-sessions", "60", "--ops-listen", f"127.0.0.1:{port}", wrapper=wrapper)
    held = []
    for i in range(64):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((f"127.2.0.{i // 8 + 1}", 0))
        s.connect((H.LOOPBACK, port))
        held.append(s)
    clients = [new_client(ctx, relay) for _ in range(60)]
    for i, c in enumerate(clients):
        echo(c, b"\x07fdops-%d" % i, f"answer to client {i} of 60 beside 64 ops connections")
    for s in held:
        s.close()
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status (60 sessions and 64 ops connections)")
    relay._join_readers()
    H.check(relay.count(r"^stats default: .*\bsocket [1-9]") == 0,
            f"sessions without a socket beside the ops connections: {relay.text_lines()[-1:]}")
    gs.stop()
    master.stop()


def test(ctx):
    H.run_parts(ctx, [max_sessions, session_ports, ports_too_few, fd_limit])


if __name__ == "__main__":
    H.main(test)
