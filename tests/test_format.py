#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Every C file of the tree is as .clang-format says: clang-format
--dry-run --Werror over src/, tests/, bench/ and fuzz/. Checked with Debian
12's clang-format 14 (README's command 2 installs it; another major version
formats some lines otherwise, so it exits 77, as it does without one).

Usage: test_format.py SOURCE_ROOT"""

import os
import re
import shutil
import subprocess
import sys

WANT_MAJOR = 14
DIRS = ("src", "tests", "bench", "fuzz")


def main():
    root = os.path.abspath(sys.argv[1])
    exe = shutil.which("clang-format") or shutil.which(f"clang-format-{WANT_MAJOR}")
    if not exe:
        print("SKIP test_format: clang-format not installed (Debian: clang-format)")
        sys.exit(77)
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)\.", out)
    if not m or int(m.group(1)) != WANT_MAJOR:
        print(f"SKIP test_format: {out.strip()!r}: the tree is formatted with clang-format "
              f"{WANT_MAJOR} (Debian 12)")
        sys.exit(77)
    files = []
    for d in DIRS:
        for top, dirs, names in os.walk(os.path.join(root, d)):
            dirs[:] = [x for x in dirs if x != "corpus"]
            files += [os.path.join(top, n) for n in names if n.endswith((".c", ".h"))]
    files.sort()
    bad = []
    for i in range(0, len(files), 50):
        p = subprocess.run([exe, "--dry-run", "--Werror", *files[i:i + 50]], cwd=root,
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            bad += sorted({ln.split(":")[0] for ln in p.stderr.splitlines()
                           if ": error:" in ln})
    if bad:
        print(f"FAIL test_format: {len(bad)} of {len(files)} files differ from .clang-format "
              f"(clang-format -i them): " + ", ".join(os.path.relpath(b, root) for b in bad[:20]))
        sys.exit(1)
    print(f"test_format: {len(files)} C files as .clang-format says")


if __name__ == "__main__":
    main()
