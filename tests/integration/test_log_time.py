#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""--log-time: an ISO 8601 time with milliseconds and offset at the start of
each line (after the journal's <N> prefix). auto, the default, is on when
stderr is not the journal (JOURNAL_STREAM does not name stderr), off when
it is; yes and no say so whatever stderr is."""

import datetime
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d "


def stamped(lines, prefix=r"", what=""):
    rx = re.compile("^" + prefix + "(" + STAMP + ")")
    H.check(lines, f"{what}: no lines")
    for l in lines:
        m = rx.match(l)
        H.check(m, f"{what}: line without '{prefix}<ISO 8601 time> ': {l!r}")
        t = datetime.datetime.fromisoformat(m.group(1).strip())
        H.check(abs(t.timestamp() - time.time()) < 30 * H.SLOW,
                f"{what}: time {m.group(1)!r} is not now")
    return lines


def test(ctx):
    gs = ctx.game_server()

    auto_plain = H.run_with_journal_stream(ctx, gs, journal=False, extra=())
    stamped(auto_plain, what="--log-time auto, stderr not the journal")
    H.check(any(re.match("^" + STAMP + r"etrelay \S+ listening on ", l) for l in auto_plain),
            f"no stamped startup line: {auto_plain[:3]}")

    auto_journal = H.run_with_journal_stream(ctx, gs, journal=True, extra=())
    H.check(all(re.match(r"^<[467]>[a-z(]", l) for l in auto_journal),
            f"--log-time auto under the journal: a line with a time or no <N>: {auto_journal[:3]}")

    yes_journal = H.run_with_journal_stream(ctx, gs, journal=True, extra=("--log-time", "yes"))
    stamped(yes_journal, prefix=r"<[467]>", what="--log-time yes under the journal")

    no_plain = H.run_with_journal_stream(ctx, gs, journal=False, extra=("--log-time", "no"))
    H.check(any(l.startswith("etrelay ") for l in no_plain),
            f"--log-time no: no plain startup line: {no_plain[:3]}")
    H.check(not any(re.match(r"^\d{4}-", l) for l in no_plain), f"--log-time no: a stamped line")

    # The config key, and a bad value named.
    d = ctx.tmpdir()
    path = os.path.join(d, "etrelay.conf")
    with open(path, "w") as f:
        f.write(f"upstream 127.0.0.1:{gs.port}\nlog-time sometimes\n")
    rc, out, err = H.run_etrelay(ctx, ["-t", "-c", path])
    H.expect_eq(rc, 78, "exit status of -t with log-time sometimes")
    H.check(f"{path}:2: log-time: invalid value 'sometimes' (expected yes, no or auto)" in err,
            f"the error names file:line and the value: {err!r}")


if __name__ == "__main__":
    H.main(test)
