/* SPDX-License-Identifier: ISC */
/* What the ops plane reads of the TURN listeners without linking them: the
 * names of their counters' labels. */
#include "turn.h"

static const char *const reject_names[TURN_REJECTS] = {
    [TURN_REJ_CAP] = "cap",	[TURN_REJ_QUOTA] = "quota",   [TURN_REJ_DRAIN] = "drain",
    [TURN_REJ_PORTS] = "ports", [TURN_REJ_EXISTS] = "exists", [TURN_REJ_REQUEST] = "bad_request",
};
static const char *const authf_names[TURN_AUTHFS] = {
    [TURN_AF_BAD_INTEGRITY] = "bad_integrity",
    [TURN_AF_BAD_USERNAME] = "bad_username",
    [TURN_AF_EXPIRED] = "expired",
    [TURN_AF_STALE_NONCE] = "stale_nonce",
    [TURN_AF_WRONG_USER] = "wrong_user",
    [TURN_AF_MISSING] = "missing_attributes",
    [TURN_AF_BAD_NONCE] = "bad_nonce",
};
static const char *const drop_names[TURN_DROPS] = {
    [TURN_DROP_NOT_TURN] = "not_turn",		 [TURN_DROP_MALFORMED] = "malformed",
    [TURN_DROP_NO_ALLOCATION] = "no_allocation", [TURN_DROP_NO_PERMISSION] = "no_permission",
    [TURN_DROP_NO_CHANNEL] = "no_channel",	 [TURN_DROP_PEER_REFUSED] = "peer_refused",
    [TURN_DROP_SEND_FAILED] = "send_failed",	 [TURN_DROP_THROTTLED] = "throttled",
    [TURN_DROP_UNEXPECTED] = "unexpected",	 [TURN_DROP_TRUNCATED] = "truncated",
    [TURN_DROP_CLIENT_SLOW] = "client_slow",
    [TURN_DROP_THROTTLED_TOTAL] = "throttled_total",
    [TURN_DROP_OVERSIZE] = "oversize",
};

static const char *const tcp_drop_names[TURN_TCP_DROPS] = {
    [TURN_TCP_PER_IP] = "per_ip",
    [TURN_TCP_FULL] = "full",
    [TURN_TCP_FRAME_MEMORY] = "frame_memory",
    [TURN_TCP_EVICTED] = "evicted",
    [TURN_TCP_AUTH_TIMEOUT] = "auth_timeout",
};

const uint16_t turn_error_codes[TURN_ERROR_CODES] = {
    400, 401, 403, 420, 437, 438, 440, 441, 442, 443, 486, 508, 0,
};

unsigned turn_error_index(int code)
{
	for (unsigned i = 0; i + 1 < TURN_ERROR_CODES; i++)
		if (turn_error_codes[i] == code)
			return i;
	return TURN_ERROR_CODES - 1;
}

const char *turn_tcp_drop_name(enum turn_tcp_drop d)
{
	return d < TURN_TCP_DROPS ? tcp_drop_names[d] : "?";
}

const char *turn_reject_name(enum turn_reject r)
{
	return r < TURN_REJECTS ? reject_names[r] : "?";
}

const char *turn_authf_name(enum turn_authf a)
{
	return a < TURN_AUTHFS ? authf_names[a] : "?";
}

const char *turn_drop_name(enum turn_drop d)
{
	return d < TURN_DROPS ? drop_names[d] : "?";
}
