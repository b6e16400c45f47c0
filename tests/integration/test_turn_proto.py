#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""TURN protocol edge cases against etrelay's TURN listener, with a client
nobody here wrote: Debian's python3-aioice (run by /usr/bin/python3 through
turn_aioice.py, as the python3 on PATH may not have it).

aioice's create_turn_endpoint allocates over UDP and TCP, relays to a UDP
peer on loopback and closes cleanly; it fills a userid's quota (486) and
holds an allocation through a drain to zero (Allocate 403, /readyz 503,
/lifecycle's active_allocations down to 0, then SIGTERM exits at once).
Requests made by hand with aioice.stun's packers: bad integrity (401),
another user on an allocation (441), a nonce that is not this client's
(438 with a fresh one), an unknown comprehension-required attribute (420
listing it), MESSAGE-INTEGRITY-SHA256 alone, REQUESTED-TRANSPORT TCP (442),
IPv6 family (440), a second Allocate on a 5-tuple (437), a retransmitted
Allocate, Refresh 0 then Refresh (437), CreatePermission all or nothing
(a refused request with several peers installs none), ChannelBind
conflicts and range,
every refused peer form (403), the allow/deny/own order, REST credential
expiry with and without turn-strict-expiry, and stale nonces (438) with
turn-nonce-lifetime 1s. user-quota with --workers 2 from addresses on both
workers: one count for the listener. GET /sessions lists each allocation
(transport, relayed address, username, counts) until its Refresh 0. Each
case checks
the answer and the counter in /metrics that should move."""

import base64
import hashlib
import hmac
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import turnutil as T  # noqa: E402

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "turn_aioice.py")
SYSTEM_PYTHON = "/usr/bin/python3"
SECRET = "tneg-test-secret-0123456789abcdefghij"
TOKEN = "tneg-ops-token-0123456789abcdefghijklmn"
RELAY_IP = "127.0.0.4"  # relay-address: not 127.0.0.1, which must stay refused
PEER_IP = "127.0.0.2"  # the echo peer, let through by --turn-allow-peer
PUBLIC_IP = "8.8.8.8"  # the second listener's public-ip: global, never bound
READY_RE = r"^turn \S+ listening on "
UDP_TRANSPORT, TCP_TRANSPORT = 17 << 24, 6 << 24
UNKNOWN_REQUIRED = 0x7ABC  # comprehension-required, assigned to nothing

REFUSED = ["127.0.0.1", "10.1.2.3", "100.64.0.1", "169.254.169.254", "192.168.1.1",
           "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::ffff:127.0.0.1",
           "::127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::", "fe80::1", "fd00:ec2::254"]


def credential(userid, valid_s=3600, secret=SECRET):
    """TURN REST username and password, expiring valid_s from now."""
    user = f"{int(time.time()) + valid_s}:{userid}"
    mac = hmac.new(secret.encode(), user.encode(), hashlib.sha1).digest()
    return user, base64.b64encode(mac).decode()


class Aioice:
    """turn_aioice.py under Debian's python3: ask() sends one request line
    and waits (bounded) for its answer line."""

    def __init__(self, wrapper=()):
        if not os.access(SYSTEM_PYTHON, os.X_OK):
            h.fail(f"{SYSTEM_PYTHON} is missing (python3-aioice needs Debian's python3)")
        probe = subprocess.run([SYSTEM_PYTHON, "-c", "import aioice"], capture_output=True,
                               timeout=20)
        if probe.returncode != 0:
            h.fail("python3-aioice is not installed for /usr/bin/python3: "
                   + probe.stderr.decode(errors="replace")[-300:])
        self.proc = subprocess.Popen([*wrapper, SYSTEM_PYTHON, HELPER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def ask(self, timeout=10.0, **req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout * h.SLOW)
        if not ready:
            h.fail(f"turn_aioice.py gave no answer to {req} within {timeout:g} s")
        line = self.proc.stdout.readline()
        if not line:
            h.fail(f"turn_aioice.py exited (status {self.proc.poll()}) on {req}")
        return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


class Echo(h._UdpThread):
    """The UDP peer: sends every datagram back."""
    name = "echo-peer"

    def handle(self, data, addr, now):
        self.send(b"echo:" + data, addr)


class Turn:
    """One etrelay with a TURN listener and its ops port."""

    def __init__(self, ctx, *args):
        # Ports free a moment ago may be taken by then (other tests run
        # beside this one): a start that failed on EADDRINUSE is tried again.
        for attempt in range(3):
            self.port = h.free_udp_tcp_port()
            self.ops = h.free_tcp_port()
            self.server = [h.LOOPBACK, self.port]
            self.relay = h.relay_env(
                ctx, {"ETRELAY_TURN_SECRET": SECRET, "ETRELAY_LIFECYCLE_TOKEN": TOKEN},
                "--turn-listen", f"{h.LOOPBACK}:{self.port}",
                "--turn-tcp-listen", f"{h.LOOPBACK}:{self.port}",
                "--turn-relay-address", RELAY_IP, "--ops-listen", f"{h.LOOPBACK}:{self.ops}",
                *h.turn_ports(64), *args, listen=False, open_limits=False, ready_re=READY_RE,
                wait_ready=False)
            try:
                self.relay.wait_ready()
                return
            except h.TestFailure:
                if attempt == 2 or not self.relay.count(r"Address already in use"):
                    raise
                self.relay.expect_exit = True
                self.relay.close()

    def metrics(self):
        return h.get_metrics(self.ops, TOKEN)

    def value(self, name, **labels):
        return h.counter(self.metrics(), "etrelay_turn_" + name, **labels)


class Delta:
    """Counters of /metrics before and after a case: moved() is the change
    of one, and every etrelay_turn_* counter not named must stay put."""

    def __init__(self, turn):
        self.turn = turn
        self.before = turn.metrics()

    def check(self, what, **expected):
        after = self.turn.metrics()
        for key, v in after.items():
            name, labels = key
            if not name.startswith("etrelay_turn_") or not name.endswith("_total"):
                continue
            short = name[len("etrelay_turn_"):]
            lab = dict(labels)
            reason = lab.get("reason") or lab.get("direction") or lab.get("code")
            want = expected.get(f"{short}:{reason}", expected.get(short, None))
            if short.startswith("relayed_") or short in ("challenges_total", "errors_total"):
                if want is None:
                    continue  # moves with traffic and first tries; named when checked
            moved = v - self.before.get(key, 0)
            if want is None:
                want = 0
            if callable(want):
                h.check(want(moved), f"{what}: {name}{dict(labels)} moved by {moved:g}")
            else:
                h.check(moved == want, f"{what}: {name}{dict(labels)} moved by {moved:g}, "
                                       f"expected {want}")
        self.before = after


def allocations(turn):
    """The TURN allocations GET /sessions lists."""
    doc = h.get_json(turn.ops, "/sessions", TOKEN)
    h.check(isinstance(doc.get("sessions"), list) and isinstance(doc.get("allocations"), list),
            f"/sessions: {h.short(doc, 300)}")
    return doc["allocations"]


def raw(a, turn, sock, method, *attrs, auth=None, **kw):
    return a.ask(op="raw", server=turn.server, sock=sock, method=method, attrs=list(attrs),
                 auth=auth, **kw)


def code_of(res, what):
    h.check("error" not in res or "code" in res, f"{what}: the client failed: {res}")
    return res.get("code")


def peer_attr(ip, port):
    return {"t": "XOR-PEER-ADDRESS", "addr": [ip, port]}


def host_guard(ctx):
    """The host itself behind a public relay-address (issue 15, H1 and M6),
    in a network namespace of its own: 45.0.0.1 (listen, relay-address),
    45.0.0.2 (allow-peer names it alone; the game server's address) and
    45.0.0.3 (in an allow-peer block only). Peers reach 45.0.0.1 on its
    relayed ports alone, 45.0.0.2 but not the game server's port, not
    45.0.0.3 at all."""
    ns = h.VethNetns()
    for st in (["link", "set", "lo", "up"], ["addr", "add", "45.0.0.1/32", "dev", "lo"],
               ["addr", "add", "45.0.0.2/32", "dev", "lo"],
               ["addr", "add", "45.0.0.3/32", "dev", "lo"]):
        r = subprocess.run([ns.ip, "-n", ns.name] + st, capture_output=True, text=True,
                           timeout=10)
        h.check(r.returncode == 0, f"ip -n {ns.name} {' '.join(st)}: {r.stderr.strip()}")
    relay = h.relay_env(
        ctx, {"ETRELAY_TURN_SECRET": SECRET}, "--listen", "45.0.0.1:27960",
        "--upstream", "45.0.0.2:27961", "--turn-listen", "45.0.0.1:3478",
        # fixed ports: the namespace is this test's alone
        "--turn-ports", "30000-30099", "--turn-max-allocations", "50",
        "--turn-allow-peer", "45.0.0.2",
        "--turn-allow-peer", "45.0.0.0/29", "--ops-listen", "45.0.0.1:9960", "--ops-allow-public",
        listen=False, open_limits=False, ready_re=READY_RE, wrapper=ns.wrapper())
    a = Aioice(wrapper=ns.wrapper())
    ctx.objs.append(a)
    server = ["45.0.0.1", 3478]
    udp = {"t": "REQUESTED-TRANSPORT", "u32": UDP_TRANSPORT}
    res = {}
    cred = {sock: credential(sock) for sock in ("g1", "g2")}  # one username each
    for sock in ("g1", "g2"):
        res[sock] = a.ask(op="raw", server=server, sock=sock, method="ALLOCATE", attrs=[udp],
                          auth=cred[sock])
        h.expect_eq(res[sock].get("cls"), "success", f"netns: Allocate {sock}: {res[sock]}")
    other = res["g2"]["relayed"][1]
    # A relayed port no allocation holds (of the 100, two are taken).
    unused = next(p for p in range(30099, 29999, -1)
                  if p not in (other, res["g1"]["relayed"][1]))
    for i, (method, ip, port, want, why) in enumerate((
            ("CHANNEL_BIND", "45.0.0.1", other, 0, "relay-address, a relayed port"),
            ("CHANNEL_BIND", "45.0.0.1", unused, 403,
             "relay-address, a relayed port without an allocation (a WireGuard port there)"),
            ("CHANNEL_BIND", "45.0.0.1", 22, 403, "relay-address, another port"),
            ("CHANNEL_BIND", "45.0.0.1", 27960, 403, "the game relay's port"),
            ("CHANNEL_BIND", "45.0.0.1", 3478, 403, "TURN's own port"),
            ("CHANNEL_BIND", "45.0.0.1", 9960, 403, "the ops listener"),
            ("CHANNEL_BIND", "45.0.0.2", 7777, 0, "a host address allow-peer names alone"),
            ("CHANNEL_BIND", "45.0.0.2", 27961, 403, "the game server, allowed or not"),
            ("CHANNEL_BIND", "::ffff:45.0.0.2", 27961, 403, "the game server, mapped"),
            ("CREATE_PERMISSION", "45.0.0.3", 9, 403, "a host address in a block only"),
            ("CHANNEL_BIND", "45.0.0.3", 7777, 403, "a host address in a block only"),
            ("CHANNEL_BIND", "45.0.0.3", 30000, 403, "another host address, a relayed port"),
    )):
        ch = ([{"t": "CHANNEL-NUMBER", "u32": (0x4000 + i) << 16}]
              if method == "CHANNEL_BIND" else [])
        r = a.ask(op="raw", server=server, sock="g1", method=method,
                  attrs=ch + [peer_attr(ip, port)], auth=cred["g1"], retry_stale=True)
        h.expect_eq(r.get("code"), want, f"netns: {method} to {ip}:{port} ({why}): {r}")
    a.close()
    relay.expect_exit = True
    relay.close()
    ns.close()


def authenticate_tcp(s):
    """A signed Refresh on TCP connection s (after the Allocate's 401): it
    passes MESSAGE-INTEGRITY, 437 without an allocation."""
    s.settimeout(5 * h.SLOW)
    _, _, _, a = T.stun_tcp(s, T.message(T.ALLOCATE, os.urandom(12),
                                         [T.u32(T.A_TRANSPORT, 17 << 24)]))
    realm, nonce = a[T.A_REALM][0], a[T.A_NONCE][0]
    user, pw = T.rest_credentials(SECRET, "half")
    _, _, _, a = T.stun_tcp(s, T.message(T.REFRESH, os.urandom(12),
                                         T.signed(user, realm, nonce),
                                         key=T.longterm_key(user, pw, realm.decode())))
    h.expect_eq(T.error_code(a), 437, "a signed Refresh over TCP without an allocation")


def tcp_limits(ctx):
    """TURN over TCP (issue 15, H2): tcp-max-per-ip refuses one address's
    connections past the cap (the others' still come in, and with two
    workers too: one address, one worker); half frames (a ChannelData
    header promising 64 KiB, then silence) hold at most TURN_CONN_RX_TOTAL
    (16 MiB) per worker, past which the connection is closed; the memory
    goes back when they close."""
    cap, extra = 280, 2
    # Each connection's 401 takes a token of 127.0.0.1's unauthenticated
    # answers: 280 of them from one address are raised out of the way.
    t = Turn(ctx, "--turn-tcp-max-per-ip", str(cap), "--turn-unauth-ip-rate", "100000",
             "--turn-unauth-ip-burst", "100000")
    pid = t.relay.proc.pid
    base = h.rss_kib(pid)
    conns = []
    try:
        for _ in range(cap + extra):
            s = socket.create_connection((h.LOOPBACK, t.port), timeout=5)
            conns.append(s)
        other = socket.create_connection((h.LOOPBACK, t.port), timeout=5,
                                         source_address=("127.0.0.2", 0))
        conns.append(other)
        h.wait_until(lambda: t.value("tcp_dropped_total", reason="per_ip") == extra,
                     3 * h.SLOW, f"{extra} connections past tcp-max-per-ip {cap} refused")
        # The other address is let in: a Binding over it is answered.
        other.sendall(struct.pack("!HHI12s", 0x0001, 0, 0x2112A442, os.urandom(12)))
        other.settimeout(5 * h.SLOW)
        h.check(len(other.recv(100)) >= 20, "a Binding from another address over TCP")
        # Half frames count once their bytes are there, and only an
        # authenticated connection may send ChannelData or a large frame:
        # each passes a signed request first (437: no allocation).
        half = struct.pack("!HH", 0x4000, 0xFFFF) + bytes(65000)
        for s in conns[:cap]:
            try:
                authenticate_tcp(s)
                s.sendall(half)
            except (OSError, h.TestFailure):
                pass  # refused or closed already
        # The relay closes them as it reads them, after the first: wait
        # for the count to come down within the bound, not one read.
        bound = 16 * 1024 * 1024 // 65000 + 1

        def held():
            return cap - t.value("tcp_dropped_total", reason="frame_memory")
        try:
            h.wait_until(lambda: held() <= bound, 5 * h.SLOW,
                         "half frames past the worker's 16 MiB closed", interval=0.05)
        except h.TestFailure:
            h.fail(f"{held()} half frames of 64 KiB held at once after {5 * h.SLOW:g} s "
                   f"(16 MiB per worker: at most {bound})")
        closed = cap - held()
        peak = h.rss_kib(pid)
        ctx.note(f"half frames: RSS {base} KiB before, {peak} KiB with {cap - closed} held, "
                 f"{closed} connections closed for memory")
    finally:
        for s in conns:
            s.close()
    if not h.WRAPPER:  # valgrind's RSS is its own
        # What the half frames held comes back (the loop's stream buffers,
        # touched by then, are a pool of fixed size and stay).
        held = (cap - closed) * 65000 // 1024
        try:
            h.wait_until(lambda: peak - h.rss_kib(pid) >= held * 9 // 10, 5 * h.SLOW,
                         "the half frames' memory given back when their connections closed")
        except h.TestFailure:
            h.fail(f"RSS {h.rss_kib(pid)} KiB after the connections closed, {peak} KiB with "
                   f"{held} KiB of half frames held")
        ctx.note(f"half frames: RSS {h.rss_kib(pid)} KiB after the connections closed")
    t.relay.expect_exit = True
    t.relay.close()


def rotation(ctx, a):
    """Removing a secret (issue 15, M4): an allocation keeps the key it was
    made with, so its Refresh, CreatePermission and ChannelBind go on after
    the secret is gone; a new Allocate with that secret gets 401."""
    old, new = SECRET, "rotated-secret-0123456789abcdefghijklmn"
    d = ctx.tmpdir()
    path = os.path.join(d, "secret")

    def write(text):
        with open(path + ".tmp", "w") as f:
            f.write(text + "\n")
        os.chmod(path + ".tmp", 0o600)
        os.replace(path + ".tmp", path)

    write(old)
    port, ops = h.free_udp_tcp_port(), h.free_tcp_port()
    relay = h.relay_env(
        ctx, {"ETRELAY_TURN_SECRET_FILE": path, "ETRELAY_LIFECYCLE_TOKEN": TOKEN},
        "--turn-listen", f"{h.LOOPBACK}:{port}", "--turn-relay-address", RELAY_IP,
        *h.turn_ports(64), "--turn-allow-peer", PEER_IP, "--ops-listen", f"{h.LOOPBACK}:{ops}",
        listen=False, open_limits=False, ready_re=READY_RE)
    server = [h.LOOPBACK, port]
    udp = {"t": "REQUESTED-TRANSPORT", "u32": UDP_TRANSPORT}
    cred = credential("rot", secret=old)
    res = a.ask(op="raw", server=server, sock="rot", method="ALLOCATE", attrs=[udp], auth=cred)
    h.expect_eq(res.get("cls"), "success", f"rotation: Allocate with the old secret: {res}")
    write(new)
    mark = relay.mark()
    relay.signal(signal.SIGHUP)
    relay.wait_for_line(r"SIGHUP: TURN secrets reloaded", 5 * h.SLOW, start=mark)
    for method, attrs in (("REFRESH", [{"t": "LIFETIME", "u32": 600}]),
                          ("CREATE_PERMISSION", [peer_attr(PEER_IP, 9)]),
                          ("CHANNEL_BIND", [{"t": "CHANNEL-NUMBER", "u32": 0x4000 << 16},
                                            peer_attr(PEER_IP, 9)])):
        res = a.ask(op="raw", server=server, sock="rot", method=method, attrs=attrs, auth=cred,
                    retry_stale=True)
        h.expect_eq(res.get("cls"), "success",
                    f"rotation: {method} of a live allocation after its secret was removed: "
                    f"{res}")
    res = a.ask(op="raw", server=server, sock="rot2", method="ALLOCATE", attrs=[udp], auth=cred)
    h.expect_eq(res.get("code"), 401, f"rotation: a new Allocate with the removed secret: {res}")
    res = a.ask(op="raw", server=server, sock="rot3", method="ALLOCATE", attrs=[udp],
                auth=credential("rot3", secret=new))
    h.expect_eq(res.get("cls"), "success", f"rotation: Allocate with the new secret: {res}")
    relay.expect_exit = True
    relay.close()


def port_slices(ctx, a):
    """Two relayed ports, max-allocations 2: with two workers each has a
    slice of one port, and a second Allocate from one address (one worker)
    gets 508 counted as ports, not cap (issue 15); with one worker it is
    the cap that a third one meets."""
    lo, _ = h.free_udp_range(2)
    port, ops = h.free_udp_tcp_port(), h.free_tcp_port()
    h.relay_env(ctx, {"ETRELAY_TURN_SECRET": SECRET, "ETRELAY_LIFECYCLE_TOKEN": TOKEN},
                "--turn-listen", f"{h.LOOPBACK}:{port}", "--turn-relay-address", RELAY_IP,
                "--turn-ports", f"{lo}-{lo + 1}", "--turn-max-allocations", "2",
                "--ops-listen", f"{h.LOOPBACK}:{ops}",
                listen=False, open_limits=False, ready_re=READY_RE)
    server = [h.LOOPBACK, port]
    udp = {"t": "REQUESTED-TRANSPORT", "u32": UDP_TRANSPORT}
    two = h.WORKERS == "2"
    for i in range(2 if two else 3):
        res = a.ask(op="raw", server=server, sock=f"sl{i}", method="ALLOCATE", attrs=[udp],
                    auth=credential(f"sl{i}"))
        want = 508 if i == (1 if two else 2) else 0
        h.expect_eq(res.get("code"), want, f"slices: Allocate {i + 1}: {res}")
    why = "ports" if two else "cap"
    got = h.counter(h.get_metrics(ops, TOKEN), "etrelay_turn_allocations_rejected_total",
                    reason=why)
    h.expect_eq(got, 1, f"the 508 counted as {why}")


def quota_workers(ctx, a):
    """user-quota 3 with --workers 2, one userid allocating from source
    addresses the reuseport model puts on both workers: exactly 3
    allocations in all, the 4th gets 486 on either worker (counted as
    quota), Refresh 0 of one on worker 0 lets the next in on worker 1, and
    with all of them gone the userid has its 3 again. A count per worker
    (as before) let 3 in on each."""
    port, ops = h.free_udp_tcp_port(), h.free_tcp_port()
    relay = h.relay_env(ctx, {"ETRELAY_TURN_SECRET": SECRET, "ETRELAY_LIFECYCLE_TOKEN": TOKEN},
                        "--turn-listen", f"{h.LOOPBACK}:{port}", "--turn-relay-address",
                        RELAY_IP, "--turn-user-quota", "3", *h.turn_ports(16),
                        "--ops-listen", f"{h.LOOPBACK}:{ops}", "--workers", "2",
                        listen=False, open_limits=False, ready_re=READY_RE)
    _, m, _ = relay.wait_for_line(h.WORKERS_RE, timeout=2, what="the workers line")
    key = int(m.group(2), 16)
    on = {0: [], 1: []}
    for i in range(3000, 8000):
        ip = h.spread_ip(i)
        w = h.reuseport_worker(key, ip, 2)
        if len(on[w]) < 4:
            on[w].append(ip)
        if len(on[0]) == 4 and len(on[1]) == 4:
            break
    else:
        h.fail(f"the model put fewer than 4 of 5000 addresses on a worker: {on}")
    server = [h.LOOPBACK, port]
    udp = {"t": "REQUESTED-TRANSPORT", "u32": UDP_TRANSPORT}
    cred = credential("qw")
    socks = []

    def alloc(w, n, want):
        sock = f"qw{w}.{n}"
        res = a.ask(op="raw", server=server, sock=sock, local=on[w][n], method="ALLOCATE",
                    attrs=[udp], auth=cred)
        h.expect_eq(res.get("code"), want,
                    f"quota across workers: Allocate from {on[w][n]} (worker {w}): {res}")
        if want == 0:
            socks.append(sock)
        return sock

    def value(name, **labels):
        return h.counter(h.get_metrics(ops, TOKEN), "etrelay_turn_" + name, **labels)

    first = alloc(0, 0, 0)
    alloc(1, 0, 0)
    alloc(0, 1, 0)
    alloc(1, 1, 486)  # worker 1 holds one of the userid's: the count is shared
    alloc(0, 2, 486)
    h.expect_eq(value("allocations_active"), 3, "allocations of one userid, both workers")
    h.expect_eq(value("allocations_rejected_total", reason="quota"), 2,
                "486s counted as quota")
    # One goes on worker 0: worker 1 may grant the next, and no more.
    res = a.ask(op="raw", server=server, sock=first, method="REFRESH",
                attrs=[{"t": "LIFETIME", "u32": 0}], auth=cred)
    h.expect_eq(res.get("code"), 0, f"quota across workers: Refresh 0: {res}")
    socks.remove(first)
    alloc(1, 2, 0)
    alloc(1, 3, 486)
    h.expect_eq(value("allocations_rejected_total", reason="quota"), 3,
                "486s counted as quota")
    # Every allocation gone (each count given back once): 3 again.
    for sock in socks:
        res = a.ask(op="raw", server=server, sock=sock, method="REFRESH",
                    attrs=[{"t": "LIFETIME", "u32": 0}], auth=cred)
        h.expect_eq(res.get("code"), 0, f"quota across workers: Refresh 0 of {sock}: {res}")
    h.expect_eq(value("allocations_active"), 0, "allocations after every Refresh 0")
    socks.clear()
    alloc(0, 3, 0)
    alloc(1, 0, 0)  # a 5-tuple used before: its allocation is gone
    alloc(0, 0, 0)
    alloc(1, 1, 486)
    relay.expect_exit = True
    relay.close()


def run(ctx):
    tcp_limits(ctx)
    try:
        host_guard(ctx)
    except h.TestSkip as e:  # that part only: it needs root
        ctx.note(f"the host-address case is skipped: {e}")
    a = Aioice()
    ctx.objs.append(a)
    rotation(ctx, a)
    port_slices(ctx, a)
    quota_workers(ctx, a)
    echo = Echo(host=PEER_IP).start()
    ctx.objs.append(echo)
    peer = [PEER_IP, echo.port]
    # 127.0.0.2 is the host itself (loopback): a block holding it is not
    # enough, allow-peer names it alone.
    t = Turn(ctx, "--turn-user-quota", "2", "--turn-allow-peer", "127.0.0.2/31",
             "--turn-allow-peer", PEER_IP,
             "--turn-deny-peer", "127.0.0.3/32", "--turn-deny-peer", "8.8.8.0/24",
             "--drain-timeout", "30s")
    # The second listener: strict expiry, short nonces, a global public-ip
    # (reported, not bound) and its own relay-address denied.
    strict = Turn(ctx, "--turn-strict-expiry", "yes", "--turn-nonce-lifetime", "1s",
                  "--turn-public-ip", PUBLIC_IP, "--turn-deny-peer", f"{RELAY_IP}/32")
    TA = lambda n: {"t": "REQUESTED-TRANSPORT", "u32": n}  # noqa: E731
    udp = TA(UDP_TRANSPORT)

    # Allocations whose credentials run out during the test: one here (kept,
    # refreshes go on), one on the strict listener (ends at expiry).
    d = Delta(t)
    exp_cred = credential("expiring", 2)
    res = raw(a, t, "e", "ALLOCATE", udp, auth=exp_cred)
    h.expect_eq(res.get("cls"), "success", f"Allocate with a credential valid 2 s more: {res}")
    d.check("an Allocate", allocations_total=1)
    sd = Delta(strict)
    strict_cred = credential("strict", 2)
    res = raw(a, strict, "x", "ALLOCATE", udp, {"t": "LIFETIME", "u32": 600}, auth=strict_cred,
              retry_stale=True)
    h.expect_eq(res.get("cls"), "success", f"strict: Allocate: {res}")
    h.check(res.get("lifetime", 999) <= 3,
            f"strict: lifetime {res.get('lifetime')} s goes past the credential's 2 s")
    user_nx = credential("nx")
    res = raw(a, strict, "nx", "ALLOCATE", udp, auth=user_nx, retry_stale=True)
    h.expect_eq(res.get("cls"), "success", f"nonce-lifetime 1s: Allocate: {res}")
    sd.check("strict: Allocates", allocations_total=2)

    # The relay's own addresses: deny-peer wins over them, and the host is
    # reachable on its relayed ports only, never on another (its SSH, say).
    nx_port = res["relayed"][1]
    for i, (method, ip, port, want, why) in enumerate((
            ("CREATE_PERMISSION", RELAY_IP, 9, 403, "own relay-address, denied"),
            ("CHANNEL_BIND", RELAY_IP, nx_port, 403, "own relay-address, denied"),
            ("CREATE_PERMISSION", PUBLIC_IP, 9, 0, "own public-ip (permissions take no port)"),
            ("CHANNEL_BIND", PUBLIC_IP, nx_port, 0, "own public-ip, a relayed port"),
            ("CHANNEL_BIND", PUBLIC_IP, 22, 403, "own public-ip, another port"))):
        ch = ([{"t": "CHANNEL-NUMBER", "u32": (0x4000 + i) << 16}]
              if method == "CHANNEL_BIND" else [])
        r = raw(a, strict, "nx", method, *ch, peer_attr(ip, port), auth=user_nx,
                retry_stale=True)
        h.expect_eq(r.get("code"), want, f"{method} to {ip}:{port} ({why}): {r}")
        sd.check(f"{method} to {ip}:{port}", peer_rejected_total=1 if want else 0,
                 **{"auth_failures_total:stale_nonce": lambda n: True})
    t_expiry = time.time() + 2

    # aioice allocations over UDP and TCP relayed to a UDP peer, closed.
    made = {}
    for transport in ("udp", "tcp"):
        user, pw = credential("c-" + transport)
        res = a.ask(op="alloc", id=transport, server=t.server, user=user, password=pw,
                    transport=transport)
        h.check("relayed" in res, f"aioice over {transport}: {res}")
        h.expect_eq(res["relayed"][0], RELAY_IP, f"{transport} relayed address")
        made[transport] = (user, res)
        for i in range(3):
            got = a.ask(op="echo", id=transport, peer=peer, data=f"{transport}-{i}")
            h.expect_eq(got.get("data"), f"echo:{transport}-{i}", f"{transport} echo {i}: {got}")
            h.expect_eq(got.get("from"), peer, f"{transport}: the echo's source")
    # GET /sessions lists them, with what they relayed.
    listed = {x["relayed"]: x for x in allocations(t)}
    for transport, (user, res) in made.items():
        x = listed.get("%s:%d" % tuple(res["relayed"]))
        h.check(x is not None, f"/sessions: no allocation {res['relayed']} in {listed}")
        for key, want in (("turn", "default"), ("transport", transport), ("username", user),
                          ("client", "%s:%d" % tuple(res["local"])), ("permissions", 1),
                          ("datagrams_to_peer", 3), ("datagrams_to_client", 3),
                          ("bytes_to_peer", 3 * len(f"{transport}-0")),
                          ("bytes_to_client", 3 * len(f"echo:{transport}-0"))):
            h.expect_eq(x.get(key), want, f"/sessions: {transport} allocation's {key}: {x}")
        h.check(500 <= x["lifetime_seconds"] <= 600 and 0 <= x["age_seconds"] <= 60
                and x["channels"] in (0, 1) and x["worker"] in (0, 1),
                f"/sessions: {transport} allocation: {x}")
    h.expect_eq(t.value("allocations_active"), 3, "allocations active (2 aioice + 1 raw)")
    # ChannelData over TCP larger than a UDP datagram carries: dropped with
    # a reason, not counted as relayed.
    got = a.ask(op="echo", id="tcp", peer=peer, size=65531, wait=1, may_vanish=True)
    h.expect_eq(got.get("data"), None, f"65531 bytes over TCP came back: {got}")
    h.wait_until(lambda: t.value("dropped_total", reason="oversize") == 1, 3 * h.SLOW,
                 "65531 bytes over TCP dropped as oversize")
    for transport in ("udp", "tcp"):
        h.check(a.ask(op="close", id=transport) == {}, f"close {transport}")
    h.wait_until(lambda: t.value("allocations_active") == 1, 5 * h.SLOW,
                 "closed aioice allocations gone")
    d.check("aioice allocations", allocations_total=2, **{"dropped_total:oversize": 1,
        "relayed_datagrams_total:to_peer": 6, "relayed_datagrams_total:to_client": 6,
        "relayed_bytes_total:to_peer": lambda n: n >= 6 * 5,
        "relayed_bytes_total:to_client": lambda n: n >= 6 * 10})

    # The names these checks read are promtool-clean.
    promtool = shutil.which("promtool") or h.fail("promtool is not installed (prometheus)")
    body = h.http_request(t.ops, "GET", "/metrics", token=TOKEN).body
    pc = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True,
                        timeout=20)
    h.check(pc.returncode == 0, "promtool check metrics: "
            + (pc.stdout + pc.stderr).decode(errors="replace")[-500:])

    # Quota by userid: the third allocation of one userid gets 486.
    for i in range(3):
        user, pw = credential("quota")
        res = a.ask(op="alloc", id=f"q{i}", server=t.server, user=user, password=pw)
        if i < 2:
            h.check("relayed" in res, f"quota: allocation {i + 1} of 2: {res}")
        else:
            h.check("486" in res.get("error", ""), f"quota: a third allocation: {res}")
    d.check("userid quota", allocations_total=2, **{"allocations_rejected_total:quota": 1})
    for i in range(2):
        a.ask(op="close", id=f"q{i}")
    h.wait_until(lambda: t.value("allocations_active") == 1, 5 * h.SLOW, "quota allocations gone")

    # The main hand-made allocation, then a second Allocate on its 5-tuple.
    user_m = credential("m")
    res = raw(a, t, "m", "ALLOCATE", udp, auth=user_m)
    h.expect_eq(res.get("cls"), "success", f"hand-made Allocate: {res}")
    h.check(res.get("mi_ok") is True, f"the Allocate answer's MESSAGE-INTEGRITY: {res}")
    relayed_m = res["relayed"]
    res = raw(a, t, "m", "ALLOCATE", udp, auth=user_m)
    h.expect_eq(code_of(res, "second Allocate"), 437, f"a second Allocate on a 5-tuple: {res}")
    d.check("Allocate, then another on its 5-tuple", allocations_total=1,
            **{"allocations_rejected_total:exists": 1})

    # A retransmitted Allocate: the same answer, one allocation.
    tid = os.urandom(12).hex()
    user_r = credential("r")
    res = raw(a, t, "r", "ALLOCATE", udp, auth=user_r, tid=tid, repeat=3)
    h.expect_eq(res.get("cls"), "success", f"retransmitted Allocate: {res}")
    h.check(res["same"], "the retransmissions of an Allocate got different answers")
    d.check("a retransmitted Allocate", allocations_total=1)
    h.expect_eq(t.value("allocations_active"), 3, "allocations active after a retransmission")

    # Bad integrity: 401.
    res = raw(a, t, "b", "ALLOCATE", udp, auth=credential("b"), mac="bad")
    h.expect_eq(code_of(res, "bad integrity"), 401, f"bad MESSAGE-INTEGRITY: {res}")
    d.check("bad integrity", **{"auth_failures_total:bad_integrity": 1})

    # Another user's request on an allocation: 441.
    res = raw(a, t, "m", "REFRESH", {"t": "LIFETIME", "u32": 600}, auth=credential("other"))
    h.expect_eq(code_of(res, "wrong user"), 441, f"Refresh by another user: {res}")
    d.check("wrong user", **{"auth_failures_total:wrong_user": 1})

    # A nonce that is not this client's (the one socket b was given): 438
    # with a fresh NONCE, which then works. (A stale one: below, with
    # --turn-nonce-lifetime 1s.)
    old = raw(a, t, "m", "REFRESH", {"t": "LIFETIME", "u32": 600}, auth=user_m)
    h.expect_eq(old.get("cls"), "success", f"Refresh: {old}")
    res = raw(a, t, "m", "REFRESH", {"t": "LIFETIME", "u32": 600}, auth=user_m, nonce_of="b")
    h.expect_eq(code_of(res, "foreign nonce"), 438, f"a nonce of another client: {res}")
    h.check(res.get("nonce") and "REALM" in res["attrs"], f"438 without NONCE and REALM: {res}")
    res = raw(a, t, "m", "REFRESH", {"t": "LIFETIME", "u32": 600}, auth=user_m)
    h.expect_eq(res.get("cls"), "success", f"Refresh with the 438's fresh nonce: {res}")
    # Not ours (another client's): bad_nonce, told apart from a stale one.
    d.check("foreign nonce", **{"auth_failures_total:bad_nonce": 1, "errors_total:438": 1})

    # An unknown comprehension-required attribute: 420 listing it.
    res = raw(a, t, "m", "REFRESH", {"t": UNKNOWN_REQUIRED, "hex": "00000000"}, auth=user_m)
    h.expect_eq(code_of(res, "420"), 420, f"unknown required attribute: {res}")
    h.expect_eq(res.get("unknown"), [UNKNOWN_REQUIRED], "UNKNOWN-ATTRIBUTES of the 420")
    d.check("420", **{"errors_total:420": 1})

    # More XOR-PEER-ADDRESS than the codec keeps: 400, not silence.
    res = raw(a, t, "m", "CREATE_PERMISSION", *[peer_attr(PEER_IP, 9)] * 9, auth=user_m)
    h.expect_eq(code_of(res, "9 peers"), 400, f"CreatePermission with 9 peers: {res}")
    d.check("9 peers", **{"errors_total:400": 1})

    # MESSAGE-INTEGRITY-SHA256 alone: accepted, and the answer signed with
    # it (RFC 8489 9.2.4), MESSAGE-INTEGRITY, if there at all, before it
    # (14.5, 14.6: only FINGERPRINT may follow MESSAGE-INTEGRITY-SHA256).
    user_s = credential("s")
    res = raw(a, t, "s", "ALLOCATE", udp, auth=user_s, mac="sha256")
    h.expect_eq(res.get("cls"), "success", f"Allocate with MESSAGE-INTEGRITY-SHA256: {res}")
    h.check(res.get("mi256_ok") is True, f"answer without a good MESSAGE-INTEGRITY-SHA256: {res}")
    at = res["attrs"]
    h.check(at.index("MESSAGE-INTEGRITY-SHA256") + 1 == len(at)
            or at[at.index("MESSAGE-INTEGRITY-SHA256") + 1:] == ["FINGERPRINT"],
            f"attributes after MESSAGE-INTEGRITY-SHA256 other than FINGERPRINT: {at}")
    d.check("MI-SHA256", allocations_total=1)

    # Allocate refusals on a socket without an allocation.
    res = raw(a, t, "n", "ALLOCATE", TA(TCP_TRANSPORT), auth=credential("n"))
    h.expect_eq(code_of(res, "442"), 442, f"REQUESTED-TRANSPORT TCP: {res}")
    res = raw(a, t, "n", "ALLOCATE", udp, {"t": "REQUESTED-ADDRESS-FAMILY", "hex": "02000000"},
              auth=credential("n"))
    h.expect_eq(code_of(res, "440"), 440, f"REQUESTED-ADDRESS-FAMILY IPv6: {res}")
    d.check("442 and 440", **{"allocations_rejected_total:bad_request": 2,
                               "errors_total:442": 1, "errors_total:440": 1})

    # Refresh 0 deletes (and takes it off /sessions); a Refresh after it
    # gets 437.
    user_z = credential("z")
    res = raw(a, t, "z", "ALLOCATE", udp, auth=user_z)
    h.expect_eq(res.get("cls"), "success", f"Allocate: {res}")
    z_relayed = "%s:%d" % tuple(res["relayed"])
    x = [x for x in allocations(t) if x["relayed"] == z_relayed]
    h.check(len(x) == 1 and x[0]["transport"] == "udp" and x[0]["username"] == user_z[0]
            and x[0]["permissions"] == 0 and x[0]["datagrams_to_peer"] == 0,
            f"/sessions: the hand-made allocation {z_relayed}: {x}")
    res = raw(a, t, "z", "REFRESH", {"t": "LIFETIME", "u32": 0}, auth=user_z)
    h.expect_eq(res.get("cls"), "success", f"Refresh 0: {res}")
    x = [x for x in allocations(t) if x["relayed"] == z_relayed]
    h.expect_eq(x, [], "/sessions after Refresh 0")
    res = raw(a, t, "z", "REFRESH", {"t": "LIFETIME", "u32": 600}, auth=user_z)
    h.expect_eq(code_of(res, "437"), 437, f"Refresh after Refresh 0: {res}")
    d.check("Refresh 0, Refresh", allocations_total=1, **{"errors_total:437": 1})

    # CreatePermission is all or nothing: 31 of the 32 places taken, a
    # request naming 3 new peers gets 508 and installs none of them, so one
    # place is still left: a request with one new peer (named twice, the
    # duplicates count once) and one permitted fits it, the next new one not.
    user_p = credential("p")
    res = raw(a, t, "p", "ALLOCATE", udp, auth=user_p)
    h.expect_eq(res.get("cls"), "success", f"Allocate for the permissions: {res}")
    ips = [f"9.9.{i}.1" for i in range(31)]
    for k in range(0, 31, 8):
        r = raw(a, t, "p", "CREATE_PERMISSION", *[peer_attr(ip, 9) for ip in ips[k:k + 8]],
                auth=user_p)
        h.expect_eq(r.get("cls"), "success", f"CreatePermission of {ips[k:k + 8]}: {r}")
    r = raw(a, t, "p", "CREATE_PERMISSION", peer_attr("9.9.100.1", 9), peer_attr(ips[0], 9),
            peer_attr("9.9.100.2", 9), peer_attr("9.9.100.3", 9), auth=user_p)
    h.expect_eq(r.get("code"), 508, f"CreatePermission of 3 new peers, 1 place left: {r}")
    r = raw(a, t, "p", "CREATE_PERMISSION", peer_attr("9.9.100.4", 9),
            peer_attr("9.9.100.4", 10), peer_attr(ips[5], 9), auth=user_p)
    h.expect_eq(r.get("cls"), "success",
                f"CreatePermission of the 32nd peer after a refused request: {r}")
    r = raw(a, t, "p", "CREATE_PERMISSION", peer_attr("9.9.100.5", 9), auth=user_p)
    h.expect_eq(r.get("code"), 508, f"CreatePermission of a 33rd peer: {r}")
    res = raw(a, t, "p", "REFRESH", {"t": "LIFETIME", "u32": 0}, auth=user_p)
    h.expect_eq(res.get("cls"), "success", f"Refresh 0 of the permissions' allocation: {res}")
    d.check("32 permissions", allocations_total=1, **{"errors_total:508": 2})

    # ChannelBind: rebinding refreshes, conflicts 400, 0x4000-0x7FFF only.
    def bind(ch, port, what, want):
        r = raw(a, t, "m", "CHANNEL_BIND", {"t": "CHANNEL-NUMBER", "u32": ch << 16},
                peer_attr(PEER_IP, port), auth=user_m)
        h.expect_eq(r.get("code"), want, f"ChannelBind {ch:#06x} to port {port} ({what}): {r}")

    bind(0x4000, echo.port, "new", 0)
    bind(0x4000, echo.port, "the same pair again", 0)
    bind(0x4000, echo.port + 1, "the channel taken by another peer", 400)
    bind(0x4001, echo.port, "the peer bound to another channel", 400)
    bind(0x7FFF, echo.port + 2, "the last channel", 0)
    bind(0x8000, echo.port + 3, "past the range", 400)
    bind(0x3FFF, echo.port + 3, "below the range", 400)
    d.check("ChannelBind", **{"errors_total:400": 4})

    # Refused peers, CreatePermission and ChannelBind: 403, each counted.
    for ip in REFUSED:
        r = raw(a, t, "m", "CREATE_PERMISSION", peer_attr(ip, 9), auth=user_m)
        h.expect_eq(r.get("code"), 403, f"CreatePermission to {ip}: {r}")
        d.check(f"CreatePermission to {ip}", peer_rejected_total=1)
    for ip in ("169.254.169.254", "::ffff:169.254.169.254"):
        r = raw(a, t, "m", "CHANNEL_BIND", {"t": "CHANNEL-NUMBER", "u32": 0x4100 << 16},
                peer_attr(ip, 80), auth=user_m)
        h.expect_eq(r.get("code"), 403, f"ChannelBind to {ip}: {r}")
        d.check(f"ChannelBind to {ip}", peer_rejected_total=1)

    # The order of the man page: deny > own > allow > default.
    for ip, port, want, why in (
            (PEER_IP, 9, 0, "allow-peer over the default refused set"),
            ("127.0.0.3", 9, 403, "deny-peer over allow-peer"),
            ("8.8.8.8", 9, 403, "deny-peer over the default"),
            ("8.8.4.4", 9, 0, "a global address"),
            (RELAY_IP, relayed_m[1], 0, "the relay's own address")):
        r = raw(a, t, "m", "CREATE_PERMISSION", peer_attr(ip, port), auth=user_m)
        h.expect_eq(r.get("code"), want, f"CreatePermission to {ip} ({why}): {r}")
        d.check(f"CreatePermission to {ip}", peer_rejected_total=1 if want else 0)

    # Expiry: past its credential's end, the allocation of "e" still
    # refreshes; that credential gets no new allocation; on the strict
    # listener the allocation is gone.
    h.wait_until(lambda: time.time() > t_expiry + 1.2, 5, "the credentials' expiry")
    res = raw(a, t, "e", "REFRESH", {"t": "LIFETIME", "u32": 600}, auth=exp_cred)
    h.expect_eq(res.get("cls"), "success", f"Refresh after the credential's expiry: {res}")
    res = raw(a, t, "e", "CREATE_PERMISSION", peer_attr(PEER_IP, 9), auth=exp_cred)
    h.expect_eq(res.get("cls"), "success", f"CreatePermission after the expiry: {res}")
    res = raw(a, t, "e2", "ALLOCATE", udp, auth=exp_cred)
    h.expect_eq(code_of(res, "expired"), 401, f"Allocate with an expired credential: {res}")
    d.check("expired credential", **{"auth_failures_total:expired": 1})
    h.wait_until(lambda: strict.value("allocations_active") == 1, 3 * h.SLOW,
                 "strict: the allocation ended at its credential's expiry")
    # The nonces of the strict listener (nonce-lifetime 1s) are stale by
    # now: 438 with a fresh NONCE, then the request goes through.
    res = raw(a, strict, "x", "REFRESH", {"t": "LIFETIME", "u32": 600}, auth=strict_cred)
    h.expect_eq(code_of(res, "stale"), 438, f"strict: Refresh with a stale nonce: {res}")
    h.check(res.get("nonce") and "REALM" in res["attrs"], f"438 without NONCE and REALM: {res}")
    res = raw(a, strict, "x", "REFRESH", {"t": "LIFETIME", "u32": 600}, auth=strict_cred,
              retry_stale=True)
    h.check(res.get("code") in (401, 437), f"strict: Refresh after expiry: {res}")
    res = raw(a, strict, "nx", "REFRESH", {"t": "LIFETIME", "u32": 600}, auth=user_nx)
    h.expect_eq(code_of(res, "stale"), 438, f"Refresh with a stale nonce: {res}")
    res = raw(a, strict, "nx", "REFRESH", {"t": "LIFETIME", "u32": 600}, auth=user_nx,
              retry_stale=True)
    h.expect_eq(res.get("cls"), "success", f"Refresh with the 438's fresh nonce: {res}")
    sd.check("strict expiry, stale nonces", allocations_expired_total=1,
             **{"auth_failures_total:expired": lambda n: n <= 1,
                "auth_failures_total:stale_nonce": lambda n: n >= 2})

    # Drain to zero: the hand-made allocations go, one aioice allocation
    # stays and keeps relaying and refreshing while Allocate gets 403.
    for sock, cred in (("m", user_m), ("e", exp_cred), ("r", user_r), ("s", user_s)):
        res = raw(a, t, sock, "REFRESH", {"t": "LIFETIME", "u32": 0}, auth=cred)
        h.expect_eq(res.get("cls"), "success", f"Refresh 0 on {sock}: {res}")
    h.wait_until(lambda: t.value("allocations_active") == 0, 3 * h.SLOW, "no allocation left")
    user, pw = credential("drain")
    res = a.ask(op="alloc", id="d", server=t.server, user=user, password=pw)
    h.check("relayed" in res, f"drain: allocation: {res}")
    d.check("before the drain", allocations_total=1)
    r = h.http_request(t.ops, "POST", "/lifecycle/drain", token=TOKEN)
    h.expect_eq(r.status, 200, f"POST /lifecycle/drain: {r}")
    h.expect_eq(h.http_request(t.ops, "GET", "/readyz").status, 503, "/readyz while draining")
    res = raw(a, t, "dn", "ALLOCATE", udp, auth=credential("dn"))
    h.expect_eq(code_of(res, "drain"), 403, f"Allocate while draining: {res}")
    got = a.ask(op="echo", id="d", peer=peer, data="drain")
    h.expect_eq(got.get("data"), "echo:drain", f"relaying while draining: {got}")
    res = a.ask(op="refresh", id="d")
    h.expect_eq(res.get("code"), 0, f"Refresh while draining: {res}")
    d.check("drain", **{"allocations_rejected_total:drain": 1,
                        "relayed_datagrams_total:to_peer": 1,
                        "relayed_datagrams_total:to_client": 1})
    lc = h.get_json(t.ops, "/lifecycle", TOKEN)
    h.expect_eq(lc["state"], "draining", "/lifecycle state")
    h.expect_eq(lc["details"]["active_allocations"], 1, "/lifecycle active_allocations")
    h.check(a.ask(op="close", id="d") == {}, "close the drained allocation")
    h.wait_until(lambda: h.get_json(t.ops, "/lifecycle", TOKEN)["details"]
                 ["active_allocations"] == 0, 3 * h.SLOW, "active_allocations down to 0")
    t0 = time.monotonic()
    t.relay.signal(signal.SIGTERM)
    rc = t.relay.wait_exit(10)
    took = time.monotonic() - t0
    h.expect_eq(rc, 0, "exit status on SIGTERM with nothing to drain")
    h.check(took < 1.5 * h.SLOW, f"SIGTERM with nothing to drain took {took:.2f} s "
                                 "(--drain-timeout 30s)")
    ctx.note(f"SIGTERM after the drain: exit in {took:.2f} s")


if __name__ == "__main__":
    h.main(run)
