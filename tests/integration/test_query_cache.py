#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The query cache with its defaults: stale-while-refresh under a steady
load, and its own budget against spoofed sources.

    python3 test_query_cache.py <etrelay-binary> <io_uring|epoll>

Parts (etrelay with no limit options but what each names):

  steady_load: the real OpenArena server (skipped without it) behind
    etrelay --game q3; 200 sources on addresses of their own send 150
    getinfo/getstatus a second in all (each source one every 1.33 s, within
    its own limit) for 4 s. Every query gets its answer: when the copy is
    past its 1 s, one query refreshes it and the others get the copy a
    moment old, instead of spending the game server's budget and being
    dropped.
  spoofed_sources: a stand-in game server with a 1400-byte statusResponse;
    200 sources each send 5 getstatus as fast as they can (1000 queries of
    13 B). What they get is bounded by --query-cache-rate (200/s) and
    --query-cache-bytes (256 KiB/s), each with one second of burst, plus
    what the game server's budget lets through; the rest is dropped as
    cache_rate. Printed: bytes out per byte in.
  worst_case_amplification: the same with a statusResponse of 4096 B, the
    largest the cache serves (--query-cache-max-reply), against a process
    with two relays: per relay and in all, bytes out per byte in, and
    bytes out against the two relays' budgets.
  over_the_cap: a statusResponse of 4097 B is never served from the cache:
    200 sources get only what the game server's budget passes.
"""

import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from oa import OA_SERVER, OpenArena  # noqa: E402

TEST_BUDGET = 50
CACHE_RATE = 200            # --query-cache-rate default
CACHE_BYTES = 256 * 1024    # --query-cache-bytes default
SERVER_BURST = 9            # --server-query-burst default


def exit_stats(relays_proc):
    """Stop etrelay; its exit stats lines, one per relay."""
    relays_proc.signal(signal.SIGTERM)
    relays_proc.wait_exit(5.0)
    relays_proc._join_readers()
    lines = [l for l in relays_proc.text_lines() if l.startswith("stats ")]
    for l in lines:
        H.log(l)
    return lines


def dropped(line, reason):
    m = re.search(r"\b%s (\d+)" % reason, line)
    return int(m.group(1)) if m else 0


def steady_load(ctx):
    if not (os.path.isfile(OA_SERVER) and os.access(OA_SERVER, os.X_OK)):
        raise H.TestSkip(f"{OA_SERVER} is not installed (Debian package openarena-server)")
    oa = OpenArena(H.free_udp_port(), "etrelay-cache-" + H.rand_token(6))
    ctx.objs.append(oa)
    ok = False
    try:
        oa.wait_ready()
        master = ctx.master()
        relay = ctx.relay("--game", "q3", "--upstream", f"127.0.0.1:{oa.port}",
                          "--master", f"127.0.0.1:{master.port}", "--heartbeat-interval", "60s",
                          open_limits=False)
        relay.wait_for_line(r"^server up: ", timeout=10, what="OpenArena answered the probe")
        H.wait_until(lambda: relay.addr in master.listed_set(), 3, "the master's listing")
        socks = [H.udp_socket(H.spread_ip(i), 0, rcvbuf=1 << 18) for i in range(200)]
        for s in socks:
            s.setblocking(False)
        rate, seconds = 150, 4.0
        sent = got = 0
        t0 = time.monotonic()
        for i in range(int(rate * seconds)):
            time.sleep(max(0.0, t0 + i / rate - time.monotonic()))
            s = socks[i % len(socks)]
            s.sendto(H.cmd(f"{'getstatus' if i % 2 else 'getinfo'} c{i}"), relay.addr)
            sent += 1
            for r in socks[(i - 3) % len(socks)], s:   # read as we go: small buffers
                for _ in range(4):
                    try:
                        r.recv(H.MAX_DGRAM)
                        got += 1
                    except (BlockingIOError, OSError):
                        break
        elapsed = time.monotonic() - t0
        for s in socks:
            s.setblocking(True)
            got += len(H.drain_socket(s, quiet=0.05, max_seconds=0.5, max_packets=100))
        lines = exit_stats(relay)
        ctx.note(f"steady_load: {sent} queries from {len(socks)} addresses in {elapsed:.1f} s "
                 f"({sent / elapsed:.0f}/s), {got} answered, {sent - got} lost; "
                 f"OpenArena saw {oa.packets_logged('127.0.0.1', 'getstatus')} getstatus and "
                 f"{oa.packets_logged('127.0.0.1', 'getinfo')} getinfo from the relay")
        H.expect_eq(got, sent, "answers to a steady load from many addresses")
        H.expect_eq(dropped(lines[0], "server_rate"), 0, "dropped server_rate")
        ok = True
    finally:
        if not ok:
            oa.dump()
        oa.close()
        oa.remove_tmp()


def flood(relay_addrs, nsrc, per_src, base):
    """nsrc sources (addresses 127.<base>.x.y), each sending per_src
    getstatus to every relay address at once: (queries, bytes in, answers,
    bytes out, seconds) per relay address."""
    socks = [H.udp_socket(f"127.{base}.{i // 250}.{i % 250 + 1}", 0, rcvbuf=1 << 20)
             for i in range(nsrc)]
    q = H.cmd("getstatus")
    t0 = time.monotonic()
    for _ in range(per_src):
        for s in socks:
            for a in relay_addrs:
                s.sendto(q, a)
    elapsed = time.monotonic() - t0
    out = {a: [0, 0, 0, 0, elapsed] for a in relay_addrs}
    for a in relay_addrs:
        out[a][0] = nsrc * per_src
        out[a][1] = nsrc * per_src * len(q)
    # every answer is on its way within a moment: read them all without
    # waiting on each socket
    time.sleep(0.3)
    for s in socks:
        s.setblocking(False)
        for _ in range(1000):
            try:
                data, src = s.recvfrom(H.MAX_DGRAM)
            except (BlockingIOError, OSError):
                break
            out[tuple(src)][2] += 1
            out[tuple(src)][3] += len(data)
        s.close()
    return out, time.monotonic() - t0


def warm(ctx, relay):
    c = ctx.client(relay, timeout=1.0)
    st = c.request(H.cmd("getstatus"), what="the first statusResponse")
    H.check(st.startswith(H.cmd("statusResponse")), f"first getstatus: {H.short(st)}")
    return len(st)


def bound(seconds, size):
    """Most answers of `size` bytes the cache's budget allows in `seconds`
    (one second of burst, then the rate), plus the game server's share."""
    pkts = CACHE_RATE * (1 + seconds)
    byts = CACHE_BYTES * (1 + seconds) // size
    return int(min(pkts, byts)) + SERVER_BURST + int(seconds) + 1


def spoofed_sources(ctx):
    gs = ctx.game_server(status_size=1400)
    relay = ctx.relay("--upstream", f"127.0.0.1:{gs.port}",
                      "--master", f"127.0.0.1:{ctx.master().port}", open_limits=False)
    relay.wait_for_line(r"^server up: ", timeout=5, what="the probe answered")
    size = warm(ctx, relay)
    res, seconds = flood([relay.addr], 200, 5, 5)
    n, bin_, ans, bout, _ = res[relay.addr]
    lines = exit_stats(relay)
    ctx.note(f"spoofed_sources: {n} getstatus ({bin_} B) from 200 sources in {seconds:.2f} s "
             f"drew {ans} answers ({bout} B): {bout / bin_:.1f} B out per B in; "
             f"{dropped(lines[0], 'cache_rate')} dropped as cache_rate")
    H.check(ans <= bound(seconds, size),
            f"{ans} answers of {size} B in {seconds:.2f} s: more than the cache's budget "
            f"({bound(seconds, size)})")
    H.check(dropped(lines[0], "cache_rate") > 0, "nothing dropped as cache_rate")


def worst_case_amplification(ctx):
    gs = ctx.game_server(status_size=4096)
    d = ctx.tmpdir()
    ports = [H.free_udp_port(), H.free_udp_port()]
    conf = os.path.join(d, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(f"master 127.0.0.1:{ctx.master().port}\n")
        for i, p in enumerate(ports):
            f.write(f"[relay r{i}]\nlisten 127.0.0.1:{p}\nupstream 127.0.0.1:{gs.port}\n")
    relay = ctx.relay("-c", conf, listen=False, open_limits=False, wait_ready=False)
    relay.READY_RE = r"^etrelay \S+ relay r1 listening on "
    relay.wait_ready()
    H.wait_until(lambda: relay.count(r"^server up: ") >= 2, 5, "both relays' probes answered")
    addrs = [(H.LOOPBACK, p) for p in ports]
    for a in addrs:
        c = ctx.client(a, timeout=1.0)
        st = c.request(H.cmd("getstatus"), what="the first statusResponse")
        H.expect_eq(len(st), 4096, "statusResponse size")
    res, seconds = flood(addrs, 200, 5, 6)
    # One query, one answer, once the budgets refilled: the largest ratio
    # any single answer reaches.
    time.sleep(1.0)
    res1, _ = flood(addrs[:1], 1, 1, 8)
    n1, bin1, ans1, bout1, _ = res1[addrs[0]]
    ctx.note(f"worst_case_amplification: one 13-byte getstatus from a fresh source drew "
             f"{ans1} answer of {bout1} B: {bout1 / bin1:.0f} B out per B in")
    H.expect_eq(ans1, 1, "answers to one getstatus once the budgets refilled")
    H.check(bout1 <= 4096, f"an answer larger than --query-cache-max-reply: {bout1} B")
    exit_stats(relay)
    tin = tout = 0
    for a in addrs:
        n, bin_, ans, bout, _ = res[a]
        tin += bin_
        tout += bout
        ctx.note(f"worst_case_amplification: relay :{a[1]}: {n} getstatus ({bin_} B) drew "
                 f"{ans} answers of 4096 B ({bout} B): {bout / bin_:.1f} B out per B in")
        H.check(ans <= bound(seconds, 4096),
                f"relay :{a[1]}: {ans} answers in {seconds:.2f} s, more than its budget")
    ctx.note(f"worst_case_amplification: both relays: {tin} B in, {tout} B out in "
             f"{seconds:.2f} s: {tout / tin:.1f} B out per B in (the budgets: 2 x 256 KiB "
             f"at once, then 2 x 256 KiB/s)")
    H.check(tout <= 2 * bound(seconds, 4096) * 4096, f"{tout} B out for two relays")


def over_the_cap(ctx):
    gs = ctx.game_server(status_size=4097)
    relay = ctx.relay("--upstream", f"127.0.0.1:{gs.port}",
                      "--master", f"127.0.0.1:{ctx.master().port}", open_limits=False)
    relay.wait_for_line(r"^server up: ", timeout=5, what="the probe answered")
    warm(ctx, relay)
    res, seconds = flood([relay.addr], 200, 1, 7)
    n, bin_, ans, bout, _ = res[relay.addr]
    lines = exit_stats(relay)
    ctx.note(f"over_the_cap: {n} getstatus for a 4097-byte status drew {ans} answers "
             f"in {seconds:.2f} s")
    H.check(ans <= SERVER_BURST + int(seconds) + 1,
            f"{ans} answers of 4097 B: the cache served a reply over its cap")
    H.check(dropped(lines[0], "server_rate") > 0, "nothing dropped as server_rate")


def test(ctx):
    H.run_parts(ctx, [steady_load, spoofed_sources, worst_case_amplification, over_the_cap])


def _over_budget(signum, frame):
    raise H.TestFailure(f"the test took longer than {TEST_BUDGET} s")


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, _over_budget)
    signal.alarm(TEST_BUDGET)
    H.main(test)
