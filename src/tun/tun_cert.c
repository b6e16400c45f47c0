/* SPDX-License-Identifier: ISC */
/* The tunnel certificate in force: the key of each request, the chain
 * that comes back put in force for rung 3's TLS. */
#include "tun_cert.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>

int tun_cert_init(struct tun_cert *c)
{
	int rc;

	memset(c, 0, sizeof(*c));
	if (pthread_mutex_init(&c->lock, NULL) != 0)
		return -ENOMEM;
	if ((rc = tls_server_init(&c->tls)) < 0) {
		pthread_mutex_destroy(&c->lock);
		return rc;
	}
	c->init = true;
	return 0;
}

void tun_cert_free(struct tun_cert *c)
{
	if (!c->init)
		return;
	EVP_PKEY_free(c->key);
	tls_server_free(&c->tls);
	pthread_mutex_destroy(&c->lock);
	memset(c, 0, sizeof(*c));
}

int tun_cert_request(struct tun_cert *c, char **pem, char *err, size_t errlen)
{
	char why[256];

	EVP_PKEY_free(c->key);
	c->key = NULL;
	if (tls_csr_new(&c->key, pem) < 0) {
		snprintf(err, errlen, "no key or request: %s", tls_error_text(why, sizeof(why)));
		return -1;
	}
	return 0;
}

int tun_cert_take(struct tun_cert *c, const char *chain, size_t len, const char *relay_id,
		  int64_t now_ms, struct tun_cert_taken *t, char *err, size_t errlen)
{
	return tun_cert_take_floor(c, chain, len, relay_id, now_ms, 0, t, err, errlen);
}

int tun_cert_take_floor(struct tun_cert *c, const char *chain, size_t len, const char *relay_id,
			int64_t now_ms, uint64_t min_left_ms, struct tun_cert_taken *t, char *err,
			size_t errlen)
{
	int64_t now = now_ms / 1000;
	struct tls_cert_info info;
	char why[256];
	SSL_CTX *ctx;
	int rc = -1;

	memset(t, 0, sizeof(*t));
	if (!c->key) {
		snprintf(err, errlen, "no request out");
		return -1;
	}
	if (tls_cert_accept(c->key, chain, len, relay_id, now, &info, err, errlen) < 0)
		goto out;
	if (info.not_after * 1000 - now_ms < (int64_t)min_left_ms) {
		snprintf(err, errlen,
			 "the certificate for %s has %.1f s left, less than the %.1f s one must "
			 "have to be put in force",
			 info.name, (double)(info.not_after * 1000 - now_ms) / 1000,
			 (double)min_left_ms / 1000);
		tls_cert_info_free(&info);
		rc = TUN_CERT_SHORT;
		goto out;
	}
	if (!(ctx = tls_cert_ctx(c->key, &info))) {
		snprintf(err, errlen, "OpenSSL refused the pair: %s",
			 tls_error_text(why, sizeof(why)));
		tls_cert_info_free(&info);
		goto out;
	}
	tls_server_set_ctx(&c->tls, ctx);
	pthread_mutex_lock(&c->lock);
	memcpy(c->name, info.name, sizeof(c->name));
	c->not_after = info.not_after;
	pthread_mutex_unlock(&c->lock);
	t->not_after = info.not_after;
	/* In milliseconds: the renewal at two thirds of a short lifetime
	 * comes when it should, not a second either way. */
	t->valid_for_ms = (uint64_t)(info.not_after * 1000 - now_ms);
	t->age_ms =
	    now_ms > info.not_before * 1000 ? (uint64_t)(now_ms - info.not_before * 1000) : 0;
	tls_cert_info_free(&info);
	rc = 0;
out:
	/* The context holds its own reference to the key. */
	EVP_PKEY_free(c->key);
	c->key = NULL;
	return rc;
}

bool tun_cert_name(struct tun_cert *c, int64_t now, char name[TLS_CERT_NAME_MAX])
{
	bool on;

	name[0] = '\0';
	if (!c->init)
		return false;
	pthread_mutex_lock(&c->lock);
	on = c->name[0] && now < c->not_after;
	if (on)
		snprintf(name, TLS_CERT_NAME_MAX, "%s", c->name);
	pthread_mutex_unlock(&c->lock);
	return on;
}
