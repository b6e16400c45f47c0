#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Rung 2 of the transport ladder (seed 002): WireGuard over UDP 443, for
networks that filter ports. The relay's namespace gets the nftables rules
etrelay(8) gives (TUNNEL): PRBE datagrams on UDP 443 or the WireGuard port
to the echo port, the rest of UDP 443 to the WireGuard port. The relay
runs from the quick-start options (--wg-interface, --wg-address,
--wg-listen-port) with an echo port; a gateway (its own namespace and
wireguard-go) whose endpoint is the relay's UDP 443 pings over the tunnel
both ways, and its PRBE to UDP 443 comes back from the echo port. 77
without root, namespaces, wireguard-go, wg, or nft (or nf_tables in the
kernel)."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from tunnel_env import (Gateway, T, WireguardGo, control_args, control_files, need,  # noqa: E402
                        pings, public_key, start_relay)

# etrelay(8)'s rules, with the test's ports (443, 51820 and 27970 there).
RULES = """table inet etrelay_rung2 {{
	chain prerouting {{
		type nat hook prerouting priority dstnat; policy accept;
		udp dport {{ 443, {wg} }} @th,64,32 0x50524245 redirect to :{echo}
		udp dport 443 redirect to :{wg}
	}}
}}
"""

PROBE = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
for _ in range(3):
    s.sendto(b"PRBE rung2", (sys.argv[1], 443))
    try:
        data, src = s.recvfrom(2048)
    except socket.timeout:
        continue
    print(data.decode(), src[1])
    break
"""


def gateway_reaches_the_tunnel_on_udp_443(ctx):
    need("nft", ping=True)
    ns = H.VethNetns()
    ifname = f"etw{os.getpid() % 100000}"
    wg_port, echo = H.free_udp_port(), H.free_udp_port()
    r = subprocess.run(ns.wrapper() + ["nft", "-f", "-"], input=RULES.format(wg=wg_port, echo=echo),
                       capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        raise H.TestSkip(f"nft -f: {r.stderr.strip()} (nf_tables in this kernel?)")
    wgo = WireguardGo(ns, ifname)
    ctx.objs.append(wgo)
    tmp = ctx.tmpdir()
    env, state = control_files(tmp)
    cp = H.control_plane(ctx, host=ns.host_ip)
    gw = Gateway(ctx, ns)
    cp.set(wg_peers=[{"publicKey": gw.pub, "allowedIps": ["10.8.0.2/32"]}])
    relay = start_relay(ctx, ns, env, "--wg-interface", ifname, "--wg-address", "10.8.0.1/24",
                        "--wg-listen-port", str(wg_port), "--prbe-listen", f"0.0.0.0:{echo}",
                        *control_args(cp, state))
    pub = public_key(relay, ifname, wg_port)
    H.wait_until(lambda: cp.of(H.CONTROL_HEARTBEAT), T(5), "a heartbeat")

    # The gateway knows the relay by UDP 443 only.
    gw.connect(pub, 443)
    H.wait_until(lambda: pings(gw, "10.8.0.1"), T(5), "a ping from the gateway over UDP 443")
    if not pings(ns, "10.8.0.2"):
        raise H.TestFailure("no ping from the relay back to the gateway's 10.8.0.2")
    dump = gw.run("wg", "show", gw.ifname, "endpoints")
    if f"{gw.relay_ip}:443" not in dump:
        raise H.TestFailure(f"the gateway's endpoint is not the relay's UDP 443: {dump!r}")

    # A probe to UDP 443 is the echo port's, answered from 443 (the
    # gateway tests the path without touching its tunnel).
    r = subprocess.run(gw.wrapper() + [sys.executable, "-c", PROBE, gw.relay_ip],
                       capture_output=True, text=True, timeout=10)
    H.expect_eq(r.stdout.strip(), "PRBE rung2 443", "the echo of a PRBE to UDP 443")
    ctx.check_relays_alive()


def test(ctx):
    H.run_parts(ctx, [gateway_reaches_the_tunnel_on_udp_443])


if __name__ == "__main__":
    H.main(test)
