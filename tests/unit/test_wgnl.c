/* SPDX-License-Identifier: ISC */
/* Unit tests for wgnl.c: the "wireguard" generic netlink messages written
 * (sets, the device, the dump request) and read (a dump split the way the
 * kernel splits it, errors, acknowledgements), and every truncation of a
 * message read without harm. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/wireguard.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "nlmsg.h"
#include "wgnl.h"

#define FAMILY 0x1d

static _Alignas(4) uint8_t buf[1 << 16];

static void peer(struct wgp_peer *p, uint8_t key, uint8_t psk, const char *cidrs)
{
	char tmp[256], *save = NULL;

	memset(p, 0, sizeof(*p));
	memset(p->key, key, sizeof(p->key));
	memset(p->psk, psk, sizeof(p->psk));
	snprintf(tmp, sizeof(tmp), "%s", cidrs);
	for (char *c = strtok_r(tmp, " ", &save); c; c = strtok_r(NULL, " ", &save))
		assert_int_equal(wgp_cidr_parse(c, strlen(c), &p->allowed[p->n_allowed++]), 0);
}

/* The attribute of type t among [p, end), or NULL. */
static const struct nlattr *find(const uint8_t *p, const uint8_t *end, uint16_t t)
{
	while (end - p >= NLA_HDRLEN) {
		const struct nlattr *a = (const struct nlattr *)p;

		assert_true(a->nla_len >= NLA_HDRLEN && a->nla_len <= end - p);
		if ((a->nla_type & NLA_TYPE_MASK) == t)
			return a;
		p += NLA_ALIGN(a->nla_len);
	}
	return NULL;
}

static const uint8_t *in(const struct nlattr *a)
{
	return (const uint8_t *)a + NLA_HDRLEN;
}

static const uint8_t *out_of(const struct nlattr *a)
{
	return (const uint8_t *)a + a->nla_len;
}

static uint32_t u32(const struct nlattr *a)
{
	uint32_t v;

	assert_non_null(a);
	assert_int_equal(a->nla_len, NLA_HDRLEN + 4);
	memcpy(&v, in(a), 4);
	return v;
}

/* The n-th peer nest of a set message. */
static const struct nlattr *peer_nest(const uint8_t *msg, int n)
{
	const struct nlmsghdr *h = (const void *)msg;
	const uint8_t *attrs = msg + NLMSG_HDRLEN + GENL_HDRLEN;
	const struct nlattr *peers = find(attrs, msg + h->nlmsg_len, WGDEVICE_A_PEERS), *a;
	const uint8_t *p;

	assert_non_null(peers);
	assert_true(peers->nla_type & NLA_F_NESTED);
	p = in(peers);
	for (int i = 0;; i++) {
		a = (const struct nlattr *)p;
		assert_true(p < out_of(peers));
		if (i == n)
			return a;
		p += NLA_ALIGN(a->nla_len);
	}
}

static void test_wgnl_set_writes_each_op_with_only_what_changed(void **state)
{
	struct wgp_peer gone, upd, add;
	struct wgp_op ops[3] = {
	    {.kind = WGP_OP_REMOVE, .peer = &gone},
	    {.kind = WGP_OP_UPDATE, .allowed_changed = true, .psk_changed = false, .peer = &upd},
	    {.kind = WGP_OP_ADD, .peer = &add},
	};
	const struct nlmsghdr *h = (const void *)buf;
	const struct genlmsghdr *g = (const void *)(buf + NLMSG_HDRLEN);
	const struct nlattr *p, *name;
	size_t done;
	int len;

	(void)state;
	peer(&gone, 1, 0, "10.8.0.2");
	peer(&upd, 2, 9, "10.8.0.3 fd00::3/128");
	peer(&add, 3, 7, "10.8.0.4 192.168.50.0/24");
	len = wgnl_set_request(buf, sizeof(buf), FAMILY, 77, "wg0", ops, 3, &done);
	assert_true(len > 0);
	assert_int_equal(done, 3);
	assert_int_equal(h->nlmsg_len, (uint32_t)len);
	assert_int_equal(h->nlmsg_type, FAMILY);
	assert_int_equal(h->nlmsg_seq, 77);
	assert_int_equal(h->nlmsg_flags, NLM_F_REQUEST | NLM_F_ACK);
	assert_int_equal(g->cmd, WG_CMD_SET_DEVICE);
	assert_int_equal(g->version, WG_GENL_VERSION);
	name = find(buf + NLMSG_HDRLEN + GENL_HDRLEN, buf + len, WGDEVICE_A_IFNAME);
	assert_non_null(name);
	assert_string_equal((const char *)in(name), "wg0");
	/* No REPLACE_PEERS: peers not named are kept. */
	assert_null(find(buf + NLMSG_HDRLEN + GENL_HDRLEN, buf + len, WGDEVICE_A_FLAGS));

	/* The removal: its key and REMOVE_ME, nothing else. */
	p = peer_nest(buf, 0);
	assert_true(p->nla_type & NLA_F_NESTED);
	assert_int_equal(u32(find(in(p), out_of(p), WGPEER_A_FLAGS)), WGPEER_F_REMOVE_ME);
	assert_memory_equal(in(find(in(p), out_of(p), WGPEER_A_PUBLIC_KEY)), gone.key, 32);
	assert_null(find(in(p), out_of(p), WGPEER_A_ALLOWEDIPS));
	assert_null(find(in(p), out_of(p), WGPEER_A_PRESHARED_KEY));
	/* The update: never creates a peer, replaces the allowed IPs, leaves
	 * the preshared key alone (it did not change). */
	p = peer_nest(buf, 1);
	assert_int_equal(u32(find(in(p), out_of(p), WGPEER_A_FLAGS)),
			 WGPEER_F_UPDATE_ONLY | WGPEER_F_REPLACE_ALLOWEDIPS);
	assert_null(find(in(p), out_of(p), WGPEER_A_PRESHARED_KEY));
	assert_non_null(find(in(p), out_of(p), WGPEER_A_ALLOWEDIPS));
	/* The add: the whole peer. */
	p = peer_nest(buf, 2);
	assert_int_equal(u32(find(in(p), out_of(p), WGPEER_A_FLAGS)), WGPEER_F_REPLACE_ALLOWEDIPS);
	assert_memory_equal(in(find(in(p), out_of(p), WGPEER_A_PRESHARED_KEY)), add.psk, 32);
}

static void test_wgnl_set_reads_back_as_the_peers_it_carries(void **state)
{
	struct wgp_peer a, b, got[4];
	struct wgp_op ops[2] = {{.kind = WGP_OP_ADD, .peer = &a}, {.kind = WGP_OP_ADD, .peer = &b}};
	struct wgp_device dev = {0};
	struct wgnl_get g = {.dev = &dev, .peers = got, .cap = 4};
	size_t done;
	int len;

	(void)state;
	peer(&a, 0xa1, 0, "10.8.0.9 fd00:1::/64");
	peer(&b, 0xb2, 5, "10.8.1.0/24");
	len = wgnl_set_request(buf, sizeof(buf), FAMILY, 3, "wg7", ops, 2, &done);
	assert_true(len > 0);
	/* A set and a dump's message differ in flags and command only: the
	 * reader takes the set's peers as a device's. */
	assert_int_equal(wgnl_get_parse(&g, buf, (size_t)len, 3), 0);
	assert_false(g.done);
	assert_int_equal(g.n, 2);
	assert_memory_equal(got[0].key, a.key, 32);
	assert_int_equal(got[0].n_allowed, 2);
	assert_memory_equal(&got[0].allowed[1], &a.allowed[1], sizeof(a.allowed[1]));
	assert_memory_equal(got[1].psk, b.psk, 32);
	assert_int_equal(got[1].allowed[0].bits, 24);
	assert_int_equal(got[1].allowed[0].family, AF_INET);
}

/* Append a DONE message of seq at buf + off; returns the new length. */
static size_t put_done(size_t off, uint32_t seq)
{
	struct nlmsghdr *h = (struct nlmsghdr *)(buf + off);

	memset(h, 0, NLMSG_HDRLEN + 4);
	h->nlmsg_len = NLMSG_HDRLEN + 4;
	h->nlmsg_type = NLMSG_DONE;
	h->nlmsg_seq = seq;
	return off + NLMSG_ALIGN(h->nlmsg_len);
}

static void test_wgnl_get_joins_a_peer_split_over_two_messages(void **state)
{
	struct wgp_peer a1, a2, b, got[4];
	struct wgp_op op1 = {.kind = WGP_OP_ADD, .peer = &a1};
	struct wgp_op op2[2] = {{.kind = WGP_OP_ADD, .peer = &a2},
				{.kind = WGP_OP_ADD, .peer = &b}};
	struct wgp_device dev = {0};
	struct wgnl_get g = {.dev = &dev, .peers = got, .cap = 4};
	size_t done, off;
	int len;

	(void)state;
	/* Peer A's allowed IPs did not fit the first message: the kernel
	 * names A again at the head of the next one. */
	peer(&a1, 0xaa, 0, "10.8.0.0/24");
	peer(&a2, 0xaa, 0, "10.9.0.0/24 10.10.0.0/24");
	peer(&b, 0xbb, 0, "10.8.2.1");
	len = wgnl_set_request(buf, sizeof(buf), FAMILY, 9, "wg0", &op1, 1, &done);
	off = NLMSG_ALIGN((size_t)len);
	len = wgnl_set_request(buf + off, sizeof(buf) - off, FAMILY, 9, "wg0", op2, 2, &done);
	off += NLMSG_ALIGN((size_t)len);
	assert_int_equal(wgnl_get_parse(&g, buf, off, 9), 0);
	assert_int_equal(g.n, 2);
	assert_int_equal(got[0].n_allowed, 3);
	assert_int_equal(got[1].n_allowed, 1);
	assert_false(g.done);
	/* The end of the dump in a datagram of its own. */
	assert_int_equal(wgnl_get_parse(&g, buf, put_done(0, 9), 9), 0);
	assert_true(g.done);
	assert_false(g.over);

	/* A device with more peers than room: counted as over, not a fault. */
	memset(&g, 0, sizeof(g));
	g = (struct wgnl_get){.dev = &dev, .peers = got, .cap = 1};
	len = wgnl_set_request(buf, sizeof(buf), FAMILY, 9, "wg0", op2, 2, &done);
	assert_int_equal(wgnl_get_parse(&g, buf, put_done(NLMSG_ALIGN((size_t)len), 9), 9), 0);
	assert_true(g.done);
	assert_true(g.over);
	assert_int_equal(g.n, 1);
	/* Another sequence's message is refused. */
	g = (struct wgnl_get){.dev = &dev, .peers = got, .cap = 4};
	assert_int_equal(wgnl_get_parse(&g, buf, put_done(0, 8), 9), -EPROTO);
}

static void test_wgnl_set_splits_a_large_plan_into_whole_ops(void **state)
{
	static struct wgp_peer p[300];
	static struct wgp_op ops[300];
	size_t total = 0, done;
	int requests = 0;

	(void)state;
	for (int i = 0; i < 300; i++) {
		peer(&p[i], 0, 0, "10.0.0.0/8 10.1.0.0/16 10.2.0.0/16 fd00::/8 fd01::/16");
		memcpy(p[i].key, &i, sizeof(i));
		ops[i] = (struct wgp_op){.kind = WGP_OP_ADD, .peer = &p[i]};
	}
	while (total < 300) {
		int len = wgnl_set_request(buf, WGNL_MSG_MAX, FAMILY, 1, "wg0", ops + total,
					   300 - total, &done);

		assert_true(len > 0 && len <= WGNL_MSG_MAX);
		assert_true(done > 0);
		total += done;
		requests++;
	}
	assert_int_equal(total, 300);
	assert_true(requests > 1 && requests < 40);
	/* Not even one op fits: said, not a half message. */
	assert_int_equal(wgnl_set_request(buf, 64, FAMILY, 1, "wg0", ops, 1, &done), -ENOSPC);
	assert_int_equal(done, 0);
	assert_int_equal(
	    wgnl_set_request(buf, sizeof(buf), FAMILY, 1, "wg0-with-a-long-name", ops, 1, &done),
	    -EINVAL);
}

static void test_wgnl_reads_errors_acks_and_the_family(void **state)
{
	_Alignas(4) uint8_t m[256] = {0};
	struct nlmsghdr *h = (struct nlmsghdr *)m;
	struct nlmsgerr *e = NLMSG_DATA(h);
	struct nlattr *a;
	uint16_t id = 0x23;
	int len;

	(void)state;
	h->nlmsg_len = NLMSG_HDRLEN + sizeof(*e);
	h->nlmsg_type = NLMSG_ERROR;
	h->nlmsg_seq = 5;
	e->error = -ENOENT;
	/* No WireGuard in the kernel: the controller says ENOENT. */
	assert_int_equal(wgnl_family_parse(m, h->nlmsg_len), -ENOENT);
	assert_int_equal(nl_ack_parse(m, h->nlmsg_len, 5), -ENOENT);
	assert_int_equal(nl_ack_parse(m, h->nlmsg_len, 6), 1);
	e->error = 0;
	assert_int_equal(nl_ack_parse(m, h->nlmsg_len, 5), 0);
	e->error = -ENODEV;
	{
		struct wgp_device dev;
		struct wgnl_get g = {.dev = &dev};

		assert_int_equal(wgnl_get_parse(&g, m, h->nlmsg_len, 5), -ENODEV);
	}
	/* The controller's answer with the family's id. */
	memset(m, 0, sizeof(m));
	h->nlmsg_type = GENL_ID_CTRL;
	a = (struct nlattr *)(m + NLMSG_HDRLEN + GENL_HDRLEN);
	a->nla_type = CTRL_ATTR_FAMILY_ID;
	a->nla_len = NLA_HDRLEN + 2;
	memcpy((uint8_t *)a + NLA_HDRLEN, &id, 2);
	h->nlmsg_len = NLMSG_HDRLEN + GENL_HDRLEN + NLA_ALIGN(a->nla_len);
	assert_int_equal(wgnl_family_parse(m, h->nlmsg_len), 0x23);
	/* The request names the family. */
	len = wgnl_family_request(m, sizeof(m), 4);
	assert_true(len > 0);
	a = (struct nlattr *)(m + NLMSG_HDRLEN + GENL_HDRLEN);
	assert_int_equal(a->nla_type, CTRL_ATTR_FAMILY_NAME);
	assert_string_equal((const char *)a + NLA_HDRLEN, "wireguard");
	/* The dump request. */
	len = wgnl_get_request(m, sizeof(m), FAMILY, 8, "wg0");
	assert_true(len > 0);
	assert_int_equal(h->nlmsg_flags, NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP);
	assert_int_equal(((struct genlmsghdr *)NLMSG_DATA(h))->cmd, WG_CMD_GET_DEVICE);
	assert_int_equal(wgnl_get_request(m, sizeof(m), FAMILY, 8, ""), -EINVAL);
}

static void test_wgnl_device_request_carries_key_and_port(void **state)
{
	uint8_t priv[32];
	const struct nlattr *a;
	uint16_t port;
	int len;

	(void)state;
	memset(priv, 0x42, sizeof(priv));
	len = wgnl_device_request(buf, sizeof(buf), FAMILY, 2, "wg0", priv, 51820);
	assert_true(len > 0);
	a = find(buf + NLMSG_HDRLEN + GENL_HDRLEN, buf + len, WGDEVICE_A_PRIVATE_KEY);
	assert_non_null(a);
	assert_memory_equal(in(a), priv, 32);
	a = find(buf + NLMSG_HDRLEN + GENL_HDRLEN, buf + len, WGDEVICE_A_LISTEN_PORT);
	assert_non_null(a);
	memcpy(&port, in(a), 2);
	assert_int_equal(port, 51820);
	assert_null(find(buf + NLMSG_HDRLEN + GENL_HDRLEN, buf + len, WGDEVICE_A_PEERS));
}

/* Every prefix and every one-byte change of a valid answer: read without
 * harm (ASan in CI), each either whole, or refused. */
static void test_wgnl_get_survives_truncation_and_corruption(void **state)
{
	static _Alignas(4) uint8_t copy[4096];
	struct wgp_peer a, b, got[4];
	struct wgp_op ops[2] = {{.kind = WGP_OP_ADD, .peer = &a}, {.kind = WGP_OP_ADD, .peer = &b}};
	struct wgp_device dev;
	size_t done;
	int len, whole = 0;

	(void)state;
	peer(&a, 1, 2, "10.8.0.9 fd00:1::/64");
	peer(&b, 3, 0, "10.8.1.0/24");
	len = wgnl_set_request(buf, sizeof(buf), FAMILY, 3, "wg0", ops, 2, &done);
	assert_true(len > 0 && (size_t)len <= sizeof(copy));
	for (int n = 0; n <= len; n++) {
		struct wgnl_get g = {.dev = &dev, .peers = got, .cap = 4};
		int rc;

		memcpy(copy, buf, (size_t)n);
		rc = wgnl_get_parse(&g, copy, (size_t)n, 3);
		assert_true(rc == 0 || rc == -EPROTO);
		whole += rc == 0 && g.n == 2 && got[1].n_allowed == 1;
	}
	assert_int_equal(whole, 1);
	for (int i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit += 3) {
			struct wgnl_get g = {.dev = &dev, .peers = got, .cap = 4};
			int rc;

			memcpy(copy, buf, (size_t)len);
			copy[i] ^= (uint8_t)(1u << bit);
			rc = wgnl_get_parse(&g, copy, (size_t)len, 3);
			assert_true(rc <= 0);
			assert_true(g.n <= 4);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wgnl_set_writes_each_op_with_only_what_changed),
	    cmocka_unit_test(test_wgnl_set_reads_back_as_the_peers_it_carries),
	    cmocka_unit_test(test_wgnl_get_joins_a_peer_split_over_two_messages),
	    cmocka_unit_test(test_wgnl_set_splits_a_large_plan_into_whole_ops),
	    cmocka_unit_test(test_wgnl_reads_errors_acks_and_the_family),
	    cmocka_unit_test(test_wgnl_device_request_carries_key_and_port),
	    cmocka_unit_test(test_wgnl_get_survives_truncation_and_corruption),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
