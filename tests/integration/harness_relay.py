# SPDX-License-Identifier: ISC
"""The etrelay process: Relay (one running etrelay, its log read by
threads), the abuse limits opened up for loopback tests (OPEN_LIMITS),
the child environment without tokens (child_env, relay_env), wrappers
that keep name lookups on the host (hosts_file_wrapper,
slow_dns_wrapper), one-shot runs (run_etrelay, run_with_journal_stream),
its memory (rss_kib) and which worker a client lands on
(reuseport_worker, relay_workers)."""

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

from harness_base import (CHECKER_ERRORS, CHECKER_STATUS, LOOPBACK, SLOW, SNI_SPLICE, TestSkip, WORKERS,
    WRAPPER, _register, check, fail)
from harness_ports import check_ports, free_udp_port


# Abuse limits opened up for tests where every client is 127.0.0.1.
OPEN_LIMITS = ("--sessions-per-ip", "100000", "--ip-query-burst", "100000",
               "--ip-query-rate", "100000", "--server-query-burst", "100000",
               "--server-query-rate", "100000", "--query-cache", "0",
               "--ip-session-rate", "100000", "--session-rate", "100000")


def _splice_nofile():
    """In the child of a relay whose config sni_splice_args rewrote: room
    for the pipes (4 more descriptors a connection: 26 737 at the default
    max-connections, over a CI's 20 000), the unit's LimitNOFILE=65536,
    where the test may raise it (root); else the start says what it needs."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 65536:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (65536, 65536))
        except (ValueError, OSError):
            pass


def sni_splice_args(args):
    """args with -c FILE pointing at a copy of FILE whose [sni] sections say
    `splice SNI_SPLICE` (when the variant sets it), else args."""
    if SNI_SPLICE not in ("yes", "no") or "-c" not in args:
        return args
    i = args.index("-c") + 1
    with open(args[i]) as f:
        text = f.read()
    if not re.search(r"^\[sni ", text, re.M):
        return args
    text = re.sub(r"^(\[sni [^\]]*\][^\n]*\n)", rf"\1splice {SNI_SPLICE}\n", text, flags=re.M)
    path = args[i] + ".splice-" + SNI_SPLICE
    with open(path, "w") as f:
        f.write(text)
    return args[:i] + [path] + args[i + 1:]


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
        spliced = sni_splice_args(list(args))
        self.cmd += spliced
        check_ports(self.cmd[len(wrapper) + len(WRAPPER) + 1:])
        self.lines = []      # (monotonic time, line) from stderr
        self.out_lines = []  # stdout
        self.cond = threading.Condition()
        self.eof = False
        self.expect_exit = False
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                     preexec_fn=_splice_nofile if spliced != list(args) else None,
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

TOKEN_VARS = ("ETRELAY_LIFECYCLE_TOKEN", "ETRELAY_LIFECYCLE_READ_TOKEN", "ETRELAY_METRICS_TOKEN")
_CHILD_SCRUB = TOKEN_VARS + tuple(v + "_FILE" for v in TOKEN_VARS) + (
    "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM")
_env_lock = threading.Lock()


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
