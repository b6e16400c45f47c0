/* SPDX-License-Identifier: ISC */
/* stderr logger. Debug lines come from the packet path, so they are capped
 * per second and the excess is counted and reported, never silently lost.
 * Any thread may log: a line is one fprintf to unbuffered stderr, which
 * stdio writes whole under the stream's lock; the debug cap is counted
 * under a lock of its own. */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define LOG_DEBUG_PER_SEC 200

bool log_debug_on;
static bool journal, stamp;
static time_t debug_sec;
static unsigned debug_lines, debug_dropped;
static pthread_mutex_t debug_lock = PTHREAD_MUTEX_INITIALIZER;

void log_init(bool debug, enum log_time t)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long dev, ino;
	struct stat st;

	log_debug_on = debug;
	/* JOURNAL_STREAM is "device:inode" of the stream systemd gave us; only
	 * trust it while stderr is still that stream. */
	journal = js && sscanf(js, "%lu:%lu", &dev, &ino) == 2 && fstat(2, &st) == 0 &&
		  st.st_dev == dev && st.st_ino == ino;
	/* The journal stamps every line itself. */
	stamp = t == LOG_TIME_YES || (t == LOG_TIME_AUTO && !journal);
}

/* "<N>" for the journal, then "2026-12-01T10:52:12.345+01:00 " (ISO 8601,
 * local time with its offset) when stamping. Returns the length. */
static int prefix(char *buf, size_t size, int prio)
{
	struct timespec ts;
	struct tm tm;
	long off;
	int n = 0;

	buf[0] = '\0';
	if (journal)
		n = snprintf(buf, size, "<%d>", prio);
	if (!stamp)
		return n;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	off = tm.tm_gmtoff / 60;
	n += (int)strftime(buf + n, size - (size_t)n, "%Y-%m-%dT%H:%M:%S", &tm);
	n += snprintf(buf + n, size - (size_t)n, ".%03ld%c%02ld:%02ld ", ts.tv_nsec / 1000000,
		      off < 0 ? '-' : '+', labs(off) / 60, labs(off) % 60);
	return n;
}

static void vlog(int prio, const char *fmt, va_list ap, const char *suffix)
{
	char line[1024];
	int n = prefix(line, sizeof(line), prio);

	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if (suffix)
		fprintf(stderr, "%s: %s\n", line, suffix);
	else
		fprintf(stderr, "%s\n", line);
}

void log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(6, fmt, ap, NULL);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	vlog(4, fmt, ap, strerror(saved));
	va_end(ap);
	errno = saved;
}

void log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(4, fmt, ap, NULL);
	va_end(ap);
}

void log_debug(const char *fmt, ...)
{
	struct timespec ts;
	unsigned dropped = 0;
	bool over;
	va_list ap;

	if (!log_debug_on)
		return;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	pthread_mutex_lock(&debug_lock);
	if (ts.tv_sec != debug_sec) {
		dropped = debug_dropped;
		debug_sec = ts.tv_sec;
		debug_lines = debug_dropped = 0;
	}
	over = debug_lines++ >= LOG_DEBUG_PER_SEC;
	if (over)
		debug_dropped++;
	pthread_mutex_unlock(&debug_lock);
	if (dropped) {
		char pre[64];

		prefix(pre, sizeof(pre), 7);
		fprintf(stderr, "%s(%u debug lines suppressed)\n", pre, dropped);
	}
	if (over)
		return;
	va_start(ap, fmt);
	vlog(7, fmt, ap, NULL);
	va_end(ap);
}
