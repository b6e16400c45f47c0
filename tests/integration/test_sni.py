#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The SNI listener with real peers on loopback: two `openssl s_server -www`
backends with their own certificates reached by name (curl --resolve, the
served certificate's CN and body checked), a wildcard route; refusals
(unknown name, no SNI, plain HTTP, a 17 KB hello) read as zero bytes then
EOF; synthetic 1.8/5/16 KB hellos reach an echo backend byte for byte; a
client that stops mid-hello is closed at the 1 s preread timeout; a
PROXY v2 route's backend reads the client's address and port; 8 MiB each
way spliced byte for byte; a real ClientHello (Python's ssl over a
MemoryBIO) re-framed into three TLS records and sent 7 bytes per write
completes its handshake with s_server and gets HTTP 200; a client that
stops reading while the backend sends 50 MiB holds the backend back (the
relay's RSS grows by less than its stream pool, touched once, and 2 MiB;
its memory gauge stays within the two 64 KiB chunks one direction may have in flight) and gets every byte when it reads again; the metrics page
passes promtool and counts what the test did. A second relay with
max-connections-per-ip 2: the third connection gets zero bytes then EOF
(counted as cap_per_ip); SIGTERM with --drain-timeout keeps a spliced
connection working while a new one gets zero bytes (counted as draining),
and the process exits once the spliced one closes. -t lists the listener
and its routes; -t --probe fails on a route whose upstream refuses."""

import hashlib
import os
import selectors
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from tlsutil import Backend, TcpServer, hello, refused, s_server  # noqa: E402

# The loop's stream chunk and its pool per worker (src/loop/loop.h).
CHUNK = 65536
POOL = 256


def echo_exact(port, data, what):
    """data reaches the echo backend and comes back byte for byte."""
    c = socket.create_connection((H.LOOPBACK, port), timeout=10)
    got = []

    def reader():
        while True:
            b = c.recv(65536)
            if not b:
                break
            got.append(b)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)
    t.join(20)
    c.close()
    back = b"".join(got)
    H.check(hashlib.sha256(back).digest() == hashlib.sha256(data).digest(),
            f"{what}: {len(data)} bytes sent, {len(back)} came back "
            f"{'different' if len(back) == len(data) else ''}")


class Sender(TcpServer):
    """A backend that reads the ClientHello (hello_len bytes), then sends
    data in 64 KiB pieces and closes; sent counts what the kernel took."""

    def __init__(self, ctx, hello_len, data):
        self.hello_len, self.data = hello_len, data
        self.sent = 0
        self.error = None
        super().__init__(ctx)

    def serve(self, c):
        try:
            c.settimeout(30)
            Backend.recv_exact(c, self.hello_len)
            mv = memoryview(self.data)
            while self.sent < len(self.data):
                self.sent += c.send(mv[self.sent:self.sent + 65536])
            c.shutdown(socket.SHUT_WR)
            c.close()
        except OSError as e:
            self.error = e


def promtool_check(text, what):
    exe = H.require_tool("promtool")
    p = subprocess.run([exe, "check", "metrics"], input=text.encode(), capture_output=True,
                       timeout=20)
    out = (p.stdout + p.stderr).decode("utf-8", "replace").strip()
    if p.returncode != 0 or out:
        H.fail(f"promtool check metrics on {what}: exit {p.returncode}, output:\n{out[:2000]}")


def three_record_handshake(port, name):
    """A real ClientHello (Python's ssl, TLS 1.3 where it can) re-framed into
    three handshake records and sent 7 bytes per write; then the handshake
    goes on through the relay and GET / is answered. Returns the reply."""
    cx = ssl.create_default_context()
    cx.check_hostname = False
    cx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = cx.wrap_bio(inc, out, server_hostname=name)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    wire = out.read()
    # The handshake bytes of every record the library wrote, re-cut in 3.
    msg, off = b"", 0
    while off < len(wire):
        H.expect_eq(wire[off], 0x16, "the client's first records are handshake records")
        n = struct.unpack("!H", wire[off + 3:off + 5])[0]
        msg += wire[off + 5:off + 5 + n]
        off += 5 + n
    cut = [0, len(msg) // 3, 2 * len(msg) // 3, len(msg)]
    framed = b"".join(b"\x16\x03\x01" + struct.pack("!H", cut[k + 1] - cut[k]) +
                      msg[cut[k]:cut[k + 1]] for k in range(3))
    c = socket.create_connection((H.LOOPBACK, port), timeout=5)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        for k in range(0, len(framed), 7):
            c.sendall(framed[k:k + 7])
        deadline = time.monotonic() + 10
        done, eof = False, False
        reply = b""
        while time.monotonic() < deadline and not eof:
            if not done:
                try:
                    tls.do_handshake()
                    done = True
                    tls.write(b"GET / HTTP/1.0\r\n\r\n")
                except ssl.SSLWantReadError:
                    pass
            if done:
                try:
                    while True:
                        x = tls.read(65536)
                        if not x:
                            eof = True
                            break
                        reply += x
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError:
                    eof = True
            if out.pending:
                c.sendall(out.read())
            if eof:
                break
            b = c.recv(65536)
            if not b:
                inc.write_eof()
            else:
                inc.write(b)
        H.check(done, f"three-record hello: no handshake (framed {len(framed)} bytes)")
        return reply, tls.version()
    finally:
        c.close()


def routing(ctx):
    H.require_tool("openssl")
    H.require_tool("curl")
    tmp = ctx.tmpdir()
    backends = {cn: s_server(ctx, tmp, cn) for cn in ("svc1", "svc2")}
    echo = Backend()
    pp = Backend(proxy=True)
    slow_hello = hello("slow.test")
    bigdata = os.urandom(50 << 20)
    sender = Sender(ctx, len(slow_hello), bigdata)
    port, ops = H.free_tcp_port(), H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(f"""[sni main]
listen {H.LOOPBACK}:{port}
route svc1.test {H.LOOPBACK}:{backends['svc1']}
route svc2.test {H.LOOPBACK}:{backends['svc2']}
route *.wild.test {H.LOOPBACK}:{backends['svc2']}
route echo.test {H.LOOPBACK}:{echo.port}
route pp.test {H.LOOPBACK}:{pp.port} proxy-v2
route slow.test {H.LOOPBACK}:{sender.port}
preread-timeout 1s
""")

    # -t lists the listener and its routes.
    rc, out, err = H.run_etrelay(ctx, ["-t", "-c", conf], timeout=5)
    H.expect_eq(rc, 0, f"etrelay -t (stderr {err.strip()!r})")
    lines = out.splitlines()
    H.expect_eq(lines[0], f"sni main: listen {H.LOOPBACK}:{port} (TCP), 6 routes, "
                "max-connections 4096, max-connections-per-ip 64", "-t: the listener")
    H.check(f"sni main: route pp.test -> {H.LOOPBACK}:{pp.port} proxy-v2" in lines,
            f"-t: the proxy-v2 route: {lines}")
    H.expect_eq(lines[-1], f"etrelay: configuration {conf} is valid (0 relays, 1 SNI listener)",
                "-t: the verdict")

    relay = ctx.relay("-c", conf, "--ops-listen", f"{H.LOOPBACK}:{ops}", listen=False,
                      wait_ready=False, open_limits=False)
    relay.READY_RE = r"^sni main listening on "
    relay.wait_ready()
    for t in range(50):  # s_server up
        try:
            socket.create_connection((H.LOOPBACK, backends["svc2"]), timeout=1).close()
            socket.create_connection((H.LOOPBACK, backends["svc1"]), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    spliced = 0

    # Two names, two backends, each with its own certificate.
    for name, cn in (("svc1.test", "svc1"), ("svc2.test", "svc2"), ("a.b.wild.test", "svc2")):
        r = subprocess.run(["curl", "-sk", "--max-time", "5", "-w", "%{http_code}", "--resolve",
                            f"{name}:{port}:{H.LOOPBACK}", f"https://{name}:{port}/"],
                           capture_output=True, timeout=10)
        H.check(r.returncode == 0 and b"s_server" in r.stdout,
                f"curl {name}: rc {r.returncode}, {H.short(r.stdout)}")
        r = subprocess.run(["openssl", "s_client", "-connect", f"{H.LOOPBACK}:{port}",
                            "-servername", name], input=b"", capture_output=True, timeout=10)
        H.check(f"CN = {cn}".encode() in r.stdout or f"CN={cn}".encode() in r.stdout,
                f"s_client {name}: certificate of {cn} expected: {H.short(r.stdout)}")
        spliced += 2

    # A real ClientHello in three records, 7 bytes per write.
    reply, version = three_record_handshake(port, "svc1.test")
    H.check(reply.startswith(b"HTTP/1.0 200 ok"),
            f"three-record hello ({version}): reply {H.short(reply)}")
    ctx.note(f"three-record ClientHello, 7-byte writes: {version}, HTTP 200")
    spliced += 1

    # Refusals: not a byte, then EOF (the relay lingers for the client's
    # bytes, so its close is a FIN).
    refused(port, hello("nope.test"), "unknown name")
    refused(port, hello("", sni=False), "no SNI")
    refused(port, b"GET / HTTP/1.1\r\nHost: svc1.test\r\n\r\n", "plain HTTP")
    refused(port, hello("echo.test", 17 * 1024), "17 KB hello")
    refused(port, hello("wild.test"), "the wildcard's own suffix")

    # Hellos of 1.8, 5 and 16 KB pass, byte for byte.
    for size in (1800, 5 * 1024, 16 * 1024):
        echo_exact(port, hello("echo.test", size), f"{size}-byte hello")
        spliced += 1

    # A client that stops mid-hello is closed at the 1 s preread timeout.
    c = socket.create_connection((H.LOOPBACK, port), timeout=5)
    h = hello("echo.test")
    c.sendall(h[:20])
    t0 = time.monotonic()
    got = c.recv(10)
    took = time.monotonic() - t0
    c.close()
    H.expect_eq(got, b"", "mid-hello client: bytes")
    H.check(0.7 < took < 3.0 * H.SLOW, f"mid-hello client closed after {took:.2f} s, expected ~1 s")

    # PROXY v2: the backend learns the client's address and port.
    c = socket.create_connection((H.LOOPBACK, port), timeout=5)
    cport = c.getsockname()[1]
    data = hello("pp.test")
    c.sendall(data)
    back = Backend.recv_exact(c, len(data))
    c.close()
    H.expect_eq(back, data, "pp.test: the hello after the header")
    H.wait_until(lambda: pp.sources, 5, "the PROXY v2 backend's header")
    H.expect_eq(pp.sources[0], (H.LOOPBACK, cport), "PROXY v2 source")
    spliced += 1

    # 8 MiB each way.
    bulk = hello("echo.test") + os.urandom(8 << 20)
    echo_exact(port, bulk, "8 MiB each way")
    spliced += 1

    # A slow reader: the client reads nothing while the backend sends 50
    # MiB. The relay reads a side again only while fewer than two of its
    # chunks are being sent (a read-ahead of one), so the backend is held
    # back by the kernel's buffers, and the relay holds at most two 64 KiB
    # chunks of that direction (four for a connection streaming both ways).
    H.wait_until(lambda: H.metric_value(H.metrics_page(ops)[1], "etrelay_sni_active_connections") == 0,
                 5, "no connection open before the slow reader")
    rss0 = H.rss_kib(relay.pid)
    c = socket.create_connection((H.LOOPBACK, port), timeout=20)
    c.sendall(slow_hello)
    last, still = -1, 0
    for _ in range(100):  # until the sender made no progress for 0.3 s
        time.sleep(0.1)
        now = sender.sent
        still = still + 1 if now == last else 0
        last = now
        if still >= 3 or now == len(bigdata):
            break
    rss1 = H.rss_kib(relay.pid)
    mem = H.metric_value(H.metrics_page(ops)[1], "etrelay_sni_memory_bytes", listener="main")
    H.check(sender.sent < len(bigdata) - (16 << 20),
            f"slow reader: the backend sent {sender.sent} of {len(bigdata)} bytes to a client "
            "that reads nothing (no back-pressure?)")
    H.check(mem is not None and mem <= 2 * CHUNK,
            f"slow reader: etrelay_sni_memory_bytes {mem}, over one direction's two 64 KiB chunks")
    # The bound: the relay's own share is at most 4 chunks; its worker's stream
    # pool (256 chunks of 64 KiB + 64 B headroom, mapped at start) may be
    # touched for the first time as io_uring's buffer ring hands its
    # buffers out in turn, once; 2 MiB for the allocator and the ops
    # thread. Bytes buffered for the client would be the 40-odd MiB the
    # kernel's socket buffers cannot hold.
    bound = (POOL * (CHUNK + 64) + 4 * CHUNK + (2 << 20)) >> 10
    if H.WRAPPER:
        ctx.note("slow reader: VmRSS not checked under a checker")
    else:
        H.check(rss1 - rss0 < bound,
                f"slow reader: VmRSS grew from {rss0} to {rss1} KiB (bound {bound} KiB) with "
                f"{sender.sent} bytes sent by the backend")
    ctx.note(f"slow reader: the backend held at {sender.sent >> 10} KiB of 50 MiB, relay VmRSS "
             f"{rss0} -> {rss1} KiB, memory gauge {mem}")
    got = hashlib.sha256()
    n = 0
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        got.update(b)
        n += len(b)
    c.close()
    H.expect_eq(n, len(bigdata), "slow reader: bytes read once it reads again")
    H.check(got.digest() == hashlib.sha256(bigdata).digest(), "slow reader: the bytes differ")
    spliced += 1

    # The metrics page: clean for promtool, and the counts of the above.
    def settled():
        s = H.metrics_page(ops)[1]
        return (H.metric_value(s, "etrelay_sni_active_connections") == 0 and
                H.metric_value(s, "etrelay_sni_lingering_connections") == 0)
    H.wait_until(settled, 5 * H.SLOW, "every SNI connection closed")
    text, s = H.metrics_page(ops)
    promtool_check(text, "the SNI relay's page")

    def conns(result):
        return H.metric_value(s, "etrelay_sni_connections_total", listener="main", result=result)
    want = {"spliced": spliced, "unknown_name": 2, "no_sni": 1, "not_tls": 1, "too_big": 1,
            "preread_timeout": 1, "cap_per_ip": 0, "draining": 0, "connect_failed": 0}
    H.expect_eq({k: conns(k) for k in want}, want, "etrelay_sni_connections_total by result")
    H.expect_eq(H.metric_value(s, "etrelay_sni_preread_seconds_count", listener="main"),
                spliced + 6, "etrelay_sni_preread_seconds_count (every preread ended)")
    check_preread_histogram(s, "main", spliced + 6, 1)
    H.expect_eq(H.metric_value(s, "etrelay_sni_connections_ended_total", listener="main",
                               reason="done"), spliced, "spliced connections ended done")
    down = H.metric_value(s, "etrelay_sni_bytes_total", listener="main", direction="down")
    up = H.metric_value(s, "etrelay_sni_bytes_total", listener="main", direction="up")
    H.check(down >= len(bigdata) + len(bulk) and up >= len(bulk) + len(slow_hello),
            f"etrelay_sni_bytes_total up {up}, down {down}")
    H.expect_eq(H.metric_value(s, "etrelay_sni_routes", listener="main"), 6, "etrelay_sni_routes")
    H.expect_eq(H.metric_value(s, "etrelay_sni_memory_bytes", listener="main"), 0,
                "etrelay_sni_memory_bytes with no connection")
    life = H.http_request(ops, "GET", "/lifecycle").json()
    H.expect_eq(life["sni_listeners"], [{"name": "main", "listen": f"{H.LOOPBACK}:{port}",
                                         "routes": 6, "active_connections": 0,
                                         "max_connections": 4096}], "/lifecycle sni_listeners")
    ctx.check_relays_alive()
    echo.stop = pp.stop = True


def caps_and_drain(ctx):
    """max-connections-per-ip 2, then SIGTERM with --drain-timeout."""
    tmp = ctx.tmpdir()
    echo = Backend()
    port, ops = H.free_tcp_port(), H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(f"""[sni capped]
listen {H.LOOPBACK}:{port}
route echo.test {H.LOOPBACK}:{echo.port}
route dead.test {H.LOOPBACK}:{H.free_tcp_port()}
max-connections-per-ip 2
""")
    # -t --probe: the dead route's upstream refuses: exit 1.
    rc, out, err = H.run_etrelay(ctx, ["-t", "--probe", "-c", conf], timeout=10)
    H.expect_eq(rc, 1, f"-t --probe with a route to a closed port (stdout {out!r})")
    H.check(" route dead.test: upstream " in out and "FAILED to connect" in out,
            f"-t --probe names the dead route: {out!r}")
    H.check(f"route echo.test: upstream {H.LOOPBACK}:{echo.port} ({H.LOOPBACK}:{echo.port}): "
            "ok, accepts TCP connections" in out, f"-t --probe: the live route: {out!r}")

    relay = ctx.relay("-c", conf, "--ops-listen", f"{H.LOOPBACK}:{ops}", "--drain-timeout", "10s",
                      listen=False, wait_ready=False, open_limits=False)
    relay.READY_RE = r"^sni capped listening on "
    relay.wait_ready()

    def spliced_conn():
        c = socket.create_connection((H.LOOPBACK, port), timeout=5)
        h = hello("echo.test")
        c.sendall(h)
        H.expect_eq(Backend.recv_exact(c, len(h)), h, "a spliced connection's hello echoed")
        return c

    def echoes(c, what):
        m = os.urandom(1000)
        c.sendall(m)
        H.expect_eq(Backend.recv_exact(c, len(m)), m, what)

    a, b = spliced_conn(), spliced_conn()
    refused(port, hello("echo.test"), "a third connection from one IP")
    echoes(a, "the first of two connections after the third was refused")
    s = H.metrics_page(ops)[1]
    H.expect_eq(H.metric_value(s, "etrelay_sni_connections_total", result="cap_per_ip"), 1,
                "cap_per_ip refusals")
    H.expect_eq(H.metric_value(s, "etrelay_sni_active_connections"), 2, "active connections")
    b.close()
    # b must be gone from its address's count before the drain's newcomer
    # comes, or (on a busy host) that one is refused by the per-IP cap first.
    H.wait_until(lambda: H.metric_value(H.metrics_page(ops)[1], "etrelay_sni_active_connections") == 1,
                 5 * H.SLOW, "b's close seen by the relay")

    # Drain: the spliced connection goes on, a new one gets no byte.
    mark = relay.mark()
    relay.signal(signal.SIGTERM)
    H.wait_until(lambda: H.http_request(ops, "GET", "/readyz").status == 503, 5,
                 "/readyz draining after SIGTERM")
    refused(port, hello("echo.test"), "a new connection while draining")
    echoes(a, "the spliced connection while draining")
    s = H.metrics_page(ops)[1]
    H.expect_eq(H.metric_value(s, "etrelay_sni_connections_total", result="draining"), 1,
                "draining refusals")
    H.check(relay.alive(), "etrelay left while a spliced connection was open")
    t0 = time.monotonic()
    a.shutdown(socket.SHUT_WR)
    H.expect_eq(a.recv(10), b"", "the spliced connection's EOF")
    a.close()
    rc = relay.wait_exit(5 * H.SLOW)
    H.check(rc is not None, "etrelay still running 5 s after the last SNI connection closed")
    H.expect_eq(rc, 0, "exit status after the drain")
    ctx.note(f"drain: exit {time.monotonic() - t0:.2f} s after the last connection closed")
    # at exit the listener logs its stats line, as a game relay's `stats NAME`
    relay.wait_for_line(r"stats sni capped: connections spliced 2, refused 2 \(cap_per_ip 1, "
                        r"draining 1\); client to upstream \d+ B, upstream to client \d+ B",
                        2 * H.SLOW, start=mark)
    echo.stop = True


class ManyEcho(TcpServer):
    """An echo backend for many connections at once: one thread, a
    selector, every accepted connection echoed until its EOF, then shut.
    Held, its connections have small receive buffers and are not read
    until release(): what the relay sends them waits in the relay."""

    def __init__(self, ctx, held=False):
        self.held = [] if held else None
        self.accepted = 0
        self.go = threading.Event()
        if not held:
            self.go.set()
        super().__init__(ctx, backlog=1024, rcvbuf=2048 if held else None)

    def release(self):
        self.go.set()

    def run(self):
        self.s.setblocking(False)
        sel = selectors.DefaultSelector()
        sel.register(self.s, selectors.EVENT_READ)
        while not self.stop:
            if self.held and self.go.is_set():
                for c in self.held:
                    sel.register(c, selectors.EVENT_READ)
                self.held = None
            for key, _ in sel.select(0.05):
                if key.fileobj is self.s:
                    try:
                        c, _ = self.s.accept()
                    except OSError:
                        continue
                    self.accepted += 1
                    c.settimeout(5)
                    if self.go.is_set():
                        sel.register(c, selectors.EVENT_READ)
                    else:
                        self.held.append(c)
                    continue
                c = key.fileobj
                try:
                    b = c.recv(65536)
                    if b:
                        c.sendall(b)
                        continue
                    c.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                sel.unregister(c)
                c.close()
        sel.close()


def answers(conns, want):
    """Read every connection until EOF (at most 20 s): the ones that did not
    get want[i] whole, then EOF, as [(index, bytes back, how it ended)]."""
    n = len(conns)
    got = [bytearray() for _ in range(n)]
    ended = [None] * n
    sel = selectors.DefaultSelector()
    for i, c in enumerate(conns):
        c.setblocking(False)
        sel.register(c, selectors.EVENT_READ, i)
    deadline = time.monotonic() + 20 * H.SLOW
    left = n
    while left and time.monotonic() < deadline:
        for key, _ in sel.select(0.2):
            i = key.data
            try:
                b = key.fileobj.recv(65536)
            except BlockingIOError:
                continue
            except OSError as e:
                b, ended[i] = b"", repr(e)
            if b:
                got[i] += b
                continue
            ended[i] = ended[i] or "eof"
            sel.unregister(key.fileobj)
            left -= 1
    sel.close()
    for c in conns:
        c.close()
    return [(i, len(got[i]), ended[i]) for i in range(n)
            if ended[i] != "eof" or bytes(got[i]) != want[i]]


def send_all(port, n, size=0, extra=2000):
    """n clients, each sends a hello of about size bytes and extra more
    and half-closes."""
    want = [hello("echo.test", size) + os.urandom(extra) for _ in range(n)]
    conns = []
    for w in want:
        c = socket.create_connection((H.LOOPBACK, port), timeout=5)
        c.sendall(w)
        c.shutdown(socket.SHUT_WR)
        conns.append(c)
    return conns, want


def many_in_flight(ctx):
    """Connections in flight at once. 200 send a 16 KB hello and 16 KB
    after it; the relay reads each hello whole, connects and sends the
    32 KB it read on to a backend that reads nothing until all 200 are
    there (the relay once sent such bytes through 64 copy chunks, and
    ended the connections past them as resets when io_uring's turns held
    more); then each client gets its whole answer, then EOF. Then 50
    connect and send while the relay is stopped (SIGSTOP), and 20
    prereading ones close meanwhile: io_uring once timed the prereads that
    ended in the turn of their accept from a clock read before it (a wrap
    to 1.8e10 s); the preread histogram must hold every preread in a
    finite bucket, with a sum that fits."""
    n, m, k, timeout_s = 200, 50, 20, 2
    tmp = ctx.tmpdir()
    echo = ManyEcho(ctx, held=True)
    port, ops = H.free_tcp_port(), H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(f"""[sni many]
listen {H.LOOPBACK}:{port}
route echo.test {H.LOOPBACK}:{echo.port}
max-connections-per-ip {2 * n}
preread-timeout {timeout_s}s
""")
    relay = ctx.relay("-c", conf, "--ops-listen", f"{H.LOOPBACK}:{ops}", listen=False,
                      wait_ready=False, open_limits=False)
    relay.READY_RE = r"^sni many listening on "
    relay.wait_ready()

    def gauges(active, preread):
        s = H.metrics_page(ops)[1]
        return (H.metric_value(s, "etrelay_sni_active_connections") == active and
                H.metric_value(s, "etrelay_sni_preread_connections") == preread and
                H.metric_value(s, "etrelay_sni_lingering_connections") == 0)

    conns, want = send_all(port, n, 16000, 16000)
    H.wait_until(lambda: echo.accepted == n, 10 * H.SLOW,
                 f"the backend accepts the {n} upstream connections")
    time.sleep(0.2)
    echo.release()
    bad = answers(conns, want)
    H.check(not bad, f"{len(bad)} of {n} connections in flight did not get their whole answer "
            f"then EOF: (index, bytes back, end) {bad[:8]}")
    H.wait_until(lambda: gauges(0, 0), 5 * H.SLOW, "every SNI connection closed")

    idle = [socket.create_connection((H.LOOPBACK, port), timeout=5) for _ in range(k)]
    H.wait_until(lambda: gauges(k, k), 5 * H.SLOW, f"{k} connections prereading")
    os.kill(relay.pid, signal.SIGSTOP)
    try:
        conns, want = send_all(port, m)
        for c in idle:
            c.close()
    finally:
        os.kill(relay.pid, signal.SIGCONT)
    bad = answers(conns, want)
    H.check(not bad, f"{len(bad)} of {m} connections sent while the relay was stopped did not "
            f"get their whole answer then EOF: (index, bytes back, end) {bad[:8]}")
    ctx.note(f"{n} connections in flight, then {m} while {k} closed: every one answered whole")
    H.wait_until(lambda: gauges(0, 0), 5 * H.SLOW, "every SNI connection closed")
    s = H.metrics_page(ops)[1]
    H.expect_eq(H.metric_value(s, "etrelay_sni_connections_total", listener="many",
                               result="spliced"), n + m, "spliced connections")
    H.expect_eq(H.metric_value(s, "etrelay_sni_connections_ended_total", listener="many",
                               reason="reset"), 0, "connections ended as resets")
    check_preread_histogram(s, "many", n + m + k, timeout_s)
    echo.stop = True


def check_preread_histogram(s, listener, count, timeout_s):
    """etrelay_sni_preread_seconds: count prereads, each in a finite bucket
    (the last finite one holds them all, as +Inf does), and a sum below
    count x preread-timeout (a preread that ended before its start once
    wrapped to 1.8e10 s)."""
    def bucket(le):
        return H.metric_value(s, "etrelay_sni_preread_seconds_bucket", listener=listener, le=le)
    total = H.metric_value(s, "etrelay_sni_preread_seconds_count", listener=listener)
    psum = H.metric_value(s, "etrelay_sni_preread_seconds_sum", listener=listener)
    H.expect_eq(total, count, "etrelay_sni_preread_seconds_count")
    H.expect_eq(bucket("+Inf"), total, "etrelay_sni_preread_seconds_bucket{le=+Inf}")
    H.expect_eq(bucket("10"), total, "etrelay_sni_preread_seconds_bucket{le=10}: every preread")
    H.check(0 <= psum < count * timeout_s,
            f"etrelay_sni_preread_seconds_sum {psum} for {count} prereads of at most "
            f"{timeout_s} s")


def test(ctx):
    H.run_parts(ctx, [routing, caps_and_drain, many_in_flight])


if __name__ == "__main__":
    H.main(test)
