#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""etrelay in 10 seconds, on loopback.

    python3 tests/integration/demo.py build/src/etrelay [auto|io_uring|epoll]

Starts etrelay (backend auto unless one is given) with its default limits in
front of a stand-in game server, with a stand-in master, a server browser
and two players, and prints what each of them saw and etrelay's log, every
line of it explained. Exit 0 only when the master listed the relay's
address, every round trip worked and etrelay logged nothing the demo cannot
explain; 77 (a skip, for the test suite) when --backend io_uring was asked
for and this kernel refuses io_uring."""

import os
import re
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import q3huff  # noqa: E402

# Every line etrelay may log in this demo, with what it means. A line that
# matches none of these fails the demo: a newcomer would not know what to
# make of it either.
EXPLAIN = [
    (r"^etrelay \S+ listening on (\S+), upstream (\S+), backend (\S+), game (\S+) "
     r"\(([^)]*)\), masters (.*)$",
     lambda m: f"started: clients reach the game server at {m[1]}, etrelay relays them to "
               f"{m[2]}; packets move with {m[3]}; it heartbeats {m[6]} for game {m[4]}",
     False),
    (r"^io_uring unavailable: .*; falling back to epoll$",
     lambda m: "this kernel or sandbox refuses io_uring, so etrelay uses its epoll backend, "
               "which does the same work",
     False),
    (r"^server up: (\S+) answered the probe$",
     lambda m: f"the game server at {m[1]} answered etrelay's getinfo probe, so etrelay sent "
               "the heartbeat to the master from its public port",
     False),
    (r"^relay (\S+): master (\S+) challenged us and got its answer$",
     lambda m: f"the master's challenge reached the public port and the game server's answer "
               f"left from there: {m[2]} lists the relay's address (relay '{m[1]}' is the "
               "only one, named by default)",
     False),
    (r"^master (\S+) is (\S+)$",
     lambda m: f"the master's name {m[1]} resolved to {m[2]}",
     False),
    (r"^(SIGTERM|SIGINT): draining (\d+) sessions",
     lambda m: f"{m[1]}: new clients are refused while the open sessions finish",
     False),
    (r"^exiting on (SIG\w+)$",
     lambda m: f"the demo stopped etrelay with {m[1]}, as `systemctl stop` does",
     False),
    (r"^flatline (\S+) -> (\S+)",
     lambda m: f"on the way out etrelay sent the master {m[1]}, so it drops the listing at once "
               "instead of waiting for it to age out",
     False),
    (r"^stats (\S+): ",
     lambda m: "counters at exit: sessions (one per client: the master, the browser, each "
               "player), datagrams and bytes to the game server (up) and back (down), answers "
               "from the query cache, clients refused a session, datagrams dropped (by reason, "
               "see etrelay_dropped_datagrams_total in man 8 etrelay), flatlines sent",
     False),
    # Lines that explain themselves, but mean the demo went wrong.
    (r"^server down: ", lambda m: "the game server stopped answering the probe", True),
    (r"^relay \S+: qport (\d+) used by ",
     lambda m: f"two clients' in-game packets carry qport {m[1]}; the game server would mix "
               "them up (real clients, and this demo's players, pick distinct ones)",
     True),
]


def explain(line):
    """(explanation, is_a_problem) for one line of etrelay's log."""
    for rx, text, bad in EXPLAIN:
        m = re.search(rx, line)
        if m:
            return text(m), bad
    return "not explained by this demo (see DIAGNOSTICS in man 8 etrelay)", True


def in_game(seq, qport, data):
    """A client's in-game datagram as ioquake3's netchan frames it: sequence
    (32 bits) and qport (16 bits), little-endian, then the payload. Each
    player has its own qport, as real clients do."""
    return struct.pack("<iH", seq, qport) + data


def play(relay, name, qport, problems):
    """getchallenge, connect, then 20 in-game round trips. Returns the row
    for the table, even when the player got stuck part way."""
    p = H.Client(relay.addr, timeout=2.0)
    sent, got = [], 0
    try:
        sent.append(H.cmd("getchallenge"))
        r = p.request(sent[-1], what="challengeResponse")
        m = re.fullmatch(rb"\xff\xff\xff\xffchallengeResponse (-?\d+)", r)
        if not m:
            problems.append(f"{name}: getchallenge answered with {H.short(r)}")
            return (name, p, sent, got)
        got += 1
        # Huffman-coded, as every client sends it: the relay reads the
        # qport from it.
        sent.append(q3huff.connect_packet(f"\\challenge\\{m.group(1).decode()}"
                                          f"\\qport\\{qport}\\name\\{name}"))
        r = p.request(sent[-1], what="connectResponse")
        if not r.startswith(H.cmd("connectResponse")):
            problems.append(f"{name}: connect answered with {H.short(r)}")
            return (name, p, sent, got)
        got += 1
        for i in range(20):
            sent.append(in_game(i + 1, qport, f"{name} usercmd {i}".encode()))
            r = p.request(sent[-1], what=f"in-game answer {i}")
            if r != b"ECHO:" + sent[-1]:
                problems.append(f"{name}: packet {i} answered with {H.short(r)}")
                return (name, p, sent, got)
            got += 1
    except H.TestFailure as e:
        problems.append(f"{name}: {str(e).replace(f'client {p.addr}: ', '')}")
    return (name, p, sent, got)


def main():
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and
                                       sys.argv[2] not in ("auto", "io_uring", "epoll")):
        print(f"usage: {sys.argv[0]} <etrelay-binary> [auto|io_uring|epoll]", file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    backend = sys.argv[2] if len(sys.argv) == 3 else "auto"
    if not os.access(binary, os.X_OK):
        print(f"{binary}: not an executable", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))

    gs = H.GameServer(status_size=1400)
    master = H.Master()
    relay = H.Relay(binary, backend, ["--upstream", f"127.0.0.1:{gs.port}",
                                      "--master", f"127.0.0.1:{master.port}",
                                      "--heartbeat-interval", "5s"])
    problems = []
    rows = []  # (who, client, sent, answers)
    try:
        relay.wait_ready(5.0)
        H.wait_until(master.listed_set, 3.0, "the master to list the relay")

        # a server browser that found us at the master
        browser = H.Client(relay.addr, timeout=2.0)
        try:
            st = browser.request(H.cmd("getstatus\n"), what="statusResponse")
            if not st.startswith(H.cmd("statusResponse\n")):
                problems.append(f"browser got {H.short(st)} for getstatus")
            rows.append(("browser", browser, [H.cmd("getstatus\n")], 1))
        except H.TestFailure as e:
            problems.append(f"browser: {e}")
            rows.append(("browser", browser, [H.cmd("getstatus\n")], 0))

        # two players: handshake, then in-game traffic, each with its qport
        for name, qport in (("player1", 20111), ("player2", 20222)):
            rows.append(play(relay, name, qport, problems))
    except H.TestSkip as e:
        H._kill_everything()
        print(f"demo: SKIPPED: {e}")
        return H.EXIT_SKIP
    except H.TestFailure as e:
        problems.append(str(e))
    finally:
        listed = master.listed_set()
        relay.signal(signal.SIGTERM)
        rc = relay.wait_exit(2.0)
        relay._join_readers()
        time.sleep(0.1)
        flat = master.flatline_list()
        H._kill_everything()

    print(f"etrelay demo (backend {backend}), everything on loopback:")
    print(f"  relay public address   127.0.0.1:{relay.port}   what clients and the master talk to")
    print(f"  game server            127.0.0.1:{gs.port}   a stand-in; it echoes in-game packets")
    print(f"  master                 127.0.0.1:{master.port}   a stand-in master server")
    print()
    hbs = master.heartbeat_list()
    print(f"master: {len(hbs)} heartbeat(s) "
          f"({', '.join(sorted({t for _, t, _ in hbs})) or 'none'}) from "
          f"{', '.join(sorted({f'{a[0]}:{a[1]}' for _, _, a in hbs})) or 'nowhere'}")
    print(f"master lists: {', '.join(f'{a[0]}:{a[1]}' for a in sorted(listed)) or 'nothing'}")
    if listed == {relay.addr}:
        print("  -> the relay's address, not the game server's: registration works")
    else:
        problems.append(f"master listed {sorted(listed)}, expected only {relay.addr}")
    print()
    print("Each client talks only to the relay's public address; the game server sees each")
    print("of them on a socket of its own (a session):")
    print(f"{'client':10} {'address':17} {'sent':>5} {'answers':>8}  session socket at the game server")
    ports = set()
    for who, c, sent, got in rows:
        # packets every player sends alike (getchallenge) cannot tell who is who
        srcs = gs.sources_for([x for x in sent if x != H.cmd("getchallenge")])
        ports |= srcs
        print(f"{who:10} 127.0.0.1:{c.port:<7} {len(sent):>5} {got:>8}  "
              f"{', '.join(f'127.0.0.1:{a[1]}' for a in sorted(srcs)) or '-'}")
        if got != len(sent):
            problems.append(f"{who}: {got} answers for {len(sent)} packets")
        if len(srcs) != 1 or relay.port in {a[1] for a in srcs}:
            problems.append(f"{who}: game server saw it from {sorted(srcs)}")
    print(f"sessions seen by the game server: {len(ports)} (one socket per client, none of them "
          f"the public port :{relay.port})")
    print()
    print(f"on SIGTERM: exit status {rc}, flatline at the master: "
          f"{', '.join(t for _, t, _ in flat) or 'none'}")
    if rc != 0:
        problems.append(f"etrelay exited with status {rc} on SIGTERM, expected 0")
    print()
    print("etrelay's log (stderr), each line followed by what it means:")
    for line in relay.text_lines():
        what, bad = explain(line)
        print("  " + line)
        print("      " + ("PROBLEM: " if bad else "= ") + what)
        if bad:
            problems.append(f"etrelay logged: {line}")
    if problems:
        print()
        print("PROBLEMS:")
        for p in problems:
            print("  " + p)
    print()
    print("demo: OK, the relay works on this machine" if not problems else "demo: FAILED")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
