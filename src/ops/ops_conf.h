/* SPDX-License-Identifier: ISC */
/* The ops plane's keys (ops-listen, ops-allow-public) and their check
 * (conf_key.h's part). */
#ifndef ETR_OPS_CONF_H
#define ETR_OPS_CONF_H

#include "conf_key.h"

extern const struct conf_part ops_conf_part;

/* conf_finish's step: a public ops-listen only with ops-allow-public. */
void ops_conf_finish(struct etr_conf *c, struct conf_errors *e);

#endif
