#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""200 clients at once, each with its own socket, each sending several
packets with unique payloads: each gets exactly its own answers, from the
public port, and the game server sees 200 distinct session sockets."""

import os
import selectors
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

NCLIENTS = 200
NPACKETS = 5
RETRIES = 2


def test(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    relay = ctx.relay("--master", f"127.0.0.1:{master.port}",
                      "--upstream", f"127.0.0.1:{gs.port}")
    clients = [ctx.client(relay) for _ in range(NCLIENTS)]
    sel = selectors.DefaultSelector()
    for i, c in enumerate(clients):
        c.sock.setblocking(False)
        sel.register(c.sock, selectors.EVENT_READ, i)

    received = [[] for _ in clients]  # payloads each client got
    expected = [[] for _ in clients]
    resent = 0
    resent_set = set()

    def payload(i, j):
        return clients[i].game(b"client-%03d-packet-%d-" % (i, j) + os.urandom(8), j + 1)

    def collect(want, timeout):
        """Read until every client has `want` answers or timeout."""
        deadline = time.monotonic() + timeout
        for _ in range(100000):
            if all(len(r) >= want for r in received):
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            for key, _ in sel.select(min(remaining, 0.2)):
                i = key.data
                c = clients[i]
                for _ in range(64):
                    try:
                        data, src = c.sock.recvfrom(H.MAX_DGRAM)
                    except BlockingIOError:
                        break
                    H.check(tuple(src) == relay.addr,
                            f"client {i} got a datagram from {src}, not from the relay {relay.addr}")
                    H.check(data.startswith(b"ECHO:"), f"client {i} got {H.short(data)}")
                    body = data[5:]
                    H.check(body in expected[i],
                            f"client {i} got an answer that is not its own: {H.short(body)}")
                    if body in received[i]:
                        # a resent packet may be answered twice; anything else may not
                        H.check(body in resent_set, f"client {i} got {H.short(body)} twice")
                        continue
                    received[i].append(body)

    for j in range(NPACKETS):
        round_payloads = [payload(i, j) for i in range(NCLIENTS)]
        for i, c in enumerate(clients):
            expected[i].append(round_payloads[i])
            c.sock.sendto(round_payloads[i], relay.addr)
        collect(j + 1, 3.0)
        # UDP may drop under a burst; resend only the missing ones, a few times
        for _ in range(RETRIES):
            missing = [i for i in range(NCLIENTS) if round_payloads[i] not in received[i]]
            if not missing:
                break
            for i in missing:
                clients[i].sock.sendto(round_payloads[i], relay.addr)
                resent_set.add(round_payloads[i])
                resent += 1
            collect(j + 1, 3.0)
        missing = [i for i in range(NCLIENTS) if round_payloads[i] not in received[i]]
        H.check(not missing, f"round {j}: {len(missing)} clients got no answer after "
                             f"{RETRIES} resends (e.g. client {missing[:5]})")

    for i in range(NCLIENTS):
        H.expect_eq(sorted(received[i]), sorted(expected[i]), f"answers received by client {i}")
    H.check(resent <= NCLIENTS * NPACKETS // 10,
            f"{resent} of {NCLIENTS * NPACKETS} packets had to be resent")

    # the game server saw each client from one session socket, 200 distinct
    # ones, none of them the relay's public port
    per_client = []
    for i in range(NCLIENTS):
        srcs = gs.sources_for(expected[i])
        H.expect_eq(len(srcs), 1, f"source addresses the game server saw for client {i}")
        per_client.append(next(iter(srcs)))
    H.expect_eq(len(set(per_client)), NCLIENTS, "distinct session sockets at the game server")
    H.check(all(a[1] != relay.port for a in per_client),
            "game server saw a client from the relay's public port")
    ctx.note(f"{NCLIENTS} clients x {NPACKETS} packets ok, {resent} resent")
    sel.close()


if __name__ == "__main__":
    H.main(test)
