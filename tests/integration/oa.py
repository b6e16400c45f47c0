# SPDX-License-Identifier: ISC
"""A real game server for the integration tests: openarena-server (ioquake3,
protocol 71) on loopback with a temporary HOME (OpenArena), waiting for it
to answer getinfo (OpenArena.wait_ready), its console log (packets_logged),
and qstat pointed at an address (find_qstat, run_qstat).

OpenArena facts these helpers rely on (measured on ioq3 1.36, Debian):
  - ready (answers getinfo) about 0.3 s after start; the socket is bound
    before the map loads, so readiness is polled with getinfo;
  - +set dedicated 1 never heartbeats (only dedicated 2 does) and
    sv_master1..5 are emptied as well: nothing leaves the box;
  - +set net_enabled 1: IPv4 only (no [::] socket);
  - getinfo is rate-limited per source IP, port ignored (measured: burst
    10, then 1 per second; ioq3's sv_main.c shares that bucket with
    getstatus and getchallenge and adds a global 10 per 100 ms): every packet
    the relay forwards comes from 127.0.0.1, so this test sends its own
    direct readiness probes from 127.0.0.2 and keeps the run short;
  - +set developer 1 logs "SV packet <ip> : <command>" for every
    connectionless packet (IP without port), unbuffered on stdout.
"""

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import harness as H

OA_SERVER = "/usr/games/openarena-server"
QSTAT_PATHS = ("/usr/bin/quakestat", "/usr/bin/qstat")
OA_MAP = "oasago2"          # in pak1-maps.pk3 (and pak6-patch088.pk3)
PROBE_SRC = "127.0.0.2"     # direct probes: a rate-limit bucket of their own


def _die_with_parent():
    """preexec_fn: the game server gets SIGKILL if this script dies without
    running its cleanup (SIGKILL of the test runner). The Debian wrapper
    execs the engine, so the setting reaches ioq3ded itself."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def find_qstat():
    for p in QSTAT_PATHS:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return shutil.which("quakestat") or shutil.which("qstat")


class OpenArena:
    """openarena-server on 127.0.0.1:<port> (or ip), HOME in a temp dir,
    console output in a log file that the test reads while it runs; extra:
    more "+set" arguments, before the map."""

    def __init__(self, port, hostname, ip=H.LOOPBACK, extra=()):
        self.port = port
        self.addr = (ip, port)
        self.hostname = hostname
        self.tmp = tempfile.mkdtemp(prefix="etrelay-oa-")
        self.home = os.path.join(self.tmp, "home")
        os.mkdir(self.home)
        self.logpath = os.path.join(self.tmp, "openarena.log")
        self.cmd = [
            OA_SERVER,
            "+set", "dedicated", "1",        # 1 = LAN: never heartbeats
            "+set", "net_enabled", "1",      # IPv4 only
            "+set", "net_ip", ip,
            "+set", "net_port", str(port),
            "+set", "sv_master1", "",        # the wrapper sets dpmaster.deathmask.net
            "+set", "sv_master2", "",
            "+set", "sv_master3", "",
            "+set", "sv_master4", "",
            "+set", "sv_master5", "",
            "+set", "sv_hostname", hostname,
            "+set", "developer", "1",        # "SV packet <ip> : <cmd>" lines
            "+set", "com_hunkMegs", "64",
            *extra,
            "+map", OA_MAP,
        ]
        env = dict(os.environ)
        env["HOME"] = self.home
        env.pop("DISPLAY", None)
        self.logf = open(self.logpath, "wb")
        self.proc = subprocess.Popen(self.cmd, env=env, cwd=self.tmp,
                                     stdin=subprocess.DEVNULL, stdout=self.logf,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=_die_with_parent)
        H._register(self)

    def alive(self):
        return self.proc.poll() is None

    def log_lines(self):
        try:
            with open(self.logpath, "r", encoding="latin-1") as f:
                return f.read().splitlines()
        except OSError:
            return []

    def packets_logged(self, ip, command):
        """Number of 'SV packet <ip> : <command>' lines so far."""
        rx = re.compile(r"^SV packet " + re.escape(ip) + r" : " + re.escape(command) + r"\b")
        return sum(1 for l in self.log_lines() if rx.search(l))

    def wait_ready(self, timeout=20.0):
        """Poll with getinfo from PROBE_SRC until the server answers with the
        challenge echoed. Returns the parsed infoResponse."""
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((PROBE_SRC, 0))
        except OSError:
            s.close()
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((H.LOOPBACK, 0))
        deadline = time.monotonic() + timeout
        try:
            for n in range(int(timeout / 0.3) + 2):
                if not self.alive():
                    H.fail(f"openarena-server exited with status {self.proc.returncode} "
                           f"before answering getinfo")
                ch = f"ready{n}x{H.rand_token(6)}"
                s.sendto(H.cmd(f"getinfo {ch}"), self.addr)
                end = min(deadline, time.monotonic() + 0.3)
                while time.monotonic() < end:
                    s.settimeout(max(0.01, end - time.monotonic()))
                    try:
                        data, src = s.recvfrom(H.MAX_DGRAM)
                    except (socket.timeout, ConnectionRefusedError):
                        continue
                    word, rest = H.split_command(data)
                    if word == "infoResponse":
                        info = H.parse_info(rest.strip())
                        if info.get("challenge") == ch:
                            return info
                if time.monotonic() >= deadline:
                    break
            H.fail(f"openarena-server did not answer getinfo on {self.addr} within {timeout:g} s")
        finally:
            s.close()

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                try:
                    self.proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    pass
        try:
            self.logf.close()
        except Exception:
            pass

    def dump(self, n=25):
        lines = self.log_lines()
        rc = self.proc.poll()
        print(f"--- openarena-server: {' '.join(self.cmd)}")
        print(f"--- status: {'running' if rc is None else rc}; HOME={self.home}; "
              f"last {n} of {len(lines)} log lines:")
        for l in lines[-n:]:
            print("    " + l)

    def remove_tmp(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def run_qstat(qstat, args, target, srcport, timeout=15.0):
    c = [qstat] + args + ["-retry", "3", "-interval", "0.5", "-timeout", "5",
                          "-srcport", str(srcport), "-q3s", f"{target[0]}:{target[1]}"]
    try:
        r = subprocess.run(c, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        H.fail(f"{' '.join(c)} did not finish within {timeout:g} s")
    H.log(f"$ {' '.join(c)} -> {r.returncode}")
    out = r.stdout.strip().splitlines()
    for l in out[:16]:
        H.log("    " + l)
    if len(out) > 16:
        H.log(f"    ... ({len(out) - 16} more lines)")
    if r.stderr.strip():
        H.log("    stderr: " + r.stderr.strip())
    return r
