#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The tunnel (issue 25, first slice): in a network namespace, wireguard-go
makes a WireGuard interface; etrelay runs in that namespace with a
[tunnel] on it and heartbeats a stand-in control plane on the host side of
a veth pair. The heartbeat carries the relay's public key and port, and
`wg show` in the namespace shows the same; the peers of the answer appear
on the interface with their allowed IPs (and preshared key); a peer left
out of the next answer is gone within about one heartbeat interval. A
gateway (a namespace of its own beside the relay's, its own wireguard-go)
pings the relay's tunnel address and is pinged back; removed from the
answer, it is not answered any more. A
bad set (a key twice, bad base64) is refused whole while the answer's
routes are taken, and a failed heartbeat (503) leaves the peers as they
were; so is a set with a peer holding the relay's own tunnel address
(10.8.0.1/32, or its network 10.8.0.0/24); rung 3's tokens (tunnelTokens)
are put in force, a bad set refused whole; the metrics count the peers and
reconciles, and show
the gateway's handshake age (no label per peer); /lifecycle shows the
tunnel and its last reconcile (none before a good answer, and why). A
missing interface fails the start (1) and -t (78) with the fix, from a
[tunnel] or from --wg-interface. At exit the relay takes away the
tunnel address it added, and leaves one the interface had before. 77
without root, namespaces, wireguard-go or wg."""

import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from tunnel_env import (INTERVAL, Gateway, T, control_args, control_files, key,  # noqa: E402
                        need, pings, relay_namespace, start_relay, tunnel_conf,
                        wg_dump)


def tunnel_peers_follow_the_control_plane(ctx):
    need(ping=True)
    ns, ifname = relay_namespace(ctx)
    tmp = ctx.tmpdir()
    wg_port = H.free_udp_port()
    ops = H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(tunnel_conf(ifname, wg_port))
    env, state = control_files(tmp)
    # No such interface: the start fails (status 1), saying the fix, and
    # -t refuses it (78).
    bad = os.path.join(tmp, "missing.conf")
    with open(bad, "w") as f:
        f.write(f"[tunnel]\ninterface etwno{os.getpid() % 10000}\naddress 10.8.0.1/24\n")
    st, _, err = H.run_etrelay(ctx, ["--backend", ctx.backend, "-c", bad], wrapper=ns.wrapper())
    if st != 1 or not re.search(r"tunnel etwno\d+: open: No such device: no such WireGuard "
                                r"interface: start wireguard-go for it", err):
        raise H.TestFailure(f"a missing interface: exit {st}, {err.strip()!r}")
    st, _, err = H.run_etrelay(ctx, ["-t", "-c", bad], wrapper=ns.wrapper())
    if st != 78 or "no such WireGuard interface" not in err:
        raise H.TestFailure(f"-t with a missing interface: exit {st}, {err.strip()!r}")
    # The same from the quick-start options, the fix in their words.
    quick = ["--wg-interface", f"etwno{os.getpid() % 10000}", "--wg-address", "10.8.0.1/24"]
    for args, want in ((["--backend", ctx.backend], 1), (["-t"], 78)):
        st, _, err = H.run_etrelay(ctx, args + quick, wrapper=ns.wrapper())
        if st != want or not re.search(r"tunnel etwno\d+: (open: )?No such device: no such "
                                       r"WireGuard interface: start wireguard-go for it \(a "
                                       r"unit\), or give --wg-create yes", err):
            raise H.TestFailure(f"{args[0]} --wg-interface, missing: exit {st}, {err.strip()!r}")

    st, out, err = H.run_etrelay(ctx, ["-t", "-c", conf], wrapper=ns.wrapper())
    if st != 0 or f"tunnel {ifname}: listen-port {wg_port}, address 10.8.0.1/24, create no" \
            not in out:
        raise H.TestFailure(f"-t with the interface there: exit {st}, {out!r} {err!r}")

    cp = H.control_plane(ctx, host=ns.host_ip)
    a, b = key(), key()
    psk = key()
    peer_a = {"publicKey": a, "allowedIps": ["10.8.0.4/32", "192.168.77.0/24"]}
    peer_b = {"publicKey": b, "allowedIps": ["10.8.0.3/32"], "presharedKey": psk}
    gw = Gateway(ctx, ns)
    peer_gw = {"publicKey": gw.pub, "allowedIps": ["10.8.0.2/32"]}
    # No good answer at first: /lifecycle says why there is no reconcile.
    cp.set(wg_peers=[peer_a, peer_b, peer_gw], heartbeat="503")
    relay = start_relay(ctx, ns, env, "-c", conf, *control_args(cp, state),
                        "--ops-listen", f"{ns.ns_ip}:{ops}",
                        "--control-allow-upstream", "10.8.0.0/16")
    m = re.search(rf"^tunnel on {ifname} \(uapi\), WireGuard port {wg_port}, address "
                  r"10\.8\.0\.1/24, backend \S+, public key (\S+)$",
                  "\n".join(relay.text_lines()), re.M)
    if not m:
        raise H.TestFailure("no 'tunnel on IF (uapi), WireGuard port P, address A, backend B, "
                            "public key K' line")
    pub = m.group(1)
    H.expect_eq(wg_dump(ns, ifname)[0], (pub, wg_port), "wg show's public key and port")
    addr = subprocess.run(ns.wrapper() + ["ip", "-4", "addr", "show", ifname],
                          capture_output=True, text=True, timeout=10).stdout
    if "inet 10.8.0.1/24" not in addr or ",UP" not in addr:
        raise H.TestFailure(f"{ifname} has not 10.8.0.1/24 and up: {addr}")

    # The heartbeat reports the key and port.
    H.wait_until(lambda: cp.of(H.CONTROL_HEARTBEAT), T(5), "a heartbeat")
    body = json.loads(cp.of(H.CONTROL_HEARTBEAT)[0][3])
    H.expect_eq(body.get("wireguard"), {"publicKey": pub, "listenPort": wg_port},
                "the heartbeat's wireguard")

    def tunnel_state():
        return H.http_request(ops, "GET", "/lifecycle", host=ns.ns_ip).json().get("tunnel")
    H.expect_eq(tunnel_state(),
                {"interface": ifname, "backend": "wireguard-go", "listen_port": wg_port,
                 "address": "10.8.0.1/24", "public_key": pub, "peers": 0,
                 "last_reconcile": None, "why": "no good heartbeat answer yet"},
                "/lifecycle's tunnel before a good answer")
    cp.set(heartbeat="ok")

    want_ab = {a: (None, sorted(peer_a["allowedIps"])), b: (psk, ["10.8.0.3/32"]),
               gw.pub: (None, ["10.8.0.2/32"])}
    H.wait_until(lambda: wg_dump(ns, ifname)[1] == want_ab, T(3),
                 "peers a, b and the gateway on the interface with their allowed IPs")
    H.wait_until(lambda: tunnel_state()["peers"] == 3, T(3), "/lifecycle's 3 peers")
    last = tunnel_state()["last_reconcile"]
    if last["result"] != "ok" or last["error"] is not None or abs(last["at"] - time.time()) > T(5):
        raise H.TestFailure(f"/lifecycle's last_reconcile after a good answer: {last}")

    # The gateway reaches the relay over the tunnel, both ways.
    gw.connect(pub, wg_port)
    H.wait_until(lambda: pings(ns, "10.8.0.2"), T(5), "a ping from the relay to 10.8.0.2")
    if not pings(gw, "10.8.0.1"):
        raise H.TestFailure("no ping from the gateway to the relay's 10.8.0.1")

    # The next reconcile reads the gateway's handshake: one age, seconds
    # old (in the 10 s bucket), and a and b without one; no label names a
    # peer.
    def ages():
        text = H.http_request(ops, "GET", "/metrics", host=ns.ns_ip).text
        m = H.parse_metrics(text)
        return (text, H.metric_value(m, "etrelay_tunnel_handshake_age_seconds_count"),
                H.metric_value(m, "etrelay_tunnel_handshake_age_seconds_bucket", le="10"),
                H.metric_value(m, "etrelay_tunnel_peers_without_handshake"),
                H.metric_value(m, "etrelay_tunnel_peers_read_timestamp_seconds"))
    H.wait_until(lambda: ages()[1:4] == (1, 1, 2), T(INTERVAL * 2 + 2),
                 "the gateway's handshake age in the histogram's 10 s bucket, a and b without")
    text, _, _, _, read = ages()
    if not read or abs(read - time.time()) > T(5):
        raise H.TestFailure(f"etrelay_tunnel_peers_read_timestamp_seconds {read}, not now")
    for k in (a, b, gw.pub):
        if k in text:
            raise H.TestFailure(f"/metrics names peer {k}")
    want_ab.pop(gw.pub)
    cp.set(wg_peers=[peer_a, peer_b])
    H.wait_until(lambda: wg_dump(ns, ifname)[1] == want_ab, T(INTERVAL * 2 + 1),
                 "the gateway removed at the next heartbeat")
    if pings(ns, "10.8.0.2"):
        raise H.TestFailure("a ping to the removed gateway was answered")

    # a left out: revoked within about one interval.
    cp.set(wg_peers=[peer_b])
    H.wait_until(lambda: wg_dump(ns, ifname)[1] == {b: want_ab[b]}, T(INTERVAL * 2 + 1),
                 "peer a removed at the next heartbeat")

    # A bad peer set is refused whole (the peers stay as they were) and
    # the rest of the answer is taken: its routes are in force.
    def routes_in_force():
        m = H.parse_metrics(H.http_request(ops, "GET", "/metrics", host=ns.ns_ip).text)
        return H.metric_value(m, "etrelay_control_routes")
    bad_sets = (("a key twice", [peer_a, peer_a], r"publicKey \S+ given twice"),
                ("bad base64", [peer_a, {"publicKey": "not base64!"}], r"publicKey: expected"))
    for i, (what, peers, rx) in enumerate(bad_sets):
        start = len(relay.text_lines())
        routes = [{"name": f"gw{j}.example.org", "upstream": "10.8.0.2:443", "proxyV2": False}
                  for j in range(i + 1)]
        cp.set(wg_peers=peers, routes=routes)
        relay.wait_for_line(rf"^control: wireguardPeers refused \(.*{rx}.*\): the tunnel keeps "
                            "its peers, the routes are taken$", T(3), start=start, what=what)
        H.wait_until(lambda: routes_in_force() == i + 1, T(3),
                     f"the {i + 1} route(s) of the answer with {what} in force")
        H.expect_eq(wg_dump(ns, ifname)[1], {b: want_ab[b]}, f"peers after {what}")
        last = tunnel_state()["last_reconcile"]
        if last["result"] != "failed" or "peer set refused" not in (last["error"] or ""):
            raise H.TestFailure(f"/lifecycle's last_reconcile after {what}: {last}")
    # A failed heartbeat: the peers stay as they were.
    cp.set(wg_peers=[peer_a, peer_b], heartbeat="503")
    n = len(cp.of(H.CONTROL_HEARTBEAT))
    H.wait_until(lambda: len(cp.of(H.CONTROL_HEARTBEAT)) >= n + 2, T(4), "two failed heartbeats")
    H.expect_eq(wg_dump(ns, ifname)[1], {b: want_ab[b]}, "peers after a failed heartbeat")
    cp.set(heartbeat="ok")
    H.wait_until(lambda: wg_dump(ns, ifname)[1] == want_ab, T(3), "peer a back")

    def tunnel_metrics():
        m = H.parse_metrics(H.http_request(ops, "GET", "/metrics", host=ns.ns_ip).text)
        return (H.metric_value(m, "etrelay_tunnel_peers"),
                H.metric_value(m, "etrelay_tunnel_reconciles_total", result="ok"),
                H.metric_value(m, "etrelay_tunnel_reconciles_total", result="failed"))
    # The interface shows a and b before the reconcile's counters do.
    H.wait_until(lambda: tunnel_metrics()[0] == 2, T(3), "etrelay_tunnel_peers 2")
    peers, ok, failed = tunnel_metrics()
    # The two refused sets count as failed reconciles, once for each
    # heartbeat that carried one (more than one each when the host is slow
    # between the stand-in's answers).
    H.expect_eq(peers, 2, "etrelay_tunnel_peers")
    if not failed or failed < 2:
        raise H.TestFailure(f"etrelay_tunnel_reconciles_total{{result=failed}} {failed} after two "
                            "refused peer sets")
    # a and b, b, a and b again: at least the three good answers that
    # changed something (each good heartbeat reconciles, changed or not).
    if not ok or ok < 3:
        raise H.TestFailure(f"etrelay_tunnel_reconciles_total{{result=ok}} {ok}, expected >= 3")

    # A peer whose allowed IPs hold the relay's own tunnel address (the
    # address itself, or its network) would take the relay's traffic to
    # itself and could send in its name: the set is refused whole, as
    # the sets above, and counted as a failed reconcile (attack15 F3b).
    for bad in ("10.8.0.1/32", "10.8.0.0/24"):
        start = len(relay.text_lines())
        cp.set(wg_peers=[peer_a, peer_b, {"publicKey": key(), "allowedIps": [bad]}])
        relay.wait_for_line(rf"^control: tunnel {ifname}: the control plane's peer set refused: "
                            rf"peer \d+'s allowed IP {re.escape(bad)} holds the relay's own "
                            r"tunnel address 10\.8\.0\.1; the next heartbeat tries again$",
                            T(3), start=start, what=f"a peer with {bad}")
        H.expect_eq(wg_dump(ns, ifname)[1], want_ab, f"peers after a peer with {bad}")
        H.wait_until(lambda: tunnel_metrics()[2] > failed, T(3),
                     f"the set with {bad} counted as a failed reconcile")
        failed = tunnel_metrics()[2]
    # Rung 3's tokens come with every good answer: a new set is put in
    # force (and said), a set that does not parse is refused whole and
    # the one in force stays (said once), an empty one is a set too.
    start = len(relay.text_lines())
    cp.set(tunnel_tokens=["tok-a", "tok-b"])
    relay.wait_for_line(rf"^tunnel {ifname}: 2 rung-3 tokens in force$", T(3), start=start,
                        what="two tokens")
    start = len(relay.text_lines())
    cp.set(tunnel_tokens=["tok-a", "tok-a"])
    relay.wait_for_line(r"^control: tunnelTokens refused \(tunnelTokens: a token given "
                        r"twice\): the tunnel keeps its tokens$", T(3), start=start,
                        what="a token twice")
    cp.set(tunnel_tokens=[])
    relay.wait_for_line(rf"^tunnel {ifname}: 0 rung-3 tokens in force$", T(3), start=start,
                        what="no token")
    ctx.check_relays_alive()

    # At exit the relay takes away the tunnel address it added; one the
    # interface had before the start is left (attack round 15).
    def has_address():
        return "inet 10.8.0.1/24" in subprocess.run(
            ns.wrapper() + ["ip", "-4", "addr", "show", ifname], capture_output=True, text=True,
            timeout=10).stdout
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(T(10)), 0, "the exit status after SIGTERM")
    if has_address():
        raise H.TestFailure("10.8.0.1/24 left on the interface after the relay's exit")
    subprocess.run(ns.wrapper() + ["ip", "addr", "add", "10.8.0.1/24", "dev", ifname],
                   check=True, capture_output=True, timeout=10)
    again = H.relay_env(ctx, H.CONTROL_NO_PROXY, "-c", conf, "--ops-listen", f"{ns.ns_ip}:{ops}",
                        listen=False, open_limits=False, wait_ready=False, wrapper=ns.wrapper())
    again.READY_RE = r"^tunnel on "
    again.wait_ready(T(5))
    again.signal(signal.SIGTERM)
    H.expect_eq(again.wait_exit(T(10)), 0, "the exit status after SIGTERM")
    if not has_address():
        raise H.TestFailure("the address the interface had before the start was taken away")


def test(ctx):
    H.run_parts(ctx, [tunnel_peers_follow_the_control_plane])


if __name__ == "__main__":
    H.main(test)
