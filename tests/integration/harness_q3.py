# SPDX-License-Identifier: ISC
"""The game's packets as the tests write and read them: connectionless
commands (cmd, split_command, parse_info), game packets with a qport
(new_qport, game_packet), a getstatus answer of a given size
(status_payload)."""

import random
import re
import string
import struct
import threading

from harness_base import PREFIX


_QPORTS = iter(range(20000, 60000))
_QPORTS_LOCK = threading.Lock()


def new_qport():
    """A qport no other client of this test uses: the relay drops an in-game
    datagram whose qport is not its session's, or is another session's."""
    with _QPORTS_LOCK:
        return next(_QPORTS)


def game_packet(qport, data=b"", seq=1):
    """An in-game datagram as a client sends it: sequence (4 bytes), qport
    (2 bytes, little-endian), then data."""
    return struct.pack("<iH", seq, qport) + data


def cmd(text):
    """A connectionless packet: \\xff\\xff\\xff\\xff + text."""
    if isinstance(text, str):
        text = text.encode("latin-1")
    return PREFIX + text


def parse_info(s):
    """'\\k\\v\\k2\\v2' -> dict."""
    parts = s.split("\\")
    if parts and parts[0] == "":
        parts = parts[1:]
    return {parts[i]: parts[i + 1] for i in range(0, len(parts) - 1, 2)}


def split_command(data):
    """Connectionless packet -> (command word as sent, rest as str), or
    (None, None) for in-game packets."""
    if not data.startswith(PREFIX):
        return None, None
    text = data[4:].decode("latin-1")
    m = re.match(r"([^\s]*)[ \t]*(.*)", text, re.S)
    return m.group(1), m.group(2)


def status_payload(size, challenge=None):
    """A statusResponse of exactly `size` bytes (if size is given) with a
    pseudo-random printable filler so that reordering or corruption shows."""
    head = b"statusResponse\n\\sv_hostname\\test\\mapname\\oasago2\\sv_maxclients\\16"
    if challenge:
        head += b"\\challenge\\" + challenge.encode("latin-1")
    head = PREFIX + head
    tail = b'\n0 12 "player"\n'
    if size is None:
        return head + tail
    pad = size - len(head) - len(tail) - len(b"\\filler\\")
    if pad < 0:
        raise ValueError("status size too small")
    rng = random.Random(size)
    alphabet = (string.ascii_letters + string.digits).encode()
    filler = bytes(rng.choice(alphabet) for _ in range(pad))
    out = head + b"\\filler\\" + filler + tail
    assert len(out) == size
    return out
