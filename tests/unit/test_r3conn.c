/* SPDX-License-Identifier: ISC */
/* Unit tests for one rung-3 connection above its sockets (tun/r3conn.c):
 * an OpenSSL client in memory, the upgrade and WebSocket frames written
 * by hand through it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "r3conn.h"
#include "tls_peer.h"

#define HOST "tunnel.r1.example.net"

static const char *const tokens[] = {"tok-a", "tok-b"};
static const size_t lens[] = {5, 5};

struct fx {
	struct test_cert tc;
	struct tls_server srv;
	struct test_client cl;
	struct udpws_tokens t;
	struct r3conn c;
	uint8_t msg[2048];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	test_cert_make(&f->tc, HOST);
	assert_int_equal(tls_server_init(&f->srv), 0);
	assert_int_equal(r3conn_init(&f->c, &f->srv, HOST, f->msg, sizeof(f->msg)), -ENOENT);
	tls_server_set_ctx(&f->srv, test_server_ctx(&f->tc));
	assert_int_equal(r3conn_init(&f->c, &f->srv, HOST, f->msg, sizeof(f->msg)), 0);
	assert_int_equal(udpws_tokens_build(&f->t, tokens, lens, 2), 0);
	test_client_new(&f->cl, 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	r3conn_free(&f->c);
	udpws_tokens_free(&f->t);
	test_client_free(&f->cl);
	tls_server_free(&f->srv);
	test_cert_free(&f->tc);
	free(f);
	return 0;
}

static size_t request(char *out, const char *path, const char *token)
{
	return (size_t)snprintf(out, 1024,
				"GET %s HTTP/1.1\r\nHost: " HOST "\r\nUpgrade: websocket\r\n"
				"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
				"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
				"Authorization: Bearer %s\r\n\r\n",
				path, token);
}

/* A masked client frame, FIN set, payload under 126 bytes. */
static size_t cframe(uint8_t *out, uint8_t op, const void *payload, size_t len)
{
	static const uint8_t key[4] = {0x11, 0x22, 0x33, 0x44};
	const uint8_t *p = payload;

	out[0] = 0x80 | op;
	out[1] = 0x80 | (uint8_t)len;
	memcpy(out + 2, key, 4);
	for (size_t i = 0; i < len; i++)
		out[6 + i] = p[i] ^ key[i % 4];
	return 6 + len;
}

/* The client writes p through TLS; the connection is fed all of it, in
 * pieces of step bytes (0: whole). */
static void client_send(struct fx *f, const void *p, size_t n, size_t step)
{
	uint8_t buf[4096];
	int k;

	assert_int_equal(SSL_write(f->cl.ssl, p, (int)n), (int)n);
	while ((k = BIO_read(f->cl.wbio, buf, sizeof(buf))) > 0) {
		size_t s = step ? step : (size_t)k;

		for (size_t i = 0; i < (size_t)k; i += s)
			assert_int_equal(
			    r3conn_feed(&f->c, buf + i, (size_t)k - i < s ? (size_t)k - i : s), 0);
	}
}

/* What the client reads of the connection's ciphertext (bounded). */
static size_t client_recv(struct fx *f, uint8_t *buf, size_t cap)
{
	size_t got = 0;

	test_pump_to_client(f->c.tls, &f->cl, 0);
	for (int i = 0; i < 1000 && got < cap; i++) {
		int r = SSL_read(f->cl.ssl, buf + got, (int)(cap - got));

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

static void open_with(struct fx *f, const char *path, const char *token, size_t step)
{
	char req[1024];
	size_t n = request(req, path, token);

	test_handshake(&f->cl, f->c.tls, 0);
	client_send(f, req, n, step);
}

static void test_r3conn_upgrade_then_datagrams_both_ways(void **state)
{
	struct fx *f = *state;
	uint8_t w[256], buf[1024];
	const uint8_t *dg;
	size_t len, n, got;

	open_with(f, "/t", "tok-b", 7);
	assert_int_equal(r3conn_next(&f->c, &f->t, &dg, &len), R3_MORE);
	assert_int_equal(f->c.ws.token, 1);
	got = client_recv(f, buf, sizeof(buf) - 1);
	buf[got] = '\0';
	assert_non_null(strstr((char *)buf, "HTTP/1.1 101"));
	/* Two datagrams in one record, then a ping (answered). */
	n = cframe(w, 0x2, "wg-one", 6);
	n += cframe(w + n, 0x2, "wg-two!", 7);
	n += cframe(w + n, 0x9, "hi", 2);
	client_send(f, w, n, 0);
	assert_int_equal(r3conn_next(&f->c, &f->t, &dg, &len), R3_DATAGRAM);
	assert_int_equal(len, 6);
	assert_memory_equal(dg, "wg-one", 6);
	assert_int_equal(r3conn_next(&f->c, &f->t, &dg, &len), R3_DATAGRAM);
	assert_int_equal(len, 7);
	assert_memory_equal(dg, "wg-two!", 7);
	assert_int_equal(r3conn_next(&f->c, &f->t, &dg, &len), R3_MORE);
	got = client_recv(f, buf, sizeof(buf));
	assert_int_equal(got, 4);
	assert_memory_equal(buf, "\x8a\x02hi", 4); /* pong, unmasked */
	/* WireGuard's answer: one binary message. */
	assert_int_equal(r3conn_send(&f->c, (const uint8_t *)"wg-back", 7), 0);
	got = client_recv(f, buf, sizeof(buf));
	assert_int_equal(got, 9);
	assert_memory_equal(buf, "\x82\x07wg-back", 9);
	/* The relay ends it (a token left the set): close frame 1008. */
	r3conn_close(&f->c, WS_CLOSE_POLICY);
	assert_int_equal(r3conn_next(&f->c, &f->t, &dg, &len), R3_CLOSE);
	got = client_recv(f, buf, sizeof(buf));
	assert_true(got >= 4);
	assert_memory_equal(buf, "\x88", 1);
	assert_int_equal((buf[2] << 8) | buf[3], WS_CLOSE_POLICY);
	assert_int_equal(r3conn_send(&f->c, (const uint8_t *)"x", 1), -ENOTCONN);
}

static void test_r3conn_a_wrong_token_is_refused_before_any_datagram(void **state)
{
	struct fx *f = *state;
	uint8_t buf[1024];
	const uint8_t *dg;
	size_t len, got;

	open_with(f, "/t", "tok-x", 0);
	assert_int_equal(r3conn_send(&f->c, (const uint8_t *)"x", 1), -ENOTCONN);
	assert_int_equal(r3conn_next(&f->c, &f->t, &dg, &len), R3_CLOSE);
	got = client_recv(f, buf, sizeof(buf) - 1);
	buf[got] = '\0';
	assert_non_null(strstr((char *)buf, "HTTP/1.1 403"));
	assert_int_equal(r3conn_feed(&f->c, "x", 1), -1);
}

static void test_r3conn_a_wrong_path_is_refused(void **state)
{
	struct fx *f = *state;
	uint8_t buf[1024];
	const uint8_t *dg;
	size_t len, got;

	open_with(f, "/x", "tok-a", 0);
	assert_int_equal(r3conn_next(&f->c, &f->t, &dg, &len), R3_CLOSE);
	got = client_recv(f, buf, sizeof(buf) - 1);
	buf[got] = '\0';
	assert_null(strstr((char *)buf, "101"));
	assert_memory_equal(buf, "HTTP/1.1 4", 10);
}

static void test_r3conn_garbage_instead_of_tls_ends_it(void **state)
{
	struct fx *f = *state;
	const uint8_t *dg;
	size_t len;

	assert_int_equal(r3conn_feed(&f->c, "GET / HTTP/1.1\r\n\r\n", 18), -1);
	assert_int_equal(r3conn_next(&f->c, &f->t, &dg, &len), R3_CLOSE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	    T(test_r3conn_upgrade_then_datagrams_both_ways),
	    T(test_r3conn_a_wrong_token_is_refused_before_any_datagram),
	    T(test_r3conn_a_wrong_path_is_refused),
	    T(test_r3conn_garbage_instead_of_tls_ends_it),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
