/* SPDX-License-Identifier: ISC */
/* UDP GSO for the backends. Forwards that follow one another on the same
 * socket, to the same destination, leave as one "train": one sendmsg whose
 * UDP_SEGMENT cmsg tells the kernel to cut the payload back into the same
 * datagrams (every one gso_size bytes, the last one may be shorter). One
 * trip through the stack instead of one per datagram; the receiver, or the
 * NIC, sees the datagrams we were given.
 *
 * The rules for joining a train are pure and live here; the backends keep
 * the buffers. A train the kernel refuses is resent one datagram at a time
 * and the socket's largest train segment is lowered (gso_refused), so
 * nothing is lost to a path that cannot take GSO. */
#ifndef ETR_LOOP_GSO_H
#define ETR_LOOP_GSO_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* UDP_MAX_SEGMENTS was 64 until Linux 6.9 raised it: stay with the old. */
#define GSO_MAX_SEGS 64
/* The whole train must fit one IP datagram before the kernel cuts it. */
#define GSO_MAX_BYTES 65000
/* gso_cap value for "any size"; 0 means no trains on this socket. */
#define GSO_ANY 0xffff

struct gso_run {
	uint16_t seg; /* size of the first datagram: the segment size */
	uint16_t n;   /* datagrams so far */
	uint32_t bytes;
	bool closed; /* a shorter datagram was the last one it can take */
};

/* Start a run with a datagram of len bytes on a socket whose trains may
 * carry segments of at most cap bytes. */
static inline void gso_start(struct gso_run *r, size_t len, uint16_t cap)
{
	r->seg = (uint16_t)len;
	r->n = 1;
	r->bytes = (uint32_t)len;
	/* An empty datagram cannot be a segment; one over cap starts no train. */
	r->closed = len == 0 || len > cap;
}

/* Append len bytes to the run if the kernel can cut it back out. The caller
 * has checked that the socket and destination are the same. */
static inline bool gso_join(struct gso_run *r, size_t len)
{
	if (r->closed || len == 0 || len > r->seg || r->n >= GSO_MAX_SEGS ||
	    r->bytes + len > GSO_MAX_BYTES)
		return false;
	r->n++;
	r->bytes += (uint32_t)len;
	r->closed = len < r->seg; /* only the last segment may be short */
	return true;
}

/* A train of segment size seg failed with -err: the cap the socket keeps
 * from now on. Too large for the path (EINVAL: segment over the MTU,
 * EMSGSIZE) lowers it below seg; a device that cannot do it at all (EIO: no
 * checksum offload, EOPNOTSUPP, ENOPROTOOPT) turns trains off. Anything else
 * (ECONNREFUSED, ENOBUFS...) is about the datagrams, not the train. */
static inline uint16_t gso_refused(uint16_t cap, uint16_t seg, int err)
{
	if (err == -EINVAL || err == -EMSGSIZE) {
		uint16_t below = seg ? (uint16_t)(seg - 1) : 0;

		return below < cap ? below : cap;
	}
	if (err == -EIO || err == -EOPNOTSUPP || err == -ENOPROTOOPT)
		return 0;
	return cap;
}

/* Receive: with UDP_GRO on, the kernel may hand us a train in one buffer
 * (datagrams from one source, back to back, every one gro_size bytes but a
 * shorter last). Segment at off of a len-byte train: its length. */
static inline size_t gro_segment(size_t len, size_t gro_size, size_t off)
{
	size_t left = len - off;

	return gro_size && left > gro_size ? gro_size : left;
}

/* Room for the UDP_SEGMENT cmsg of one train. */
union gso_ctl {
	struct cmsghdr align;
	char buf[CMSG_SPACE(sizeof(uint16_t))];
};

/* Does this kernel know UDP_SEGMENT? Asked once per loop. */
bool gso_supported(void);

/* Ask for GRO trains on a receiving socket (Linux 5.0+; quietly not before). */
void gro_enable(int fd);

/* Room for the UDP_GRO cmsg of one received train. */
#define GRO_CTL_SPACE CMSG_SPACE(sizeof(int))
union gro_ctl {
	struct cmsghdr align;
	char buf[GRO_CTL_SPACE];
};

/* The segment size if c is a UDP_GRO cmsg, else 0. */
size_t gro_size(const struct cmsghdr *c);

/* The segment size of the train recvmsg put in m, or 0: one datagram. */
size_t gro_msg_size(struct msghdr *m);

/* Point m's control at ctl, holding a UDP_SEGMENT cmsg for seg. */
void gso_set_segment(struct msghdr *m, union gso_ctl *ctl, uint16_t seg);

#endif
