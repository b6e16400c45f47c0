/* SPDX-License-Identifier: ISC */
/* The daemon's configuration: every kind's keys and sections in one schema
 * (conf_key.h), as kinds.c lists the kinds, and --help. */
#ifndef ETR_CONF_SCHEMA_H
#define ETR_CONF_SCHEMA_H

#include "conf_key.h"

/* What conf_defaults is given: the parts, the checks, the warnings. */
extern const struct conf_schema etr_conf_schema;

/* The --help text: the process's lines around each kind's. */
extern const char conf_usage[];

#endif
