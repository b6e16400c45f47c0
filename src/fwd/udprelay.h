/* SPDX-License-Identifier: ISC */
/* The generic UDP session forwarder: a public socket, one connected session
 * socket per client sockaddr, open, close and expiry, the caps, counters.
 * It knows no game: a policy (a const ops table and its object) decides
 * what a datagram may do. Its sockets come from an injectable factory. */
#ifndef ETR_UDPRELAY_H
#define ETR_UDPRELAY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "banlist.h"
#include "endpoint.h"
#include "loop.h"
#include "ratelimit.h"
#include "session.h"
#include "stats.h"

struct udprelay;
struct prbe;

/* What a policy decided about a client's datagram (client_dgram): 0 drops
 * it (the policy counted why, or answered it itself), else UDPRELAY_FORWARD
 * and any of the flags. */
#define UDPRELAY_FORWARD 1u
/* The policy's own budget bounds datagrams like this one: a new session
 * may take from the tokens kept for such (see session_rate_allow). */
#define UDPRELAY_ADMITTED 2u
/* A request whose answer is awaited: an unassured session in its last fifth
 * would end before the answer; it is replaced by a fresh one. */
#define UDPRELAY_ASKS 4u

/* The policy: what the forwarder asks, and tells. Called on the loop thread;
 * idx is a session index in udprelay_sessions(u). Every op but client_dgram
 * and server_dgram may be NULL. */
struct udprelay_policy_ops {
	const char *name;
	/* A datagram from client on the public socket (not truncated, not
	 * from a bogon or a banned source); idx is its live session or
	 * SESSION_NONE. The one policy call per client datagram. */
	unsigned (*client_dgram)(void *p, struct udprelay *u, uint32_t idx,
				 const union etr_sockaddr *client, struct loop_dgram *d);
	/* A session opened for client_dgram's datagram d (verdict: what it
	 * returned): true when d may go on; the session stays either way. */
	bool (*session_opened)(void *p, struct udprelay *u, uint32_t idx, struct loop_dgram *d,
			       unsigned verdict);
	/* A datagram from the upstream on session idx. A truncated one only
	 * says the upstream lives (the forwarder drops it after). Returns true
	 * when d goes on to the client. */
	bool (*server_dgram)(void *p, struct udprelay *u, uint32_t idx, struct loop_dgram *d);
	/* Session idx is closing (its index is reused afterwards). */
	void (*session_closed)(void *p, struct udprelay *u, uint32_t idx);
	/* The upstream refused a datagram (ECONNREFUSED): its port is closed. */
	void (*upstream_refused)(void *p, uint64_t now);
	/* --debug: a client's datagram was refused for why (counted already). */
	void (*log_refused)(void *p, const union etr_sockaddr *client, const struct loop_dgram *d,
			    enum stats_drop why);
};

/* Where session sockets come from: the daemon's are real sockets
 * (relay.c), a test's are not. */
struct udprelay_sockops {
	/* A non-blocking socket connected to the upstream: fd or -errno
	 * (-EMFILE, -ENFILE, -EADDRINUSE, -ENOBUFS: scarce, see the evictions). */
	int (*open)(void *arg);
	void (*close)(void *arg, int fd);
};

struct udprelay_conf {
	const char *name; /* for log lines */
	uint32_t max_sessions, sessions_per_ip;
	uint32_t session_rate, ip_session_rate; /* new sessions per second */
	/* Source IPs tracked for ip_session_rate (0: UDPRELAY_IP_ENTRIES). */
	uint32_t ip_entries;
	uint64_t session_timeout;   /* ns: idle */
	uint64_t unassured_timeout; /* ns: from opening, until assured */
	bool listener_loopback;	    /* 127/8 and ::1 sources are real here */
};

struct udprelay {
	struct udprelay_conf conf;
	const struct udprelay_policy_ops *pol;
	void *pobj;
	const struct udprelay_sockops *sock;
	void *sarg;
	const struct loop_ops *ops;
	struct loop *loop;
	struct endpoint_table *ep;
	unsigned ep_public, ep_sessions;
	bool attached;
	/* Its next expiry in the loop's timers (id: the public endpoint's
	 * UDPRELAY_REF_SOCKET); the loop lets go of it when destroyed. */
	struct timer timer;
	const struct etr_stats *global; /* lifecycle: draining takes no new sessions */
	struct relay_stats *stats;	/* the counters it shares with its policy */
	int pub_fd;
	struct session_table st;
	/* Sessions open in every forwarder that shares this one's count
	 * (udprelay_share_count; its own, own_open, by default): max_sessions
	 * bounds it, so that several forwarders on one port (workers) hold it
	 * as a total. One atomic add per session opened, none per datagram. */
	_Atomic uint32_t *open;
	_Atomic uint32_t own_open;
	struct rl_table ip_sess_rl; /* per source IP: new sessions */
	struct rl_bucket sess_rl;   /* new sessions, in all */
	const struct banlist *bans; /* the daemon's current list, NULL: none */
	/* PRBE echo on the public socket (udprelay_set_prbe), NULL: none. */
	struct prbe *prbe;
	struct prbe_stats *prbe_stats;
};

/* Source IPs tracked for the per-IP session rate: 2 MiB, far more than a
 * server's audience; an attacker with more IPs recycles idle buckets. */
#define UDPRELAY_IP_ENTRIES 65536

/* Endpoints a forwarder registers (udprelay_attach): public, sessions. */
#define UDPRELAY_ENDPOINTS 2

/* Refs under the public endpoint (a multi endpoint, the forwarder's for
 * its life): the socket itself and the forwarder's timer, and replies its
 * policy sends (udprelay_reply), whose failures count as send_error. */
enum { UDPRELAY_REF_SOCKET, UDPRELAY_REF_REPLY, UDPRELAY_REF_PRBE };

/* A session's ref must fit an endpoint ref. */
_Static_assert(SESSION_REF_BITS <= ENDPOINT_REF_BITS, "session refs are endpoint refs");

/* Set up the tables (key: the session hash's, key2: the per-IP bucket's)
 * for public socket pub_fd, which it then owns. Returns 0 or -errno. */
int udprelay_init(struct udprelay *u, const struct udprelay_conf *c, int pub_fd,
		  const uint8_t key[16], const uint8_t key2[16], struct relay_stats *stats,
		  const struct etr_stats *global, uint64_t now);

/* Count this forwarder's sessions in *open, which other forwarders share
 * (each instance of one relay on its workers): conf.max_sessions is then
 * their total. Before any session opens. */
void udprelay_share_count(struct udprelay *u, _Atomic uint32_t *open);

/* The policy and the socket factory; before attach. */
void udprelay_set_policy(struct udprelay *u, const struct udprelay_policy_ops *pol, void *p);
void udprelay_set_sockops(struct udprelay *u, const struct udprelay_sockops *s, void *arg);

/* Echo PRBE datagrams (prbe_port.h) from sources without a session, before
 * the policy sees them, by p's rules, counting in st; before attach. A
 * source with a session keeps its datagrams: they go to the policy. */
void udprelay_set_prbe(struct udprelay *u, struct prbe *p, struct prbe_stats *st);

/* Register the UDPRELAY_ENDPOINTS endpoints in ep and the public socket
 * with the loop. Returns 0 or -errno (-ENOSPC: the table is full). */
int udprelay_attach(struct udprelay *u, const struct loop_ops *ops, struct loop *l,
		    struct endpoint_table *ep);

/* Close idle sessions, and unassured ones past their time. */
void udprelay_expire(struct udprelay *u, uint64_t now);

/* When udprelay_expire has work next (UINT64_MAX: none). */
uint64_t udprelay_next_deadline(const struct udprelay *u);

/* Expire what is due and arm the timer for the next deadline, exactly
 * (its timer calls it). */
void udprelay_tick(struct udprelay *u, uint64_t now);

/* Close a session, counted under why. */
void udprelay_close_session(struct udprelay *u, uint32_t idx, enum stats_close why);

/* Close every session (exiting). */
void udprelay_shutdown(struct udprelay *u);

/* Close the public socket, leave the endpoint table, free the tables. */
void udprelay_free(struct udprelay *u);

/* Count a client's datagram that goes no further (and log it under
 * --debug through the policy). */
void udprelay_refuse(struct udprelay *u, const union etr_sockaddr *client,
		     const struct loop_dgram *d, enum stats_drop why);

/* Send a copy of buf to dst from the public socket, in the loop's ordered
 * path; on_sent goes to loop id `id` (another endpoint's: heartbeats).
 * Returns 0 or -errno (then no on_sent). */
int udprelay_send(struct udprelay *u, const union etr_sockaddr *dst, const void *buf, size_t len,
		  uint32_t id);

/* The same for the policy's replies (a cached answer, a refusal's text):
 * a failure, now or in on_sent, counts as send_error. Returns 0 or -errno. */
int udprelay_reply(struct udprelay *u, const union etr_sockaddr *dst, const void *buf, size_t len);

static inline struct session_table *udprelay_sessions(struct udprelay *u)
{
	return &u->st;
}

/* The loop id of session idx (its endpoint ref and generation). */
static inline uint32_t udprelay_session_id(const struct udprelay *u, uint32_t idx)
{
	return endpoint_ref_id(u->ep_sessions, session_ref(&u->st, idx));
}

#endif
