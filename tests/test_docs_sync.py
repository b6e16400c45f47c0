#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""What the documentation copies stays what it copies.

  test_docs_sync.py readme SRCDIR
      each code block of README.md and doc/*.md introduced by
      "(`contrib/FILE`, with comments):" or "`contrib/FILE` without its
      comments" is FILE without its comment and blank lines (a key added
      to the example and not to the copy, or the reverse, fails);
  test_docs_sync.py flags ETRELAY MAN
      every option `ETRELAY --help` lists has an entry or a mention
      (Fl \\-name) in the man page MAN (man/etrelay.8).

Exit 0, or 1 naming each difference."""

import os
import re
import subprocess
import sys


def readme(src):
    pages = ["README.md"] + sorted(os.path.join("doc", p) for p in os.listdir(os.path.join(src, "doc"))
                                   if p.endswith(".md"))
    bad, n = [], 0
    intro = (r"(?:\(`(contrib/[^`]+)`, with comments\):|`(contrib/[^`]+)` without its\s+comments"
             r"[^\n]*\n(?:[^\n]+\n)*?)\s*\n```\n(.*?)```")
    for page in pages:
        with open(os.path.join(src, page), encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(intro, text, re.S):
            n += 1
            path, block = m.group(1) or m.group(2), m.group(3)
            with open(os.path.join(src, path), encoding="utf-8") as f:
                want = [l for l in f.read().splitlines() if l and not l.startswith("#")]
            got = [l for l in block.splitlines() if l]
            if got != want:
                import difflib
                diff = "\n".join(difflib.unified_diff(want, got, path, page, lineterm="", n=1))
                bad.append(f"{page}'s copy of {path} differs from the file (comments and "
                           f"blank lines aside):\n{diff}")
    if n == 0:
        bad.append("README.md, doc/: no block introduced by (`contrib/FILE`, with comments): "
                   "or `contrib/FILE` without its comments")
    return bad, f"{n} block(s) of README.md and doc/ equal to their files"


def flags(binary, man):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10).stdout
    listed = set(re.findall(r"^\s+(--[a-z0-9-]+|-[a-zA-Z])\b", out, re.M))
    with open(man, encoding="utf-8") as f:
        text = f.read()
    documented = {"-" + m.replace("\\", "") if m.startswith("\\-") else "-" + m
                  for m in re.findall(r"\bFl (\\-[a-z0-9\\-]+|[a-zA-Z])\b", text)}
    missing = sorted(listed - documented)
    bad = [f"{man}: no entry or mention of {f} (etrelay --help lists it)" for f in missing]
    if len(listed) < 20:
        bad.append(f"etrelay --help listed only {len(listed)} options: {sorted(listed)}")
    return bad, f"{len(listed)} options of --help, each in {os.path.basename(man)}"


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "readme":
        bad, ok = readme(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "flags":
        bad, ok = flags(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
    for b in bad:
        print(b)
    if bad:
        sys.exit(1)
    print(ok)


if __name__ == "__main__":
    main()
