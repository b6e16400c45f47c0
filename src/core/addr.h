/* SPDX-License-Identifier: ISC */
/* Socket addresses: parse "HOST:PORT" and "[v6]:PORT", print, compare, hash.
 * Pure: no resolution, no sockets. */
#ifndef ETR_ADDR_H
#define ETR_ADDR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Room for "[ffff:...:ffff%ifname]:65535". */
#define ADDR_STRLEN  80
#define ADDR_HOSTLEN 256

union etr_sockaddr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

/* Split "host:port", "[v6]:port" or (when defport >= 0) "host" into host and
 * port. Returns 0, or -1 when the text is not of that shape or the host
 * has a character no name or address has (a space, '='). */
int addr_split(const char *s, char host[ADDR_HOSTLEN], uint16_t *port, int defport);

/* Parse a numeric "ip:port" or "[v6]:port" into sa. Returns 0 or -1. */
int addr_parse_numeric(const char *s, union etr_sockaddr *sa);

/* Length of the sockaddr for its family (0 for an unknown family). */
socklen_t addr_len(const union etr_sockaddr *sa);

/* "ip:port" or "[v6]:port" into buf; returns buf. */
const char *addr_str(const struct sockaddr *sa, char buf[ADDR_STRLEN]);

/* "host:port", or "[host]:port" when host is an IPv6 literal. */
const char *addr_hostport(const char *host, uint16_t port, char buf[ADDR_HOSTLEN + 8]);

/* Same family, address, port (and scope for IPv6). */
bool addr_equal(const union etr_sockaddr *a, const union etr_sockaddr *b);

/* Keyed hash of address and port (SipHash-2-4); the key makes collision
 * floods guesswork for a remote sender. */
uint64_t addr_hash(const union etr_sockaddr *sa, const uint8_t key[16]);

/* SipHash-2-4 of len bytes under key: for other tables keyed by what a
 * remote sender can choose (addr_hash uses it). */
uint64_t addr_siphash(const void *data, size_t len, const uint8_t key[16]);

/* Copy a sockaddr of known length into an etr_sockaddr; false when the
 * family is not AF_INET/AF_INET6 or the length is short. */
bool addr_from(union etr_sockaddr *dst, const struct sockaddr *src, socklen_t len);

/* What to add to a bind or listen error err (an errno value, either sign):
 * for EACCES, how to get a port below 1024 (ADDR_BIND_HINT); else "". */
const char *addr_bind_hint(int err);
#define ADDR_BIND_HINT                                                                             \
	" (a port below 1024 needs CAP_NET_BIND_SERVICE: run etrelay from the systemd "            \
	"unit in contrib/etrelay.service, which grants it, or setcap "                             \
	"cap_net_bind_service=+ep on the binary, or use a port of 1024 or above)"

/* Bytes a DNS host name may take (RFC 1035 2.3.4, without the root dot). */
#define ADDR_NAME_MAX 253

/* The name rule, shared by the reader and the route table: 1..253 bytes of
 * dot-separated labels of 1..63 letters, digits and hyphens, no label
 * starting or ending with a hyphen (RFC 1123 2.1; IDNs arrive as xn--
 * A-labels, RFC 5890), and a last label that is not all digits (no IP
 * literal, RFC 6066 3; no top-level domain is numeric, RFC 3696 2). Case is
 * ignored (the reader lower-cases). Refused too: a trailing dot (RFC 6066
 * says none), '*', '_', any other byte. An operator's route is checked by
 * the same rule, so a name refused here is one no route could match. */
bool addr_host_name_valid(const char *s, size_t len);

/* A host name (addr_host_name_valid) or "*." followed by one, of at most
 * ADDR_NAME_MAX bytes: a name a TLS route or a control-plane route names. */
bool addr_host_pattern_valid(const char *s);

#endif
