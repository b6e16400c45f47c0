#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""SIGTERM with --drain-timeout.

- No session: exit 0 at once (under 1 s) with the flatline, whatever the
  drain timeout.
- Sessions and --drain-timeout 2s: the open sessions keep every answer,
  a new client is refused, /readyz says draining, and etrelay exits 0
  after about 2 s (1.8 to 4 s) although the clients are still sending.
- --drain-timeout 10s, --session-timeout 1s, clients gone quiet: etrelay
  exits when the last session expires, long before 10 s.
- A second SIGTERM during a drain exits at once.
- Without --drain-timeout, sessions or not, SIGTERM exits at once.
- POST /lifecycle/resume during a SIGTERM drain neither makes /readyz 200
  nor lets a new client in."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def setup(ctx, *extra, env=None):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)  # no session of its own
    relay = H.relay_env(ctx, env or {}, "--master", f"127.0.0.1:{master.port}",
                        "--upstream", f"127.0.0.1:{gs.port}", *extra)
    relay.wait_for_line(r"^server up: ", 5.0)
    H.wait_until(master.heartbeat_list, 3.0, "a heartbeat at the master stand-in")
    return gs, master, relay


def sigterm_and_wait(relay, limit, what):
    t = time.monotonic()
    relay.signal(signal.SIGTERM)
    rc = relay.wait_exit(limit)
    took = time.monotonic() - t
    H.check(rc is not None, f"{what}: etrelay still running {limit:g} s after SIGTERM")
    H.expect_eq(rc, 0, f"{what}: exit status")
    relay._join_readers()
    return t, took


def no_session(ctx):
    gs, master, relay = setup(ctx, "--drain-timeout", "10s")
    t, took = sigterm_and_wait(relay, 3.0, "SIGTERM with no session")
    H.check(took < 1.0, f"SIGTERM with no session and --drain-timeout 10s took {took:.2f} s to exit")
    fl = H.wait_until(master.flatline_list, 1.0, "the flatline after SIGTERM")
    H.expect_eq([(tag, a) for _, tag, a in fl], [("ETFlatline-1", relay.addr)], "flatlines")
    H.expect_eq(relay.count(r"^(?:SIG)?[A-Z]+: draining "), 0, "'draining' lines with no session to drain")
    H.expect_eq(relay.count(r"^exiting on SIGTERM$"), 1, "'exiting on SIGTERM' lines")
    ctx.note(f"no session: exit 0 in {took:.2f} s with the flatline")
    gs.stop(); master.stop()


def drain_timeout_passes(ctx):
    tok = os.urandom(24).hex()
    port = H.free_tcp_port()
    gs, master, relay = setup(ctx, "--drain-timeout", "2s", "--ops-listen", f"127.0.0.1:{port}",
                              env={"ETRELAY_LIFECYCLE_TOKEN": tok})
    pinger = H.Pinger(relay.addr, n=3, interval=0.01, timeout=0.5, max_seconds=20.0,
                      max_packets=5000)
    ctx.objs.append(pinger)
    pinger.start()
    pinger.wait_answers(10, 5.0, "answers before SIGTERM")
    mark = relay.mark()

    t_sig = time.monotonic()
    relay.signal(signal.SIGTERM)
    relay.wait_for_line(r"^(?:SIG)?TERM: draining 3 sessions for up to 2000 ms$", 1.0, mark)
    r = H.http_request(port, "GET", "/readyz")
    H.expect_eq((r.status, r.body), (503, b"draining\n"), "/readyz during the SIGTERM drain")
    life = H.http_request(port, "GET", "/lifecycle", token=tok).json()
    H.expect_eq((life["state"], life["details"]["active_sessions"]), ("draining", 3),
                "/lifecycle state and sessions during the SIGTERM drain")
    # a newcomer is turned away
    newc = ctx.client(relay)
    probes = [newc.game(b"\x03late-%d-" % i + os.urandom(6).hex().encode()) for i in range(3)]
    for p in probes:
        newc.send(p)
        got = newc.try_recv(0.15)
        H.check(got is None, f"a new client was answered during the SIGTERM drain: {H.short(got)}")
    H.expect_eq(gs.sources_for(probes), set(), "the new client's packets at the game server")
    s = H.parse_metrics(H.http_request(port, "GET", "/metrics", token=tok).text)
    H.expect_eq(H.metric_value(s, "etrelay_lifecycle_work_refused_total"), 3.0,
                "etrelay_lifecycle_work_refused_total during the SIGTERM drain")
    # the open sessions keep going
    pinger.wait_answers(20, 1.2, "answers during the SIGTERM drain")
    H.check(relay.alive(), "etrelay exited before the drain timeout")

    rc = relay.wait_exit(5.0)
    t_exit = time.monotonic()
    took = t_exit - t_sig
    H.check(rc is not None, "etrelay still running 5 s after SIGTERM with --drain-timeout 2s")
    H.expect_eq(rc, 0, "exit status after the drain timeout")
    H.check(1.8 <= took <= 4.0, f"exit {took:.2f} s after SIGTERM with --drain-timeout 2s "
            f"(expected 1.8 to 4 s)")
    H.check(pinger.threads and all(t.is_alive() for t in pinger.threads),
            "the clients were supposed to still be sending when etrelay exited")
    pinger.stop()
    relay._join_readers()
    lost = [r for r in pinger.lost(sent_before=t_exit - 0.3)]
    H.check(not lost, f"{len(lost)} answers lost during the drain, first sent "
            f"{lost[0][2] - t_sig:.2f} s after SIGTERM" if lost else "")
    after = [r for r in pinger.snapshot() if r[2] >= t_sig and r[3] is not None]
    per = [sum(1 for r in after if r[0] == i) for i in range(3)]
    H.check(min(per) >= 30, f"answers per client after SIGTERM: {per} (expected >= 30 each over ~2 s)")
    H.expect_eq(relay.count(r"^exiting on SIGTERM$", mark), 1, "'exiting on SIGTERM' lines")
    H.check(relay.count(r"^stats default: sessions opened 3 closed 3 active 0;", mark) == 1,
            f"stats line at exit: {relay.text_lines()[-1:]}")
    fl = H.wait_until(master.flatline_list, 1.0, "the flatline after the drain")
    H.expect_eq(len(fl), 1, "flatlines after the drain")
    ctx.note(f"--drain-timeout 2s with 3 busy clients: exit 0 after {took:.2f} s, answers after "
             f"SIGTERM {per}")
    gs.stop(); master.stop()


def sessions_expire(ctx):
    gs, master, relay = setup(ctx, "--drain-timeout", "10s", "--session-timeout", "1s", "--debug")
    clients = [ctx.client(relay) for _ in range(3)]
    for k in range(5):
        for i, c in enumerate(clients):
            p = c.game(b"\x04quiet-%d-%d" % (i, k))
            H.expect_eq(c.request(p), b"ECHO:" + p, f"echo {k} of client {i}")
    t_last = time.monotonic()
    mark = relay.mark()
    t_sig = time.monotonic()
    relay.signal(signal.SIGTERM)
    relay.wait_for_line(r"^(?:SIG)?TERM: draining 3 sessions for up to 10000 ms$", 1.0, mark)
    rc = relay.wait_exit(8.0)
    t_exit = time.monotonic()
    H.check(rc is not None, "etrelay still running 8 s after SIGTERM although every session "
            "should have expired after 1 s")
    H.expect_eq(rc, 0, "exit status once the sessions expired")
    relay._join_readers()
    since_last = t_exit - t_last
    H.check(0.8 <= since_last <= 2.5,
            f"exit {since_last:.2f} s after the last packet ({t_exit - t_sig:.2f} s after SIGTERM); "
            f"expected about --session-timeout 1s")
    idle = relay.find_lines(r"^session - 127\.0\.0\.1:(\d+) \(idle, \d+ active\)$", mark)
    H.expect_eq(sorted(int(m.group(1)) for _, m in idle), sorted(c.port for c in clients),
                "clients whose sessions closed idle during the drain")
    (i_exit, _), = relay.find_lines(r"^exiting on SIGTERM$", mark)
    H.check(all(i < i_exit for i, _ in idle), "'exiting on SIGTERM' before the sessions expired")
    ctx.note(f"--drain-timeout 10s, sessions expiring after 1s: exit {t_exit - t_sig:.2f} s "
             f"after SIGTERM")
    gs.stop(); master.stop()


def second_sigterm(ctx):
    gs, master, relay = setup(ctx, "--drain-timeout", "30s")
    pinger = H.Pinger(relay.addr, n=2, interval=0.01, timeout=0.5, max_seconds=20.0)
    ctx.objs.append(pinger)
    pinger.start()
    pinger.wait_answers(5, 5.0)
    mark = relay.mark()
    relay.signal(signal.SIGTERM)
    relay.wait_for_line(r"^(?:SIG)?TERM: draining 2 sessions for up to 30000 ms$", 1.0, mark)
    pinger.wait_answers(10, 2.0, "answers during the drain")
    H.check(relay.alive(), "etrelay exited during a 30 s drain with busy clients")
    t, took = sigterm_and_wait(relay, 3.0, "second SIGTERM")
    H.check(took < 1.0, f"the second SIGTERM took {took:.2f} s to end etrelay")
    pinger.stop()
    H.expect_eq(relay.count(r"^exiting on SIGTERM$", mark), 1, "'exiting on SIGTERM' lines")
    ctx.note(f"second SIGTERM during a drain: exit 0 in {took:.2f} s")

    # no --drain-timeout: sessions or not, at once
    relay = H.relay_env(ctx, {}, "--master", f"127.0.0.1:{master.port}",
                        "--upstream", f"127.0.0.1:{gs.port}")
    pinger = H.Pinger(relay.addr, n=2, interval=0.01, timeout=0.5, max_seconds=20.0)
    ctx.objs.append(pinger)
    pinger.start()
    pinger.wait_answers(5, 5.0)
    t, took = sigterm_and_wait(relay, 3.0, "SIGTERM without --drain-timeout")
    pinger.stop()
    H.check(took < 1.0, f"SIGTERM with sessions and no --drain-timeout took {took:.2f} s")
    H.expect_eq(relay.count(r"^(?:SIG)?[A-Z]+: draining "), 0, "'draining' lines without --drain-timeout")
    gs.stop(); master.stop()


def resume_during_sigterm_drain(ctx):
    """The SIGTERM drain is the way out: POST /lifecycle/resume must not
    make a terminating etrelay ready again nor let new sessions in."""
    tok = os.urandom(24).hex()
    port = H.free_tcp_port()
    gs, master, relay = setup(ctx, "--drain-timeout", "30s", "--ops-listen", f"127.0.0.1:{port}",
                              env={"ETRELAY_LIFECYCLE_TOKEN": tok})
    c = ctx.client(relay)
    old = c.game(b"\x04old")
    H.expect_eq(c.request(old), b"ECHO:" + old, "echo before SIGTERM")
    mark = relay.mark()
    relay.signal(signal.SIGTERM)
    relay.wait_for_line(r"^(?:SIG)?TERM: draining 1 session for up to 30000 ms$", 1.0, mark)
    r = H.http_request(port, "POST", "/lifecycle/resume", token=tok)
    ctx.note(f"POST /lifecycle/resume during the SIGTERM drain: HTTP {r.status} {H.short(r.body, 80)}")
    r = H.http_request(port, "GET", "/readyz")
    newc = ctx.client(relay)
    newc.send(newc.game(b"\x04new-after-resume"))
    got = newc.try_recv(0.5)
    H.check(r.status == 503 and got is None,
            f"after SIGTERM (drain under way) and POST /lifecycle/resume: /readyz {r.status} "
            f"{r.body!r} and a new client {'was answered' if got else 'got nothing'}; expected "
            f"503 and no answer: a terminating relay must keep refusing new sessions")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(3.0), 0, "exit status after a second SIGTERM")
    gs.stop(); master.stop()


def test(ctx):
    H.run_parts(ctx, [no_session, drain_timeout_passes, sessions_expire, second_sigterm,
                      resume_during_sigterm_drain])


if __name__ == "__main__":
    H.main(test)
