/* SPDX-License-Identifier: ISC */
/* The tunnel certificate: a request that names nothing, and the check of
 * the chain signed for it. */
#include "tls_csr.h"

#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "addr.h"
#include "tls_server.h"

/* A certificate whose notBefore is this far ahead of the clock is taken:
 * the control plane's clock and ours differ by that much at most. */
#define TLS_CERT_SKEW_S 300

int tls_csr_new(EVP_PKEY **key, char **pem)
{
	X509_REQ *req = NULL;
	BIO *bio = NULL;
	BUF_MEM *mem;
	int rc = -EIO;

	*pem = NULL;
	*key = EVP_EC_gen("P-256");
	if (!*key)
		return -EIO;
	/* Version 1 (0), an empty subject, no extensions: the control plane
	 * chooses the name. */
	req = X509_REQ_new();
	if (!req || !X509_REQ_set_version(req, 0) || !X509_REQ_set_pubkey(req, *key) ||
	    !X509_REQ_sign(req, *key, EVP_sha256()))
		goto out;
	bio = BIO_new(BIO_s_mem());
	if (!bio || !PEM_write_bio_X509_REQ(bio, req) || BIO_get_mem_ptr(bio, &mem) <= 0)
		goto out;
	*pem = malloc(mem->length + 1);
	if (!*pem)
		goto out;
	memcpy(*pem, mem->data, mem->length);
	(*pem)[mem->length] = '\0';
	rc = 0;
out:
	BIO_free(bio);
	X509_REQ_free(req);
	if (rc != 0) {
		EVP_PKEY_free(*key);
		*key = NULL;
	}
	return rc;
}

static int refuse(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static bool asn1_seconds(const ASN1_TIME *t, int64_t *out)
{
	struct tm tm;

	if (!t || !ASN1_TIME_to_tm(t, &tm))
		return false;
	*out = (int64_t)timegm(&tm);
	return true;
}

/* The leaf's one DNS name into out; NULL or the reason it has none. */
static const char *leaf_name(X509 *leaf, char out[TLS_CERT_NAME_MAX])
{
	GENERAL_NAMES *names = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
	const char *why = NULL;
	int dns = 0;

	if (!names)
		return "no subjectAltName";
	for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
		const unsigned char *s;
		int n;

		if (g->type != GEN_DNS) {
			why = "a subjectAltName that is not a DNS name";
			break;
		}
		if (++dns > 1) {
			why = "more than one DNS name";
			break;
		}
		s = ASN1_STRING_get0_data(g->d.dNSName);
		n = ASN1_STRING_length(g->d.dNSName);
		if (n <= 0 || n >= TLS_CERT_NAME_MAX || memchr(s, '\0', (size_t)n)) {
			why = "a DNS name of a bad length";
			break;
		}
		memcpy(out, s, (size_t)n);
		out[n] = '\0';
		if (memchr(s, '*', (size_t)n)) {
			why = "a wildcard name";
			break;
		}
		if (!addr_host_name_valid(out, (size_t)n)) {
			why = "a DNS name that is not a host name";
			break;
		}
	}
	GENERAL_NAMES_free(names);
	if (!why && dns == 0)
		why = "no DNS name";
	return why;
}

/* Whether name is tunnel.<relay_id>.<suffix>, or with relay_id NULL
 * tunnel.<one label>.<suffix>; prefix is scratch room. */
static bool name_is_tunnel(const char *name, const char *relay_id, char prefix[TLS_CERT_NAME_MAX])
{
	const char *id, *dot;
	int n;

	if (relay_id) {
		n = snprintf(prefix, TLS_CERT_NAME_MAX, "tunnel.%s.", relay_id);
		return n > 0 && (size_t)n < TLS_CERT_NAME_MAX &&
		       strncmp(name, prefix, (size_t)n) == 0 && name[n] != '\0';
	}
	if (strncmp(name, "tunnel.", 7) != 0)
		return false;
	id = name + 7;
	dot = strchr(id, '.');
	return dot && dot > id && dot[1] != '\0';
}

int tls_cert_accept(EVP_PKEY *key, const char *chain_pem, size_t len, const char *relay_id,
		    int64_t now, struct tls_cert_info *out, char *err, size_t errlen)
{
	char prefix[TLS_CERT_NAME_MAX];
	const char *why;
	BIO *bio;
	X509 *x, *leaf;

	memset(out, 0, sizeof(*out));
	if (len > INT32_MAX || !(bio = BIO_new_mem_buf(chain_pem, (int)len)))
		return refuse(err, errlen, "cannot read the chain");
	out->chain = sk_X509_new_null();
	while (out->chain && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL)
		if (!sk_X509_push(out->chain, x))
			X509_free(x);
	BIO_free(bio);
	ERR_clear_error(); /* the end of the text reads as "no start line" */
	if (!out->chain || sk_X509_num(out->chain) == 0) {
		tls_cert_info_free(out);
		return refuse(err, errlen, "no certificate in the answer");
	}
	leaf = sk_X509_value(out->chain, 0);
	if (X509_check_private_key(leaf, key) != 1) {
		ERR_clear_error();
		tls_cert_info_free(out);
		return refuse(err, errlen, "the certificate is for another key");
	}
	if ((why = leaf_name(leaf, out->name)) != NULL) {
		tls_cert_info_free(out);
		return refuse(err, errlen, "the certificate has %s", why);
	}
	if (!name_is_tunnel(out->name, relay_id, prefix)) {
		char name[TLS_CERT_NAME_MAX];

		memcpy(name, out->name, sizeof(name));
		tls_cert_info_free(out);
		return refuse(err, errlen, "the certificate names %s, not tunnel.%s.<suffix>", name,
			      relay_id ? relay_id : "<relay-id>");
	}
	if (!asn1_seconds(X509_get0_notBefore(leaf), &out->not_before) ||
	    !asn1_seconds(X509_get0_notAfter(leaf), &out->not_after) ||
	    out->not_after <= out->not_before) {
		tls_cert_info_free(out);
		return refuse(err, errlen, "the certificate's validity cannot be read");
	}
	if (now >= out->not_after || now + TLS_CERT_SKEW_S < out->not_before) {
		tls_cert_info_free(out);
		return refuse(err, errlen, "the certificate is not valid now");
	}
	return 0;
}

void tls_cert_info_free(struct tls_cert_info *c)
{
	if (c->chain)
		sk_X509_pop_free(c->chain, X509_free);
	memset(c, 0, sizeof(*c));
}

SSL_CTX *tls_cert_ctx(EVP_PKEY *key, const struct tls_cert_info *c)
{
	SSL_CTX *ctx = tls_server_ctx_new();

	if (!ctx || !c->chain || sk_X509_num(c->chain) == 0 ||
	    SSL_CTX_use_certificate(ctx, sk_X509_value(c->chain, 0)) != 1)
		goto fail;
	for (int i = 1; i < sk_X509_num(c->chain); i++)
		if (SSL_CTX_add1_chain_cert(ctx, sk_X509_value(c->chain, i)) != 1)
			goto fail;
	if (SSL_CTX_use_PrivateKey(ctx, key) != 1 || SSL_CTX_check_private_key(ctx) != 1)
		goto fail;
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}
