#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
# Writes the seed corpus of fuzz_tls_hello into fuzz/corpus/tls_hello/: the
# two ClientHellos captured from s_client (tests/data), one re-framed into
# three records, synthetic hellos of 1.8, 5, 16 and 17 KiB (a padding
# extension, GREASE, an ECH-like extension), and plain HTTP. Deterministic.
#   python3 fuzz/make_tls_hello_seeds.py
import os
import struct

top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
out = os.path.join(top, "fuzz", "corpus", "tls_hello")
data = os.path.join(top, "tests", "data")


def records(hs, sizes=()):
    wire, off, i = b"", 0, 0
    while off < len(hs):
        k = min(sizes[i] if i < len(sizes) else 16384, 16384, len(hs) - off)
        wire += b"\x16\x03\x01" + struct.pack(">H", k) + hs[off:off + k]
        off, i = off + k, i + 1
    return wire


def ext(kind, body):
    return struct.pack(">HH", kind, len(body)) + body


def synth(name, total):
    n = name.encode()
    exts = ext(0x3a3a, b"") + ext(0xfe0d, b"\0\0\0\x08inner.ex")
    exts += ext(0, struct.pack(">HBH", len(n) + 3, 0, len(n)) + n)
    exts += ext(0x2b, b"\x02\x03\x04")
    body = b"\x03\x03" + bytes(range(32)) + b"\x20" + bytes(32)
    body += b"\x00\x04\x13\x01\x0a\x0a\x01\x00"
    pad = total - 4 - len(body) - 2 - len(exts) - 4
    exts += ext(0x15, bytes(pad))
    body += struct.pack(">H", len(exts)) + exts
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    assert len(hs) == total
    return records(hs)


def save(name, b):
    with open(os.path.join(out, name), "wb") as f:
        f.write(b)


os.makedirs(out, exist_ok=True)
for f in ("client_hello_s_client.bin", "client_hello_s_client_bugs.bin"):
    with open(os.path.join(data, f), "rb") as fh:
        real = fh.read()
    save(f, real)
save("s_client_3_records.bin", records(real[5:], (100, 200)))
for size, label in ((1800, "1800"), (5 * 1024, "5k"), (16 * 1024, "16k"), (17 * 1024, "17k")):
    save("synth_%s.bin" % label, synth("svc1.example.com", size))
save("http_get.bin", b"GET / HTTP/1.1\r\nHost: svc1.example.com\r\n\r\n")
