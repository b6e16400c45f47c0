/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for the control plane's answers: ctl_msg_routes,
 * ctl_msg_wg_peers, ctl_msg_tunnel_tokens, ctl_msg_credential, the certificate's answer, the value
 * count that guards jansson, and the error text. Input: an answer body, as the control plane sends
 * it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control_msg.h"
#include "ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data;
	struct ctl_credential cred;
	struct sni_route *list = NULL;
	struct wgp_peer *peers = NULL;
	char **tokens = NULL;
	char err[512], text[64];
	size_t n = 7, v, clen;
	char *chain;

	memset(err, 'x', sizeof(err));
	if (ctl_msg_routes(body, size, &list, &n, err, sizeof(err)) == 0) {
		if (n > SNI_CONTROL_ROUTES_MAX || (n == 0) != (list == NULL))
			abort();
		for (size_t i = 0; i < n; i++)
			if (!addr_host_pattern_valid(list[i].name) ||
			    (list[i].upstream.sa.sa_family != AF_INET &&
			     list[i].upstream.sa.sa_family != AF_INET6))
				abort();
	} else if (list != NULL || n != 0 || memchr(err, '\0', sizeof(err)) == NULL) {
		abort();
	}
	free(list);
	/* The peer set: whole, sorted, no key twice, at most the bound. */
	memset(err, 'x', sizeof(err));
	if (ctl_msg_wg_peers(body, size, &peers, &n, err, sizeof(err)) == 0) {
		if (n > CTL_WG_PEERS_MAX || (n == 0) != (peers == NULL))
			abort();
		for (size_t i = 0; i < n; i++)
			if (peers[i].n_allowed > WGP_ALLOWED_MAX ||
			    (i && memcmp(peers[i - 1].key, peers[i].key, WGP_KEY_LEN) >= 0))
				abort();
	} else if (peers != NULL || n != 0 || memchr(err, '\0', sizeof(err)) == NULL) {
		abort();
	}
	free(peers);
	/* The rung-3 tokens: each one the upgrade reader takes, none twice. */
	memset(err, 'x', sizeof(err));
	if (ctl_msg_tunnel_tokens(body, size, &tokens, &n, err, sizeof(err)) == 0) {
		if (n > CTL_TUNNEL_TOKENS_MAX || (n == 0) != (tokens == NULL))
			abort();
		for (size_t i = 0; i < n; i++) {
			if (!ws_token_valid(tokens[i], strlen(tokens[i])))
				abort();
			for (size_t j = 0; j < i && n < 64; j++)
				if (strcmp(tokens[i], tokens[j]) == 0)
					abort();
		}
	} else if (tokens != NULL || n != 0 || memchr(err, '\0', sizeof(err)) == NULL) {
		abort();
	}
	free(tokens);
	memset(err, 'x', sizeof(err));
	if (ctl_msg_credential(body, size, &cred, err, sizeof(err)) == 0) {
		if (!cred.relay_id[0] || !cred.api_token[0])
			abort();
	} else if (memchr(err, '\0', sizeof(err)) == NULL) {
		abort();
	}
	/* The certificate's answer: a chain of the length said, no NUL. */
	memset(err, 'x', sizeof(err));
	if (ctl_msg_cert_answer(body, size, &chain, &clen, err, sizeof(err)) == 0) {
		if (!chain || clen == 0 || clen > CTL_CERT_CHAIN_MAX || strlen(chain) != clen)
			abort();
		free(chain);
	} else if (chain != NULL || memchr(err, '\0', sizeof(err)) == NULL) {
		abort();
	}
	(void)ctl_msg_cert_not_offered(400, body, size);
	/* The count stops just past its limit, and only grows with the input. */
	v = ctl_msg_values(body, size, 100);
	if (v < 1 || v > 101 || (size && ctl_msg_values(body, size - 1, 100) > v))
		abort();
	ctl_msg_error_text(body, size, size & 1, text, sizeof(text));
	if (strlen(text) > sizeof(text) - 1)
		abort();
	for (const char *s = text; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			abort();
	return 0;
}
