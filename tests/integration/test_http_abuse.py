#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Abuse of the ops listener while 3 clients exchange UDP datagrams
through the relay the whole time:

(a) a request that never ends is closed by the server within ~6 s
    (OPS_DEADLINE_SEC 5);
(b) 64 KiB of headers are refused (4xx, or the connection cut), never
    served; just over OPS_REQUEST_MAX (8192 bytes) is 431, just under it
    is served;
(c) 1000 connections at once, first idle, then each with a request: the
    listener still answers /healthz afterwards, and its log lines stay
    rate-limited;

and not one UDP answer is lost meanwhile (each client counts what it sent
and what came back; the game server stand-in echoes every datagram)."""

import os
import re
import resource
import selectors
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

FLOOD = 1000


def read_until_closed(s, limit):
    """Read until EOF or reset; (bytes, seconds, how it ended)."""
    t = time.monotonic()
    data = b""
    for _ in range(10000):
        left = limit - (time.monotonic() - t)
        if left <= 0:
            return data, time.monotonic() - t, "open"
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return data, time.monotonic() - t, "open"
        except (ConnectionResetError, BrokenPipeError):
            return data, time.monotonic() - t, "reset"
        if not chunk:
            return data, time.monotonic() - t, "eof"
        data += chunk
    return data, time.monotonic() - t, "open"


def status_of(data):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", data)
    return int(m.group(1)) if m else None


def request_with_headers(port, total):
    """GET /healthz whose request line and headers come to about `total`
    bytes; (status or None, how the connection ended)."""
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    lines = []
    size = len(head) + 2
    i = 0
    while size < total:
        n = min(1000, total - size - 16)
        if n <= 0:
            break
        line = b"X-Filler-%03d: " % i + b"a" * n + b"\r\n"
        lines.append(line)
        size += len(line)
        i += 1
    req = head + b"".join(lines) + b"\r\n"
    s = socket.create_connection((H.LOOPBACK, port), timeout=5)
    try:
        try:
            s.sendall(req)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data, took, how = read_until_closed(s, 7.0)
    finally:
        s.close()
    return status_of(data), how, took, len(req), data


def healthz_ok(port, limit, what):
    """/healthz answers 200 within limit seconds (bounded retries)."""
    deadline = time.monotonic() + limit
    last = None
    for _ in range(200):
        try:
            r = H.http_request(port, "GET", "/healthz", timeout=1.0)
            if r.status == 200 and r.body == b"ok\n":
                return time.monotonic() - (deadline - limit)
            last = f"HTTP {r.status}"
        except (OSError, H._http_client.HTTPException) as e:
            last = repr(e)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    H.fail(f"/healthz did not answer 200 within {limit:g} s {what} (last: {last})")


def flood(port, n, payload):
    """n non-blocking connections at once; send payload on each that
    connects, then read until each is closed or 7 s pass. Returns counts."""
    sel = selectors.DefaultSelector()
    socks = []
    res = {"connected": 0, "refused": 0, "status": {}, "closed": 0, "open": 0}
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            rc = s.connect_ex((H.LOOPBACK, port))
            if rc not in (0, 115):  # EINPROGRESS
                res["refused"] += 1
                s.close()
                continue
            socks.append(s)
            sel.register(s, selectors.EVENT_WRITE, {"buf": b"", "sent": False})
        deadline = time.monotonic() + 7.0
        live = len(socks)
        for _ in range(100000):
            if live == 0 or time.monotonic() >= deadline:
                break
            for key, ev in sel.select(timeout=0.2):
                s, st = key.fileobj, key.data
                if not st["sent"]:
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        res["refused"] += 1
                        sel.unregister(s)
                        live -= 1
                        continue
                    res["connected"] += 1
                    st["sent"] = True
                    if payload:
                        try:
                            s.send(payload)
                        except OSError:
                            pass
                    sel.modify(s, selectors.EVENT_READ, st)
                    continue
                try:
                    chunk = s.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    chunk = b""
                if chunk:
                    st["buf"] += chunk
                    continue
                code = status_of(st["buf"])
                res["status"][code] = res["status"].get(code, 0) + 1
                res["closed"] += 1
                sel.unregister(s)
                live -= 1
            if not payload and time.monotonic() >= deadline - 6.0:
                break  # idle flood: hold the connections ~1 s, then let go
        res["open"] = live
    finally:
        for s in socks:
            try:
                s.close()
            except OSError:
                pass
        sel.close()
    return res


def test(ctx):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = FLOOD + 200
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise H.TestSkip(f"RLIMIT_NOFILE hard limit {hard} is below the {want} this test needs")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    port = H.free_tcp_port()
    tok = os.urandom(24).hex()
    relay = H.relay_env(ctx, {"ETRELAY_METRICS_TOKEN": tok},
                        "--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
                        "--ops-listen", f"127.0.0.1:{port}")
    H.expect_eq(H.http_request(port, "GET", "/healthz").status, 200, "/healthz before the abuse")
    pinger = H.Pinger(relay.addr, n=3, interval=0.01, timeout=1.0, max_seconds=35.0,
                      max_packets=20000)
    ctx.objs.append(pinger)
    pinger.start()
    pinger.wait_answers(10, 5.0, "answers before the abuse")
    t_start = time.monotonic()
    mark = relay.mark()

    # (a) half a request, never finished
    s = socket.create_connection((H.LOOPBACK, port), timeout=5)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: yes\r\n")
    # meanwhile (b): oversized headers on other connections
    st, how, took, size, data = request_with_headers(port, 64 * 1024)
    ctx.note(f"(b) {size} bytes of headers: status {st}, connection {how} after {took:.2f} s")
    H.check(how != "open", f"(b) 64 KiB of headers: the connection was still open after {took:.1f} s")
    H.check(st is None or 400 <= st < 500,
            f"(b) 64 KiB of headers: expected a 4xx or a cut connection, got HTTP {st}: {H.short(data)}")
    st, how, took, size, data = request_with_headers(port, 8192 + 600)
    H.expect_eq(st, 431, f"(b) status for {size} bytes of request line and headers (over 8192)")
    st, how, took, size, data = request_with_headers(port, 8192 - 700)
    H.expect_eq(st, 200, f"(b) status for {size} bytes of request line and headers (under 8192)")

    data, took, how = read_until_closed(s, 10.0)
    s.close()
    ctx.note(f"(a) unfinished request: connection {how} after {took:.2f} s, {len(data)} bytes back")
    H.check(how in ("eof", "reset"), f"(a) an unfinished request was still open after {took:.1f} s")
    H.check(took <= 7.0, f"(a) an unfinished request was closed only after {took:.2f} s (expected ~5-6 s)")
    st = status_of(data)
    H.check(st is None or st >= 400, f"(a) an unfinished request was answered HTTP {st}")

    # (c) 1000 idle connections, then 1000 requests
    res = flood(port, FLOOD, b"")
    ctx.note(f"(c) {FLOOD} idle connections: {res}")
    took = healthz_ok(port, 6.0, f"after {FLOOD} idle connections")
    ctx.note(f"(c) /healthz answered {took:.2f} s after the idle flood")
    res = flood(port, FLOOD, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    ctx.note(f"(c) {FLOOD} requests: {res}")
    ok = res["status"].get(200, 0)
    H.check(ok >= 64, f"(c) only {ok} of {FLOOD} simultaneous /healthz requests got 200 "
            f"(the listener serves 64 at once): {res}")
    bad = {k: v for k, v in res["status"].items() if k not in (200, None)}
    H.expect_eq(bad, {}, "(c) statuses other than 200 among the flood's answers")
    took = healthz_ok(port, 6.0, f"after {FLOOD} simultaneous requests")
    r = H.curl_request(port, "/metrics", token=tok)
    H.expect_eq(r.status, 200, "curl /metrics after the abuse")
    H.check(relay.alive(), "etrelay died under the HTTP abuse")

    # the UDP side never noticed
    pinger.wait_answers(10, 5.0, "answers after the abuse")
    pinger.stop()
    t_end = time.monotonic()
    lost = pinger.lost()
    H.check(not lost, f"{len(lost)} UDP answers lost during the HTTP abuse; {pinger.summary()}")
    H.expect_eq(pinger.errors, [], "socket errors at the UDP clients")
    H.expect_eq(pinger.stray, [], "unexpected datagrams at the UDP clients")
    during = [r for r in pinger.snapshot() if t_start <= r[2] < t_end]
    per = [sum(1 for r in during if r[0] == i and r[3] is not None) for i in range(3)]
    H.check(min(per) >= 100, f"UDP answers per client during the abuse: {per} (want >= 100 each)")
    s = H.parse_metrics(r.text)
    H.expect_eq(H.metric_value(s, "etrelay_dropped_datagrams_total"), 0.0, "datagrams dropped")
    ctx.note(f"UDP during {t_end - t_start:.1f} s of abuse: {pinger.summary()}")

    # the listener's own complaints are rate-limited (5 a second, then a count)
    ops_lines = relay.find_lines(r"^ops: (?!lifecycle )", mark)
    secs = t_end - t_start
    H.check(len(ops_lines) <= 6 * (secs + 2),
            f"{len(ops_lines)} 'ops:' log lines in {secs:.1f} s: not rate-limited to 5 a second")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM")


if __name__ == "__main__":
    H.main(test)
