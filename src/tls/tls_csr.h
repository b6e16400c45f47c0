/* SPDX-License-Identifier: ISC */
/* The tunnel certificate's two ends on the relay (seed 002): a key made at
 * start and a certificate signing request that names nothing (no subject,
 * no SAN: the control plane decides the name and signs it), and the check
 * of what comes back: a chain whose leaf carries that key and exactly one
 * DNS name, tunnel.<relay-id>.<suffix>, never a wildcard (a wildcard would
 * let the relay impersonate every service it forwards). The pair becomes a
 * server context for the rung-3 listener. Nothing is written to disk. */
#ifndef ETR_TLS_CSR_H
#define ETR_TLS_CSR_H

#include <stddef.h>
#include <stdint.h>

struct evp_pkey_st;   /* OpenSSL's EVP_PKEY */
struct ssl_ctx_st;    /* OpenSSL's SSL_CTX */
struct stack_st_X509; /* OpenSSL's STACK_OF(X509) */

/* Longest DNS name (RFC 1035), with its NUL. */
#define TLS_CERT_NAME_MAX 254

/* A new key (ECDSA P-256) into *key and the PEM text of a request that
 * names nothing, signed with it, into *pem (malloc'd, NUL-terminated).
 * Returns 0 or -EIO (OpenSSL's queue says why). */
int tls_csr_new(struct evp_pkey_st **key, char **pem);

/* What an accepted certificate says. */
struct tls_cert_info {
	char name[TLS_CERT_NAME_MAX];  /* the one DNS name: the relay's own */
	int64_t not_before, not_after; /* seconds since the epoch */
	struct stack_st_X509 *chain;   /* leaf first; tls_cert_info_free */
};

/* Read the PEM chain the control plane answered (leaf first) against key.
 * relay_id: the name must be tunnel.<relay_id>.<something>; NULL (a relay
 * that does not know its id: its credential came from the environment)
 * tunnel.<one label>.<something>. Returns 0 with
 * *out filled, or -EINVAL with the reason in err: no certificate, a leaf
 * for another key, no DNS name or more than one, a wildcard, another
 * relay's name, already expired or not yet valid at now (seconds). */
int tls_cert_accept(struct evp_pkey_st *key, const char *chain_pem, size_t len,
		    const char *relay_id, int64_t now, struct tls_cert_info *out, char *err,
		    size_t errlen);

void tls_cert_info_free(struct tls_cert_info *c);

/* A server context (tls_server_ctx_new's settings) serving key and the
 * chain; NULL when OpenSSL refuses them. */
struct ssl_ctx_st *tls_cert_ctx(struct evp_pkey_st *key, const struct tls_cert_info *c);

#endif
