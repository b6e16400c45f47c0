#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""What the control-plane client tells, against the stand-in control
plane. The heartbeat's health is what /readyz says: with the game server
down, HEALTH_DEGRADED and the reason /readyz gives in healthReasons. Two
different bad answers in a row (a name twice, then a non-numeric
upstream) are both logged."""

import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HEARTBEAT = H.CONTROL_HEARTBEAT


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


def stop(relay, what):
    relay.signal(signal.SIGTERM)
    H.check(relay.wait_exit(T(10.0)) == 0, f"{what}: etrelay did not exit 0 on SIGTERM")


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
    H.run_parts(ctx, [health_follows_readyz, each_reason_logged])


if __name__ == "__main__":
    H.main(test)
