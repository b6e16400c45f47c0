#!/usr/bin/python3
# SPDX-License-Identifier: ISC
# Writes the seed corpora of fuzz_ws_upgrade and fuzz_ws_frame into
# fuzz/corpus/ws_upgrade/ and fuzz/corpus/ws_frame/: upgrade requests as
# Debian's python3-websockets (10.4) and curl write them, and refused ones;
# client frame streams serialized by websockets' own framing code (masked:
# binary of each length form, fragments around a ping, close, text) and a
# few hand-made bad ones. Deterministic (the masks are fixed here).
#   /usr/bin/python3 fuzz/make_ws_seeds.py
import os
import struct

from websockets.client import ClientConnection
from websockets.frames import Frame, Opcode
from websockets.uri import parse_uri

top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def write(corpus, name, data):
    d = os.path.join(top, "fuzz", "corpus", corpus)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def ws_request(token):
    c = ClientConnection(parse_uri("wss://tunnel.r1.example.net/t"))
    c.key = "dGhlIHNhbXBsZSBub25jZQ=="  # fixed: the seeds are stable
    req = c.connect()
    if token:
        req.headers["Authorization"] = "Bearer " + token
    c.send_request(req)
    return b"".join(c.data_to_send())


write("ws_upgrade", "websockets_token", ws_request("tok-123_abc.def~+/=="))
write("ws_upgrade", "websockets_no_token", ws_request(None))
write("ws_upgrade", "curl_like", b"GET /t HTTP/1.1\r\nHost: tunnel.r1.example.net:443\r\n"
      b"User-Agent: curl/7.88.1\r\nAccept: */*\r\nConnection: Upgrade\r\n"
      b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
      b"Sec-WebSocket-Key: AQIDBAUGBwgJCgsMDQ4PEA==\r\nAuthorization: Bearer x\r\n\r\n")
write("ws_upgrade", "wrong_path", ws_request("t").replace(b"GET /t ", b"GET /x "))
write("ws_upgrade", "bare_lf", ws_request("t").replace(b"\r\n", b"\n"))
write("ws_upgrade", "version_8", ws_request("t").replace(b"Version: 13", b"Version: 8"))
write("ws_upgrade", "post", b"POST /t HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc")
write("ws_upgrade", "with_frame", ws_request("t") + b"\x82\x80\x01\x02\x03\x04")

MASK = b"\x37\xfa\x21\x3d"


def client(frame):
    # websockets draws the mask with secrets.token_bytes: fixed here so the
    # seeds are stable.
    import websockets.frames as wf
    saved = wf.secrets.token_bytes
    wf.secrets.token_bytes = lambda n: MASK[:n]
    try:
        return frame.serialize(mask=True)
    finally:
        wf.secrets.token_bytes = saved


def binary(n, fin=True):
    return client(Frame(Opcode.BINARY, bytes(i * 7 % 256 for i in range(n)), fin=fin))


write("ws_frame", "binary_148", binary(148))
write("ws_frame", "binary_each_form", binary(5) + binary(125) + binary(126) + binary(1300))
write("ws_frame", "fragments_ping", binary(600, fin=False)
      + client(Frame(Opcode.PING, b"hi")) + client(Frame(Opcode.CONT, b"x" * 700))
      + client(Frame(Opcode.PONG, b"")) + client(Frame(Opcode.CLOSE, b"\x03\xe8bye")))
write("ws_frame", "close_empty", client(Frame(Opcode.CLOSE, b"")))
write("ws_frame", "text", client(Frame(Opcode.TEXT, b"hello")))
write("ws_frame", "too_big", binary(1400))
write("ws_frame", "unmasked", Frame(Opcode.BINARY, b"abc").serialize(mask=False))
write("ws_frame", "long_16_not_shortest", b"\x82\xfe\x00\x05" + MASK + b"abcde")
write("ws_frame", "long_64", b"\x82\xff" + struct.pack(">Q", 70000) + MASK)
write("ws_frame", "bad_close_reason", client(Frame(Opcode.CLOSE, b"\x03\xe8\xc0\xaf")))
