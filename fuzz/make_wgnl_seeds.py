#!/usr/bin/python3
# SPDX-License-Identifier: ISC
# Writes the seed corpus of fuzz_wgnl_get into fuzz/corpus/wgnl_get/: the
# kernel's answers to a WireGuard get (generic netlink, linux/wireguard.h)
# as the kernel lays them out: the device with peers, a peer continued in a
# second message, the end of the dump, an error, and a few damaged ones.
# Deterministic. Python's standard library only.
#   python3 fuzz/make_wgnl_seeds.py
import os
import socket
import struct

top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FAMILY, SEQ, NESTED = 0x1d, 1, 0x8000


def attr(t, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, t) + payload + b"\0" * ((4 - n % 4) % 4)


def nest(t, items):
    return attr(t | NESTED, b"".join(items))


def allowed(i, cidr):
    ip, bits = cidr.split("/")
    fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
    return nest(i, [attr(1, struct.pack("=H", fam)), attr(2, socket.inet_pton(fam, ip)),
                    attr(3, bytes([int(bits)]))])


def peer(i, key, cidrs, psk=bytes(32), hs=(0, 0)):
    return nest(i, [attr(1, key), attr(2, psk), attr(6, struct.pack("=qq", *hs)),
                    attr(7, struct.pack("=Q", 1234)), attr(8, struct.pack("=Q", 5678)),
                    nest(9, [allowed(j, c) for j, c in enumerate(cidrs)]),
                    attr(10, struct.pack("=I", 1))])


def msg(attrs, typ=FAMILY):
    body = struct.pack("=BBH", 0, 1, 0) + b"".join(attrs)
    return struct.pack("=IHHII", 16 + len(body), typ, 2, SEQ, 0) + body


def done():
    return struct.pack("=IHHII", 20, 3, 2, SEQ, 0) + b"\0" * 4


def write(name, data):
    d = os.path.join(top, "fuzz", "corpus", "wgnl_get")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


dev = [attr(1, struct.pack("=I", 7)), attr(2, b"wg0\0"), attr(3, bytes(range(32))),
       attr(4, bytes(range(32, 64))), attr(6, struct.pack("=H", 51820)),
       attr(7, struct.pack("=I", 0))]
a, b = bytes([0xaa] * 32), bytes([0xbb] * 32)
write("device-two-peers", msg(dev + [nest(8, [
    peer(0, a, ["10.8.0.2/32", "fd00::2/128"], psk=bytes([7] * 32), hs=(1765000000, 5)),
    peer(1, b, ["10.8.1.0/24"])])]))
write("split-peer", msg(dev + [nest(8, [peer(0, a, ["10.8.0.0/24"])])]) +
      msg([attr(2, b"wg0\0"), nest(8, [peer(0, a, ["10.9.0.0/24"]),
                                       peer(1, b, ["10.8.2.1/32"])])]))
write("no-peers-done", msg(dev) + done())
write("done", done())
err = struct.pack("=IHHII", 36, 2, 0, SEQ, 0) + struct.pack("=i", -19) + bytes(16)
write("error-enodev", err)
good = msg(dev + [nest(8, [peer(0, a, ["10.8.0.2/32"])])])
write("truncated", good[:len(good) - 7])
write("bad-attr-len", good[:40] + b"\xff\xff" + good[42:])
write("bad-family", msg([nest(8, [nest(0, [attr(1, a), nest(9, [nest(0, [
    attr(1, struct.pack("=H", 99)), attr(2, bytes(4)), attr(3, b"\x21")])])])])]))
