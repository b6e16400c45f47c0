# SPDX-License-Identifier: ISC
"""Ports for the tests, all below the kernel's ephemeral range: drawn
(free_udp_port, free_tcp_port, free_udp_tcp_port, free_udp_range,
turn_ports), reserved across test processes by a lock file, the
run-time check of an etrelay command line or configuration file
(check_ports), and of the test's own listening sockets (socket.listen
refuses a port the kernel picked: a socket bound to port 0, or to none)."""

import fcntl
import os
import random
import re
import socket
import tempfile
import threading

from harness_base import LOOPBACK, fail


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
    the dynamic range, lies in the ephemeral range), and --turn-max-allocations n
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
    no -t), for a TURN listener on the default relayed ports (IANA's dynamic range):
    any client socket of any program may sit there ('bind 127.0.0.1:PORT:
    Address already in use' in a loaded suite). Draw them with the helpers
    above (free_udp_port, free_tcp_port, free_udp_range, turn_ports)."""
    found, unranged = _port_settings(args)
    e_lo, e_hi = _ephemeral_range()
    bad = [w for w, lo, hi in found if lo <= e_hi and e_lo <= hi]
    if starts and "-t" not in [str(a) for a in args]:
        bad += [f"{w} without relayed ports (the default: the dynamic range)"
                for w in unranged]
    if bad:
        fail(f"a port in the ephemeral range {e_lo}-{e_hi} (net.ipv4.ip_local_port_range): "
             f"{'; '.join(bad)}: draw it with the harness (free_udp_port, free_tcp_port, "
             f"free_udp_range, turn_ports)")


_socket_listen = socket.socket.listen


def _listen_below_ephemeral(self, *backlog):
    """socket.listen for the tests: a listening socket of a test (or of
    a peer the test runs in its own process) must sit on a drawn port,
    below the ephemeral range. Bound to port 0, or not bound at all, it
    gets an ephemeral port that the next client socket of any program may
    already hold; refused before it listens."""
    if self.family in (socket.AF_INET, socket.AF_INET6):
        port = self.getsockname()[1]
        e_lo, e_hi = _ephemeral_range()
        if port == 0 or e_lo <= port <= e_hi:
            where = "a port the kernel picks (port 0)" if port == 0 else port
            fail(f"a listening socket on {where}, in the ephemeral range {e_lo}-{e_hi}: "
                 f"bind it to a drawn port (free_tcp_port, or tlsutil.TcpServer)")
    return _socket_listen(self, *backlog)


socket.socket.listen = _listen_below_ephemeral


def free_tcp_port(host=LOOPBACK):
    """A TCP port on host that was free a moment ago (see _free_port)."""
    return _free_port((socket.SOCK_STREAM,), host)
