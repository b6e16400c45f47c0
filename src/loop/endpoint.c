/* SPDX-License-Identifier: ISC */
/* The endpoint table: slots handed out lowest first, generations that keep
 * a late completion from reaching a slot's next owner. */
#include "endpoint.h"

#include <errno.h>
#include <string.h>

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
