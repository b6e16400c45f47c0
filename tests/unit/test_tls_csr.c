/* SPDX-License-Identifier: ISC */
/* Unit tests for tls_csr.c: the request names nothing and is signed by its
 * key; a test CA signs it as the control plane would, and the relay takes
 * exactly one non-wildcard name of its own, for its key, valid now; the
 * pair then serves a TLS client that verifies the chain and the name. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include <openssl/x509v3.h>

#include "tls_csr.h"
#include "tls_peer.h"

static char err[256];

/* The request's public key, signed by ca for the names in san (an
 * OpenSSL subjectAltName value, NULL: none), valid from now + from to
 * now + to seconds; the leaf and the CA as PEM, leaf first. */
static char *sign(const struct test_cert *ca, const char *csr_pem, const char *san, long from,
		  long to)
{
	BIO *in = BIO_new_mem_buf(csr_pem, -1), *out = BIO_new(BIO_s_mem());
	X509_REQ *req = PEM_read_bio_X509_REQ(in, NULL, NULL, NULL);
	X509 *x = X509_new();
	EVP_PKEY *pub;
	BUF_MEM *mem;
	char *pem;

	assert_non_null(req);
	pub = X509_REQ_get0_pubkey(req);
	assert_non_null(pub);
	assert_int_equal(X509_set_version(x, 2), 1);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 42);
	X509_gmtime_adj(X509_getm_notBefore(x), from);
	X509_gmtime_adj(X509_getm_notAfter(x), to);
	assert_int_equal(X509_set_pubkey(x, pub), 1);
	assert_int_equal(X509_set_issuer_name(x, X509_get_subject_name(ca->cert)), 1);
	if (san) {
		X509V3_CTX v3;
		X509_EXTENSION *ext;

		X509V3_set_ctx(&v3, ca->cert, x, NULL, NULL, 0);
		ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
		assert_non_null(ext);
		assert_int_equal(X509_add_ext(x, ext, -1), 1);
		X509_EXTENSION_free(ext);
	}
	assert_true(X509_sign(x, ca->key, EVP_sha256()) > 0);
	assert_int_equal(PEM_write_bio_X509(out, x), 1);
	assert_int_equal(PEM_write_bio_X509(out, ca->cert), 1);
	BIO_get_mem_ptr(out, &mem);
	pem = strndup(mem->data, mem->length);
	assert_non_null(pem);
	BIO_free(in);
	BIO_free(out);
	X509_REQ_free(req);
	X509_free(x);
	return pem;
}

/* A self-signed CA (basicConstraints CA:TRUE, as a verifier wants). */
static void make_ca(struct test_cert *ca)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;

	test_cert_make(ca, "etrelay test CA");
	X509V3_set_ctx(&v3, ca->cert, ca->cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints, "critical,CA:TRUE");
	assert_non_null(ext);
	assert_int_equal(X509_add_ext(ca->cert, ext, -1), 1);
	X509_EXTENSION_free(ext);
	assert_true(X509_sign(ca->cert, ca->key, EVP_sha256()) > 0);
}

static void test_tls_csr_names_nothing_and_is_signed_by_its_key(void **state)
{
	EVP_PKEY *key;
	X509_REQ *req;
	BIO *in;
	char *pem;

	(void)state;
	assert_int_equal(tls_csr_new(&key, &pem), 0);
	assert_non_null(strstr(pem, "-----BEGIN CERTIFICATE REQUEST-----"));
	in = BIO_new_mem_buf(pem, -1);
	req = PEM_read_bio_X509_REQ(in, NULL, NULL, NULL);
	assert_non_null(req);
	assert_int_equal(X509_NAME_entry_count(X509_REQ_get_subject_name(req)), 0);
	assert_int_equal(X509_REQ_get_attr_count(req), 0); /* no extensions asked */
	assert_int_equal(X509_REQ_verify(req, key), 1);
	assert_int_equal(EVP_PKEY_eq(X509_REQ_get0_pubkey(req), key), 1);
	X509_REQ_free(req);
	BIO_free(in);
	free(pem);
	EVP_PKEY_free(key);
}

static void test_tls_cert_accepts_one_name_of_its_own_and_serves_it(void **state)
{
	struct test_cert ca;
	struct tls_cert_info info;
	struct test_client cl;
	struct tls_server srv;
	struct tls_conn *c;
	EVP_PKEY *key;
	SSL_CTX *ctx;
	char *csr, *chain;
	int64_t now = time(NULL);

	(void)state;
	make_ca(&ca);
	assert_int_equal(tls_csr_new(&key, &csr), 0);
	chain = sign(&ca, csr, "DNS:tunnel.r1.relays.example.net", -60, 90 * 86400);
	assert_int_equal(
	    tls_cert_accept(key, chain, strlen(chain), "r1", now, &info, err, sizeof(err)), 0);
	assert_string_equal(info.name, "tunnel.r1.relays.example.net");
	assert_true(info.not_before <= now && info.not_before > now - 120);
	assert_true(info.not_after > now + 89 * 86400);
	assert_int_equal(sk_X509_num(info.chain), 2);

	/* It serves a client that checks the chain against the CA and the
	 * name. */
	ctx = tls_cert_ctx(key, &info);
	assert_non_null(ctx);
	assert_int_equal(tls_server_init(&srv), 0);
	tls_server_set_ctx(&srv, ctx);
	c = tls_conn_new(&srv);
	assert_non_null(c);
	test_client_new(&cl, 0);
	assert_int_equal(X509_STORE_add_cert(SSL_CTX_get_cert_store(cl.ctx), ca.cert), 1);
	SSL_set_verify(cl.ssl, SSL_VERIFY_PEER, NULL);
	assert_int_equal(SSL_set1_host(cl.ssl, "tunnel.r1.relays.example.net"), 1);
	SSL_set_tlsext_host_name(cl.ssl, "tunnel.r1.relays.example.net");
	test_handshake(&cl, c, 0);
	assert_int_equal(SSL_get_verify_result(cl.ssl), X509_V_OK);
	test_client_free(&cl);
	tls_conn_free(c);
	tls_server_free(&srv);
	tls_cert_info_free(&info);
	free(chain);
	free(csr);
	EVP_PKEY_free(key);
	test_cert_free(&ca);
}

static void expect_refused(EVP_PKEY *key, const char *chain, const char *why)
{
	struct tls_cert_info info;

	assert_int_equal(
	    tls_cert_accept(key, chain, strlen(chain), "r1", time(NULL), &info, err, sizeof(err)),
	    -EINVAL);
	if (!strstr(err, why))
		fail_msg("refused with \"%s\", expected \"%s\"", err, why);
	assert_null(info.chain);
}

static void test_tls_cert_refuses_what_is_not_exactly_its_own_name(void **state)
{
	static const struct {
		const char *san, *why;
	} bad[] = {
	    {"DNS:*.r1.relays.example.net", "wildcard"},
	    {"DNS:tunnel.r1.relays.example.net, DNS:other.example.net", "more than one"},
	    {NULL, "no subjectAltName"},
	    {"IP:192.0.2.1", "not a DNS name"},
	    {"DNS:tunnel.r2.relays.example.net", "not tunnel.r1.<suffix>"},
	    {"DNS:tunnel.r1.", "not a host name"},
	    {"DNS:tunnel.r10.relays.example.net", "not tunnel.r1.<suffix>"},
	};
	struct test_cert ca;
	EVP_PKEY *key, *other;
	char *csr, *csr2, *chain;

	(void)state;
	make_ca(&ca);
	assert_int_equal(tls_csr_new(&key, &csr), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		chain = sign(&ca, csr, bad[i].san, -60, 86400);
		expect_refused(key, chain, bad[i].why);
		free(chain);
	}
	/* Signed for another key. */
	assert_int_equal(tls_csr_new(&other, &csr2), 0);
	chain = sign(&ca, csr2, "DNS:tunnel.r1.relays.example.net", -60, 86400);
	expect_refused(key, chain, "another key");
	free(chain);
	/* Expired, and not valid for another day. */
	chain = sign(&ca, csr, "DNS:tunnel.r1.relays.example.net", -86400, -60);
	expect_refused(key, chain, "not valid now");
	free(chain);
	chain = sign(&ca, csr, "DNS:tunnel.r1.relays.example.net", 86400, 2 * 86400);
	expect_refused(key, chain, "not valid now");
	free(chain);
	/* No certificate at all. */
	expect_refused(key, "", "no certificate");
	expect_refused(key, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
		       "no certificate");
	free(csr);
	free(csr2);
	EVP_PKEY_free(key);
	EVP_PKEY_free(other);
	test_cert_free(&ca);
}

/* A relay that does not know its id (its credential came from the
 * environment) takes tunnel.<any one label>.<suffix>, nothing else. */
static void test_tls_cert_without_relay_id_takes_any_one_id_label(void **state)
{
	static const struct {
		const char *san;
		bool ok;
	} cases[] = {
	    {"DNS:tunnel.r9.relays.example.net", true},
	    {"DNS:tunnel.r9.net", true},
	    {"DNS:tunnel.example", false},
	    {"DNS:tunnels.r9.example.net", false},
	    {"DNS:svc.r9.example.net", false},
	};
	struct tls_cert_info info;
	struct test_cert ca;
	EVP_PKEY *key;
	char *csr, *chain;

	(void)state;
	make_ca(&ca);
	assert_int_equal(tls_csr_new(&key, &csr), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc;

		chain = sign(&ca, csr, cases[i].san, -60, 86400);
		rc = tls_cert_accept(key, chain, strlen(chain), NULL, time(NULL), &info, err,
				     sizeof(err));
		if ((rc == 0) != cases[i].ok)
			fail_msg("%s: %d (%s)", cases[i].san, rc, err);
		if (rc == 0)
			assert_string_equal(info.name, cases[i].san + 4);
		else
			assert_non_null(strstr(err, "not tunnel.<relay-id>.<suffix>"));
		tls_cert_info_free(&info);
		free(chain);
	}
	free(csr);
	EVP_PKEY_free(key);
	test_cert_free(&ca);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tls_csr_names_nothing_and_is_signed_by_its_key),
	    cmocka_unit_test(test_tls_cert_accepts_one_name_of_its_own_and_serves_it),
	    cmocka_unit_test(test_tls_cert_without_relay_id_takes_any_one_id_label),
	    cmocka_unit_test(test_tls_cert_refuses_what_is_not_exactly_its_own_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
