/* SPDX-License-Identifier: ISC */
/* etrelay -t: report the parsed configuration; with --probe, also resolve
 * every name (a master: to an address the listener can reach) and probe
 * every game server once, one verdict line each. */
#ifndef ETR_CHECK_H
#define ETR_CHECK_H

#include "config.h"

/* Returns the exit status: 0 when every check passed, else 78 for an
 * invalid configuration (nofile_ok false: more descriptors needed than the
 * hard limit allows, said by the caller; refused after the other checks,
 * so that they all speak) or 1 for a failed probe. */
int check_run(const struct etr_conf *c, bool nofile_ok);

#endif
