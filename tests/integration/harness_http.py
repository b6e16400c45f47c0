# SPDX-License-Identifier: ISC
"""The ops plane over HTTP: requests (http_request, curl_request), the
metrics page parsed (parse_metrics, metrics_page, get_metrics) and read
(metric_value, counter, drops, closed), JSON pages (get_json)."""

import re
import subprocess
import http.client as _http_client

from harness_base import LOOPBACK, expect_eq, fail, require_tool, short


class HttpReply:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        import json
        try:
            return json.loads(self.body)
        except ValueError as e:
            fail(f"body is not JSON ({e}): {short(self.body, 400)}")

    def __repr__(self):
        return f"HttpReply({self.status}, {short(self.body, 120)})"


def http_request(port, method, path, token=None, host=LOOPBACK, timeout=5.0, headers=None):
    """One request with http.client (a fresh connection); HttpReply."""
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    conn = _http_client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, headers=h)
        resp = conn.getresponse()
        body = resp.read()
        return HttpReply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
    finally:
        conn.close()


def curl_request(port, path, method="GET", token=None, host=LOOPBACK, timeout=5.0):
    """The same request made by curl(1); HttpReply (headers lowercased)."""
    exe = require_tool("curl")
    argv = [exe, "-sS", "--max-time", f"{timeout:g}", "-D", "-", "-o", "-",
            "-w", "\n@@status=%{http_code}"]
    if method == "HEAD":
        argv += ["-I"]
    elif method != "GET":
        argv += ["-X", method]
    if token is not None:
        argv += ["-H", f"Authorization: Bearer {token}"]
    argv.append(f"http://{host}:{port}{path}")
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout + 5)
    except subprocess.TimeoutExpired:
        fail(f"curl {path}: no answer within {timeout + 5:g} s")
    out = p.stdout
    if p.returncode != 0:
        fail(f"curl {method} {path}: exit {p.returncode}: {p.stderr.decode(errors='replace').strip()}")
    head, _, status = out.rpartition(b"\n@@status=")
    raw_headers, _, body = head.partition(b"\r\n\r\n")
    hdrs = {}
    for line in raw_headers.split(b"\r\n")[1:]:
        k, _, v = line.decode("latin-1").partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return HttpReply(int(status), hdrs, body)


_SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$")
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def parse_metrics(text):
    """Prometheus text format -> {(name, ((label, value), ...)): float}; label
    pairs sorted by label name, values unescaped. Fails on a line it cannot
    read."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = _SAMPLE_RE.match(line)
        if not m:
            fail(f"/metrics line {n} is not a sample: {line!r}")
        name, labels, value = m.groups()
        pairs = []
        pos = 0
        labels = labels or ""
        while pos < len(labels):
            lm = _LABEL_RE.match(labels, pos)
            if not lm:
                fail(f"/metrics line {n}: cannot read labels {labels!r}")
            v = re.sub(r'\\(.)', lambda mm: "\n" if mm.group(1) == "n" else mm.group(1), lm.group(2))
            pairs.append((lm.group(1), v))
            pos = lm.end()
        key = (name, tuple(sorted(pairs)))
        if key in out:
            fail(f"/metrics: duplicate sample {line!r}")
        out[key] = float(value)
    return out


def metrics_page(port):
    """GET /metrics on the ops port without a token: (text, parse_metrics(text))."""
    r = http_request(port, "GET", "/metrics")
    expect_eq(r.status, 200, "GET /metrics")
    return r.text, parse_metrics(r.text)


def metric_value(samples, name, **labels):
    """Sum of the samples of name whose labels include labels; None when
    there is none."""
    vals = [v for (n, pairs), v in samples.items()
            if n == name and all((k, str(lv)) in pairs for k, lv in labels.items())]
    return sum(vals) if vals else None


def get_metrics(port, token, host=LOOPBACK):
    """GET /metrics -> parse_metrics() samples; fails unless 200."""
    r = http_request(port, "GET", "/metrics", token=token, host=host)
    if r.status != 200:
        fail(f"GET /metrics: status {r.status}: {short(r.body)}")
    return parse_metrics(r.text)


def get_json(port, path, token, host=LOOPBACK):
    """GET path -> parsed JSON; fails unless 200."""
    r = http_request(port, "GET", path, token=token, host=host)
    if r.status != 200:
        fail(f"GET {path}: status {r.status}: {short(r.body)}")
    return r.json()


def drops(samples, reason):
    """etrelay_dropped_datagrams_total{reason=...} (0 when absent)."""
    return int(metric_value(samples, "etrelay_dropped_datagrams_total", reason=reason) or 0)


def closed(samples, reason):
    """etrelay_sessions_closed_total{reason=...} (0 when absent)."""
    return int(metric_value(samples, "etrelay_sessions_closed_total", reason=reason) or 0)


def counter(samples, name, **labels):
    """A sample's value as an int (0 when absent)."""
    return int(metric_value(samples, name, **labels) or 0)
