/* SPDX-License-Identifier: ISC */
/* Configuration: command-line options and the config file share one table of
 * keys, so every option has a file key and every error names its source.
 * The keys are each kind's (conf_key.h); the structs are here for now.
 * Pure: the caller reads the file; nothing here resolves or binds. */
#ifndef ETR_CONFIG_H
#define ETR_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"

/* Relays per process. Each takes RELAY_ENDPOINTS slots of the loop's
 * endpoint table; the SNI listeners and echo-only ports take the rest
 * (daemon.h asserts they all fit). */
#define CONF_RELAYS_MAX 56
/* Masters per relay. */
#define CONF_MASTERS_MAX 8
/* A limit's number as a string literal, for messages. */
#define CONF_STR_(x) #x
#define CONF_STR(x)  CONF_STR_(x)
/* Keys of the option table (conf_defaults checks it has no more). */
#define CONF_KEYS_MAX 96
/* key_line[] of a key set on the command line. */
#define CONF_LINE_CLI		((unsigned)-1)
#define CONF_TAG_MAX		64
#define CONF_NAME_MAX		32
#define CONF_CLI_MAX		128
#define CONF_DEFAULT_PATH	"/etc/etrelay/etrelay.conf"
#define CONF_DEFAULT_LISTEN	"0.0.0.0:27960"
#define CONF_MASTER_PORT	27950
#define CONF_HEARTBEAT_INTERVAL (300 * 1000ull) /* ms */
#define CONF_SESSION_TIMEOUT	(120 * 1000ull) /* ms */
#define CONF_PROBE_TIMEOUT	(3 * 1000ull)	/* ms */
#define CONF_PROBE_ATTEMPTS	3
#define CONF_MAX_SESSIONS	4000
#define CONF_SESSIONS_PER_IP	8
#define CONF_UNASSURED_TIMEOUT	(10 * 1000ull) /* ms */
#define CONF_IP_SESSION_RATE	8	       /* new sessions per second (and at once) per IP */
/* New sessions per second in all: with the default unassured timeout, a
 * flood keeps at most 1000 unassured sessions, a quarter of the table. */
#define CONF_SESSION_RATE   100
#define CONF_MASTER_QUERIES 2 /* per heartbeat interval: a master asks once or twice */
/* A session answered with a challengeResponse is neither evicted nor timed
 * out as unassured for this long: its client's connect is on its way. */
#define CONF_CHALLENGE_GRACE	   (5 * 1000ull) /* ms */
#define CONF_IP_QUERY_BURST	   10		 /* the game server's own per-IP bucket */
#define CONF_IP_QUERY_RATE	   1		 /* per second */
#define CONF_SERVER_QUERY_BURST	   9		 /* the server's 10 less one: room for jitter */
#define CONF_SERVER_QUERY_RATE	   1
#define CONF_QUERY_CACHE	   (1000ull)	/* ms */
#define CONF_QUERY_CACHE_STALE	   (5000ull)	/* ms */
#define CONF_QUERY_CACHE_RATE	   200		/* answers per second, per relay */
#define CONF_QUERY_CACHE_BYTES	   (256u << 10) /* bytes per second, per relay */
#define CONF_QUERY_CACHE_MAX_REPLY 4096		/* bytes */
/* Tokens of the server budget kept for each master (a getChallenge and a
 * getinfo; all masters together at most burst - players - 1), and for
 * players. */
#define RELAY_RESERVE_MASTER 2
#define RELAY_RESERVE_PLAYER 3
/* The players' last RELAY_RESERVE_PROVEN token goes only to a returning
 * player: an IP the game server accepted as a player (connectResponse,
 * in-game traffic) within RELAY_PROVEN_WINDOW, once per RELAY_PROVEN_GAP
 * per IP. */
#define RELAY_RESERVE_PROVEN 1
#define RELAY_PROVEN_WINDOW  (600 * 1000ull) /* ms */
#define RELAY_PROVEN_GAP     (1000ull)	     /* ms */
/* The RELAY_PLAYER_FRESH tokens before those go only to a network (IPv4
 * /24, IPv6 /48) that took no player's token within RELAY_PLAYER_GAP: a
 * client resends getchallenge every 3 s, so each resend of a player finds
 * its network fresh again however hard others on it try. */
#define RELAY_PLAYER_FRESH 1
#define RELAY_PLAYER_GAP   (2500ull) /* ms */

/* Workers (one loop and thread each): at most this many; 0 in struct
 * etr_conf is the default, the CPUs the process may run on (its affinity
 * mask), capped there. */
#define CONF_WORKERS_MAX  64
#define CONF_WORKERS_AUTO 0

/* PRBE echo (prbe.h): echo-only ports (prbe-listen) per process, and the
 * distinct echo ports in all (those and the relays' with prbe yes), which
 * every echo port refuses as a source port (two echoers would bounce a
 * probe forever); prbe.h's PRBE_PORTS_MAX. */
#define CONF_PRBE_LISTEN_MAX 8
#define CONF_PRBE_PORTS_MAX  8
#define CONF_PRBE_MAX_SIZE   1472 /* bytes: an Ethernet frame's IPv4 UDP payload */
#define CONF_PRBE_RATE	     10	  /* probes per second per source IP (IPv6 /64) */
#define CONF_PRBE_BURST	     20	  /* ... and at once */
/* Echoes per second on one echo port, every source together (split across
 * the workers): forged sources each come with a fresh bucket of their own.
 * 200 a second of 1472 bytes is 2.4 Mbit/s. */
#define CONF_PRBE_LISTENER_RATE	 200
#define CONF_PRBE_LISTENER_BURST 400 /* ... and at once */
/* The control plane (control.c): off until control-url is set. */
#define CONF_URL_MAX		 1024
#define CONF_PATH_MAX		 4096
#define CONF_STATE_DIR		 "/var/lib/etrelay"
#define CONF_CONTROL_INTERVAL	 (30 * 1000ull)	     /* ms between heartbeats */
#define CONF_CONTROL_TIMEOUT	 (10 * 1000ull)	     /* ms per request */
#define CONF_CONTROL_BACKOFF_MIN (60 * 1000ull)	     /* ms, first enrolment retry */
#define CONF_CONTROL_BACKOFF_MAX (30 * 60 * 1000ull) /* ms, doubling up to this */
/* The tunnel certificate's request (certsched.h): after a failure, doubling
 * up to the max; after "no certificates offered". */
#define CONF_CONTROL_CERT_RETRY_MIN   (60 * 1000ull)
#define CONF_CONTROL_CERT_RETRY_MAX   (30 * 60 * 1000ull)
#define CONF_CONTROL_CERT_NOT_OFFERED (60 * 60 * 1000ull)
/* The largest answer read (bytes): about 10 000 routes of 200 bytes. */
#define CONF_CONTROL_MAX_ANSWER	    (2u << 20)
#define CONF_CONTROL_MAX_ANSWER_MIN (4u << 10)
#define CONF_CONTROL_MAX_ANSWER_MAX (64u << 20)
/* control-allow-upstream blocks. */
#define CONF_CONTROL_ALLOW_MAX 32
/* The credential's environment variable (and its _FILE form), and its file
 * in the state directory (control.c reads them; -t looks). */
#define CONF_CONTROL_ENV_TOKEN	"ETRELAY_CONTROL_TOKEN"
#define CONF_CONTROL_STATE_FILE "control-credential.json"

/* Exit statuses (sysexits.h). */
#define EXIT_USAGE	 64
#define EXIT_UNAVAILABLE 69 /* requested backend not available */
#define EXIT_CONFIG	 78 /* the configuration is invalid */

/* SNI listeners ([sni NAME] sections, or --sni-listen): at most this many,
 * each with at most CONF_SNI_ROUTES_MAX routes from the file (the control
 * plane may add more at run time). */
#define CONF_SNI_MAX		 8
#define CONF_SNI_ROUTES_MAX	 64
#define CONF_SNI_NAME_MAX	 253		 /* a host name (TLS_NAME_MAX) */
#define CONF_SNI_PREREAD_TIMEOUT (10 * 1000ull)	 /* ms */
#define CONF_SNI_CONNECT_TIMEOUT (5 * 1000ull)	 /* ms */
#define CONF_SNI_IDLE_TIMEOUT	 (300 * 1000ull) /* ms */
#define CONF_SNI_SEND_TIMEOUT	 (60 * 1000ull)	 /* ms */
#define CONF_SNI_MAX_CONNECTIONS 4096
#define CONF_SNI_MAX_PER_IP	 64
#define CONF_SNI_MAX_PREREAD	 1024
/* The largest max-connections: a connection's ref keeps 16 bits of index. */
#define CONF_SNI_CONNECTIONS_LIMIT 50000
/* The listener --sni-listen makes. */
#define CONF_SNI_QUICK_NAME "default"

/* TURN listeners ([turn NAME] sections, or --turn-listen): at most this
 * many, each with at most CONF_TURN_PEERS_MAX allow-peer and as many
 * deny-peer blocks. */
#define CONF_TURN_MAX		  2
#define CONF_TURN_PEERS_MAX	  32
#define CONF_TURN_REALM_MAX	  128
#define CONF_TURN_PORT		  3478 /* when listen gives no port */
#define CONF_TURN_PORT_MIN	  49152
#define CONF_TURN_PORT_MAX	  65535
#define CONF_TURN_MAX_ALLOCATIONS 4000
/* Allocations per userid: a player's client holds one or two (coturn's
 * uclient two), a few calls at once stay well below; a leaked credential
 * cannot take the node (eturnal's default is 10 too). */
#define CONF_TURN_USER_QUOTA 10
/* TURN TCP (and TLS) connections per IPv4 address or IPv6 /64, per worker
 * (one address lands on one worker): as SNI's max-connections-per-ip. */
#define CONF_TURN_TCP_MAX_PER_IP 64
/* TURN TCP and TLS connections per listener and worker (tcp-max-connections;
 * the slots' refs have 16 bits, with room for closed ones still sending),
 * and how long one may stay without an authenticated request
 * (tcp-auth-timeout; the TLS handshake inside it). */
#define CONF_TURN_TCP_MAX_CONNECTIONS	  4096
#define CONF_TURN_TCP_MAX_CONNECTIONS_MAX 49152
#define CONF_TURN_TCP_AUTH_TIMEOUT	  (10 * 1000ull)   /* ms */
#define CONF_TURN_MAX_LIFETIME		  (3600 * 1000ull) /* ms */
/* How long a nonce is good for, then 438 and a fresh one (coturn: 600 s). */
#define CONF_TURN_NONCE_LIFETIME (3600 * 1000ull) /* ms */
#define CONF_TURN_TLS_RELOAD	 (60 * 1000ull)	  /* ms */
/* Answers to unauthenticated requests (Binding, 401, 438, 420, 400): each
 * is larger than the request, the source may be forged (UDP), and each
 * costs the worker's thread (a 401 or 438 its nonce's HMAC; over TCP they
 * come pipelined), so they are limited per source IP (IPv6 /64) and per
 * listener in all (split across the workers): over UDP dropped, over TCP
 * and TLS the connection closed. A client needs one or two per
 * allocation. */
#define CONF_TURN_UNAUTH_RATE	  2000
#define CONF_TURN_UNAUTH_BURST	  4000
#define CONF_TURN_UNAUTH_IP_RATE  10
#define CONF_TURN_UNAUTH_IP_BURST 20
/* TLS handshakes a TURN listener starts (tls-listen): each costs the
 * worker's thread, the one that also moves the game's packets, about
 * 0.3-0.5 ms of crypto for a ClientHello an attacker makes once and
 * replays (doc/abuse.md has the measurement). A new TLS
 * connection past its source's bucket (IPv4 address or IPv6 /64) or the
 * listener's (split across the workers) is closed before any crypto. A
 * TURN client makes one per call: 200/s is far above a real service and
 * keeps the handshakes near a tenth of a core at most. */
#define CONF_TURN_TLS_RATE     200
#define CONF_TURN_TLS_BURST    100
#define CONF_TURN_TLS_IP_RATE  20
#define CONF_TURN_TLS_IP_BURST 40
/* Failed authentication (a forged nonce over TCP or TLS, a username that
 * is not "<expiry>:<userid>", a MAC no secret matches): each costs the
 * worker's thread, which moves the game's packets too, up to six HMAC and
 * digest passes (the derivation of the key under each secret, then the
 * MAC). Per source (IPv4 address or IPv6 /64) and per listener (split
 * across the workers, as the other rates): past its source's bucket a
 * signed request gets no HMAC work (UDP: dropped; TCP, TLS: closed) but
 * for its 5-tuple's allocation (one MAC: players behind that NAT address
 * keep their calls); past the listener's, only one whose username's key
 * is kept from a success, or an allocation's.
 * The listener's burst is the most such work one loop turn can do. */
#define CONF_TURN_AUTH_FAIL_RATE     100
#define CONF_TURN_AUTH_FAIL_BURST    20
#define CONF_TURN_AUTH_FAIL_IP_RATE  2
#define CONF_TURN_AUTH_FAIL_IP_BURST 10
/* The realm when none is given: the same on every node, so that a pool of
 * relays shares one (the long-term key is MD5(user:realm:password)). */
#define CONF_TURN_REALM "etrelay"
/* The listener --turn-listen makes. */
#define CONF_TURN_QUICK_NAME "default"
/* The secrets (each also with a _FILE form), at least this long. */
#define CONF_TURN_ENV_SECRET	  "ETRELAY_TURN_SECRET"
#define CONF_TURN_ENV_SECRET_NEXT "ETRELAY_TURN_SECRET_NEXT"
#define CONF_TURN_SECRET_MIN	  32

enum conf_backend { CONF_BACKEND_AUTO, CONF_BACKEND_URING, CONF_BACKEND_EPOLL };

/* --log-time: auto prints the time unless stderr is the journal. */
enum conf_log_time { CONF_LOG_TIME_AUTO, CONF_LOG_TIME_YES, CONF_LOG_TIME_NO };
#define CONF_LOG_TIME CONF_LOG_TIME_AUTO

struct conf_master {
	char host[ADDR_HOSTLEN];
	uint16_t port;
	unsigned line; /* in the config file; 0: command line or built in */
};

/* One relay: a public port in front of one game server. */
struct relay_conf {
	char name[CONF_NAME_MAX];
	unsigned line;			  /* of its [relay] header; 0 when from the command line */
	unsigned key_line[CONF_KEYS_MAX]; /* where each key was set: file line,
					   * CONF_LINE_CLI, or 0 (the default) */
	union etr_sockaddr listen;
	char upstream_host[ADDR_HOSTLEN];
	uint16_t upstream_port;
	struct conf_master masters[CONF_MASTERS_MAX];
	unsigned nmasters;
	bool masters_set; /* given; else the game's own (relay_finish) */
	char game[8];	  /* short name for logs: ET, RTCW, Q3, DP */
	char heartbeat[CONF_TAG_MAX];
	char flatline[CONF_TAG_MAX];	  /* empty: the game has none */
	bool heartbeat_set, flatline_set; /* explicit tags win over the game's */
	uint64_t heartbeat_interval_ms;
	uint64_t session_timeout_ms;
	uint64_t probe_timeout_ms;
	uint32_t max_sessions;
	uint16_t port_min, port_max; /* session socket ports; 0 = ephemeral */
	/* Abuse resistance. */
	uint32_t sessions_per_ip;
	uint64_t unassured_timeout_ms;		/* no answer from the game server yet */
	uint32_t ip_session_rate, session_rate; /* new sessions per second */
	uint32_t master_queries;		/* per master address and heartbeat interval */
	uint32_t ip_query_burst, ip_query_rate;
	uint32_t server_query_burst, server_query_rate;
	uint64_t query_cache_ms;       /* 0: no cache */
	uint64_t query_cache_stale_ms; /* served past query_cache_ms while refreshing */
	uint32_t query_cache_rate, query_cache_bytes; /* answers from it, per second */
	uint32_t query_cache_max_reply;		      /* bytes */
	bool prbe; /* echo "PRBE" datagrams from sources without a session */
};

/* The PRBE echo's rules, for every echo port, and the echo-only ports. */
struct conf_prbe {
	uint32_t max_size, rate, burst;
	uint32_t listener_rate, listener_burst; /* each echo port, every source together */
	union etr_sockaddr listen[CONF_PRBE_LISTEN_MAX];
	unsigned listen_line[CONF_PRBE_LISTEN_MAX]; /* in the file; 0: command line */
	unsigned nlisten;
	/* conf_finish: every distinct echo port (host order). */
	uint16_t ports[CONF_PRBE_PORTS_MAX];
	unsigned nports;
};

/* One SNI route as configured: its upstream is resolved at start. */
struct sni_route_conf {
	char name[CONF_SNI_NAME_MAX + 1]; /* "host" or "*.suffix", lower case */
	char host[ADDR_HOSTLEN];
	uint16_t port;
	bool proxy_v2;
	unsigned line; /* in the config file; 0: command line */
};

/* One SNI listener: a TCP port whose connections are spliced by the server
 * name of their TLS ClientHello. */
struct sni_conf {
	char name[CONF_NAME_MAX];
	unsigned line; /* of its [sni] header; 0 when from the command line */
	bool listen_set;
	union etr_sockaddr listen;
	uint64_t preread_timeout_ms, connect_timeout_ms, idle_timeout_ms;
	uint64_t send_timeout_ms; /* a side that takes no spliced byte this long is reset */
	uint32_t max_connections; /* in all, across the workers */
	uint32_t max_per_ip;	  /* from one IPv4 address or IPv6 /64 */
	uint32_t max_preread;	  /* still reading their ClientHello */
	/* Spliced bytes through a pipe pair per connection (splice(2)), not
	 * the loop's chunk pool: 4 more descriptors a connection, for at most
	 * max_spliced connections at once (0: conf_sni_max_spliced's default);
	 * the others copy. */
	bool splice;
	uint32_t max_spliced;
	unsigned max_spliced_line; /* 0: command line or default */
	struct sni_route_conf routes[CONF_SNI_ROUTES_MAX];
	unsigned nroutes;
};

/* Connections of s that may splice through pipes at once, across the
 * workers: max-spliced, at most max-connections; unset, a quarter of
 * max-connections (HAProxy's maxpipes default); 0 without splice yes. */
static inline uint32_t conf_sni_max_spliced(const struct sni_conf *s)
{
	if (!s->splice)
		return 0;
	if (!s->max_spliced)
		return s->max_connections / 4 ? s->max_connections / 4 : 1;
	return s->max_spliced < s->max_connections ? s->max_spliced : s->max_connections;
}

/* An address block: allow-peer, deny-peer. */
struct conf_cidr {
	union etr_sockaddr addr; /* port 0 */
	uint8_t bits;
	unsigned line; /* in the config file; 0 from the command line */
};

/* One TURN listener (RFC 8656): UDP, and TCP and TLS if asked, relaying
 * from relay-address in the ports range. */
struct turn_conf {
	char name[CONF_NAME_MAX];
	unsigned line; /* of its [turn] header; 0 when from the command line */
	bool listen_set, tcp_set, tls_set, relay_set, public_set, ports_set;
	union etr_sockaddr listen, tcp_listen, tls_listen;
	char tls_cert[CONF_PATH_MAX], tls_key[CONF_PATH_MAX];
	unsigned tls_cert_line, tls_key_line, ports_line; /* 0: command line or default */
	unsigned max_allocations_line;			  /* the same */
	uint64_t tls_reload_ms;
	bool tls_reload_set;	  /* tls-reload-interval given */
	unsigned tls_reload_line; /* 0: from the command line */
	char realm[CONF_TURN_REALM_MAX];
	union etr_sockaddr relay_addr; /* port 0 */
	union etr_sockaddr public_ip;  /* port 0 */
	uint16_t port_min, port_max;
	uint32_t max_allocations, user_quota;
	uint32_t unauth_rate, unauth_burst, unauth_ip_rate, unauth_ip_burst;
	uint32_t tls_rate, tls_burst, tls_ip_rate, tls_ip_burst;	 /* TLS handshakes */
	uint32_t authf_rate, authf_burst, authf_ip_rate, authf_ip_burst; /* failed auth */
	uint32_t tcp_max_per_ip;      /* TCP and TLS connections, IPv4 address or IPv6 /64 */
	uint32_t tcp_max_conns;	      /* TCP and TLS connections in all, split across workers */
	uint64_t tcp_auth_timeout_ms; /* without an authenticated request */
	uint64_t max_lifetime_ms;
	uint64_t nonce_lifetime_ms;
	struct conf_cidr allow[CONF_TURN_PEERS_MAX], deny[CONF_TURN_PEERS_MAX];
	unsigned nallow, ndeny;
	bool strict_expiry;
};

/* The XDP front door (xdp/): the interfaces it attaches to, and the
 * bucket of each source it does not know. */
#define CONF_XDP_IFACES_MAX 8
#define CONF_XDP_IFNAME	    16 /* IFNAMSIZ */
/* 0: the sum of the listeners' own per-source limits (xdp.h's xdp_rates),
 * as --help says. */
#define CONF_XDP_RATE  0
#define CONF_XDP_BURST 0
#define CONF_XDP_RDEF  summed listener limits
#define CONF_XDP_BHELP likewise
struct conf_xdp {
	char iface[CONF_XDP_IFACES_MAX][CONF_XDP_IFNAME];
	unsigned line[CONF_XDP_IFACES_MAX]; /* 0: the command line */
	unsigned n;
	uint32_t rate, burst; /* packets per second, and at once, per source */
};

/* The tunnel (seed 002): one [tunnel] section, a WireGuard interface
 * the relay keys and whose peers the control plane gives (tun/). */
#define CONF_TUN_PORT	51820
#define CONF_TUN_IFNAME 16 /* IFNAMSIZ */
/* Rung 3's limits on each worker (the rung3-* keys; their defaults and
 * bounds are tun/tun_r3.h's): connections, of one source, of one token,
 * the largest message, the ciphertext a connection may hold for its
 * client, the time for TLS and the upgrade, and for nothing from the
 * client once open. */
struct tun_r3_limits {
	uint32_t conns, per_source, per_token, max_msg, backlog;
	uint64_t handshake_ms, idle_ms;
	/* TLS handshakes (and upgrades) begun per second and at once: the
	 * relay's (each worker its share), and each source's on a worker. */
	uint32_t hs_rate, hs_burst, hs_ip_rate, hs_ip_burst;
};
struct tun_conf {
	char name[CONF_NAME_MAX]; /* "": the section has no label */
	unsigned line;		  /* of its [tunnel] header */
	char ifname[CONF_TUN_IFNAME];
	bool ifname_set, address_set;	 /* given (perhaps wrong, and said so) */
	unsigned ifname_line, port_line; /* of interface, listen-port; 0: none */
	bool create;		  /* make a kernel interface (else use one, e.g. wireguard-go's) */
	uint32_t listen_port;	  /* WireGuard's UDP port */
	struct conf_cidr address; /* the relay's own tunnel address and prefix */
	struct tun_r3_limits r3;  /* rung 3's, on each worker */
};

struct conf_cli {
	const char *key, *value; /* value NULL for flags */
};

struct conf_schema;

struct etr_conf {
	const struct conf_schema *schema; /* conf_defaults' */
	/* Process-wide. */
	enum conf_backend backend;
	bool gso;	  /* UDP GSO trains (default on) */
	unsigned workers; /* 1..CONF_WORKERS_MAX, or CONF_WORKERS_AUTO */
	bool debug;
	enum conf_log_time log_time;
	bool ops_enabled, ops_allow_public;
	union etr_sockaddr ops_listen;
	uint64_t drain_timeout_ms; /* 0: exit at once on SIGTERM */
	char ban_file[4096];	   /* "" : none */
	struct conf_prbe prbe;
	struct conf_xdp xdp;
	/* The control plane; control_url "" : none. */
	char control_url[CONF_URL_MAX];		    /* no trailing '/' */
	char control_bootstrap_file[CONF_PATH_MAX]; /* "" : none */
	char state_dir[CONF_PATH_MAX];
	uint64_t control_interval_ms, control_timeout_ms;
	uint64_t control_backoff_min_ms, control_backoff_max_ms;
	/* The tunnel certificate's waits (with a [tunnel] only). */
	uint64_t control_cert_retry_min_ms, control_cert_retry_max_ms;
	uint64_t control_cert_not_offered_ms;
	uint32_t control_max_answer; /* bytes */
	/* Private and host blocks the control plane's routes may reach. */
	struct conf_cidr control_allow[CONF_CONTROL_ALLOW_MAX];
	unsigned ncontrol_allow;
	/* Command-line only. */
	const char *path; /* config file, NULL: none */
	bool path_given, test, probe, help, version;
	struct conf_cli cli[CONF_CLI_MAX];
	unsigned ncli;
	bool cli_upstream; /* the command line names a game server */
	bool cli_listener; /* ... or another listener (sni-listen, prbe-listen) */
	/* The relays, and the defaults each starts from. */
	struct relay_conf base;
	struct relay_conf relays[CONF_RELAYS_MAX];
	unsigned nrelays;
	/* SNI listeners; sni_cli gathers --sni-listen and --sni-route (or
	 * the same keys at the file's top level) for the quick-start one. */
	struct sni_conf sni[CONF_SNI_MAX];
	unsigned nsni;
	struct sni_conf sni_cli;
	/* TURN listeners; turn_cli gathers the --turn-* options (or the same
	 * keys at the file's top level) for the quick-start one. */
	struct turn_conf turn[CONF_TURN_MAX];
	unsigned nturn;
	struct turn_conf turn_cli;
	bool turn_cli_set; /* a --turn-* key was given */
	/* The tunnel: ntunnel is 0 or 1. tunnel_cli gathers the --wg-* options
	 * (or the same keys at the file's top level) for the quick-start one. */
	struct tun_conf tunnel[1];
	unsigned ntunnel;
	struct tun_conf tunnel_cli;
	bool tunnel_cli_set; /* a --wg-* key was given */
};

/* Error lines, all of them, newline-separated. */
struct conf_errors {
	char text[8192];
	size_t len;
	unsigned count;
};

/* "10.0.0.0/8", "fd00::/8", or an address alone (all its bits). 0 or -1. */
int conf_cidr_parse(const char *s, struct conf_cidr *out);

/* Built-in defaults of every part of schema s (conf_key.h; NULL: none, a
 * conf filled by hand), no relay yet. The parsers below walk s. */
void conf_defaults(struct etr_conf *c, const struct conf_schema *s);

/* Parse argv. Options that configure relays are checked now and applied by
 * conf_finish, after the file. Returns 0, or -1 with the error in e. */
int conf_parse_args(struct etr_conf *c, int argc, char **argv, struct conf_errors *e);

/* Parse config file text (path for messages). Every error is reported.
 * Returns 0 or -1. */
int conf_load(struct etr_conf *c, const char *text, size_t len, const char *path,
	      struct conf_errors *e);

/* Apply the command line over the file, fill in a relay from the command
 * line when the file has none, and check the whole. Returns 0 or -1. */
int conf_finish(struct etr_conf *c, struct conf_errors *e);

/* What is legal but likely a mistake, as warnings naming FILE:LINE in w
 * (one line each): each part's, in the schema's order. Returns their
 * number. */
unsigned conf_warnings(const struct etr_conf *c, struct conf_errors *w);

/* Where the process-wide key was set, for a message about it: "FILE:LINE",
 * "etrelay: command line", or "etrelay" (its default), in buf. */
const char *conf_key_where(const struct etr_conf *c, const char *key, char *buf, size_t n);

/* Where a message about t's TLS pair points: "FILE:LINE" of tls-cert when
 * msg starts with the certificate's path, else of tls-key when it starts
 * with the key's (a mismatch does); NULL when from the command line. */
const char *conf_turn_tls_where(const struct etr_conf *c, const struct turn_conf *t,
				const char *msg, char *buf, size_t n);

/* "300", "300s", "500ms", "5m", "1h" (bare = seconds) into ms; zero only
 * when allow_zero. Returns 0 or -1. */
int conf_parse_duration(const char *s, uint64_t *ms, bool allow_zero);

/* Read a whole config-like file (at most 1 MiB) into a NUL-terminated
 * buffer to free(); NULL with errno set on failure. */
char *conf_read_file(const char *path, size_t *len);

/* Whether a socket bound to listen can send to an address of family
 * (AF_INET, AF_INET6; an IPv4-mapped IPv6 address counts as AF_INET): an
 * IPv6 socket bound to :: reaches IPv4 through mapped addresses unless
 * v6only; one bound to another IPv6 address does not. */
bool conf_listener_reaches(const union etr_sockaddr *listen, bool v6only, int family);

/* The family a master's address counts as for conf_listener_reaches. */
int conf_addr_family(const union etr_sockaddr *a);

/* Every listening address the configuration names, each kind's, and the
 * ops plane's: key is the config's word ("relay", "prbe-listen", "sni",
 * "turn", "tunnel", "ops-listen"), what the prose ("game relay", "PRBE echo
 * port", "SNI listener", "TURN listener", "TURN TCP listener", "TURN TLS
 * listener", "WireGuard port", "ops listener"), name the listener's (""
 * when it has none); line the file's line that gives it (0: not kept);
 * addr is valid during the call only. The one list
 * that -t's warnings, the TURN peer policy, the control plane's upstream
 * check and the session-ports check read. */
struct conf_listen {
	const char *key, *what, *name;
	const union etr_sockaddr *addr;
	unsigned line;
};
void conf_each_listen(const struct etr_conf *c,
		      void (*each)(void *arg, const struct conf_listen *l), void *arg);

#endif
