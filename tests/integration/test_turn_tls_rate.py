#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A TURNS handshake flood is counted and budgeted (attacker9 finding 1).
The attack: a canned TLS 1.3 ClientHello (made once: no client crypto) on
new TCP connections, then a reset; each costs the worker's thread a
handshake. A handshake cut off by the client counts in
etrelay_turn_tls_failed_total. A flood from one address gets at most
tls-handshake-ip-burst plus -ip-rate a second of server flights; the
rest are closed with no byte sent, counted tcp_dropped{reason=tls_rate_ip},
while a real TLS client (Python's ssl) from another address completes its
handshake and a TURN Allocate. A flood from many addresses gets at most
the listener's tls-handshake-burst plus -rate a second (tls_rate). A TLS
connection that authenticated before the floods goes on (Refresh), and
plain TCP from the flooding address is not affected."""

import os
import socket
import ssl
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import tlsutil  # noqa: E402
import turnutil as T  # noqa: E402

RATE, BURST, IP_RATE, IP_BURST = 20, 10, 2, 4
FLOOD_S = 2.0
LINGER0 = struct.pack("ii", 1, 0)


def client_ctx():
    c = ssl.create_default_context()
    c.check_hostname = False
    c.verify_mode = ssl.CERT_NONE
    return c


def canned_hello():
    """A ClientHello made once, as the attacker replays it."""
    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    w = client_ctx().wrap_bio(i, o, server_hostname="turn.test")
    try:
        w.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return o.read()


def hello_and_reset(src, port, hello, wait=2.0):
    """Connect from src, send the hello, read what comes (up to a server
    flight), reset: the bytes the server sent (b"" when it closed first;
    None when the connection was not made: the relay never saw it)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER0)
    s.bind((src, 0))
    s.settimeout(wait * H.SLOW)
    got = b""
    try:
        s.connect(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    try:
        s.sendall(hello)
        while len(got) < 5 or len(got) < 5 + int.from_bytes(got[3:5], "big"):
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError:
        pass
    finally:
        s.close()
    return got


def flood(sources, port, hello, seconds, limit, stop=None):
    """Canned hellos from sources (in turn) for seconds, at most limit
    connections, until stop is set: (connections, those that got a server
    flight, those that got no byte)."""
    n = flights = empty = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds and n < limit and not (stop and stop.is_set()):
        got = hello_and_reset(sources[n % len(sources)], port, hello)
        if got is None:
            continue
        n += 1
        if got[:1] == b"\x16":
            flights += 1
        elif not got:
            empty += 1
    return n, flights, empty


def tls_allocate(src, port):
    """A real TLS client from src: handshake, then a signed Allocate over
    it. (the TLS socket, realm, nonce, key) once it was granted."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.bind((src, 0))
    raw.settimeout(5 * H.SLOW)
    raw.connect(("127.0.0.1", port))
    s = client_ctx().wrap_socket(raw, server_hostname="turn.test")
    cls, _, _, a = T.stun_tcp(s, T.message(T.ALLOCATE, os.urandom(12),
                                           [T.u32(T.A_TRANSPORT, 17 << 24)]))
    H.expect_eq((cls, T.error_code(a)), (T.ERROR, 401), f"unsigned Allocate over TLS from {src}")
    realm, nonce = a[T.A_REALM][0], a[T.A_NONCE][0]
    user, pw = T.rest_credentials(T.SECRET, "tlsrate")
    key = T.longterm_key(user, pw, realm.decode())
    cls, _, _, a = T.stun_tcp(s, T.message(T.ALLOCATE, os.urandom(12),
                                           T.signed(user, realm, nonce) +
                                           [T.u32(T.A_TRANSPORT, 17 << 24)], key=key))
    H.expect_eq((cls, T.error_code(a)), (T.SUCCESS, None), f"signed Allocate over TLS from {src}")
    return s, (user, realm, nonce, key)


def dropped(ops, reason):
    return T.value(T.metrics(ops)[1], "etrelay_turn_tcp_dropped_total", reason=reason)


def test(ctx):
    H.require_tool("openssl")
    key, cert = tlsutil.make_cert(ctx.tmpdir(), "turn.test")
    port, tls_port, ops = T.free_port(), H.free_tcp_port(), H.free_tcp_port()
    relay = T.start_relay(ctx, port, "--turn-tls-listen", f"127.0.0.1:{tls_port}",
                  "--turn-tls-cert", cert, "--turn-tls-key", key,
                  "--turn-tls-handshake-rate", str(RATE),
                  "--turn-tls-handshake-burst", str(BURST),
                  "--turn-tls-handshake-ip-rate", str(IP_RATE),
                  "--turn-tls-handshake-ip-burst", str(IP_BURST),
                  *H.turn_ports(10), "--ops-listen", f"127.0.0.1:{ops}")
    hello = canned_hello()
    H.check(hello[:1] == b"\x16", f"not a TLS handshake record: {hello[:8]!r}")

    # A client that authenticated before the floods.
    held, (user, realm, nonce, hkey) = tls_allocate("127.0.6.1", tls_port)

    # Handshakes cut off by the client after the server's flight: counted.
    before = T.value(T.metrics(ops)[1], "etrelay_turn_tls_failed_total")
    for k in range(3):
        got = hello_and_reset("127.0.3.1", tls_port, hello)
        H.check(got and got[:1] == b"\x16", f"cut-off handshake {k}: no server flight: {got[:8]!r}")
    H.wait_until(lambda: T.value(T.metrics(ops)[1], "etrelay_turn_tls_failed_total")
                 >= before + 3, 3 * H.SLOW, "3 cut-off handshakes counted in tls_failed")

    # One address floods; a real client from another completes TLS and an
    # Allocate meanwhile.
    res, stop = {}, threading.Event()
    th = threading.Thread(target=lambda: res.setdefault(
        "r", flood(["127.0.3.2"], tls_port, hello, 3 * FLOOD_S, 100000, stop)), daemon=True)
    t0 = time.monotonic()
    th.start()
    time.sleep(FLOOD_S / 2)
    legit, _ = tls_allocate("127.0.5.1", tls_port)
    legit.close()
    H.check(th.is_alive(), "the flood ended before the real client was through")
    time.sleep(FLOOD_S / 2)
    stop.set()
    th.join(10 * H.SLOW)
    took = time.monotonic() - t0
    H.check("r" in res, "the one-address flood did not end")
    n, flights, empty = res["r"]
    H.log(f"one address: {n} connections in {took:.1f} s, {flights} server flights, "
          f"{empty} closed without a byte")
    H.check(n >= 3 * (IP_BURST + IP_RATE * took), f"the flood made only {n} connections")
    H.check(flights <= IP_BURST + IP_RATE * took + 1,
            f"one address had {flights} handshakes in {took:.1f} s "
            f"(tls-handshake-ip-burst {IP_BURST}, -ip-rate {IP_RATE})")
    H.check(n - flights - empty <= 2, f"{n - flights - empty} connections got bytes but no "
            "server flight")
    # (with several workers, the listener's part on the flood's worker may
    # run out first: those are counted tls_rate)
    refused_ip, refused_all = dropped(ops, "tls_rate_ip"), dropped(ops, "tls_rate")
    H.check(refused_ip + refused_all >= empty and refused_ip >= empty - refused_all > 0,
            f"{empty} closed without a byte, {refused_ip} counted tls_rate_ip and "
            f"{refused_all} tls_rate")
    # The operator reads who it was in the log: one line a minute.
    relay.wait_for_line(r"^turn default: 127\.0\.3\.2:\d+ opens TLS connections faster than "
                        rf"tls-handshake-ip-rate {IP_RATE}/s", 2 * H.SLOW)

    # Many addresses, one connection each: the listener's budget.
    sources = [f"127.0.{10 + i // 250}.{i % 250 + 1}" for i in range(1000)]
    time.sleep(BURST / RATE + 0.1)  # the listener's bucket refills
    t0 = time.monotonic()
    n, flights, empty = flood(sources, tls_port, hello, FLOOD_S, len(sources))
    took = time.monotonic() - t0
    H.log(f"many addresses: {n} connections in {took:.1f} s, {flights} server flights, "
          f"{empty} closed without a byte")
    H.check(n >= 2 * (BURST + RATE * took), f"the flood made only {n} connections")
    H.check(flights <= BURST + RATE * took + 2,
            f"{flights} handshakes in {took:.1f} s (tls-handshake-burst {BURST}, -rate {RATE})")
    H.check(dropped(ops, "tls_rate") >= empty > 0,
            f"{empty} closed without a byte, {dropped(ops, 'tls_rate')} counted tls_rate")
    relay.wait_for_line(rf"^turn default: TLS handshakes over tls-handshake-rate {RATE}/s: "
                        r"new TLS connections closed at accept", 2 * H.SLOW)
    H.expect_eq(relay.count(r"opens TLS connections faster"), 1,
                "lines about one source's TLS rate within a minute")

    # The connection that authenticated before goes on.
    cls, _, _, a = T.stun_tcp(held, T.message(T.REFRESH, os.urandom(12),
                                              T.signed(user, realm, nonce), key=hkey))
    H.expect_eq((cls, T.error_code(a)), (T.SUCCESS, None), "Refresh on the held TLS connection")
    held.close()
    # Plain TCP from the flooding address is not limited by its TLS budget.
    for k in range(IP_BURST * 2):
        s = socket.create_connection(("127.0.0.1", port), timeout=3 * H.SLOW,
                                     source_address=("127.0.3.2", 0))
        cls, _, _, _ = T.stun_tcp(s, T.message(T.BINDING, os.urandom(12), []))
        s.close()
        H.expect_eq(cls, T.SUCCESS, f"Binding over TCP {k} from the flooding address")
    H.check(T.value(T.metrics(ops)[1], "etrelay_turn_tls_failed_total") >= before + 3 + flights,
            "the cut-off handshakes of the flood were not all counted")


if __name__ == "__main__":
    H.main(test)
