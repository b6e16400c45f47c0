#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A master name that does not resolve neither blocks forwarding nor the
other masters' heartbeats, and is reported once, not at every interval."""

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

BAD = "does-not-exist.invalid"


def test(ctx):
    gs = ctx.game_server()
    master = ctx.master()
    relay = ctx.relay("--heartbeat-interval", "1s", "--master", BAD,
                      "--master", f"127.0.0.1:{master.port}",
                      "--upstream", f"127.0.0.1:{gs.port}", wait_ready=False)
    t0 = relay.started
    relay.wait_ready()

    # a server browser's getstatus is answered within 1 s of startup
    c = ctx.client(relay)
    c.send(H.cmd("getstatus\n"))
    left = t0 + 1.0 - time.monotonic()
    reply = c.try_recv(max(left, 0.01))
    H.check(reply is not None,
            f"no statusResponse within 1 s of startup: forwarding waits for the resolver?")
    H.check(reply.startswith(H.cmd("statusResponse\n")), f"answer to getstatus: {H.short(reply)}")
    ctx.note(f"getstatus answered {time.monotonic() - t0:.3f} s after startup")

    # the real master gets its heartbeats and lists the relay
    hb = H.wait_until(master.heartbeat_list, max(t0 + 2.0 - time.monotonic(), 0.1),
                      "a heartbeat at the reachable master within 2 s of startup")
    H.expect_eq((hb[0][1], hb[0][2]), ("EnemyTerritory-1", relay.addr), "first heartbeat (tag, source)")
    H.wait_until(master.listed_set, 3.0, f"the master to list the relay (rejected {master.rejected})")

    rx = rf"^master {re.escape(BAD)}: cannot resolve"
    relay.wait_for_line(rx, 5.0, what="the resolution failure")
    # ~4 more intervals: more heartbeats, no repeated complaint
    t1 = time.monotonic()
    n1 = len(master.heartbeat_list())
    H.wait_until(lambda: len(master.heartbeat_list()) >= n1 + 3, 5.0,
                 "three more heartbeats at 1 s interval")
    remaining = 4.0 - (time.monotonic() - t1)
    if remaining > 0:
        time.sleep(remaining)
    H.expect_eq(relay.count(rx), 1, f"'master {BAD}: cannot resolve' lines over ~4 intervals")
    H.expect_eq({a for _, _, a in master.heartbeat_list()}, {relay.addr}, "heartbeat sources")
    # forwarding still fine
    reply = c.request(H.cmd("getstatus\n"), what="a later statusResponse")
    H.check(reply.startswith(H.cmd("statusResponse\n")), f"later answer to getstatus: {H.short(reply)}")


if __name__ == "__main__":
    H.main(test)
