#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""What the counters alone used to show is said in the --debug log.

sni_upstream_gone: an SNI connection whose upstream closes (or resets)
before sending a byte is counted as spliced, yet nobody was served (most
often a proxy-v2 route to a server that does not expect the header).
With --debug the relay says so, naming the listener, the name, the
client and, for a proxy-v2 route, the likely cause; an upstream that
answers before it closes is not reported.

turn_refused: each TURN request refused says its method, client, code
and why: an Allocate signed with another secret (401, wrong
MESSAGE-INTEGRITY), a CreatePermission to a refused peer (403, naming
the peer and the policy's reason), a ChannelBind without an allocation
(437). The old code logged none of them, even with --debug."""

import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import tlsutil as T  # noqa: E402
import turnutil as U  # noqa: E402


class Closer(T.TcpServer):
    """A TCP upstream that reads what comes, then closes (reset: RST, else
    FIN), or first answers `answer`."""

    def __init__(self, ctx, reset=False, answer=b""):
        self.reset, self.answer = reset, answer
        super().__init__(ctx, backlog=16)

    def serve(self, c):
        c.settimeout(5)
        try:
            c.recv(65536)
            if self.answer:
                c.sendall(self.answer)
            if self.reset:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
        except OSError:
            pass
        c.close()


def client(port, name):
    """Send a hello for name and read to the end: the bytes that came."""
    s = socket.create_connection((H.LOOPBACK, port), timeout=5)
    try:
        s.sendall(T.hello(name))
        got = b""
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            got += b
        return got
    finally:
        s.close()


def sni_upstream_gone(ctx):
    pp, rst, ok = Closer(ctx), Closer(ctx, reset=True), Closer(ctx, answer=b"hello")
    port = H.free_tcp_port()
    relay = ctx.relay("--sni-listen", f"{H.LOOPBACK}:{port}",
                      "--sni-route", f"pp.test={H.LOOPBACK}:{pp.port},proxy-v2",
                      "--sni-route", f"rst.test={H.LOOPBACK}:{rst.port}",
                      "--sni-route", f"ok.test={H.LOOPBACK}:{ok.port}",
                      debug=True, listen=False, wait_ready=False, open_limits=False)
    relay.READY_RE = r"^sni default listening on "
    relay.wait_ready()
    start = len(relay.lines)
    H.expect_eq(client(port, "ok.test"), b"hello", "ok.test: the upstream's answer")
    H.expect_eq(client(port, "pp.test"), b"", "pp.test: the upstream closed at once")
    relay.wait_for_line(r"sni default: pp\.test from 127\.0\.0\.1:\d+: upstream closed before "
                        r"sending a byte \(a proxy-v2 route: does the upstream expect the PROXY "
                        r"header\?\)", 5 * H.SLOW, start=start, what="the proxy-v2 route's line")
    H.expect_eq(client(port, "rst.test"), b"", "rst.test: the upstream reset")
    relay.wait_for_line(r"sni default: rst\.test from 127\.0\.0\.1:\d+: upstream (closed|"
                        r"Connection reset by peer) before sending a byte$", 5 * H.SLOW,
                        start=start, what="the resetting upstream's line")
    H.wait_until(lambda: ok.served and pp.served and rst.served, 5, "every upstream served")
    said = [l for _, l in relay.lines[start:] if "ok.test" in l and "before sending" in l]
    H.expect_eq(said, [], "an upstream that answered is not reported")
    ctx.check_relays_alive()


def turn_refused(ctx):
    port = U.free_port()
    relay = U.start_relay(ctx, port, *H.turn_ports(4), "--debug", tcp=False,
                          shared_ip=True)
    start = len(relay.lines)
    transport = U.u32(U.A_TRANSPORT, 17 << 24)
    c = U.StunClient(port)
    realm, nonce = c.challenge()
    user, password = U.rest_credentials(U.SECRET, "alice")
    key = U.longterm_key(user, password, realm.decode())
    wrong = U.longterm_key(user, "not-the-password", realm.decode())
    _, (_, _, _, a) = c.request(U.ALLOCATE, [transport] + U.signed(user, realm, nonce), key=wrong)
    H.expect_eq(U.error_code(a), 401, "an Allocate with another key")
    relay.wait_for_line(r"^turn default: Allocate from 127\.0\.0\.1:\d+: 401 Unauthorized "
                        r"\(wrong MESSAGE-INTEGRITY", 5 * H.SLOW, start=start,
                        what="the wrong MAC's line")
    # no allocation yet: ChannelBind is 437
    ch = U.u32(0x000C, 0x4000 << 16)  # CHANNEL-NUMBER
    _, (_, _, _, a) = c.request(U.CHANNEL_BIND, [ch, U.xor_peer("192.0.2.1", 9)]
                                + U.signed(user, realm, nonce), key=key)
    H.expect_eq(U.error_code(a), 437, "a ChannelBind without an allocation")
    relay.wait_for_line(r"^turn default: ChannelBind from 127\.0\.0\.1:\d+: 437 .*\(no "
                        r"allocation on this 5-tuple\)", 5 * H.SLOW, start=start,
                        what="the 437's line")
    _, (cls, _, _, a) = c.request(U.ALLOCATE, [transport] + U.signed(user, realm, nonce), key=key)
    H.expect_eq(cls, U.SUCCESS, f"the Allocate with the right key ({U.error_code(a)})")
    _, (_, _, _, a) = c.request(U.CREATE_PERMISSION, [U.xor_peer("169.254.169.254", 80)]
                                + U.signed(user, realm, nonce), key=key)
    H.expect_eq(U.error_code(a), 403, "a permission to the metadata address")
    relay.wait_for_line(r"^turn default: CreatePermission from 127\.0\.0\.1:\d+: 403 Forbidden "
                        r"\(peer 169\.254\.169\.254:80: reserved\)", 5 * H.SLOW, start=start,
                        what="the refused peer's line")
    c.close()
    ctx.check_relays_alive()


def test(ctx):
    H.run_parts(ctx, [sni_upstream_gone, turn_refused])


if __name__ == "__main__":
    H.main(test)
