#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The README and doc/ pages hold together: every relative link names a
file of the tree (and, with #anchor, a heading of that page); the README
stays short (it leads, doc/ and the man pages are the reference). The
copies of contrib/ examples are test_docs_sync.py's. Usage: docs_links.py SOURCE_ROOT"""

import os
import re
import sys

MAX_README_LINES = 400


def anchors(path):
    """GitHub-style anchors of a markdown file's headings."""
    out = set()
    with open(path) as f:
        for line in f:
            m = re.match(r"#+ (.*)", line)
            if m:
                a = re.sub(r"[^a-z0-9 _-]", "", m.group(1).strip().lower())
                out.add(a.replace(" ", "-"))
    return out


def main():
    root = sys.argv[1]
    pages = [os.path.join(root, "README.md")]
    pages += sorted(os.path.join(root, "doc", p) for p in os.listdir(os.path.join(root, "doc"))
                    if p.endswith(".md"))
    bad = []
    for page in pages:
        text = open(page).read()
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(full):
                bad.append(f"{os.path.relpath(page, root)}: link to {target}: no such file")
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                bad.append(f"{os.path.relpath(page, root)}: link to {target}: no such heading")
    readme = open(pages[0]).read()
    n = readme.count("\n")
    if n > MAX_README_LINES:
        bad.append(f"README.md: {n} lines, more than {MAX_README_LINES}: move reference to doc/")
    for b in bad:
        print(b)
    print(f"{len(pages)} pages checked, {len(bad)} problems")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
