/* SPDX-License-Identifier: ISC */
/* The TURN data path: a client's Send indications and ChannelData (UDP,
 * or frames of TCP and TLS) to its peers from the relayed socket, and a
 * peer's datagrams back as ChannelData or Data indications. */
#include "turn_int.h"

#include <string.h>

#include "log.h"
#include "net.h"
#include "stats.h"

/* The most a UDP datagram over IPv4 carries: 65535 - 20 - 8. */
#define TURN_UDP_PAYLOAD_MAX 65507u
/* How often a worker reads the host's addresses again (when it judges a
 * peer): an address added at run time is the host's within a second. */
#define TURN_HOSTS_EVERY_MS 1000ull

bool turn_data_peer_ok(struct turn_ctx *x, const union etr_sockaddr *peer, bool ip_only,
		       enum turn_drop *why)
{
	struct turn_listener *l = x->l;

	/* The ban first: what a reload lists is refused from the next
	 * datagram on, whatever permission or channel the peer had. */
	if (turn_banned(l, peer)) {
		*why = TURN_DROP_BANNED;
		return false;
	}
	if (x->now - l->hosts_at >= TURN_HOSTS_EVERY_MS * NS_PER_MS) {
		union etr_sockaddr local[TURN_PEER_HOST_MAX];
		size_t n = net_local_addrs(local, TURN_PEER_HOST_MAX);

		l->hosts_at = x->now;
		if (n) { /* getifaddrs failed: the last list stays */
			turn_peer_hosts_clear(&l->policy);
			for (size_t k = 0; k < n; k++)
				turn_peer_host(&l->policy, &local[k]);
		}
	}
	/* An own relayed port whose allocation has ended: another service
	 * may hold that port now (the policy lets a public-ip through,
	 * which is not the host's). */
	if (!turn_peer_ok(turn_peer_check(&l->policy, peer, ip_only)) ||
	    (!ip_only && turn_peer_own_dead(&l->policy, peer))) {
		*why = TURN_DROP_PEER_REFUSED;
		return false;
	}
	return true;
}

/* Send bytes to a peer from allocation idx's relayed socket: the received
 * buffer itself when there is one (d, narrowed to the payload), else a copy.
 * Every datagram to a peer comes here, and is judged here (a Send
 * indication's and ChannelData's, over UDP, TCP or TLS). */
static void to_peer(struct turn_ctx *x, uint32_t idx, const union etr_sockaddr *peer,
		    const uint8_t *p, size_t n, struct loop_dgram *d)
{
	struct turn_listener *l = x->l;
	int fd = l->relay_fd[idx], rc;
	uint32_t id = endpoint_ref_id(l->slot_relay, turn_alloc_ref(&l->t, idx));
	enum turn_drop why;

	if (!turn_data_peer_ok(x, peer, false, &why)) {
		STAT_ADD(l->stats.dropped[why], 1);
		return;
	}

	/* A frame over TCP can hold more than a UDP datagram over IPv4 (the
	 * relayed family) carries. */
	if (n > TURN_UDP_PAYLOAD_MAX) {
		STAT_ADD(l->stats.dropped[TURN_DROP_OVERSIZE], 1);
		return;
	}

	if (d) {
		/* p is inside d's bytes: narrow d to it. */
		d->data += p - d->data;
		d->len = n;
		rc = l->ops->forward(l->loop, fd, &peer->sa, addr_len(peer), d, id);
	} else {
		rc = l->ops->send(l->loop, fd, &peer->sa, addr_len(peer), p, n, id);
	}
	if (rc < 0) {
		STAT_ADD(l->stats.dropped[TURN_DROP_SEND_FAILED], 1);
		return;
	}
	STAT_ADD(l->stats.dgrams_to_peer, 1);
	STAT_ADD(l->stats.bytes_to_peer, n);
	l->t.a[idx].dgrams_to_peer++;
	l->t.a[idx].bytes_to_peer += n;
}

void turn_data_send(struct turn_ctx *x, const struct stun_msg *m, struct loop_dgram *d)
{
	struct turn_listener *l = x->l;
	uint32_t idx = turn_alloc_lookup(&l->t, &x->tuple);
	union etr_sockaddr peer;

	if (idx == TURN_ALLOC_NONE) {
		STAT_ADD(l->stats.dropped[TURN_DROP_NO_ALLOCATION], 1);
		return;
	}
	if (m->n_peer != 1 || !stun_has(m->data) || stun_get_xor_addr(m, m->peer[0], &peer) < 0 ||
	    peer.sa.sa_family != AF_INET) {
		STAT_ADD(l->stats.dropped[TURN_DROP_MALFORMED], 1);
		return;
	}
	if (!turn_alloc_permitted(&l->t, idx, &peer, x->now_ms)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_NO_PERMISSION], 1);
		return;
	}
	to_peer(x, idx, &peer, stun_attr_ptr(m, m->data), m->data.len, d);
}

void turn_data_channel(struct turn_ctx *x, const uint8_t *p, size_t n, struct loop_dgram *d)
{
	struct turn_listener *l = x->l;
	uint32_t idx = turn_alloc_lookup(&l->t, &x->tuple);
	union etr_sockaddr peer;
	const uint8_t *data;
	uint16_t ch;
	size_t len;

	if (stun_chan_parse(p, n, &ch, &data, &len) < 0) {
		STAT_ADD(l->stats.dropped[TURN_DROP_MALFORMED], 1);
		return;
	}
	if (idx == TURN_ALLOC_NONE) {
		STAT_ADD(l->stats.dropped[TURN_DROP_NO_ALLOCATION], 1);
		return;
	}
	if (!turn_alloc_chan_peer(&l->t, idx, ch, x->now_ms, &peer)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_NO_CHANNEL], 1);
		return;
	}
	to_peer(x, idx, &peer, data, len, d);
}

/* A peer's datagram on a relayed socket: ChannelData when the peer has a
 * channel, else a Data indication; nothing without a permission. */
void turn_data_relay_dgram(void *obj, uint32_t ref, struct loop_dgram *d)
{
	struct turn_listener *l = obj;
	uint32_t idx = turn_alloc_deref(&l->t, ref);
	union etr_sockaddr peer;
	struct turn_ctx x;
	uint64_t now_ms = d->now / NS_PER_MS;
	uint8_t *buf = l->scratch;
	uint16_t ch;
	size_t n = d->len;

	if (idx == TURN_ALLOC_NONE)
		return; /* a late datagram of a closed allocation */
	if (d->truncated) {
		STAT_ADD(l->stats.dropped[TURN_DROP_TRUNCATED], 1);
		return;
	}
	if (!d->from || !addr_from(&peer, d->from, d->fromlen) ||
	    !turn_alloc_permitted(&l->t, idx, &peer, now_ms)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_NO_PERMISSION], 1);
		return;
	}
	/* A peer banned after its permission was made: not carried. */
	if (turn_banned(l, &peer)) {
		STAT_ADD(l->stats.dropped[TURN_DROP_BANNED], 1);
		return;
	}
	x.client = l->t.a[idx].tuple.client;
	turn_ctx_init(&x, l, d->now, l->relay_conn[idx]);
	ch = turn_alloc_chan_of(&l->t, idx, &peer, now_ms);
	if (ch) {
		uint8_t hdr[STUN_CHAN_HDR_LEN], *p;

		stun_chan_header(hdr, ch, (uint16_t)n);
		if (x.conn) {
			if (!turn_conn_send(l, x.conn - 1, hdr, sizeof(hdr), d->data, n,
					    stun_chan_pad(n)))
				goto fail;
		} else if ((p = loop_dgram_prepend(d, STUN_CHAN_HDR_LEN)) != NULL) {
			memcpy(p, hdr, sizeof(hdr));
			if (l->ops->forward(l->loop, l->fd, &x.client.sa, addr_len(&x.client), d,
					    endpoint_id(l->ep, l->slot_udp)) < 0)
				goto fail;
		} else {
			size_t len = stun_chan_build(buf, TURN_SCRATCH, ch, d->data, n, false);

			if (!len || !turn_to_client(&x, buf, len))
				goto fail;
		}
	} else {
		struct stun_builder b;
		uint8_t tid[STUN_TID_LEN];
		uint64_t seq = l->tid_base[0] ^ l->tid_seq++;
		size_t len;

		/* A Data indication: a copy (its DATA needs padding behind
		 * the payload, where a GRO train's next datagram may be). */
		memcpy(tid, &seq, 8);
		memcpy(tid + 8, &l->tid_base[1], 4);
		stun_build_begin(&b, buf, TURN_SCRATCH, stun_type(STUN_DATA, STUN_INDICATION), tid);
		stun_add_xor_addr(&b, STUN_A_XOR_PEER_ADDRESS, &peer);
		stun_add_attr(&b, STUN_A_DATA, d->data, n);
		len = stun_build_finish(&b);
		if (!len || !turn_to_client(&x, buf, len))
			goto fail;
	}
	STAT_ADD(l->stats.dgrams_to_client, 1);
	STAT_ADD(l->stats.bytes_to_client, n);
	l->t.a[idx].dgrams_to_client++;
	l->t.a[idx].bytes_to_client += n;
	return;
fail:
	STAT_ADD(l->stats.dropped[x.conn && l->send_full ? TURN_DROP_CLIENT_SLOW
							 : TURN_DROP_SEND_FAILED],
		 1);
}

void turn_data_relay_recv_error(void *obj, uint32_t ref, int err)
{
	(void)obj;
	(void)ref;
	/* ICMP port unreachable from a peer: nothing to do for the client. */
	log_debug("turn: relayed socket: %s", strerror(-err));
}
