#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Reflection limits of a TURN listener (issue 15, M3): answers to
unauthenticated requests over UDP (Binding, 401, 400 for an unknown method,
420) are larger than the requests and their source may be forged, so they
pass a per-source-IP bucket and a total one per listener. An Allocate
answered 508 is logged, once a minute per kind (M7); SIGTERM names the
TURN allocations it drains; a short secret's error has no "unset it".

Requests from thousands of source addresses of 127.0.0.0/8 (one socket
sending with IP_PKTINFO, so each request leaves from its own 127.x.y.z):
answers stay within the listener's burst plus its rate over the time
taken, counted as etrelay_turn_dropped_total{reason="throttled_total"};
the defaults hold too. One source sending many: its bucket holds
(reason="throttled"). Over TCP the same buckets, but past them the
connection is closed (tcp_dropped unauth_rate_ip)."""

import os
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import turnutil as T  # noqa: E402

BINDING, ALLOCATE, UNKNOWN_METHOD = 0x001, 0x003, 0x00F
IP_PKTINFO = 8
SLACK = 50  # answers: timing between the clock reads here and the relay's


def metrics(port):
    return T.metrics(port)[1]


def dropped(ops, reason):
    v = H.metric_value(metrics(ops), "etrelay_turn_dropped_total", listener="default",
                       reason=reason)
    H.check(v is not None, f"no etrelay_turn_dropped_total{{reason={reason}}}")
    return v


def request(i):
    """The i-th request: Binding, bare Allocate (401), an unknown method
    (400), a Binding with an unknown comprehension-required attribute (420)."""
    tid = struct.pack("!I", i) + os.urandom(8)
    kind = i % 4
    if kind == 0:
        return T.message(BINDING, tid, [], fingerprint=False)
    if kind == 1:
        return T.message(ALLOCATE, tid, [], fingerprint=False)
    if kind == 2:
        return T.message(UNKNOWN_METHOD, tid, [], fingerprint=False)
    return T.message(BINDING, tid, [T.attr(0x7ABC, b"")], fingerprint=False)


def flood(port, sources, first=0):
    """One request from each of `sources` addresses 127.9.x.y (from first
    on); (answers, seconds from the first send to the last answer)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 0))
    s.setblocking(False)
    got = 0
    t0 = time.monotonic()
    last = t0

    def drain():
        nonlocal got, last
        while True:
            try:
                s.recv(2048)
            except BlockingIOError:
                return
            got += 1
            last = time.monotonic()

    try:
        for i in range(first, first + sources):
            src = socket.inet_aton(f"127.9.{i // 250 % 250}.{1 + i % 250}")
            cm = [(socket.IPPROTO_IP, IP_PKTINFO, struct.pack("=I4s4s", 0, src, b"\0" * 4))]
            try:
                s.sendmsg([request(i)], cm, 0, ("127.0.0.1", port))
            except BlockingIOError:
                time.sleep(0.001)
            if i % 64 == 0:
                drain()
        end = time.monotonic() + 0.5 * H.SLOW
        while time.monotonic() < end:
            drain()
            time.sleep(0.005)
    finally:
        s.close()
    return got, last - t0


def relay_address_not_on_host(ctx):
    """M7: a relay-address the host does not have is a config error at the
    start and a warning from -t, naming the listener (every Allocate would
    be 508)."""
    port = T.free_port()
    for extra in (["-t"], []):
        rc, out, err = H.run_etrelay(ctx, extra + ["--backend", ctx.backend, "--turn-listen",
                                                   f"127.0.0.1:{port}", "--turn-relay-address",
                                                   "192.0.2.77"], env=T.env(), timeout=10)
        # -t only warns (it may check a file meant for another host)
        # a start exits 1, as on a listen address that is not this
        # host's (attack13 F6: 78, a configuration fault, it was)
        H.expect_eq(rc, 0 if extra else 1,
                    f"exit status with relay-address 192.0.2.77 {extra} ({err.strip()!r})")
        H.check("turn default: relay-address 192.0.2.77: not an address of this host" in err,
                f"no error naming relay-address {extra}: {err.strip()!r}")


def log_508(ctx):
    """M7: the first 508 of each kind is logged (the relayed port and the
    errno text of a bind failure; max-allocations reached), the next ones
    of that kind within a minute are not."""
    # two relayed ports (a worker's slice each with --workers 2), both taken
    port, hold = T.free_port(), []
    for _ in range(50):
        relayed = H.free_udp_port()
        try:
            for p in (relayed, relayed + 1):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                hold.append(s)
                s.bind(("127.0.0.1", p))
            break
        except OSError:
            for s in hold:
                s.close()
            hold = []
    H.check(len(hold) == 2, "no two free UDP ports in a row")
    relay = T.start_relay(ctx, port, "--turn-ports", f"{relayed}-{relayed + 1}",
                          "--turn-max-allocations", "2", tcp=False)
    transport = T.u32(T.A_TRANSPORT, 17 << 24)

    def allocate(c, userid):
        realm, nonce = c.challenge()
        user, pw = T.rest_credentials(T.SECRET, userid)
        key = T.longterm_key(user, pw, realm.decode())
        _, (cls, _, _, a) = c.request(T.ALLOCATE, [transport] + T.signed(user, realm, nonce),
                                      key=key)
        return cls, T.error_code(a)

    mark = relay.mark()
    for i in range(3):
        H.expect_eq(allocate(T.StunClient(port), f"b{i}"), (T.ERROR, 508),
                    f"Allocate {i} with the only relayed port taken")
    relay.wait_for_line(rf"turn default: Allocate answered 508: relayed socket: bind "
                        rf"127\.0\.0\.1:({relayed}|{relayed + 1}): Address already in use",
                        5 * H.SLOW, start=mark,
                        what="a log line naming the port and the errno text")
    for s in hold:
        s.close()
    time.sleep(0.2)
    H.expect_eq(relay.count(r"answered 508", start=mark), 1,
                f"508 log lines (one a minute): {relay.text_lines(mark)!r}")
    port = T.free_port()
    relay = T.start_relay(ctx, port, *H.turn_ports(10, allocations=False),
                          "--turn-max-allocations", "1", "--drain-timeout", "20s", tcp=False)
    mark = relay.mark()
    H.expect_eq(allocate(T.StunClient(port), "ok"), (T.SUCCESS, None), "the first Allocate")
    for i in range(3):
        H.expect_eq(allocate(T.StunClient(port), f"c{i}"), (T.ERROR, 508),
                    f"Allocate {i} past max-allocations 1")
    # the worker's table or the count across the workers: the cap either way
    relay.wait_for_line(r"turn default: Allocate answered 508: max-allocations 1 reached",
                        5 * H.SLOW, start=mark, what="a log line for the cap")
    time.sleep(0.2)
    H.expect_eq(relay.count(r"answered 508", start=mark), 1,
                f"508 log lines (one a minute): {relay.text_lines(mark)!r}")

    # SIGTERM names what it drains: a TURN allocation, not "sessions"
    mark = relay.mark()
    relay.signal(signal.SIGTERM)
    relay.wait_for_line(r"^(?:SIG)?TERM: draining 1 TURN allocation for up to \d+ ms$",
                        2.0 * H.SLOW, start=mark, what="the drain line naming the allocation")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0 * H.SLOW), 0, "exit status after a second SIGTERM")


def reason_508(ctx):
    """attacker7 finding 6: max-allocations as large as ports, two workers
    (a slice of the ports each, their tables as large): once max-allocations
    are live, a 508 is the cap's, in the log line and the metric's reason
    label, not "ports"; a 508 before that (a client whose worker's slice is
    full while the other has room) is the ports'."""
    port, ops = T.free_port(), H.free_tcp_port()
    lo, hi = H.free_udp_range(4)
    relay = T.start_relay(ctx, port, "--workers", "2", "--turn-ports", f"{lo}-{hi}",
                          "--turn-max-allocations", "4", "--ops-listen", f"127.0.0.1:{ops}",
                          tcp=False)
    transport = T.u32(T.A_TRANSPORT, 17 << 24)
    mark = relay.mark()
    ok, before, after = 0, 0, 0
    # sources 127.9.240.1.. spread over the workers (the address picks one)
    for i in range(40):
        c = T.StunClient(port)
        c.s.close()
        c.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        c.s.bind((f"127.9.240.{i + 1}", 0))
        c.s.settimeout(1.0)
        realm, nonce = c.challenge()
        user, pw = T.rest_credentials(T.SECRET, f"r{i}")
        key = T.longterm_key(user, pw, realm.decode())
        _, (cls, _, _, a) = c.request(T.ALLOCATE, [transport] + T.signed(user, realm, nonce),
                                      key=key)
        if cls == T.SUCCESS:
            ok += 1
        else:
            H.expect_eq(T.error_code(a), 508, f"Allocate {i}: error code")
            if ok < 4:
                before += 1
            else:
                after += 1
        if after >= 8:
            break
    H.expect_eq(ok, 4, "allocations with max-allocations 4 and 4 ports")
    H.check(after >= 8, f"only {after} Allocates after the cap was reached")
    s = metrics(ops)
    rej = {r: H.metric_value(s, "etrelay_turn_allocations_rejected_total", listener="default",
                             reason=r) for r in ("cap", "ports")}
    H.expect_eq(rej, {"cap": after, "ports": before},
                f"508 reasons ({before} before the cap was reached, {after} after)")
    relay.wait_for_line(r"turn default: Allocate answered 508: max-allocations 4 reached",
                        5 * H.SLOW, start=mark, what="the cap's 508 log line")
    if before:
        ports = "|".join(str(p) for p in range(lo, hi + 1))
        relay.wait_for_line(rf"turn default: Allocate answered 508: worker \d's ports "
                            rf"({ports})-({ports}) are all in use", 5 * H.SLOW, start=mark,
                            what="the ports' 508 log line")


def short_secret(ctx):
    """A TURN secret too short: the error names the variable and the
    minimum, and no way out by unsetting it (an ops token's wording)."""
    port = T.free_port()
    rc, out, err = H.run_etrelay(ctx, ["--backend", ctx.backend, "--turn-listen",
                                       f"127.0.0.1:{port}"],
                                 env={"ETRELAY_TURN_SECRET": "short"}, timeout=10)
    H.expect_eq(rc, 78, f"exit status with a 5-byte TURN secret ({err.strip()!r})")
    H.check("ETRELAY_TURN_SECRET: 5 bytes, at least 32 are needed" in err and "unset" not in err,
            f"the short-secret error: {err.strip()!r}")


def test(ctx):
    short_secret(ctx)
    relay_address_not_on_host(ctx)
    log_508(ctx)
    reason_508(ctx)
    port, ops = T.free_port(), H.free_tcp_port()
    port_d, ops_d = T.free_port(), H.free_tcp_port()
    T.start_relay(ctx, port, "--turn-unauth-rate", "100", "--turn-unauth-burst", "200",
                  *H.turn_ports(100, allocations=False), "--turn-max-allocations", "50",
                  "--ops-listen", f"127.0.0.1:{ops}")
    T.start_relay(ctx, port_d, *H.turn_ports(100, allocations=False), "--turn-max-allocations", "50",
                  "--ops-listen", f"127.0.0.1:{ops_d}")

    # TCP: the same buckets (each answer costs the thread, and requests
    # come pipelined), but past them the connection is closed, as a
    # withheld answer would leave a client waiting for good. From a source
    # of its own (20 at once, 10/s) on the defaults' relay, whose
    # listener's bucket is full (before the floods below).
    closed = H.metric_value(metrics(ops_d), "etrelay_turn_tcp_dropped_total",
                            listener="default", reason="unauth_rate_ip") or 0
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.bind(("127.9.252.1", 0))
    t.settimeout(5 * H.SLOW)
    t.connect(("127.0.0.1", port_d))
    t.sendall(b"".join(request(4 * i) for i in range(300)))
    # The answers queued behind the one being sent go with the close: the
    # relay's count of answers says how many there were.
    deadline, eof = time.monotonic() + 3 * H.SLOW, False
    while not eof and time.monotonic() < deadline:
        try:
            eof = t.recv(65536) == b""
        except ConnectionResetError:
            eof = True
        except socket.timeout:
            break
    t.close()
    H.check(eof, "the connection was not closed past the source's burst")
    n = H.metric_value(metrics(ops_d), "etrelay_turn_bindings_total", listener="default")
    H.check(15 <= n <= 22, f"{n} Binding answers over TCP from one source (its burst: 20)")
    H.wait_until(lambda: H.metric_value(metrics(ops_d), "etrelay_turn_tcp_dropped_total",
                                        listener="default", reason="unauth_rate_ip")
                 == closed + 1, 2 * H.SLOW, "the connection closed past unauth-ip-burst")

    # 3000 sources, one request each: the per-IP buckets never empty, the
    # listener's does.
    got, took = flood(port, 3000)
    bound = 200 + 100 * took + SLACK
    ctx.note(f"explicit limits: 3000 sources, {got} answers in {took:.2f} s (bound {bound:.0f})")
    H.check(got <= bound, f"{got} answers to 3000 sources in {took:.2f} s: more than the "
            f"burst 200 + 100/s ({bound:.0f})")
    H.check(got >= 150, f"only {got} answers: the burst of 200 should pass")
    H.check(dropped(ops, "throttled_total") >= 3000 - got - 50,
            "the withheld answers were not counted as throttled_total")
    H.expect_eq(dropped(ops, "throttled"), 0, "per-IP drops with one request per source")

    # The defaults: 2000/s, 4000 at once.
    got, took = flood(port_d, 12000)
    bound = 4000 + 2000 * took + SLACK
    ctx.note(f"defaults: 12000 sources, {got} answers in {took:.2f} s (bound {bound:.0f})")
    H.check(got <= bound, f"{got} answers to 12000 sources in {took:.2f} s: more than the "
            f"default burst 4000 + 2000/s ({bound:.0f})")

    # One source: its own bucket (20 at once, 10/s).
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    c.bind(("127.9.251.1", 0))
    c.settimeout(0.3 * H.SLOW)
    t0 = time.monotonic()
    for i in range(100):
        c.sendto(request(4 * i), ("127.0.0.1", port_d))
    n = 0
    try:
        while n < 100:
            c.recv(2048)
            n += 1
    except socket.timeout:
        pass
    took = time.monotonic() - t0
    c.close()
    H.check(n <= 20 + 10 * took + 2, f"one source got {n} Binding answers in {took:.2f} s")
    H.check(n >= 15, f"one source got only {n} answers: its burst is 20")
    H.check(dropped(ops_d, "throttled") >= 100 - n - 5, "per-IP drops were not counted")


if __name__ == "__main__":
    H.main(test)
