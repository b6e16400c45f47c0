#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Command line: every bad value exits 64 with one stderr line naming the
flag and the value; --version and --help; a valid command line starts."""

import os
import re
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

FLAGS = ["--listen", "--upstream", "--master", "--game", "--heartbeat", "--flatline",
         "--heartbeat-interval", "--session-timeout", "--probe-timeout", "--max-sessions",
         "--backend", "--debug", "--help", "--version", "-h", "-V"]


def run(ctx, args):
    cmd = [ctx.binary] + args
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=5)
    except subprocess.TimeoutExpired:
        H.fail(f"{' '.join(cmd)}: still running after 5 s (expected it to exit at once)")
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def test(ctx):
    up = f"127.0.0.1:{H.free_udp_port()}"
    base = {"--listen": f"127.0.0.1:{H.free_udp_port()}", "--upstream": up,
            "--master": f"127.0.0.1:{H.free_udp_port()}", "--backend": ctx.backend}

    def argv(overrides=None, drop=(), extra=()):
        d = dict(base)
        d.update(overrides or {})
        out = []
        for k, v in d.items():
            if k not in drop:
                out += [k, v]
        return out + list(extra)

    cases = [
        # (description, argv, words the error line must contain)
        ("--listen nope", argv({"--listen": "nope"}), ["--listen", "'nope'"]),
        ("--listen 1.2.3.4:99999", argv({"--listen": "1.2.3.4:99999"}), ["--listen", "'1.2.3.4:99999'"]),
        ("--session-timeout abc", argv(extra=["--session-timeout", "abc"]), ["--session-timeout", "'abc'"]),
        ("--session-timeout 0", argv(extra=["--session-timeout", "0"]), ["--session-timeout", "'0'"]),
        ("--heartbeat-interval -1", argv(extra=["--heartbeat-interval", "-1"]),
         ["--heartbeat-interval", "'-1'"]),
        ("--game quake9", argv(extra=["--game", "quake9"]), ["--game", "'quake9'"]),
        ("--heartbeat of 64 characters", argv(extra=["--heartbeat", "h" * 64]),
         ["--heartbeat", "at most 63 printable characters"]),
        ("--backend foo", argv({"--backend": "foo"}), ["--backend", "'foo'"]),
        ("--max-sessions 0", argv(extra=["--max-sessions", "0"]), ["--max-sessions", "'0'"]),
        ("missing --upstream", argv(drop=["--upstream"]), ["--upstream"]),
        ("--frobnicate", argv(extra=["--frobnicate"]), ["--frobnicate"]),
    ]
    problems = []
    for desc, args, words in cases:
        rc, out, err = run(ctx, args)
        lines = [l for l in err.splitlines() if l.strip()]
        what = f"{desc}: etrelay {' '.join(args)}"
        if rc != 64:
            problems.append(f"{what}\n    expected exit 64, seen {rc}; stderr {err.strip()[:300]!r}")
            continue
        if len(lines) != 1:
            problems.append(f"{what}\n    expected one stderr line, seen {len(lines)}: {lines[:6]}")
            continue
        missing = [w for w in words if w not in lines[0]]
        if missing:
            problems.append(f"{what}\n    stderr line {lines[0]!r} does not contain {missing}")
        elif not lines[0].startswith("etrelay: "):
            problems.append(f"{what}\n    stderr line {lines[0]!r} does not start with 'etrelay: '")
        else:
            H.log(f"ok  {desc}: {lines[0]}")

    for flag in ("--version", "-V"):
        rc, out, err = run(ctx, [flag])
        first = out.splitlines()[0] if out.splitlines() else ""
        if rc != 0 or first != "etrelay 0.1.0":
            problems.append(f"etrelay {flag}\n    expected exit 0 and stdout 'etrelay 0.1.0', "
                            f"seen exit {rc}, stdout {out[:200]!r}, stderr {err[:200]!r}")
    for flag in ("--help", "-h"):
        rc, out, err = run(ctx, [flag])
        missing = [f for f in FLAGS if f not in out]
        if rc != 0 or missing:
            problems.append(f"etrelay {flag}\n    expected exit 0 and every flag on stdout; seen "
                            f"exit {rc}, missing {missing}, stderr {err[:200]!r}")
        # every exit status, each on a line of its own after "Exit status:"
        # (1 includes a failed -t --probe)
        tail = out.partition("\nExit status:\n")[2]
        codes = {m.group(1): m.group(2) for m in re.finditer(r"^ +(\d+) +(.*)$", tail, re.M)}
        if sorted(codes, key=int) != ["0", "1", "64", "69", "78"] or "--probe" not in codes["1"]:
            problems.append(f"etrelay {flag}\n    expected an 'Exit status:' list of 0, 1 (with "
                            f"-t --probe), 64, 69, 78; seen {codes}")
    if problems:
        H.fail(f"{len(problems)} command-line checks failed:\n  " + "\n  ".join(problems))

    # too few file descriptors: the message names what needs them (here SNI
    # connections and an echo port, no relay) and the settings that fix it
    ulimit = ["sh", "-c", 'ulimit -n 200 && exec "$@"', "sh"]
    sni_only = ["--sni-listen", f"127.0.0.1:{H.free_tcp_port()}", "--sni-route",
                "a.test=127.0.0.1:9", "--prbe-listen", f"127.0.0.1:{H.free_udp_port()}",
                "--backend", ctx.backend, "--log-time", "no"]
    rc, out, err = H.run_etrelay(ctx, sni_only, wrapper=ulimit)
    H.expect_eq(rc, 78, f"exit status with 200 file descriptors (stderr {err.strip()!r})")
    for words in ("SNI listeners' connections", "echo ports", "limit is 200",
                  "LimitNOFILE", "ulimit -n", "lower max-connections"):
        H.check(words in err, f"the file-descriptor message names {words!r}: {err.strip()!r}")
    H.check("relay" not in err and "max-sessions" not in err,
            f"the file-descriptor message of a process without relays: {err.strip()!r}")
    rc, out, err = H.run_etrelay(ctx, argv(), wrapper=ulimit)
    H.expect_eq(rc, 78, f"a relay's exit status with 200 file descriptors ({err.strip()!r})")
    H.check("relays' sessions" in err and "lower max-sessions" in err,
            f"the file-descriptor message of a relay: {err.strip()!r}")

    # a TURN listener: counted as TURN (not echo ports), its own knobs
    # named, and -t refuses what the start refuses
    # the listener's port outside the relayed ports (a start refuses a
    # listener inside them, exit 64, before the descriptor check)
    lport = next(p for p in (H.free_udp_port() for _ in range(50)) if not 20000 <= p <= 20099)
    turn = ["--turn-listen", f"127.0.0.1:{lport}", "--turn-tcp-listen",
            f"127.0.0.1:{H.free_tcp_port()}", "--turn-ports", "20000-20099",
            "--turn-max-allocations", "100", "--backend", ctx.backend, "--log-time", "no"]
    tenv = {"ETRELAY_TURN_SECRET": "s" * 40}
    for t in ([], ["-t"]):
        rc, out, err = H.run_etrelay(ctx, t + turn, env=tenv, wrapper=ulimit)
        # -t refuses as a start does (naming the unit's LimitNOFILE=)
        H.expect_eq(rc, 78, f"a TURN listener's {' '.join(t)} exit status with "
                    f"200 file descriptors (stdout {out.strip()!r}, stderr {err.strip()!r})")
        for words in ("TURN listeners' allocations and TCP connections", "max-allocations",
                      "tcp-max-connections"):
            H.check(words in err, f"the TURN file-descriptor message names {words!r}: "
                    f"{err.strip()!r}")
        H.check("echo ports" not in err and "max-sessions" not in err,
                f"the file-descriptor message of a TURN-only process: {err.strip()!r}")

    # tcp-max-connections is the listener's total: what -t counts does not
    # grow with the workers beyond a dozen descriptors each (a config checked
    # on 2 CPUs must start on 64 under the unit's LimitNOFILE)
    need = {}
    for w in (1, 2, 16, 64):
        rc, out, err = H.run_etrelay(ctx, ["-t", "--workers", str(w)] + turn, env=tenv,
                                     wrapper=ulimit)
        m = re.search(r"needs (\d+) file descriptors", err)
        H.check(rc == 78 and m, f"-t --workers {w} with a TURN TCP listener: exit {rc}, "
                f"{err.strip()!r}")
        need[w] = int(m.group(1))
    H.check(need[64] - need[1] <= 63 * 12,
            f"file descriptors -t counts grow with the workers by more than 12 each (TURN "
            f"tcp-max-connections 4096 is the listener's total): {need}")

    # -t counts in words: one route, two routes
    sni = ["-t", "--sni-listen", f"127.0.0.1:{H.free_tcp_port()}", "--sni-route",
           "a.test=127.0.0.1:9"]
    rc, out, err = H.run_etrelay(ctx, sni)
    H.expect_eq(rc, 0, f"-t with one SNI route (stderr {err.strip()!r})")
    H.check(", 1 route, " in out, f"-t with one SNI route says '1 route': {out!r}")
    rc, out, err = H.run_etrelay(ctx, sni + ["--sni-route", "b.test=127.0.0.1:9"])
    H.expect_eq(rc, 0, f"-t with two SNI routes (stderr {err.strip()!r})")
    H.check(", 2 routes, " in out, f"-t with two SNI routes says '2 routes': {out!r}")

    privileged_port_hint(ctx, up)

    # positive control: the same base with valid durations in every unit starts
    relay = ctx.relay("--upstream", up, "--master", base["--master"],
                      "--session-timeout", "500ms", "--heartbeat-interval", "1h",
                      "--probe-timeout", "5m", "--max-sessions", "10")
    relay.signal(signal.SIGTERM)
    rc = relay.wait_exit(2.0)
    H.expect_eq(rc, 0, "exit status of a valid relay after SIGTERM")


HINT = "needs CAP_NET_BIND_SERVICE: run etrelay from the systemd unit in contrib/"


def privileged_port_hint(ctx, up):
    """Every listener (game, SNI, PRBE echo, ops) that may not bind its port
    below ip_unprivileged_port_start says how to get it, not only
    "Permission denied". Run as nobody when the test runs as root."""
    with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as f:
        start = int(f.read())
    if start == 0:
        print("note: net.ipv4.ip_unprivileged_port_start is 0: no port is privileged, "
              "no bind can fail with EACCES; the hint is not checked here")
        return
    port = 443 if start > 443 else start - 1
    wrapper = ()
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")  # util-linux, which Debian always has
        H.check(setpriv, "setpriv (util-linux) not found: cannot drop root for the test")
        wrapper = (setpriv, "--reuid=65534", "--regid=65534",
                   "--clear-groups", "--inh-caps=-all", "--bounding-set=-all")
    free = f"127.0.0.1:{H.free_udp_port()}"
    cases = {
        "relay": ["--upstream", up, "--listen", f"127.0.0.1:{port}"],
        "sni": ["--sni-listen", f"127.0.0.1:{port}"],
        "prbe-listen": ["--upstream", up, "--listen", free, "--prbe-listen", f"127.0.0.1:{port}"],
        "ops": ["--upstream", up, "--listen", free, "--ops-listen", f"127.0.0.1:{port}"],
    }
    for name, args in cases.items():
        rc, _, err = H.run_etrelay(ctx, ["--backend", ctx.backend, "--master", up] + args,
                                   timeout=10.0, wrapper=wrapper)
        H.check(rc != 0 and "Permission denied" in err and HINT in err,
                f"{name} on port {port} as an unprivileged user: expected a failed start "
                f"with the CAP_NET_BIND_SERVICE hint, seen exit {rc}, stderr {err[-400:]!r}")


if __name__ == "__main__":
    H.main(test)
