#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""etrelay in 10 seconds, on loopback.

    python3 tests/integration/demo.py build/src/etrelay

Starts etrelay (backend auto) in front of a stand-in game server, with a
stand-in master, a server browser and two players, and prints what each of
them saw. Exit 0 only when the master listed the relay's address and every
round trip worked."""

import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def main():
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} <etrelay-binary>", file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    if not os.access(binary, os.X_OK):
        print(f"{binary}: not an executable", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))

    gs = H.GameServer(status_size=1400)
    master = H.Master()
    relay = H.Relay(binary, "auto", ["--upstream", f"127.0.0.1:{gs.port}",
                                     "--master", f"127.0.0.1:{master.port}",
                                     "--heartbeat-interval", "5s"])
    ok = True
    problems = []
    rows = []  # (who, client addr, sent, received, session port at the game server)
    try:
        relay.wait_ready(5.0)
        H.wait_until(master.listed_set, 3.0, "the master to list the relay")

        # a server browser that found us at the master
        browser = H.Client(relay.addr, timeout=2.0)
        st = browser.request(H.cmd("getstatus\n"), what="statusResponse")
        if not st.startswith(H.cmd("statusResponse\n")):
            problems.append(f"browser got {H.short(st)} for getstatus")
        rows.append(("browser", browser, [H.cmd("getstatus\n")], 1 if st else 0))

        # two players: handshake, then in-game traffic
        for name in ("player1", "player2"):
            p = H.Client(relay.addr, timeout=2.0)
            sent = []
            got = 0
            r = p.request(H.cmd("getchallenge"), what="challengeResponse")
            sent.append(H.cmd("getchallenge"))
            m = re.fullmatch(rb"\xff\xff\xff\xffchallengeResponse (\d+)", r)
            if not m:
                problems.append(f"{name}: getchallenge answered with {H.short(r)}")
                continue
            got += 1
            conn = H.cmd(f'connect "\\challenge\\{m.group(1).decode()}\\name\\{name}"')
            r = p.request(conn, what="connectResponse")
            sent.append(conn)
            if r.startswith(H.cmd("connectResponse")):
                got += 1
            else:
                problems.append(f"{name}: connect answered with {H.short(r)}")
            for i in range(20):
                payload = f"{name} usercmd {i}".encode()
                r = p.request(payload, what=f"in-game answer {i}")
                sent.append(payload)
                if r == b"ECHO:" + payload:
                    got += 1
                else:
                    problems.append(f"{name}: packet {i} answered with {H.short(r)}")
            rows.append((name, p, sent, got))
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

    print("etrelay demo")
    print(f"  relay public address   127.0.0.1:{relay.port}")
    print(f"  game server            127.0.0.1:{gs.port}")
    print(f"  master                 127.0.0.1:{master.port}")
    print()
    hbs = master.heartbeat_list()
    print(f"master: {len(hbs)} heartbeat(s) "
          f"({', '.join(sorted({t for _, t, _ in hbs}))}) from "
          f"{', '.join(sorted({f'{a[0]}:{a[1]}' for _, _, a in hbs}))}")
    print(f"master lists: {', '.join(f'{a[0]}:{a[1]}' for a in sorted(listed)) or 'nothing'}")
    if listed == {relay.addr}:
        print("  -> the relay's address, not the game server's: registration works")
    else:
        ok = False
        problems.append(f"master listed {sorted(listed)}, expected only {relay.addr}")
    print()
    print(f"{'client':10} {'address':17} {'sent':>5} {'answers':>8}  session socket at the game server")
    ports = set()
    for who, c, sent, got in rows:
        # packets every player sends alike (getchallenge) cannot tell who is who
        srcs = gs.sources_for([x for x in sent if x != H.cmd("getchallenge")])
        ports |= srcs
        print(f"{who:10} 127.0.0.1:{c.port:<7} {len(sent):>5} {got:>8}  "
              f"{', '.join(f'127.0.0.1:{a[1]}' for a in sorted(srcs))}")
        if got != len(sent):
            ok = False
            problems.append(f"{who}: {got} answers for {len(sent)} packets")
        if len(srcs) != 1 or relay.port in {a[1] for a in srcs}:
            ok = False
            problems.append(f"{who}: game server saw it from {sorted(srcs)}")
    print(f"sessions seen by the game server: {len(ports)} (one socket per client, none of them "
          f"the public port :{relay.port})")
    print()
    print(f"on SIGTERM: exit status {rc}, flatline at the master: "
          f"{', '.join(t for _, t, _ in flat) or 'none'}")
    print()
    print("etrelay log:")
    for line in relay.text_lines():
        print("  " + line)
    if problems:
        ok = False
        print()
        print("PROBLEMS:")
        for p in problems:
            print("  " + p)
    print()
    print("demo: OK" if ok else "demo: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
