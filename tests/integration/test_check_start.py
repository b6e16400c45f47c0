#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""-t says what a start will say, and one rule for exit statuses.

- file descriptors: under a hard RLIMIT_NOFILE of 200, a configuration
  that needs more is refused by -t (exit 78, naming the unit's
  LimitNOFILE=) as by a start (78); -t only warned and exited 0.
- control-bootstrap-token-file of mode 0644, or of 5 bytes: -t refuses it
  (78) with the start's message, as it does an ops-token or TURN-secret
  file; -t said "valid" and the start exited 78.
- a port in use is exit 1 for every listener (relay, SNI, TURN, echo and
  ops-listen; ops-listen was 78), a fault of the configuration 78.
- an SNI route in the configuration to the ops listener: -t and a start
  refuse it (78), as a control-plane route there is; both accepted it.
- a listen address that is not this host's: -t warns, naming the listener
  (it may check a file for another host), where it said nothing; a start
  exits 1 on it.
- [tunnel] (attack round 15, F5): a wrong top-level wg-interface is one
  error at its line (it was followed by "tunnel: wg-interface: missing"
  with no line); session-ports holding the WireGuard port name the port's
  line too; of an interface given twice the last holds, and -t names its
  line (it named the section's)."""

import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

BOOTSTRAP = "boot-" + "b" * 40


def nofile(ctx):
    prlimit = H.require_tool("prlimit")
    wrapper = [prlimit, "--nofile=200:200"]
    args = ["--listen", f"127.0.0.1:{H.free_udp_port()}", "--upstream", "127.0.0.1:9",
            "--master", "127.0.0.1:9", "--backend", ctx.backend, "--max-sessions", "5000",
            "--log-time", "no"]
    got = {}
    for t in (["-t"], []):
        rc, out, err = H.run_etrelay(ctx, t + args, wrapper=wrapper, timeout=10)
        got[bool(t)] = (rc, err)
        H.check("needs" in err and "file descriptors" in err and "limit is 200" in err,
                f"{' '.join(t) or 'start'}: the file-descriptor message: {err.strip()!r}")
        H.check("is valid" not in out, f"{' '.join(t)}: 'valid' under a limit the start "
                f"refuses: {out.strip()!r}")
    H.expect_eq(got[False][0], 78, f"a start's exit status ({got[False][1].strip()!r})")
    H.expect_eq(got[True][0], 78, f"-t's exit status, as the start's ({got[True][1].strip()!r})")
    H.check("unit's LimitNOFILE=" in got[True][1],
            f"-t names the unit's LimitNOFILE= as the fix: {got[True][1].strip()!r}")


def write(path, text, mode):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, text.encode() + b"\n")
    os.close(fd)
    os.chmod(path, mode)


def bootstrap(ctx):
    d = ctx.tmpdir()
    state = os.path.join(d, "state")
    os.mkdir(state, 0o700)
    boot = os.path.join(d, "bootstrap")
    base = ["--upstream", "127.0.0.1:9", "--listen", f"127.0.0.1:{H.free_udp_port()}",
            "--master", "127.0.0.1:9", "--backend", ctx.backend, "--log-time", "no",
            "--control-url", "http://127.0.0.1:9", "--control-bootstrap-token-file", boot,
            "--state-directory", state]
    for what, text, mode, want in (
            ("mode 0644", BOOTSTRAP, 0o644, f"mode 0644 lets every user read the token; "
                                            f"`chmod 600 {boot}`"),
            ("5 bytes", "short", 0o600, "5 bytes, at least")):
        write(boot, text, mode)
        seen = {}
        for t in (["-t"], []):
            rc, out, err = H.run_etrelay(ctx, t + base, env=H.CONTROL_NO_PROXY, timeout=10)
            seen[bool(t)] = (rc, err)
            H.check(want in err and "control-bootstrap-token-file" in err,
                    f"{' '.join(t) or 'start'} with a bootstrap token file of {what}: the "
                    f"error should say {want!r}: {err.strip()!r}")
            H.check("is valid" not in out, f"-t called a bootstrap token file of {what} "
                    f"valid: {out.strip()!r}")
            H.check(BOOTSTRAP not in err, "the token is in the error")
        H.expect_eq(seen[False][0], 78, f"a start's exit status, token file of {what} "
                    f"({seen[False][1].strip()!r})")
        H.expect_eq(seen[True][0], 78, f"-t's exit status, token file of {what} "
                    f"({seen[True][1].strip()!r})")
    # the same file, right: -t calls it valid (a positive control)
    write(boot, BOOTSTRAP, 0o600)
    rc, out, err = H.run_etrelay(ctx, ["-t"] + base, env=H.CONTROL_NO_PROXY, timeout=10)
    H.check(rc == 0 and "is valid" in out, f"-t with a good bootstrap token file: exit {rc}, "
            f"{out.strip()!r} {err.strip()!r}")


def taken(kind, port):
    """A socket of kind holding 127.0.0.1:port (listening, for TCP)."""
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", port))
    if kind == socket.SOCK_STREAM:
        s.listen(1)
    return s


def ports_in_use(ctx):
    gs = ctx.game_server()
    secret = {"ETRELAY_TURN_SECRET": "s" * 40}
    cases = [
        ("listen", socket.SOCK_DGRAM, lambda p: ["--listen", f"127.0.0.1:{p}",
                                                 "--upstream", f"127.0.0.1:{gs.port}"]),
        ("sni-listen", socket.SOCK_STREAM, lambda p: ["--sni-listen", f"127.0.0.1:{p}",
                                                      "--sni-route", "a.test=127.0.0.1:9"]),
        ("prbe-listen", socket.SOCK_DGRAM, lambda p: ["--prbe-listen", f"127.0.0.1:{p}"]),
        ("turn-listen", socket.SOCK_DGRAM, lambda p: ["--turn-listen", f"127.0.0.1:{p}",
                                                      *H.turn_ports(16)]),
        ("ops-listen", socket.SOCK_STREAM, lambda p: [
            "--listen", f"127.0.0.1:{H.free_udp_port()}", "--upstream", f"127.0.0.1:{gs.port}",
            "--ops-listen", f"127.0.0.1:{p}"]),
    ]
    seen = {}
    for name, kind, args in cases:
        p = H.free_udp_port() if kind == socket.SOCK_DGRAM else H.free_tcp_port()
        s = taken(kind, p)
        try:
            rc, out, err = H.run_etrelay(ctx, args(p) + ["--backend", ctx.backend, "--log-time",
                                                         "no"], env=secret, timeout=10)
        finally:
            s.close()
        seen[name] = rc
        H.check("Address already in use" in err and str(p) in err,
                f"{name} on a port in use: the error names the port and errno: "
                f"{err.strip()!r}")
    ctx.note(f"exit statuses with the port in use: {seen}")
    H.expect_eq(seen, {name: 1 for name, _, _ in cases},
                "exit statuses of a start whose port is in use (1 for each listener)")
    # a fault of the configuration, on the same listener: 78 (a file's;
    # the command line's are usage errors, 64)
    path = os.path.join(ctx.tmpdir(), "etrelay.conf")
    with open(path, "w") as f:
        f.write(f"listen 127.0.0.1:{H.free_udp_port()}\nupstream 127.0.0.1:{gs.port}\n"
                f"ops-listen 192.0.2.1:9960\n")
    rc, out, err = H.run_etrelay(ctx, ["-c", path, "--backend", ctx.backend], timeout=10)
    H.expect_eq(rc, 78, f"ops-listen on a public address: exit status ({err.strip()!r})")


def listen_not_local(ctx):
    port = H.free_udp_port()
    for kind, args in (("relay default", ["--listen", f"192.0.2.77:{port}",
                                          "--upstream", f"127.0.0.1:{H.free_udp_port()}"]),
                       ("sni default", ["--sni-listen", f"192.0.2.77:{port}",
                                        "--sni-route", "a.test=127.0.0.1:9"])):
        rc, out, err = H.run_etrelay(ctx, ["-t"] + args, timeout=10)
        H.expect_eq(rc, 0, f"-t, {kind} on 192.0.2.77 ({err.strip()!r})")
        H.check(f"warning: {kind}: listen 192.0.2.77:{port}: not an address of this host"
                in err, f"-t names the {kind} listener: {err.strip()!r}")
        rc, out, err = H.run_etrelay(ctx, args + ["--backend", ctx.backend], timeout=10)
        H.expect_eq(rc, 1, f"a start, {kind} on 192.0.2.77 ({err.strip()!r})")


def route_to_ops(ctx):
    ops = H.free_tcp_port()
    args = ["--sni-listen", f"127.0.0.1:{H.free_tcp_port()}", "--sni-route",
            f"a.test=127.0.0.1:{ops}", "--ops-listen", f"127.0.0.1:{ops}"]
    for t in (["-t"], []):
        rc, out, err = H.run_etrelay(ctx, t + args + ["--backend", ctx.backend], timeout=10)
        H.expect_eq(rc, 78, f"{t} an SNI route to the ops listener ({err.strip()!r})")
        H.check(f"upstream 127.0.0.1:{ops} is the ops listener" in err,
                f"{t} names the route: {err.strip()!r}")


def tunnel_lines(ctx):
    d = ctx.tmpdir()
    path = os.path.join(d, "t.conf")
    wg, game = H.free_udp_port(), H.free_udp_port()
    gone = f"etxno{os.getpid() % 10000}"
    cases = (
        ("a wrong top-level wg-interface", "wg-interface = x\nwg-address 10.8.0.1/24\n",
         f"{path}:1: wg-interface: invalid value '= x' (expected an interface name such as "
         "wg0: write the key, a space and the value, without '=')", 78, 78),
        ("session-ports over the WireGuard port",
         f"upstream 127.0.0.1:9\nlisten 127.0.0.1:{game}\nmax-sessions 10\n"
         f"session-ports {wg - 5}-{wg + 5}\n[tunnel]\ninterface wg0\naddress 10.8.0.1/24\n"
         f"listen-port {wg}\n",
         f"{path}:4: relay default: session-ports {wg - 5}-{wg + 5} hold port {wg} of the "
         f"WireGuard port 0.0.0.0:{wg} (line 8)", 78, 78),
        # The last interface holds: -t names its line (the start fails to
        # open it, 1, as test_tunnel shows).
        ("interface twice", f"[tunnel]\ninterface wg0\naddress 10.8.0.1/24\ninterface {gone}\n",
         f"{path}:4: tunnel {gone}: ", 78, 1))
    for what, text, want, t_rc, start_rc in cases:
        with open(path, "w") as f:
            f.write(text)
        for t, rc_want in ((["-t"], t_rc), ([], start_rc)):
            rc, out, err = H.run_etrelay(ctx, t + ["-c", path, "--backend", ctx.backend,
                                                   "--log-time", "no"], timeout=10)
            H.expect_eq(rc, rc_want, f"{' '.join(t) or 'start'}, {what} ({err.strip()!r})")
            if rc_want != 78:
                continue
            lines = [ln for ln in err.splitlines() if ln.strip()]
            H.check(len(lines) == 1 and want in lines[0],
                    f"{' '.join(t) or 'start'}, {what}: one error, {want!r}: {err.strip()!r}")


def test(ctx):
    tunnel_lines(ctx)
    route_to_ops(ctx)
    listen_not_local(ctx)
    nofile(ctx)
    bootstrap(ctx)
    ports_in_use(ctx)


if __name__ == "__main__":
    H.main(test)
