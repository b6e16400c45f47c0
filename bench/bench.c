/* SPDX-License-Identifier: ISC */
/* Helpers shared by the benchmark tools: parsing, limits, socket buffers,
 * GRO receive, GSO send. */
#include "bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/resource.h>

int bench_parse_addr(const char *s, union bench_sockaddr *sa)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *colon, *h = s;
	size_t hlen;
	unsigned long port;

	memset(sa, 0, sizeof(*sa));
	if (*s == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':')
			return -1;
		h = s + 1;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -1;
		hlen = (size_t)(colon - s);
	}
	if (hlen == 0 || hlen >= sizeof(host) || bench_parse_uint(colon + 1, 1, 65535, &port) < 0)
		return -1;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	if (*s != '[' && inet_pton(AF_INET, host, &sa->in.sin_addr) == 1) {
		sa->in.sin_family = AF_INET;
		sa->in.sin_port = htons((uint16_t)port);
		return 0;
	}
	if (*s == '[' && inet_pton(AF_INET6, host, &sa->in6.sin6_addr) == 1) {
		sa->in6.sin6_family = AF_INET6;
		sa->in6.sin6_port = htons((uint16_t)port);
		return 0;
	}
	return -1;
}

socklen_t bench_addr_len(const union bench_sockaddr *sa)
{
	return sa->sa.sa_family == AF_INET6 ? sizeof(sa->in6) : sizeof(sa->in);
}

const char *bench_addr_str(const struct sockaddr *sa, char buf[BENCH_ADDR_STRLEN])
{
	char ip[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, BENCH_ADDR_STRLEN, "[%s]:%u", ip, ntohs(in6->sin6_port));
	} else {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(buf, BENCH_ADDR_STRLEN, "%s:%u", ip, ntohs(in->sin_port));
	}
	return buf;
}

int bench_parse_dur(const char *s, uint64_t *ns)
{
	static const struct {
		const char *suffix;
		double mul;
	} units[] = {{"", 1e9}, {"s", 1e9}, {"ms", 1e6}, {"us", 1e3}, {"m", 60e9}};
	char *end;
	double v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || v < 0)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			/* A day is more than any benchmark needs: longer is a typo. */
			if (v * units[i].mul > 86400e9)
				return -1;
			*ns = (uint64_t)(v * units[i].mul + 0.5);
			return 0;
		}
	}
	return -1;
}

int bench_parse_uint(const char *s, unsigned long lo, unsigned long hi, unsigned long *out)
{
	unsigned long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int bench_opt_uint(const char *prog, const char *name, const char *v, unsigned long lo,
		   unsigned long hi, unsigned long *out)
{
	if (bench_parse_uint(v, lo, hi, out) == 0)
		return 0;
	fprintf(stderr, "%s: --%s %s: want a number from %lu to %lu\n", prog, name, v, lo, hi);
	return -1;
}

int bench_opt_dur(const char *prog, const char *name, const char *v, uint64_t *ns)
{
	if (bench_parse_dur(v, ns) == 0)
		return 0;
	fprintf(stderr, "%s: --%s %s: want seconds, or a number with us, ms, s or m\n", prog, name,
		v);
	return -1;
}

int bench_opt_addr(const char *prog, const char *name, const char *v, union bench_sockaddr *sa)
{
	if (bench_parse_addr(v, sa) == 0)
		return 0;
	fprintf(stderr, "%s: --%s %s: want IP:PORT or [IPv6]:PORT\n", prog, name, v);
	return -1;
}

int bench_opt_choice(const char *prog, const char *name, const char *v, const char *const names[])
{
	unsigned n = 0;

	for (; names[n]; n++)
		if (strcmp(v, names[n]) == 0)
			return (int)n;
	fprintf(stderr, "%s: --%s %s: want ", prog, name, v);
	for (unsigned i = 0; i < n; i++)
		fprintf(stderr, "%s%s", names[i], i + 2 < n ? ", " : i + 2 == n ? " or " : "\n");
	return -1;
}

int bench_raise_nofile(unsigned long need)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -errno;
	if (rl.rlim_cur >= need)
		return 0;
	rl.rlim_cur = need;
	if (rl.rlim_max < need)
		rl.rlim_max = need; /* needs CAP_SYS_RESOURCE; else EPERM below */
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -errno;
	return 0;
}

void bench_set_bufs(int fd, int bytes)
{
	/* The FORCE variants pass net.core.[rw]mem_max as root. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
}

unsigned bench_gso_run(const struct iovec *iov, unsigned n)
{
	struct gso_run r;
	unsigned k = 1;

	gso_start(&r, iov[0].iov_len, GSO_ANY);
	while (k < n && gso_join(&r, iov[k].iov_len))
		k++;
	return k;
}

bool bench_gso_refused(int err)
{
	/* The rules that would change a relay socket's cap. */
	return gso_refused(GSO_ANY, GSO_ANY, err) != GSO_ANY;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool hex_field(const char *s, unsigned digits, uint64_t *v)
{
	*v = 0;
	for (unsigned i = 0; i < digits; i++) {
		int d = hexval(s[i]);

		if (d < 0)
			return false;
		*v = *v << 4 | (uint64_t)d;
	}
	return true;
}

bool bench_challenge_get(const char *s, size_t n, struct bench_hdr *h)
{
	uint64_t id, seq, ts;

	if (n < BENCH_CHALLENGE_LEN || !hex_field(s, 8, &id) || !hex_field(s + 8, 8, &seq) ||
	    !hex_field(s + 16, 16, &ts))
		return false;
	h->id = (uint32_t)id & BENCH_ID_MAX;
	h->kind = BENCH_ECHO;
	h->seq = (uint32_t)seq;
	h->ts = ts;
	return true;
}

bool bench_is_cmd(const uint8_t *p, size_t n, const char *word, size_t *rest)
{
	size_t len = strlen(word);

	if (n < 4 + len || memcmp(p, "\xff\xff\xff\xff", 4) != 0 ||
	    strncasecmp((const char *)p + 4, word, len) != 0)
		return false;
	if (n > 4 + len && p[4 + len] != ' ' && p[4 + len] != '\n' && p[4 + len] != '\\')
		return false;
	*rest = 4 + len;
	return true;
}
