/* SPDX-License-Identifier: ISC */
/* The control plane's keys (control-*, state-directory), their check and
 * warnings (conf_key.h's part). */
#ifndef ETR_CONTROL_CONF_H
#define ETR_CONTROL_CONF_H

#include "conf_key.h"

extern const struct conf_part control_conf_part;

/* conf_finish's step: control-backoff-min at most control-backoff-max,
 * control-cert-retry-min at most control-cert-retry-max. */
void control_conf_finish(struct etr_conf *c, struct conf_errors *e);

/* What is legal but likely a mistake in the control plane's keys, as
 * warnings naming FILE:LINE in w (one line each): control-timeout above
 * control-interval; a control-allow-upstream 0.0.0.0/0 or ::/0; a
 * control-bootstrap-token-file that does not exist
 * while neither the state directory's credential file nor the
 * environment's token (the ones read first) is there. Looks at the file
 * system and the environment. Returns the number of warnings. */
unsigned conf_control_warnings(const struct etr_conf *c, struct conf_errors *w);

/* Its lines of --help. */
/* clang-format off */
#define CONTROL_CONF_USAGE \
	"Control plane (see CONTROL PLANE in etrelay(8)):\n" \
	"  --control-url URL         enrol with this control plane, then send it\n" \
	"                            heartbeats and take the SNI routes it answers\n" \
	"                            (https://, checked against the system CA\n" \
	"                            store; http:// is warned about unless the\n" \
	"                            host is loopback; default off)\n" \
	"  --control-bootstrap-token-file FILE\n" \
	"                            the one-time enrolment token (mode 600 or 640)\n" \
	"  --state-directory DIR     where the credential from enrolment is kept, an\n" \
	"                            absolute path\n" \
	"                            (" CONF_STATE_DIR "; owned by etrelay's user,\n" \
	"                            not group- or world-writable)\n" \
	"  --control-interval DUR    time between heartbeats (30s)\n" \
	"  --control-timeout DUR     longest wait for one answer (10s; warned about\n" \
	"                            above --control-interval)\n" \
	"  --control-backoff-min DUR first wait after a failed enrolment (1m), doubling\n" \
	"  --control-backoff-max DUR ... up to this (30m)\n" \
	"  --control-cert-retry-min DUR  with a [tunnel]: first wait after a failed\n" \
	"                            tunnel certificate request (1m), doubling\n" \
	"  --control-cert-retry-max DUR  ... up to this (30m)\n" \
	"  --control-cert-not-offered DUR  wait when the control plane offers no\n" \
	"                            certificate (60m)\n" \
	"  --control-max-answer BYTES  longest answer read (2M, 4k to 64M); a longer one\n" \
	"                            is cut off and the heartbeat fails (too_large)\n" \
	"  --control-allow-upstream CIDR\n" \
	"                            a block the control plane's routes may reach\n" \
	"                            although private (your tunnel, e.g. 10.8.0.0/16);\n" \
	"                            repeatable; an address of this host only when\n" \
	"                            given alone (/32); never the daemon's own ports\n"
/* clang-format on */

#endif
