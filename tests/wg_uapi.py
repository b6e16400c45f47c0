#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The reconcile plan (src/tun/wgpeers.c) carried by src/tun/wgdev.c to a
real WireGuard interface in a namespace of its own, through
tests/wgp_apply.c: with "uapi", wireguard-go (Debian 12: 0.0.20220316) and
the userspace API text; with "kernel", an interface of the kernel's
(made through rtnetlink, src/sys/rtnl.c) and the generic netlink messages
(src/tun/wgnl.c), 77 where the kernel has no WireGuard. A key pair made by wgp_keypair and a
listen port set (wg shows that public key and port), the tunnel address
set and the interface up (ip shows both), peers added, the same set written another
way changes nothing (no request at all), a second set removes, updates and
adds exactly what changed, an endpoint another tool set on an unchanged
peer is still there; `wg show IF dump` (wireguard-tools) confirms each
state. Then 1000 peers, and 10 of them changed: 10 operations; the times
are printed (not asserted). Exit 77 without root, namespaces, wireguard-go
or wg.

Usage: wg_uapi.py WGP_APPLY [uapi|kernel]"""

import base64
import os
import shutil
import subprocess
import sys
import time

APPLY = sys.argv[1]
WAY = sys.argv[2] if len(sys.argv) > 2 else "uapi"
NS = f"etr-wgu-{os.getpid()}"
IF = f"wgu{os.getpid() % 100000}"
SOCK_DIR = "/var/run/wireguard"
SOCK = f"{SOCK_DIR}/{IF}.sock"
# The kernel's way: no socket in this directory, and the tool runs in the
# interface's namespace (generic netlink is per namespace).
NO_SOCK_DIR = "/nonexistent-etrelay-wg"


def tool(*args):
    if WAY == "kernel":
        return ["ip", "netns", "exec", NS, APPLY, NO_SOCK_DIR, IF, *args]
    return [APPLY, SOCK_DIR, IF, *args]


def skip(msg):
    print("SKIP:", msg)
    sys.exit(77)


def fail(msg):
    print("FAIL wg_uapi:", msg)
    sys.exit(1)


def key():
    return base64.b64encode(os.urandom(32)).decode()


def apply(peers, chunk=4096):
    """Run wgp_apply with peers [(key, [cidr...], psk or None)]."""
    args = tool(str(chunk))
    for k, ips, psk in peers:
        args.append(",".join([k] + ips + ([f"psk={psk}"] if psk else [])))
    t = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    dt = time.monotonic() - t
    if p.returncode != 0:
        fail(f"wgp_apply exit {p.returncode}: {p.stderr.strip()}")
    out = dict(kv.split("=") for kv in p.stdout.split())
    out.pop("us", None)
    if out.pop("way", None) != WAY:
        fail(f"wgp_apply reached the interface another way: {p.stdout.strip()}")
    return out, dt


def dump():
    """{public key: (psk or None, endpoint, sorted allowed IPs)} from wg."""
    p = subprocess.run(["ip", "netns", "exec", NS, "wg", "show", IF, "dump"],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        fail(f"wg show: {p.stderr.strip()}")
    peers = {}
    for line in p.stdout.splitlines()[1:]:
        f = line.split("\t")
        allowed = sorted(f[3].split(",")) if f[3] != "(none)" else []
        peers[f[0]] = (None if f[1] == "(none)" else f[1], f[2], allowed)
    return peers


def expect(want, ops, got_ops):
    got = {k: int(v) for k, v in got_ops.items() if k != "requests"}
    if got != ops:
        fail(f"expected ops {ops}, wgp_apply planned {got}")
    have = dump()
    for k, ips, psk in want:
        if k not in have:
            fail(f"peer {k} missing from wg show")
        if have[k][0] != psk or have[k][2] != sorted(ips):
            fail(f"peer {k}: wg shows {have[k]}, wanted psk {psk} allowed {sorted(ips)}")
    if set(have) != {k for k, _, _ in want}:
        fail(f"wg shows {len(have)} peers, wanted {len(want)}")
    return have


def main():
    if os.geteuid() != 0:
        skip("needs root (a network namespace, a TUN device)")
    for prog in ("ip", "wg") + (("wireguard-go",) if WAY == "uapi" else ()):
        if not shutil.which(prog):
            skip(f"{prog} not installed (Debian: iproute2, wireguard-go, wireguard-tools)")
    if subprocess.run(["ip", "netns", "add", NS], capture_output=True).returncode != 0:
        skip("ip netns add refused")
    wg = None
    try:
        if WAY == "kernel":
            # Created by src/tun/wgdev.c (rtnetlink), 77 without the kind.
            r = subprocess.run(tool("create"), capture_output=True, text=True, timeout=30)
            if r.returncode == 77:
                skip(f"no WireGuard in this kernel: {r.stderr.strip()}")
            if r.returncode != 0:
                fail(f"wgp_apply create: exit {r.returncode}: {r.stderr.strip()}")
        else:
            env = dict(os.environ, WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD="1")
            wg = subprocess.Popen(["ip", "netns", "exec", NS, "wireguard-go", "-f", IF],
                                  env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while not os.path.exists(SOCK):
                if time.monotonic() > deadline or wg.poll() is not None:
                    skip("wireguard-go did not open its socket within 10 s (no /dev/net/tun?)")
                time.sleep(0.05)

        p = subprocess.run(tool("device", "21820"), capture_output=True, text=True,
                           timeout=30)
        if p.returncode != 0:
            fail(f"wgp_apply device: exit {p.returncode}: {p.stderr.strip()}")
        for what, want in (("public-key", p.stdout.strip()), ("listen-port", "21820")):
            shown = subprocess.run(["ip", "netns", "exec", NS, "wg", "show", IF, what],
                                   capture_output=True, text=True, timeout=30).stdout.strip()
            if shown != want:
                fail(f"wg show {what}: {shown!r}, wgp_apply set {want!r}")

        # The relay's tunnel address, and the interface up (rtnetlink, in
        # the interface's namespace whichever way reaches WireGuard).
        r = subprocess.run(["ip", "netns", "exec", NS, APPLY, SOCK_DIR, IF, "address",
                            "10.8.0.1/24"], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            fail(f"wgp_apply address: exit {r.returncode}: {r.stderr.strip()}")
        shown = subprocess.run(["ip", "-n", NS, "-o", "addr", "show", "dev", IF],
                               capture_output=True, text=True, timeout=30).stdout
        if "inet 10.8.0.1/24" not in shown:
            fail(f"ip addr shows {shown!r} after wgp_apply address 10.8.0.1/24")
        shown = subprocess.run(["ip", "-n", NS, "-o", "link", "show", IF],
                               capture_output=True, text=True, timeout=30).stdout
        if ",UP" not in shown and "<UP" not in shown:
            fail(f"ip link shows {shown!r}: not up after wgp_apply address")

        k1, k2, k3, k4, k5, psk = key(), key(), key(), key(), key(), key()
        a = [(k1, ["10.8.0.1/32"], None), (k2, ["10.8.0.2/32", "fd00::2/128"], psk),
             (k3, ["10.8.0.3/32"], None)]
        ops, _ = apply(a)
        expect(a, {"remove": 0, "update": 0, "add": 3}, ops)
        # Another tool gives k1 an endpoint: an untouched peer keeps it.
        subprocess.run(["ip", "netns", "exec", NS, "wg", "set", IF, "peer", k1, "endpoint",
                        "192.0.2.1:21820"], check=True, timeout=30)

        # The same set, written another way: nothing to do, no request.
        same = [(k3, ["10.8.0.3"], None), (k1, ["10.8.0.1/32"], None),
                (k2, ["fd00::2/128", "10.8.0.2/32", "10.8.0.2/32"], psk)]
        ops, _ = apply(same)
        if ops["requests"] != "0":
            fail(f"an unchanged set sent {ops['requests']} requests")
        expect(a, {"remove": 0, "update": 0, "add": 0}, ops)

        # k2 loses its PSK, k3 is revoked, k4 takes k3's address, k5 a
        # network written with host bits.
        b = [(k1, ["10.8.0.1/32"], None), (k2, ["10.8.0.2/32", "fd00::2/128"], None),
             (k4, ["10.8.0.3/32"], None), (k5, ["10.8.1.7/24"], None)]
        ops, _ = apply(b, chunk=256)
        b[3] = (k5, ["10.8.1.0/24"], None)
        have = expect(b, {"remove": 1, "update": 1, "add": 2}, ops)
        if int(ops["requests"]) < 2:
            fail("a 256-byte chunk should have split the set into several requests")
        if have[k1][1] != "192.0.2.1:21820":
            fail(f"the unchanged peer lost its endpoint: {have[k1]}")

        # 1000 peers, then 10 changed (4 revoked, 4 new, 2 moved).
        big = [(key(), [f"10.9.{i // 250}.{i % 250 + 1}/32"], None) for i in range(1000)]
        ops, t_add = apply(big, chunk=65536)
        expect(big, {"remove": 4, "update": 0, "add": 1000}, ops)
        changed = big[4:] + [(key(), [f"10.10.0.{i + 1}/32"], None) for i in range(4)]
        changed[0] = (changed[0][0], ["10.10.1.1/32"], None)
        changed[1] = (changed[1][0], ["10.10.1.2/32"], None)
        ops, t_ten = apply(changed, chunk=65536)
        expect(changed, {"remove": 4, "update": 2, "add": 4}, ops)
        print(f"wg_uapi ({WAY}): the interface agrees with the plans; 1000 peers added in "
              f"{t_add * 1000:.0f} ms ({ops['requests']} request(s) for the 10 changed, "
              f"{t_ten * 1000:.0f} ms, get and plan included)")
    finally:
        if wg is not None:
            wg.terminate()
            try:
                wg.wait(timeout=10)
            except subprocess.TimeoutExpired:
                wg.kill()
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


if __name__ == "__main__":
    main()
