#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Logs under journald: when stderr is the stream named by JOURNAL_STREAM
(device:inode, as systemd sets it), every line carries its <N> priority
(6 info, 4 warning, 7 debug); when JOURNAL_STREAM names another stream, or
is unset, lines are plain."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def test(ctx):
    gs = ctx.game_server()
    # --log-time auto (the default) under the journal: no time, the journal
    # has its own
    lines = H.run_with_journal_stream(ctx, gs, journal=True, extra=())
    H.check(any("cannot resolve" in l for l in lines), f"no resolver warning in {lines}")
    for l in lines:
        H.check(l[:3] in ("<6>", "<4>", "<7>"), f"line without a priority prefix: {l!r}")
    first = {l[3:].split(" ")[0]: l[:3] for l in lines}
    H.expect_eq(first.get("etrelay"), "<6>", "priority of the startup line")
    warn = [l for l in lines if "cannot resolve" in l]
    H.expect_eq(warn[0][:3], "<4>", "priority of the resolver warning")
    dbg = [l for l in lines if "heartbeat " in l or "session " in l]
    H.check(all(l.startswith("<7>") for l in dbg), f"debug lines: {dbg}")
    ctx.note(f"journal stream: {len(lines)} lines, all prefixed")

    plain = H.run_with_journal_stream(ctx, gs, journal=False)
    H.check(any(l.startswith("etrelay ") for l in plain),
            f"no plain startup line when JOURNAL_STREAM names another stream: {plain[:3]}")
    H.check(not any(l[:1] == "<" for l in plain), f"prefixed line on a plain stream: {plain}")


if __name__ == "__main__":
    H.main(test)
