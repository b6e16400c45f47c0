#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Starvation: a getstatus storm must not cost the server its master
listing nor keep players out.

    python3 test_starvation.py <etrelay-binary> <io_uring|epoll>

The real OpenArena server (started by oa.py) behind etrelay with its
default abuse limits (--ip-query-burst 10 --ip-query-rate 1
--server-query-burst 8 --server-query-rate 1 --query-cache 1s), a Master
stand-in, --heartbeat-interval 6s so that the relay probes and heartbeats
during the storm. (Not 2 s: the probe and the master's challenge are
queries too, and the game server allows the relay's address 1 a second in
all; every 2 s they would take all of it with the player's, as they would
from a game server heartbeating that often by itself. Real rounds are 300 s
apart.)

Storm: 50 sources, each a UDP socket on an address of its own
(127.0.2.1-50), send getstatus at 50/s each (2500/s in all) for the whole
measurement: 1 s before the player starts, during its 8 rounds (about 16
s) and until at least 10 s and one more heartbeat have passed (three or
more heartbeats in all).

Meanwhile, checked:
  1. the master keeps listing the server through the relay: every
     heartbeat during the storm is followed by the master's getinfo
     challenge, answered by OpenArena through the relay (infoResponse with
     that challenge, from the relay's public address) within the master's
     2 s window; none rejected;
  2. a player on 127.0.3.1 asks "getchallenge <n> Quake3Arena" 8 times,
     a round at most every 2 s (with the master's challenge and the
     probe, what the game server's 1 query a second for the relay's
     address can carry); each round gets a
     challengeResponse echoing <n> with at most 2 retransmits 1 s apart
     (3 sends), 8 times out of 8.
Printed: answered from cache, dropped ip_rate and server_rate (/metrics),
the storm's replies, the player's attempts.

Skipped (77) when /usr/games/openarena-server is not installed.
"""

import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from oa import OA_SERVER, OpenArena  # noqa: E402

TEST_BUDGET = 45
STORM_SOURCES = 50
STORM_RATE = 50          # getstatus per second per source
PLAYER_IP = "127.0.3.1"
CHALLENGES = 8
CHALLENGE_EVERY = 2.0    # s at least between the starts of two getchallenge rounds
RETRANSMIT = 1.0         # s
MAX_SENDS = 3            # first send + 2 retransmits
PLAYER_BUDGET = 21.0     # s for the 8 rounds (16 s when each is answered at once)
GAMENAME = "Quake3Arena"  # OpenArena's com_gamename: any other is "Game mismatch"


class Storm(threading.Thread):
    def __init__(self, relay_addr):
        super().__init__(daemon=True, name="storm")
        self.relay_addr = relay_addr
        self.socks = [H.udp_socket(f"127.0.2.{i + 1}", 0, rcvbuf=1 << 20)
                      for i in range(STORM_SOURCES)]
        for s in self.socks:
            s.setblocking(False)
        self.stop_ev = threading.Event()
        self.sent = 0
        self.replies = 0
        self.reply_bytes = 0
        self.t0 = self.t1 = None

    def _drain(self):
        for s in self.socks:
            for _ in range(100):
                try:
                    data = s.recv(H.MAX_DGRAM)
                except (BlockingIOError, OSError):
                    break
                self.replies += 1
                self.reply_bytes += len(data)

    def run(self):
        q = H.cmd("getstatus")
        period = 1.0 / STORM_RATE
        self.t0 = time.monotonic()
        for i in range(int(60 * STORM_RATE)):   # bounded: 60 s at most
            if self.stop_ev.is_set():
                break
            for s in self.socks:
                try:
                    s.sendto(q, self.relay_addr)
                    self.sent += 1
                except OSError:
                    pass
            self._drain()
            delay = self.t0 + (i + 1) * period - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.t1 = time.monotonic()
        time.sleep(0.3)
        self._drain()

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=5)


def player_rounds(relay):
    """CHALLENGES getchallenge rounds from PLAYER_IP; [(n, sends, answered, seconds)]."""
    s = H.udp_socket(PLAYER_IP, 0)
    out = []
    t_start = time.monotonic()
    for k in range(CHALLENGES):
        n = 1000 + k
        if time.monotonic() - t_start > PLAYER_BUDGET:
            out.append((n, 0, False, 0.0))   # not asked: out of time
            continue
        sends, ok = 0, False
        t0 = time.monotonic()
        for attempt in range(MAX_SENDS):
            s.sendto(H.cmd(f"getchallenge {n} {GAMENAME}"), relay.addr)
            sends += 1
            end = time.monotonic() + RETRANSMIT
            for _ in range(200):
                left = end - time.monotonic()
                if left <= 0:
                    break
                s.settimeout(left)
                try:
                    data, src = s.recvfrom(H.MAX_DGRAM)
                except OSError:
                    continue
                word, rest = H.split_command(data)
                if (tuple(src) == relay.addr and word == "challengeResponse"
                        and len(rest.split()) >= 2 and rest.split()[1] == str(n)):
                    ok = True
                    break
            if ok:
                break
        out.append((n, sends, ok, time.monotonic() - t0))
        H.log(f"getchallenge {n}: {'answered' if ok else 'NOT answered'} after {sends} send(s), "
              f"{time.monotonic() - t0:.2f} s")
        delay = t0 + CHALLENGE_EVERY - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    return out


def test(ctx):
    if not (os.path.isfile(OA_SERVER) and os.access(OA_SERVER, os.X_OK)):
        raise H.TestSkip(f"{OA_SERVER} is not installed (Debian package openarena-server)")
    oa = OpenArena(H.free_udp_port(), "etrelay-storm-" + H.rand_token(6))
    ctx.objs.append(oa)
    ok = False
    try:
        oa.wait_ready()
        master = ctx.master()
        ops_port = H.free_tcp_port()
        tok = os.urandom(24).hex()
        relay = H.relay_env(ctx, {"ETRELAY_METRICS_TOKEN": tok},
                            "--game", "q3",
                            "--upstream", f"127.0.0.1:{oa.port}",
                            "--master", f"127.0.0.1:{master.port}",
                            "--heartbeat-interval", "6s",
                            "--ops-listen", f"127.0.0.1:{ops_port}",
                            open_limits=False)
        relay.wait_for_line(r"^server up: ", timeout=10, what="OpenArena answered the probe")
        H.wait_until(lambda: relay.addr in master.listed_set(), timeout=6,
                     what="the master to list the relay before the storm")
        before = H.get_metrics(ops_port, tok)

        storm = Storm(relay.addr)
        storm.start()
        time.sleep(1.0)   # the storm has spent the browsers' share by now
        t_storm = time.monotonic()
        rounds = player_rounds(relay)
        # keep storming until at least 10 s of storm and one more heartbeat
        hb_mark = len(master.heartbeat_list())
        H.wait_until(lambda: len(master.heartbeat_list()) >= hb_mark + 1
                     and time.monotonic() - storm.t0 >= 10, timeout=12,
                     what="one more heartbeat during the storm")
        t_end = time.monotonic()
        time.sleep(master.window + 0.5)   # answers to the last challenges
        storm.stop()
        after = H.get_metrics(ops_port, tok)

        d = {k: H.drops(after, k) - H.drops(before, k) for k in ("ip_rate", "server_rate")}
        probes = (H.counter(after, "etrelay_probes_sent_total")
                  - H.counter(before, "etrelay_probes_sent_total"))
        cache = (H.counter(after, "etrelay_query_cache_answers_total")
                 - H.counter(before, "etrelay_query_cache_answers_total"))
        with master.lock:
            chals = [c for c in master.challenges if t_storm - 1.0 <= c[0] <= t_end]
            unanswered = [c for c in chals if c[1] in master.pending]
            listings = [l for l in master.listings if t_storm - 1.0 <= l[0] <= t_end + master.window]
            rejected = list(master.rejected)
        answered = sum(1 for r in rounds if r[2])
        sends = [r[1] for r in rounds]
        ctx.note(f"storm: {STORM_SOURCES} sources sent {storm.sent} getstatus in "
                 f"{storm.t1 - storm.t0:.1f} s ({storm.sent / (storm.t1 - storm.t0):.0f}/s); "
                 f"they got {storm.replies} replies ({storm.reply_bytes} B)")
        ctx.note(f"relay: answered from cache {cache}, dropped ip_rate {d['ip_rate']}, "
                 f"dropped server_rate {d['server_rate']}")
        ctx.note(f"master: {len(chals)} challenges during the storm, {len(unanswered)} "
                 f"unanswered, {len(listings)} listings, {len(rejected)} rejected")
        ctx.note(f"player: {answered}/{CHALLENGES} getchallenge answered; sends per round {sends}")
        ctx.note(f"OpenArena saw from the relay (127.0.0.1): "
                 f"{oa.packets_logged('127.0.0.1', 'getchallenge')} getchallenge, "
                 f"{oa.packets_logged('127.0.0.1', 'getstatus')} getstatus, "
                 f"{oa.packets_logged('127.0.0.1', 'getinfo')} getinfo (probes + master); "
                 f"relay probes sent during the storm {probes}")

        H.check(storm.sent >= STORM_SOURCES * STORM_RATE * 9,
                f"the storm sent only {storm.sent} getstatus (expected about "
                f"{STORM_SOURCES * STORM_RATE}/s for 10 s or more)")
        H.check(d["ip_rate"] >= storm.sent * 0.8,
                f"dropped ip_rate grew by {d['ip_rate']} for {storm.sent} storm queries")
        H.check(len(chals) >= 3, f"only {len(chals)} master challenges during the storm "
                                 f"(heartbeat every 6 s)")
        H.check(not unanswered, f"master challenges not answered through the relay during the "
                                f"storm: {[(round(c[0] - t_storm, 1), c[1]) for c in unanswered]}")
        H.check(not rejected, f"the master rejected packets: {rejected[:5]}")
        H.check(len(listings) >= len(chals),
                f"{len(listings)} listings for {len(chals)} challenges during the storm")
        H.check(answered == CHALLENGES,
                f"only {answered} of {CHALLENGES} getchallenge got a challengeResponse within "
                f"{MAX_SENDS - 1} retransmits; rounds (n, sends, answered, s): "
                f"{[(r[0], r[1], r[2], round(r[3], 2)) for r in rounds if not r[2]]}")
        H.check(oa.alive(), f"openarena-server died (status {oa.proc.returncode})")
        ok = True
    finally:
        if not ok:
            oa.dump()
        oa.close()
        oa.remove_tmp()


def _over_budget(signum, frame):
    raise H.TestFailure(f"the test took longer than {TEST_BUDGET} s")


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, _over_budget)
    signal.alarm(TEST_BUDGET)
    H.main(test)
