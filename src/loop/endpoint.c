/* SPDX-License-Identifier: ISC */
/* The endpoint table: slots handed out lowest first, generations that keep
 * a late completion from reaching a slot's next owner. */
#include "endpoint.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

void endpoint_table_init(struct endpoint_table *t)
{
	memset(t, 0, sizeof(*t));
}

int endpoint_add(struct endpoint_table *t, const struct endpoint_ops *ops, void *obj)
{
	for (unsigned i = 0; i < ENDPOINT_MAX; i++) {
		struct endpoint *e = &t->e[i];

		if (e->ops)
			continue;
		e->ops = ops;
		e->obj = obj;
		if (i >= t->used)
			t->used = i + 1;
		t->live++;
		return (int)i;
	}
	return -ENOSPC;
}

void endpoint_del(struct endpoint_table *t, unsigned slot)
{
	if (slot >= ENDPOINT_MAX || !t->e[slot].ops)
		return;
	t->e[slot].ops = NULL;
	t->e[slot].obj = NULL;
	t->e[slot].gen++;
	t->live--;
}

uint32_t endpoint_id(const struct endpoint_table *t, unsigned slot)
{
	return endpoint_ref_id(slot, t->e[slot].gen & ENDPOINT_REF_MASK);
}

/* The loop's callbacks: one lookup, one call of the endpoint's own. */
static void h_dgram(void *arg, uint32_t id, struct loop_dgram *dg)
{
	endpoint_dgram(arg, id, dg);
}

static void h_recv_error(void *arg, uint32_t id, int err)
{
	endpoint_recv_error(arg, id, err);
}

static void h_sent(void *arg, uint32_t id, int res)
{
	endpoint_sent(arg, id, res);
}

static void h_readable(void *arg, uint32_t id)
{
	endpoint_readable(arg, id);
}

static void h_timer(void *arg, uint32_t id, uint64_t now)
{
	endpoint_timer(arg, id, now);
}

/* A connection nobody takes (its listener went this turn) is closed. */
static void h_accept(void *arg, uint32_t id, int fd)
{
	if (!endpoint_accept(arg, id, fd) && fd >= 0)
		close(fd);
}

static void h_connected(void *arg, uint32_t id, int res)
{
	endpoint_connected(arg, id, res);
}

static void h_stream(void *arg, uint32_t id, struct loop_dgram *d)
{
	endpoint_stream(arg, id, d);
}

struct loop_handler endpoint_loop_handler(struct endpoint_table *t)
{
	return (struct loop_handler){
	    .arg = t,
	    .on_dgram = h_dgram,
	    .on_recv_error = h_recv_error,
	    .on_sent = h_sent,
	    .on_readable = h_readable,
	    .on_timer = h_timer,
	    .on_accept = h_accept,
	    .on_connected = h_connected,
	    .on_stream = h_stream,
	};
}
