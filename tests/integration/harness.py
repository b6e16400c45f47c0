# SPDX-License-Identifier: ISC
"""Shared helpers for the etrelay integration tests (Python 3.11 stdlib only).

Every test script is run as

    python3 test_X.py <etrelay-binary> <io_uring|epoll>

and calls ``harness.main(test_fn)``.  ``test_fn(ctx)`` gets a :class:`Ctx`
that starts etrelay processes and the stand-ins (game server, master,
clients) and tears everything down at the end.  Exit status: 0 pass,
1 failure, 77 skip (meson's skip code).  etrelay started with
``--backend io_uring`` that exits 69 at startup is a skip, never a pass.

Rules kept throughout: every socket has a timeout, every loop is bounded in
time and count, nothing is left running after the script exits.
"""

import atexit
import fcntl
import shlex
import os
import random
import re
import selectors
import shutil
import signal
import socket
import string
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

# Tests start programs from several threads at once (turnutil.parallel);
# CPython's vfork() path then failed now and then with "[Errno 14] Bad
# address: 'turnutils_uclient'" (twice in loaded suites). fork() is slower
# by a page-table copy of this small process, and never did.
if hasattr(subprocess, "_USE_VFORK"):
    subprocess._USE_VFORK = False

PREFIX = b"\xff\xff\xff\xff"
EXIT_PASS, EXIT_FAIL, EXIT_SKIP = 0, 1, 77
LOOPBACK = "127.0.0.1"
MAX_DGRAM = 65536  # larger than any IPv4 UDP payload: a read never truncates

# Everything started by this process, killed at exit whatever happens.
_live = []
_live_lock = threading.Lock()

# `meson test --setup valgrind` runs every etrelay under a checker given in
# ETRELAY_WRAPPER; the checker exits CHECKER_STATUS when it found errors.
WRAPPER = shlex.split(os.environ.get("ETRELAY_WRAPPER", ""))
CHECKER_STATUS = 99
CHECKER_ERRORS = []
# Time bounds on etrelay's own reactions scale by this under a checker,
# which makes it several times slower (never set otherwise).
SLOW = float(os.environ.get("ETRELAY_SLOW", "1"))
# Workers for every etrelay a test starts without --workers of its own:
# tests/meson.build runs the suite with 1 and again with 2 (the -w2
# variants). Unset (a test run by hand): 1, the old single loop.
WORKERS = os.environ.get("ETRELAY_TEST_WORKERS", "1")


def _register(obj):
    with _live_lock:
        _live.append(obj)


def _kill_everything():
    with _live_lock:
        objs = list(reversed(_live))
        _live.clear()
    for obj in objs:
        try:
            obj.close()
        except Exception:
            pass


atexit.register(_kill_everything)


class TestFailure(Exception):
    """The test saw something other than what the contract says."""


class TestSkip(Exception):
    """The test cannot run here (exit 77)."""


# --------------------------------------------------------------------------
# Assertions and bounded waiting

def short(v, limit=200):
    """repr() of v, cut so that a 60 kB payload does not flood the log."""
    r = repr(v)
    if len(r) > limit:
        r = r[:limit] + f"... ({len(v) if hasattr(v, '__len__') else '?'} items/bytes)"
    return r


def fail(msg):
    raise TestFailure(msg)


def check(cond, msg):
    if not cond:
        fail(msg)


def expect_eq(seen, expected, what):
    if seen != expected:
        fail(f"{what}:\n    expected {short(expected)}\n    seen     {short(seen)}")


def wait_until(pred, timeout, what, interval=0.01):
    """Poll pred() until it returns something truthy (returned) or fail after
    timeout seconds. Bounded in time and in iterations."""
    deadline = time.monotonic() + timeout
    max_iter = int(timeout / interval) + 1000
    for _ in range(max_iter):
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    v = pred()
    if v:
        return v
    fail(f"timed out after {timeout:g} s waiting for {what}")


def hold_for(pred, duration, what, interval=0.02):
    """Check that pred() stays truthy for duration seconds (bounded)."""
    deadline = time.monotonic() + duration
    for _ in range(int(duration / interval) + 1000):
        if not pred():
            fail(f"{what} stopped holding")
        if time.monotonic() >= deadline:
            return
        time.sleep(interval)


def _ephemeral_range():
    """The kernel's ephemeral ports (net.ipv4.ip_local_port_range): any
    client socket of any program on the host may sit on one of them."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split()[:2])
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _ephemeral_low():
    return _ephemeral_range()[0]


_PORT_RNG = random.Random(os.urandom(8))
# Ports are drawn below the ephemeral range, from two pools: single ports
# from SINGLE_LOW up, ranges (TURN relayed ports, session ports, which the
# relay binds one by one long after the draw) from RANGE_LOW to SINGLE_LOW,
# where no single draw lands. Each draw is reserved, for the life of this
# process, by a lock on its bytes of one file every test process shares: a
# copy of a test running beside this one (the other backend, two workers,
# another checkout's suite) never draws what this one holds.
RANGE_LOW, SINGLE_LOW = 10000, 20000
_RESERVE_PATH = os.path.join(tempfile.gettempdir(), "etrelay-test-ports.lock")
_reserve_lock = threading.Lock()
_reserve_fd = None
_reserved = set()


def _reserve(lo, n):
    """Reserve ports lo..lo+n-1 for this process: False when another test
    process (or this one) holds one of them."""
    global _reserve_fd
    with _reserve_lock:
        if any(p in _reserved for p in range(lo, lo + n)):
            return False
        if _reserve_fd is None:
            try:
                _reserve_fd = os.open(_RESERVE_PATH, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            except OSError:
                _reserve_fd = -1  # another user's file: this process's own draws only
        if _reserve_fd >= 0:
            try:
                # POSIX record locks go with the process (never inherited,
                # dropped at its exit); the fd stays open until then, as
                # closing any fd of the file would drop them all.
                fcntl.lockf(_reserve_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, n, lo, os.SEEK_SET)
            except OSError:
                return False
        _reserved.update(range(lo, lo + n))
        return True


def _bindable(kinds, host, port):
    for kind in kinds:
        s = socket.socket(socket.AF_INET, kind)
        try:
            s.bind((host, port))
        except OSError:
            return False
        finally:
            s.close()
    return True


def _free_port(kinds, host):
    """A port on host free for each socket kind a moment ago, drawn at
    random below the kernel's ephemeral range: a port the kernel handed out
    by bind(0) may go to the next client socket of any test running beside
    this one (an autobind) before the relay under test binds it."""
    low = SINGLE_LOW
    high = max(min(_ephemeral_low(), 32768), low + 1000)
    for _ in range(200):
        p = _PORT_RNG.randrange(low, high)
        if _bindable(kinds, host, p) and _reserve(p, 1):
            return p
    fail(f"no port free on {host} in {low}-{high - 1} after 200 draws")


def free_udp_range(n):
    """n consecutive UDP ports on every address, free a moment ago and
    reserved (see _reserve), drawn at random below the single ports: the
    relay binds them one by one, long after the draw."""
    low, high = RANGE_LOW, SINGLE_LOW - n
    for _ in range(200):
        p = _PORT_RNG.randrange(low, high)
        if (all(_bindable((socket.SOCK_DGRAM,), "0.0.0.0", q) for q in range(p, p + n))
                and _reserve(p, n)):
            return p, p + n - 1
    fail(f"no {n} consecutive UDP ports free in {low}-{high + n - 1} after 200 draws")


def turn_ports(n=64, allocations=True):
    """--turn-ports of n relayed ports drawn by free_udp_range (the default,
    49152-65535, lies in the ephemeral range), and --turn-max-allocations n
    (the default, 4000, needs as many ports) unless allocations is False."""
    lo, hi = free_udp_range(n)
    return ["--turn-ports", f"{lo}-{hi}"] + (["--turn-max-allocations", str(n)]
                                             if allocations else [])


def free_udp_port():
    """A UDP port on 127.0.0.1 that was free a moment ago."""
    return _free_port((socket.SOCK_DGRAM,), LOOPBACK)


def free_udp_tcp_port():
    """A port free for UDP and for TCP on 127.0.0.1 a moment ago (a TURN
    listener takes both)."""
    return _free_port((socket.SOCK_DGRAM, socket.SOCK_STREAM), LOOPBACK)


_LISTEN_RE = re.compile(r"^(?:--)?(?:[a-z]+-)*listen$")
_RANGE_KEYS = ("--turn-ports", "--session-ports", "turn-ports", "session-ports", "ports")


def _port_setting(key, v):
    """(lo, hi) of a listen port or port range setting, else None."""
    v = str(v).strip()
    if _LISTEN_RE.match(key):
        m = re.search(r":(\d+)$", v)
        return (int(m.group(1)),) * 2 if m else None
    if key in _RANGE_KEYS:
        m = re.match(r"^(\d+)-(\d+)$", v)
        return (int(m.group(1)), int(m.group(2))) if m else None
    return None


def _conf_ports(path):
    """(settings, turn sections without ports, turn-listen, turn-ports) of
    a configuration file."""
    found, sections = [], {}
    section, has_listen, has_ports = None, False, False
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return found, [], False, False
    for n, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if line.startswith("["):
            section = " ".join(line.strip("[]").split())
            if section.split()[:1] == ["turn"]:
                sections[section] = False
            continue
        kv = line.split(None, 1)
        if len(kv) != 2:
            continue
        key, v = kv
        r = _port_setting(key, v)
        if r:
            found.append((f"{path}:{n}: {key} {v}",) + r)
        if section in sections and key == "ports":
            sections[section] = True
        has_listen |= section is None and key == "turn-listen"
        has_ports |= section is None and key == "turn-ports"
    return found, [f"{path}: [{s}]" for s, ranged in sections.items() if not ranged], \
        has_listen, has_ports


def _port_settings(args):
    """(settings, TURN listeners without relayed ports) of an etrelay
    argument list and the configuration files it names; a setting is
    (what, lo, hi)."""
    args = [str(a) for a in args]
    found, unranged = [], []
    has_listen = has_ports = False
    i = 0
    while i < len(args):
        key, eq, v = args[i].partition("=")
        takes = key in ("-c", "--config") or (key.startswith("--") and (
            key in _RANGE_KEYS or _LISTEN_RE.match(key) is not None))
        if takes and not eq:
            v = args[i + 1] if i + 1 < len(args) else ""
            i += 1
        i += 1
        if not takes:
            continue
        if key in ("-c", "--config"):
            f, u, tl, tp = _conf_ports(v)
            found += f
            unranged += u
            has_listen |= tl
            has_ports |= tp
            continue
        r = _port_setting(key, v)
        if r:
            found.append((f"{key} {v}",) + r)
        has_listen |= key == "--turn-listen"
        has_ports |= key == "--turn-ports"
    if has_listen and not has_ports:
        unranged.append("turn-listen")
    return found, unranged


def check_ports(args, starts=True):
    """Fail when a test asks etrelay for a port in the kernel's ephemeral
    range (a listen port, a TURN relayed or session port range, on the
    command line or in a -c file), or, for a relay that starts (starts, and
    no -t), for a TURN listener on the default relayed ports, 49152-65535:
    any client socket of any program may sit there ('bind 127.0.0.1:42303:
    Address already in use' in a loaded suite). Draw them with the helpers
    above (free_udp_port, free_tcp_port, free_udp_range, turn_ports)."""
    found, unranged = _port_settings(args)
    e_lo, e_hi = _ephemeral_range()
    bad = [w for w, lo, hi in found if lo <= e_hi and e_lo <= hi]
    if starts and "-t" not in [str(a) for a in args]:
        bad += [f"{w} without relayed ports (default 49152-65535)" for w in unranged]
    if bad:
        fail(f"a port in the ephemeral range {e_lo}-{e_hi} (net.ipv4.ip_local_port_range): "
             f"{'; '.join(bad)}: draw it with the harness (free_udp_port, free_tcp_port, "
             f"free_udp_range, turn_ports)")


_QPORTS = iter(range(20000, 60000))
_QPORTS_LOCK = threading.Lock()


def new_qport():
    """A qport no other client of this test uses: the relay drops an in-game
    datagram whose qport is not its session's, or is another session's."""
    with _QPORTS_LOCK:
        return next(_QPORTS)


def game_packet(qport, data=b"", seq=1):
    """An in-game datagram as a client sends it: sequence (4 bytes), qport
    (2 bytes, little-endian), then data."""
    return struct.pack("<iH", seq, qport) + data


def cmd(text):
    """A connectionless packet: \\xff\\xff\\xff\\xff + text."""
    if isinstance(text, str):
        text = text.encode("latin-1")
    return PREFIX + text


def rand_token(n=10):
    return "".join(random.choice(string.ascii_letters + string.digits) for _ in range(n))


def parse_info(s):
    """'\\k\\v\\k2\\v2' -> dict."""
    parts = s.split("\\")
    if parts and parts[0] == "":
        parts = parts[1:]
    return {parts[i]: parts[i + 1] for i in range(0, len(parts) - 1, 2)}


def split_command(data):
    """Connectionless packet -> (command word as sent, rest as str), or
    (None, None) for in-game packets."""
    if not data.startswith(PREFIX):
        return None, None
    text = data[4:].decode("latin-1")
    m = re.match(r"([^\s]*)[ \t]*(.*)", text, re.S)
    return m.group(1), m.group(2)


def log(*a):
    print("[test]", *a, flush=True)


# --------------------------------------------------------------------------
# etrelay process

# Abuse limits opened up for tests where every client is 127.0.0.1.
OPEN_LIMITS = ("--sessions-per-ip", "100000", "--ip-query-burst", "100000",
               "--ip-query-rate", "100000", "--server-query-burst", "100000",
               "--server-query-rate", "100000", "--query-cache", "0",
               "--ip-session-rate", "100000", "--session-rate", "100000")


class Relay:
    """One etrelay process. stderr (and stdout) are read by threads into
    lists of lines; wait_for_line() waits for a regex."""

    READY_RE = r"^etrelay \S+ listening on "

    def __init__(self, binary, backend, args, listen_port=None, listen=True, wrapper=()):
        self.backend = backend
        self.port = listen_port or free_udp_port()
        self.addr = (LOOPBACK, self.port)
        self.cmd = list(wrapper) + WRAPPER + [binary]
        if listen:
            self.cmd += ["--listen", f"{LOOPBACK}:{self.port}"]
        if backend is not None:
            self.cmd += ["--backend", backend]
        # Lines are matched from their start: no time of day in front
        # (stderr is a pipe, so --log-time auto would add one).
        if not any(str(a).startswith("--log-time") for a in args):
            self.cmd += ["--log-time", "no"]
        if not any(str(a).startswith("--workers") for a in args):
            self.cmd += ["--workers", WORKERS]
        self.cmd += list(args)
        check_ports(self.cmd[len(wrapper) + len(WRAPPER) + 1:])
        self.lines = []      # (monotonic time, line) from stderr
        self.out_lines = []  # stdout
        self.cond = threading.Condition()
        self.eof = False
        self.expect_exit = False
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _register(self)
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stderr, self.lines, True), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out_lines, False), daemon=True),
        ]
        for t in self._readers:
            t.start()

    @property
    def pid(self):
        return self.proc.pid

    def _read(self, pipe, dest, is_err):
        try:
            for raw in iter(pipe.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                with self.cond:
                    dest.append((time.monotonic(), line))
                    self.cond.notify_all()
        except (ValueError, OSError):
            pass
        finally:
            if is_err:
                with self.cond:
                    self.eof = True
                    self.cond.notify_all()

    # -- log lines --------------------------------------------------------

    def mark(self):
        """Index of the next stderr line: pass as start= to look only at
        lines logged after this point."""
        with self.cond:
            return len(self.lines)

    def text_lines(self, start=0):
        with self.cond:
            return [l for _, l in self.lines[start:]]

    def find_lines(self, regex, start=0):
        rx = re.compile(regex)
        with self.cond:
            return [(i, m) for i, (_, l) in enumerate(self.lines) if i >= start
                    for m in [rx.search(l)] if m]

    def count(self, regex, start=0):
        return len(self.find_lines(regex, start))

    def wait_for_line(self, regex, timeout, start=0, what=None):
        """Wait until a stderr line at index >= start matches regex.
        Returns (index, match, time the line was read). Fails early when
        etrelay has exited and the line can no longer appear."""
        rx = re.compile(regex)
        deadline = time.monotonic() + timeout
        i = start
        with self.cond:
            for _ in range(100000):
                while i < len(self.lines):
                    t, l = self.lines[i]
                    m = rx.search(l)
                    if m:
                        return i, m, t
                    i += 1
                if self.eof:
                    self.proc.poll()
                    fail(f"etrelay exited (status {self.proc.returncode}) before logging a line "
                         f"matching {regex!r}" + (f" ({what})" if what else ""))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.cond.wait(min(remaining, 0.2))
        fail(f"no etrelay log line matching {regex!r} within {timeout:g} s"
             + (f" ({what})" if what else ""))

    def wait_ready(self, timeout=None):
        """Wait for the 'listening on' line (within 5 s, times ETRELAY_SLOW
        unless given). Exit 69 with --backend io_uring is a skip; any other
        early exit is a failure."""
        if timeout is None:
            timeout = 5.0 * SLOW
        rx = re.compile(self.READY_RE)
        deadline = time.monotonic() + timeout

        def ready_line():
            for _, l in self.lines:
                if rx.search(l):
                    return l
            return None

        with self.cond:
            for _ in range(100000):
                line = ready_line()
                if line is not None or self.eof or self.proc.poll() is not None:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.cond.wait(min(remaining, 0.2))
            line = ready_line()
        if line is not None:
            if self.backend in ("io_uring", "epoll"):
                check(f"backend {self.backend}" in line,
                      f"startup line does not say 'backend {self.backend}': {line!r}")
            return line
        rc = self.wait_exit(2.0)
        if rc is None:
            fail(f"etrelay did not log its 'listening on' line within {timeout:g} s")
        self._join_readers()
        err = "\n".join(self.text_lines())
        if rc == 69 and self.backend == "io_uring":
            raise TestSkip(f"--backend io_uring unavailable here (exit 69): {err.strip()}")
        fail(f"etrelay exited with status {rc} at startup (command: {' '.join(self.cmd)})")

    # -- process ----------------------------------------------------------

    def alive(self):
        return self.proc.poll() is None

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def signal(self, sig):
        self.expect_exit = True
        if self.alive():
            self.proc.send_signal(sig)

    def cpu_seconds(self):
        """utime + stime of the process, in seconds (from /proc/<pid>/stat)."""
        with open(f"/proc/{self.pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()
        ticks = int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def _join_readers(self):
        for t in self._readers:
            t.join(timeout=2.0)

    def close(self):
        if self.proc.poll() is None and WRAPPER:
            # Let the checker finish and report at a normal exit.
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._join_readers()
        if WRAPPER and self.proc.returncode == CHECKER_STATUS and self not in CHECKER_ERRORS:
            CHECKER_ERRORS.append(self)
        for p in (self.proc.stdout, self.proc.stderr):
            try:
                p.close()
            except Exception:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def dump(self, n=40):
        rc = self.proc.poll()
        print(f"--- etrelay: {' '.join(self.cmd)}")
        print(f"--- status: {'running' if rc is None else rc}; last {n} stderr lines:")
        for l in self.text_lines()[-n:]:
            print("    " + l)
        with self.cond:
            out = [l for _, l in self.out_lines]
        if out:
            print(f"--- last stdout lines:")
            for l in out[-10:]:
                print("    " + l)


# --------------------------------------------------------------------------
# Stand-ins

class Packet:
    __slots__ = ("t", "data", "addr")

    def __init__(self, t, data, addr):
        self.t, self.data, self.addr = t, data, addr

    def __repr__(self):
        return f"Packet({short(self.data, 60)} from {self.addr})"


class _UdpThread:
    """A UDP socket on 127.0.0.1 served by a thread until stop()."""

    name = "udp"

    def __init__(self, port=None, rcvbuf=4 << 20, host=LOOPBACK):
        self.port = port or free_udp_port()
        self.addr = (host, self.port)
        self.rcvbuf = rcvbuf
        self.lock = threading.Lock()
        self.received = []  # Packet
        self.sock = None
        self.thread = None
        self.errors = []
        _register(self)

    def start(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for size in (self.rcvbuf, 1 << 20):
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
                break
            except OSError:
                pass
        for attempt in range(50):
            try:
                s.bind(self.addr)
                break
            except OSError:
                if attempt == 49:
                    s.close()
                    raise
                time.sleep(0.02)
        s.settimeout(0.05)
        self.sock = s
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=self.name)
        self.thread.start()
        return self

    def running(self):
        return self.thread is not None and self.thread.is_alive()

    def stop(self):
        """Close the socket: packets to this port now get ECONNREFUSED."""
        if self.thread is None:
            return
        self._stop.set()
        self.thread.join(timeout=2.0)
        self.thread = None
        try:
            self.sock.close()
        except Exception:
            pass

    close = stop

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _run(self):
        # Bounded by the stop event and by the socket timeout; no busy loop.
        while not self._stop.is_set():
            try:
                data, addr = self.sock.recvfrom(MAX_DGRAM)
            except socket.timeout:
                continue
            except OSError as e:
                # ECONNREFUSED from an earlier send shows up here: not ours
                # to care about, but do not spin on a closed socket.
                if self._stop.is_set():
                    break
                self.errors.append(repr(e))
                time.sleep(0.005)
                continue
            now = time.monotonic()
            with self.lock:
                self.received.append(Packet(now, data, addr))
            try:
                self.handle(data, addr, now)
            except OSError as e:
                self.errors.append(repr(e))

    def send(self, data, addr):
        self.sock.sendto(data, addr)

    def packets(self, pred=None):
        with self.lock:
            return [p for p in self.received if pred is None or pred(p)]

    def handle(self, data, addr, now):
        raise NotImplementedError


def status_payload(size, challenge=None):
    """A statusResponse of exactly `size` bytes (if size is given) with a
    pseudo-random printable filler so that reordering or corruption shows."""
    head = b"statusResponse\n\\sv_hostname\\test\\mapname\\oasago2\\sv_maxclients\\16"
    if challenge:
        head += b"\\challenge\\" + challenge.encode("latin-1")
    head = PREFIX + head
    tail = b'\n0 12 "player"\n'
    if size is None:
        return head + tail
    pad = size - len(head) - len(tail) - len(b"\\filler\\")
    if pad < 0:
        raise ValueError("status size too small")
    rng = random.Random(size)
    alphabet = (string.ascii_letters + string.digits).encode()
    filler = bytes(rng.choice(alphabet) for _ in range(pad))
    out = head + b"\\filler\\" + filler + tail
    assert len(out) == size
    return out


class GameServer(_UdpThread):
    """Stand-in for an ET/Q3 server.

    - ``getinfo <ch>``  -> infoResponse echoing the challenge
    - ``getstatus``     -> statusResponse (``status_size`` bytes if set)
    - ``getchallenge``  -> ``challengeResponse <n>``
    - ``connect ...``   -> ``connectResponse <n>``
    - in-game (no prefix) -> ``b'ECHO:' + payload``
    Records every packet with its source (``received``).  stop() closes the
    socket (the relay then gets ECONNREFUSED); start() again on the same port.
    """

    name = "gameserver"

    def __init__(self, port=None, status_size=None, respond=True):
        super().__init__(port)
        self.status_size = status_size
        self.respond = respond
        self.replies = []  # (addr, bytes) sent back
        self.challenges = {}
        self.start()

    @staticmethod
    def info_response(challenge):
        return (PREFIX + b"infoResponse\n" +
                (f"\\challenge\\{challenge}\\hostname\\test\\protocol\\84\\clients\\0"
                 f"\\sv_maxclients\\16\\mapname\\oasago2").encode("latin-1"))

    def handle(self, data, addr, now):
        if not self.respond:
            return
        word, rest = split_command(data)
        reply = None
        if word is None:
            reply = b"ECHO:" + data
        else:
            w = word.lower()
            args = rest.split()
            if w == "getinfo":
                reply = self.info_response(args[0] if args else "")
            elif w == "getstatus":
                reply = status_payload(self.status_size, args[0] if args else None)
            elif w == "getchallenge":
                n = self.challenges.setdefault(addr, random.randint(1, 2**31 - 1))
                reply = cmd(f"challengeResponse {n}")
            elif w == "connect":
                n = self.challenges.setdefault(addr, random.randint(1, 2**31 - 1))
                reply = cmd(f"connectResponse {n}")
        if reply is not None:
            with self.lock:
                self.replies.append((addr, reply))
            self.send(reply, addr)

    # helpers for assertions
    def probes(self):
        """getinfo packets (the relay's probes and the masters' queries)."""
        return self.packets(lambda p: (split_command(p.data)[0] or "").lower() == "getinfo")

    def sources_for(self, payloads):
        """Source ports of the packets whose data is in payloads."""
        payloads = set(payloads)
        return {p.addr for p in self.packets(lambda p: p.data in payloads)}


class Master(_UdpThread):
    """Stand-in for a Quake 3 master.

    On ``heartbeat <tag>``: records (tag, source); for a non-flatline tag
    sends ``getinfo <random challenge>`` to the heartbeat's SOURCE and lists
    that address only when an infoResponse carrying the same challenge comes
    back from exactly that address within ``window`` seconds.  A flatline
    heartbeat is recorded in ``flatlines`` and delists the address.
    """

    name = "master"
    FLATLINE_TAGS = {"ETFlatline-1", "WolfFlatline-1"}

    def __init__(self, port=None, challenge=True, window=2.0, flatline_tags=None):
        super().__init__(port)
        self.challenge = challenge
        self.window = window
        self.flatline_tags = set(flatline_tags or self.FLATLINE_TAGS)
        self.heartbeats = []   # (t, tag, addr), non-flatline
        self.flatlines = []    # (t, tag, addr)
        self.challenges = []   # (t, challenge, addr, packet sent)
        self.listed = set()
        self.listings = []     # (t, addr)
        self.rejected = []     # (t, reason, addr)
        self.pending = {}
        self.start()

    def handle(self, data, addr, now):
        word, rest = split_command(data)
        if word is None:
            with self.lock:
                self.rejected.append((now, "in-game packet", addr))
            return
        if word == "heartbeat":
            tag = rest.strip()
            with self.lock:
                if tag in self.flatline_tags:
                    self.flatlines.append((now, tag, addr))
                    self.listed.discard(addr)
                    return
                self.heartbeats.append((now, tag, addr))
            if self.challenge:
                ch = rand_token(12)
                pkt = cmd(f"getinfo {ch}")
                with self.lock:
                    self.pending[ch] = (addr, now + self.window)
                    self.challenges.append((now, ch, addr, pkt))
                self.send(pkt, addr)
        elif word == "infoResponse":
            info = parse_info(rest.strip())
            ch = info.get("challenge")
            with self.lock:
                ent = self.pending.pop(ch, None)
                if ent is None:
                    self.rejected.append((now, f"unknown challenge {ch!r}", addr))
                elif ent[0] != addr:
                    self.rejected.append((now, f"answer from {addr}, heartbeat came from {ent[0]}", addr))
                elif now > ent[1]:
                    self.rejected.append((now, "answer too late", addr))
                else:
                    self.listed.add(addr)
                    self.listings.append((now, addr))
        else:
            with self.lock:
                self.rejected.append((now, f"unexpected command {word!r}", addr))

    def heartbeat_list(self):
        with self.lock:
            return list(self.heartbeats)

    def flatline_list(self):
        with self.lock:
            return list(self.flatlines)

    def listed_set(self):
        with self.lock:
            return set(self.listed)


class SilentDns(_UdpThread):
    """A DNS server that never answers: a resolver pointed at it hangs for
    its whole timeout. Records the queried names."""

    name = "silentdns"

    def __init__(self, host="127.0.0.2", port=53):
        super().__init__(port=port, host=host)
        self.start()

    def handle(self, data, addr, now):
        pass

    def queried_names(self):
        names = []
        for p in self.packets():
            d, i, labels = p.data, 12, []
            for _ in range(64):
                if i >= len(d) or d[i] == 0:
                    break
                n = d[i]
                labels.append(d[i + 1:i + 1 + n].decode("latin-1"))
                i += 1 + n
            names.append(".".join(labels))
        return names


def slow_dns_wrapper(tmpdir, dns_host="127.0.0.2", timeout_s=3):
    """argv prefix that runs a command in a private mount namespace whose
    /etc/resolv.conf points at dns_host (a SilentDns) with the given timeout
    and one attempt. None when that cannot be done here (not root, no
    unshare, no mount namespaces)."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or not unshare:
        return None
    conf = os.path.join(tmpdir, "resolv.conf")
    with open(conf, "w") as f:
        f.write(f"nameserver {dns_host}\noptions timeout:{timeout_s} attempts:1\n")
    script = 'mount --bind "$0" /etc/resolv.conf && exec "$@"'
    wrapper = [unshare, "--mount", "--propagation", "private", "sh", "-c", script, conf]
    try:
        r = subprocess.run(wrapper + ["cat", "/etc/resolv.conf"], capture_output=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0 or dns_host.encode() not in r.stdout:
        return None
    return wrapper


def hosts_file_wrapper(tmpdir, hosts="127.0.0.1 localhost\n::1 localhost ip6-localhost\n"):
    """argv prefix that runs a command in a private mount namespace where
    host names come from an /etc/hosts holding hosts alone (a private
    nsswitch.conf: "hosts: files"): no resolver is asked, so a name is
    found or not found the same with DNS, without it (a namespace without
    DNS said "Temporary failure in name resolution") or slow. None when
    that cannot be done here (not root, no unshare, no mount namespaces)."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or not unshare:
        return None
    path = os.path.join(tmpdir, "hosts")
    with open(path, "w") as f:
        f.write(hosts)
    nss = os.path.join(tmpdir, "nsswitch.conf")
    try:
        with open("/etc/nsswitch.conf") as f:
            lines = [l for l in f.read().splitlines() if not l.strip().startswith("hosts:")]
    except OSError:
        lines = []
    with open(nss, "w") as f:
        f.write("\n".join(lines + ["hosts: files", ""]))
    script = ('mount --bind "$0" /etc/hosts && mount --bind "$1" /etc/nsswitch.conf && '
              'shift && exec "$@"')
    wrapper = [unshare, "--mount", "--propagation", "private", "sh", "-c", script, path, nss]
    try:
        # getent exits 2 for a name not found: the files' answer, no resolver's
        r = subprocess.run(wrapper + ["getent", "hosts", "no-such-name.invalid"],
                           capture_output=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return wrapper if r.returncode == 2 else None


class Client:
    """A UDP socket on 127.0.0.1 talking to the relay. Every reply must come
    from the relay's public address."""

    def __init__(self, relay_addr, timeout=2.0):
        self.relay_addr = tuple(relay_addr)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((LOOPBACK, 0))
        self.sock.settimeout(timeout)
        self.timeout = timeout
        self.addr = self.sock.getsockname()
        self.port = self.addr[1]
        self.qport = new_qport()
        self.sent = 0
        self.got = 0
        _register(self)

    def game(self, data=b"", seq=1):
        """An in-game datagram with this client's qport."""
        return game_packet(self.qport, data, seq)

    def send(self, data):
        self.sock.sendto(data, self.relay_addr)
        self.sent += 1

    def try_recv(self, timeout=None):
        """A datagram, or None after timeout."""
        self.sock.settimeout(self.timeout if timeout is None else timeout)
        try:
            data, src = self.sock.recvfrom(MAX_DGRAM)
        except socket.timeout:
            return None
        except ConnectionRefusedError:
            fail(f"client {self.addr}: ECONNREFUSED, is etrelay listening on {self.relay_addr}?")
        if tuple(src) != self.relay_addr:
            fail(f"client {self.addr} got a reply from {src}, expected it from the relay's "
                 f"public address {self.relay_addr}")
        self.got += 1
        return data

    def recv(self, timeout=None, what="a reply"):
        data = self.try_recv(timeout)
        if data is None:
            fail(f"client {self.addr}: no {what} from the relay within "
                 f"{self.timeout if timeout is None else timeout:g} s")
        return data

    def request(self, data, timeout=None, what="a reply"):
        self.send(data)
        return self.recv(timeout, what)

    def close(self):
        try:
            self.sock.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# --------------------------------------------------------------------------
# Context

class Ctx:
    def __init__(self, binary, backend):
        self.binary = os.path.abspath(binary)
        self.backend = backend
        # An AddressSanitizer build keeps freed blocks in its quarantine
        # (256 MiB by default), so its RSS says nothing of what the relay
        # holds: memory bounds measured as RSS hold for the plain builds.
        with open(self.binary, "rb") as f:
            self.asan = b"__asan_init" in f.read()
        self.relays = []
        self.objs = []
        self.notes = []
        self._tmpdirs = []

    def relay(self, *args, debug=False, backend=None, wait_ready=True, listen=True, wrapper=(),
              open_limits=True):
        """Start etrelay with --listen 127.0.0.1:<free port> --backend <backend>.
        wrapper: argv run in front of the binary (it must exec it).
        open_limits: every test client shares 127.0.0.1, so the per-IP and
        game-server query limits and the query cache (which protect a real
        server from abuse, see the abuse tests) are opened up first; the
        test's own arguments come after them and win."""
        b = self.backend if backend is None else backend
        a = (list(OPEN_LIMITS) if open_limits else []) + list(args) + (["--debug"] if debug else [])
        r = Relay(self.binary, b, a, listen=listen, wrapper=wrapper)
        self.relays.append(r)
        self.objs.append(r)
        if wait_ready:
            r.wait_ready()
        return r

    def game_server(self, **kw):
        g = GameServer(**kw)
        self.objs.append(g)
        return g

    def master(self, **kw):
        m = Master(**kw)
        self.objs.append(m)
        return m

    def silent_dns(self, **kw):
        d = SilentDns(**kw)
        self.objs.append(d)
        return d

    def tmpdir(self):
        d = tempfile.mkdtemp(prefix="etrelay-test-")
        self._tmpdirs.append(d)
        return d

    def client(self, relay, timeout=2.0):
        addr = relay.addr if isinstance(relay, Relay) else relay
        c = Client(addr, timeout)
        self.objs.append(c)
        return c

    def note(self, msg):
        self.notes.append(msg)
        log(msg)

    def check_relays_alive(self):
        for r in self.relays:
            if not r.expect_exit and r.proc.poll() is not None:
                fail(f"etrelay died during the test with status {r.proc.returncode}")

    def dump(self):
        for r in self.relays:
            r.dump()
        for o in self.objs:
            if isinstance(o, GameServer):
                pk = o.packets()
                print(f"--- game server {o.addr}: {len(pk)} packets received; last few: {pk[-5:]}")
            elif isinstance(o, Master):
                print(f"--- master {o.addr}: heartbeats {o.heartbeat_list()[-5:]}, flatlines "
                      f"{o.flatline_list()}, listed {o.listed_set()}, rejected {o.rejected[-5:]}")

    def cleanup(self):
        for o in reversed(self.objs):
            try:
                o.close()
            except Exception:
                pass
        for d in self._tmpdirs:
            shutil.rmtree(d, ignore_errors=True)


def _on_sigterm(signum, frame):
    raise SystemExit(EXIT_FAIL)


def main(test_fn):
    """Parse [binary, backend], run test_fn(ctx), exit 0/1/77."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    name = os.path.basename(sys.argv[0])
    if len(sys.argv) != 3 or sys.argv[2] not in ("io_uring", "epoll", "auto"):
        print(f"usage: {name} <etrelay-binary> <io_uring|epoll>", file=sys.stderr)
        sys.exit(EXIT_FAIL)
    binary, backend = sys.argv[1], sys.argv[2]
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print(f"FAIL {name}: {binary} is not an executable file")
        sys.exit(EXIT_FAIL)
    ctx = Ctx(binary, backend)
    t0 = time.monotonic()
    rc = EXIT_FAIL
    try:
        test_fn(ctx)
        ctx.check_relays_alive()
        rc = EXIT_PASS
        print(f"PASS {name} [{backend}] in {time.monotonic() - t0:.1f} s")
    except TestSkip as e:
        rc = EXIT_SKIP
        print(f"SKIP {name} [{backend}]: {e}")
    except TestFailure as e:
        print(f"FAIL {name} [{backend}]: {e}")
        ctx.dump()
        # Again after the processes' logs: meson keeps only the last 100
        # lines of a long output, and the reason must be among them.
        print(f"FAIL {name} [{backend}] (the reason, again): {str(e)[-2000:]}")
    except BaseException as e:  # a bug in the test itself, or SIGTERM
        print(f"FAIL {name} [{backend}]: unexpected {type(e).__name__}: {e}")
        traceback.print_exc(file=sys.stdout)
        ctx.dump()
        print(f"FAIL {name} [{backend}] (the reason, again): unexpected "
              f"{type(e).__name__}: {str(e)[-2000:]}")
    finally:
        ctx.cleanup()
        _kill_everything()
    if CHECKER_ERRORS and rc != EXIT_SKIP:
        rc = EXIT_FAIL
        print(f"FAIL {name} [{backend}]: {WRAPPER[0]} found errors in {len(CHECKER_ERRORS)} "
              f"etrelay run(s):")
        for r in CHECKER_ERRORS:
            r.dump(n=200)
    sys.stdout.flush()
    sys.exit(rc)


# --------------------------------------------------------------------------
# Ops plane, environment and traffic helpers (appended for the ops, drain,
# limits, notify and config-file tests; nothing above depends on them)

import http.client as _http_client  # noqa: E402

TOKEN_VARS = ("ETRELAY_LIFECYCLE_TOKEN", "ETRELAY_LIFECYCLE_READ_TOKEN", "ETRELAY_METRICS_TOKEN")
_CHILD_SCRUB = TOKEN_VARS + tuple(v + "_FILE" for v in TOKEN_VARS) + (
    "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM")
_env_lock = threading.Lock()


def free_tcp_port(host=LOOPBACK):
    """A TCP port on host that was free a moment ago (see _free_port)."""
    return _free_port((socket.SOCK_STREAM,), host)


def require_tool(name):
    """Path of an external program, or skip the test (exit 77)."""
    p = shutil.which(name)
    if not p:
        raise TestSkip(f"{name} is not installed")
    return p


def child_env(env=None):
    """os.environ without the ops tokens and systemd variables, plus env
    (a value of None removes that variable)."""
    out = {k: v for k, v in os.environ.items() if k not in _CHILD_SCRUB}
    for k, v in (env or {}).items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def run_with_journal_stream(ctx, gs, journal, extra=("--log-time", "no")):
    """Start etrelay with stderr on a pipe, JOURNAL_STREAM naming that pipe
    (journal=True) or another file; stop it after the server is up and a
    warning was logged; return its stderr lines."""
    r, w = os.pipe()
    other = os.open(os.devnull, os.O_WRONLY)
    st = os.fstat(w if journal else other)
    env = child_env({"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
    port = free_udp_port()
    # An unresolvable master gives a warning line; --debug gives debug lines.
    # the master's name is looked up in a hosts file alone where that can
    # be done (no DNS query leaves the host; not found at once)
    wrapper = hosts_file_wrapper(ctx.tmpdir()) or []
    argv = wrapper + [ctx.binary, "--backend", ctx.backend, "--listen", f"127.0.0.1:{port}",
            "--upstream", f"127.0.0.1:{gs.port}", "--master", "does-not-exist.invalid",
            "--heartbeat-interval", "1s", "--debug", *extra]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=w, env=env)
    os.close(w)
    os.close(other)
    out = b""
    deadline = time.monotonic() + 10 * SLOW
    os.set_blocking(r, False)
    try:
        while time.monotonic() < deadline and b"cannot resolve" not in out:
            if p.poll() is not None:
                break
            try:
                chunk = os.read(r, 65536)
                out += chunk
            except BlockingIOError:
                time.sleep(0.05)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10 * SLOW)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    os.set_blocking(r, True)
    out += os.read(r, 1 << 20)
    os.close(r)
    if p.returncode == 69:
        raise TestSkip("--backend io_uring unavailable here (exit 69)")
    return out.decode("utf-8", "replace").splitlines()


def relay_env(ctx, env, *args, wait_ready=True, ready_re=None, **kw):
    """ctx.relay(*args) with the child's environment child_env(env).
    ready_re replaces the 'listening on' regex wait_ready() looks for."""
    with _env_lock:
        saved = dict(os.environ)
        try:
            os.environ.clear()
            os.environ.update(child_env(env))
            r = ctx.relay(*args, wait_ready=False, **kw)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    if ready_re:
        r.READY_RE = ready_re
    if wait_ready:
        r.wait_ready()
    return r


def rss_kib(pid):
    """VmRSS of pid in KiB (0 when it is gone)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def run_etrelay(ctx, args, env=None, timeout=15.0, wrapper=()):
    """Run etrelay to its exit: (status, stdout, stderr). Fails if it is
    still running after timeout seconds."""
    check_ports(args, starts=False)
    argv = list(wrapper) + [ctx.binary] + list(args)
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout, env=child_env(env))
    except subprocess.TimeoutExpired:
        fail(f"{' '.join(argv)}: still running after {timeout:g} s")
    return (p.returncode, p.stdout.decode("utf-8", "replace"),
            p.stderr.decode("utf-8", "replace"))


class HttpReply:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        import json
        try:
            return json.loads(self.body)
        except ValueError as e:
            fail(f"body is not JSON ({e}): {short(self.body, 400)}")

    def __repr__(self):
        return f"HttpReply({self.status}, {short(self.body, 120)})"


def http_request(port, method, path, token=None, host=LOOPBACK, timeout=5.0, headers=None):
    """One request with http.client (a fresh connection); HttpReply."""
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    conn = _http_client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, headers=h)
        resp = conn.getresponse()
        body = resp.read()
        return HttpReply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
    finally:
        conn.close()


def curl_request(port, path, method="GET", token=None, host=LOOPBACK, timeout=5.0):
    """The same request made by curl(1); HttpReply (headers lowercased)."""
    exe = require_tool("curl")
    argv = [exe, "-sS", "--max-time", f"{timeout:g}", "-D", "-", "-o", "-",
            "-w", "\n@@status=%{http_code}"]
    if method == "HEAD":
        argv += ["-I"]
    elif method != "GET":
        argv += ["-X", method]
    if token is not None:
        argv += ["-H", f"Authorization: Bearer {token}"]
    argv.append(f"http://{host}:{port}{path}")
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout + 5)
    except subprocess.TimeoutExpired:
        fail(f"curl {path}: no answer within {timeout + 5:g} s")
    out = p.stdout
    if p.returncode != 0:
        fail(f"curl {method} {path}: exit {p.returncode}: {p.stderr.decode(errors='replace').strip()}")
    head, _, status = out.rpartition(b"\n@@status=")
    raw_headers, _, body = head.partition(b"\r\n\r\n")
    hdrs = {}
    for line in raw_headers.split(b"\r\n")[1:]:
        k, _, v = line.decode("latin-1").partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return HttpReply(int(status), hdrs, body)


_SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$")
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def parse_metrics(text):
    """Prometheus text format -> {(name, ((label, value), ...)): float}; label
    pairs sorted by label name, values unescaped. Fails on a line it cannot
    read."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = _SAMPLE_RE.match(line)
        if not m:
            fail(f"/metrics line {n} is not a sample: {line!r}")
        name, labels, value = m.groups()
        pairs = []
        pos = 0
        labels = labels or ""
        while pos < len(labels):
            lm = _LABEL_RE.match(labels, pos)
            if not lm:
                fail(f"/metrics line {n}: cannot read labels {labels!r}")
            v = re.sub(r'\\(.)', lambda mm: "\n" if mm.group(1) == "n" else mm.group(1), lm.group(2))
            pairs.append((lm.group(1), v))
            pos = lm.end()
        key = (name, tuple(sorted(pairs)))
        if key in out:
            fail(f"/metrics: duplicate sample {line!r}")
        out[key] = float(value)
    return out


def metrics_page(port):
    """GET /metrics on the ops port without a token: (text, parse_metrics(text))."""
    r = http_request(port, "GET", "/metrics")
    expect_eq(r.status, 200, "GET /metrics")
    return r.text, parse_metrics(r.text)


def metric_value(samples, name, **labels):
    """Sum of the samples of name whose labels include labels; None when
    there is none."""
    vals = [v for (n, pairs), v in samples.items()
            if n == name and all((k, str(lv)) in pairs for k, lv in labels.items())]
    return sum(vals) if vals else None


class Pinger:
    """n clients, each keeping one in-game datagram in flight through the
    relay (lock-step): a unique payload, then up to `timeout` s for
    b'ECHO:' + payload from the relay's address (what GameServer answers).
    A thread per client, until stop(), max_seconds or max_packets.
    Each record is [client, seq, sent_at, answered_at or None]."""

    def __init__(self, relay_addr, n=3, interval=0.02, timeout=1.0, max_seconds=30.0,
                 max_packets=20000, tag=b"ping"):
        self.relay_addr = tuple(relay_addr)
        self.interval, self.timeout = interval, timeout
        self.max_seconds, self.max_packets = max_seconds, max_packets
        self.tag = tag
        self.lock = threading.Lock()
        self.records = []
        self.errors = []   # (t, client, repr)
        self.stray = []    # (t, client, data, src): not the answer waited for
        self.socks = []
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((LOOPBACK, 0))
            self.socks.append(s)
        self.addrs = [s.getsockname() for s in self.socks]
        self.qports = [new_qport() for _ in self.socks]
        self._stop = threading.Event()
        self.threads = []
        _register(self)

    def start(self):
        for i in range(len(self.socks)):
            t = threading.Thread(target=self._run, args=(i,), daemon=True, name=f"pinger{i}")
            t.start()
            self.threads.append(t)
        return self

    def _run(self, i):
        s = self.socks[i]
        end = time.monotonic() + self.max_seconds
        for seq in range(self.max_packets):
            if self._stop.is_set() or time.monotonic() >= end:
                break
            payload = game_packet(self.qports[i], b"%s-%d-%06d-" % (self.tag, i, seq)
                                  + os.urandom(6).hex().encode(), seq + 1)
            want = b"ECHO:" + payload
            rec = [i, seq, time.monotonic(), None]
            with self.lock:
                self.records.append(rec)
            try:
                s.sendto(payload, self.relay_addr)
            except OSError as e:
                with self.lock:
                    self.errors.append((time.monotonic(), i, repr(e)))
                time.sleep(self.interval)
                continue
            deadline = rec[2] + self.timeout
            for _ in range(1000):
                left = deadline - time.monotonic()
                if self._stop.is_set():
                    # stopped while waiting: this one is neither answered nor lost
                    with self.lock:
                        if rec[3] is None and rec in self.records:
                            self.records.remove(rec)
                    break
                if left <= 0:
                    break
                s.settimeout(min(left, 0.1))
                try:
                    data, src = s.recvfrom(MAX_DGRAM)
                except socket.timeout:
                    continue
                except OSError as e:
                    with self.lock:
                        self.errors.append((time.monotonic(), i, repr(e)))
                    time.sleep(0.005)
                    continue
                now = time.monotonic()
                if data == want and tuple(src) == self.relay_addr:
                    rec[3] = now
                    break
                with self.lock:
                    self.stray.append((now, i, data, src))
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        for t in self.threads:
            t.join(timeout=3.0)
        self.threads = []

    def close(self):
        self.stop()
        for s in self.socks:
            try:
                s.close()
            except Exception:
                pass

    def snapshot(self):
        with self.lock:
            return [list(r) for r in self.records]

    def answered(self, client=None):
        return sum(1 for r in self.snapshot() if r[3] is not None and client in (None, r[0]))

    def lost(self, sent_before=None, sent_after=None):
        """Records never answered, among those sent in the window (a packet
        still in flight counts only once its timeout has passed)."""
        now = time.monotonic()
        return [r for r in self.snapshot()
                if r[3] is None and r[2] + self.timeout <= now
                and (sent_before is None or r[2] < sent_before)
                and (sent_after is None or r[2] >= sent_after)]

    def wait_answers(self, k, timeout, what="answers"):
        """Wait until every client has k more answers than now."""
        base = [self.answered(i) for i in range(len(self.socks))]
        wait_until(lambda: all(self.answered(i) >= base[i] + k for i in range(len(self.socks))),
                   timeout, f"{k} more {what} for each of {len(self.socks)} pinging clients")

    def summary(self):
        recs = self.snapshot()
        per = []
        for i in range(len(self.socks)):
            mine = [r for r in recs if r[0] == i]
            per.append((self.addrs[i][1], len(mine), sum(1 for r in mine if r[3] is not None)))
        return ", ".join(f"client :{p} sent {s} answered {a}" for p, s, a in per)


def run_parts(ctx, parts):
    """Run part(ctx) for each part; when one fails or cannot run here
    (TestSkip), note it, kill what it left running and go on with the next,
    so that one broken behaviour does not hide the others. Fails at the end
    with every failure; with none, a part that could not run makes the whole
    test a skip (exit 77), never a pass."""
    failures, skipped = [], []
    for part in parts:
        t0 = time.monotonic()
        try:
            part(ctx)
            log(f"part {part.__name__}: {time.monotonic() - t0:.1f} s")
        except (TestFailure, TestSkip) as e:
            if isinstance(e, TestSkip):
                skipped.append(f"[{part.__name__}] {e}")
                log(f"part {part.__name__} cannot run here: {e}")
            else:
                failures.append(f"[{part.__name__}] {e}")
                log(f"part {part.__name__} FAILED: {e}")
            for o in ctx.objs:
                if isinstance(o, Pinger):
                    o.stop()
            for r in ctx.relays:
                if r.alive():
                    r.expect_exit = True
                    r.close()
    if failures:
        fail(f"{len(failures)} of {len(parts)} parts failed:\n  " + "\n  ".join(failures
                                                                           + skipped))
    if skipped:
        raise TestSkip(f"{len(skipped)} of {len(parts)} parts cannot run here (the other "
                       f"{len(parts) - len(skipped)} passed):\n  " + "\n  ".join(skipped))


def spread_ip(i):
    """The i-th of distinct loopback addresses 127.1.x.y (all of 127/8
    reaches lo on Linux): clients that must not share an IP address."""
    return f"127.1.{(i // 250) % 250}.{i % 250 + 1}"


def client_on(ctx, relay, host, timeout=2.0):
    """ctx.client(relay), but with its socket bound to host instead of
    127.0.0.1."""
    c = ctx.client(relay, timeout)
    c.sock.close()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, 0))
    s.settimeout(timeout)
    c.sock = s
    c.addr = s.getsockname()
    c.port = c.addr[1]
    return c


# --------------------------------------------------------------------------
# Abuse-resistance helpers (appended for the reflection, starvation,
# session-flood and abuse-misc tests; nothing above depends on them)

import struct as _struct  # noqa: E402


def ipv4_udp(src, dst, payload, ttl=64, ident=0):
    """An IPv4 header + UDP datagram from src (ip, port) to dst (ip, port),
    for a raw IPPROTO_RAW socket. The kernel fills in the IP checksum (and
    the id when 0); the UDP checksum is 0, "none", which IPv4 allows."""
    ulen = 8 + len(payload)
    ip = _struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, ident, 0, ttl, socket.IPPROTO_UDP, 0,
                      socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    return ip + _struct.pack("!HHHH", src[1], dst[1], ulen, 0) + payload


class RawUdp:
    """Sends UDP datagrams with any source address (IPv4, raw socket with
    IP_HDRINCL): root only, else the test is skipped. Meant for 127.0.0.0/8:
    everything stays on this machine."""

    def __init__(self, sndbuf=4 << 20):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        except PermissionError as e:
            raise TestSkip(f"a raw socket needs root (CAP_NET_RAW): {e}")
        s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        except OSError:
            pass
        self.sock = s
        self.sent = 0
        self.sent_bytes = 0   # UDP payload bytes
        self.errors = 0
        _register(self)

    def send(self, src, dst, payload):
        """One datagram; False (and counted) when the kernel refused it."""
        try:
            self.sock.sendto(ipv4_udp(src, dst, payload), (dst[0], 0))
        except OSError:
            self.errors += 1
            return False
        self.sent += 1
        self.sent_bytes += len(payload)
        return True

    def send_raw(self, packet, dst_ip, payload_len):
        """A datagram built beforehand with ipv4_udp()."""
        try:
            self.sock.sendto(packet, (dst_ip, 0))
        except OSError:
            self.errors += 1
            return False
        self.sent += 1
        self.sent_bytes += payload_len
        return True

    def close(self):
        try:
            self.sock.close()
        except Exception:
            pass


def udp_socket(host, port=0, timeout=1.0, rcvbuf=4 << 20):
    """A UDP socket bound to host:port (any 127.0.0.0/8 address works on
    Linux), with a big receive buffer; closed at exit."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    except OSError:
        pass
    s.bind((host, port))
    s.settimeout(timeout)

    class _Closer:
        def close(self_inner):
            try:
                s.close()
            except Exception:
                pass
    _register(_Closer())
    return s


def drain_socket(s, quiet=0.3, max_seconds=5.0, max_packets=1000000):
    """Read s until it stays quiet for `quiet` seconds (bounded by
    max_seconds and max_packets): [(time, data, src)]."""
    out = []
    end = time.monotonic() + max_seconds
    for _ in range(max_packets):
        left = end - time.monotonic()
        if left <= 0:
            break
        s.settimeout(min(quiet, left))
        try:
            data, src = s.recvfrom(MAX_DGRAM)
        except socket.timeout:
            break
        except OSError:
            continue
        out.append((time.monotonic(), data, src))
    return out


def get_metrics(port, token, host=LOOPBACK):
    """GET /metrics -> parse_metrics() samples; fails unless 200."""
    r = http_request(port, "GET", "/metrics", token=token, host=host)
    if r.status != 200:
        fail(f"GET /metrics: status {r.status}: {short(r.body)}")
    return parse_metrics(r.text)


def get_json(port, path, token, host=LOOPBACK):
    """GET path -> parsed JSON; fails unless 200."""
    r = http_request(port, "GET", path, token=token, host=host)
    if r.status != 200:
        fail(f"GET {path}: status {r.status}: {short(r.body)}")
    return r.json()


def drops(samples, reason):
    """etrelay_dropped_datagrams_total{reason=...} (0 when absent)."""
    return int(metric_value(samples, "etrelay_dropped_datagrams_total", reason=reason) or 0)


def closed(samples, reason):
    """etrelay_sessions_closed_total{reason=...} (0 when absent)."""
    return int(metric_value(samples, "etrelay_sessions_closed_total", reason=reason) or 0)


def counter(samples, name, **labels):
    """A sample's value as an int (0 when absent)."""
    return int(metric_value(samples, name, **labels) or 0)


def stand_in_on(cls, host, **kw):
    """A stand-in (GameServer, Master or a subclass) bound to host instead
    of 127.0.0.1, e.g. a veth address."""
    def start(self):
        self.addr = (host, self.port)
        return cls.start(self)
    return type(cls.__name__ + "On", (cls,), {"start": start})(**kw)


def ip_checksum(header):
    """The Internet checksum of an IPv4 header (checksum field zeroed)."""
    if len(header) % 2:
        header += b"\0"
    s = sum(_struct.unpack("!%dH" % (len(header) // 2), header))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff


def ether_udp(src, dst, payload, src_mac, dst_mac):
    """An Ethernet frame carrying ipv4_udp(src, dst, payload), IP checksum
    filled in: for an AF_PACKET socket, which the kernel does not touch."""
    ip = bytearray(ipv4_udp(src, dst, payload, ident=1))
    ip[10:12] = _struct.pack("!H", ip_checksum(bytes(ip[:20])))
    return dst_mac + src_mac + b"\x08\x00" + bytes(ip)


_netns_missing = None


def require_netns():
    """The path of ip(8) when network namespaces work here, else skip the
    test (exit 77). The one rule for every test that needs a namespace: it
    needs root, ip(8) (Debian: iproute2), and both `ip netns add` and `ip
    netns exec`; the latter fails in a chroot whose / is not a mount point.
    Tried once per test process, with a throwaway namespace."""
    global _netns_missing
    ipcmd = shutil.which("ip")
    if _netns_missing is None:
        _netns_missing = ""
        name = f"etrelay-probe{os.getpid()}"
        if os.geteuid() != 0:
            _netns_missing = "a network namespace needs root"
        elif not ipcmd:
            _netns_missing = "a network namespace needs ip(8) (Debian: iproute2)"
        else:
            for st in (["netns", "add", name],
                       ["netns", "exec", name, ipcmd, "link", "show", "lo"]):
                r = subprocess.run([ipcmd] + st, capture_output=True, text=True, timeout=10)
                if r.returncode:
                    _netns_missing = (f"no network namespaces here: ip {' '.join(st[:2])}: "
                                      f"{(r.stderr or r.stdout).strip()}")
                    break
            subprocess.run([ipcmd, "netns", "del", name], capture_output=True, timeout=10)
    if _netns_missing:
        raise TestSkip(_netns_missing)
    return ipcmd


class VethNetns:
    """A network namespace joined to this one by a veth pair:
    host side `host_ip`/24, namespace side `ns_ip`/24. wrapper() is the
    argv prefix that runs a command inside. close() deletes the namespace
    (and with it the pair). Raises TestSkip when it cannot be built (not
    root, no ip(8), no namespaces)."""

    def __init__(self, sysctls=()):
        ipcmd = require_netns()
        if sysctls:
            require_tool("sysctl")
        tag = f"{os.getpid() % 100000}{random.randrange(100)}"
        self.ip = ipcmd
        self.name = f"etrelay-t{tag}"
        self.host_if, self.ns_if = f"etrh{tag}", f"etrn{tag}"
        used = subprocess.run([ipcmd, "-4", "addr"], capture_output=True, text=True).stdout
        for _ in range(50):
            octet = random.randrange(1, 250)
            if f"10.213.{octet}." not in used:
                break
        self.host_ip, self.ns_ip = f"10.213.{octet}.1", f"10.213.{octet}.2"
        self.created = False
        _register(self)
        steps = [
            ["netns", "add", self.name],
            ["link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if],
            ["link", "set", self.ns_if, "netns", self.name],
            ["addr", "add", f"{self.host_ip}/24", "dev", self.host_if],
            ["link", "set", self.host_if, "up"],
            ["-n", self.name, "addr", "add", f"{self.ns_ip}/24", "dev", self.ns_if],
            ["-n", self.name, "link", "set", self.ns_if, "up"],
        ]
        for i, st in enumerate(steps):
            r = subprocess.run([ipcmd] + st, capture_output=True, text=True, timeout=10)
            if i == 0 and r.returncode == 0:
                self.created = True
            if r.returncode != 0:
                self.close()
                raise TestSkip(f"ip {' '.join(st)}: {r.stderr.strip()}")
        for key, val in sysctls:
            key = key.replace("{ns_if}", self.ns_if)
            r = subprocess.run(self.wrapper() + ["sysctl", "-q", "-w", f"{key}={val}"],
                               capture_output=True, text=True, timeout=10)
            if r.returncode != 0:
                self.close()
                raise TestSkip(f"sysctl {key}={val} in {self.name}: {r.stderr.strip()}")
        with open(f"/sys/class/net/{self.host_if}/address") as f:
            self.host_mac = bytes.fromhex(f.read().strip().replace(":", ""))
        r = subprocess.run(self.wrapper() + ["cat", f"/sys/class/net/{self.ns_if}/address"],
                           capture_output=True, text=True, timeout=10)
        self.ns_mac = bytes.fromhex(r.stdout.strip().replace(":", ""))
        # the namespace side answers ARP at once; give the link a moment
        wait_until(lambda: open(f"/sys/class/net/{self.host_if}/operstate").read().strip() == "up",
                   5, f"{self.host_if} up")

    def wrapper(self):
        return [self.ip, "netns", "exec", self.name]

    def send_frame(self, frame):
        """Put an Ethernet frame on the host side of the pair."""
        p = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        try:
            p.bind((self.host_if, 0))
            p.send(frame)
        finally:
            p.close()

    def close(self):
        if self.created:
            subprocess.run([self.ip, "netns", "del", self.name], capture_output=True, timeout=10)
            self.created = False


# --------------------------------------------------------------------------
# Workers (appended for test_workers and the tests that must know which
# worker a client lands on)

WORKERS_RE = r"^workers (\d+): a client's address picks its worker \(reuseport key 0x([0-9a-f]{8})\)"


def reuseport_worker(key, ip, workers, steer=()):
    """reuseport_pick() of src/core/reuseport.c for an IPv4 address: the worker
    etrelay's reuseport program sends ip's datagrams to (addresses in steer,
    the masters', go to worker 0)."""
    if workers <= 1 or ip in steer:
        return 0
    h = int.from_bytes(socket.inet_aton(ip), "big")
    h = (h * key) & 0xffffffff
    h ^= h >> 16
    h = (h * key) & 0xffffffff
    h >>= 16
    return h % workers


def relay_workers(relay):
    """(workers, key) from a started relay's log; (1, 0) without the line."""
    m = relay.find_lines(WORKERS_RE)
    if not m:
        return 1, 0
    return int(m[0][1].group(1)), int(m[0][1].group(2), 16)


# --------------------------------------------------------------------------
# A stand-in control plane (appended for the control-plane tests): Python's
# http.server on 127.0.0.1, recording every request, answering as scripted.

import http.server as _http_server  # noqa: E402
import urllib.parse as _urlparse  # noqa: E402
import json as _json  # noqa: E402

CONTROL_ENROLL = "/etrelay.v1.RelayEnrollmentService/Enroll"
CONTROL_HEARTBEAT = "/etrelay.v1.RelayService/Heartbeat"
CONTROL_RELAY_ID = "relay-7"
CONTROL_API_TOKEN = "api-" + "a" * 40
# libcurl honours the proxy variables; the stand-in is on loopback.
CONTROL_NO_PROXY = {"no_proxy": "*", "NO_PROXY": "*", "http_proxy": None, "HTTP_PROXY": None,
                    "https_proxy": None, "HTTPS_PROXY": None, "all_proxy": None,
                    "ALL_PROXY": None, "ETRELAY_CONTROL_TOKEN": None,
                    "ETRELAY_CONTROL_TOKEN_FILE": None}


class ControlPlane:
    """The stand-in. enroll and heartbeat are the scripted answers:
    "ok", a status number, "hang" (answered after hang seconds, longer
    than the client waits), "bad_json", "bad_route", "redirect" (a 307
    to location), or "huge" (huge_bytes of valid JSON, every value an
    empty object, with status huge_status, framed as huge_framing: "length"
    (Content-Length), "chunked" or "close" (neither: the body ends with the
    connection), streamed). routes is the set a good heartbeat is answered
    with (dicts as the JSON has them)."""

    def __init__(self, hang=2.5):
        self.lock = threading.Lock()
        self.requests = []  # (monotonic time, path, headers, body)
        self.enroll = "ok"
        self.heartbeat = "ok"
        self.routes = []
        self.stop = threading.Event()
        self.hang = hang
        self.location = None
        self.huge_bytes = 64 << 20
        self.huge_status = 200
        self.huge_framing = "length"
        cp = self

        class Handler(_http_server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                t = time.monotonic()
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                # a proxy's request line names the whole URL
                path = _urlparse.urlsplit(self.path).path
                with cp.lock:
                    cp.requests.append((t, self.path, dict(self.headers), body))
                    mode = cp.enroll if path == CONTROL_ENROLL else cp.heartbeat
                    location = cp.location
                    sets = list(cp.routes)
                    huge = (cp.huge_bytes, cp.huge_status, cp.huge_framing)
                if mode == "hang":
                    cp.stop.wait(cp.hang)
                    mode = "ok"
                if mode == "ok" and path == CONTROL_ENROLL:
                    self.answer(200, {"relayId": CONTROL_RELAY_ID, "apiToken": CONTROL_API_TOKEN})
                elif mode == "ok" and path == CONTROL_HEARTBEAT:
                    self.answer(200, {"sniRoutes": sets, "unknownField": {"x": 1}})
                elif mode == "redirect":
                    try:
                        self.send_response(307)
                        self.send_header("Location", location)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                    except OSError:
                        pass
                elif mode == "huge":
                    self.stream_huge(*huge)
                elif mode == "bad_json":
                    self.answer(200, b'{"sniRoutes": [')
                elif mode == "bad_route":
                    self.answer(200, {"sniRoutes": [
                        {"name": "svc0.example.com", "upstream": "10.0.0.1:443"},
                        {"name": "bad.example.com", "upstream": "backend.internal:443"}]})
                else:
                    self.answer(int(mode), {"code": "unavailable", "message": "scripted"})

            def stream_huge(self, size, status, framing):
                head = b'{"sniRoutes":[],"x":['
                piece = b"{}," * 21845  # 65535 bytes
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    if framing == "length":
                        self.send_header("Content-Length", str(size))
                    elif framing == "chunked":
                        self.send_header("Transfer-Encoding", "chunked")
                    else:
                        self.send_header("Connection", "close")
                        self.close_connection = True
                    self.end_headers()

                    def out(b):
                        if framing == "chunked":
                            self.wfile.write(b"%x\r\n" % len(b) + b + b"\r\n")
                        else:
                            self.wfile.write(b)
                    out(head)
                    left = size - len(head) - 3
                    while left > 0 and not cp.stop.is_set():
                        b = piece[:left - left % 3] if left < len(piece) else piece
                        b = b or b" " * left
                        out(b)
                        left -= len(b)
                    out(b"0]}")
                    if framing == "chunked":
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass  # the client cut it off

            def answer(self, status, obj):
                data = obj if isinstance(obj, bytes) else _json.dumps(obj).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (a hang past its timeout)

        # a drawn port below the ephemeral range (bind(0) would hand out
        # one a client socket of a test beside this one may take next)
        for attempt in range(20):
            try:
                self.server = _http_server.ThreadingHTTPServer((LOOPBACK, free_tcp_port()),
                                                               Handler)
                break
            except OSError:
                if attempt == 19:
                    raise
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def set(self, **kw):
        with self.lock:
            for k, v in kw.items():
                setattr(self, k, v)

    def of(self, path):
        with self.lock:
            return [r for r in self.requests if r[1] == path]

    def close(self):
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def control_plane(ctx):
    cp = ControlPlane()
    ctx.objs.append(cp)
    return cp


def control_plane(ctx, **kw):
    """A ControlPlane(**kw), closed with ctx."""
    cp = ControlPlane(**kw)
    ctx.objs.append(cp)
    return cp
