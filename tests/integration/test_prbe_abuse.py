#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""PRBE echo against forged sources:

- a budget per echo port for every source together: 500 source addresses
  (127/8, one probe each) against --prbe-listener-burst 50 and
  --prbe-listener-rate 2 get 50 echoes and a few more as the bucket
  refills, on an echo-only port and on a relay's port with --prbe yes, the
  rest counted as listener_rate (before, each forged source got its echo);
- no echo to a well-known reflector's port (memcached 11211, SSDP 1900,
  mDNS 5353, WS-Discovery 3702), counted as reflector_port;
- two relays whose echo ports know nothing of each other: a probe forged
  with one's echo port as source (a raw socket) goes to the other, comes
  back once and stops there (bounce), where it went back and forth until
  both sources' buckets ran dry (about 40 datagrams)."""

import os
import random
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

SOURCES = 500
BURST, RATE = 50, 2
FORGED = 5
REFLECTORS = (11211, 1900, 5353, 3702)
_RNG = random.Random(os.urandom(8))


def probe(n=24):
    return b"PRBE" + os.urandom(n - 4)


def metrics(port):
    r = H.http_request(port, "GET", "/metrics")
    H.expect_eq(r.status, 200, "/metrics status")
    return H.parse_metrics(r.text)


def prbe_count(ops, port, result):
    return H.metric_value(metrics(ops), "etrelay_prbe_packets_total", port=f"127.0.0.1:{port}",
                          result=result)


def wait_counts(ops, port, want, what):
    """Each result counter of port reaches its value in want."""
    seen = {}

    def ok():
        m = metrics(ops)
        for r in want:
            seen[r] = H.metric_value(m, "etrelay_prbe_packets_total", port=f"127.0.0.1:{port}",
                                     result=r)
        return all(seen[r] == n for r, n in want.items())
    try:
        H.wait_until(ok, 5.0 * H.SLOW, what, interval=0.05)
    except H.TestFailure:
        H.fail(f"{what}: etrelay_prbe_packets_total on :{port} is {seen}, expected {want}")
    return seen


def echo_only(ctx, *extra):
    """A process with one echo-only port and the ops plane."""
    port, ops = H.free_udp_port(), H.free_tcp_port()
    relay = ctx.relay("--prbe-listen", f"127.0.0.1:{port}", "--ops-listen", f"127.0.0.1:{ops}",
                      *extra, listen=False, wait_ready=False, open_limits=False)
    relay.wait_for_line(r"^PRBE echo on 127\.0\.0\.1:%d$" % port, 3.0)
    return relay, port, ops


def listener_budget(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    echo_port, ops = H.free_udp_port(), H.free_tcp_port()
    relay = ctx.relay("--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
                      "--prbe", "yes", "--prbe-listen", f"127.0.0.1:{echo_port}",
                      "--ops-listen", f"127.0.0.1:{ops}",
                      "--prbe-listener-burst", str(BURST), "--prbe-listener-rate", str(RATE))
    relay.wait_for_line(r"^PRBE echo on 127\.0\.0\.1:%d$" % echo_port, 3.0)
    workers = int(H.WORKERS)
    for port in (echo_port, relay.port):
        # every source on one port number, free on every address (sources
        # in a /16 of 127/8 of their own: copies of this test beside it)
        src_port = H.free_udp_range(1)[0]
        x, y = _RNG.randrange(10, 250), _RNG.randrange(0, 240)
        socks = []
        try:
            for i in range(SOURCES):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                try:
                    s.bind((f"127.{x}.{y + i // 250}.{i % 250 + 1}", src_port))
                except OSError:
                    s.close()
                    continue
                s.setblocking(False)
                socks.append(s)
            H.check(len(socks) >= SOURCES * 9 // 10,
                    f"only {len(socks)} of {SOURCES} source sockets bound")
            t0 = time.monotonic()
            for s in socks:
                s.sendto(probe(), ("127.0.0.1", port))
            # every probe decided: echoed (when the send completed) or not
            m = {}

            def decided():
                m.clear()
                for r in ("echoed", "listener_rate", "rate", "send_error"):
                    m[r] = prbe_count(ops, port, r) or 0
                return m["echoed"] + m["listener_rate"] + m["rate"] + m["send_error"] >= len(socks)
            H.wait_until(decided, 5.0 * H.SLOW, f"every probe on :{port} decided", interval=0.05)
            elapsed = time.monotonic() - t0
            echoed = 0
            for s in socks:
                for _ in range(4):
                    try:
                        s.recvfrom(H.MAX_DGRAM)
                        echoed += 1
                    except BlockingIOError:
                        break
        finally:
            for s in socks:
                s.close()
        # each worker's part: BURST / workers at once, RATE / workers (at
        # least 1) a second
        most = BURST + max(RATE // workers, 1) * workers * elapsed + 1
        ctx.note(f":{port}: {len(socks)} forged sources, {echoed} echoes in {elapsed:.2f} s "
                 f"(burst {BURST}, rate {RATE}/s); counters {m}")
        H.check(BURST <= echoed <= most,
                f":{port}: {echoed} echoes to {len(socks)} sources, one probe each, in "
                f"{elapsed:.2f} s (expected {BURST} to {most:.0f}: the port's burst and rate)")
        H.expect_eq(m["echoed"], echoed, f":{port}: echoes counted")
        H.expect_eq(m["rate"], 0, f":{port}: probes over a source's rate (one each)")
        H.expect_eq(m["listener_rate"], len(socks) - echoed,
                    f":{port}: probes over the port's budget counted")


def reflector_ports(ctx):
    relay, port, ops = echo_only(ctx)
    host = f"127.{_RNG.randrange(10, 250)}.{_RNG.randrange(0, 250)}.{_RNG.randrange(1, 250)}"
    sent = 0
    for rp in REFLECTORS:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((host, rp))
        except OSError as e:
            ctx.note(f"{host}:{rp} not bindable ({e}): not sent from")
            s.close()
            continue
        try:
            s.sendto(probe(), ("127.0.0.1", port))
            sent += 1
            s.settimeout(0.3)
            try:
                data, _ = s.recvfrom(H.MAX_DGRAM)
                H.fail(f"a probe from source port {rp} (a reflector's) was echoed")
            except socket.timeout:
                pass
        finally:
            s.close()
    H.check(sent >= 2, f"only {sent} reflector ports were bindable on {host}")
    wait_counts(ops, port, {"reflector_port": sent, "echoed": 0},
                "probes from reflector ports dropped")
    # an ordinary port of the same address is echoed
    s = H.udp_socket(host)
    try:
        p = probe()
        s.sendto(p, ("127.0.0.1", port))
        H.expect_eq(s.recvfrom(H.MAX_DGRAM)[0], p, "echo to an ordinary source port")
    finally:
        s.close()


def two_echoers(ctx):
    raw = H.RawUdp()
    ctx.objs.append(raw)
    a, pa, ops_a = echo_only(ctx)
    b, pb, ops_b = echo_only(ctx)
    for i in range(FORGED):
        # from b's echo port, to a's: a echoes to b, b back to a
        H.check(raw.send(("127.0.0.1", pb), ("127.0.0.1", pa), probe(30 + i)),
                "a raw send of a forged probe")
        time.sleep(0.05)
    want_a = {"echoed": FORGED, "bounce": FORGED}
    want_b = {"echoed": FORGED, "bounce": 0}
    seen_a = wait_counts(ops_a, pa, want_a, "the first echoer's echoes and bounces")
    seen_b = wait_counts(ops_b, pb, want_b, "the second echoer's echoes")
    # and nothing more after a while
    def unchanged():
        return all(prbe_count(ops, port, r) == n
                   for ops, port, want in ((ops_a, pa, want_a), (ops_b, pb, want_b))
                   for r, n in want.items())
    H.hold_for(unchanged, 0.6, "the echoers' counts after the bounces", interval=0.1)
    ctx.note(f"{FORGED} probes forged from :{pb} to :{pa}: :{pa} {seen_a}, :{pb} {seen_b}")


def test(ctx):
    H.run_parts(ctx, [listener_budget, reflector_ports, two_echoers])


if __name__ == "__main__":
    H.main(test)
