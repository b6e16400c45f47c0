/* SPDX-License-Identifier: ISC */
/* What etrelay-load and etrelay-echo share: the clock, address and duration
 * parsing, socket setup, and the layout of the datagrams they exchange. */
#ifndef ETR_BENCH_H
#define ETR_BENCH_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "loop_gso.h"

#define BENCH_NS_PER_SEC 1000000000ull
#define BENCH_NS_PER_MS	 1000000ull

/* Largest UDP payload over IPv4 and IPv6 loopback. */
#define BENCH_MAX_DGRAM 65507

union bench_sockaddr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

/* Room for "[ffff:...:ffff]:65535". */
#define BENCH_ADDR_STRLEN 64

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * BENCH_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* Parse "ip:port" or "[ipv6]:port" (numeric only). Returns 0 or -1. */
int bench_parse_addr(const char *s, union bench_sockaddr *sa);

/* Length of sa for its family. */
socklen_t bench_addr_len(const union bench_sockaddr *sa);

/* "ip:port" or "[ipv6]:port" into buf; returns buf. */
const char *bench_addr_str(const struct sockaddr *sa, char buf[BENCH_ADDR_STRLEN]);

/* Parse a duration: a number of seconds, or a number with us, ms, s or m.
 * Fractions are allowed ("0.5s"). Returns 0 and *ns, or -1. */
int bench_parse_dur(const char *s, uint64_t *ns);

/* Parse an unsigned decimal in [lo, hi]. Returns 0 or -1. */
int bench_parse_uint(const char *s, unsigned long lo, unsigned long hi, unsigned long *out);

/* The bench tools' option values: parse v, given to --name of prog
 * ("etrelay-load"), or say on stderr what --name wants and return -1. */
int bench_opt_uint(const char *prog, const char *name, const char *v, unsigned long lo,
		   unsigned long hi, unsigned long *out);
int bench_opt_dur(const char *prog, const char *name, const char *v, uint64_t *ns);
int bench_opt_addr(const char *prog, const char *name, const char *v, union bench_sockaddr *sa);
/* v as one of names (NULL-terminated): its index, or -1 after "want a, b or c". */
int bench_opt_choice(const char *prog, const char *name, const char *v, const char *const names[]);

/* Raise RLIMIT_NOFILE to at least `need` descriptors (the hard limit too
 * when we may). Returns 0 or -errno. */
int bench_raise_nofile(unsigned long need);

/* Ask for `bytes` of receive and send buffer, past net.core.[rw]mem_max
 * when allowed (root). */
void bench_set_bufs(int fd, int bytes);

/* GRO receive and GSO send share the relay's rules (src/loop/loop_gso.h):
 * gro_enable, gro_msg_size + gro_segment, gso_supported, gso_set_segment.
 * How many of the n >= 1 datagrams in iov can leave as one train (1: no
 * train): the first one's length is the segment size, every one but the
 * last must match it, within GSO_MAX_SEGS and GSO_MAX_BYTES. */
unsigned bench_gso_run(const struct iovec *iov, unsigned n);

/* Is -err the kernel refusing a train as such (no GSO on this socket or
 * path), so that the same datagrams one at a time may still go? */
bool bench_gso_refused(int err);

/* Datagram layout, host byte order: both ends run on one machine.
 *
 *   0  u32  sequence number (per client, or per snapshot stream)
 *   4  u32  client id (low 24 bits) | kind << 24
 *   8  u64  CLOCK_MONOTONIC ns when the sender stamped it
 *  16  ...  padding; snapshots carry two more u32 here (see below)
 *
 * As in a Quake 3 client's packet, the sequence comes first and bytes 4-5
 * (here the id's low 16 bits) are the client's qport: a relay that holds one
 * session per qport sees each client's own. The sequence starts at 0 and
 * would need 2^32 packets to look like a connectionless
 * "\xff\xff\xff\xff" packet. */
#define BENCH_HDR    16
#define BENCH_ID_MAX 0xffffffu

enum bench_kind {
	BENCH_ECHO = 0,	    /* client -> server, answered verbatim */
	BENCH_SNAPSHOT = 1, /* server -> client, 20 Hz in the ET-match model */
	BENCH_GAME = 2,	    /* client -> server in the ET-match model: not echoed */
};

/* Snapshots add: 16 u32 packets the server got from this client so far,
 * 20 u32 highest client sequence number it got, plus one. */
#define BENCH_SNAP_HDR 24

struct bench_hdr {
	uint32_t id;
	unsigned kind;
	uint32_t seq;
	uint64_t ts;
};

static inline void bench_hdr_put(uint8_t *p, unsigned kind, uint32_t id, uint32_t seq, uint64_t ts)
{
	uint32_t w = (id & BENCH_ID_MAX) | (uint32_t)kind << 24;

	memcpy(p, &seq, 4);
	memcpy(p + 4, &w, 4);
	memcpy(p + 8, &ts, 8);
}

/* False when the datagram is too short to be ours. */
static inline bool bench_hdr_get(const uint8_t *p, size_t n, struct bench_hdr *h)
{
	uint32_t w;

	if (n < BENCH_HDR)
		return false;
	memcpy(&h->seq, p, 4);
	memcpy(&w, p + 4, 4);
	h->id = w & BENCH_ID_MAX;
	h->kind = w >> 24;
	memcpy(&h->ts, p + 8, 8);
	return true;
}

/* The server-browser model carries the same three fields as 32 hex digits
 * in the getstatus challenge, echoed back in the statusResponse:
 * "%08x%08x%016llx" (id, seq, ts). */
#define BENCH_CHALLENGE_LEN 32

/* Parse the challenge text; false when it is not 32 hex digits. */
bool bench_challenge_get(const char *s, size_t n, struct bench_hdr *h);

/* Is this "\xff\xff\xff\xff<word>" with the given command word, matched
 * case-insensitively and ended by a space, newline, backslash or the end? */
bool bench_is_cmd(const uint8_t *p, size_t n, const char *word, size_t *rest);

#endif
