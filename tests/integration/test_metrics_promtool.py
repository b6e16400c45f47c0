#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""/metrics after real traffic: `promtool check metrics` finds nothing to
say; the counters equal what the test's clients sent and received
(datagrams and bytes, both directions), sessions opened and active, no
drop; etrelay_build_info and etrelay_backend_info name the version and the
backend under test; process_max_fds is etrelay's own RLIMIT_NOFILE; and no
label value, nor any other part of the page, carries a client's
address."""

import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

CLIENTS = 4
PACKETS = 25


def promtool_check(text, what):
    exe = H.require_tool("promtool")
    try:
        p = subprocess.run([exe, "check", "metrics"], input=text.encode(), capture_output=True,
                           timeout=20)
    except subprocess.TimeoutExpired:
        H.fail("promtool check metrics did not finish within 20 s")
    out = (p.stdout + p.stderr).decode("utf-8", "replace").strip()
    if p.returncode != 0 or out:
        H.fail(f"promtool check metrics on {what}: exit {p.returncode}, output:\n{out[:2000]}")


def nofile_soft(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    H.fail("no 'Max open files' in /proc/<pid>/limits")


def test(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)  # heartbeats only: no session of its own
    port = H.free_tcp_port()
    tok = os.urandom(24).hex()
    relay = H.relay_env(ctx, {"ETRELAY_METRICS_TOKEN": tok},
                        "--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
                        "--ops-listen", f"127.0.0.1:{port}", "--heartbeat-interval", "1s")
    relay.wait_for_line(r"^server up: ", 5.0)
    H.wait_until(master.heartbeat_list, 3.0, "a heartbeat at the master stand-in")

    # before any client: a clean page, every counter at zero
    r = H.curl_request(port, "/metrics", token=tok)
    H.expect_eq(r.status, 200, "curl /metrics status")
    promtool_check(r.text, "the page before any client")
    s0 = H.parse_metrics(r.text)
    for name in ("etrelay_sessions_opened_total", "etrelay_forwarded_datagrams_total",
                 "etrelay_forwarded_bytes_total", "etrelay_dropped_datagrams_total"):
        H.expect_eq(H.metric_value(s0, name), 0.0, f"{name} before any client")

    # each client from a loopback address of its own, so that an address
    # leaking into a label cannot hide behind the relay's own 127.0.0.1
    clients = [H.client_on(ctx, relay, H.spread_ip(200 + i)) for i in range(CLIENTS)]
    sent_bytes = got_bytes = 0
    for k in range(PACKETS):
        for i, c in enumerate(clients):
            # sizes vary so that a bytes counter off by a constant shows
            payload = c.game(b"\x02m%d-%d-" % (i, k) + os.urandom(1 + (k * 37 + i * 11) % 700))
            reply = c.request(payload, what=f"echo {k} of client {i}")
            H.expect_eq(reply, b"ECHO:" + payload, f"echo {k} of client {i}")
            sent_bytes += len(payload)
            got_bytes += len(reply)
    # a connectionless query too: same counters
    q = H.cmd("getinfo xyz")
    reply = clients[0].request(q, what="infoResponse")
    sent_bytes += len(q)
    got_bytes += len(reply)
    sent = sum(c.sent for c in clients)
    got = sum(c.got for c in clients)
    H.expect_eq((sent, got), (CLIENTS * PACKETS + 1, CLIENTS * PACKETS + 1), "sent and received")

    # The heartbeats the master saw around the scrape (one a second here: on
    # a busy host the page and a count read after it can be seconds apart).
    hb_before = len(master.heartbeat_list())
    r = H.http_request(port, "GET", "/metrics", token=tok)
    hb_after = len(master.heartbeat_list())
    H.expect_eq(r.status, 200, "/metrics status after traffic")
    promtool_check(r.text, "the page after traffic")
    s = H.parse_metrics(r.text)
    rl = {"relay": "default"}
    checks = [
        ("etrelay_forwarded_datagrams_total", dict(rl, direction="up"), sent),
        ("etrelay_forwarded_datagrams_total", dict(rl, direction="down"), got),
        ("etrelay_forwarded_bytes_total", dict(rl, direction="up"), sent_bytes),
        ("etrelay_forwarded_bytes_total", dict(rl, direction="down"), got_bytes),
        ("etrelay_sessions_opened_total", rl, CLIENTS),
        ("etrelay_sessions_active", rl, CLIENTS),
        ("etrelay_sessions_closed_total", rl, 0),
        ("etrelay_dropped_datagrams_total", rl, 0),
        ("etrelay_sessions_refused_total", rl, 0),
        ("etrelay_lifecycle_work_refused_total", rl, 0),
        ("etrelay_upstream_refused_total", rl, 0),
        ("etrelay_game_server_up", rl, 1),
        ("etrelay_lifecycle_state", {"state": "active"}, 1),
        ("etrelay_lifecycle_state", {"state": "draining"}, 0),
        ("etrelay_build_info", {"version": "0.1.0"}, 1),
        ("etrelay_backend_info", {"backend": ctx.backend}, 1),
        ("etrelay_relay_info", dict(rl, game="ET", upstream=f"127.0.0.1:{gs.port}",
                                    public_address=f"127.0.0.1:{relay.port}"), 1),
        ("process_max_fds", {}, nofile_soft(relay.pid)),
    ]
    problems = []
    for name, labels, want in checks:
        v = H.metric_value(s, name, **labels)
        if name == "process_max_fds" and H.WRAPPER and v is not None and want - 32 <= v <= want:
            continue  # a checker such as valgrind keeps a few descriptors for itself
        if v != float(want):
            problems.append(f"{name}{labels}: expected {want}, seen {v}")
    # exactly one backend and one build sample
    for name in ("etrelay_backend_info", "etrelay_build_info"):
        n = sum(1 for (nm, _) in s if nm == name)
        if n != 1:
            problems.append(f"{name}: {n} samples, expected 1")
    hb = H.metric_value(s, "etrelay_heartbeats_total", relay="default",
                        master=f"127.0.0.1:{master.port}", result="sent")
    if hb is None or not (1 <= hb and hb_before - 1 <= hb <= hb_after + 1):
        problems.append(f"etrelay_heartbeats_total{{result=sent}} = {hb}, the master stand-in "
                        f"counted {hb_before} heartbeats before the scrape, {hb_after} after")
    probes = H.metric_value(s, "etrelay_probes_sent_total", relay="default")
    ok_rounds = H.metric_value(s, "etrelay_probe_rounds_total", relay="default", result="ok")
    if not (probes and ok_rounds and probes >= ok_rounds >= 1):
        problems.append(f"probes_sent_total {probes}, probe_rounds_total{{ok}} {ok_rounds}")
    fds = H.metric_value(s, "process_open_fds")
    if fds is None or fds < CLIENTS + 3:
        problems.append(f"process_open_fds = {fds}, fewer than the {CLIENTS} session sockets + 3")
    if problems:
        H.fail("metrics after traffic:\n  " + "\n  ".join(problems))

    # nothing on the page names a client
    for c in clients:
        ip, cport = c.addr
        for (name, pairs), _ in s.items():
            for k, v in pairs:
                H.check(ip not in v and not re.search(rf"(^|[^0-9]){cport}($|[^0-9])", v),
                        f"label {name}{{{k}={v!r}}} carries the client address {ip}:{cport}")
        H.check(ip not in r.text, f"the client address {ip} appears on /metrics")

    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM")
    relay._join_readers()
    H.check(relay.count(rf"^stats default: sessions opened {CLIENTS} closed {CLIENTS} active 0; "
                        rf"up {sent} pkts {sent_bytes} B; down {got} pkts {got_bytes} B\b") == 1,
            f"the stats line at exit does not agree with /metrics: {relay.text_lines()[-2:]}")


if __name__ == "__main__":
    H.main(test)
