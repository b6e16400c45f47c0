# SPDX-License-Identifier: ISC
"""Basics every harness module and test uses: constants (LOOPBACK, MAX_DGRAM,
the exit codes), the settings from the environment (ETRELAY_WRAPPER,
ETRELAY_SLOW, ETRELAY_TEST_WORKERS), the registry of everything started
(killed at exit whatever happens), the test's exceptions, assertions and
bounded waiting, log()."""

import atexit
import os
import random
import shlex
import shutil
import string
import subprocess
import threading
import time


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
# "yes" or "no": every etrelay a test starts with -c gets `splice KEY` in
# each [sni] section of its config (tests/meson.build runs the SNI tests
# again with splice yes). Unset: the file as the test wrote it.
SNI_SPLICE = os.environ.get("ETRELAY_TEST_SNI_SPLICE", "")


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


def rand_token(n=10):
    return "".join(random.choice(string.ascii_letters + string.digits) for _ in range(n))


def log(*a):
    print("[test]", *a, flush=True)


def require_tool(name):
    """Path of an external program, or skip the test (exit 77)."""
    p = shutil.which(name)
    if not p:
        raise TestSkip(f"{name} is not installed")
    return p
