#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Workers: one loop per core, a client's address picks its worker.

    python3 test_workers.py <etrelay-binary> <io_uring|epoll>

Every part starts etrelay with --workers 2 and reads the reuseport
program's key from its log line ("workers 2: ... (reuseport key 0x...)").
MODEL below is the C model in src/core/reuseport.c (test_reuseport shows that the
BPF program computes it); here the kernel is shown to agree. Clients are
distinct loopback addresses 127.1.x.y (harness.spread_ip); the stand-in
master sits on 127.0.0.1, which the program steers to worker 0.

  one_address       an address the model puts on worker 1 sends from 50
                    source ports, one on worker 0 from 50 more: each
                    worker's etrelay_worker_forwarded_datagrams_total{up}
                    grows by exactly its 50, /sessions names the worker of
                    each; /lifecycle and /metrics say 2 workers
  spread            200 addresses, one query each: every session is on the
                    worker the model says, each worker has at least 50
  per_ip            --sessions-per-ip 8: one address, 50 ports, gets exactly
                    8 sessions (the per-IP rules are exact, not 8 per worker)
  max_sessions      --max-sessions 10 and 40 players from 40 addresses over
                    both workers: exactly 10 sessions, 30 refused table_full
                    (a cap per worker would let up to 20 in)
  query_budget      --server-query-burst 40 --server-query-rate 2, cache off:
                    400 getstatus from 100 addresses over 3 s; the game
                    server sees at most 40 + 2/s (a budget per worker would
                    pass up to twice that), and at least 30
  masters           8 masters on 127.2.0.1-8 (some hash to worker 1): all
                    get their challenge answered through worker 0, the owner
                    that heartbeats them: listing_confirmed for all 8
  qport_across      a player on worker 1 holds its qport: in-game packets with
                    it from an address on worker 0 are refused (qport_owned),
                    the line names the player
  bans              SIGHUP with a ban-file naming an address on worker 1:
                    that worker drops it (banned), its neighbour is served
  port_taken        a second etrelay on a port the first holds (--workers 2,
                    and --workers 1 beside --workers 1) exits 1 naming the
                    port as in use, and the first keeps the traffic: the
                    second would have joined the first's SO_REUSEPORT group
                    (or bound beside it with SO_REUSEADDR) and taken a share
  auto              --workers auto: as many workers as CPUs in the affinity
                    mask (/lifecycle): 1 under taskset -c 0
"""

import os
import re
import shutil
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

KEY_RE = H.WORKERS_RE


def model(key, ip, workers=2, steer=("127.0.0.1",)):
    """reuseport_pick() of src/core/reuseport.c for an IPv4 address."""
    return H.reuseport_worker(key, ip, workers, steer)


def start(ctx, *args, env=None, ops=True):
    """etrelay --workers 2 in front of a stand-in game server, a master on
    127.0.0.1, the ops plane; returns (relay, gs, key, port, token)."""
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    port = H.free_tcp_port()
    tok = os.urandom(16).hex()
    a = ["--upstream", f"127.0.0.1:{gs.port}", "--master", f"127.0.0.1:{master.port}",
         "--ops-listen", f"127.0.0.1:{port}", "--workers", "2"] + list(args)
    relay = H.relay_env(ctx, dict(env or {}, ETRELAY_LIFECYCLE_READ_TOKEN=tok,
                                  ETRELAY_METRICS_TOKEN=tok), *a)
    _, m, _ = relay.wait_for_line(KEY_RE, timeout=1, what="the workers line")
    H.expect_eq(int(m.group(1)), 2, "workers in the log line")
    relay.wait_for_line(r"^server up: ", timeout=10, what="the first probe answered")
    return relay, gs, int(m.group(2), 16), port, tok


def stop(relay):
    """SIGTERM reaches every worker: the process exits 0, with one line of
    counters per relay."""
    relay.expect_exit = True
    relay.signal(signal.SIGTERM)
    rc = relay.wait_exit(5.0 * H.SLOW)
    H.expect_eq(rc, 0, "exit status on SIGTERM")
    relay.wait_for_line(r"^stats default: sessions opened", timeout=2, what="the stats at exit")
    relay.close()


def addresses_on(key, worker, n, start_at=0):
    """n spread addresses the model puts on worker."""
    out = []
    for i in range(start_at, start_at + 5000):
        ip = H.spread_ip(i)
        if model(key, ip) == worker:
            out.append(ip)
            if len(out) == n:
                return out
    H.fail(f"fewer than {n} of 5000 addresses on worker {worker}: the model is broken")


def worker_up(samples):
    return [H.counter(samples, "etrelay_worker_forwarded_datagrams_total", worker=str(w),
                      direction="up") for w in range(2)]


def sessions_by_client(port, tok):
    s = H.get_json(port, "/sessions", tok)["sessions"]
    return {x["client"]: x for x in s}


def one_address(ctx):
    relay, gs, key, port, tok = start(ctx)
    before = worker_up(H.get_metrics(port, tok))
    ip = {w: addresses_on(key, w, 1)[0] for w in (0, 1)}
    clients = {w: [H.client_on(ctx, relay, ip[w], timeout=2.0) for _ in range(50)] for w in (0, 1)}
    for w in (0, 1):
        for c in clients[w]:
            c.request(H.cmd("getinfo x"), what=f"the infoResponse ({ip[w]}, worker {w})")
    samples = H.get_metrics(port, tok)
    after = worker_up(samples)
    ctx.note(f"key 0x{key:08x}: {ip[0]} -> worker 0, {ip[1]} -> worker 1 by the model; "
             f"forwarded up per worker grew by {after[0] - before[0]}, {after[1] - before[1]}")
    H.expect_eq(after[0] - before[0], 50, "worker 0's forwarded{up} growth (50 ports of one address)")
    H.expect_eq(after[1] - before[1], 50, "worker 1's forwarded{up} growth (50 ports of one address)")
    by = sessions_by_client(port, tok)
    for w in (0, 1):
        for c in clients[w]:
            s = by.get(f"{c.addr[0]}:{c.addr[1]}")
            H.check(s is not None, f"no session for {c.addr}")
            H.expect_eq(s["worker"], w, f"/sessions worker of {c.addr}")
    H.expect_eq(H.counter(samples, "etrelay_workers"), 2, "etrelay_workers")
    H.expect_eq(H.counter(samples, "etrelay_worker_sessions_active", worker="1"), 50,
                "etrelay_worker_sessions_active{worker=\"1\"}")
    H.expect_eq(H.get_json(port, "/lifecycle", tok)["workers"], 2, "/lifecycle workers")
    stop(relay)


def spread(ctx):
    relay, gs, key, port, tok = start(ctx)
    clients = [H.client_on(ctx, relay, H.spread_ip(i), timeout=2.0) for i in range(200)]
    for c in clients:
        c.send(H.cmd("getinfo x"))
    for c in clients:
        c.recv(what=f"the infoResponse to {c.addr[0]}")
    by = sessions_by_client(port, tok)
    n = [0, 0]
    wrong = []
    for c in clients:
        s = by.get(f"{c.addr[0]}:{c.addr[1]}")
        H.check(s is not None, f"no session for {c.addr}")
        n[s["worker"]] += 1
        if s["worker"] != model(key, c.addr[0]):
            wrong.append((c.addr[0], s["worker"], model(key, c.addr[0])))
    ctx.note(f"200 addresses: {n[0]} on worker 0, {n[1]} on worker 1; "
             f"{len(wrong)} not where the model says")
    H.check(not wrong, f"sessions on another worker than the model's (ip, seen, model): {wrong[:5]}")
    H.check(min(n) >= 50, f"200 addresses spread {n[0]}/{n[1]} over the two workers")
    stop(relay)


def per_ip(ctx):
    relay, gs, key, port, tok = start(ctx, "--sessions-per-ip", "8")
    ip = addresses_on(key, 1, 1)[0]
    clients = [H.client_on(ctx, relay, ip, timeout=0.5) for _ in range(50)]
    before = H.get_metrics(port, tok)
    for c in clients:
        c.send(H.cmd("getinfo x"))
    time.sleep(0.5)
    got = sum(c.try_recv(0.01) is not None for c in clients)
    after = H.get_metrics(port, tok)
    refused = H.drops(after, "ip_sessions") - H.drops(before, "ip_sessions")
    ctx.note(f"{ip} from 50 ports, --sessions-per-ip 8: {got} answered, "
             f"{H.counter(after, 'etrelay_sessions_active')} sessions, {refused} refused")
    H.expect_eq(H.counter(after, "etrelay_sessions_active"), 8, "sessions of one address")
    H.expect_eq(got, 8, "answers to one address's 50 ports")
    H.expect_eq(refused, 42, "dropped{reason=\"ip_sessions\"} growth")
    stop(relay)


def max_sessions(ctx):
    relay, gs, key, port, tok = start(ctx, "--max-sessions", "10")
    # 20 addresses on each worker by the model, alternating: the key is
    # random, and 40 addresses picked blindly may split 29/11 or worse.
    w0, w1 = addresses_on(key, 0, 20), addresses_on(key, 1, 20)
    ips = [ip for pair in zip(w0, w1) for ip in pair]
    clients = [H.client_on(ctx, relay, ip, timeout=0.5) for ip in ips]
    on = [model(key, c.addr[0]) for c in clients]
    # One at a time: an answered player is never evicted for the next.
    for i, c in enumerate(clients):
        c.send(c.game(b"hello"))
        if i < 10:
            c.recv(timeout=2.0, what=f"the echo to player {i + 1} of 10")
    time.sleep(0.5)
    served = 10 + sum(c.try_recv(0.01) is not None for c in clients[10:])
    samples = H.get_metrics(port, tok)
    active = H.counter(samples, "etrelay_sessions_active")
    per = [H.counter(samples, "etrelay_worker_sessions_active", worker=str(w)) for w in (0, 1)]
    full = H.drops(samples, "table_full")
    ctx.note(f"40 players ({on.count(0)} on worker 0, {on.count(1)} on worker 1 by the model), "
             f"--max-sessions 10: {active} sessions ({per[0]} + {per[1]}), {full} refused")
    H.expect_eq((on.count(0), on.count(1)), (20, 20), "players per worker by the model")
    H.expect_eq(served, 10, "players answered")
    H.expect_eq(active, 10, "etrelay_sessions_active (a total across workers)")
    H.expect_eq(per[0] + per[1], 10, "the workers' sessions together")
    H.expect_eq(full, 30, "dropped{reason=\"table_full\"}")
    stop(relay)


def query_budget(ctx):
    burst, rate, secs = 40, 2, 3.0
    relay, gs, key, port, tok = start(ctx, "--server-query-burst", str(burst),
                                      "--server-query-rate", str(rate), "--query-cache", "0")
    clients = [H.client_on(ctx, relay, H.spread_ip(i), timeout=0.2) for i in range(100)]
    on = [model(key, c.addr[0]) for c in clients]
    q0 = len(gs.packets(lambda p: p.data.startswith(H.cmd("getstatus"))))
    t0 = time.monotonic()
    for rnd in range(4):
        for c in clients:
            c.send(H.cmd("getstatus"))
        delay = t0 + (rnd + 1) * secs / 4 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    t = time.monotonic() - t0
    time.sleep(0.3)
    seen = len(gs.packets(lambda p: p.data.startswith(H.cmd("getstatus")))) - q0
    bound = burst + int(rate * t) + 2
    ctx.note(f"400 getstatus from 100 addresses ({on.count(0)}/{on.count(1)} per worker) in "
             f"{t:.1f} s, budget {burst} + {rate}/s: the game server saw {seen} (bound {bound})")
    H.check(seen <= bound, f"the game server saw {seen} getstatus, more than the budget's "
            f"{burst} + {rate}/s x {t:.1f} s + 2 = {bound}: a budget per worker?")
    H.check(seen >= 30, f"the game server saw only {seen} getstatus of a budget of {burst}")
    stop(relay)


def masters(ctx):
    gs = ctx.game_server()
    ms = []
    for i in range(8):
        m = H.stand_in_on(H.Master, f"127.2.0.{i + 1}", window=2.0 * H.SLOW)
        ctx.objs.append(m)
        ms.append(m)
    port = H.free_tcp_port()
    tok = os.urandom(16).hex()
    args = ["--upstream", f"127.0.0.1:{gs.port}", "--ops-listen", f"127.0.0.1:{port}",
            "--workers", "2"]
    for m in ms:
        args += ["--master", f"{m.addr[0]}:{m.port}"]
    relay = H.relay_env(ctx, {"ETRELAY_LIFECYCLE_READ_TOKEN": tok}, *args)
    _, mk, _ = relay.wait_for_line(KEY_RE, timeout=1, what="the workers line")
    key = int(mk.group(2), 16)
    hashed = [model(key, m.addr[0], steer=()) for m in ms]
    H.wait_until(lambda: all(x["listing_confirmed"] for x in
                             H.get_json(port, "/lifecycle", tok)["relays"][0]["masters"]),
                 timeout=10, what="every master's listing confirmed")
    # The relay counts a listing once its answer is sent; the master's
    # thread may take it in a moment later.
    deadline = time.monotonic() + 2.0 * H.SLOW
    while time.monotonic() < deadline and not all(m.listed_set() for m in ms):
        time.sleep(0.05)
    listed = sum(1 for m in ms if m.listed_set())
    rejected = [r for m in ms for r in m.rejected]
    ctx.note(f"8 masters, {hashed.count(1)} of them on worker 1 by the hash alone: all "
             f"confirmed through worker 0, {listed} list the relay")
    H.expect_eq(listed, 8, f"masters that list the relay (rejected: {rejected[:3]})")
    stop(relay)


def qport_across(ctx):
    relay, gs, key, port, tok = start(ctx)
    victim_ip, thief_ip = addresses_on(key, 1, 1)[0], addresses_on(key, 0, 1)[0]
    victim = H.client_on(ctx, relay, victim_ip, timeout=1.0)
    thief = H.client_on(ctx, relay, thief_ip, timeout=0.3)
    thief.qport = victim.qport
    victim.request(victim.game(b"mine"), what="the victim's echo")
    before = H.drops(H.get_metrics(port, tok), "qport_owned")
    mark = relay.mark()
    for i in range(5):
        thief.send(thief.game(b"steal", seq=i + 2))
        victim.request(victim.game(b"still mine", seq=i + 2), what="the victim's echo")
    H.check(thief.try_recv(0.3) is None, f"{thief_ip} (worker 0) took {victim_ip}'s qport "
            f"{victim.qport} (worker 1)")
    H.wait_until(lambda: H.drops(H.get_metrics(port, tok), "qport_owned") - before >= 5,
                 3 * H.SLOW, "the thief's five datagrams counted", interval=0.05)
    owned = H.drops(H.get_metrics(port, tok), "qport_owned") - before
    H.expect_eq(owned, 5, "dropped{reason=\"qport_owned\"} growth")
    relay.wait_for_line(rf"^relay default: {re.escape(thief_ip)}:\d+ sent qport "
                        rf"{victim.qport}, which {re.escape(victim_ip)}:\d+ holds: refused",
                        timeout=1, start=mark, what="the refusal naming the victim")
    ctx.note(f"qport {victim.qport}: {victim_ip} plays on worker 1, {thief_ip} on worker 0 "
             f"refused {owned} times")
    stop(relay)


def bans(ctx):
    d = ctx.tmpdir()
    path = os.path.join(d, "bans")
    with open(path, "w") as f:
        f.write("# empty\n")
    relay, gs, key, port, tok = start(ctx, "--ban-file", path)
    a, b = addresses_on(key, 1, 2)
    ca, cb = H.client_on(ctx, relay, a, timeout=0.5), H.client_on(ctx, relay, b, timeout=1.0)
    ca.request(ca.game(b"x"), what=f"an echo for {a} before the ban")
    with open(path, "w") as f:
        f.write(f"{a}\n")
    mark = relay.mark()
    relay.signal(signal.SIGHUP)
    relay.wait_for_line(r"^ban-file .*: 1 entries", timeout=3, start=mark, what="the reload")
    before = H.drops(H.get_metrics(port, tok), "banned")
    ca.send(ca.game(b"y"))
    H.check(ca.try_recv(0.5) is None, f"{a} (banned, on worker 1) still got an echo")
    cb.request(cb.game(b"z"), what=f"an echo for {b} (not banned, on worker 1)")
    H.wait_until(lambda: H.drops(H.get_metrics(port, tok), "banned") > before, 3 * H.SLOW,
                 "the banned datagram counted", interval=0.05)
    after = H.drops(H.get_metrics(port, tok), "banned")
    H.expect_eq(after - before, 1, "dropped{reason=\"banned\"} growth")
    stop(relay)


def port_of(relay):
    return int(relay.cmd[relay.cmd.index("--ops-listen") + 1].rsplit(":", 1)[1])


def port_taken(ctx):
    gs = ctx.game_server()
    for first, second in ((2, 2), (2, 1), (1, 1)):
        a = ctx.relay("--upstream", f"127.0.0.1:{gs.port}", "--master", "127.0.0.1:1",
                      "--workers", str(first))
        b = ctx.relay("--upstream", f"127.0.0.1:{gs.port}", "--master", "127.0.0.1:1",
                      "--workers", str(second), "--listen", f"127.0.0.1:{a.port}",
                      listen=False, wait_ready=False)
        b.expect_exit = True
        rc = b.wait_exit(5.0 * H.SLOW)
        H.expect_eq(rc, 1, f"exit status of --workers {second} on the port of --workers {first}")
        b.wait_for_line(rf"bind 127\.0\.0\.1:{a.port}: Address already in use", timeout=2,
                        what="the bind error naming the port")
        c = ctx.client(a)
        for i in range(5):
            c.request(c.game(b"p%d" % i), what=f"an echo through the first relay ({i})")
        b.close()
        stop(a)


def auto(ctx):
    taskset = shutil.which("taskset")
    if not taskset:
        raise H.TestSkip("no taskset")
    gs = ctx.game_server()
    r = ctx.relay("--upstream", f"127.0.0.1:{gs.port}", "--master", "127.0.0.1:1",
                  "--ops-listen", f"127.0.0.1:{H.free_tcp_port()}", "--workers", "auto",
                  wrapper=(taskset, "-c", "0"))
    H.check(r.count(r"^workers \d+:") == 0, "a workers line under taskset -c 0 (one CPU)")
    H.expect_eq(H.get_json(port_of(r), "/lifecycle", None)["workers"], 1,
                "/lifecycle workers under taskset -c 0")
    stop(r)
    want = min(64, len(os.sched_getaffinity(0)))
    r = ctx.relay("--upstream", f"127.0.0.1:{gs.port}", "--master", "127.0.0.1:1",
                  "--ops-listen", f"127.0.0.1:{H.free_tcp_port()}", "--workers", "auto")
    H.expect_eq(H.get_json(port_of(r), "/lifecycle", None)["workers"], want,
                f"/lifecycle workers with {want} CPUs in the affinity mask")
    if want > 1:
        r.wait_for_line(rf"^workers {want}: ", timeout=1, what="the workers line")
    stop(r)


def test(ctx):
    H.run_parts(ctx, [one_address, spread, per_ip, max_sessions, query_budget, masters,
                      qport_across, bans, port_taken, auto])


if __name__ == "__main__":
    H.main(test)
