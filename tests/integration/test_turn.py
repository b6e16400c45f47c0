#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The TURN listener with coturn's own clients on loopback. One relay
(UDP and TCP, loopback peers allowed, ETRELAY_TURN_SECRET and _NEXT):
turnutils_stunclient gets its reflexive address (Binding); turnutils_uclient
against turnutils_peer over UDP with ChannelData, with Send indications
(-s, and 3000-byte ones), with padded ChannelData (-D), over TCP (-t, and -t -s; and two
Bindings sent a byte per write), with four clients (-m 4), client to
client (-y, no peer), with the NEXT secret: every message comes back
(tot_recv_msgs and "Total lost packets 0": uclient
exits 0 even on total loss). A wrong secret never completes an allocation
and is counted as an auth failure. A second relay without
--turn-allow-peer refuses the loopback peer with 403 (counted). /metrics
passes promtool and counts what was relayed; /lifecycle reports the live
allocations, public IP and transports. Drain: SIGTERM with live
allocations and --drain-timeout: a new Allocate gets 403 (counted as
drain), /readyz is 503, and the process leaves at the timeout; SIGTERM with
no allocation leaves at once. Rotation: secrets from _FILE files, NEXT
refused until SIGHUP reads it, then both accepted; a bad file on SIGHUP
keeps them. Limits: 508 past max-allocations (cap), 486 past user-quota
(quota); an allocation left alone ends at max-lifetime (expired). A
hand-made client (turnutil.StunClient) for 420, 401 to an expired
credential, 438, 442, 440, retransmission, 437, 441, MI-SHA256 and
strict-expiry."""

import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import turnutil as T  # noqa: E402


def start_relay(ctx, port, *args, **kw):
    """turnutil's relay; the coturn clients here all come from 127.0.0.1."""
    return T.start_relay(ctx, port, *args, shared_ip=True, **kw)


metrics, value = T.metrics, T.value


def test(ctx):
    T.require_coturn()
    port, ops = T.free_port(), H.free_tcp_port()
    port_b, ops_b = H.free_udp_port(), H.free_tcp_port()
    peer = T.Peer()
    ctx.objs.append(peer)
    relay = start_relay(ctx, port, "--turn-allow-peer", "127.0.0.1/32", *H.turn_ports(400),
                        "--ops-listen", f"127.0.0.1:{ops}")
    strict = start_relay(ctx, port_b, *H.turn_ports(100), "--ops-listen", f"127.0.0.1:{ops_b}",
                         tcp=False)

    # Everything at once: the clients do not share a user (the quota is
    # per userid) and the peer echoes whoever sends.
    jobs = {
        "udp": lambda: T.uclient(port, "u1", peer_port=peer.port),
        "send": lambda: T.uclient(port, "u2", peer_port=peer.port, opts=["-s"]),
        "padded": lambda: T.uclient(port, "u3", peer_port=peer.port, opts=["-D"]),
        # Data indications larger than a frame: built by copy, whole.
        "big": lambda: T.uclient(port, "u11", peer_port=peer.port, opts=["-s"], length=3000),
        "tcp": lambda: T.uclient(port, "u4", peer_port=peer.port, opts=["-t"]),
        "tcp_send": lambda: T.uclient(port, "u5", peer_port=peer.port, opts=["-t", "-s"]),
        "many": lambda: T.uclient(port, "u6", peer_port=peer.port, m=4),
        "c2c": lambda: T.uclient(port, "u7", opts=["-y"], m=2),
        "next": lambda: T.uclient(port, "u8", secret=T.SECRET_NEXT, peer_port=peer.port),
        "wrong": lambda: T.uclient(port, "u9", secret="w" * 40, peer_port=peer.port, n=2,
                                   timeout=20),
        "refused": lambda: T.uclient(port_b, "u10", peer_port=peer.port, n=2, timeout=20),
        "binding": lambda: T.stunclient(port),
    }
    names = list(jobs)
    res = dict(zip(names, T.parallel([jobs[k] for k in names])))

    want = {"udp": 10, "send": 10, "big": 10, "padded": 10, "tcp": 10, "tcp_send": 10, "many": 40,
            "c2c": 20, "next": 10}
    for k, n in want.items():
        H.check(res[k].ok(n), f"{k}: not every message came back: {res[k]!r}")
    rc, out = res["binding"]
    H.check(rc == 0 and "UDP reflexive addr: 127.0.0.1:" in out, f"binding: rc {rc}: {out}")
    # Over TCP, frames cut anywhere: two Bindings a byte at a time.
    H.expect_eq(T.tcp_bindings_bytewise(port), 2, "Binding answers over TCP, sent bytewise")
    H.check(res["wrong"].rc == 255 and res["wrong"].recv_msgs() in (None, 0) and
            "Cannot complete Allocation" in res["wrong"].out,
            f"a wrong secret got an allocation: {res['wrong']!r}")
    H.check("error 403" in res["refused"].out,
            f"a loopback peer without --turn-allow-peer was not refused: {res['refused']!r}")

    text, samples = metrics(ops)
    H.check(value(samples, "etrelay_turn_auth_failures_total", reason="bad_integrity") > 0,
            "the wrong secret's requests were not counted as bad_integrity")
    H.check(value(samples, "etrelay_turn_challenges_total") > 0, "no 401 challenge counted")
    # Every message went out and came back through the relay.
    H.check(value(samples, "etrelay_turn_relayed_datagrams_total", direction="to_peer") >= 120,
            "relayed datagrams to peers not counted")
    H.check(value(samples, "etrelay_turn_relayed_datagrams_total", direction="to_client") >= 120,
            "relayed datagrams to clients not counted")
    H.check(value(samples, "etrelay_turn_relayed_bytes_total", direction="to_peer") >= 120 * 101,
            "relayed bytes to peers not counted")
    active = value(samples, "etrelay_turn_allocations_active")
    # Each uclient client leaves its first ("probe") allocation behind.
    H.check(active >= 1, f"no live allocation counted ({active})")
    _, sb = metrics(ops_b)
    H.check(value(sb, "etrelay_turn_peer_rejected_total") >= 1,
            "the refused peer was not counted")
    promtool = shutil.which("promtool")
    if promtool:
        p = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=20)
        H.check(p.returncode == 0, f"promtool: {p.stdout.decode()} {p.stderr.decode()}")
    else:
        ctx.note("promtool not installed: the /metrics page was not linted")

    life = H.http_request(ops, "GET", "/lifecycle").json()
    H.expect_eq(life["state"], "active", "lifecycle state")
    H.expect_eq(life["details"]["public_ip"], "127.0.0.1", "lifecycle public IP")
    H.expect_eq(life["details"]["transports"], ["udp", "tcp"], "lifecycle transports")
    H.expect_eq(life["details"]["active_allocations"], active, "lifecycle active_allocations")
    H.expect_eq(life["turn_listeners"][0]["max_allocations"], 400, "max_allocations")

    # The rest at once: each part has a relay of its own.
    T.parallel([lambda: drain_part(ctx, peer), lambda: rotation_part(ctx, peer),
                lambda: limits_part(ctx, peer), lambda: protocol_part(ctx)])


def drain_part(ctx, peer):
    # SIGTERM with nothing to drain: at once, whatever --drain-timeout.
    idle = start_relay(ctx, H.free_udp_port(), *H.turn_ports(10), "--drain-timeout", "20s",
                       tcp=False)
    t0 = time.monotonic()
    idle.expect_exit = True
    idle.signal(signal.SIGTERM)
    H.expect_eq(idle.wait_exit(5 * H.SLOW), 0, "exit status of an idle TURN relay")
    H.check(time.monotonic() - t0 < 3 * H.SLOW, "an idle TURN relay waited on SIGTERM")

    # SIGTERM with live allocations: drain. New allocations get 403; the
    # process waits for the drain timeout (uclient's probe allocation is
    # never deleted, so it lasts to the end).
    ops_d = H.free_tcp_port()
    drain = start_relay(ctx, H.free_udp_port(), "--turn-allow-peer", "127.0.0.1/32",
                        *H.turn_ports(20), "--drain-timeout", "3s", "--ops-listen",
                        f"127.0.0.1:{ops_d}", tcp=False)
    first = T.uclient(drain_port(drain), "d1", peer_port=peer.port, n=3)
    H.check(first.ok(3), f"before the drain: {first!r}")
    drain.expect_exit = True
    t0 = time.monotonic()
    drain.signal(signal.SIGTERM)
    H.wait_until(lambda: H.http_request(ops_d, "GET", "/readyz").status == 503, 3 * H.SLOW,
                 "/readyz 503 while draining")
    late = T.uclient(drain_port(drain), "d2", peer_port=peer.port, n=2, timeout=20)
    H.check("error 403" in late.out and late.recv_msgs() in (None, 0),
            f"an Allocate while draining was not refused with 403: {late!r}")
    _, sd = metrics(ops_d)
    H.check(value(sd, "etrelay_turn_allocations_rejected_total", reason="drain") >= 1,
            "the refused Allocate was not counted as drain")
    rc = drain.wait_exit(10 * H.SLOW)
    H.expect_eq(rc, 0, "exit status after the drain")
    H.check(time.monotonic() - t0 >= 2.5, "the drain did not wait for the live allocations")




def rotation_part(ctx, peer):
    """The secrets from files, replaced on SIGHUP: NEXT is refused until it
    is set, then both work; a bad reload keeps them."""
    d = ctx.tmpdir()
    cur, nxt = os.path.join(d, "secret"), os.path.join(d, "next")

    def write(path, text):
        with open(path + ".tmp", "w") as f:
            f.write(text + "\n")
        os.chmod(path + ".tmp", 0o600)
        os.replace(path + ".tmp", path)

    write(cur, T.SECRET)
    write(nxt, "x" * 40)
    port = H.free_udp_port()
    relay = start_relay(ctx, port, "--turn-allow-peer", "127.0.0.1/32", *H.turn_ports(20),
                        tcp=False, secrets={"ETRELAY_TURN_SECRET_FILE": cur,
                                   "ETRELAY_TURN_SECRET_NEXT_FILE": nxt})
    before = T.uclient(port, "r1", secret=T.SECRET_NEXT, peer_port=peer.port, n=2, timeout=20)
    H.check("Cannot complete Allocation" in before.out,
            f"the next secret worked before it was set: {before!r}")
    write(nxt, T.SECRET_NEXT)
    mark = relay.mark()
    relay.signal(signal.SIGHUP)
    relay.wait_for_line(r"SIGHUP: TURN secrets reloaded", 5 * H.SLOW, start=mark)
    both = T.parallel([lambda: T.uclient(port, "r2", secret=T.SECRET_NEXT, peer_port=peer.port),
                       lambda: T.uclient(port, "r3", secret=T.SECRET, peer_port=peer.port)])
    for r in both:
        H.check(r.ok(10), f"after the reload: {r!r}")
    write(cur, "short")
    mark = relay.mark()
    relay.signal(signal.SIGHUP)
    relay.wait_for_line(r"SIGHUP: .*ETRELAY_TURN_SECRET_FILE.*keeping the previous TURN secrets",
                        5 * H.SLOW, start=mark)
    kept = T.uclient(port, "r4", secret=T.SECRET, peer_port=peer.port)
    H.check(kept.ok(10), f"a bad reload did not keep the secrets: {kept!r}")


def limits_part(ctx, peer):
    """max-allocations (508, cap), user-quota (486, quota), and expiry: an
    allocation nobody refreshes ends at max-lifetime."""
    ops = [H.free_tcp_port() for _ in range(3)]
    ports = [H.free_udp_port() for _ in range(3)]
    common = ["--turn-allow-peer", "127.0.0.1/32"]
    # Ten ports, five of them even (uclient asks for EVEN-PORT), two
    # allocations: the cap is what refuses.
    capped = start_relay(ctx, ports[0], *common, *H.turn_ports(10, allocations=False),
                           "--turn-max-allocations", "2", "--ops-listen", f"127.0.0.1:{ops[0]}",
                           tcp=False)
    quota = start_relay(ctx, ports[1], *common, *H.turn_ports(10), "--turn-user-quota", "1",
                          "--ops-listen", f"127.0.0.1:{ops[1]}", tcp=False)
    short = start_relay(ctx, ports[2], *common, *H.turn_ports(10), "--turn-max-lifetime", "2s",
                          "--ops-listen", f"127.0.0.1:{ops[2]}", tcp=False)
    runs = T.parallel([
        lambda: T.uclient(ports[0], "c1", peer_port=peer.port, m=2, n=2, timeout=20),
        lambda: T.uclient(ports[1], "q1", peer_port=peer.port, n=2, timeout=20),
        lambda: T.uclient(ports[2], "e1", peer_port=peer.port, n=2, timeout=20),
    ])
    H.check("error 508" in runs[0].out, f"no 508 past max-allocations: {runs[0]!r}")
    _, s = metrics(ops[0])
    H.check(value(s, "etrelay_turn_allocations_rejected_total", reason="cap") >= 1,
            "the refusal past max-allocations was not counted as cap")
    H.check(value(s, "etrelay_turn_allocations_active") <= 2, "more allocations than the cap")
    H.check("error 486" in runs[1].out, f"no 486 past user-quota: {runs[1]!r}")
    _, s = metrics(ops[1])
    H.check(value(s, "etrelay_turn_allocations_rejected_total", reason="quota") >= 1,
            "the refusal past user-quota was not counted as quota")

    def expired():
        _, s = metrics(ops[2])
        return (value(s, "etrelay_turn_allocations_active") == 0 and
                value(s, "etrelay_turn_allocations_expired_total") >= 1)

    H.wait_until(expired, 6 * H.SLOW, "the allocations to expire at max-lifetime 2s")


def protocol_part(ctx):
    """What coturn's clients never send, by a hand-made client: 420 for an
    unknown comprehension-required attribute, 401 for an expired
    credential's Allocate, 438 for a nonce not ours, 442 and 440, a
    retransmitted Allocate answered with the same bytes, 437 for a second
    one, 441 for another user, MESSAGE-INTEGRITY-SHA256 answered in kind, a
    credential that expires under a live allocation (it refreshes on,
    without strict-expiry; with it, the allocation ends at the expiry)."""
    ops, ops_s = H.free_tcp_port(), H.free_tcp_port()
    port, port_s = H.free_udp_port(), H.free_udp_port()
    start_relay(ctx, port, *H.turn_ports(10), "--ops-listen", f"127.0.0.1:{ops}", tcp=False)
    start_relay(ctx, port_s, *H.turn_ports(10), "--turn-strict-expiry", "yes",
                "--ops-listen", f"127.0.0.1:{ops_s}", tcp=False)
    transport = T.u32(T.A_TRANSPORT, 17 << 24)

    c = T.StunClient(port)
    _, (cls, _, _, a) = c.request(T.ALLOCATE, [transport, T.attr(0x0031, b"\0" * 4)])
    H.expect_eq((cls, T.error_code(a)), (T.ERROR, 420), "unknown required attribute")
    H.check(a[T.A_UNKNOWN][0][:2] == b"\x00\x31", f"UNKNOWN-ATTRIBUTES: {a!r}")
    realm, nonce = c.challenge()

    def sign(user, pw, attrs, tid=None, sha256=False, client=c, method=T.ALLOCATE, n=nonce):
        key = T.longterm_key(user, pw, realm.decode())
        return client.request(method, attrs + T.signed(user, realm, n), key=key, sha256=sha256,
                              tid=tid)

    def answer(r):
        _, (cls, _, _, a) = r
        return (cls, T.error_code(a))

    old = T.rest_credentials(T.SECRET, "late", lifetime=-10)
    H.expect_eq(answer(sign(*old, [transport])), (T.ERROR, 401), "an expired credential")
    good = T.rest_credentials(T.SECRET, "p1", lifetime=2)
    H.expect_eq(answer(sign(*good, [transport], n=b"x" * 48)), (T.ERROR, 438), "a bad nonce")
    H.expect_eq(answer(sign(*good, [T.u32(T.A_TRANSPORT, 6 << 24)])), (T.ERROR, 442),
                "REQUESTED-TRANSPORT TCP")
    H.expect_eq(answer(sign(*good, [transport, T.u32(T.A_FAMILY, 2 << 24)])), (T.ERROR, 440),
                "REQUESTED-ADDRESS-FAMILY IPv6")
    tid = os.urandom(12)
    first = sign(*good, [transport], tid=tid)
    H.expect_eq(answer(first), (T.SUCCESS, None), "Allocate")
    again = sign(*good, [transport], tid=tid)
    H.expect_eq(again[0], first[0], "the answer to a retransmitted Allocate")
    H.expect_eq(answer(sign(*good, [transport])), (T.ERROR, 437), "a second Allocate")
    other = T.rest_credentials(T.SECRET, "p2")
    H.expect_eq(answer(sign(*other, [T.u32(T.A_LIFETIME, 600)], method=T.REFRESH)),
                (T.ERROR, 441), "Refresh by another user")
    r = sign(*good, [T.u32(T.A_LIFETIME, 600)], method=T.REFRESH, sha256=True)
    H.expect_eq(answer(r), (T.SUCCESS, None), "Refresh with MESSAGE-INTEGRITY-SHA256")
    H.check(T.A_MI256 in r[1][3], "the answer to an MI-SHA256 request has no MI-SHA256")

    s = T.StunClient(port_s)
    realm_s, nonce_s = s.challenge()
    strict = T.rest_credentials(T.SECRET, "p3", lifetime=2)
    key_s = T.longterm_key(*strict, realm_s.decode())
    _, (cls, _, _, a) = s.request(T.ALLOCATE, [transport] + T.signed(strict[0], realm_s, nonce_s),
                                  key=key_s)
    H.expect_eq(cls, T.SUCCESS, "Allocate under strict-expiry")
    life = int.from_bytes(a[T.A_LIFETIME][0], "big")
    H.check(1 <= life <= 3, f"strict-expiry granted {life} s to a credential with 2 s left")

    time.sleep(3.2)  # both credentials expired
    H.expect_eq(answer(sign(*good, [T.u32(T.A_LIFETIME, 600)], method=T.REFRESH)),
                (T.SUCCESS, None), "Refresh with an expired credential, no strict-expiry")
    H.expect_eq(answer(sign(*good, [T.u32(T.A_LIFETIME, 0)], method=T.REFRESH)),
                (T.SUCCESS, None), "Refresh 0")
    H.expect_eq(answer(sign(*good, [T.u32(T.A_LIFETIME, 600)], method=T.REFRESH)),
                (T.ERROR, 437), "Refresh after Refresh 0")
    _, sm = metrics(ops)
    H.check(value(sm, "etrelay_turn_auth_failures_total", reason="expired") >= 1,
            "the expired credential's Allocate was not counted")
    H.check(value(sm, "etrelay_turn_auth_failures_total", reason="bad_nonce") >= 1,
            "the bad nonce was not counted as bad_nonce")
    H.check(value(sm, "etrelay_turn_auth_failures_total", reason="wrong_user") >= 1,
            "the other user was not counted")

    def strict_over():
        _, m = metrics(ops_s)
        return (value(m, "etrelay_turn_allocations_active") == 0 and
                value(m, "etrelay_turn_allocations_expired_total") == 1)

    H.wait_until(strict_over, 3 * H.SLOW, "the strict allocation to end at its expiry")


def drain_port(relay):
    """The UDP port a relay's TURN listener was started on."""
    i = relay.cmd.index("--turn-listen")
    return int(relay.cmd[i + 1].rsplit(":", 1)[1])


if __name__ == "__main__":
    H.main(test)
