#!/usr/bin/python3
# SPDX-License-Identifier: ISC
"""Rung 3's WebSocket server side (src/tun/ws.c) against a real WebSocket
library: Debian's python3-websockets (10.4), its sans-I/O client. The
client's handshake and frames (masked; a message in fragments around a
ping; a close) are written by websockets and read by ws_peer
(tests/ws_peer.c) in pieces of several sizes, one byte at a time
included; ws_peer's answer and frames are read back by websockets, which
checks the accept, that server frames are unmasked, the close codes. Also:
a text message gets 1003, a message over 1500 bytes 1009, a wrong token
403, no token 401, another path 404. Exit 77 without python3-websockets.

Usage: ws_interop.py WS_PEER"""

import subprocess
import sys

try:
    from websockets.client import ClientConnection
    from websockets.exceptions import InvalidStatus
    from websockets.frames import Opcode
    from websockets.http11 import Response
    from websockets.uri import parse_uri
except ImportError:
    print("SKIP: python3-websockets (Debian) is not installed for", sys.executable)
    sys.exit(77)

PEER = sys.argv[1]
TOKEN = "gw1-tok_3xQ~+/="
SEEDS = [0, 1, 7, 1234]  # 0: one byte at a time


def fail(msg):
    print("FAIL ws_interop:", msg)
    sys.exit(1)


def handshake(seed, token=TOKEN, path="/t"):
    """A client and a ws_peer that has answered its request."""
    c = ClientConnection(parse_uri("wss://tunnel.r1.example.net" + path))
    req = c.connect()
    if token is not None:
        req.headers["Authorization"] = "Bearer " + token
    c.send_request(req)
    p = subprocess.Popen([PEER, TOKEN, str(seed)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, bufsize=0)
    p.stdin.write(b"".join(c.data_to_send()))
    p.stdin.flush()
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 4096:
        b = p.stdout.read(1)  # unbuffered (communicate reads the fd itself)
        if not b:
            break
        head += b
    c.receive_data(head)
    return c, p


def finish(c, p, data):
    """Send data, close our side, read everything back."""
    try:
        out, _ = p.communicate(data, timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("ws_peer did not finish within 20 s")
    c.receive_data(out)
    c.receive_eof()
    return [e for e in c.events_received() if not isinstance(e, Response)], p.returncode


def refused(status, **kw):
    c, p = handshake(1, **kw)
    _, rc = finish(c, p, b"")
    exc = c.handshake_exc
    if not isinstance(exc, InvalidStatus) or exc.response.status_code != status:
        fail(f"{kw}: expected {status}, websockets says {exc!r}")
    if rc != 0:
        fail(f"{kw}: ws_peer exit {rc}")


def main():
    a = bytes(range(256)) * 2
    b = b"\x00" * 148  # a WireGuard handshake initiation's size
    c1 = bytes(i * 13 % 251 for i in range(700))
    c2 = bytes(i * 17 % 253 for i in range(800))
    for seed in SEEDS:
        c, p = handshake(seed)
        if c.handshake_exc is not None:
            fail(f"seed {seed}: handshake refused by websockets: {c.handshake_exc!r}")
        c.events_received()
        c.send_binary(a)
        c.send_binary(b)
        c.send_binary(c1, fin=False)
        c.send_ping(b"ping!")
        c.send_continuation(c2, fin=True)
        c.send_binary(b"")
        c.send_close(1000, "bye")
        events, rc = finish(c, p, b"".join(c.data_to_send()))
        got = [(e.opcode, e.data) for e in events]
        want = [(Opcode.BINARY, a), (Opcode.BINARY, b), (Opcode.PONG, b"ping!"),
                (Opcode.BINARY, c1 + c2), (Opcode.BINARY, b""),
                (Opcode.CLOSE, b"\x03\xe8")]
        if got != want:
            fail(f"seed {seed}: got {[(o.name, len(d)) for o, d in got]}")
        if rc != 0 or c.close_code != 1000:
            fail(f"seed {seed}: exit {rc}, close code {c.close_code}")

    # A text message: 1003; a message over 1500 bytes: 1009.
    for send, code in ((lambda c: c.send_text(b"hello"), 1003),
                       (lambda c: c.send_binary(b"x" * 1501), 1009),
                       (lambda c: (c.send_binary(b"x" * 1000, fin=False),
                                   c.send_continuation(b"y" * 501, fin=True)), 1009)):
        c, p = handshake(3)
        c.events_received()
        send(c)
        events, rc = finish(c, p, b"".join(c.data_to_send()))
        if rc != 0 or c.close_code != code:
            fail(f"expected close {code}, got {c.close_code} (exit {rc})")

    refused(403, token="another-token")
    refused(401, token=None)
    refused(404, path="/x")
    print(f"ws_interop: websockets' frames through ws.c with {len(SEEDS)} splits, "
          "echoed back and read by websockets; 1003, 1009, 401, 403, 404 as expected")


if __name__ == "__main__":
    main()
