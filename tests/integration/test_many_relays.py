#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""More relays than the old 4-bit relay index held (16): a config file with
20 [relay] sections on loopback ports, each in front of its own game server
stand-in, served by one process.

- Every relay answers a getinfo with its own server's infoResponse (the
  challenge comes back), and an in-game packet with its own server's echo;
  no server sees another relay's traffic.
- /lifecycle lists all 20.
- `-t` on a file with 200 relays names the limit: one error at the header
  of the first relay past it, saying "at most N" with N >= 20."""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

NRELAYS = 20


def distinct_udp_ports(n):
    ports = set()
    for _ in range(50 * n):
        if len(ports) == n:
            break
        ports.add(H.free_udp_port())
    H.check(len(ports) == n, f"could not find {n} free UDP ports")
    return sorted(ports)


def serve(ctx):
    servers = [ctx.game_server() for _ in range(NRELAYS)]
    ports = distinct_udp_ports(NRELAYS)
    ops = H.free_tcp_port()
    path = os.path.join(ctx.tmpdir(), "etrelay.conf")
    with open(path, "w") as f:
        f.write(f"ops-listen 127.0.0.1:{ops}\ndrain-timeout 0\nmax-sessions 100\n")
        for i, (p, g) in enumerate(zip(ports, servers)):
            f.write(f"\n[relay r{i + 1}]\nlisten 127.0.0.1:{p}\nupstream 127.0.0.1:{g.port}\n")
    relay = ctx.relay("-c", path, listen=False, wait_ready=False)
    relay.READY_RE = rf"^etrelay \S+ relay r{NRELAYS} listening on "
    relay.wait_ready()
    H.expect_eq(relay.count(r"^etrelay \S+ relay r\d+ listening on "), NRELAYS,
                "relays that logged their 'listening on' line")

    for i, (p, g) in enumerate(zip(ports, servers)):
        c = ctx.client((H.LOOPBACK, p))
        ch = f"many{i}x{os.urandom(3).hex()}"
        reply = c.request(H.cmd(f"getinfo {ch}"), what=f"infoResponse through relay r{i + 1}")
        H.check(reply.startswith(H.PREFIX + b"infoResponse\n") and
                f"\\challenge\\{ch}\\".encode() in reply,
                f"relay r{i + 1}: not its server's infoResponse for {ch}: {H.short(reply)}")
        payload = b"\x09r%d-" % (i + 1) + os.urandom(4).hex().encode()
        H.expect_eq(c.request(payload, what=f"echo through relay r{i + 1}"),
                    b"ECHO:" + payload, f"in-game answer through relay r{i + 1}")
        for j, other in enumerate(servers):
            got = other.packets(lambda pk: pk.data == payload or ch.encode() in pk.data)
            H.expect_eq(len(got), 2 if j == i else 0,
                        f"relay r{i + 1}'s query and packet at server {j + 1}")

    life = H.http_request(ops, "GET", "/lifecycle").json()
    H.expect_eq(sorted(r["name"] for r in life["relays"]),
                sorted(f"r{i + 1}" for i in range(NRELAYS)), "relays in /lifecycle")


def limit_named(ctx):
    path = os.path.join(ctx.tmpdir(), "etrelay.conf")
    with open(path, "w") as f:
        for i in range(200):  # 3 lines each: relay i+1's header is line 3i+1
            f.write(f"[relay r{i + 1}]\nlisten 127.0.0.1:{2000 + i}\nupstream 127.0.0.1:{3000 + i}\n")
    rc, out, err = H.run_etrelay(ctx, ["-t", "-c", path, "--backend", ctx.backend], timeout=10)
    H.expect_eq(rc, 78, f"exit status of -t with 200 relays (stderr {H.short(err)})")
    first = err.splitlines()[0] if err else ""
    m = re.match(rf"^{re.escape(path)}:(\d+): too many relays \(at most (\d+)\)$", first)
    H.check(m is not None, f"first error of -t with 200 relays: {first!r}")
    line, limit = int(m.group(1)), int(m.group(2))
    H.check(limit >= NRELAYS, f"the relay limit {limit} is below {NRELAYS}")
    H.expect_eq(line, 3 * limit + 1, f"line of the error (the header of relay {limit + 1})")


def test(ctx):
    H.run_parts(ctx, [serve, limit_named])


if __name__ == "__main__":
    H.main(test)
