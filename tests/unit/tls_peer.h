/* SPDX-License-Identifier: ISC */
/* For the TLS unit tests: self-signed certificates made with the OpenSSL
 * API at test time (nothing committed expires), and an OpenSSL client on
 * memory BIOs that talks to a tls_conn through a pump moving the bytes
 * both ways in pieces of a chosen size. */
#ifndef ETR_TEST_TLS_PEER_H
#define ETR_TEST_TLS_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tls_server.h"

struct test_cert {
	EVP_PKEY *key;
	X509 *cert;
};

/* A P-256 key and a self-signed certificate for cn, valid for a day. */
static inline void test_cert_make(struct test_cert *tc, const char *cn)
{
	X509_NAME *name;

	tc->key = EVP_EC_gen("P-256");
	assert_non_null(tc->key);
	tc->cert = X509_new();
	assert_non_null(tc->cert);
	assert_int_equal(X509_set_version(tc->cert, 2), 1);
	ASN1_INTEGER_set(X509_get_serialNumber(tc->cert), (long)(random() & 0x7fffffff));
	X509_gmtime_adj(X509_getm_notBefore(tc->cert), -60);
	X509_gmtime_adj(X509_getm_notAfter(tc->cert), 86400);
	assert_int_equal(X509_set_pubkey(tc->cert, tc->key), 1);
	name = X509_get_subject_name(tc->cert);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	assert_int_equal(X509_set_issuer_name(tc->cert, name), 1);
	assert_true(X509_sign(tc->cert, tc->key, EVP_sha256()) > 0);
}

static inline void test_cert_free(struct test_cert *tc)
{
	X509_free(tc->cert);
	EVP_PKEY_free(tc->key);
}

/* The certificate's SHA-256 fingerprint. */
static inline void test_cert_fingerprint(X509 *x, uint8_t out[32])
{
	unsigned int n = 32;

	assert_int_equal(X509_digest(x, EVP_sha256(), out, &n), 1);
}

/* A server context holding tc. */
static inline SSL_CTX *test_server_ctx(const struct test_cert *tc)
{
	SSL_CTX *ctx = tls_server_ctx_new();

	assert_non_null(ctx);
	assert_int_equal(SSL_CTX_use_certificate(ctx, tc->cert), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey(ctx, tc->key), 1);
	return ctx;
}

struct test_client {
	SSL_CTX *ctx;
	SSL *ssl;
	BIO *rbio, *wbio;
};

/* A client that accepts any certificate; max_version 0 for the library's
 * highest. */
static inline void test_client_new(struct test_client *tcl, int max_version)
{
	tcl->ctx = SSL_CTX_new(TLS_client_method());
	assert_non_null(tcl->ctx);
	if (max_version)
		assert_int_equal(SSL_CTX_set_max_proto_version(tcl->ctx, max_version), 1);
	tcl->ssl = SSL_new(tcl->ctx);
	assert_non_null(tcl->ssl);
	tcl->rbio = BIO_new(BIO_s_mem());
	tcl->wbio = BIO_new(BIO_s_mem());
	BIO_set_mem_eof_return(tcl->rbio, -1);
	SSL_set_bio(tcl->ssl, tcl->rbio, tcl->wbio);
	SSL_set_connect_state(tcl->ssl);
}

static inline void test_client_free(struct test_client *tcl)
{
	SSL_free(tcl->ssl);
	SSL_CTX_free(tcl->ctx);
}

/* Client to server: whatever the client wrote, fed in pieces of step bytes
 * (0: whole). Returns the first failing feed's answer, else 0. */
static inline int test_pump_to_server(struct test_client *tcl, struct tls_conn *c, size_t step)
{
	uint8_t buf[4096];
	int n;

	while ((n = BIO_read(tcl->wbio, buf, sizeof(buf))) > 0) {
		size_t s = step ? step : (size_t)n;

		for (size_t i = 0; i < (size_t)n; i += s) {
			size_t k = (size_t)n - i < s ? (size_t)n - i : s;
			int r = tls_conn_feed(c, buf + i, k);

			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* Server to client: every pending_out, acknowledged in pieces of step
 * bytes (0: whole). Returns the bytes moved. */
static inline size_t test_pump_to_client(struct tls_conn *c, struct test_client *tcl, size_t step)
{
	const uint8_t *p;
	size_t n, moved = 0;

	while ((n = tls_conn_pending_out(c, &p)) > 0) {
		size_t k = step && step < n ? step : n;

		assert_int_equal(BIO_write(tcl->rbio, p, (int)k), (int)k);
		tls_conn_out_done(c, k);
		moved += k;
	}
	return moved;
}

/* Drive the handshake to its end (bounded rounds). */
static inline void test_handshake(struct test_client *tcl, struct tls_conn *c, size_t step)
{
	for (int round = 0; round < 20; round++) {
		int r = SSL_do_handshake(tcl->ssl);
		/* Asked at once: writing into the client's read BIO clears
		 * the retry flag SSL_get_error reads. */
		int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(tcl->ssl, r);

		if (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ) {
			ERR_print_errors_fp(stderr);
			fail_msg("client handshake: error %d in round %d", e, round);
		}
		assert_int_equal(test_pump_to_server(tcl, c, step), 0);
		test_pump_to_client(c, tcl, step);
		if (r == 1 && tls_conn_state(c) == TLS_CONN_OPEN)
			return;
	}
	fail_msg("handshake did not finish in 20 rounds");
}

#endif
