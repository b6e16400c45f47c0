/* SPDX-License-Identifier: ISC */
/* Bytes of a TURN TCP connection, or plaintext of a TLS one, into frames
 * (RFC 8656 10.1): whole frames handled where they lie, a frame cut by a
 * chunk's end gathered in a buffer of its own (turn_conn_rx_get), within
 * the worker's frame memory (TURN_CONN_RX_TOTAL). */
#include "turn_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "stats.h"

/* The connection other than c holding the largest partial frame, larger
 * than need, or UINT32_MAX: a scan, only when the worker's frame memory is
 * spent (each such eviction cost its sender that many bytes). */
static uint32_t rx_largest(const struct turn_listener *l, const struct turn_conn *c, size_t need)
{
	uint32_t v = UINT32_MAX;
	size_t most = need;

	for (uint32_t k = 0; k < l->nconns; k++)
		if (&l->conns[k] != c && l->conns[k].fd >= 0 && l->conns[k].rxcap > most) {
			most = l->conns[k].rxcap;
			v = k;
		}
	return v;
}

/* Room for need bytes of a partial frame of frame bytes (0: its length not
 * known yet), within the worker's TURN_CONN_RX_TOTAL. The buffer grows
 * with the bytes that came, doubling (the copies stay linear in the
 * frame), never past the frame: what a header announces costs nothing
 * until it arrives (334 headers of 64 KiB, 1.3 KB sent, spent 16 MiB).
 * False closes the connection. */
static bool conn_room(struct turn_listener *l, struct turn_conn *c, size_t need, size_t frame)
{
	uint8_t *p;

	if (need <= c->rxcap)
		return true;
	if (need > TURN_CONN_RX_MAX)
		return false;
	if (need < 2 * c->rxcap)
		need = 2 * c->rxcap;
	if (need < 512)
		need = 512;
	if (frame && need > frame)
		need = frame;
	/* The worker's room is spent: the connection holding the largest
	 * partial frame, larger than this one's would be, gives way (attack
	 * round 12: authenticated connections holding 65000 bytes of 65540
	 * closed every client whose frame came in two segments); with none
	 * larger, this one is closed. */
	while (l->rx_bytes - c->rxcap + need > TURN_CONN_RX_TOTAL) {
		uint32_t v = rx_largest(l, c, need);

		STAT_ADD(l->stats.tcp_dropped[TURN_TCP_FRAME_MEMORY], 1);
		if (v == UINT32_MAX)
			return false;
		turn_conn_close(l, v);
	}
	p = turn_conn_rx_get(need);
	if (!p)
		return false;
	if (c->rxlen)
		memcpy(p, c->rx, c->rxlen);
	turn_conn_rx_put(c->rx, c->rxcap);
	l->rx_bytes += need - c->rxcap;
	c->rx = p;
	c->rxcap = need;
	return true;
}

/* Before an authenticated request a connection sends small STUN requests
 * only: ChannelData (no channel can be bound yet) or a frame over
 * TURN_CONN_UNAUTH_FRAME closes it, counted. p: the frame's first n bytes
 * (n >= 1), flen its length (0: not known yet). False when closed. */
static bool conn_frame_ok(struct turn_listener *l, uint32_t i, const uint8_t *p, size_t n, int flen)
{
	enum turn_tcp_drop why;

	if (l->conns[i].authed)
		return true;
	if (stun_demux(p, n) == STUN_DEMUX_CHANNEL)
		why = TURN_TCP_UNAUTH_CHANNEL;
	else if (flen > (int)TURN_CONN_UNAUTH_FRAME)
		why = TURN_TCP_UNAUTH_LARGE;
	else
		return true;
	STAT_ADD(l->stats.tcp_dropped[why], 1);
	turn_conn_close(l, i);
	return false;
}

static void conn_frame(struct turn_listener *l, uint32_t i, const uint8_t *p, size_t n,
		       uint64_t now)
{
	struct turn_ctx x;

	x.client = l->conns[i].client;
	turn_ctx_init(&x, l, now, i + 1);
	turn_on_message(&x, p, n, NULL);
}

/* Bytes of a TCP connection (or plaintext of a TLS one): whole frames are
 * handled where they lie; only a frame cut by the end is copied, into a
 * buffer of its size (an idle connection holds none). False when the
 * connection was closed meanwhile. */
static bool conn_bytes(struct turn_listener *l, uint32_t i, const uint8_t *p, size_t n,
		       uint64_t now)
{
	struct turn_conn *c = &l->conns[i];
	int flen;

	/* First the frame the last chunk began. */
	while (c->rxlen && n) {
		size_t want, take;

		flen = stun_frame_len(c->rx, c->rxlen);
		if (flen < 0)
			goto garbage;
		if (!conn_frame_ok(l, i, c->rx, c->rxlen, flen))
			return false;
		want = flen ? (size_t)flen : 4;
		take = want - c->rxlen < n ? want - c->rxlen : n;
		if (!conn_room(l, c, c->rxlen + take, (size_t)flen)) {
			turn_conn_close(l, i);
			return false;
		}
		memcpy(c->rx + c->rxlen, p, take);
		c->rxlen += take;
		p += take;
		n -= take;
		if (flen && c->rxlen == (size_t)flen) {
			c->rxlen = 0;
			conn_frame(l, i, c->rx, (size_t)flen, now);
			if (c->fd < 0)
				return false;
		}
	}
	while (n) {
		flen = stun_frame_len(p, n);
		if (flen < 0)
			goto garbage;
		if (!conn_frame_ok(l, i, p, n, flen))
			return false;
		if (flen == 0 || (size_t)flen > n) {
			if (!conn_room(l, c, n, (size_t)flen)) {
				turn_conn_close(l, i);
				return false;
			}
			memcpy(c->rx, p, n);
			c->rxlen = n;
			break;
		}
		conn_frame(l, i, p, (size_t)flen, now);
		if (c->fd < 0)
			return false;
		p += flen;
		n -= (size_t)flen;
	}
	/* No frame left incomplete: a large buffer goes back at once. */
	if (!c->rxlen && c->rxcap > TURN_CONN_RX_KEEP)
		turn_conn_rx_free(l, c);
	return true;
garbage:
	STAT_ADD(l->stats.dropped[TURN_DROP_NOT_TURN], 1);
	turn_conn_close(l, i);
	return false;
}

/* Ciphertext of a TLS connection: into its session, and the plaintext out
 * of it through TCP's framing. A handshake that fails (garbage, no
 * common version or cipher) or a bad record ends the connection once its
 * alert is sent; so does the client's close_notify. */
static void tls_stream(struct turn_listener *l, uint32_t i, struct loop_dgram *d)
{
	struct turn_conn *c = &l->conns[i];
	ssize_t n;

	/* In slices of a record's size, each read out before the next: what
	 * waits in the session is then at most a slice and a record cut in
	 * two, well under TLS_CONN_IN_MAX, whatever the loop's chunk. */
	for (size_t off = 0; off < d->len;) {
		size_t take = d->len - off < TURN_TLS_RX ? d->len - off : TURN_TLS_RX;

		if (tls_conn_feed(c->tls, d->data + off, take) < 0) {
			char why[256];

			/* Still in the handshake (-ENOBUFS): turn_conn_close counts it. */
			if (tls_conn_state(c->tls) != TLS_CONN_HANDSHAKE)
				STAT_ADD(l->stats.tls_failed, 1);
			log_debug("turn %s: TLS: %s", l->sh->conf->name,
				  tls_error_text(why, sizeof(why)));
			goto end;
		}
		off += take;
		while ((n = tls_conn_read(c->tls, l->tls_rx, TURN_TLS_RX)) > 0)
			if (!conn_bytes(l, i, l->tls_rx, (size_t)n, d->now))
				return;
		if (n < 0) {
			if (n != -EPIPE)
				STAT_ADD(l->stats.tls_failed, 1);
			goto end;
		}
	}
	turn_conn_tls_kick(l, i);
	turn_conn_read(l, i);
	return;
end:
	c->tls_closing = true;
	turn_conn_tls_kick(l, i);
	if (!c->sending)
		turn_conn_close(l, i);
}

/* Bytes of a TCP or TLS connection. */
void turn_stream_in(void *obj, uint32_t ref, struct loop_dgram *d)
{
	struct turn_listener *l = obj;
	uint32_t i;
	struct turn_conn *c = turn_conn_deref(l, ref, &i);

	if (!c || c->fd < 0)
		return;
	c->reading = false;
	if (d->len == 0) {
		turn_conn_close(l, i);
		return;
	}
	if (c->tls)
		tls_stream(l, i, d);
	else if (conn_bytes(l, i, d->data, d->len, d->now))
		turn_conn_read(l, i);
}
