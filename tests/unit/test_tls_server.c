/* SPDX-License-Identifier: ISC */
/* Unit tests for tls_server.c: real handshakes in memory between a
 * tls_conn and an OpenSSL client (TLS 1.3 and 1.2), data both ways, the
 * ciphertext fed and acknowledged one byte at a time, garbage instead of a
 * ClientHello, close_notify both ways, the input and output bounds, a
 * context replaced under a live session, and what a session costs in
 * memory (OpenSSL's allocations counted through CRYPTO_set_mem_functions). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "tls_peer.h"
#include "tls_server.h"

/* OpenSSL's heap, counted: bytes live, and of those the ones allocated
 * while `counting` (the server's calls). */
struct mem_hdr {
	size_t n;
	bool counted;
	max_align_t align[];
};
static size_t mem_counted, mem_counted_peak;
static bool counting;

static void *count_malloc(size_t n, const char *file, int line)
{
	struct mem_hdr *h = malloc(sizeof(*h) + n);

	if (!h)
		return NULL;
	h->n = n;
	h->counted = counting;
	if (counting) {
		mem_counted += n;
		if (mem_counted > mem_counted_peak)
			mem_counted_peak = mem_counted;
	}
	return h + 1;
}

static void count_free(void *p, const char *file, int line)
{
	struct mem_hdr *h;

	if (!p)
		return;
	h = (struct mem_hdr *)p - 1;
	if (h->counted)
		mem_counted -= h->n;
	free(h);
}

static void *count_realloc(void *p, size_t n, const char *file, int line)
{
	struct mem_hdr *h;
	void *q;

	if (!p)
		return count_malloc(n, file, line);
	if (n == 0) {
		count_free(p, file, line);
		return NULL;
	}
	h = (struct mem_hdr *)p - 1;
	q = count_malloc(n, file, line);
	if (!q)
		return NULL;
	memcpy(q, p, h->n < n ? h->n : n);
	count_free(p, file, line);
	return q;
}

struct fixture {
	struct test_cert tc;
	struct tls_server srv;
	struct tls_conn *c;
	struct test_client cl;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	test_cert_make(&f->tc, "server.test");
	assert_int_equal(tls_server_init(&f->srv), 0);
	assert_null(tls_conn_new(&f->srv)); /* no context yet */
	tls_server_set_ctx(&f->srv, test_server_ctx(&f->tc));
	f->c = tls_conn_new(&f->srv);
	assert_non_null(f->c);
	assert_int_equal(tls_conn_state(f->c), TLS_CONN_HANDSHAKE);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	tls_conn_free(f->c);
	test_client_free(&f->cl);
	tls_server_free(&f->srv);
	test_cert_free(&f->tc);
	free(f);
	return 0;
}

/* Read all the server has into buf (bounded), asserting no error. */
static size_t server_read_all(struct tls_conn *c, uint8_t *buf, size_t cap)
{
	size_t got = 0;

	for (int i = 0; i < 100000 && got < cap; i++) {
		ssize_t r = tls_conn_read(c, buf + got, cap - got);

		assert_true(r >= 0);
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return got;
}

static size_t client_read_all(struct test_client *cl, uint8_t *buf, size_t cap)
{
	size_t got = 0;

	for (int i = 0; i < 100000 && got < cap; i++) {
		int r = SSL_read(cl->ssl, buf + got, (int)(cap - got));

		if (r <= 0) {
			assert_int_equal(SSL_get_error(cl->ssl, r), SSL_ERROR_WANT_READ);
			break;
		}
		got += (size_t)r;
	}
	return got;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed);
}

/* Handshake, then n bytes each way, the pump in pieces of step. */
static void exchange(struct fixture *f, int max_version, size_t step, size_t n)
{
	uint8_t *a = malloc(n), *b = malloc(n);

	assert_non_null(a);
	assert_non_null(b);
	test_client_new(&f->cl, max_version);
	test_handshake(&f->cl, f->c, step);
	assert_int_equal(tls_conn_state(f->c), TLS_CONN_OPEN);

	fill(a, n, 1);
	assert_int_equal(SSL_write(f->cl.ssl, a, (int)n), (int)n);
	assert_int_equal(test_pump_to_server(&f->cl, f->c, step), 0);
	memset(b, 0, n);
	assert_int_equal(server_read_all(f->c, b, n), n);
	assert_memory_equal(a, b, n);
	assert_int_equal(tls_conn_read(f->c, b, n), 0); /* nothing more */

	fill(a, n, 7);
	for (size_t i = 0; i < n; i += 1000) {
		size_t k = n - i < 1000 ? n - i : 1000;

		assert_int_equal(tls_conn_write(f->c, a + i, k), 0);
	}
	test_pump_to_client(f->c, &f->cl, step);
	memset(b, 0, n);
	assert_int_equal(client_read_all(&f->cl, b, n), n);
	assert_memory_equal(a, b, n);
	free(a);
	free(b);
}

static void test_tls13_handshake_and_data_both_ways(void **state)
{
	struct fixture *f = *state;

	exchange(f, 0, 0, 40000);
	assert_int_equal(SSL_version(f->cl.ssl), TLS1_3_VERSION);
}

static void test_tls12_handshake_and_data_both_ways(void **state)
{
	struct fixture *f = *state;

	exchange(f, TLS1_2_VERSION, 0, 40000);
	assert_int_equal(SSL_version(f->cl.ssl), TLS1_2_VERSION);
}

static void test_one_byte_at_a_time_both_ways(void **state)
{
	struct fixture *f = *state;

	exchange(f, 0, 1, 3000);
}

static void test_one_byte_at_a_time_tls12(void **state)
{
	struct fixture *f = *state;

	exchange(f, TLS1_2_VERSION, 1, 3000);
}

static void test_the_client_sees_the_servers_certificate(void **state)
{
	struct fixture *f = *state;
	uint8_t want[32], got[32];
	X509 *peer;

	test_client_new(&f->cl, 0);
	test_handshake(&f->cl, f->c, 0);
	peer = SSL_get1_peer_certificate(f->cl.ssl);
	assert_non_null(peer);
	test_cert_fingerprint(f->tc.cert, want);
	test_cert_fingerprint(peer, got);
	assert_memory_equal(want, got, 32);
	X509_free(peer);
}

static void test_tls11_client_is_refused(void **state)
{
	struct fixture *f = *state;
	int r;

	test_client_new(&f->cl, 0);
	SSL_CTX_set_min_proto_version(f->cl.ctx, TLS1_VERSION);
	SSL_set_min_proto_version(f->cl.ssl, TLS1_VERSION);
	SSL_set_max_proto_version(f->cl.ssl, TLS1_1_VERSION);
	/* The client may refuse to send a hello at its own security level;
	 * when it does send one, the server must refuse it. */
	SSL_set_security_level(f->cl.ssl, 0);
	r = SSL_do_handshake(f->cl.ssl);
	assert_int_not_equal(r, 1);
	if (BIO_ctrl_pending(f->cl.wbio) == 0)
		skip();
	assert_int_equal(test_pump_to_server(&f->cl, f->c, 0), -EPROTO);
	assert_int_equal(tls_conn_state(f->c), TLS_CONN_FAILED);
}

static void test_garbage_instead_of_a_client_hello_is_fatal(void **state)
{
	struct fixture *f = *state;
	static const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	/* A handshake record holding a ClientHello whose body is noise. */
	uint8_t rec[5 + 4 + 64] = {0x16, 0x03, 0x01, 0x00, 4 + 64, 0x01, 0x00, 0x00, 64};
	const uint8_t *p;
	uint8_t buf[64];
	char why[256];

	for (size_t i = 9; i < sizeof(rec); i++)
		rec[i] = (uint8_t)(i * 97);
	assert_int_equal(tls_conn_feed(f->c, http, sizeof(http) - 1), -EPROTO);
	assert_int_equal(tls_conn_state(f->c), TLS_CONN_FAILED);
	tls_error_text(why, sizeof(why));
	assert_non_null(strstr(why, "SSL routines"));
	/* Dead from then on, whatever comes. */
	assert_int_equal(tls_conn_feed(f->c, rec, sizeof(rec)), -EPROTO);
	assert_int_equal(tls_conn_read(f->c, buf, sizeof(buf)), -EPROTO);
	assert_int_equal(tls_conn_write(f->c, "x", 1), -EPROTO);
	(void)tls_conn_pending_out(f->c, &p); /* maybe an alert; no crash */

	tls_conn_free(f->c);
	f->c = tls_conn_new(&f->srv);
	assert_int_equal(tls_conn_feed(f->c, rec, sizeof(rec)), -EPROTO);
	/* The alert the server sends is a whole alert record. */
	if (tls_conn_pending_out(f->c, &p) > 0)
		assert_int_equal(p[0], 0x15);
}

static void test_garbage_one_byte_at_a_time_is_fatal(void **state)
{
	struct fixture *f = *state;
	uint8_t junk[300];
	int r = 0;
	size_t i;

	for (i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 131 + 3);
	junk[0] = 0x16; /* looks like a handshake record at first */
	junk[1] = 0x03;
	junk[2] = 0x01;
	for (i = 0; i < sizeof(junk) && r == 0; i++)
		r = tls_conn_feed(f->c, junk + i, 1);
	assert_int_equal(r, -EPROTO);
}

static void test_client_close_notify_ends_reads_and_is_answered(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[64];

	exchange(f, 0, 0, 100);
	SSL_write(f->cl.ssl, "last", 4);
	assert_int_equal(SSL_shutdown(f->cl.ssl), 0); /* sent, not yet answered */
	assert_int_equal(test_pump_to_server(&f->cl, f->c, 0), 0);
	assert_int_equal(tls_conn_read(f->c, buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "last", 4);
	assert_int_equal(tls_conn_read(f->c, buf, sizeof(buf)), -EPIPE);
	assert_int_equal(tls_conn_read(f->c, buf, sizeof(buf)), -EPIPE);
	assert_int_equal(tls_conn_state(f->c), TLS_CONN_CLOSED);
	assert_int_equal(tls_conn_write(f->c, "x", 1), -EPIPE);
	assert_true(test_pump_to_client(f->c, &f->cl, 0) > 0);
	assert_int_equal(SSL_shutdown(f->cl.ssl), 1); /* the server's came */
}

static void test_server_shutdown_sends_close_notify(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[64];

	exchange(f, 0, 0, 100);
	assert_int_equal(tls_conn_write(f->c, "bye", 3), 0);
	tls_conn_shutdown(f->c);
	tls_conn_shutdown(f->c); /* once is enough */
	assert_int_equal(tls_conn_write(f->c, "x", 1), -EPIPE);
	test_pump_to_client(f->c, &f->cl, 0);
	assert_int_equal(SSL_read(f->cl.ssl, buf, sizeof(buf)), 3);
	assert_int_equal(SSL_read(f->cl.ssl, buf, sizeof(buf)), 0);
	assert_int_equal(SSL_get_error(f->cl.ssl, 0), SSL_ERROR_ZERO_RETURN);
	/* The client's data after our close_notify still arrives, then its
	 * own close_notify. */
	assert_int_equal(SSL_write(f->cl.ssl, "tail", 4), 4);
	SSL_shutdown(f->cl.ssl);
	assert_int_equal(test_pump_to_server(&f->cl, f->c, 0), 0);
	assert_int_equal(tls_conn_read(f->c, buf, sizeof(buf)), 4);
	assert_int_equal(tls_conn_read(f->c, buf, sizeof(buf)), -EPIPE);
}

static void test_shutdown_during_handshake_reads_nothing(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[16];

	test_client_new(&f->cl, 0);
	SSL_do_handshake(f->cl.ssl);
	assert_int_equal(test_pump_to_server(&f->cl, f->c, 0), 0);
	tls_conn_shutdown(f->c);
	assert_int_equal(tls_conn_state(f->c), TLS_CONN_CLOSED);
	assert_int_equal(tls_conn_read(f->c, buf, sizeof(buf)), -EPIPE);
	assert_int_equal(tls_conn_write(f->c, "x", 1), -EPIPE);
}

static void test_write_waits_for_the_handshake(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(tls_conn_write(f->c, "x", 1), -EAGAIN);
}

static void test_a_slow_client_meets_the_output_bound(void **state)
{
	struct fixture *f = *state;
	static uint8_t chunk[1200];
	const uint8_t *p;
	size_t n, first;
	int r = 0, writes = 0;

	exchange(f, 0, 0, 10);
	/* The client reads nothing: writes pile up to the bound. */
	for (int i = 0; i < 1000 && r == 0; i++) {
		r = tls_conn_write(f->c, chunk, sizeof(chunk));
		if (r == 0)
			writes++;
	}
	assert_int_equal(r, -ENOBUFS);
	assert_true(tls_conn_out_bytes(f->c) >= TLS_CONN_OUT_MAX);
	assert_true(tls_conn_out_bytes(f->c) < TLS_CONN_OUT_MAX + sizeof(chunk) + 64);
	assert_true(writes > 40);
	assert_int_equal(tls_conn_write(f->c, chunk, 65536 + 1025), -EMSGSIZE);

	/* The bytes pending_out gives stay put while more is written. */
	first = tls_conn_pending_out(f->c, &p);
	assert_int_equal(first, TLS_CONN_SEND_MAX);
	tls_conn_out_done(f->c, 100);
	n = tls_conn_pending_out(f->c, &p);
	assert_int_equal(n, first - 100);
	assert_int_equal(tls_conn_pending_out(f->c, &p), n);
	tls_conn_out_done(f->c, n);
	assert_int_equal(tls_conn_write(f->c, chunk, sizeof(chunk)), 0);

	/* Once the client has it all, it reads every byte. */
	test_pump_to_client(f->c, &f->cl, 0);
	assert_int_equal(tls_conn_out_bytes(f->c), 0);
}

static void test_unread_input_meets_the_input_bound(void **state)
{
	struct fixture *f = *state;
	static uint8_t chunk[16384];
	int r = 0, fed = 0;

	exchange(f, 0, 0, 10);
	for (int i = 0; i < 64 && r == 0; i++) {
		assert_int_equal(SSL_write(f->cl.ssl, chunk, sizeof(chunk)), (int)sizeof(chunk));
		r = test_pump_to_server(&f->cl, f->c, 0);
		if (r == 0)
			fed++;
	}
	assert_int_equal(r, -ENOBUFS);
	assert_true(fed >= 3 && fed <= 4);
}

static void test_live_session_keeps_its_context_after_a_swap(void **state)
{
	struct fixture *f = *state;
	struct test_cert other;
	struct tls_conn *c2;
	struct test_client cl2;
	uint8_t want[32], got[32], buf[16];
	X509 *peer;

	exchange(f, 0, 0, 10);
	test_cert_make(&other, "other.test");
	tls_server_set_ctx(&f->srv, test_server_ctx(&other));
	/* The old session works on. */
	assert_int_equal(tls_conn_write(f->c, "still", 5), 0);
	test_pump_to_client(f->c, &f->cl, 0);
	assert_int_equal(SSL_read(f->cl.ssl, buf, sizeof(buf)), 5);

	/* A new one gets the new certificate. */
	c2 = tls_conn_new(&f->srv);
	assert_non_null(c2);
	test_client_new(&cl2, 0);
	test_handshake(&cl2, c2, 0);
	peer = SSL_get1_peer_certificate(cl2.ssl);
	test_cert_fingerprint(other.cert, want);
	test_cert_fingerprint(peer, got);
	assert_memory_equal(want, got, 32);
	X509_free(peer);
	test_client_free(&cl2);
	tls_conn_free(c2);
	test_cert_free(&other);
}

/* The pumps of tls_peer.h, counting only the server's calls. */
static void counted_to_server(struct test_client *cl, struct tls_conn *c)
{
	uint8_t buf[4096];
	int n;

	while ((n = BIO_read(cl->wbio, buf, sizeof(buf))) > 0) {
		counting = true;
		assert_int_equal(tls_conn_feed(c, buf, (size_t)n), 0);
		counting = false;
	}
}

static void counted_to_client(struct tls_conn *c, struct test_client *cl)
{
	const uint8_t *p;
	size_t n;

	for (;;) {
		counting = true;
		n = tls_conn_pending_out(c, &p);
		counting = false;
		if (n == 0)
			break;
		assert_int_equal(BIO_write(cl->rbio, p, (int)n), (int)n);
		counting = true;
		tls_conn_out_done(c, n);
		counting = false;
	}
}

static size_t counted_read(struct tls_conn *c, uint8_t *buf, size_t cap)
{
	size_t n;

	counting = true;
	n = server_read_all(c, buf, cap);
	counting = false;
	return n;
}

static void counted_write(struct tls_conn *c, const uint8_t *buf, size_t n)
{
	counting = true;
	assert_int_equal(tls_conn_write(c, buf, n), 0);
	counting = false;
}

/* What a session costs: OpenSSL's allocations made by the server's calls
 * and still live (at the handshake's peak and once open and idle), plus
 * the tls_conn itself. Printed for the record; bounded so a change shows. */
static void test_a_session_costs_a_bounded_amount_of_memory(void **state)
{
	struct fixture *f = *state;
	static uint8_t burst[100000];
	uint8_t buf[2000];
	size_t base, idle, after_burst;

	tls_conn_free(f->c);
	test_client_new(&f->cl, 0);
	base = mem_counted;
	mem_counted_peak = mem_counted;
	counting = true;
	f->c = tls_conn_new(&f->srv);
	counting = false;
	for (int round = 0; round < 20 && tls_conn_state(f->c) != TLS_CONN_OPEN; round++) {
		SSL_do_handshake(f->cl.ssl);
		counted_to_server(&f->cl, f->c);
		counted_to_client(f->c, &f->cl);
	}
	assert_int_equal(tls_conn_state(f->c), TLS_CONN_OPEN);
	SSL_do_handshake(f->cl.ssl);
	fill(buf, sizeof(buf), 3);
	SSL_write(f->cl.ssl, buf, sizeof(buf));
	counted_to_server(&f->cl, f->c);
	assert_int_equal(counted_read(f->c, buf, sizeof(buf)), sizeof(buf));
	counted_write(f->c, buf, sizeof(buf));
	counted_to_client(f->c, &f->cl);
	idle = mem_counted - base;
	/* A burst each way, taken in whole by the other side: its memory
	 * does not stay with the idle session. */
	for (int i = 0; i < 30; i++)
		counted_write(f->c, buf, sizeof(buf));
	counted_to_client(f->c, &f->cl);
	assert_int_equal(client_read_all(&f->cl, burst, sizeof(burst)), 31 * sizeof(buf));
	for (int i = 0; i < 30; i++)
		SSL_write(f->cl.ssl, buf, sizeof(buf));
	counted_to_server(&f->cl, f->c);
	assert_int_equal(counted_read(f->c, burst, sizeof(burst)), 30 * sizeof(buf));
	after_burst = mem_counted - base;
	printf("tls session: OpenSSL heap %zu bytes open and idle, %zu after 60 kB each way, "
	       "%zu at the peak, plus the tls_conn (%d-byte send buffer)\n",
	       idle, after_burst, mem_counted_peak - base, TLS_CONN_SEND_MAX);
	/* Measured with OpenSSL 3.0: see the numbers printed. */
	assert_true(idle < 32 * 1024);
	assert_true(after_burst < 32 * 1024);
	assert_true(mem_counted_peak - base < 256 * 1024);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_tls13_handshake_and_data_both_ways, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_tls12_handshake_and_data_both_ways, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_one_byte_at_a_time_both_ways, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_one_byte_at_a_time_tls12, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_the_client_sees_the_servers_certificate, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_tls11_client_is_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_garbage_instead_of_a_client_hello_is_fatal, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_garbage_one_byte_at_a_time_is_fatal, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_client_close_notify_ends_reads_and_is_answered,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_server_shutdown_sends_close_notify, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_shutdown_during_handshake_reads_nothing, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_write_waits_for_the_handshake, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_a_slow_client_meets_the_output_bound, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_unread_input_meets_the_input_bound, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_live_session_keeps_its_context_after_a_swap, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_a_session_costs_a_bounded_amount_of_memory, setup,
					    teardown),
	};

	/* Before OpenSSL's first allocation. */
	if (!CRYPTO_set_mem_functions(count_malloc, count_realloc, count_free))
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
