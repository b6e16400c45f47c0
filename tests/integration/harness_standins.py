# SPDX-License-Identifier: ISC
"""Stand-ins on loopback: a game server, a master, a DNS server that never
answers, and a game client (Client), each on its own UDP socket and
thread; stand_in_on() binds a stand-in to another address."""

import random
import socket
import threading
import time

from harness_base import LOOPBACK, MAX_DGRAM, PREFIX, _register, fail, rand_token, short
from harness_ports import free_udp_port
from harness_q3 import cmd, game_packet, new_qport, parse_info, split_command, status_payload


class Packet:
    __slots__ = ("t", "data", "addr")

    def __init__(self, t, data, addr):
        self.t, self.data, self.addr = t, data, addr

    def __repr__(self):
        return f"Packet({short(self.data, 60)} from {self.addr})"


class _UdpThread:
    """A UDP socket on 127.0.0.1 served by a thread until stop()."""

    name = "udp"

    def __init__(self, port=None, rcvbuf=4 << 20, host=LOOPBACK):
        self.port = port or free_udp_port()
        self.addr = (host, self.port)
        self.rcvbuf = rcvbuf
        self.lock = threading.Lock()
        self.received = []  # Packet
        self.sock = None
        self.thread = None
        self.errors = []
        _register(self)

    def start(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for size in (self.rcvbuf, 1 << 20):
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
                break
            except OSError:
                pass
        for attempt in range(50):
            try:
                s.bind(self.addr)
                break
            except OSError:
                if attempt == 49:
                    s.close()
                    raise
                time.sleep(0.02)
        s.settimeout(0.05)
        self.sock = s
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=self.name)
        self.thread.start()
        return self

    def running(self):
        return self.thread is not None and self.thread.is_alive()

    def stop(self):
        """Close the socket: packets to this port now get ECONNREFUSED."""
        if self.thread is None:
            return
        self._stop.set()
        self.thread.join(timeout=2.0)
        self.thread = None
        try:
            self.sock.close()
        except Exception:
            pass

    close = stop

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _run(self):
        # Bounded by the stop event and by the socket timeout; no busy loop.
        while not self._stop.is_set():
            try:
                data, addr = self.sock.recvfrom(MAX_DGRAM)
            except socket.timeout:
                continue
            except OSError as e:
                # ECONNREFUSED from an earlier send shows up here: not ours
                # to care about, but do not spin on a closed socket.
                if self._stop.is_set():
                    break
                self.errors.append(repr(e))
                time.sleep(0.005)
                continue
            now = time.monotonic()
            with self.lock:
                self.received.append(Packet(now, data, addr))
            try:
                self.handle(data, addr, now)
            except OSError as e:
                self.errors.append(repr(e))

    def send(self, data, addr):
        self.sock.sendto(data, addr)

    def packets(self, pred=None):
        with self.lock:
            return [p for p in self.received if pred is None or pred(p)]

    def handle(self, data, addr, now):
        raise NotImplementedError


class GameServer(_UdpThread):
    """Stand-in for an ET/Q3 server.

    - ``getinfo <ch>``  -> infoResponse echoing the challenge
    - ``getstatus``     -> statusResponse (``status_size`` bytes if set)
    - ``getchallenge``  -> ``challengeResponse <n>``
    - ``connect ...``   -> ``connectResponse <n>``
    - in-game (no prefix) -> ``b'ECHO:' + payload``
    Records every packet with its source (``received``).  stop() closes the
    socket (the relay then gets ECONNREFUSED); start() again on the same port.
    """

    name = "gameserver"

    def __init__(self, port=None, status_size=None, respond=True):
        super().__init__(port)
        self.status_size = status_size
        self.respond = respond
        self.replies = []  # (addr, bytes) sent back
        self.challenges = {}
        self.start()

    @staticmethod
    def info_response(challenge):
        return (PREFIX + b"infoResponse\n" +
                (f"\\challenge\\{challenge}\\hostname\\test\\protocol\\84\\clients\\0"
                 f"\\sv_maxclients\\16\\mapname\\oasago2").encode("latin-1"))

    def handle(self, data, addr, now):
        if not self.respond:
            return
        word, rest = split_command(data)
        reply = None
        if word is None:
            reply = b"ECHO:" + data
        else:
            w = word.lower()
            args = rest.split()
            if w == "getinfo":
                reply = self.info_response(args[0] if args else "")
            elif w == "getstatus":
                reply = status_payload(self.status_size, args[0] if args else None)
            elif w == "getchallenge":
                n = self.challenges.setdefault(addr, random.randint(1, 2**31 - 1))
                reply = cmd(f"challengeResponse {n}")
            elif w == "connect":
                n = self.challenges.setdefault(addr, random.randint(1, 2**31 - 1))
                reply = cmd(f"connectResponse {n}")
        if reply is not None:
            with self.lock:
                self.replies.append((addr, reply))
            self.send(reply, addr)

    # helpers for assertions
    def probes(self):
        """getinfo packets (the relay's probes and the masters' queries)."""
        return self.packets(lambda p: (split_command(p.data)[0] or "").lower() == "getinfo")

    def sources_for(self, payloads):
        """Source ports of the packets whose data is in payloads."""
        payloads = set(payloads)
        return {p.addr for p in self.packets(lambda p: p.data in payloads)}


class Master(_UdpThread):
    """Stand-in for a Quake 3 master.

    On ``heartbeat <tag>``: records (tag, source); for a non-flatline tag
    sends ``getinfo <random challenge>`` to the heartbeat's SOURCE and lists
    that address only when an infoResponse carrying the same challenge comes
    back from exactly that address within ``window`` seconds.  A flatline
    heartbeat is recorded in ``flatlines`` and delists the address.
    """

    name = "master"
    FLATLINE_TAGS = {"ETFlatline-1", "WolfFlatline-1"}

    def __init__(self, port=None, challenge=True, window=2.0, flatline_tags=None):
        super().__init__(port)
        self.challenge = challenge
        self.window = window
        self.flatline_tags = set(flatline_tags or self.FLATLINE_TAGS)
        self.heartbeats = []   # (t, tag, addr), non-flatline
        self.flatlines = []    # (t, tag, addr)
        self.challenges = []   # (t, challenge, addr, packet sent)
        self.listed = set()
        self.listings = []     # (t, addr)
        self.rejected = []     # (t, reason, addr)
        self.pending = {}
        self.start()

    def handle(self, data, addr, now):
        word, rest = split_command(data)
        if word is None:
            with self.lock:
                self.rejected.append((now, "in-game packet", addr))
            return
        if word == "heartbeat":
            tag = rest.strip()
            with self.lock:
                if tag in self.flatline_tags:
                    self.flatlines.append((now, tag, addr))
                    self.listed.discard(addr)
                    return
                self.heartbeats.append((now, tag, addr))
            if self.challenge:
                ch = rand_token(12)
                pkt = cmd(f"getinfo {ch}")
                with self.lock:
                    self.pending[ch] = (addr, now + self.window)
                    self.challenges.append((now, ch, addr, pkt))
                self.send(pkt, addr)
        elif word == "infoResponse":
            info = parse_info(rest.strip())
            ch = info.get("challenge")
            with self.lock:
                ent = self.pending.pop(ch, None)
                if ent is None:
                    self.rejected.append((now, f"unknown challenge {ch!r}", addr))
                elif ent[0] != addr:
                    self.rejected.append((now, f"answer from {addr}, heartbeat came from {ent[0]}", addr))
                elif now > ent[1]:
                    self.rejected.append((now, "answer too late", addr))
                else:
                    self.listed.add(addr)
                    self.listings.append((now, addr))
        else:
            with self.lock:
                self.rejected.append((now, f"unexpected command {word!r}", addr))

    def heartbeat_list(self):
        with self.lock:
            return list(self.heartbeats)

    def flatline_list(self):
        with self.lock:
            return list(self.flatlines)

    def listed_set(self):
        with self.lock:
            return set(self.listed)


class SilentDns(_UdpThread):
    """A DNS server that never answers: a resolver pointed at it hangs for
    its whole timeout. Records the queried names."""

    name = "silentdns"

    def __init__(self, host="127.0.0.2", port=53):
        super().__init__(port=port, host=host)
        self.start()

    def handle(self, data, addr, now):
        pass

    def queried_names(self):
        names = []
        for p in self.packets():
            d, i, labels = p.data, 12, []
            for _ in range(64):
                if i >= len(d) or d[i] == 0:
                    break
                n = d[i]
                labels.append(d[i + 1:i + 1 + n].decode("latin-1"))
                i += 1 + n
            names.append(".".join(labels))
        return names


class Client:
    """A UDP socket on 127.0.0.1 talking to the relay. Every reply must come
    from the relay's public address."""

    def __init__(self, relay_addr, timeout=2.0):
        self.relay_addr = tuple(relay_addr)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((LOOPBACK, 0))
        self.sock.settimeout(timeout)
        self.timeout = timeout
        self.addr = self.sock.getsockname()
        self.port = self.addr[1]
        self.qport = new_qport()
        self.sent = 0
        self.got = 0
        _register(self)

    def game(self, data=b"", seq=1):
        """An in-game datagram with this client's qport."""
        return game_packet(self.qport, data, seq)

    def send(self, data):
        self.sock.sendto(data, self.relay_addr)
        self.sent += 1

    def try_recv(self, timeout=None):
        """A datagram, or None after timeout."""
        self.sock.settimeout(self.timeout if timeout is None else timeout)
        try:
            data, src = self.sock.recvfrom(MAX_DGRAM)
        except socket.timeout:
            return None
        except ConnectionRefusedError:
            fail(f"client {self.addr}: ECONNREFUSED, is etrelay listening on {self.relay_addr}?")
        if tuple(src) != self.relay_addr:
            fail(f"client {self.addr} got a reply from {src}, expected it from the relay's "
                 f"public address {self.relay_addr}")
        self.got += 1
        return data

    def recv(self, timeout=None, what="a reply"):
        data = self.try_recv(timeout)
        if data is None:
            fail(f"client {self.addr}: no {what} from the relay within "
                 f"{self.timeout if timeout is None else timeout:g} s")
        return data

    def request(self, data, timeout=None, what="a reply"):
        self.send(data)
        return self.recv(timeout, what)

    def close(self):
        try:
            self.sock.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def stand_in_on(cls, host, **kw):
    """A stand-in (GameServer, Master or a subclass) bound to host instead
    of 127.0.0.1, e.g. a veth address."""
    def start(self):
        self.addr = (host, self.port)
        return cls.start(self)
    return type(cls.__name__ + "On", (cls,), {"start": start})(**kw)
