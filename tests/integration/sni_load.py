#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Bulk uploads through an SNI listener and the sink behind its route, in a
process of their own (so that the test's own timing threads do not wait for
its GIL): `sni_load.py UPLOADS SOURCES NAME` prints the sink's port, reads
the listener's port from stdin, then opens UPLOADS connections from SOURCES
addresses (127.0.3.1 up), each a ClientHello for NAME then 64 KiB blocks as
fast as they go, and prints the bytes the sink read every 0.1 s. It ends
when stdin closes, or after 120 s whatever happens. Load.start() runs it."""

import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import tlsutil as T  # noqa: E402


ERRORS = []  # (source, error) of the uploads that ended early
STARTED = []  # one entry per upload that connected and sent its hello


def upload(port, src, name, stop):
    import socket
    blob = b"u" * 65536
    c = socket.socket()
    c.settimeout(5)
    try:
        c.bind((src, 0))
        c.connect((H.LOOPBACK, port))
        c.sendall(T.hello(name))
        STARTED.append(src)
        while not stop.is_set():
            c.sendall(blob)
    except OSError as e:
        if not stop.is_set():
            ERRORS.append((src, e))
    finally:
        c.close()


class Load:
    """The parent's side: start() the process, port (the sink's), go(port),
    bytes (the sink's count, as last printed), close()."""

    def __init__(self, ctx, uploads, sources, name):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(uploads),
                                   str(sources), name], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        ctx.objs.append(self)
        self.port = int(self.p.stdout.readline())
        self.bytes = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.bytes = int(line)

    def go(self, port):
        self.p.stdin.write(f"{port}\n")
        self.p.stdin.flush()

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()


def main():
    uploads, sources, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    # The relay connects every upload to the sink at once: a backlog for
    # all of them (a full accept queue drops SYNs, retried 1 s, 3 s, 7 s on).
    sink = T.Sink(None, backlog=2 * uploads)
    print(sink.port, flush=True)
    line = sys.stdin.readline()
    if not line.strip():
        return
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    # The uploads start from a thread of their own: each start() waits for
    # its thread to run, and beside 190 busy ones on a loaded host the 192
    # starts took long enough that nothing was printed for 15 s.
    def start_all():
        for i in range(uploads):
            threading.Thread(target=upload, args=(int(line), f"127.0.3.{1 + i % sources}",
                                                  name, stop), daemon=True).start()
    threading.Thread(target=start_all, daemon=True).start()
    t0 = time.monotonic()
    end, told = t0 + 120, False
    while not stop.is_set() and time.monotonic() < end:
        print(sink.bytes, flush=True)
        if not told and sink.bytes < (4 << 20) and time.monotonic() - t0 > 5:
            told = True  # what a slow start was waiting for, once
            print(f"sni_load: after 5 s {len(STARTED)} of {uploads} uploads sent their hello, "
                  f"{len(ERRORS)} ended, the sink accepted {len(sink.conns)} and read "
                  f"{sink.bytes} bytes", file=sys.stderr, flush=True)
        stop.wait(0.1)
    stop.set()
    sink.close()
    if ERRORS:
        src, e = ERRORS[0]
        print(f"sni_load: {len(ERRORS)} of {uploads} uploads ended early, the first from {src}: "
              f"{e}", file=sys.stderr)


if __name__ == "__main__":
    main()
