/* SPDX-License-Identifier: ISC */
/* getaddrinfo in detached threads, results posted back through an eventfd.
 * The resolver is reference counted: a thread still inside getaddrinfo when
 * the relay exits keeps it alive until it returns. */
#include "resolver.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

enum slot_state { SLOT_IDLE, SLOT_RUNNING, SLOT_DONE };

struct slot {
	enum slot_state state;
	char host[ADDR_HOSTLEN];
	uint16_t port;
	int gai_err;
	bool wrong_family;
	union etr_sockaddr addr;
};

struct resolver {
	pthread_mutex_t lock;
	unsigned refs; /* the owner plus each running thread */
	int family;
	int efd;
	struct slot slots[RESOLVER_SLOTS];
};

struct job {
	struct resolver *r;
	unsigned slot;
};

static void unref(struct resolver *r)
{
	unsigned left;

	pthread_mutex_lock(&r->lock);
	left = --r->refs;
	pthread_mutex_unlock(&r->lock);
	if (left == 0) {
		close(r->efd);
		pthread_mutex_destroy(&r->lock);
		free(r);
	}
}

int resolver_create(struct resolver **rp, int family, int *efd)
{
	struct resolver *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0) {
		int err = -errno;
		free(r);
		return err;
	}
	pthread_mutex_init(&r->lock, NULL);
	r->refs = 1;
	r->family = family;
	*efd = r->efd;
	*rp = r;
	return 0;
}

int resolver_lookup(const char *host, uint16_t port, int family, struct resolver_result *out)
{
	struct addrinfo hints = {0}, *res = NULL;
	union etr_sockaddr sa;
	char p[8];
	bool other = false;
	int err;

	snprintf(p, sizeof(p), "%u", port);
	hints.ai_family = family;
	hints.ai_socktype = SOCK_DGRAM;
	/* An IPv6 public socket reaches IPv4 masters through mapped addresses. */
	hints.ai_flags = family == AF_INET6 ? AI_V4MAPPED : 0;
	err = getaddrinfo(host, p, &hints, &res);
	if (err == 0 && !addr_from(&sa, res->ai_addr, res->ai_addrlen))
		err = EAI_FAMILY;
	if (res)
		freeaddrinfo(res);
	res = NULL;
	/* No address of the listener's family: has the name any of the other
	 * one? Then the caller can say so, not "cannot resolve". */
	if (family != AF_UNSPEC &&
	    (err == EAI_NONAME || err == EAI_NODATA || err == EAI_ADDRFAMILY)) {
		hints.ai_family = family == AF_INET ? AF_INET6 : AF_INET;
		hints.ai_flags = 0;
		other = getaddrinfo(host, p, &hints, &res) == 0 &&
			addr_from(&sa, res->ai_addr, res->ai_addrlen);
		if (res)
			freeaddrinfo(res);
	}
	memset(out, 0, sizeof(*out));
	out->gai_err = err;
	out->wrong_family = err != 0 && other;
	if (err == 0 || other)
		out->addr = sa;
	return err;
}

static void *run(void *arg)
{
	struct job *j = arg;
	struct resolver *r = j->r;
	struct slot *s = &r->slots[j->slot];
	struct resolver_result res;
	char host[ADDR_HOSTLEN];
	uint16_t port;
	uint64_t one = 1;

	free(j);
	pthread_mutex_lock(&r->lock);
	memcpy(host, s->host, sizeof(host));
	port = s->port;
	pthread_mutex_unlock(&r->lock);

	resolver_lookup(host, port, r->family, &res);

	pthread_mutex_lock(&r->lock);
	s->gai_err = res.gai_err;
	s->wrong_family = res.wrong_family;
	if (res.gai_err == 0 || res.wrong_family)
		s->addr = res.addr;
	s->state = SLOT_DONE;
	pthread_mutex_unlock(&r->lock);
	if (write(r->efd, &one, sizeof(one)) < 0) {
		/* Only fails when the counter would overflow: already readable. */
	}
	unref(r);
	return NULL;
}

int resolver_start(struct resolver *r, unsigned slot, const char *host, uint16_t port)
{
	struct slot *s = &r->slots[slot];
	pthread_attr_t attr;
	pthread_t tid;
	struct job *j;
	int err;

	if (slot >= RESOLVER_SLOTS)
		return -EINVAL;
	pthread_mutex_lock(&r->lock);
	if (s->state != SLOT_IDLE) {
		pthread_mutex_unlock(&r->lock);
		return -EBUSY;
	}
	snprintf(s->host, sizeof(s->host), "%s", host);
	s->port = port;
	s->state = SLOT_RUNNING;
	r->refs++;
	pthread_mutex_unlock(&r->lock);

	j = malloc(sizeof(*j));
	err = j ? 0 : ENOMEM;
	if (j) {
		j->r = r;
		j->slot = slot;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		/* getaddrinfo needs little stack; keep the thread cheap. */
		pthread_attr_setstacksize(&attr, 256 << 10);
		err = pthread_create(&tid, &attr, run, j);
		pthread_attr_destroy(&attr);
	}
	if (err) {
		free(j);
		pthread_mutex_lock(&r->lock);
		s->state = SLOT_IDLE;
		r->refs--;
		pthread_mutex_unlock(&r->lock);
		return -err;
	}
	return 0;
}

void resolver_ack(struct resolver *r)
{
	uint64_t v;

	if (read(r->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing posted since the last read. */
	}
}

bool resolver_take(struct resolver *r, struct resolver_result *out)
{
	bool got = false;

	pthread_mutex_lock(&r->lock);
	for (unsigned i = 0; i < RESOLVER_SLOTS && !got; i++) {
		if (r->slots[i].state != SLOT_DONE)
			continue;
		out->slot = i;
		out->gai_err = r->slots[i].gai_err;
		out->wrong_family = r->slots[i].wrong_family;
		out->addr = r->slots[i].addr;
		r->slots[i].state = SLOT_IDLE;
		got = true;
	}
	pthread_mutex_unlock(&r->lock);
	return got;
}

void resolver_destroy(struct resolver *r)
{
	if (r)
		unref(r);
}
