/* SPDX-License-Identifier: ISC */
/* The Quake 3 family's policy for the UDP forwarder: what a client's
 * datagram may do (per-IP query buckets, the masters' allowances, the game
 * server's query budget, answers from the query cache), one session per
 * qport, player names, and when the game server's answer assures a
 * session. Its per-session fields live beside the session table. */
#ifndef ETR_Q3POLICY_H
#define ETR_Q3POLICY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "masters.h"
#include "qcache.h"
#include "ratelimit.h"
#include "udprelay.h"
#include "q3proto.h"

/* How long a session holds its qport after its client's last packet to the
 * game server. A player in game sends 20 or more a second; a player whose
 * NAT moved it to a new source port gets a new session, which takes the
 * qport over once the old one has been quiet this long (the engine then
 * fixes up the port, as it would without the relay). */
#define Q3P_QPORT_GRACE (2000 * 1000000ull) /* ns */

/* IPs accepted as players in RELAY_PROVEN_WINDOW: only the game server's
 * connectResponse adds one, which a forged source never sees. */
#define Q3P_PROVEN_ENTRIES 16384

/* q3policy_qport_claim's owner, as qport_refuse takes it: a session on
 * another worker. */
#define Q3P_QPORT_REMOTE (SESSION_NONE - 1)

/* What q3policy_qport_claim decided. */
enum q3p_qport {
	Q3P_QPORT_OK,	    /* the session holds the qport now */
	Q3P_QPORT_MISMATCH, /* an in-game packet with another qport than its session's */
	Q3P_QPORT_OWNED,    /* another session holds it and was heard from within the grace */
};

/* The policy's own fields of one session, by session index: 6 bytes,
 * which an in-game packet reads (its qport), so that 5000 sessions' worth
 * stays in cache; the names, read by /sessions only, live apart. */
struct q3p_session {
	uint16_t qport; /* from its connect, else its first in-game packet */
	bool qport_known;
	bool challenged; /* the game server sent this client a challengeResponse */
	uint8_t master;	 /* 1 + index of the master this client is, 0 if none */
};

/* A player's name from its connect, "" if none. */
#define Q3P_NAME_MAX 32

/* session.master holds 1 + a master's index. */
_Static_assert(CONF_MASTERS_MAX < UINT8_MAX, "a master index must fit q3p_session.master");

/* What one relay's policies on every worker share (with one worker it is
 * there all the same, and nothing is locked): the game server's query
 * budget (--server-query-*), a total; behind lock when workers > 1, which
 * only queries that passed their source's own limits reach. */
struct q3p_shared {
	unsigned workers;
	pthread_mutex_t lock;
	struct rl_budget budget;
	/* The query cache every worker's copy follows (workers > 1): what
	 * any worker stored or sent a refresh for, under lock; cache_gen
	 * says it changed, so a worker looks (one load) before it answers. */
	struct qcache cache;
	_Atomic uint32_t cache_gen;
	/* Who holds each qport (workers > 1): the game server tells players
	 * apart by qport alone, whichever worker their address picked. See
	 * qport_elsewhere in q3policy.c. */
	_Atomic uint64_t *qports;
	union etr_sockaddr *qport_client; /* its holder's client, under lock */
};

struct q3policy {
	const struct relay_conf *conf;
	struct q3p_shared *sh;
	unsigned worker;    /* whose qports these sessions hold, for the others */
	uint32_t cache_gen; /* of sh->cache, when last copied */
	struct udprelay *fwd;
	struct masters *ms;
	struct relay_stats *stats;
	struct q3p_session *ss;			  /* one per session index */
	char (*names)[Q3P_NAME_MAX];		  /* one per session index */
	uint32_t *qport_owner;			  /* 65536 entries: session index + 1, 0 = none */
	struct rl_table ip_rl;			  /* per source IP: connectionless packets */
	struct rl_bucket decode_rl;		  /* connect userinfo decoded, in all */
	struct rl_stamps player_nets;		  /* per /24, /48: the last player's token taken */
	struct rl_stamps proven;		  /* per IP: last accepted as a player */
	struct rl_stamps proven_gap;		  /* per IP: the last returning player's token */
	struct qcache cache;			  /* its last getinfo/getstatus replies */
	struct rl_bucket cache_pkts, cache_bytes; /* answers from the cache */
	/* Each master's own allowance of queries (--master-queries per
	 * heartbeat interval): tokens left, and when the last came back. */
	struct {
		uint32_t tokens;
		uint64_t last;
	} mq[CONF_MASTERS_MAX];
	bool connect_counts;	 /* the game server rate-limits connect */
	bool qport_rules;	 /* the game's netchan has a qport (not DarkPlaces) */
	uint64_t qport_log_next; /* ns: qport refusals are logged once a second */
};

/* What relay conf's policies on `workers` workers share. Returns 0 or
 * -errno (-EINVAL: --server-query-burst leaves no token to share). */
int q3p_shared_init(struct q3p_shared *sh, const struct relay_conf *conf, unsigned workers,
		    uint64_t now);
void q3p_shared_free(struct q3p_shared *sh);

/* The policy of forwarder fwd (initialised, its session table sized) for
 * relay conf, with its masters, on worker `worker`, with what it shares
 * with the other workers' (sh, set up); random64 gives the hash keys.
 * Returns 0 or -errno. */
int q3policy_init(struct q3policy *p, const struct relay_conf *conf, struct udprelay *fwd,
		  struct masters *ms, struct q3p_shared *sh, unsigned worker,
		  uint64_t (*random64)(void), uint64_t now);
void q3policy_free(struct q3policy *p);

/* The forwarder's policy ops (object: struct q3policy). */
extern const struct udprelay_policy_ops q3policy_ops;

/* The masters' events: cache and budget (arg: struct q3policy). */
extern const struct masters_events q3policy_masters_events;

/* Session idx wants qport q for a packet to the game server at now: from
 * its connect (from_connect, which may name a new one) or from an in-game
 * packet (which must carry the session's own, once it has one). The qport
 * is the session's unless another live session holds it and sent something
 * within Q3P_QPORT_GRACE; then *owner (if not NULL) is that session. */
enum q3p_qport q3policy_qport_claim(struct q3policy *p, uint32_t idx, uint16_t q, bool from_connect,
				    uint64_t now, uint32_t *owner);

/* The budget rule: the class of a packet to the game server. The engines
 * (ioquake3 and ET: Legacy with sv_protect 1: SVC_Info, SVC_Status,
 * SV_GetChallenge, SVC_RemoteCommand) spend one token of the sender's
 * address bucket on getinfo, getstatus, getchallenge and rcon; ET: Legacy's
 * SV_DirectConnect also on connect, ioquake3's does not. connect_counts
 * says which kind of engine the game server is. rcon is RL_RCON: an rcon
 * flood (its source is as easy to forge as any) takes no player's token.
 * Anything else is RL_FREE. */
enum rl_class q3_budget_class(enum q3_cmd cmd, bool from_master, bool connect_counts);

#endif
