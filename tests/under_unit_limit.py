#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Run a command under the descriptor limit the shipped unit gives the
service (LimitNOFILE= of contrib/etrelay.service), soft and hard: etrelay
-t refuses a configuration that needs more descriptors than its hard
limit allows, as a start under that limit does, so the examples are
checked under the service's limit, not this shell's. Where that limit
cannot be set (no CAP_SYS_RESOURCE, a lower hard limit) the command runs
under the limit there is, and when it fails and the only thing refused is
the descriptors ("-t: refused, as a start under this limit"; -t makes
every other check first), that is a skip (77), said so.

Usage: under_unit_limit.py UNIT COMMAND [ARG...]   (COMMAND *.py: run by
this Python)"""

import os
import re
import resource
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        m = re.search(r"^LimitNOFILE=(\d+)$", f.read(), re.M)
    if not m:
        sys.exit(f"{sys.argv[1]}: no LimitNOFILE=")
    n = int(m.group(1))
    cmd = sys.argv[2:]
    if cmd[0].endswith(".py"):
        cmd = [sys.executable] + cmd
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    except (OSError, ValueError) as e:
        why = (f"cannot set RLIMIT_NOFILE to the unit's LimitNOFILE={n} here (hard limit "
               f"{resource.getrlimit(resource.RLIMIT_NOFILE)[1]}): {e}")
    else:
        os.execvp(cmd[0], cmd)
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=120)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if p.returncode != 0 and "-t: refused, as a start under this limit" in p.stdout + p.stderr:
        print(f"SKIP: {why}; refused for the descriptors alone under this host's limit")
        sys.exit(77)
    sys.exit(p.returncode)


if __name__ == "__main__":
    main()
