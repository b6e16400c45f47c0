#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""TURN over TLS (tls-listen) with coturn's client, and the certificate
reload. Certificates are made here with the openssl CLI. turnutils_uclient
-t -S relays to turnutils_peer over TLS (ChannelData and Send indications,
two clients, 3000-byte messages); openssl s_client sees the first certificate. The pair is
replaced on disk: s_client sees the new one within the reload interval
(500 ms), the reload is logged and counted, and a uclient session started
before the swap goes on to its end. A pair that does not load (a key of
another certificate) leaves the last good one served, logged with
OpenSSL's reason and counted as failed. Garbage instead of a ClientHello:
the connection is closed, counted, the daemon serves on. /lifecycle lists
the tls transport, /metrics passes promtool, and a pair that does not load
at start is a startup error."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import tlsutil  # noqa: E402
import turnutil as T  # noqa: E402

RELOAD = "500ms"


def make_pair(d, name):
    """A self-signed EC certificate for name.test and its key: (cert path,
    key path)."""
    key, cert = tlsutil.make_cert(d, name + ".test")
    return cert, key


def fingerprint_of_file(cert):
    p = subprocess.run(["openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in", cert],
                       capture_output=True, timeout=10)
    return p.stdout.decode().strip()


def served_fingerprint(port):
    """The SHA-256 fingerprint of the certificate s_client is shown."""
    s = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    x = subprocess.run(["openssl", "x509", "-noout", "-fingerprint", "-sha256"],
                       input=s.stdout, capture_output=True, timeout=10)
    return x.stdout.decode().strip()


def install(src, dst):
    """Replace dst with src's bytes in one rename."""
    shutil.copyfile(src, dst + ".tmp")
    os.replace(dst + ".tmp", dst)


metrics, value = T.metrics, T.value


def error_lines(err):
    """stderr's lines without the log's time stamp."""
    return [re.sub(r"^\d{4}-\d\d-\d\dT[\d:.]+[+-]\d\d:\d\d ", "", x)
            for x in err.splitlines() if x.strip()]


def refused_alike(ctx, args, want, what, rc_want=78):
    """-t and a start both refuse args (exit rc_want) with the same line,
    which contains want."""
    lines = {}
    for extra in (["-t"], []):
        rc, out, err = H.run_etrelay(ctx, extra + ["--backend", ctx.backend] + args,
                                     env=T.env(), timeout=10)
        H.expect_eq(rc, rc_want, f"{what} {extra}: exit status ({err.strip()!r})")
        H.check("is valid" not in out, f"{what} {extra}: said valid: {out!r}")
        got = [x for x in error_lines(err) if want in x]
        H.check(got, f"{what} {extra}: no line with {want!r}: {err.strip()!r}")
        lines[bool(extra)] = got[0]
    H.expect_eq(lines[True], lines[False], f"{what}: -t's line and the start's")


def check_refuses_what_start_refuses(ctx, d):
    """etrelay -t loads each TLS pair as the start does (issue 15,
    attacker7 finding 2): every pair the start refuses (exit 78, which
    stops the game relay and SNI listeners too) -t refuses in the same
    words; a config error for tls-cert without tls-listen and for a
    tls-listen on the ops-listen port, in -t and at the start."""
    cert, key = make_pair(d, "good")
    _, other_key = make_pair(d, "other")
    half = os.path.join(d, "half.crt")
    with open(cert, "rb") as f, open(half, "wb") as h:
        h.write(f.read()[:300])
    junk = os.path.join(d, "junk.key")
    with open(junk, "w") as f:
        f.write("junk\n")
    keydir = os.path.join(d, "keydir")
    os.mkdir(keydir)
    missing = os.path.join(d, "missing.pem")
    port, tls_port = T.free_port(), H.free_tcp_port()
    base = ["--turn-listen", f"127.0.0.1:{port}", *H.turn_ports(10),
            "--turn-tls-listen", f"127.0.0.1:{tls_port}"]
    for what, c, k, want in (
            ("missing cert", missing, key, f"{missing}: No such file or directory"),
            ("missing key", cert, missing, f"{missing}: No such file or directory"),
            ("key a directory", cert, keydir, f"{keydir}: not a regular file"),
            ("junk key", cert, junk, f"{junk}: "),
            ("half-written cert", half, key, f"{half}: "),
            ("key of another cert", cert, other_key,
             f"{other_key} does not match the certificate in {cert}"),
            ("cert and key swapped", key, cert, f"{key}: ")):
        refused_alike(ctx, base + ["--turn-tls-cert", c, "--turn-tls-key", k],
                      f"turn default: {want}", what)
    rc, out, err = H.run_etrelay(ctx, ["-t", "--backend", ctx.backend] + base +
                                 ["--turn-tls-cert", cert, "--turn-tls-key", key],
                                 env=T.env(), timeout=10)
    H.check(rc == 0 and "is valid" in out, f"-t with a good pair: rc {rc}: {out!r} {err!r}")

    # Config errors, naming the key and its line, in -t and at start.
    ops = H.free_tcp_port()
    lo, hi = H.free_udp_range(10)
    conf = os.path.join(d, "unused.conf")
    with open(conf, "w") as f:
        f.write(f"[turn t]\nlisten 127.0.0.1:{port}\nports {lo}-{hi}\n"
                f"max-allocations 10\ntls-cert {cert}\ntls-key {key}\n")
    refused_alike(ctx, ["-c", conf], f"{conf}:5: turn t: tls-cert: given without tls-listen",
                  "tls-cert without tls-listen")
    with open(conf, "w") as f:
        f.write(f"ops-listen 127.0.0.1:{ops}\n[turn t]\nlisten 127.0.0.1:{port}\n"
                f"ports {lo}-{hi}\nmax-allocations 10\ntls-listen 127.0.0.1:{ops}\n"
                f"tls-cert {cert}\ntls-key {key}\n")
    refused_alike(ctx, ["-c", conf],
                  f"{conf}:2: turn t: tls-listen 127.0.0.1:{ops}: the ops-listen address",
                  "tls-listen on the ops port")

    # A pair that does not load, from a file: on the line of the file the
    # message names (attacker9 finding 5), in -t and at the start alike.
    tls = H.free_tcp_port()
    for what, c, k, line, want in (
            ("key of another cert in a file", cert, other_key, 7,
             f"{other_key} does not match the certificate in {cert}"),
            ("half-written cert in a file", half, key, 6, f"{half}: ")):
        with open(conf, "w") as f:
            f.write(f"[turn t]\nlisten 127.0.0.1:{port}\nports {lo}-{hi}\nmax-allocations 10\n"
                    f"tls-listen 127.0.0.1:{tls}\ntls-cert {c}\ntls-key {k}\n")
        refused_alike(ctx, ["-c", conf], f"{conf}:{line}: turn t: {want}", what)

    # -t as root reads a key only root can read; the unit's DynamicUser
    # cannot: -t says so (a warning), and nothing for a group-readable key.
    if os.geteuid() == 0:
        with open(conf, "w") as f:
            f.write(f"[turn t]\nlisten 127.0.0.1:{port}\nports {lo}-{hi}\nmax-allocations 10\n"
                    f"tls-listen 127.0.0.1:{tls}\ntls-cert {cert}\ntls-key {key}\n")
        for mode, warned in ((0o600, True), (0o640, False)):
            os.chmod(key, mode)
            rc, out, err = H.run_etrelay(ctx, ["-t", "-c", conf], env=T.env(), timeout=10)
            said = f"{conf}:7: warning: turn t: tls-key {key}: only root can read it" in err
            H.check(rc == 0 and "is valid" in out and said == warned,
                    f"-t as root, key mode {mode:o}: rc {rc}, warning expected {warned}: "
                    f"{err.strip()!r}")
        os.chmod(key, 0o600)


def tls_uclient(port, user, peer, **kw):
    opts = ["-t", "-S"] + list(kw.pop("opts", ()))
    return T.uclient(port, user, peer_port=peer.port, opts=opts, **kw)


def test(ctx):
    H.require_tool("openssl")
    d = ctx.tmpdir()
    check_refuses_what_start_refuses(ctx, d)
    T.require_coturn()
    first, second, third = make_pair(d, "first"), make_pair(d, "second"), make_pair(d, "third")
    cert, key = os.path.join(d, "turn.crt"), os.path.join(d, "turn.key")
    install(first[0], cert)
    install(first[1], key)

    # A pair that does not load is a startup error naming the file.
    bad_key = os.path.join(d, "bad.key")
    install(third[1], bad_key)
    rc, out, err = H.run_etrelay(ctx, ["--backend", ctx.backend, "--turn-listen",
                                       f"127.0.0.1:{H.free_udp_port()}", "--turn-tls-listen",
                                       f"127.0.0.1:{H.free_tcp_port()}", "--turn-tls-cert",
                                       cert, "--turn-tls-key", bad_key], env=T.env())
    H.check(rc != 0 and bad_key in err, f"a mismatched pair at start: rc {rc}: {err}")

    port, tls_port, ops = H.free_udp_port(), H.free_tcp_port(), H.free_tcp_port()
    peer = T.Peer()
    ctx.objs.append(peer)
    relay = T.start_relay(ctx, port, "--turn-tls-listen", f"127.0.0.1:{tls_port}",
                          "--turn-tls-cert", cert, "--turn-tls-key", key,
                          "--turn-tls-reload-interval", RELOAD, "--turn-allow-peer",
                          "127.0.0.1/32", *H.turn_ports(100), "--ops-listen", f"127.0.0.1:{ops}",
                          tcp=False)
    fp = [fingerprint_of_file(p[0]) for p in (first, second, third)]
    H.check(fp[0] and fp[0] != fp[1], f"fingerprints {fp}")
    H.expect_eq(served_fingerprint(tls_port), fp[0], "the certificate served at start")

    # A session over TLS that lives across the swap (40 messages, about
    # 4 s), beside short ones: ChannelData, Send indications, two clients,
    # 3000-byte messages (records of a frame gathered from its parts).
    long_run = {}
    t = threading.Thread(target=lambda: long_run.setdefault(
        "r", tls_uclient(tls_port, "long", peer, n=40, timeout=60)), daemon=True)
    t.start()
    runs = T.parallel([lambda: tls_uclient(tls_port, "t1", peer),
                       lambda: tls_uclient(tls_port, "t2", peer, opts=["-s"]),
                       lambda: tls_uclient(tls_port, "t3", peer, m=2),
                       lambda: tls_uclient(tls_port, "t6", peer, length=3000)])
    for r, want in zip(runs, (10, 10, 20, 10)):
        H.check(r.ok(want), f"TURN over TLS: not every message came back: {r!r}")

    # The new pair: the key first, then the certificate (a check between
    # the two may fail once; the next one loads both).
    mark = relay.mark()
    install(second[1], key)
    install(second[0], cert)
    t0 = time.monotonic()
    H.wait_until(lambda: served_fingerprint(tls_port) == fp[1], 5 * H.SLOW,
                 "s_client to see the new certificate", interval=0.1)
    seen = time.monotonic() - t0
    H.check(seen < 3 * H.SLOW, f"the new certificate took {seen:.1f} s (interval {RELOAD})")
    relay.wait_for_line(r"turn default: certificate reloaded from " + re.escape(cert),
                        3 * H.SLOW, start=mark)
    t.join(60)
    H.check("r" in long_run and long_run["r"].ok(40),
            f"a session begun before the swap: {long_run.get('r')!r}")
    after = tls_uclient(tls_port, "t4", peer)
    H.check(after.ok(10), f"after the swap: {after!r}")

    _, s = metrics(ops)
    H.check(value(s, "etrelay_turn_tls_reloads_total", result="loaded") >= 1,
            "the reload was not counted as loaded")
    failed = value(s, "etrelay_turn_tls_reloads_total", result="failed")

    # A pair that does not load: another certificate's key.
    mark = relay.mark()
    install(third[1], key)
    relay.wait_for_line(r"turn default: certificate reload: .*" + re.escape(key) +
                        r".*the last good pair stays in force", 3 * H.SLOW, start=mark)
    H.expect_eq(served_fingerprint(tls_port), fp[1], "the certificate served after a bad pair")
    _, s = metrics(ops)
    H.check(value(s, "etrelay_turn_tls_reloads_total", result="failed") >= failed + 1,
            "the bad pair was not counted as failed")
    kept = tls_uclient(tls_port, "t5", peer, n=3)
    H.check(kept.ok(3), f"with the bad pair on disk: {kept!r}")

    # Garbage where a ClientHello belongs: closed, nothing but perhaps an
    # alert back, counted; the daemon serves on.
    g = socket.create_connection(("127.0.0.1", tls_port), timeout=5 * H.SLOW)
    g.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n" + os.urandom(200))
    got, closed = b"", False
    deadline = time.monotonic() + 5 * H.SLOW
    while time.monotonic() < deadline and len(got) < 4096:
        try:
            b = g.recv(4096)
        except ConnectionResetError:
            closed = True
            break
        if not b:
            closed = True
            break
        got += b
    g.close()
    H.check(closed, "garbage on the TLS port did not close the connection")
    H.check(len(got) <= 7 and (not got or got[0] == 0x15),
            f"garbage got more than an alert back: {got!r}")
    H.check(relay.alive(), "etrelay died on garbage")
    H.expect_eq(served_fingerprint(tls_port), fp[1], "the certificate after garbage")

    text, s = metrics(ops)
    H.check(value(s, "etrelay_turn_tls_failed_total") >= 1, "the garbage was not counted")
    H.check(value(s, "etrelay_turn_relayed_datagrams_total", direction="to_client") >= 103,
            "relayed datagrams over TLS not counted")
    promtool = shutil.which("promtool")
    if promtool:
        p = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=20)
        H.check(p.returncode == 0, f"promtool: {p.stdout.decode()} {p.stderr.decode()}")
    else:
        ctx.note("promtool not installed: the /metrics page was not linted")
    life = H.http_request(ops, "GET", "/lifecycle").json()
    H.expect_eq(life["details"]["transports"], ["udp", "tls"], "lifecycle transports")

    # SIGHUP (systemctl reload) reads the pair now, as the interval's check
    # does, and says what it found (attacker9 finding 6): reloaded,
    # unchanged, or failed with the old pair kept.
    hcert, hkey = os.path.join(d, "hup.crt"), os.path.join(d, "hup.key")
    install(first[0], hcert)
    install(first[1], hkey)
    hport, htls = H.free_udp_port(), H.free_tcp_port()
    hup = T.start_relay(ctx, hport, "--turn-tls-listen", f"127.0.0.1:{htls}",
                        "--turn-tls-cert", hcert, "--turn-tls-key", hkey,
                        "--turn-tls-reload-interval", "1h", *H.turn_ports(10), tcp=False)
    H.expect_eq(served_fingerprint(htls), fp[0], "the certificate served before SIGHUP")
    install(second[1], hkey)
    install(second[0], hcert)
    for want, served in ((r"SIGHUP: turn default: certificate reloaded from " + re.escape(hcert),
                          fp[1]),
                         (r"SIGHUP: turn default: certificate unchanged", fp[1])):
        mark = hup.mark()
        hup.signal(signal.SIGHUP)
        hup.wait_for_line(want, 3 * H.SLOW, start=mark)
        H.expect_eq(served_fingerprint(htls), served, f"the certificate served after {want!r}")
    install(third[1], hkey)
    mark = hup.mark()
    hup.signal(signal.SIGHUP)
    hup.wait_for_line(r"SIGHUP: turn default: certificate reload: .*" + re.escape(hkey) +
                      r".*the last good pair stays in force", 3 * H.SLOW, start=mark)
    H.expect_eq(served_fingerprint(htls), fp[1], "the certificate served after a bad SIGHUP")
    mark = hup.mark()
    hup.signal(signal.SIGTERM)
    H.check(hup.wait_exit(5 * H.SLOW) == 0, "the SIGHUP relay did not exit cleanly")
    # at exit the listener logs its stats line, as a game relay's `stats NAME`
    hup.wait_for_line(r"stats turn default: allocations 0, rejected 0; to peers 0 pkts 0 B; "
                      r"to clients 0 pkts 0 B; dropped 0; TCP and TLS connections dropped 0; "
                      r"TLS failed \d+", 2 * H.SLOW, start=mark)

    # tcp-max-per-ip on the TLS port: with workers, the program that picks
    # a worker by address steers TLS connections too, so one address meets
    # the cap on one worker (else each worker let it have 3).
    port2, tls2, ops2 = H.free_udp_port(), H.free_tcp_port(), H.free_tcp_port()
    T.start_relay(ctx, port2, "--turn-tls-listen", f"127.0.0.1:{tls2}", "--turn-tls-cert",
                  first[0], "--turn-tls-key", first[1], "--turn-tcp-max-per-ip", "3",
                  *H.turn_ports(10), "--ops-listen", f"127.0.0.1:{ops2}", tcp=False)
    conns = [socket.create_connection(("127.0.0.1", tls2), timeout=2) for _ in range(10)]
    try:
        H.wait_until(lambda: value(metrics(ops2)[1], "etrelay_turn_tcp_dropped_total",
                                   reason="per_ip") >= 7, timeout=3 * H.SLOW,
                     what="7 of 10 TLS connections from one address refused per_ip")
        time.sleep(0.2)
        H.expect_eq(value(metrics(ops2)[1], "etrelay_turn_tcp_dropped_total", reason="per_ip"),
                    7, "TLS connections of one address refused (tcp-max-per-ip 3, 10 tries)")
    finally:
        for c in conns:
            c.close()


if __name__ == "__main__":
    H.main(test)
