#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""An SNI listener with `splice yes`: a real TLS session (Python's ssl on
both ends, the server with its own self-signed certificate) moves 50 MB up
and 50 MB down through the relay, checked by SHA-256 both ways; half-close
both ways after a synthetic ClientHello: the client's FIN reaches the
upstream while the upstream's bytes still come back, and the upstream's
FIN reaches the client while the client's bytes still go up. The metrics
show the bytes went through pipes (etrelay_sni_relayed_bytes_total
path="splice", none copied), no chunk of the pool held
(etrelay_sni_memory_bytes 0 while bytes flow), and the pipes closed with
the connections (etrelay_sni_pipes back to 0). 128 clients
that never read an endless download hold no chunk of the pool
(etrelay_stream_chunks 0) while a real TLS client gets through. Both
loops splice (epoll: splice(2) on readiness; io_uring: IORING_OP_SPLICE
behind a linked poll)."""

import hashlib
import os
import socket
import ssl
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from tlsutil import Backend, Flood, TcpServer, TlsEcho, TlsSession, hello, make_cert  # noqa: E402

MB = 1 << 20
BIG = 50 * MB


def recv_exact(c, n, h=None):
    """n bytes of c; only their hash when h is given."""
    got, parts = 0, []
    while got < n:
        b = c.recv(min(n - got, 1 << 18))
        if not b:
            raise OSError(f"EOF after {got} of {n} bytes")
        got += len(b)
        if h:
            h.update(b)
        else:
            parts.append(b)
    return b"".join(parts)


class TlsPeer(TcpServer):
    """TLS connections: each reads BIG bytes and answers their SHA-256,
    then sends BIG bytes of down (whose hash the client checks)."""

    def __init__(self, ctx, tmp, down):
        key, crt = make_cert(tmp, "bulk")
        self.cx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.cx.load_cert_chain(crt, key)
        self.down = down
        self.error = None
        super().__init__(ctx)

    def serve(self, c):
        try:
            c.settimeout(60)
            t = self.cx.wrap_socket(c, server_side=True)
            h = hashlib.sha256()
            recv_exact(t, BIG, h)
            t.sendall(h.digest())
            t.sendall(self.down)
            t.close()
        except (OSError, ssl.SSLError) as e:
            self.error = e


class UpstreamShutsFirst(TcpServer):
    """After the hello: send first bytes, shut its write side, then read
    to EOF and keep the hash of what came."""

    def __init__(self, ctx, hello_len, first):
        self.hello_len, self.first = hello_len, first
        self.digest, self.error = None, None
        super().__init__(ctx)

    def serve(self, c):
        try:
            c.settimeout(30)
            recv_exact(c, self.hello_len)
            c.sendall(self.first)
            c.shutdown(socket.SHUT_WR)
            h = hashlib.sha256()
            while True:
                b = c.recv(1 << 18)
                if not b:
                    break
                h.update(b)
            self.digest = h.digest()
            c.close()
        except OSError as e:
            self.error = e


def metrics(ops):
    s = H.metrics_page(ops)[1]
    return (H.metric_value(s, "etrelay_sni_relayed_bytes_total", listener="bulk", path="splice"),
            H.metric_value(s, "etrelay_sni_relayed_bytes_total", listener="bulk", path="copy"),
            H.metric_value(s, "etrelay_sni_pipes", listener="bulk"),
            H.metric_value(s, "etrelay_sni_memory_bytes", listener="bulk"))


def test(ctx):
    tmp = ctx.tmpdir()
    down = os.urandom(BIG)
    peer = TlsPeer(ctx, tmp, down)
    echo = Backend()
    h_up = hello("up.test")
    first = os.urandom(4 * MB)
    shuts = UpstreamShutsFirst(ctx, len(hello("down.test")), first)
    port, ops = H.free_tcp_port(), H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(f"""[sni bulk]
listen {H.LOOPBACK}:{port}
route tls.test {H.LOOPBACK}:{peer.port}
route up.test {H.LOOPBACK}:{echo.port}
route down.test {H.LOOPBACK}:{shuts.port}
splice yes
""")
    rc, out, err = H.run_etrelay(ctx, ["-t", "-c", conf], timeout=5)
    H.expect_eq(rc, 0, f"etrelay -t (stderr {err.strip()!r})")
    lines = out.splitlines()
    H.check(lines[0].endswith(", splice"), f"-t: the listener splices: {out!r}")
    H.expect_eq(lines[1], "sni bulk: splice: up to 1024 connections at once through 2 pipes "
                "each (max-spliced)", "-t: max-spliced by default")
    # The pipes count in the descriptor budget: 2 * (4096 + 1024) + 1
    # sockets and 4 * 1024 pipe ends, about 14 500 with the ops plane; a
    # hard limit of 12 000 is enough without splice, not with it.
    lim = [H.require_tool("prlimit"), "--nofile=12000:12000"]
    rc, out, err = H.run_etrelay(ctx, ["-t", "-c", conf], timeout=5, wrapper=lim)
    H.expect_eq(rc, 78, f"-t, splice yes, 12 000 descriptors (stderr {err.strip()!r})")
    H.check("2 pipes each of max-spliced" in err, f"-t names the pipes: {err.strip()!r}")
    plain = conf + ".plain"
    with open(conf) as f, open(plain, "w") as g:
        g.write(f.read().replace("splice yes\n", ""))
    rc, out, err = H.run_etrelay(ctx, ["-t", "-c", plain], timeout=5, wrapper=lim)
    H.expect_eq(rc, 0, f"-t, splice no, 12 000 descriptors (stderr {err.strip()!r})")
    relay = ctx.relay("-c", conf, "--ops-listen", f"{H.LOOPBACK}:{ops}", listen=False,
                      wait_ready=False, open_limits=False)
    relay.READY_RE = r"^sni bulk listening on "
    relay.wait_ready()

    # 50 MB each way in one TLS session, hashed at both ends.
    cx = ssl.create_default_context()
    cx.check_hostname = False
    cx.verify_mode = ssl.CERT_NONE
    up = os.urandom(BIG)
    c = cx.wrap_socket(socket.create_connection((H.LOOPBACK, port), timeout=60),
                       server_hostname="tls.test")
    c.sendall(up)
    H.expect_eq(recv_exact(c, 32), hashlib.sha256(up).digest(),
                "the upstream's SHA-256 of the 50 MB the client sent over TLS")
    mid = metrics(ops)
    H.expect_eq(mid[3], 0, "etrelay_sni_memory_bytes while a spliced connection is open")
    H.expect_eq(mid[2], 2, "etrelay_sni_pipes with one spliced connection")
    h = hashlib.sha256()
    recv_exact(c, BIG, h)
    H.check(h.digest() == hashlib.sha256(down).digest(),
            "the 50 MB the upstream sent over TLS, as the client read them")
    c.close()
    H.check(peer.wait_served(1, 30), "TLS upstream: its session did not end within 30 s")
    H.check(peer.error is None, f"TLS upstream: {peer.error}")
    ctx.note("TLS: 50 MB up and 50 MB down, SHA-256 equal both ways")

    # The client shuts first: its FIN reaches the echo upstream (which
    # answers it with its own once all is echoed), the echo still comes.
    data = os.urandom(8 * MB)
    c = socket.create_connection((H.LOOPBACK, port), timeout=30)
    got = []

    def reader():
        while True:
            b = c.recv(1 << 18)
            if not b:
                break
            got.append(b)
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    c.sendall(h_up + data)
    c.shutdown(socket.SHUT_WR)
    t.join(30)
    H.check(not t.is_alive(), "client shut first: no EOF from the echo upstream within 30 s")
    back = b"".join(got)
    H.check(back == h_up + data,
            f"client shut first: {len(h_up + data)} bytes sent, {len(back)} came back")
    c.close()

    # The upstream shuts first: the client reads its bytes and EOF, then
    # still sends, and the upstream gets all of it before the client's FIN.
    c = socket.create_connection((H.LOOPBACK, port), timeout=30)
    c.sendall(hello("down.test"))
    h = hashlib.sha256()
    while True:
        b = c.recv(1 << 18)
        if not b:
            break
        h.update(b)
    H.check(h.digest() == hashlib.sha256(first).digest(),
            "upstream shut first: the client read its 4 MB, then EOF")
    late = os.urandom(6 * MB)
    c.sendall(late)
    c.shutdown(socket.SHUT_WR)
    H.check(shuts.wait_served(1, 30), "upstream shut first: its connection did not end in 30 s")
    H.check(shuts.error is None, f"upstream shut first: {shuts.error}")
    H.check(shuts.digest == hashlib.sha256(late).digest(),
            "upstream shut first: the 6 MB the client sent after the upstream's EOF")
    H.expect_eq(c.recv(10), b"", "upstream shut first: the client's socket ends clean")
    c.close()
    ctx.note("half-close both ways: every byte after the first FIN arrived")

    # Every byte after the hellos through pipes, none copied; the pipes
    # closed with the connections. (What came in the hello's last read, up
    # to a chunk, went with the preread.)
    least = 2 * BIG + 32 + 2 * len(data) + len(first) + len(late) - 2 * 65536

    def done():
        m = metrics(ops)
        return m[2] == 0 and m[0] >= least and m
    m = H.wait_until(done, 10, "etrelay_sni_pipes back to 0, the spliced bytes counted",
                     interval=0.1)
    H.expect_eq(m[1], 0, "etrelay_sni_relayed_bytes_total{path=copy} with splice yes")
    loop_spliced = H.metric_value(H.metrics_page(ops)[1], "etrelay_stream_spliced_bytes_total")
    H.check(loop_spliced >= least, f"etrelay_stream_spliced_bytes_total {loop_spliced}, "
            f"at least {least} expected")
    ctx.note(f"etrelay_sni_relayed_bytes_total path=splice {m[0]}, path=copy {m[1]}")
    pinned(ctx)


def pinned(ctx):
    """128 clients from two addresses that never read an endless download:
    with pipes they hold no chunk of the loops' pools (etrelay_stream_chunks
    0, etrelay_sni_memory_bytes 0) and a real TLS client still gets
    through."""
    flood = Flood(ctx)
    tls = TlsEcho(ctx, ctx.tmpdir(), "echo.tls.test")
    tmp = ctx.tmpdir()
    port, ops = H.free_tcp_port(), H.free_tcp_port()
    conf = os.path.join(tmp, "pinned.conf")
    with open(conf, "w") as f:
        f.write(f"[sni bulk]\nlisten {H.LOOPBACK}:{port}\n"
                f"route big.test {H.LOOPBACK}:{flood.port}\n"
                f"route echo.tls.test {H.LOOPBACK}:{tls.port}\n"
                "max-connections-per-ip 512\nsplice yes\n")
    r = ctx.relay("-c", conf, "--ops-listen", f"{H.LOOPBACK}:{ops}", listen=False,
                  wait_ready=False, open_limits=False)
    r.READY_RE = r"^sni bulk listening on "
    r.wait_ready()
    held = []
    try:
        # 128 in all, whatever the workers: 2 pipes of 32 pages each, 8192
        # pages of the user's pipe-user-pages-soft (16384 without
        # CAP_SYS_RESOURCE, shared with the tests beside this one); past
        # it a connection copies.
        for _ in range(64):
            for src in ("127.0.0.2", "127.0.0.3"):
                c = socket.socket()
                c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                c.bind((src, 0))
                c.settimeout(5)
                c.connect((H.LOOPBACK, port))
                c.sendall(hello("big.test"))
                held.append(c)
        n = len(held)

        def spliced():
            s = H.metrics_page(ops)[1]
            return (H.metric_value(s, "etrelay_sni_connections_total", listener="bulk",
                                   result="spliced") or 0) >= n
        H.wait_until(spliced, 10 * H.SLOW, f"the {n} attackers spliced", interval=0.1)
        time.sleep(1)  # their downloads fill what the relay lets them
        for _ in range(8):
            ses = TlsSession(port, "echo.tls.test", timeout=2)
            ses.echo("beside the clients that never read", 3000)
            ses.close()
        s = H.metrics_page(ops)[1]
        chunks = H.metric_value(s, "etrelay_stream_chunks")
        mem = H.metric_value(s, "etrelay_sni_memory_bytes", listener="bulk")
        pipes = H.metric_value(s, "etrelay_sni_pipes", listener="bulk")
        ctx.note(f"pinned: {n} clients that never read: {chunks} stream chunks in use, "
                 f"etrelay_sni_memory_bytes {mem}, etrelay_sni_pipes {pipes}")
        # Each that splices holds no chunk; one that copies (its pipes
        # refused: the user's pipe pages spent by the tests beside
        # this one) at most 2 of its download, none of its upload.
        copying = max(0, n - pipes // 2)  # a real session may still close
        H.check(pipes >= n, f"etrelay_sni_pipes {pipes}: most of the {n} clients splice")
        H.check(chunks <= 2 * copying,
                f"etrelay_stream_chunks {chunks} with {copying} of {n} clients copying")
        H.check(mem <= 2 * 65536 * copying,
                f"etrelay_sni_memory_bytes {mem} with {copying} of {n} clients copying")
    finally:
        for c in held:
            c.close()
        flood.close()
    tls.close()


if __name__ == "__main__":
    H.main(test)
