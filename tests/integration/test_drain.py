#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Drain and resume through the ops plane while 5 clients exchange packets
the whole time: POST /lifecycle/drain makes /readyz 503 at once, the 5
keep every answer, a new client gets nothing (and is counted in
etrelay_lifecycle_work_refused_total and dropped{reason="draining"}, never
reaching the game server); POST /lifecycle/resume serves the new client."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

N = 5


def metrics(port, tok):
    r = H.http_request(port, "GET", "/metrics", token=tok)
    H.expect_eq(r.status, 200, "/metrics status")
    return H.parse_metrics(r.text)


def m(s, name, **labels):
    return H.metric_value(s, name, relay="default", **labels)


def test(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    port = H.free_tcp_port()
    tok = os.urandom(24).hex()
    relay = H.relay_env(ctx, {"ETRELAY_LIFECYCLE_TOKEN": tok},
                        "--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
                        "--ops-listen", f"127.0.0.1:{port}")
    relay.wait_for_line(r"^server up: ", 5.0)
    H.expect_eq(H.http_request(port, "GET", "/readyz").status, 200, "/readyz before the drain")

    pinger = H.Pinger(relay.addr, n=N, interval=0.01, timeout=1.0, max_seconds=30.0,
                      max_packets=5000)
    ctx.objs.append(pinger)
    pinger.start()
    pinger.wait_answers(10, 5.0, "answers before the drain")
    s = metrics(port, tok)
    H.expect_eq(m(s, "etrelay_sessions_active"), float(N), "sessions_active before the drain")

    # drain: readiness goes at once
    t_drain = time.monotonic()
    r = H.http_request(port, "POST", "/lifecycle/drain", token=tok)
    H.expect_eq(r.status, 200, "POST /lifecycle/drain status")
    H.expect_eq(r.json()["state"], "draining", "state in the drain answer")
    r = H.http_request(port, "GET", "/readyz")
    H.expect_eq((r.status, r.body), (503, b"draining\n"), "/readyz right after the drain")
    r = H.curl_request(port, "/readyz")
    H.expect_eq(r.status, 503, "curl /readyz right after the drain")
    # asking twice changes nothing and logs once
    r = H.http_request(port, "POST", "/lifecycle/drain", token=tok)
    H.expect_eq((r.status, r.json()["state"]), (200, "draining"), "a second drain")

    # a new client: nothing comes back, nothing reaches the game server
    newc = ctx.client(relay)
    probes = [b"\x03newcomer-%d-" % i + os.urandom(8).hex().encode() for i in range(3)]
    for p in probes:
        newc.send(p)
        got = newc.try_recv(0.3)
        H.check(got is None, f"a new client got an answer while draining: {H.short(got)}")
    H.check(newc.try_recv(0.5) is None, "a new client got a late answer while draining")
    H.expect_eq(gs.sources_for(probes), set(), "sources at the game server of the new client's packets")
    s = metrics(port, tok)
    H.expect_eq(m(s, "etrelay_lifecycle_work_refused_total"), 3.0,
                "etrelay_lifecycle_work_refused_total after 3 datagrams from a new client")
    H.expect_eq(m(s, "etrelay_dropped_datagrams_total", reason="draining"), 3.0,
                'etrelay_dropped_datagrams_total{reason="draining"}')
    H.expect_eq(m(s, "etrelay_sessions_active"), float(N), "sessions_active while draining")
    H.expect_eq(m(s, "etrelay_sessions_opened_total"), float(N), "sessions_opened while draining")
    H.expect_eq(H.metric_value(s, "etrelay_lifecycle_state", state="draining"), 1.0,
                'etrelay_lifecycle_state{state="draining"}')
    life = H.http_request(port, "GET", "/lifecycle", token=tok).json()
    H.expect_eq((life["state"], life["details"]["active_sessions"]), ("draining", N),
                "/lifecycle state and active_sessions while draining")
    # the open sessions keep going during the drain
    pinger.wait_answers(20, 5.0, "answers while draining")

    # resume: the newcomer is served
    t_resume = time.monotonic()
    r = H.curl_request(port, "/lifecycle/resume", method="POST", token=tok)
    H.expect_eq(r.status, 200, "POST /lifecycle/resume status")
    H.expect_eq(H.http_request(port, "GET", "/readyz").status, 200, "/readyz after resume")
    p = b"\x03newcomer-after-resume"
    H.expect_eq(newc.request(p, timeout=2.0, what="an answer after resume"), b"ECHO:" + p,
                "the new client's answer after resume")
    pinger.wait_answers(10, 5.0, "answers after resume")
    pinger.stop()

    s = metrics(port, tok)
    H.expect_eq(m(s, "etrelay_sessions_opened_total"), float(N + 1), "sessions_opened after resume")
    H.expect_eq(m(s, "etrelay_lifecycle_work_refused_total"), 3.0, "work refused after resume")
    H.expect_eq(m(s, "etrelay_dropped_datagrams_total"), 3.0, "all drops after resume")

    lost = pinger.lost()
    H.check(not lost, f"{len(lost)} answers lost by the clients that were there before the drain "
            f"(first: client {lost[0][0] if lost else ''} seq {lost[0][1] if lost else ''}); "
            f"{pinger.summary()}")
    H.expect_eq(pinger.errors, [], "socket errors seen by the pinging clients")
    H.expect_eq(pinger.stray, [], "unexpected datagrams seen by the pinging clients")
    during = [r for r in pinger.snapshot() if t_drain <= r[2] < t_resume]
    per = [sum(1 for r in during if r[0] == i) for i in range(N)]
    H.check(min(per) >= 20, f"packets answered per client during the drain: {per} (want >= 20 each)")
    H.log(f"drain {t_resume - t_drain:.2f} s; during it per client {per}; {pinger.summary()}")
    H.expect_eq(relay.count(r"^ops: lifecycle draining: new sessions refused"), 1,
                "'lifecycle draining' log lines")
    H.expect_eq(relay.count(r"^ops: lifecycle active: new sessions accepted"), 1,
                "'lifecycle active' log lines")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM")


if __name__ == "__main__":
    H.main(test)
