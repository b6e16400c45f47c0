#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The SNI listener under abuse (the attack round on 4fcaf87):
flood: 127.0.0.1 opens connections as fast as it can and sends nothing,
for 3 s, with max-connections 100 (its 64 prereads and every refusal it
earns); a client on 127.0.0.2 meanwhile gets every one of its hellos
echoed (refusals by a cap close at once, lingering ones count for their
address and a per-listener budget, so one address cannot fill the slots).
emfile: the relay's RLIMIT_NOFILE is lowered (prlimit) to a few fds over
what it holds; 40 held connections run it out of fds; its CPU over 2 s
stays under 30% of a core (the loop pauses accepting, counted in
etrelay_accept_pauses_total, instead of retrying at once) and, once the
held connections close, a new client is spliced. (io_uring takes the
limit when its multishot accept is armed, so there the lowered limit is
not reached: tests/unit/test_loop.c checks the pause on both backends.)
port_taken: a second etrelay (--workers 2) on a running one's SNI port,
and an etrelay (--workers 2, then 1) on a port a program listens on with
SO_REUSEPORT, exit 1 naming the listener and EADDRINUSE instead of
joining the port's SO_REUSEPORT group (and taking part of its
connections); the first relay still answers every client.
slow_many: 40 addresses (127.0.1.x) hold 30 silent connections each,
reopened as the relay closes them (1200 against max-preread 200, each
address under max-connections-per-ip); a real TLS client (python ssl,
through to a TLS echo backend) every 0.2 s for 4 s gets through every
time: at max-preread the oldest preread connection of the address that
holds the most gives way (preread_evicted), and a real client's hello
takes milliseconds.
reset: a backend sends 1 MiB then resets (SO_LINGER 0); the client reads
bytes, then a reset, not a clean EOF that would make the truncated
download look whole (ended reset)."""

import os
import resource
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import tlsutil as T  # noqa: E402


def start(ctx, name, extra):
    """A relay with one SNI listener [name] routing echo.test to an echo
    backend. Returns (relay, port, ops port, backend)."""
    tmp = ctx.tmpdir()
    echo = T.Backend()
    port, ops = H.free_tcp_port(), H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(f"[sni {name}]\nlisten {H.LOOPBACK}:{port}\n"
                f"route echo.test {H.LOOPBACK}:{echo.port}\n{extra}")
    relay = ctx.relay("-c", conf, "--ops-listen", f"{H.LOOPBACK}:{ops}", listen=False,
                      wait_ready=False, open_limits=False)
    relay.READY_RE = rf"^sni {name} listening on "
    relay.wait_ready()
    return relay, port, ops, echo


def echoed(port, src, timeout=3.0):
    """A hello from src reaches the echo backend and comes back: True, or
    why not."""
    h = T.hello("echo.test")
    c = socket.socket()
    try:
        c.settimeout(timeout)
        c.bind((src, 0))
        c.connect((H.LOOPBACK, port))
        c.sendall(h)
        back = b""
        while len(back) < len(h):
            b = c.recv(65536)
            if not b:
                return f"EOF after {len(back)} bytes"
            back += b
        return True if back == h else "different bytes"
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    finally:
        c.close()


def raise_own_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def flood(ctx):
    if raise_own_nofile() < 5000:
        raise H.TestSkip("the test needs 5000 file descriptors of its own")
    relay, port, ops, echo = start(ctx, "flood", "max-connections 100\npreread-timeout 3s\n")
    stop = threading.Event()
    held = []
    made = [0, 0]  # connections, errors

    def attack():
        t_end = time.monotonic() + 6
        while not stop.is_set() and time.monotonic() < t_end:
            s = socket.socket()
            s.setblocking(False)
            try:
                s.bind((H.LOOPBACK, 0))
                s.connect((H.LOOPBACK, port))
            except BlockingIOError:
                pass
            except OSError:
                made[1] += 1
                s.close()
                time.sleep(0.01)
                continue
            held.append(s)
            made[0] += 1
            if len(held) > 4000:
                held.pop(0).close()
            if made[0] % 20 == 0:
                time.sleep(0.001)

    t = threading.Thread(target=attack, daemon=True)
    t.start()
    time.sleep(0.8)
    answers = []
    t0 = time.monotonic()
    for _ in range(20):
        answers.append(echoed(port, "127.0.0.2"))
        time.sleep(0.1)
    took = time.monotonic() - t0
    stop.set()
    t.join(10)
    s = H.metrics_page(ops)[1]

    def conns(result):
        return H.metric_value(s, "etrelay_sni_connections_total", listener="flood", result=result)
    bad = [a for a in answers if a is not True]
    ctx.note(f"flood: 127.0.0.1 made {made[0]} connections in {took + 0.8:.1f} s; "
             f"127.0.0.2 got {len(answers) - len(bad)} of {len(answers)} answers; refused: "
             f"cap_per_ip {conns('cap_per_ip')}, no_resources {conns('no_resources')}, "
             f"cap_connections {conns('cap_connections')}")
    H.check(not bad, f"the client on 127.0.0.2 was refused {len(bad)} times of {len(answers)} "
            f"while 127.0.0.1 flooded: {bad[:3]}")
    H.check(conns("cap_per_ip") + conns("no_resources") > 500,
            f"the flood earned only {conns('cap_per_ip')} cap_per_ip refusals: not a flood")
    H.expect_eq(conns("no_resources"), 0, "no_resources refusals during the flood")
    for x in held:
        x.close()
    ctx.check_relays_alive()
    echo.stop = True


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def emfile(ctx):
    relay, port, ops, echo = start(ctx, "fds", "max-connections 100\npreread-timeout 20s\n")
    pid = relay.pid
    # The ops plane's first page, the backend's first connection: fds the
    # relay keeps or needs later are taken before the limit is lowered.
    H.metrics_page(ops)
    H.check(echoed(port, H.LOOPBACK) is True, "a hello before the limit")
    time.sleep(0.3)
    nfd = len(os.listdir(f"/proc/{pid}/fd"))
    try:
        hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)[1]
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (nfd + 6, hard))
    except (PermissionError, OSError) as e:
        raise H.TestSkip(f"prlimit on the relay: {e}")
    held = []
    for i in range(40):
        c = socket.socket()
        c.bind((f"127.0.0.{10 + i % 4}", 0))
        c.connect((H.LOOPBACK, port))
        held.append(c)
    H.wait_until(lambda: len(os.listdir(f"/proc/{pid}/fd")) >= nfd + 6, 5,
                 "the relay at its fd limit")
    time.sleep(0.3)
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(2)
    cpu = (cpu_seconds(pid) - c0) / (time.monotonic() - t0)
    ctx.note(f"emfile: relay CPU {100 * cpu:.0f}% of a core over 2 s at its fd limit")
    H.check(cpu < 0.30, f"relay CPU {100 * cpu:.0f}% of a core while out of fds (spinning?)")
    for c in held:
        c.close()
    H.wait_until(lambda: len(os.listdir(f"/proc/{pid}/fd")) < nfd + 3, 10 * H.SLOW,
                 "the held connections' fds freed")
    ok = None
    for _ in range(20):
        ok = echoed(port, H.LOOPBACK)
        if ok is True:
            break
        time.sleep(0.2)
    H.check(ok is True, f"a new client once fds are free: {ok}")
    s = H.metrics_page(ops)[1]
    pauses = H.metric_value(s, "etrelay_accept_pauses_total")
    # io_uring's multishot accept keeps the limit it was armed with.
    least = 1 if ctx.backend == "epoll" else 0
    H.check(pauses is not None and least <= pauses <= 100 * H.SLOW,
            f"etrelay_accept_pauses_total {pauses}: expected a pause per 100 ms out of fds")
    ctx.check_relays_alive()
    echo.stop = True


def loops(ctx):
    """A route back to an SNI listener is refused: -t names the line (a
    numeric upstream on the listener's own address, another on a wildcard
    listener's port), the start refuses a name that resolves to the host
    (localhost), and so does the command line."""
    tmp = ctx.tmpdir()
    port, wport = H.free_tcp_port(), H.free_tcp_port()
    conf = os.path.join(tmp, "loop.conf")
    with open(conf, "w") as f:
        f.write(f"[sni one]\nlisten {H.LOOPBACK}:{port}\nroute a.test {H.LOOPBACK}:1\n"
                f"route self.test {H.LOOPBACK}:{port}\n"
                f"[sni any]\nlisten 0.0.0.0:{wport}\nroute b.test 127.0.0.9:{wport}\n")
    rc, out, err = H.run_etrelay(ctx, ["-t", "-c", conf], timeout=5)
    H.expect_eq(rc, 78, f"-t with routes that loop (stderr {err!r})")
    H.check(f"{conf}:4: sni one: route self.test: upstream {H.LOOPBACK}:{port} is the SNI "
            f"listener one ({H.LOOPBACK}:{port}): a loop" in err, f"-t names line 4: {err!r}")
    H.check(f"{conf}:7: sni any: route b.test: upstream 127.0.0.9:{wport} is the SNI "
            f"listener any (0.0.0.0:{wport}): a loop" in err, f"-t names line 7: {err!r}")
    with open(conf, "w") as f:
        f.write(f"[sni any]\nlisten 0.0.0.0:{wport}\nroute c.test localhost:{wport}\n")
    rc, out, err = H.run_etrelay(ctx, ["-t", "-c", conf], timeout=5)
    H.expect_eq(rc, 0, f"-t does not resolve localhost (stderr {err!r})")
    rc, out, err = H.run_etrelay(ctx, ["--backend", ctx.backend, "-c", conf], timeout=10)
    H.expect_eq(rc, 78, f"a start with a route to localhost on the wildcard's port ({err!r})")
    H.check(f"{conf}:3: sni any: route c.test: upstream localhost:{wport} is the SNI listener "
            "any" in err, f"the start names line 3: {err!r}")
    rc, out, err = H.run_etrelay(ctx, ["-t", "--sni-listen", f"{H.LOOPBACK}:{port}",
                                       "--sni-route", f"x.test={H.LOOPBACK}:{port}"], timeout=5)
    H.expect_eq(rc, 78, f"--sni-route to --sni-listen (stderr {err!r})")
    H.check("etrelay: sni-route: route x.test: upstream" in err, f"the message: {err!r}")


def port_taken(ctx):
    relay, port, ops, echo = start(ctx, "first", "")

    def second(port, workers):
        rc, out, err = H.run_etrelay(ctx, ["--backend", ctx.backend, "--workers", str(workers),
                                           "--sni-listen", f"{H.LOOPBACK}:{port}"], timeout=5)
        H.expect_eq(rc, 1, f"an etrelay with {workers} workers on a taken port (stderr {err!r})")
        H.check(f"listen on {H.LOOPBACK}:{port} (TCP): Address already in use" in err,
                f"the message names the listener and EADDRINUSE: {err!r}")

    second(port, 2)
    bad = [a for a in (echoed(port, f"127.0.9.{i + 1}") for i in range(20)) if a is not True]
    H.check(not bad, f"the first relay after the second's try: {len(bad)} of 20 failed: {bad[:3]}")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind((H.LOOPBACK, H.free_tcp_port()))  # drawn: below the ephemeral ports
    s.listen(16)
    try:
        for workers in (2, 1):
            second(s.getsockname()[1], workers)
    finally:
        s.close()
    ctx.check_relays_alive()
    echo.stop = True


def slow_many(ctx):
    if raise_own_nofile() < 3000:
        raise H.TestSkip("the test needs 3000 file descriptors of its own")
    tls = T.TlsEcho(ctx, ctx.tmpdir(), "tls.test")
    relay, port, ops, echo = start(ctx, "slow", f"route tls.test {H.LOOPBACK}:{tls.port}\n"
                                   "max-preread 200\nmax-connections-per-ip 64\n")
    stop = threading.Event()
    opened = [0]

    def attack():
        socks = set()
        i = 0
        t_end = time.monotonic() + 15
        while not stop.is_set() and time.monotonic() < t_end:
            while len(socks) < 1200 and not stop.is_set():
                c = socket.socket()
                c.setblocking(False)
                c.bind((f"127.0.1.{i % 40 + 1}", 0))
                i += 1
                try:
                    c.connect((H.LOOPBACK, port))
                except BlockingIOError:
                    pass
                except OSError:
                    c.close()
                    break
                socks.add(c)
                opened[0] += 1
            time.sleep(0.05)
            for c in list(socks):
                try:
                    if c.recv(1) == b"":
                        socks.discard(c)
                        c.close()
                except BlockingIOError:
                    pass
                except OSError:
                    socks.discard(c)
                    c.close()
        for c in socks:
            c.close()

    t = threading.Thread(target=attack, daemon=True)
    t.start()
    H.wait_until(lambda: (H.metric_value(H.metrics_page(ops)[1], "etrelay_sni_preread_connections",
                                         listener="slow") or 0) >= 199, 10,
                 "the attack fills max-preread")
    ok, bad = 0, []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 4:
        try:
            ses = T.TlsSession(port, "tls.test", timeout=2)
            ses.echo("through the attack", 100)
            ses.close()
            ok += 1
        except H.TestFailure as e:
            bad.append(str(e)[:120])
        time.sleep(0.2)
    stop.set()
    t.join(20)
    s = H.metrics_page(ops)[1]

    def conns(result):
        return H.metric_value(s, "etrelay_sni_connections_total", listener="slow", result=result)
    ctx.note(f"slow_many: the attack opened {opened[0]} connections; the real client got "
             f"through {ok} of {ok + len(bad)}; preread_evicted {conns('preread_evicted')}, "
             f"cap_preread {conns('cap_preread')}")
    H.check(not bad, f"the real client failed {len(bad)} of {ok + len(bad)}: {bad[:2]}")
    H.check(conns("preread_evicted") >= 200, "the attack's connections were not churned")
    ctx.check_relays_alive()
    echo.stop = True


class Resetter(T.TcpServer):
    """An upstream that reads the hello, sends 1 MiB and resets."""

    def serve(self, a):
        try:
            a.settimeout(10)
            a.recv(65536)  # the hello
            a.sendall(b"x" * (1 << 20))
            a.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            a.close()
        except OSError:
            pass


def reset(ctx):
    be = Resetter(ctx, backlog=4)
    relay, port, ops, echo = start(ctx, "rst", f"route rst.test {H.LOOPBACK}:{be.port}\n")
    c = socket.create_connection((H.LOOPBACK, port), timeout=10)
    c.sendall(T.hello("rst.test"))
    got, how = 0, "timeout"
    try:
        while True:
            b = c.recv(65536)
            if not b:
                how = "EOF"
                break
            got += len(b)
    except ConnectionResetError:
        how = "reset"
    except socket.timeout:
        pass
    c.close()
    be.wait_served(1, 5)
    be.close()
    ctx.note(f"reset: the client read {got} bytes, then {how}")
    H.expect_eq(how, "reset", f"the client's end after {got} bytes of a reset upstream")
    H.check(got > 0, "the bytes before the reset")
    H.wait_until(lambda: H.metric_value(H.metrics_page(ops)[1], "etrelay_sni_connections_ended_total",
                                        listener="rst", reason="reset") == 1, 5,
                 "one connection ended reset")
    ctx.check_relays_alive()
    echo.stop = True


def test(ctx):
    H.run_parts(ctx, [flood, emfile, loops, port_taken, slow_many, reset])


if __name__ == "__main__":
    H.main(test)
