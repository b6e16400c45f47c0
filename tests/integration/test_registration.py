#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Master registration through the relay: the master hears the heartbeat
from the relay's public port, challenges that address, the game server's
answer comes back from the relay's public address and the master lists the
relay, not the game server."""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def test(ctx):
    gs = ctx.game_server()
    master = ctx.master()
    mport = master.port
    relay = ctx.relay("--game", "et", "--heartbeat-interval", "2s",
                      "--master", f"127.0.0.1:{mport}",
                      "--upstream", f"127.0.0.1:{gs.port}", debug=True)

    # 1. the heartbeat reaches the master from the relay's public port
    hb = H.wait_until(master.heartbeat_list, 5.0, "a heartbeat at the master")
    _, tag, src = hb[0]
    H.expect_eq(tag, "EnemyTerritory-1", "heartbeat tag")
    H.expect_eq(src, relay.addr, "source address of the heartbeat (the relay's public address)")
    raw = master.packets(lambda p: p.data.startswith(H.cmd("heartbeat")))[0].data
    H.expect_eq(raw, H.cmd("heartbeat EnemyTerritory-1\n"), "heartbeat datagram bytes")

    # 2. the master's challenge goes through the relay, the answer comes
    #    back from the public address and the master lists the relay
    listed = H.wait_until(master.listed_set, 3.0,
                          f"the master to list the relay (rejected: {master.rejected})")
    H.expect_eq(listed, {relay.addr}, "addresses listed by the master")
    H.check(gs.addr not in listed, "the master listed the game server's own address")
    H.expect_eq(master.rejected, [], "answers the master rejected")

    # the game server got the master's getinfo with the master's challenge,
    # from a session socket: neither the public port nor the master itself
    _, ch, _, pkt = master.challenges[0]
    seen = gs.packets(lambda p: p.data == pkt)
    H.expect_eq(len(seen), 1, f"copies of the master's getinfo {ch} at the game server")
    H.check(seen[0].addr[1] != relay.port,
            f"game server saw the master's query from the relay's public port {relay.port}")
    H.check(seen[0].addr[1] != mport,
            "game server saw the master's query directly from the master")

    # the probe: getinfo from a socket that is not the public one and not
    # the master's session socket, sent before the heartbeat
    probes = [p for p in gs.probes() if p.data != pkt]
    H.check(probes, "the game server never got the relay's getinfo probe")
    H.check(all(p.addr[1] not in (relay.port, seen[0].addr[1]) for p in probes),
            f"probe sent from the public port or a session socket: {probes}, "
            f"public {relay.port}, master session {seen[0].addr[1]}")
    H.check(probes[0].t <= hb[0][0], "the heartbeat went out before the probe")

    # 3. debug log lines
    m = re.escape(f"127.0.0.1:{mport}")
    relay.wait_for_line(rf"^heartbeat EnemyTerritory-1 -> {m} \({m}\)$", 2.0)
    relay.wait_for_line(rf"^session \+ {m} \(\d+ active\)$", 2.0)
    relay.wait_for_line(rf"^{m} -> ET  getinfo \({len(pkt)} B\)$", 2.0)
    answer = [r for a, r in gs.replies if a == seen[0].addr][0]
    relay.wait_for_line(rf"^{m} <- ET  infoResponse \({len(answer)} B\)$", 2.0)

    # 4. next interval: another heartbeat, again challenged and answered
    H.wait_until(lambda: len(master.heartbeat_list()) >= 2, 4.0, "a second heartbeat (interval 2 s)")
    H.wait_until(lambda: len(master.listings) >= 2, 3.0,
                 f"the second listing (rejected: {master.rejected})")
    H.expect_eq({a for _, _, a in master.heartbeat_list()}, {relay.addr},
                "sources of all heartbeats")
    H.expect_eq(master.flatline_list(), [], "flatlines while the server is up")


if __name__ == "__main__":
    H.main(test)
