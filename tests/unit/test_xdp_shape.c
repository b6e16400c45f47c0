/* SPDX-License-Identifier: ISC */
/* The XDP program's listener shapes against the relay's own classifiers:
 * every input of the fuzz corpora given (and variants of each, and of the
 * commands the relay knows, made here with a fixed seed) in a frame to each
 * kind of port, run through the program by BPF_PROG_TEST_RUN (no interface),
 * its verdict compared with q3_shape (q3_classify), stun_demux and the PRBE
 * magic; then the program's counters with the drops expected. Usage:
 * test_xdp_shape CORPUS_DIR... Exit 77 where the kernel will not load it. */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <linux/bpf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etrelay_bpf.h" /* etrelay_bpf_o[] */
#include "prbe.h"
#include "q3proto.h"
#include "shape.h"
#include "stun.h"
#include "xdp_maps.h"

_Static_assert(SHAPE_STUN_COOKIE == STUN_COOKIE && SHAPE_STUN_HDR == STUN_HDR_LEN &&
		   SHAPE_CHANNEL_MIN == STUN_CHANNEL_MIN && SHAPE_CHANNEL_MAX == STUN_CHANNEL_MAX &&
		   SHAPE_CHANNEL_HDR == STUN_CHAN_HDR_LEN && SHAPE_PRBE_LEN == PRBE_MAGIC_LEN,
	       "shape.h's TURN and PRBE numbers are stun.h's and prbe.h's");

/* The largest payload put in a frame: the test run's frame fits a page. */
#define PAYLOAD_MAX 1400

/* The ports the program is given, one per kind and one shared. */
static const struct {
	uint16_t port;
	uint8_t kinds;
} ports[] = {
    {27960, XDP_PORT_GAME},
    {3478, XDP_PORT_TURN},
    {7000, XDP_PORT_PRBE},
    {27961, XDP_PORT_GAME | XDP_PORT_PRBE},
};
#define NPORTS (sizeof(ports) / sizeof(ports[0]))

static struct bpf_object *obj;
static int params_fd;
static int prog_fd, counts_fd;
static unsigned long runs, failures;
static uint64_t want[XDP_RESULTS * SHAPE_KINDS];

static bool ref_turn(const uint8_t *p, size_t n)
{
	switch (stun_demux(p, n)) {
	case STUN_DEMUX_STUN:
		return n >= STUN_HDR_LEN && ((uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 |
					     (uint32_t)p[6] << 8 | p[7]) == STUN_COOKIE;
	case STUN_DEMUX_CHANNEL:
		return n >= STUN_CHAN_HDR_LEN;
	default:
		return false;
	}
}

static bool ref_prbe(const uint8_t *p, size_t n)
{
	return n >= PRBE_MAGIC_LEN && memcmp(p, PRBE_MAGIC, PRBE_MAGIC_LEN) == 0;
}

/* The relay's verdict for a datagram from a new source on a port of these
 * kinds, and the listener it is counted for. */
static bool ref(uint8_t kinds, const uint8_t *p, size_t n, unsigned *listener)
{
	if ((kinds & XDP_PORT_PRBE) && ref_prbe(p, n)) {
		*listener = SHAPE_PRBE;
		return true;
	}
	if (kinds & XDP_PORT_GAME) {
		*listener = SHAPE_GAME;
		return q3_shape(p, n);
	}
	if (kinds & XDP_PORT_TURN) {
		*listener = SHAPE_TURN;
		return ref_turn(p, n);
	}
	*listener = SHAPE_PRBE;
	return false;
}

static uint16_t csum_fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* An Ethernet frame: IPv4 (v6 false) or IPv6 UDP from a benchmarking
 * address to port. Returns its length. */
static size_t frame(uint8_t *f, bool v6, uint16_t port, const uint8_t *p, size_t n)
{
	size_t l3 = 14, ip = v6 ? 40 : 20, udp = l3 + ip;
	uint32_t s = 0;

	memset(f, 0, udp + 8);
	memcpy(f, "\x02\0\0\0\0\x01\x02\0\0\0\0\x02", 12);
	f[12] = v6 ? 0x86 : 0x08;
	f[13] = v6 ? 0xdd : 0x00;
	if (v6) {
		f[l3] = 0x60;
		f[l3 + 4] = (uint8_t)((n + 8) >> 8);
		f[l3 + 5] = (uint8_t)(n + 8);
		f[l3 + 6] = 17;
		f[l3 + 7] = 64;
		memcpy(f + l3 + 8, "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x07", 16);
		memcpy(f + l3 + 24, "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
	} else {
		f[l3] = 0x45;
		f[l3 + 2] = (uint8_t)((n + 28) >> 8);
		f[l3 + 3] = (uint8_t)(n + 28);
		f[l3 + 8] = 64;
		f[l3 + 9] = 17;
		memcpy(f + l3 + 12, "\xc6\x12\x00\x07\xc6\x12\x01\x01", 8);
		for (size_t i = 0; i < 20; i += 2)
			s += (uint32_t)f[l3 + i] << 8 | f[l3 + i + 1];
		s = csum_fold(s);
		f[l3 + 10] = (uint8_t)(s >> 8);
		f[l3 + 11] = (uint8_t)s;
	}
	f[udp] = 0x9c;
	f[udp + 1] = 0x40; /* 40000 */
	f[udp + 2] = (uint8_t)(port >> 8);
	f[udp + 3] = (uint8_t)port;
	f[udp + 4] = (uint8_t)((n + 8) >> 8);
	f[udp + 5] = (uint8_t)(n + 8);
	memcpy(f + udp + 8, p, n);
	return udp + 8 + n;
}

static void dump(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n && i < 48; i++)
		fprintf(stderr, " %02x", p[i]);
	fprintf(stderr, "%s\n", n > 48 ? " ..." : "");
}

/* One payload to every port, both families. */
static void check(const char *what, const uint8_t *p, size_t n)
{
	uint8_t f[PAYLOAD_MAX + 128];

	if (n > PAYLOAD_MAX)
		n = PAYLOAD_MAX;
	for (size_t k = 0; k < NPORTS; k++) {
		for (int v6 = 0; v6 < 2; v6++) {
			LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f,
				    .data_size_in = (uint32_t)frame(f, v6, ports[k].port, p, n),
				    .repeat = 1);
			unsigned listener;
			bool pass = ref(ports[k].kinds, p, n, &listener);
			int rc = bpf_prog_test_run_opts(prog_fd, &o);

			runs++;
			if (rc < 0) {
				fprintf(stderr, "test run: %s\n", strerror(errno));
				exit(1);
			}
			want[listener * XDP_RESULTS + (pass ? XDP_R_PASSED : XDP_R_SHAPE)]++;
			if ((o.retval == XDP_PASS) == pass &&
			    (o.retval == XDP_PASS || o.retval == XDP_DROP))
				continue;
			if (failures++ < 20) {
				fprintf(stderr,
					"%s, port %u, %s: the relay %s, the program %s:", what,
					ports[k].port, v6 ? "IPv6" : "IPv4",
					pass ? "takes it" : "drops it",
					o.retval == XDP_PASS ? "passes it" : "drops it");
				dump(p, n);
			}
		}
	}
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* The bytes that matter to the classifiers, for mutations. */
static const uint8_t telling[] = {' ', '\t', '\n', 0,	'"', '/',  '*',	 0x80, 0xff, '%',
				  'a', 'A',  'g',  'G', 'x', 0x01, 0x21, 0x40, 0x7f, 0xc3};

/* An input and its variants: every short prefix, bytes changed to telling
 * ones, words upper-cased. */
static void check_variants(const char *what, const uint8_t *p, size_t n)
{
	uint8_t v[PAYLOAD_MAX];

	if (n > PAYLOAD_MAX)
		n = PAYLOAD_MAX;
	check(what, p, n);
	for (size_t l = 0; l < n && l < 24; l++)
		check(what, p, l);
	for (int r = 0; r < 24 && n > 0; r++) {
		memcpy(v, p, n);
		for (int m = 0; m < 1 + r % 3; m++) {
			size_t at = r < 12 ? 4 + rnd() % 16 : rnd();

			v[at % n] = telling[rnd() % sizeof(telling)];
		}
		check(what, v, n);
	}
	memcpy(v, p, n);
	for (size_t i = 0; i < n; i++)
		if (v[i] >= 'a' && v[i] <= 'z')
			v[i] -= 'a' - 'A';
	check(what, v, n);
}

static void check_dir(const char *dir)
{
	struct dirent *e;
	DIR *d = opendir(dir);
	unsigned files = 0;

	if (!d) {
		fprintf(stderr, "%s: %s\n", dir, strerror(errno));
		exit(1);
	}
	while ((e = readdir(d))) {
		static uint8_t buf[65536];
		char path[4096], what[4400];
		FILE *f;
		size_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (!(f = fopen(path, "rb")))
			continue;
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		snprintf(what, sizeof(what), "%s", path);
		check_variants(what, buf, n);
		files++;
	}
	closedir(d);
	printf("%s: %u inputs\n", dir, files);
}

/* The commands, served or not, dressed the ways the engines read. */
static void check_words(void)
{
	static const char *const words[] = {
	    "getchallenge", "getinfo",	    "getstatus",       "connect",
	    "rcon",	    "disconnect",   "getservers",      "print",
	    "heartbeat",    "infoResponse", "connectResponse", "getinf",
	    "getinfox",	    "rcon2",	    "ipAuthorize",     "getserversResponse"};
	static const char *const before[] = {
	    "",	    " ", "\t",	 "/**/",       "/*x*/ ", "\"",	 "//", "/*",
	    "\x80", "%", "/*/ ", " /* a */\t", "\n",	 "\"\"", "/",  "\xff\xff"};
	static const char *const after[] = {"",	    " x", "\n", "\"", "//c", "/*",
					    "\x80", "/x", "\0", "%",  "\t1"};
	uint8_t p[256];

	for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++)
		for (size_t b = 0; b < sizeof(before) / sizeof(before[0]); b++)
			for (size_t a = 0; a < sizeof(after) / sizeof(after[0]); a++) {
				size_t lb = strlen(before[b]), lw = strlen(words[w]);
				size_t la = a == 8 ? 1 : strlen(after[a]), n = 4;

				memset(p, 0xff, 4);
				memcpy(p + n, before[b], lb);
				n += lb;
				memcpy(p + n, words[w], lw);
				for (size_t i = 0; b % 3 == 1 && i < lw; i++)
					if (p[n + i] >= 'a' && p[n + i] <= 'z')
						p[n + i] -= 'a' - 'A';
				n += lw;
				memcpy(p + n, after[a], la);
				n += la;
				check(words[w], p, n);
			}
	/* A coded connect: byte 11 and the stream's first bytes. */
	for (int r = 0; r < 3000; r++) {
		size_t n = 11 + rnd() % 8;

		memcpy(p,
		       "\xff\xff\xff\xff"
		       "connect",
		       11);
		for (size_t i = 11; i < n; i++)
			p[i] = rnd() % 2 ? telling[rnd() % sizeof(telling)] : (uint8_t)rnd();
		check("coded connect", p, n);
	}
	/* Lines past the longest the engines read. */
	for (size_t n = 1020; n < 1040; n++) {
		memset(p, 0xff, 4);
		memset(p + 4, ' ', sizeof(p) - 4);
		{
			static uint8_t big[PAYLOAD_MAX];

			memset(big, ' ', sizeof(big));
			memset(big, 0xff, 4);
			memcpy(big + n - 7, "getinfo", 7);
			check("getinfo at the line's end", big, n);
			memcpy(big + n - 7, "/*a*/  ", 7);
			memcpy(big + 4, "/*", 2);
			check("comment to the line's end", big, n);
		}
	}
	/* Random bytes behind each telling first byte. */
	for (int r = 0; r < 3000; r++) {
		size_t n = rnd() % 32;

		for (size_t i = 0; i < n; i++)
			p[i] = (uint8_t)rnd();
		if (n > 4 && r % 2)
			memset(p, 0xff, 4);
		if (n > 0 && r % 5 == 0)
			p[0] = telling[rnd() % sizeof(telling)];
		check("random", p, n);
	}
}

/* The long lines left unwalked, summed over the CPUs (what
 * etrelay_xdp_lines_unwalked_total shows); UINT64_MAX: unreadable. */
static uint64_t unwalked(int ncpus)
{
	int fd = bpf_object__find_map_fd_by_name(obj, "etr_walk");
	struct xdp_walk *w = calloc((size_t)ncpus, sizeof(*w));
	uint64_t n = UINT64_MAX;
	uint32_t zero = 0;

	if (w && fd >= 0 && bpf_map_lookup_elem(fd, &zero, w) == 0)
		for (int c = n = 0; c < ncpus; c++)
			n += w[c].unwalked;
	free(w);
	return n;
}

/* With a walk budget, a long line is walked (and dropped for its shape)
 * until this CPU's steps for the second are spent, then passed unwalked
 * to the bucket (none here), each counted in the CPU's unwalked; short
 * lines are walked whatever the budget. */
static void check_walk_budget(int ncpus)
{
	struct xdp_params p = {.walk_steps = 5000};
	static uint8_t line[PAYLOAD_MAX], f[PAYLOAD_MAX + 128];
	unsigned dropped = 0, passed = 0;
	uint64_t unwalked0 = unwalked(ncpus), unwalked1;
	uint32_t zero = 0;

	memset(line, ' ', sizeof(line));
	memset(line, 0xff, 4);
	if (bpf_map_update_elem(params_fd, &zero, &p, BPF_ANY) < 0) {
		failures++;
		return;
	}
	for (int r = 0; r < 20; r++) {
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f,
			    .data_size_in = (uint32_t)frame(f, false, 27960, line, sizeof(line)),
			    .repeat = 1);

		if (bpf_prog_test_run_opts(prog_fd, &o) < 0) {
			failures++;
			return;
		}
		dropped += o.retval == XDP_DROP;
		passed += o.retval == XDP_PASS;
	}
	/* 1 396 steps a line: 5 000 last four lines (the fourth begun
	 * within the budget); a test run may also move to another second. */
	if (dropped < 4 || passed < 1) {
		fprintf(stderr, "walk budget: %u of 20 long lines dropped, %u passed\n", dropped,
			passed);
		failures++;
	}
	unwalked1 = unwalked(ncpus);
	if (unwalked0 != 0 || unwalked1 != passed) {
		fprintf(stderr, "walk budget: %llu then %llu lines counted unwalked, %u passed\n",
			(unsigned long long)unwalked0, (unsigned long long)unwalked1, passed);
		failures++;
	}
	/* A short shapeless line is still walked and dropped. */
	{
		static const uint8_t junk[] = "\xff\xff\xff\xffjunk";
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f,
			    .data_size_in =
				(uint32_t)frame(f, false, 27960, junk, sizeof(junk) - 1),
			    .repeat = 1);

		if (bpf_prog_test_run_opts(prog_fd, &o) < 0 || o.retval != XDP_DROP) {
			fprintf(stderr, "walk budget spent: a short shapeless line passed\n");
			failures++;
		}
	}
	printf("walk budget of 5000 steps: %u long lines dropped, %u passed unwalked (counted "
	       "%llu)\n",
	       dropped, passed, (unsigned long long)unwalked1);
}

static int load(void)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "etrelay");
	struct bpf_program *prog;
	/* A bucket and a budget that never refuse (a nanosecond a packet,
	 * years of burst): the runs go the program's way for a source not
	 * known (the bucket, the budget, then the shape), no walk budget: a
	 * packet of its listener's shape passes. */
	struct xdp_params none = {.interval_ns = 1,
				  .tolerance_ns = 1ull << 60,
				  .budget_interval_ns = 1,
				  .budget_tolerance_ns = 1ull << 60};
	uint32_t zero = 0;
	int rc, pfd;

	obj = bpf_object__open_mem(etrelay_bpf_o, sizeof(etrelay_bpf_o), &oo);
	if (!obj) {
		fprintf(stderr, "opening the program: %s\n", strerror(errno));
		return -1;
	}
	if ((rc = bpf_object__load(obj)) < 0) {
		fprintf(stderr, "loading the program: %s\n", strerror(-rc));
		return rc == -EPERM || rc == -EINVAL || rc == -ENOSYS ? 77 : -1;
	}
	prog = bpf_object__find_program_by_name(obj, "etrelay_xdp");
	prog_fd = bpf_program__fd(prog);
	counts_fd = bpf_object__find_map_fd_by_name(obj, "etr_counts");
	pfd = bpf_object__find_map_fd_by_name(obj, "etr_ports");
	for (size_t k = 0; k < NPORTS; k++) {
		uint16_t port = htons(ports[k].port);

		if (bpf_map_update_elem(pfd, &port, &ports[k].kinds, BPF_ANY) < 0)
			return -1;
	}
	params_fd = bpf_object__find_map_fd_by_name(obj, "etr_params");
	if (bpf_map_update_elem(params_fd, &zero, &none, BPF_ANY) < 0)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	int ncpus = libbpf_num_possible_cpus(), rc = load();
	uint64_t *vals;

	if (rc == 77) {
		bpf_object__close(obj);
		return 77;
	}
	if (rc < 0 || ncpus <= 0)
		return 1;
	for (int i = 1; i < argc; i++)
		check_dir(argv[i]);
	check_words();
	/* The counters: each run counted once, under its listener. */
	vals = calloc((size_t)ncpus, sizeof(*vals));
	for (uint32_t k = 0; vals && k < XDP_RESULTS * SHAPE_KINDS; k++) {
		uint64_t got = 0;

		if (bpf_map_lookup_elem(counts_fd, &k, vals) < 0)
			return 1;
		for (int c = 0; c < ncpus; c++)
			got += vals[c];
		if (got != want[k]) {
			fprintf(stderr, "counter %u (listener %u, result %u): %llu, want %llu\n", k,
				k / XDP_RESULTS, k % XDP_RESULTS, (unsigned long long)got,
				(unsigned long long)want[k]);
			failures++;
		}
	}
	free(vals);
	check_walk_budget(ncpus);
	bpf_object__close(obj);
	printf("%lu runs, %llu dropped for their shape, %lu differences\n", runs,
	       (unsigned long long)(want[XDP_R_SHAPE] + want[XDP_RESULTS + XDP_R_SHAPE] +
				    want[2 * XDP_RESULTS + XDP_R_SHAPE]),
	       failures);
	return failures ? 1 : 0;
}
