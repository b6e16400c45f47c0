# SPDX-License-Identifier: ISC
"""Network namespaces: whether they work here (require_netns, else a
skip) and a namespace joined to the host by a veth pair (VethNetns)."""

import os
import random
import shutil
import socket
import subprocess

from harness_base import TestSkip, _register, require_tool, wait_until


_netns_missing = None


def require_netns():
    """The path of ip(8) when network namespaces work here, else skip the
    test (exit 77). The one rule for every test that needs a namespace: it
    needs root, ip(8) (Debian: iproute2), and both `ip netns add` and `ip
    netns exec`; the latter fails in a chroot whose / is not a mount point.
    Tried once per test process, with a throwaway namespace."""
    global _netns_missing
    ipcmd = shutil.which("ip")
    if _netns_missing is None:
        _netns_missing = ""
        name = f"etrelay-probe{os.getpid()}"
        if os.geteuid() != 0:
            _netns_missing = "a network namespace needs root"
        elif not ipcmd:
            _netns_missing = "a network namespace needs ip(8) (Debian: iproute2)"
        else:
            for st in (["netns", "add", name],
                       ["netns", "exec", name, ipcmd, "link", "show", "lo"]):
                r = subprocess.run([ipcmd] + st, capture_output=True, text=True, timeout=10)
                if r.returncode:
                    _netns_missing = (f"no network namespaces here: ip {' '.join(st[:2])}: "
                                      f"{(r.stderr or r.stdout).strip()}")
                    break
            subprocess.run([ipcmd, "netns", "del", name], capture_output=True, timeout=10)
    if _netns_missing:
        raise TestSkip(_netns_missing)
    return ipcmd


class VethNetns:
    """A network namespace joined to this one by a veth pair:
    host side `host_ip`/24, namespace side `ns_ip`/24. wrapper() is the
    argv prefix that runs a command inside. close() deletes the namespace
    (and with it the pair). Raises TestSkip when it cannot be built (not
    root, no ip(8), no namespaces)."""

    def __init__(self, sysctls=()):
        ipcmd = require_netns()
        if sysctls:
            require_tool("sysctl")
        # A tag no namespace or interface has (two in one test drew the
        # same one once: "File exists").
        for _ in range(50):
            tag = f"{os.getpid() % 100000}{random.randrange(100)}"
            if not (os.path.exists(f"/run/netns/etrelay-t{tag}")
                    or os.path.exists(f"/sys/class/net/etrh{tag}")):
                break
        self.ip = ipcmd
        self.name = f"etrelay-t{tag}"
        self.host_if, self.ns_if = f"etrh{tag}", f"etrn{tag}"
        used = subprocess.run([ipcmd, "-4", "addr"], capture_output=True, text=True).stdout
        for _ in range(50):
            octet = random.randrange(1, 250)
            if f"10.213.{octet}." not in used:
                break
        self.host_ip, self.ns_ip = f"10.213.{octet}.1", f"10.213.{octet}.2"
        self.created = False
        _register(self)
        steps = [
            ["netns", "add", self.name],
            ["link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if],
            ["link", "set", self.ns_if, "netns", self.name],
            ["addr", "add", f"{self.host_ip}/24", "dev", self.host_if],
            ["link", "set", self.host_if, "up"],
            ["-n", self.name, "addr", "add", f"{self.ns_ip}/24", "dev", self.ns_if],
            ["-n", self.name, "link", "set", self.ns_if, "up"],
        ]
        for i, st in enumerate(steps):
            r = subprocess.run([ipcmd] + st, capture_output=True, text=True, timeout=10)
            if i == 0 and r.returncode == 0:
                self.created = True
            if r.returncode != 0:
                self.close()
                raise TestSkip(f"ip {' '.join(st)}: {r.stderr.strip()}")
        for key, val in sysctls:
            key = key.replace("{ns_if}", self.ns_if)
            r = subprocess.run(self.wrapper() + ["sysctl", "-q", "-w", f"{key}={val}"],
                               capture_output=True, text=True, timeout=10)
            if r.returncode != 0:
                self.close()
                raise TestSkip(f"sysctl {key}={val} in {self.name}: {r.stderr.strip()}")
        with open(f"/sys/class/net/{self.host_if}/address") as f:
            self.host_mac = bytes.fromhex(f.read().strip().replace(":", ""))
        r = subprocess.run(self.wrapper() + ["cat", f"/sys/class/net/{self.ns_if}/address"],
                           capture_output=True, text=True, timeout=10)
        self.ns_mac = bytes.fromhex(r.stdout.strip().replace(":", ""))
        # the namespace side answers ARP at once; give the link a moment
        wait_until(lambda: open(f"/sys/class/net/{self.host_if}/operstate").read().strip() == "up",
                   5, f"{self.host_if} up")

    def wrapper(self):
        return [self.ip, "netns", "exec", self.name]

    def send_frame(self, frame):
        """Put an Ethernet frame on the host side of the pair."""
        p = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        try:
            p.bind((self.host_if, 0))
            p.send(frame)
        finally:
            p.close()

    def close(self):
        if self.created:
            subprocess.run([self.ip, "netns", "del", self.name], capture_output=True, timeout=10)
            self.created = False
