# SPDX-License-Identifier: ISC
"""Helpers for the TURN tests: coturn's test clients (turnutils_peer,
turnutils_uclient, turnutils_stunclient) run against an etrelay TURN
listener on loopback, with their output parsed, and the REST credentials
they compute (for hand-made clients)."""

import base64
import hashlib
import hmac
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

SECRET = "s" * 24 + os.urandom(8).hex()          # 40 bytes
SECRET_NEXT = "n" * 24 + os.urandom(8).hex()
READY_RE = r"^turn \S+ listening on "


def env(secret=SECRET, secret_next=SECRET_NEXT):
    """The environment a TURN relay starts with."""
    e = {"ETRELAY_TURN_SECRET": secret}
    if secret_next:
        e["ETRELAY_TURN_SECRET_NEXT"] = secret_next
    return e


def rest_credentials(secret, userid, lifetime=86400, now=None):
    """(username, password) of the TURN REST convention."""
    user = f"{int(now if now is not None else time.time()) + lifetime}:{userid}"
    mac = hmac.new(secret.encode(), user.encode(), hashlib.sha1).digest()
    return user, base64.b64encode(mac).decode()


def require_coturn():
    for t in ("turnutils_uclient", "turnutils_peer", "turnutils_stunclient"):
        H.require_tool(t)


def free_port():
    """A port free for UDP and TCP on 127.0.0.1 (a listener takes both),
    below the ephemeral range, as the harness draws; the relayed ports come
    from H.turn_ports()."""
    return H.free_udp_tcp_port()


def metrics(port):
    """/metrics of an ops port without a token: (text, samples)."""
    r = H.http_request(port, "GET", "/metrics")
    H.expect_eq(r.status, 200, "/metrics status")
    return r.text, H.parse_metrics(r.text)


def value(samples, name, **labels):
    """A sample of the "default" TURN listener, which must be there."""
    v = H.metric_value(samples, name, listener="default", **labels)
    H.check(v is not None, f"no sample {name} {labels} on /metrics")
    return v


def start_relay(ctx, port, *args, secrets=None, tcp=True, shared_ip=False):
    """A TURN-only etrelay on 127.0.0.1:port (UDP, and TCP when tcp).
    shared_ip: many clients at once from 127.0.0.1, as players behind one
    NAT, so the per-IP limits of unauthenticated answers (test_turn_unauth's
    subject) and of failed authentication (test_turn_auth_budget's: a client
    with a wrong secret among them) are raised out of their way."""
    a = ["--turn-listen", f"127.0.0.1:{port}"]
    if shared_ip:
        a += ["--turn-unauth-ip-rate", "10000", "--turn-unauth-ip-burst", "10000",
              "--turn-auth-fail-ip-rate", "10000", "--turn-auth-fail-ip-burst", "10000",
              "--turn-auth-fail-rate", "10000", "--turn-auth-fail-burst", "10000"]
    if tcp:
        a += ["--turn-tcp-listen", f"127.0.0.1:{port}"]
    return H.relay_env(ctx, secrets if secrets is not None else env(), *a, *args,
                       listen=False, open_limits=False, ready_re=READY_RE)


class Peer:
    """turnutils_peer: a UDP echo on 127.0.0.1:port, stopped at exit."""

    def __init__(self, port=None):
        self.port = port or H.free_udp_port()
        self.proc = subprocess.Popen(["turnutils_peer", "-L", "127.0.0.1", "-p", str(self.port)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        H._register(self)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def stop(self):
        self.close()


class Run:
    """One finished turnutils_uclient run."""

    def __init__(self, args, rc, out):
        self.args, self.rc, self.out = args, rc, out

    def recv_msgs(self):
        """tot_recv_msgs of its final summary line (None without one)."""
        m = re.findall(r"start_mclient: tot_send_msgs=(\d+), tot_recv_msgs=(\d+)", self.out)
        return int(m[-1][1]) if m else None

    def lost_none(self):
        return "Total lost packets 0 " in self.out

    def ok(self, want):
        """Every message came back: uclient exits 0 even on total loss, so
        its summary is what counts."""
        return self.rc == 0 and self.recv_msgs() == want and self.lost_none()

    def __repr__(self):
        return f"uclient {' '.join(self.args)}: rc {self.rc}\n{H.short(self.out, 1500)}"


def uclient(port, user, secret=SECRET, peer_port=None, opts=(), n=10, m=1, length=101,
            timeout=30.0):
    """turnutils_uclient -c (never the RTCP allocation) with REST
    credentials under secret; opts such as -s, -D, -t, -y. A Run."""
    args = ["-p", str(port), "-W", secret, "-u", user, "-X", "-c", "-n", str(n), "-m", str(m),
            "-l", str(length)] + list(opts)
    if peer_port is not None:
        args += ["-e", "127.0.0.1", "-r", str(peer_port)]
    args.append("127.0.0.1")
    try:
        p = subprocess.run(["turnutils_uclient"] + args, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"") + (e.stderr or b"")
        return Run(args, None, out.decode("utf-8", "replace"))
    return Run(args, p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace"))


def stunclient(port, timeout=10.0):
    """turnutils_stunclient: (rc, output)."""
    p = subprocess.run(["turnutils_stunclient", "-p", str(port), "127.0.0.1"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


def parallel(jobs):
    """Run callables at once in threads; their results in order."""
    import threading
    out = [None] * len(jobs)
    errs = []

    def run(i, f):
        try:
            out[i] = f()
        except BaseException as e:  # reported below
            errs.append(e)

    ts = [threading.Thread(target=run, args=(i, f), daemon=True) for i, f in enumerate(jobs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    if errs:
        raise errs[0]
    return out


# --------------------------------------------------------------------------
# A hand-made STUN client, for what coturn's clients never send (expired
# credentials, unknown attributes, MESSAGE-INTEGRITY-SHA256...).

COOKIE = 0x2112A442
ALLOCATE, REFRESH, CREATE_PERMISSION, CHANNEL_BIND, BINDING = 0x003, 0x004, 0x008, 0x009, 0x001
REQUEST, SUCCESS, ERROR = 0, 2, 3
A_USERNAME, A_MI, A_ERROR, A_UNKNOWN = 0x0006, 0x0008, 0x0009, 0x000A
A_LIFETIME, A_PEER, A_REALM, A_NONCE = 0x000D, 0x0012, 0x0014, 0x0015
A_RELAYED, A_FAMILY, A_TRANSPORT, A_MI256 = 0x0016, 0x0017, 0x0019, 0x001C
A_MAPPED, A_FINGERPRINT = 0x0020, 0x8028


def stun_type(method, cls):
    return (((method & 0xF80) << 2) | ((method & 0x070) << 1) | (method & 0x00F)
            | ((cls & 2) << 7) | ((cls & 1) << 4))


def attr(t, v):
    import struct
    return struct.pack("!HH", t, len(v)) + v + b"\0" * (-len(v) % 4)


def u32(t, v):
    import struct
    return attr(t, struct.pack("!I", v))


def message(method, tid, attrs, key=None, sha256=False, fingerprint=True, cls=REQUEST):
    """A STUN message; key signs it (MESSAGE-INTEGRITY, or -SHA256)."""
    import struct
    import zlib
    t = stun_type(method, cls)
    body = b"".join(attrs)
    if key is not None:
        n = 36 if sha256 else 24
        hdr = struct.pack("!HHI", t, len(body) + n, COOKIE) + tid
        mac = hmac.new(key, hdr + body, hashlib.sha256 if sha256 else hashlib.sha1).digest()
        body += attr(A_MI256 if sha256 else A_MI, mac)
    if fingerprint:
        hdr = struct.pack("!HHI", t, len(body) + 8, COOKIE) + tid
        crc = (zlib.crc32(hdr + body) ^ 0x5354554E) & 0xFFFFFFFF
        body += u32(A_FINGERPRINT, crc)
    return struct.pack("!HHI", t, len(body), COOKIE) + tid + body


def parse(data):
    """(class, method, tid, {type: [values]}) of a STUN message."""
    import struct
    t, n, _ = struct.unpack("!HHI", data[:8])
    cls = ((t >> 7) & 2) | ((t >> 4) & 1)
    method = (t & 0x00F) | ((t >> 1) & 0x070) | ((t >> 2) & 0xF80)
    attrs, off = {}, 20
    while off + 4 <= 20 + n:
        at, alen = struct.unpack("!HH", data[off:off + 4])
        attrs.setdefault(at, []).append(data[off + 4:off + 4 + alen])
        off += 4 + alen + (-alen % 4)
    return cls, method, data[8:20], attrs


def error_code(attrs):
    v = attrs.get(A_ERROR, [b""])[0]
    return v[2] * 100 + v[3] if len(v) >= 4 else None


def stun_tcp(s, data):
    """Send data (a STUN request) on stream s and read one whole STUN
    message back: parse()'s (class, method, tid, attrs)."""
    s.sendall(data)
    got = b""
    deadline = time.monotonic() + 3 * H.SLOW
    while time.monotonic() < deadline:
        if len(got) >= 20 and len(got) >= 20 + int.from_bytes(got[2:4], "big"):
            break
        b = s.recv(4096)
        if not b:
            break
        got += b
    H.check(len(got) >= 20, f"no STUN answer on TCP: {got!r}")
    return parse(got)


def xor_peer(ip, port):
    """XOR-PEER-ADDRESS of an IPv4 peer."""
    import socket
    import struct
    a = struct.unpack("!I", socket.inet_aton(ip))[0] ^ COOKIE
    return attr(A_PEER, struct.pack("!BBHI", 0, 1, port ^ (COOKIE >> 16), a))


def longterm_key(user, password, realm="etrelay"):
    return hashlib.md5(f"{user}:{realm}:{password}".encode()).digest()


class StunClient:
    """One UDP 5-tuple to a TURN listener."""

    def __init__(self, port, timeout=1.0):
        import socket
        self.addr = ("127.0.0.1", port)
        self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.s.bind(("127.0.0.1", 0))
        self.s.settimeout(timeout)
        H._register(self)

    def close(self):
        self.s.close()

    def send_raw(self, data, tries=3):
        """Send data and wait for the answer with its transaction ID (raw
        bytes), resending up to tries times; None when none came."""
        import socket
        for _ in range(tries):
            self.s.sendto(data, self.addr)
            deadline = time.monotonic() + self.s.gettimeout()
            while time.monotonic() < deadline:
                try:
                    got, _ = self.s.recvfrom(65536)
                except socket.timeout:
                    break
                if got[8:20] == data[8:20]:
                    return got
        return None

    def request(self, method, attrs, key=None, sha256=False, tid=None):
        """(raw answer, parsed answer) of a request."""
        tid = tid or os.urandom(12)
        raw = self.send_raw(message(method, tid, attrs, key=key, sha256=sha256))
        H.check(raw is not None, f"no answer to method {method:#x}")
        return raw, parse(raw)

    def challenge(self):
        """REALM and NONCE from an unauthenticated Allocate's 401."""
        _, (cls, _, _, a) = self.request(ALLOCATE, [u32(A_TRANSPORT, 17 << 24)])
        H.expect_eq((cls, error_code(a)), (ERROR, 401), "answer to an unsigned Allocate")
        return a[A_REALM][0], a[A_NONCE][0]


def signed(user, realm, nonce):
    """The USERNAME, REALM and NONCE attributes of a signed request."""
    return [attr(A_USERNAME, user.encode()), attr(A_REALM, realm), attr(A_NONCE, nonce)]


def tcp_bindings_bytewise(port, n=2, gap=0.002):
    """n Binding requests over one TCP connection, sent a byte per write:
    how many answers (by transaction ID) came back."""
    import socket
    import struct
    tids = [os.urandom(12) for _ in range(n)]
    data = b"".join(struct.pack("!HHI", 0x0001, 0, COOKIE) + t for t in tids)
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        for b in data:
            s.send(bytes([b]))
            time.sleep(gap)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and sum(got.count(t) for t in tids) < n:
            try:
                d = s.recv(4096)
            except socket.timeout:
                break
            if not d:
                break
            got += d
    return sum(got.count(t) for t in tids)


def closed_by_server(s):
    """EOF or reset on s (a non-blocking peek)."""
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
