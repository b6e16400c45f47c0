/* SPDX-License-Identifier: ISC */
/* The few socket calls the relay needs besides the loop: open the public,
 * session and probe sockets, and send a small control datagram. */
#ifndef ETR_NET_H
#define ETR_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "reuseport.h"

struct sock_filter;

/* Bind a non-blocking UDP socket to sa with large buffers; with reuseport,
 * join sa's SO_REUSEPORT group (one socket per worker; its index in the
 * group is the order of the binds). Returns the fd or -errno. */
int net_bind_public(const union etr_sockaddr *sa, bool reuseport);

/* Whether sa's port is free: a plain socket (no SO_REUSEPORT) can bind it.
 * -EADDRINUSE when any socket holds it, a SO_REUSEPORT group of another
 * process too, which the first worker's socket would otherwise join.
 * Returns 0 or -errno. */
int net_port_free(const union etr_sockaddr *sa);

/* A non-blocking TCP socket listening on sa (SO_REUSEADDR; with reuseport
 * in sa's SO_REUSEPORT group, one socket per worker, the kernel spreading
 * new connections over them). Returns the fd or -errno. */
int net_listen_tcp(const union etr_sockaddr *sa, bool reuseport);

/* The same for a TCP listener on sa: a plain socket (SO_REUSEADDR, no
 * SO_REUSEPORT) can bind it. -EADDRINUSE when any socket listens there,
 * a SO_REUSEPORT group (another etrelay's, say) too. Returns 0 or -errno. */
int net_tcp_port_free(const union etr_sockaddr *sa);

/* Attach a classic BPF reuseport program (SO_ATTACH_REUSEPORT_CBPF) to
 * the group fd belongs to, replacing the one before. Returns 0 or -errno. */
int net_attach_reuseport(int fd, const struct sock_filter *prog, unsigned len);

/* Build the program plan p describes (reuseport_build) and attach it to
 * fd. Returns 0 or -errno. */
int net_attach_plan(int fd, const struct reuseport_plan *p);

/* Whether the kernel takes prog as a reuseport program, on a socket of
 * its own. Returns 0 or -errno. */
int net_reuseport_check(const struct sock_filter *prog, unsigned len);

/* A non-blocking UDP socket connected to sa, on an ephemeral port. Returns
 * the fd or -errno. */
int net_connect_udp(const union etr_sockaddr *sa);

/* The same, bound to a free port in [min, max], trying from *next onwards
 * and leaving *next after the port taken. Returns the fd, -EADDRINUSE when
 * every port is taken, or -errno. */
int net_connect_udp_range(const union etr_sockaddr *sa, uint16_t min, uint16_t max, uint16_t *next);

/* The local port of a bound socket, 0 if unknown. */
uint16_t net_local_port(int fd);

/* The host's interface addresses (IPv4 and IPv6, port 0), at most max of
 * them in out: how many, or 0 when getifaddrs fails. */
size_t net_local_addrs(union etr_sockaddr *out, size_t max);

/* Send buf now (dst NULL on a connected socket). Returns 0 or -errno. */
int net_send_copy(int fd, const union etr_sockaddr *dst, const void *buf, size_t len);

/* 64 random bits for hash keys and challenges (getrandom, never blocking;
 * a clock-derived value if it fails). */
uint64_t net_random64(void);

#endif
