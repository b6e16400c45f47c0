#!/usr/bin/python3
# SPDX-License-Identifier: ISC
"""A gateway's end of rung 3 (udpws), written with Debian's
python3-websockets (run it with /usr/bin/python3): WireGuard's UDP carried
as binary WebSocket messages over TLS to wss://NAME/t, the token in
"Authorization: Bearer TOKEN".

  bridge LISTEN ADDR NAME PATH TOKEN   take UDP on LISTEN (ip:port; the
        gateway's wireguard-go sends there), carry each datagram as one
        message to ADDR (ip:port of the relay's SNI listener) with SNI and
        Host NAME; each message back goes to the last UDP sender. Says
        "open" on stdout once upgraded; exits when the WebSocket ends
        ("closed CODE").
  probe ADDR NAME PATH TOKEN   one upgrade; says "open", "status N" (the
        refusal's HTTP status) or "closed" (the connection ended before an
        answer: a TLS refusal)."""

import asyncio
import ssl
import sys

import websockets


def tls():
    ctx = ssl.create_default_context()
    # The tunnel certificate is the test CA's; what is checked here is the
    # relay's choice of name, not the chain.
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def connect(addr, name, path, token):
    host, port = addr.rsplit(":", 1)
    return websockets.connect(f"wss://{name}{path}", host=host, port=int(port), ssl=tls(),
                              server_hostname=name, open_timeout=5, ping_interval=None,
                              extra_headers={"Authorization": f"Bearer {token}"})


async def probe(addr, name, path, token):
    try:
        async with connect(addr, name, path, token):
            print("open", flush=True)
    except websockets.exceptions.InvalidStatusCode as e:
        print(f"status {e.status_code}", flush=True)
    except (OSError, EOFError, ssl.SSLError, asyncio.TimeoutError,
            websockets.exceptions.InvalidMessage, websockets.exceptions.ConnectionClosed):
        print("closed", flush=True)


class Udp(asyncio.DatagramProtocol):
    def __init__(self, q):
        self.q = q
        self.peer = None
        self.tr = None

    def connection_made(self, tr):
        self.tr = tr

    def datagram_received(self, data, addr):
        self.peer = addr
        if self.q.qsize() < 256:
            self.q.put_nowait(data)


async def bridge(listen, addr, name, path, token):
    loop = asyncio.get_running_loop()
    q = asyncio.Queue()
    lh, lp = listen.rsplit(":", 1)
    tr, udp = await loop.create_datagram_endpoint(lambda: Udp(q), local_addr=(lh, int(lp)))
    async with connect(addr, name, path, token) as ws:
        print("open", flush=True)

        async def up():
            while True:
                await ws.send(await q.get())

        task = asyncio.ensure_future(up())
        try:
            async for m in ws:
                if isinstance(m, bytes) and udp.peer:
                    tr.sendto(m, udp.peer)
        except websockets.exceptions.ConnectionClosed:
            pass  # a close code but 1000 and 1001: said below
        finally:
            task.cancel()
        print(f"closed {ws.close_code}", flush=True)
    tr.close()


def main():
    if len(sys.argv) == 7 and sys.argv[1] == "bridge":
        asyncio.run(bridge(*sys.argv[2:]))
    elif len(sys.argv) == 6 and sys.argv[1] == "probe":
        asyncio.run(probe(*sys.argv[2:]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
