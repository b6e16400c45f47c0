#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""systemd's notify protocol, against a Python AF_UNIX datagram socket
named by NOTIFY_SOCKET.

With WATCHDOG_USEC=400000: READY=1 is the first message and comes after
the 'listening on' line, when the public port and the ops listener
already answer; STATUS= carries the state and the session count and
follows the sessions; WATCHDOG=1 comes at least twice in 1.5 s and never
more than WATCHDOG_USEC apart; SIGTERM sends STOPPING=1. During a
SIGTERM drain: STOPPING=1 at once, STATUS=draining, and the watchdog keeps
being fed until the exit. An abstract socket (@name) works. Without
WATCHDOG_USEC, or with WATCHDOG_PID naming another process, no
WATCHDOG=1."""

import os
import re
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

WATCHDOG_USEC = 400000


class NotifySocket:
    """Records (monotonic time, message) for every datagram; on_ready(t) is
    called from the receiving thread when READY=1 arrives."""

    def __init__(self, path, on_ready=None):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + path[1:] if path.startswith("@") else path)
        self.sock.settimeout(0.05)
        self.on_ready = on_ready
        self.msgs = []
        self.ready_checks = None
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="notify")
        self.thread.start()
        H._register(self)

    def _run(self):
        while not self._stop.is_set():
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                break
            t = time.monotonic()
            msg = data.decode("utf-8", "replace")
            with self.lock:
                self.msgs.append((t, msg))
            if msg == "READY=1" and self.on_ready:
                self.ready_checks = self.on_ready(t)

    def messages(self, pred=None):
        with self.lock:
            return [(t, m) for t, m in self.msgs if pred is None or pred(m)]

    def wait_for(self, regex, timeout, after=0.0, what=None):
        rx = re.compile(regex)
        return H.wait_until(lambda: next(((t, m) for t, m in self.messages()
                                          if t >= after and rx.search(m)), None),
                            timeout, what or f"a notify message matching {regex!r}")

    def close(self):
        self._stop.set()
        self.thread.join(timeout=2.0)
        try:
            self.sock.close()
        except OSError:
            pass
        if not self.path.startswith("@"):
            try:
                os.unlink(self.path)
            except OSError:
                pass


def start(ctx, path, env_extra, *extra, on_ready=None):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    ns = NotifySocket(path, on_ready)
    ctx.objs.append(ns)
    env = {"NOTIFY_SOCKET": path}
    env.update(env_extra)
    relay = H.relay_env(ctx, env, "--master", f"127.0.0.1:{master.port}",
                        "--upstream", f"127.0.0.1:{gs.port}", *extra)
    return gs, master, ns, relay


def watchdog(ctx):
    d = ctx.tmpdir()
    ops_port = H.free_tcp_port()
    box = {}

    def on_ready(t):
        # at READY=1 everything must already answer: the ops listener and
        # the public port
        out = {}
        try:
            with socket.create_connection((H.LOOPBACK, ops_port), timeout=1.0) as s:
                s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
                s.settimeout(1.0)
                out["ops"] = s.recv(100)[:15]
        except OSError as e:
            out["ops"] = repr(e)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                u.bind((H.LOOPBACK, 0))
                u.settimeout(1.0)
                u.sendto(b"\x08at-ready", box["relay_addr"])
                out["udp"] = u.recvfrom(100)[0]
        except (OSError, KeyError) as e:
            out["udp"] = repr(e)
        return out

    # the relay's address must be known before it starts: pick the port here
    udp_port = H.free_udp_port()
    box["relay_addr"] = (H.LOOPBACK, udp_port)
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    ns = NotifySocket(os.path.join(d, "notify.sock"), on_ready)
    ctx.objs.append(ns)
    relay = H.relay_env(ctx, {"NOTIFY_SOCKET": ns.path, "WATCHDOG_USEC": str(WATCHDOG_USEC)},
                        "--master", f"127.0.0.1:{master.port}", "--upstream", f"127.0.0.1:{gs.port}",
                        "--ops-listen", f"127.0.0.1:{ops_port}", "--listen", f"127.0.0.1:{udp_port}",
                        listen=False)
    relay.addr = box["relay_addr"]
    relay.port = udp_port
    (_, _, t_line) = relay.wait_for_line(r"^etrelay \S+ listening on ", 2.0)
    t_ready, _ = ns.wait_for(r"^READY=1$", 2.0, what="READY=1")
    msgs = ns.messages()
    H.expect_eq(msgs[0][1], "READY=1", "the first notify message")
    H.expect_eq(len(ns.messages(lambda m: m == "READY=1")), 1, "READY=1 messages")
    H.check(t_line <= t_ready + 0.2,
            f"READY=1 arrived {t_line - t_ready:.3f} s before the 'listening on' line")
    H.wait_until(lambda: ns.ready_checks, 3.0, "the checks made when READY=1 arrived")
    H.check(isinstance(ns.ready_checks["ops"], bytes) and ns.ready_checks["ops"].startswith(b"HTTP/1."),
            f"the ops listener did not answer when READY=1 arrived: {ns.ready_checks['ops']!r}")
    H.expect_eq(ns.ready_checks["udp"], b"ECHO:\x08at-ready",
                "the relay's answer to a datagram sent when READY=1 arrived")
    # STATUS right after READY: active, with the one session just opened or none
    t_st, st = ns.wait_for(r"^STATUS=", 1.0, what="a STATUS= message")
    H.check(re.fullmatch(r"STATUS=active, [01] sessions", st), f"first STATUS= message: {st!r}")

    # the watchdog: >= 2 in 1.5 s, never more than WATCHDOG_USEC apart
    time.sleep(2.0)
    wd = [t for t, m in ns.messages(lambda m: m == "WATCHDOG=1")]
    in_window = [t for t in wd if t_ready <= t <= t_ready + 1.5]
    H.check(len(in_window) >= 2, f"{len(in_window)} WATCHDOG=1 within 1.5 s of READY=1 "
            f"(WATCHDOG_USEC={WATCHDOG_USEC})")
    gaps = [b - a for a, b in zip([t_ready] + wd, wd)]
    H.check(max(gaps) < WATCHDOG_USEC / 1e6,
            f"WATCHDOG=1 gaps up to {max(gaps):.3f} s, over WATCHDOG_USEC {WATCHDOG_USEC / 1e6} s")
    ctx.note(f"{len(wd)} WATCHDOG=1 in {wd[-1] - t_ready:.2f} s, largest gap {max(gaps):.3f} s")

    # STATUS follows the sessions
    clients = [ctx.client(relay) for _ in range(2)]
    for i, c in enumerate(clients):
        p = c.game(b"\x08s%d" % i)
        H.expect_eq(c.request(p), b"ECHO:" + p, f"echo to client {i}")
    t0 = time.monotonic()
    ns.wait_for(r"^STATUS=active, 3 sessions$", 1.5, after=t0,
                what="STATUS=active, 3 sessions (2 clients and the READY-time check)")

    # SIGTERM: STOPPING=1, and it is the last word
    t_sig = time.monotonic()
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(3.0), 0, "exit status after SIGTERM")
    t_stop, _ = ns.wait_for(r"^STOPPING=1$", 1.0, after=t_sig, what="STOPPING=1 after SIGTERM")
    time.sleep(0.1)
    after = [m for t, m in ns.messages() if t >= t_sig]
    H.check(after and after[-1] == "STOPPING=1", f"notify messages after SIGTERM: {after}")
    H.check("READY=1" not in after, "READY=1 again after SIGTERM")
    gs.stop(); master.stop()


def drain(ctx):
    d = ctx.tmpdir()
    gs, master, ns, relay = start(ctx, os.path.join(d, "n.sock"),
                                  {"WATCHDOG_USEC": str(WATCHDOG_USEC)},
                                  "--drain-timeout", "10s", "--session-timeout", "1500ms")
    ns.wait_for(r"^READY=1$", 2.0)
    clients = [ctx.client(relay) for _ in range(2)]
    for i, c in enumerate(clients):
        p = c.game(b"\x08d%d" % i)
        H.expect_eq(c.request(p), b"ECHO:" + p, f"echo to client {i}")
    t_sig = time.monotonic()
    relay.signal(signal.SIGTERM)
    t_stop, _ = ns.wait_for(r"^STOPPING=1$", 0.5, after=t_sig, what="STOPPING=1 as the drain starts")
    ns.wait_for(r"^STATUS=draining, 2 sessions$", 1.0, after=t_sig, what="STATUS=draining, 2 sessions")
    H.check(relay.alive(), "etrelay exited at once although 2 sessions were open")
    rc = relay.wait_exit(5.0)
    t_exit = time.monotonic()
    H.expect_eq(rc, 0, "exit status once the sessions expired")
    wd = [t for t, m in ns.messages(lambda m: m == "WATCHDOG=1") if t_sig <= t <= t_exit]
    gaps = [b - a for a, b in zip([t_sig] + wd, wd + [t_exit])]
    H.check(len(wd) >= 2 and max(gaps) < WATCHDOG_USEC / 1e6,
            f"watchdog during a {t_exit - t_sig:.2f} s drain: {len(wd)} WATCHDOG=1, gaps up to "
            f"{max(gaps):.3f} s (WATCHDOG_USEC {WATCHDOG_USEC / 1e6} s)")
    ctx.note(f"drain {t_exit - t_sig:.2f} s with {len(wd)} WATCHDOG=1")
    gs.stop(); master.stop()


def abstract_and_no_watchdog(ctx):
    name = f"@etrelay-test-{os.getpid()}-{H.rand_token(6)}"
    gs, master, ns, relay = start(ctx, name, {})
    t_ready, _ = ns.wait_for(r"^READY=1$", 2.0, what="READY=1 on an abstract socket")
    time.sleep(1.0)
    H.expect_eq(ns.messages(lambda m: m.startswith("WATCHDOG")), [],
                "WATCHDOG messages without WATCHDOG_USEC")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(3.0), 0, "exit status (abstract socket)")
    ns.wait_for(r"^STOPPING=1$", 1.0, what="STOPPING=1 on an abstract socket")
    gs.stop(); master.stop()

    # WATCHDOG_PID names another process: the watchdog is not ours
    d = ctx.tmpdir()
    gs, master, ns, relay = start(ctx, os.path.join(d, "p.sock"),
                                  {"WATCHDOG_USEC": str(WATCHDOG_USEC), "WATCHDOG_PID": "1"})
    ns.wait_for(r"^READY=1$", 2.0)
    time.sleep(1.0)
    H.expect_eq(ns.messages(lambda m: m.startswith("WATCHDOG")), [],
                "WATCHDOG messages with WATCHDOG_PID=1 (another process)")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(3.0), 0, "exit status (WATCHDOG_PID=1)")
    gs.stop(); master.stop()


def test(ctx):
    H.run_parts(ctx, [watchdog, drain, abstract_and_no_watchdog])


if __name__ == "__main__":
    H.main(test)
