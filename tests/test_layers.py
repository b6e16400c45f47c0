#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The layers of src/ are enforced by the compiler: each folder's library
sees its own headers and those of the layers below it, nothing else. For
every folder and every other folder, a file that includes one of the other
folder's headers is compiled with the folder's own compile command (from
compile_commands.json): it must compile where LAYERS allows it and fail
with "No such file" where it does not. So a layering rule broken again (the
core including the game's q3proto.h, TURN or the control client taking
from the ops plane, SNI reaching into the game) stops the build, and this
test says so if the include paths ever let it through.

Also checked, as the compiler cannot: no include names a path (around the
include paths), and worker.c does not include daemon.h (one folder; the
worker asks its owner through struct worker_host).

Usage: test_layers.py BUILD_DIR SRC_DIR"""

import json
import os
import shlex
import subprocess
import sys
import tempfile

# folder -> the folders its library may include (itself first). The same
# order as src/meson.build; src/README.md draws it.
LAYERS = {
    "core": ["core"],
    "sys": ["sys", "core"],
    "xdp": ["xdp", "sys", "core"],
    "loop": ["loop", "core"],
    "tls": ["tls", "core"],
    "tun": ["tun", "tls", "loop", "sys", "core"],
    "fwd": ["fwd", "loop", "sys", "core"],
    "game": ["game", "fwd", "loop", "sys", "core"],
    "sni": ["sni", "loop", "sys", "core"],
    "turn": ["turn", "tls", "loop", "sys", "core"],
    "ctl": ["ctl", "sni", "tun", "tls", "loop", "sys", "core"],
    "ops": ["ops", "ctl", "sni", "turn", "tls", "tun", "xdp", "loop", "sys", "core"],
    "daemon": ["daemon", "ops", "ctl", "turn", "sni", "game", "fwd", "tls", "tun", "xdp", "loop",
               "sys", "core"],
}
# The file whose command stands for its folder's library (the daemon's
# sources are compiled into the executable, with every layer).
WITNESS = {"ctl": "control.c", "daemon": "main.c"}


def fail(msg):
    print(f"FAIL test_layers: {msg}")
    sys.exit(1)


def command_for(entries, src, folder):
    want = WITNESS.get(folder)
    for e in entries:
        f = os.path.normpath(os.path.join(e["directory"], e["file"]))
        if os.path.dirname(f) == os.path.join(src, folder) and \
                (want is None or os.path.basename(f) == want):
            return e
    fail(f"no compile command for a file of src/{folder} in compile_commands.json")


def syntax_only(entry, source):
    """entry's command with source in place of its file, checking only."""
    argv = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MQ", "-MF", "-c"):
            skip = True
            continue
        if a in ("-MD", "-MMD"):
            continue
        out.append(a)
    return out + ["-fdiagnostics-color=never", "-fsyntax-only", "-x", "c", source]


def main():
    build, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    if sorted(LAYERS) != folders:
        fail(f"src/ has the folders {folders}, LAYERS names {sorted(LAYERS)}: say where a "
             "new folder stands")
    header = {}
    for d in folders:
        hs = sorted(h for h in os.listdir(os.path.join(src, d)) if h.endswith(".h"))
        if not hs:
            fail(f"src/{d} has no header")
        header[d] = hs[0]
    bad, checked = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for d in folders:
            entry = command_for(entries, src, d)
            for other in folders:
                if other == d:
                    continue  # its own headers: found beside the including file
                probe = os.path.join(tmp, f"{d}_includes_{other}.c")
                with open(probe, "w") as f:
                    f.write(f'#include "{header[other]}"\nint layers_probe;\n')
                p = subprocess.run(syntax_only(entry, probe), cwd=entry["directory"],
                                   capture_output=True, text=True, timeout=60)
                allowed = other in LAYERS[d]
                checked += 1
                if allowed and p.returncode != 0:
                    bad.append(f"src/{d} may include {other}/{header[other]} but it does not "
                               f"compile: {p.stderr.strip()[:300]}")
                elif not allowed and p.returncode == 0:
                    bad.append(f"src/{d} compiles with {other}/{header[other]} included: its "
                               f"include path reaches a layer it must not see")
                elif not allowed and "No such file" not in p.stderr:
                    bad.append(f"src/{d} with {other}/{header[other]}: failed, but not for the "
                               f"missing header: {p.stderr.strip()[:300]}")
    for d in folders:
        for name in sorted(os.listdir(os.path.join(src, d))):
            if not name.endswith((".c", ".h")):
                continue
            with open(os.path.join(src, d, name)) as f:
                for n, line in enumerate(f, 1):
                    if line.startswith("#include \"") and "/" in line.split('"')[1]:
                        bad.append(f"src/{d}/{name}:{n}: {line.strip()}: a path in an "
                                   "include goes around the layers' include paths")
    with open(os.path.join(src, "daemon", "worker.c")) as f:
        if '#include "daemon.h"' in f.read():
            bad.append("src/daemon/worker.c includes daemon.h: the circle daemon <-> worker "
                       "is back (use struct worker_host)")
    if bad:
        fail(f"{len(bad)} of {checked} layer checks:\n  " + "\n  ".join(bad))
    print(f"test_layers: {checked} includes across {len(folders)} folders: each compiles "
          "exactly where its layer allows it")


if __name__ == "__main__":
    main()
