#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A peer banned by a reload of ban-file gets nothing more from a client,
at once, on the permission and the channel it already has (issue 23: one
peer check on every path that sends to a peer).

A TURN listener with --ban-file (empty at first) and two peers on
loopback, 127.0.0.5 and 127.0.0.6 (allowed alone: turn-allow-peer /32). A
client over UDP and one over TCP each allocate, create a permission for
both peers and bind a channel to each:

  before   a Send indication and ChannelData (padded frames over TCP) to
           each peer arrive there;
  reload   ban-file names 127.0.0.5, SIGHUP, its "ban-file ...: 1 entries"
           line; then the same Sends and ChannelData: nothing more reaches
           127.0.0.5 within a bounded wait, each refusal is counted
           (etrelay_turn_dropped_total{reason="banned"}, one per datagram,
           nothing to the peer counted), and 127.0.0.6 still gets them all;
           the clients' Refresh (not banned) is answered.

Usage:
    python3 test_turn_ban_reload.py <etrelay-binary> <io_uring|epoll>
"""

import os
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import turnutil as T  # noqa: E402

BANNED, KEPT = "127.0.0.5", "127.0.0.6"
SEND, DATA, INDICATION, A_DATA, A_CHANNEL = 0x006, 0x007, 1, 0x0013, 0x000C
ROUNDS = 5  # datagrams of each kind, each transport, after the reload


def write_file(path, text):
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


class Peer:
    """A UDP socket on ip: what the relay sends it."""

    def __init__(self, ip):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.s.bind((ip, H.free_udp_port()))
        self.ip, self.port = ip, self.s.getsockname()[1]
        H._register(self)

    def close(self):
        self.s.close()

    def got(self, payloads, timeout):
        """Which of payloads arrive within timeout (a set)."""
        seen = set()
        deadline = time.monotonic() + timeout
        for _ in range(10000):
            left = deadline - time.monotonic()
            if left <= 0 or seen == set(payloads):
                break
            self.s.settimeout(left)
            try:
                d = self.s.recv(65536)
            except socket.timeout:
                break
            seen |= {p for p in payloads if d == p}
        return seen

    def drain(self):
        self.s.setblocking(False)
        for _ in range(1000):
            try:
                self.s.recv(65536)
            except BlockingIOError:
                break


class Client:
    """A TURN allocation over UDP or TCP from 127.0.0.1, signed requests,
    Send indications and ChannelData."""

    def __init__(self, port, tcp, userid):
        self.tcp = tcp
        if tcp:
            self.s = socket.create_connection(("127.0.0.1", port), timeout=3 * H.SLOW)
            H._register(self.s)
            _, _, _, a = T.stun_tcp(self.s, T.message(T.ALLOCATE, os.urandom(12),
                                                      [T.u32(T.A_TRANSPORT, 17 << 24)]))
            H.expect_eq(T.error_code(a), 401, "an unsigned Allocate over TCP")
            realm, nonce = a[T.A_REALM][0], a[T.A_NONCE][0]
        else:
            self.c = T.StunClient(port)
            realm, nonce = self.c.challenge()
        user, pw = T.rest_credentials(T.SECRET, userid)
        self.key = T.longterm_key(user, pw, realm.decode())
        self.auth = T.signed(user, realm, nonce)
        code = self.ask(T.ALLOCATE, T.u32(T.A_TRANSPORT, 17 << 24))
        H.expect_eq(code, None, f"Allocate over {self.what()}")

    def what(self):
        return "TCP" if self.tcp else "UDP"

    def ask(self, method, *attrs):
        """A signed request: its error code (None: success)."""
        m = T.message(method, os.urandom(12), list(attrs) + self.auth, key=self.key)
        if self.tcp:
            cls, _, _, a = T.stun_tcp(self.s, m)
        else:
            raw = self.c.send_raw(m)
            H.check(raw is not None, f"no answer to method {method:#x} over UDP")
            cls, _, _, a = T.parse(raw)
        return None if cls == T.SUCCESS else T.error_code(a)

    def permit_and_bind(self, peer, ch):
        H.expect_eq(self.ask(T.CREATE_PERMISSION, T.xor_peer(peer.ip, peer.port)), None,
                    f"CreatePermission for {peer.ip} over {self.what()}")
        H.expect_eq(self.ask(T.CHANNEL_BIND, T.u32(A_CHANNEL, ch << 16),
                             T.xor_peer(peer.ip, peer.port)), None,
                    f"ChannelBind {ch:#x} to {peer.ip} over {self.what()}")

    def put(self, data):
        if self.tcp:
            self.s.sendall(data)
        else:
            self.c.s.sendto(data, self.c.addr)

    def send_ind(self, peer, payload):
        self.put(T.message(SEND, os.urandom(12),
                           [T.xor_peer(peer.ip, peer.port), T.attr(A_DATA, payload)],
                           fingerprint=False, cls=INDICATION))

    def channel_data(self, ch, payload):
        pad = b"\0" * (-len(payload) % 4) if self.tcp else b""  # RFC 8656 12.5
        self.put(struct.pack("!HH", ch, len(payload)) + payload + pad)


def counts(ops):
    _, m = T.metrics(ops)
    return (T.value(m, "etrelay_turn_dropped_total", reason="banned"),
            T.value(m, "etrelay_turn_relayed_datagrams_total", direction="to_peer"))


def test(ctx):
    bans = os.path.join(ctx.tmpdir(), "bans")
    write_file(bans, "# none yet\n")
    port, ops = T.free_port(), H.free_tcp_port()
    relay = T.start_relay(ctx, port, *H.turn_ports(20), "--ops-listen", f"127.0.0.1:{ops}",
                          "--turn-allow-peer", f"{BANNED}/32", "--turn-allow-peer", f"{KEPT}/32",
                          "--ban-file", bans)
    banned, kept = Peer(BANNED), Peer(KEPT)
    clients = [Client(port, False, "udp"), Client(port, True, "tcp")]
    for c in clients:
        c.permit_and_bind(banned, 0x4001)
        c.permit_and_bind(kept, 0x4002)

    def burst(tag, rounds):
        """Each client sends rounds Send indications and rounds ChannelData
        to each peer: the payloads meant for each."""
        to = {BANNED: [], KEPT: []}
        for c in clients:
            for i in range(rounds):
                for peer, ch in ((banned, 0x4001), (kept, 0x4002)):
                    p1 = f"{tag} send {c.what()} {i} {peer.ip}".encode()
                    p2 = f"{tag} chan {c.what()} {i} {peer.ip}".encode() + b"x" * (i % 4)
                    c.send_ind(peer, p1)
                    c.channel_data(ch, p2)
                    to[peer.ip] += [p1, p2]
        return to

    # before: both kinds reach both peers, over both transports
    to = burst("before", 1)
    for peer in (banned, kept):
        seen = peer.got(to[peer.ip], 3 * H.SLOW)
        H.expect_eq(sorted(seen), sorted(to[peer.ip]), f"what {peer.ip} got before the ban")

    # the reload bans 127.0.0.5
    b0, sent0 = counts(ops)
    write_file(bans, f"# the test's\n{BANNED}\n")
    mark = relay.mark()
    os.kill(relay.pid, signal.SIGHUP)
    relay.wait_for_line(r"^ban-file .*: 1 entries", 3 * H.SLOW, start=mark,
                        what="the ban file reloaded")
    # With --workers 2 the line comes when the first worker has the list;
    # the other takes it from a post made before the line. A request
    # answered by each client's worker now proves that worker past the
    # post (the clients themselves are not banned).
    for c in clients:
        H.expect_eq(c.ask(T.REFRESH, T.u32(T.A_LIFETIME, 600)), None,
                    f"a Refresh over {c.what()} after the reload")
    banned.drain()
    to = burst("after", ROUNDS)
    n = len(to[BANNED])
    seen_kept = kept.got(to[KEPT], 3 * H.SLOW)
    seen_banned = banned.got(to[BANNED], 1.0 * H.SLOW)
    H.expect_eq(len(seen_banned), 0,
                f"datagrams banned peer {BANNED} got after the reload (of {n} sent it): "
                f"{sorted(seen_banned)[:4]}")
    H.expect_eq(sorted(seen_kept), sorted(to[KEPT]), f"what {KEPT} (not banned) got")
    H.wait_until(lambda: counts(ops)[0] - b0 >= n, 3 * H.SLOW,
                 f"{n} datagrams to {BANNED} counted dropped{{reason=banned}}")
    b1, sent1 = counts(ops)
    ctx.note(f"after the reload: {n} to {BANNED} dropped banned {b1 - b0}; "
             f"to_peer {sent1 - sent0} (of {len(to[KEPT])} to {KEPT})")
    H.expect_eq(b1 - b0, n, "dropped{reason=banned}: one per datagram to the banned peer")
    H.expect_eq(sent1 - sent0, len(to[KEPT]), "datagrams to peers counted: the kept one's only")


if __name__ == "__main__":
    H.main(test)
