/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for stun.c. The input is a datagram or the start of a
 * stream. The parse must stay inside the input; every attribute it keeps
 * must lie inside the message. Differential: the attributes it understood,
 * rebuilt with the builder (same type and transaction ID, the MACs copied
 * as they were), must parse again to the same fields; the same message
 * signed by the builder must pass stun_check_integrity with its key and
 * fail with another. Stream framing and ChannelData must agree with each
 * other. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stun.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t out[STUN_MSG_MAX + 64];
static uint8_t again_buf[STUN_MSG_MAX + 64];

static void in_message(const struct stun_msg *m, struct stun_attr a)
{
	if (a.off && ((size_t)a.off < STUN_HDR_LEN + 4 || (size_t)a.off + a.len > m->len))
		abort();
}

/* Every kept attribute, in one list, for both checks. */
#define FIELDS(m)                                                                                  \
	&(m)->username, &(m)->realm, &(m)->nonce, &(m)->software, &(m)->error_code,                \
	    &(m)->lifetime, &(m)->requested_transport, &(m)->even_port, &(m)->requested_family,    \
	    &(m)->data, &(m)->channel_number, &(m)->dont_fragment, &(m)->reservation_token,        \
	    &(m)->xor_mapped, &(m)->xor_relayed, &(m)->unknown_attributes
static const uint16_t field_types[] = {
    STUN_A_USERNAME,
    STUN_A_REALM,
    STUN_A_NONCE,
    STUN_A_SOFTWARE,
    STUN_A_ERROR_CODE,
    STUN_A_LIFETIME,
    STUN_A_REQUESTED_TRANSPORT,
    STUN_A_EVEN_PORT,
    STUN_A_REQUESTED_ADDRESS_FAMILY,
    STUN_A_DATA,
    STUN_A_CHANNEL_NUMBER,
    STUN_A_DONT_FRAGMENT,
    STUN_A_RESERVATION_TOKEN,
    STUN_A_XOR_MAPPED_ADDRESS,
    STUN_A_XOR_RELAYED_ADDRESS,
    STUN_A_UNKNOWN_ATTRIBUTES,
};
#define NFIELDS (sizeof(field_types) / sizeof(field_types[0]))

static void same_attr(const struct stun_msg *a, struct stun_attr x, const struct stun_msg *b,
		      struct stun_attr y)
{
	if (!x.off != !y.off || x.len != y.len)
		abort();
	if (x.off && memcmp(a->raw + x.off, b->raw + y.off, x.len) != 0)
		abort();
}

static void readers(const struct stun_msg *m)
{
	union etr_sockaddr sa;
	uint32_t u;
	uint16_t ch;
	uint8_t b;
	bool r;
	int code;
	const char *reason;
	size_t rlen;

	(void)stun_get_lifetime(m, &u);
	(void)stun_get_requested_transport(m, &b);
	(void)stun_get_requested_family(m, &b);
	(void)stun_get_even_port(m, &r);
	(void)stun_get_channel(m, &ch);
	if (stun_get_error(m, &code, &reason, &rlen) &&
	    (code < 300 || code > 699 || reason + rlen > (const char *)m->raw + m->len))
		abort();
	for (unsigned i = 0; i < m->n_peer; i++) {
		if (stun_get_xor_addr(m, m->peer[i], &sa) == 0) {
			/* Re-encoded, the address reads back the same. */
			struct stun_builder bb;
			struct stun_msg mm;
			union etr_sockaddr sb;
			uint8_t buf[64];

			stun_build_begin(&bb, buf, sizeof(buf), m->type, m->tid);
			if (stun_add_xor_addr(&bb, STUN_A_XOR_PEER_ADDRESS, &sa) != 0 ||
			    stun_parse(buf, stun_build_finish(&bb), &mm) != 0 ||
			    stun_get_xor_addr(&mm, mm.peer[0], &sb) != 0 || !addr_equal(&sa, &sb) ||
			    memcmp(buf + 25, m->raw + m->peer[i].off + 1, m->peer[i].len - 1u) != 0)
				abort();
		}
	}
	(void)stun_get_xor_addr(m, m->xor_mapped, &sa);
	(void)stun_get_xor_addr(m, m->xor_relayed, &sa);
	(void)stun_check_integrity(m, (const uint8_t *)"key", 3);
}

static void rebuild(const struct stun_msg *m)
{
	const struct stun_attr *f[] = {FIELDS(m)};
	const struct stun_attr *g[NFIELDS];
	struct stun_builder b;
	struct stun_msg m2;
	size_t n;

	stun_build_begin(&b, out, sizeof(out), m->type, m->tid);
	for (size_t i = 0; i < NFIELDS; i++)
		if (f[i]->off)
			stun_add_attr(&b, field_types[i], m->raw + f[i]->off, f[i]->len);
	for (unsigned i = 0; i < m->n_peer; i++)
		stun_add_attr(&b, STUN_A_XOR_PEER_ADDRESS, m->raw + m->peer[i].off, m->peer[i].len);
	for (unsigned i = 0; i < m->n_unknown; i++)
		stun_add_attr(&b, m->unknown[i], NULL, 0);
	if (m->mi.off)
		stun_add_attr(&b, STUN_A_MESSAGE_INTEGRITY, m->raw + m->mi.off, m->mi.len);
	if (m->mi256.off)
		stun_add_attr(&b, STUN_A_MESSAGE_INTEGRITY_SHA256, m->raw + m->mi256.off,
			      m->mi256.len);
	if (m->fingerprint.off)
		stun_add_fingerprint(&b);
	n = stun_build_finish(&b);
	/* Understood attributes are never more than the message held. */
	if (n == 0 || n > m->len)
		abort();
	if (stun_parse(out, n, &m2) != 0)
		abort();
	{
		const struct stun_attr *g0[] = {FIELDS(&m2)};

		memcpy(g, g0, sizeof(g));
	}
	if (m2.type != m->type || m2.method != m->method || m2.cls != m->cls ||
	    memcmp(m2.tid, m->tid, STUN_TID_LEN) != 0 || m2.n_peer != m->n_peer ||
	    m2.n_unknown != m->n_unknown || m2.n_unknown_dropped != 0 ||
	    memcmp(m2.unknown, m->unknown, m->n_unknown * sizeof(m->unknown[0])) != 0)
		abort();
	for (size_t i = 0; i < NFIELDS; i++)
		same_attr(m, *f[i], &m2, *g[i]);
	for (unsigned i = 0; i < m->n_peer; i++)
		same_attr(m, m->peer[i], &m2, m2.peer[i]);
	same_attr(m, m->mi, &m2, m2.mi);
	same_attr(m, m->mi256, &m2, m2.mi256);
	if (!m->fingerprint.off != !m2.fingerprint.off)
		abort();

	/* Signed by the builder: both MACs check with their key, not another. */
	stun_build_begin(&b, again_buf, sizeof(again_buf), m->type, m->tid);
	for (size_t i = 0; i < NFIELDS; i++)
		if (f[i]->off)
			stun_add_attr(&b, field_types[i], m->raw + f[i]->off, f[i]->len);
	stun_add_integrity(&b, (const uint8_t *)"k1", 2);
	stun_add_integrity_sha256(&b, (const uint8_t *)"k1", 2);
	stun_add_fingerprint(&b);
	n = stun_build_finish(&b);
	if (n && (stun_parse(again_buf, n, &m2) != 0 ||
		  !stun_check_mi_sha1(&m2, (const uint8_t *)"k1", 2) ||
		  !stun_check_mi_sha256(&m2, (const uint8_t *)"k1", 2) ||
		  stun_check_integrity(&m2, (const uint8_t *)"k2", 2)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stun_msg m;
	int frame;

	if (stun_parse(data, size, &m) == 0) {
		if (m.len != size || stun_demux(data, size) != STUN_DEMUX_STUN)
			abort();
		in_message(&m, m.mi);
		in_message(&m, m.mi256);
		in_message(&m, m.fingerprint);
		{
			const struct stun_attr *f[] = {FIELDS(&m)};

			for (size_t i = 0; i < NFIELDS; i++)
				in_message(&m, *f[i]);
		}
		for (unsigned i = 0; i < m.n_peer; i++)
			in_message(&m, m.peer[i]);
		if (stun_frame_len(data, size) != (int)size)
			abort();
		readers(&m);
		rebuild(&m);
	}

	/* Stream framing: a whole frame parses as what the demux says. */
	frame = stun_frame_len(data, size);
	if (frame > 0 && (size_t)frame <= size) {
		if (stun_demux(data, size) == STUN_DEMUX_CHANNEL) {
			uint16_t ch;
			const uint8_t *d;
			size_t len;

			if (stun_chan_parse(data, (size_t)frame, &ch, &d, &len) == 0 &&
			    (d + len > data + frame ||
			     len + STUN_CHAN_HDR_LEN + stun_chan_pad(len) != (size_t)frame))
				abort();
		} else {
			(void)stun_parse(data, (size_t)frame, &m);
		}
	}
	/* ChannelData over UDP: data stays inside. */
	{
		uint16_t ch;
		const uint8_t *d;
		size_t len;

		if (stun_chan_parse(data, size, &ch, &d, &len) == 0 &&
		    (ch < STUN_CHANNEL_MIN || ch > STUN_CHANNEL_MAX || d + len > data + size))
			abort();
	}
	return 0;
}
