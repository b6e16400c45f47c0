/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for qcache_store and qcache_answer. Input: one byte of
 * kind (bit 0: statusResponse), two bytes of reply length (little endian,
 * cut to what is there), the reply, then the query. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qcache.h"

#define T0    1000000000000ull
#define STALE 5000000000ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct qcache c, again;
static uint8_t out[QCACHE_REPLY_MAX + 256], out2[QCACHE_REPLY_MAX + 256];

static const struct qcache_entry *entry(const struct qcache *q, enum q3_cmd kind)
{
	return kind == Q3_INFORESPONSE ? &q->info : &q->status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct qcache_entry *e;
	uint8_t *query;
	enum q3_cmd kind, qkind;
	size_t rlen, qlen;
	int n, n2;

	if (!c.info.buf && (qcache_init(&c, QCACHE_TTL_DEFAULT, STALE, QCACHE_REPLY_MAX) < 0 ||
			    qcache_init(&again, QCACHE_TTL_DEFAULT, STALE, QCACHE_REPLY_MAX) < 0))
		abort();
	qcache_invalidate(&c);
	qcache_invalidate(&again);
	if (size < 3)
		return 0;
	kind = data[0] & 1 ? Q3_STATUSRESPONSE : Q3_INFORESPONSE;
	qkind = kind == Q3_INFORESPONSE ? Q3_GETINFO : Q3_GETSTATUS;
	rlen = (size_t)(data[1] | data[2] << 8);
	data += 3;
	size -= 3;
	if (rlen > size)
		rlen = size;
	if (qcache_store(&c, kind, data, rlen, T0) < 0)
		return 0;
	e = entry(&c, kind);
	if (!(e->info <= e->chal && e->chal <= e->chal_val && e->chal_val <= e->chal_end &&
	      e->chal_end <= e->len && e->len == rlen))
		abort();

	/* The query in a buffer of its own so ASan sees reads past its end. */
	qlen = size - rlen;
	query = malloc(qlen ? qlen : 1);
	if (!query)
		abort();
	memcpy(query, data + rlen, qlen);
	n = qcache_answer(&c, query, qlen, T0, out, sizeof(out));
	if (n < 0)
		goto out;
	if ((size_t)n > sizeof(out))
		abort();
	if (n > QCACHE_REPLY_MAX)
		goto out; /* an inserted pair made it too long to store again */
	/* An answer is a well-formed reply of the same kind whose challenge
	 * comes from the query, and answering from it again gives the same
	 * bytes. */
	if (qcache_store(&again, kind, out, (size_t)n, T0) != 0)
		abort();
	e = entry(&again, kind);
	if (e->chal_end > e->chal_val &&
	    !memmem(query, qlen, out + e->chal_val, e->chal_end - e->chal_val))
		abort();
	n2 = qcache_answer(&again, query, qlen, T0, out2, sizeof(out2));
	if (n2 != n || memcmp(out, out2, (size_t)n) != 0)
		abort();
	/* Past the TTL the copy is stale: served the same, and a refresh is
	 * due until one is sent. */
	n2 =
	    qcache_answer(&c, query, qlen, T0 + QCACHE_TTL_DEFAULT + STALE - 1, out2, sizeof(out2));
	if (n2 != n || memcmp(out, out2, (size_t)n) != 0)
		abort();
	if (qcache_refresh_due(&c, qkind, T0) ||
	    !qcache_refresh_due(&c, qkind, T0 + QCACHE_TTL_DEFAULT))
		abort();
	qcache_refresh_sent(&c, qkind, T0 + QCACHE_TTL_DEFAULT);
	if (qcache_refresh_due(&c, qkind, T0 + QCACHE_TTL_DEFAULT + 1))
		abort();
out:
	/* Never served once TTL + stale have passed. */
	if (qcache_answer(&c, query, qlen, T0 + QCACHE_TTL_DEFAULT + STALE, out, sizeof(out)) != -1)
		abort();
	free(query);
	return 0;
}
