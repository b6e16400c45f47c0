/* SPDX-License-Identifier: ISC */
/* TLS server sessions (OpenSSL 3, TLS 1.2 and 1.3) driven by memory BIOs:
 * the caller carries the ciphertext over the loop's streams and OpenSSL
 * never touches a socket. Also the holder of the current SSL_CTX, which a
 * certificate reload (tls_reload.h) replaces while sessions live on. */
#ifndef ETR_TLS_SERVER_H
#define ETR_TLS_SERVER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ssl_ctx_st; /* OpenSSL's SSL_CTX */

/* Ciphertext one tls_conn_pending_out hands out at most (one send). */
#define TLS_CONN_SEND_MAX 16384
/* Ciphertext a connection holds for sending before tls_conn_write says
 * -ENOBUFS (the send buffer and OpenSSL's write BIO together). */
#define TLS_CONN_OUT_MAX (64 * 1024)
/* Ciphertext fed and not yet taken in by OpenSSL before tls_conn_feed says
 * -ENOBUFS: the caller reads plaintext until tls_conn_read gives 0 before
 * it reads more from the socket, and then never meets it. */
#define TLS_CONN_IN_MAX (64 * 1024)

/* The SSL_CTX new sessions take. Shared by the workers of a listener: a
 * mutex guards the pointer; OpenSSL's reference count keeps an old context
 * alive until its last session is freed. */
struct tls_server {
	pthread_mutex_t lock;
	struct ssl_ctx_st *ctx; /* NULL until the first tls_server_set_ctx */
};

/* Returns 0 or -errno. */
int tls_server_init(struct tls_server *s);
/* Drops the holder's reference (live sessions keep theirs). */
void tls_server_free(struct tls_server *s);

/* A new server context with etrelay's settings and no certificate yet:
 * TLS 1.2 to 1.3, no renegotiation, no compression, no session resumption
 * (no tickets, no cache: a reload then never has keys to carry over), no
 * client certificates. NULL when OpenSSL fails (its error queue says why). */
struct ssl_ctx_st *tls_server_ctx_new(void);

/* Make ctx (one reference, now the holder's) the one new sessions take. */
void tls_server_set_ctx(struct tls_server *s, struct ssl_ctx_st *ctx);

/* The current context with a reference of the caller's (SSL_CTX_free it),
 * or NULL before the first set. */
struct ssl_ctx_st *tls_server_ctx_get(struct tls_server *s);

enum tls_conn_state {
	TLS_CONN_HANDSHAKE, /* waiting for the client's handshake */
	TLS_CONN_OPEN,	    /* established: data both ways */
	TLS_CONN_CLOSED,    /* close_notify received or sent: no more data */
	TLS_CONN_FAILED,    /* fatal: an alert may wait in pending_out */
};

/* A session's memory: the tls_conn (TLS_CONN_SEND_MAX and a few words)
 * and OpenSSL's SSL with its two memory BIOs. Measured with OpenSSL 3.0
 * (test_tls_server): about 20 KiB of OpenSSL's heap when open and idle
 * (record buffers are released between records, a BIO that grew past
 * 32 KiB is replaced once empty), 36 KiB with the tls_conn; about 75 KiB
 * at a handshake's peak. At most, while a client stalls or streams: the
 * read BIO up to TLS_CONN_IN_MAX, the write BIO up to TLS_CONN_OUT_MAX and
 * one write, each with a memory BIO's growth margin of a third, the
 * record buffers (2 x 17 KiB) and the tls_conn: under 320 KiB; a hostile
 * ClientHello can make OpenSSL hold up to 128 KiB more during the
 * handshake (its cap on that message). */
struct tls_conn;

/* A server session on the holder's current context. NULL when there is
 * none yet or memory runs out. */
struct tls_conn *tls_conn_new(struct tls_server *s);
void tls_conn_free(struct tls_conn *c);

enum tls_conn_state tls_conn_state(const struct tls_conn *c);

/* Take in n bytes of ciphertext from the client (all of them or none) and
 * go on with the handshake. Returns 0, -EPROTO when the handshake failed
 * (an alert may wait in pending_out: send it, then close), or -ENOBUFS
 * when more than TLS_CONN_IN_MAX would wait to be read. After 0, call
 * tls_conn_read until it gives 0, then send what pending_out has. */
int tls_conn_feed(struct tls_conn *c, const void *cipher, size_t n);

/* Plaintext from the client into buf: the bytes (1..cap), 0 when no whole
 * record waits (feed more), -EPIPE once the client's close_notify came
 * (a clean end; our own goes out with the next pending_out), -EPROTO on a
 * fatal error (bad record, bad MAC: an alert may wait in pending_out). */
ssize_t tls_conn_read(struct tls_conn *c, void *buf, size_t cap);

/* Encrypt all n bytes of plain (1..65536 + 1024) for the client, or
 * nothing: -ENOBUFS when the ciphertext waiting to be sent is already
 * TLS_CONN_OUT_MAX or more (a slow client: the caller drops or waits),
 * -EAGAIN during the handshake, -EPIPE after close, -EPROTO after a fatal
 * error, -EMSGSIZE when n is above the limit. */
int tls_conn_write(struct tls_conn *c, const void *plain, size_t n);

/* Ciphertext to send: its length (0: none) and *p its bytes, which stay
 * valid and unchanged until tls_conn_out_done, whatever else is called
 * meanwhile; asking again before that gives the same bytes. At most
 * TLS_CONN_SEND_MAX. */
size_t tls_conn_pending_out(struct tls_conn *c, const uint8_t **p);

/* n bytes (at most what pending_out gave) are with the kernel. */
void tls_conn_out_done(struct tls_conn *c, size_t n);

/* Queue our close_notify (then pending_out, then shutdown(SHUT_WR) or
 * close). No more writes after it. Reads still give what the client
 * sent until its own close_notify or EOF. */
void tls_conn_shutdown(struct tls_conn *c);

/* Ciphertext waiting in all (pending_out's and the write BIO's), for a
 * caller that bounds what a slow client may hold. */
size_t tls_conn_out_bytes(const struct tls_conn *c);

/* OpenSSL's reason for the last failure of this thread (its error queue,
 * emptied), "unknown" when it holds none. */
const char *tls_error_text(char *buf, size_t len);

#endif
