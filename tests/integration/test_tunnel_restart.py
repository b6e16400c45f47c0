#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""wireguard-go restarted under a running relay (an outside tester's HIGH:
the tunnel stayed dead while the relay said all was well). A relay with
[tunnel] on a wireguard-go interface and a gateway pinging it over the
tunnel; wireguard-go killed: each heartbeat's reconcile fails naming the
socket and asking whether wireguard-go runs; wireguard-go started again on
the same interface name (a new device: no key, a random port, no peer, no
address, down): within about two heartbeats the interface has the relay's
public key (its "tunnel on" line's) and listen port again, the peers,
10.8.0.1/24 and the link up, the relay says so once and counts it
(etrelay_tunnel_restores_total), and the gateway's ping over the tunnel
is answered again; an operator's `wg set IF listen-port` is undone the
same way. 77 without root, namespaces, wireguard-go or wg."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from tunnel_env import (INTERVAL, Gateway, T, WireguardGo, control_args,  # noqa: E402
                        control_files, need, pings, public_key, relay_namespace, start_relay,
                        tunnel_conf, wg_dump)


def tunnel_comes_back_after_wireguard_go_restarts(ctx):
    need(ping=True)
    ns, ifname = relay_namespace(ctx)
    wgo = ctx.objs[-1]
    tmp = ctx.tmpdir()
    wg_port = H.free_udp_port()
    ops = H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(tunnel_conf(ifname, wg_port))
    env, state = control_files(tmp)
    cp = H.control_plane(ctx, host=ns.host_ip)
    gw = Gateway(ctx, ns)
    cp.set(wg_peers=[{"publicKey": gw.pub, "allowedIps": ["10.8.0.2/32"]}])
    relay = start_relay(ctx, ns, env, "-c", conf, *control_args(cp, state),
                        "--ops-listen", f"{ns.ns_ip}:{ops}")
    pub = public_key(relay, ifname, wg_port)
    want_peers = {gw.pub: (None, ["10.8.0.2/32"])}

    def restores():
        m = H.parse_metrics(H.http_request(ops, "GET", "/metrics", host=ns.ns_ip).text)
        return H.metric_value(m, "etrelay_tunnel_restores_total")

    def addr_up():
        out = subprocess.run(ns.wrapper() + ["ip", "-4", "addr", "show", ifname],
                             capture_output=True, text=True, timeout=10).stdout
        return "inet 10.8.0.1/24" in out and ",UP" in out, out

    H.wait_until(lambda: wg_dump(ns, ifname)[1] == want_peers, T(3),
                 "the gateway on the relay's interface")
    gw.connect(pub, wg_port)
    H.wait_until(lambda: pings(gw, "10.8.0.1"), T(5), "a ping from the gateway to 10.8.0.1")
    H.expect_eq(restores(), 0, "etrelay_tunnel_restores_total before a restart")

    # wireguard-go dies (SIGKILL: its socket file stays, refusing): the
    # reconciles fail, saying what is missing.
    start = len(relay.text_lines())
    wgo.p.kill()
    wgo.p.wait(timeout=5)
    relay.wait_for_line(rf"^control: tunnel {ifname}: reconcile: /var/run/wireguard/{ifname}"
                        r"\.sock: (Connection refused|No such file or directory) \(is "
                        r"wireguard-go running\?\); the next heartbeat tries again$",
                        T(INTERVAL * 2 + 3), start=start,
                        what="the failed reconcile naming the socket")
    # Three more heartbeats down: said once per reason, not each time.
    n = len(cp.of(H.CONTROL_HEARTBEAT))
    H.wait_until(lambda: len(cp.of(H.CONTROL_HEARTBEAT)) >= n + 3, T(5),
                 "three more heartbeats while wireguard-go is down")
    down = [ln for ln in relay.text_lines()[start:] if "is wireguard-go running?" in ln]
    if len(down) > 2:  # its socket file refusing, then gone
        raise H.TestFailure(f"{len(down)} lines for a wireguard-go down through "
                            f"{len(cp.of(H.CONTROL_HEARTBEAT)) - n + 1} heartbeats: {down[:3]}")

    # Started again on the same name: a new device, nothing on it. As a
    # unit would: once the dead one's interface is gone (the kernel takes
    # it down after the exit, slower on a loaded machine), and again
    # (bounded) when the new one exits before it answers.
    def link_gone():
        return subprocess.run(ns.wrapper() + ["ip", "link", "show", ifname],
                              capture_output=True, timeout=10).returncode != 0

    def answers():
        return subprocess.run(ns.wrapper() + ["wg", "show", ifname], capture_output=True,
                              timeout=10).returncode == 0
    H.wait_until(link_gone, T(5), "the dead wireguard-go's interface gone")
    start = len(relay.text_lines())
    exits = []
    for attempt in range(3):
        log = os.path.join(tmp, f"wireguard-go.{attempt}.log")
        wgo = WireguardGo(ns, ifname, log=log)
        ctx.objs.append(wgo)
        # The dead one's socket file is there until the new one's.
        H.wait_until(lambda: wgo.p.poll() is not None or answers(), T(5),
                     "the new wireguard-go answering or exited")
        if wgo.p.poll() is None:
            break
        with open(log) as f:
            exits.append(f"status {wgo.p.returncode}: {f.read().strip()[-300:]}")
        print(f"[test] wireguard-go exited at its start ({exits[-1]}); started again",
              flush=True)
    else:
        raise H.TestFailure(f"wireguard-go did not start again: {exits}")

    def restored():
        try:
            dev, peers = wg_dump(ns, ifname)
        except H.TestFailure:  # the dead one's socket file, until the new one's
            return False
        return dev == (pub, wg_port) and peers == want_peers and addr_up()[0]
    # Two heartbeats, and the time a reconcile of one peer takes on a
    # loaded machine.
    try:
        H.wait_until(restored, T(INTERVAL * 2 + 3),
                     "the relay's key, port, peers, 10.8.0.1/24 and UP on the new device")
    except H.TestFailure as e:
        wg = subprocess.run(ns.wrapper() + ["wg", "show", ifname], capture_output=True,
                            text=True, timeout=10)
        raise H.TestFailure(f"{e}: wg show: {wg.stdout}{wg.stderr}; ip addr: {addr_up()[1]}")
    relay.wait_for_line(rf"^tunnel {ifname}: the interface lost the relay's key and port "
                        r"\(wireguard-go restarted\?\); set again$", T(3), start=start,
                        what="the restore said")
    H.wait_until(lambda: restores() == 1, T(3), "etrelay_tunnel_restores_total 1")
    # The gateway's session was with the old device: its next handshake
    # (WireGuard's own, after 15 s of pings unanswered) or, as here, a
    # gateway that starts one at once.
    gw.forget(pub)
    gw.connect(pub, wg_port)
    H.wait_until(lambda: pings(gw, "10.8.0.1"), T(8),
                 "a ping from the gateway to 10.8.0.1 after the restart")
    # Said and counted once: the next reconciles find the device keyed.
    n = len(cp.of(H.CONTROL_HEARTBEAT))
    H.wait_until(lambda: len(cp.of(H.CONTROL_HEARTBEAT)) >= n + 2, T(4), "two more heartbeats")
    H.expect_eq(restores(), 1, "etrelay_tunnel_restores_total after two more heartbeats")
    said = [ln for ln in relay.text_lines() if "lost the relay's key and port" in ln]
    H.expect_eq(len(said), 1, "restore lines")
    relay.wait_for_line(r"^control: the tunnel's peers are reconciled again$", T(3),
                        start=start, what="the reconcile's recovery said")

    # An operator's wg set of another port is undone the same way.
    other = H.free_udp_port()
    subprocess.run(ns.wrapper() + ["wg", "set", ifname, "listen-port", str(other)], check=True,
                   capture_output=True, timeout=10)
    H.wait_until(lambda: wg_dump(ns, ifname)[0] == (pub, wg_port), T(INTERVAL * 2 + 3),
                 f"the relay's port {wg_port} back after wg set listen-port {other}")
    H.wait_until(lambda: restores() == 2, T(3), "etrelay_tunnel_restores_total 2")
    ctx.check_relays_alive()


def test(ctx):
    H.run_parts(ctx, [tunnel_comes_back_after_wireguard_go_restarts])


if __name__ == "__main__":
    H.main(test)
