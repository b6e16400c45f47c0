#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""No test asks etrelay for a port in the kernel's ephemeral range
(32768-60999 by default; this check refuses everything from 32768 up): a
listen port, a TURN relayed port range or a session port range written as a
literal in a test script, on a command line or in a configuration the test
writes. Any client socket of any program may sit on an ephemeral port, so
such a test fails now and then on a busy host ('bind 127.0.0.1:PORT:
Address already in use', PORT a client's); the harness draws ports below the range
(free_udp_port, free_tcp_port, free_udp_range, turn_ports) and refuses
such a port at run time too (harness.check_ports), this catches the
literal before it runs. Nor does a test's own server listen on a port the
kernel picks (a socket bound to port 0 that listens within the next lines:
an ephemeral port; the harness's socket.listen refuses one at run time
too). A line may opt out with "# port-check: not bound" (a value etrelay
refuses or never binds, such as an error message's).

Usage: test_ports_static.py FILE|DIR...   (a directory: its *.py and
integration/*.py; exit 0, or 1 listing each literal)"""

import glob
import io
import os
import re
import sys
import tokenize

LOW = 32768
RANGE = re.compile(r"^(\d{1,5})-(\d{1,5})$")
# inside a literal (a configuration a test writes, an argument line):
# ports A-B, session-ports A-B, listen H:P, tls-listen H:P
IN_RANGE = re.compile(r"(?:^|\s|\\n)(?:--)?(?:turn-|session-)?ports[\s=]+(\d+)-(\d+)")
IN_LISTEN = re.compile(r"(?:^|\s|\\n)(?:--)?(?:[a-z]+-)*listen[\s=]+\S*?:(\d+)\b")
LISTEN_FLAG = re.compile(r"^--(?:[a-z]+-)*listen$")
HOST_PORT = re.compile(r"^\S*:(\d+)$")
OPT_OUT = "# port-check: not bound"
# a socket bound to port 0 (that then listens: a server on a port the
# kernel picks from the ephemeral range)
BIND_ANY = re.compile(r"([\w.]+)\.bind\(\([^()]*,\s*0\s*\)\)")


def literals(text):
    """(line, body) of each string literal that is not a docstring."""
    out, prev = [], tokenize.NEWLINE
    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    for i, t in enumerate(toks):
        if t.type == tokenize.STRING:
            nxt = next((u.type for u in toks[i + 1:] if u.type != tokenize.NL), None)
            doc = prev in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) and \
                nxt in (tokenize.NEWLINE, tokenize.ENDMARKER)
            if not doc:
                body = re.sub(r"^[rRbBfFuU]*('{3}|\"{3}|'|\")", "", t.string)
                body = re.sub(r"('{3}|\"{3}|'|\")$", "", body)
                out.append((t.start[0], body))
        if t.type not in (tokenize.NL, tokenize.COMMENT):
            prev = t.type
    return out


def scan(path, text):
    bad = []
    lines = text.splitlines()
    lits = literals(text)
    for k, (n, body) in enumerate(lits):
        if OPT_OUT in lines[n - 1]:
            continue
        found = []
        m = RANGE.match(body)
        if m:  # "41000-41399", wherever it goes (--turn-ports, TURN_PORTS = ...)
            found.append((int(m.group(1)), int(m.group(2))))
        found += [(int(a), int(b)) for a, b in IN_RANGE.findall(body)]
        found += [(int(p), int(p)) for p in IN_LISTEN.findall(body)]
        if LISTEN_FLAG.match(body) and k + 1 < len(lits):
            m = HOST_PORT.match(lits[k + 1][1])
            if m:
                found.append((int(m.group(1)), int(m.group(1))))
        for lo, hi in found:
            if LOW <= hi <= 65535 or LOW <= lo <= 65535:
                bad.append(f"{path}:{n}: port {lo if lo == hi else f'{lo}-{hi}'} reaches the "
                           f"ephemeral range (from {LOW}): {lines[n - 1].strip()}")
    for m in BIND_ANY.finditer(text):
        n = text.count("\n", 0, m.start()) + 1
        if OPT_OUT in lines[n - 1]:
            continue
        # its listen within the next lines (a client of the same name elsewhere binds a source)
        if re.search(re.escape(m.group(1)) + r"\.listen\(", "\n".join(lines[n:n + 8])):
            bad.append(f"{path}:{n}: {m.group(1)} listens on a port the kernel picks (bound to "
                       f"port 0: an ephemeral port): {lines[n - 1].strip()}")
    return bad


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    bad, paths = [], []
    for a in sys.argv[1:]:
        if os.path.isdir(a):
            paths += sorted(glob.glob(os.path.join(a, "*.py")) +
                            glob.glob(os.path.join(a, "integration", "*.py")))
        else:
            paths.append(a)
    for path in paths:
        with open(path, encoding="utf-8") as f:
            bad += scan(path, f.read())
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} port(s) in the ephemeral range: draw them with the harness "
              f"(tests/integration/harness_ports.py: free_udp_port, free_tcp_port, free_udp_range, "
              f"turn_ports; tlsutil.TcpServer)")
        sys.exit(1)
    print(f"{len(paths)} files: no listen port or port range from {LOW} up")


if __name__ == "__main__":
    main()
