#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The control-plane client against a stand-in control plane (Python's
http.server on 127.0.0.1, recording every request, answering as scripted):
one enrolment across two starts (the second reads the state file, mode
0600); heartbeats at the set interval with the API token; a route set, then
a smaller one, shown by /lifecycle and the metrics (promtool clean); a 503,
a hanging control plane (longer than control-timeout), bad JSON and a bad
route keep the last set while the relay keeps relaying and answering; each
result is logged once per change; enrolment backoff doubles from the
minimum to the cap, and a refused bootstrap token waits the cap; a token
from ETRELAY_CONTROL_TOKEN skips enrolment; a state directory others may
write is refused with a clear error."""

import json
import os
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

ENROLL = H.CONTROL_ENROLL
HEARTBEAT = H.CONTROL_HEARTBEAT
BOOTSTRAP = "bootstrap-" + "b" * 40
API_TOKEN = H.CONTROL_API_TOKEN
# Under valgrind (ETRELAY_SLOW) every wait and bound grows.
def T(seconds):
    return seconds * H.SLOW


NO_PROXY = H.CONTROL_NO_PROXY


def routes(n, base=0):
    return [{"name": f"svc{base + i}.example.com", "upstream": f"10.0.0.{base + i + 1}:443",
             "proxyV2": i % 2 == 1} for i in range(n)]


def write_token(d, name, token):
    p = os.path.join(d, name)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, token.encode() + b"\n")
    os.close(fd)
    return p


def lifecycle(port, tok):
    return H.get_json(port, "/lifecycle", tok)["control"]


def metrics(port, tok):
    r = H.http_request(port, "GET", "/metrics", token=tok)
    H.expect_eq(r.status, 200, "GET /metrics")
    exe = H.require_tool("promtool")
    p = subprocess.run([exe, "check", "metrics"], input=r.body, capture_output=True, timeout=20)
    out = (p.stdout + p.stderr).decode("utf-8", "replace").strip()
    H.check(p.returncode == 0 and not out, f"promtool check metrics: {out[:1000]}")
    return H.parse_metrics(r.text)


def start(ctx, cp, gs, state, extra=(), env=None, ops=None):
    args = ["--upstream", f"127.0.0.1:{gs.port}", "--master", "127.0.0.1:9",
            "--control-url", cp.url, "--state-directory", state,
            "--control-interval", "500ms", "--control-timeout", "1s"] + list(extra)
    if ops:
        args += ["--ops-listen", f"127.0.0.1:{ops}"]
    e = dict(NO_PROXY)
    e["ETRELAY_LIFECYCLE_TOKEN"] = "l" * 40
    e.update(env or {})
    r = H.relay_env(ctx, e, *args, wait_ready=False)
    r.wait_ready(timeout=T(5.0))
    return r


def responsive(ctx, relay, port, tok, what):
    """The ops plane answers at once and a game client's datagram passes."""
    t0 = time.monotonic()
    r = H.http_request(port, "GET", "/healthz", timeout=T(2.0))
    H.expect_eq(r.status, 200, f"/healthz {what}")
    H.check(time.monotonic() - t0 < T(0.5), f"/healthz took {time.monotonic() - t0:.2f} s {what}")
    c = ctx.client(relay)
    payload = c.game(b"ping " + what.encode())
    H.expect_eq(c.request(payload, timeout=T(2.0), what=f"an echo {what}"), b"ECHO:" + payload,
                f"echo {what}")


def enrol_once_and_route_sets(ctx):
    tok = "l" * 40
    d = ctx.tmpdir()
    state = os.path.join(d, "state")
    os.mkdir(state, 0o700)
    boot = write_token(d, "bootstrap", BOOTSTRAP)
    cp = H.control_plane(ctx)
    cp.set(routes=routes(3))
    gs = ctx.game_server()
    port = H.free_tcp_port()
    relay = start(ctx, cp, gs, state, ["--control-bootstrap-token-file", boot], ops=port)
    relay.wait_for_line(r"^control: enrolled as relay relay-7; credential kept in ", T(5.0))
    relay.wait_for_line(r"^control: heartbeat ok, 3 routes$", T(5.0))

    # the enrolment: the bootstrap token as a Bearer, Connect's headers, version and hostname
    enrols = cp.of(ENROLL)
    H.expect_eq(len(enrols), 1, "enrolments")
    _, _, hdr, body = enrols[0]
    H.expect_eq(hdr.get("Authorization"), f"Bearer {BOOTSTRAP}", "Enroll's Authorization")
    H.expect_eq(hdr.get("Content-Type"), "application/json", "Enroll's Content-Type")
    H.expect_eq(hdr.get("Connect-Protocol-Version"), "1", "Enroll's Connect-Protocol-Version")
    b = json.loads(body)
    H.check(b.get("version") and b.get("hostname") == os.uname().nodename,
            f"Enroll body {b}")
    sf = os.path.join(state, "control-credential.json")
    mode = stat.S_IMODE(os.stat(sf).st_mode)
    H.expect_eq(oct(mode), oct(0o600), "state file mode")
    with open(sf) as f:
        H.expect_eq(json.load(f), {"relayId": "relay-7", "apiToken": API_TOKEN}, "state file")
    H.check(not os.path.exists(sf + ".tmp"), "the temporary state file is left behind")

    # heartbeats at the interval, with the API token and the report
    H.wait_until(lambda: len(cp.of(HEARTBEAT)) >= 6, T(6.0), "six heartbeats")
    hbs = cp.of(HEARTBEAT)
    gaps = sorted(b[0] - a[0] for a, b in zip(hbs[:6], hbs[1:6]))
    ctx.note(f"heartbeat gaps (s): {', '.join(f'{g:.3f}' for g in gaps)}")
    H.check(0.4 <= gaps[len(gaps) // 2] <= 0.5 + T(0.15), f"median heartbeat gap {gaps} (want 0.5 s)")
    H.check(gaps[0] >= 0.3, f"two heartbeats {gaps[0]:.3f} s apart (interval 0.5 s)")
    _, _, hdr, body = hbs[-1]
    H.expect_eq(hdr.get("Authorization"), f"Bearer {API_TOKEN}", "Heartbeat's Authorization")
    H.expect_eq(hdr.get("Connect-Protocol-Version"), "1", "Heartbeat's Connect-Protocol-Version")
    b = json.loads(body)
    H.expect_eq(b.get("health"), "HEALTH_READY", "health")
    H.expect_eq([(g["name"], g["maxSessions"]) for g in b.get("gameRelays", [])],
                [("default", 4000)], "gameRelays")

    # the set is in force, and shown
    c = lifecycle(port, tok)
    H.check(c["enrolled"] is True and c["relay_id"] == "relay-7" and c["routes"] == 3
            and c["last_result"] == "ok" and c["consecutive_failures"] == 0,
            f"/lifecycle control {c}")
    H.check(c["next_attempt"] >= c["last_heartbeat"], f"/lifecycle next_attempt {c}")
    s = metrics(port, tok)
    H.expect_eq(H.metric_value(s, "etrelay_control_routes"), 3.0, "etrelay_control_routes")
    H.expect_eq(H.counter(s, "etrelay_control_enrolments_total", result="ok"), 1, "enrolments ok")
    H.check(H.counter(s, "etrelay_control_heartbeats_total", result="ok") >= 6, "heartbeats ok")
    H.check(abs(H.metric_value(s, "etrelay_control_last_success_timestamp_seconds")
                - time.time()) < 5, "last success timestamp")

    # a smaller set replaces it whole
    cp.set(routes=routes(1, base=5))
    relay.wait_for_line(r"^control: heartbeat ok, 1 routes$", T(3.0))
    H.expect_eq(lifecycle(port, tok)["routes"], 1, "/lifecycle routes after the smaller set")
    H.expect_eq(H.metric_value(metrics(port, tok), "etrelay_control_routes"), 1.0,
                "etrelay_control_routes after the smaller set")

    # failures keep the last good set; the relay goes on (bad_route after
    # another result: the same result twice in a row is not logged again)
    for mode, rx, result in (
            ("503", r"^control: heartbeat failed \(HTTP 503, unavailable: scripted\); keeping "
                    r"the last 1 routes", "http_error"),
            ("bad_json", r"^control: heartbeat failed \(not JSON .*\); keeping the last 1 routes",
             "bad_answer"),
            ("401", r"^control: heartbeat refused \(HTTP 401.*the control plane refused the "
                    r"credential; keeping the last 1 routes", "refused"),
            ("bad_route", r"^control: heartbeat failed \(sniRoutes\[1\] \(bad.example.com\)"
                          r"\.upstream: .*\); keeping the last 1 routes", "bad_answer"),
            ("hang", r"^control: heartbeat failed \(no answer within 1000 ms\); keeping the last "
                     r"1 routes", "timeout")):
        m = relay.mark()
        before = H.counter(metrics(port, tok), "etrelay_control_heartbeats_total", result=result)
        cp.set(heartbeat=mode)
        if mode == "hang":
            # while a heartbeat hangs, the relay relays and the ops plane answers
            n = len(cp.of(HEARTBEAT))
            H.wait_until(lambda: len(cp.of(HEARTBEAT)) > n, T(2.0), "a heartbeat to hang")
            responsive(ctx, relay, port, tok, "while a heartbeat hangs")
        relay.wait_for_line(rx, T(4.0), start=m, what=mode)
        c = lifecycle(port, tok)
        H.check(c["routes"] == 1 and c["last_result"] == result and
                c["consecutive_failures"] >= 1, f"/lifecycle control after {mode}: {c}")
        s = metrics(port, tok)
        H.expect_eq(H.metric_value(s, "etrelay_control_routes"), 1.0, f"routes after {mode}")
        H.check(H.counter(s, "etrelay_control_heartbeats_total", result=result) > before,
                f"heartbeats_total{{result={result}}} did not grow after {mode}")
        responsive(ctx, relay, port, tok, f"after {mode}")
        if mode == "503":
            # logged once, not once per heartbeat
            n = len(cp.of(HEARTBEAT))
            H.wait_until(lambda: len(cp.of(HEARTBEAT)) >= n + 2, T(3.0), "two more 503s")
            H.expect_eq(relay.count(r"^control: heartbeat failed \(HTTP 503", m), 1,
                        "log lines for repeated 503s")
    cp.set(heartbeat="ok", routes=routes(2, base=10))
    relay.wait_for_line(r"^control: heartbeat ok, 2 routes$", T(4.0))
    H.expect_eq(relay.count(r"^control: heartbeat ok, 3 routes$"), 1,
                "log lines for the same result")
    H.expect_eq(lifecycle(port, tok)["consecutive_failures"], 0, "failures after a success")

    # a restart reads the state file: no second enrolment
    relay.signal(signal.SIGTERM)
    H.check(relay.wait_exit(T(10.0)) == 0, "etrelay did not exit 0 on SIGTERM")
    n = len(cp.of(HEARTBEAT))
    relay2 = start(ctx, cp, gs, state, ["--control-bootstrap-token-file", boot], ops=port)
    relay2.wait_for_line(r"^control: \S+, enrolled \(credential from the state directory\)",
                         T(2.0))
    relay2.wait_for_line(r"^control: heartbeat ok, 2 routes$", T(4.0))
    H.expect_eq(len(cp.of(ENROLL)), 1, "enrolments across two starts")
    H.expect_eq(cp.of(HEARTBEAT)[-1][2].get("Authorization"), f"Bearer {API_TOKEN}",
                "the second start's Authorization")
    H.check(len(cp.of(HEARTBEAT)) > n, "no heartbeat from the second start")
    H.expect_eq(H.counter(metrics(port, tok), "etrelay_control_enrolments_total", result="ok"),
                0, "enrolments by the second start")
    relay2.signal(signal.SIGTERM)
    H.check(relay2.wait_exit(T(10.0)) == 0, "the second etrelay did not exit 0 on SIGTERM")


def enrolment_backoff(ctx):
    d = ctx.tmpdir()
    boot = write_token(d, "bootstrap", BOOTSTRAP)
    cp = H.control_plane(ctx)
    cp.set(enroll="503")
    gs = ctx.game_server()
    relay = start(ctx, cp, gs, d, ["--control-bootstrap-token-file", boot,
                                   "--control-backoff-min", "200ms",
                                   "--control-backoff-max", "800ms"])
    H.wait_until(lambda: len(cp.of(ENROLL)) >= 6, T(6.0), "six enrolment attempts")
    t = [r[0] for r in cp.of(ENROLL)[:6]]
    gaps = [b - a for a, b in zip(t, t[1:])]
    ctx.note(f"enrolment gaps (s): {', '.join(f'{g:.3f}' for g in gaps)}")
    for g, want in zip(gaps, (0.2, 0.4, 0.8, 0.8, 0.8)):
        H.check(want - 0.02 <= g <= want + T(0.3),
                f"enrolment gaps {[round(x, 3) for x in gaps]}: want 0.2, 0.4, 0.8, 0.8, 0.8")
    H.expect_eq(relay.count(r"^control: enrolment failed \(HTTP 503"), 1,
                "log lines for repeated 503s")
    H.expect_eq(len(cp.of(HEARTBEAT)), 0, "heartbeats before enrolment")
    # a refused token: logged as such, retried at the cap
    m = relay.mark()
    cp.set(enroll="403")
    relay.wait_for_line(r"^control: enrolment refused \(HTTP 403.*\): the control plane refused "
                        r"the bootstrap token; next attempt in 800 ms", T(2.0), start=m)
    n = len(cp.of(ENROLL))
    H.wait_until(lambda: len(cp.of(ENROLL)) >= n + 1, T(2.0), "an attempt after a refusal")
    t = [r[0] for r in cp.of(ENROLL)]
    H.check(0.75 <= t[n] - t[n - 1] <= 0.8 + T(0.3), f"wait after a refusal {t[n] - t[n - 1]:.3f} s "
            "(want the cap, 0.8 s)")
    cp.set(enroll="ok")
    relay.wait_for_line(r"^control: enrolled as relay relay-7", T(3.0))
    relay.wait_for_line(r"^control: heartbeat ok, 0 routes$", T(2.0))


def token_from_environment(ctx):
    d = ctx.tmpdir()
    cp = H.control_plane(ctx)
    gs = ctx.game_server()
    tokf = write_token(d, "api", "env-" + "e" * 40)
    relay = start(ctx, cp, gs, d, env={"ETRELAY_CONTROL_TOKEN_FILE": tokf})
    relay.wait_for_line(r"^control: \S+, credential from ETRELAY_CONTROL_TOKEN$", T(2.0))
    relay.wait_for_line(r"^control: heartbeat ok, 0 routes$", T(3.0))
    H.expect_eq(len(cp.of(ENROLL)), 0, "enrolments with ETRELAY_CONTROL_TOKEN_FILE")
    H.expect_eq(cp.of(HEARTBEAT)[0][2].get("Authorization"), f"Bearer env-{'e' * 40}",
                "Authorization from ETRELAY_CONTROL_TOKEN_FILE")
    H.check(not os.path.exists(os.path.join(d, "control-credential.json")),
            "a state file without an enrolment")
    relay.signal(signal.SIGTERM)
    relay.wait_exit(10.0)


def refused_starts(ctx):
    d = ctx.tmpdir()
    boot = write_token(d, "bootstrap", BOOTSTRAP)
    base = ["--upstream", "127.0.0.1:9", "--listen", f"127.0.0.1:{H.free_udp_port()}",
            "--master", "127.0.0.1:9", "--backend", ctx.backend, "--workers", H.WORKERS,
            "--control-url", "http://127.0.0.1:9", "--control-bootstrap-token-file", boot]
    for mode, who in ((0o777, "every user"), (0o770, "its group")):
        state = os.path.join(d, f"st{mode:o}")
        os.mkdir(state)
        os.chmod(state, mode)
        rc, out, err = H.run_etrelay(ctx, base + ["--state-directory", state], env=NO_PROXY)
        H.expect_eq(rc, 78, f"exit status with a state directory of mode {mode:o} ({err})")
        H.check(f"state-directory {state}: mode 0{mode:o} lets {who} write it" in err
                and f"chmod 700 {state}" in err, f"the error for mode {mode:o}: {err!r}")
    # no credential and no bootstrap token: refused at the start, naming the fix
    state = os.path.join(d, "empty")
    os.mkdir(state, 0o700)
    rc, out, err = H.run_etrelay(ctx, base[:-2] + ["--state-directory", state], env=NO_PROXY)
    H.expect_eq(rc, 78, f"exit status without any credential ({err})")
    H.check("set control-bootstrap-token-file" in err, f"the error without a credential: {err!r}")


def test(ctx):
    H.run_parts(ctx, [enrol_once_and_route_sets, enrolment_backoff, token_from_environment,
                      refused_starts])


if __name__ == "__main__":
    H.main(test)
