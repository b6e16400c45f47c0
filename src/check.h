/* SPDX-License-Identifier: ISC */
/* etrelay -t: report the parsed configuration; with --probe, also resolve
 * every name (a master: to an address the listener can reach) and probe
 * every game server once, one verdict line each. */
#ifndef ETR_CHECK_H
#define ETR_CHECK_H

#include "config.h"

/* Returns the exit status: 0 when every check passed, 1 otherwise. */
int check_run(const struct etr_conf *c);

#endif
