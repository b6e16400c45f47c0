#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The ops plane's routes, status codes and tokens.

With all three tokens set: /healthz 200; /readyz 503 until the game server
answered a probe, then 200; /lifecycle's JSON (role, state, backend, active
sessions counted from real clients, the master's listing confirmed once it
challenged and got its answer); /metrics; 401 without or with a wrong
token, for a read token that tries to drain and a metrics token that tries
to read /lifecycle; 404 and 405. /readyz says why it is not ready without
naming the game server. A token under 32 bytes, or a _FILE every user may
read, stops etrelay without printing it; a _FILE behind a symlink is read
and the link named. A _FILE token is re-read on SIGHUP; a bad one then
(world-readable, short, missing) keeps the old token. Without any token a
warning says so at startup. Without the
lifecycle token, drain and resume do not exist (404). A public
--ops-listen address is refused unless --ops-allow-public. GET /sessions
renders at most once every 0.2 s, however many clients poll it."""

import json
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

LC, READ, MET = H.TOKEN_VARS
BEARER = 'Bearer realm="etrelay"'


def token(n=40):
    return os.urandom(n)[:n].hex()[:n]


def expect_status(reply, status, what):
    if reply.status != status:
        H.fail(f"{what}: expected HTTP {status}, got {reply.status} "
               f"(body {H.short(reply.body, 300)})")
    return reply


def get(port, path, tok=None, method="GET"):
    return H.http_request(port, method, path, token=tok)


def start_relay(ctx, env, gs, master, ops_port, *extra):
    return H.relay_env(ctx, env, "--master", f"127.0.0.1:{master.port}",
                       "--upstream", f"127.0.0.1:{gs.port}",
                       "--ops-listen", f"127.0.0.1:{ops_port}", *extra)


def routes(ctx):
    gs = ctx.game_server(respond=False)  # mute until we have seen /readyz say 503
    master = ctx.master()
    port = H.free_tcp_port()
    toks = {LC: token(), READ: token(), MET: token()}
    lc, rd, mt = toks[LC], toks[READ], toks[MET]
    relay = start_relay(ctx, toks, gs, master, port,
                        "--heartbeat-interval", "1s", "--probe-timeout", "300ms")
    start = relay.mark()

    r = expect_status(H.curl_request(port, "/healthz"), 200, "curl GET /healthz without a token")
    H.expect_eq(r.body, b"ok\n", "/healthz body")
    H.expect_eq(r.headers.get("cache-control"), "no-store", "/healthz Cache-Control")
    r = expect_status(get(port, "/readyz"), 503, "/readyz before the game server answered")
    # /readyz needs no token: it says why in words and never names the
    # hidden game server (/lifecycle does, behind the read token)
    H.expect_eq(r.body, b"relay default: the game server was not probed yet\n",
                "/readyz 503 body before the first probe round")
    H.check(str(gs.port).encode() not in r.body, f"/readyz names the game server: {r.body!r}")
    relay.wait_for_line(rf"^server down: 127\.0\.0\.1:{gs.port} did not answer 3 probes$", 5.0,
                        start)
    # the state is published just after the line is logged: allow a moment
    r = H.wait_until(lambda: (lambda x: x if b"did not answer" in x.body else None)(get(port, "/readyz")),
                     1.0, "/readyz to say the game server did not answer")
    expect_status(r, 503, "/readyz after a whole probe round went unanswered")
    H.expect_eq(r.body, b"relay default: the game server did not answer its last probe\n",
                "/readyz 503 body once the server did not answer")
    H.expect_eq(expect_status(get(port, "/lifecycle"), 401, "/lifecycle without a token").body,
                b"unauthorized\n", "/lifecycle body without a token")
    H.expect_eq(relay.count(r"^ops: no token is set"), 0,
                "'no token is set' warnings with all three tokens set")
    life = expect_status(get(port, "/lifecycle", rd), 200, "/lifecycle (read token)").json()
    H.expect_eq(life["relays"][0]["server"], "down", "/lifecycle relays[0].server while mute")
    m0 = life["relays"][0]["masters"][0]
    H.expect_eq((m0["listing_confirmed"], m0["last_heartbeat"], m0["last_result"]),
                (False, None, "none"), "master status before any heartbeat "
                "(listing_confirmed, last_heartbeat, last_result)")

    # the game server answers: ready, heartbeats, the master challenges
    gs.respond = True
    relay.wait_for_line(rf"^server up: 127\.0\.0\.1:{gs.port} answered the probe$", 5.0, start)
    H.wait_until(lambda: get(port, "/readyz").status == 200, 1.0,
                 "/readyz 200 once the server answered")
    r = expect_status(H.curl_request(port, "/readyz"), 200, "curl /readyz once the server answered")
    H.expect_eq(r.body, b"ready\n", "/readyz body when ready")
    H.wait_until(lambda: relay.addr in master.listed_set(), 5.0,
                 "the master stand-in to list the relay's public address")
    relay.wait_for_line(rf"^relay default: master 127\.0\.0\.1:{master.port} challenged us and "
                        r"got its answer$", 3.0, start)

    life = expect_status(get(port, "/lifecycle", lc), 200, "/lifecycle (lifecycle token)").json()
    H.expect_eq(life.get("role"), "relay", "/lifecycle role")
    H.expect_eq(life.get("state"), "active", "/lifecycle state")
    H.expect_eq(life.get("backend"), ctx.backend, "/lifecycle backend")
    H.expect_eq(life.get("version"), "0.1.0", "/lifecycle version")
    H.check(isinstance(life.get("uptime_seconds"), int) and 0 <= life["uptime_seconds"] <= 30,
            f"/lifecycle uptime_seconds: {life.get('uptime_seconds')!r}")
    # the master's challenge is the only client so far: one session
    H.expect_eq(life["details"]["active_sessions"], 1,
                "details.active_sessions with only the master's challenge session")
    rel = life["relays"]
    H.expect_eq(len(rel), 1, "number of relays in /lifecycle")
    H.expect_eq((rel[0]["name"], rel[0]["public_address"], rel[0]["upstream"], rel[0]["game"],
                 rel[0]["server"]),
                ("default", f"127.0.0.1:{relay.port}", f"127.0.0.1:{gs.port}", "ET", "up"),
                "relays[0] name, public_address, upstream, game, server")
    ms = rel[0]["masters"]
    H.expect_eq(len(ms), 1, "masters in /lifecycle")
    H.expect_eq((ms[0]["name"], ms[0]["address"], ms[0]["last_result"], ms[0]["listing_confirmed"]),
                (f"127.0.0.1:{master.port}", f"127.0.0.1:{master.port}", "sent", True),
                "masters[0] name, address, last_result, listing_confirmed")
    H.check(isinstance(ms[0]["last_heartbeat"], int) and abs(ms[0]["last_heartbeat"] - time.time()) < 10,
            f"masters[0].last_heartbeat is not the current unix time: {ms[0]['last_heartbeat']!r}")

    # three real clients: three more sessions
    clients = [ctx.client(relay) for _ in range(3)]
    for i, c in enumerate(clients):
        p = c.game(b"\x01client-%d" % i)
        H.expect_eq(c.request(p, what="echo"), b"ECHO:" + p, f"client {i} echo")
    life = expect_status(get(port, "/lifecycle", rd), 200, "/lifecycle (read token)").json()
    H.expect_eq(life["details"]["active_sessions"], 4,
                "details.active_sessions after 3 clients (plus the master's session)")
    H.expect_eq(life["relays"][0]["active_sessions"], 4, "relays[0].active_sessions")
    r = expect_status(H.curl_request(port, "/lifecycle", token=rd), 200, "curl /lifecycle")
    H.expect_eq(r.headers.get("content-type"), "application/json", "/lifecycle Content-Type")
    H.expect_eq(json.loads(r.body)["details"]["active_sessions"], 4, "curl: active_sessions")

    # /metrics: every token may read it
    for who, t in (("metrics", mt), ("read", rd), ("lifecycle", lc)):
        r = expect_status(get(port, "/metrics", t), 200, f"/metrics with the {who} token")
        H.expect_eq(r.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8",
                    "/metrics Content-Type")
        s = H.parse_metrics(r.text)
        H.expect_eq(H.metric_value(s, "etrelay_sessions_active", relay="default"), 4.0,
                    f"etrelay_sessions_active ({who} token)")
    r = expect_status(H.curl_request(port, "/metrics", token=mt), 200, "curl /metrics")
    H.check(b'etrelay_backend_info{backend="%s"} 1' % ctx.backend.encode() in r.body,
            "curl /metrics: no etrelay_backend_info line for this backend")

    # 401: no token, a wrong one, near misses, another scheme
    bad = {
        "no token": {},
        "a wrong token": {"Authorization": f"Bearer {token()}"},
        "the lifecycle token minus its last byte": {"Authorization": f"Bearer {lc[:-1]}"},
        "the lifecycle token plus a byte": {"Authorization": f"Bearer {lc}x"},
        "the lifecycle token as Basic": {"Authorization": f"Basic {lc}"},
        "an empty Bearer": {"Authorization": "Bearer "},
    }
    for path, method in (("/lifecycle", "GET"), ("/metrics", "GET"),
                         ("/lifecycle/drain", "POST"), ("/lifecycle/resume", "POST")):
        for what, hdr in bad.items():
            r = H.http_request(port, method, path, headers=hdr)
            expect_status(r, 401, f"{method} {path} with {what}")
            H.expect_eq(r.headers.get("www-authenticate"), BEARER,
                        f"WWW-Authenticate of {method} {path} with {what}")
    r = expect_status(H.curl_request(port, "/lifecycle"), 401, "curl /lifecycle without a token")
    r = expect_status(H.curl_request(port, "/lifecycle/drain", method="POST", token=token()), 401,
                      "curl POST /lifecycle/drain with a wrong token")
    # the scheme is case-insensitive
    r = H.http_request(port, "GET", "/lifecycle", headers={"Authorization": f"bearer {rd}"})
    expect_status(r, 200, "GET /lifecycle with 'bearer' in lower case")

    # a read token cannot drain; a metrics token cannot read /lifecycle
    for path in ("/lifecycle/drain", "/lifecycle/resume"):
        expect_status(get(port, path, rd, "POST"), 401, f"POST {path} with the read-only token")
        expect_status(get(port, path, mt, "POST"), 401, f"POST {path} with the metrics token")
    expect_status(get(port, "/lifecycle", mt), 401, "GET /lifecycle with the metrics token")
    expect_status(get(port, "/readyz"), 200, "/readyz after refused drains (still active)")
    H.expect_eq(relay.count(r"^ops: lifecycle "), 0, "lifecycle changes logged after refused drains")

    # 404 and 405
    for path in ("/", "/nope", "/healthz/", "/HEALTHZ", "/metrics/", "/lifecycle/drain/x",
                 "/lifecycle/pause"):
        expect_status(get(port, path, lc), 404, f"GET {path} (lifecycle token)")
        expect_status(get(port, path, None, "POST"), 404, f"POST {path} (no token)")
    for method, path, allow in (("POST", "/healthz", "GET, HEAD"), ("PUT", "/readyz", "GET, HEAD"),
                                ("DELETE", "/metrics", "GET, HEAD"),
                                ("POST", "/lifecycle", "GET, HEAD"),
                                ("GET", "/lifecycle/drain", "POST"),
                                ("GET", "/lifecycle/resume", "POST")):
        r = expect_status(get(port, path, lc, method), 405, f"{method} {path}")
        H.expect_eq(r.headers.get("allow"), allow, f"Allow header of {method} {path}")
    r = expect_status(H.curl_request(port, "/healthz", method="POST"), 405, "curl POST /healthz")
    r = expect_status(get(port, "/healthz", None, "HEAD"), 200, "HEAD /healthz")
    H.expect_eq(r.body, b"", "HEAD /healthz body")

    # drain and resume with the lifecycle token
    r = expect_status(get(port, "/lifecycle/drain", lc, "POST"), 200, "POST /lifecycle/drain")
    H.expect_eq(r.json()["state"], "draining", "state in the drain answer")
    r = expect_status(get(port, "/readyz"), 503, "/readyz while draining")
    H.expect_eq(r.body, b"draining\n", "/readyz body while draining")
    H.expect_eq(expect_status(get(port, "/lifecycle", rd), 200, "/lifecycle").json()["state"],
                "draining", "/lifecycle state while draining")
    r = expect_status(H.curl_request(port, "/lifecycle/resume", method="POST", token=lc), 200,
                      "curl POST /lifecycle/resume")
    H.expect_eq(json.loads(r.body)["state"], "active", "state in the resume answer")
    expect_status(get(port, "/readyz"), 200, "/readyz after resume")
    relay.wait_for_line(r"^ops: lifecycle draining: new sessions refused \(asked by 127\.0\.0\.1:\d+\)$",
                        2.0, start)
    relay.wait_for_line(r"^ops: lifecycle active: new sessions accepted \(asked by 127\.0\.0\.1:\d+\)$",
                        2.0, start)
    # no token ever reaches the log
    text = "\n".join(relay.text_lines())
    for name, t in toks.items():
        H.check(t not in text, f"the {name} value appears in etrelay's log")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM")
    gs.stop()
    master.stop()


def bad_tokens(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    base = ["--listen", f"127.0.0.1:{H.free_udp_port()}", "--upstream", f"127.0.0.1:{gs.port}",
            "--master", f"127.0.0.1:{master.port}", "--backend", ctx.backend,
            "--ops-listen", f"127.0.0.1:{H.free_tcp_port()}"]
    d = ctx.tmpdir()
    good = {LC: token(), READ: token(), MET: token()}
    for var in H.TOKEN_VARS:
        short = token(31)
        rc, out, err = H.run_etrelay(ctx, base, env=dict(good, **{var: short}), timeout=5)
        what = f"{var} of 31 bytes"
        H.check(rc not in (0, None), f"{what}: etrelay exit status {rc}, expected a refusal; "
                f"stderr {err.strip()[:300]!r}")
        H.check(var in err, f"{what}: the message does not name {var}: {err.strip()!r}")
        H.check(short not in out + err, f"{what}: etrelay printed the token: {err.strip()!r}")
        H.check("listening on" not in err, f"{what}: etrelay started anyway: {err.strip()!r}")
        H.log(f"{what}: exit {rc}: {err.strip()}")
        # the file form: same rule, named by its _FILE variable
        path = os.path.join(d, f"{var}.short")
        with open(path, "w") as f:
            f.write(short + "\n")
        env = dict(good)
        del env[var]
        env[var + "_FILE"] = path
        rc, out, err = H.run_etrelay(ctx, base, env=env, timeout=5)
        H.check(rc not in (0, None) and var + "_FILE" in err and short not in out + err,
                f"{var}_FILE holding 31 bytes: expected a refusal naming {var}_FILE without the "
                f"token, seen exit {rc}, stderr {err.strip()[:300]!r}")
    # a token file every user may read is refused at startup, naming the
    # file and the fix (as ssh does for keys), exit 78 like any config error
    wr = os.path.join(d, "world-readable.tok")
    secret = token()
    with open(wr, "w") as f:
        f.write(secret + "\n")
    os.chmod(wr, 0o644)
    env = dict(good)
    del env[READ]
    env[READ + "_FILE"] = wr
    rc, out, err = H.run_etrelay(ctx, base, env=env, timeout=5)
    H.log(f"world-readable {READ}_FILE: exit {rc}: {err.strip()}")
    H.expect_eq(rc, 78, f"exit status with a world-readable {READ}_FILE (stderr {err.strip()[:300]!r})")
    for w in (READ + "_FILE", wr, "0644", "chmod 600"):
        H.check(w in err, f"world-readable {READ}_FILE: the message does not say {w!r}: {err.strip()!r}")
    H.check(secret not in out + err and "listening on" not in err,
            f"world-readable {READ}_FILE: printed the token or started anyway: {err.strip()!r}")
    # a symlink to a private file is read (Kubernetes mounts secrets so),
    # and named in the log
    os.chmod(wr, 0o600)
    link = os.path.join(d, "link.tok")
    os.symlink(wr, link)
    env[READ + "_FILE"] = link
    port = H.free_tcp_port()
    relay = start_relay(ctx, env, gs, master, port)
    expect_status(get(port, "/lifecycle", secret), 200, "/lifecycle with the token read through a symlink")
    H.expect_eq(relay.count(rf"^ops: {READ}_FILE={link} is a symlink to {wr}; reading the file it points to$"),
                1, "log lines naming the symlink")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM (token through a symlink)")
    # both forms at once is ambiguous
    path = os.path.join(d, "lc.tok")
    with open(path, "w") as f:
        f.write(token() + "\n")
    rc, out, err = H.run_etrelay(ctx, base, env=dict(good, **{LC + "_FILE": path}), timeout=5)
    H.check(rc not in (0, None) and LC in err and good[LC] not in err,
            f"{LC} and {LC}_FILE both set: expected a refusal, seen exit {rc}, {err.strip()[:300]!r}")
    # 32 bytes exactly is enough
    exact = {LC: token(32), READ: token(32), MET: token(32)}
    port = H.free_tcp_port()
    relay = start_relay(ctx, exact, gs, master, port)
    expect_status(get(port, "/lifecycle", exact[READ]), 200, "/lifecycle with a 32-byte read token")
    expect_status(get(port, "/metrics", exact[MET]), 200, "/metrics with a 32-byte metrics token")
    expect_status(get(port, "/lifecycle/resume", exact[LC], "POST"), 200,
                  "resume with a 32-byte lifecycle token")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM (32-byte tokens)")
    gs.stop()
    master.stop()


def token_file_reload(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    d = ctx.tmpdir()
    path = os.path.join(d, "lifecycle.token")

    def write(text, mode=0o600):
        tmp = path + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)

    old, new = token(48), token(48)
    write(old + "\n")
    port = H.free_tcp_port()
    relay = start_relay(ctx, {LC + "_FILE": path}, gs, master, port)
    expect_status(get(port, "/lifecycle", old), 200, "/lifecycle with the token from the file")
    expect_status(get(port, "/lifecycle", new), 401, "/lifecycle with the next token, before SIGHUP")
    expect_status(get(port, "/lifecycle/resume", old, "POST"), 200, "resume with the file's token")

    def hup(expect_re, what):
        mark = relay.mark()
        os.kill(relay.pid, signal.SIGHUP)
        relay.wait_for_line(expect_re, 3.0, mark, what)
        H.check(relay.alive(), f"etrelay exited on SIGHUP ({what})")

    write(new + "\n")
    # the file changed but nobody said so: the old token still rules
    expect_status(get(port, "/lifecycle", old), 200, "old token after the file changed, before SIGHUP")
    hup(r"^SIGHUP: .*tokens reloaded", "reload of the rotated token")
    expect_status(get(port, "/lifecycle", old), 401, "the old token after SIGHUP")
    expect_status(get(port, "/lifecycle", new), 200, "the new token after SIGHUP")
    expect_status(get(port, "/lifecycle/drain", new, "POST"), 200, "drain with the new token")
    expect_status(get(port, "/lifecycle/resume", old, "POST"), 401, "resume with the old token")
    expect_status(get(port, "/lifecycle/resume", new, "POST"), 200, "resume with the new token")

    # a bad file on SIGHUP keeps the previous token, and the log has no token
    bad = "tooshort" + token(8)
    write(bad + "\n")
    hup(r"^SIGHUP: .*keeping the previous tokens$", "reload of a too-short token")
    expect_status(get(port, "/lifecycle", new), 200, "the kept token after a bad reload")
    expect_status(get(port, "/lifecycle", bad), 401, "the rejected short token")
    # a world-readable file on SIGHUP: named, refused, the old token stays
    third = token(48)
    write(third + "\n", 0o644)
    mark = relay.mark()
    hup(r"^SIGHUP: .*keeping the previous tokens$", "reload of a world-readable file")
    line = [l for l in relay.text_lines(mark) if l.startswith("SIGHUP: ")][0]
    H.check(path in line and "every user read" in line and "chmod 600" in line,
            f"SIGHUP with a world-readable file: the warning should name {path} and the fix: {line!r}")
    expect_status(get(port, "/lifecycle", new), 200, "the kept token after a world-readable file")
    expect_status(get(port, "/lifecycle", third), 401, "the token of the world-readable file")
    os.unlink(path)
    hup(r"^SIGHUP: .*keeping the previous tokens$", "reload of a missing file")
    expect_status(get(port, "/lifecycle", new), 200, "the kept token after the file vanished")
    text = "\n".join(relay.text_lines())
    for t in (old, new, bad, third):
        H.check(t not in text, "a token appears in etrelay's log")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM (token file)")
    gs.stop()
    master.stop()


def without_lifecycle_token(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)
    rd, mt = token(), token()
    port = H.free_tcp_port()
    relay = start_relay(ctx, {READ: rd, MET: mt}, gs, master, port)
    H.expect_eq(relay.count(r"^ops: no token is set"), 0,
                "'no token is set' warnings with a read and a metrics token")
    for path in ("/lifecycle/drain", "/lifecycle/resume"):
        for who, t in (("no token", None), ("the read token", rd), ("the metrics token", mt)):
            expect_status(get(port, path, t, "POST"), 404,
                          f"POST {path} with {who}, no lifecycle token configured")
    expect_status(get(port, "/lifecycle", rd), 200, "/lifecycle with the read token")
    expect_status(get(port, "/lifecycle"), 401, "/lifecycle without a token (read token configured)")
    expect_status(get(port, "/metrics", mt), 200, "/metrics with the metrics token")
    H.expect_eq(get(port, "/lifecycle", rd).json()["state"], "active",
                "state after the 404 drains")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM (no lifecycle token)")

    # no token at all: read routes are open, drain and resume still absent
    port = H.free_tcp_port()
    relay = start_relay(ctx, {}, gs, master, port)
    # said once at startup: who can reach the listener can read addresses
    H.expect_eq(relay.count(rf"^ops: no token is set: whoever reaches 127\.0\.0\.1:{port} can read "
                            r"/lifecycle and /sessions \(the game server's and players' "
                            r"addresses, TURN usernames\) "
                            rf"and /metrics; set {READ} \(or {READ}_FILE\)$"), 1,
                "startup warnings that the ops plane runs without a token")
    expect_status(get(port, "/lifecycle"), 200, "/lifecycle with no token configured")
    expect_status(get(port, "/metrics"), 200, "/metrics with no token configured")
    expect_status(get(port, "/lifecycle/drain", None, "POST"), 404, "drain with no token configured")
    expect_status(get(port, "/lifecycle/drain", token(), "POST"), 404,
                  "drain with some bearer and no token configured")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM (no tokens)")
    gs.stop()
    master.stop()


def public_address(ctx):
    gs = ctx.game_server()
    master = ctx.master(challenge=False)

    def base():
        return ["--listen", f"127.0.0.1:{H.free_udp_port()}", "--upstream", f"127.0.0.1:{gs.port}",
                "--master", f"127.0.0.1:{master.port}", "--backend", ctx.backend]

    # refused before binding: nothing is ever sent to 8.8.8.8
    t = time.monotonic()
    rc, out, err = H.run_etrelay(ctx, base() + ["--ops-listen", "8.8.8.8:9100"], timeout=5)
    H.check(rc not in (0, None), f"--ops-listen 8.8.8.8:9100: exit {rc}, expected a refusal")
    H.check("8.8.8.8:9100" in err and "--ops-allow-public" in err,
            f"--ops-listen 8.8.8.8:9100: message should name the address and --ops-allow-public: "
            f"{err.strip()!r}")
    H.check(time.monotonic() - t < 4.0, "--ops-listen 8.8.8.8:9100 took over 4 s to be refused")
    # -t refuses what the start refuses (exit 78, or `etrelay -t && systemctl
    # restart` takes every listener down), in the words of where it was set
    rc, out, err = H.run_etrelay(ctx, ["-t"] + base() + ["--ops-listen", "8.8.8.8:9100"], timeout=5)
    H.check(rc == 64 and "etrelay: --ops-listen 8.8.8.8:9100: not a private address" in err
            and "--ops-allow-public" in err and "is valid" not in out,
            f"-t --ops-listen 8.8.8.8:9100: expected exit 64 (usage) naming the option, seen {rc}, "
            f"{err.strip()!r}")
    conf = os.path.join(ctx.tmpdir(), "public-ops.conf")
    with open(conf, "w") as f:
        f.write(f"listen 127.0.0.1:{H.free_udp_port()}\nupstream 127.0.0.1:{gs.port}\n"
                f"master 127.0.0.1:{master.port}\n\nops-listen 8.8.8.8:9100\n")
    for test in (["-t"], []):
        rc, out, err = H.run_etrelay(ctx, test + ["-c", conf, "--backend", ctx.backend], timeout=5)
        H.check(rc == 78 and f"{conf}:5: ops-listen 8.8.8.8:9100: not a private address" in err
                and "set ops-allow-public yes" in err and "--ops" not in err,
                f"{' '.join(test)} ops-listen 8.8.8.8:9100 in a file: expected exit 78 naming "
                f"{conf}:5 and the key, seen {rc}, {err.strip()!r}")
    port = H.free_tcp_port()
    for addr in (f"0.0.0.0:{port}", f"[::]:{port}", "[::ffff:8.8.8.8]:9100", "[2001:db8::1]:9100"):
        rc, out, err = H.run_etrelay(ctx, base() + ["--ops-listen", addr], timeout=5)
        H.check(rc not in (0, None) and "--ops-allow-public" in err and "listening on" not in err,
                f"--ops-listen {addr} without --ops-allow-public: expected a refusal that names "
                f"--ops-allow-public, seen exit {rc}, {err.strip()!r}")
    # a port somebody else holds: an error naming it, not a silent relay
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind((H.LOOPBACK, H.free_tcp_port()))  # drawn: below the ephemeral ports
    holder.listen(1)
    busy = holder.getsockname()[1]
    try:
        rc, out, err = H.run_etrelay(ctx, base() + ["--ops-listen", f"127.0.0.1:{busy}"], timeout=5)
    finally:
        holder.close()
    H.check(rc not in (0, None) and f"127.0.0.1:{busy}" in err,
            f"--ops-listen on a busy port: expected a failure naming it, seen exit {rc}, {err.strip()!r}")
    # allowed: 0.0.0.0 with --ops-allow-public serves, on loopback too
    port = H.free_tcp_port()
    relay = H.relay_env(ctx, {MET: token()}, "--master", f"127.0.0.1:{master.port}",
                        "--upstream", f"127.0.0.1:{gs.port}",
                        "--ops-listen", f"0.0.0.0:{port}", "--ops-allow-public")
    r = expect_status(H.curl_request(port, "/healthz"), 200, "/healthz on 0.0.0.0 with --ops-allow-public")
    H.expect_eq(r.body, b"ok\n", "/healthz body on 0.0.0.0")
    expect_status(get(port, "/metrics"), 401, "/metrics on 0.0.0.0 without a token")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM (--ops-allow-public)")

    # IPv6 loopback is private: served without --ops-allow-public
    try:
        probe = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        probe.bind(("::1", 0))  # is there an IPv6 loopback? (the port is not used)
        probe.close()
    except OSError:
        ctx.note("no IPv6 loopback here: --ops-listen [::1] not tried")
        return
    port6 = H.free_tcp_port()  # drawn below the ephemeral ports, not one bind(0) gave
    relay = H.relay_env(ctx, {}, "--master", f"127.0.0.1:{master.port}",
                        "--upstream", f"127.0.0.1:{gs.port}", "--ops-listen", f"[::1]:{port6}")
    r = expect_status(H.http_request(port6, "GET", "/healthz", host="::1"), 200,
                      f"/healthz on --ops-listen [::1]:{port6}")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM ([::1])")


def no_tokens(ctx):
    """SIGHUP with the ops plane on and no token set says so, and does not
    claim that tokens were reloaded."""
    gs, master = ctx.game_server(), ctx.master()
    port = H.free_tcp_port()
    relay = start_relay(ctx, {}, gs, master, port)
    relay.signal(signal.SIGHUP)
    relay.expect_exit = False
    relay.wait_for_line(r"^SIGHUP: no ops tokens set$", timeout=5.0, what="the SIGHUP line")
    # said once per change, not per signal: more SIGHUPs (spaced, so that
    # they do not merge while pending) log nothing more; SIGHUP is read
    # before a SIGTERM pending with it, so all are handled before the exit
    for _ in range(4):
        time.sleep(0.05)
        relay.signal(signal.SIGHUP)
    H.expect_eq(relay.count(r"tokens reloaded"), 0, "'tokens reloaded' lines without tokens")
    relay.signal(signal.SIGTERM)
    H.expect_eq(relay.wait_exit(5.0), 0, "exit status after SIGTERM (no tokens)")
    H.expect_eq(relay.count(r"^SIGHUP: no ops tokens set$"), 1,
                "'no ops tokens set' lines after five SIGHUPs")


def sessions_rate(ctx):
    """GET /sessions is rendered by every packet loop: however many clients
    poll it, at most one render every 0.2 s (DAEMON_SESSIONS_EVERY_NS), each
    answer fresh. Four clients polling for 2 s get at most ~14 answers (an
    outside tester's four pollers moved the relay's p50 40x; before the
    bound they got hundreds)."""
    import threading
    gs, master = ctx.game_server(), ctx.master()
    port = H.free_tcp_port()
    start_relay(ctx, {}, gs, master, port)
    H.wait_until(lambda: get(port, "/sessions").status == 200, 5.0 * H.SLOW, "/sessions")
    got, stop = [0], threading.Event()

    def poll():
        for _ in range(10000):
            if stop.is_set():
                return
            try:
                if get(port, "/sessions").status == 200:
                    got[0] += 1
            except OSError:
                pass
    ts = [threading.Thread(target=poll, daemon=True) for _ in range(4)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    time.sleep(2.0)
    stop.set()
    for t in ts:
        t.join(5.0)
    took = time.monotonic() - t0
    ctx.note(f"sessions_rate: {got[0]} answers to 4 pollers in {took:.1f} s")
    H.check(got[0] >= 2, f"only {got[0]} /sessions answers in {took:.1f} s")
    H.check(got[0] <= took / 0.2 + 5, f"{got[0]} /sessions renders in {took:.1f} s: more than "
            "one every 0.2 s")


def test(ctx):
    no_tokens(ctx)
    sessions_rate(ctx)
    routes(ctx)
    bad_tokens(ctx)
    token_file_reload(ctx)
    without_lifecycle_token(ctx)
    public_address(ctx)


if __name__ == "__main__":
    H.main(test)
