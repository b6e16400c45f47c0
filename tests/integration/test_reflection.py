#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Reflection: etrelay must not be an amplifier for spoofed queries.

    python3 test_reflection.py <etrelay-binary> <io_uring|epoll>

Victim UDP sockets are bound on 127.0.0.99, 50 ports. A raw socket forges
"getstatus" queries FROM that address (its ports in turn: every per-IP rule
counts the address, whatever the port, on any number of workers) to etrelay (default abuse limits:
--ip-query-burst 10, --ip-query-rate 1, --query-cache 1s) at 1000 per
second for 10 s. Behind the relay, a GameServer stand-in answers getstatus
with a 1200-byte statusResponse (92 times the 13-byte query).

What the victim may receive: the per-IP token bucket sits before the cache,
so at most `burst + rate * T` queries in its name are answered at all,
whether by the game server or from the cache, one reply each: 10 + 10 for
T = 10 s. Tolerance, 2: one for the partial token the bucket accrues
beyond floor(T) (T is measured, a little over 10 s) and one for the relay
reading the last queries a little after we sent them (its clock, not ours,
refills the bucket). So:

  replies to the victim <= 10 + floor(T) + 2, and at least 5 (a relay that
  answers nothing would pass vacuously; not "at least 10": when the burst
  is read in one batch, as io_uring does, it reaches the cache before the
  first reply does, and only 2 of those 10 fit in the game-server budget
  left for browsers, 8 - 1 probe - 5 reserved; the cache serves later
  ones);
  bytes to the victim < bytes of the queries forged in its name;
  etrelay_dropped_datagrams_total{reason="ip_rate"} >= sent - that bound.
"""

import os
import selectors
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

VICTIM = "127.0.0.99"
RATE = 1000          # forged queries per second
DURATION = 10.0      # seconds
BURST, PER_SEC = 10, 1  # etrelay's defaults, asserted against
STATUS_SIZE = 1200
TOLERANCE = 2
MIN_REPLIES = 5


PORTS = 50


class Counter(threading.Thread):
    """Counts what arrives on the victim's sockets, and from where."""

    def __init__(self, socks):
        super().__init__(daemon=True, name="victim")
        self.sel = selectors.DefaultSelector()
        for s in socks:
            s.setblocking(False)
            self.sel.register(s, selectors.EVENT_READ)
        self.stop_ev = threading.Event()
        self.packets = []   # (t, len, src, head)

    def run(self):
        for _ in range(10_000_000):
            if self.stop_ev.is_set():
                break
            for key, _ in self.sel.select(0.05):
                try:
                    data, src = key.fileobj.recvfrom(H.MAX_DGRAM)
                except OSError:
                    continue
                self.packets.append((time.monotonic(), len(data), src, data[:24]))

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=3)


def test(ctx):
    gs = ctx.game_server(status_size=STATUS_SIZE)
    master = ctx.master(challenge=False)
    ops_port = H.free_tcp_port()
    tok = os.urandom(24).hex()
    relay = H.relay_env(ctx, {"ETRELAY_METRICS_TOKEN": tok},
                        "--upstream", f"127.0.0.1:{gs.port}",
                        "--master", f"127.0.0.1:{master.port}",
                        "--ops-listen", f"127.0.0.1:{ops_port}",
                        open_limits=False)
    relay.wait_for_line(r"^server up: ", timeout=10, what="the first probe answered")

    victims = [H.udp_socket(VICTIM, 0) for _ in range(PORTS)]
    vaddrs = [v.getsockname() for v in victims]
    vaddr = vaddrs[0]
    counter = Counter(victims)
    counter.start()
    raw = H.RawUdp()
    ctx.objs.append(raw)
    query = H.cmd("getstatus")
    pkts = [H.ipv4_udp(v, relay.addr, query) for v in vaddrs]
    before = H.get_metrics(ops_port, tok)

    # 1000 per second, in 10 ms slices of 10, for 10 s (bounded by count).
    per_slice = RATE // 100
    t0 = time.monotonic()
    for i in range(int(DURATION * 100)):
        for j in range(per_slice):
            raw.send_raw(pkts[(i * per_slice + j) % PORTS], relay.addr[0], len(query))
        delay = t0 + (i + 1) * 0.01 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    t_send = time.monotonic() - t0
    time.sleep(1.5)   # replies still in flight
    counter.stop()
    after = H.get_metrics(ops_port, tok)

    got = counter.packets
    got_bytes = sum(p[1] for p in got)
    wrong_src = [p for p in got if tuple(p[2]) != relay.addr]
    ip_rate = H.drops(after, "ip_rate") - H.drops(before, "ip_rate")
    server_rate = H.drops(after, "server_rate") - H.drops(before, "server_rate")
    cache = (H.counter(after, "etrelay_query_cache_answers_total")
             - H.counter(before, "etrelay_query_cache_answers_total"))
    gs_queries = len(gs.packets(lambda p: p.data.startswith(H.cmd("getstatus"))))
    bound = BURST + int(PER_SEC * t_send) + TOLERANCE
    ctx.note(f"forged {raw.sent} getstatus ({raw.sent_bytes} B of UDP payload) from "
             f"{vaddr[0]}, {PORTS} ports, in {t_send:.2f} s ({raw.errors} send errors)")
    ctx.note(f"victim received {len(got)} datagrams, {got_bytes} B "
             f"(bound {bound}: burst {BURST} + {PER_SEC}/s x {int(t_send)} s + {TOLERANCE}); "
             f"amplification {got_bytes / max(1, raw.sent_bytes):.3f} by bytes")
    ctx.note(f"relay: dropped ip_rate {ip_rate}, server_rate {server_rate}, "
             f"answered from cache {cache}; game server saw {gs_queries} getstatus")

    H.check(raw.errors == 0 and raw.sent == int(RATE * DURATION),
            f"the raw socket sent {raw.sent} of {int(RATE * DURATION)} ({raw.errors} errors)")
    H.check(not wrong_src, f"datagrams to the victim from elsewhere than the relay: {wrong_src[:3]}")
    H.check(len(got) <= bound,
            f"the victim received {len(got)} replies, more than burst {BURST} + {PER_SEC}/s over "
            f"{t_send:.1f} s + {TOLERANCE} = {bound}")
    H.check(len(got) >= MIN_REPLIES,
            f"the victim received only {len(got)} replies: the relay should answer some "
            f"of the queries its bucket admits ({BURST} + {PER_SEC}/s)")
    H.check(all(p[3].startswith(H.cmd("statusResponse")) for p in got),
            f"something other than statusResponse reached the victim: "
            f"{[p[3] for p in got if not p[3].startswith(H.cmd('statusResponse'))][:3]}")
    H.check(got_bytes < raw.sent_bytes,
            f"the victim received {got_bytes} B, not fewer than the {raw.sent_bytes} B "
            f"sent in its name")
    H.check(ip_rate >= raw.sent - bound,
            f"dropped{{reason=\"ip_rate\"}} grew by {ip_rate}, expected at least "
            f"{raw.sent} - {bound}")
    H.check(gs_queries <= len(got),
            f"the game server saw {gs_queries} getstatus for {len(got)} replies")


if __name__ == "__main__":
    H.main(test)
