#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Seed 002's tunnel rows end to end (issue 25, Tests): etrelay in a
namespace with a wireguard-go interface and an SNI listener; a gateway (a
namespace of its own, its own wireguard-go) serves HTTPS on its tunnel
address 10.8.0.2 (svc.relays.test, a test certificate); the stand-in
control plane signs the tunnel certificate and answers with the gateway
as a peer, its rung-3 token and two SNI routes to its service,
svc.relays.test and *.relays.test. On rung 1 (the gateway's endpoint the
relay's WireGuard port) ping and `curl --resolve svc.relays.test` through
the SNI port reach the service over the tunnel; the gateway then starts
again on rung 3 (its endpoint a udpws bridge to wss://NAME/t): a new
handshake, ping both ways and the same curl pass, the relay seeing the
gateway from loopback. The tunnel's name is exact: with *.relays.test in
the table NAME is still upgraded, x.NAME goes to the wildcard's upstream
(the gateway's service answers the upgrade with its 200) and NAME.evil.test
is closed. The peer left out of the next answer is gone from the relay's
interface within about one heartbeat: pings fail and a new handshake over
rung 3 gets no answer while the bridge stays up; named again, it shakes
hands again. 77 without root, namespaces, wireguard-go, wg, curl or
/usr/bin/python3's websockets."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from tunnel_env import (INTERVAL, NAME, Gateway, Signer, T, bridge_open,  # noqa: E402
                        control_args, control_files, need, pings, probe, public_key,
                        relay_namespace, start_relay, tunnel_conf, wg_dump)

TOKEN = "gw-token-e2e"
SVC = "svc.relays.test"

# The gateway's HTTPS service: every GET answered 200 with "gateway PATH"
# (an upgrade too: it is no WebSocket server).
SERVICE = r"""
import http.server, ssl, sys
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = f"gateway {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler)
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(sys.argv[3], sys.argv[4])
srv.socket = tls.wrap_socket(srv.socket, server_side=True)
print("ready", flush=True)
srv.serve_forever()
"""


class Service:
    """SERVICE in the gateway's namespace on 10.8.0.2:port."""

    def __init__(self, ctx, gw, port):
        tmp = ctx.tmpdir()
        self.key, self.crt = os.path.join(tmp, "svc.key"), os.path.join(tmp, "svc.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", self.key, "-out",
                        self.crt, "-days", "2", "-subj", f"/CN={SVC}", "-addext",
                        f"subjectAltName=DNS:{SVC}"], check=True, capture_output=True,
                       timeout=30)
        self.p = subprocess.Popen(gw.wrapper() + [sys.executable, "-c", SERVICE, "10.8.0.2",
                                                  str(port), self.crt, self.key],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        ctx.objs.append(self)
        if self.p.stdout.readline().strip() != "ready":
            raise H.TestFailure(f"the gateway's service: {self.p.stderr.read()[-300:]!r}")

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(timeout=5)


def curl(svc, ns, port, path):
    """(exit status, body) of curl https://SVC:port/path through the relay
    at ns.ns_ip, the service's certificate verified."""
    r = subprocess.run(["curl", "-s", "--max-time", str(T(5)), "--cacert", svc.crt,
                        "--resolve", f"{SVC}:{port}:{ns.ns_ip}", f"https://{SVC}:{port}{path}"],
                       capture_output=True, text=True, timeout=T(10))
    return r.returncode, r.stdout


def endpoint(ns, ifname, pub):
    """The relay's endpoint for peer pub, as its `wg show` says."""
    out = subprocess.run(ns.wrapper() + ["wg", "show", ifname, "endpoints"], capture_output=True,
                         text=True, timeout=10).stdout
    for line in out.splitlines():
        f = line.split("\t")
        if f[0] == pub:
            return f[1]
    return None


def seed_002_tunnel_rows_end_to_end(ctx):
    need(ping=True, websockets=True)
    H.require_tool("curl")
    ns, ifname = relay_namespace(ctx, lo=True)
    tmp = ctx.tmpdir()
    wg_port = H.free_udp_port()
    sni_port = H.free_tcp_port()
    bridge_port = H.free_udp_port()
    svc_port = H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(tunnel_conf(ifname, wg_port) + f"[sni e2e]\nlisten 0.0.0.0:{sni_port}\n")
    env, state = control_files(tmp)
    signer = Signer(ctx, [("san", NAME, 3600)])
    cp = H.control_plane(ctx, host=ns.host_ip)
    gw = Gateway(ctx, ns)
    svc = Service(ctx, gw, svc_port)
    peer_gw = {"publicKey": gw.pub, "allowedIps": ["10.8.0.2/32"]}
    upstream = f"10.8.0.2:{svc_port}"
    cp.set(cert=signer, wg_peers=[peer_gw], tunnel_tokens=[TOKEN],
           routes=[{"name": SVC, "upstream": upstream, "proxyV2": False},
                   {"name": "*.relays.test", "upstream": upstream, "proxyV2": False}])
    relay = start_relay(ctx, ns, env, "-c", conf, *control_args(cp, state),
                        "--control-allow-upstream", "10.8.0.0/16")
    pub = public_key(relay, ifname, wg_port)

    # Rung 1: the gateway's endpoint is the relay's WireGuard port.
    gw.connect(pub, wg_port)
    H.wait_until(lambda: pings(gw, "10.8.0.1"), T(5), "a ping from the gateway on rung 1")
    H.wait_until(lambda: curl(svc, ns, sni_port, "/r1") == (0, "gateway /r1\n"), T(5),
                 f"curl https://{SVC}/r1 through the SNI port on rung 1")
    lport = gw.run("wg", "show", gw.ifname, "listen-port").strip()
    H.expect_eq(endpoint(ns, ifname, gw.pub), f"{gw.gw_ip}:{lport}",
                "the relay's endpoint for the gateway on rung 1")

    # Rung 3: the gateway starts again (a new session, so a new
    # handshake) with its endpoint a udpws bridge to wss://NAME/t through
    # the SNI port. The name is served once the certificate is: the bridge
    # is tried until upgraded.
    addr = f"{gw.relay_ip}:{sni_port}"
    bridge = bridge_open(ctx, gw, f"127.0.0.1:{bridge_port}", addr, TOKEN)
    gw.forget(pub)
    gw.connect(pub, bridge_port, "127.0.0.1")
    H.wait_until(lambda: pings(gw, "10.8.0.1"), T(10), "a ping from the gateway on rung 3")
    if not gw.handshake(pub):
        raise H.TestFailure("a ping on rung 3 without a handshake on the gateway")
    if not pings(ns, "10.8.0.2"):
        raise H.TestFailure("no ping from the relay to the gateway on rung 3")
    # The relay sees the gateway from its rung-3 socket on loopback.
    ep = endpoint(ns, ifname, gw.pub) or ""
    if not ep.startswith("127.0.0.1:"):
        raise H.TestFailure(f"the relay's endpoint for the gateway on rung 3: {ep!r}, expected "
                            "127.0.0.1:PORT")
    H.expect_eq(curl(svc, ns, sni_port, "/r3"), (0, "gateway /r3\n"),
                f"curl https://{SVC}/r3 through the SNI port on rung 3")

    # The tunnel's name is exact and comes before the routes: NAME is
    # upgraded though *.relays.test would take it; x.NAME is the
    # wildcard's (the gateway's service answers the upgrade: 200), never
    # upgraded; NAME.evil.test matches no route: closed.
    for name, want, what in ((NAME, "open", "the tunnel's name beside *.relays.test"),
                             (f"x.{NAME}", "status 200", "a name under the tunnel's"),
                             (f"{NAME}.evil.test", "closed", "the tunnel's name and more")):
        H.expect_eq(probe(gw, addr, name, "/t", TOKEN), want, f"wss://{name}/t: {what}")

    # The peer left out of the next answer: gone from the relay's
    # interface within about one heartbeat, then pings fail and a new
    # handshake gets no answer, though the bridge (its token still in
    # the set) stays up.
    t0 = time.monotonic()
    cp.set(wg_peers=[])
    H.wait_until(lambda: gw.pub not in wg_dump(ns, ifname)[1], T(INTERVAL * 2 + 1),
                 "the gateway gone from the relay's interface")
    H.log(f"the gateway's peer removed {time.monotonic() - t0:.2f} s after the answer changed "
          f"(heartbeat every {INTERVAL} s)")
    H.wait_until(lambda: not pings(gw, "10.8.0.1"), T(3), "the gateway's pings unanswered")
    gw.forget(pub)
    gw.connect(pub, bridge_port, "127.0.0.1")
    for _ in range(2):
        if pings(gw, "10.8.0.1"):
            raise H.TestFailure("a ping from the removed gateway was answered")
    H.expect_eq(gw.handshake(pub), 0, "the removed gateway's handshake over rung 3")
    if bridge.p.poll() is not None:
        raise H.TestFailure(f"the bridge ended: {bridge.p.stdout.read().strip()!r}")
    # Named again: it shakes hands again.
    cp.set(wg_peers=[peer_gw])
    H.wait_until(lambda: gw.pub in wg_dump(ns, ifname)[1], T(INTERVAL * 2 + 1),
                 "the gateway back on the relay's interface")
    gw.forget(pub)
    gw.connect(pub, bridge_port, "127.0.0.1")
    H.wait_until(lambda: pings(gw, "10.8.0.1"), T(5), "a ping from the gateway named again")
    ctx.check_relays_alive()


def test(ctx):
    H.run_parts(ctx, [seed_002_tunnel_rows_end_to_end])


if __name__ == "__main__":
    H.main(test)
