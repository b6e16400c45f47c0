/* SPDX-License-Identifier: ISC */
/* The TURN client of etrelay-load: credentials, requests, answers, and the
 * blocking open of one allocation with a channel. */
#include "turnc.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int turnc_cred_init(struct turnc_cred *c, const uint8_t *secret, size_t secret_len,
		    const char *userid, uint64_t expiry)
{
	int n = snprintf(c->user, sizeof(c->user), "%llu:%s", (unsigned long long)expiry, userid);
	int pw;

	if (n < 0 || (size_t)n >= sizeof(c->user))
		return -1;
	c->user_len = (size_t)n;
	pw = turn_rest_password(secret, secret_len, c->user, c->user_len, c->password);
	if (pw < 0)
		return -1;
	c->password_len = (size_t)pw;
	return 0;
}

void turnc_init(struct turnc *t, const struct turnc_cred *cred, uint32_t seed)
{
	memset(t, 0, sizeof(*t));
	t->cred = cred;
	memcpy(t->tid, &seed, 4);
}

void turnc_forget(struct turnc *t)
{
	t->have_key = false;
	t->realm_len = 0;
	t->nonce_len = 0;
}

const char *turnc_method_name(uint16_t method)
{
	switch (method) {
	case STUN_ALLOCATE:
		return "Allocate";
	case STUN_REFRESH:
		return "Refresh";
	case STUN_CHANNEL_BIND:
		return "ChannelBind";
	default:
		return "request";
	}
}

/* A transaction ID nobody else uses: the seed, a counter, a marker. */
static void begin(struct turnc *t, struct stun_builder *b, uint8_t *buf, uint16_t method)
{
	t->tid_seq++;
	memcpy(t->tid + 4, &t->tid_seq, 4);
	memcpy(t->tid + 8, "etrl", 4);
	t->method = method;
	stun_build_begin(b, buf, TURNC_REQ_MAX, stun_type(method, STUN_REQUEST), t->tid);
}

static size_t finish(struct turnc *t, struct stun_builder *b)
{
	if (t->have_key) {
		stun_add_attr(b, STUN_A_USERNAME, t->cred->user, t->cred->user_len);
		stun_add_attr(b, STUN_A_REALM, t->realm, t->realm_len);
		stun_add_attr(b, STUN_A_NONCE, t->nonce, t->nonce_len);
		stun_add_integrity(b, t->key, TURN_KEY_LEN);
	}
	return stun_build_finish(b);
}

size_t turnc_allocate(struct turnc *t, uint8_t *buf)
{
	struct stun_builder b;
	uint8_t udp[4] = {STUN_TRANSPORT_UDP, 0, 0, 0};

	begin(t, &b, buf, STUN_ALLOCATE);
	stun_add_attr(&b, STUN_A_REQUESTED_TRANSPORT, udp, sizeof(udp));
	return finish(t, &b);
}

size_t turnc_refresh(struct turnc *t, uint8_t *buf, uint32_t lifetime)
{
	struct stun_builder b;

	begin(t, &b, buf, STUN_REFRESH);
	stun_add_u32(&b, STUN_A_LIFETIME, lifetime);
	return finish(t, &b);
}

size_t turnc_channel_bind(struct turnc *t, uint8_t *buf, uint16_t channel,
			  const union bench_sockaddr *peer)
{
	struct stun_builder b;
	union etr_sockaddr sa;
	uint32_t ch = (uint32_t)channel << 16;

	memset(&sa, 0, sizeof(sa));
	memcpy(&sa, peer, bench_addr_len(peer));
	begin(t, &b, buf, STUN_CHANNEL_BIND);
	stun_add_u32(&b, STUN_A_CHANNEL_NUMBER, ch);
	stun_add_xor_addr(&b, STUN_A_XOR_PEER_ADDRESS, &sa);
	return finish(t, &b);
}

/* Learn realm and nonce from a 401 or 438; true when they are new. */
static bool learn(struct turnc *t, const struct stun_msg *m)
{
	size_t rl = m->realm.len, nl = m->nonce.len;
	bool same;

	if (!stun_has(m->nonce) || nl >= TURNC_NONCE_MAX || rl >= TURNC_REALM_MAX)
		return false;
	if (!stun_has(m->realm)) {
		/* A 438 may leave the realm out: keep ours. */
		if (!t->have_key)
			return false;
		rl = t->realm_len;
	} else {
		memcpy(t->realm, stun_attr_ptr(m, m->realm), rl);
	}
	same = t->have_key && nl == t->nonce_len &&
	       memcmp(t->nonce, stun_attr_ptr(m, m->nonce), nl) == 0 && rl == t->realm_len;
	memcpy(t->nonce, stun_attr_ptr(m, m->nonce), nl);
	t->nonce_len = nl;
	t->realm_len = rl;
	if (turn_longterm_key(t->cred->user, t->cred->user_len, t->realm, t->realm_len,
			      t->cred->password, t->cred->password_len, t->key) != 0)
		return false;
	t->have_key = true;
	return !same;
}

enum turnc_result turnc_answer(struct turnc *t, const uint8_t *p, size_t n, int *code,
			       char reason[64], union bench_sockaddr *relayed)
{
	struct stun_msg m;
	const char *r;
	size_t rlen;
	bool had_key = t->have_key;

	*code = 0;
	reason[0] = '\0';
	if (stun_parse(p, n, &m) != 0)
		return TURNC_BAD;
	if (m.method != t->method || memcmp(m.tid, t->tid, STUN_TID_LEN) != 0 ||
	    (m.cls != STUN_SUCCESS && m.cls != STUN_ERROR))
		return TURNC_IGNORE;
	if (m.cls == STUN_SUCCESS) {
		if (had_key && stun_has(m.mi) && !stun_check_integrity(&m, t->key, TURN_KEY_LEN))
			return TURNC_BAD;
		if (relayed && m.method == STUN_ALLOCATE) {
			union etr_sockaddr sa;

			if (!stun_has(m.xor_relayed) ||
			    stun_get_xor_addr(&m, m.xor_relayed, &sa) != 0)
				return TURNC_BAD;
			memcpy(relayed, &sa, sizeof(*relayed));
		}
		return TURNC_OK;
	}
	if (!stun_get_error(&m, code, &r, &rlen))
		return TURNC_BAD;
	snprintf(reason, 64, "%.*s", (int)(rlen < 63 ? rlen : 63), r);
	/* 401 to a bare request, or 401/438 with a nonce we did not use yet:
	 * the challenge, not a verdict. */
	if ((*code == 401 || *code == 438) && learn(t, &m))
		return TURNC_RETRY;
	if (*code == 401 && !had_key && t->have_key)
		return TURNC_RETRY;
	return TURNC_ERROR;
}

/* Send the request in buf and wait for its answer; resend on silence. */
static enum turnc_result exchange(struct turnc *t, int fd, const uint8_t *buf, size_t len,
				  uint64_t timeout_ns, int *code, char reason[64],
				  union bench_sockaddr *relayed)
{
	uint8_t in[2048];

	for (int tries = 0; tries < 3; tries++) {
		uint64_t end = bench_now() + timeout_ns;

		if (send(fd, buf, len, 0) < 0) {
			*code = -errno;
			return TURNC_ERROR;
		}
		for (;;) {
			uint64_t now = bench_now();
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			enum turnc_result r;
			ssize_t n;

			if (now >= end)
				break;
			if (poll(&pfd, 1, (int)((end - now) / BENCH_NS_PER_MS) + 1) <= 0)
				continue;
			n = recv(fd, in, sizeof(in), MSG_DONTWAIT);
			if (n < 0) {
				if (errno == EAGAIN || errno == EINTR)
					continue;
				*code = -errno;
				return TURNC_ERROR;
			}
			r = turnc_answer(t, in, (size_t)n, code, reason, relayed);
			if (r != TURNC_IGNORE)
				return r;
		}
	}
	*code = 0;
	return TURNC_ERROR;
}

/* One request through its challenges; 0 or -1 with err. */
static int step(struct turnc *t, int fd, uint16_t method, uint16_t channel,
		const union bench_sockaddr *peer, uint64_t timeout_ns,
		union bench_sockaddr *relayed, char *err, size_t errlen)
{
	uint8_t buf[TURNC_REQ_MAX];

	for (int round = 0; round < 3; round++) {
		enum turnc_result r;
		char reason[64];
		size_t len;
		int code;

		len = method == STUN_ALLOCATE  ? turnc_allocate(t, buf)
		      : method == STUN_REFRESH ? turnc_refresh(t, buf, 0)
					       : turnc_channel_bind(t, buf, channel, peer);
		if (len == 0) {
			snprintf(err, errlen, "%s: request does not fit",
				 turnc_method_name(method));
			return -1;
		}
		r = exchange(t, fd, buf, len, timeout_ns, &code, reason, relayed);
		if (r == TURNC_OK)
			return 0;
		if (r == TURNC_RETRY)
			continue;
		if (r == TURNC_BAD)
			snprintf(err, errlen,
				 "%s: an answer that does not parse or fails its "
				 "MESSAGE-INTEGRITY",
				 turnc_method_name(method));
		else if (code < 0)
			snprintf(err, errlen, "%s: %s", turnc_method_name(method), strerror(-code));
		else if (code == 0)
			snprintf(err, errlen, "%s: no answer (3 tries, %llu ms apart)",
				 turnc_method_name(method),
				 (unsigned long long)(timeout_ns / BENCH_NS_PER_MS));
		else
			snprintf(err, errlen, "%s: error %d %s%s", turnc_method_name(method), code,
				 reason,
				 code == 401   ? " (wrong secret?)"
				 : code == 403 ? " (peer refused: loopback allowed?)"
					       : "");
		return -1;
	}
	snprintf(err, errlen, "%s: challenged 3 times in a row (401/438)",
		 turnc_method_name(method));
	return -1;
}

int turnc_open(struct turnc *t, int fd, uint16_t channel, const union bench_sockaddr *peer,
	       uint64_t timeout_ns, union bench_sockaddr *relayed, char *err, size_t errlen)
{
	if (step(t, fd, STUN_ALLOCATE, 0, NULL, timeout_ns, relayed, err, errlen) < 0)
		return -1;
	return step(t, fd, STUN_CHANNEL_BIND, channel, peer, timeout_ns, NULL, err, errlen);
}

int turnc_close(struct turnc *t, int fd, uint64_t timeout_ns)
{
	char err[160];

	return step(t, fd, STUN_REFRESH, 0, NULL, timeout_ns, NULL, err, sizeof(err));
}
