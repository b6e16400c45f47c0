/* SPDX-License-Identifier: ISC */
/* Name resolution off the packet loop: each request runs getaddrinfo in a
 * short-lived thread of its own (so one slow name never holds up another)
 * and posts the result to an eventfd the loop watches. */
#ifndef ETR_RESOLVER_H
#define ETR_RESOLVER_H

#include <stdbool.h>
#include <stdint.h>

#include "addr.h"

#define RESOLVER_SLOTS 8

struct resolver;

struct resolver_result {
	unsigned slot;	   /* resolver_start's; 0 from resolver_lookup */
	int gai_err;	   /* 0 on success, else an EAI_* code */
	bool wrong_family; /* gai_err set, but the name has addresses of the
			    * other family: one of them is in addr */
	union etr_sockaddr addr;
};

/* Resolve host:port now, blocking (the resolver's threads, and the config
 * check): the first address of family (AF_UNSPEC: any; AF_INET6 takes
 * IPv4-mapped ones), or, when there is none, whether the name has one of
 * the other family (wrong_family, that address in addr). Fills out and
 * returns its gai_err. */
int resolver_lookup(const char *host, uint16_t port, int family, struct resolver_result *out);

/* Create; *efd becomes readable when results are ready. family is the
 * family of the socket the answers will be used on. Returns 0 or -errno. */
int resolver_create(struct resolver **rp, int family, int *efd);

/* Start resolving host:port for slot (< RESOLVER_SLOTS). Returns 0, -EBUSY
 * while that slot's previous request runs, or -errno. */
int resolver_start(struct resolver *r, unsigned slot, const char *host, uint16_t port);

/* Take one finished result. Returns true when there was one. */
bool resolver_take(struct resolver *r, struct resolver_result *out);

/* Drain the eventfd; call when it is readable, before resolver_take. */
void resolver_ack(struct resolver *r);

/* Free; requests still running finish into memory they own. */
void resolver_destroy(struct resolver *r);

#endif
