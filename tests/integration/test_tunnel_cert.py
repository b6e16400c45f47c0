#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The tunnel certificate (issue 25, item 3): etrelay runs in a network
namespace with a [tunnel] on wireguard-go's interface and a stand-in
control plane that signs its requests with a test CA (certsign.py, Debian's
python3-cryptography). Each request names nothing and comes after the
first heartbeat; the control plane's answers, one per request, in order:
503 twice (logged once), a wildcard name, a name that is not
tunnel.<id>.<suffix> (each refused, tried again after
control-cert-retry-min doubling to -max and no further), "no
certificates offered" (501: asked again after control-cert-not-offered),
a good chain (in force,
logged with its name), at two thirds of its lifetime a renewal answered
with a wildcard (refused: the one in force stays, and says so), a good
chain with less life left than the floor (ten times
control-cert-retry-min: refused, counted short_lived, the one in force
stays, tried again on the failure schedule), then a good one again. The
metrics count each result and show the notAfter in force; tunnelUrl
stays out of every heartbeat (no rung 3 serves it yet). 77 without
root, namespaces, wireguard-go or wg."""

import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from tunnel_env import (DEBIAN_PYTHON, INTERVAL, NAME, Signer, T, control_args,  # noqa: E402
                        control_files, need, relay_namespace, start_relay, tunnel_conf)


# The waits (--control-cert-*) and the lifetime of a good chain, scaled at
# most twice under a slow run (valgrind's ETRELAY_SLOW 5): a slow relay
# only makes each gap longer, which the checks below allow for, and the
# whole schedule under valgrind then takes about 15 s rather than 30.
# A good chain lives past the floor (FLOOR, ten times the first retry) by
# 1.5 s; a short one has half the floor.
S = min(H.SLOW, 2.0)
RETRY_MIN, RETRY_MAX, NOT_OFFERED, LIFETIME = 0.3 * S, 0.6 * S, 1.2 * S, 4.5 * S
FLOOR = 10 * RETRY_MIN


def tunnel_certificate_is_asked_for_renewed_and_kept(ctx):
    need()
    # The README's command installs it: its absence is a broken install.
    if subprocess.run([DEBIAN_PYTHON, "-c", "import cryptography.x509"],
                      capture_output=True, timeout=30).returncode != 0:
        raise H.TestFailure(f"{DEBIAN_PYTHON} has no cryptography (Debian: "
                            "python3-cryptography, in the README's command)")
    plan = [("status", 503), ("status", 503), ("san", "*.relay-7.relays.test", LIFETIME),
            ("san", "svc.relays.test", LIFETIME), ("status", 501),
            ("san", NAME, LIFETIME), ("san", "*.relays.test", LIFETIME), ("san", NAME, FLOOR / 2),
            ("san", NAME, 3600)]
    ns, ifname = relay_namespace(ctx, "etc")
    tmp = ctx.tmpdir()
    ops = H.free_tcp_port()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(tunnel_conf(ifname, H.free_udp_port()))
    env, state = control_files(tmp)
    cp = H.control_plane(ctx, host=ns.host_ip)
    signer = Signer(ctx, plan)
    cp.set(cert=signer)
    ms = lambda s: f"{int(s * 1000)}ms"  # noqa: E731
    relay = start_relay(ctx, ns, env, "-c", conf, *control_args(cp, state, "5s"),
                        "--control-cert-retry-min", ms(RETRY_MIN),
                        "--control-cert-retry-max", ms(RETRY_MAX),
                        "--control-cert-not-offered", ms(NOT_OFFERED),
                        "--ops-listen", f"{ns.ns_ip}:{ops}")

    def metrics():
        m = H.parse_metrics(H.http_request(ops, "GET", "/metrics", host=ns.ns_ip).text)
        return ({r: H.metric_value(m, "etrelay_tunnel_certificate_requests_total", result=r)
                 for r in ("ok", "failed", "not_offered", "short_lived")},
                H.metric_value(m, "etrelay_tunnel_certificate_expiry_timestamp_seconds"))
    H.wait_until(lambda: len(signer.times()) >= 9, T(5 * RETRY_MAX + NOT_OFFERED + LIFETIME + 6),
                 "nine certificate requests")
    t = signer.times()
    hb = [r[0] for r in cp.of(H.CONTROL_HEARTBEAT)]
    if not hb or hb[0] > t[0]:
        raise H.TestFailure("the first certificate request came before the first heartbeat")
    # Each request a new key, naming nothing (certsign.py refuses one that
    # names something: that would be a 400 and no chain at all).
    csrs = [json.loads(r[3])["csr"] for r in cp.of(H.CONTROL_CERT)]
    if len(set(csrs)) != len(csrs) or not all("CERTIFICATE REQUEST" in c for c in csrs):
        raise H.TestFailure("the requests are not each a new CSR")
    g = signer.gaps()
    # After failures: min, doubled, then the max (no further doubling).
    if g[0] < RETRY_MIN * 0.9 or g[1] < RETRY_MAX * 0.9 or g[1] < 1.5 * g[0]:
        raise H.TestFailure(f"retries after {g[0]:.2f} s, {g[1]:.2f} s: expected "
                            f"{RETRY_MIN} s, then twice that")
    if g[2] < RETRY_MAX * 0.9 or g[2] > 1.6 * g[1]:
        raise H.TestFailure(f"third retry after {g[2]:.2f} s, the second {g[1]:.2f} s: expected "
                            f"control-cert-retry-max ({RETRY_MAX} s) again")
    # "No certificates offered" (501): asked again after its own wait.
    if g[4] < NOT_OFFERED * 0.9 or g[4] < 1.5 * g[3]:
        raise H.TestFailure(f"after 'not offered' the next request came after {g[4]:.2f} s, "
                            f"expected {NOT_OFFERED} s (a failure's wait was {g[3]:.2f} s)")
    # A good chain renewed at two thirds of its life (from its notBefore;
    # the request's time on this clock, the validity in unix seconds).
    nb, na = signer.seen[5][1]
    life, at = na - nb, signer.seen[6][2] - nb
    if not 0.6 * life <= at <= 0.75 * life + T(0.4):
        raise H.TestFailure(f"renewed {at:.2f} s into a {life} s certificate, expected at two "
                            "thirds of it")
    # The chain short of the floor is a failure: the next request after
    # the doubled wait (the failed renewal's was the first).
    if g[7] < RETRY_MAX * 0.9:
        raise H.TestFailure(f"after a short-lived chain the next request came after {g[7]:.2f} "
                            f"s, expected {RETRY_MAX} s (the failure before: {g[6]:.2f} s)")
    lines = "\n".join(relay.text_lines())
    failed = r"tunnel certificate request failed \("
    for rx, what in ((failed + r"HTTP 503: .*\); no certificate yet, next in", "503"),
                     (failed + r"the certificate has a wildcard name\); no certificate yet",
                      "a wildcard"),
                     (failed + r"the certificate names svc\.relays\.test, not "
                      r"tunnel\.<relay-id>\.<suffix>\)", "another name"),
                     (r"the control plane offers no tunnel certificate \(HTTP 501.*\); asking "
                      r"again in", "not offered"),
                     (rf"tunnel certificate for {re.escape(NAME)} in force, \d+ s left, renewed "
                      r"in \d+\.\d s", "in force"),
                     (failed + r"the certificate has a wildcard name\); keeping the one in "
                      rf"force for {re.escape(NAME)}", "a failed renewal"),
                     (failed + rf"the certificate for {re.escape(NAME)} has \d+\.\d s left, "
                      r"less than the \d+\.\d s one must have to be put in force\); "
                      rf"keeping the one in force for {re.escape(NAME)}", "a short-lived chain")):
        if not re.search(r"^control: " + rx, lines, re.M):
            raise H.TestFailure(f"no log line for {what} ({rx})")
    # Logged once per reason: the two 503s in a row were one line.
    n503 = len(re.findall(r"request failed \(HTTP 503", lines))
    if n503 != 1:
        raise H.TestFailure(f"{n503} lines for two 503s in a row, expected 1")
    # The last good chain (plan[8]: an hour) is the one in force.
    H.wait_until(lambda: metrics()[0]["ok"] == 2, T(3), "two good requests counted")
    counts, expiry = metrics()
    H.expect_eq((counts["failed"], counts["not_offered"], counts["short_lived"]), (5, 1, 1),
                "certificate requests failed, not_offered, short_lived")
    H.expect_eq(expiry, signer.seen[8][1][1], "etrelay_tunnel_certificate_expiry_timestamp_seconds")
    # No rung 3 serves it yet: tunnelUrl is never reported.
    bodies = [json.loads(r[3]) for r in cp.of(H.CONTROL_HEARTBEAT)]
    if any("tunnelUrl" in b for b in bodies):
        raise H.TestFailure("a heartbeat reported tunnelUrl with no rung 3 serving it")
    ctx.check_relays_alive()


def a_held_certificate_request_does_not_hold_the_heartbeat(ctx):
    """The control plane holds RequestCertificate open for hold seconds
    (then 503), under a control-timeout longer than that: a heartbeat due
    meanwhile went out only when the request ended (attack round 15). The
    request waits no longer than until the next heartbeat is due (at least
    1 s): the gap between two heartbeats stays under the interval and a
    second, half of hold."""
    need()
    hold = 5.0 * S
    ns, ifname = relay_namespace(ctx, "eth")
    tmp = ctx.tmpdir()
    conf = os.path.join(tmp, "etrelay.conf")
    with open(conf, "w") as f:
        f.write(tunnel_conf(ifname, H.free_udp_port()))
    env, state = control_files(tmp)
    cp = H.control_plane(ctx, host=ns.host_ip)
    held = []

    def held_open(csr):
        held.append(time.monotonic())
        cp.stop.wait(hold)
        return 503, {"code": "unavailable", "message": "held"}
    cp.set(cert=held_open)
    ms = lambda s: f"{int(s * 1000)}ms"  # noqa: E731
    relay = start_relay(ctx, ns, env, "-c", conf, *control_args(cp, state, ms(hold + 2)),
                        "--control-cert-retry-min", ms(RETRY_MIN),
                        "--control-cert-retry-max", ms(RETRY_MAX))
    H.wait_until(lambda: len(held) >= 3, T(3 * hold + 5), "three certificate requests")
    # (the third just made: the second has ended, cut short or not)
    end = time.monotonic()
    hb = [r[0] for r in cp.of(H.CONTROL_HEARTBEAT) if r[0] >= held[0] - INTERVAL]
    hb.append(end)
    gap = max(b - a for a, b in zip(hb, hb[1:]))
    H.log(f"longest gap between heartbeats while held: {gap:.2f} s (hold {hold} s)")
    if gap > hold / 2:
        raise H.TestFailure(f"a heartbeat {gap:.2f} s after the one before while "
                            f"RequestCertificate was held open {hold} s (interval {INTERVAL} s)")
    relay.wait_for_line(r"^control: tunnel certificate request failed \(no answer within "
                        r"\d+ ms\); no certificate yet", T(3), what="the held request cut short")
    ctx.check_relays_alive()


def test(ctx):
    H.run_parts(ctx, [tunnel_certificate_is_asked_for_renewed_and_kept,
                      a_held_certificate_request_does_not_hold_the_heartbeat])


if __name__ == "__main__":
    H.main(test)
