#!/usr/bin/python3
# SPDX-License-Identifier: ISC
"""A test CA for the control-plane stand-in's RequestCertificate, with
Debian's python3-cryptography (run with /usr/bin/python3).

  certsign.py init DIR
      a P-256 CA key and self-signed certificate into DIR;
  certsign.py serve DIR
      for each line of JSON on stdin, {"csr": PEM, "san": NAME,
      "lifetime": SECONDS}, one line on stdout: {"chain": PEM, "nb": NB,
      "na": NA} or {"error": WHY}. The request must name nothing (an empty
      subject, no attributes or extensions) and be signed by its key; it
      is signed for LIFETIME seconds from now (the notBefore a second back;
      NB and NA in unix seconds) with subjectAltName DNS:NAME; the chain is
      the leaf and the CA, leaf first. One process for every request: the
      library loads once."""

import datetime
import json
import os
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def init(d):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "etrelay test CA")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    with open(os.path.join(d, "ca.key"), "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    with open(os.path.join(d, "ca.pem"), "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))


def unix(t):
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp())


def sign(key, ca, pem, san, lifetime):
    csr = x509.load_pem_x509_csr(pem.encode())
    if len(csr.subject) or len(csr.extensions) or not csr.is_signature_valid:
        return {"error": f"the request names something or is not signed by its key: subject "
                         f"{csr.subject.rfc4514_string()!r}, {len(csr.extensions)} extensions"}
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(ca.subject)
            .public_key(csr.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(seconds=1))
            .not_valid_after(now + datetime.timedelta(seconds=lifetime))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(san)]), critical=True)
            .sign(key, hashes.SHA256()))
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(
        serialization.Encoding.PEM)
    return {"chain": chain.decode(), "nb": unix(cert.not_valid_before),
            "na": unix(cert.not_valid_after)}


def serve(d):
    with open(os.path.join(d, "ca.key"), "rb") as f:
        key = serialization.load_pem_private_key(f.read(), None)
    with open(os.path.join(d, "ca.pem"), "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    for line in sys.stdin:
        r = json.loads(line)
        try:
            out = sign(key, ca, r["csr"], r["san"], float(r["lifetime"]))
        except ValueError as e:
            out = {"error": f"not a request: {e}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "init":
        init(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(64)
