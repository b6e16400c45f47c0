/* SPDX-License-Identifier: ISC */
/* The endpoint table: what a loop id names. Every fd the loop serves belongs
 * to an endpoint {ops, object, generation}; the daemon dispatches a loop
 * event through the table to the endpoint's ops. Pure: no sockets. */
#ifndef ETR_ENDPOINT_H
#define ETR_ENDPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "loop.h"
#include "ref.h"

/* A loop id is slot (the high ENDPOINT_SLOT_BITS) | ref (the low
 * ENDPOINT_REF_BITS). The slot indexes the table: O(1), and the table is
 * small enough (ENDPOINT_MAX entries of 24 bytes, a few per relay) to stay
 * in cache, so a completion costs no miss beyond its own object's.
 *
 * The ref is the endpoint's own business. A single endpoint (one fd) gets
 * its generation as ref, and the table checks it: a late completion for a
 * slot freed and taken again never reaches the new owner. A multi endpoint
 * (ENDPOINT_MULTI: a relay's sessions, later a listener's connections)
 * hands out refs of its own, each carrying the generation of what it names
 * (session_ref), and checks them itself; its slot is not freed while one of
 * its fds is still registered with the loop. The id is packed as a ref
 * (core/ref.h) with the slot where a generation goes. */
#define ENDPOINT_REF_BITS  24
#define ENDPOINT_SLOT_BITS (32 - ENDPOINT_REF_BITS)
#define ENDPOINT_REF_MASK  ((1u << ENDPOINT_REF_BITS) - 1)
_Static_assert(REF_FITS(ENDPOINT_REF_BITS, ENDPOINT_SLOT_BITS, 32), "loop id layout");
/* Slots 0..ENDPOINT_MAX-1; the last slot is left out so that no id is
 * UINT32_MAX, which the backends' fd tables reserve. */
#define ENDPOINT_MAX ((1u << ENDPOINT_SLOT_BITS) - 1)

/* What an endpoint does with the loop's events; any may be NULL (the event
 * is ignored). obj is the endpoint's object, ref the id's low bits. */
struct endpoint_ops {
	const char *name; /* for logs and tests: "public", "session"... */
	bool multi;	  /* refs are the owner's (see above), not a generation */
	void (*on_dgram)(void *obj, uint32_t ref, struct loop_dgram *d);
	void (*on_recv_error)(void *obj, uint32_t ref, int err);
	void (*on_sent)(void *obj, uint32_t ref, int res);
	void (*on_readable)(void *obj, uint32_t ref);
	/* A timer the endpoint armed with this id is due (loop.h timer_set). */
	void (*on_timer)(void *obj, uint32_t ref, uint64_t now);
	/* Streams (loop.h). */
	void (*on_accept)(void *obj, uint32_t ref, int fd);
	void (*on_connected)(void *obj, uint32_t ref, int res);
	void (*on_stream)(void *obj, uint32_t ref, struct loop_dgram *d);
};

struct endpoint {
	const struct endpoint_ops *ops; /* NULL: a free slot */
	void *obj;
	uint32_t gen; /* bumped when the slot is freed */
};

struct endpoint_table {
	struct endpoint e[ENDPOINT_MAX];
	unsigned used; /* slots below this may be live; above, never used */
	unsigned live;
};

void endpoint_table_init(struct endpoint_table *t);

/* Take a free slot (the lowest) for obj. Returns the slot, or -ENOSPC. */
int endpoint_add(struct endpoint_table *t, const struct endpoint_ops *ops, void *obj);

/* Free a slot: ids made for it before no longer resolve. */
void endpoint_del(struct endpoint_table *t, unsigned slot);

/* The loop id of a single endpoint's fd. */
uint32_t endpoint_id(const struct endpoint_table *t, unsigned slot);

/* The loop id of ref (ENDPOINT_REF_BITS wide) under a multi endpoint. */
static inline uint32_t endpoint_ref_id(unsigned slot, uint32_t ref)
{
	return ref_pack(ref, ENDPOINT_REF_BITS, slot, ENDPOINT_SLOT_BITS);
}

/* The live endpoint a loop id names, its ref in *ref; NULL for a free slot
 * or a single endpoint's stale generation. The hot path: inline. */
static inline const struct endpoint *endpoint_lookup(const struct endpoint_table *t, uint32_t id,
						     uint32_t *ref)
{
	uint32_t slot = ref_gen(id, ENDPOINT_REF_BITS, ENDPOINT_SLOT_BITS);
	const struct endpoint *e;

	if (slot >= ENDPOINT_MAX)
		return NULL;
	e = &t->e[slot];
	*ref = ref_idx(id, ENDPOINT_REF_BITS);
	if (!e->ops || (!e->ops->multi && *ref != (e->gen & ENDPOINT_REF_MASK)))
		return NULL;
	return e;
}

/* Dispatch one loop event by id; false when no live endpoint took it.
 * Inline: the packet path pays one indirect call, as a switch before. */
static inline bool endpoint_dgram(const struct endpoint_table *t, uint32_t id, struct loop_dgram *d)
{
	uint32_t ref;
	const struct endpoint *e = endpoint_lookup(t, id, &ref);

	if (!e || !e->ops->on_dgram)
		return false;
	e->ops->on_dgram(e->obj, ref, d);
	return true;
}

static inline bool endpoint_recv_error(const struct endpoint_table *t, uint32_t id, int err)
{
	uint32_t ref;
	const struct endpoint *e = endpoint_lookup(t, id, &ref);

	if (!e || !e->ops->on_recv_error)
		return false;
	e->ops->on_recv_error(e->obj, ref, err);
	return true;
}

static inline bool endpoint_sent(const struct endpoint_table *t, uint32_t id, int res)
{
	uint32_t ref;
	const struct endpoint *e = endpoint_lookup(t, id, &ref);

	if (!e || !e->ops->on_sent)
		return false;
	e->ops->on_sent(e->obj, ref, res);
	return true;
}

static inline bool endpoint_readable(const struct endpoint_table *t, uint32_t id)
{
	uint32_t ref;
	const struct endpoint *e = endpoint_lookup(t, id, &ref);

	if (!e || !e->ops->on_readable)
		return false;
	e->ops->on_readable(e->obj, ref);
	return true;
}

static inline bool endpoint_timer(const struct endpoint_table *t, uint32_t id, uint64_t now)
{
	uint32_t ref;
	const struct endpoint *e = endpoint_lookup(t, id, &ref);

	if (!e || !e->ops->on_timer)
		return false;
	e->ops->on_timer(e->obj, ref, now);
	return true;
}

/* Streams: false when no live endpoint took it. An accepted fd nobody
 * takes is the caller's to close. */
static inline bool endpoint_accept(const struct endpoint_table *t, uint32_t id, int fd)
{
	uint32_t ref;
	const struct endpoint *e = endpoint_lookup(t, id, &ref);

	if (!e || !e->ops->on_accept)
		return false;
	e->ops->on_accept(e->obj, ref, fd);
	return true;
}

static inline bool endpoint_connected(const struct endpoint_table *t, uint32_t id, int res)
{
	uint32_t ref;
	const struct endpoint *e = endpoint_lookup(t, id, &ref);

	if (!e || !e->ops->on_connected)
		return false;
	e->ops->on_connected(e->obj, ref, res);
	return true;
}

static inline bool endpoint_stream(const struct endpoint_table *t, uint32_t id,
				   struct loop_dgram *d)
{
	uint32_t ref;
	const struct endpoint *e = endpoint_lookup(t, id, &ref);

	if (!e || !e->ops->on_stream)
		return false;
	e->ops->on_stream(e->obj, ref, d);
	return true;
}

/* The loop's handler for table t: every loop event goes straight to the
 * endpoint its id names (an accepted fd nobody takes is closed). */
struct loop_handler endpoint_loop_handler(struct endpoint_table *t);

#endif
