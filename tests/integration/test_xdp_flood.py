#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The XDP front door under a flood (issue 26), with real peers. The relay
runs in a network namespace on its end of a veth pair; a real OpenArena
server (openarena-server, oa.py) behind it, three players and the flood
are on the other end (this namespace). The players join OpenArena through
the relay for real (getchallenge, a Huffman-coded connect, answered
connectResponse: their sessions are assured), then each sends 40 in-game
packets a second from an address of its own, in a sequence range of its
own; OpenArena (+set showpackets 1) logs the sequence of every packet its
netchan takes, which is how each player's lost packets are counted at the
game server; what OpenArena sends back (its stream to a connecting client)
is counted as each player's snapshots, with the p99 of the gaps between
them. The flood is getstatus queries (the reflection flood a game server
sees) in Ethernet frames from FLOOD_SOURCES spoofed addresses
(198.18.0.0/16, benchmarking: not bogons), round-robin over the sources,
for FLOOD_SECONDS (at most FLOOD_PER_SOURCE frames each), put on the veth
with an AF_PACKET socket by a child process as fast as it goes
(bench/flood.c's etrelay-flood, built with the tree; a Python loop where it
is not); the players play from just before it starts to just after it
ends.

The same run twice: the relay without XDP, then with --xdp-interface on
its veth end (native mode) and --xdp-rate 5 --xdp-burst 10: a player's 40
packets a second pass only as a known source, the flood's sources by their
buckets, the relay held (SIGSTOP) while the flood's fresh sources send
their first bursts. Measured both times: each player's packets that did not reach
OpenArena, its snapshots and their p99 gap, the relay's CPU seconds, its
drops by reason; with XDP, the program's counts. Asserted with XDP: the
program attached in native mode (the log and /lifecycle say so; without,
/lifecycle has no xdp), every flood source past its bucket was dropped
there (counted as rate or budget, at least what the bucket cannot have
passed), the
relay's receive queue dropped nothing while it was held (the budget for
sources not known: without it, on main's build, 2 403 dropped there), the
players lost nothing the program saw, every packet of theirs passed as known
(less the frames the program never judged), /metrics has
etrelay_xdp_lines_unwalked_total, and OpenArena still lists all three
(getstatus, asked directly) after the flood; a banned address's frames are dropped as banned, and after a SIGHUP
with another address in the ban file, the new one is dropped and the old
one passes. A kernel that refuses XDP is a skip with its reason, as is a
host without openarena-server (after the parts that need no game server).
On the old binary (no --xdp-interface) the XDP start fails: the test
fails."""

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import q3huff  # noqa: E402
from oa import OA_SERVER, PROBE_SRC, OpenArena  # noqa: E402

PLAYERS, PLAYER_PPS = 3, 40
# Under a checker (valgrind: H.SLOW) the relay is some 50 times slower:
# the 1 024 sources' buckets alone pass it 13 000 frames, which it cannot
# read before its queue fills (the players then lose packets with XDP
# too); 256 sources, 3 800, it can.
FLOOD_SOURCES = 1024 if H.SLOW == 1 else 256
FLOOD_PER_SOURCE, FLOOD_SECONDS = 100000, 1.0
# The players play this long before the flood starts and after it ends.
PLAY_MARGIN = 0.3
# With XDP the relay is held (SIGSTOP, as a loaded host's scheduler may
# hold it) from the flood's start until the flood's first FLOOD_SOURCES x
# XDP_BURST frames are out and HOLD seconds more: the fresh sources, each
# within its bucket, would pass all of those meanwhile, a page-sized
# buffer each, more than the relay's receive queue holds (the players'
# packets behind them dropped); the program's budget for sources it does
# not know passes at most 256 a CPU at once.
HOLD = 0.1
XDP_RATE, XDP_BURST = 5, 10
BANNED, BAN_FRAMES = "198.19.7.7", 8  # fewer than a bucket holds
# From a source of their own, fewer than its bucket holds: not the game
# relay's shape (a command no game server runs for a client, an in-game
# packet too short for a qport, a getinfo behind a comment never closed),
# and of its shape (a getinfo as the engines read it: quoted, after a
# comment).
SHAPELESS, SHAPELY = "198.19.9.9", "198.19.9.10"
NOT_SHAPE = [b"\xff\xff\xff\xffgetservers 68 full", b"\x01\x00\x00", b"\xff\xff\xff\xff /* getinfo"]
SHAPE = [b"\xff\xff\xff\xff /* x */ \"GETINFO\" xxx"]
GAMENAME = "Quake3Arena"  # OpenArena's com_gamename
# OpenArena as the players need it: every packet its netchan takes logged
# with its sequence ("server recv <size> : s=<seq>"), the players of every
# phase in (they all come from the relay's one address: ioq3 allows 3 per
# address by default; 16 clients fit com_hunkMegs 64), and a phase's
# players gone 10 s after their last packet.
OA_EXTRA = ("+set", "showpackets", "1", "+set", "sv_clientsPerIp", "16",
            "+set", "sv_maxclients", "16", "+set", "sv_timeout", "10")
OA_RECV = re.compile(r" recv +\d+ : s=(\d+)")

# Runs as a child (its own CPU, not this process's GIL): the frames, round
# robin over the sources, each source FLOOD_PER_SOURCE times; stops at the
# count or after max seconds; prints "sent N in S full F", as
# etrelay-flood does.
FLOODER = r"""
import socket, sys, time
sys.path.insert(0, sys.argv[1])
from harness_udp import ether_udp
ifname, dst_ip, dst_port = sys.argv[2], sys.argv[3], int(sys.argv[4])
src_mac, dst_mac = bytes.fromhex(sys.argv[5]), bytes.fromhex(sys.argv[6])
nsrc, per, limit = int(sys.argv[7]), int(sys.argv[8]), float(sys.argv[9])
frames = []
for i in range(nsrc):
    src = (f"198.18.{i // 250}.{i % 250 + 1}", 20000 + i % 10000)
    payload = b"\xff\xff\xff\xffgetstatus flood"
    frames.append(ether_udp(src, (dst_ip, dst_port), payload, src_mac, dst_mac))
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
sent, full, t0 = 0, 0, time.monotonic()
for r in range(per):
    for f in frames:
        try:
            s.send(f)
            sent += 1
        except OSError as e:  # ENOBUFS: the veth's queue is full; a moment
            if e.errno != 105:
                raise
            full += 1
            time.sleep(0.0002)
    if time.monotonic() - t0 > limit:
        break
print(f"sent {sent} in {time.monotonic() - t0:.2f} full {full}", flush=True)
"""


class Player:
    """A player on its own address that joins OpenArena through the relay
    (getchallenge, a Huffman-coded connect with its qport: answered
    connectResponse), then sends PLAYER_PPS in-game packets a second
    (sequence, qport: legacy protocol 71 has no checksum), its sequences
    from a range of its own (seq0 on) so that OpenArena's log tells the
    players apart, from a thread (ticks missed are skipped, never sent in a
    burst), and counts what OpenArena sends it (its snapshots)."""

    def __init__(self, ip, relay_addr, n, name):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((ip, 0))
        self.sock.settimeout(0.2)
        self.relay_addr = relay_addr
        self.qport = H.new_qport()
        self.seq0 = (n + 1) * 1000000
        self.sent = []  # sequences
        self.snaps = []  # arrival times of what OpenArena sent
        self.ip, self.name = ip, name
        self.stop = threading.Event()
        H._register(self)

    def _ask(self, pkt, want, deadline):
        """Send pkt every 0.5 s until an answer whose word is in want:
        (word, rest), or None at the deadline."""
        while time.monotonic() < deadline:
            self.sock.sendto(pkt, self.relay_addr)
            end = min(deadline, time.monotonic() + 0.5)
            while time.monotonic() < end:
                try:
                    data = self.sock.recv(H.MAX_DGRAM)
                except (socket.timeout, OSError):
                    break
                word, rest = H.split_command(data)
                if word in want:
                    return word, rest
        return None

    def join(self):
        """getchallenge, then connect, each resent within a bounded wait
        (OpenArena allows the relay's address a query a second past a
        burst of ten, and a phase's relay follows a flood's)."""
        deadline = time.monotonic() + 8 * H.SLOW
        n = random.randrange(100000, 999999)
        r = self._ask(H.cmd(f"getchallenge {n} {GAMENAME}"), ("challengeResponse",), deadline)
        H.check(r, f"player {self.name}: no challengeResponse through the relay")
        info = (f"\\challenge\\{r[1].split()[0]}\\qport\\{self.qport}\\protocol\\71"
                f"\\name\\{self.name}\\rate\\25000\\snaps\\20"
                f"\\cl_guid\\{os.urandom(16).hex().upper()}")
        r = self._ask(q3huff.connect_packet(info), ("connectResponse", "print"), deadline)
        H.check(r and r[0] == "connectResponse",
                f"player {self.name}: OpenArena did not take the connect: {r}")

    def run(self, done):
        """In-game packets until done is set (at most a minute's)."""
        period, t0 = 1.0 / PLAYER_PPS, time.monotonic()
        for k in range(60 * PLAYER_PPS):
            if done.is_set():
                break
            when = t0 + k * period
            now = time.monotonic()
            if when > now:
                time.sleep(when - now)
            elif now - when > period:
                continue  # a tick missed
            self.sock.sendto(H.game_packet(self.qport, b"", self.seq0 + k), self.relay_addr)
            self.sent.append(self.seq0 + k)

    def read(self):
        """What OpenArena sends, until stop (bounded by the socket's
        timeout)."""
        while not self.stop.is_set():
            try:
                self.sock.recv(H.MAX_DGRAM)
            except (socket.timeout, OSError):
                continue
            self.snaps.append(time.monotonic())

    def snap_gap_p99_ms(self):
        g = sorted(b - a for a, b in zip(self.snaps, self.snaps[1:]))
        return round(g[min(len(g) - 1, int(len(g) * 0.99))] * 1000, 1) if g else float("nan")

    def close(self):
        self.sock.close()


def ip(*args):
    r = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=10)
    if r.returncode:
        H.fail(f"ip {' '.join(args)}: {r.stderr.strip()}")


def cpu_busy(cpu=""):
    """Seconds CPU cpu (every CPU: "") spent busy, and in softirq, from
    /proc/stat: user, nice, system, irq, softirq (not idle, iowait, the
    hypervisor's steal, nor guest, which user counts already)."""
    hz = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:]]
                return (v[0] + v[1] + v[2] + v[5] + v[6]) / hz, v[6] / hz
    return 0.0, 0.0


def host_busy():
    return cpu_busy()


def kernel_drops(ns):
    """Datagrams the kernel dropped before the relay read them: at the
    CPUs' backlogs (/proc/net/softnet_stat, every CPU: the host's) and at
    full UDP receive queues in the relay's namespace (Udp RcvbufErrors)."""
    with open("/proc/net/softnet_stat") as f:
        backlog = sum(int(line.split()[1], 16) for line in f if line.strip())
    r = subprocess.run(ns.wrapper() + ["cat", "/proc/net/snmp"], capture_output=True, text=True,
                       timeout=10)
    udp = [line.split() for line in r.stdout.splitlines() if line.startswith("Udp:")]
    rcvbuf = int(udp[1][udp[0].index("RcvbufErrors")]) if len(udp) == 2 else 0
    return backlog, rcvbuf


def oa_players(oa):
    """The names OpenArena lists (getstatus, asked directly from the probe
    address, within a bounded wait); None when it did not answer."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        try:
            s.bind((PROBE_SRC, 0))
        except OSError:
            s.bind((H.LOOPBACK, 0))
        s.settimeout(0.5)
        for k in range(6):
            s.sendto(H.cmd(f"getstatus x{k}"), oa.addr)
            try:
                data = s.recv(H.MAX_DGRAM)
            except (socket.timeout, OSError):
                continue
            word, rest = H.split_command(data)
            if word == "statusResponse":
                return [m.group(1) for m in re.finditer(r'^-?\d+ -?\d+ "([^"]*)"', rest, re.M)]
        return None
    finally:
        s.close()


def oa_seqs(oa):
    """The sequences of every in-game packet OpenArena's netchan took."""
    return {int(m.group(1)) for m in (OA_RECV.search(ln) for ln in oa.log_lines()) if m}


def phase(ctx, w, xdp, tag, nft_rules=None, per_source=FLOOD_PER_SOURCE,
          flood_seconds=FLOOD_SECONDS, relay_cpu=None, flood_cpus=(None,),
          before_close=None, hold=0.0):
    """One run: a fresh relay (with XDP or not; nft_rules, a str.format
    template of {port}, loaded in its namespace after it started), the
    players joined, the flood, the counts. relay_cpu, flood_cpus,
    before_close (bench/compare-flood): the CPU the relay is pinned to, a
    flooder for each item of flood_cpus (pinned to those CPUs, or not:
    None), what to call with the namespace before the relay exits; hold,
    the seconds the relay stays stopped (from the flood's start) once the
    flood's first FLOOD_SOURCES x XDP_BURST frames are out."""
    ns, oa = w.ns, w.oa
    lport, ops_port = H.free_udp_port(), H.free_tcp_port()
    tok = os.urandom(24).hex()
    bans = os.path.join(w.tmp, "bans")
    with open(bans, "w") as f:
        f.write(f"{BANNED}\n")
    args = ["--listen", f"{ns.ns_ip}:{lport}", "--upstream", f"{ns.host_ip}:{oa.port}",
            "--master", f"{ns.host_ip}:{w.master.port}", "--ops-listen", f"{ns.ns_ip}:{ops_port}",
            "--ban-file", bans]
    if xdp:
        args += ["--xdp-interface", ns.ns_if, "--xdp-rate", str(XDP_RATE),
                 "--xdp-burst", str(XDP_BURST)]
    wrapper = ns.wrapper() + (["taskset", "-c", str(relay_cpu)] if relay_cpu is not None else [])
    relay = H.relay_env(ctx, {"ETRELAY_METRICS_TOKEN": tok, "ETRELAY_LIFECYCLE_READ_TOKEN": tok},
                        *args, listen=False, wrapper=wrapper, open_limits=False)
    if xdp:
        lines = relay.find_lines(r"^xdp: ")
        said = " / ".join(relay.text_lines()[i] for i, _ in lines)
        if relay.find_lines(r"^xdp: (loading|opening) the program: ") or \
                relay.find_lines(r"^xdp: attaching to "):
            raise H.TestSkip(f"the kernel refuses the XDP program: {said}")
        H.check(relay.find_lines(rf"^xdp: on {ns.ns_if} in native mode"),
                f"XDP attached in native mode on {ns.ns_if} (log: {said or 'nothing'})")
    relay.wait_for_line(r"^server up: ", timeout=10 * H.SLOW,
                        what="OpenArena answered the probe across the veth")
    life = H.http_request(ops_port, "GET", "/lifecycle", token=tok, host=ns.ns_ip)
    H.expect_eq(life.status, 200, "GET /lifecycle")
    H.expect_eq(json.loads(life.text).get("xdp"), {"mode": "native"} if xdp else None,
                "/lifecycle's xdp")
    if nft_rules:
        r = subprocess.run(ns.wrapper() + ["nft", "-f", "-"], capture_output=True, text=True,
                           timeout=10, input=nft_rules.format(port=lport))
        H.check(r.returncode == 0, f"nft -f: {r.stderr.strip()}")
    players = [Player(a, (ns.ns_ip, lport), i, f"{tag}{i}") for i, a in enumerate(w.players_ips)]
    for p in players:
        ctx.objs.append(p)
        p.join()
    m0 = H.get_metrics(ops_port, tok, host=ns.ns_ip)
    cpu0 = relay.cpu_seconds()
    done = threading.Event()
    threads = [threading.Thread(target=p.run, args=(done,), daemon=True) for p in players]
    readers = [threading.Thread(target=p.read, daemon=True) for p in players]
    t_play = time.monotonic()
    for t in threads + readers:
        t.start()
    time.sleep(PLAY_MARGIN)
    busy0, soft0 = host_busy()
    core0 = cpu_busy(relay_cpu) if relay_cpu is not None else None
    kids0 = os.times()
    kdrops0 = kernel_drops(ns)
    # bench/flood.c's sender (a C loop of sendmmsg, ten times the Python
    # one's rate here) where the build has it.
    c_flood = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ctx.binary))),
                           "bench", "etrelay-flood")
    flood_name = "etrelay-flood" if os.access(c_flood, os.X_OK) else "python"
    if flood_name == "etrelay-flood":
        cmd = [c_flood, ns.host_if, ns.host_mac.hex(), ns.ns_mac.hex(), ns.ns_ip, str(lport),
               str(FLOOD_SOURCES), str(per_source), str(flood_seconds)]
    else:
        cmd = [sys.executable, "-c", FLOODER, os.path.dirname(os.path.abspath(__file__)),
               ns.host_if, ns.ns_ip, str(lport), ns.host_mac.hex(), ns.ns_mac.hex(),
               str(FLOOD_SOURCES), str(per_source), str(flood_seconds)]
    if hold:
        os.kill(relay.proc.pid, signal.SIGSTOP)
        tx = f"/sys/class/net/{ns.host_if}/statistics/tx_packets"
        with open(tx) as f:
            tx0 = int(f.read())
    flooders = [subprocess.Popen((["taskset", "-c", c] if c else []) + cmd,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for c in flood_cpus]
    if hold:
        # Bounded: a flooder that never starts fails below.
        try:
            H.wait_until(lambda: int(open(tx).read()) - tx0 >= FLOOD_SOURCES * XDP_BURST,
                         5 * H.SLOW, "the fresh sources' first frames out", interval=0.005)
        finally:
            time.sleep(hold)
            os.kill(relay.proc.pid, signal.SIGCONT)
    outs = []
    for f in flooders:
        try:
            outs.append(f.communicate(timeout=flood_seconds + 30) + (f.returncode,))
        except subprocess.TimeoutExpired:
            f.kill()
            outs.append(f.communicate() + (f.returncode,))
    kids1 = os.times()
    kdrops1 = kernel_drops(ns)
    busy1, soft1 = host_busy()
    core1 = cpu_busy(relay_cpu) if relay_cpu is not None else None
    sent = seconds = full = 0
    for out, err, rc in outs:
        H.check(rc == 0, f"the flooder: {err.strip()[-500:]}")
        words = out.split()
        sent, seconds = sent + int(words[1]), max(seconds, float(words[3]))
        full += int(words[5])
    # A banned source's frames, after the flood: dropped as banned with XDP.
    for k in range(BAN_FRAMES):
        ns.send_frame(H.ether_udp((BANNED, 30000 + k), (ns.ns_ip, lport),
                                  H.game_packet(7, b"banned", k), ns.host_mac, ns.ns_mac))
    # The budget for sources not known, spent by the flood, refills (301
    # frames a second): the shapes' frames meet it with room, and the
    # program judges their shape (it checks the budget first).
    time.sleep(0.1)
    for k, payload in enumerate(NOT_SHAPE):
        ns.send_frame(H.ether_udp((SHAPELESS, 32000 + k), (ns.ns_ip, lport), payload,
                                  ns.host_mac, ns.ns_mac))
    for k, payload in enumerate(SHAPE):
        ns.send_frame(H.ether_udp((SHAPELY, 32000 + k), (ns.ns_ip, lport), payload,
                                  ns.host_mac, ns.ns_mac))
    time.sleep(PLAY_MARGIN)
    done.set()
    for t in threads:
        t.join(timeout=5)
    play = time.monotonic() - t_play
    cpu = relay.cpu_seconds() - cpu0
    # Asked at once: OpenArena drops a player 10 s after its last packet.
    listed = oa_players(oa)

    def arrived():
        got = oa_seqs(oa)
        return [len(got.intersection(p.sent)) for p in players]

    # Every player's last packets in flight: a bounded wait for all, then
    # count what is there.
    try:
        H.wait_until(lambda: arrived() == [len(p.sent) for p in players], 3 * H.SLOW,
                     "every player's packets in OpenArena's log", interval=0.1)
    except H.TestFailure:
        pass
    lost = [len(p.sent) - n for p, n in zip(players, arrived())]
    for p in players:
        p.stop.set()
    for t in readers:
        t.join(timeout=1)
    snaps = [len(p.snaps) for p in players]
    p99 = [p.snap_gap_p99_ms() for p in players]
    m1 = H.get_metrics(ops_port, tok, host=ns.ns_ip)

    def grew(name, **labels):
        return H.counter(m1, name, **labels) - H.counter(m0, name, **labels)

    relay_drops = grew("etrelay_dropped_datagrams_total")
    counts = {r: grew("etrelay_xdp_packets_total", listener="game", result=r)
              for r in ("passed", "known", "bogon", "banned", "shape", "rate", "budget")}
    counts["other listeners"] = grew("etrelay_xdp_packets_total") - sum(counts.values())
    counts["unwalked"] = grew("etrelay_xdp_lines_unwalked_total")
    unwalked_shown = H.metric_value(m1, "etrelay_xdp_lines_unwalked_total",
                                    listener="game") is not None
    ctx.note(f"{tag}: flood ({flood_name}) {sent} frames "
             f"from {FLOOD_SOURCES} sources in {seconds:.2f} s ({sent / max(seconds, 0.01):.0f}/s, "
             f"{full} refused ENOBUFS); players played {play:.2f} s, sent "
             f"{[len(p.sent) for p in players]}, lost at OpenArena {lost}, snapshots {snaps} "
             f"(p99 gap {p99} ms), listed by OpenArena after: {listed}; relay CPU {cpu:.2f} s, "
             f"its drops +{relay_drops}; the kernel's (backlog, socket queue) "
             f"+{[b - a for a, b in zip(kdrops0, kdrops1)]}; xdp {counts}")
    reload = reload_bans(ns, relay, bans, lport, ops_port, tok) if xdp else None
    if before_close:
        before_close(ns)
    relay.expect_exit = True
    relay.close()
    if nft_rules:
        subprocess.run(ns.wrapper() + ["nft", "delete", "table", "inet", "etrelay_flood"],
                       capture_output=True, timeout=10)
    return dict(host_busy=busy1 - busy0, softirq=soft1 - soft0,
                core=[b - a for a, b in zip(core0, core1)] if core0 else None,
                kernel_drops=[b - a for a, b in zip(kdrops0, kdrops1)],
                flooder_cpu=(kids1.children_user + kids1.children_system) -
                (kids0.children_user + kids0.children_system),
                sent=sent, seconds=seconds, play=play, lost=lost, snaps=snaps, p99=p99, cpu=cpu,
                relay_drops=relay_drops, xdp=counts, players=[len(p.sent) for p in players],
                names=[p.name for p in players], listed=listed, reload=reload,
                unwalked_shown=unwalked_shown)


def reload_bans(ns, relay, bans, lport, ops_port, tok):
    """SIGHUP with another address in the ban file: the program's banned
    map follows (the old address passes, the new one is dropped)."""
    new = "198.19.8.8"
    with open(bans, "w") as f:
        f.write(f"{new}/32\n")
    mark = relay.mark()
    relay.signal(signal.SIGHUP)
    relay.wait_for_line(r"^xdp: 1 banned prefixes", timeout=5, start=mark,
                        what="the banned map reloaded")
    m0 = H.get_metrics(ops_port, tok, host=ns.ns_ip)
    for k in range(BAN_FRAMES):
        for a in (BANNED, new):
            ns.send_frame(H.ether_udp((a, 31000 + k), (ns.ns_ip, lport),
                                      H.game_packet(9, b"reload", k), ns.host_mac, ns.ns_mac))

    def grown():
        m1 = H.get_metrics(ops_port, tok, host=ns.ns_ip)
        return {r: H.counter(m1, "etrelay_xdp_packets_total", result=r) -
                H.counter(m0, "etrelay_xdp_packets_total", result=r)
                for r in ("banned", "passed", "rate", "known")}

    # The old address's first packet opens a session the game server
    # answers: the rest pass as a known source's.
    H.wait_until(lambda: grown()["banned"] >= BAN_FRAMES and
                 grown()["passed"] + grown()["known"] >= BAN_FRAMES, 5,
                 f"the reloaded bans applied by the program ({grown()})", interval=0.1)
    g = grown()
    H.expect_eq(g["banned"], BAN_FRAMES, f"XDP drops as banned after SIGHUP (only {new})")
    return g


def derived_rates(ctx, ns):
    """Without xdp-rate and xdp-burst, -t says the bucket is the sum of the
    listeners' own per-source limits: a game relay's ip-query-rate and
    -burst (1, 10), each echo port's prbe-rate and -burst (10, 20); given,
    the values given. The old binary said 250 and 500 whatever the
    listeners took. A loopback interface is refused (attack14: every
    source there is a bogon to the program, the game went dark), by -t as
    by a start."""
    for extra in (["-t"], []):
        rc, out, err = H.run_etrelay(ctx, extra + [
            "--listen", f"127.0.0.1:{H.free_udp_port()}", "--upstream", "127.0.0.1:9",
            "--xdp-interface", "lo"], timeout=10)
        H.expect_eq(rc, 78, f"{' '.join(extra)} --xdp-interface lo ({err.strip()!r})")
        H.check("--xdp-interface lo: a loopback interface" in err,
                f"--xdp-interface lo refused, said why: {err.strip()!r}")
    iface = ns.host_if
    relay = ["--listen", f"127.0.0.1:{H.free_udp_port()}", "--upstream", "127.0.0.1:9",
             "--xdp-interface", iface]
    echo = ["--prbe-listen", f"127.0.0.1:{H.free_udp_port()}"]
    derived = " (from the listeners' per-source limits)"
    for args, want in ((relay, "1 packets/s per source, 10 at once" + derived),
                       (relay + echo, "11 packets/s per source, 30 at once" + derived),
                       (relay + ["--xdp-rate", "7"], "7 packets/s per source, 10 at once" + derived),
                       (relay + echo + ["--xdp-rate", "7", "--xdp-burst", "9"],
                        "7 packets/s per source, 9 at once")):
        rc, out, err = H.run_etrelay(ctx, ["-t"] + args, timeout=10)
        H.expect_eq(rc, 0, f"-t {' '.join(args)} ({err.strip()!r})")
        H.check(f"xdp-interface {iface}: {want}\n" in out,
                f"-t {' '.join(args[4:])}: 'xdp-interface {iface}: {want}' in {out.strip()!r}")


def turn_known(ctx, ns):
    """A TURN allocation over UDP makes its client known to the program:
    after it, 4 x XDP_BURST Binding requests at once from its address all
    pass as known under {listener="turn"}, none is dropped as rate (before
    it, the same burst would have been: the old program knew only game
    sessions). The challenge and the Allocate pass as turn's shape."""
    import turnutil as T
    port, ops_port = H.free_udp_port(), H.free_tcp_port()
    tok = os.urandom(24).hex()
    relay = H.relay_env(ctx, {**T.env(), "ETRELAY_METRICS_TOKEN": tok},
                        "--turn-listen", f"{ns.ns_ip}:{port}", *H.turn_ports(8),
                        "--ops-listen", f"{ns.ns_ip}:{ops_port}", "--xdp-interface", ns.ns_if,
                        "--xdp-rate", str(XDP_RATE), "--xdp-burst", str(XDP_BURST),
                        listen=False, open_limits=False, wrapper=ns.wrapper(),
                        ready_re=T.READY_RE)
    H.check(relay.find_lines(rf"^xdp: on {ns.ns_if} in native mode"), "XDP attached (TURN)")
    c = T.StunClient(port)
    c.s.close()
    c.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    c.s.bind((ns.host_ip, 0))
    c.s.settimeout(1.0)
    c.addr = (ns.ns_ip, port)
    realm, nonce = c.challenge()
    user, pw = T.rest_credentials(T.SECRET, "xdp")
    key = T.longterm_key(user, pw, realm.decode())
    _, (cls, _, _, a) = c.request(T.ALLOCATE, [T.u32(T.A_TRANSPORT, 17 << 24)] +
                                  T.signed(user, realm, nonce), key=key)
    H.expect_eq(cls, T.SUCCESS, f"Allocate through the XDP program: {a}")
    m0 = H.get_metrics(ops_port, tok, host=ns.ns_ip)
    n = 4 * XDP_BURST
    for _ in range(n):
        c.s.sendto(T.message(T.BINDING, os.urandom(12), []), c.addr)

    def grown(r):
        return (H.counter(H.get_metrics(ops_port, tok, host=ns.ns_ip),
                          "etrelay_xdp_packets_total", listener="turn", result=r) -
                H.counter(m0, "etrelay_xdp_packets_total", listener="turn", result=r))

    H.wait_until(lambda: grown("known") + grown("rate") + grown("passed") >= n, 5,
                 f"{n} Binding requests judged by the program", interval=0.05)
    H.expect_eq((grown("known"), grown("rate")), (n, 0),
                "an allocation's client: its Binding burst passed as known, none as rate")
    c.close()
    relay.expect_exit = True
    relay.close()


def network(ctx, rps_cpu=None):
    """The namespace and the players' addresses. rps_cpu
    (bench/compare-flood): the CPU whose softirq takes every frame the
    relay's end of the pair receives (RPS), as a NIC's queue whose
    interrupt lands on the relay's CPU."""
    ns = H.VethNetns(sysctls=(("net.ipv4.conf.all.rp_filter", 0),
                              ("net.ipv4.conf.{ns_if}.rp_filter", 0)))
    ctx.objs.append(ns)
    # Answers to the flood's addresses leave by the veth (and are lost).
    ip("-n", ns.name, "route", "add", "default", "via", ns.host_ip)
    if rps_cpu is not None:
        r = subprocess.run(ns.wrapper() + [
            "sh", "-c", f"echo {1 << rps_cpu:x} > /sys/class/net/{ns.ns_if}/queues/rx-0/rps_cpus"],
            capture_output=True, text=True, timeout=10)
        H.check(r.returncode == 0, f"rps_cpus on {ns.ns_if}: {r.stderr.strip()}")
    base = ns.host_ip.rsplit(".", 1)[0]
    players_ips = [f"{base}.{11 + i}" for i in range(PLAYERS)]
    for a in players_ips:
        ip("addr", "add", f"{a}/32", "dev", ns.host_if)
    return types.SimpleNamespace(ns=ns, players_ips=players_ips, tmp=ctx.tmpdir())


def game_server(ctx, w):
    """OpenArena (started, not waited for: it loads its map meanwhile) and
    the master's stand-in on this side of the pair, into w: what every
    phase shares (bench/compare-flood runs phases too). w.oa is None
    without openarena-server."""
    w.oa = None
    if os.path.isfile(OA_SERVER) and os.access(OA_SERVER, os.X_OK):
        w.oa = OpenArena(H.free_udp_port(), "etrelay-xdp-" + H.rand_token(6), ip=w.ns.host_ip,
                         extra=OA_EXTRA)
        ctx.objs.append(w.oa)
    w.master = H.stand_in_on(H.Master, w.ns.host_ip, challenge=False)
    ctx.objs.append(w.master)
    return w


def game_server_ready(w):
    """OpenArena answers getinfo; skips (77) without openarena-server."""
    if not w.oa:
        raise H.TestSkip(f"{OA_SERVER} is not installed (Debian package openarena-server)")
    w.oa.wait_ready()
    return w


def setup(ctx, rps_cpu=None):
    return game_server_ready(game_server(ctx, network(ctx, rps_cpu)))


def test(ctx):
    w = game_server(ctx, network(ctx))
    derived_rates(ctx, w.ns)
    turn_known(ctx, w.ns)
    game_server_ready(w)
    plain = phase(ctx, w, False, "plain")
    with_xdp = phase(ctx, w, True, "xdp", hold=HOLD)

    x = with_xdp["xdp"]
    # The budget keeps the relay's receive queue from overflowing while it
    # was held (main's build, without it: 2 403 dropped there).
    H.expect_eq(with_xdp["kernel_drops"][1], 0,
                "datagrams dropped at the relay's full receive queue with XDP")
    # Each source passes at most its burst and rate x time (+1 for the
    # bucket's edge); all the rest must be dropped as rate or budget.
    per_source = with_xdp["sent"] // FLOOD_SOURCES
    can_pass = XDP_BURST + XDP_RATE * (with_xdp["seconds"] + 1.0) + 1
    floor = FLOOD_SOURCES * max(0, per_source - can_pass)
    H.check(x["rate"] + x["budget"] >= floor,
            f"XDP dropped {x['rate']} flood packets as rate, {x['budget']} as budget; at least "
            f"{floor:.0f} of "
            f"{with_xdp['sent']} cannot have passed {FLOOD_SOURCES} buckets of {XDP_BURST} "
            f"+ {XDP_RATE}/s")
    H.check(x["rate"] + x["budget"] > 0 and floor > 0, "the flood outran its buckets")
    H.expect_eq(x["banned"], BAN_FRAMES, "XDP drops as banned")
    H.expect_eq(x["shape"], len(NOT_SHAPE), "XDP drops as shape")
    H.expect_eq(x["other listeners"], 0, "XDP counts under listener game only")
    H.check(with_xdp["unwalked_shown"], "/metrics has etrelay_xdp_lines_unwalked_total")
    H.expect_eq(x["unwalked"], 0, "long lines left unwalked (there were none)")
    H.check(x["budget"] > 0, f"the fresh sources' burst met the budget: {x}")
    # Frames the program never saw (the veth's ring full, or a frame the
    # veth hands to the stack past its NAPI: one in 500 000 here, once)
    # excuse as many of the players' packets missing from known; a player's
    # packet judged by the bucket is not excused.
    judged = sum(v for k, v in x.items() if k not in ("other listeners", "unwalked"))
    unjudged = max(0, with_xdp["sent"] + BAN_FRAMES + len(NOT_SHAPE) + len(SHAPE) +
                   sum(with_xdp["players"]) - judged)
    H.check(x["known"] + unjudged >= sum(with_xdp["players"]),
            f"XDP passed {x['known']} as known: at least the players' "
            f"{sum(with_xdp['players'])} (less {unjudged} frames it never judged)")
    # The players lose nothing but what the program never saw.
    H.check(sum(with_xdp["lost"]) <= unjudged,
            f"players' packets lost at OpenArena with XDP: {with_xdp['lost']} of "
            f"{with_xdp['players']} (excused: {unjudged} frames the program never judged)")
    H.check(with_xdp["listed"] is not None and set(with_xdp["names"]) <= set(with_xdp["listed"]),
            f"OpenArena lists the players after the flood with XDP: {with_xdp['listed']}, "
            f"want {with_xdp['names']}")
    ctx.note(f"summary: players lost {plain['lost']} of {plain['players']} without XDP, "
             f"{with_xdp['lost']} of {with_xdp['players']} with; their snapshots "
             f"{plain['snaps']} without, {with_xdp['snaps']} with (p99 gap {plain['p99']} ms "
             f"without, {with_xdp['p99']} ms with); relay CPU {plain['cpu']:.2f} s without, "
             f"{with_xdp['cpu']:.2f} s with; relay drops +{plain['relay_drops']} without, "
             f"+{with_xdp['relay_drops']} with; XDP dropped {x['rate']} rate, {x['banned']} "
             f"banned, {x['shape']} shape, passed {x['passed']}, known {x['known']}; host busy "
             f"over the flood {plain['host_busy']:.2f} s without (softirq "
             f"{plain['softirq']:.2f}), {with_xdp['host_busy']:.2f} s with (softirq "
             f"{with_xdp['softirq']:.2f}); the flooder's own CPU {plain['flooder_cpu']:.2f} s, "
             f"{with_xdp['flooder_cpu']:.2f} s")
    H.check(with_xdp["reload"]["passed"] + with_xdp["reload"]["known"] >= BAN_FRAMES,
            f"the address unbanned by SIGHUP passes: {with_xdp['reload']}")
    ctx.check_relays_alive()


if __name__ == "__main__":
    H.main(test)
