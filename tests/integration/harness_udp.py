# SPDX-License-Identifier: ISC
"""UDP traffic: pingers that measure a relay's latency while other parts of
a test load it (Pinger, run_parts), client sockets on other loopback
addresses (spread_ip, client_on, udp_socket, drain_socket), and
hand-made IPv4/Ethernet frames for raw sockets (ipv4_udp, ip_checksum,
ether_udp, RawUdp)."""

import os
import socket
import threading
import time
import struct as _struct

from harness_base import (LOOPBACK, MAX_DGRAM, TestFailure, TestSkip, _register, fail, log,
    wait_until)
from harness_q3 import game_packet, new_qport


class Pinger:
    """n clients, each keeping one in-game datagram in flight through the
    relay (lock-step): a unique payload, then up to `timeout` s for
    b'ECHO:' + payload from the relay's address (what GameServer answers).
    A thread per client, until stop(), max_seconds or max_packets.
    Each record is [client, seq, sent_at, answered_at or None]."""

    def __init__(self, relay_addr, n=3, interval=0.02, timeout=1.0, max_seconds=30.0,
                 max_packets=20000, tag=b"ping"):
        self.relay_addr = tuple(relay_addr)
        self.interval, self.timeout = interval, timeout
        self.max_seconds, self.max_packets = max_seconds, max_packets
        self.tag = tag
        self.lock = threading.Lock()
        self.records = []
        self.errors = []   # (t, client, repr)
        self.stray = []    # (t, client, data, src): not the answer waited for
        self.socks = []
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((LOOPBACK, 0))
            self.socks.append(s)
        self.addrs = [s.getsockname() for s in self.socks]
        self.qports = [new_qport() for _ in self.socks]
        self._stop = threading.Event()
        self.threads = []
        _register(self)

    def start(self):
        for i in range(len(self.socks)):
            t = threading.Thread(target=self._run, args=(i,), daemon=True, name=f"pinger{i}")
            t.start()
            self.threads.append(t)
        return self

    def _run(self, i):
        s = self.socks[i]
        end = time.monotonic() + self.max_seconds
        for seq in range(self.max_packets):
            if self._stop.is_set() or time.monotonic() >= end:
                break
            payload = game_packet(self.qports[i], b"%s-%d-%06d-" % (self.tag, i, seq)
                                  + os.urandom(6).hex().encode(), seq + 1)
            want = b"ECHO:" + payload
            rec = [i, seq, time.monotonic(), None]
            with self.lock:
                self.records.append(rec)
            try:
                s.sendto(payload, self.relay_addr)
            except OSError as e:
                with self.lock:
                    self.errors.append((time.monotonic(), i, repr(e)))
                time.sleep(self.interval)
                continue
            deadline = rec[2] + self.timeout
            for _ in range(1000):
                left = deadline - time.monotonic()
                if self._stop.is_set():
                    # stopped while waiting: this one is neither answered nor lost
                    with self.lock:
                        if rec[3] is None and rec in self.records:
                            self.records.remove(rec)
                    break
                if left <= 0:
                    break
                s.settimeout(min(left, 0.1))
                try:
                    data, src = s.recvfrom(MAX_DGRAM)
                except socket.timeout:
                    continue
                except OSError as e:
                    with self.lock:
                        self.errors.append((time.monotonic(), i, repr(e)))
                    time.sleep(0.005)
                    continue
                now = time.monotonic()
                if data == want and tuple(src) == self.relay_addr:
                    rec[3] = now
                    break
                with self.lock:
                    self.stray.append((now, i, data, src))
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        for t in self.threads:
            t.join(timeout=3.0)
        self.threads = []

    def close(self):
        self.stop()
        for s in self.socks:
            try:
                s.close()
            except Exception:
                pass

    def snapshot(self):
        with self.lock:
            return [list(r) for r in self.records]

    def answered(self, client=None):
        return sum(1 for r in self.snapshot() if r[3] is not None and client in (None, r[0]))

    def lost(self, sent_before=None, sent_after=None):
        """Records never answered, among those sent in the window (a packet
        still in flight counts only once its timeout has passed)."""
        now = time.monotonic()
        return [r for r in self.snapshot()
                if r[3] is None and r[2] + self.timeout <= now
                and (sent_before is None or r[2] < sent_before)
                and (sent_after is None or r[2] >= sent_after)]

    def wait_answers(self, k, timeout, what="answers"):
        """Wait until every client has k more answers than now."""
        base = [self.answered(i) for i in range(len(self.socks))]
        wait_until(lambda: all(self.answered(i) >= base[i] + k for i in range(len(self.socks))),
                   timeout, f"{k} more {what} for each of {len(self.socks)} pinging clients")

    def summary(self):
        recs = self.snapshot()
        per = []
        for i in range(len(self.socks)):
            mine = [r for r in recs if r[0] == i]
            per.append((self.addrs[i][1], len(mine), sum(1 for r in mine if r[3] is not None)))
        return ", ".join(f"client :{p} sent {s} answered {a}" for p, s, a in per)


def run_parts(ctx, parts):
    """Run part(ctx) for each part; when one fails or cannot run here
    (TestSkip), note it, kill what it left running and go on with the next,
    so that one broken behaviour does not hide the others. Fails at the end
    with every failure; with none, a part that could not run makes the whole
    test a skip (exit 77), never a pass."""
    failures, skipped = [], []
    for part in parts:
        t0 = time.monotonic()
        try:
            part(ctx)
            log(f"part {part.__name__}: {time.monotonic() - t0:.1f} s")
        except (TestFailure, TestSkip) as e:
            if isinstance(e, TestSkip):
                skipped.append(f"[{part.__name__}] {e}")
                log(f"part {part.__name__} cannot run here: {e}")
            else:
                failures.append(f"[{part.__name__}] {e}")
                log(f"part {part.__name__} FAILED: {e}")
            for o in ctx.objs:
                if isinstance(o, Pinger):
                    o.stop()
            for r in ctx.relays:
                if r.alive():
                    r.expect_exit = True
                    r.close()
    if failures:
        fail(f"{len(failures)} of {len(parts)} parts failed:\n  " + "\n  ".join(failures
                                                                           + skipped))
    if skipped:
        raise TestSkip(f"{len(skipped)} of {len(parts)} parts cannot run here (the other "
                       f"{len(parts) - len(skipped)} passed):\n  " + "\n  ".join(skipped))


def spread_ip(i):
    """The i-th of distinct loopback addresses 127.1.x.y (all of 127/8
    reaches lo on Linux): clients that must not share an IP address."""
    return f"127.1.{(i // 250) % 250}.{i % 250 + 1}"


def client_on(ctx, relay, host, timeout=2.0):
    """ctx.client(relay), but with its socket bound to host instead of
    127.0.0.1."""
    c = ctx.client(relay, timeout)
    c.sock.close()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, 0))
    s.settimeout(timeout)
    c.sock = s
    c.addr = s.getsockname()
    c.port = c.addr[1]
    return c


def ipv4_udp(src, dst, payload, ttl=64, ident=0):
    """An IPv4 header + UDP datagram from src (ip, port) to dst (ip, port),
    for a raw IPPROTO_RAW socket. The kernel fills in the IP checksum (and
    the id when 0); the UDP checksum is 0, "none", which IPv4 allows."""
    ulen = 8 + len(payload)
    ip = _struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, ident, 0, ttl, socket.IPPROTO_UDP, 0,
                      socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    return ip + _struct.pack("!HHHH", src[1], dst[1], ulen, 0) + payload


class RawUdp:
    """Sends UDP datagrams with any source address (IPv4, raw socket with
    IP_HDRINCL): root only, else the test is skipped. Meant for 127.0.0.0/8:
    everything stays on this machine."""

    def __init__(self, sndbuf=4 << 20):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        except PermissionError as e:
            raise TestSkip(f"a raw socket needs root (CAP_NET_RAW): {e}")
        s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        except OSError:
            pass
        self.sock = s
        self.sent = 0
        self.sent_bytes = 0   # UDP payload bytes
        self.errors = 0
        _register(self)

    def send(self, src, dst, payload):
        """One datagram; False (and counted) when the kernel refused it."""
        try:
            self.sock.sendto(ipv4_udp(src, dst, payload), (dst[0], 0))
        except OSError:
            self.errors += 1
            return False
        self.sent += 1
        self.sent_bytes += len(payload)
        return True

    def send_raw(self, packet, dst_ip, payload_len):
        """A datagram built beforehand with ipv4_udp()."""
        try:
            self.sock.sendto(packet, (dst_ip, 0))
        except OSError:
            self.errors += 1
            return False
        self.sent += 1
        self.sent_bytes += payload_len
        return True

    def close(self):
        try:
            self.sock.close()
        except Exception:
            pass


def udp_socket(host, port=0, timeout=1.0, rcvbuf=4 << 20):
    """A UDP socket bound to host:port (any 127.0.0.0/8 address works on
    Linux), with a big receive buffer; closed at exit."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    except OSError:
        pass
    s.bind((host, port))
    s.settimeout(timeout)

    class _Closer:
        def close(self_inner):
            try:
                s.close()
            except Exception:
                pass
    _register(_Closer())
    return s


def drain_socket(s, quiet=0.3, max_seconds=5.0, max_packets=1000000):
    """Read s until it stays quiet for `quiet` seconds (bounded by
    max_seconds and max_packets): [(time, data, src)]."""
    out = []
    end = time.monotonic() + max_seconds
    for _ in range(max_packets):
        left = end - time.monotonic()
        if left <= 0:
            break
        s.settimeout(min(quiet, left))
        try:
            data, src = s.recvfrom(MAX_DGRAM)
        except socket.timeout:
            break
        except OSError:
            continue
        out.append((time.monotonic(), data, src))
    return out


def ip_checksum(header):
    """The Internet checksum of an IPv4 header (checksum field zeroed)."""
    if len(header) % 2:
        header += b"\0"
    s = sum(_struct.unpack("!%dH" % (len(header) // 2), header))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff


def ether_udp(src, dst, payload, src_mac, dst_mac):
    """An Ethernet frame carrying ipv4_udp(src, dst, payload), IP checksum
    filled in: for an AF_PACKET socket, which the kernel does not touch."""
    ip = bytearray(ipv4_udp(src, dst, payload, ident=1))
    ip[10:12] = _struct.pack("!H", ip_checksum(bytes(ip[:20])))
    return dst_mac + src_mac + b"\x08\x00" + bytes(ip)
