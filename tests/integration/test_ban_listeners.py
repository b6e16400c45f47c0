#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""ban-file covers every listener, not only the game relay (attacker9
finding 4). One etrelay with a game relay, an echo-only port
(--prbe-listen), an SNI listener and a TURN listener on UDP, TCP and TLS,
--ban-file naming 127.0.0.7:

  banned     127.0.0.7 gets nothing on any of them: no game echo, no PRBE
             echo, an SNI connection closed at accept without a byte, no
             TURN Binding answer over UDP, a TURN TCP connection closed
             without a byte, no TLS handshake on the TURNS port; each
             counted banned in its listener's drop family
             (dropped_datagrams, prbe_packets, sni_connections,
             turn_dropped, turn_tcp_dropped). 127.0.0.8 is served on each.
  peers      a CreatePermission and a ChannelBind for banned peer
             127.0.0.7 get 403 (peer_rejected); one for 127.0.0.9 is
             granted and the peer's datagram reaches the client.
  reload     127.0.0.9 holds a spliced SNI connection, a TURN TCP
             connection and a UDP allocation; the file then bans it too,
             SIGHUP: the SNI connection ends (ended{reason="banned"}), the
             TCP one is closed (tcp_dropped banned), its allocation ends
             (allocations_active down by one), and new attempts from it
             get nothing; as a peer its datagrams to 127.0.0.8's relayed
             port are dropped (turn_dropped banned) and its permission is
             not renewed (403). 127.0.0.8 is still served everywhere.

  burst      (attacker10 F3) a second etrelay, --workers 2, a game relay
             and an SNI listener: 20 times the file is rewritten and SIGHUP
             sent twice back to back (the second while a worker may still
             read the list before the last); each time the last file's
             bans are in force on both within a second, and no reload is
             refused ("try again").

    python3 test_ban_listeners.py <etrelay-binary> <io_uring|epoll>
"""

import os
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import tlsutil  # noqa: E402
import turnutil as T  # noqa: E402

BANNED, OK, LATER = "127.0.0.7", "127.0.0.8", "127.0.0.9"
NAME = "echo.test"


def write_file(path, text):
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


class Setup:
    pass


def start(ctx):
    H.require_tool("openssl")  # the TURNS pair
    s = Setup()
    d = ctx.tmpdir()
    s.bans = os.path.join(d, "bans")
    write_file(s.bans, f"# the test's\n{BANNED}\n")
    key, crt = tlsutil.make_cert(d, "turn.test")
    s.backend = tlsutil.Backend()
    ctx.objs.append(type("B", (), {"close": lambda self, b=s.backend: setattr(b, "stop", True)})())
    s.gs = ctx.game_server()
    master = ctx.master(challenge=False)
    s.echo = H.free_udp_port()
    s.sni = H.free_tcp_port()
    s.turn = T.free_port()
    s.tls = H.free_tcp_port()
    s.ops = H.free_tcp_port()
    s.tok = os.urandom(24).hex()
    env = dict(T.env(), ETRELAY_METRICS_TOKEN=s.tok)
    s.relay = H.relay_env(
        ctx, env, "--upstream", f"127.0.0.1:{s.gs.port}", "--master", f"127.0.0.1:{master.port}",
        "--ops-listen", f"127.0.0.1:{s.ops}", "--prbe-listen", f"127.0.0.1:{s.echo}",
        "--sni-listen", f"127.0.0.1:{s.sni}", "--sni-route", f"{NAME}=127.0.0.1:{s.backend.port}",
        "--turn-listen", f"127.0.0.1:{s.turn}", "--turn-tcp-listen", f"127.0.0.1:{s.turn}",
        "--turn-tls-listen", f"127.0.0.1:{s.tls}", "--turn-tls-cert", crt, "--turn-tls-key", key,
        *H.turn_ports(20, allocations=False), "--turn-max-allocations", "10",
        "--turn-tcp-max-connections", "64", "--max-sessions", "100",  # fds within the limit
        # a host address is a peer only when allowed alone: the 403 for
        # BANNED is then the ban's, not the policy's
        "--turn-allow-peer", f"{BANNED}/32", "--turn-allow-peer", f"{LATER}/32",
        "--ban-file", s.bans, open_limits=False)
    s.relay.wait_for_line(r"^ban-file .*: 1 entries", 3 * H.SLOW, what="the ban file loaded")
    s.relay.wait_for_line(r"^turn default listening on ", 5 * H.SLOW, what="the TURN listener")
    s.relay.wait_for_line(r"^server up: ", 10 * H.SLOW, what="the first probe answered")
    return s


def metrics(s):
    return H.get_metrics(s.ops, s.tok)


def banned_counts(s):
    m = metrics(s)
    return {
        "game": H.drops(m, "banned"),
        "prbe": H.counter(m, "etrelay_prbe_packets_total", port=f"127.0.0.1:{s.echo}",
                          result="banned"),
        "sni": H.counter(m, "etrelay_sni_connections_total", result="banned"),
        "sni_ended": H.counter(m, "etrelay_sni_connections_ended_total", reason="banned"),
        "turn": H.counter(m, "etrelay_turn_dropped_total", reason="banned"),
        "turn_tcp": H.counter(m, "etrelay_turn_tcp_dropped_total", reason="banned"),
        "peer_rejected": H.counter(m, "etrelay_turn_peer_rejected_total"),
        "allocations": H.counter(m, "etrelay_turn_allocations_active"),
    }


def udp_from(src, timeout=0.4):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((src, 0))
    u.settimeout(timeout)
    return u


def udp_ask(src, port, data, tries=2):
    """The answer to data from src (resent once), or None."""
    u = udp_from(src)
    try:
        for _ in range(tries):
            u.sendto(data, ("127.0.0.1", port))
            try:
                return u.recv(65536)
            except socket.timeout:
                continue
        return None
    finally:
        u.close()


def game(s, src):
    p = b"\x07\x00\x00\x00" + struct.pack("<H", 4000 + int(src.split(".")[-1])) + os.urandom(8)
    got = udp_ask(src, s.relay.port, p)
    return got == b"ECHO:" + p


def prbe(s, src):
    p = b"PRBE" + os.urandom(8)
    return udp_ask(src, s.echo, p) == p


def binding():
    return T.message(T.BINDING, os.urandom(12), [])


def turn_udp(s, src):
    got = udp_ask(src, s.turn, binding())
    return got is not None and T.parse(got)[0] == T.SUCCESS


def tcp_from(src, port):
    return socket.create_connection(("127.0.0.1", port), timeout=3 * H.SLOW,
                                    source_address=(src, 0))


def closed_silent(c):
    """The relay closed c without sending a byte (EOF or reset)."""
    try:
        got = c.recv(100)
    except ConnectionResetError:
        got = b""
    except socket.timeout:
        return False
    return got == b""


def exchange(src, port, data, want):
    """Send data on a new connection from src, read up to want bytes: what
    came back (b"" when the relay closed or reset it without a byte)."""
    got = b""
    with tcp_from(src, port) as c:
        try:
            c.sendall(data)
            while len(got) < want:
                b = c.recv(65536)
                if not b:
                    break
                got += b
        except (ConnectionResetError, BrokenPipeError):
            pass
    return got


def sni(s, src):
    h = tlsutil.hello(NAME)
    got = exchange(src, s.sni, h, len(h))
    return "spliced" if got == h else "closed" if got == b"" else f"bytes {got[:20]!r}"


def turn_tcp(s, src):
    got = exchange(src, s.turn, binding(), 20)
    return ("answered" if len(got) >= 20 and T.parse(got)[0] == T.SUCCESS else
            "closed" if got == b"" else f"bytes {got[:20]!r}")


def turn_tls(s, src):
    tc = ssl.create_default_context()
    tc.check_hostname = False
    tc.verify_mode = ssl.CERT_NONE
    try:
        with tc.wrap_socket(tcp_from(src, s.tls), server_hostname="turn.test") as c:
            cls = T.stun_tcp(c, binding())[0]
            return "answered" if cls == T.SUCCESS else "closed"
    except (ssl.SSLError, OSError):
        return "refused"


def every_listener(s, src):
    return {"game": game(s, src), "prbe": prbe(s, src), "sni": sni(s, src),
            "turn_udp": turn_udp(s, src), "turn_tcp": turn_tcp(s, src),
            "turn_tls": turn_tls(s, src)}


NOTHING = {"game": False, "prbe": False, "sni": "closed", "turn_udp": False,
           "turn_tcp": "closed", "turn_tls": "refused"}
SERVED = {"game": True, "prbe": True, "sni": "spliced", "turn_udp": True,
          "turn_tcp": "answered", "turn_tls": "answered"}


class TurnClient:
    """A UDP allocation from src: (relayed port), CreatePermission and
    ChannelBind, the Data indications it receives."""

    def __init__(self, s, src, userid):
        self.c = T.StunClient(s.turn)
        self.c.s.close()
        self.c.s = udp_from(src, timeout=1.0)
        realm, nonce = self.c.challenge()
        user, pw = T.rest_credentials(T.SECRET, userid)
        self.key = T.longterm_key(user, pw, realm.decode())
        self.auth = T.signed(user, realm, nonce)
        _, (cls, _, _, a) = self.c.request(T.ALLOCATE, [T.u32(T.A_TRANSPORT, 17 << 24)]
                                           + self.auth, key=self.key)
        H.expect_eq((cls, T.error_code(a)), (T.SUCCESS, None), f"Allocate from {src}")
        v = a[T.A_RELAYED][0]
        self.port = struct.unpack("!H", v[2:4])[0] ^ (T.COOKIE >> 16)

    def ask(self, method, *attrs):
        """The error code (None: success)."""
        _, (cls, _, _, a) = self.c.request(method, list(attrs) + self.auth, key=self.key)
        return None if cls == T.SUCCESS else T.error_code(a)

    def permit(self, ip):
        return self.ask(T.CREATE_PERMISSION, T.xor_peer(ip, 9))

    def bind(self, ip, port, ch):
        return self.ask(T.CHANNEL_BIND, T.u32(0x000C, ch << 16), T.xor_peer(ip, port))

    def data_from(self, peer):
        """peer (a socket) sends to the relayed port: whether it arrived."""
        p = os.urandom(16)
        for _ in range(2):
            peer.sendto(p, ("127.0.0.1", self.port))
            deadline = time.monotonic() + 0.5 * H.SLOW
            while time.monotonic() < deadline:
                try:
                    got = self.c.s.recv(65536)
                except socket.timeout:
                    break
                if p in got:
                    return True
        return False


def test(ctx):
    s = start(ctx)

    # banned / not banned, on every listener
    b0 = banned_counts(s)
    seen = every_listener(s, BANNED)
    H.expect_eq(seen, NOTHING, f"what banned {BANNED} got")
    time.sleep(0.2)
    b1 = banned_counts(s)
    grew = {k: b1[k] - b0[k] for k in ("game", "prbe", "sni", "turn", "turn_tcp")}
    ctx.note(f"banned {BANNED}: {seen}; counted banned {grew}")
    for k, v in grew.items():
        H.check(v >= 1, f"the banned source's drops on {k} were not counted banned: {grew}")
    H.expect_eq(every_listener(s, OK), SERVED, f"what {OK} (not banned) got")
    H.expect_eq(every_listener(s, LATER), SERVED, f"what {LATER} (not banned yet) got")

    # peers: a banned one refused, another carried
    a8 = TurnClient(s, OK, "ok")
    H.expect_eq(a8.permit(BANNED), 403, f"CreatePermission for banned peer {BANNED}")
    H.expect_eq(a8.bind(BANNED, 9, 0x4001), 403, f"ChannelBind for banned peer {BANNED}")
    H.expect_eq(a8.permit(LATER), None, f"CreatePermission for peer {LATER}")
    peer9 = udp_from(LATER)
    H.check(a8.data_from(peer9), f"peer {LATER}'s datagram did not reach {OK}")
    b2 = banned_counts(s)
    H.expect_eq(b2["peer_rejected"] - b1["peer_rejected"], 2, "peer_rejected for the banned peer")

    # what 127.0.0.9 holds open, then a reload that bans it
    sni9 = tcp_from(LATER, s.sni)
    h = tlsutil.hello(NAME)
    sni9.sendall(h)
    got = b""
    while len(got) < len(h):
        got += sni9.recv(65536) or b"!"
    H.expect_eq(got, h, f"{LATER}'s spliced SNI connection echo")
    tcp9 = tcp_from(LATER, s.turn)
    H.expect_eq(T.stun_tcp(tcp9, binding())[0], T.SUCCESS, f"{LATER}'s TURN TCP Binding")
    a9 = TurnClient(s, LATER, "later")
    H.expect_eq(banned_counts(s)["allocations"], 2, "allocations before the reload")

    before = banned_counts(s)
    write_file(s.bans, f"{BANNED}\n{LATER}\n")
    mark = s.relay.mark()
    os.kill(s.relay.pid, signal.SIGHUP)
    s.relay.wait_for_line(r"^ban-file .*: 2 entries", 3 * H.SLOW, start=mark,
                          what="the ban file reloaded")
    for c, what in ((sni9, "spliced SNI"), (tcp9, "TURN TCP")):
        c.settimeout(3 * H.SLOW)
        H.check(closed_silent(c), f"{LATER}'s {what} connection was not closed by the reload")
        c.close()
    H.wait_until(lambda: banned_counts(s)["allocations"] == 1, 3 * H.SLOW,
                 f"{LATER}'s UDP allocation to end at the reload")
    H.expect_eq(every_listener(s, LATER), NOTHING, f"what {LATER} got after the reload")
    H.check(not a8.data_from(peer9), f"banned peer {LATER}'s datagram was relayed")
    H.expect_eq(a8.permit(LATER), 403, f"renewing the permission of banned peer {LATER}")
    time.sleep(0.2)
    after = banned_counts(s)
    ctx.note(f"reload: before {before}, after {after}")
    H.check(after["sni_ended"] - before["sni_ended"] >= 1, "SNI ended{reason=banned}")
    H.check(after["turn_tcp"] - before["turn_tcp"] >= 2,
            "TURN tcp_dropped banned (the open one and a new one)")
    H.check(after["turn"] - before["turn"] >= 2,
            "TURN dropped banned (its Binding and its datagrams as a peer)")
    for k in ("game", "prbe", "sni"):
        H.check(after[k] > before[k], f"{k}: banned not counted after the reload")
    H.expect_eq(every_listener(s, OK), SERVED, f"what {OK} got after the reload")
    a9.c.close()
    peer9.close()
    a8.c.close()
    # the new labels pass promtool's check
    r = H.http_request(s.ops, "GET", "/metrics", token=s.tok)
    p = subprocess.run([H.require_tool("promtool"), "check", "metrics"], input=r.text.encode(),
                       capture_output=True, timeout=20)
    out = (p.stdout + p.stderr).decode("utf-8", "replace").strip()
    H.check(p.returncode == 0 and not out, f"promtool check metrics: {p.returncode}: {out[:2000]}")
    burst(ctx, s.backend)


def burst(ctx, backend):
    """Two SIGHUPs back to back, 20 times: the second one's file is in
    force each time (never refused while a worker still reads the list
    before the last)."""
    x, y, z = "127.0.0.10", "127.0.0.11", "127.0.0.12"
    bans = os.path.join(ctx.tmpdir(), "bans")
    write_file(bans, "# none\n")
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    port_sni = H.free_tcp_port()
    r = ctx.relay("--workers", "2", "--upstream", f"127.0.0.1:{gs.port}",
                  "--master", f"127.0.0.1:{master.port}", "--sni-listen", f"127.0.0.1:{port_sni}",
                  "--sni-route", f"{NAME}=127.0.0.1:{backend.port}", "--ban-file", bans)
    r.wait_for_line(r"^server up: ", 10 * H.SLOW, what="the burst relay's first probe")
    b = type("S", (), {"relay": r, "sni": port_sni})()

    def quick_game(src):
        p = b"\x07\x00\x00\x00" + os.urandom(10)  # a qport of its own
        u = udp_from(src, timeout=0.25 * H.SLOW)
        try:
            u.sendto(p, ("127.0.0.1", r.port))
            return u.recv(65536) == b"ECHO:" + p
        except socket.timeout:
            return False
        finally:
            u.close()

    H.check(quick_game(y), f"{y} not served before the burst")
    for i in range(20):
        mark = r.mark()
        write_file(bans, f"{x}\n")
        os.kill(r.pid, signal.SIGHUP)
        # the second a moment later, swept over the window in which the
        # first reload's list is being taken in by the other worker
        time.sleep((i % 5) * 0.0002)
        write_file(bans, f"{y}\n{z}\n")
        os.kill(r.pid, signal.SIGHUP)
        t0 = time.monotonic()
        r.wait_for_line(r"^ban-file .*: 2 entries", 1.0 * H.SLOW, start=mark,
                        what=f"burst {i}: the second file read within a second")
        # worker 0 logs it; the other worker takes it in a moment later
        H.wait_until(lambda: not quick_game(y) and sni(b, y) == "closed",
                     t0 + 1.0 * H.SLOW - time.monotonic(),
                     f"burst {i}: banned {y} refused by the game relay and the SNI listener")
    H.expect_eq(r.count(r"try again"), 0, "reloads refused (\"try again\")")
    H.check(quick_game(x), f"{x} (banned only by the file before the last) not served")
    again = r.count(r"the reload asked while the last was being taken in is done")
    ctx.note(f"burst: 20 double reloads, {again} done after the list before was let go")


if __name__ == "__main__":
    H.main(test)
