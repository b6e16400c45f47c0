#!/bin/sh
# SPDX-License-Identifier: ISC
# Capture the first TLS record that `openssl s_client -servername NAME` sends:
# a listener on 127.0.0.1 reads one record (5-byte header + its length) and
# closes, so s_client fails after writing its ClientHello; nothing leaves the
# machine. Run once; the output is committed for tests/unit/test_tls_hello.c
# and fuzz/corpus/tls_hello. Extra s_client options go in OPENSSL_ARGS:
# `-bugs` sets SSL_OP_ALL, whose padding extension (RFC 7685) pads a hello of
# 256..511 bytes to 512, as Python's ssl module and other clients do.
#   tests/data/capture_client_hello.sh x tests/data/client_hello_s_client.bin
#   OPENSSL_ARGS=-bugs tests/data/capture_client_hello.sh x \
#       tests/data/client_hello_s_client_bugs.bin
set -eu
name=${1:?server name}
out=${2:?output file}
port=${PORT:-29443}
/usr/bin/python3 - "$port" "$out" <<'PY' &
import socket, sys
port, out = int(sys.argv[1]), sys.argv[2]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(1)
s.settimeout(10)
c, _ = s.accept()
c.settimeout(10)
buf = b""
while len(buf) < 5 or len(buf) < 5 + int.from_bytes(buf[3:5], "big"):
    d = c.recv(65536)
    if not d:
        break
    buf += d
n = 5 + int.from_bytes(buf[3:5], "big")
open(out, "wb").write(buf[:n])
c.close()
PY
listener=$!
sleep 0.5
openssl s_client -connect 127.0.0.1:"$port" -servername "$name" ${OPENSSL_ARGS:-} </dev/null >/dev/null 2>&1 || true
wait "$listener"
openssl version
wc -c "$out"
