/* SPDX-License-Identifier: ISC */
/* JSON output helpers shared by the ops plane and the session list. */
#ifndef ETR_JSON_H
#define ETR_JSON_H

#include <stdio.h>

/* s as a quoted JSON string: quotes, backslashes and control bytes
 * escaped. Names come from configs, DNS and players: never trust them. */
void json_string(FILE *f, const char *s);

#endif
