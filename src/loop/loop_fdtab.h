/* SPDX-License-Identifier: ISC */
/* fd -> loop id, for the backends: tells a late event or completion for a
 * closed fd from one for the socket that reused its number. Beside it, per
 * fd, the largest segment a GSO train on that socket may carry. */
#ifndef ETR_LOOP_FDTAB_H
#define ETR_LOOP_FDTAB_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct fdtab {
	uint32_t *id;	  /* id + 1 per fd; 0 = not registered */
	uint16_t *gso;	  /* gso_cap per fd (loop_gso.h) */
	uint16_t gso_new; /* cap of a newly registered socket: GSO_ANY or 0 */
	unsigned n;
};

static inline int fdtab_init(struct fdtab *t, unsigned n, uint16_t gso_new)
{
	t->n = n ? n : 64;
	t->gso_new = gso_new;
	t->id = calloc(t->n, sizeof(*t->id));
	t->gso = calloc(t->n, sizeof(*t->gso));
	return t->id && t->gso ? 0 : -ENOMEM;
}

static inline void fdtab_free(struct fdtab *t)
{
	free(t->id);
	free(t->gso);
	t->id = NULL;
	t->gso = NULL;
	t->n = 0;
}

/* Ids are at most 0xfffffffe so that id + 1 never wraps to "free". */
static inline int fdtab_set(struct fdtab *t, int fd, uint32_t id)
{
	if (fd < 0 || id == UINT32_MAX)
		return -EINVAL;
	if ((unsigned)fd >= t->n) {
		unsigned n = t->n;
		uint32_t *p;
		uint16_t *g;

		while (n <= (unsigned)fd)
			n *= 2;
		p = realloc(t->id, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + t->n, 0, (n - t->n) * sizeof(*p));
		t->id = p;
		g = realloc(t->gso, n * sizeof(*g));
		if (!g)
			return -ENOMEM; /* id[] grew: harmless, n stays */
		t->gso = g;
		t->n = n;
	}
	t->id[fd] = id + 1;
	t->gso[fd] = t->gso_new;
	return 0;
}

static inline void fdtab_clear(struct fdtab *t, int fd)
{
	if (fd >= 0 && (unsigned)fd < t->n)
		t->id[fd] = 0;
}

static inline bool fdtab_is(const struct fdtab *t, int fd, uint32_t id)
{
	return fd >= 0 && (unsigned)fd < t->n && t->id[fd] == id + 1;
}

/* The raw entry for fd (0: none): same value, same socket. */
static inline uint32_t fdtab_raw(const struct fdtab *t, int fd)
{
	return fd >= 0 && (unsigned)fd < t->n ? t->id[fd] : 0;
}

static inline uint16_t fdtab_gso(const struct fdtab *t, int fd)
{
	return fd >= 0 && (unsigned)fd < t->n && t->id[fd] ? t->gso[fd] : 0;
}

static inline void fdtab_set_gso(struct fdtab *t, int fd, uint16_t cap)
{
	if (fd >= 0 && (unsigned)fd < t->n)
		t->gso[fd] = cap;
}

#endif
