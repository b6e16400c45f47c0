/* SPDX-License-Identifier: ISC */
/* Rung 3's token set in force (issue 25): the control thread swaps in the
 * heartbeat's tunnelTokens (ctl_msg_tunnel_tokens' list) whole; each
 * worker takes a reference to the set in force when its generation moved,
 * maps its connections' tokens into it (a token gone: the connection is
 * closed, 1008) and lets the old set go. Not used yet: the tunnel kind's
 * worker instance will be its reader (src/README.md, "Rung 3"). */
#ifndef ETR_TUN_TOKENS_H
#define ETR_TUN_TOKENS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "udpws.h"

/* One set, shared by reference: freed by its last put. */
struct tun_tokset {
	_Atomic uint32_t refs;
	struct udpws_tokens t;
};

struct tun_tokens {
	pthread_mutex_t lock; /* cur */
	struct tun_tokset *cur;
	_Atomic uint64_t gen; /* bumped at each swap; 0: never set */
};

int tun_tokens_init(struct tun_tokens *h);
/* After every worker put its sets back. */
void tun_tokens_free(struct tun_tokens *h);

/* The control thread: list[0..n) (NUL-terminated tokens) in force from now
 * on. The set in force again (same tokens, same order) changes nothing.
 * Returns 1 swapped, 0 unchanged, -EINVAL (an empty or too long token:
 * nothing changed), -ENOMEM. */
int tun_tokens_set(struct tun_tokens *h, char *const *list, size_t n);

/* A worker: the set in force with a reference of the caller's (NULL:
 * none yet), its generation in *gen. */
struct tun_tokset *tun_tokens_take(struct tun_tokens *h, uint64_t *gen);
void tun_tokset_put(struct tun_tokset *s);

/* Whether the set changed since generation gen (one atomic load). */
static inline bool tun_tokens_moved(struct tun_tokens *h, uint64_t gen)
{
	return atomic_load_explicit(&h->gen, memory_order_acquire) != gen;
}

/* The index in to (NULL: none) of the token at index i of from, or -1. */
long tun_token_remap(const struct udpws_tokens *from, long i, const struct udpws_tokens *to);

#endif
