# SPDX-License-Identifier: ISC
"""A stand-in control plane: Python's http.server on 127.0.0.1, recording
every request, answering as scripted (ControlPlane, control_plane)."""

import threading
import time
import http.server as _http_server
import json as _json
import urllib.parse as _urlparse

from harness_base import LOOPBACK
from harness_ports import free_tcp_port


CONTROL_ENROLL = "/etrelay.v1.RelayEnrollmentService/Enroll"
CONTROL_HEARTBEAT = "/etrelay.v1.RelayService/Heartbeat"
CONTROL_CERT = "/etrelay.v1.RelayService/RequestCertificate"
CONTROL_RELAY_ID = "relay-7"
CONTROL_API_TOKEN = "api-" + "a" * 40
# libcurl honours the proxy variables; the stand-in is on loopback.
CONTROL_NO_PROXY = {"no_proxy": "*", "NO_PROXY": "*", "http_proxy": None, "HTTP_PROXY": None,
                    "https_proxy": None, "HTTPS_PROXY": None, "all_proxy": None,
                    "ALL_PROXY": None, "ETRELAY_CONTROL_TOKEN": None,
                    "ETRELAY_CONTROL_TOKEN_FILE": None}


class ControlPlane:
    """The stand-in. enroll and heartbeat are the scripted answers:
    "ok", a status number, "hang" (answered after hang seconds, longer
    than the client waits), "bad_json", "bad_route", "redirect" (a 307
    to location), or "huge" (huge_bytes of valid JSON, every value an
    empty object, with status huge_status, framed as huge_framing: "length"
    (Content-Length), "chunked" or "close" (neither: the body ends with the
    connection), streamed). routes is the set a good heartbeat is answered
    with (dicts as the JSON has them); wg_peers, when not None, its
    wireguardPeers, and tunnel_tokens, when not None, its tunnelTokens.
    cert is RequestCertificate's answer: a status number
    (501: no certificates offered), or a function of the request's CSR (PEM
    text) that returns (status, JSON object). host: the address it listens
    on (a namespace's relay reaches the host side of its veth pair)."""

    def __init__(self, hang=2.5, host=LOOPBACK):
        self.lock = threading.Lock()
        self.requests = []  # (monotonic time, path, headers, body)
        self.enroll = "ok"
        self.heartbeat = "ok"
        self.routes = []
        self.wg_peers = None
        self.tunnel_tokens = None
        self.cert = "501"
        self.stop = threading.Event()
        self.hang = hang
        self.location = None
        self.huge_bytes = 64 << 20
        self.huge_status = 200
        self.huge_framing = "length"
        cp = self

        class Handler(_http_server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                t = time.monotonic()
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                # a proxy's request line names the whole URL
                path = _urlparse.urlsplit(self.path).path
                with cp.lock:
                    cp.requests.append((t, self.path, dict(self.headers), body))
                    mode = (cp.enroll if path == CONTROL_ENROLL else
                            cp.cert if path == CONTROL_CERT else cp.heartbeat)
                    location = cp.location
                    sets = list(cp.routes)
                    peers = cp.wg_peers
                    tokens = cp.tunnel_tokens
                    huge = (cp.huge_bytes, cp.huge_status, cp.huge_framing)
                if mode == "hang":
                    cp.stop.wait(cp.hang)
                    mode = "ok"
                if path == CONTROL_CERT and callable(mode):
                    self.answer(*mode(_json.loads(body or b"{}").get("csr", "")))
                elif mode == "ok" and path == CONTROL_ENROLL:
                    self.answer(200, {"relayId": CONTROL_RELAY_ID, "apiToken": CONTROL_API_TOKEN})
                elif mode == "ok" and path == CONTROL_HEARTBEAT:
                    hb = {"sniRoutes": sets, "unknownField": {"x": 1}}
                    if peers is not None:
                        hb["wireguardPeers"] = peers
                    if tokens is not None:
                        hb["tunnelTokens"] = tokens
                    self.answer(200, hb)
                elif mode == "redirect":
                    try:
                        self.send_response(307)
                        self.send_header("Location", location)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                    except OSError:
                        pass
                elif mode == "huge":
                    self.stream_huge(*huge)
                elif mode == "bad_json":
                    self.answer(200, b'{"sniRoutes": [')
                elif mode == "bad_route":
                    self.answer(200, {"sniRoutes": [
                        {"name": "svc0.example.com", "upstream": "10.0.0.1:443"},
                        {"name": "bad.example.com", "upstream": "backend.internal:443"}]})
                else:
                    self.answer(int(mode), {"code": "unavailable", "message": "scripted"})

            def stream_huge(self, size, status, framing):
                head = b'{"sniRoutes":[],"x":['
                piece = b"{}," * 21845  # 65535 bytes
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    if framing == "length":
                        self.send_header("Content-Length", str(size))
                    elif framing == "chunked":
                        self.send_header("Transfer-Encoding", "chunked")
                    else:
                        self.send_header("Connection", "close")
                        self.close_connection = True
                    self.end_headers()

                    def out(b):
                        if framing == "chunked":
                            self.wfile.write(b"%x\r\n" % len(b) + b + b"\r\n")
                        else:
                            self.wfile.write(b)
                    out(head)
                    left = size - len(head) - 3
                    while left > 0 and not cp.stop.is_set():
                        b = piece[:left - left % 3] if left < len(piece) else piece
                        b = b or b" " * left
                        out(b)
                        left -= len(b)
                    out(b"0]}")
                    if framing == "chunked":
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass  # the client cut it off

            def answer(self, status, obj):
                data = obj if isinstance(obj, bytes) else _json.dumps(obj).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (a hang past its timeout)

        # a drawn port below the ephemeral range (bind(0) would hand out
        # one a client socket of a test beside this one may take next)
        for attempt in range(20):
            try:
                self.server = _http_server.ThreadingHTTPServer((host, free_tcp_port(host)),
                                                               Handler)
                break
            except OSError:
                if attempt == 19:
                    raise
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def set(self, **kw):
        with self.lock:
            for k, v in kw.items():
                setattr(self, k, v)

    def of(self, path):
        with self.lock:
            return [r for r in self.requests if r[1] == path]

    def close(self):
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def control_plane(ctx, **kw):
    """A ControlPlane(**kw), closed with ctx."""
    cp = ControlPlane(**kw)
    ctx.objs.append(cp)
    return cp
