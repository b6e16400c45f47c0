/* SPDX-License-Identifier: ISC */
/* The control plane's messages: the request bodies etrelay sends and the
 * answers it accepts, as Connect's unary protocol carries them (protobuf
 * JSON: lowerCamelCase names, unknown fields ignored, an empty repeated
 * field may be left out). Pure: jansson builds and parses, nothing here
 * touches a socket or a file. */
#ifndef ETR_CONTROL_MSG_H
#define ETR_CONTROL_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sni_routes.h"
#include "wgpeers.h"

/* Longest relay id and API token kept from an answer. */
#define CTL_ID_MAX    127
#define CTL_TOKEN_MAX 1023
/* Listeners one heartbeat reports. */
#define CTL_LISTENERS_MAX 128

/* The longest tunnelUrl: "wss://", a DNS name, "/t". */
#define CTL_TUNNEL_URL_MAX 272

/* What enrolment gives: the durable credential (also the state file). */
struct ctl_credential {
	char relay_id[CTL_ID_MAX + 1];
	char api_token[CTL_TOKEN_MAX + 1];
};

enum ctl_listener_kind { CTL_LISTENER_GAME, CTL_LISTENER_SNI, CTL_LISTENER_TURN };

/* The control plane's kind of the listener kind named (struct kind's
 * name: "relay", "sni", "turn"), or -1: a kind it is not told about. */
int ctl_listener_kind(const char *kind_name);

/* One listener in a heartbeat: a game relay counts sessions, an SNI
 * listener connections, a TURN listener allocations. */
struct ctl_listener {
	enum ctl_listener_kind kind;
	char name[64];
	uint32_t active, max;
};

/* The heartbeat's health: what GET /readyz says (200: ready; 503 while
 * draining: draining; any other 503: degraded, with its reasons). */
enum ctl_health { CTL_HEALTH_READY, CTL_HEALTH_DEGRADED, CTL_HEALTH_DRAINING };

/* Reasons one heartbeat carries (healthReasons), and the bytes of each. */
#define CTL_REASONS_MAX 8
#define CTL_REASON_LEN	160

/* What a heartbeat reports; the daemon fills it (control_config.report). */
struct control_report {
	enum ctl_health health;
	/* Why not ready, in words (/readyz's); none when ready. */
	char reasons[CTL_REASONS_MAX][CTL_REASON_LEN];
	unsigned nreasons;
	struct ctl_listener listeners[CTL_LISTENERS_MAX];
	unsigned nlisteners;
	/* The tunnel's WireGuard interface, when there is one:
	 * "wireguard":{"publicKey","listenPort"}. */
	bool wg;
	char wg_public_key[WGP_KEY_B64_LEN + 1];
	uint16_t wg_listen_port;
	/* "tunnelUrl": wss://NAME/t while the tunnel certificate for NAME is
	 * served on rung 3; "" (left out) otherwise. Never derived. */
	char tunnel_url[CTL_TUNNEL_URL_MAX];
};

/* The Enroll request body: {"version":..., "hostname":...}. Returns a
 * malloc'd NUL-terminated string, or NULL (out of memory). */
char *ctl_msg_enroll_request(const char *version, const char *hostname);

/* The Heartbeat request body (see etrelay(8), CONTROL PLANE). Returns a
 * malloc'd string or NULL. */
char *ctl_msg_heartbeat_request(const char *version, const char *hostname,
				const struct control_report *r);

/* Parse an Enroll answer, or the state file (the same object): relayId and
 * apiToken, both non-empty strings of visible ASCII. Returns 0, or -1 with
 * the reason in err. */
int ctl_msg_credential(const char *body, size_t len, struct ctl_credential *out, char *err,
		       size_t errlen);

/* The state file's text for a credential: malloc'd, or NULL. */
char *ctl_msg_credential_json(const struct ctl_credential *c);

/* Parse a Heartbeat answer: sniRoutes, the whole set (absent: no route).
 * Each route needs a valid name, an upstream numeric IP:PORT and an
 * optional boolean proxyV2; the set must build as a table (no name twice).
 * Returns 0 with a malloc'd *list of *n routes (NULL when 0), or -1 with
 * the reason, naming the route, in err. */
int ctl_msg_routes(const char *body, size_t len, struct sni_route **list, size_t *n, char *err,
		   size_t errlen);

/* WireGuard peers one answer may give (the tunnel's interface takes as
 * many: tun_kind.h's TUN_PEERS_MAX). */
#define CTL_WG_PEERS_MAX 4096u

/* Parse a Heartbeat answer's wireguardPeers, the whole set (absent: no
 * peer): each {"publicKey":B64, "allowedIps":["10.8.0.2/32",...],
 * "presharedKey":B64 (optional)}, keys the canonical base64 of 32 bytes,
 * at most WGP_ALLOWED_MAX allowed IPs each, no key twice. Any bad entry
 * refuses the set whole. Returns 0 with a malloc'd *list of *n peers
 * (NULL when 0), or -1 with the reason, naming the peer, in err. */
int ctl_msg_wg_peers(const char *body, size_t len, struct wgp_peer **list, size_t *n, char *err,
		     size_t errlen);

/* tunnelTokens one answer may give: one per gateway. */
#define CTL_TUNNEL_TOKENS_MAX CTL_WG_PEERS_MAX

/* Parse a Heartbeat answer's tunnelTokens, the whole set of rung-3 tokens
 * (absent: none), minted per gateway by the control plane: each a string
 * the upgrade reader takes as a Bearer token (ws_token_valid: 1 to 256
 * token68 characters), none twice. Any bad entry refuses the set whole.
 * Returns 0 with *list malloc'd as one block (the n pointers, then the
 * NUL-terminated tokens; NULL when 0) and *n, or -1 with the reason in err,
 * which names the entry's index and never the token. */
int ctl_msg_tunnel_tokens(const char *body, size_t len, char ***list, size_t *n, char *err,
			  size_t errlen);

/* The route file's text for a set (the shape of a Heartbeat answer, so
 * ctl_msg_routes reads it back): {"sniRoutes":[{"name","upstream"
 * [,"proxyV2":true]}, ...]} and a newline. malloc'd, or NULL. */
char *ctl_msg_routes_json(const struct sni_route *list, size_t n);

/* A 64-bit digest of a set (names, upstreams, proxyV2, in order): equal
 * sets, equal digests. Never 0, which stands for "none". */
uint64_t ctl_msg_routes_sig(const struct sni_route *list, size_t n);

/* The tunnel certificate (seed 002): the RequestCertificate request body,
 * {"csr":"<PEM of a request that names nothing>"}. malloc'd, or NULL. */
char *ctl_msg_cert_request(const char *csr_pem);

/* The longest chain taken: a leaf and a few intermediates are 2 to 8 KiB. */
#define CTL_CERT_CHAIN_MAX (64u * 1024u)

/* Parse a RequestCertificate answer, {"certificateChain":"<PEM, leaf
 * first>"} (other members, such as the names signed, are read from the
 * certificate itself). Returns 0 with *chain malloc'd and *chain_len, or
 * -1 with the reason in err. */
int ctl_msg_cert_answer(const char *body, size_t len, char **chain, size_t *chain_len, char *err,
			size_t errlen);

/* Whether a failed RequestCertificate says that the control plane offers
 * no certificates (a Connect error whose code is "failed_precondition" or
 * "unimplemented", or HTTP 501 whatever the body): ask again in an hour,
 * not in a minute. */
bool ctl_msg_cert_not_offered(long http_status, const char *body, size_t len);

/* The JSON values an answer may hold (objects, arrays, members, elements):
 * a good answer has a few per route. jansson spends up to 80 times an
 * answer's size on its tree when every value is an empty object; past this
 * count the answer is refused before it is parsed. */
#define CTL_ANSWER_VALUES_MAX (16u * SNI_CONTROL_ROUTES_MAX + 1024u)

/* The JSON values in body, strings skipped: an upper bound of what jansson
 * would build (commas, colons and openings outside strings, plus one).
 * Stops counting past limit (returns limit + 1). */
size_t ctl_msg_values(const char *body, size_t len, size_t limit);

/* The first bytes of an error answer, for the log and never parsed: at
 * most outlen - 4 of them, control and non-ASCII bytes as '?', "..." after
 * when cut (the body was longer, or cut says it was cut off). "" when empty. */
void ctl_msg_error_text(const char *body, size_t len, bool cut, char *out, size_t outlen);

/* True when url is http:// and its host is not a loopback address
 * (127.0.0.0/8, ::1, localhost, *.localhost): the tokens would cross a
 * network in clear. The host is copied to host (for the warning). */
bool ctl_url_cleartext_remote(const char *url, char *host, size_t hostlen);

#endif
