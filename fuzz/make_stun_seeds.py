#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
# Writes the synthetic seeds of fuzz_stun into fuzz/corpus/stun/ (the RFC
# 5769 vectors and the messages captured from turnutils_uclient and
# turnutils_stunclient are there as files already): the TURN requests and
# indications the server reads, with both MACs and FINGERPRINT, a 420
# answer, and ChannelData over UDP and streams. Deterministic.
#   python3 fuzz/make_stun_seeds.py
import hashlib
import hmac
import os
import struct
import zlib

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "stun")
COOKIE = 0x2112A442
TID = bytes(range(1, 13))
KEY = hashlib.md5(b"1800000000:seed:etrelay.test:password").digest()


def attr(t, v, pad=b"\0"):
    return struct.pack(">HH", t, len(v)) + v + pad * ((4 - len(v) % 4) % 4)


def xor_addr(ip, port):
    p = struct.pack(">H", port ^ (COOKIE >> 16))
    if len(ip) == 4:
        x = bytes(a ^ b for a, b in zip(ip, struct.pack(">I", COOKIE)))
        return b"\0\x01" + p + x
    mask = struct.pack(">I", COOKIE) + TID
    return b"\0\x02" + p + bytes(a ^ b for a, b in zip(ip, mask))


def msg(mtype, attrs, mi=False, mi256=False, fp=False):
    body = b"".join(attrs)

    def hdr(extra):
        return struct.pack(">HHI", mtype, len(body) + extra, COOKIE) + TID

    if mi:
        mac = hmac.new(KEY, hdr(24) + body, hashlib.sha1).digest()
        body += attr(0x0008, mac)
    if mi256:
        mac = hmac.new(KEY, hdr(36) + body, hashlib.sha256).digest()
        body += attr(0x001C, mac)
    if fp:
        crc = zlib.crc32(hdr(8) + body) ^ 0x5354554E
        body += attr(0x8028, struct.pack(">I", crc))
    return hdr(0) + body


auth = [attr(0x0006, b"1800000000:seed"), attr(0x0014, b"etrelay.test"),
        attr(0x0015, b"0" * 48)]
peer4 = attr(0x0012, xor_addr(bytes([203, 0, 113, 5]), 40000))
peer6 = attr(0x0012, xor_addr(bytes.fromhex("20010db8000000000000000000000005"), 40001))
seeds = {
    "allocate_even_port_family": msg(0x0003, [
        attr(0x0019, b"\x11\0\0\0"), attr(0x000D, struct.pack(">I", 600)),
        attr(0x0018, b"\x80"), attr(0x0017, b"\x01\0\0\0"), attr(0x001A, b"")] + auth,
        mi=True, fp=True),
    "refresh_zero_sha256": msg(0x0004, [attr(0x000D, b"\0\0\0\0")] + auth, mi256=True),
    "create_permission_two_peers": msg(0x0008, [peer4, peer6] + auth, mi=True, mi256=True,
                                       fp=True),
    "channel_bind": msg(0x0009, [attr(0x000C, b"\x7f\xff\0\0"), peer4] + auth, mi=True),
    "send_indication": msg(0x0016, [peer6, attr(0x0013, b"game data"), attr(0x001A, b"")]),
    "data_indication": msg(0x0017, [peer4, attr(0x0013, b"x" * 101)]),
    "error_420": msg(0x0113, [attr(0x0009, b"\0\0\x04\x14Unknown Attribute"),
                              attr(0x000A, b"\x00\x31\x7f\xff")], fp=True),
    "allocate_success": msg(0x0103, [
        attr(0x0016, xor_addr(bytes([198, 51, 100, 9]), 50000)),
        attr(0x0020, xor_addr(bytes([192, 0, 2, 1]), 32853)),
        attr(0x000D, struct.pack(">I", 600)), attr(0x0022, b"12345678"),
        attr(0x8022, b"etrelay")], mi=True, fp=True),
    "channeldata_stream_101": struct.pack(">HH", 0x4abc, 101) + b"d" * 101 + b"\0" * 3,
    "channeldata_empty": struct.pack(">HH", 0x4000, 0),
}
for name, b in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(b)
