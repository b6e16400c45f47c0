#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Opening sessions: a flood of forged in-game packets must not evict a player
between its getchallenge and its connect; a session socket that cannot be
created makes room instead of dropping the newcomer.

    python3 test_session_opening.py <etrelay-binary> <io_uring|epoll>

Parts (one failing does not hide the others):
  ingame_flood  the real OpenArena server (ioquake3 1.36: it ties a challenge
                to the client's IP and port) behind etrelay --game q3
                --max-sessions 64, other abuse limits at their defaults. A raw
                socket sends tiny in-game packets (8 bytes, no 0xffffffff
                prefix) from forged sources, each a new address of
                127.20.0.0/14, 2000 a second, for 2 s before the player and
                all through its join. The player (127.0.6.1, a real socket)
                sends "getchallenge <n> Quake3Arena", gets its
                challengeResponse, waits 2 s (the old relay turned its 64
                sessions over every 32 ms) and sends a real connect packet
                (Huffman-coded userinfo with that challenge, protocol 71 and
                a cl_guid, which OpenArena requires).
                Checked: OpenArena answers connectResponse (not "No or bad
                challenge for your address"), sessions were evicted while the
                player waited (the table really was full), and OpenArena saw
                the connect from the port its getchallenge came from.
  socket_evict  a game-server stand-in, --session-ports P-P+1
                --max-sessions 2, and P+1 held by the test's own socket, so
                the relay can create one session socket only. A client's
                getinfo opens a session (unassured); a second client's getinfo
                finds no port: the first session is evicted
                ({reason="evicted"} +1), the second is served from port P, and
                nothing is dropped as "socket".
Printed: sessions evicted, drops by reason, the ports the game server saw.

The ingame_flood part needs openarena-server (else it is a skip of the test)
and a raw socket (root, else a skip).
"""

import os
import random
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import q3huff  # noqa: E402
from oa import OA_SERVER, OpenArena  # noqa: E402

TEST_BUDGET = 50
GAMENAME = "Quake3Arena"
MAX_SESSIONS = 64
FLOOD_RATE = 2000          # forged in-game packets per second
WARMUP = 2.0               # s of flood before the player starts
CONNECT_AFTER = 2.0        # s between challengeResponse and connect
PLAYER_IP = "127.0.6.1"
PLAYER_QPORT = 4711


class Flood(threading.Thread):
    """Tiny in-game packets from a new forged 127.20.0.0/14 source each."""

    def __init__(self, raw, dst):
        super().__init__(daemon=True, name="flood")
        self.raw, self.dst = raw, dst
        self.stop_ev = threading.Event()

    def run(self):
        rnd = random.Random(20)
        # sequence 1, qport 1 (never the player's), 2 bytes of nothing
        payload = b"\x01\x00\x00\x00\x01\x00\x00\x00"
        t0 = time.monotonic()
        for i in range(int(30 * FLOOD_RATE)):   # bounded: 30 s at most
            if self.stop_ev.is_set():
                break
            src = (f"127.{20 + (i >> 16 & 3)}.{i >> 8 & 255}.{i & 255 or 1}",
                   rnd.randrange(1024, 65536))
            self.raw.send(src, self.dst, payload)
            if i % 20 == 19:
                delay = t0 + (i + 1) / FLOOD_RATE - time.monotonic()
                if delay > 0:
                    time.sleep(delay)

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=5)


def request(sock, data, dst, accept, tries=3, wait=1.0):
    """Send data up to `tries` times, `wait` s apart, until a reply for which
    accept(word, rest) is true: (reply bytes or None, every reply seen)."""
    seen = []
    for _ in range(tries):
        sock.sendto(data, dst)
        end = time.monotonic() + wait
        for _ in range(100):
            left = end - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            try:
                reply, src = sock.recvfrom(H.MAX_DGRAM)
            except OSError:
                continue
            word, rest = H.split_command(reply)
            seen.append(reply)
            if word is not None and accept(word, rest):
                return reply, seen
    return None, seen


def ingame_flood(ctx):
    if not (os.path.isfile(OA_SERVER) and os.access(OA_SERVER, os.X_OK)):
        raise H.TestSkip(f"{OA_SERVER} is not installed (Debian package openarena-server)")
    raw = H.RawUdp()
    ctx.objs.append(raw)
    oa = OpenArena(H.free_udp_port(), "etrelay-join-" + H.rand_token(6))
    ctx.objs.append(oa)
    oa.wait_ready()
    master = ctx.master(challenge=False)
    ops_port, tok = H.free_tcp_port(), os.urandom(24).hex()
    relay = H.relay_env(ctx, {"ETRELAY_METRICS_TOKEN": tok},
                        "--game", "q3",
                        "--upstream", f"127.0.0.1:{oa.port}",
                        "--master", f"127.0.0.1:{master.port}",
                        "--max-sessions", str(MAX_SESSIONS),
                        "--ops-listen", f"127.0.0.1:{ops_port}",
                        open_limits=False)
    relay.wait_for_line(r"^server up: ", timeout=10, what="OpenArena answered the probe")

    flood = Flood(raw, relay.addr)
    flood.start()
    try:
        time.sleep(WARMUP)
        player = H.udp_socket(PLAYER_IP, 0)
        n = random.randrange(100000, 999999)
        reply, seen = request(player, H.cmd(f"getchallenge {n} {GAMENAME}"), relay.addr,
                              lambda w, r: w == "challengeResponse" and len(r.split()) >= 2
                              and r.split()[1] == str(n))
        H.check(reply, f"ingame_flood: no challengeResponse to the player's getchallenge "
                       f"during the flood (replies: {[H.short(x) for x in seen]})")
        challenge = H.split_command(reply)[1].split()[0]
        m0 = H.get_metrics(ops_port, tok)
        time.sleep(CONNECT_AFTER)
        m1 = H.get_metrics(ops_port, tok)
        connect = q3huff.connect_packet(f"\\challenge\\{challenge}\\qport\\{PLAYER_QPORT}"
                                        f"\\protocol\\71\\name\\joiner"
                                        f"\\cl_guid\\{os.urandom(16).hex().upper()}")
        reply, seen = request(player, connect, relay.addr,
                              lambda w, r: w in ("connectResponse", "print"))
    finally:
        flood.stop()
    after = H.get_metrics(ops_port, tok)
    evicted = H.closed(m1, "evicted") - H.closed(m0, "evicted")
    d = {k: H.drops(after, k) for k in ("session_rate", "ip_session_rate", "table_full")}
    ctx.note(f"ingame_flood: {raw.sent} forged in-game packets ({raw.errors} refused by the "
             f"kernel); sessions opened {H.counter(after, 'etrelay_sessions_opened_total')}, "
             f"evicted {H.closed(after, 'evicted')} ({evicted} while the player waited); "
             f"dropped {d}; the player's connect got {H.short(reply) if reply else None}")
    H.check(evicted > 0, f"ingame_flood: no session evicted in the {CONNECT_AFTER} s the player "
                         f"waited: the table was not full, the test proves nothing")
    H.check(reply and H.split_command(reply)[0] == "connectResponse",
            f"ingame_flood: the player's connect was not accepted: "
            f"{[H.short(x) for x in seen] or 'no answer'}")
    H.check(oa.alive(), f"openarena-server died (status {oa.proc.returncode})")


def port_pair():
    """(P, socket holding P+1 on 127.0.0.1) with P free a moment ago."""
    for _ in range(50):
        p = H.free_udp_port()
        if p < 1024 or p >= 65535:
            continue
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((H.LOOPBACK, p + 1))
        except OSError:
            s.close()
            continue
        return p, s
    H.fail("no two consecutive free UDP ports found")


def socket_evict(ctx):
    p, holder = port_pair()

    class _Closer:
        def close(self):
            holder.close()
    ctx.objs.append(_Closer())
    gs = ctx.game_server()
    ops_port, tok = H.free_tcp_port(), os.urandom(24).hex()
    relay = H.relay_env(ctx, {"ETRELAY_METRICS_TOKEN": tok},
                        "--upstream", f"127.0.0.1:{gs.port}", "--master", "127.0.0.1:9",
                        "--session-ports", f"{p}-{p + 1}", "--max-sessions", "2",
                        "--ops-listen", f"127.0.0.1:{ops_port}")
    # With several workers, a worker out of session ports makes room among
    # its own sessions only (etrelay(8), WORKERS): the second client is
    # one its reuseport program sends to the first one's worker.
    n, key = H.relay_workers(relay)
    second_ip = next(ip for ip in (f"127.0.7.{i}" for i in range(2, 200))
                     if H.reuseport_worker(key, ip, n) == H.reuseport_worker(key, "127.0.7.1", n))
    first = H.client_on(ctx, relay, "127.0.7.1")
    second = H.client_on(ctx, relay, second_ip)
    q1, q2 = H.cmd("getinfo first"), H.cmd("getinfo second")
    r = first.request(q1, what="infoResponse to the first client")
    H.check(r.startswith(H.cmd("infoResponse")), f"first client's answer: {H.short(r)}")
    before = H.get_metrics(ops_port, tok)
    r = second.request(q2, what="infoResponse to the second client (no port left for it)")
    H.check(r.startswith(H.cmd("infoResponse")), f"second client's answer: {H.short(r)}")
    after = H.get_metrics(ops_port, tok)
    evicted = H.closed(after, "evicted") - H.closed(before, "evicted")
    dropped = H.drops(after, "socket") - H.drops(before, "socket")
    ports = sorted(a[1] for a in gs.sources_for([q1]) | gs.sources_for([q2]))
    ctx.note(f"socket_evict: ports {p}-{p + 1}, {p + 1} taken; evicted {evicted}, dropped "
             f"socket {dropped}; the game server saw the two clients from {ports}")
    H.expect_eq(evicted, 1, "sessions evicted to make room for the second client")
    H.expect_eq(dropped, 0, "datagrams dropped for want of a session socket")
    H.expect_eq(ports, [p], "ports the game server saw the two clients from")


def test(ctx):
    H.run_parts(ctx, [socket_evict, ingame_flood])


def _over_budget(signum, frame):
    raise H.TestFailure(f"the test took longer than {TEST_BUDGET} s")


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, _over_budget)
    signal.alarm(TEST_BUDGET)
    H.main(test)
