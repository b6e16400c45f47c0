#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The TURN example configuration passes etrelay -t once its tls-cert and
tls-key name a real pair (made here with the openssl CLI; -t loads the pair
as a start does), and as shipped, naming files this host lacks, -t refuses
it (exit 78) naming the certificate. Usage: example_turn_conf.py ETRELAY
EXAMPLE."""

import os
import re
import subprocess
import sys
import tempfile


def run(binary, path):
    env = dict(os.environ, ETRELAY_TURN_SECRET="example-secret-of-at-least-32-bytes!")
    p = subprocess.run([binary, "-t", "-c", path], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=30)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def main():
    binary, example = sys.argv[1], sys.argv[2]
    with open(example) as f:
        text = f.read()
    cert = re.search(r"^tls-cert (\S+)$", text, re.M).group(1)
    rc, out, err = run(binary, example)
    if rc != 78 or f"{cert}: No such file or directory" not in err:
        sys.exit(f"as shipped: want exit 78 naming {cert}, got {rc}: {err.strip()!r}")
    with tempfile.TemporaryDirectory(prefix="etrelay-example-") as d:
        key, crt = os.path.join(d, "turn.key"), os.path.join(d, "turn.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", crt,
                        "-days", "2", "-subj", "/CN=turn.example.org"],
                       stdin=subprocess.DEVNULL, capture_output=True, check=True, timeout=30)
        text = re.sub(r"^tls-cert \S+$", f"tls-cert {crt}", text, flags=re.M)
        text = re.sub(r"^tls-key \S+$", f"tls-key {key}", text, flags=re.M)
        path = os.path.join(d, "etrelay-turn.conf")
        with open(path, "w") as f:
            f.write(text)
        rc, out, err = run(binary, path)
        if rc != 0 or "is valid" not in out:
            sys.exit(f"with a real pair: exit {rc}: {out.strip()!r} {err.strip()!r}")
    print(out, end="")


if __name__ == "__main__":
    main()
