/* SPDX-License-Identifier: ISC */
/* Request bodies and answers of the control plane, with jansson: a kept,
 * fuzzed JSON library rather than a parser of our own. */
#include "control_msg.h"
#include "url.h"
#include "ws.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Parse flags: a key twice is an answer no protobuf encoder writes. */
#define CTL_JSON_FLAGS (JSON_REJECT_DUPLICATES)

/* Compact output; keys in the order set. */
#define CTL_DUMP_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER)

/* Visible ASCII, 1 to max bytes: what a Bearer header and a log line carry. */
static bool visible(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e)
			return false;
	return true;
}

static char *dump(json_t *o)
{
	char *s = o ? json_dumps(o, CTL_DUMP_FLAGS) : NULL;

	json_decref(o);
	return s;
}

int ctl_listener_kind(const char *kind_name)
{
	static const char *const names[] = {
	    [CTL_LISTENER_GAME] = "relay",
	    [CTL_LISTENER_SNI] = "sni",
	    [CTL_LISTENER_TURN] = "turn",
	};

	for (unsigned k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		if (strcmp(names[k], kind_name) == 0)
			return (int)k;
	return -1;
}

char *ctl_msg_enroll_request(const char *version, const char *hostname)
{
	return dump(json_pack("{s:s, s:s}", "version", version, "hostname", hostname));
}

char *ctl_msg_heartbeat_request(const char *version, const char *hostname,
				const struct control_report *r)
{
	/* Per kind: its array's key, and the names of what it counts. */
	static const char *const keys[][3] = {
	    [CTL_LISTENER_GAME] = {"gameRelays", "sessions", "maxSessions"},
	    [CTL_LISTENER_SNI] = {"sniListeners", "connections", "maxConnections"},
	    [CTL_LISTENER_TURN] = {"turnListeners", "allocations", "maxAllocations"},
	};
	json_t *arr[3] = {json_array(), json_array(), json_array()}, *o = NULL;
	unsigned n = r->nlisteners < CTL_LISTENERS_MAX ? r->nlisteners : CTL_LISTENERS_MAX;
	bool ok = arr[0] && arr[1] && arr[2];

	for (unsigned i = 0; ok && i < n; i++) {
		const struct ctl_listener *l = &r->listeners[i];
		unsigned k = l->kind <= CTL_LISTENER_TURN ? l->kind : CTL_LISTENER_GAME;
		json_t *e = json_pack("{s:s, s:I, s:I}", "name", l->name, keys[k][1],
				      (json_int_t)l->active, keys[k][2], (json_int_t)l->max);

		ok = e && json_array_append_new(arr[k], e) == 0;
	}
	static const char *const health[] = {
	    [CTL_HEALTH_READY] = "HEALTH_READY",
	    [CTL_HEALTH_DEGRADED] = "HEALTH_DEGRADED",
	    [CTL_HEALTH_DRAINING] = "HEALTH_DRAINING",
	};
	unsigned h = r->health <= CTL_HEALTH_DRAINING ? r->health : CTL_HEALTH_DEGRADED;
	json_t *why = NULL;

	if (ok)
		o = json_pack("{s:s, s:s, s:s}", "version", version, "hostname", hostname, "health",
			      health[h]);
	/* The reasons only when there are some (proto3 JSON leaves an empty
	 * repeated field out): a ready relay sends what it always sent. */
	if (o && r->nreasons && h != CTL_HEALTH_READY) {
		why = json_array();
		for (unsigned i = 0; why && i < r->nreasons && i < CTL_REASONS_MAX; i++) {
			char text[CTL_REASON_LEN];

			/* json_pack, not jansson's json_string(): src/core/json.h has a
			 * function of that name, and the link takes ours. */
			snprintf(text, sizeof(text), "%s", r->reasons[i]);
			if (json_array_append_new(why, json_pack("s", text)) < 0) {
				json_decref(why);
				why = NULL;
			}
		}
		if (!why || json_object_set_new(o, "healthReasons", why) < 0) {
			json_decref(o);
			o = NULL;
		}
	}
	/* The tunnel only when there is one: a control plane that knows
	 * nothing of it sees the report it always saw. */
	if (o && r->wg) {
		json_t *w = json_pack("{s:s, s:I}", "publicKey", r->wg_public_key, "listenPort",
				      (json_int_t)r->wg_listen_port);

		if (!w || json_object_set_new(o, "wireguard", w) < 0) {
			json_decref(o);
			o = NULL;
		}
	}
	/* tunnelUrl only while it is served (proto3 JSON leaves an empty
	 * string out). */
	if (o && r->tunnel_url[0]) {
		char url[CTL_TUNNEL_URL_MAX];

		snprintf(url, sizeof(url), "%s", r->tunnel_url);
		if (json_object_set_new(o, "tunnelUrl", json_pack("s", url)) < 0) {
			json_decref(o);
			o = NULL;
		}
	}
	/* The TURN array only when there is a TURN listener: a control plane
	 * that knows nothing of TURN sees the report it always saw. */
	for (unsigned k = 0; o && k < 3; k++)
		if ((k != CTL_LISTENER_TURN || json_array_size(arr[k]) > 0) &&
		    json_object_set(o, keys[k][0], arr[k]) < 0) {
			json_decref(o);
			o = NULL;
		}
	for (unsigned k = 0; k < 3; k++)
		json_decref(arr[k]);
	return dump(o);
}

/* The root object of an answer, or NULL with err set. */
static json_t *load_object(const char *body, size_t len, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root;

	if (ctl_msg_values(body, len, CTL_ANSWER_VALUES_MAX) > CTL_ANSWER_VALUES_MAX) {
		snprintf(err, errlen, "more than %u JSON values, refused unparsed",
			 CTL_ANSWER_VALUES_MAX);
		return NULL;
	}
	root = json_loadb(body, len, CTL_JSON_FLAGS, &je);
	if (!root) {
		snprintf(err, errlen, "not JSON (line %d, column %d: %s)", je.line, je.column,
			 je.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "not a JSON object");
		json_decref(root);
		return NULL;
	}
	return root;
}

int ctl_msg_credential(const char *body, size_t len, struct ctl_credential *out, char *err,
		       size_t errlen)
{
	json_t *root = load_object(body, len, err, errlen);
	const char *id, *tok;
	int rc = -1;

	if (!root)
		return -1;
	id = json_string_value(json_object_get(root, "relayId"));
	tok = json_string_value(json_object_get(root, "apiToken"));
	if (!id || !visible(id, CTL_ID_MAX))
		snprintf(err, errlen, "relayId: expected a string of 1 to %d visible ASCII bytes",
			 CTL_ID_MAX);
	else if (!tok || !visible(tok, CTL_TOKEN_MAX))
		snprintf(err, errlen, "apiToken: expected a string of 1 to %d visible ASCII bytes",
			 CTL_TOKEN_MAX);
	else {
		strcpy(out->relay_id, id);
		strcpy(out->api_token, tok);
		rc = 0;
	}
	json_decref(root);
	return rc;
}

char *ctl_msg_credential_json(const struct ctl_credential *c)
{
	char *s = dump(json_pack("{s:s, s:s}", "relayId", c->relay_id, "apiToken", c->api_token));
	char *nl;

	/* A file ends with a newline. */
	if (s && (nl = realloc(s, strlen(s) + 2))) {
		strcat(nl, "\n");
		return nl;
	}
	free(s);
	return NULL;
}

/* Route i (0-based) of the answer into r; -1 with err naming it. */
static int route_parse(json_t *e, size_t i, struct sni_route *r, char *err, size_t errlen)
{
	json_t *name = json_object_get(e, "name"), *up = json_object_get(e, "upstream"),
	       *pv2 = json_object_get(e, "proxyV2");
	const char *n;

	if (!json_is_object(e)) {
		snprintf(err, errlen, "sniRoutes[%zu]: not an object", i);
		return -1;
	}
	memset(r, 0, sizeof(*r));
	n = json_string_value(name);
	if (!n || !addr_host_pattern_valid(n)) {
		snprintf(err, errlen, "sniRoutes[%zu].name: expected a host name or *.suffix", i);
		return -1;
	}
	strcpy(r->name, n);
	if (!json_is_string(up) || addr_parse_numeric(json_string_value(up), &r->upstream) < 0 ||
	    (r->upstream.sa.sa_family == AF_INET ? r->upstream.in.sin_port
						 : r->upstream.in6.sin6_port) == 0) {
		snprintf(err, errlen,
			 "sniRoutes[%zu] (%s).upstream: expected a numeric IP:PORT or [IPv6]:PORT",
			 i, r->name);
		return -1;
	}
	/* proto3 JSON leaves a false bool out; null is the default too. */
	if (pv2 && !json_is_null(pv2) && !json_is_boolean(pv2)) {
		snprintf(err, errlen, "sniRoutes[%zu] (%s).proxyV2: expected true or false", i,
			 r->name);
		return -1;
	}
	r->proxy_v2 = json_is_true(pv2);
	return 0;
}

int ctl_msg_routes(const char *body, size_t len, struct sni_route **list, size_t *n, char *err,
		   size_t errlen)
{
	json_t *root = load_object(body, len, err, errlen), *arr;
	struct sni_route *out = NULL;
	struct sni_routes *t;
	size_t count;

	*list = NULL;
	*n = 0;
	if (!root)
		return -1;
	arr = json_object_get(root, "sniRoutes");
	count = json_is_array(arr) ? json_array_size(arr) : 0;
	if (arr && !json_is_null(arr) && !json_is_array(arr)) {
		snprintf(err, errlen, "sniRoutes: not an array");
		goto fail;
	}
	if (count > SNI_CONTROL_ROUTES_MAX) {
		snprintf(err, errlen, "sniRoutes: %zu routes, at most %u", count,
			 SNI_CONTROL_ROUTES_MAX);
		goto fail;
	}
	if (count && !(out = calloc(count, sizeof(*out)))) {
		snprintf(err, errlen, "out of memory for %zu routes", count);
		goto fail;
	}
	for (size_t i = 0; i < count; i++)
		if (route_parse(json_array_get(arr, i), i, &out[i], err, errlen) < 0)
			goto fail;
	/* The set must make a table (no name twice): the same check the
	 * listener makes, before the set is handed over. */
	if (sni_routes_build(&t, out, count, err, errlen) < 0)
		goto fail;
	sni_routes_free(t);
	json_decref(root);
	*list = out;
	*n = count;
	return 0;
fail:
	free(out);
	json_decref(root);
	return -1;
}

/* Peer i of wireguardPeers into p, or -1 with err naming it. */
static int wg_peer_parse(json_t *e, size_t i, struct wgp_peer *p, char *err, size_t errlen)
{
	json_t *key = json_object_get(e, "publicKey"), *ips = json_object_get(e, "allowedIps");
	json_t *psk = json_object_get(e, "presharedKey");
	size_t nips;

	memset(p, 0, sizeof(*p));
	if (!json_is_object(e)) {
		snprintf(err, errlen, "wireguardPeers[%zu]: not an object", i);
		return -1;
	}
	if (!json_is_string(key) ||
	    !wgp_key_from_b64(json_string_value(key), json_string_length(key), p->key)) {
		snprintf(err, errlen,
			 "wireguardPeers[%zu]: publicKey: expected the base64 of 32 bytes", i);
		return -1;
	}
	if (psk && !json_is_null(psk) &&
	    (!json_is_string(psk) ||
	     !wgp_key_from_b64(json_string_value(psk), json_string_length(psk), p->psk))) {
		snprintf(err, errlen,
			 "wireguardPeers[%zu]: presharedKey: expected the base64 of 32 bytes", i);
		return -1;
	}
	if (ips && !json_is_null(ips) && !json_is_array(ips)) {
		snprintf(err, errlen, "wireguardPeers[%zu]: allowedIps: not an array", i);
		return -1;
	}
	nips = json_is_array(ips) ? json_array_size(ips) : 0;
	if (nips > WGP_ALLOWED_MAX) {
		snprintf(err, errlen, "wireguardPeers[%zu]: %zu allowedIps, at most %u", i, nips,
			 WGP_ALLOWED_MAX);
		return -1;
	}
	for (size_t j = 0; j < nips; j++) {
		json_t *c = json_array_get(ips, j);

		if (!json_is_string(c) ||
		    wgp_cidr_parse(json_string_value(c), json_string_length(c), &p->allowed[j]) <
			0) {
			snprintf(err, errlen,
				 "wireguardPeers[%zu]: allowedIps[%zu]: expected an address or a "
				 "CIDR block such as 10.8.0.2/32",
				 i, j);
			return -1;
		}
	}
	p->n_allowed = (uint16_t)nips;
	wgp_peer_canon(p);
	return 0;
}

static int wg_key_cmp(const void *a, const void *b)
{
	return memcmp(((const struct wgp_peer *)a)->key, ((const struct wgp_peer *)b)->key,
		      WGP_KEY_LEN);
}

int ctl_msg_wg_peers(const char *body, size_t len, struct wgp_peer **list, size_t *n, char *err,
		     size_t errlen)
{
	json_t *root = load_object(body, len, err, errlen), *arr;
	struct wgp_peer *out = NULL;
	size_t count;

	*list = NULL;
	*n = 0;
	if (!root)
		return -1;
	arr = json_object_get(root, "wireguardPeers");
	count = json_is_array(arr) ? json_array_size(arr) : 0;
	if (arr && !json_is_null(arr) && !json_is_array(arr)) {
		snprintf(err, errlen, "wireguardPeers: not an array");
		goto fail;
	}
	if (count > CTL_WG_PEERS_MAX) {
		snprintf(err, errlen, "wireguardPeers: %zu peers, at most %u", count,
			 CTL_WG_PEERS_MAX);
		goto fail;
	}
	if (count && !(out = calloc(count, sizeof(*out)))) {
		snprintf(err, errlen, "out of memory for %zu peers", count);
		goto fail;
	}
	for (size_t i = 0; i < count; i++)
		if (wg_peer_parse(json_array_get(arr, i), i, &out[i], err, errlen) < 0)
			goto fail;
	/* A key twice: which of the two is meant cannot be told. (No sort
	 * of none: qsort's array may not be NULL, even for 0.) */
	if (count > 1)
		qsort(out, count, sizeof(*out), wg_key_cmp);
	for (size_t i = 1; i < count; i++)
		if (wg_key_cmp(&out[i - 1], &out[i]) == 0) {
			char b64[WGP_KEY_B64_LEN + 1];

			wgp_key_to_b64(out[i].key, b64);
			snprintf(err, errlen, "wireguardPeers: publicKey %s given twice", b64);
			goto fail;
		}
	json_decref(root);
	*list = out;
	*n = count;
	return 0;
fail:
	free(out);
	json_decref(root);
	return -1;
}

static int str_ptr_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int ctl_msg_tunnel_tokens(const char *body, size_t len, char ***list, size_t *n, char *err,
			  size_t errlen)
{
	json_t *root = load_object(body, len, err, errlen), *arr;
	char **out = NULL, **sorted = NULL, *p;
	size_t count, bytes = 0;

	*list = NULL;
	*n = 0;
	if (!root)
		return -1;
	arr = json_object_get(root, "tunnelTokens");
	count = json_is_array(arr) ? json_array_size(arr) : 0;
	if (arr && !json_is_null(arr) && !json_is_array(arr)) {
		snprintf(err, errlen, "tunnelTokens: not an array");
		goto fail;
	}
	if (count > CTL_TUNNEL_TOKENS_MAX) {
		snprintf(err, errlen, "tunnelTokens: %zu tokens, at most %u", count,
			 CTL_TUNNEL_TOKENS_MAX);
		goto fail;
	}
	for (size_t i = 0; i < count; i++) {
		json_t *t = json_array_get(arr, i);

		if (!json_is_string(t) ||
		    !ws_token_valid(json_string_value(t), json_string_length(t))) {
			snprintf(err, errlen,
				 "tunnelTokens[%zu]: expected a Bearer token of 1 to %u token68 "
				 "characters",
				 i, WS_TOKEN_MAX);
			goto fail;
		}
		bytes += json_string_length(t) + 1;
	}
	if (count && (!(out = malloc(count * sizeof(*out) + bytes)) ||
		      !(sorted = malloc(count * sizeof(*sorted))))) {
		snprintf(err, errlen, "out of memory for %zu tokens", count);
		goto fail;
	}
	p = (char *)(out + count);
	for (size_t i = 0; i < count; i++) {
		json_t *t = json_array_get(arr, i);

		out[i] = sorted[i] = p;
		memcpy(p, json_string_value(t), json_string_length(t) + 1);
		p += json_string_length(t) + 1;
	}
	if (count)
		qsort(sorted, count, sizeof(*sorted), str_ptr_cmp);
	for (size_t i = 1; i < count; i++)
		if (strcmp(sorted[i - 1], sorted[i]) == 0) {
			snprintf(err, errlen, "tunnelTokens: a token given twice");
			goto fail;
		}
	free(sorted);
	json_decref(root);
	*list = out;
	*n = count;
	return 0;
fail:
	free(sorted);
	free(out);
	json_decref(root);
	return -1;
}

char *ctl_msg_routes_json(const struct sni_route *list, size_t n)
{
	json_t *arr = json_array(), *o = arr ? json_pack("{s:o}", "sniRoutes", arr) : NULL;
	char up[ADDR_STRLEN], *s, *nl;

	for (size_t i = 0; o && i < n; i++) {
		json_t *e = json_pack("{s:s, s:s}", "name", list[i].name, "upstream",
				      addr_str(&list[i].upstream.sa, up));

		/* proto3 JSON leaves a false bool out, as an answer may. */
		if (e && list[i].proxy_v2 && json_object_set_new(e, "proxyV2", json_true()) < 0) {
			json_decref(e);
			e = NULL;
		}
		if (!e || json_array_append_new(arr, e) < 0) {
			json_decref(o);
			o = NULL;
		}
	}
	s = dump(o);
	if (s && (nl = realloc(s, strlen(s) + 2))) {
		strcat(nl, "\n");
		return nl;
	}
	free(s);
	return NULL;
}

uint64_t ctl_msg_routes_sig(const struct sni_route *list, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	char up[ADDR_STRLEN];

	for (size_t i = 0; i < n; i++) {
		const char *parts[2] = {list[i].name, addr_str(&list[i].upstream.sa, up)};

		for (unsigned k = 0; k < 2; k++)
			for (const unsigned char *p = (const unsigned char *)parts[k];; p++) {
				h = (h ^ *p) * 1099511628211ull; /* the NUL ends each part */
				if (!*p)
					break;
			}
		h = (h ^ (list[i].proxy_v2 ? 2u : 1u)) * 1099511628211ull;
	}
	h = (h ^ (uint64_t)n) * 1099511628211ull;
	return h ? h : 1;
}

void ctl_msg_error_text(const char *body, size_t len, bool cut, char *out, size_t outlen)
{
	size_t n = 0;

	if (outlen < 5) {
		if (outlen)
			out[0] = '\0';
		return;
	}
	for (; n < len && n < outlen - 4; n++)
		out[n] = body[n] >= 0x20 && body[n] < 0x7f ? body[n] : '?';
	if (n && (cut || n < len))
		memcpy(out + n, "...", 3), n += 3;
	out[n] = '\0';
}

size_t ctl_msg_values(const char *body, size_t len, size_t limit)
{
	size_t n = 1;
	bool in_str = false;

	for (size_t i = 0; i < len && n <= limit; i++) {
		char ch = body[i];

		if (in_str) {
			if (ch == '\\')
				i++;
			else if (ch == '"')
				in_str = false;
		} else if (ch == '"') {
			in_str = true;
		} else if (ch == ',' || ch == ':' || ch == '{' || ch == '[') {
			n++;
		}
	}
	return n;
}

/* The host is url_host's; a URL without one (config refuses it) is not
 * remote. */
bool ctl_url_cleartext_remote(const char *url, char *host, size_t hostlen)
{
	const char *h;
	char buf[256];
	size_t n, blen;
	unsigned char addr[16];

	if (hostlen)
		host[0] = '\0';
	if (strncasecmp(url, "http://", 7) != 0 || url_host(url, &h, &n) < 0)
		return false;
	if (hostlen)
		snprintf(host, hostlen, "%.*s", (int)n, h);
	if (n >= sizeof(buf))
		return true;
	memcpy(buf, h, n);
	buf[n] = '\0';
	blen = n;
	if (strcasecmp(buf, "localhost") == 0 ||
	    (blen > 10 && strcasecmp(buf + blen - 10, ".localhost") == 0))
		return false;
	if (inet_pton(AF_INET, buf, addr) == 1)
		return addr[0] != 127;
	if (inet_pton(AF_INET6, buf, addr) == 1) {
		static const unsigned char lo6[16] = {[15] = 1};
		static const unsigned char v4m[12] = {[10] = 0xff, [11] = 0xff};

		if (memcmp(addr, lo6, 16) == 0)
			return false;
		return !(memcmp(addr, v4m, 12) == 0 && addr[12] == 127);
	}
	return true;
}

char *ctl_msg_cert_request(const char *csr_pem)
{
	return dump(json_pack("{s:s}", "csr", csr_pem));
}

int ctl_msg_cert_answer(const char *body, size_t len, char **chain, size_t *chain_len, char *err,
			size_t errlen)
{
	json_t *root = load_object(body, len, err, errlen), *v;
	const char *s;
	size_t n;
	int rc = -1;

	*chain = NULL;
	*chain_len = 0;
	if (!root)
		return -1;
	v = json_object_get(root, "certificateChain");
	s = json_string_value(v);
	n = s ? json_string_length(v) : 0;
	if (!s || n == 0)
		snprintf(err, errlen, "certificateChain: expected a non-empty string");
	else if (n > CTL_CERT_CHAIN_MAX)
		snprintf(err, errlen, "certificateChain: %zu bytes, more than %u", n,
			 CTL_CERT_CHAIN_MAX);
	else if (memchr(s, '\0', n))
		snprintf(err, errlen, "certificateChain: holds a NUL byte");
	else if (!(*chain = malloc(n + 1)))
		snprintf(err, errlen, "out of memory");
	else {
		memcpy(*chain, s, n + 1);
		*chain_len = n;
		rc = 0;
	}
	json_decref(root);
	return rc;
}

bool ctl_msg_cert_not_offered(long http_status, const char *body, size_t len)
{
	char err[64];
	json_t *root;
	const char *code;
	bool no;

	if (http_status == 501)
		return true;
	if (http_status < 400 || !(root = load_object(body, len, err, sizeof(err))))
		return false;
	code = json_string_value(json_object_get(root, "code"));
	no = code &&
	     (strcmp(code, "failed_precondition") == 0 || strcmp(code, "unimplemented") == 0);
	json_decref(root);
	return no;
}
