/* SPDX-License-Identifier: ISC */
/* Unit tests for tls_reload.c: pairs written to a temporary directory,
 * loaded at start, replaced by a new pair (a new handshake in memory sees
 * the new certificate), by a broken pair (the old one stays, one failure
 * counted), rewritten unchanged with a new mtime (no reload), and the
 * startup errors that name the file and OpenSSL's reason. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "tls_peer.h"
#include "tls_reload.h"

struct fixture {
	char dir[64], cert[128], key[128];
	struct tls_server srv;
	struct tls_reload r;
	bool r_live;
};

static void write_file(const char *path, const void *p, size_t n)
{
	char tmp[256];
	FILE *f;

	/* Written beside and renamed, as a certificate tool does. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rename(tmp, path), 0);
}

/* tc as PEM files: the certificate (and, when chain, a second copy of it
 * as a chain certificate) and the key. */
static void write_pair(struct fixture *f, const struct test_cert *tc, bool chain)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p;
	long n;

	assert_int_equal(PEM_write_bio_X509(b, tc->cert), 1);
	if (chain)
		assert_int_equal(PEM_write_bio_X509(b, tc->cert), 1);
	n = BIO_get_mem_data(b, &p);
	write_file(f->cert, p, (size_t)n);
	BIO_free(b);
	b = BIO_new(BIO_s_mem());
	assert_int_equal(PEM_write_bio_PrivateKey(b, tc->key, NULL, NULL, 0, NULL, NULL), 1);
	n = BIO_get_mem_data(b, &p);
	write_file(f->key, p, (size_t)n);
	BIO_free(b);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/etrelay-tls-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->cert, sizeof(f->cert), "%s/cert.pem", f->dir);
	snprintf(f->key, sizeof(f->key), "%s/key.pem", f->dir);
	assert_int_equal(tls_server_init(&f->srv), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->r_live)
		tls_reload_free(&f->r);
	tls_server_free(&f->srv);
	unlink(f->cert);
	unlink(f->key);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* A fresh handshake in memory: the fingerprint of what the server shows. */
static void served_fingerprint(struct tls_server *srv, uint8_t out[32])
{
	struct tls_conn *c = tls_conn_new(srv);
	struct test_client cl;
	X509 *peer;

	assert_non_null(c);
	test_client_new(&cl, 0);
	test_handshake(&cl, c, 0);
	peer = SSL_get1_peer_certificate(cl.ssl);
	assert_non_null(peer);
	test_cert_fingerprint(peer, out);
	X509_free(peer);
	test_client_free(&cl);
	tls_conn_free(c);
}

static void assert_serves(struct tls_server *srv, const struct test_cert *tc)
{
	uint8_t want[32], got[32];

	test_cert_fingerprint(tc->cert, want);
	served_fingerprint(srv, got);
	assert_memory_equal(want, got, 32);
}

static void start(struct fixture *f)
{
	char err[512];

	assert_int_equal(tls_reload_init(&f->r, &f->srv, f->cert, f->key, 1000, err, sizeof(err)),
			 0);
	f->r_live = true;
}

static void test_a_new_pair_is_loaded_and_served(void **state)
{
	struct fixture *f = *state;
	struct test_cert a, b;
	struct tls_conn *old;
	struct test_client cl;
	uint8_t buf[8];

	test_cert_make(&a, "a.test");
	test_cert_make(&b, "b.test");
	write_pair(f, &a, true);
	start(f);
	assert_serves(&f->srv, &a);
	assert_int_equal(tls_reload_check(&f->r, 2000), TLS_RELOAD_UNCHANGED);

	/* A session open on a before the swap. */
	old = tls_conn_new(&f->srv);
	test_client_new(&cl, 0);
	test_handshake(&cl, old, 0);

	write_pair(f, &b, false);
	assert_int_equal(tls_reload_check(&f->r, 3000), TLS_RELOAD_LOADED);
	assert_int_equal(f->r.counts.loaded, 1);
	assert_int_equal(f->r.counts.failed, 0);
	assert_int_equal(f->r.loaded_at, 3000);
	assert_serves(&f->srv, &b);
	assert_int_equal(tls_reload_check(&f->r, 4000), TLS_RELOAD_UNCHANGED);
	assert_int_equal(f->r.counts.loaded, 1);

	/* The old session still talks. */
	assert_int_equal(tls_conn_write(old, "ok", 2), 0);
	test_pump_to_client(old, &cl, 0);
	assert_int_equal(SSL_read(cl.ssl, buf, sizeof(buf)), 2);
	test_client_free(&cl);
	tls_conn_free(old);
	test_cert_free(&a);
	test_cert_free(&b);
}

static void test_a_broken_pair_keeps_the_old_one_and_counts_once(void **state)
{
	struct fixture *f = *state;
	struct test_cert a, b;
	BIO *bio;
	char *p;
	long n;

	test_cert_make(&a, "a.test");
	test_cert_make(&b, "b.test");
	write_pair(f, &a, false);
	start(f);

	/* b's certificate with a's key: a mismatch. */
	bio = BIO_new(BIO_s_mem());
	PEM_write_bio_X509(bio, b.cert);
	n = BIO_get_mem_data(bio, &p);
	write_file(f->cert, p, (size_t)n);
	BIO_free(bio);
	assert_int_equal(tls_reload_check(&f->r, 2000), TLS_RELOAD_FAILED);
	assert_non_null(strstr(f->r.error, "does not match"));
	assert_non_null(strstr(f->r.error, f->key));
	assert_int_equal(f->r.counts.failed, 1);
	assert_int_equal(f->r.counts.loaded, 0);
	assert_serves(&f->srv, &a);
	/* Still broken, still the same bytes: not tried nor counted again. */
	assert_int_equal(tls_reload_check(&f->r, 3000), TLS_RELOAD_UNCHANGED);
	assert_int_equal(f->r.counts.failed, 1);

	/* Garbage in the certificate file. */
	write_file(f->cert, "not a certificate\n", 18);
	assert_int_equal(tls_reload_check(&f->r, 4000), TLS_RELOAD_FAILED);
	assert_non_null(strstr(f->r.error, f->cert));
	assert_non_null(strstr(f->r.error, "no start line"));
	assert_int_equal(f->r.counts.failed, 2);
	assert_serves(&f->srv, &a);

	/* The key file gone: a failure, once. */
	write_pair(f, &b, false);
	unlink(f->key);
	assert_int_equal(tls_reload_check(&f->r, 5000), TLS_RELOAD_FAILED);
	assert_non_null(strstr(f->r.error, "No such file"));
	assert_int_equal(tls_reload_check(&f->r, 6000), TLS_RELOAD_UNCHANGED);
	assert_int_equal(f->r.counts.failed, 3);
	assert_serves(&f->srv, &a);

	/* Fixed: b comes in. */
	write_pair(f, &b, false);
	assert_int_equal(tls_reload_check(&f->r, 7000), TLS_RELOAD_LOADED);
	assert_int_equal(f->r.counts.loaded, 1);
	assert_serves(&f->srv, &b);
	test_cert_free(&a);
	test_cert_free(&b);
}

static void test_back_to_the_pair_in_force_is_no_reload(void **state)
{
	struct fixture *f = *state;
	struct test_cert a;

	test_cert_make(&a, "a.test");
	write_pair(f, &a, false);
	start(f);
	write_file(f->cert, "broken\n", 7);
	assert_int_equal(tls_reload_check(&f->r, 2000), TLS_RELOAD_FAILED);
	write_pair(f, &a, false);
	assert_int_equal(tls_reload_check(&f->r, 3000), TLS_RELOAD_UNCHANGED);
	assert_int_equal(f->r.counts.loaded, 0);
	assert_serves(&f->srv, &a);
	test_cert_free(&a);
}

static void test_unchanged_content_with_a_new_mtime_is_no_reload(void **state)
{
	struct fixture *f = *state;
	struct test_cert a;
	struct timeval tv[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
	SSL_CTX *before, *after;

	test_cert_make(&a, "a.test");
	write_pair(f, &a, false);
	start(f);
	before = tls_server_ctx_get(&f->srv);
	write_pair(f, &a, false); /* same bytes, new inode and mtime */
	assert_int_equal(utimes(f->cert, tv), 0);
	assert_int_equal(utimes(f->key, tv), 0);
	assert_int_equal(tls_reload_check(&f->r, 2000), TLS_RELOAD_UNCHANGED);
	assert_int_equal(f->r.checked_at, 2000);
	after = tls_server_ctx_get(&f->srv);
	assert_ptr_equal(before, after);
	assert_int_equal(f->r.counts.loaded + f->r.counts.failed, 0);
	SSL_CTX_free(before);
	SSL_CTX_free(after);
	test_cert_free(&a);
}

static void test_startup_errors_name_the_file_and_the_reason(void **state)
{
	struct fixture *f = *state;
	struct test_cert a, b;
	char err[512];
	BIO *bio;
	char *p;
	long n;

	/* Missing. */
	assert_int_equal(tls_reload_init(&f->r, &f->srv, f->cert, f->key, 0, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, f->cert));
	assert_non_null(strstr(err, "No such file"));
	assert_null(tls_server_ctx_get(&f->srv));

	/* A key that is no key. */
	test_cert_make(&a, "a.test");
	test_cert_make(&b, "b.test");
	write_pair(f, &a, false);
	write_file(f->key, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", 58);
	assert_int_equal(tls_reload_init(&f->r, &f->srv, f->cert, f->key, 0, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, f->key));
	assert_non_null(strstr(err, "routines"));

	/* An encrypted key: refused, never a passphrase prompt. */
	bio = BIO_new(BIO_s_mem());
	PEM_write_bio_PKCS8PrivateKey(bio, a.key, EVP_aes_128_cbc(), "secret", 6, NULL, NULL);
	n = BIO_get_mem_data(bio, &p);
	write_file(f->key, p, (size_t)n);
	BIO_free(bio);
	assert_int_equal(tls_reload_init(&f->r, &f->srv, f->cert, f->key, 0, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, f->key));

	/* A mismatch. */
	write_pair(f, &a, false);
	bio = BIO_new(BIO_s_mem());
	PEM_write_bio_PrivateKey(bio, b.key, NULL, NULL, 0, NULL, NULL);
	n = BIO_get_mem_data(bio, &p);
	write_file(f->key, p, (size_t)n);
	BIO_free(bio);
	assert_int_equal(tls_reload_init(&f->r, &f->srv, f->cert, f->key, 0, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "does not match"));
	assert_null(tls_server_ctx_get(&f->srv));

	/* A directory. */
	assert_int_equal(tls_reload_init(&f->r, &f->srv, f->dir, f->key, 0, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	test_cert_free(&a);
	test_cert_free(&b);
}

static void test_result_names_are_the_metric_labels(void **state)
{
	assert_string_equal(tls_reload_result_name(TLS_RELOAD_LOADED), "loaded");
	assert_string_equal(tls_reload_result_name(TLS_RELOAD_FAILED), "failed");
	assert_string_equal(tls_reload_result_name(TLS_RELOAD_UNCHANGED), "unchanged");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_a_new_pair_is_loaded_and_served, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_a_broken_pair_keeps_the_old_one_and_counts_once,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_back_to_the_pair_in_force_is_no_reload, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_unchanged_content_with_a_new_mtime_is_no_reload,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_startup_errors_name_the_file_and_the_reason, setup,
					    teardown),
	    cmocka_unit_test(test_result_names_are_the_metric_labels),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
