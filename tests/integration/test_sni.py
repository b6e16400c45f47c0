#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The SNI listener with real peers on loopback: two `openssl s_server -www`
backends with their own certificates reached by name (curl --resolve, the
served certificate's CN and body checked), a wildcard route; refusals
(unknown name, no SNI, plain HTTP, a 17 KB hello) read as zero bytes then
EOF; synthetic 1.8/5/16 KB hellos reach an echo backend byte for byte; a
client that stops mid-hello is closed at the 1 s preread timeout; a
PROXY v2 route's backend reads the client's address and port; 8 MiB each
way spliced byte for byte."""

import hashlib
import os
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def hello(name, size=0, sni=True):
    """A synthetic ClientHello record for name, padded (extension 21) to
    about size bytes of handshake message; one record up to 16 KiB, more
    records past it."""
    exts = b""
    if sni:
        n = name.encode()
        sn = struct.pack("!BH", 0, len(n)) + n
        exts += struct.pack("!HH", 0, len(sn) + 2) + struct.pack("!H", len(sn)) + sn
    body = b"\x03\x03" + os.urandom(32) + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
    pad = max(0, size - 4 - len(body) - 2 - len(exts) - 4)
    if size:
        exts += struct.pack("!HH", 21, pad) + b"\x00" * pad
    body += struct.pack("!H", len(exts)) + exts
    msg = b"\x01" + struct.pack("!I", len(body))[1:] + body
    out = b""
    for i in range(0, len(msg), 16384):
        part = msg[i:i + 16384]
        out += b"\x16\x03\x01" + struct.pack("!H", len(part)) + part
    return out


class Backend(threading.Thread):
    """A TCP echo backend; with proxy, it first reads a PROXY v2 header and
    records the source address it names."""

    def __init__(self, proxy=False):
        super().__init__(daemon=True)
        self.s = socket.socket()
        self.s.bind((H.LOOPBACK, 0))
        self.s.listen(64)
        self.s.settimeout(0.2)
        self.port = self.s.getsockname()[1]
        self.proxy = proxy
        self.sources = []
        self.stop = False
        self.start()

    def run(self):
        while not self.stop:
            try:
                c, _ = self.s.accept()
            except OSError:
                continue
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        c.settimeout(20)
        try:
            if self.proxy:
                hdr = self.recv_exact(c, 16)
                H.check(hdr[:12] == b"\r\n\r\n\x00\r\nQUIT\n", "PROXY v2 signature")
                rest = self.recv_exact(c, struct.unpack("!H", hdr[14:16])[0])
                if hdr[13] == 0x11:
                    src = socket.inet_ntoa(rest[0:4])
                    sport = struct.unpack("!H", rest[8:10])[0]
                    self.sources.append((src, sport))
            while True:
                b = c.recv(65536)
                if not b:
                    break
                c.sendall(b)
            c.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            c.close()

    @staticmethod
    def recv_exact(c, n):
        b = b""
        while len(b) < n:
            x = c.recv(n - len(b))
            if not x:
                raise OSError("short")
            b += x
        return b


def refused(port, data, what):
    """Send data; the relay must send nothing and close: b"" (EOF)."""
    c = socket.create_connection((H.LOOPBACK, port), timeout=5)
    c.sendall(data)
    try:
        got = c.recv(100)
    except ConnectionResetError:
        H.fail(f"{what}: a reset, expected EOF with no byte")
    finally:
        c.close()
    H.expect_eq(got, b"", f"{what}: bytes before EOF")


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


def test(ctx):
    H.require_tool("openssl")
    H.require_tool("curl")
    tmp = ctx.tmpdir()
    backends = {}
    for cn in ("svc1", "svc2"):
        key, crt = os.path.join(tmp, cn + ".key"), os.path.join(tmp, cn + ".crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", crt,
                        "-days", "2", "-subj", "/CN=" + cn], check=True, capture_output=True)
        port = H.free_tcp_port()
        p = subprocess.Popen(["openssl", "s_server", "-accept", f"{H.LOOPBACK}:{port}", "-cert",
                              crt, "-key", key, "-www", "-quiet"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        ctx.objs.append(type("P", (), {"close": lambda self, p=p: (p.kill(), p.wait())})())
        backends[cn] = port
    echo = Backend()
    pp = Backend(proxy=True)
    port = H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(f"""[sni main]
listen {H.LOOPBACK}:{port}
route svc1.test {H.LOOPBACK}:{backends['svc1']}
route svc2.test {H.LOOPBACK}:{backends['svc2']}
route *.wild.test {H.LOOPBACK}:{backends['svc2']}
route echo.test {H.LOOPBACK}:{echo.port}
route pp.test {H.LOOPBACK}:{pp.port} proxy-v2
preread-timeout 1s
""")
    relay = ctx.relay("-c", conf, listen=False, wait_ready=False, open_limits=False)
    relay.READY_RE = r"^sni main listening on "
    relay.wait_ready()
    for t in range(50):  # s_server up
        try:
            socket.create_connection((H.LOOPBACK, backends["svc2"]), timeout=1).close()
            socket.create_connection((H.LOOPBACK, backends["svc1"]), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)

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

    # A client that stops mid-hello is closed at the 1 s preread timeout.
    c = socket.create_connection((H.LOOPBACK, port), timeout=5)
    h = hello("echo.test")
    c.sendall(h[:20])
    t0 = time.monotonic()
    got = c.recv(10)
    took = time.monotonic() - t0
    c.close()
    H.expect_eq(got, b"", "mid-hello client: bytes")
    H.check(0.7 < took < 3.0, f"mid-hello client closed after {took:.2f} s, expected ~1 s")

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

    # 8 MiB each way.
    bulk = hello("echo.test") + os.urandom(8 << 20)
    echo_exact(port, bulk, "8 MiB each way")
    ctx.check_relays_alive()
    echo.stop = pp.stop = True


if __name__ == "__main__":
    H.main(test)
