/* SPDX-License-Identifier: ISC */
/* fd -> loop id, for the backends: tells a late event or completion for a
 * closed fd from one for the socket that reused its number. */
#ifndef ETR_LOOP_FDTAB_H
#define ETR_LOOP_FDTAB_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct fdtab {
	uint32_t *id; /* id + 1 per fd; 0 = not registered */
	unsigned n;
};

static inline int fdtab_init(struct fdtab *t, unsigned n)
{
	t->n = n ? n : 64;
	t->id = calloc(t->n, sizeof(*t->id));
	return t->id ? 0 : -ENOMEM;
}

static inline void fdtab_free(struct fdtab *t)
{
	free(t->id);
	t->id = NULL;
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

		while (n <= (unsigned)fd)
			n *= 2;
		p = realloc(t->id, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + t->n, 0, (n - t->n) * sizeof(*p));
		t->id = p;
		t->n = n;
	}
	t->id[fd] = id + 1;
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

#endif
