#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Abuse resistance, the smaller rules; each part with its own relay (default
abuse limits: open_limits=False, only the option under test set).

    python3 test_abuse_misc.py <etrelay-binary> <io_uring|epoll>

Parts (one failing does not hide the others):
  per_ip_sessions   --sessions-per-ip 3: three ports of 127.0.0.21 are
                    served, a fourth gets nothing (in-game, getchallenge) and
                    never reaches the game server, dropped{reason="ip_sessions"} counts exactly its
                    datagrams; another IP is still served.
  ban_list          --ban-file with 127.0.0.7: it gets nothing (in-game or
                    getinfo), dropped{reason="banned"} counts them, 127.0.0.8
                    is served. File rewritten to ban 127.0.0.8 instead, SIGHUP:
                    127.0.0.7 is served, 127.0.0.8 dropped (even its open
                    session). A file with a bad line, SIGHUP: "<file>:2: ..."
                    logged, the previous list kept (127.0.0.8 still dropped,
                    127.0.0.9 from the bad file not banned).
  cache_challenge   getinfo, then getstatus, from two clients with different
                    challenges within the cache TTL (1 s): the game server
                    sees one query of each; each client's reply carries its
                    own challenge, and is byte for byte the game server's
                    reply with only that challenge changed.
  cache_after_down  --query-cache 60s (so that age cannot be the reason),
                    --heartbeat-interval 1s --probe-timeout 300ms: a cached
                    getstatus answer is served (control); game server
                    stopped, "server down" logged: getstatus gets no answer
                    and query_cache_answers_total does not move.
  bogon_port0       UDP forged from 127.0.0.5 port 0 (raw socket):
                    dropped{reason="bogon"} counts each, nothing reaches the
                    game server; the same from a drawn port does (control).
  bogon_netns       etrelay in a network namespace listening on a veth
                    address (not loopback); frames from 127.0.0.1 put on the
                    wire: dropped{reason="bogon"}, nothing forwarded; a frame
                    from the host side's real address is forwarded (control).
                    Where a namespace cannot be built (H.require_netns),
                    the whole test is a skip (exit 77) after the other parts.
  qport_collision   two clients whose in-game packets carry qport 31337
                    (bytes 4-5, little-endian): the second one's four get no
                    answer and never reach the game server, "B sent qport
                    31337, which A holds: refused (qport_owned)" logged once,
                    etrelay_qport_collisions_total and
                    dropped{reason="qport_owned"} 4; a third client with
                    another qport is served.
  assurance         --unassured-timeout 1s: a client that only got a
                    challengeResponse stays unassured in /sessions and is
                    closed (unassured +1); a client whose in-game datagram
                    was echoed is assured and kept.
  query_grace       --unassured-timeout 2s, a game server that answers
                    getchallenge 0.6 s late: a getchallenge sent 1.8 s into
                    its unassured session goes out on a fresh session and
                    its answer arrives (the old one would have closed first).
  session_list      GET /sessions (lifecycle token): per client, the
                    server_port is the source port the game server saw,
                    client is ip:port, packets_up/down match what was sent
                    and echoed (and what the game server got and sent), qport
                    from the in-game packets, and the player name decoded from
                    a real OpenArena connect packet (tests/data).
"""

import os
import re
import signal
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")


def start(ctx, *args, token_kind="ETRELAY_METRICS_TOKEN", gs=None, **kw):
    """Game server stand-in, master stand-in (no challenges), etrelay with
    an ops listener and a token: (relay, gs, ops_port, token)."""
    gs = gs or ctx.game_server()
    master = ctx.master(challenge=False)
    ops_port = H.free_tcp_port()
    tok = os.urandom(24).hex()
    relay = H.relay_env(ctx, {token_kind: tok},
                        "--upstream", f"127.0.0.1:{gs.port}",
                        "--master", f"127.0.0.1:{master.port}",
                        "--ops-listen", f"127.0.0.1:{ops_port}",
                        *args, open_limits=False, **kw)
    relay.wait_for_line(r"^server up: ", timeout=10, what="the first probe answered")
    return relay, gs, ops_port, tok


QPORTS = {}


def qport_of(c):
    """A qport of c's own: the relay refuses another session's (and two
    sessions' packets with one qport within 2 s)."""
    return QPORTS.setdefault(c.addr, 1000 + len(QPORTS))


def game(tag, qport=7):
    """An in-game datagram (no \\xff\\xff\\xff\\xff prefix), unique: sequence 7,
    qport, tag."""
    return (b"\x07\x00\x00\x00" + struct.pack("<H", qport) + tag.encode() + b"-"
            + os.urandom(6).hex().encode())


def echo(c, what):
    p = game(what.replace(" ", "_"), qport_of(c))
    H.expect_eq(c.request(p, what=what), b"ECHO:" + p, what)
    return p


def echo_soon(c, what, limit=5.0):
    """echo, once every worker took the ban list SIGHUP reloaded: worker 0
    logs the reload, each other worker takes it on its next loop turn (on a
    loaded machine, later than one 2 s request). A datagram a second, each
    its own, until one comes back (later answers to the earlier ones are
    read past); bounded."""
    deadline = time.monotonic() + limit * H.SLOW
    for i in range(100):
        p = game(f"{what.replace(' ', '_')}_{i}", qport_of(c))
        c.send(p)
        end = min(time.monotonic() + 1.0, deadline)
        while time.monotonic() < end:
            data = c.try_recv(max(0.01, end - time.monotonic()))
            if data == b"ECHO:" + p:
                return p
        if time.monotonic() >= deadline:
            break
    H.fail(f"{what}: no echo within {limit * H.SLOW:g} s")


def refused(c, gs, n, what, kinds=("game",)):
    """c sends n datagrams (in-game, or every other one a query of kinds[1])
    and gets nothing back; none reaches the game server. Returns the number
    sent."""
    sent = []
    for i in range(n):
        if len(kinds) > 1 and i % 2:
            p = H.cmd(f"{kinds[1]} refused{i}x{H.rand_token(6)}")
        else:
            p = game(f"refused{i}", qport_of(c))
        c.send(p)
        sent.append(p)
        got = c.try_recv(0.15)
        H.check(got is None, f"{what}: got an answer {H.short(got)}")
    H.check(c.try_recv(0.3) is None, f"{what}: got a late answer")
    H.expect_eq(gs.sources_for(sent), set(), f"{what}: game-server sources of its datagrams")
    return len(sent)


# --------------------------------------------------------------------------

def per_ip_sessions(ctx):
    relay, gs, port, tok = start(ctx, "--sessions-per-ip", "3")
    cs = [H.client_on(ctx, relay, "127.0.0.21") for _ in range(4)]
    for i, c in enumerate(cs[:3]):
        echo(c, f"port {i + 1} of 127.0.0.21")
    before = H.get_metrics(port, tok)
    # getchallenge, not getinfo: a getinfo may be answered from the query
    # cache, which needs no session (the probe's answer is there now)
    n = refused(cs[3], gs, 4, "a 4th port of 127.0.0.21", kinds=("game", "getchallenge"))
    # the drops are counted as the relay reads them: waited for, not read once
    H.wait_until(lambda: H.drops(H.get_metrics(port, tok), "ip_sessions")
                 - H.drops(before, "ip_sessions") >= n, 3 * H.SLOW,
                 f"dropped{{reason=\"ip_sessions\"}} to count the 4th port's {n} datagrams",
                 interval=0.05)
    after = H.get_metrics(port, tok)
    d = H.drops(after, "ip_sessions") - H.drops(before, "ip_sessions")
    other = H.client_on(ctx, relay, "127.0.0.22")
    echo(other, "a client of another IP")
    for i, c in enumerate(cs[:3]):
        echo(c, f"port {i + 1} of 127.0.0.21 after the refusal")
    ctx.note(f"per_ip_sessions: 4th port sent {n}, dropped ip_sessions +{d}, "
             f"active {H.counter(after, 'etrelay_sessions_active')}")
    H.expect_eq(d, n, "dropped{reason=\"ip_sessions\"} growth for the 4th port's datagrams")
    H.expect_eq(H.counter(after, "etrelay_sessions_active"), 3, "active sessions")


def write_file(path, text):
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def hup(relay):
    os.kill(relay.pid, signal.SIGHUP)   # not relay.signal(): that marks an expected exit


def ban_list(ctx):
    d = ctx.tmpdir()
    path = os.path.join(d, "bans")
    write_file(path, "# banned for the test\n127.0.0.7   # one address\n")
    relay, gs, port, tok = start(ctx, "--ban-file", path)
    relay.wait_for_line(r"^ban-file %s: 1 entries" % re.escape(path), timeout=3,
                        what="the ban file loaded")
    c7 = H.client_on(ctx, relay, "127.0.0.7")
    c8 = H.client_on(ctx, relay, "127.0.0.8")
    c9 = H.client_on(ctx, relay, "127.0.0.9")

    b0 = H.drops(H.get_metrics(port, tok), "banned")
    n = refused(c7, gs, 4, "banned 127.0.0.7", kinds=("game", "getinfo"))
    b1 = H.drops(H.get_metrics(port, tok), "banned")
    echo(c8, "127.0.0.8 (not banned)")
    H.expect_eq(b1 - b0, n, "dropped{reason=\"banned\"} growth for 127.0.0.7")

    # unban .7, ban .8
    write_file(path, "127.0.0.8/32\n")
    mark = relay.mark()
    hup(relay)
    relay.wait_for_line(r"^ban-file %s: 1 entries" % re.escape(path), timeout=3, start=mark,
                        what="the ban file reloaded on SIGHUP")
    echo_soon(c7, "127.0.0.7 after it was unbanned")
    b2 = H.drops(H.get_metrics(port, tok), "banned")
    n2 = refused(c8, gs, 3, "127.0.0.8 after SIGHUP banned it (its session was open)")
    b3 = H.drops(H.get_metrics(port, tok), "banned")
    H.expect_eq(b3 - b2, n2, "dropped{reason=\"banned\"} growth for 127.0.0.8")

    # a bad file keeps the previous list
    write_file(path, "127.0.0.9\nnot-an-address\n")
    mark = relay.mark()
    hup(relay)
    _, m, _ = relay.wait_for_line(r"%s:2: .*not-an-address" % re.escape(path), timeout=3,
                                  start=mark, what="the bad line reported as file:line")
    relay.wait_for_line(r"SIGHUP: keeping the previous ban list", timeout=3, start=mark,
                        what="the previous list kept")
    H.check(not relay.find_lines(r"^ban-file %s: \d+ entries" % re.escape(path), mark),
            "a ban file with a bad line was loaded anyway")
    echo(c9, "127.0.0.9 (only in the rejected file)")
    echo(c7, "127.0.0.7 after the rejected file")
    b4 = H.drops(H.get_metrics(port, tok), "banned")
    n3 = refused(c8, gs, 2, "127.0.0.8 after the rejected file (still banned)")
    b5 = H.drops(H.get_metrics(port, tok), "banned")
    H.expect_eq(b5 - b4, n3, "dropped{reason=\"banned\"} growth for 127.0.0.8 (kept list)")
    ctx.note(f"ban_list: banned drops {b0}->{b5}; bad file logged {m.group(0)!r}")


def cache_challenge(ctx):
    relay, gs, port, tok = start(ctx, token_kind="ETRELAY_METRICS_TOKEN")
    # the startup probe's infoResponse is in the cache too: let it age out (1 s)
    time.sleep(1.3)
    a = H.client_on(ctx, relay, "127.0.0.31")
    b = H.client_on(ctx, relay, "127.0.0.32")
    results = []
    for kind, ca, cb in (("getinfo", "chA-1234", "ChallengeOfB-987654321"),
                         ("getstatus", "-77", "sB")):
        m0 = H.counter(H.get_metrics(port, tok), "etrelay_query_cache_answers_total")
        t0 = time.monotonic()
        ra = a.request(H.cmd(f"{kind} {ca}"), what=f"{kind} reply to A")
        rb = b.request(H.cmd(f"{kind} {cb}"), what=f"{kind} reply to B")
        dt = time.monotonic() - t0
        m1 = H.counter(H.get_metrics(port, tok), "etrelay_query_cache_answers_total")
        seen = gs.packets(lambda p, k=kind: (H.split_command(p.data)[0] or "").lower() == k
                          and (p.data.endswith(ca.encode()) or p.data.endswith(cb.encode())))
        with gs.lock:
            gs_reply = [r for _, r in gs.replies if b"\\challenge\\" + ca.encode() in r]
        results.append((kind, len(seen), m1 - m0, len(ra), len(rb), dt))
        H.check(dt < 1.0, f"{kind}: A and B took {dt:.2f} s, not within the 1 s cache TTL")
        H.expect_eq([H.split_command(p.data)[1] for p in seen], [ca],
                    f"{kind} queries with A's or B's challenge seen by the game server")
        H.expect_eq(m1 - m0, 1, f"{kind}: query_cache_answers_total growth")
        H.expect_eq(len(gs_reply), 1, f"{kind}: game-server replies with A's challenge")
        H.expect_eq(ra, gs_reply[0], f"{kind}: A's reply (the game server's, passed through)")
        pa, pb = b"\\challenge\\" + ca.encode(), b"\\challenge\\" + cb.encode()
        H.expect_eq(ra.count(pa), 1, f"{kind}: A's challenge pair in A's reply")
        H.expect_eq(rb.count(pb), 1, f"{kind}: B's challenge pair in B's reply")
        i = ra.index(pa)
        H.expect_eq(rb[:i], ra[:i], f"{kind}: B's reply before the challenge")
        H.expect_eq(rb[i + len(pb):], ra[i + len(pa):], f"{kind}: B's reply after the challenge")
        H.expect_eq(rb, ra.replace(pa, pb), f"{kind}: B's reply")
    ctx.note("cache_challenge: " + "; ".join(
        f"{k}: game server saw {n} query, cache answered {c}, replies {la} B / {lb} B "
        f"within {dt * 1000:.0f} ms" for k, n, c, la, lb, dt in results))


def cache_after_down(ctx):
    relay, gs, port, tok = start(ctx, "--heartbeat-interval", "1s", "--probe-timeout", "300ms",
                                 "--query-cache", "60s")
    c1 = H.client_on(ctx, relay, "127.0.0.33")
    c2 = H.client_on(ctx, relay, "127.0.0.34")
    c3 = H.client_on(ctx, relay, "127.0.0.35")
    r1 = c1.request(H.cmd("getstatus one"), what="getstatus reply (game server)")
    H.check(r1.startswith(H.cmd("statusResponse")), f"not a statusResponse: {H.short(r1)}")
    m0 = H.counter(H.get_metrics(port, tok), "etrelay_query_cache_answers_total")
    r2 = c2.request(H.cmd("getstatus two"), what="getstatus reply from the cache (control)")
    m1 = H.counter(H.get_metrics(port, tok), "etrelay_query_cache_answers_total")
    H.expect_eq(m1 - m0, 1, "cache answers for the control query")
    H.expect_eq(r2, r1.replace(b"\\challenge\\one", b"\\challenge\\two"), "cached reply")

    mark = relay.mark()
    t0 = time.monotonic()
    gs.stop()
    relay.wait_for_line(r"^server down: ", timeout=8, start=mark, what="the failed probe round")
    t_down = time.monotonic() - t0
    got = []
    for c, ch in ((c3, "three"), (c2, "four")):
        c.send(H.cmd(f"getstatus {ch}"))
        got.append(c.try_recv(1.5))
    m2 = H.counter(H.get_metrics(port, tok), "etrelay_query_cache_answers_total")
    ctx.note(f"cache_after_down: server down logged {t_down:.1f} s after the stop; answers "
             f"after it: {[H.short(g, 40) for g in got]}; cache answers {m0}->{m1}->{m2}")
    H.check(all(g is None for g in got),
            f"getstatus answered after 'server down': {[H.short(g, 80) for g in got]}")
    H.expect_eq(m2 - m1, 0, "query_cache_answers_total growth after 'server down'")


def bogon_port0(ctx):
    relay, gs, port, tok = start(ctx)
    raw = H.RawUdp()
    ctx.objs.append(raw)
    b0 = H.drops(H.get_metrics(port, tok), "bogon")
    bad = [game("port0-a"), H.cmd(f"getinfo port0{H.rand_token(6)}"), game("port0-b")]
    for p in bad:
        H.check(raw.send(("127.0.0.5", 0), relay.addr, p), "raw send failed")
    control = game("port-drawn")
    cport = H.free_udp_port()  # a forged source: drawn, below the ephemeral range
    H.check(raw.send(("127.0.0.5", cport), relay.addr, control), "raw send failed")
    H.wait_until(lambda: gs.sources_for([control]), 3,
                 "the control datagram from 127.0.0.5:%d at the game server" % cport)
    time.sleep(0.3)
    b1 = H.drops(H.get_metrics(port, tok), "bogon")
    ctx.note(f"bogon_port0: sent {len(bad)} from 127.0.0.5:0, dropped bogon +{b1 - b0}; "
             f"control from :{cport} reached the game server")
    H.expect_eq(gs.sources_for(bad), set(), "game-server sources of the port-0 datagrams")
    H.expect_eq(b1 - b0, len(bad), "dropped{reason=\"bogon\"} growth")


def bogon_netns(ctx):
    # Without network namespaces (or sysctl) this raises TestSkip: the whole
    # test is then a skip, after the other parts ran.
    ns = H.VethNetns(sysctls=(
        # let 127.0.0.1-sourced packets in, as a host with those sysctls
        # (or a bug) would: the relay's own check is what is tested
        ("net.ipv4.conf.all.route_localnet", 1),
        ("net.ipv4.conf.{ns_if}.route_localnet", 1),
        ("net.ipv4.conf.all.rp_filter", 0),
        ("net.ipv4.conf.{ns_if}.rp_filter", 0),
        ("net.ipv4.conf.{ns_if}.accept_local", 1)))
    ctx.objs.append(ns)
    gs = H.stand_in_on(H.GameServer, ns.host_ip)
    ctx.objs.append(gs)
    master = H.stand_in_on(H.Master, ns.host_ip, challenge=False)
    ctx.objs.append(master)
    lport, ops_port = H.free_udp_port(), H.free_tcp_port()
    tok = os.urandom(24).hex()
    relay = H.relay_env(ctx, {"ETRELAY_METRICS_TOKEN": tok},
                        "--listen", f"{ns.ns_ip}:{lport}",
                        "--upstream", f"{ns.host_ip}:{gs.port}",
                        "--master", f"{ns.host_ip}:{master.port}",
                        "--ops-listen", f"{ns.ns_ip}:{ops_port}",
                        listen=False, wrapper=ns.wrapper(), open_limits=False)
    relay.wait_for_line(r"^server up: ", timeout=10, what="the probe answered across the veth")
    dst = (ns.ns_ip, lport)
    b0 = H.drops(H.get_metrics(ops_port, tok, host=ns.ns_ip), "bogon")
    bad = [game("lo-src-a"), H.cmd(f"getstatus lo{H.rand_token(6)}"), game("lo-src-b")]
    sport = H.free_udp_port()  # forged sources: drawn, below the ephemeral range
    for p in bad:
        ns.send_frame(H.ether_udp(("127.0.0.1", sport), dst, p, ns.host_mac, ns.ns_mac))
    control = game("veth-src")
    ns.send_frame(H.ether_udp((ns.host_ip, sport), dst, control, ns.host_mac, ns.ns_mac))
    H.wait_until(lambda: gs.sources_for([control]), 3,
                 f"the control frame from {ns.host_ip}:{sport} at the game server")
    time.sleep(0.3)
    b1 = H.drops(H.get_metrics(ops_port, tok, host=ns.ns_ip), "bogon")
    ctx.note(f"bogon_netns: relay on {ns.ns_ip}:{lport} in {ns.name}; {len(bad)} frames from "
             f"127.0.0.1: dropped bogon +{b1 - b0}; control from {ns.host_ip} forwarded")
    H.expect_eq(gs.sources_for(bad), set(), "game-server sources of the 127.0.0.1 datagrams")
    H.expect_eq(b1 - b0, len(bad), "dropped{reason=\"bogon\"} growth (127.0.0.1 on a veth listener)")


def qport_collision(ctx):
    relay, gs, port, tok = start(ctx)
    c1 = H.client_on(ctx, relay, "127.0.0.41")
    c2 = H.client_on(ctx, relay, "127.0.0.42")
    c3 = H.client_on(ctx, relay, "127.0.0.43")

    def ingame(c, seq, qport, answered=True):
        p = struct.pack("<IH", seq, qport) + b"move" + os.urandom(4).hex().encode()
        if answered:
            H.expect_eq(c.request(p, what="echo"), b"ECHO:" + p, f"echo to {c.addr}")
        else:
            c.send(p)
            H.check(c.try_recv(0.15) is None, f"{c.addr}: an answer to qport {qport}")
        return p

    mark = relay.mark()
    ingame(c1, 1, 31337)
    refused = [ingame(c2, 1, 31337, answered=False)]
    _, m, _ = relay.wait_for_line(r"(\S+) sent qport (\d+), which (\S+) holds: refused "
                                  r"\(qport_owned\)$", timeout=3, start=mark,
                                  what="the qport refusal line")
    for seq in range(2, 5):
        ingame(c1, seq, 31337)
        refused.append(ingame(c2, seq, 31337, answered=False))
        ingame(c3, seq, 31338)
    H.wait_until(lambda: H.counter(H.get_metrics(port, tok), "etrelay_qport_collisions_total")
                 >= 4, 3 * H.SLOW, "four qport collisions counted", interval=0.05)
    s = H.get_metrics(port, tok)
    n = H.counter(s, "etrelay_qport_collisions_total")
    lines = relay.find_lines(r"sent qport \d+, which", mark)
    ctx.note(f"qport_collision: {m.group(0)!r}; collisions_total {n}; lines {len(lines)}")
    H.expect_eq((m.group(1), m.group(2), m.group(3)),
                (f"127.0.0.42:{c2.port}", "31337", f"127.0.0.41:{c1.port}"),
                "sender, qport and holder in the refusal line")
    H.expect_eq(n, 4, "etrelay_qport_collisions_total")
    H.expect_eq(H.drops(s, "qport_owned"), 4, "dropped{reason=\"qport_owned\"}")
    H.expect_eq(gs.sources_for(refused), set(), "game-server sources of the refused packets")
    H.expect_eq(len(lines), 1, "qport refusal lines logged (one a second at most)")


def darkplaces_no_qport(ctx):
    """DarkPlaces has no qport (bytes 4-5 are the top of a big-endian
    sequence number, 0 for every client's first 65536 packets): with --game
    dp two players' packets both pass, and connects need no challenge
    (DarkPlaces answers "challenge", not challengeResponse)."""
    relay, gs, port, tok = start(ctx, "--game", "dp")
    players = [H.client_on(ctx, relay, ip) for ip in ("127.0.0.81", "127.0.0.82")]
    for c in players:
        r = c.request(H.cmd("connect \\protocol\\darkplaces 3\\challenge\\x"),
                      what="the game server's answer to a DarkPlaces connect")
        H.check(r.startswith(H.cmd("connectResponse")), f"DP connect: {H.short(r)}")
    for seq in range(1, 6):
        for c in players:
            p = struct.pack(">II", 0x00000010, seq) + os.urandom(8)
            H.expect_eq(c.request(p, what="echo"), b"ECHO:" + p, f"DP echo to {c.addr}")
    s = H.get_metrics(port, tok)
    for why in ("qport_owned", "qport_mismatch", "connect_unread", "connect_unchallenged"):
        H.expect_eq(H.drops(s, why), 0, f"dropped{{reason=\"{why}\"}} with --game dp")


def unchallenged_connect(ctx):
    """A connect on a session never sent a challengeResponse is refused
    before the budget and the decoder (connect_unchallenged): a flood of
    forged connects from many sources costs nothing, and a player who asks
    for its challenge first still joins during it."""
    relay, gs, port, tok = start(ctx, "--debug")
    with open(os.path.join(DATA, "connect_oa_basic.bin"), "rb") as f:
        conn = f.read()
    raw = H.RawUdp()
    ctx.objs.append(raw)
    m0 = H.get_metrics(port, tok)
    n = 0
    for i in range(2000):
        raw.send((f"127.{31 + i // 60000}.{i // 250 % 240}.{i % 250 + 1}", 20000 + i % 1000),
                 relay.addr, conn)
        n += 1
    c = H.client_on(ctx, relay, "127.0.0.61")
    ch = H.cmd("getchallenge 4321 Q3")
    r = c.request(ch, what="challengeResponse during the flood")
    H.check(r.startswith(H.cmd("challengeResponse")), f"getchallenge: {H.short(r)}")
    r = c.request(conn, what="connectResponse during the flood")
    H.check(r.startswith(H.cmd("connectResponse")), f"connect: {H.short(r)}")
    # The workers drain their queues at their pace (two of them on a busy
    # machine): wait for the count, do not read it once.
    H.wait_until(lambda: H.drops(H.get_metrics(port, tok), "connect_unchallenged")
                 - H.drops(m0, "connect_unchallenged") >= n * 0.9, 5 * H.SLOW,
                 "the forged connects counted as connect_unchallenged", interval=0.1)
    m1 = H.get_metrics(port, tok)
    un = H.drops(m1, "connect_unchallenged") - H.drops(m0, "connect_unchallenged")
    unread = H.drops(m1, "connect_unread") - H.drops(m0, "connect_unread")
    seen = len(gs.packets(lambda p: p.data == conn))
    ctx.note(f"unchallenged_connect: {n} forged connects, {un} dropped as connect_unchallenged, "
             f"{unread} as connect_unread; the game server saw {seen} connects")
    H.check(un >= n * 0.9, f"only {un} of {n} forged connects dropped as connect_unchallenged")
    H.expect_eq(unread, 0, "connects the decoder was asked about (connect_unread)")
    H.expect_eq(seen, 1, "connects the game server saw (the player's only)")
    H.check(relay.count(r"-> ET  connect \(\d+ B\) refused: connect_unchallenged$") >= 1,
            "no --debug line '... connect (N B) refused: connect_unchallenged'")
    # The count of lines over the cap is logged with the first debug line of
    # a later second: one more packet a second on brings it out.
    for _ in range(3):
        time.sleep(1.1)
        c.send(H.cmd("getinfo late"))
        if relay.count(r"^\(\d+ debug lines suppressed\)$") >= 1:
            break
    relay.wait_for_line(r"^\(\d+ debug lines suppressed\)$", timeout=3,
                        what="a well-formed '(N debug lines suppressed)' line")


def assurance(ctx):
    relay, gs, port, tok = start(ctx, "--unassured-timeout", "1s", "--sessions-per-ip", "100",
                                 token_kind="ETRELAY_LIFECYCLE_TOKEN")
    asker = H.client_on(ctx, relay, "127.0.0.61")
    player = H.client_on(ctx, relay, "127.0.0.62")
    r = asker.request(H.cmd("getchallenge"), what="challengeResponse")
    H.check(r.startswith(H.cmd("challengeResponse")), f"getchallenge answer: {H.short(r)}")
    echo(player, "in-game datagram")
    doc = H.get_json(port, "/sessions", tok)
    by = {s["client"]: s for s in doc["sessions"]}
    ka, kp = f"127.0.0.61:{asker.port}", f"127.0.0.62:{player.port}"
    H.expect_eq((by[ka]["assured"], by[kp]["assured"]), (False, True),
                "assured after a challengeResponse / after in-game traffic")
    before = H.closed(H.get_metrics(port, tok), "unassured")
    H.wait_until(lambda: ka not in {s["client"] for s in
                                    H.get_json(port, "/sessions", tok)["sessions"]},
                 4, "the asker's session closed by --unassured-timeout 1s")
    left = {s["client"] for s in H.get_json(port, "/sessions", tok)["sessions"]}
    closed = H.closed(H.get_metrics(port, tok), "unassured") - before
    ctx.note(f"assurance: getchallenge-only session unassured and closed ({closed} closed "
             f"unassured); the player's session kept: {kp in left}")
    H.check(kp in left, "the player's assured session was closed too")
    H.expect_eq(closed, 1, "sessions closed unassured")


class SlowChallengeServer(H.GameServer):
    """Answers getchallenge 600 ms late, like a game server far away."""

    def handle(self, data, addr, now):
        if (H.split_command(data)[0] or "").lower() == "getchallenge":
            threading.Timer(0.6, H.GameServer.handle, (self, data, addr, now)).start()
            return
        super().handle(data, addr, now)


def query_grace(ctx):
    gs = SlowChallengeServer()
    ctx.objs.append(gs)
    relay, gs, port, tok = start(ctx, "--unassured-timeout", "2s", "--sessions-per-ip", "100",
                                 gs=gs)
    c = H.client_on(ctx, relay, "127.0.0.63")
    first, second = H.cmd("getchallenge 1 grace"), H.cmd("getchallenge 2 grace")
    t0 = time.monotonic()
    r1 = c.request(first, what="challengeResponse to the first getchallenge", timeout=2.0)
    H.check(r1.startswith(H.cmd("challengeResponse")), f"first answer: {H.short(r1)}")
    # 1.8 s after the session opened: in the last fifth of its 2 s; the
    # answer comes 0.6 s later, after the session would have closed.
    time.sleep(max(0.0, t0 + 1.8 - time.monotonic()))
    r2 = c.request(second, what="challengeResponse to a getchallenge 1.8 s into the session",
                   timeout=2.0)
    H.check(r2.startswith(H.cmd("challengeResponse")), f"second answer: {H.short(r2)}")
    p1, p2 = gs.sources_for([first]), gs.sources_for([second])
    ctx.note(f"query_grace: second getchallenge answered; game server saw ports "
             f"{sorted(p[1] for p in p1)} then {sorted(p[1] for p in p2)}")
    H.check(p1 and p2 and p1 != p2, "the late query did not get a session of its own")


def session_list(ctx):
    relay, gs, port, tok = start(ctx, token_kind="ETRELAY_LIFECYCLE_TOKEN")
    with open(os.path.join(DATA, "connect_oa_basic.bin"), "rb") as f:
        basic = f.read()
    with open(os.path.join(DATA, "connect_oa_colors.bin"), "rb") as f:
        colors = f.read()
    plan = [("127.0.0.51", basic, "UnitTester", 4321, 5),
            ("127.0.0.52", colors, "^1Red^7Dragon|ET", 27015, 3),
            ("127.0.0.53", None, None, 777, 2)]
    clients = []
    for ip, conn, name, qport, n in plan:
        c = H.client_on(ctx, relay, ip)
        sent = []
        if conn is not None:
            # As a client does: the connect carries a challenge, so the
            # relay takes it only on a session that was sent one.
            ch = H.cmd(f"getchallenge {qport} Q3")
            r = c.request(ch, what=f"challengeResponse to {ip}")
            H.check(r.startswith(H.cmd("challengeResponse")), f"{ip}: {H.short(r)}")
            sent.append(ch)
            r = c.request(conn, what=f"connectResponse to {ip}")
            H.check(r.startswith(H.cmd("connectResponse")), f"{ip}: {H.short(r)}")
            sent.append(conn)
        for seq in range(n):
            p = struct.pack("<IH", seq + 1, qport) + b"usercmd" + os.urandom(3).hex().encode()
            H.expect_eq(c.request(p, what=f"echo to {ip}"), b"ECHO:" + p, f"echo to {ip}")
            sent.append(p)
        clients.append((c, sent, name, qport))
    doc = H.get_json(port, "/sessions", tok)
    sessions = doc.get("sessions")
    H.check(isinstance(sessions, list), f"/sessions: no list: {H.short(doc, 300)}")
    H.expect_eq(len(sessions), len(plan), "number of sessions listed")
    by_client = {s.get("client"): s for s in sessions}
    rows = []
    for c, sent, name, qport in clients:
        key = f"{c.addr[0]}:{c.addr[1]}"
        s = by_client.get(key)
        H.check(s is not None, f"/sessions has no entry for client {key}: {sorted(by_client)}")
        src = gs.sources_for(sent)
        H.expect_eq(len(src), 1, f"{key}: source ports the game server saw")
        gport = next(iter(src))[1]
        up_gs = len(gs.packets(lambda p: p.addr[1] == gport))
        with gs.lock:
            down_gs = sum(1 for a, _ in gs.replies if a[1] == gport)
        rows.append((key, s.get("server_port"), gport, s.get("packets_up"), len(sent),
                     s.get("packets_down"), c.got, s.get("name"), s.get("qport")))
        H.expect_eq(s.get("relay"), "default", f"{key}: relay")
        H.expect_eq(s.get("server_port"), gport, f"{key}: server_port vs the game server's view")
        H.expect_eq((s.get("packets_up"), s.get("packets_down")), (len(sent), c.got),
                    f"{key}: packets_up/packets_down vs what the client sent/received")
        H.expect_eq((up_gs, down_gs), (len(sent), c.got),
                    f"{key}: what the game server got/sent on that port")
        H.expect_eq(s.get("assured"), True, f"{key}: assured")
        H.expect_eq(s.get("qport"), qport, f"{key}: qport")
        H.expect_eq(s.get("name"), name, f"{key}: player name")
    ctx.note("session_list: " + "; ".join(
        f"{k} server_port {sp} (game server saw {gp}) up {u}/{us} down {d}/{dg} name {nm!r} "
        f"qport {q}" for k, sp, gp, u, us, d, dg, nm, q in rows))


def test(ctx):
    H.run_parts(ctx, [per_ip_sessions, ban_list, cache_challenge, cache_after_down,
                      bogon_port0, bogon_netns, qport_collision, darkplaces_no_qport, unchallenged_connect, assurance, query_grace,
                      session_list])


if __name__ == "__main__":
    H.main(test)
