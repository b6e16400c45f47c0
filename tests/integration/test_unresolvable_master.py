#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A master name that does not resolve neither blocks forwarding nor the
other masters' heartbeats, and is reported once, not at every interval.

When the test runs as root with unshare(1), etrelay runs in a private mount
namespace whose /etc/resolv.conf points at a DNS server that never answers
(3 s timeout), so a resolver that blocks the loop would be caught. Otherwise
the name fails fast (NXDOMAIN) and only the log and heartbeat checks bite."""

import os
import random
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

BAD = "does-not-exist.invalid"
DNS_TIMEOUT = 3


def test(ctx):
    gs = ctx.game_server()
    master = ctx.master()
    # a loopback address of its own, so that parallel runs do not collide on :53
    dns_host = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.{random.randint(2, 254)}"
    wrapper = H.slow_dns_wrapper(ctx.tmpdir(), dns_host=dns_host, timeout_s=DNS_TIMEOUT)
    dns = None
    if wrapper:
        try:
            dns = ctx.silent_dns(host=dns_host)
        except OSError as e:
            ctx.note(f"cannot bind the silent DNS server ({e}): fast NXDOMAIN only")
            wrapper = None
    if not wrapper:
        ctx.note("no private resolv.conf here (needs root and unshare): the name fails fast")
    relay = ctx.relay("--heartbeat-interval", "1s", "--master", BAD,
                      "--master", f"127.0.0.1:{master.port}",
                      "--upstream", f"127.0.0.1:{gs.port}", wait_ready=False,
                      wrapper=wrapper or ())
    t0 = relay.started
    relay.wait_ready()

    # a server browser's getstatus is answered within 2 s of startup (a
    # resolver in the loop's way would take the silent server's 3 s)
    c = ctx.client(relay)
    c.send(H.cmd("getstatus\n"))
    left = t0 + 2.0 * H.SLOW - time.monotonic()
    reply = c.try_recv(max(left, 0.01))
    H.check(reply is not None,
            f"no statusResponse within {2 * H.SLOW:g} s of startup: forwarding waits for the "
            f"resolver?")
    H.check(reply.startswith(H.cmd("statusResponse\n")), f"answer to getstatus: {H.short(reply)}")
    ctx.note(f"getstatus answered {time.monotonic() - t0:.3f} s after startup")

    # the real master gets its heartbeats and lists the relay
    hb = H.wait_until(master.heartbeat_list, max(t0 + 2.5 - time.monotonic(), 0.1),
                      "a heartbeat at the reachable master within 2.5 s of startup")
    H.expect_eq((hb[0][1], hb[0][2]), ("EnemyTerritory-1", relay.addr), "first heartbeat (tag, source)")
    H.wait_until(master.listed_set, 3.0, f"the master to list the relay (rejected {master.rejected})")
    if dns is not None:
        # while the resolver hangs, packets and heartbeats keep flowing
        n = len(master.heartbeat_list())
        for i in range(5):
            p = b"during-dns-%d" % i
            got = c.request(p, timeout=0.5, what=f"in-game answer {i} while the resolver hangs")
            H.expect_eq(got, b"ECHO:" + p, f"in-game answer {i} while the resolver hangs")
        H.wait_until(lambda: len(master.heartbeat_list()) >= n + 1, 2.5,
                     "a heartbeat while the resolver hangs")
        names = dns.queried_names()
        ctx.note(f"DNS queries seen: {names[:4]}")

    rx = rf"^master {re.escape(BAD)}: cannot resolve"
    relay.wait_for_line(rx, 5.0 + 3 * DNS_TIMEOUT, what="the resolution failure")
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
