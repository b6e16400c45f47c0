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

#include "nlmsg.h"

static bool ifname_ok(const char *ifname)
{
	size_t n = strnlen(ifname, WGNL_IFNAME_MAX + 1);

	return n > 0 && n <= WGNL_IFNAME_MAX;
}

/* The attributes after a generic netlink message's header. */
static bool genl_attrs(const struct nlmsghdr *h, struct nl_attrs *it)
{
	return nl_msg_attrs(h, GENL_HDRLEN, it);
}

/* A generic netlink message's headers. */
static void genl_start(struct nl_wr *w, uint16_t type, uint16_t flags, uint32_t seq, uint8_t cmd,
		       uint8_t version)
{
	struct genlmsghdr *g = nl_msg_start(w, type, flags, seq, GENL_HDRLEN);

	if (g) {
		g->cmd = cmd;
		g->version = version;
	}
}

int wgnl_family_request(uint8_t *out, size_t cap, uint32_t seq)
{
	struct nl_wr w = {out, cap, 0, false};

	genl_start(&w, GENL_ID_CTRL, NLM_F_REQUEST, seq, CTRL_CMD_GETFAMILY, 1);
	nl_put(&w, CTRL_ATTR_FAMILY_NAME, WG_GENL_NAME, sizeof(WG_GENL_NAME));
	return nl_msg_end(&w);
}

int wgnl_family_parse(const uint8_t *msg, size_t len)
{
	const uint8_t *p = msg;
	const struct nlmsghdr *h;
	const struct nlattr *a;
	struct nl_attrs it;
	bool bad = false;
	uint16_t id;

	h = nl_msg_next(&p, msg + len, &bad);
	if (!h)
		return -EPROTO;
	if (h->nlmsg_type == NLMSG_ERROR)
		return nl_msg_error(h) ? nl_msg_error(h) : -EPROTO;
	if (h->nlmsg_type != GENL_ID_CTRL || !genl_attrs(h, &it))
		return -EPROTO;
	while ((a = nl_attr_next(&it)) != NULL)
		if (nl_attr_type(a) == CTRL_ATTR_FAMILY_ID && nl_attr_get(a, &id, sizeof(id)) &&
		    id > 0)
			return id;
	return -EPROTO;
}

int wgnl_get_request(uint8_t *out, size_t cap, uint16_t family, uint32_t seq, const char *ifname)
{
	struct nl_wr w = {out, cap, 0, false};

	if (!ifname_ok(ifname))
		return -EINVAL;
	genl_start(&w, family, NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, seq, WG_CMD_GET_DEVICE,
		   WG_GENL_VERSION);
	nl_put(&w, WGDEVICE_A_IFNAME, ifname, strlen(ifname) + 1);
	return nl_msg_end(&w);
}

static int parse_allowed(struct wgp_peer *p, const struct nlattr *list)
{
	struct nl_attrs it = nl_attrs_in(list), in;
	const struct nlattr *one, *a;

	while ((one = nl_attr_next(&it)) != NULL) {
		struct wgp_cidr c = {0};
		uint16_t family = 0;
		bool addr = false, mask = false;

		in = nl_attrs_in(one);
		while ((a = nl_attr_next(&in)) != NULL) {
			switch (nl_attr_type(a)) {
			case WGALLOWEDIP_A_FAMILY:
				if (!nl_attr_get(a, &family, sizeof(family)))
					return -EPROTO;
				break;
			case WGALLOWEDIP_A_IPADDR:
				if (nl_attr_len(a) != 4 && nl_attr_len(a) != 16)
					return -EPROTO;
				memcpy(c.addr, nl_attr_data(a), nl_attr_len(a));
				addr = true;
				break;
			case WGALLOWEDIP_A_CIDR_MASK:
				if (!nl_attr_get(a, &c.bits, sizeof(c.bits)))
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
	struct nl_attrs it = nl_attrs_in(one);
	const struct nlattr *a, *allowed = NULL;
	struct wgp_peer *p;
	uint8_t key[WGP_KEY_LEN];
	bool have_key = false;
	int64_t ts[2];

	/* The key first: it says whether this continues the last peer. */
	while ((a = nl_attr_next(&it)) != NULL)
		if (nl_attr_type(a) == WGPEER_A_PUBLIC_KEY)
			have_key = nl_attr_get(a, key, sizeof(key));
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
	it = nl_attrs_in(one);
	while ((a = nl_attr_next(&it)) != NULL) {
		switch (nl_attr_type(a)) {
		case WGPEER_A_PRESHARED_KEY:
			if (!nl_attr_get(a, p->psk, sizeof(p->psk)))
				return -EPROTO;
			break;
		case WGPEER_A_LAST_HANDSHAKE_TIME:
			if (!nl_attr_get(a, ts, sizeof(ts)) || ts[1] < 0 || ts[1] >= 1000000000)
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
	struct nl_attrs it, peers;
	const struct nlattr *a, *one;
	int rc;

	if (!genl_attrs(h, &it))
		return -EPROTO;
	while ((a = nl_attr_next(&it)) != NULL) {
		switch (nl_attr_type(a)) {
		case WGDEVICE_A_LISTEN_PORT:
			if (!nl_attr_get(a, &g->dev->listen_port, sizeof(g->dev->listen_port)))
				return -EPROTO;
			break;
		case WGDEVICE_A_FWMARK:
			if (!nl_attr_get(a, &g->dev->fwmark, sizeof(g->dev->fwmark)))
				return -EPROTO;
			break;
		case WGDEVICE_A_PRIVATE_KEY: {
			static const uint8_t zero[WGP_KEY_LEN];

			if (nl_attr_len(a) != WGP_KEY_LEN)
				return -EPROTO;
			g->dev->has_private_key = memcmp(nl_attr_data(a), zero, WGP_KEY_LEN) != 0;
			memcpy(g->dev->private_key, nl_attr_data(a), WGP_KEY_LEN);
			break;
		}
		case WGDEVICE_A_PEERS:
			peers = nl_attrs_in(a);
			while ((one = nl_attr_next(&peers)) != NULL)
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

	while ((h = nl_msg_next(&p, buf + len, &bad)) != NULL) {
		if (h->nlmsg_seq != seq)
			return -EPROTO;
		if (h->nlmsg_type == NLMSG_DONE) {
			g->done = true;
			return 0;
		}
		if (h->nlmsg_type == NLMSG_ERROR) {
			rc = nl_msg_error(h);
			if (rc != 0)
				return rc;
			continue;
		}
		if ((rc = parse_device(g, h)) != 0)
			return rc;
	}
	return bad || p != buf + len ? -EPROTO : 0;
}

static void put_allowed(struct nl_wr *w, const struct wgp_peer *p)
{
	size_t list = nl_nest_start(w, WGPEER_A_ALLOWEDIPS);

	for (uint16_t i = 0; i < p->n_allowed; i++) {
		const struct wgp_cidr *c = &p->allowed[i];
		size_t one = nl_nest_start(w, i);

		nl_put_u16(w, WGALLOWEDIP_A_FAMILY, c->family);
		nl_put(w, WGALLOWEDIP_A_IPADDR, c->addr, c->family == AF_INET ? 4 : 16);
		nl_put(w, WGALLOWEDIP_A_CIDR_MASK, &c->bits, 1);
		nl_nest_end(w, one);
	}
	nl_nest_end(w, list);
}

/* One op as a peer of the set: a removal names the key alone; an update
 * touches only what changed and never creates a peer; an add is the whole
 * peer. */
static void put_op(struct nl_wr *w, const struct wgp_op *op, uint16_t index)
{
	static const uint8_t zero[WGP_KEY_LEN];
	const struct wgp_peer *p = op->peer;
	size_t one = nl_nest_start(w, index);
	uint32_t flags = 0;

	nl_put(w, WGPEER_A_PUBLIC_KEY, p->key, WGP_KEY_LEN);
	if (op->kind == WGP_OP_REMOVE) {
		nl_put_u32(w, WGPEER_A_FLAGS, WGPEER_F_REMOVE_ME);
		nl_nest_end(w, one);
		return;
	}
	if (op->kind == WGP_OP_UPDATE)
		flags |= WGPEER_F_UPDATE_ONLY;
	if (op->kind == WGP_OP_ADD || op->allowed_changed)
		flags |= WGPEER_F_REPLACE_ALLOWEDIPS;
	nl_put_u32(w, WGPEER_A_FLAGS, flags);
	if (op->psk_changed || (op->kind == WGP_OP_ADD && memcmp(p->psk, zero, WGP_KEY_LEN) != 0))
		nl_put(w, WGPEER_A_PRESHARED_KEY, p->psk, WGP_KEY_LEN);
	if (op->kind == WGP_OP_ADD || op->allowed_changed)
		put_allowed(w, p);
	nl_nest_end(w, one);
}

int wgnl_set_request(uint8_t *out, size_t cap, uint16_t family, uint32_t seq, const char *ifname,
		     const struct wgp_op *ops, size_t nops, size_t *done)
{
	struct nl_wr w = {out, cap, 0, false};
	size_t peers;

	*done = 0;
	if (!ifname_ok(ifname))
		return -EINVAL;
	genl_start(&w, family, NLM_F_REQUEST | NLM_F_ACK, seq, WG_CMD_SET_DEVICE, WG_GENL_VERSION);
	nl_put(&w, WGDEVICE_A_IFNAME, ifname, strlen(ifname) + 1);
	peers = nl_nest_start(&w, WGDEVICE_A_PEERS);
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
	nl_nest_end(&w, peers);
	return nl_msg_end(&w);
}

int wgnl_device_request(uint8_t *out, size_t cap, uint16_t family, uint32_t seq, const char *ifname,
			const uint8_t priv[WGP_KEY_LEN], uint16_t port)
{
	struct nl_wr w = {out, cap, 0, false};

	if (!ifname_ok(ifname))
		return -EINVAL;
	genl_start(&w, family, NLM_F_REQUEST | NLM_F_ACK, seq, WG_CMD_SET_DEVICE, WG_GENL_VERSION);
	nl_put(&w, WGDEVICE_A_IFNAME, ifname, strlen(ifname) + 1);
	nl_put(&w, WGDEVICE_A_PRIVATE_KEY, priv, WGP_KEY_LEN);
	nl_put_u16(&w, WGDEVICE_A_LISTEN_PORT, port);
	return nl_msg_end(&w);
}
