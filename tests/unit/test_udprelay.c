/* SPDX-License-Identifier: ISC */
/* Unit tests for udprelay.c, the generic UDP session forwarder, driven
 * through a fake loop (it records what the forwarder asks of it and hands
 * datagrams in through the endpoint table), a fake socket factory and a
 * stub policy. No socket is opened. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "prbe_port.h"
#include "udprelay.h"
#include "unit_util.h"

#include "fake_loop.h"

#define SEC 1000000000ull

/* The stub policy: a fixed verdict, assurance on demand, and a record. */
struct stub {
	unsigned verdict;
	bool assure_on_open; /* like a master's session */
	bool refuse_on_open;
	bool pass_down;
	unsigned client_calls, opened, server_calls, closed, refused;
	uint32_t last_idx; /* what client_dgram was given */
};

static unsigned stub_client(void *p, struct udprelay *u, uint32_t idx,
			    const union etr_sockaddr *client, struct loop_dgram *d)
{
	struct stub *s = p;

	(void)u, (void)client, (void)d;
	s->client_calls++;
	s->last_idx = idx;
	return s->verdict;
}

static bool stub_opened(void *p, struct udprelay *u, uint32_t idx, struct loop_dgram *d,
			unsigned verdict)
{
	struct stub *s = p;

	(void)d, (void)verdict;
	s->opened++;
	if (s->assure_on_open)
		session_assure(udprelay_sessions(u), idx);
	return !s->refuse_on_open;
}

static bool stub_server(void *p, struct udprelay *u, uint32_t idx, struct loop_dgram *d)
{
	struct stub *s = p;

	(void)u, (void)idx, (void)d;
	s->server_calls++;
	return s->pass_down;
}

static void stub_closed(void *p, struct udprelay *u, uint32_t idx)
{
	struct stub *s = p;

	(void)u, (void)idx;
	s->closed++;
}

static void stub_refused(void *p, uint64_t now)
{
	struct stub *s = p;

	(void)now;
	s->refused++;
}

static const struct udprelay_policy_ops stub_ops = {
    .name = "stub",
    .client_dgram = stub_client,
    .session_opened = stub_opened,
    .server_dgram = stub_server,
    .session_closed = stub_closed,
    .upstream_refused = stub_refused,
};

struct fixture {
	struct udprelay u;
	struct loop l;
	struct fake_sock sock;
	struct stub pol;
	struct endpoint_table ep;
	struct relay_stats stats;
	struct etr_stats global;
	uint8_t buf[64];
};

static const uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static struct udprelay_conf conf_default(void)
{
	struct udprelay_conf c = {
	    .name = "test",
	    .max_sessions = 8,
	    .sessions_per_ip = 8,
	    .session_rate = 1000,
	    .ip_session_rate = 1000,
	    .session_timeout = 30 * SEC,
	    .unassured_timeout = 10 * SEC,
	};
	return c;
}

static void setup_with(struct fixture *f, const struct udprelay_conf *c)
{
	memset(f, 0, sizeof(*f));
	f->sock.next_fd = FD_BASE;
	f->pol.verdict = UDPRELAY_FORWARD;
	f->pol.pass_down = true;
	endpoint_table_init(&f->ep);
	assert_int_equal(udprelay_init(&f->u, c, PUB_FD, key, key, &f->stats, &f->global, SEC), 0);
	udprelay_set_sockops(&f->u, &fake_sockops, &f->sock);
	udprelay_set_policy(&f->u, &stub_ops, &f->pol);
	assert_int_equal(udprelay_attach(&f->u, &fake_loop_ops, &f->l, &f->ep), 0);
	/* The public socket is the first the loop hears of. */
	assert_int_equal(f->l.nadded, 1);
	assert_int_equal(f->l.added[0].fd, PUB_FD);
}

static int setup(void **state)
{
	static struct fixture f;
	struct udprelay_conf c = conf_default();

	setup_with(&f, &c);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	udprelay_free(&f->u);
	return 0;
}

/* A datagram from ip:port on the public socket, through the endpoint
 * table as the daemon dispatches it. */
static void from_client(struct fixture *f, const char *ip, uint16_t port, uint64_t now)
{
	union etr_sockaddr sa;
	struct loop_dgram d = {
	    .data = f->buf,
	    .len = 20,
	    .now = now,
	};

	sa_v4(&sa, ip, port);
	d.from = &sa.sa;
	d.fromlen = addr_len(&sa);
	assert_true(endpoint_dgram(&f->ep, endpoint_id(&f->ep, f->u.ep_public), &d));
}

/* A datagram from the upstream on the session socket with loop id. */
static bool from_server(struct fixture *f, uint32_t id, uint64_t now)
{
	struct loop_dgram d = {
	    .data = f->buf,
	    .len = 30,
	    .now = now,
	};

	return endpoint_dgram(&f->ep, id, &d);
}

static uint32_t session_of(struct fixture *f, const char *ip, uint16_t port)
{
	union etr_sockaddr sa;

	sa_v4(&sa, ip, port);
	return session_lookup(&f->u.st, &sa);
}

static void test_udprelay_new_client_opens_a_session_and_its_datagram_goes_upstream(void **state)
{
	struct fixture *f = *state;
	uint32_t idx;

	from_client(f, "192.0.2.1", 5000, SEC);
	idx = session_of(f, "192.0.2.1", 5000);
	assert_int_not_equal(idx, SESSION_NONE);
	assert_int_equal(f->pol.client_calls, 1);
	assert_int_equal(f->pol.last_idx, SESSION_NONE);
	assert_int_equal(f->pol.opened, 1);
	/* Its own socket, registered with the loop under the session's id. */
	assert_int_equal(f->sock.opened, 1);
	assert_int_equal(f->l.nadded, 2);
	assert_int_equal(f->l.added[1].fd, FD_BASE);
	assert_int_equal(f->l.added[1].id, udprelay_session_id(&f->u, idx));
	/* Forwarded on it, connected (no destination). */
	assert_int_equal(f->l.nfwd, 1);
	assert_int_equal(f->l.fwd[0].fd, FD_BASE);
	assert_false(f->l.fwd[0].to_client);
	assert_int_equal(f->l.fwd[0].id, udprelay_session_id(&f->u, idx));
	assert_int_equal(STAT_GET(f->stats.sessions_opened), 1);
	assert_int_equal(STAT_GET(f->stats.up_pkts), 1);
	assert_int_equal(STAT_GET(f->stats.up_bytes), 20);
	/* Its next datagram takes the same session, and the policy sees it. */
	from_client(f, "192.0.2.1", 5000, 2 * SEC);
	assert_int_equal(f->pol.last_idx, idx);
	assert_int_equal(f->sock.opened, 1);
	assert_int_equal(f->l.nfwd, 2);
	assert_int_equal(f->l.fwd[1].fd, FD_BASE);
	assert_int_equal(f->u.st.s[idx].pkts_up, 2);
}

static void test_udprelay_server_answer_goes_to_its_client_from_the_public_socket(void **state)
{
	struct fixture *f = *state;
	union etr_sockaddr b;
	uint32_t ia, ib;

	from_client(f, "192.0.2.1", 5000, SEC);
	from_client(f, "198.51.100.7", 6000, SEC);
	ia = session_of(f, "192.0.2.1", 5000);
	ib = session_of(f, "198.51.100.7", 6000);
	assert_int_not_equal(ia, ib);
	f->l.nfwd = 0;
	assert_true(from_server(f, udprelay_session_id(&f->u, ib), 2 * SEC));
	assert_int_equal(f->pol.server_calls, 1);
	assert_int_equal(f->l.nfwd, 1);
	assert_int_equal(f->l.fwd[0].fd, PUB_FD);
	assert_true(f->l.fwd[0].to_client);
	sa_v4(&b, "198.51.100.7", 6000);
	assert_true(addr_equal(&f->l.fwd[0].dst, &b));
	assert_int_equal(f->l.fwd[0].id, udprelay_session_id(&f->u, ib));
	assert_int_equal(STAT_GET(f->stats.down_pkts), 1);
	assert_int_equal(STAT_GET(f->stats.down_bytes), 30);
	assert_int_equal(f->u.st.s[ib].pkts_down, 1);
	assert_int_equal(f->u.st.s[ia].pkts_down, 0);
	/* What the policy holds back does not leave. */
	f->pol.pass_down = false;
	assert_true(from_server(f, udprelay_session_id(&f->u, ia), 2 * SEC));
	assert_int_equal(f->l.nfwd, 1);
}

static void test_udprelay_expiry_closes_idle_sessions(void **state)
{
	struct fixture *f = *state;
	uint32_t idx, id;

	from_client(f, "192.0.2.1", 5000, SEC);
	idx = session_of(f, "192.0.2.1", 5000);
	id = udprelay_session_id(&f->u, idx);
	session_assure(&f->u.st, idx); /* only the idle timeout applies */
	assert_int_equal(udprelay_next_deadline(&f->u), SEC + 30 * SEC);
	udprelay_expire(&f->u, 30 * SEC);
	assert_int_equal(session_of(f, "192.0.2.1", 5000), idx);
	assert_int_equal(f->l.ndeleted, 0);
	udprelay_expire(&f->u, 31 * SEC);
	assert_int_equal(session_of(f, "192.0.2.1", 5000), SESSION_NONE);
	assert_int_equal(f->l.ndeleted, 1);
	assert_int_equal(f->l.deleted[0].fd, FD_BASE);
	assert_int_equal(f->l.deleted[0].id, id);
	assert_int_equal(f->sock.closed, 1);
	assert_int_equal(f->sock.last_closed, FD_BASE);
	assert_int_equal(f->pol.closed, 1);
	assert_int_equal(STAT_GET(f->stats.sessions_closed[CLOSE_IDLE]), 1);
	assert_int_equal(STAT_GET(f->stats.sessions_active), 0);
	assert_int_equal(udprelay_next_deadline(&f->u), UINT64_MAX);
}

static void test_udprelay_unassured_sessions_end_after_their_own_timeout(void **state)
{
	struct fixture *f = *state;

	from_client(f, "192.0.2.1", 5000, SEC);
	assert_int_equal(udprelay_next_deadline(&f->u), 11 * SEC);
	udprelay_expire(&f->u, 11 * SEC);
	assert_int_equal(session_of(f, "192.0.2.1", 5000), SESSION_NONE);
	assert_int_equal(STAT_GET(f->stats.sessions_closed[CLOSE_UNASSURED]), 1);
}

/* A datagram on a session idle past its time gets a fresh session; the
 * policy is told it has none. */
static void test_udprelay_idle_session_is_replaced_on_its_next_datagram(void **state)
{
	struct fixture *f = *state;
	uint32_t idx;

	from_client(f, "192.0.2.1", 5000, SEC);
	idx = session_of(f, "192.0.2.1", 5000);
	session_assure(&f->u.st, idx);
	from_client(f, "192.0.2.1", 5000, 31 * SEC);
	assert_int_equal(f->pol.last_idx, SESSION_NONE);
	assert_int_equal(STAT_GET(f->stats.sessions_closed[CLOSE_IDLE]), 1);
	assert_int_equal(STAT_GET(f->stats.sessions_opened), 2);
	assert_int_equal(f->l.nfwd, 2);
	assert_int_equal(f->l.fwd[1].fd, FD_BASE + 1);
}

/* A request the policy marks as awaiting an answer, late in an unassured
 * session's life, gets a fresh session. */
static void test_udprelay_request_late_in_an_unassured_session_gets_a_fresh_one(void **state)
{
	struct fixture *f = *state;

	from_client(f, "192.0.2.1", 5000, SEC);
	f->pol.verdict = UDPRELAY_FORWARD | UDPRELAY_ASKS;
	from_client(f, "192.0.2.1", 5000, 8 * SEC); /* 7 s of 10: not yet */
	assert_int_equal(STAT_GET(f->stats.sessions_opened), 1);
	from_client(f, "192.0.2.1", 5000, 9 * SEC + 1); /* in the last fifth */
	assert_int_equal(STAT_GET(f->stats.sessions_closed[CLOSE_UNASSURED]), 1);
	assert_int_equal(STAT_GET(f->stats.sessions_opened), 2);
	assert_int_equal(f->l.nfwd, 3);
}

static void test_udprelay_policy_drop_opens_nothing(void **state)
{
	struct fixture *f = *state;

	f->pol.verdict = 0;
	from_client(f, "192.0.2.1", 5000, SEC);
	assert_int_equal(f->pol.client_calls, 1);
	assert_int_equal(f->sock.opened, 0);
	assert_int_equal(f->l.nfwd, 0);
	assert_int_equal(STAT_GET(f->stats.sessions_opened), 0);
}

/* A policy that refuses the first datagram of a new session keeps the
 * session but forwards nothing. */
static void test_udprelay_policy_refusal_on_open_keeps_the_session(void **state)
{
	struct fixture *f = *state;

	f->pol.refuse_on_open = true;
	from_client(f, "192.0.2.1", 5000, SEC);
	assert_int_not_equal(session_of(f, "192.0.2.1", 5000), SESSION_NONE);
	assert_int_equal(f->l.nfwd, 0);
	assert_int_equal(STAT_GET(f->stats.up_pkts), 0);
}

static void test_udprelay_max_sessions_refuses_with_table_full(void **state)
{
	struct fixture *f = *state;
	struct udprelay_conf c = conf_default();

	udprelay_free(&f->u);
	c.max_sessions = 2;
	setup_with(f, &c);
	f->pol.assure_on_open = true; /* never evicted for a newcomer */
	from_client(f, "192.0.2.1", 5000, SEC);
	from_client(f, "192.0.2.2", 5000, SEC);
	from_client(f, "192.0.2.3", 5000, SEC);
	assert_int_equal(session_of(f, "192.0.2.3", 5000), SESSION_NONE);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_TABLE_FULL]), 1);
	assert_int_equal(STAT_GET(f->stats.sessions_opened), 2);
	assert_int_equal(f->sock.opened, 2);
	assert_int_equal(f->l.nfwd, 2);
}

/* Two forwarders sharing one count (one relay on two workers): max_sessions
 * is their total. A full forwarder makes room among its own unassured
 * sessions only, never the other's; a session closed on one gives the
 * other its place. */
static void test_udprelay_max_sessions_is_a_total_across_forwarders_sharing_a_count(void **state)
{
	struct fixture *f = *state;
	static struct fixture g;
	struct udprelay_conf c = conf_default();
	_Atomic uint32_t open = 0;

	udprelay_free(&f->u);
	c.max_sessions = 3;
	setup_with(f, &c);
	setup_with(&g, &c);
	udprelay_share_count(&f->u, &open);
	udprelay_share_count(&g.u, &open);
	f->pol.assure_on_open = true; /* never evicted for a newcomer */
	from_client(f, "192.0.2.1", 5000, SEC);
	from_client(f, "192.0.2.2", 5000, SEC);
	from_client(&g, "198.51.100.1", 5000, SEC); /* unassured */
	assert_int_equal(open, 3);
	/* f is full of assured sessions: refused, g's session stays. */
	from_client(f, "192.0.2.3", 5000, SEC + 1);
	assert_int_equal(session_of(f, "192.0.2.3", 5000), SESSION_NONE);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_TABLE_FULL]), 1);
	assert_int_not_equal(session_of(&g, "198.51.100.1", 5000), SESSION_NONE);
	/* g makes room among its own: its unassured session goes. */
	from_client(&g, "198.51.100.2", 5000, SEC + 2);
	assert_int_equal(STAT_GET(g.stats.sessions_closed[CLOSE_EVICTED]), 1);
	assert_int_not_equal(session_of(&g, "198.51.100.2", 5000), SESSION_NONE);
	assert_int_equal(open, 3);
	/* A session closed on g: its place is anyone's, f's too. */
	udprelay_close_session(&g.u, session_of(&g, "198.51.100.2", 5000), CLOSE_IDLE);
	assert_int_equal(open, 2);
	from_client(f, "192.0.2.3", 5000, SEC + 3);
	assert_int_not_equal(session_of(f, "192.0.2.3", 5000), SESSION_NONE);
	assert_int_equal(open, 3);
	assert_int_equal(f->u.st.active + g.u.st.active, 3);
	udprelay_shutdown(&g.u);
	udprelay_shutdown(&f->u);
	assert_int_equal(open, 0);
	udprelay_free(&g.u);
}

/* Full of sessions the upstream never answered: the oldest makes room. */
static void test_udprelay_full_table_evicts_the_oldest_unassured(void **state)
{
	struct fixture *f = *state;
	struct udprelay_conf c = conf_default();

	udprelay_free(&f->u);
	c.max_sessions = 2;
	setup_with(f, &c);
	from_client(f, "192.0.2.1", 5000, SEC);
	from_client(f, "192.0.2.2", 5000, SEC + 1);
	from_client(f, "192.0.2.3", 5000, SEC + 2);
	assert_int_equal(session_of(f, "192.0.2.1", 5000), SESSION_NONE);
	assert_int_not_equal(session_of(f, "192.0.2.3", 5000), SESSION_NONE);
	assert_int_equal(STAT_GET(f->stats.sessions_closed[CLOSE_EVICTED]), 1);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_TABLE_FULL]), 0);
}

static void test_udprelay_sessions_per_ip_refuses_with_ip_sessions(void **state)
{
	struct fixture *f = *state;
	struct udprelay_conf c = conf_default();

	udprelay_free(&f->u);
	c.sessions_per_ip = 2;
	setup_with(f, &c);
	from_client(f, "192.0.2.1", 5000, SEC);
	from_client(f, "192.0.2.1", 5001, SEC);
	from_client(f, "192.0.2.1", 5002, SEC);
	assert_int_equal(session_of(f, "192.0.2.1", 5002), SESSION_NONE);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_IP_SESSIONS]), 1);
	/* Another address is not held to it. */
	from_client(f, "192.0.2.2", 5000, SEC);
	assert_int_equal(STAT_GET(f->stats.sessions_opened), 3);
}

/* Datagrams the policy did not admit take only the upper half of the
 * relay's session tokens. */
static void test_udprelay_unadmitted_datagrams_leave_half_the_session_rate(void **state)
{
	struct fixture *f = *state;
	struct udprelay_conf c = conf_default();
	char ip[32];

	udprelay_free(&f->u);
	c.session_rate = 4;
	setup_with(f, &c);
	for (int i = 0; i < 4; i++) {
		snprintf(ip, sizeof(ip), "192.0.2.%d", i + 1);
		from_client(f, ip, 5000, SEC);
	}
	assert_int_equal(STAT_GET(f->stats.sessions_opened), 2);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_SESSION_RATE]), 2);
	f->pol.verdict = UDPRELAY_FORWARD | UDPRELAY_ADMITTED;
	from_client(f, "192.0.2.9", 5000, SEC);
	from_client(f, "192.0.2.10", 5000, SEC);
	from_client(f, "192.0.2.11", 5000, SEC);
	assert_int_equal(STAT_GET(f->stats.sessions_opened), 4);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_SESSION_RATE]), 3);
}

static void test_udprelay_draining_takes_no_new_sessions(void **state)
{
	struct fixture *f = *state;

	from_client(f, "192.0.2.1", 5000, SEC);
	STAT_SET(f->global.lifecycle, LIFECYCLE_DRAINING);
	from_client(f, "192.0.2.2", 5000, SEC);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_DRAINING]), 1);
	/* The existing session still forwards. */
	from_client(f, "192.0.2.1", 5000, SEC);
	assert_int_equal(f->l.nfwd, 2);
}

/* Out of descriptors: an unassured session gives its socket back, once. */
static void test_udprelay_socket_scarcity_evicts_an_unassured_session(void **state)
{
	struct fixture *f = *state;

	from_client(f, "192.0.2.1", 5000, SEC);
	f->sock.fail_next = -EMFILE;
	from_client(f, "192.0.2.2", 5000, SEC + 1);
	assert_int_equal(session_of(f, "192.0.2.1", 5000), SESSION_NONE);
	assert_int_not_equal(session_of(f, "192.0.2.2", 5000), SESSION_NONE);
	assert_int_equal(STAT_GET(f->stats.sessions_closed[CLOSE_EVICTED]), 1);
	/* Any other failure is a refusal. */
	f->sock.fail_next = -EACCES;
	from_client(f, "192.0.2.3", 5000, SEC + 2);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_SOCKET]), 1);
	assert_int_not_equal(session_of(f, "192.0.2.2", 5000), SESSION_NONE);
}

/* Completions for a session that closed (or whose slot has a new owner)
 * touch nothing. */
static void test_udprelay_stale_completion_for_a_closed_session_is_ignored(void **state)
{
	struct fixture *f = *state;
	struct udprelay_conf c = conf_default();
	uint32_t idx, old_id;

	udprelay_free(&f->u);
	c.max_sessions = 1; /* the freed slot is the next one taken */
	setup_with(f, &c);
	from_client(f, "192.0.2.1", 5000, SEC);
	idx = session_of(f, "192.0.2.1", 5000);
	old_id = udprelay_session_id(&f->u, idx);
	assert_int_equal(f->u.st.s[idx].queued, 1);
	udprelay_close_session(&f->u, idx, CLOSE_IDLE);
	f->l.nfwd = 0;
	/* A late answer and a late send completion. */
	assert_true(from_server(f, old_id, 2 * SEC));
	assert_true(endpoint_sent(&f->ep, old_id, -ECONNRESET));
	assert_int_equal(f->pol.server_calls, 0);
	assert_int_equal(f->l.nfwd, 0);
	/* The slot's next owner is not touched by the old id either. */
	from_client(f, "192.0.2.2", 5000, 2 * SEC);
	assert_int_equal(session_of(f, "192.0.2.2", 5000), idx);
	assert_int_not_equal(udprelay_session_id(&f->u, idx), old_id);
	assert_int_equal(f->u.st.s[idx].queued, 1);
	assert_true(endpoint_sent(&f->ep, old_id, 30));
	assert_true(from_server(f, old_id, 2 * SEC));
	assert_int_equal(f->u.st.s[idx].queued, 1);
	assert_int_equal(f->pol.server_calls, 0);
	assert_int_equal(f->l.nfwd, 1);
	assert_true(endpoint_sent(&f->ep, udprelay_session_id(&f->u, idx), 30));
	assert_int_equal(f->u.st.s[idx].queued, 0);
}

/* A closed upstream port: counted, told to the policy, the session stays. */
static void test_udprelay_connection_refused_keeps_the_session(void **state)
{
	struct fixture *f = *state;
	uint32_t idx;

	from_client(f, "192.0.2.1", 5000, SEC);
	idx = session_of(f, "192.0.2.1", 5000);
	assert_true(endpoint_recv_error(&f->ep, udprelay_session_id(&f->u, idx), -ECONNREFUSED));
	assert_true(endpoint_sent(&f->ep, udprelay_session_id(&f->u, idx), -ECONNREFUSED));
	assert_int_equal(STAT_GET(f->stats.refused), 2);
	assert_int_equal(f->pol.refused, 2);
	assert_int_equal(session_of(f, "192.0.2.1", 5000), idx);
	/* A socket that failed for good closes its session. */
	assert_true(endpoint_recv_error(&f->ep, udprelay_session_id(&f->u, idx), -EBADF));
	assert_int_equal(session_of(f, "192.0.2.1", 5000), SESSION_NONE);
	assert_int_equal(STAT_GET(f->stats.sessions_closed[CLOSE_ERROR]), 1);
}

/* Sends in flight per session are bounded; the loop's refusal is counted. */
static void test_udprelay_queue_limit_and_send_errors_are_counted(void **state)
{
	struct fixture *f = *state;

	for (int i = 0; i < SESSION_QUEUE_MAX + 1; i++)
		from_client(f, "192.0.2.1", 5000, SEC);
	assert_int_equal(f->l.nfwd, SESSION_QUEUE_MAX);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_QUEUE_FULL]), 1);
	f->l.forward_result = -ENOBUFS;
	from_client(f, "192.0.2.2", 5000, SEC);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_SEND_ERROR]), 1);
}

/* Sources that cannot be real, banned ones and truncated datagrams never
 * reach the policy. */
static void test_udprelay_bogon_and_truncated_sources_never_reach_the_policy(void **state)
{
	struct fixture *f = *state;
	union etr_sockaddr sa;
	struct loop_dgram d = {.data = f->buf, .len = 20, .now = SEC};

	from_client(f, "0.1.2.3", 5000, SEC);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_BOGON]), 1);
	sa_v4(&sa, "192.0.2.1", 5000);
	d.from = &sa.sa;
	d.fromlen = addr_len(&sa);
	d.truncated = true;
	assert_true(endpoint_dgram(&f->ep, endpoint_id(&f->ep, f->u.ep_public), &d));
	assert_int_equal(STAT_GET(f->stats.drops[DROP_TRUNCATED]), 1);
	assert_int_equal(f->pol.client_calls, 0);
}

/* The policy's replies leave from the public socket, in the loop's
 * ordered path; a failure is a send_error. */
static void test_udprelay_reply_leaves_from_the_public_socket(void **state)
{
	struct fixture *f = *state;
	union etr_sockaddr sa;

	sa_v4(&sa, "192.0.2.1", 5000);
	assert_int_equal(udprelay_reply(&f->u, &sa, "x", 1), 0);
	assert_int_equal(f->l.nsent, 1);
	assert_int_equal(f->l.last_fd, PUB_FD);
	assert_true(endpoint_sent(&f->ep, f->l.last_id, 1));
	assert_int_equal(STAT_GET(f->stats.drops[DROP_SEND_ERROR]), 0);
	assert_true(endpoint_sent(&f->ep, f->l.last_id, -EPERM));
	assert_int_equal(STAT_GET(f->stats.drops[DROP_SEND_ERROR]), 1);
	f->l.forward_result = -ENOBUFS;
	assert_int_equal(udprelay_reply(&f->u, &sa, "x", 1), -ENOBUFS);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_SEND_ERROR]), 2);
}

/* A new session arms the forwarder's own timer for its expiry; the timer
 * (through the endpoint table) expires it and lets go. */
static void test_udprelay_timer_is_armed_by_a_new_session_and_expires_it(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(f->l.timer_sets, 0);
	from_client(f, "192.0.2.1", 5000, SEC);
	assert_int_equal(f->l.timer_sets, 1);
	assert_ptr_equal(f->l.timer, &f->u.timer);
	assert_int_equal(f->l.timer_at, 11 * SEC); /* unassured: 10 s */
	/* A later session does not move it later. */
	from_client(f, "192.0.2.2", 5000, 2 * SEC);
	assert_int_equal(f->l.timer_sets, 1);
	assert_true(endpoint_timer(&f->ep, f->u.timer.id, 11 * SEC));
	assert_int_equal(session_of(f, "192.0.2.1", 5000), SESSION_NONE);
	assert_int_not_equal(session_of(f, "192.0.2.2", 5000), SESSION_NONE);
	assert_int_equal(f->l.timer_at, 12 * SEC);
	assert_true(endpoint_timer(&f->ep, f->u.timer.id, 12 * SEC));
	assert_int_equal(f->u.st.active, 0);
	assert_int_equal(f->l.timer_cancels, 1);
}

/* prbe yes: a probe from a source without a session is echoed from the
 * public socket (a copy, the same length) and never reaches the policy; a
 * session's PRBE datagram is the policy's; a refused probe is a drop. */
static void test_udprelay_prbe_echoes_newcomers_and_leaves_sessions_alone(void **state)
{
	struct fixture *f = *state;
	static const uint16_t ports[] = {27960};
	struct prbe_port_conf pc = {
	    .rl_entries = 64, .burst = 2, .rate = 1, .ports = ports, .nports = 1};
	struct prbe_stats st;
	struct rl_table rl;
	struct prbe p;

	memset(&st, 0, sizeof(st));
	assert_int_equal(prbe_port_rules(&p, &rl, &pc, key), 0);
	udprelay_set_prbe(&f->u, &p, &st);
	memcpy(f->buf, "PRBE0123456789abcdef", 20);
	from_client(f, "192.0.2.1", 5000, SEC);
	assert_int_equal(f->pol.client_calls, 0);
	assert_int_equal(f->u.st.active, 0);
	assert_int_equal(f->l.nsent, 1);
	assert_int_equal(f->l.last_fd, PUB_FD);
	assert_int_equal(f->l.last_len, 20);
	assert_memory_equal(f->l.last, "PRBE0123456789abcdef", 20);
	/* Echoed counts when the kernel took it. */
	assert_int_equal(STAT_GET(st.result[PRBE_ECHO]), 0);
	assert_true(endpoint_sent(&f->ep, f->l.last_id, 20));
	assert_int_equal(STAT_GET(st.result[PRBE_ECHO]), 1);
	assert_true(endpoint_sent(&f->ep, f->l.last_id, -EPERM));
	assert_int_equal(STAT_GET(st.result[STATS_PRBE_SEND_ERROR]), 1);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_PRBE]), 1);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_SEND_ERROR]), 0);
	/* Low source port, then the bucket: dropped and counted. */
	from_client(f, "192.0.2.2", 1000, SEC);
	assert_int_equal(STAT_GET(st.result[PRBE_DROP_PORT]), 1);
	from_client(f, "192.0.2.1", 5001, SEC);
	from_client(f, "192.0.2.1", 5002, SEC);
	assert_int_equal(STAT_GET(st.result[PRBE_DROP_RATE]), 1);
	assert_int_equal(f->l.nsent, 2);
	assert_int_equal(STAT_GET(f->stats.drops[DROP_PRBE]), 3);
	assert_int_equal(f->pol.client_calls, 0);
	/* A source with a session: its PRBE datagram goes to the policy. */
	memcpy(f->buf, "game", 4);
	from_client(f, "192.0.2.3", 5000, SEC);
	assert_int_equal(f->u.st.active, 1);
	memcpy(f->buf, "PRBE", 4);
	from_client(f, "192.0.2.3", 5000, SEC);
	assert_int_equal(f->pol.client_calls, 2);
	assert_int_equal(f->l.nsent, 2);
	assert_int_equal(f->l.nfwd, 2);
	rl_table_free(&rl);
}

static void test_udprelay_shutdown_closes_every_session(void **state)
{
	struct fixture *f = *state;

	from_client(f, "192.0.2.1", 5000, SEC);
	from_client(f, "192.0.2.2", 5000, SEC);
	udprelay_shutdown(&f->u);
	assert_int_equal(f->u.st.active, 0);
	assert_int_equal(STAT_GET(f->stats.sessions_closed[CLOSE_SHUTDOWN]), 2);
	assert_int_equal(f->sock.closed, 2);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_udprelay_new_client_opens_a_session_and_its_datagram_goes_upstream),
	    T(test_udprelay_server_answer_goes_to_its_client_from_the_public_socket),
	    T(test_udprelay_expiry_closes_idle_sessions),
	    T(test_udprelay_unassured_sessions_end_after_their_own_timeout),
	    T(test_udprelay_idle_session_is_replaced_on_its_next_datagram),
	    T(test_udprelay_request_late_in_an_unassured_session_gets_a_fresh_one),
	    T(test_udprelay_policy_drop_opens_nothing),
	    T(test_udprelay_policy_refusal_on_open_keeps_the_session),
	    T(test_udprelay_max_sessions_refuses_with_table_full),
	    T(test_udprelay_max_sessions_is_a_total_across_forwarders_sharing_a_count),
	    T(test_udprelay_full_table_evicts_the_oldest_unassured),
	    T(test_udprelay_sessions_per_ip_refuses_with_ip_sessions),
	    T(test_udprelay_unadmitted_datagrams_leave_half_the_session_rate),
	    T(test_udprelay_draining_takes_no_new_sessions),
	    T(test_udprelay_socket_scarcity_evicts_an_unassured_session),
	    T(test_udprelay_stale_completion_for_a_closed_session_is_ignored),
	    T(test_udprelay_connection_refused_keeps_the_session),
	    T(test_udprelay_queue_limit_and_send_errors_are_counted),
	    T(test_udprelay_bogon_and_truncated_sources_never_reach_the_policy),
	    T(test_udprelay_reply_leaves_from_the_public_socket),
	    T(test_udprelay_timer_is_armed_by_a_new_session_and_expires_it),
	    T(test_udprelay_shutdown_closes_every_session),
	    T(test_udprelay_prbe_echoes_newcomers_and_leaves_sessions_alone),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
