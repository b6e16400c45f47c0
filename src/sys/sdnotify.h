/* SPDX-License-Identifier: ISC */
/* systemd's notify protocol (Type=notify): one datagram per message to
 * $NOTIFY_SOCKET. Without systemd every call is a no-op. */
#ifndef ETR_SDNOTIFY_H
#define ETR_SDNOTIFY_H

#include <stdint.h>

/* Send "READY=1", "STATUS=...", "STOPPING=1", "WATCHDOG=1"... Returns 0,
 * or -errno (not under systemd: 0, nothing sent). */
int sdnotify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The watchdog period asked for by systemd in ns (WATCHDOG_USEC, when
 * WATCHDOG_PID is ours or unset), 0 when none. */
uint64_t sdnotify_watchdog_ns(void);

#endif
