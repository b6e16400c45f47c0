/* SPDX-License-Identifier: ISC */
/* The SNI listener: a TCP port whose connections are read up to the end of
 * their TLS ClientHello, routed by its server name (sni_routes), and
 * spliced unread to the route's upstream (after a PROXY v2 header when the
 * route asks for one). A refused connection is closed without a byte.
 *
 * Each worker has its own struct sni_listener per listener: its listening
 * socket (one of the port's SO_REUSEPORT group) and its connections, over
 * the struct sni_shared (sni_shared.h) that all workers share. */
#ifndef ETR_SNI_H
#define ETR_SNI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "banlist.h"
#include "endpoint.h"
#include "loop.h"
#include "sni_shared.h"
#include "tls_hello.h"

struct sni_conn;

/* One worker's instance of a listener. */
struct sni_listener {
	struct sni_lshared *sh;
	struct sni_shared *all;
	const struct sni_conf *conf;
	unsigned worker;
	struct sni_stats stats;
	int fd; /* listening */
	const struct loop_ops *ops;
	struct loop *loop;
	struct endpoint_table *ep;
	unsigned slot_conns; /* its endpoint: connections and the listening socket */
	bool attached;
	bool splice;			 /* splice yes, and a loop that splices */
	const struct sni_routes *routes; /* the table this worker uses */
	const struct banlist *bans;	 /* the daemon's current list, NULL: none */
	uint64_t gen;
	struct sni_conn *conns;
	uint32_t nconns, free_head, free_tail; /* free slots, oldest first */
	/* Its prereading connections by source (members: connection
	 * indexes), whose heaviest gives way at max-preread. */
	struct srctab pre_src;
	uint32_t pre_head, pre_tail; /* the prereads, oldest first */
	/* The loop's stream chunks each source holds (sni_pin), and the
	 * loop's pool they come from. */
	struct sni_pin pin;
	const struct loop_stats *lst; /* NULL: a loop without counters */
	uint64_t log_next;	      /* rate limit of the accept error log */
	struct sni_tunnel_seen tun;   /* the tunnel's name, as this worker last read it */
};

/* Open worker w's listening socket (joining the port's group when
 * reuseport) and its connection table. Returns 0 or -errno (logged). */
int sni_listener_open(struct sni_listener *l, struct sni_shared *all, unsigned i, unsigned w,
		      bool reuseport);

/* Register with the worker's loop (on its thread). Returns 0 or -errno. */
int sni_listener_attach(struct sni_listener *l, const struct loop_ops *ops, struct loop *loop,
			struct endpoint_table *ep);

/* On the worker's thread: use the table in force now; connections whose
 * route is gone or changed are closed, the others carry on. */
void sni_listener_take_routes(struct sni_listener *l);

/* On the worker's thread: use ban list b (NULL: none) for new connections,
 * and close the open ones whose source it bans (without a byte while
 * prereading or connecting, result banned; ended banned once spliced). */
void sni_listener_take_bans(struct sni_listener *l, const struct banlist *b);

/* On the worker's thread, on the way out: close every connection. */
void sni_listener_shutdown(struct sni_listener *l);

/* Close its sockets and free it. */
void sni_listener_close(struct sni_listener *l);

#endif
