#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Rung 3 (issue 25 item 4): WireGuard in a WebSocket over TLS, on the SNI
listener. etrelay runs in a namespace with a wireguard-go interface and an
SNI listener; the control-plane stand-in signs its tunnel certificate
(tunnel.relay-7.relays.test, a test CA) and answers with the gateway as a
peer and its rung-3 token. The gateway (a namespace of its own) points its
wireguard-go at a local UDP port of a udpws client written with Debian's
python3-websockets, which carries the datagrams to wss://NAME/t through
the relay's SNI port: a ping over the tunnel passes. Refused: a wrong
token (403), a wrong path (4xx), a name that is not the tunnel's (closed
without an answer). The heartbeat's tunnelUrl is absent until the name is
served, then wss://NAME/t. The gateway's token left out of an answer
closes its WebSocket (1008) within about a heartbeat. A certificate is
served as soon as it is taken: with heartbeats 30 s apart, an upgrade
right after the certificate is in force opens (the relay before served it
from the next heartbeat: closed). 77 without root, namespaces,
wireguard-go, wg or /usr/bin/python3's websockets."""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from tunnel_env import (INTERVAL, NAME, Gateway, Signer, T, bridge_open,  # noqa: E402
                        control_args, control_files, need, pings, probe, public_key,
                        relay_namespace, start_relay, tunnel_conf)

TOKEN = "gw-token-1"


def rung3_carries_a_gateway(ctx):
    need(ping=True, websockets=True)
    ns, ifname = relay_namespace(ctx, lo=True)
    tmp = ctx.tmpdir()
    wg_port = H.free_udp_port()
    sni_port = H.free_tcp_port()
    bridge_port = H.free_udp_port()
    ops_port = H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(tunnel_conf(ifname, wg_port) +
                f"[sni rung3]\nlisten 0.0.0.0:{sni_port}\n"
                "route www.relays.test 127.0.0.1:9\n")
    env, state = control_files(tmp)
    signer = Signer(ctx, [("san", NAME, 3600)])
    cp = H.control_plane(ctx, host=ns.host_ip)
    gw = Gateway(ctx, ns)
    cp.set(cert=signer, wg_peers=[{"publicKey": gw.pub, "allowedIps": ["10.8.0.2/32"]}],
           tunnel_tokens=[TOKEN, "another-gateway"])
    relay = start_relay(ctx, ns, env, "-c", conf, *control_args(cp, state),
                        "--ops-listen", f"127.0.0.1:{ops_port}")
    pub = public_key(relay, ifname, wg_port)
    relay.wait_for_line(rf"tunnel certificate for {re.escape(NAME)} in force", T(5),
                        what="the tunnel certificate")
    relay.wait_for_line(r"^tunnel \S+: 2 rung-3 tokens in force$", T(5), what="the tokens")
    addr = f"{gw.relay_ip}:{sni_port}"
    # tunnelUrl: absent before the certificate (the first heartbeat comes
    # before the request), then wss://NAME/t while rung 3 serves it.
    H.wait_until(lambda: cp.of(H.CONTROL_HEARTBEAT), T(5), "a heartbeat")
    if "tunnelUrl" in json.loads(cp.of(H.CONTROL_HEARTBEAT)[0][3]):
        raise H.TestFailure("tunnelUrl in the first heartbeat, before any certificate")
    H.wait_until(lambda: json.loads(cp.of(H.CONTROL_HEARTBEAT)[-1][3]).get("tunnelUrl") ==
                 f"wss://{NAME}/t", T(5), f"tunnelUrl wss://{NAME}/t in a heartbeat")

    # The name is served from the heartbeat after the certificate: the
    # gateway's bridge retries until upgraded (bounded).
    bridge = bridge_open(ctx, gw, f"127.0.0.1:{bridge_port}", addr, TOKEN)
    gw.connect(pub, bridge_port, "127.0.0.1")
    H.wait_until(lambda: pings(gw, "10.8.0.1"), T(10), "a ping from the gateway over rung 3")
    if not pings(ns, "10.8.0.2"):
        raise H.TestFailure("no ping from the relay to the gateway over rung 3")

    # Refusals.
    for name, path, token, want, what in (
            (NAME, "/t", "not-a-token", r"^status 403$", "a wrong token"),
            (NAME, "/x", TOKEN, r"^status 4\d\d$", "a wrong path"),
            ("other.relays.test", "/t", TOKEN, r"^closed$", "a name not the tunnel's")):
        got = probe(gw, addr, name, path, token)
        if not re.search(want, got):
            raise H.TestFailure(f"{what}: {got!r}, expected {want}")

    # The gateway's token left out of the next answer: its WebSocket is
    # closed (1008) within about one heartbeat.
    cp.set(tunnel_tokens=["another-gateway"])
    H.wait_until(lambda: bridge.p.poll() is not None, T(INTERVAL * 2 + 2),
                 "the bridge's WebSocket closed after its token left the set")
    out = bridge.p.stdout.read().strip()
    if out != "closed 1008":
        raise H.TestFailure(f"the bridge after its token left: {out!r}, expected 'closed 1008'")
    ctx.check_relays_alive()
    rung3_metrics_moved(ns, ops_port)


def served_at_once(ctx):
    need(websockets=True)
    ns, ifname = relay_namespace(ctx, prefix="etv", lo=True)
    tmp = ctx.tmpdir()
    wg_port, sni_port = H.free_udp_port(), H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(tunnel_conf(ifname, wg_port) + f"[sni rung3]\nlisten 127.0.0.1:{sni_port}\n")
    env, state = control_files(tmp)
    signer = Signer(ctx, [("san", NAME, 3600)])
    cp = H.control_plane(ctx, host=ns.host_ip)
    cp.set(cert=signer, tunnel_tokens=[TOKEN])
    relay = start_relay(ctx, ns, env, "-c", conf, "--control-url", cp.url,
                        "--state-directory", state, "--control-interval", "30s",
                        "--control-timeout", "1s")
    relay.wait_for_line(r"^tunnel \S+: 1 rung-3 token in force$", T(5), what="the token")
    relay.wait_for_line(rf"tunnel certificate for {re.escape(NAME)} in force", T(5),
                        what="the tunnel certificate")
    got = probe(ns, f"127.0.0.1:{sni_port}", NAME, "/t", TOKEN)
    if got != "open":
        raise H.TestFailure(f"an upgrade right after the certificate: {got!r}, expected "
                            "'open' (served at once, not from the next heartbeat)")
    if len(cp.of(H.CONTROL_HEARTBEAT)) != 1:
        raise H.TestFailure(f"{len(cp.of(H.CONTROL_HEARTBEAT))} heartbeats: the check "
                            "needs the certificate taken between the first and the second")
    ctx.check_relays_alive()


def test(ctx):
    H.run_parts(ctx, [rung3_carries_a_gateway, served_at_once])


def rung3_metrics_moved(ns, ops_port):
    """/metrics (the ops plane in the relay's namespace) after the gateway's
    life above: rung 3's families moved, every worker summed; once the
    connections ended, each taken one is counted once by result and once
    by end."""
    def scrape():
        r = subprocess.run(ns.wrapper() + ["curl", "-sS", "--max-time", "5",
                                           f"http://127.0.0.1:{ops_port}/metrics"],
                           capture_output=True, text=True, timeout=T(10))
        if r.returncode != 0:
            raise H.TestFailure(f"curl /metrics in the relay's namespace: {r.stderr.strip()}")
        return H.parse_metrics(r.stdout)

    def v(s, name, **labels):
        return H.metric_value(s, name, **labels) or 0

    def taken(s):  # results less the refusals at the hand-over (no end)
        return v(s, "etrelay_tunnel_rung3_connections_total") - sum(
            v(s, "etrelay_tunnel_rung3_connections_total", result=r)
            for r in ("no_certificate", "limit_total", "limit_source"))

    def settled():
        s = scrape()
        if v(s, "etrelay_tunnel_rung3_connections") == 0 and \
                taken(s) == v(s, "etrelay_tunnel_rung3_connections_ended_total"):
            return s
        return None
    s = H.wait_until(settled, T(5), "rung 3's connections ended, each counted once",
                     interval=0.2)
    # A WireGuard handshake message is 148 bytes, its answer 92.
    for name, labels, least in (
            ("etrelay_tunnel_rung3_connections_total", {"result": "upgraded"}, 1),
            ("etrelay_tunnel_rung3_connections_total", {"result": "bad_token"}, 1),
            ("etrelay_tunnel_rung3_connections_total", {"result": "bad_upgrade"}, 1),
            ("etrelay_tunnel_rung3_connections_ended_total", {"reason": "token_gone"}, 1),
            ("etrelay_tunnel_rung3_connections_ended_total", {"reason": "refused"}, 2),
            ("etrelay_tunnel_rung3_datagrams_total", {"direction": "to_wireguard"}, 2),
            ("etrelay_tunnel_rung3_datagrams_total", {"direction": "to_client"}, 2),
            ("etrelay_tunnel_rung3_bytes_total", {"direction": "to_wireguard"}, 148),
            ("etrelay_tunnel_rung3_bytes_total", {"direction": "to_client"}, 92)):
        got = v(s, name, **labels)
        if got < least:
            raise H.TestFailure(f"{name}{labels}: {got:g}, expected at least {least}")
    if v(s, "etrelay_tunnel_rung3_connections_total", result="bad_token") != 1:
        raise H.TestFailure("bad_token counted other than once for the one wrong token")


if __name__ == "__main__":
    H.main(test)
