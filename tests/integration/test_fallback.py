#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The io_uring -> epoll fallback, as a sandbox forces it: etrelay runs under
a seccomp filter that answers io_uring_setup(2) with EPERM (what Docker's
default profile and kernel.io_uring_disabled=2 do).

  auto      --backend auto logs why and falls back to epoll, the startup
            line names epoll, and a player's datagrams go both ways.
  required  --backend io_uring refuses to fall back: exit 69 and the reason.

The filter is installed by a small Python wrapper that then execs etrelay,
so only that process tree is sandboxed. The test is the same whichever
backend meson passes; it forces the choice itself."""

import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

# PR_SET_NO_NEW_PRIVS, then a classic-BPF seccomp filter: on x86-64, syscall
# 425 (io_uring_setup) returns EPERM; everything else is allowed.
SANDBOX = r"""
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
def ins(code, jt, jf, k):
    return struct.pack("=HBBI", code, jt, jf, k)
prog = b"".join([
    ins(0x20, 0, 0, 4),           # ld [arch]
    ins(0x15, 0, 3, 0xc000003e),  # jeq AUDIT_ARCH_X86_64, else allow
    ins(0x20, 0, 0, 0),           # ld [nr]
    ins(0x15, 0, 1, 425),         # jeq io_uring_setup, else allow
    ins(0x06, 0, 0, 0x00050000 | 1),  # ret ERRNO(EPERM)
    ins(0x06, 0, 0, 0x7fff0000),  # ret ALLOW
])
buf = ctypes.create_string_buffer(prog)
fprog = struct.pack("=HxxxxxxQ", len(prog) // 8, ctypes.addressof(buf))
fbuf = ctypes.create_string_buffer(fprog)
if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.addressof(fbuf), 0, 0) != 0:
    sys.stderr.write("sandbox: prctl: %s\n" % os.strerror(ctypes.get_errno()))
    sys.exit(70)
os.execv(sys.argv[1], sys.argv[1:])
"""
WHY = ("io_uring unavailable: io_uring_setup: Operation not permitted "
       "(seccomp or kernel.io_uring_disabled)")


def sandbox():
    return [sys.executable, "-c", SANDBOX]


def auto(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    relay = ctx.relay("--backend", "auto", "--upstream", f"127.0.0.1:{gs.port}",
                      "--master", f"127.0.0.1:{master.port}", backend="auto",
                      wrapper=sandbox())
    relay.wait_for_line(H.re.escape(WHY) + r"; falling back to epoll$", 5,
                        what="the fallback line")
    relay.wait_for_line(r"listening on .* backend epoll,", 5, what="the startup line naming epoll")
    c = ctx.client(relay)
    p = b"\x07\x00\x00\x00fallback-" + os.urandom(6).hex().encode()
    H.expect_eq(c.request(p, what="echo through the epoll fallback"), b"ECHO:" + p,
                "answer through the fallback")
    ctx.note("auto: io_uring_setup refused by seccomp; fell back to epoll and relayed")


def required(ctx):
    rc, out, err = H.run_etrelay(ctx, ["--backend", "io_uring", "--listen",
                                       f"127.0.0.1:{H.free_udp_port()}", "--upstream",
                                       f"127.0.0.1:{H.free_udp_port()}", "--master",
                                       f"127.0.0.1:{H.free_udp_port()}"], wrapper=sandbox())
    H.expect_eq(rc, 69, "exit status of --backend io_uring in the sandbox")
    H.check(WHY in err, f"the reason is not on stderr: {H.short(err)}")
    ctx.note("required: --backend io_uring exited 69 with the reason")


def test(ctx):
    if platform.machine() != "x86_64":
        raise H.TestSkip(f"the seccomp filter is written for x86-64, not {platform.machine()}")
    H.run_parts(ctx, [auto, required])


if __name__ == "__main__":
    H.main(test)
