/* SPDX-License-Identifier: ISC */
/* One rung-3 connection: TLS, then udpws, over bytes (r3conn.h). */
#include "r3conn.h"

#include <errno.h>
#include <string.h>

int r3conn_init(struct r3conn *c, struct tls_server *srv, const char *host, uint8_t *msg,
		uint32_t max_msg)
{
	memset(c, 0, sizeof(*c));
	if (udpws_init(&c->ws, host, NULL, msg, max_msg, 0) < 0)
		return -EINVAL;
	c->tls = tls_conn_new(srv);
	return c->tls ? 0 : -ENOENT;
}

void r3conn_free(struct r3conn *c)
{
	tls_conn_free(c->tls);
	c->tls = NULL;
}

static void end(struct r3conn *c)
{
	if (!c->closed)
		tls_conn_shutdown(c->tls);
	c->closed = true;
}

int r3conn_feed(struct r3conn *c, const void *cipher, size_t n)
{
	if (c->closed)
		return -1;
	if (tls_conn_feed(c->tls, cipher, n) < 0) {
		c->closed = true; /* failed: its alert, if any, waits in pending_out */
		return -1;
	}
	return 0;
}

enum r3_ev r3conn_next(struct r3conn *c, const struct udpws_tokens *t, const uint8_t **dg,
		       size_t *len)
{
	struct udpws_out out;
	size_t used;

	/* Bounded: each turn consumes bytes or ends. */
	while (!c->closed) {
		if (c->off == c->len) {
			ssize_t r = tls_conn_read(c->tls, c->plain, sizeof(c->plain));

			if (r == 0)
				return R3_MORE;
			if (r < 0) {
				/* -EPIPE: the client's close_notify (ours
				 * follows); -EPROTO: fatal. */
				c->closed = true;
				break;
			}
			c->off = 0;
			c->len = (uint32_t)r;
		}
		switch (udpws_feed(&c->ws, t, c->plain + c->off, c->len - c->off, &used, &out)) {
		case UDPWS_MORE:
			c->off = c->len;
			break;
		case UDPWS_SEND:
			c->off += (uint32_t)used;
			if (out.len && tls_conn_write(c->tls, out.data, out.len) < 0)
				end(c);
			break;
		case UDPWS_DATAGRAM:
			c->off += (uint32_t)used;
			*dg = out.data;
			*len = out.len;
			return R3_DATAGRAM;
		case UDPWS_CLOSE:
			c->off += (uint32_t)used;
			if (out.len)
				tls_conn_write(c->tls, out.data, out.len);
			end(c);
			break;
		}
	}
	return R3_CLOSE;
}

int r3conn_send(struct r3conn *c, const uint8_t *p, size_t n)
{
	uint8_t b[WS_OUT_HDR_MAX + WS_MSG_MAX];
	size_t h;
	int rc;

	if (c->closed || c->ws.state != UDPWS_OPEN)
		return -ENOTCONN;
	if (n > WS_MSG_MAX)
		return -EMSGSIZE;
	h = udpws_datagram_header(b, n);
	memcpy(b + h, p, n);
	rc = tls_conn_write(c->tls, b, h + n);
	return rc == -ENOBUFS ? -ENOBUFS : rc < 0 ? -ENOTCONN : 0;
}

void r3conn_close(struct r3conn *c, uint16_t code)
{
	uint8_t b[WS_CTL_MAX + 2 + WS_OUT_HDR_MAX];
	size_t n;

	if (c->closed)
		return;
	n = udpws_close(&c->ws, code, b, sizeof(b));
	if (n)
		tls_conn_write(c->tls, b, n);
	end(c);
}
