/* SPDX-License-Identifier: ISC */
/* Unit tests for wgpeers.c: keys and allowed IPs as the control plane
 * sends them, the reconcile plan (an unchanged peer is never touched),
 * and the userspace API's text, read from an answer captured from
 * wireguard-go 0.0.20220316 (Debian 12) in a namespace. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "wgpeers.h"

/* `get=1` on an interface set with `wg set wgtp0 private-key K listen-port
 * 21820 peer YQrm...PXo= allowed-ips 10.8.0.3/32`. */
static const char captured_get[] =
    "private_key=d0770346c921db11abb297db0bdcebdec9b7ce6526e063cb00407d553607df5c\n"
    "listen_port=21820\n"
    "public_key=610ae641df01d6c8172f2b81bd3d4431a14d0ae2665c0969b6c495538d5d3d7a\n"
    "preshared_key=0000000000000000000000000000000000000000000000000000000000000000\n"
    "protocol_version=1\n"
    "last_handshake_time_sec=0\n"
    "last_handshake_time_nsec=0\n"
    "tx_bytes=0\n"
    "rx_bytes=0\n"
    "persistent_keepalive_interval=0\n"
    "allowed_ip=10.8.0.3/32\n"
    "errno=0\n"
    "\n";

static void test_wgp_keys_are_the_canonical_base64_of_32_bytes(void **state)
{
	uint8_t k[WGP_KEY_LEN], want[WGP_KEY_LEN] = {0x61, 0x0a, 0xe6, 0x41};
	char b64[WGP_KEY_B64_LEN + 1];
	const char *s = "YQrmQd8B1sgXLyuBvT1EMaFNCuJmXAlptsSVU41dPXo=";

	assert_true(wgp_key_from_b64(s, strlen(s), k));
	assert_memory_equal(k, want, 4);
	wgp_key_to_b64(k, b64);
	assert_string_equal(b64, s);
	assert_false(wgp_key_from_b64(s, strlen(s) - 1, k));
	assert_false(wgp_key_from_b64("YQrmQd8B1sgXLyuBvT1EMaFNCuJmXAlptsSVU41dPXp=", 44, k));
	assert_false(wgp_key_from_b64("YQrmQd8B1sgXLyuBvT1EMaFNCuJmXAlptsSVU41dPX==", 44, k));
	assert_false(wgp_key_from_b64("YQrmQd8B1sgXLyuBvT1EMaFNCuJmXAlptsSVU41dPX_=", 44, k));
}

static void test_wgp_public_key_is_x25519_of_rfc_7748(void **state)
{
	/* RFC 7748 6.1: Alice's private and public keys. */
	const uint8_t priv[WGP_KEY_LEN] = {0x77, 0x07, 0x6d, 0x0a, 0x73, 0x18, 0xa5, 0x7d,
					   0x3c, 0x16, 0xc1, 0x72, 0x51, 0xb2, 0x66, 0x45,
					   0xdf, 0x4c, 0x2f, 0x87, 0xeb, 0xc0, 0x99, 0x2a,
					   0xb1, 0x77, 0xfb, 0xa5, 0x1d, 0xb9, 0x2c, 0x2a};
	const uint8_t want[WGP_KEY_LEN] = {0x85, 0x20, 0xf0, 0x09, 0x89, 0x30, 0xa7, 0x54,
					   0x74, 0x8b, 0x7d, 0xdc, 0xb4, 0x3e, 0xf7, 0x5a,
					   0x0d, 0xbf, 0x3a, 0x0d, 0x26, 0x38, 0x1a, 0xf4,
					   0xeb, 0xa4, 0xa9, 0x8e, 0xaa, 0x9b, 0x4e, 0x6a};
	uint8_t pub[WGP_KEY_LEN], a[WGP_KEY_LEN], b[WGP_KEY_LEN], pa[WGP_KEY_LEN];
	char text[256];

	assert_int_equal(wgp_public_key(priv, pub), 0);
	assert_memory_equal(pub, want, WGP_KEY_LEN);
	/* Two new pairs differ; each private key is clamped. */
	assert_int_equal(wgp_keypair(a, pa), 0);
	assert_int_equal(wgp_keypair(b, pub), 0);
	assert_memory_not_equal(a, b, WGP_KEY_LEN);
	assert_int_equal(a[0] & 7, 0);
	assert_int_equal(a[31] & 0xc0, 0x40);
	assert_int_equal(wgp_public_key(a, pub), 0);
	assert_memory_equal(pub, pa, WGP_KEY_LEN);
	assert_int_equal(wgp_uapi_device(text, sizeof(text), priv, 51820), 102);
	assert_string_equal(
	    text, "set=1\n"
		  "private_key=77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a\n"
		  "listen_port=51820\n"
		  "\n");
	assert_int_equal(wgp_uapi_device(text, 102, priv, 51820), -ENOSPC);
}

static struct wgp_cidr cidr(const char *s)
{
	struct wgp_cidr c;

	assert_int_equal(wgp_cidr_parse(s, strlen(s), &c), 0);
	return c;
}

static void test_wgp_cidr_parse_clears_host_bits_and_writes_back(void **state)
{
	char out[WGP_CIDR_STRLEN];
	struct wgp_cidr c;

	c = cidr("10.8.0.5/24");
	assert_int_equal(c.family, AF_INET);
	assert_int_equal(c.bits, 24);
	wgp_cidr_str(&c, out);
	assert_string_equal(out, "10.8.0.0/24");
	c = cidr("10.8.0.7");
	wgp_cidr_str(&c, out);
	assert_string_equal(out, "10.8.0.7/32");
	c = cidr("fd00:1:2:3::9/60");
	wgp_cidr_str(&c, out);
	assert_string_equal(out, "fd00:1:2::/60");
	c = cidr("::/0");
	wgp_cidr_str(&c, out);
	assert_string_equal(out, "::/0");
	c = cidr("0.0.0.0/0");
	assert_int_equal(c.family, AF_INET);
	assert_int_equal(wgp_cidr_parse("10.0.0.1/33", 11, &c), -EINVAL);
	assert_int_equal(wgp_cidr_parse("10.0.0.1/024", 12, &c), -EINVAL);
	assert_int_equal(wgp_cidr_parse("10.0.0.1/", 9, &c), -EINVAL);
	assert_int_equal(wgp_cidr_parse("10.0.0.1/-1", 11, &c), -EINVAL);
	assert_int_equal(wgp_cidr_parse("fd00::1/129", 11, &c), -EINVAL);
	assert_int_equal(wgp_cidr_parse("10.0.0/8", 8, &c), -EINVAL);
	assert_int_equal(wgp_cidr_parse("/8", 2, &c), -EINVAL);
	assert_int_equal(wgp_cidr_parse("", 0, &c), -EINVAL);
}

static void key(uint8_t k[WGP_KEY_LEN], unsigned n)
{
	memset(k, 0, WGP_KEY_LEN);
	k[0] = (uint8_t)(n >> 8);
	k[1] = (uint8_t)n;
	k[31] = 0x40;
}

static struct wgp_peer peer(unsigned n, const char *ip)
{
	struct wgp_peer p;

	memset(&p, 0, sizeof(p));
	key(p.key, n);
	if (ip) {
		p.allowed[0] = cidr(ip);
		p.n_allowed = 1;
	}
	return p;
}

static void test_wgp_plan_leaves_an_unchanged_set_alone(void **state)
{
	struct wgp_peer cur[3], want[3];
	struct wgp_op ops[6];

	cur[0] = peer(1, "10.8.0.1/32");
	cur[1] = peer(2, "10.8.0.2/32");
	cur[2] = peer(3, "10.8.0.3/32");
	cur[2].allowed[1] = cidr("fd00::3/128");
	cur[2].n_allowed = 2;
	memset(cur[1].psk, 7, WGP_KEY_LEN);
	/* The same set in another order, the allowed IPs in another order,
	 * one with host bits the device would have cleared. */
	want[0] = peer(3, "fd00::3");
	want[0].allowed[1] = cidr("10.8.0.3/32");
	want[0].n_allowed = 2;
	want[1] = peer(1, "10.8.0.1/32");
	want[2] = peer(2, "10.8.0.2/32");
	memset(want[2].psk, 7, WGP_KEY_LEN);
	assert_int_equal(wgp_plan(cur, 3, want, 3, ops, 6), 0);
	/* Repeats of one allowed IP count once. */
	want[1].allowed[1] = want[1].allowed[0];
	want[1].n_allowed = 2;
	assert_int_equal(wgp_plan(cur, 3, want, 3, ops, 6), 0);
	assert_int_equal(wgp_plan(cur, 0, want, 0, ops, 0), 0);
}

static void test_wgp_plan_removes_then_updates_then_adds(void **state)
{
	struct wgp_peer cur[4], want[4];
	struct wgp_op ops[8];

	cur[0] = peer(1, "10.8.0.1/32");  /* unchanged */
	cur[1] = peer(2, "10.8.0.2/32");  /* removed */
	cur[2] = peer(3, "10.8.0.3/32");  /* allowed IPs change */
	cur[3] = peer(4, "10.8.0.4/32");  /* preshared key added */
	want[0] = peer(5, "10.8.0.2/32"); /* added, with the removed one's IP */
	want[1] = peer(4, "10.8.0.4/32");
	memset(want[1].psk, 9, WGP_KEY_LEN);
	want[2] = peer(3, "10.8.0.33/32");
	want[3] = peer(1, "10.8.0.1/32");
	assert_int_equal(wgp_plan(cur, 4, want, 4, ops, 8), 4);
	assert_int_equal(ops[0].kind, WGP_OP_REMOVE);
	assert_int_equal(ops[0].peer->key[1], 2);
	assert_int_equal(ops[1].kind, WGP_OP_UPDATE);
	assert_int_equal(ops[1].peer->key[1], 3);
	assert_true(ops[1].allowed_changed);
	assert_false(ops[1].psk_changed);
	assert_int_equal(ops[2].kind, WGP_OP_UPDATE);
	assert_int_equal(ops[2].peer->key[1], 4);
	assert_false(ops[2].allowed_changed);
	assert_true(ops[2].psk_changed);
	assert_int_equal(ops[3].kind, WGP_OP_ADD);
	assert_int_equal(ops[3].peer->key[1], 5);
	/* Short of room. */
	assert_int_equal(wgp_plan(cur, 4, want, 4, ops, 3), -ENOSPC);
	/* Everything removed: a heartbeat naming no peer. */
	assert_int_equal(wgp_plan(cur, 4, want, 0, ops, 8), 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(ops[i].kind, WGP_OP_REMOVE);
}

static void test_wgp_plan_refuses_a_set_naming_a_key_twice(void **state)
{
	struct wgp_peer cur[1], want[2];
	struct wgp_op ops[3];

	cur[0] = peer(1, "10.8.0.1/32");
	want[0] = peer(2, "10.8.0.2/32");
	want[1] = peer(2, "10.8.0.3/32");
	assert_int_equal(wgp_plan(cur, 1, want, 2, ops, 3), -EINVAL);
}

/* attack15: a peer with the relay's own key was "added" at every
 * heartbeat (wireguard-go drops it) and a network given to three peers
 * moved between them at every reconcile. */
static void test_wgp_set_check_refuses_the_own_key_and_a_network_of_two_peers(void **state)
{
	struct wgp_peer p[3] = {peer(1, "10.99.0.2/32"), peer(2, "10.99.1.0/24"),
				peer(3, "10.99.2.0/24")};
	uint8_t own[WGP_KEY_LEN];
	char err[128];

	(void)state;
	key(own, 9);
	assert_int_equal(wgp_set_check(p, 3, own, err, sizeof(err)), 0);
	assert_int_equal(wgp_set_check(NULL, 0, own, err, sizeof(err)), 0);
	/* One peer may hold a network inside another's: WireGuard routes the
	 * longest prefix. */
	p[1].allowed[1] = cidr("10.99.0.0/16");
	p[1].n_allowed = 2;
	assert_int_equal(wgp_set_check(p, 3, own, err, sizeof(err)), 0);
	key(own, 2);
	assert_int_equal(wgp_set_check(p, 3, own, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "peer 2 has the relay's own public key"));
	key(own, 9);
	p[2].allowed[1] = cidr("10.99.1.7/24"); /* the same network as peer 2's */
	p[2].n_allowed = 2;
	assert_int_equal(wgp_set_check(p, 3, own, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "allowed IP 10.99.1.0/24 given to two peers"));
}

/* attack15 F3b: a peer whose allowed IPs hold the relay's own tunnel
 * address (10.8.0.1/32, its network 10.8.0.0/24, a wider block) or the
 * network's address was taken. */
static void test_wgp_set_check_self_refuses_a_peer_holding_the_relays_address(void **state)
{
	struct wgp_peer p[2] = {peer(1, "10.8.0.2/32"), peer(2, "10.8.0.3/32")};
	const uint8_t v4[4] = {10, 8, 0, 1};
	uint8_t v6[16] = {0xfd, 0x00};
	const char *bad[] = {"10.8.0.1/32", "10.8.0.0/24", "10.0.0.0/8", "0.0.0.0/0",
			     "10.8.0.0/32"};
	char err[160];

	(void)state;
	v6[15] = 1; /* fd00::1 */
	assert_int_equal(wgp_set_check_self(p, 2, AF_INET, v4, 24, err, sizeof(err)), 0);
	assert_int_equal(wgp_set_check_self(NULL, 0, AF_INET, v4, 24, err, sizeof(err)), 0);
	/* Networks beside it, and the other family's blocks, are the peers'. */
	p[1].allowed[1] = cidr("10.8.1.0/24");
	p[1].allowed[2] = cidr("::/0");
	p[1].allowed[3] = cidr("10.8.0.128/25");
	p[1].n_allowed = 4;
	assert_int_equal(wgp_set_check_self(p, 2, AF_INET, v4, 24, err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p[1].allowed[4] = cidr(bad[i]);
		p[1].n_allowed = 5;
		assert_int_equal(wgp_set_check_self(p, 2, AF_INET, v4, 24, err, sizeof(err)),
				 -EINVAL);
		assert_non_null(strstr(err, "peer 2's allowed IP"));
		assert_non_null(strstr(err, i < 4 ? "holds the relay's own tunnel address 10.8.0.1"
						  : "tunnel network's address 10.8.0.0"));
	}
	/* A /32 relay address has no network address apart from itself. */
	p[1].allowed[4] = cidr("10.8.0.0/32");
	assert_int_equal(wgp_set_check_self(p, 2, AF_INET, v4, 32, err, sizeof(err)), 0);
	/* IPv6 alike. */
	p[1].n_allowed = 2;
	p[1].allowed[1] = cidr("fd00::/64");
	assert_int_equal(wgp_set_check_self(p, 2, AF_INET6, v6, 64, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "fd00::/64 holds the relay's own tunnel address fd00::1"));
	p[1].allowed[1] = cidr("fd00:0:0:1::/64");
	assert_int_equal(wgp_set_check_self(p, 2, AF_INET6, v6, 64, err, sizeof(err)), 0);
}

static void test_wgp_plan_of_1000_peers_with_10_changed_has_10_ops(void **state)
{
	enum { N = 1000 };
	static struct wgp_peer cur[N], want[N];
	static struct wgp_op ops[2 * N];
	char ip[32];
	int n, rm = 0, up = 0, add = 0;

	for (unsigned i = 0; i < N; i++) {
		snprintf(ip, sizeof(ip), "10.8.%u.%u/32", i / 250, i % 250 + 1);
		cur[i] = peer(i, ip);
		want[N - 1 - i] = peer(i, ip);
	}
	for (unsigned i = 0; i < 4; i++) /* 4 revoked, 4 new */
		want[i] = peer(5000 + i, "10.9.0.1/32");
	want[500].allowed[0] = cidr("10.9.1.1/32"); /* 2 moved */
	want[501].allowed[0] = cidr("10.9.1.2/32");
	n = wgp_plan(cur, N, want, N, ops, 2 * N);
	assert_int_equal(n, 10);
	for (int i = 0; i < n; i++) {
		rm += ops[i].kind == WGP_OP_REMOVE;
		up += ops[i].kind == WGP_OP_UPDATE;
		add += ops[i].kind == WGP_OP_ADD;
	}
	assert_int_equal(rm, 4);
	assert_int_equal(up, 2);
	assert_int_equal(add, 4);
}

static void test_wgp_uapi_set_writes_the_plan_as_wireguard_go_reads_it(void **state)
{
	struct wgp_peer cur[2], want[2];
	struct wgp_op ops[4];
	char out[2048];
	size_t done;
	int n, len;

	cur[0] = peer(1, "10.8.0.1/32");
	cur[1] = peer(2, "10.8.0.2/32");
	memset(cur[1].psk, 0x11, WGP_KEY_LEN);
	want[0] = peer(2, "10.8.0.2/32"); /* its preshared key dropped */
	want[1] = peer(3, "10.8.0.3/32");
	want[1].allowed[1] = cidr("fd00::3/128");
	want[1].n_allowed = 2;
	memset(want[1].psk, 0xab, WGP_KEY_LEN);
	n = wgp_plan(cur, 2, want, 2, ops, 4);
	assert_int_equal(n, 3);
	len = wgp_uapi_set(out, sizeof(out), ops, (size_t)n, &done);
	assert_int_equal(done, 3);
	assert_int_equal(len, strlen(out));
	assert_string_equal(
	    out, "set=1\n"
		 "public_key=0001000000000000000000000000000000000000000000000000000000000040\n"
		 "remove=true\n"
		 "public_key=0002000000000000000000000000000000000000000000000000000000000040\n"
		 "preshared_key=0000000000000000000000000000000000000000000000000000000000000000\n"
		 "public_key=0003000000000000000000000000000000000000000000000000000000000040\n"
		 "preshared_key=abababababababababababababababababababababababababababababababab\n"
		 "replace_allowed_ips=true\n"
		 "allowed_ip=10.8.0.3/32\n"
		 "allowed_ip=fd00::3/128\n"
		 "\n");
	/* In pieces: each request holds whole ops and ends with its empty line. */
	len = wgp_uapi_set(out, 100, ops, (size_t)n, &done);
	assert_int_equal(done, 1);
	assert_string_equal(
	    out, "set=1\n"
		 "public_key=0001000000000000000000000000000000000000000000000000000000000040\n"
		 "remove=true\n"
		 "\n");
	assert_int_equal(wgp_uapi_set(out, 60, ops, (size_t)n, &done), -ENOSPC);
	assert_int_equal(done, 0);
	assert_int_equal(wgp_uapi_set(out, 8, ops, 0, &done), 7);
	assert_string_equal(out, "set=1\n\n");
}

static void test_wgp_uapi_parse_get_reads_wireguard_gos_answer(void **state)
{
	struct wgp_peer peers[2], want[1];
	struct wgp_device dev;
	struct wgp_op ops[3];
	size_t n;
	const char *b64 = "YQrmQd8B1sgXLyuBvT1EMaFNCuJmXAlptsSVU41dPXo=";

	assert_int_equal(wgp_uapi_parse_get(captured_get, strlen(captured_get), &dev, peers, 2, &n),
			 0);
	assert_true(dev.has_private_key);
	assert_int_equal(dev.listen_port, 21820);
	assert_int_equal(n, 1);
	assert_int_equal(peers[0].n_allowed, 1);
	assert_int_equal(peers[0].handshake_sec, 0);
	/* The same peer desired: nothing to do. */
	memset(want, 0, sizeof(want));
	assert_true(wgp_key_from_b64(b64, strlen(b64), want[0].key));
	want[0].allowed[0] = cidr("10.8.0.3/32");
	want[0].n_allowed = 1;
	assert_int_equal(wgp_plan(peers, 1, want, 1, ops, 3), 0);
	/* Too many peers for the caller's array. */
	assert_int_equal(wgp_uapi_parse_get(captured_get, strlen(captured_get), &dev, peers, 0, &n),
			 -E2BIG);
}

/* What a reconcile reads to tell that wireguard-go restarted under the
 * relay: a new device answers no private key and a port of its own. */
static void test_wgp_device_differs_after_a_restart_or_a_wg_set(void **state)
{
	static const char restarted[] = "listen_port=30123\nerrno=0\n\n";
	struct wgp_peer peers[2];
	struct wgp_device dev;
	/* captured_get's private_key. */
	static const uint8_t priv[WGP_KEY_LEN] = {0xd0, 0x77, 0x03, 0x46, 0xc9, 0x21, 0xdb, 0x11,
						  0xab, 0xb2, 0x97, 0xdb, 0x0b, 0xdc, 0xeb, 0xde,
						  0xc9, 0xb7, 0xce, 0x65, 0x26, 0xe0, 0x63, 0xcb,
						  0x00, 0x40, 0x7d, 0x55, 0x36, 0x07, 0xdf, 0x5c};
	uint8_t other[WGP_KEY_LEN];
	size_t n;

	(void)state;
	/* The device as the relay keyed it. */
	assert_int_equal(wgp_uapi_parse_get(captured_get, strlen(captured_get), &dev, peers, 2, &n),
			 0);
	assert_memory_equal(dev.private_key, priv, WGP_KEY_LEN);
	assert_false(wgp_device_differs(&dev, priv, 21820));
	/* Another port (wg set IF listen-port), another key (wg set IF
	 * private-key): not the relay's. */
	assert_true(wgp_device_differs(&dev, priv, 21821));
	memcpy(other, priv, sizeof(other));
	other[WGP_KEY_LEN - 1] ^= 1;
	assert_true(wgp_device_differs(&dev, other, 21820));
	/* wireguard-go started again: no key, a random port, no peer. */
	assert_int_equal(wgp_uapi_parse_get(restarted, strlen(restarted), &dev, peers, 2, &n), 0);
	assert_false(dev.has_private_key);
	assert_int_equal(n, 0);
	assert_true(wgp_device_differs(&dev, priv, 21820));
	assert_true(wgp_device_differs(&dev, priv, 30123));
	/* A key of all zeros is none, even on the relay's port. */
	memset(other, 0, sizeof(other));
	dev.listen_port = 21820;
	assert_true(wgp_device_differs(&dev, other, 21820));
}

static void test_wgp_uapi_parse_get_refuses_truncated_or_malformed_answers(void **state)
{
	struct wgp_peer peers[2];
	struct wgp_device dev;
	size_t n, len = strlen(captured_get);
	char buf[2048];

	for (size_t cut = 0; cut < len; cut++)
		assert_int_equal(wgp_uapi_parse_get(captured_get, cut, &dev, peers, 2, &n),
				 -EPROTO);
	assert_int_equal(wgp_uapi_errno("errno=0\n\n", 9), 0);
	assert_int_equal(wgp_uapi_errno("errno=22\n\n", 10), -22);
	assert_int_equal(wgp_uapi_errno("errno=x\n\n", 9), -EPROTO);
	assert_int_equal(wgp_uapi_errno("\n", 1), -EPROTO);
	assert_int_equal(wgp_uapi_errno("errno=0\nlisten_port=1\n\n", 23), -EPROTO);
	assert_int_equal(wgp_uapi_errno("listen_port\nerrno=0\n\n", 21), -EPROTO);
	snprintf(buf, sizeof(buf), "public_key=00\nerrno=0\n\n");
	assert_int_equal(wgp_uapi_parse_get(buf, strlen(buf), &dev, peers, 2, &n), -EPROTO);
	snprintf(buf, sizeof(buf), "listen_port=65536\nerrno=0\n\n");
	assert_int_equal(wgp_uapi_parse_get(buf, strlen(buf), &dev, peers, 2, &n), -EPROTO);
	/* More allowed IPs than kept: marked, never taken for unchanged. */
	size_t o = (size_t)snprintf(buf, sizeof(buf), "public_key=%064d\n", 0);
	for (int i = 0; i <= WGP_ALLOWED_MAX; i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "allowed_ip=10.0.0.%d/32\n", i);
	o += (size_t)snprintf(buf + o, sizeof(buf) - o, "future_key=1\nerrno=0\n\n");
	assert_int_equal(wgp_uapi_parse_get(buf, o, &dev, peers, 2, &n), 0);
	assert_int_equal(n, 1);
	assert_true(peers[0].allowed_over);
	assert_int_equal(peers[0].n_allowed, WGP_ALLOWED_MAX);
	struct wgp_peer want = peers[0];
	struct wgp_op ops[2];
	want.allowed_over = false;
	assert_int_equal(wgp_plan(peers, 1, &want, 1, ops, 2), 1);
	assert_true(ops[0].allowed_changed);
}

/* Handshake ages into buckets: at a bound is in its bucket, past the last
 * bound in the last; never is apart; skipped peers and a handshake in the
 * future (age 0) as said; a bogus time far in the past cannot wrap. */
static void test_wgp_ages_buckets_each_peer_by_its_last_handshake(void **state)
{
	static const uint64_t bound[3] = {10000000000ull, 60000000000ull, 180000000000ull};
	struct wgp_peer p[8];
	bool skip[8] = {false};
	uint64_t hist[4], sum, never;
	const int64_t now = 1700000000;

	(void)state;
	memset(p, 0, sizeof(p));
	p[0].handshake_sec = now - 10;	/* exactly 10 s: first bucket */
	p[1].handshake_sec = now - 11;	/* second */
	p[2].handshake_sec = now - 200; /* past the last bound */
	p[3].handshake_sec = 0;		/* never */
	p[4].handshake_sec = now + 5;	/* the clock stepped back: 0 */
	p[5].handshake_sec = now - 100; /* skipped (removed) */
	skip[5] = true;
	p[6].handshake_sec = INT64_MIN + 1; /* bogus: the oldest */
	p[7].handshake_sec = now - 1;
	p[7].handshake_nsec = 500000000; /* 0.5 s ago */
	wgp_ages(p, 8, skip, now, 0, bound, 3, hist, &sum, &never);
	assert_int_equal(hist[0], 3);
	assert_int_equal(hist[1], 1);
	assert_int_equal(hist[2], 0);
	assert_int_equal(hist[3], 2);
	assert_int_equal(never, 1);
	assert_true(sum > (10ull + 11 + 200) * 1000000000ull + 500000000ull);
	/* No skip list: every peer counts. */
	wgp_ages(p, 6, NULL, now, 0, bound, 3, hist, &sum, &never);
	assert_int_equal(hist[0] + hist[1] + hist[2] + hist[3], 5);
	assert_int_equal(hist[2], 1);
	assert_int_equal(sum, (10ull + 11 + 200 + 0 + 100) * 1000000000ull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wgp_keys_are_the_canonical_base64_of_32_bytes),
	    cmocka_unit_test(test_wgp_cidr_parse_clears_host_bits_and_writes_back),
	    cmocka_unit_test(test_wgp_public_key_is_x25519_of_rfc_7748),
	    cmocka_unit_test(test_wgp_plan_leaves_an_unchanged_set_alone),
	    cmocka_unit_test(test_wgp_plan_removes_then_updates_then_adds),
	    cmocka_unit_test(test_wgp_plan_refuses_a_set_naming_a_key_twice),
	    cmocka_unit_test(test_wgp_set_check_refuses_the_own_key_and_a_network_of_two_peers),
	    cmocka_unit_test(test_wgp_set_check_self_refuses_a_peer_holding_the_relays_address),
	    cmocka_unit_test(test_wgp_plan_of_1000_peers_with_10_changed_has_10_ops),
	    cmocka_unit_test(test_wgp_uapi_set_writes_the_plan_as_wireguard_go_reads_it),
	    cmocka_unit_test(test_wgp_uapi_parse_get_reads_wireguard_gos_answer),
	    cmocka_unit_test(test_wgp_device_differs_after_a_restart_or_a_wg_set),
	    cmocka_unit_test(test_wgp_uapi_parse_get_refuses_truncated_or_malformed_answers),
	    cmocka_unit_test(test_wgp_ages_buckets_each_peer_by_its_last_handshake),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
