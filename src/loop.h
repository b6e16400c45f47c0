/* SPDX-License-Identifier: ISC */
/* The event-loop interface: datagram sockets, one wake-up deadline, readable
 * fds. Nothing above this header sees a CQE or an epoll_event. */
#ifndef ETR_LOOP_H
#define ETR_LOOP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

/* Largest datagram we accept; a read that does not fit is dropped. */
#define LOOP_MAX_DGRAM 65535

struct loop;

/* One received datagram, valid only during the on_dgram callback. */
struct loop_dgram {
	const struct sockaddr *from; /* NULL on connected sockets */
	socklen_t fromlen;
	uint8_t *data;
	size_t len;
	bool truncated; /* did not fit LOOP_MAX_DGRAM: never forward it */
	uint32_t bid;   /* backend buffer id; opaque above the loop */
	uint64_t now;   /* CLOCK_MONOTONIC ns at the start of this loop turn */
};

/* What the loop tells the layer above. `id` is the value given to
 * loop_add_socket/loop_watch; the loop never interprets it. */
struct loop_handler {
	void *arg;
	/* A datagram arrived on socket `id`. */
	void (*on_dgram)(void *arg, uint32_t id, struct loop_dgram *d);
	/* A receive on socket `id` failed with -err (e.g. -ECONNREFUSED). */
	void (*on_recv_error)(void *arg, uint32_t id, int err);
	/* A send queued with loop_forward for `id` finished with res (bytes or
	 * -errno). Called exactly once per accepted loop_forward. */
	void (*on_sent)(void *arg, uint32_t id, int res);
	/* The deadline passed; `now` is CLOCK_MONOTONIC in ns. */
	void (*on_tick)(void *arg, uint64_t now);
	/* fd watched with loop_watch is readable. */
	void (*on_readable)(void *arg, uint32_t id);
	/* Next deadline (CLOCK_MONOTONIC ns), or UINT64_MAX for none. Asked once
	 * per loop turn. */
	uint64_t (*next_deadline)(void *arg);
};

/* Written by the loop thread only, read by the ops thread (stats.h rules). */
struct loop_stats {
	_Atomic uint64_t recv_batches;  /* recvmmsg calls / recv CQEs handled */
	_Atomic uint64_t send_batches;  /* sendmmsg calls / io_uring_enter submits */
	_Atomic uint64_t nobufs;        /* times receive stalled for lack of buffers */
	_Atomic uint64_t send_failures; /* forwards that failed before reaching the kernel */
	_Atomic uint64_t gso_trains;    /* sends that carried more than one datagram */
	_Atomic uint64_t gso_datagrams; /* datagrams that left in those trains */
	_Atomic uint64_t gso_refused;   /* trains the kernel refused, resent one by one */
};

struct loop_conf {
	unsigned max_sockets; /* a hint: fd tables grow past it */
	bool gso;             /* gather runs to one destination into UDP GSO sends */
};

/* A backend: a const table chosen at run time. */
struct loop_ops {
	const char *name;
	/* Returns 0, or -errno with a reason in why[] (for the fallback log). */
	int (*create)(struct loop **lp, const struct loop_handler *h,
		      const struct loop_conf *c, char *why, size_t whylen);
	void (*destroy)(struct loop *l);
	/* Start receiving datagrams on non-blocking UDP socket fd. */
	int (*add_socket)(struct loop *l, int fd, uint32_t id);
	/* Stop receiving on fd (the caller closes it afterwards). */
	void (*del_socket)(struct loop *l, int fd, uint32_t id);
	/* Call on_readable(id) whenever fd is readable (eventfd, signalfd...). */
	int (*watch)(struct loop *l, int fd, uint32_t id);
	/* Send the received datagram d on fd, to dst (NULL when connected).
	 * The loop keeps d's buffer until the send completes and then calls
	 * on_sent(id). Returns 0 or -errno (then on_sent is not called).
	 * Sends leave in the order given, at the latest when the loop turn
	 * ends; runs to one destination may leave as one GSO train. */
	int (*forward)(struct loop *l, int fd, const struct sockaddr *dst,
		       socklen_t dstlen, struct loop_dgram *d, uint32_t id);
	/* Run until loop_stop(); returns 0 or -errno. */
	int (*run)(struct loop *l);
	void (*stop)(struct loop *l);
	/* The loop's counters; the pointer stays valid until destroy. */
	const struct loop_stats *(*stats)(const struct loop *l);
};

extern const struct loop_ops loop_uring_ops;
extern const struct loop_ops loop_epoll_ops;

#define NS_PER_SEC 1000000000ull
#define NS_PER_MS 1000000ull

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t loop_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

#endif
