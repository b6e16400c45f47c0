/* SPDX-License-Identifier: ISC */
/* etrelay-flood: a flood of UDP datagrams from many spoofed IPv4 sources,
 * put on an interface as Ethernet frames with an AF_PACKET socket
 * (sendmmsg, qdisc bypassed), for the XDP front door's tests and
 * bench/compare-flood inside network namespaces. Root only; never to a
 * network that is not the caller's own.
 *
 *   etrelay-flood IFACE SRC_MAC DST_MAC DST_IP DST_PORT SOURCES PER_SOURCE
 *                 MAX_SECONDS [PAYLOAD_HEX]
 *
 * Sources 198.18.0.1 on (benchmarking, RFC 2544: not bogons), round robin,
 * each PER_SOURCE times, stopping at the count or after MAX_SECONDS.
 * Prints "sent N in S full F" (F: sends the full queue refused). */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH	  64
#define FRAME_MAX 1514
#define SRC_MAX	  65000

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int mac(const char *s, uint8_t out[6])
{
	unsigned v[6];

	if (strlen(s) == 12) {
		for (int i = 0; i < 6; i++)
			if (sscanf(s + 2 * i, "%2x", &v[i]) != 1)
				return -1;
	} else if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) {
		return -1;
	}
	for (int i = 0; i < 6; i++)
		out[i] = (uint8_t)v[i];
	return 0;
}

static uint16_t csum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* One frame from source i: Ethernet, IPv4 (checksummed), UDP (no
 * checksum, as IPv4 allows). Returns its length. */
static size_t frame(uint8_t *f, const uint8_t src_mac[6], const uint8_t dst_mac[6], uint32_t src,
		    uint32_t dst, uint16_t sport, uint16_t dport, const uint8_t *pl, size_t n)
{
	uint8_t *ip = f + 14, *udp = ip + 20;
	uint16_t c;

	memcpy(f, dst_mac, 6);
	memcpy(f + 6, src_mac, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	memset(ip, 0, 20);
	ip[0] = 0x45;
	ip[2] = (uint8_t)((n + 28) >> 8);
	ip[3] = (uint8_t)(n + 28);
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	c = csum(ip, 20);
	ip[10] = (uint8_t)(c >> 8);
	ip[11] = (uint8_t)c;
	udp[0] = (uint8_t)(sport >> 8);
	udp[1] = (uint8_t)sport;
	udp[2] = (uint8_t)(dport >> 8);
	udp[3] = (uint8_t)dport;
	udp[4] = (uint8_t)((n + 8) >> 8);
	udp[5] = (uint8_t)(n + 8);
	udp[6] = udp[7] = 0;
	memcpy(udp + 8, pl, n);
	return 42 + n;
}

int main(int argc, char **argv)
{
	static const char def[] = "\xff\xff\xff\xffgetstatus flood";
	uint8_t smac[6], dmac[6], payload[FRAME_MAX - 42], (*frames)[FRAME_MAX];
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	struct sockaddr_ll ll = {0};
	struct in_addr dst;
	unsigned long nsrc, per, sent = 0, full = 0, total;
	size_t plen = sizeof(def) - 1, flen = 0;
	double limit, t0;
	int fd, one = 1;

	if (argc < 9 || argc > 10 || mac(argv[2], smac) || mac(argv[3], dmac) ||
	    inet_pton(AF_INET, argv[4], &dst) != 1) {
		fprintf(stderr,
			"usage: etrelay-flood IFACE SRC_MAC DST_MAC DST_IP DST_PORT SOURCES "
			"PER_SOURCE MAX_SECONDS [PAYLOAD_HEX]\n");
		return 2;
	}
	nsrc = strtoul(argv[6], NULL, 10);
	per = strtoul(argv[7], NULL, 10);
	limit = strtod(argv[8], NULL);
	if (nsrc < 1 || nsrc > SRC_MAX) {
		fprintf(stderr, "etrelay-flood: SOURCES is 1 to %u\n", SRC_MAX);
		return 2;
	}
	memcpy(payload, def, plen);
	if (argc == 10) {
		plen = strlen(argv[9]) / 2;
		if (plen > sizeof(payload)) {
			fprintf(stderr, "etrelay-flood: the payload is %zu bytes at most\n",
				sizeof(payload));
			return 2;
		}
		for (size_t i = 0; i < plen; i++) {
			unsigned v;

			if (sscanf(argv[9] + 2 * i, "%2x", &v) != 1)
				return 2;
			payload[i] = (uint8_t)v;
		}
	}
	if (!(frames = calloc(nsrc, sizeof(*frames)))) {
		perror("etrelay-flood");
		return 1;
	}
	for (unsigned long i = 0; i < nsrc; i++)
		flen = frame(frames[i], smac, dmac, htonl(0xc6120000u + (uint32_t)i + 1),
			     dst.s_addr, (uint16_t)(20000 + i % 10000),
			     (uint16_t)strtoul(argv[5], NULL, 10), payload, plen);
	if ((fd = socket(AF_PACKET, SOCK_RAW, 0)) < 0) {
		perror("etrelay-flood: socket(AF_PACKET)");
		return 1;
	}
	ll.sll_family = AF_PACKET;
	ll.sll_ifindex = (int)if_nametoindex(argv[1]);
	if (!ll.sll_ifindex || bind(fd, (struct sockaddr *)&ll, sizeof(ll)) < 0) {
		fprintf(stderr, "etrelay-flood: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	/* Straight to the driver: the qdisc would be the bottleneck. */
	(void)setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	total = nsrc * per;
	t0 = now_s();
	while (sent < total) {
		unsigned n = 0;
		int got;

		for (; n < BATCH && sent + n < total; n++) {
			iov[n].iov_base = frames[(sent + n) % nsrc];
			iov[n].iov_len = flen;
			memset(&msgs[n], 0, sizeof(msgs[n]));
			msgs[n].msg_hdr.msg_iov = &iov[n];
			msgs[n].msg_hdr.msg_iovlen = 1;
		}
		got = sendmmsg(fd, msgs, n, 0);
		if (got > 0)
			sent += (unsigned long)got;
		else if (errno == ENOBUFS || errno == EAGAIN) {
			full++;
			usleep(200);
		} else if (got < 0) {
			perror("etrelay-flood: sendmmsg");
			return 1;
		}
		if (now_s() - t0 > limit)
			break;
	}
	printf("sent %lu in %.2f full %lu\n", sent, now_s() - t0, full);
	free(frames);
	close(fd);
	return 0;
}
