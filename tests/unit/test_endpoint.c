/* SPDX-License-Identifier: ISC */
/* Unit tests for endpoint.c: loop ids to endpoints, generations. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "endpoint.h"

struct seen {
	unsigned dgrams, errors, sent, readable;
	uint32_t ref;
	int last;
};

static void on_dgram(void *obj, uint32_t ref, struct loop_dgram *d)
{
	struct seen *s = obj;

	(void)d;
	s->dgrams++;
	s->ref = ref;
}

static void on_recv_error(void *obj, uint32_t ref, int err)
{
	struct seen *s = obj;

	s->errors++;
	s->ref = ref;
	s->last = err;
}

static void on_sent(void *obj, uint32_t ref, int res)
{
	struct seen *s = obj;

	s->sent++;
	s->ref = ref;
	s->last = res;
}

static void on_readable(void *obj, uint32_t ref)
{
	struct seen *s = obj;

	s->readable++;
	s->ref = ref;
}

static const struct endpoint_ops single_ops = {
    .name = "single",
    .on_dgram = on_dgram,
    .on_recv_error = on_recv_error,
    .on_sent = on_sent,
    .on_readable = on_readable,
};

static const struct endpoint_ops multi_ops = {
    .name = "multi",
    .multi = true,
    .on_dgram = on_dgram,
    .on_sent = on_sent,
};

static struct endpoint_table t;

static void test_endpoint_id_reaches_its_object(void **state)
{
	struct seen a = {0}, b = {0};
	struct loop_dgram d = {0};
	int sa, sb;

	(void)state;
	endpoint_table_init(&t);
	sa = endpoint_add(&t, &single_ops, &a);
	sb = endpoint_add(&t, &single_ops, &b);
	assert_int_equal(sa, 0);
	assert_int_equal(sb, 1);
	assert_true(endpoint_dgram(&t, endpoint_id(&t, (unsigned)sb), &d));
	assert_true(endpoint_readable(&t, endpoint_id(&t, (unsigned)sa)));
	assert_true(endpoint_recv_error(&t, endpoint_id(&t, (unsigned)sa), -ECONNREFUSED));
	assert_true(endpoint_sent(&t, endpoint_id(&t, (unsigned)sb), 48));
	assert_int_equal(a.dgrams, 0);
	assert_int_equal(a.readable, 1);
	assert_int_equal(a.errors, 1);
	assert_int_equal(a.last, -ECONNREFUSED);
	assert_int_equal(b.dgrams, 1);
	assert_int_equal(b.sent, 1);
	assert_int_equal(b.last, 48);
}

static void test_endpoint_missing_handler_is_not_taken(void **state)
{
	struct seen m = {0};
	int s;

	(void)state;
	endpoint_table_init(&t);
	s = endpoint_add(&t, &multi_ops, &m);
	assert_false(endpoint_readable(&t, endpoint_ref_id((unsigned)s, 5)));
	assert_false(endpoint_recv_error(&t, endpoint_ref_id((unsigned)s, 5), -EIO));
	assert_int_equal(m.readable + m.errors, 0);
}

static void test_endpoint_multi_passes_its_ref_through(void **state)
{
	struct seen m = {0};
	struct loop_dgram d = {0};
	int s;

	(void)state;
	endpoint_table_init(&t);
	endpoint_add(&t, &single_ops, &m); /* slot 0 taken */
	s = endpoint_add(&t, &multi_ops, &m);
	assert_int_equal(s, 1);
	assert_true(endpoint_dgram(&t, endpoint_ref_id((unsigned)s, 0xabcdef), &d));
	assert_int_equal(m.ref, 0xabcdef);
	assert_true(endpoint_sent(&t, endpoint_ref_id((unsigned)s, 7), -EIO));
	assert_int_equal(m.ref, 7);
	assert_int_equal(endpoint_ref_id(3, 0xffffffffu) >> ENDPOINT_REF_BITS, 3);
}

static void test_endpoint_freed_slot_drops_late_events(void **state)
{
	struct seen a = {0};
	struct loop_dgram d = {0};
	uint32_t id;
	int s;

	(void)state;
	endpoint_table_init(&t);
	s = endpoint_add(&t, &single_ops, &a);
	id = endpoint_id(&t, (unsigned)s);
	endpoint_del(&t, (unsigned)s);
	assert_false(endpoint_dgram(&t, id, &d));
	assert_false(endpoint_sent(&t, id, 1));
	assert_int_equal(a.dgrams + a.sent, 0);
	assert_int_equal(t.live, 0);
}

static void test_endpoint_reused_slot_has_a_new_generation(void **state)
{
	struct seen a = {0}, b = {0};
	struct loop_dgram d = {0};
	uint32_t old, id;
	int s;

	(void)state;
	endpoint_table_init(&t);
	s = endpoint_add(&t, &single_ops, &a);
	old = endpoint_id(&t, (unsigned)s);
	endpoint_del(&t, (unsigned)s);
	assert_int_equal(endpoint_add(&t, &single_ops, &b), s); /* lowest free */
	id = endpoint_id(&t, (unsigned)s);
	assert_int_not_equal(id, old);
	assert_false(endpoint_sent(&t, old, 1)); /* a completion of a's */
	assert_true(endpoint_dgram(&t, id, &d));
	assert_int_equal(a.sent + a.dgrams, 0);
	assert_int_equal(b.dgrams, 1);
}

static void test_endpoint_table_full_says_enospc(void **state)
{
	struct seen a = {0};
	struct loop_dgram d = {0};

	(void)state;
	endpoint_table_init(&t);
	for (unsigned i = 0; i < ENDPOINT_MAX; i++)
		assert_int_equal(endpoint_add(&t, &single_ops, &a), (int)i);
	assert_int_equal(endpoint_add(&t, &single_ops, &a), -ENOSPC);
	/* The last slot's ids stay clear of UINT32_MAX, the fd tables' mark. */
	assert_true(endpoint_id(&t, ENDPOINT_MAX - 1) != UINT32_MAX);
	assert_true(endpoint_ref_id(ENDPOINT_MAX - 1, ENDPOINT_REF_MASK) != UINT32_MAX);
	/* An id past the table names nothing. */
	assert_false(endpoint_dgram(&t, UINT32_MAX, &d));
	endpoint_del(&t, 17);
	assert_int_equal(endpoint_add(&t, &single_ops, &a), 17);
}

static void test_endpoint_unknown_ids_name_nothing(void **state)
{
	struct loop_dgram d = {0};

	(void)state;
	endpoint_table_init(&t);
	assert_false(endpoint_dgram(&t, 0, &d));
	assert_false(endpoint_readable(&t, endpoint_ref_id(200, 0)));
	endpoint_del(&t, 3); /* freeing a free slot is harmless */
	assert_int_equal(t.live, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_endpoint_id_reaches_its_object),
	    cmocka_unit_test(test_endpoint_missing_handler_is_not_taken),
	    cmocka_unit_test(test_endpoint_multi_passes_its_ref_through),
	    cmocka_unit_test(test_endpoint_freed_slot_drops_late_events),
	    cmocka_unit_test(test_endpoint_reused_slot_has_a_new_generation),
	    cmocka_unit_test(test_endpoint_table_full_says_enospc),
	    cmocka_unit_test(test_endpoint_unknown_ids_name_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
