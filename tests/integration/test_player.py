#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A player's whole conversation through the relay: getchallenge, connect,
50 in-game packets each way. Every answer comes from the public port, the
game server sees the player on one stable session port that is not the
relay's public port."""

import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import q3huff  # noqa: E402

QPORT = 1234


def test(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    relay = ctx.relay("--master", f"127.0.0.1:{master.port}",
                      "--upstream", f"127.0.0.1:{gs.port}")
    c = ctx.client(relay)

    sent = []
    pkt = H.cmd("getchallenge")
    reply = c.request(pkt, what="challengeResponse")
    sent.append(pkt)
    m = re.fullmatch(rb"\xff\xff\xff\xffchallengeResponse (\d+)", reply)
    H.check(m, f"expected challengeResponse <n>, got {H.short(reply)}")
    challenge = m.group(1).decode()

    # Huffman-coded, as clients send it; the relay reads its qport
    pkt = q3huff.connect_packet(f"\\protocol\\84\\qport\\{QPORT}\\challenge\\{challenge}"
                                f"\\name\\player")
    reply = c.request(pkt, what="connectResponse")
    sent.append(pkt)
    H.expect_eq(reply, H.cmd(f"connectResponse {challenge}"), "answer to connect")

    # 50 in-game packets (sequence, the connect's qport), lock-step, each
    # with a unique payload
    for i in range(50):
        payload = struct.pack("<iH", i + 1, QPORT) + b"game-%03d-" % i + os.urandom(16)
        reply = c.request(payload, what=f"answer to in-game packet {i}")
        H.expect_eq(reply, b"ECHO:" + payload, f"answer to in-game packet {i}")
        sent.append(payload)

    # everything the client sent reached the game server, once, from one
    # source port that is neither the relay's public port nor the client's
    got = gs.packets(lambda p: p.data in set(sent))
    H.expect_eq([p.data for p in got], sent, "packets at the game server, in order")
    ports = {p.addr for p in got}
    H.expect_eq(len(ports), 1, f"number of source addresses the game server saw for one client ({ports})")
    (src,) = ports
    H.check(src[1] != relay.port,
            f"game server saw the client from the relay's public port {relay.port}")
    H.check(src[1] != c.port, "game server saw the client's own port: not relayed")
    # the probe comes from its own socket, not from this session's
    probe_ports = {p.addr for p in gs.probes()}
    H.check(src not in probe_ports, f"probe sent from the player's session socket {src}")
    H.expect_eq(c.got, 52, "replies received by the client")


if __name__ == "__main__":
    H.main(test)
