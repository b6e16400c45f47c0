/* SPDX-License-Identifier: ISC */
/* TLS server sessions over memory BIOs, and the holder of the current
 * SSL_CTX. OpenSSL reads ciphertext from one memory BIO (what the caller
 * fed) and writes to another, from which pending_out copies a send's worth
 * into the connection's own buffer: a send needs bytes that stay put until
 * its on_sent, and a memory BIO moves its bytes when it grows. */
#include "tls_server.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/buffer.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

/* The largest plaintext one tls_conn_write takes: a ChannelData or Data
 * indication around a whole UDP datagram, with room for its headers. */
#define TLS_CONN_WRITE_MAX (65536 + 1024)

struct tls_conn {
	SSL *ssl;
	BIO *rbio, *wbio; /* owned by ssl */
	enum tls_conn_state state;
	bool close_sent;
	uint32_t out_off, out_len; /* out[out_off..out_len) not yet sent */
	uint8_t out[TLS_CONN_SEND_MAX];
};

int tls_server_init(struct tls_server *s)
{
	s->ctx = NULL;
	return -pthread_mutex_init(&s->lock, NULL);
}

void tls_server_free(struct tls_server *s)
{
	SSL_CTX_free(s->ctx);
	s->ctx = NULL;
	pthread_mutex_destroy(&s->lock);
}

SSL_CTX *tls_server_ctx_new(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx)
		return NULL;
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION)) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	/* Renegotiation is a CPU lever for a client and buys a server
	 * nothing; compression is CRIME. Without tickets and a cache there is
	 * no resumption: a TURN client connects once per call, and ticket
	 * keys that live as long as the process would weaken forward secrecy
	 * (and a reload could not carry them over anyway). */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
				     SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(ctx, 0);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	/* A TURN client over TLS is mostly idle between small media
	 * packets, and thousands of them may be connected: an idle session
	 * then holds about 22 KiB of OpenSSL's heap instead of 55 KiB
	 * (test_tls_server measures it), for a malloc and free of a record
	 * buffer when one is needed again. */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	return ctx;
}

void tls_server_set_ctx(struct tls_server *s, SSL_CTX *ctx)
{
	SSL_CTX *old;

	pthread_mutex_lock(&s->lock);
	old = s->ctx;
	s->ctx = ctx;
	pthread_mutex_unlock(&s->lock);
	SSL_CTX_free(old); /* live sessions hold their own references */
}

SSL_CTX *tls_server_ctx_get(struct tls_server *s)
{
	SSL_CTX *ctx;

	pthread_mutex_lock(&s->lock);
	ctx = s->ctx;
	if (ctx && !SSL_CTX_up_ref(ctx))
		ctx = NULL;
	pthread_mutex_unlock(&s->lock);
	return ctx;
}

struct tls_conn *tls_conn_new(struct tls_server *s)
{
	SSL_CTX *ctx = tls_server_ctx_get(s);
	struct tls_conn *c;

	if (!ctx)
		return NULL;
	c = malloc(sizeof(*c));
	if (!c)
		goto out;
	c->state = TLS_CONN_HANDSHAKE;
	c->close_sent = false;
	c->out_off = c->out_len = 0;
	c->ssl = SSL_new(ctx); /* takes a reference of its own */
	c->rbio = BIO_new(BIO_s_mem());
	c->wbio = BIO_new(BIO_s_mem());
	if (!c->ssl || !c->rbio || !c->wbio) {
		BIO_free(c->rbio);
		BIO_free(c->wbio);
		SSL_free(c->ssl);
		free(c);
		c = NULL;
		goto out;
	}
	/* An empty read BIO means "more later", not EOF: EOF is the
	 * caller's to see on the socket. */
	BIO_set_mem_eof_return(c->rbio, -1);
	SSL_set_bio(c->ssl, c->rbio, c->wbio);
	SSL_set_accept_state(c->ssl);
out:
	SSL_CTX_free(ctx);
	return c;
}

void tls_conn_free(struct tls_conn *c)
{
	if (!c)
		return;
	SSL_free(c->ssl); /* and its BIOs */
	free(c);
}

enum tls_conn_state tls_conn_state(const struct tls_conn *c)
{
	return c->state;
}

/* A memory BIO keeps the most it ever held. Once one that grew past a
 * few records is empty, a fresh one takes its place, so that a burst does
 * not stay in an idle session's memory. */
#define TLS_BIO_KEEP (32 * 1024)

static void shrink_bios(struct tls_conn *c)
{
	BUF_MEM *bm;
	BIO *b;

	if (BIO_ctrl_pending(c->rbio) == 0 && BIO_get_mem_ptr(c->rbio, &bm) > 0 &&
	    bm->max > TLS_BIO_KEEP && (b = BIO_new(BIO_s_mem()))) {
		BIO_set_mem_eof_return(b, -1);
		SSL_set0_rbio(c->ssl, b); /* frees the old one */
		c->rbio = b;
	}
	if (BIO_ctrl_pending(c->wbio) == 0 && BIO_get_mem_ptr(c->wbio, &bm) > 0 &&
	    bm->max > TLS_BIO_KEEP && (b = BIO_new(BIO_s_mem()))) {
		SSL_set0_wbio(c->ssl, b);
		c->wbio = b;
	}
}

/* ssl's answer r to an operation: 0 when it only wants more input, else
 * the connection fails (-EPROTO). The error queue is left for
 * tls_error_text. */
static int conn_error(struct tls_conn *c, int r)
{
	switch (SSL_get_error(c->ssl, r)) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		return 0;
	default:
		c->state = TLS_CONN_FAILED;
		return -EPROTO;
	}
}

int tls_conn_feed(struct tls_conn *c, const void *cipher, size_t n)
{
	int r;

	if (c->state == TLS_CONN_FAILED)
		return -EPROTO;
	if (n == 0)
		return 0;
	if (n > TLS_CONN_IN_MAX || BIO_ctrl_pending(c->rbio) + n > TLS_CONN_IN_MAX)
		return -ENOBUFS;
	if (BIO_write(c->rbio, cipher, (int)n) != (int)n)
		return -ENOMEM;
	if (c->state != TLS_CONN_HANDSHAKE)
		return 0;
	/* The error queue must be empty before an SSL call whose
	 * SSL_get_error we ask (SSL_get_error(3)). */
	ERR_clear_error();
	r = SSL_do_handshake(c->ssl);
	if (r == 1) {
		c->state = TLS_CONN_OPEN;
		return 0;
	}
	return conn_error(c, r);
}

ssize_t tls_conn_read(struct tls_conn *c, void *buf, size_t cap)
{
	int r;

	if (c->state == TLS_CONN_FAILED)
		return -EPROTO;
	if (c->state == TLS_CONN_HANDSHAKE || cap == 0)
		return 0;
	if (!SSL_is_init_finished(c->ssl))
		return -EPIPE; /* shut down during the handshake */
	if (SSL_get_shutdown(c->ssl) & SSL_RECEIVED_SHUTDOWN)
		return -EPIPE;
	ERR_clear_error();
	r = SSL_read(c->ssl, buf, cap > INT_MAX ? INT_MAX : (int)cap);
	if (r > 0)
		return r;
	if (SSL_get_error(c->ssl, r) == SSL_ERROR_WANT_READ) {
		shrink_bios(c);
		return 0;
	}
	if (SSL_get_error(c->ssl, r) == SSL_ERROR_ZERO_RETURN) {
		/* The client's close_notify: answer with ours. */
		if (!c->close_sent) {
			SSL_shutdown(c->ssl);
			c->close_sent = true;
		}
		c->state = TLS_CONN_CLOSED;
		return -EPIPE;
	}
	return conn_error(c, r);
}

int tls_conn_write(struct tls_conn *c, const void *plain, size_t n)
{
	int r;

	switch (c->state) {
	case TLS_CONN_HANDSHAKE:
		return -EAGAIN;
	case TLS_CONN_CLOSED:
		return -EPIPE;
	case TLS_CONN_FAILED:
		return -EPROTO;
	case TLS_CONN_OPEN:
		break;
	}
	if (c->close_sent)
		return -EPIPE;
	if (n > TLS_CONN_WRITE_MAX)
		return -EMSGSIZE;
	if (n == 0)
		return 0;
	if (tls_conn_out_bytes(c) >= TLS_CONN_OUT_MAX)
		return -ENOBUFS;
	/* A memory BIO takes every byte, so SSL_write writes all n or
	 * fails (out of memory). */
	ERR_clear_error();
	r = SSL_write(c->ssl, plain, (int)n);
	if (r == (int)n)
		return 0;
	c->state = TLS_CONN_FAILED;
	return -EPROTO;
}

size_t tls_conn_pending_out(struct tls_conn *c, const uint8_t **p)
{
	if (c->out_off == c->out_len) {
		int r = BIO_read(c->wbio, c->out, sizeof(c->out));

		c->out_off = 0;
		c->out_len = r > 0 ? (uint32_t)r : 0;
		shrink_bios(c);
	}
	*p = c->out + c->out_off;
	return c->out_len - c->out_off;
}

void tls_conn_out_done(struct tls_conn *c, size_t n)
{
	uint32_t left = c->out_len - c->out_off;

	c->out_off += n < left ? (uint32_t)n : left;
}

void tls_conn_shutdown(struct tls_conn *c)
{
	if (c->close_sent || c->state == TLS_CONN_FAILED)
		return;
	c->close_sent = true;
	if (c->state == TLS_CONN_HANDSHAKE) {
		/* Nothing to close cleanly yet (SSL_shutdown refuses while
		 * in init): the caller just closes. */
		c->state = TLS_CONN_CLOSED;
		return;
	}
	ERR_clear_error();
	SSL_shutdown(c->ssl); /* writes close_notify into the write BIO */
	ERR_clear_error();
	c->state = TLS_CONN_CLOSED;
}

size_t tls_conn_out_bytes(const struct tls_conn *c)
{
	return (c->out_len - c->out_off) + BIO_ctrl_pending(c->wbio);
}

const char *tls_error_text(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();

	if (e == 0)
		snprintf(buf, len, "unknown");
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}
