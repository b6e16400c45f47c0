/* SPDX-License-Identifier: ISC */
/* Rung 3's token set in force, swapped whole (tun_tokens.h). */
#include "tun_tokens.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tun_tokens_init(struct tun_tokens *h)
{
	memset(h, 0, sizeof(*h));
	return -pthread_mutex_init(&h->lock, NULL);
}

void tun_tokset_put(struct tun_tokset *s)
{
	if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
		udpws_tokens_free(&s->t);
		free(s);
	}
}

void tun_tokens_free(struct tun_tokens *h)
{
	tun_tokset_put(h->cur);
	h->cur = NULL;
	pthread_mutex_destroy(&h->lock);
}

static bool same(const struct udpws_tokens *a, const struct udpws_tokens *b)
{
	return a->n == b->n &&
	       (a->n == 0 || memcmp(a->digest, b->digest, a->n * sizeof(*a->digest)) == 0);
}

int tun_tokens_set(struct tun_tokens *h, char *const *list, size_t n)
{
	struct tun_tokset *s = calloc(1, sizeof(*s)), *old;
	size_t *lens = n ? calloc(n, sizeof(*lens)) : NULL;
	int rc;

	if (!s || (n && !lens)) {
		free(s);
		free(lens);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		lens[i] = strlen(list[i]);
	rc = udpws_tokens_build(&s->t, (const char *const *)list, lens, n);
	free(lens);
	if (rc < 0) {
		free(s);
		return rc;
	}
	atomic_init(&s->refs, 1);
	pthread_mutex_lock(&h->lock);
	old = h->cur;
	if (old && same(&old->t, &s->t)) {
		pthread_mutex_unlock(&h->lock);
		tun_tokset_put(s);
		return 0;
	}
	h->cur = s;
	atomic_fetch_add_explicit(&h->gen, 1, memory_order_release);
	pthread_mutex_unlock(&h->lock);
	tun_tokset_put(old);
	return 1;
}

struct tun_tokset *tun_tokens_take(struct tun_tokens *h, uint64_t *gen)
{
	struct tun_tokset *s;

	pthread_mutex_lock(&h->lock);
	s = h->cur;
	if (s)
		atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	*gen = atomic_load_explicit(&h->gen, memory_order_relaxed);
	pthread_mutex_unlock(&h->lock);
	return s;
}

long tun_token_remap(const struct udpws_tokens *from, long i, const struct udpws_tokens *to)
{
	if (!from || !to || i < 0 || (size_t)i >= from->n)
		return -1;
	for (size_t k = 0; k < to->n; k++)
		if (memcmp(from->digest[i], to->digest[k], UDPWS_DIGEST_LEN) == 0)
			return (long)k;
	return -1;
}
