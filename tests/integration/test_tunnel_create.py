#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The tunnel's kernel interface (issue 25, item 1): with --wg-create yes
etrelay makes a WireGuard interface of the kernel's in its namespace,
gives it the tunnel address and brings it up; at exit (SIGTERM) it deletes
the interface it made, peers, address and all. An interface that was
there before the start (an operator's) is used and left at exit. 77
where the kernel has no WireGuard (`ip link add type wireguard` fails, as
on machines without the module), without root or namespaces."""

import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def T(seconds):
    return seconds * H.SLOW


def create_made_and_deleted(ctx):
    ns = H.VethNetns()
    ifname = f"etk{os.getpid() % 100000}"

    def ip(*args, check=False):
        r = subprocess.run(ns.wrapper() + ["ip", *args], capture_output=True, text=True,
                           timeout=10)
        if check and r.returncode:
            raise H.TestFailure(f"ip {' '.join(args)}: {r.stderr.strip()}")
        return r

    def there():
        return ip("link", "show", "dev", ifname).returncode == 0

    r = ip("link", "add", ifname, "type", "wireguard")
    if r.returncode:
        raise H.TestSkip(f"no WireGuard in this kernel: {r.stderr.strip()}")
    ip("link", "del", ifname, check=True)
    wg_port = H.free_udp_port()
    args = ["--wg-interface", ifname, "--wg-create", "yes", "--wg-address", "10.8.0.1/24",
            "--wg-listen-port", str(wg_port)]

    def run_once(what):
        relay = H.relay_env(ctx, H.CONTROL_NO_PROXY, *args, listen=False, open_limits=False,
                            wait_ready=False, wrapper=ns.wrapper())
        relay.READY_RE = r"^tunnel on "
        relay.wait_ready(T(5))
        if not there():
            raise H.TestFailure(f"{what}: no interface {ifname} while the relay runs")
        if "10.8.0.1/24" not in ip("-4", "addr", "show", "dev", ifname).stdout:
            raise H.TestFailure(f"{what}: no tunnel address on {ifname}")
        relay.signal(signal.SIGTERM)
        H.expect_eq(relay.wait_exit(T(10)), 0, f"{what}: the exit status after SIGTERM")

    run_once("made by the relay")
    if there():
        raise H.TestFailure(f"{ifname}, made by the relay, still there after its exit")
    ip("link", "add", ifname, "type", "wireguard", check=True)
    run_once("there before the start")
    if not there():
        raise H.TestFailure(f"{ifname}, there before the start, deleted at the relay's exit")
    ctx.check_relays_alive()


def test(ctx):
    H.run_parts(ctx, [create_made_and_deleted])


if __name__ == "__main__":
    H.main(test)
