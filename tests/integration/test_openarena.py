# SPDX-License-Identifier: ISC
"""End to end against a real game server: OpenArena (ioquake3, protocol 71)
behind etrelay, a master stand-in in front, and qstat as the server browser.

    python3 test_openarena.py <etrelay-binary> <io_uring|epoll>

Skipped (77) when /usr/games/openarena-server or quakestat is not installed,
or when the requested backend is unavailable (etrelay exits 69).

What it checks:
  1. etrelay --game q3 probes the real server and heartbeats
     "heartbeat QuakeArena-1" to the master FROM its public port;
  2. the master's getinfo challenge, sent to that address, is answered by
     the real OpenArena server through the relay (infoResponse echoing the
     challenge, from the relay's public address), so the master lists the
     relay's address;
  3. quakestat -q3s pointed at the relay reports the server's map and
     hostname (from qstat's -json output, cross-checked with -raw);
  4. the OpenArena server's own log shows the relay's queries (getstatus
     is sent by nobody but qstat) and etrelay's --debug log shows qstat's
     getinfo/getstatus passing through a session for qstat's source port;
  5. SIGTERM: exit 0, no flatline (Q3 has none).

Bounded: every wait has a timeout, the whole test takes about 1 s (SIGALRM
fails it after 55 s), the
OpenArena server runs with a temporary HOME and is killed in all cases.
What this test relies on in OpenArena is said in oa.py.
"""

import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from oa import OA_MAP, OA_SERVER, OpenArena, find_qstat, run_qstat  # noqa: E402

HEARTBEAT_TAG = "QuakeArena-1"
TEST_BUDGET = 55            # seconds; SIGALRM fails the test after this


def test(ctx):
    if not (os.path.isfile(OA_SERVER) and os.access(OA_SERVER, os.X_OK)):
        raise H.TestSkip(f"{OA_SERVER} is not installed (Debian package openarena-server)")
    qstat = find_qstat()
    if not qstat:
        raise H.TestSkip("quakestat is not installed (Debian package qstat)")

    hostname = "etrelay-oa-" + H.rand_token(8)
    oa = OpenArena(H.free_udp_port(), hostname)
    t0 = time.monotonic()
    ok = False
    try:
        # -- the real game server -------------------------------------------
        info = oa.wait_ready()
        H.log(f"openarena-server ready on {oa.addr} after {time.monotonic() - t0:.2f} s: "
              f"hostname {info.get('hostname')!r} map {info.get('mapname')!r} "
              f"protocol {info.get('protocol')}")
        H.expect_eq(info.get("hostname"), hostname, "OpenArena hostname (direct getinfo)")
        H.expect_eq(info.get("mapname"), OA_MAP, "OpenArena map (direct getinfo)")

        # -- master stand-in and relay ----------------------------------------
        master = ctx.master()
        relay = ctx.relay("--game", "q3",
                          "--upstream", f"{H.LOOPBACK}:{oa.port}",
                          "--master", f"{H.LOOPBACK}:{master.port}",
                          "--heartbeat-interval", "2s",
                          debug=True)
        ctx.note(f"relay public {relay.addr}, upstream {oa.addr}, master {master.addr}")
        relay.wait_for_line(r"^server up: 127\.0\.0\.1:%d answered the probe" % oa.port,
                            timeout=10, what="the relay's probe answered by OpenArena")

        # 1. heartbeat from the relay's public port
        hb = H.wait_until(
            lambda: [h for h in master.heartbeat_list() if h[2] == relay.addr],
            timeout=8, what=f"a heartbeat at the master from the relay's public address {relay.addr}")
        tags = {h[1] for h in master.heartbeat_list()}
        H.expect_eq(tags, {HEARTBEAT_TAG}, "heartbeat tags received by the master")
        others = [h for h in master.heartbeat_list() if h[2] != relay.addr]
        H.check(not others, f"heartbeats from an address other than the relay's public port: {others}")
        relay.wait_for_line(r"^heartbeat %s -> 127\.0\.0\.1:%d" % (HEARTBEAT_TAG, master.port),
                            timeout=3, what="the debug line for the heartbeat")
        ctx.note(f"heartbeat {hb[0][1]} from {hb[0][2]}")

        # 2. challenge answered by OpenArena through the relay; master lists it
        H.wait_until(lambda: relay.addr in master.listed_set(), timeout=6,
                     what=f"the master to list the relay's address {relay.addr} "
                          f"(rejected so far: {master.rejected})")
        with master.lock:
            challenges = [c for c in master.challenges if c[2] == relay.addr]
            answers = [p for p in master.received
                       if p.addr == relay.addr and p.data.startswith(H.cmd("infoResponse"))]
        H.check(challenges, "the master never challenged the relay")
        sent = {c[1] for c in challenges}
        answered = {}
        for p in answers:
            inf = H.parse_info(H.split_command(p.data)[1].strip())
            if inf.get("challenge") in sent:
                answered[inf["challenge"]] = inf
        H.check(answered, f"no infoResponse from {relay.addr} echoed a challenge of {sorted(sent)}")
        inf = next(iter(answered.values()))
        H.expect_eq(inf.get("hostname"), hostname,
                    "hostname in the infoResponse the master got through the relay")
        H.expect_eq(inf.get("mapname"), OA_MAP,
                    "mapname in the infoResponse the master got through the relay")
        H.expect_eq(inf.get("protocol"), "71",
                    "protocol in the infoResponse the master got through the relay")
        bad = [r for r in master.rejected if r[2] == relay.addr]
        H.check(not bad, f"the master rejected packets from the relay: {bad}")
        relay.wait_for_line(r"^127\.0\.0\.1:%d -> \S+\s+getinfo \(\d+ B\)" % master.port,
                            timeout=3, what="debug line: master's getinfo forwarded upstream")
        relay.wait_for_line(r"^127\.0\.0\.1:%d <- \S+\s+infoResponse \(\d+ B\)" % master.port,
                            timeout=3, what="debug line: OpenArena's infoResponse back to the master")
        H.check(oa.packets_logged("127.0.0.1", "getinfo") >= 1,
                "OpenArena's log shows no getinfo from the relay (127.0.0.1)")
        ctx.note(f"master listed {relay.addr}; challenge {next(iter(answered))} answered "
                 f"by {inf.get('hostname')} on {inf.get('mapname')}")

        # 3. quakestat through the relay (JSON, then raw), from known ports
        status_before = oa.packets_logged("127.0.0.1", "getstatus")
        qport = H.free_udp_port()
        # -R -P: qstat sends getinfo, then getstatus for the rules and players
        r = run_qstat(qstat, ["-json", "-R", "-P"], relay.addr, qport)
        H.expect_eq(r.returncode, 0, "quakestat -json exit status")
        try:
            doc = json.loads(r.stdout)
        except ValueError as e:
            H.fail(f"quakestat -json output is not JSON ({e}): {H.short(r.stdout, 400)}")
        H.check(isinstance(doc, list) and len(doc) == 1,
                f"quakestat -json: expected one server, got {H.short(doc, 400)}")
        srv = doc[0]
        H.expect_eq(srv.get("status"), "online", "quakestat status of the relay's address")
        H.expect_eq(srv.get("address"), f"{relay.addr[0]}:{relay.addr[1]}", "quakestat address")
        H.expect_eq(srv.get("map"), OA_MAP, "map reported by quakestat through the relay")
        H.expect_eq(srv.get("name"), hostname, "hostname reported by quakestat through the relay")
        H.expect_eq(srv.get("maxplayers"), int(info.get("sv_maxclients", "8")),
                    "maxplayers reported by quakestat through the relay")
        rules = srv.get("rules") or {}
        H.expect_eq(rules.get("sv_hostname"), hostname,
                    "sv_hostname rule (statusResponse) reported by quakestat through the relay")
        H.expect_eq(rules.get("mapname", OA_MAP), OA_MAP, "mapname rule reported by quakestat")

        # qstat's queries in etrelay's debug log, under qstat's source port
        relay.wait_for_line(r"^session \+ 127\.0\.0\.1:%d\b" % qport, timeout=3,
                            what="a session for quakestat's source port")
        relay.wait_for_line(r"^127\.0\.0\.1:%d -> \S+\s+getinfo \(\d+ B\)" % qport, timeout=3,
                            what="debug line: quakestat's getinfo forwarded")
        relay.wait_for_line(r"^127\.0\.0\.1:%d -> \S+\s+getstatus \(\d+ B\)" % qport, timeout=3,
                            what="debug line: quakestat's getstatus forwarded")
        relay.wait_for_line(r"^127\.0\.0\.1:%d <- \S+\s+statusResponse \(\d+ B\)" % qport,
                            timeout=3, what="debug line: OpenArena's statusResponse back to quakestat")
        # ... and in OpenArena's own log: nobody but qstat sends getstatus,
        # and the relay is the only sender on 127.0.0.1
        H.wait_until(lambda: oa.packets_logged("127.0.0.1", "getstatus") > status_before,
                     timeout=3, what="OpenArena to log 'SV packet 127.0.0.1 : getstatus'")

        # same answer in qstat's -raw format (delimiter that no field contains)
        qport2 = H.free_udp_port()
        r = run_qstat(qstat, ["-raw", "|"], relay.addr, qport2)
        H.expect_eq(r.returncode, 0, "quakestat -raw exit status")
        rows = [l.split("|") for l in r.stdout.splitlines() if l.strip()]
        H.check(rows and len(rows[0]) >= 6,
                f"quakestat -raw: unexpected output {H.short(r.stdout, 400)}")
        row = rows[0]
        # Q3S|address|name|map|maxplayers|players|ping|retries
        H.expect_eq(row[0], "Q3S", "quakestat -raw server type")
        H.expect_eq(row[1], f"{relay.addr[0]}:{relay.addr[1]}", "quakestat -raw address")
        H.expect_eq(row[2], hostname, "quakestat -raw hostname through the relay")
        H.expect_eq(row[3], OA_MAP, "quakestat -raw map through the relay")

        H.check(oa.alive(), f"openarena-server died (status {oa.proc.returncode})")
        ctx.check_relays_alive()

        # 5. SIGTERM: exit 0, and no flatline for Q3
        mark = relay.mark()
        relay.signal(signal.SIGTERM)
        rc = relay.wait_exit(5.0)
        H.check(rc is not None, "etrelay did not exit within 5 s of SIGTERM")
        H.expect_eq(rc, 0, "etrelay exit status after SIGTERM")
        time.sleep(0.2)
        H.expect_eq(master.flatline_list(), [], "flatlines at the master (Q3 has no flatline tag)")
        H.check(not relay.find_lines(r"^flatline", mark),
                "etrelay logged a flatline for --game q3 (which has none)")
        ok = True
        ctx.note(f"done in {time.monotonic() - t0:.1f} s; OpenArena saw "
                 f"{oa.packets_logged('127.0.0.1', 'getinfo')} getinfo and "
                 f"{oa.packets_logged('127.0.0.1', 'getstatus')} getstatus from the relay")
    finally:
        if not ok:
            oa.dump()
        oa.close()
        if ok:
            oa.remove_tmp()
        else:
            print(f"--- OpenArena temp dir kept: {oa.tmp}")


def _over_budget(signum, frame):
    raise H.TestFailure(f"the test took longer than {TEST_BUDGET} s")


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, _over_budget)
    signal.alarm(TEST_BUDGET)
    H.main(test)
