#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The game-server query budget with its defaults, against the real
OpenArena server (ioquake3: one bucket of 10 then 1 a second for the
relay's address, shared by getinfo, getstatus, getchallenge and rcon).

    python3 test_query_budget.py <etrelay-binary> <io_uring|epoll>

Parts, each with a fresh OpenArena and an etrelay with no limit options
(--game q3; only --heartbeat-interval 60s so that no second round falls
inside the part):

  fresh_relay: two strict masters, each answering a heartbeat with
    "getchallenge" first and "getinfo <challenge>" only after the
    challengeResponse came back (as etmaster.net does), list the relay;
    quakestat (-R -P: getinfo and getstatus) run four times in a row right
    after 'server up', then a browser's getstatus, all answered, with no
    retry at all (-retry 1 in qstat's terms: one send).
  players_join: while 40 browsers on addresses of their own ask getinfo and
    getstatus over 3 s, 4 players on addresses of their own join at once
    (getchallenge, then a Huffman-coded connect with the challenge): every
    player gets its challengeResponse and connectResponse at the first
    send, every browser its two answers.

Both then stop etrelay and read its exit line: no datagram dropped for the
game server's budget (server_rate) or the cache's (cache_rate).

Skipped (77) when /usr/games/openarena-server or quakestat is missing.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import q3huff  # noqa: E402
from oa import OA_SERVER, OpenArena, find_qstat  # noqa: E402

TEST_BUDGET = 55
GAMENAME = "Quake3Arena"   # OpenArena's com_gamename


class StrictMaster(H.Master):
    """A master that asks getChallenge before getinfo: on a heartbeat it
    sends "getchallenge <n> Quake3Arena" and only when the challengeResponse
    comes back from the heartbeat's source, "getinfo <challenge>"; it lists
    the address when that infoResponse comes back within `window` seconds
    of the heartbeat."""

    def handle(self, data, addr, now):
        word, rest = H.split_command(data)
        if word == "heartbeat" and rest.strip() not in self.flatline_tags:
            n = str(int(now * 1000) % 1000000 + 1)
            with self.lock:
                self.heartbeats.append((now, rest.strip(), addr))
                self.pending["getchallenge " + n] = (addr, now + self.window)
            self.send(H.cmd(f"getchallenge {n} {GAMENAME}"), addr)
            return
        if word == "challengeResponse":
            args = rest.split()
            key = "getchallenge " + (args[1] if len(args) > 1 else "")
            with self.lock:
                ent = self.pending.pop(key, None)
                if ent is None or ent[0] != addr or now > ent[1]:
                    self.rejected.append((now, f"unexpected challengeResponse {rest!r}", addr))
                    return
                ch = H.rand_token(12)
                self.pending[ch] = ent
                self.challenges.append((now, ch, addr, None))
            self.send(H.cmd(f"getinfo {ch}"), addr)
            return
        super().handle(data, addr, now)


def exit_drops(relay):
    """Stop etrelay; {reason: count} from its exit stats line."""
    relay.signal(signal.SIGTERM)
    relay.wait_exit(5.0)
    relay._join_readers()
    lines = [l for l in relay.text_lines() if l.startswith("stats ")]
    H.check(lines, "no stats line at exit")
    m = re.search(r"dropped (\d+)(?: \(([^)]*)\))?", lines[-1])
    H.check(m, f"no 'dropped' in the stats line: {lines[-1]}")
    out = {}
    for part in (m.group(2) or "").split(", "):
        if part:
            k, v = part.rsplit(" ", 1)
            out[k] = int(v)
    H.log(lines[-1])
    return out


def start(ctx, oa, masters):
    args = ["--game", "q3", "--upstream", f"127.0.0.1:{oa.port}", "--heartbeat-interval", "60s"]
    for m in masters:
        args += ["--master", f"127.0.0.1:{m.port}"]
    relay = ctx.relay(*args, open_limits=False)
    relay.wait_for_line(r"^server up: ", timeout=10, what="OpenArena answered the probe")
    return relay


def with_openarena(fn):
    def part(ctx):
        if not (os.path.isfile(OA_SERVER) and os.access(OA_SERVER, os.X_OK)):
            raise H.TestSkip(f"{OA_SERVER} is not installed (Debian package openarena-server)")
        oa = OpenArena(H.free_udp_port(), "etrelay-budget-" + H.rand_token(6))
        ctx.objs.append(oa)
        ok = False
        try:
            oa.wait_ready()
            fn(ctx, oa)
            ok = True
        finally:
            if not ok:
                oa.dump()
            oa.close()
            oa.remove_tmp()
    part.__name__ = fn.__name__
    return part


@with_openarena
def fresh_relay(ctx, oa):
    qstat = find_qstat()
    if not qstat:
        raise H.TestSkip("quakestat is not installed (Debian package qstat)")
    masters = [StrictMaster(), StrictMaster()]
    ctx.objs.extend(masters)
    relay = start(ctx, oa, masters)
    # an operator's check right after start, while the masters challenge
    for i in range(4):
        r = subprocess.run([qstat, "-R", "-P", "-raw", ",", "-retry", "1", "-timeout", "2",
                            "-q3s", f"{relay.addr[0]}:{relay.addr[1]}"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
        first = r.stdout.strip().splitlines()[0] if r.stdout.strip() else ""
        H.log(f"quakestat run {i + 1}: {first}")
        H.check(r.returncode == 0 and first.split(",")[3:4] == ["oasago2"],
                f"quakestat run {i + 1} right after start got no answer: {H.short(r.stdout)}")
    for m in masters:
        H.wait_until(lambda: relay.addr in m.listed_set(), timeout=3,
                     what=f"strict master {m.port} to list the relay (rejected: {m.rejected})")
    c = ctx.client(relay, timeout=1.0)
    st = c.request(H.cmd("getstatus"), what="statusResponse to a browser after the masters")
    H.check(st.startswith(H.cmd("statusResponse")), f"browser's getstatus: {H.short(st)}")
    drops = exit_drops(relay)
    H.expect_eq(drops.get("server_rate", 0), 0, "datagrams dropped as server_rate")
    H.expect_eq(drops.get("cache_rate", 0), 0, "datagrams dropped as cache_rate")
    ctx.note(f"fresh_relay: 2 strict masters listed, 4 quakestat runs and a browser answered")


class Player(threading.Thread):
    def __init__(self, relay, host, name, start_at):
        super().__init__(daemon=True)
        self.relay, self.name, self.start_at = relay, name, start_at
        self.sock = H.udp_socket(host, 0, timeout=2.0)
        self.result = "not run"

    def _ask(self, pkt, want):
        self.sock.sendto(pkt, self.relay.addr)
        end = time.monotonic() + 2.0
        for _ in range(100):   # OpenArena may send other packets first
            left = end - time.monotonic()
            if left <= 0:
                break
            self.sock.settimeout(left)
            try:
                data, _ = self.sock.recvfrom(H.MAX_DGRAM)
            except OSError:
                break
            word, rest = H.split_command(data)
            if word == want:
                return rest
        return None

    def run(self):
        time.sleep(max(0.0, self.start_at - time.monotonic()))
        n = 4000 + int(self.name[1:])
        rest = self._ask(H.cmd(f"getchallenge {n} {GAMENAME}"), "challengeResponse")
        if rest is None:
            self.result = "no challengeResponse"
            return
        challenge = rest.split()[0]
        info = (f"\\challenge\\{challenge}\\qport\\{1000 + n % 1000}\\protocol\\71"
                f"\\name\\{self.name}\\rate\\25000\\snaps\\20"
                f"\\cl_guid\\{os.urandom(16).hex().upper()}")
        rest = self._ask(q3huff.connect_packet(info), "connectResponse")
        self.result = "joined" if rest is not None else "no connectResponse"


@with_openarena
def players_join(ctx, oa):
    relay = start(ctx, oa, [ctx.master()])
    warm = ctx.client(relay, timeout=1.0)
    for q in ("getinfo", "getstatus"):   # what a browser's first look leaves in the cache
        warm.request(H.cmd(q), what=f"answer to the first {q}")
    browsers = [H.udp_socket(H.spread_ip(i), 0) for i in range(40)]
    t0 = time.monotonic()
    players = [Player(relay, f"127.0.4.{i + 1}", f"p{i + 1}", t0 + 1.0) for i in range(4)]
    for p in players:
        p.start()
    sent = 0
    for i, s in enumerate(browsers):   # 40 browsers, 2 queries each, over 3 s
        time.sleep(max(0.0, t0 + i * 0.075 - time.monotonic()))
        for q in ("getinfo", "getstatus"):
            s.sendto(H.cmd(f"{q} b{i}"), relay.addr)
            sent += 1
    for p in players:
        p.join(timeout=6)
    answered = 0
    for s in browsers:
        answered += len(H.drain_socket(s, quiet=0.2, max_seconds=1.0, max_packets=10))
    results = {p.name: p.result for p in players}
    ctx.note(f"players_join: {results}; browsers {answered}/{sent} answered")
    drops = exit_drops(relay)
    H.check(all(r == "joined" for r in results.values()),
            f"players did not all join at the first send: {results}")
    H.expect_eq(answered, sent, "browser queries answered")
    H.expect_eq(drops.get("server_rate", 0), 0, "datagrams dropped as server_rate")


def test(ctx):
    H.run_parts(ctx, [fresh_relay, players_join])


def _over_budget(signum, frame):
    raise H.TestFailure(f"the test took longer than {TEST_BUDGET} s")


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, _over_budget)
    signal.alarm(TEST_BUDGET)
    H.main(test)
