#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The ops listener keeps room for /healthz and /readyz: 64 source
addresses each hold one connection and open it again every 0.6 s (half a
request that never ends; an idle one is not accepted at all), and one that
the server closes is opened again at once, so that every general slot is always
taken by a connection younger than OPS_CONN_SLOW_MS and no address holds
more than another; meanwhile 20 /healthz and 5 /readyz requests from
127.0.0.1 are all answered, each within 2 s, and so are 5 /healthz sent
0.3 s after their connection opened (a checker on a busy machine). Then 72
addresses, one for each general and reserve slot: the same, and /metrics is
503 (a reserve slot serves health only). Before the reserve, 13 to 20 of 20
/healthz failed; before TCP_DEFER_ACCEPT, the late ones were pushed out of
the reserve by newcomers (and CI once saw a prompt one pushed out too)."""

import os
import selectors
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

GENERAL = 64        # OPS_CONN_MAX
RESERVE = 8         # OPS_CONN_RESERVE
HOLD = 0.6          # s each connection is held before it is opened again
CHURN_FOR = 12.0    # s at most
LIMIT = 2.0         # s an answer to /healthz may take
LATE = 0.3          # s a slow checker waits between its connect and its request
PARTIAL = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


class Churner(threading.Thread):
    """One connection from each of `sources`, closed after HOLD s and
    opened again at once, until stopped. Bounded: CHURN_FOR s, 5000
    connections."""

    def __init__(self, port, sources):
        super().__init__(daemon=True)
        self.port, self.sources = port, sources
        self.stop = threading.Event()
        self.connects = 0
        self.cut = 0      # closed by the server before HOLD
        self.errors = []

    def _open(self, sel, src, i, now):
        if self.connects >= 5000:
            return
        self.connects += 1
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((src, 0))
            s.setblocking(False)
            rc = s.connect_ex((H.LOOPBACK, self.port))
            if rc not in (0, 115):  # EINPROGRESS
                raise OSError(rc, os.strerror(rc))
        except OSError as e:
            self.errors.append(repr(e))
            s.close()
            return
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE,
                     {"src": src, "i": i, "until": now + HOLD, "sent": False})

    def run(self):
        sel = selectors.DefaultSelector()
        t0 = time.monotonic()
        for i, src in enumerate(self.sources):
            self._open(sel, src, i, t0)
        for _ in range(1000000):
            now = time.monotonic()
            if self.stop.is_set() or now - t0 >= CHURN_FOR:
                break
            for key, ev in sel.select(timeout=0.02):
                s, st = key.fileobj, key.data
                if ev & selectors.EVENT_WRITE and not st["sent"]:
                    st["sent"] = True
                    sel.modify(s, selectors.EVENT_READ, st)
                    # a request that never ends (an idle connection is
                    # not even accepted: TCP_DEFER_ACCEPT)
                    try:
                        s.send(PARTIAL)
                    except OSError:
                        pass
                if ev & selectors.EVENT_READ:
                    try:
                        data = s.recv(4096)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        # the server gave up on it: the attacker opens
                        # another at once
                        self.cut += 1
                        sel.unregister(s)
                        s.close()
                        self._open(sel, st["src"], st["i"], time.monotonic())
            now = time.monotonic()
            for key in list(sel.get_map().values()):
                if now >= key.data["until"]:
                    s, st = key.fileobj, key.data
                    sel.unregister(s)
                    s.close()
                    self._open(sel, st["src"], st["i"], now)
        for key in list(sel.get_map().values()):
            key.fileobj.close()
        sel.close()


def ask(port, path, n, every, what):
    """n requests for path, `every` s apart: (status or error, seconds)."""
    out = []
    for _ in range(n):
        t = time.monotonic()
        try:
            r = H.http_request(port, "GET", path, timeout=LIMIT)
            st = r.status
        except (OSError, H._http_client.HTTPException) as e:
            st = repr(e)
        took = time.monotonic() - t
        out.append((st, took))
        time.sleep(max(0.0, every - took))
    return out


def ask_late(port, n, late):
    """n /healthz requests, each sent `late` s after its connection opened
    (a checker on a busy machine): (status or error, seconds)."""
    out = []
    for _ in range(n):
        t = time.monotonic()
        data = b""
        try:
            with socket.create_connection((H.LOOPBACK, port), timeout=LIMIT) as s:
                time.sleep(late)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Connection: close\r\n\r\n")
                for _ in range(100):
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            st = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.") else f"no answer {data[:40]!r}"
        except OSError as e:
            st = repr(e)
        out.append((st, time.monotonic() - t - late))
        time.sleep(0.1)
    return out


def churn(ctx, port, sources, first):
    """sources addresses churn; health asked all along."""
    churn = Churner(port, [H.spread_ip(first + i) for i in range(sources)])
    churn.start()
    try:
        time.sleep(1.0)  # every source holds its connection, the first ones reopened
        health = ask(port, "/healthz", 20, 0.25, "/healthz")
        ready = ask(port, "/readyz", 5, 0.25, "/readyz")
        late = ask_late(port, 5, LATE)
        # a route other than those two, on a connection over the general
        # slots: 503 at once (or, when a slot was free, served)
        other = ask(port, "/metrics", 10, 0.05, "/metrics")
    finally:
        churn.stop.set()
        churn.join(CHURN_FOR + 5)
    H.check(not churn.is_alive(), "the churner did not stop")
    ctx.note(f"{churn.connects} churning connections from {sources} addresses, {churn.cut} closed "
             f"by the server; /healthz {[s for s, _ in health]}, slowest "
             f"{max(t for _, t in health):.3f} s; /readyz {[s for s, _ in ready]}; "
             f"/healthz sent {LATE:g} s late {[s for s, _ in late]}; "
             f"/metrics {[s for s, _ in other]}")
    H.check(churn.connects >= sources * 4,
            f"only {churn.connects} churning connections: the attack did not run")
    bad = [(i, s, round(t, 3)) for i, (s, t) in enumerate(health) if s != 200 or t > LIMIT]
    H.check(not bad, f"{len(bad)} of {len(health)} /healthz during the churn were not answered "
            f"200 within {LIMIT:g} s: {bad}")
    bad = [(i, s, round(t, 3)) for i, (s, t) in enumerate(ready) if s != 200 or t > LIMIT]
    H.check(not bad, f"{len(bad)} of {len(ready)} /readyz during the churn were not answered "
            f"200 within {LIMIT:g} s: {bad}")
    bad = [(i, s, round(t, 3)) for i, (s, t) in enumerate(late) if s != 200 or t > LIMIT]
    H.check(not bad, f"{len(bad)} of {len(late)} /healthz sent {LATE:g} s after the connection "
            f"opened were not answered 200 within {LIMIT:g} s: {bad}")
    return [s for s, _ in other]


def metrics_served(port, what):
    """Once the listener has closed the churners' connections (on its next
    turns), /metrics is served again."""
    H.wait_until(lambda: H.http_request(port, "GET", "/metrics", timeout=LIMIT).status == 200,
                 5.0 * H.SLOW, what, interval=0.1)


def test(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    port = H.free_tcp_port()
    ctx.relay("--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
              "--ops-listen", f"127.0.0.1:{port}")
    H.wait_until(lambda: H.http_request(port, "GET", "/readyz").status == 200, 5.0 * H.SLOW,
                 "/readyz says ready before the churn")
    # one address for each general slot: a connection that closes leaves
    # its slot to the next comer now and then, /metrics may be served
    other = churn(ctx, port, GENERAL, 0)
    H.check(all(s in (200, 503) for s in other),
            f"/metrics while {GENERAL} addresses churn: expected 200 or 503, got {other}")
    metrics_served(port, f"/metrics after the churn of {GENERAL} addresses")
    # one for each slot, general and reserve: a health check takes a
    # reserve slot from a connection that asked for nothing, and anything
    # else is refused there
    other = churn(ctx, port, GENERAL + RESERVE, 100)
    H.check(503 in other and all(s in (200, 503) for s in other),
            f"/metrics while {GENERAL + RESERVE} addresses churn: expected 503 (a reserve slot "
            f"serves health only), got {other}")
    metrics_served(port, f"/metrics after the churn of {GENERAL + RESERVE} addresses")


if __name__ == "__main__":
    H.main(test)
