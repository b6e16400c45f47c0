#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""SIGTERM/SIGINT: with the server up and a flatline tag, the master gets
the flatline, etrelay logs 'exiting on SIGTERM' and exits 0 within 2 s.
With --game q3 (no flatline tag) nothing is sent on SIGTERM. With the
server never up, no flatline either."""

import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def start(ctx, game, sig_name):
    gs = ctx.game_server()
    master = ctx.master()
    relay = ctx.relay("--game", game, "--heartbeat-interval", "60s",
                      "--master", f"127.0.0.1:{master.port}",
                      "--upstream", f"127.0.0.1:{gs.port}")
    g = re.escape(f"127.0.0.1:{gs.port}")
    relay.wait_for_line(rf"^server up: {g} answered the probe$", 3.0)
    H.wait_until(master.heartbeat_list, 3.0, f"a heartbeat ({game})")
    H.wait_until(master.listed_set, 3.0, f"the master to list the relay ({game})")
    return gs, master, relay


def stop(ctx, relay, sig):
    t = time.monotonic()
    relay.signal(sig)
    rc = relay.wait_exit(2.0)
    took = time.monotonic() - t
    H.check(rc is not None, f"etrelay still running 2 s after {signal.Signals(sig).name}")
    H.expect_eq(rc, 0, f"exit status after {signal.Signals(sig).name}")
    relay._join_readers()
    return t, took


def test(ctx):
    # --- ET, SIGTERM: one flatline, exit 0
    gs, master, relay = start(ctx, "et", "SIGTERM")
    m = re.escape(f"127.0.0.1:{master.port}")
    n_hb = len(master.heartbeat_list())
    t, took = stop(ctx, relay, signal.SIGTERM)
    fl = H.wait_until(master.flatline_list, 1.0, "the flatline after SIGTERM")
    H.expect_eq([(tag, a) for _, tag, a in fl], [("ETFlatline-1", relay.addr)],
                "flatlines at the master after SIGTERM (tag, source)")
    H.check(fl[0][0] - t <= 2.0, f"flatline arrived {fl[0][0] - t:.2f} s after SIGTERM")
    raw = master.packets(lambda p: p.data.startswith(H.cmd("heartbeat ETFlatline")))
    H.expect_eq([p.data for p in raw], [H.cmd("heartbeat ETFlatline-1\n")], "flatline datagram bytes")
    H.expect_eq(len(master.heartbeat_list()), n_hb, "heartbeats sent on SIGTERM")
    H.check(relay.count(r"^exiting on SIGTERM$") == 1,
            f"no 'exiting on SIGTERM' line: {relay.text_lines()[-5:]}")
    H.check(relay.count(rf"^flatline ETFlatline-1 -> {m} \({m}\)$") == 1,
            "no 'flatline ETFlatline-1 -> ...' line")
    ctx.note(f"ET/SIGTERM: flatline and exit 0 in {took:.2f} s")
    gs.stop(); master.stop()

    # --- Q3, SIGTERM: no flatline tag, nothing sent
    gs, master, relay = start(ctx, "q3", "SIGTERM")
    H.expect_eq({tag for _, tag, _ in master.heartbeat_list()}, {"QuakeArena-1"}, "q3 heartbeat tag")
    n_pk = len(master.packets())
    t, took = stop(ctx, relay, signal.SIGTERM)
    time.sleep(0.5)  # proving an absence: give a late packet time to arrive
    H.expect_eq(master.packets()[n_pk:], [], "packets at the master after SIGTERM with --game q3")
    H.expect_eq(relay.count(r"^flatline "), 0, "'flatline' lines with --game q3")
    H.check(relay.count(r"^exiting on SIGTERM$") == 1, "no 'exiting on SIGTERM' line (q3)")
    ctx.note(f"Q3/SIGTERM: nothing sent, exit 0 in {took:.2f} s")
    gs.stop(); master.stop()

    # --- ET, SIGINT: same contract as SIGTERM
    gs, master, relay = start(ctx, "et", "SIGINT")
    t, took = stop(ctx, relay, signal.SIGINT)
    fl = H.wait_until(master.flatline_list, 1.0, "the flatline after SIGINT")
    H.expect_eq([(tag, a) for _, tag, a in fl], [("ETFlatline-1", relay.addr)], "flatlines after SIGINT")
    gs.stop(); master.stop()

    # --- ET, server never up (it hears the probes but never answers):
    #     no flatline on SIGTERM
    mute = ctx.game_server(respond=False)
    master = ctx.master()
    relay = ctx.relay("--game", "et", "--probe-timeout", "200ms",
                      "--master", f"127.0.0.1:{master.port}",
                      "--upstream", f"127.0.0.1:{mute.port}")
    H.wait_until(lambda: len(mute.probes()) >= 3, 3.0, "three unanswered probes")
    t, took = stop(ctx, relay, signal.SIGTERM)
    time.sleep(0.5)
    H.expect_eq(master.packets(), [], "packets at the master from a relay whose server never answered")
    H.check(relay.count(r"^exiting on SIGTERM$") == 1, "no 'exiting on SIGTERM' line (server never up)")


if __name__ == "__main__":
    H.main(test)
