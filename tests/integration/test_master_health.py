#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A master's health, as an operator sees it.

Two masters: a live one that challenges every heartbeat, and a dead one
(a socket that never reads holds its port, so no other test draws it). The dead one is reported quiet once, after
two heartbeat intervals without a challenge (log line, gauge 0, no
last-confirmed timestamp, /lifecycle "quiet": true) while the live one stays
confirmed through the same time. When something starts answering on the
dead one's port, it is reported back once and its gauge goes to 1."""

import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

INTERVAL = 1.0  # s; quiet after two of them


def test(ctx):
    gs = ctx.game_server()
    live = ctx.master()
    dead_port = H.free_udp_port()
    # Held until the master comes to life on it: once, drawn free and left
    # unbound, it was another test's by then (Address already in use).
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.bind(("127.0.0.1", dead_port))
    ops = H.free_tcp_port()
    relay = H.relay_env(ctx, {}, "--heartbeat-interval", "1s", "--probe-timeout", "300ms",
                        "--master", f"127.0.0.1:{live.port}",
                        "--master", f"127.0.0.1:{dead_port}",
                        "--upstream", f"127.0.0.1:{gs.port}",
                        "--ops-listen", f"127.0.0.1:{ops}")
    lv = re.escape(f"127.0.0.1:{live.port}")
    dd = re.escape(f"127.0.0.1:{dead_port}")
    quiet_re = rf"^relay default: master {dd} is quiet: no challenge within 2 s of a heartbeat"

    relay.wait_for_line(rf"^relay default: master {lv} challenged us and got its answer$",
                        3.0 * H.SLOW)
    t_start = time.monotonic()
    _, _, t_quiet = relay.wait_for_line(quiet_re, (2 * INTERVAL + 3.0) * H.SLOW)
    ctx.note(f"dead master reported quiet {t_quiet - relay.started:.2f} s after start")
    H.check(t_quiet - relay.started >= 2 * INTERVAL,
            "the dead master was called quiet before two heartbeat intervals")

    # Two more intervals: said once, and the live master never quiet.
    time.sleep(2.5 * INTERVAL)
    H.expect_eq(relay.count(quiet_re), 1, "'quiet' lines for the dead master")
    H.expect_eq(relay.count(rf"master {lv} is quiet"), 0, "'quiet' lines for the live master")
    H.check(len([h for h in live.heartbeat_list() if h[0] > t_start]) >= 2,
            "the live master kept getting heartbeats")

    def metrics():
        r = H.http_request(ops, "GET", "/metrics")
        H.expect_eq(r.status, 200, "GET /metrics")
        return H.parse_metrics(r.text)

    m = metrics()
    gauge = "etrelay_master_listing_confirmed"
    stamp = "etrelay_master_listing_confirmed_timestamp_seconds"
    H.expect_eq(H.metric_value(m, gauge, relay="default", master=f"127.0.0.1:{live.port}"), 1.0,
                "listing_confirmed of the live master")
    H.expect_eq(H.metric_value(m, gauge, relay="default", master=f"127.0.0.1:{dead_port}"), 0.0,
                "listing_confirmed of the dead master")
    ts = H.metric_value(m, stamp, relay="default", master=f"127.0.0.1:{live.port}")
    H.check(ts is not None and abs(ts - time.time()) < 5 * INTERVAL + 2,
            f"last-confirmed timestamp of the live master is recent (seen {ts})")
    H.expect_eq(H.metric_value(m, stamp, relay="default", master=f"127.0.0.1:{dead_port}"), None,
                "last-confirmed timestamp of the dead master (never)")

    lc = H.http_request(ops, "GET", "/lifecycle")
    H.expect_eq(lc.status, 200, "GET /lifecycle")
    ms = {x["name"]: x for x in lc.json()["relays"][0]["masters"]}
    H.expect_eq((ms[f"127.0.0.1:{live.port}"]["listing_confirmed"],
                 ms[f"127.0.0.1:{live.port}"]["quiet"]), (True, False),
                "/lifecycle live master (listing_confirmed, quiet)")
    H.check(isinstance(ms[f"127.0.0.1:{live.port}"]["last_confirmed"], int),
            "/lifecycle last_confirmed of the live master is a number")
    H.expect_eq((ms[f"127.0.0.1:{dead_port}"]["listing_confirmed"],
                 ms[f"127.0.0.1:{dead_port}"]["quiet"],
                 ms[f"127.0.0.1:{dead_port}"]["last_confirmed"]), (False, True, None),
                "/lifecycle dead master (listing_confirmed, quiet, last_confirmed)")

    # The dead master comes to life: reported back, once.
    holder.close()
    ctx.master(port=dead_port)
    relay.wait_for_line(rf"^relay default: master {dd} challenges again: it lists this relay$",
                        (INTERVAL + 3.0) * H.SLOW)
    H.wait_until(lambda: H.metric_value(metrics(), gauge, relay="default",
                                        master=f"127.0.0.1:{dead_port}") == 1.0,
                 2.0 * H.SLOW, "the revived master's gauge to be 1")
    time.sleep(1.5 * INTERVAL)
    H.expect_eq(relay.count(rf"master {dd} challenges again"), 1, "'challenges again' lines")
    H.expect_eq(relay.count(quiet_re), 1, "'quiet' lines for the revived master in total")


if __name__ == "__main__":
    H.main(test)
