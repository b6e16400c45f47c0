/* SPDX-License-Identifier: ISC */
/* The SNI route table: which upstream a server name goes to. Pure: no
 * sockets; memory is taken once, when a table is built.
 *
 * A route names one host exactly ("svc.example.com") or every name under a
 * suffix ("*.example.com"). The wildcard rule is nginx's server_name and
 * map-with-hostnames rule, and DNS's own (RFC 4592): "*.example.com" matches
 * "a.example.com" and "a.b.example.com" (any depth), never "example.com"
 * itself (route it by name; the seed's DNS writes both records for that
 * reason). An exact route beats every wildcard; among wildcards the longest
 * suffix wins ("*.b.example.com" over "*.example.com" for
 * "a.b.example.com"). HAProxy operators get the same from
 * `req.ssl_sni -m end .example.com` and an exact map first.
 *
 * Names follow addr_host_name_valid, case folded: a route the reader could
 * never produce a name for is refused when the table is built, and so is
 * a '*' anywhere but a whole first label, and a name listed twice (which
 * upstream would win is not for the table to guess).
 *
 * A lookup costs one hash probe for the exact name and one per dot for the
 * wildcards, longest first: O(labels). A table never changes once built:
 * the control plane builds the next one from the whole set it received and
 * swaps the pointer. */
#ifndef ETR_SNI_ROUTES_H
#define ETR_SNI_ROUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "tls_hello.h"

/* Most routes in one table. */
#define SNI_ROUTES_MAX (1u << 20)

/* Most routes in one control-plane set: a bigger set is refused whole
 * (the heartbeat fails, the set in force stays). Building a table is
 * linear, but a million routes took 2 GB and seconds. */
#define SNI_CONTROL_ROUTES_MAX 10000u

/* Longest route name: a host name, or "*." and a suffix of up to
 * TLS_NAME_MAX - 2 (so that a name under it can still exist). */
#define SNI_ROUTE_NAME_MAX TLS_NAME_MAX

/* One route. */
struct sni_route {
	char name[SNI_ROUTE_NAME_MAX + 1]; /* "host" or "*.suffix" */
	union etr_sockaddr upstream;	   /* where the connection goes */
	bool proxy_v2;			   /* send a PROXY v2 header first */
};

/* A built table (opaque). */
struct sni_routes;

/* Build a table from n routes (names in any case). Returns 0 and *out, or
 * -EINVAL (a bad name or n over SNI_ROUTES_MAX), -EEXIST (a name twice) or
 * -ENOMEM, with a message naming the route in err. n may be 0. */
int sni_routes_build(struct sni_routes **out, const struct sni_route *list, size_t n, char *err,
		     size_t errlen);

/* The route for a server name as tls_hello gives it (valid, lower case,
 * len bytes), or NULL when none matches. */
const struct sni_route *sni_routes_lookup(const struct sni_routes *t, const char *name, size_t len);

/* Routes in the table. */
size_t sni_routes_count(const struct sni_routes *t);

/* Release a table (NULL is fine). */
void sni_routes_free(struct sni_routes *t);

#endif
