#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Session expiry: with --session-timeout 1s a session kept busy stays,
an idle one is closed ('session - ... (idle, 0 active)') within ~3 s, and the
next packet from the same client opens a new session (new source port at
the game server)."""

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def test(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)  # no master session: only the client's
    relay = ctx.relay("--session-timeout", "1s", "--master", f"127.0.0.1:{master.port}",
                      "--upstream", f"127.0.0.1:{gs.port}", debug=True)
    c = ctx.client(relay)
    me = re.escape(f"127.0.0.1:{c.port}")

    def exchange(tag):
        payload = c.game(tag.encode() + os.urandom(8))
        H.expect_eq(c.request(payload, what=tag), b"ECHO:" + payload, f"answer to {tag}")
        srcs = gs.sources_for([payload])
        H.expect_eq(len(srcs), 1, f"copies of {tag} at the game server")
        return next(iter(srcs))[1], time.monotonic()

    p1, _ = exchange("first")
    relay.wait_for_line(rf"^session \+ {me} \(1 active\)$", 2.0, what="the client's session")

    # busy for 2 s with a packet every 0.3 s: longer than the timeout, the
    # session must survive
    mark = relay.mark()
    for i in range(7):
        port, last = exchange(f"keepalive-{i}")
        H.expect_eq(port, p1, f"session port of keep-alive packet {i}")
        H.expect_eq(relay.count(rf"^session - {me} ", mark), 0,
                    "'session -' lines for a client sending every 0.3 s (timeout 1 s)")
        time.sleep(0.3)

    # idle: the session goes within ~3 s, not before the timeout
    idle_from = last
    mark = relay.mark()
    _, _, t_gone = relay.wait_for_line(rf"^session - {me} \(idle, 0 active\)$", 3.5,
                                       start=mark, what="idle expiry of the client's session")
    idle = t_gone - idle_from
    H.check(idle >= 0.9, f"session closed after {idle:.2f} s idle, before the 1 s timeout")
    H.check(idle <= 3.0, f"session closed only after {idle:.2f} s idle (timeout 1 s)")
    ctx.note(f"idle session closed after {idle:.2f} s")

    # a new packet opens a new session, with a new socket
    mark = relay.mark()
    p2, _ = exchange("after-expiry")
    relay.wait_for_line(rf"^session \+ {me} \(1 active\)$", 2.0, start=mark,
                        what="a new session after expiry")
    H.check(p2 != p1, f"the game server saw the same source port {p1} after the session expired")
    H.check(p2 != relay.port, "new session from the relay's public port")


if __name__ == "__main__":
    H.main(test)
