#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A config file with two [relay] sections served by one process: two game
server stand-ins, two public ports, one master stand-in.

- Each relay forwards to its own game server only, and each is
  heartbeated (with its own game's tag) and listed at its own public port;
  /lifecycle and /metrics show both.
- `etrelay -t -c FILE` exits 0 with one line per relay.
- A file with 3 errors exits 78 and reports all 3 as file:line.
- Two SNI listeners on one port, one on 0.0.0.0 and one on 127.0.0.1: a
  start and `-t` both exit 78 with one error naming both sections and
  lines (a start used to fail on the second listener blaming "another
  process", and -t passed it).
- `-t --probe` exits 0 with "ok" lines while both game servers answer,
  and 1 naming the relay whose game server is stopped.
- The command line wins over the file: `-c FILE --session-timeout 1s
  --debug` expires the sessions of both relays after about 1 s, although
  the file says 60s and 30s."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

CONF = """\
# two relays in one process
ops-listen 127.0.0.1:{ops}
drain-timeout 0
heartbeat-interval 1s
probe-timeout 300ms
session-timeout 60s
master 127.0.0.1:{m}

[relay alpha]
listen 127.0.0.1:{p1}
upstream 127.0.0.1:{g1}
game et

[relay beta]
listen 127.0.0.1:{p2}
upstream 127.0.0.1:{g2}
game q3
session-timeout 30s
max-sessions 50
"""

BAD = """\
heartbeat-interval 1s
frobnicate yes
[relay alpha]
listen 127.0.0.1:{p1}
upstream 127.0.0.1:{g1}
max-sessions lots
[relay beta]
backend epoll
listen 127.0.0.1:{p2}
upstream 127.0.0.1:{g2}
"""


def lines_of(text):
    return [l for l in text.splitlines() if l.strip()]


def start(ctx, path, *extra):
    relay = ctx.relay("-c", path, *extra, listen=False, wait_ready=False)
    relay.READY_RE = r"^etrelay \S+ relay beta listening on "
    relay.wait_ready()
    return relay


def echo(c, payload, what):
    H.expect_eq(c.request(payload, what=what), b"ECHO:" + payload, what)


class Setup:
    pass


def test(ctx):
    st = Setup()
    st.g1, st.g2 = ctx.game_server(), ctx.game_server()
    st.master = ctx.master()
    st.p1 = H.free_udp_port()
    st.p2 = H.free_udp_port()
    for _ in range(100):
        if st.p2 != st.p1:
            break
        st.p2 = H.free_udp_port()
    st.ops = H.free_tcp_port()
    d = ctx.tmpdir()
    st.dir = d
    st.path = os.path.join(d, "etrelay.conf")
    with open(st.path, "w") as f:
        f.write(CONF.format(ops=st.ops, m=st.master.port, p1=st.p1, p2=st.p2, g1=st.g1.port,
                            g2=st.g2.port))
    st.a1, st.a2 = (H.LOOPBACK, st.p1), (H.LOOPBACK, st.p2)

    def check_only(ctx):
        config_test(ctx, st)

    def probe_ok(ctx):
        probe_both_up(ctx, st)

    def three_errors(ctx):
        errors(ctx, st)

    def two_relays(ctx):
        daemon(ctx, st)

    def tcp_listeners_clash(ctx):
        tcp_clash(ctx, st)

    def command_line_wins(ctx):
        override(ctx, st)

    def probe_one_down(ctx):
        probe_down(ctx, st)

    H.run_parts(ctx, [check_only, probe_ok, three_errors, tcp_listeners_clash, two_relays,
                      command_line_wins, probe_one_down])


def config_test(ctx, st):
    g1, g2, p1, p2, path = st.g1, st.g2, st.p1, st.p2, st.path
    # -t: one line per relay, then the verdict
    rc, out, err = H.run_etrelay(ctx, ["-t", "-c", path, "--backend", ctx.backend], timeout=5)
    H.expect_eq(rc, 0, f"exit status of etrelay -t -c FILE (stderr {err.strip()!r})")
    H.expect_eq(lines_of(out), [
        f"relay alpha: listen 127.0.0.1:{p1}, upstream 127.0.0.1:{g1.port}, game ET, 1 masters, "
        f"max-sessions 4000",
        f"relay beta: listen 127.0.0.1:{p2}, upstream 127.0.0.1:{g2.port}, game Q3, 1 masters, "
        f"max-sessions 50",
        f"etrelay: configuration {path} is valid (2 relays)",
    ], "stdout of etrelay -t -c FILE")


def probe_both_up(ctx, st):
    g1, g2, master, path = st.g1, st.g2, st.master, st.path
    rc, out, err = H.run_etrelay(ctx, ["-t", "--probe", "-c", path], timeout=15)
    got = lines_of(out)
    H.expect_eq(rc, 0, f"exit status of -t --probe with both game servers up (stdout {got})")
    # a master: resolved, reachable by the listener's family; nothing more is claimed
    reach = (f"master 127.0.0.1:{master.port}: resolved to 127.0.0.1:{master.port}, which the "
             f"listener 127.0.0.1:{{}} can reach (whether it answers heartbeats is not checked)")
    for want in ("relay alpha: " + reach.format(st.p1), "relay beta: " + reach.format(st.p2),
                 "etrelay: probe ok"):
        H.check(want in got, f"-t --probe: no line {want!r} in {got}")
    H.check(not any("FAILED" in l for l in got), f"-t --probe with both up printed a failure: {got}")
    for name, gs in (("alpha", g1), ("beta", g2)):
        head = f"relay {name}: upstream 127.0.0.1:{gs.port} (127.0.0.1:{gs.port}): ok, answered getinfo"
        H.check(any(l.startswith(head) for l in got), f"-t --probe: no line starting {head!r} in {got}")
    # the stand-in's infoResponse is "infoResponse\n\\challenge\\...\\hostname\\test
    # ...\\mapname\\oasago2", as real servers send it
    for name, gs in (("alpha", g1), ("beta", g2)):
        want = (f"relay {name}: upstream 127.0.0.1:{gs.port} (127.0.0.1:{gs.port}): ok, answered "
                f"getinfo (hostname 'test', map 'oasago2')")
        H.check(want in got, f"-t --probe: no line {want!r} in {got}")


def errors(ctx, st):
    # three errors: all three reported, each as file:line
    bad = os.path.join(st.dir, "bad.conf")
    with open(bad, "w") as f:
        f.write(BAD.format(p1=st.p1, p2=st.p2, g1=st.g1.port, g2=st.g2.port))
    for extra in ([], ["-t"]):
        rc, out, err = H.run_etrelay(ctx, extra + ["-c", bad, "--backend", ctx.backend], timeout=5)
        what = f"etrelay {' '.join(extra + ['-c', 'bad.conf'])}"
        H.expect_eq(rc, 78, f"exit status of {what} (stderr {err.strip()!r})")
        errs = lines_of(err)
        H.expect_eq(len(errs), 3, f"error lines of {what}: {errs}")
        for line, (n, word) in zip(errs, ((2, "frobnicate"), (6, "max-sessions"), (8, "backend"))):
            H.check(line.startswith(f"{bad}:{n}: ") and word in line,
                    f"{what}: expected an error for line {n} naming {word!r}, got {line!r}")
        H.check("listening on" not in err and out.strip() == "",
                f"{what}: printed more than the errors: stdout {out!r}")


TCP_CLASH = """\
[sni wild]
listen 0.0.0.0:{p}
route a.test 127.0.0.1:{g}
max-connections 64
[sni one]
listen 127.0.0.1:{p}
route b.test 127.0.0.1:{g}
max-connections 64
"""


def tcp_clash(ctx, st):
    path = os.path.join(st.dir, "clash.conf")
    with open(path, "w") as f:
        f.write(TCP_CLASH.format(p=H.free_tcp_port(), g=st.g1.port))
    for extra in ([], ["-t"]):
        rc, out, err = H.run_etrelay(ctx, extra + ["-c", path, "--backend", ctx.backend],
                                     timeout=5)
        what = f"etrelay {' '.join(extra + ['-c', 'clash.conf'])}"
        H.expect_eq(rc, 78, f"exit status of {what} (stderr {err.strip()!r})")
        errs = lines_of(err)
        want = f"{path}:5: sni one: listen 127.0.0.1:"
        H.check(len(errs) == 1 and errs[0].startswith(want)
                and errs[0].endswith(": the listen address of sni wild (line 1)"),
                f"{what}: expected one error {want}...sni wild (line 1), got {errs}")


def daemon(ctx, st):
    g1, g2, master, p1, p2, a1, a2, ops = st.g1, st.g2, st.master, st.p1, st.p2, st.a1, st.a2, st.ops
    # the daemon: two relays, each with its own server and heartbeat
    relay = start(ctx, st.path)
    relay.wait_for_line(
        rf"^etrelay \S+ relay alpha listening on 127\.0\.0\.1:{p1}, upstream 127\.0\.0\.1:{g1.port}, "
        rf"backend {ctx.backend}, game ET \(EnemyTerritory-1/ETFlatline-1\), masters "
        rf"127\.0\.0\.1:{master.port}$", 1.0)
    relay.wait_for_line(
        rf"^etrelay \S+ relay beta listening on 127\.0\.0\.1:{p2}, upstream 127\.0\.0\.1:{g2.port}, "
        rf"backend {ctx.backend}, game Q3 \(QuakeArena-1/none\), masters 127\.0\.0\.1:{master.port}$",
        1.0)
    H.wait_until(lambda: {a1, a2} <= master.listed_set(), 5.0,
                 "the master stand-in to list both public ports")
    tags = {(tag, addr) for _, tag, addr in master.heartbeat_list()}
    H.expect_eq(tags, {("EnemyTerritory-1", a1), ("QuakeArena-1", a2)},
                "(tag, source) of the heartbeats at the master")
    H.expect_eq(master.listed_set(), {a1, a2}, "addresses the master lists")
    H.check(g1.probes() and g2.probes(), "each game server should be probed")

    # each relay's clients reach its own game server only
    ca, cb = ctx.client(a1), ctx.client(a2)
    pa = [b"\x09alpha-%d-" % i + os.urandom(4).hex().encode() for i in range(5)]
    pb = [b"\x09beta-%d-" % i + os.urandom(4).hex().encode() for i in range(5)]
    for p in pa:
        echo(ca, p, "answer through relay alpha")
    for p in pb:
        echo(cb, p, "answer through relay beta")
    # one client socket talking to both: two sessions, two servers
    both = ctx.client(a1)
    px, py = b"\x09both-alpha", b"\x09both-beta"
    echo(both, px, "answer to the shared client through alpha")
    both.sock.sendto(py, a2)
    data, src = both.sock.recvfrom(H.MAX_DGRAM)
    H.expect_eq((data, src), (b"ECHO:" + py, a2), "answer to the shared client through beta")
    H.expect_eq(len(g1.sources_for(pa + [px])), 2, "session sources at alpha's server (ca, both)")
    H.expect_eq(len(g2.sources_for(pb + [py])), 2, "session sources at beta's server (cb, both)")
    H.expect_eq(g2.sources_for(pa + [px]), set(), "alpha's clients' datagrams at beta's server")
    H.expect_eq(g1.sources_for(pb + [py]), set(), "beta's clients' datagrams at alpha's server")

    life = H.http_request(ops, "GET", "/lifecycle").json()
    rel = {r["name"]: r for r in life["relays"]}
    H.expect_eq(sorted(rel), ["alpha", "beta"], "relays in /lifecycle")
    for name, addr, gs, game in (("alpha", p1, g1, "ET"), ("beta", p2, g2, "Q3")):
        r = rel[name]
        H.expect_eq((r["public_address"], r["upstream"], r["game"], r["server"]),
                    (f"127.0.0.1:{addr}", f"127.0.0.1:{gs.port}", game, "up"),
                    f"/lifecycle relay {name}")
        H.expect_eq(r["masters"][0]["listing_confirmed"], True, f"listing_confirmed of {name}")
    # sessions: 2 clients + the master's challenge session on each relay
    H.expect_eq((rel["alpha"]["active_sessions"], rel["beta"]["active_sessions"],
                 life["details"]["active_sessions"]), (3, 3, 6),
                "active sessions (alpha, beta, total)")
    s = H.parse_metrics(H.curl_request(ops, "/metrics").text)
    for name, n_up in (("alpha", len(pa) + 1), ("beta", len(pb) + 1)):
        up = H.metric_value(s, "etrelay_forwarded_datagrams_total", relay=name, direction="up")
        H.check(up is not None and up >= n_up, f"forwarded up for {name}: {up}, sent {n_up}+")
    H.expect_eq(H.http_request(ops, "GET", "/readyz").status, 200, "/readyz with both servers up")
    # one relay's server goes away: not ready, and the answer names it
    mark = relay.mark()
    g2.stop()
    relay.wait_for_line(rf"^server down: 127\.0\.0\.1:{g2.port} did not answer 3 probes$", 5.0, mark)
    r = H.wait_until(lambda: (lambda x: x if x.status == 503 else None)(H.http_request(ops, "GET", "/readyz")),
                     1.0, "/readyz 503 with beta's server down")
    H.check(b"relay beta" in r.body and str(g2.port).encode() not in r.body,
            f"/readyz 503 body should name relay beta but not its server's address: {r.body!r}")
    rel = {x["name"]: x for x in H.http_request(ops, "GET", "/lifecycle").json()["relays"]}
    H.expect_eq((rel["alpha"]["server"], rel["beta"]["server"]), ("up", "down"),
                "/lifecycle servers (alpha, beta) with beta's down")
    g2.start()
    relay.wait_for_line(rf"^server up: 127\.0\.0\.1:{g2.port} answered the probe$", 5.0, mark)
    H.wait_until(lambda: H.http_request(ops, "GET", "/readyz").status == 200, 1.0,
                 "/readyz 200 once beta's server is back")

    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM")
    relay._join_readers()
    for name in ("alpha", "beta"):
        H.expect_eq(relay.count(rf"^stats {name}: sessions opened 3 closed 3 active 0;"), 1,
                    f"stats line of relay {name} at exit")
    H.expect_eq(relay.count(rf"^flatline ETFlatline-1 -> 127\.0\.0\.1:{master.port} "), 1,
                "flatlines at exit (alpha only: q3 has none)")



def override(ctx, st):
    a1, a2, path = st.a1, st.a2, st.path
    # the command line wins: 1 s sessions on both relays, and debug lines
    relay = start(ctx, path, "--session-timeout", "1s", "--debug")
    ca, cb = ctx.client(a1), ctx.client(a2)
    echo(ca, b"\x09short-a", "answer through alpha (override run)")
    ta = time.monotonic()
    echo(cb, b"\x09short-b", "answer through beta (override run)")
    tb = time.monotonic()
    for c, t, name in ((ca, ta, "alpha"), (cb, tb, "beta")):
        _, _, tl = relay.wait_for_line(rf"^session - 127\.0\.0\.1:{c.port} \(idle, \d+ active\)$", 4.0,
                                       what=f"the idle close of the {name} session")
        H.check(0.8 <= tl - t <= 2.2, f"{name}: the session closed {tl - t:.2f} s after its last "
                f"datagram; --session-timeout 1s on the command line should win over the file")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status (override run)")



def probe_down(ctx, st):
    g1, g2, path = st.g1, st.g2, st.path
    # -t --probe with beta's game server stopped
    g2.stop()
    t = time.monotonic()
    rc, out, err = H.run_etrelay(ctx, ["-t", "--probe", "-c", path], timeout=15)
    got = lines_of(out)
    H.expect_eq(rc, 1, f"exit status of -t --probe with beta's server stopped (stdout {got})")
    H.check(any(l.startswith(f"relay beta: upstream 127.0.0.1:{g2.port}") and "FAILED" in l for l in got),
            f"-t --probe: no FAILED line for relay beta: {got}")
    H.check(any(l.startswith(f"relay alpha: upstream 127.0.0.1:{g1.port}") and ": ok," in l for l in got),
            f"-t --probe: alpha should still be ok: {got}")
    H.check("etrelay: probe FAILED" in got, f"-t --probe: no 'etrelay: probe FAILED' line: {got}")
    H.check(not any(l.startswith("relay alpha") and "FAILED" in l for l in got),
            f"-t --probe blames alpha too: {got}")
    ctx.note(f"-t --probe with one server down: exit 1 after {time.monotonic() - t:.1f} s")



if __name__ == "__main__":
    H.main(test)
