#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""An SNI listener's per-source cap holds for an IPv6 site, not only for
one /64 (finding 5 of the outside attack: 65 /64s of one /48 took the
whole of max-connections 4096 and shut every other network out).
site48: a network namespace on a veth pair holds 70 addresses, each in
its own /64 and /56 of one /48 (fd00:e8:R::/48, routed to the namespace);
with max-connections 200 and max-connections-per-ip 4 it opens 4 silent
connections from each (280: enough to fill the listener at 4 per /64).
The /48 keeps 8 times the per-address cap (32) and the rest is refused
cap_per_ip; a client from another network (the host side's address)
then gets its hello echoed. On the old code (per /64 only) the site took
all 200 and that client was refused."""

import os
import random
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import tlsutil as T  # noqa: E402

SOURCES, PER_SOURCE, PER_IP, MAX_CONNECTIONS = 70, 4, 4, 200
SITE_CAP = 8 * PER_IP  # SRCTAB_P48_MULT

# Runs in the namespace: PER_SOURCE connections from each source, held
# (silent) until stdin closes.
HOLDER = r"""
import socket, sys
relay, port, site, n, per = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
held, failed = [], 0
for i in range(n):
    src = f"{site}:{i << 8:x}::2"
    for _ in range(per):
        s = socket.socket(socket.AF_INET6)
        s.settimeout(5)
        try:
            s.bind((src, 0))
            s.connect((relay, port))
            held.append(s)
        except OSError as e:
            failed += 1
            print(f"{src}: {e}", file=sys.stderr, flush=True)
            s.close()
print(f"held {len(held)} failed {failed}", flush=True)
sys.stdin.read()
"""


def ip(ns, *args):
    r = subprocess.run([ns.ip] + list(args), capture_output=True, text=True, timeout=10)
    if r.returncode:
        raise H.TestSkip(f"ip {' '.join(args)}: {r.stderr.strip()}")


def site48(ctx):
    ns = H.VethNetns()
    ctx.objs.append(ns)
    # Prefixes of this run: host routes are global, tests run side by side.
    r = random.randrange(1, 0xffff)
    near, site = f"fd00:e7:{r:x}", f"fd00:e8:{r:x}"
    host6, ns6 = f"{near}::1", f"{near}::2"
    ip(ns, "-6", "addr", "add", f"{host6}/64", "dev", ns.host_if, "nodad")
    ip(ns, "-n", ns.name, "-6", "addr", "add", f"{ns6}/64", "dev", ns.ns_if, "nodad")
    for i in range(SOURCES):
        ip(ns, "-n", ns.name, "-6", "addr", "add", f"{site}:{i << 8:x}::2/128", "dev", ns.ns_if,
           "nodad")
    ip(ns, "-6", "route", "add", f"{site}::/48", "via", ns6, "dev", ns.host_if)

    tmp = ctx.tmpdir()
    echo = T.Backend()
    port, ops = H.free_tcp_port(), H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(f"[sni site]\nlisten [{host6}]:{port}\n"
                f"route echo.test {H.LOOPBACK}:{echo.port}\n"
                f"max-connections {MAX_CONNECTIONS}\nmax-connections-per-ip {PER_IP}\n"
                f"max-preread 1000\npreread-timeout 60s\n")
    relay = ctx.relay("-c", conf, "--ops-listen", f"{H.LOOPBACK}:{ops}", listen=False,
                      wait_ready=False, open_limits=False)
    relay.READY_RE = r"^sni site listening on "
    relay.wait_ready()

    holder = subprocess.Popen(ns.wrapper() + [sys.executable, "-c", HOLDER, host6, str(port),
                                              site, str(SOURCES), str(PER_SOURCE)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline().strip()
        H.check(line.startswith("held "), f"the namespace's connections: {line!r}")
        total = SOURCES * PER_SOURCE

        def decided():
            s = H.metrics_page(ops)[1]
            active = H.metric_value(s, "etrelay_sni_active_connections", listener="site") or 0
            refused = sum(H.metric_value(s, "etrelay_sni_connections_total", listener="site",
                                         result=why) or 0
                          for why in ("cap_per_ip", "cap_connections"))
            return active, refused

        H.wait_until(lambda: sum(decided()) >= total, 15,
                     f"each of the site's {total} connections held or refused")
        active, _ = decided()
        s = H.metrics_page(ops)[1]
        per_ip = H.metric_value(s, "etrelay_sni_connections_total", listener="site",
                                result="cap_per_ip")
        H.log(f"site: {int(active)} held, {int(per_ip)} refused cap_per_ip")
        H.check(active <= SITE_CAP,
                f"one /48 holds at most {SITE_CAP} connections, not {int(active)} "
                f"(max-connections {MAX_CONNECTIONS})")
        H.check(per_ip >= total - SITE_CAP, f"{per_ip} refused cap_per_ip")
        # Another network still gets in.
        got = echoed6(port, host6)
        H.check(got is True, f"a client from another network: {got}")
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    ctx.check_relays_alive()
    echo.stop = True


def echoed6(port, addr, timeout=3.0):
    """A hello from the host's addr to the listener at [addr]:port comes
    back from the echo backend: True, or why not."""
    h = T.hello("echo.test")
    c = socket.socket(socket.AF_INET6)
    try:
        c.settimeout(timeout)
        c.bind((addr, 0))
        c.connect((addr, port))
        c.sendall(h)
        back = b""
        while len(back) < len(h):
            b = c.recv(65536)
            if not b:
                return f"EOF after {len(back)} bytes"
            back += b
        return True if back == h else "different bytes"
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    finally:
        c.close()


def test(ctx):
    H.run_parts(ctx, [site48])


if __name__ == "__main__":
    H.main(test)
