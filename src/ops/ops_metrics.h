/* SPDX-License-Identifier: ISC */
/* GET /metrics: struct etr_stats in the Prometheus text format 0.0.4. Pure:
 * the caller samples the process and owns the output stream. */
#ifndef ETR_OPS_METRICS_H
#define ETR_OPS_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "stats.h"

#define OPS_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* The process_* metrics, as the caller read them from /proc/self. */
struct ops_process {
	bool have_stat; /* the four fields below are known */
	double cpu_seconds;
	double start_time; /* unix seconds */
	uint64_t resident_bytes;
	uint64_t virtual_bytes;
	bool have_fds; /* the two fields below are known */
	uint64_t open_fds;
	uint64_t max_fds;
};

/* Write every metric to out (open_memstream makes it a growable buffer).
 * proc may be NULL. Takes each relay's lock while copying its masters.
 * Returns 0, or -EIO when the stream failed. */
int ops_metrics_render(FILE *out, struct etr_stats *st, const struct ops_process *proc);

#endif
