/* SPDX-License-Identifier: ISC */
/* The machinery of the configuration: the command line and the file share
 * one table of keys, each kind's (conf_key.h), listed by the schema the
 * caller gives conf_defaults. Layers, lowest first: built-in defaults, the
 * file's top-level keys, a [relay NAME] section (or a kind's [NAME LABEL]
 * section), the command line. Every error names its flag or file:line and
 * the value. Knows no kind: their keys, defaults and checks are theirs. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf_key.h"

/* Room for a message about a value (a route given twice names it). */
#define CONF_WHY_MAX 512

/* The schema's parts, each with its keys, in the order of the flattened
 * index every relay's key_line[] uses (NULL-terminated; none without a
 * schema). */
static const struct conf_part *const *parts(const struct etr_conf *c)
{
	static const struct conf_part *const none[] = {NULL};

	return c->schema ? c->schema->parts : none;
}

/* Top-level key idx of the schema, or NULL. */
static const struct conf_key *key_at(const struct etr_conf *c, size_t idx)
{
	for (const struct conf_part *const *p = parts(c); *p; p++) {
		if (idx < (*p)->nkeys)
			return &(*p)->keys[idx];
		idx -= (*p)->nkeys;
	}
	return NULL;
}

/* The top-level key named name (its index in *idx), or NULL. */
static const struct conf_key *key_find(const struct etr_conf *c, const char *name, size_t *idx)
{
	size_t base = 0;

	for (const struct conf_part *const *p = parts(c); *p; p++) {
		for (size_t i = 0; i < (*p)->nkeys; i++)
			if (strcmp((*p)->keys[i].name, name) == 0) {
				*idx = base + i;
				return &(*p)->keys[i];
			}
		base += (*p)->nkeys;
	}
	return NULL;
}

void conf_defaults(struct etr_conf *c, const struct conf_schema *s)
{
	size_t nkeys = 0;

	memset(c, 0, sizeof(*c));
	c->schema = s;
	for (const struct conf_part *const *p = parts(c); *p; p++) {
		nkeys += (*p)->nkeys;
		if ((*p)->defaults)
			(*p)->defaults(c);
	}
	/* Each relay keeps the line of every key in key_line[]. */
	if (nkeys > CONF_KEYS_MAX)
		abort();
}

int conf_parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};

	for (size_t i = 0; i < 4; i++) {
		if (strcmp(v, yes[i]) == 0)
			return *out = true, 0;
		if (strcmp(v, no[i]) == 0)
			return *out = false, 0;
	}
	return -1;
}

int conf_parse_ip(const char *s, union etr_sockaddr *a)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, s, &a->in.sin_addr) == 1) {
		a->in.sin_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, &a->in6.sin6_addr) == 1) {
		a->in6.sin6_family = AF_INET6;
		return 0;
	}
	return -1;
}

bool conf_ip_wildcard(const union etr_sockaddr *a)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;

	return a->sa.sa_family == AF_INET ? a->in.sin_addr.s_addr == INADDR_ANY
					  : memcmp(&a->in6.sin6_addr, &any6, 16) == 0;
}

uint16_t conf_port_of(const union etr_sockaddr *a)
{
	return ntohs(a->sa.sa_family == AF_INET ? a->in.sin_port : a->in6.sin6_port);
}

/* 10.0.0.1/8, as a ban-file says. */
bool conf_cidr_host_bits(const struct conf_cidr *b, char *buf, size_t n)
{
	bool v4 = b->addr.sa.sa_family == AF_INET;
	uint8_t ip[16], net[16];
	size_t len = v4 ? 4 : 16;
	char a[INET6_ADDRSTRLEN];

	memcpy(ip, v4 ? (const void *)&b->addr.in.sin_addr : (const void *)&b->addr.in6.sin6_addr,
	       len);
	memcpy(net, ip, len);
	for (size_t i = 0; i < len; i++) {
		unsigned keep = b->bits > i * 8 ? b->bits - (unsigned)i * 8 : 0;

		if (keep < 8)
			net[i] &= (uint8_t)(0xff00u >> keep);
	}
	if (memcmp(ip, net, len) == 0)
		return false;
	inet_ntop(v4 ? AF_INET : AF_INET6, net, a, sizeof(a));
	snprintf(buf, n, "host bits set; did you mean %s/%u?", a, b->bits);
	return true;
}

int conf_cidr_parse(const char *s, struct conf_cidr *out)
{
	char ip[64];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	unsigned long bits;
	unsigned max;
	char *end;

	if (n == 0 || n >= sizeof(ip))
		return -1;
	memcpy(ip, s, n);
	ip[n] = '\0';
	if (conf_parse_ip(ip, &out->addr) < 0)
		return -1;
	max = out->addr.sa.sa_family == AF_INET ? 32 : 128;
	if (!slash) {
		out->bits = (uint8_t)max;
		return 0;
	}
	if (slash[1] < '0' || slash[1] > '9')
		return -1;
	errno = 0;
	bits = strtoul(slash + 1, &end, 10);
	if (*end || errno || bits > max)
		return -1;
	out->bits = (uint8_t)bits;
	return 0;
}

int conf_parse_duration(const char *s, uint64_t *ms, bool allow_zero)
{
	static const struct {
		const char *suffix;
		uint64_t mul;
	} units[] = {{"", 1000}, {"s", 1000}, {"ms", 1}, {"m", 60000}, {"h", 3600000}};
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || (v == 0 && !allow_zero))
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			/* Cap at a year: anything longer is a typo. */
			if (v > 366ull * 24 * 3600 * 1000 / units[i].mul)
				return -1;
			*ms = v * units[i].mul;
			return 0;
		}
	}
	return -1;
}

const char *conf_parse_ports(const char *v, uint16_t *lo, uint16_t *hi, const char *form)
{
	unsigned long a, b;
	char *end;

	if (*v < '0' || *v > '9')
		return form;
	a = strtoul(v, &end, 10);
	if (*end != '-' || end[1] < '0' || end[1] > '9')
		return form;
	b = strtoul(end + 1, &end, 10);
	if (*end || a < 1024 || b > 65535 || a > b)
		return "expected MIN-MAX within 1024-65535 with MIN <= MAX";
	*lo = (uint16_t)a;
	*hi = (uint16_t)b;
	return NULL;
}

bool conf_valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= CONF_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

void *conf_target(struct conf_ctx *x, const struct conf_key *k)
{
	if (x->obj)
		return x->obj;
	return k->flags & CONF_RELAY ? (void *)x->r : (void *)x->c;
}

bool conf_first(struct conf_ctx *x)
{
	if (*x->replaced)
		return false;
	*x->replaced = true;
	return true;
}

/* A number with an optional k (1024) or M (1048576) when bytes, within
 * [k->min, k->max]. */
static const char *set_number(struct conf_ctx *x, const struct conf_key *k, const char *v,
			      bool bytes)
{
	unsigned long long n;
	char *end;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (bytes && *end == 'k' && end[1] == '\0')
		n <<= 10, end++;
	else if (bytes && *end == 'M' && end[1] == '\0')
		n <<= 20, end++;
	if (*v < '0' || *v > '9' || *end || errno || n < k->min || n > k->max) {
		if (k->why)
			return k->why;
		snprintf(x->buf, x->n, "expected a number from %u to %u", (unsigned)k->min,
			 (unsigned)k->max);
		return x->buf;
	}
	*(uint32_t *)(void *)((char *)conf_target(x, k) + k->off) = (uint32_t)n;
	return NULL;
}

const char *conf_set_u32(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	return set_number(x, k, v, false);
}

const char *conf_set_bytes(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	return set_number(x, k, v, true);
}

const char *conf_set_duration(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	uint64_t ms;

	if (conf_parse_duration(v, &ms, k->flags & CONF_ZERO) < 0 || ms < k->min ||
	    (k->max && ms > k->max))
		return k->why;
	memcpy((char *)conf_target(x, k) + k->off, &ms, sizeof(ms));
	return NULL;
}

const char *conf_set_bool(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	return conf_parse_bool(v, (bool *)(void *)((char *)conf_target(x, k) + k->off)) < 0
		   ? "expected yes or no"
		   : NULL;
}

const char *conf_set_path(struct conf_ctx *x, const struct conf_key *k, const char *v)
{
	if (strlen(v) >= CONF_PATH_MAX)
		return "path too long";
	strcpy((char *)conf_target(x, k) + k->off, v);
	return NULL;
}

const struct conf_key *conf_section_key(const struct conf_section *s, const char *name)
{
	for (size_t i = 0; i < s->nkeys; i++)
		if (strcmp(s->keys[i].name, name) == 0)
			return &s->keys[i];
	return NULL;
}

void conf_err(struct conf_errors *e, const char *fmt, ...)
{
	va_list ap;
	int n;

	e->count++;
	if (e->len >= sizeof(e->text) - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(e->text + e->len, sizeof(e->text) - e->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	e->len += (size_t)n;
	if (e->len < sizeof(e->text) - 1) {
		e->text[e->len++] = '\n';
		e->text[e->len] = '\0';
	} else {
		e->len = sizeof(e->text) - 1;
	}
}

const char *conf_path(const struct etr_conf *c)
{
	return c->path ? c->path : "";
}

/* Apply top-level key k (index idx) to r (a relay key's) or c; replaced:
 * its layer's conf_first. Returns NULL or why v is wrong (maybe in buf). */
static const char *apply(struct etr_conf *c, struct relay_conf *r, const struct conf_key *k,
			 size_t idx, const char *v, unsigned line, bool *replaced, char *buf)
{
	struct conf_ctx x = {c, r, NULL, line, buf, CONF_WHY_MAX, replaced};

	r->key_line[idx] = line ? line : CONF_LINE_CLI;
	return k->set(&x, k, v);
}

const char *conf_key_origin(const struct etr_conf *c, const struct relay_conf *r, const char *a,
			    const char *b, const char *where, char *buf, size_t n)
{
	const char *names[2] = {a, b};

	for (unsigned i = 0; i < 2 && names[i]; i++) {
		size_t idx;
		const struct conf_key *k = key_find(c, names[i], &idx);
		unsigned line = k ? r->key_line[idx] : 0;

		if (line == CONF_LINE_CLI) {
			snprintf(buf, n, "etrelay: command line");
			return buf;
		}
		if (line) {
			snprintf(buf, n, "%s:%u", conf_path(c), line);
			return buf;
		}
	}
	return where;
}

const char *conf_key_where(const struct etr_conf *c, const char *key, char *buf, size_t n)
{
	return conf_key_origin(c, &c->base, key, NULL, "etrelay", buf, n);
}

const char *conf_turn_tls_where(const struct etr_conf *c, const struct turn_conf *t,
				const char *msg, char *buf, size_t n)
{
	size_t kl = strlen(t->tls_key), cl = strlen(t->tls_cert);
	unsigned line = 0;

	/* The longer path first: one may be a prefix of the other. */
	if (kl >= cl && kl && strncmp(msg, t->tls_key, kl) == 0)
		line = t->tls_key_line;
	else if (cl && strncmp(msg, t->tls_cert, cl) == 0)
		line = t->tls_cert_line;
	else if (kl && strncmp(msg, t->tls_key, kl) == 0)
		line = t->tls_key_line;
	if (!line)
		return NULL;
	snprintf(buf, n, "%s:%u", conf_path(c), line);
	return buf;
}

const char *conf_line_where(const struct etr_conf *c, unsigned line, char *buf, size_t n)
{
	if (!line)
		return "etrelay";
	snprintf(buf, n, "%s:%u", conf_path(c), line);
	return buf;
}

/* Command-line only options. */
enum { OPT_CONFIG = 'c', OPT_TEST = 't', OPT_HELP = 'h', OPT_VERSION = 'V', OPT_PROBE = 1000 };

int conf_parse_args(struct etr_conf *c, int argc, char **argv, struct conf_errors *e)
{
	struct option longopts[CONF_KEYS_MAX + 6];
	struct etr_conf scratch;
	bool cli_layer[CONF_KEYS_MAX] = {false}; /* every list replaced anew, line 0 */
	char buf[CONF_WHY_MAX];
	const struct conf_key *k;
	size_t n = 0;
	int opt;

	for (size_t i = 0; (k = key_at(c, i)) != NULL; i++)
		longopts[n++] =
		    (struct option){k->name, k->flags & CONF_FLAG ? no_argument : required_argument,
				    NULL, 256 + (int)i};
	longopts[n++] = (struct option){"config", required_argument, NULL, OPT_CONFIG};
	longopts[n++] = (struct option){"test", no_argument, NULL, OPT_TEST};
	longopts[n++] = (struct option){"probe", no_argument, NULL, OPT_PROBE};
	longopts[n++] = (struct option){"help", no_argument, NULL, OPT_HELP};
	longopts[n++] = (struct option){"version", no_argument, NULL, OPT_VERSION};
	longopts[n] = (struct option){NULL, 0, NULL, 0};

	/* Values are checked at once against a scratch copy, so a bad flag
	 * fails before any file is read; they are applied in conf_finish. */
	conf_defaults(&scratch, c->schema);
	optind = 0; /* full reset, so the parser can run more than once */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":c:thV", longopts, NULL)) != -1) {
		const char *arg = argv[optind - 1];
		const char *why;
		size_t idx;

		switch (opt) {
		case OPT_CONFIG:
			c->path = optarg;
			c->path_given = true;
			continue;
		case OPT_TEST:
			c->test = true;
			continue;
		case OPT_PROBE:
			c->probe = true;
			continue;
		case OPT_HELP:
			c->help = true;
			continue;
		case OPT_VERSION:
			c->version = true;
			continue;
		case ':':
			conf_err(e, "etrelay: %s: missing value", argv[optind - 1]);
			return -1;
		case '?':
			if (strncmp(arg, "--", 2) == 0 && strchr(arg, '='))
				conf_err(e, "etrelay: %.*s: takes no value (see --help)",
					 (int)(strchr(arg, '=') - arg), arg);
			else if (strncmp(arg, "--", 2) == 0)
				conf_err(e, "etrelay: %s: unknown option (see --help)", arg);
			else if (optopt > 0x20 && optopt < 0x7f)
				/* A short option inside a cluster ("-zV") has not
				 * advanced optind: name it by its letter. */
				conf_err(e, "etrelay: -%c: unknown option (see --help)", optopt);
			else
				conf_err(e, "etrelay: %s: unknown option (see --help)", arg);
			return -1;
		default:
			break;
		}
		idx = (size_t)opt - 256;
		k = key_at(c, idx);
		if (c->ncli == CONF_CLI_MAX) {
			conf_err(e, "etrelay: too many options");
			return -1;
		}
		why = apply(&scratch, &scratch.base, k, idx, k->flags & CONF_FLAG ? "yes" : optarg,
			    0, &cli_layer[idx], buf);
		if (why) {
			conf_err(e, "etrelay: --%s: invalid value '%s' (%s)", k->name, optarg, why);
			return -1;
		}
		c->cli[c->ncli++] =
		    (struct conf_cli){k->name, k->flags & CONF_FLAG ? NULL : optarg};
		if (k->flags & CONF_UPSTREAM)
			c->cli_upstream = true;
		if (k->flags & CONF_LISTENER)
			c->cli_listener = true;
	}
	if (optind < argc) {
		conf_err(e, "etrelay: unexpected argument '%s' (see --help)", argv[optind]);
		return -1;
	}
	if (c->probe && !c->test) {
		conf_err(e, "etrelay: --probe: only with -t");
		return -1;
	}
	return 0;
}

/* Trim spaces and tabs at both ends, in place. */
static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/* The section whose header "[NAME LABEL]" s starts, or NULL. */
static const struct conf_section *section_of(const struct etr_conf *c, const char *s)
{
	for (const struct conf_part *const *p = parts(c); *p; p++) {
		const struct conf_section *sec = (*p)->section;
		size_t n = sec ? strlen(sec->name) : 0;

		if (sec && strncmp(s + 1, sec->name, n) == 0 &&
		    (sec->bare ? s[1 + n] == ']' : s[1 + n] == ' ' || s[1 + n] == '\t'))
			return sec;
	}
	return NULL;
}

/* "[relay NAME], [sni NAME] or [turn NAME]", the headers there are. */
static const char *section_list(const struct etr_conf *c, char *buf, size_t n)
{
	size_t o = (size_t)snprintf(buf, n, "[relay NAME]"), left = 0;

	for (const struct conf_part *const *p = parts(c); *p; p++)
		left += (*p)->section != NULL;
	for (const struct conf_part *const *p = parts(c); *p; p++) {
		if (!(*p)->section || o >= n)
			continue;
		left--;
		o += (size_t)snprintf(buf + o, n - o, "%s[%s%s]", left ? ", " : " or ",
				      (*p)->section->name, (*p)->section->bare ? "" : " NAME");
	}
	return buf;
}

/* A section's header: the listener its keys go to (sec's discard, checked
 * and thrown away, when the header is refused). */
static void *section_open(struct etr_conf *c, const struct conf_section *sec, const char *name,
			  const char *path, unsigned lineno, struct conf_errors *e)
{
	char *all = (char *)c + sec->array, *obj;
	unsigned *n = (unsigned *)(void *)((char *)c + sec->count), line;

	sec->init(sec->discard);
	if (sec->bare && *n > 0) {
		memcpy(&line, all + sec->line_off, sizeof(line));
		conf_err(e, "%s:%u: [%s] already given at line %u (one only)", path, lineno,
			 sec->name, line);
		return sec->discard;
	}
	if (!sec->bare && !conf_valid_name(name)) {
		conf_err(e, "%s:%u: %s name '%s': use 1 to %d letters, digits, '-', '_' or '.'",
			 path, lineno, sec->name, name, CONF_NAME_MAX - 1);
		return sec->discard;
	}
	for (unsigned i = 0; i < *n; i++)
		if (strcmp(all + i * sec->size + sec->name_off, name) == 0) {
			memcpy(&line, all + i * sec->size + sec->line_off, sizeof(line));
			conf_err(e, "%s:%u: %s '%s' already defined at line %u", path, lineno,
				 sec->name, name, line);
			return sec->discard;
		}
	if (*n == sec->max) {
		conf_err(e, "%s:%u: too many %s (at most %d)", path, lineno, sec->many,
			 (int)sec->max);
		return sec->discard;
	}
	obj = all + (*n)++ * sec->size;
	sec->init(obj);
	snprintf(obj + sec->name_off, CONF_NAME_MAX, "%s", name);
	memcpy(obj + sec->line_off, &lineno, sizeof(lineno));
	return obj;
}

/* One key of a section, into its listener obj. */
static void section_key(struct etr_conf *c, const struct conf_section *sec, void *obj,
			const char *key, const char *v, const char *path, unsigned lineno,
			struct conf_errors *e)
{
	const struct conf_key *k;
	char buf[CONF_WHY_MAX];
	bool unused = false;
	struct conf_ctx x = {c, &c->base, obj, lineno, buf, sizeof(buf), &unused};
	const char *why;

	if (*v == '\0') {
		conf_err(e, "%s:%u: %s: missing value", path, lineno, key);
		return;
	}
	k = conf_section_key(sec, key);
	if (!k) {
		char list[1024];
		size_t o = 0;

		for (size_t i = 0; i < sec->nkeys && o < sizeof(list); i++)
			o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "",
					      sec->keys[i].name);
		conf_err(e, "%s:%u: unknown key '%s' in %s [%s] section (%s)", path, lineno, key,
			 sec->article, sec->name, list);
		return;
	}
	why = k->set(&x, k, v);
	if (why)
		conf_err(e, "%s:%u: %s: invalid value '%s' (%s)", path, lineno, key, v, why);
	else if (k->line_off)
		memcpy((char *)obj + k->line_off, &lineno, sizeof(lineno));
}

int conf_load(struct etr_conf *c, const char *text, size_t len, const char *path,
	      struct conf_errors *e)
{
	struct relay_conf *r = &c->base, discard;
	const struct conf_section *sec = NULL; /* NULL: keys go to r */
	void *obj = NULL;
	bool layer[CONF_KEYS_MAX] = {false};
	char buf[CONF_WHY_MAX];
	unsigned lineno = 0, before = e->count;
	bool in_section = false;
	size_t pos = 0;

	if (!c->path)
		c->path = path;

	while (pos < len) {
		char line[1024], *s, *key, *val;
		size_t end = pos, n, idx;
		const struct conf_key *k;
		const char *why;

		while (end < len && text[end] != '\n')
			end++;
		n = end - pos;
		lineno++;
		if (n >= sizeof(line)) {
			conf_err(e, "%s:%u: line longer than %zu bytes", path, lineno,
				 sizeof(line) - 1);
			pos = end + 1;
			continue;
		}
		memcpy(line, text + pos, n);
		line[n] = '\0';
		pos = end + 1;
		if (memchr(line, '\0', n)) {
			conf_err(e, "%s:%u: NUL byte in line", path, lineno);
			continue;
		}
		s = trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		if (*s == '[') {
			char *close = strchr(s, ']'), *name;
			const struct conf_section *hs = NULL;

			if (close && *trim(close + 1) == '\0')
				hs = section_of(c, s);
			if (hs) {
				*close = '\0';
				in_section = true;
				sec = hs;
				obj = section_open(c, hs, trim(s + 1 + strlen(hs->name)), path,
						   lineno, e);
				continue;
			}
			if (!close || *trim(close + 1) != '\0' || strncmp(s, "[relay", 6) != 0 ||
			    (s[6] != ' ' && s[6] != '\t')) {
				conf_err(e, "%s:%u: expected a section header %s", path, lineno,
					 section_list(c, buf, sizeof(buf)));
				continue;
			}
			/* A refused name leaves the keys going where they went. */
			sec = NULL;
			obj = NULL;
			*close = '\0';
			name = trim(s + 6);
			if (!conf_valid_name(name)) {
				conf_err(
				    e,
				    "%s:%u: relay name '%s': use 1 to %d letters, digits, '-', "
				    "'_' or '.'",
				    path, lineno, name, CONF_NAME_MAX - 1);
				continue;
			}
			in_section = true;
			/* A rejected section's lines are still checked, into a
			 * copy that is thrown away. */
			r = &discard;
			*r = c->base;
			for (size_t i = 0; (k = key_at(c, i)) != NULL; i++)
				if (k->flags & CONF_RELAY)
					layer[i] = false;
			for (unsigned i = 0; i < c->nrelays && name; i++)
				if (strcmp(c->relays[i].name, name) == 0) {
					conf_err(e, "%s:%u: relay '%s' already defined at line %u",
						 path, lineno, name, c->relays[i].line);
					name = NULL;
				}
			if (!name)
				continue;
			if (c->nrelays == CONF_RELAYS_MAX) {
				conf_err(e, "%s:%u: too many relays (at most %d)", path, lineno,
					 CONF_RELAYS_MAX);
				continue;
			}
			r = &c->relays[c->nrelays++];
			*r = c->base;
			snprintf(r->name, sizeof(r->name), "%s", name);
			r->line = lineno;
			continue;
		}
		/* key [value]: the value is the rest of the line, "" allowed. */
		key = s;
		val = s + strcspn(s, " \t");
		if (*val)
			*val++ = '\0';
		val = trim(val);
		if (val[0] == '"' && strlen(val) >= 2 && val[strlen(val) - 1] == '"') {
			val[strlen(val) - 1] = '\0';
			val++;
		}
		if (sec) {
			section_key(c, sec, obj, key, val, path, lineno, e);
			continue;
		}
		k = key_find(c, key, &idx);
		if (!k) {
			conf_err(e, "%s:%u: unknown key '%s'", path, lineno, key);
			continue;
		}
		if (!(k->flags & CONF_RELAY) && in_section) {
			conf_err(e,
				 "%s:%u: %s: a process-wide key, put it before the first [relay]",
				 path, lineno, k->name);
			continue;
		}
		if (*val == '\0' && !(k->flags & CONF_EMPTY)) {
			conf_err(e, "%s:%u: %s: missing value", path, lineno, k->name);
			continue;
		}
		why = apply(c, r, k, idx, val, lineno, &layer[idx], buf);
		if (why)
			conf_err(e, "%s:%u: %s: invalid value '%s' (%s)", path, lineno, k->name,
				 val, why);
	}
	return e->count == before ? 0 : -1;
}

int conf_addr_family(const union etr_sockaddr *a)
{
	if (a->sa.sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a->in6.sin6_addr))
		return AF_INET;
	return a->sa.sa_family;
}

bool conf_listener_reaches(const union etr_sockaddr *listen, bool v6only, int family)
{
	int lf = conf_addr_family(listen);

	if (lf == family)
		return true;
	/* Only an IPv6 socket bound to :: sends to IPv4-mapped addresses. */
	return lf == AF_INET6 && family == AF_INET && !v6only &&
	       IN6_IS_ADDR_UNSPECIFIED(&listen->in6.sin6_addr);
}

int conf_finish(struct etr_conf *c, struct conf_errors *e)
{
	unsigned before = e->count;
	bool global[CONF_KEYS_MAX] = {false}, other_listener = false;
	char buf[CONF_WHY_MAX];
	size_t idx;

	for (const struct conf_part *const *p = parts(c); *p; p++)
		other_listener |= (*p)->listens && (*p)->listens(c);
	for (unsigned i = 0; i < c->ncli; i++)
		if (key_find(c, c->cli[i].key, &idx)->flags & CONF_LISTENER)
			other_listener = true;
	/* No [relay] section: the top level (or the command line) is the one,
	 * unless it names no game server and there is another listener (an
	 * SNI listener or an echo port): any listener makes a process. */
	if (c->nrelays == 0 && (!other_listener || c->cli_upstream || c->base.upstream_host[0])) {
		c->relays[0] = c->base;
		c->nrelays = 1;
	}
	for (unsigned i = 0; i < c->ncli; i++) {
		const struct conf_key *k = key_find(c, c->cli[i].key, &idx);
		const char *v = c->cli[i].value ? c->cli[i].value : "yes";

		if (!(k->flags & CONF_RELAY)) {
			apply(c, &c->base, k, idx, v, 0, &global[idx], buf);
			continue;
		}
		for (unsigned j = 0; j < c->nrelays; j++) {
			/* Each relay's command-line layer starts with the first
			 * value of a repeatable key (--master) seen for it. */
			bool replaced = false;

			for (unsigned p = 0; p < i && !replaced; p++)
				replaced = strcmp(c->cli[p].key, k->name) == 0;
			apply(c, &c->relays[j], k, idx, v, 0, &replaced, buf);
		}
	}
	for (const conf_finish_fn *f = c->schema ? c->schema->finish : NULL; f && *f; f++)
		(*f)(c, e);
	return e->count == before ? 0 : -1;
}

unsigned conf_warnings(const struct etr_conf *c, struct conf_errors *w)
{
	unsigned n = 0;

	for (const conf_warn_fn *f = c->schema ? c->schema->warn : NULL; f && *f; f++)
		n += (*f)(c, w);
	return n;
}

#define CONF_FILE_MAX (1 << 20)

char *conf_read_file(const char *path, size_t *len)
{
	struct stat st;
	char *buf = NULL;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), saved;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0)
		goto out;
	if (st.st_size > CONF_FILE_MAX) {
		errno = EFBIG;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		goto out;
	n = read(fd, buf, (size_t)st.st_size);
	if (n < 0) {
		free(buf);
		buf = NULL;
		goto out;
	}
	buf[n] = '\0';
	*len = (size_t)n;
out:
	saved = errno;
	close(fd);
	errno = saved;
	return buf;
}
