#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A real game server (OpenArena) crashes and comes back inside one
heartbeat interval (300 s), while a player's client keeps sending.

The crash is reported within seconds, not at the next round: the client's
packets are refused (ECONNREFUSED on its session socket), which starts a
probe round at once; the refused probes end it quickly: 'server down' and
one flatline at the master. While it is down a round comes every 5 s
(HB_DOWN_RETRY), so when the server is back: 'server up', a heartbeat at
once, and the master lists the relay again, all long before the 300 s
round. (OpenArena does not answer an unknown player's packets, so this is
the probe's doing, not the player's.)

Skipped (77) when /usr/games/openarena-server is not installed."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from oa import OA_SERVER, OpenArena  # noqa: E402

DOWN_WITHIN = 8.0   # s from the crash to 'server down' (a round is 3 x 300 ms here)
UP_WITHIN = 10.0    # s from the server's return to the master's new listing


class Player:
    """Sends an in-game-looking datagram to the relay every 100 ms from one
    socket, as a player's client does until it times out."""

    def __init__(self, ctx, relay):
        self.c = ctx.client(relay, timeout=0.05)
        self.sent = 0

    def tick(self):
        self.c.send(self.c.game(os.urandom(8), self.sent + 1))
        self.sent += 1
        while self.c.try_recv(0.001) is not None:
            pass


def pump(player, what, pred, limit):
    """Keep the player sending until pred() is true or limit seconds pass."""
    end = time.monotonic() + limit
    for _ in range(int(limit / 0.1) + 10):
        v = pred()
        if v:
            return v
        if time.monotonic() >= end:
            break
        player.tick()
        time.sleep(0.1)
    v = pred()
    if not v:
        H.fail(f"{what}: not within {limit:g} s")
    return v


def test(ctx):
    if not (os.path.isfile(OA_SERVER) and os.access(OA_SERVER, os.X_OK)):
        raise H.TestSkip(f"{OA_SERVER} is not installed (Debian package openarena-server)")
    port = H.free_udp_port()
    oa = OpenArena(port, "etrelay-restart-" + H.rand_token(6))
    ctx.objs.append(oa)
    oa.wait_ready()
    # ET's tags: the stand-in master sees the flatline (Q3 has none).
    master = ctx.master()
    relay = ctx.relay("--upstream", f"127.0.0.1:{port}", "--master", f"127.0.0.1:{master.port}",
                      "--heartbeat-interval", "300s", "--probe-timeout", "300ms", debug=True)
    g = f"127\\.0\\.0\\.1:{port}"
    relay.wait_for_line(rf"^server up: {g} answered the probe$", 10.0 * H.SLOW)
    H.wait_until(master.listed_set, 5.0 * H.SLOW, "the first listing")
    H.expect_eq(len(master.heartbeat_list()), 1, "heartbeats before the crash")

    player = Player(ctx, relay)
    for _ in range(5):
        player.tick()
        time.sleep(0.1)

    # --- crash
    mark = relay.mark()
    os.killpg(oa.proc.pid, signal.SIGKILL)
    oa.proc.wait(timeout=5)
    t_crash = time.monotonic()
    pump(player, "'server down' after the crash",
         lambda: relay.find_lines(rf"^server down: {g} did not answer 3 probes$", mark),
         DOWN_WITHIN * H.SLOW)
    t_down = time.monotonic()
    H.expect_eq(relay.count(r"^relay default: game server refused a send: probe round now$", mark),
                1, "debug lines for the round the refusals brought forward")
    fl = pump(player, "the flatline at the master", master.flatline_list, 2.0 * H.SLOW)
    ctx.note(f"down reported {t_down - t_crash:.2f} s after the crash, flatline at "
             f"{fl[0][0] - t_crash:.2f} s")

    # --- restart on the same port, well inside the 300 s interval
    mark = relay.mark()
    oa2 = OpenArena(port, oa.hostname)
    ctx.objs.append(oa2)
    oa2.wait_ready()
    t_back = time.monotonic()
    pump(player, "'server up' after the restart",
         lambda: relay.find_lines(rf"^server up: {g} answered the probe$", mark),
         UP_WITHIN * H.SLOW)
    t_up = time.monotonic()
    listed = pump(player, "the master's new listing",
                  lambda: [l for l in master.listings if l[0] > t_back], 3.0 * H.SLOW)
    ctx.note(f"up reported {t_up - t_back:.2f} s after the server was back; listed again after "
             f"{listed[0][0] - t_back:.2f} s; {player.sent} player packets")
    H.expect_eq(len(master.heartbeat_list()), 2, "heartbeats in total (one per registration)")
    H.expect_eq(len(master.flatline_list()), 1, "flatlines in total")
    H.expect_eq(relay.count(r"^server down: "), 1, "'server down' lines")
    H.expect_eq(relay.count(r"^server up: "), 2, "'server up' lines")


if __name__ == "__main__":
    H.main(test)
