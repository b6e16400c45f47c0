/* SPDX-License-Identifier: ISC */
/* The TURN client side of etrelay-load (--turn): REST credentials, the
 * long-term key learned from a 401, Allocate / Refresh / ChannelBind built
 * with the relay's own codec (src/turn/stun.h), answers matched and checked, and
 * a blocking open (Allocate, then ChannelBind to the peer) with bounded
 * waits. No clock reads but the caller's; one client per UDP socket. */
#ifndef ETR_BENCH_TURNC_H
#define ETR_BENCH_TURNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench.h"
#include "stun.h"
#include "turn_auth.h"

/* Longest realm and nonce kept from a 401 or 438. */
#define TURNC_REALM_MAX 128
#define TURNC_NONCE_MAX 256
/* Room for "<expiry>:<userid>" (RFC 8489 14.3: less than 509 bytes). */
#define TURNC_USER_MAX 509
/* Room for any request we build. */
#define TURNC_REQ_MAX 1024
/* The channel every client binds (each allocation has its own numbers). */
#define TURNC_CHANNEL 0x4000

/* One REST credential: "<expiry>:<userid>" and its password. */
struct turnc_cred {
	char user[TURNC_USER_MAX];
	size_t user_len;
	char password[TURN_PASSWORD_SIZE];
	size_t password_len;
};

/* Make the credential for userid, valid until expiry (unix seconds).
 * 0, or -1 (too long, MAC failure). */
int turnc_cred_init(struct turnc_cred *c, const uint8_t *secret, size_t secret_len,
		    const char *userid, uint64_t expiry);

/* One client's protocol state: what the server told it (realm, nonce, the
 * key), and the transaction it waits for. */
struct turnc {
	const struct turnc_cred *cred;
	char realm[TURNC_REALM_MAX];
	size_t realm_len;
	char nonce[TURNC_NONCE_MAX];
	size_t nonce_len;
	uint8_t key[TURN_KEY_LEN];
	bool have_key;
	uint8_t tid[STUN_TID_LEN];
	uint16_t method; /* of the request in flight */
	uint32_t tid_seq;
};

/* Start a client with this credential; seed makes its transaction IDs its
 * own (the client number will do). */
void turnc_init(struct turnc *t, const struct turnc_cred *cred, uint32_t seed);

/* Forget realm, nonce and key: the next request goes bare, as a new
 * client's first does. */
void turnc_forget(struct turnc *t);

/* Build a request into buf (TURNC_REQ_MAX bytes) with a new transaction
 * ID; authenticated once a 401 taught us realm and nonce. Return the length
 * (0: did not fit). */
size_t turnc_allocate(struct turnc *t, uint8_t *buf);
size_t turnc_refresh(struct turnc *t, uint8_t *buf, uint32_t lifetime);
size_t turnc_channel_bind(struct turnc *t, uint8_t *buf, uint16_t channel,
			  const union bench_sockaddr *peer);

enum turnc_result {
	TURNC_OK = 0, /* success answer to the request in flight */
	TURNC_RETRY,  /* 401 or 438 with a (new) nonce: send the request again */
	TURNC_ERROR,  /* an error answer: *code says which */
	TURNC_IGNORE, /* not an answer to the request in flight */
	TURNC_BAD,    /* an answer that does not parse or fails its integrity */
};

/* Take a datagram from the server. On TURNC_ERROR, code is the STUN error
 * (300..699) and reason its phrase (NUL-terminated, into reason[64]). On
 * TURNC_OK for an Allocate, relayed gets the XOR-RELAYED-ADDRESS when
 * relayed is not NULL. A 401 after an authenticated request is an error
 * (wrong secret), not a retry. */
enum turnc_result turnc_answer(struct turnc *t, const uint8_t *p, size_t n, int *code,
			       char reason[64], union bench_sockaddr *relayed);

/* The name of a method, for messages. */
const char *turnc_method_name(uint16_t method);

/* Blocking open on a connected UDP socket: Allocate (through the 401),
 * then ChannelBind channel to peer. Each request is sent up to 3 times,
 * timeout_ns apart. 0, or -1 with a message in err that names the step and
 * the STUN error code. */
int turnc_open(struct turnc *t, int fd, uint16_t channel, const union bench_sockaddr *peer,
	       uint64_t timeout_ns, union bench_sockaddr *relayed, char *err, size_t errlen);

/* Blocking Refresh(0) on a connected UDP socket (end the allocation);
 * best effort, one bounded try through a 438. 0 or -1. */
int turnc_close(struct turnc *t, int fd, uint64_t timeout_ns);

#endif
