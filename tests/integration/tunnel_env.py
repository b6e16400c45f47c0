# SPDX-License-Identifier: ISC
"""What the tunnel tests share (test_tunnel, test_tunnel_cert,
test_tunnel_rung2, test_tunnel_rung3, test_tunnel_e2e): the tools they
need, the relay's namespace with its wireguard-go interface, a relay
started on it, a gateway (a namespace of its own with its own
wireguard-go), the control-plane stand-in's files and certificate signer,
and rung 3's client (udpws_client.py: a bridge and a probe)."""

import base64
import json
import os
import re
import shutil
import subprocess
import threading
import time

import harness as H

HERE = os.path.dirname(os.path.abspath(__file__))
DEBIAN_PYTHON = "/usr/bin/python3"
CLIENT = os.path.join(HERE, "udpws_client.py")
NAME = "tunnel.relay-7.relays.test"  # the tunnel certificate's name (relay-7: the stand-in's id)
INTERVAL = 0.5  # --control-interval, seconds

# The Debian package of each program a tunnel test runs.
PACKAGES = {"wireguard-go": "wireguard-go", "wg": "wireguard-tools", "nft": "nftables"}


def T(seconds):
    return seconds * H.SLOW


def key():
    return base64.b64encode(os.urandom(32)).decode()


def need(*progs, ping=False, websockets=False):
    """Skip (77) without wireguard-go, wg or another of progs; fail
    without ping when the test pings (the README's command installs it: its
    absence is a broken install, a fresh Debian has none); skip without
    /usr/bin/python3's websockets when the test runs rung 3's client."""
    for prog in ("wireguard-go", "wg") + progs:
        if not shutil.which(prog):
            raise H.TestSkip(f"{prog} not installed (Debian: {PACKAGES.get(prog, prog)})")
    if ping and not shutil.which("ping"):
        raise H.TestFailure("ping not installed (Debian: iputils-ping, in the README's command)")
    if websockets and subprocess.run([DEBIAN_PYTHON, "-c", "import websockets"],
                                     capture_output=True, timeout=30).returncode != 0:
        raise H.TestSkip("no websockets for /usr/bin/python3 (Debian: python3-websockets)")


def stop_process(p):
    """p terminated (killed after 5 s), and waited for."""
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


class WireguardGo:
    """wireguard-go in the foreground in namespace ns, for interface ifname
    (its output into file log, when given); close() stops it (the interface
    and its socket go with it)."""

    def __init__(self, ns, ifname, log=None):
        self.sock = f"/var/run/wireguard/{ifname}.sock"
        out = open(log, "w") if log else subprocess.DEVNULL
        try:
            self.p = subprocess.Popen(ns.wrapper() + ["wireguard-go", "-f", ifname], stdout=out,
                                      stderr=subprocess.STDOUT if log else subprocess.DEVNULL)
        finally:
            if log:
                out.close()
        H.wait_until(lambda: os.path.exists(self.sock) or self.p.poll() is not None, T(5),
                     f"wireguard-go's socket {self.sock}")
        if self.p.poll() is not None:
            raise H.TestSkip(f"wireguard-go exited with status {self.p.returncode}")

    def close(self):
        stop_process(self.p)


def relay_namespace(ctx, prefix="etw", lo=False):
    """(namespace, interface name): the relay's namespace (H.VethNetns)
    with a wireguard-go interface PREFIX<pid> in it, stopped with ctx; lo
    up when asked (rung 3 reaches WireGuard on loopback)."""
    ns = H.VethNetns()
    if lo:
        r = subprocess.run([ns.ip, "-n", ns.name, "link", "set", "lo", "up"],
                           capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            raise H.TestFailure(f"lo up in the relay's namespace: {r.stderr.strip()}")
    ifname = f"{prefix}{os.getpid() % 100000}"
    ctx.objs.append(WireguardGo(ns, ifname))
    return ns, ifname


def tunnel_conf(ifname, wg_port):
    """A [tunnel] section on ifname: WireGuard port wg_port, 10.8.0.1/24."""
    return f"[tunnel]\ninterface {ifname}\nlisten-port {wg_port}\naddress 10.8.0.1/24\n"


def control_files(tmp):
    """(environment, state directory) of a relay enrolled with the
    control-plane stand-in: a token file (0600) and an empty state
    directory in tmp."""
    tokf = os.path.join(tmp, "token")
    with open(os.open(tokf, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("ctl-" + "c" * 40 + "\n")
    state = os.path.join(tmp, "state")
    os.mkdir(state, 0o700)
    return dict(H.CONTROL_NO_PROXY, ETRELAY_CONTROL_TOKEN_FILE=tokf), state


def control_args(cp, state, timeout="1s"):
    """The options that make a relay heartbeat cp every INTERVAL."""
    return ["--control-url", cp.url, "--state-directory", state,
            "--control-interval", f"{int(INTERVAL * 1000)}ms", "--control-timeout", timeout]


def start_relay(ctx, ns, env, *args):
    """etrelay with args in namespace ns (no game listener, the default
    limits), ready once it says "tunnel on"; the Relay."""
    relay = H.relay_env(ctx, env, *args, listen=False, open_limits=False, wait_ready=False,
                        wrapper=ns.wrapper())
    relay.READY_RE = r"^tunnel on "
    relay.wait_ready(T(5))
    return relay


def public_key(relay, ifname, wg_port):
    """The relay's WireGuard public key, from its "tunnel on" line."""
    m = re.search(rf"^tunnel on {ifname} \(uapi\), WireGuard port {wg_port}, .*public key "
                  r"(\S+)$", "\n".join(relay.text_lines()), re.M)
    if not m:
        raise H.TestFailure("no 'tunnel on IF (uapi), WireGuard port P, ..., public key K' line")
    return m.group(1)


def wg_dump(ns, ifname):
    """(public key, listen port), {peer key: (psk or None, sorted allowed IPs)}."""
    p = subprocess.run(ns.wrapper() + ["wg", "show", ifname, "dump"], capture_output=True,
                       text=True, timeout=10)
    if p.returncode != 0:
        raise H.TestFailure(f"wg show {ifname}: {p.stderr.strip()}")
    lines = p.stdout.splitlines()
    dev = lines[0].split("\t")
    peers = {}
    for line in lines[1:]:
        f = line.split("\t")
        peers[f[0]] = (None if f[1] == "(none)" else f[1],
                       sorted(f[3].split(",")) if f[3] != "(none)" else [])
    return (dev[1], int(dev[2])), peers


class Gateway:
    """A gateway: a namespace of its own joined to the relay's (relay_ns)
    by a veth pair (relay side 10.214.O.1/30, gateway side .2/30), its own
    wireguard-go interface with a key of its own and tunnel address
    10.8.0.2/24. connect(pub, port) points it at the relay's WireGuard
    port; close() stops it and deletes the namespace."""

    def __init__(self, ctx, relay_ns):
        tag = f"{os.getpid() % 100000}"
        self.ip = relay_ns.ip
        self.name = f"etrelay-g{tag}"
        self.ifname = f"etg{tag}"
        self.wgo = None
        octet = 4 * (os.getpid() % 60 + 1)
        self.relay_ip, self.gw_ip = f"10.214.{octet}.1", f"10.214.{octet}.2"
        ctx.objs.append(self)
        ra, ga = f"etga{tag}", f"etgb{tag}"
        steps = [
            ["netns", "add", self.name],
            ["-n", relay_ns.name, "link", "add", ra, "type", "veth", "peer", "name", ga,
             "netns", self.name],
            ["-n", relay_ns.name, "addr", "add", f"{self.relay_ip}/30", "dev", ra],
            ["-n", relay_ns.name, "link", "set", ra, "up"],
            ["-n", self.name, "addr", "add", f"{self.gw_ip}/30", "dev", ga],
            ["-n", self.name, "link", "set", ga, "up"],
            ["-n", self.name, "link", "set", "lo", "up"],
        ]
        self.created = False
        for i, st in enumerate(steps):
            r = subprocess.run([self.ip] + st, capture_output=True, text=True, timeout=10)
            if r.returncode != 0:
                raise H.TestFailure(f"ip {' '.join(st)}: {r.stderr.strip()}")
            self.created = True
        self.wgo = WireguardGo(self, self.ifname)
        priv = subprocess.run(["wg", "genkey"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        self.pub = subprocess.run(["wg", "pubkey"], input=priv, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        self.keyfile = os.path.join(ctx.tmpdir(), "gw.key")
        with open(os.open(self.keyfile, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(priv + "\n")
        self.run("ip", "addr", "add", "10.8.0.2/24", "dev", self.ifname)
        self.run("ip", "link", "set", self.ifname, "up")

    def wrapper(self):
        return [self.ip, "netns", "exec", self.name]

    def run(self, *argv):
        r = subprocess.run(self.wrapper() + list(argv), capture_output=True, text=True,
                           timeout=10)
        if r.returncode != 0:
            raise H.TestFailure(f"gateway: {' '.join(argv)}: {r.stderr.strip()}")
        return r.stdout

    def connect(self, pub, port, host=None):
        """The relay (pub) as the peer, at host:port (the relay's address
        on the gateway's veth pair unless host is given)."""
        self.run("wg", "set", self.ifname, "private-key", self.keyfile, "peer", pub,
                 "endpoint", f"{host or self.relay_ip}:{port}", "allowed-ips", "10.8.0.1/32",
                 "persistent-keepalive", "1")

    def forget(self, pub):
        """The peer pub removed from the gateway's interface, its session
        with it: the next connect() starts with a handshake."""
        self.run("wg", "set", self.ifname, "peer", pub, "remove")

    def handshake(self, pub):
        """The unix time of the last handshake with peer pub (0: none)."""
        for line in self.run("wg", "show", self.ifname, "latest-handshakes").splitlines():
            f = line.split("\t")
            if f[0] == pub:
                return int(f[1])
        return 0

    def close(self):
        if self.wgo:
            self.wgo.close()
        if self.created:
            subprocess.run([self.ip, "netns", "del", self.name], capture_output=True, timeout=10)
            self.created = False


def pings(ns, addr):
    """One ping from namespace ns to addr answered within a second."""
    return subprocess.run(ns.wrapper() + ["ping", "-n", "-q", "-c", "1", "-W", "1", addr],
                          capture_output=True, timeout=10).returncode == 0


class Signer:
    """The stand-in's RequestCertificate: the answers of plan, one per
    request (the last repeated), each ("status", N), ("san", NAME, s) for
    a chain naming NAME for s seconds. Records each request (monotonic
    time, the chain's validity or None, wall time, monotonic time of the
    answer: the relay's wait starts there, after the signing)."""

    def __init__(self, ctx, plan):
        self.dir = ctx.tmpdir()
        self.plan = list(plan)
        self.lock = threading.Lock()
        self.seen = []
        self.pipe = threading.Lock()
        r = subprocess.run([DEBIAN_PYTHON, os.path.join(HERE, "certsign.py"), "init", self.dir],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise H.TestFailure(f"certsign.py init: {r.stderr.strip()}")
        self.p = subprocess.Popen([DEBIAN_PYTHON, os.path.join(HERE, "certsign.py"), "serve",
                                   self.dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        ctx.objs.append(self)

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=5)

    def __call__(self, csr):
        t = time.monotonic()
        with self.lock:
            step = self.plan[min(len(self.seen), len(self.plan) - 1)]
            self.seen.append([t, None, time.time(), t])
            rec = self.seen[-1]
        if step[0] == "status":
            return step[1], {"code": "unavailable", "message": "scripted"}
        with self.pipe:  # one request at a time through the pipe
            self.p.stdin.write(json.dumps({"csr": csr, "san": step[1], "lifetime": step[2]}) +
                               "\n")
            self.p.stdin.flush()
            r = json.loads(self.p.stdout.readline() or '{"error": "certsign.py exited"}')
        if "error" in r:
            # The request named something: say so in the relay's log.
            return 400, {"code": "invalid_argument", "message": r["error"][:200]}
        rec[1] = (r["nb"], r["na"])
        rec[3] = time.monotonic()
        return 200, {"certificateChain": r["chain"]}

    def times(self):
        with self.lock:
            return [s[0] for s in self.seen]

    def gaps(self):
        """From each answer to the next request."""
        with self.lock:
            return [b[0] - a[3] for a, b in zip(self.seen, self.seen[1:])]


class Bridge:
    """udpws_client.py bridge in the gateway's namespace."""

    def __init__(self, gw, listen, addr, token):
        self.p = subprocess.Popen(gw.wrapper() + [DEBIAN_PYTHON, CLIENT, "bridge", listen, addr,
                                                  NAME, "/t", token],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)

    def close(self):
        stop_process(self.p)


def bridge_open(ctx, gw, listen, addr, token):
    """A Bridge from listen to the relay's SNI listener at addr, upgraded:
    the name is served from the heartbeat after the certificate, so it is
    tried again until one is (bounded)."""
    def up():
        b = Bridge(gw, listen, addr, token)
        ctx.objs.append(b)
        line = b.p.stdout.readline().strip()
        if line != "open":
            b.close()
        return line == "open"
    H.wait_until(up, T(8), "the gateway's udpws bridge upgraded")
    return ctx.objs[-1]


def probe(gw, addr, name, path, token):
    """One upgrade from the gateway: "open", "status N" or "closed"."""
    r = subprocess.run(gw.wrapper() + [DEBIAN_PYTHON, CLIENT, "probe", addr, name, path, token],
                       capture_output=True, text=True, timeout=T(15))
    return r.stdout.strip() or f"no answer ({r.stderr.strip()[-200:]})"
