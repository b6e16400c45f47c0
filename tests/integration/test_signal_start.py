#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A signal while etrelay starts waits for the loops: a SIGHUP sent as soon
as the public port is bound (before the 'listening on' line; 16 workers
make the start long) is not the default action's death (status 129), the
process comes up and serves; a SIGTERM sent there leaves with status 0, as
etrelay(8)'s EXIT STATUS says. Outside tester attack13 F4: with 64 workers
on 2 CPUs the gap lasted 8 s; the old binary died with 129 and 143."""

import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def port_bound(port):
    """Whether something holds UDP 127.0.0.1:port (a plain bind fails)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((H.LOOPBACK, port))
        return False
    except OSError:
        return True
    finally:
        s.close()


def start_and_signal(ctx, sig):
    gs, master = ctx.game_server(), ctx.master(challenge=False)
    relay = ctx.relay("--workers", "16", "--master", f"127.0.0.1:{master.port}",
                      "--upstream", f"127.0.0.1:{gs.port}", wait_ready=False)
    H.wait_until(lambda: port_bound(relay.port) or not relay.alive(), 10.0 * H.SLOW,
                 "the public port bound")
    sent_before_ready = not relay.find_lines(relay.READY_RE)
    os.kill(relay.pid, sig)
    return relay, sent_before_ready


def test(ctx):
    relay, early = start_and_signal(ctx, signal.SIGHUP)
    relay.wait_ready(timeout=20.0)
    H.check(relay.alive(), "etrelay died of a SIGHUP during its start")
    c = ctx.client(relay)
    H.check(c.request(H.cmd("getinfo xyz"), what="an answer to getinfo after the SIGHUP"),
            "no answer after the SIGHUP")
    ctx.note(f"SIGHUP while starting (before 'listening on': {early}): alive, serving")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(10.0), 0, "exit status after SIGTERM")

    relay, early = start_and_signal(ctx, signal.SIGTERM)
    relay.expect_exit = True
    rc = relay.wait_exit(30.0 * H.SLOW)
    ctx.note(f"SIGTERM while starting (before 'listening on': {early}): exit status {rc}")
    H.expect_eq(rc, 0, "exit status of a SIGTERM during the start")


if __name__ == "__main__":
    H.main(test)
