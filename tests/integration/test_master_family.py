#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A master of an address family the listener cannot reach.

-t refuses an IPv6 master literal with an IPv4 listener and an IPv4 one with
an IPv6 listener bound to a single address, naming the option or file:line
(exit 64 for the command line, 78 for a file); [::] takes IPv4 masters (mapped addresses). -t --probe resolves
names in every family and fails a name with only unreachable addresses,
both ways, naming file:line, and says of a good master only what it checked.
At run time such a name is reported once as what it is, not as a name that
cannot be resolved, while a reachable master keeps getting heartbeats.
Names come from a private /etc/hosts, the only source of host names
(a private nsswitch.conf, mount namespace): no resolver, no DNS."""

import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def hosts_wrapper(tmpdir):
    """argv prefix running a command where host names come from an
    /etc/hosts alone (H.hosts_file_wrapper: no resolver is asked) that has
    v6only.test (2001:db8::1) and v4only.test (127.0.0.1); None when it
    cannot be done here."""
    wrapper = H.hosts_file_wrapper(
        tmpdir, "127.0.0.1 localhost v4only.test\n2001:db8::1 v6only.test\n")
    if wrapper is None:
        return None
    try:
        r = subprocess.run(wrapper + ["getent", "ahosts", "v6only.test"], capture_output=True,
                           timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return wrapper if r.returncode == 0 and b"2001:db8::1" in r.stdout else None


def have_ipv6_loopback():
    import socket
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


def test(ctx):
    if not have_ipv6_loopback():
        raise H.TestSkip("no IPv6 loopback (::1) in this kernel/namespace")
    gs = ctx.game_server()
    up = f"127.0.0.1:{gs.port}"
    p4, p6 = H.free_udp_port(), H.free_udp_port()

    # --- literals, -t alone: refused, naming the option or file:line
    rc, out, err = H.run_etrelay(ctx, ["-t", "--listen", f"127.0.0.1:{p4}", "--upstream", up,
                                       "--master", "[::1]:27950"])
    # a command-line configuration's errors are usage errors (64), a file's 78
    H.expect_eq(rc, 64, f"-t: IPv6 master, IPv4 listener (stderr {err!r})")
    H.check(f"etrelay: --master [::1]:27950: an IPv6 address; relay default listens on "
            f"127.0.0.1:{p4}, which cannot reach it" in err, f"-t names the option: {err!r}")
    d = ctx.tmpdir()
    path = os.path.join(d, "etrelay.conf")
    with open(path, "w") as f:
        f.write(f"upstream {up}\n[relay six]\nlisten [::1]:{p6}\nmaster 127.0.0.1:27950\n")
    rc, out, err = H.run_etrelay(ctx, ["-t", "-c", path])
    H.expect_eq(rc, 78, f"-t: IPv4 master, listener [::1] (stderr {err!r})")
    H.check(f"{path}:4: master 127.0.0.1:27950: an IPv4 address; relay six listens on "
            f"[::1]:{p6}, which cannot reach it" in err, f"-t names file:line: {err!r}")
    rc, out, err = H.run_etrelay(ctx, ["-t", "--listen", f"[::]:{p6}", "--upstream", up,
                                       "--master", "127.0.0.1:27950"])
    H.expect_eq(rc, 0, f"-t: IPv4 master, listener [::] (stderr {err!r})")

    wrapper = hosts_wrapper(d)
    if wrapper is None:
        ctx.note("no private /etc/hosts here (needs root and unshare): name checks not run")
        return

    # --- names, -t --probe: both ways, from a file, line named
    master = ctx.master()
    with open(path, "w") as f:
        f.write(f"upstream {up}\n"
                f"[relay four]\nlisten 127.0.0.1:{p4}\nmaster v6only.test:{master.port}\n"
                f"master v4only.test:{master.port}\n"
                f"[relay six]\nlisten [::1]:{p6}\nmaster v4only.test:{master.port}\n")
    rc, out, err = H.run_etrelay(ctx, ["-t", "--probe", "-c", path], wrapper=wrapper)
    H.expect_eq(rc, 1, f"-t --probe with unreachable names (stdout {out!r}, stderr {err!r})")
    for want in (
            f"relay four: master v6only.test:{master.port} ({path}:4): FAILED, resolves only to "
            f"IPv6 addresses ([2001:db8::1]:{master.port}), which the listener 127.0.0.1:{p4} cannot reach",
            f"relay four: master v4only.test:{master.port}: resolved to 127.0.0.1:{master.port}, "
            f"which the listener 127.0.0.1:{p4} can reach (whether it answers heartbeats is not "
            f"checked)",
            f"relay six: master v4only.test:{master.port} ({path}:8): FAILED, resolves only to "
            f"IPv4 addresses (127.0.0.1:{master.port}), which the listener [::1]:{p6} cannot reach"):
        H.check(want in out.splitlines(), f"-t --probe: no line {want!r} in {out!r}")

    # --- at run time: said once, as what it is; the good master is heartbeaten
    mark_t = time.monotonic()
    relay = ctx.relay("--heartbeat-interval", "1s", "--probe-timeout", "300ms",
                      "--upstream", up, "--master", f"v6only.test:{master.port}",
                      "--master", f"v4only.test:{master.port}", wrapper=wrapper)
    rx = (rf"^master v6only\.test:{master.port}: only IPv6 addresses \(\[2001:db8::1\]:{master.port}\), "
          rf"which the listener 127\.0\.0\.1:{relay.port} cannot reach; no heartbeats to it$")
    relay.wait_for_line(rx, 3.0 * H.SLOW)
    H.wait_until(lambda: len([h for h in master.heartbeat_list() if h[0] > mark_t]) >= 3,
                 5.0 * H.SLOW, "three heartbeats to the reachable master")
    H.expect_eq(relay.count(rx), 1, "lines about the unreachable master")
    H.expect_eq(relay.count(r"cannot resolve"), 0, "'cannot resolve' lines")

    six = H.Relay(ctx.binary, ctx.backend, ["--listen", f"[::1]:{p6}", "--heartbeat-interval", "1s",
                                            "--probe-timeout", "300ms", "--upstream", up,
                                            "--master", f"v4only.test:{master.port}"],
                  listen=False, wrapper=wrapper)
    ctx.relays.append(six)
    ctx.objs.append(six)
    six.wait_ready()
    rx6 = (rf"^master v4only\.test:{master.port}: only IPv4 addresses \(.*127\.0\.0\.1\]?:"
           rf"{master.port}\), which the listener \[::1\]:{p6} cannot reach; no heartbeats to it$")
    six.wait_for_line(rx6, 3.0 * H.SLOW)
    time.sleep(2.5)
    H.expect_eq(six.count(rx6), 1, "lines about the unreachable master (IPv6 listener)")
    H.expect_eq(six.count(r"cannot resolve|Network is unreachable"), 0,
                "'cannot resolve' or send-error lines (IPv6 listener)")


if __name__ == "__main__":
    H.main(test)
