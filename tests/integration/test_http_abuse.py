#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Abuse of the ops listener while 3 clients exchange UDP datagrams
through the relay the whole time:

(a) a request that never ends, one more byte every second, is closed by
    the server at its deadline, ~5 s (OPS_CONN_DEADLINE_SEC), while (d)
    runs: the busiest addresses give way first, not this lone one;
(b) 64 KiB of headers are refused (4xx, or the connection cut), never
    served; just over OPS_REQUEST_MAX (8192 bytes) is 431, just under it
    is served;
(d) 80 connections from 10 addresses that each send a byte every 3 s
    (MHD's timeout is an idle timeout: they would hold every slot for
    ever) are closed 5 s after they opened, and /healthz from another
    address answers within 2 s all along;
(e) one address holds 8 connections and one reserve slot (health only):
    of 12, 9 stay, and a /healthz from that address itself is served;
(c) 1000 connections at once from 125 addresses, first idle, then each
    with a request: the listener still answers /healthz afterwards, and
    its log lines stay rate-limited;

and not one UDP answer is lost meanwhile (each client counts what it sent
and what came back; the game server stand-in echoes every datagram)."""

import os
import re
import resource
import selectors
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

FLOOD = 1000
PER_IP = 8          # OPS_CONN_PER_IP
DEADLINE = 5.0      # OPS_CONN_DEADLINE_SEC
TRICKLE_IPS = 10    # x PER_IP connections: more than the 64 slots
TRICKLE_EVERY = 3.0
TRICKLE_FOR = 8.0


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


def trickle_until_closed(s, every, limit):
    """Send one byte (of a header that never ends) every `every` seconds
    and read until EOF or reset; (bytes, seconds, how it ended)."""
    t = time.monotonic()
    data = b""
    for _ in range(10000):
        left = limit - (time.monotonic() - t)
        if left <= 0:
            return data, time.monotonic() - t, "open"
        s.settimeout(min(left, every))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            try:
                s.send(b"a")
            except OSError:
                pass  # closed: the next recv says how
            continue
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


def connect_from(src, port):
    """A blocking TCP connection to the listener from source address src."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(2.0)
    s.connect((H.LOOPBACK, port))
    return s


class Trickler(threading.Thread):
    """PER_IP connections from each of `sources`, each sending one more byte
    of a request that never ends every TRICKLE_EVERY seconds; a closed one
    is opened again 1 s later, as an attacker would. Records how long each
    lived. Bounded: TRICKLE_FOR seconds, 400 connections."""

    HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4000

    def __init__(self, port, sources):
        super().__init__(daemon=True)
        self.port, self.sources = port, sources
        self.lifetimes = []      # (source, seconds) of connections the server closed
        self.open_at_end = []    # (source, age) still open when the attack stopped
        self.connects = 0
        self.errors = []

    def _open(self, src, now, conns):
        if self.connects >= 400:
            return
        self.connects += 1
        try:
            s = connect_from(src, self.port)
            s.setblocking(False)
            s.send(self.HEAD[:1])
        except OSError as e:
            self.lifetimes.append((src, 0.0))
            self.errors.append(repr(e))
            return
        conns[s] = {"src": src, "opened": now, "next": now + TRICKLE_EVERY, "sent": 1}

    def run(self):
        sel = selectors.DefaultSelector()
        conns, again = {}, []
        t0 = time.monotonic()
        for src in self.sources:
            for _ in range(PER_IP):
                self._open(src, time.monotonic(), conns)
        for s in conns:
            sel.register(s, selectors.EVENT_READ)
        for _ in range(100000):
            now = time.monotonic()
            if now - t0 >= TRICKLE_FOR:
                break
            for key, _ev in sel.select(timeout=0.05) if conns else []:
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if data:
                    continue
                st = conns.pop(s)
                sel.unregister(s)
                s.close()
                self.lifetimes.append((st["src"], time.monotonic() - st["opened"]))
                again.append((time.monotonic() + 1.0, st["src"]))
            if not conns:
                time.sleep(0.05)
            now = time.monotonic()
            for s, st in list(conns.items()):
                if now >= st["next"]:
                    st["next"] += TRICKLE_EVERY
                    try:
                        s.send(self.HEAD[st["sent"]:st["sent"] + 1])
                        st["sent"] += 1
                    except OSError:
                        pass  # the server closed it: the read side says so
            while again and again[0][0] <= now:
                _, src = again.pop(0)
                before = set(conns)
                self._open(src, now, conns)
                for s in set(conns) - before:
                    sel.register(s, selectors.EVENT_READ)
        now = time.monotonic()
        for s, st in conns.items():
            self.open_at_end.append((st["src"], now - st["opened"]))
            s.close()
        sel.close()


def probe_while(port, cond, what, every=0.5, limit=2.0):
    """GET /healthz from 127.0.0.1 every `every` s while cond(): each must
    answer 200 within `limit` s. Returns the slowest answer's seconds."""
    worst, n = 0.0, 0
    for _ in range(100):
        if not cond():
            break
        t = time.monotonic()
        try:
            r = H.http_request(port, "GET", "/healthz", timeout=limit)
            st = r.status
        except (OSError, H._http_client.HTTPException) as e:
            st = repr(e)
        took = time.monotonic() - t
        n += 1
        H.check(st == 200 and took <= limit,
                f"/healthz {what}: probe {n} got {st} after {took:.2f} s (want 200 within {limit:g} s)")
        worst = max(worst, took)
        time.sleep(max(0.0, every - took))
    H.check(n >= 5, f"/healthz {what}: only {n} probes ran")
    return worst, n


def flood(port, n, payload, sources=(H.LOOPBACK,)):
    """n non-blocking connections at once, spread over the source addresses;
    send payload on each that connects, then read until each is closed or
    7 s pass. Returns counts."""
    sel = selectors.DefaultSelector()
    socks = []
    res = {"connected": 0, "refused": 0, "status": {}, "closed": 0, "open": 0}
    try:
        for i in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((sources[i % len(sources)], 0))
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

    # (a) half a request, never finished, trickled in a thread while (b)
    # and (d) run
    s = socket.create_connection((H.LOOPBACK, port), timeout=5)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: yes\r\n")
    unfinished = {}
    watch = threading.Thread(target=lambda: unfinished.update(
        zip(("data", "took", "how"), trickle_until_closed(s, 1.0, 10.0))), daemon=True)
    watch.start()
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

    # (d) trickling connections from more addresses than the slots hold
    sources = [H.spread_ip(i) for i in range(TRICKLE_IPS)]
    trickler = Trickler(port, sources)
    trickler.start()
    time.sleep(0.5)  # every trickler connected
    worst, n = probe_while(port, trickler.is_alive,
                           f"while {TRICKLE_IPS * PER_IP} connections trickle a byte every "
                           f"{TRICKLE_EVERY:g} s")
    trickler.join(TRICKLE_FOR + 5)
    H.check(not trickler.is_alive(), "(d) the trickler did not stop")
    lives = sorted(t for _, t in trickler.lifetimes)
    ages = sorted(t for _, t in trickler.open_at_end)
    ctx.note(f"(d) {n} probes of /healthz, slowest {worst:.3f} s; {trickler.connects} trickling "
             f"connections, {len(lives)} closed by the server (longest lived "
             f"{lives[-1] if lives else 0:.2f} s), {len(ages)} open at the end (oldest "
             f"{ages[-1] if ages else 0:.2f} s)")
    H.check(lives and lives[-1] <= DEADLINE + 1.0,
            f"(d) a trickling connection lived {lives[-1] if lives else 0:.2f} s, past the "
            f"{DEADLINE:g} s deadline")
    H.check(not ages or ages[-1] <= DEADLINE + 1.0,
            f"(d) a trickling connection was still open after {ages[-1] if ages else 0:.2f} s")
    H.check(len(lives) >= TRICKLE_IPS * PER_IP,
            f"(d) only {len(lives)} of {TRICKLE_IPS * PER_IP} trickling connections were closed "
            f"within {TRICKLE_FOR:g} s")

    # (e) one address, 12 connections that each send a byte: 8 stay in its
    # share, one more in the reserve (health only), each newer one taking
    # that reserve slot from the one before (it sent nothing whole): 9
    # held, 3 closed; then a /healthz from that same address is answered
    # (attack13 F2: 8 slow connections from 127.0.0.1 failed its probes).
    time.sleep(1.0)
    one = H.spread_ip(200)
    held = [connect_from(one, port) for _ in range(PER_IP + 4)]
    for c in held:
        c.send(b"G")  # an idle connection is not accepted (TCP_DEFER_ACCEPT)
    time.sleep(0.5)
    closed = []
    for c in held:
        c.setblocking(False)
        try:
            closed.append(c.recv(1) == b"")
        except BlockingIOError:
            closed.append(False)
        except OSError:
            closed.append(True)
    ctx.note(f"(e) {len(held)} connections from {one}: {closed.count(False)} held, "
             f"{closed.count(True)} closed by the server")
    H.expect_eq(closed.count(False), PER_IP + 1,
                f"(e) connections {one} may hold at once (its share and one reserve slot)")
    r = H.http_request(port, "GET", "/healthz", timeout=2.0)
    H.expect_eq(r.status, 200, f"(e) /healthz from 127.0.0.1 while {one} holds {PER_IP}")
    hc = connect_from(one, port)
    try:
        hc.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        for _ in range(100):
            chunk = hc.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        data = repr(e).encode()
    finally:
        hc.close()
    H.expect_eq(status_of(data), 200, f"(e) /healthz from {one} itself while its share is held")
    for c in held:
        c.close()

    watch.join(10.0)
    data, took, how = unfinished["data"], unfinished["took"], unfinished["how"]
    s.close()
    ctx.note(f"(a) unfinished request: connection {how} after {took:.2f} s, {len(data)} bytes back")
    H.check(how in ("eof", "reset"), f"(a) an unfinished request was still open after {took:.1f} s")
    H.check(DEADLINE - 1.0 <= took <= DEADLINE + 1.5,
            f"(a) an unfinished request that sends a byte a second was closed after {took:.2f} s "
            f"(expected at its {DEADLINE:g} s deadline)")
    st = status_of(data)
    H.check(st is None or st >= 400, f"(a) an unfinished request was answered HTTP {st}")

    # (c) 1000 idle connections, then 1000 requests, from 125 addresses
    # (one address holds PER_IP at most)
    sources = [H.spread_ip(300 + i) for i in range(FLOOD // PER_IP)]
    res = flood(port, FLOOD, b"", sources)
    ctx.note(f"(c) {FLOOD} idle connections: {res}")
    took = healthz_ok(port, 6.0, f"after {FLOOD} idle connections")
    ctx.note(f"(c) /healthz answered {took:.2f} s after the idle flood")
    res = flood(port, FLOOD, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", sources)
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
