# SPDX-License-Identifier: ISC
"""TLS and TCP peers for the SNI listener's tests: synthetic ClientHellos,
a TCP echo backend (optionally behind PROXY v2), the refusal check (zero
bytes, then EOF), self-signed certificates, `openssl s_server -www`
backends, and a threaded TLS echo backend with a client that keeps its
session open (for connections that must outlive a route change)."""

import os
import socket
import ssl
import struct
import subprocess
import threading

import harness as H


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


class TcpServer(threading.Thread):
    """A TCP service on a port drawn below the ephemeral range
    (H.free_tcp_port): each connection in a thread of its own, running
    serve(c); wait_served(n, timeout) waits for n of them to end; close()
    (or ctx's cleanup, when ctx is given) ends them. rcvbuf sets the
    listening socket's SO_RCVBUF before it listens (its connections'
    windows). A subclass may replace run() (one thread for all, say):
    self.s is bound and listening, with a 0.2 s timeout."""

    def __init__(self, ctx=None, backlog=64, rcvbuf=None):
        super().__init__(daemon=True)
        self.s = socket.socket()
        if rcvbuf is not None:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.port = H.free_tcp_port()
        self.s.bind((H.LOOPBACK, self.port))
        self.s.listen(backlog)
        self.s.settimeout(0.2)
        self.stop = False
        self.conns = []
        self.served = 0
        self.cond = threading.Condition()
        if ctx is not None:
            ctx.objs.append(self)
        self.start()

    def run(self):
        while not self.stop:
            try:
                c, _ = self.s.accept()
            except OSError:
                continue
            self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            self.serve(c)
        finally:
            with self.cond:
                self.served += 1
                self.cond.notify_all()

    def serve(self, c):
        raise NotImplementedError

    def wait_served(self, n=1, timeout=30.0):
        """True once n connections were served (serve returned) within
        timeout."""
        with self.cond:
            return self.cond.wait_for(lambda: self.served >= n, timeout)

    def close(self):
        self.stop = True
        self.s.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass


class Backend(TcpServer):
    """A TCP echo backend; with proxy, it first reads a PROXY v2 header and
    records the source address it names."""

    def __init__(self, proxy=False, ctx=None):
        self.proxy = proxy
        self.sources = []
        super().__init__(ctx)

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


class Sink(TcpServer):
    """A service that reads and forgets: bytes counts what it read."""

    def __init__(self, ctx, backlog=64):
        self.bytes = 0
        super().__init__(ctx, backlog=backlog)

    def serve(self, c):
        c.settimeout(30)
        try:
            while not self.stop:
                n = len(c.recv(1 << 20))
                if n == 0:
                    return
                self.bytes += n
        except OSError:
            pass


class Flood(TcpServer):
    """An upstream that reads a hello, then sends without end until the
    relay stops taking bytes (the sends block: one thread each)."""

    def __init__(self, ctx):
        super().__init__(ctx, backlog=512)

    def serve(self, c):
        blob = b"d" * 65536
        c.settimeout(60)
        try:
            c.recv(65536)
            while not self.stop:
                c.sendall(blob)
        except OSError:
            pass


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


def make_cert(tmp, cn):
    key, crt = os.path.join(tmp, cn + ".key"), os.path.join(tmp, cn + ".crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", crt,
                    "-days", "2", "-subj", "/CN=" + cn], check=True, capture_output=True)
    return key, crt


def s_server(ctx, tmp, cn):
    key, crt = make_cert(tmp, cn)
    port = H.free_tcp_port()
    p = subprocess.Popen(["openssl", "s_server", "-accept", f"{H.LOOPBACK}:{port}", "-cert",
                          crt, "-key", key, "-www", "-quiet"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    ctx.objs.append(type("P", (), {"close": lambda self, p=p: (p.kill(), p.wait())})())
    return port


class TlsEcho(TcpServer):
    """A TLS backend with its own self-signed certificate (CN cn): any
    number of sessions at once; "GET " first gets an HTTP/1.0 reply whose
    body names cn, anything else is echoed back for as long as the client
    keeps the session. sessions counts the handshakes done."""

    def __init__(self, ctx, tmp, cn):
        self.cn = cn
        key, crt = make_cert(tmp, cn)
        with open(crt) as f:
            self.der = ssl.PEM_cert_to_DER_cert(f.read())
        self.cx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.cx.load_cert_chain(crt, key)
        self.lock = threading.Lock()
        self.sessions = 0
        super().__init__(ctx)

    def serve(self, c):
        c.settimeout(30)
        try:
            t = self.cx.wrap_socket(c, server_side=True)
        except (OSError, ssl.SSLError):
            c.close()
            return
        with self.lock:
            self.sessions += 1
        try:
            first = True
            while not self.stop:
                b = t.recv(65536)
                if not b:
                    break
                if first and b.startswith(b"GET "):
                    body = f"backend {self.cn}\n".encode()
                    t.sendall(b"HTTP/1.0 200 ok\r\nContent-Length: %d\r\n\r\n" % len(body)
                              + body)
                    break
                first = False
                t.sendall(b)
        except (OSError, ssl.SSLError):
            pass
        finally:
            t.close()


class TlsSession:
    """A TLS client session to name through the relay at port, kept open:
    der is the certificate the far end served."""

    def __init__(self, port, name, timeout=5.0, src=None):
        cx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        cx.check_hostname = False
        cx.verify_mode = ssl.CERT_NONE
        self.name = name
        raw = socket.create_connection((H.LOOPBACK, port), timeout=timeout,
                                       source_address=(src, 0) if src else None)
        try:
            self.t = cx.wrap_socket(raw, server_hostname=name)
        except (OSError, ssl.SSLError) as e:
            raw.close()
            H.fail(f"TLS to {name} through the relay: {type(e).__name__}: {e}")
        self.der = self.t.getpeercert(binary_form=True)

    def echo(self, what, size=3000):
        """size random bytes go through and come back, byte for byte."""
        m = os.urandom(size)
        self.t.settimeout(5 * H.SLOW)
        try:
            self.t.sendall(m)
            got = b""
            while len(got) < len(m):
                b = self.t.recv(len(m) - len(got))
                if not b:
                    break
                got += b
        except (OSError, ssl.SSLError) as e:
            H.fail(f"{what}: {self.name}: {type(e).__name__}: {e}")
        H.check(got == m, f"{what}: {self.name}: {len(m)} bytes sent, {len(got)} came back")

    def closed_within(self, timeout):
        """True once the far end closes the session (EOF or reset) within
        timeout; False if it is still open then."""
        self.t.settimeout(timeout)
        try:
            b = self.t.recv(100)
        except socket.timeout:
            return False
        except (OSError, ssl.SSLError):
            return True
        H.check(not b, f"{self.name}: {len(b)} unexpected bytes while waiting for a close")
        return True

    def close(self):
        try:
            self.t.close()
        except OSError:
            pass
