#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Query sources: a command the game server reads its own way, or a master's
forged address, must not spend what the probe, the master and the players
need.

    python3 test_query_sources.py <etrelay-binary> <io_uring|epoll>

The real OpenArena server (ioquake3 1.36, started by oa.py) behind
etrelay with its default abuse limits (open_limits=False), --game q3,
--heartbeat-interval 3s --probe-timeout 1s (a round of 3 unanswered probes
declares the server down within 3 s), --debug. OpenArena allows one source
IP 10 queries at once, then 1 a second; behind the relay every query comes
from the relay's address.

Parts (one failing does not hide the others), each with its own OpenArena:
  variants       one host that does not spoof (127.0.5.1) sends 20 packets a
                 second for 10 s, in turn "\\xff\\xff\\xff\\xff getinfo",
                 "...getinfo\\x01", "... rcon status", '..."getinfo"' and
                 "...\\tgetstatus": commands OpenArena's tokenizer reads as
                 getinfo, rcon and getstatus. Meanwhile a player (127.0.5.2)
                 asks "getchallenge <n> Quake3Arena" every 2 s. Checked: no
                 "server down" (every probe round answered), every
                 getchallenge answered within 2 retransmits 1 s apart, the
                 host got at most the per-IP allowance of answers (10 + 1 a
                 second, one more for rounding), OpenArena's log shows at
                 most that many of its packets (all it logged from the
                 relay's address, less the player's getchallenges and the
                 relay's probes), and with --debug a refused
                 variant is logged "127.0.5.1:<port> -> Q3 ... refused:
                 ip_rate".
  forged_master  a raw socket forges getinfo, getstatus and getchallenge from
                 the master's address and port at 20 a second for 8 s, while
                 the (real) master stand-in challenges after each heartbeat
                 and a player asks getchallenge every 2 s. Checked: every
                 heartbeat during the flood was followed by the master's
                 challenge answered through the relay (the master lists it),
                 no "server down", every getchallenge answered, and the
                 forged getchallenges past the master's allowance refused
                 ({reason="master_rate"} in /metrics, "refused: master_rate"
                 in the debug log).
Printed: answers and drops by reason.

Skipped (77) when /usr/games/openarena-server is not installed; the
forged_master part needs a raw socket (root), else the test is a skip.
"""

import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from oa import OA_SERVER, OpenArena  # noqa: E402

TEST_BUDGET = 60
GAMENAME = "Quake3Arena"   # OpenArena's com_gamename
RATE = 20                  # attacker packets per second
ATTACK_SECONDS = 10.0
FORGE_SECONDS = 8.0
CHALLENGE_EVERY = 2.0      # s between a player's getchallenge rounds
RETRANSMIT = 1.0
MAX_SENDS = 3
IP_BURST, IP_RATE = 10, 1  # the relay's default per-IP query bucket
VARIANTS = [b" getinfo v", b"getinfo\x01", b" rcon status", b'"getinfo" q', b"\tgetstatus"]
OA_QUERIES = ("getinfo", "getstatus", "getchallenge", "rcon")
ATTACKER_IP = "127.0.5.1"
PLAYER_IP = "127.0.5.2"
PLAYER2_IP = "127.0.5.3"


def need_openarena():
    if not (os.path.isfile(OA_SERVER) and os.access(OA_SERVER, os.X_OK)):
        raise H.TestSkip(f"{OA_SERVER} is not installed (Debian package openarena-server)")


def start_oa(ctx, tag):
    oa = OpenArena(H.free_udp_port(), f"etrelay-{tag}-" + H.rand_token(6))
    ctx.objs.append(oa)
    oa.wait_ready()
    return oa


def start_relay(ctx, oa, master, ops_port, tok):
    relay = H.relay_env(ctx, {"ETRELAY_METRICS_TOKEN": tok},
                        "--game", "q3",
                        "--upstream", f"127.0.0.1:{oa.port}",
                        "--master", f"127.0.0.1:{master.port}",
                        "--heartbeat-interval", "3s", "--probe-timeout", "1s",
                        "--ops-listen", f"127.0.0.1:{ops_port}",
                        open_limits=False, debug=True)
    relay.wait_for_line(r"^server up: ", timeout=10, what="OpenArena answered the probe")
    return relay


class Player(threading.Thread):
    """getchallenge rounds from ip every CHALLENGE_EVERY s until stopped:
    rounds [(n, sends, answered)]."""

    def __init__(self, relay_addr, ip):
        super().__init__(daemon=True, name=f"player-{ip}")
        self.relay_addr = relay_addr
        self.sock = H.udp_socket(ip, 0)
        self.stop_ev = threading.Event()
        self.rounds = []

    def run(self):
        for k in range(100):   # bounded; stopped long before
            if self.stop_ev.is_set():
                break
            n, t0, sends, ok = 5000 + k, time.monotonic(), 0, False
            for _ in range(MAX_SENDS):
                self.sock.sendto(H.cmd(f"getchallenge {n} {GAMENAME}"), self.relay_addr)
                sends += 1
                end = time.monotonic() + RETRANSMIT
                for _ in range(100):
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self.sock.settimeout(left)
                    try:
                        data, src = self.sock.recvfrom(H.MAX_DGRAM)
                    except OSError:
                        continue
                    word, rest = H.split_command(data)
                    if (word == "challengeResponse" and len(rest.split()) >= 2
                            and rest.split()[1] == str(n)):
                        ok = True
                        break
                if ok:
                    break
            self.rounds.append((n, sends, ok))
            self.stop_ev.wait(max(0.0, t0 + CHALLENGE_EVERY - time.monotonic()))

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=MAX_SENDS * RETRANSMIT + 2)

    def check(self, what):
        bad = [r for r in self.rounds if not r[2]]
        H.check(len(self.rounds) >= 3, f"{what}: only {len(self.rounds)} getchallenge rounds")
        H.check(not bad, f"{what}: getchallenge not answered within {MAX_SENDS - 1} "
                         f"retransmits: rounds (n, sends) {[(r[0], r[1]) for r in bad]} of "
                         f"{len(self.rounds)}")


def no_server_down(relay, mark, what):
    down = relay.find_lines(r"^server down: ", mark)
    H.check(not down, f"{what}: the relay declared the game server down: "
                      f"{[m.group(0) for _, m in down][:2]}")


def variants(ctx):
    need_openarena()
    oa = start_oa(ctx, "variants")
    master = ctx.master(challenge=False)
    ops_port, tok = H.free_tcp_port(), os.urandom(24).hex()
    relay = start_relay(ctx, oa, master, ops_port, tok)
    mark = relay.mark()
    before = H.get_metrics(ops_port, tok)
    seen0 = {c: oa.packets_logged("127.0.0.1", c) for c in OA_QUERIES}

    atk = H.udp_socket(ATTACKER_IP, 0)
    atk.setblocking(False)
    player = Player(relay.addr, PLAYER_IP)
    player.start()
    sent = answers = 0
    words = {}
    t0 = time.monotonic()
    for i in range(int(ATTACK_SECONDS * RATE)):
        atk.sendto(H.PREFIX + VARIANTS[i % len(VARIANTS)], relay.addr)
        sent += 1
        delay = t0 + (i + 1) / RATE - time.monotonic()
        end = time.monotonic() + max(0.0, delay)
        for _ in range(1000):
            try:
                data = atk.recv(H.MAX_DGRAM)
            except (BlockingIOError, OSError):
                if time.monotonic() >= end:
                    break
                time.sleep(0.002)
                continue
            answers += 1
            w = H.split_command(data)[0]
            words[w] = words.get(w, 0) + 1
    elapsed = time.monotonic() - t0
    player.stop()
    for _, data, _ in H.drain_socket(atk, quiet=0.5, max_seconds=2):
        answers += 1
        w = H.split_command(data)[0]
        words[w] = words.get(w, 0) + 1
    after = H.get_metrics(ops_port, tok)
    d = {k: H.drops(after, k) - H.drops(before, k) for k in ("ip_rate", "server_rate")}
    allowance = IP_BURST + IP_RATE * elapsed + 1
    seen = {c: oa.packets_logged("127.0.0.1", c) - seen0[c] for c in OA_QUERIES}
    probes = (H.counter(after, "etrelay_probes_sent_total")
              - H.counter(before, "etrelay_probes_sent_total"))
    player_sends = sum(r[1] for r in player.rounds)
    reached = sum(seen.values()) - player_sends - probes
    ctx.note(f"variants: {sent} packets in {elapsed:.1f} s from {ATTACKER_IP}, {answers} "
             f"answers {words} (per-IP allowance {allowance:.0f}); dropped ip_rate "
             f"{d['ip_rate']}, server_rate {d['server_rate']}; player rounds "
             f"{[(r[1], r[2]) for r in player.rounds]}; OpenArena saw from the relay {seen}, "
             f"{probes} of them probes: {reached} of the host's packets reached it")
    H.check(reached <= allowance, f"variants: {reached} of {ATTACKER_IP}'s packets reached "
                                  f"OpenArena in {elapsed:.1f} s; its per-IP allowance is "
                                  f"{allowance:.0f}")
    no_server_down(relay, mark, "variants")
    player.check("variants")
    H.check(answers <= allowance, f"variants: {ATTACKER_IP} got {answers} answers for {sent} "
                                  f"packets in {elapsed:.1f} s; its per-IP allowance is "
                                  f"{allowance:.0f}")
    H.check(relay.count(r"^127\.0\.5\.1:\d+ -> Q3 .*\(\d+ B\) refused: ip_rate$", mark) >= 1,
            "variants: no debug line '127.0.5.1:<port> -> Q3 ... refused: ip_rate'")
    H.check(oa.alive(), f"openarena-server died (status {oa.proc.returncode})")


def forged_master(ctx):
    need_openarena()
    raw = H.RawUdp()
    ctx.objs.append(raw)
    oa = start_oa(ctx, "master")
    master = ctx.master()
    ops_port, tok = H.free_tcp_port(), os.urandom(24).hex()
    relay = start_relay(ctx, oa, master, ops_port, tok)
    H.wait_until(lambda: relay.addr in master.listed_set(), timeout=5,
                 what="the master to list the relay before the flood")
    mark = relay.mark()
    before = H.get_metrics(ops_port, tok)

    player = Player(relay.addr, PLAYER2_IP)
    player.start()
    forged = [b"getinfo forged", b"getstatus", f"getchallenge 7 {GAMENAME}".encode()]
    t0 = time.monotonic()
    hb0 = len(master.heartbeat_list())
    for i in range(int(FORGE_SECONDS * RATE)):
        raw.send(master.addr, relay.addr, H.PREFIX + forged[i % len(forged)])
        delay = t0 + (i + 1) / RATE - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    t1 = time.monotonic()
    player.stop()
    time.sleep(master.window + 0.3)   # answers to the last challenges
    after = H.get_metrics(ops_port, tok)
    with master.lock:
        chals = [c for c in master.challenges if t0 <= c[0] <= t1]
        unanswered = [c for c in chals if c[1] in master.pending]
    hbs = len(master.heartbeat_list()) - hb0
    d = {k: H.drops(after, k) - H.drops(before, k)
         for k in ("master_rate", "ip_rate", "server_rate")}
    cache = (H.counter(after, "etrelay_query_cache_answers_total")
             - H.counter(before, "etrelay_query_cache_answers_total"))
    ctx.note(f"forged_master: {raw.sent} forged packets from {master.addr} in {t1 - t0:.1f} s; "
             f"{hbs} heartbeats, {len(chals)} challenges, {len(unanswered)} unanswered; "
             f"dropped {d}; cache answers {cache}; player rounds "
             f"{[(r[1], r[2]) for r in player.rounds]}")
    H.check(raw.sent >= FORGE_SECONDS * RATE * 0.9, f"only {raw.sent} forged packets sent")
    no_server_down(relay, mark, "forged_master")
    H.check(len(chals) >= 2, f"forged_master: only {len(chals)} master challenges during the "
                             f"flood ({hbs} heartbeats, every 3 s while the server is up)")
    H.check(not unanswered, f"forged_master: master challenges not answered through the relay: "
                            f"{[(round(c[0] - t0, 1), c[1]) for c in unanswered]}")
    player.check("forged_master")
    H.check(d["master_rate"] >= 1, "forged_master: no forged getchallenge refused as master_rate")
    H.check(relay.count(r"^127\.0\.0\.1:%d -> Q3 +getchallenge \(\d+ B\) refused: master_rate$"
                        % master.port, mark) >= 1,
            "forged_master: no debug line '... getchallenge (N B) refused: master_rate'")
    H.check(oa.alive(), f"openarena-server died (status {oa.proc.returncode})")


def test(ctx):
    need_openarena()
    H.run_parts(ctx, [variants, forged_master])


def _over_budget(signum, frame):
    raise H.TestFailure(f"the test took longer than {TEST_BUDGET} s")


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, _over_budget)
    signal.alarm(TEST_BUDGET)
    H.main(test)
