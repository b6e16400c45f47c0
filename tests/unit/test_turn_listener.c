/* SPDX-License-Identifier: ISC */
/* The TURN listener's requests and data path over a fake loop: a client's
 * datagrams handed to its UDP endpoint as a loop would, its answers and the
 * datagrams to peers taken from the fake's send and forward. The listener
 * and the relayed sockets are bound on 127.0.0.1 (below 32768), never sent
 * to: the peers are addresses no packet goes to. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "banlist.h"
#include "endpoint.h"
#include "loop.h"
#include "stats.h"
#include "stun.h"
#include "turn.h"
#include "turn_conf.h"

#include "fake_loop.h"

#define SECRET "unit-test-secret-unit-test-secret-0123456789"
#define PEER   "93.184.216.34" /* global unicast: the default policy lets it */
#define OTHER  "93.184.216.35" /* ... and this one, without a permission */
#define CH     0x4001

struct fix {
	struct turn_conf conf;
	struct turn_shared sh;
	_Atomic int lifecycle;
	struct endpoint_table ep;
	struct loop loop;
	struct turn_listener l;
	union etr_sockaddr client;
	uint8_t key[TURN_KEY_LEN];
	char user[64];
	uint8_t realm[64], nonce[128];
	size_t realm_len, nonce_len;
	struct banlist bans;
	bool bans_set;
};

/* A port below 32768 free for UDP on 127.0.0.1 a moment ago, and the first
 * of n free after it (the relayed range): drawn from a spread start. */
static uint16_t free_udp_run(unsigned n)
{
	unsigned start = 20000 + (unsigned)((getpid() * 7919u + (unsigned)time(NULL)) % 9000u);

	for (unsigned base = start; base + n < 32000; base += n) {
		unsigned k;

		for (k = 0; k < n; k++) {
			struct sockaddr_in a = {.sin_family = AF_INET,
						.sin_port = htons((uint16_t)(base + k))};
			int fd = socket(AF_INET, SOCK_DGRAM, 0), rc;

			a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
			close(fd);
			if (rc < 0)
				break;
		}
		if (k == n)
			return (uint16_t)base;
	}
	fail_msg("no %u free UDP ports below 32000", n);
	return 0;
}

static void sa4(union etr_sockaddr *a, const char *ip, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	a->in.sin_family = AF_INET;
	a->in.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, ip, &a->in.sin_addr), 1);
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	char err[256];
	uint16_t base = free_udp_run(9);

	assert_non_null(f);
	setenv("ETRELAY_TURN_SECRET", SECRET, 1);
	unsetenv("ETRELAY_TURN_SECRET_NEXT");
	conf_turn_defaults(&f->conf);
	sa4(&f->conf.listen, "127.0.0.1", base);
	f->conf.listen_set = true;
	sa4(&f->conf.relay_addr, "127.0.0.1", 0);
	f->conf.port_min = (uint16_t)(base + 1);
	f->conf.port_max = (uint16_t)(base + 8);
	f->conf.max_allocations = 8;
	if (turn_shared_init(&f->sh, 0, &f->conf, 1, err, sizeof(err)) < 0)
		fail_msg("turn_shared_init: %s", err);
	f->sh.lifecycle = &f->lifecycle;
	endpoint_table_init(&f->ep);
	assert_int_equal(turn_listener_open(&f->l, &f->sh, 0, 0, false), 0);
	assert_int_equal(turn_listener_attach(&f->l, &fake_loop_ops, &f->loop, &f->ep), 0);
	sa4(&f->client, "127.0.0.1", 40000); /* never bound: the fake sends nothing */
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	turn_listener_take_bans(&f->l, NULL);
	turn_listener_shutdown(&f->l);
	turn_listener_free(&f->l);
	turn_shared_free(&f->sh);
	if (f->bans_set)
		banlist_free(&f->bans);
	free(f);
	return 0;
}

/* A datagram from the client to the listener's UDP socket, as a loop hands
 * it: with headroom in front, now its turn's time. */
static void deliver(struct fix *f, const uint8_t *p, size_t n)
{
	static uint8_t buf[LOOP_HEADROOM + 4096];
	struct loop_dgram d = {0};

	assert_true(n <= sizeof(buf) - LOOP_HEADROOM);
	memcpy(buf + LOOP_HEADROOM, p, n);
	d.from = &f->client.sa;
	d.fromlen = sizeof(f->client.in);
	d.data = buf + LOOP_HEADROOM;
	d.len = n;
	d.headroom = LOOP_HEADROOM;
	d.now = loop_now();
	assert_true(endpoint_dgram(&f->ep, endpoint_id(&f->ep, f->l.slot_udp), &d));
}

/* The answer the listener sent last (parsed into m): its class. */
static enum stun_class answer(struct fix *f, unsigned sent_before, struct stun_msg *m)
{
	assert_int_equal(f->loop.nsent, sent_before + 1);
	assert_int_equal(stun_parse(f->loop.last, f->loop.last_len, m), 0);
	return m->cls;
}

static int error_of(const struct stun_msg *m)
{
	int code = 0;
	const char *r;
	size_t rl;

	return stun_get_error(m, &code, &r, &rl) ? code : 0;
}

/* A request of method with attributes from add (may be NULL), signed when
 * the fixture has a key: the answer's error code (0: success). */
static int request(struct fix *f, unsigned method,
		   void (*add)(struct fix *, struct stun_builder *, const void *), const void *arg)
{
	uint8_t buf[1024], tid[STUN_TID_LEN];
	struct stun_builder b;
	struct stun_msg m;
	unsigned before = f->loop.nsent;
	size_t n;

	for (unsigned k = 0; k < STUN_TID_LEN; k++)
		tid[k] = (uint8_t)rand();
	stun_build_begin(&b, buf, sizeof(buf), stun_type(method, STUN_REQUEST), tid);
	if (add)
		add(f, &b, arg);
	if (f->user[0]) {
		stun_add_attr(&b, STUN_A_USERNAME, f->user, strlen(f->user));
		stun_add_attr(&b, STUN_A_REALM, f->realm, f->realm_len);
		stun_add_attr(&b, STUN_A_NONCE, f->nonce, f->nonce_len);
		stun_add_integrity(&b, f->key, sizeof(f->key));
	}
	n = stun_build_finish(&b);
	assert_true(n > 0);
	deliver(f, buf, n);
	if (answer(f, before, &m) == STUN_SUCCESS)
		return 0;
	assert_int_equal(m.cls, STUN_ERROR);
	if (error_of(&m) == 401 && !f->user[0]) {
		/* The challenge: keep its realm and nonce. */
		assert_true(stun_has(m.realm) && stun_has(m.nonce));
		f->realm_len = m.realm.len;
		memcpy(f->realm, stun_attr_ptr(&m, m.realm), m.realm.len);
		f->nonce_len = m.nonce.len;
		memcpy(f->nonce, stun_attr_ptr(&m, m.nonce), m.nonce.len);
	}
	return error_of(&m);
}

static void add_transport(struct fix *f, struct stun_builder *b, const void *arg)
{
	(void)f, (void)arg;
	stun_add_u32(b, STUN_A_REQUESTED_TRANSPORT, (uint32_t)STUN_TRANSPORT_UDP << 24);
}

static void add_peer(struct fix *f, struct stun_builder *b, const void *arg)
{
	(void)f;
	stun_add_xor_addr(b, STUN_A_XOR_PEER_ADDRESS, arg);
}

static void add_channel(struct fix *f, struct stun_builder *b, const void *arg)
{
	(void)f;
	stun_add_u32(b, STUN_A_CHANNEL_NUMBER, (uint32_t)CH << 16);
	stun_add_xor_addr(b, STUN_A_XOR_PEER_ADDRESS, arg);
}

/* Allocate: the challenge, then the signed request with REST credentials
 * under SECRET. */
static void allocate(struct fix *f)
{
	char pw[TURN_PASSWORD_SIZE];

	assert_int_equal(request(f, STUN_ALLOCATE, add_transport, NULL), 401);
	snprintf(f->user, sizeof(f->user), "%llu:alice", (unsigned long long)time(NULL) + 3600);
	assert_true(turn_rest_password((const uint8_t *)SECRET, strlen(SECRET), f->user,
				       strlen(f->user), pw) > 0);
	assert_int_equal(turn_longterm_key(f->user, strlen(f->user), (const char *)f->realm,
					   f->realm_len, pw, strlen(pw), f->key),
			 0);
	assert_int_equal(request(f, STUN_ALLOCATE, add_transport, NULL), 0);
	assert_int_equal(atomic_load(&f->sh.l[0].active), 1);
	/* The relayed socket joined the loop (after the listener's). */
	assert_int_equal(f->loop.nadded, 2);
}

/* A Send indication of payload to peer (no answer comes to one). */
static void send_ind(struct fix *f, const union etr_sockaddr *peer, const char *payload)
{
	uint8_t buf[512], tid[STUN_TID_LEN] = {1, 2, 3};
	struct stun_builder b;
	unsigned before = f->loop.nsent;

	stun_build_begin(&b, buf, sizeof(buf), stun_type(STUN_SEND, STUN_INDICATION), tid);
	stun_add_xor_addr(&b, STUN_A_XOR_PEER_ADDRESS, peer);
	stun_add_attr(&b, STUN_A_DATA, payload, strlen(payload));
	deliver(f, buf, stun_build_finish(&b));
	assert_int_equal(f->loop.nsent, before);
}

static void channel_data(struct fix *f, const char *payload)
{
	uint8_t buf[512];
	size_t n = stun_chan_build(buf, sizeof(buf), CH, payload, strlen(payload), false);

	assert_true(n > 0);
	deliver(f, buf, n);
}

static uint64_t dropped(struct fix *f, enum turn_drop why)
{
	return atomic_load(&f->l.stats.dropped[why]);
}

/* The last datagram to a peer went to peer, len bytes, from the relayed
 * socket of the (only) allocation. */
static void assert_to_peer(struct fix *f, unsigned nfwd, const union etr_sockaddr *peer, size_t len)
{
	assert_int_equal(f->loop.nfwd, nfwd);
	assert_true(f->loop.fwd[nfwd - 1].to_client); /* a destination given */
	assert_true(addr_equal(&f->loop.fwd[nfwd - 1].dst, peer));
	assert_int_equal(f->loop.fwd[nfwd - 1].len, len);
	assert_int_equal(f->loop.fwd[nfwd - 1].fd, f->loop.added[1].fd);
}

static void ban(struct fix *f, const char *text)
{
	char err[256];

	if (f->bans_set)
		banlist_free(&f->bans);
	assert_int_equal(banlist_load(&f->bans, text, strlen(text), "bans", err, sizeof(err)), 0);
	f->bans_set = true;
	turn_listener_take_bans(&f->l, &f->bans);
}

static void test_allocate_permission_send_reaches_the_peer(void **state)
{
	struct fix *f = *state;
	union etr_sockaddr peer, other;

	sa4(&peer, PEER, 5000);
	sa4(&other, OTHER, 5000);
	allocate(f);
	assert_int_equal(request(f, STUN_CREATE_PERMISSION, add_peer, &peer), 0);
	send_ind(f, &peer, "hello peer");
	assert_to_peer(f, 1, &peer, strlen("hello peer"));
	assert_int_equal(atomic_load(&f->l.stats.dgrams_to_peer), 1);
	assert_int_equal(atomic_load(&f->l.stats.bytes_to_peer), strlen("hello peer"));
	/* A peer without a permission gets nothing, counted. */
	send_ind(f, &other, "not you");
	assert_int_equal(f->loop.nfwd, 1);
	assert_int_equal(dropped(f, TURN_DROP_NO_PERMISSION), 1);
	/* ChannelData on a channel bound to the peer. */
	assert_int_equal(request(f, STUN_CHANNEL_BIND, add_channel, &peer), 0);
	channel_data(f, "on the channel");
	assert_to_peer(f, 2, &peer, strlen("on the channel"));
	assert_int_equal(atomic_load(&f->l.stats.dgrams_to_peer), 2);
}

static void test_banned_peer_gets_nothing_from_the_next_datagram(void **state)
{
	struct fix *f = *state;
	union etr_sockaddr peer;

	sa4(&peer, PEER, 5000);
	allocate(f);
	assert_int_equal(request(f, STUN_CREATE_PERMISSION, add_peer, &peer), 0);
	assert_int_equal(request(f, STUN_CHANNEL_BIND, add_channel, &peer), 0);
	send_ind(f, &peer, "before");
	channel_data(f, "before");
	assert_int_equal(f->loop.nfwd, 2);

	/* A reload bans the peer: its permission and channel stay, but
	 * neither path sends to it, each datagram counted banned. */
	ban(f, "# reloaded\n" PEER "\n");
	send_ind(f, &peer, "after");
	channel_data(f, "after");
	assert_int_equal(f->loop.nfwd, 2);
	assert_int_equal(dropped(f, TURN_DROP_BANNED), 2);
	assert_int_equal(dropped(f, TURN_DROP_PEER_REFUSED), 0);
	assert_int_equal(atomic_load(&f->l.stats.dgrams_to_peer), 2);
	/* Nor is the permission renewed (403, peer_rejected). */
	assert_int_equal(request(f, STUN_CREATE_PERMISSION, add_peer, &peer), 403);
	assert_int_equal(request(f, STUN_CHANNEL_BIND, add_channel, &peer), 403);
	assert_int_equal(atomic_load(&f->l.stats.peer_rejected), 2);
	/* The client is not banned: its allocation lives. */
	assert_int_equal(atomic_load(&f->sh.l[0].active), 1);

	/* The next reload lifts it: the check is the list in force. */
	ban(f, "# none\n");
	send_ind(f, &peer, "again");
	assert_to_peer(f, 3, &peer, strlen("again"));
}

static void test_refused_peer_is_refused_by_the_same_check(void **state)
{
	struct fix *f = *state;
	union etr_sockaddr priv, loop4;

	sa4(&priv, "10.0.0.1", 5000);
	sa4(&loop4, "127.0.0.1", 22);
	allocate(f);
	/* The policy refuses private and host addresses: 403 for the
	 * requests, nothing sent. */
	assert_int_equal(request(f, STUN_CREATE_PERMISSION, add_peer, &priv), 403);
	assert_int_equal(request(f, STUN_CHANNEL_BIND, add_channel, &loop4), 403);
	assert_int_equal(atomic_load(&f->l.stats.peer_rejected), 2);
	send_ind(f, &priv, "no");
	assert_int_equal(f->loop.nfwd, 0);
	assert_int_equal(dropped(f, TURN_DROP_NO_PERMISSION), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_allocate_permission_send_reaches_the_peer, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_banned_peer_gets_nothing_from_the_next_datagram,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refused_peer_is_refused_by_the_same_check, setup,
					    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
