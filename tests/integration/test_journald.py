#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Logs under journald: when stderr is the stream named by JOURNAL_STREAM
(device:inode, as systemd sets it), every line carries its <N> priority
(6 info, 4 warning, 7 debug); when JOURNAL_STREAM names another stream, or
is unset, lines are plain."""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def run(ctx, gs, journal, extra=("--log-time", "no")):
    """Start etrelay with stderr on a pipe, JOURNAL_STREAM naming that pipe
    (journal=True) or another file; stop it after the server is up and a
    warning was logged; return its stderr lines."""
    r, w = os.pipe()
    other = os.open(os.devnull, os.O_WRONLY)
    st = os.fstat(w if journal else other)
    env = H.child_env({"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
    port = H.free_udp_port()
    # An unresolvable master gives a warning line; --debug gives debug lines.
    # the master's name is looked up in a hosts file alone where that can
    # be done (no DNS query leaves the host; not found at once)
    wrapper = H.hosts_file_wrapper(ctx.tmpdir()) or []
    argv = wrapper + [ctx.binary, "--backend", ctx.backend, "--listen", f"127.0.0.1:{port}",
            "--upstream", f"127.0.0.1:{gs.port}", "--master", "does-not-exist.invalid",
            "--heartbeat-interval", "1s", "--debug", *extra]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=w, env=env)
    os.close(w)
    os.close(other)
    out = b""
    deadline = time.monotonic() + 10 * H.SLOW
    os.set_blocking(r, False)
    try:
        while time.monotonic() < deadline and b"cannot resolve" not in out:
            if p.poll() is not None:
                break
            try:
                chunk = os.read(r, 65536)
                out += chunk
            except BlockingIOError:
                time.sleep(0.05)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10 * H.SLOW)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    os.set_blocking(r, True)
    out += os.read(r, 1 << 20)
    os.close(r)
    if p.returncode == 69:
        raise H.TestSkip("--backend io_uring unavailable here (exit 69)")
    return out.decode("utf-8", "replace").splitlines()


def test(ctx):
    gs = ctx.game_server()
    # --log-time auto (the default) under the journal: no time, the journal
    # has its own
    lines = run(ctx, gs, journal=True, extra=())
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

    plain = run(ctx, gs, journal=False)
    H.check(any(l.startswith("etrelay ") for l in plain),
            f"no plain startup line when JOURNAL_STREAM names another stream: {plain[:3]}")
    H.check(not any(l[:1] == "<" for l in plain), f"prefixed line on a plain stream: {plain}")


if __name__ == "__main__":
    H.main(test)
