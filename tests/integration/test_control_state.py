#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""What the control-plane client keeps and tells, against the stand-in
control plane. The route set survives a restart while the control plane is
down: written to control-routes.json in the state directory (mode 0600,
the answer's shape), read at the start before the SNI listener accepts, so
a name routes at once; /lifecycle (control.routes_stale) and
etrelay_control_routes_stale say stale until the stand-in is back and a
heartbeat succeeds. A corrupt or group-readable route file is logged with
the fix and the relay starts without it. The heartbeat's health is what
/readyz says: with the game server down, HEALTH_DEGRADED and the reason
/readyz gives in healthReasons. Two different bad answers in a row (a name
twice, then a non-numeric upstream) are both logged."""

import http.server
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from tlsutil import TlsEcho  # noqa: E402

HEARTBEAT = H.CONTROL_HEARTBEAT
ROUTES_FILE = "control-routes.json"


def T(seconds):
    return seconds * H.SLOW


def token_file(d):
    p = os.path.join(d, "api-token")
    with open(os.open(p, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(H.CONTROL_API_TOKEN + "\n")
    return p


def state_dir(d):
    state = os.path.join(d, "state")
    os.mkdir(state, 0o700)
    return state


def control(ops):
    return H.http_request(ops, "GET", "/lifecycle").json()["control"]


def stale_metric(ops):
    r = H.http_request(ops, "GET", "/metrics")
    H.expect_eq(r.status, 200, "GET /metrics")
    s = H.parse_metrics(r.text)
    return (H.metric_value(s, "etrelay_control_routes_stale"),
            H.metric_value(s, "etrelay_control_routes"))


def curl(port, name, backend, what):
    r = subprocess.run(["curl", "-sk", "--max-time", str(T(5)), "--resolve",
                        f"{name}:{port}:{H.LOOPBACK}", f"https://{name}:{port}/"],
                       capture_output=True, timeout=T(10))
    H.expect_eq((r.returncode, r.stdout), (0, f"backend {backend.cn}\n".encode()),
                f"{what}: curl https://{name}/ (exit, body)")


def down(cp):
    """Stop the stand-in: its port refuses connections. Returns how to
    bring it back on the same port (the relay's control-url)."""
    handler = cp.server.RequestHandlerClass
    cp.server.shutdown()
    cp.server.server_close()

    def up():
        for attempt in range(20):
            try:
                cp.server = http.server.ThreadingHTTPServer((H.LOOPBACK, cp.port), handler)
                break
            except OSError:
                if attempt == 19:
                    raise
                time.sleep(0.1)
        cp.server.daemon_threads = True
        cp.thread = threading.Thread(target=cp.server.serve_forever, daemon=True)
        cp.thread.start()
    return up


def sni_relay(ctx, cp, conf, state, tokf, ops, port):
    env = dict(H.CONTROL_NO_PROXY)
    env["ETRELAY_CONTROL_TOKEN_FILE"] = tokf
    relay = H.relay_env(ctx, env, "-c", conf, "--ops-listen", f"{H.LOOPBACK}:{ops}",
                        "--control-url", cp.url, "--state-directory", state,
                        "--control-interval", "500ms", "--control-timeout", "1s",
                        listen=False, open_limits=False, wait_ready=False)
    relay.READY_RE = r"^sni edge listening on "
    relay.wait_ready(T(5))
    return relay


def stop(relay, what):
    relay.signal(signal.SIGTERM)
    H.check(relay.wait_exit(T(10.0)) == 0, f"{what}: etrelay did not exit 0 on SIGTERM")


def allow_loopback(ctx):
    """The line that lets the control plane's routes reach the backends on
    loopback; none for a relay from before control-allow-upstream (it
    reached loopback without one), so that this test shows what such a
    relay does rather than its refusal of the key."""
    h = subprocess.run([ctx.binary, "--help"], capture_output=True, text=True, timeout=T(10))
    known = "control-allow-upstream" in h.stdout + h.stderr
    return f"control-allow-upstream {H.LOOPBACK}\n" if known else ""


def routes_survive_a_restart(ctx):
    H.require_tool("curl")
    H.require_tool("openssl")
    tmp = ctx.tmpdir()
    b1 = TlsEcho(ctx, tmp, "one")
    port, ops = H.free_tcp_port(), H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(allow_loopback(ctx) +
                f"[sni edge]\nlisten {H.LOOPBACK}:{port}\nmax-connections 256\n")
    tokf = token_file(tmp)
    state = state_dir(tmp)
    rf = os.path.join(state, ROUTES_FILE)
    cp = H.control_plane(ctx)
    given = [{"name": "a.test", "upstream": f"{H.LOOPBACK}:{b1.port}"}]
    cp.set(routes=given)

    relay = sni_relay(ctx, cp, conf, state, tokf, ops, port)
    relay.wait_for_line(r"^control: heartbeat ok, 1 route$", T(5))
    curl(port, "a.test", b1, "the control plane's route")
    H.wait_until(lambda: os.path.exists(rf), T(3), f"{rf} to be written")
    H.expect_eq(oct(stat.S_IMODE(os.stat(rf).st_mode)), oct(0o600), "the route file's mode")
    H.expect_eq(os.stat(rf).st_uid, os.geteuid(), "the route file's owner")
    with open(rf) as f:
        H.expect_eq(json.load(f), {"sniRoutes": given}, "the route file")
    H.check(not os.path.exists(rf + ".tmp"), "the temporary route file is left behind")
    H.expect_eq(control(ops)["routes_stale"], False, "routes_stale with the control plane up")
    written = os.stat(rf).st_mtime_ns
    n = len(cp.of(HEARTBEAT))
    H.wait_until(lambda: len(cp.of(HEARTBEAT)) >= n + 2, T(3), "two more heartbeats")
    H.expect_eq(os.stat(rf).st_mtime_ns, written, "the route file rewritten for the same set")
    stop(relay, "first start")

    # the control plane is down, the relay starts again: the route works at once
    up = down(cp)
    relay = sni_relay(ctx, cp, conf, state, tokf, ops, port)
    relay.wait_for_line(rf"^control: 1 route from {state}/{ROUTES_FILE} in force, stale until "
                        r"a heartbeat succeeds$", T(2))
    curl(port, "a.test", b1, "after a restart with the control plane down")
    H.wait_until(lambda: control(ops)["last_result"] == "network_error", T(3),
                 "a heartbeat to fail")
    c = control(ops)
    H.check(c["routes_stale"] is True and c["routes"] == 1, f"/lifecycle control while down: {c}")
    H.expect_eq(stale_metric(ops), (1.0, 1.0),
                "etrelay_control_routes_stale, etrelay_control_routes while down")
    curl(port, "a.test", b1, "while the heartbeats fail")

    # the stand-in is back: the next good heartbeat clears stale
    up()
    relay.wait_for_line(r"^control: heartbeat ok, 1 route$", T(5))
    H.wait_until(lambda: control(ops)["routes_stale"] is False, T(2), "routes_stale to clear")
    H.expect_eq(stale_metric(ops), (0.0, 1.0), "the metrics once a heartbeat succeeded")
    stop(relay, "the restart with the control plane down")

    # a corrupt route file, then a group-readable one: logged with the fix,
    # the start goes on without them
    up = down(cp)
    for text, mode, rx in (
            ('{"sniRoutes":[{"name":"a.test",', 0o600,
             rf"^control: {state}/{ROUTES_FILE}: not a route set: .*; starting without the "
             r"last route set"),
            (json.dumps({"sniRoutes": given}), 0o640,
             rf"^control: {state}/{ROUTES_FILE}: mode 0640 lets its group use the route set; "
             rf"`chmod 600 {state}/{ROUTES_FILE}`; starting without the last route set")):
        os.unlink(rf)
        with open(os.open(rf, os.O_WRONLY | os.O_CREAT, mode), "w") as f:
            f.write(text)
        os.chmod(rf, mode)
        relay = sni_relay(ctx, cp, conf, state, tokf, ops, port)
        relay.wait_for_line(rx, T(2), what=f"the route file of mode {mode:o}")
        c = control(ops)
        H.check(c["routes_stale"] is False and c["routes"] == 0,
                f"/lifecycle control without a usable route file: {c}")
        stop(relay, f"a route file of mode {mode:o}")
    up()


def health_follows_readyz(ctx):
    tmp = ctx.tmpdir()
    tokf = token_file(tmp)
    state = state_dir(tmp)
    cp = H.control_plane(ctx)
    gs = ctx.game_server()
    ops = H.free_tcp_port()
    env = dict(H.CONTROL_NO_PROXY)
    env["ETRELAY_CONTROL_TOKEN_FILE"] = tokf
    relay = H.relay_env(ctx, env, "--upstream", f"127.0.0.1:{gs.port}",
                        "--master", "127.0.0.1:9", "--heartbeat-interval", "1s",
                        "--probe-timeout", "300ms", "--ops-listen", f"127.0.0.1:{ops}",
                        "--control-url", cp.url, "--state-directory", state,
                        "--control-interval", "500ms", "--control-timeout", "1s",
                        wait_ready=False)
    relay.wait_ready(timeout=T(5.0))

    def last_health():
        hbs = cp.of(HEARTBEAT)
        return json.loads(hbs[-1][3]) if hbs else {}

    H.wait_until(lambda: H.http_request(ops, "GET", "/readyz").status == 200, T(5),
                 "/readyz 200")
    n = len(cp.of(HEARTBEAT))
    H.wait_until(lambda: len(cp.of(HEARTBEAT)) > n + 1, T(3), "heartbeats while ready")
    b = last_health()
    H.check(b.get("health") == "HEALTH_READY" and "healthReasons" not in b,
            f"the heartbeat while /readyz answers 200: {b}")

    gs.stop()
    H.wait_until(lambda: H.http_request(ops, "GET", "/readyz").status == 503, T(6),
                 "/readyz 503 with the game server down")
    why = H.http_request(ops, "GET", "/readyz").text.strip()
    H.wait_until(lambda: last_health().get("health") == "HEALTH_DEGRADED", T(3),
                 "a heartbeat whose health is HEALTH_DEGRADED")
    b = last_health()
    H.expect_eq(b.get("healthReasons"), [why], "healthReasons (the reason /readyz gives)")
    H.check("the game server did not answer its last probe" in why, f"/readyz said {why!r}")
    stop(relay, "health")


def each_reason_logged(ctx):
    tmp = ctx.tmpdir()
    tokf = token_file(tmp)
    state = state_dir(tmp)
    cp = H.control_plane(ctx)
    gs = ctx.game_server()
    env = dict(H.CONTROL_NO_PROXY)
    env["ETRELAY_CONTROL_TOKEN_FILE"] = tokf
    relay = H.relay_env(ctx, env, "--upstream", f"127.0.0.1:{gs.port}",
                        "--master", "127.0.0.1:9", "--control-url", cp.url,
                        "--state-directory", state,
                        "--control-interval", "500ms", "--control-timeout", "1s",
                        wait_ready=False)
    relay.wait_ready(timeout=T(5.0))
    relay.wait_for_line(r"^control: heartbeat ok, 0 routes$", T(5))
    m = relay.mark()
    twice = [{"name": "dup.example.com", "upstream": "10.0.0.2:443"},
             {"name": "dup.example.com", "upstream": "10.0.0.3:443"}]
    cp.set(routes=twice)
    relay.wait_for_line(r"^control: heartbeat failed \(.*dup\.example\.com.*\); keeping the last "
                        r"0 routes", T(3), start=m, what="a name twice")
    # a non-numeric upstream: the same result (bad_answer), another reason
    cp.set(heartbeat="bad_route")
    relay.wait_for_line(r"^control: heartbeat failed \(sniRoutes\[1\] \(bad\.example\.com\)"
                        r"\.upstream: .*\); keeping the last 0 routes", T(3), start=m,
                        what="a non-numeric upstream after a name twice")
    # and the same reason again is not logged again
    n = len(cp.of(HEARTBEAT))
    H.wait_until(lambda: len(cp.of(HEARTBEAT)) >= n + 3, T(4), "three more bad answers")
    H.expect_eq(relay.count(r"^control: heartbeat failed \(sniRoutes\[1\] \(bad", m), 1,
                "log lines for the same bad answer repeated")
    stop(relay, "bad answers")


def test(ctx):
    H.run_parts(ctx, [routes_survive_a_restart, health_follows_readyz, each_reason_logged])


if __name__ == "__main__":
    H.main(test)
