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

The helpers live in modules by subject, and this module re-exports them
all, so that a test imports this one alone (``import harness as H``):

    harness_base      constants, settings from the environment, the
                      registry of what was started, assertions, waiting
    harness_ports     ports below the ephemeral range, check_ports
    harness_q3        the game's packets (cmd, game_packet, parse_info)
    harness_standins  game server, master, silent DNS, game client
    harness_relay     the etrelay process (Relay), its environment and
                      wrappers, one-shot runs, workers
    harness_http      the ops plane over HTTP, the metrics page
    harness_udp       pingers, client sockets, raw IPv4/Ethernet frames
    harness_netns     network namespaces (VethNetns)
    harness_control   a stand-in control plane

This module itself holds the test's context (Ctx) and main().
"""

import os
import shutil
import signal
import sys
import tempfile
import time
import traceback

from harness_base import (CHECKER_ERRORS, EXIT_FAIL, EXIT_PASS, EXIT_SKIP, TestFailure, TestSkip,
    WRAPPER, _kill_everything, fail, log)
from harness_standins import Client, GameServer, Master, SilentDns
from harness_relay import OPEN_LIMITS, Relay

# Everything the tests use, under harness's name (star imports: the
# modules' public names; the rest by name).
from harness_base import *  # noqa: F401,F403
from harness_base import _kill_everything, _register  # noqa: F401
from harness_ports import *  # noqa: F401,F403
from harness_q3 import *  # noqa: F401,F403
from harness_standins import *  # noqa: F401,F403
from harness_standins import _UdpThread  # noqa: F401
from harness_relay import *  # noqa: F401,F403
from harness_http import *  # noqa: F401,F403
from harness_http import _http_client  # noqa: F401
from harness_udp import *  # noqa: F401,F403
from harness_netns import *  # noqa: F401,F403
from harness_control import *  # noqa: F401,F403


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
