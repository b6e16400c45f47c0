#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The control plane's routes driving the SNI listeners, end to end. An SNI-
only relay (`[sni edge]` with one config-file route file.test, and `[sni
other]` with none) heartbeats a stand-in control plane; the backends are
Python TLS echo servers with their own certificates. Set A {a.test -> 1,
b.test -> 2}: curl and TLS sessions through each name reach their backend,
on both listeners. With sessions kept open through a.test, b.test and
file.test, set B {b.test}: the a.test session is closed by the relay at the
next heartbeat, the other two keep echoing both ways, and a new a.test
connection gets zero bytes then EOF. a.test moved in place to backend 2
closes its open session and new ones reach backend 2; b.test's session
(route unchanged) stays. A control-plane route named like the file's route:
on edge the file's wins, logged once across heartbeats; on other the control
plane's is in force. Routes to the relay's own listeners, this host, a
private or link-local network or a multicast address are dropped (logged
once, counted by reason), the rest of their set applies. A 503 and a
hanging control plane keep set B in force.
/lifecycle and the metrics (etrelay_sni_routes, etrelay_control_routes)
count both kinds of routes throughout."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from tlsutil import TlsEcho, TlsSession, hello, refused  # noqa: E402


def T(seconds):
    return seconds * H.SLOW


def route(name, backend):
    return {"name": name, "upstream": f"{H.LOOPBACK}:{backend.port}"}


def counts(ops):
    """The routes in force: etrelay_sni_routes of edge and other,
    etrelay_control_routes, then the same three from /lifecycle."""
    r = H.http_request(ops, "GET", "/metrics")
    H.expect_eq(r.status, 200, "GET /metrics")
    s = H.parse_metrics(r.text)
    life = H.http_request(ops, "GET", "/lifecycle").json()
    return (H.metric_value(s, "etrelay_sni_routes", listener="edge"),
            H.metric_value(s, "etrelay_sni_routes", listener="other"),
            H.metric_value(s, "etrelay_control_routes"),
            *(x["routes"] for x in life["sni_listeners"]), life["control"]["routes"])


def expect_counts(ops, edge, other, ctl, what):
    H.expect_eq(counts(ops), (edge, other, ctl) * 2,
                f"{what}: routes of edge, other and the control plane (metrics, /lifecycle)")


def ended(ops, reason):
    s = H.parse_metrics(H.http_request(ops, "GET", "/metrics").text)
    return H.metric_value(s, "etrelay_sni_connections_ended_total", listener="edge",
                          reason=reason) or 0


def session(port, name, backend, what):
    """A TLS session to name, which must reach backend (its certificate)."""
    t = TlsSession(port, name, timeout=T(5))
    if t.der != backend.der:
        t.close()
        H.fail(f"{what}: {name} reached another backend than {backend.cn}")
    t.echo(what)
    return t


def curl(port, name, backend, what):
    r = subprocess.run(["curl", "-sk", "--max-time", str(T(5)), "--resolve",
                        f"{name}:{port}:{H.LOOPBACK}", f"https://{name}:{port}/"],
                       capture_output=True, timeout=T(10))
    H.expect_eq((r.returncode, r.stdout), (0, f"backend {backend.cn}\n".encode()),
                f"{what}: curl https://{name}/ (exit, body)")


def still_open(sessions, what):
    for t in sessions:
        H.check(not t.closed_within(0.05), f"{what}: the {t.name} session was closed")
        t.echo(f"{what}: {t.name}")


def routes_follow_the_control_plane(ctx):
    H.require_tool("curl")
    H.require_tool("openssl")
    tmp = ctx.tmpdir()
    b1, b2, bf = (TlsEcho(ctx, tmp, cn) for cn in ("one", "two", "file"))
    port, port2, ops = H.free_tcp_port(), H.free_tcp_port(), H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        # other has no route of its own: only the control plane's (the
        # smaller max-connections keep two listeners within 20000 fds)
        # the backends are on loopback: allowed, that address alone
        f.write(f"control-allow-upstream {H.LOOPBACK}\n"
                f"[sni edge]\nlisten {H.LOOPBACK}:{port}\n"
                f"route file.test {H.LOOPBACK}:{bf.port}\nmax-connections 1024\n"
                f"[sni other]\nlisten {H.LOOPBACK}:{port2}\nmax-connections 1024\n")
    tokf = os.path.join(tmp, "token")
    with open(os.open(tokf, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("ctl-" + "c" * 40 + "\n")
    state = os.path.join(tmp, "state")
    os.mkdir(state, 0o700)
    cp = H.control_plane(ctx)
    set_a = [route("a.test", b1), route("b.test", b2)]
    set_b = [route("b.test", b2)]
    cp.set(routes=set_a)
    env = dict(H.CONTROL_NO_PROXY)
    env["ETRELAY_CONTROL_TOKEN_FILE"] = tokf
    relay = H.relay_env(ctx, env, "-c", conf, "--ops-listen", f"{H.LOOPBACK}:{ops}",
                        "--control-url", cp.url, "--state-directory", state,
                        "--control-interval", "500ms", "--control-timeout", "1s",
                        listen=False, open_limits=False, wait_ready=False)
    relay.READY_RE = r"^sni other listening on "
    relay.wait_ready(T(5))
    relay.wait_for_line(r"^control: heartbeat ok, 2 routes$", T(5))
    # The log line comes once the set is handed to the listener; its
    # workers take it at their next turn.
    H.wait_until(lambda: counts(ops)[0] == 3, T(2), "etrelay_sni_routes 3 with set A")
    expect_counts(ops, 3, 2, 2, "set A")

    # Set A: each name reaches its backend, by curl and by a TLS session,
    # on both listeners (the file's route only on its own).
    for name, b in (("a.test", b1), ("b.test", b2), ("file.test", bf)):
        curl(port, name, b, "set A")
    for name, b in (("a.test", b1), ("b.test", b2)):
        curl(port2, name, b, "set A, listener other")
    refused(port2, hello("file.test"), "set A: edge's file route on listener other")
    sa = session(port, "a.test", b1, "set A")
    sb = session(port, "b.test", b2, "set A")
    sf = session(port, "file.test", bf, "set A")
    refused(port, hello("c.test"), "set A: a name in no set")

    # Set B: the a.test session is closed at the next heartbeat; the
    # others go on; a new a.test connection gets nothing.
    m = relay.mark()
    revoked = ended(ops, "revoked")
    cp.set(routes=set_b)
    relay.wait_for_line(r"^control: heartbeat ok, 1 route$", T(3), start=m)
    t0 = time.monotonic()
    H.check(sa.closed_within(T(2)), "set B: the a.test session is still open 2 s after the "
            "heartbeat that removed a.test")
    ctx.note(f"set B: the a.test session closed {time.monotonic() - t0:.3f} s after the log line")
    sa.close()
    refused(port, hello("a.test"), "set B: a new a.test connection")
    refused(port2, hello("a.test"), "set B: a new a.test connection to listener other")
    still_open([sb, sf], "set B")
    curl(port, "b.test", b2, "set B")
    curl(port2, "b.test", b2, "set B, listener other")
    expect_counts(ops, 2, 1, 1, "set B")
    H.expect_eq(ended(ops, "revoked") - revoked, 1, "set B: connections ended as revoked")

    # a.test back on backend 1, then moved in place to backend 2: its
    # session is closed, new ones reach backend 2; b.test's stays.
    m = relay.mark()
    cp.set(routes=set_a)
    relay.wait_for_line(r"^control: heartbeat ok, 2 routes$", T(3), start=m)
    H.wait_until(lambda: counts(ops)[0] == 3, T(2), "etrelay_sni_routes 3 with set A again")
    sa = session(port, "a.test", b1, "set A again")
    revoked = ended(ops, "revoked")
    n = len(cp.of(H.CONTROL_HEARTBEAT))
    cp.set(routes=[route("a.test", b2), route("b.test", b2)])
    H.wait_until(lambda: len(cp.of(H.CONTROL_HEARTBEAT)) > n, T(2), "a heartbeat")
    H.check(sa.closed_within(T(2)), "a.test moved to backend 2: its session to backend 1 is "
            "still open")
    sa.close()
    sa = session(port, "a.test", b2, "a.test moved to backend 2")
    curl(port, "a.test", b2, "a.test moved to backend 2")
    still_open([sb, sf], "a.test moved")
    curl(port2, "a.test", b2, "a.test moved, listener other")
    expect_counts(ops, 3, 2, 2, "a.test moved")
    H.expect_eq(ended(ops, "revoked") - revoked, 1, "a.test moved: connections ended as revoked")

    # The control plane names the file's route: on edge the file's wins,
    # logged once; on other (no file route) the control plane's is in force.
    m = relay.mark()
    cp.set(routes=[route("file.test", b1), route("a.test", b2), route("b.test", b2)])
    won = r"^sni edge: route file.test: the config file's route wins over the control plane's$"
    relay.wait_for_line(r"^control: heartbeat ok, 3 routes$", T(3), start=m)
    relay.wait_for_line(won, T(1), start=m)
    n = len(cp.of(H.CONTROL_HEARTBEAT))
    H.wait_until(lambda: len(cp.of(H.CONTROL_HEARTBEAT)) >= n + 3, T(3), "three more heartbeats")
    H.expect_eq(relay.count(won, m), 1, "log lines for the shadowed route over 3+ heartbeats")
    H.expect_eq(relay.count(r"^sni other: route file.test", m), 0, "log lines for other")
    still_open([sa, sb, sf], "file.test shadowed")
    session(port, "file.test", bf, "file.test shadowed").close()
    curl(port, "file.test", bf, "file.test shadowed")
    curl(port2, "file.test", b1, "file.test on listener other")
    expect_counts(ops, 3, 3, 3, "file.test shadowed")

    # Routes whose upstream is the relay itself, this host, a private or
    # link-local network (the cloud's metadata service) or no unicast
    # address are dropped, each logged once with its reason and counted;
    # the rest of the set applies.
    m = relay.mark()
    bad = [("ops.test", f"{H.LOOPBACK}:{ops}", "listener", "the relay's own ops listener"),
           ("self.test", f"{H.LOOPBACK}:{port2}", "listener",
            "the relay's own SNI listener other"),
           ("redis.test", "[::ffff:127.0.0.2]:6379", "host", "an address of this host"),
           ("lo6.test", "[::1]:6379", "host", "an address of this host"),
           ("meta.test", "169.254.169.254:80", "private", "a private or link-local"),
           ("lan.test", "10.1.2.3:443", "private", "a private or link-local"),
           ("mcast.test", "224.0.0.1:443", "reserved", "not a globally reachable")]
    cp.set(routes=[route("a.test", b2)] + [{"name": n, "upstream": u} for n, u, _, _ in bad]
           + [route("b.test", b2)])
    relay.wait_for_line(r"^control: heartbeat ok, 2 routes$", T(3), start=m)
    for name, up, reason, why in bad:
        rx = (rf"^control: route {name}: upstream {H.re.escape(up)} refused \({reason}\): "
              rf".*{H.re.escape(why)}.*; the other routes apply$")
        relay.wait_for_line(rx, T(1), start=m, what=name)
    n = len(cp.of(H.CONTROL_HEARTBEAT))
    H.wait_until(lambda: len(cp.of(H.CONTROL_HEARTBEAT)) >= n + 3, T(3), "three more heartbeats")
    H.expect_eq(relay.count(r"^control: route \S+: upstream .* refused", m), len(bad),
                "log lines for the refused routes over 3+ heartbeats")
    s = H.parse_metrics(H.http_request(ops, "GET", "/metrics").text)
    H.expect_eq({r: H.metric_value(s, "etrelay_control_routes_refused", reason=r)
                 for r in ("listener", "host", "private", "reserved")},
                {"listener": 2, "host": 2, "private": 2, "reserved": 1},
                "etrelay_control_routes_refused by reason")
    expect_counts(ops, 3, 2, 2, "refused routes dropped")
    still_open([sa, sb, sf], "refused routes dropped")
    curl(port, "a.test", b2, "refused routes dropped")
    curl(port2, "b.test", b2, "refused routes dropped, listener other")
    for name, _, _, _ in bad:
        refused(port2, hello(name), f"refused route {name}")

    # Set B again, then a 503 and a hanging control plane keep it in force.
    m = relay.mark()
    cp.set(routes=set_b)
    relay.wait_for_line(r"^control: heartbeat ok, 1 route$", T(3), start=m)
    H.check(sa.closed_within(T(2)), "set B again: the a.test session is still open")
    sa.close()
    for mode, rx in (("503", r"^control: heartbeat failed \(HTTP 503"),
                     ("hang", r"^control: heartbeat failed \(no answer within 1000 ms\)")):
        m = relay.mark()
        cp.set(heartbeat=mode, routes=set_a)  # set A, were it answered
        relay.wait_for_line(rx, T(4), start=m, what=mode)
        n = len(cp.of(H.CONTROL_HEARTBEAT))
        H.wait_until(lambda: len(cp.of(H.CONTROL_HEARTBEAT)) > n, T(3), f"a heartbeat after {mode}")
        still_open([sb, sf], f"after {mode}")
        session(port, "b.test", b2, f"after {mode}").close()
        refused(port, hello("a.test"), f"after {mode}: a new a.test connection")
        refused(port2, hello("a.test"), f"after {mode}: a new a.test connection to other")
        expect_counts(ops, 2, 1, 1, f"after {mode}")
        cp.set(routes=set_b)
    cp.set(heartbeat="ok")
    for t in (sb, sf):
        t.close()
    # Each refusal above was for the name: c.test and three of a.test on
    # edge; file.test, the refused routes' names and three of a.test on other.
    s = H.parse_metrics(H.http_request(ops, "GET", "/metrics").text)
    H.expect_eq([H.metric_value(s, "etrelay_sni_connections_total", listener=x,
                                result="unknown_name") for x in ("edge", "other")],
                [4, 4 + len(bad)],
                "etrelay_sni_connections_total{result=unknown_name} of edge and other")
    ctx.check_relays_alive()


def test(ctx):
    H.run_parts(ctx, [routes_follow_the_control_plane])


if __name__ == "__main__":
    H.main(test)
