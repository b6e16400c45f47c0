/* SPDX-License-Identifier: ISC */
/* What the files of the TURN listener share and nothing outside src/turn/
 * reads: a TCP or TLS connection, where an answer goes (struct turn_ctx),
 * and the few functions one file offers the others. turn.h is the face. */
#ifndef ETR_TURN_INT_H
#define ETR_TURN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "banlist.h"
#include "stun.h"
#include "tls_server.h"
#include "turn.h"

/* The copy toward a client when a datagram cannot go as it came (a Data
 * indication, or ChannelData without headroom): the largest message. */
#define TURN_SCRATCH (STUN_HDR_LEN + 0xFFFF)
/* Room for any answer the server builds (the largest: an Allocate success
 * with two addresses, lifetime, token, integrity and fingerprint). */
#define TURN_ANSWER_MAX 512
/* A TCP connection: the largest frame (a STUN message of 20 + 65535 bytes,
 * or ChannelData with its padding). */
#define TURN_CONN_RX_MAX (STUN_HDR_LEN + 0xFFFF + 4)
/* A TCP connection without an allocation is closed after TURN_CONN_IDLE_MS
 * (looked for every TURN_CONN_SWEEP_MS). */
#define TURN_CONN_IDLE_MS  30000ull
#define TURN_CONN_SWEEP_MS 5000ull
/* Plaintext taken from a TLS session at a time (a record's worth). */
#define TURN_TLS_RX 16384

/* TCP connections */

struct turn_tx {
	struct turn_tx *next;
	size_t len, cap;
	uint8_t b[];
};

struct turn_conn {
	int fd; /* -1: free or closed */
	uint16_t gen;
	bool used; /* the slot is taken (closed ones until their last send) */
	bool reading, closing;
	union etr_sockaddr client;
	uint8_t *rx; /* a frame cut by a chunk's end: rxlen of its bytes */
	size_t rxlen, rxcap;
	struct turn_tx *tx_head, *tx_tail; /* queued; the head is with the loop */
	size_t tx_bytes;
	uint32_t alloc;	 /* its allocation, TURN_ALLOC_NONE */
	uint64_t since;	 /* ns: accepted, or its allocation ended */
	uint64_t opened; /* ns: accepted (tcp-auth-timeout runs from here) */
	bool authed;	 /* a request passed MESSAGE-INTEGRITY; else on ua list */
	uint32_t ua_prev, ua_next;
	bool on_na; /* authenticated, without an allocation: on the na list */
	uint32_t na_prev, na_next;
	uint32_t next_free;
	/* TLS: the session (the tx queue stays empty: ciphertext waits in
	 * it), a send of its with the loop, and an alert or close_notify to
	 * send before the close. */
	struct tls_conn *tls;
	bool sending, tls_closing;
};

/* Where an answer goes: the client over UDP, or a TCP connection. */
struct turn_ctx {
	struct turn_listener *l;
	union etr_sockaddr client;
	uint32_t conn; /* index + 1 of the TCP connection, 0: UDP */
	uint64_t now;  /* CLOCK_MONOTONIC ns */
	uint64_t now_ms;
	struct turn_5tuple tuple;
};

/* An operator must learn why Allocates get 508, why TCP and TLS
 * connections are closed at accept, and why signed requests go unchecked,
 * without a line per request: the first of each kind a minute per listener
 * (turn_lshared's log_at). */
enum {
	TURN_LOG508_FULL,
	TURN_LOG508_PORTS,
	TURN_LOG_TLS_IP,
	TURN_LOG_TLS_ALL,
	TURN_LOG_TCP_FULL,
	TURN_LOG_AUTH_IP,
	TURN_LOG_AUTH_ALL
};
#define TURN_LOG_EVERY_MS 60000

/* Whether a log line of kind is due (the first a minute, any worker). */
static inline bool turn_log_due(struct turn_listener *l, unsigned kind, uint64_t now_ms)
{
	uint64_t at = atomic_load_explicit(&l->sh->log_at[kind], memory_order_relaxed);

	return now_ms >= at && atomic_compare_exchange_strong_explicit(
				   &l->sh->log_at[kind], &at, now_ms + TURN_LOG_EVERY_MS,
				   memory_order_relaxed, memory_order_relaxed);
}

/* Whether ban-file holds a (a client or a peer). */
static inline bool turn_banned(const struct turn_listener *l, const union etr_sockaddr *a)
{
	return l->bans && banlist_match(l->bans, a);
}

/* The files from the bottom up: each calls only those listed before it
 * (and turn_listener.c, on top, any of them). */

/* turn_conn.c: TCP and TLS connections (slots, lists, sends, accept), and
 * what a connection's close shares with the rest: an allocation's end, the
 * listener's next deadline */

/* Set the listener's timer to its next deadline: an allocation's expiry,
 * the look for idle connections, the oldest tcp-auth-timeout. */
void turn_timer_arm(struct turn_listener *l);
/* End allocation idx: its socket leaves the loop, its slot the table. */
void turn_allocation_end(struct turn_listener *l, uint32_t idx);
/* A frame buffer of cap bytes, and its return (turn_stream.c's). */
uint8_t *turn_conn_rx_get(size_t cap);
void turn_conn_rx_put(uint8_t *p, size_t cap);
/* Give back a connection's frame buffer. */
void turn_conn_rx_free(struct turn_listener *l, struct turn_conn *c);
/* The connection a loop ref names (its index in *idx), NULL: gone. */
struct turn_conn *turn_conn_deref(struct turn_listener *l, uint32_t ref, uint32_t *idx);
/* Queue a frame (a, b and pad zero bytes) on connection i; false when it
 * has too much queued (send_full) or is closing. */
bool turn_conn_send(struct turn_listener *l, uint32_t i, const void *a, size_t alen, const void *b,
		    size_t blen, size_t pad);
/* Hand a TLS session's next ciphertext to the loop. */
void turn_conn_tls_kick(struct turn_listener *l, uint32_t i);
/* Ask the loop for connection i's next bytes, unless its queue is full. */
void turn_conn_read(struct turn_listener *l, uint32_t i);
/* Connection i, authenticated, holds no allocation: it joins the na list;
 * and leaves it (an allocation, or closed). */
void turn_conn_na_join(struct turn_listener *l, uint32_t i);
void turn_conn_na_leave(struct turn_listener *l, uint32_t i);
/* A request on conn (index + 1; 0: UDP) passed MESSAGE-INTEGRITY. */
void turn_conn_authed(struct turn_listener *l, uint32_t conn);
/* Close connection i (its allocation ends). */
void turn_conn_close(struct turn_listener *l, uint32_t i);
/* Free every connection and the send blocks (after the loop is gone). */
void turn_conns_free(struct turn_listener *l);
/* The loop's callbacks: accepts (TCP, TLS), a send done, a read error. */
void turn_conn_tcp_accept(void *obj, uint32_t ref, int fd);
void turn_conn_tls_accept(void *obj, uint32_t ref, int fd);
void turn_conn_sent(void *obj, uint32_t ref, int res);
void turn_conn_recv_error(void *obj, uint32_t ref, int err);

/* turn_answer.c: answers, and a request's authentication */

/* Where answers to a message go: client (set by the caller), conn (index
 * + 1; 0: UDP), now. */
void turn_ctx_init(struct turn_ctx *x, struct turn_listener *l, uint64_t now, uint32_t conn);
/* Send an answer or a message for the client. */
bool turn_to_client(struct turn_ctx *x, const uint8_t *p, size_t n);
/* Sign (key non-NULL) and finish an answer, then send it: its length, 0
 * when it did not go (counted). */
size_t turn_answer_finish(struct turn_ctx *x, struct stun_builder *b, const struct stun_msg *m,
			  const uint8_t *key);
/* May an answer to an unauthenticated request go out (unauth-ip-rate,
 * unauth-rate)? False when withheld or its connection closed. */
bool turn_answer_unauth_ok(struct turn_ctx *x);
/* --debug: a request refused, with its code and why. */
void turn_answer_debug_refused(const struct turn_ctx *x, const struct stun_msg *m, int code,
			       const char *why);
/* An error answer; key signs it (NULL: unauthenticated, and limited). */
void turn_answer_error(struct turn_ctx *x, const struct stun_msg *m, int code, const uint8_t *key,
		       const char *why);
/* 401 with REALM and NONCE: the challenge. */
void turn_answer_challenge(struct turn_ctx *x, const struct stun_msg *m);
/* Authentication (RFC 8489 9.2.4): 0 with au filled (*expired for a
 * genuine but expired credential), or -1 when the request was answered.
 * idx: the allocation of the request's 5-tuple, TURN_ALLOC_NONE: none. */
int turn_authenticate(struct turn_ctx *x, const struct stun_msg *m, uint32_t idx,
		      struct turn_auth *au, bool *expired);

/* turn_data.c: the data path, both ways */

/* The one check of a peer: every datagram sent to one (Send indications
 * and ChannelData, over UDP, TCP and TLS) and every request naming one
 * (CreatePermission, ChannelBind; ip_only: its port ignored) ask it. False
 * with *why TURN_DROP_BANNED when ban-file holds the peer (the list in force
 * now: a reload's from the next datagram), TURN_DROP_PEER_REFUSED when
 * the peer policy does (turn_peer_check; the host's addresses read again
 * at most every second; an own relayed port whose allocation ended). */
bool turn_data_peer_ok(struct turn_ctx *x, const union etr_sockaddr *peer, bool ip_only,
		       enum turn_drop *why);
/* A Send indication, and ChannelData, from a client. */
void turn_data_send(struct turn_ctx *x, const struct stun_msg *m, struct loop_dgram *d);
void turn_data_channel(struct turn_ctx *x, const uint8_t *p, size_t n, struct loop_dgram *d);
/* The relayed sockets' callbacks: a peer's datagram, a receive error. */
void turn_data_relay_dgram(void *obj, uint32_t ref, struct loop_dgram *d);
void turn_data_relay_recv_error(void *obj, uint32_t ref, int err);

/* turn_req.c: a client's message, and the requests (Binding, Allocate,
 * Refresh, CreatePermission, ChannelBind) */

/* One message from a client (a datagram, or a frame of a TCP stream) to
 * the data path or a request. d is the datagram when the payload may be
 * forwarded without a copy. */
void turn_on_message(struct turn_ctx *x, const uint8_t *p, size_t n, struct loop_dgram *d);
void turn_req_binding(struct turn_ctx *x, const struct stun_msg *m);
void turn_req_allocate(struct turn_ctx *x, const struct stun_msg *m);
void turn_req_refresh(struct turn_ctx *x, const struct stun_msg *m);
void turn_req_permission(struct turn_ctx *x, const struct stun_msg *m);
void turn_req_channel_bind(struct turn_ctx *x, const struct stun_msg *m);

/* turn_stream.c: bytes of a TCP or TLS connection into frames */

/* The loop's callback: bytes of a TCP or TLS connection. */
void turn_stream_in(void *obj, uint32_t ref, struct loop_dgram *d);

#endif
