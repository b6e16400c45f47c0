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
    """A port free for UDP and TCP on 127.0.0.1 a moment ago (a listener
    takes both)."""
    import socket
    for _ in range(50):
        p = H.free_udp_port()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            continue
        finally:
            s.close()
    H.fail("no port free for both UDP and TCP")


def start_relay(ctx, port, *args, secrets=None, tcp=True):
    """A TURN-only etrelay on 127.0.0.1:port (UDP, and TCP when tcp)."""
    a = ["--turn-listen", f"127.0.0.1:{port}"]
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
