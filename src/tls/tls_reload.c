/* SPDX-License-Identifier: ISC */
/* Certificate reload. The files are read into memory once per check, and
 * what is hashed is what is parsed (from memory BIOs), so a file replaced
 * between the two cannot put in force a pair whose digest was never seen.
 * The key never meets a passphrase prompt: an encrypted key fails. */
#include "tls_reload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

struct blob {
	uint8_t *p;
	size_t n;
};

static void blob_free(struct blob *b)
{
	if (b->p)
		OPENSSL_cleanse(b->p, b->n);
	free(b->p);
	b->p = NULL;
	b->n = 0;
}

/* The whole of path into b. Returns 0 or -errno (-EFBIG above the cap). */
static int read_all(const char *path, struct blob *b)
{
	struct stat st;
	int fd, err = 0;
	size_t got = 0;

	b->p = NULL;
	b->n = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EINVAL;
		goto out;
	}
	if (st.st_size > TLS_RELOAD_FILE_MAX) {
		err = -EFBIG;
		goto out;
	}
	/* One byte more than the size: a file that grew since fstat is
	 * seen as larger, not cut short. */
	b->p = malloc((size_t)st.st_size + 1);
	if (!b->p) {
		err = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t r = read(fd, b->p + got, (size_t)st.st_size + 1 - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			goto out;
		}
		if (r == 0)
			break;
		got += (size_t)r;
		if (got > (size_t)st.st_size) {
			err = -EAGAIN; /* still being written */
			goto out;
		}
	}
	b->n = got;
out:
	close(fd);
	if (err)
		blob_free(b);
	return err;
}

static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	return -1;
}

/* SHA-256 over the certificate's length and bytes, then the key's. */
static void digest_pair(const void *cert, size_t cert_n, const void *key, size_t key_n,
			uint8_t out[32])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint64_t len = cert_n;
	unsigned int olen = 32;

	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL) ||
	    !EVP_DigestUpdate(md, &len, sizeof(len)) || !EVP_DigestUpdate(md, cert, cert_n) ||
	    !EVP_DigestUpdate(md, key, key_n) || !EVP_DigestFinal_ex(md, out, &olen))
		memset(out, 0xff, 32); /* never equal to a real digest in practice */
	EVP_MD_CTX_free(md);
}

/* A digest standing for "could not read": the same failure twice in a row
 * is then unchanged, and is counted and logged once. */
static void digest_text(const char *text, uint8_t out[32])
{
	digest_pair(text, strlen(text), "", 0, out);
}

static void ssl_reason(char *buf, size_t len)
{
	tls_error_text(buf, len);
}

/* A new context holding cert and key, or NULL with err set. */
static SSL_CTX *build_ctx(const struct tls_reload *r, const struct blob *cert,
			  const struct blob *key, char *err, size_t errlen)
{
	char why[256];
	SSL_CTX *ctx = NULL;
	BIO *b = NULL;
	X509 *x = NULL;
	EVP_PKEY *pk = NULL;
	unsigned long e;

	ERR_clear_error();
	ctx = tls_server_ctx_new();
	if (!ctx) {
		ssl_reason(why, sizeof(why));
		snprintf(err, errlen, "TLS context: %s", why);
		return NULL;
	}
	b = BIO_new_mem_buf(cert->p, (int)cert->n);
	if (!b || !(x = PEM_read_bio_X509_AUX(b, NULL, no_passphrase, NULL)) ||
	    !SSL_CTX_use_certificate(ctx, x))
		goto bad_cert;
	/* The rest of the file is the chain, up to the end of the PEM
	 * blocks (where the reader says "no start line"). */
	for (;;) {
		X509 *ca = PEM_read_bio_X509(b, NULL, no_passphrase, NULL);

		if (!ca)
			break;
		if (!SSL_CTX_add0_chain_cert(ctx, ca)) {
			X509_free(ca);
			goto bad_cert;
		}
	}
	e = ERR_peek_last_error();
	if (ERR_GET_LIB(e) != ERR_LIB_PEM || ERR_GET_REASON(e) != PEM_R_NO_START_LINE)
		goto bad_cert;
	ERR_clear_error();
	BIO_free(b);
	b = BIO_new_mem_buf(key->p, (int)key->n);
	if (!b || !(pk = PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL))) {
		ssl_reason(why, sizeof(why));
		snprintf(err, errlen, "%s: %s", r->key_path, why);
		goto fail;
	}
	/* The mismatch named as such (SSL_CTX_use_PrivateKey would only say
	 * "key values mismatch"), then SSL_CTX_check_private_key's word. */
	if (!X509_check_private_key(x, pk) || !SSL_CTX_use_PrivateKey(ctx, pk) ||
	    !SSL_CTX_check_private_key(ctx)) {
		ssl_reason(why, sizeof(why));
		snprintf(err, errlen, "%s does not match the certificate in %s: %s", r->key_path,
			 r->cert_path, why);
		goto fail;
	}
	goto out;
bad_cert:
	ssl_reason(why, sizeof(why));
	snprintf(err, errlen, "%s: %s", r->cert_path, why);
fail:
	SSL_CTX_free(ctx);
	ctx = NULL;
out:
	EVP_PKEY_free(pk);
	X509_free(x);
	BIO_free(b);
	ERR_clear_error();
	return ctx;
}

/* Read the pair and its digest; on failure a text digest and err. */
static int read_pair(const struct tls_reload *r, struct blob *cert, struct blob *key,
		     uint8_t digest[32], char *err, size_t errlen)
{
	const char *bad = r->cert_path;
	int e = read_all(r->cert_path, cert);

	if (e == 0) {
		bad = r->key_path;
		e = read_all(r->key_path, key);
	}
	if (e) {
		blob_free(cert);
		snprintf(err, errlen, "%s: %s", bad,
			 e == -EFBIG	? "larger than 1 MiB"
			 : e == -EAGAIN ? "changed while read"
			 : e == -EINVAL ? "not a regular file"
					: strerror(-e));
		digest_text(err, digest);
		return e;
	}
	digest_pair(cert->p, cert->n, key->p, key->n, digest);
	return 0;
}

int tls_reload_init(struct tls_reload *r, struct tls_server *s, const char *cert_path,
		    const char *key_path, uint64_t now, char *err, size_t errlen)
{
	struct blob cert = {0}, key = {0};
	SSL_CTX *ctx;
	int e;

	memset(r, 0, sizeof(*r));
	r->server = s;
	r->cert_path = strdup(cert_path);
	r->key_path = strdup(key_path);
	if (!r->cert_path || !r->key_path) {
		snprintf(err, errlen, "out of memory");
		e = -ENOMEM;
		goto fail;
	}
	e = read_pair(r, &cert, &key, r->tried, err, errlen);
	if (e)
		goto fail;
	ctx = build_ctx(r, &cert, &key, err, errlen);
	blob_free(&cert);
	blob_free(&key);
	if (!ctx) {
		e = -EINVAL;
		goto fail;
	}
	memcpy(r->in_force, r->tried, sizeof(r->in_force));
	r->loaded_at = r->checked_at = now;
	tls_server_set_ctx(s, ctx);
	return 0;
fail:
	tls_reload_free(r);
	return e;
}

void tls_reload_free(struct tls_reload *r)
{
	free(r->cert_path);
	free(r->key_path);
	r->cert_path = r->key_path = NULL;
}

enum tls_reload_result tls_reload_check(struct tls_reload *r, uint64_t now)
{
	struct blob cert = {0}, key = {0};
	uint8_t d[32];
	char err[sizeof(r->error)];
	SSL_CTX *ctx;
	bool same;

	r->checked_at = now;
	if (read_pair(r, &cert, &key, d, err, sizeof(err)) == 0) {
		/* Back to the pair in force (after a broken one): nothing to
		 * load either. */
		same =
		    memcmp(d, r->tried, sizeof(d)) == 0 || memcmp(d, r->in_force, sizeof(d)) == 0;
	} else {
		same = memcmp(d, r->tried, sizeof(d)) == 0;
		if (!same) {
			memcpy(r->tried, d, sizeof(d));
			snprintf(r->error, sizeof(r->error), "%s", err);
			r->counts.failed++;
			return TLS_RELOAD_FAILED;
		}
	}
	memcpy(r->tried, d, sizeof(d));
	if (same) {
		blob_free(&cert);
		blob_free(&key);
		return TLS_RELOAD_UNCHANGED;
	}
	ctx = build_ctx(r, &cert, &key, err, sizeof(err));
	blob_free(&cert);
	blob_free(&key);
	if (!ctx) {
		snprintf(r->error, sizeof(r->error), "%s", err);
		r->counts.failed++;
		return TLS_RELOAD_FAILED;
	}
	memcpy(r->in_force, d, sizeof(d));
	r->loaded_at = now;
	tls_server_set_ctx(r->server, ctx);
	r->counts.loaded++;
	return TLS_RELOAD_LOADED;
}

const char *tls_reload_result_name(enum tls_reload_result res)
{
	switch (res) {
	case TLS_RELOAD_LOADED:
		return "loaded";
	case TLS_RELOAD_FAILED:
		return "failed";
	case TLS_RELOAD_UNCHANGED:
		break;
	}
	return "unchanged";
}
