#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The game server goes away and comes back.

Down: exactly one flatline reaches the master, no heartbeat while down,
'server down' logged, a client's session is kept, and the relay does not
spin on ECONNREFUSED while clients keep sending. Up again: 'server up',
heartbeats resume, the old session still forwards from the same socket."""

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

CPU_LIMIT = 0.5   # seconds of CPU over the 3 s down window
DOWN_WINDOW = 3.0


def test(ctx):
    gs = ctx.game_server()
    master = ctx.master()
    mport = master.port
    relay = ctx.relay("--heartbeat-interval", "1s", "--probe-timeout", "300ms",
                      "--master", f"127.0.0.1:{mport}",
                      "--upstream", f"127.0.0.1:{gs.port}", debug=True)
    g = re.escape(f"127.0.0.1:{gs.port}")
    m = re.escape(f"127.0.0.1:{mport}")

    relay.wait_for_line(rf"^server up: {g} answered the probe$", 3.0)
    H.wait_until(lambda: len(master.heartbeat_list()) >= 2, 4.0, "two heartbeats while the server is up")
    H.wait_until(master.listed_set, 3.0, "the master to list the relay")

    c = ctx.client(relay)
    me = re.escape(f"127.0.0.1:{c.port}")
    first = c.game(b"before-" + os.urandom(8))
    H.expect_eq(c.request(first), b"ECHO:" + first, "answer while the server is up")
    (session_src,) = gs.sources_for([first])

    # --- stop the game server
    mark = relay.mark()
    gs.stop()
    t_stop = time.monotonic()
    relay.wait_for_line(rf"^server down: {g} did not answer 3 probes$", 4.0, start=mark)
    fl = H.wait_until(master.flatline_list, 2.0, "the flatline at the master")
    H.expect_eq([(tag, a) for _, tag, a in fl], [("ETFlatline-1", relay.addr)],
                "flatlines at the master (tag, source)")
    relay.wait_for_line(rf"^flatline ETFlatline-1 -> {m} \({m}\)$", 1.0, start=mark)
    ctx.note(f"server down detected {fl[0][0] - t_stop:.2f} s after the stop")

    # clients keep sending while the server is down: ECONNREFUSED on the
    # session socket must neither close the session nor make the loop spin
    cpu0 = relay.cpu_seconds()
    t0 = time.monotonic()
    deadline = t0 + DOWN_WINDOW
    sent_down = 0
    for i in range(int(DOWN_WINDOW / 0.1) + 5):
        if time.monotonic() >= deadline:
            break
        c.send(c.game(b"while-down-%d" % i))
        sent_down += 1
        time.sleep(0.1)
    cpu = relay.cpu_seconds() - cpu0
    elapsed = time.monotonic() - t0
    ctx.note(f"relay CPU while down: {cpu:.2f} s over {elapsed:.1f} s, {sent_down} packets sent")
    H.check(cpu < CPU_LIMIT, f"etrelay used {cpu:.2f} s of CPU in {elapsed:.1f} s while the "
                             f"server was down (limit {CPU_LIMIT} s): busy loop?")
    H.check(relay.alive(), "etrelay died while the server was down")
    late_hb = [h for h in master.heartbeat_list() if h[0] > t_stop + 0.1]
    H.expect_eq(late_hb, [], "heartbeats at the master while the server is down")
    H.expect_eq(len(master.flatline_list()), 1, "flatlines at the master while down (exactly one)")
    H.expect_eq(relay.count(rf"^session - {me} "), 0, "'session -' lines for the client while down")
    H.expect_eq(relay.count(r"^server down: "), 1, "'server down' lines")
    H.expect_eq(c.try_recv(0.05), None, "answer received while the server was down")

    # --- start it again on the same port
    mark = relay.mark()
    gs.start()
    t_up = time.monotonic()
    relay.wait_for_line(rf"^server up: {g} answered the probe$", 3.0, start=mark)
    H.wait_until(lambda: [h for h in master.heartbeat_list() if h[0] > t_up], 3.0,
                 "heartbeats to resume after the server came back")
    H.wait_until(lambda: [l for l in master.listings if l[0] > t_up], 3.0,
                 "the master to list the relay again")
    hb = [h for h in master.heartbeat_list() if h[0] > t_up]
    H.expect_eq({(tag, a) for _, tag, a in hb}, {("EnemyTerritory-1", relay.addr)},
                "heartbeats after the server came back")

    # the old session still forwards, from the same session socket
    after = c.game(b"after-" + os.urandom(8))
    c.send(after)
    for _ in range(40):
        reply = c.recv(what="the answer after the server came back")
        if reply.startswith(b"ECHO:" + c.game(b"while-down-")):
            ctx.note(f"stale answer to a packet sent while down: {reply!r}")
            continue
        break
    H.expect_eq(reply, b"ECHO:" + after, "answer after the server came back")
    H.expect_eq(gs.sources_for([after]), {session_src},
                "session socket the game server sees after the restart")
    H.expect_eq(relay.count(rf"^session - {me} "), 0, "'session -' lines for the client")
    H.expect_eq(relay.count(rf"^session \+ {me} "), 1, "'session +' lines for the client")
    H.expect_eq(len(master.flatline_list()), 1, "flatlines at the master in total")
    H.expect_eq(relay.count(r"^server up: "), 2, "'server up' lines in total")


if __name__ == "__main__":
    H.main(test)
