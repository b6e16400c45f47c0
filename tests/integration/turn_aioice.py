# SPDX-License-Identifier: ISC
# TURN client side of test_turn_proto.py, run by Debian's /usr/bin/python3
# (python3-aioice lives there): one JSON request per stdin line, one JSON
# answer per stdout line. Allocations go through aioice's
# create_turn_endpoint; hand-made requests are encoded with aioice.stun's
# packers and sent from plain UDP sockets. The test drives etrelay itself.

import asyncio
import hashlib
import hmac
import json
import os
import socket
import struct
import sys

from aioice import stun, turn

COOKIE = 0x2112A442
A = {  # attribute names the requests use
    "USERNAME": 0x0006, "MESSAGE-INTEGRITY": 0x0008, "ERROR-CODE": 0x0009,
    "UNKNOWN-ATTRIBUTES": 0x000A, "CHANNEL-NUMBER": 0x000C, "LIFETIME": 0x000D,
    "XOR-PEER-ADDRESS": 0x0012, "REALM": 0x0014, "NONCE": 0x0015,
    "XOR-RELAYED-ADDRESS": 0x0016, "REQUESTED-ADDRESS-FAMILY": 0x0017,
    "REQUESTED-TRANSPORT": 0x0019, "MESSAGE-INTEGRITY-SHA256": 0x001C,
    "XOR-MAPPED-ADDRESS": 0x0020, "FINGERPRINT": 0x8028,
}
NAMES = {v: k for k, v in A.items()}
METHODS = {"BINDING": 0x001, "ALLOCATE": 0x003, "REFRESH": 0x004,
           "CREATE_PERMISSION": 0x008, "CHANNEL_BIND": 0x009}


def attr_value(spec, tid):
    if "addr" in spec:
        return stun.pack_xor_address(tuple(spec["addr"]), tid)
    if "u32" in spec:
        return struct.pack("!I", spec["u32"])
    if "str" in spec:
        return spec["str"].encode()
    return bytes.fromhex(spec.get("hex", ""))


def encode(mtype, tid, attrs):
    body = b""
    for t, v in attrs:
        body += struct.pack("!HH", t, len(v)) + v + bytes(stun.padding_length(len(v)))
    return struct.pack("!HHI12s", mtype, len(body), COOKIE, tid) + body


def with_mac(msg, key, sha256):
    """msg plus MESSAGE-INTEGRITY (or -SHA256), its length counted first."""
    t, n = (A["MESSAGE-INTEGRITY-SHA256"], 32) if sha256 else (A["MESSAGE-INTEGRITY"], 20)
    head = stun.set_body_length(msg, len(msg) - 20 + 4 + n)
    mac = hmac.new(key, head, hashlib.sha256 if sha256 else hashlib.sha1).digest()
    return head + struct.pack("!HH", t, n) + mac


def with_fingerprint(msg):
    head = stun.set_body_length(msg, len(msg) - 20 + 8)
    return head + struct.pack("!HHI", A["FINGERPRINT"], 4, stun.message_fingerprint(head))


def decode(data, key):
    """The answer as a dict: class, code, attribute types in order, and
    whether each integrity attribute checks out with key."""
    mtype, length, cookie, tid = struct.unpack("!HHI12s", data[:20])
    out = {"cls": {0x0100: "success", 0x0110: "error"}.get(mtype & 0x0110, "other"),
           "method": mtype & 0x3EEF, "tid": tid.hex(), "attrs": [], "code": 0}
    pos = 20
    while pos + 4 <= len(data):
        t, n = struct.unpack("!HH", data[pos:pos + 4])
        v = data[pos + 4:pos + 4 + n]
        out["attrs"].append(NAMES.get(t, "0x%04X" % t))
        if t == A["ERROR-CODE"]:
            out["code"] = v[2] * 100 + v[3]
            out["reason"] = v[4:].decode("utf-8", "replace")
        elif t == A["UNKNOWN-ATTRIBUTES"]:
            out["unknown"] = [x for (x,) in struct.iter_unpack("!H", v)]
        elif t == A["NONCE"]:
            out["nonce"] = v.decode("latin-1")
        elif t == A["REALM"]:
            out["realm"] = v.decode("latin-1")
        elif t == A["LIFETIME"]:
            out["lifetime"] = struct.unpack("!I", v)[0]
        elif t == A["XOR-RELAYED-ADDRESS"]:
            out["relayed"] = list(stun.unpack_xor_address(v, tid))
        elif t in (A["MESSAGE-INTEGRITY"], A["MESSAGE-INTEGRITY-SHA256"]) and key:
            sha = t == A["MESSAGE-INTEGRITY-SHA256"]
            head = stun.set_body_length(data[:pos], pos - 20 + 4 + n)
            want = hmac.new(key, head, hashlib.sha256 if sha else hashlib.sha1).digest()
            out["mi256_ok" if sha else "mi_ok"] = hmac.compare_digest(v, want)
        pos += 4 + n + stun.padding_length(n)
    return out


class Sock:
    """A plain UDP socket toward the server, with the realm and nonce its
    last 401 or 438 gave."""

    def __init__(self, server, local=None):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if local:  # a source address of its own (127/8 reaches lo)
            self.s.bind((local, 0))
        self.s.connect(server)
        self.s.settimeout(2.0)
        self.realm = self.nonce = None

    def ask(self, data, count=1):
        for _ in range(count):
            self.s.send(data)
        return [self.s.recv(2048) for _ in range(count)]


class Collect(asyncio.DatagramProtocol):
    def __init__(self):
        self.q = asyncio.Queue()

    def datagram_received(self, data, addr):
        self.q.put_nowait((data, addr))


class Helper:
    def __init__(self):
        self.allocs = {}
        self.socks = {}

    async def op_alloc(self, r):
        t, p = await asyncio.wait_for(turn.create_turn_endpoint(
            Collect, tuple(r["server"]), r["user"], r["password"],
            lifetime=r.get("lifetime", 600), transport=r.get("transport", "udp")), 5)
        self.allocs[r["id"]] = (t, p)
        return {"relayed": list(t.get_extra_info("sockname")),
                "local": list(t.get_extra_info("related_address"))}

    async def op_echo(self, r):
        t, p = self.allocs[r["id"]]
        data = r["data"].encode() if "size" not in r else b"x" * r["size"]
        t.sendto(data, tuple(r["peer"]))
        try:
            got, addr = await asyncio.wait_for(p.q.get(), r.get("wait", 3))
        except asyncio.TimeoutError:
            if r.get("may_vanish"):
                return {"data": None}
            raise
        return {"data": got.decode("latin-1"), "from": list(addr)}

    async def op_refresh(self, r):
        inner = self.allocs[r["id"]][0]._TurnTransport__inner_protocol
        req = stun.Message(message_method=stun.Method.REFRESH, message_class=stun.Class.REQUEST)
        req.attributes["LIFETIME"] = r.get("lifetime", 600)
        try:
            resp, _ = await asyncio.wait_for(inner.request_with_retry(req), 5)
        except stun.TransactionFailed as e:
            return {"code": e.response.attributes["ERROR-CODE"][0]}
        return {"code": 0, "lifetime": resp.attributes["LIFETIME"]}

    async def op_close(self, r):
        t, p = self.allocs.pop(r["id"])
        await asyncio.wait_for(t._TurnTransport__inner_protocol.delete(), 5)
        return {}

    def op_raw(self, r):
        """A hand-made request. auth: [user, password] (a first unsigned try
        fetches realm and nonce when the socket has none yet); mac: sha1,
        sha256, bad or none; nonce_of: sign with another socket's nonce;
        tid: hex; repeat: send the same bytes that many times; retry_stale:
        after a 438, once more with its nonce; local: the source address of
        a new socket."""
        if r["sock"] not in self.socks:
            self.socks[r["sock"]] = Sock(tuple(r["server"]), r.get("local"))
        s = self.socks[r["sock"]]
        tid = bytes.fromhex(r["tid"]) if r.get("tid") else os.urandom(12)
        attrs = [(A[a["t"]] if isinstance(a["t"], str) else a["t"], attr_value(a, tid))
                 for a in r.get("attrs", [])]
        mtype = METHODS[r["method"]]
        key = None
        if r.get("auth"):
            user, password = r["auth"]
            if s.nonce is None:
                first = decode(s.ask(encode(mtype, os.urandom(12), attrs))[0], None)
                if first["code"] != 401:
                    return {"error": f"no 401 to the unsigned request: {first}"}
                s.realm, s.nonce = first["realm"], first["nonce"]
            nonce = self.socks[r["nonce_of"]].nonce if r.get("nonce_of") else s.nonce
            key = hashlib.md5(f"{user}:{s.realm}:{password}".encode()).digest()
            attrs += [(A["USERNAME"], user.encode()), (A["REALM"], s.realm.encode()),
                      (A["NONCE"], nonce.encode())]
        msg = encode(mtype, tid, attrs)
        mac = r.get("mac", "sha1" if key else "none")
        if mac != "none":
            msg = with_mac(msg, key if mac != "bad" else bytes(16), mac == "sha256")
        if r.get("fingerprint", mac != "sha256"):
            msg = with_fingerprint(msg)
        raw = s.ask(msg, r.get("repeat", 1))
        out = decode(raw[0], key)
        out["same"] = all(x == raw[0] for x in raw)
        if out["code"] in (401, 438) and "nonce" in out:
            s.realm, s.nonce = out.get("realm", s.realm), out["nonce"]
            if out["code"] == 438 and r.get("retry_stale"):
                return self.op_raw(dict(r, retry_stale=False, tid=None))
        return out

    async def run(self):
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            r = json.loads(line)
            try:
                fn = getattr(self, "op_" + r["op"])
                res = fn(r)
                if asyncio.iscoroutine(res):
                    res = await res
            except Exception as e:  # the test reads it as the answer
                res = {"error": f"{type(e).__name__}: {e}"}
            sys.stdout.write(json.dumps(res) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(Helper().run())
