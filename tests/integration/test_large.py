#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Big datagrams: a statusResponse of 60 000 bytes reaches the client byte for
byte, a 65000-byte client datagram reaches the game server intact (and its
65005-byte echo comes back)."""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


STATUS = 60 * 1000  # bytes: near the most a UDP datagram carries

def test(ctx):
    gs = ctx.game_server(status_size=STATUS)
    master = ctx.master(challenge=False)
    relay = ctx.relay("--master", f"127.0.0.1:{master.port}",
                      "--upstream", f"127.0.0.1:{gs.port}", debug=True)
    c = ctx.client(relay)
    me = re.escape(f"127.0.0.1:{c.port}")

    # server -> client: STATUS bytes
    want = H.status_payload(STATUS)
    got = c.request(H.cmd("getstatus\n"), what="statusResponse")
    H.expect_eq(len(got), STATUS, "statusResponse length at the client")
    H.check(got == want, "statusResponse differs from what the game server sent "
                         f"(first difference at byte {next((i for i in range(STATUS) if got[i] != want[i]), '?')})")
    relay.wait_for_line(rf"^{me} -> ET  getstatus \(14 B\)$", 2.0)
    relay.wait_for_line(rf"^{me} <- ET  statusResponse \({STATUS} B\)$", 2.0)

    # client -> server: 65000 B, in-game
    big = bytes((i * 7 + 3) & 0x7f for i in range(65000))
    big = c.game(os.urandom(27) + big[33:])
    H.expect_eq(len(big), 65000, "test datagram size")
    mark_gs = len(gs.packets())
    echo = c.request(big, what="echo of the 65000 B datagram")
    at_gs = [p.data for p in gs.packets()[mark_gs:] if not p.data.startswith(H.PREFIX)]
    H.expect_eq(len(at_gs), 1, "in-game datagrams at the game server")
    H.expect_eq(len(at_gs[0]), 65000, "size of the big datagram at the game server")
    H.check(at_gs[0] == big, "the 65000 B datagram was altered on the way to the game server")
    H.expect_eq(len(echo), 65005, "size of the echo at the client")
    H.check(echo == b"ECHO:" + big, "the 65005 B echo was altered on the way back")

    # and a small one still works after the big ones
    small = c.game(b"small")
    H.expect_eq(c.request(small), b"ECHO:" + small, "answer to a small packet after big ones")


if __name__ == "__main__":
    H.main(test)
