/* SPDX-License-Identifier: ISC */
/* Logging to stderr, one line per event; <N> priority prefixes when stderr
 * is the journal, and the time of day when asked (or when it is not). */
#ifndef ETR_LOG_H
#define ETR_LOG_H

#include <stdbool.h>

/* --log-time: auto is on unless stderr is the journal. */
enum log_time { LOG_TIME_AUTO, LOG_TIME_YES, LOG_TIME_NO };

/* Decide on prefixes (JOURNAL_STREAM, the time) and whether debug lines
 * print. */
void log_init(bool debug, enum log_time t);

/* True when --debug is on: test it before building a debug line's
 * arguments on the packet path. */
extern bool log_debug_on;

void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Appends ": strerror(errno)". */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
