/* SPDX-License-Identifier: ISC */
/* Generic netlink messages of the "wireguard" family, written and read
 * with bounds checked on every attribute. */
#include "wgnl.h"

#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/wireguard.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

/* A message being written: len grows, over is set once something did not
 * fit (the message is then discarded whole). */
struct wr {
	uint8_t *p;
	size_t cap, len;
	bool over;
};

static void *wr_room(struct wr *w, size_t n)
{
	size_t al = NLA_ALIGN(n);
	void *at;

	if (w->over || al > w->cap - w->len) {
		w->over = true;
		return NULL;
	}
	at = w->p + w->len;
	memset(at, 0, al);
	w->len += al;
	return at;
}

static void put(struct wr *w, uint16_t type, const void *data, size_t n)
{
	struct nlattr *a = wr_room(w, NLA_HDRLEN + n);

	if (!a)
		return;
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + n);
	memcpy((uint8_t *)a + NLA_HDRLEN, data, n);
}

static void put_u16(struct wr *w, uint16_t type, uint16_t v)
{
	put(w, type, &v, sizeof(v));
}

static void put_u32(struct wr *w, uint16_t type, uint32_t v)
{
	put(w, type, &v, sizeof(v));
}

/* A nested attribute: its offset, closed by nest_end. */
static size_t nest_start(struct wr *w, uint16_t type)
{
	struct nlattr *a = wr_room(w, NLA_HDRLEN);

	if (!a)
		return 0;
	a->nla_type = type | NLA_F_NESTED;
	return (size_t)((uint8_t *)a - w->p);
}

static void nest_end(struct wr *w, size_t at)
{
	if (!w->over)
		((struct nlattr *)(w->p + at))->nla_len = (uint16_t)(w->len - at);
}

static void msg_start(struct wr *w, uint16_t type, uint16_t flags, uint32_t seq, uint8_t cmd,
		      uint8_t version)
{
	struct nlmsghdr *h = wr_room(w, NLMSG_HDRLEN);
	struct genlmsghdr *g = wr_room(w, GENL_HDRLEN);

	if (!h || !g)
		return;
	h->nlmsg_type = type;
	h->nlmsg_flags = flags;
	h->nlmsg_seq = seq;
	g->cmd = cmd;
	g->version = version;
}

static int msg_end(struct wr *w)
{
	if (w->over || w->len > UINT32_MAX)
		return -ENOSPC;
	((struct nlmsghdr *)w->p)->nlmsg_len = (uint32_t)w->len;
	return (int)w->len;
}

static bool ifname_ok(const char *ifname)
{
	size_t n = strnlen(ifname, WGNL_IFNAME_MAX + 1);

	return n > 0 && n <= WGNL_IFNAME_MAX;
}

int wgnl_family_request(uint8_t *out, size_t cap, uint32_t seq)
{
	struct wr w = {out, cap, 0, false};

	msg_start(&w, GENL_ID_CTRL, NLM_F_REQUEST, seq, CTRL_CMD_GETFAMILY, 1);
	put(&w, CTRL_ATTR_FAMILY_NAME, WG_GENL_NAME, sizeof(WG_GENL_NAME));
	return msg_end(&w);
}

/* Attributes in [p, end): each call yields the next whole one, or NULL at
 * the end or at one that does not fit (*bad set then). */
struct attrs {
	const uint8_t *p, *end;
	bool bad;
};

static const struct nlattr *attr_next(struct attrs *it)
{
	const struct nlattr *a;
	size_t step;

	if (it->end - it->p < (ptrdiff_t)NLA_HDRLEN)
		return NULL;
	a = (const struct nlattr *)it->p;
	if (a->nla_len < NLA_HDRLEN || a->nla_len > it->end - it->p) {
		it->bad = true;
		return NULL;
	}
	step = (size_t)NLA_ALIGN(a->nla_len);
	it->p += step < (size_t)(it->end - it->p) ? step : (size_t)(it->end - it->p);
	return a;
}

static struct attrs attrs_in(const struct nlattr *a)
{
	const uint8_t *p = (const uint8_t *)a + NLA_HDRLEN;

	return (struct attrs){p, p + (a->nla_len - NLA_HDRLEN), false};
}

static uint16_t attr_type(const struct nlattr *a)
{
	return a->nla_type & NLA_TYPE_MASK;
}

static size_t attr_len(const struct nlattr *a)
{
	return a->nla_len - NLA_HDRLEN;
}

static const void *attr_data(const struct nlattr *a)
{
	return (const uint8_t *)a + NLA_HDRLEN;
}

/* An attribute's value of exactly n bytes into out; false otherwise. */
static bool attr_get(const struct nlattr *a, void *out, size_t n)
{
	if (attr_len(a) != n)
		return false;
	memcpy(out, attr_data(a), n);
	return true;
}

/* The messages of one datagram: each call yields the next whole one. */
static const struct nlmsghdr *msg_next(const uint8_t **p, const uint8_t *end, bool *bad)
{
	const struct nlmsghdr *h;

	if (end - *p < (ptrdiff_t)NLMSG_HDRLEN)
		return NULL;
	h = (const struct nlmsghdr *)*p;
	if (h->nlmsg_len < NLMSG_HDRLEN || h->nlmsg_len > (size_t)(end - *p)) {
		*bad = true;
		return NULL;
	}
	*p += NLMSG_ALIGN(h->nlmsg_len) < (size_t)(end - *p) ? NLMSG_ALIGN(h->nlmsg_len)
							     : (size_t)(end - *p);
	return h;
}

/* An NLMSG_ERROR's code: 0 (an acknowledgement) or -errno. */
static int msg_error(const struct nlmsghdr *h)
{
	const struct nlmsgerr *e = NLMSG_DATA(h);

	if (h->nlmsg_len < NLMSG_HDRLEN + sizeof(*e) || e->error > 0)
		return -EPROTO;
	return e->error;
}

/* The attributes after a generic netlink message's header. */
static bool genl_attrs(const struct nlmsghdr *h, struct attrs *it)
{
	const uint8_t *p = (const uint8_t *)h;

	if (h->nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN)
		return false;
	*it = (struct attrs){p + NLMSG_HDRLEN + GENL_HDRLEN, p + h->nlmsg_len, false};
	return true;
}

int wgnl_family_parse(const uint8_t *msg, size_t len)
{
	const uint8_t *p = msg;
	const struct nlmsghdr *h;
	const struct nlattr *a;
	struct attrs it;
	bool bad = false;
	uint16_t id;

	h = msg_next(&p, msg + len, &bad);
	if (!h)
		return -EPROTO;
	if (h->nlmsg_type == NLMSG_ERROR)
		return msg_error(h) ? msg_error(h) : -EPROTO;
	if (h->nlmsg_type != GENL_ID_CTRL || !genl_attrs(h, &it))
		return -EPROTO;
	while ((a = attr_next(&it)) != NULL)
		if (attr_type(a) == CTRL_ATTR_FAMILY_ID && attr_get(a, &id, sizeof(id)) && id > 0)
			return id;
	return -EPROTO;
}

int wgnl_get_request(uint8_t *out, size_t cap, uint16_t family, uint32_t seq, const char *ifname)
{
	struct wr w = {out, cap, 0, false};

	if (!ifname_ok(ifname))
		return -EINVAL;
	msg_start(&w, family, NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, seq, WG_CMD_GET_DEVICE,
		  WG_GENL_VERSION);
	put(&w, WGDEVICE_A_IFNAME, ifname, strlen(ifname) + 1);
	return msg_end(&w);
}

static int parse_allowed(struct wgp_peer *p, const struct nlattr *list)
{
	struct attrs it = attrs_in(list), in;
	const struct nlattr *one, *a;

	while ((one = attr_next(&it)) != NULL) {
		struct wgp_cidr c = {0};
		uint16_t family = 0;
		bool addr = false, mask = false;

		in = attrs_in(one);
		while ((a = attr_next(&in)) != NULL) {
			switch (attr_type(a)) {
			case WGALLOWEDIP_A_FAMILY:
				if (!attr_get(a, &family, sizeof(family)))
					return -EPROTO;
				break;
			case WGALLOWEDIP_A_IPADDR:
				if (attr_len(a) != 4 && attr_len(a) != 16)
					return -EPROTO;
				memcpy(c.addr, attr_data(a), attr_len(a));
				addr = true;
				break;
			case WGALLOWEDIP_A_CIDR_MASK:
				if (!attr_get(a, &c.bits, sizeof(c.bits)))
					return -EPROTO;
				mask = true;
				break;
			default:
				break;
			}
		}
		if (in.bad || !addr || !mask ||
		    !((family == AF_INET && c.bits <= 32) || (family == AF_INET6 && c.bits <= 128)))
			return -EPROTO;
		c.family = (uint8_t)family;
		if (p->n_allowed == WGP_ALLOWED_MAX)
			p->allowed_over = true;
		else
			p->allowed[p->n_allowed++] = c;
	}
	return it.bad ? -EPROTO : 0;
}

static int parse_peer(struct wgnl_get *g, const struct nlattr *one)
{
	struct attrs it = attrs_in(one);
	const struct nlattr *a, *allowed = NULL;
	struct wgp_peer *p;
	uint8_t key[WGP_KEY_LEN];
	bool have_key = false;
	int64_t ts[2];

	/* The key first: it says whether this continues the last peer. */
	while ((a = attr_next(&it)) != NULL)
		if (attr_type(a) == WGPEER_A_PUBLIC_KEY)
			have_key = attr_get(a, key, sizeof(key));
	if (it.bad || !have_key)
		return -EPROTO;
	if (g->n > 0 && memcmp(g->peers[g->n - 1].key, key, sizeof(key)) == 0) {
		p = &g->peers[g->n - 1];
	} else {
		if (g->n == g->cap) {
			g->over = true;
			return 0;
		}
		p = &g->peers[g->n++];
		memset(p, 0, sizeof(*p));
		memcpy(p->key, key, sizeof(key));
	}
	it = attrs_in(one);
	while ((a = attr_next(&it)) != NULL) {
		switch (attr_type(a)) {
		case WGPEER_A_PRESHARED_KEY:
			if (!attr_get(a, p->psk, sizeof(p->psk)))
				return -EPROTO;
			break;
		case WGPEER_A_LAST_HANDSHAKE_TIME:
			if (!attr_get(a, ts, sizeof(ts)) || ts[1] < 0 || ts[1] >= 1000000000)
				return -EPROTO;
			p->handshake_sec = ts[0];
			p->handshake_nsec = (uint32_t)ts[1];
			break;
		case WGPEER_A_ALLOWEDIPS:
			allowed = a;
			break;
		default:
			break;
		}
	}
	return allowed ? parse_allowed(p, allowed) : 0;
}

static int parse_device(struct wgnl_get *g, const struct nlmsghdr *h)
{
	struct attrs it, peers;
	const struct nlattr *a, *one;
	int rc;

	if (!genl_attrs(h, &it))
		return -EPROTO;
	while ((a = attr_next(&it)) != NULL) {
		switch (attr_type(a)) {
		case WGDEVICE_A_LISTEN_PORT:
			if (!attr_get(a, &g->dev->listen_port, sizeof(g->dev->listen_port)))
				return -EPROTO;
			break;
		case WGDEVICE_A_FWMARK:
			if (!attr_get(a, &g->dev->fwmark, sizeof(g->dev->fwmark)))
				return -EPROTO;
			break;
		case WGDEVICE_A_PRIVATE_KEY: {
			static const uint8_t zero[WGP_KEY_LEN];

			if (attr_len(a) != WGP_KEY_LEN)
				return -EPROTO;
			g->dev->has_private_key = memcmp(attr_data(a), zero, WGP_KEY_LEN) != 0;
			break;
		}
		case WGDEVICE_A_PEERS:
			peers = attrs_in(a);
			while ((one = attr_next(&peers)) != NULL)
				if ((rc = parse_peer(g, one)) != 0)
					return rc;
			if (peers.bad)
				return -EPROTO;
			break;
		default:
			break;
		}
	}
	return it.bad ? -EPROTO : 0;
}

int wgnl_get_parse(struct wgnl_get *g, const uint8_t *buf, size_t len, uint32_t seq)
{
	const uint8_t *p = buf;
	const struct nlmsghdr *h;
	bool bad = false;
	int rc;

	while ((h = msg_next(&p, buf + len, &bad)) != NULL) {
		if (h->nlmsg_seq != seq)
			return -EPROTO;
		if (h->nlmsg_type == NLMSG_DONE) {
			g->done = true;
			return 0;
		}
		if (h->nlmsg_type == NLMSG_ERROR) {
			rc = msg_error(h);
			if (rc != 0)
				return rc;
			continue;
		}
		if ((rc = parse_device(g, h)) != 0)
			return rc;
	}
	return bad || p != buf + len ? -EPROTO : 0;
}

static void put_allowed(struct wr *w, const struct wgp_peer *p)
{
	size_t list = nest_start(w, WGPEER_A_ALLOWEDIPS);

	for (uint16_t i = 0; i < p->n_allowed; i++) {
		const struct wgp_cidr *c = &p->allowed[i];
		size_t one = nest_start(w, i);

		put_u16(w, WGALLOWEDIP_A_FAMILY, c->family);
		put(w, WGALLOWEDIP_A_IPADDR, c->addr, c->family == AF_INET ? 4 : 16);
		put(w, WGALLOWEDIP_A_CIDR_MASK, &c->bits, 1);
		nest_end(w, one);
	}
	nest_end(w, list);
}

/* One op as a peer of the set: a removal names the key alone; an update
 * touches only what changed and never creates a peer; an add is the whole
 * peer. */
static void put_op(struct wr *w, const struct wgp_op *op, uint16_t index)
{
	static const uint8_t zero[WGP_KEY_LEN];
	const struct wgp_peer *p = op->peer;
	size_t one = nest_start(w, index);
	uint32_t flags = 0;

	put(w, WGPEER_A_PUBLIC_KEY, p->key, WGP_KEY_LEN);
	if (op->kind == WGP_OP_REMOVE) {
		put_u32(w, WGPEER_A_FLAGS, WGPEER_F_REMOVE_ME);
		nest_end(w, one);
		return;
	}
	if (op->kind == WGP_OP_UPDATE)
		flags |= WGPEER_F_UPDATE_ONLY;
	if (op->kind == WGP_OP_ADD || op->allowed_changed)
		flags |= WGPEER_F_REPLACE_ALLOWEDIPS;
	put_u32(w, WGPEER_A_FLAGS, flags);
	if (op->psk_changed || (op->kind == WGP_OP_ADD && memcmp(p->psk, zero, WGP_KEY_LEN) != 0))
		put(w, WGPEER_A_PRESHARED_KEY, p->psk, WGP_KEY_LEN);
	if (op->kind == WGP_OP_ADD || op->allowed_changed)
		put_allowed(w, p);
	nest_end(w, one);
}

int wgnl_set_request(uint8_t *out, size_t cap, uint16_t family, uint32_t seq, const char *ifname,
		     const struct wgp_op *ops, size_t nops, size_t *done)
{
	struct wr w = {out, cap, 0, false};
	size_t peers;

	*done = 0;
	if (!ifname_ok(ifname))
		return -EINVAL;
	msg_start(&w, family, NLM_F_REQUEST | NLM_F_ACK, seq, WG_CMD_SET_DEVICE, WG_GENL_VERSION);
	put(&w, WGDEVICE_A_IFNAME, ifname, strlen(ifname) + 1);
	peers = nest_start(&w, WGDEVICE_A_PEERS);
	if (w.over)
		return -ENOSPC;
	for (size_t i = 0; i < nops && i <= UINT16_MAX; i++) {
		size_t before = w.len;

		put_op(&w, &ops[i], (uint16_t)i);
		if (w.over) {
			w.len = before;
			w.over = false;
			break;
		}
		*done = i + 1;
	}
	if (*done == 0 && nops > 0)
		return -ENOSPC;
	nest_end(&w, peers);
	return msg_end(&w);
}

int wgnl_device_request(uint8_t *out, size_t cap, uint16_t family, uint32_t seq, const char *ifname,
			const uint8_t priv[WGP_KEY_LEN], uint16_t port)
{
	struct wr w = {out, cap, 0, false};

	if (!ifname_ok(ifname))
		return -EINVAL;
	msg_start(&w, family, NLM_F_REQUEST | NLM_F_ACK, seq, WG_CMD_SET_DEVICE, WG_GENL_VERSION);
	put(&w, WGDEVICE_A_IFNAME, ifname, strlen(ifname) + 1);
	put(&w, WGDEVICE_A_PRIVATE_KEY, priv, WGP_KEY_LEN);
	put_u16(&w, WGDEVICE_A_LISTEN_PORT, port);
	return msg_end(&w);
}

int wgnl_ack_parse(const uint8_t *buf, size_t len, uint32_t seq)
{
	const uint8_t *p = buf;
	const struct nlmsghdr *h;
	bool bad = false;

	while ((h = msg_next(&p, buf + len, &bad)) != NULL)
		if (h->nlmsg_seq == seq && h->nlmsg_type == NLMSG_ERROR)
			return msg_error(h);
	return bad ? -EPROTO : 1;
}
