/* SPDX-License-Identifier: ISC */
/* The one table of keys, as each kind describes its own: a key (its name,
 * on the command line --NAME, and its setter), a section ([NAME LABEL] and
 * its keys), a part (a kind's keys, section, defaults), and the schema the
 * daemon lists them in. config.c walks the schema; it names no kind. */
#ifndef ETR_CONF_KEY_H
#define ETR_CONF_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct conf_key;

/* What a key's value is applied to, and where it came from. */
struct conf_ctx {
	struct etr_conf *c;
	struct relay_conf *r; /* a relay key's relay (the top level's: &c->base) */
	void *obj;	      /* a section key's listener (struct sni_conf ...), or NULL */
	unsigned line;	      /* of the key in the file; 0: the command line */
	char *buf;	      /* room for a message about the value */
	size_t n;
	bool *replaced; /* conf_first's: the key's list was replaced in this layer */
};

/* Apply v; NULL, or why v is wrong (a constant, or x->buf). */
typedef const char *(*conf_set_fn)(struct conf_ctx *x, const struct conf_key *k, const char *v);

/* Flags of a key. */
#define CONF_RELAY    0x01 /* per relay: the top level's is each [relay]'s default */
#define CONF_FLAG     0x02 /* no value on the command line; yes/no in the file */
#define CONF_EMPTY    0x04 /* "" is a value (flatline) */
#define CONF_LISTENER 0x08 /* on the command line: a listener, a process without a relay */
#define CONF_UPSTREAM 0x10 /* on the command line: names a game server */
#define CONF_ZERO     0x20 /* the generic duration: 0 allowed */

struct conf_key {
	const char *name;
	conf_set_fn set;
	unsigned flags;
	size_t off;	   /* the generic setters' field, in conf_target's struct */
	uint64_t min, max; /* the generic number's (duration's: ms, max 0: none) */
	const char *why;   /* the generic setter's message (NULL: "expected a number from
			    * MIN to MAX") */
	size_t line_off;   /* a section key's: where its line is kept (0: nowhere) */
};

/* A [NAME LABEL] section of the file: its listeners are an array of struct
 * etr_conf, each starting from init's defaults with its label and line. */
struct conf_section {
	const char *name;    /* "sni" */
	const char *article; /* "an": "unknown key 'x' in an [sni] section" */
	const char *many;    /* "sni listeners": "too many sni listeners" */
	const struct conf_key *keys;
	size_t nkeys;
	size_t array, count;	   /* offsets in struct etr_conf: the listeners, how many */
	size_t size;		   /* of one */
	unsigned max;		   /* at most */
	size_t name_off, line_off; /* of its char[CONF_NAME_MAX] name and unsigned line */
	void (*init)(void *obj);   /* defaults */
	void *discard;		   /* the keys of a refused header are checked into it */
	bool bare;		   /* "[NAME]" without a label, at most once ([tunnel]) */
};

/* One kind's share of the configuration. */
struct conf_part {
	const struct conf_key *keys; /* top-level keys and --flags */
	size_t nkeys;
	const struct conf_section *section; /* NULL: none */
	void (*defaults)(struct etr_conf *c);
	/* Whether it configures a listener besides the relays (then the top
	 * level without upstream is no relay). NULL: never. */
	bool (*listens)(const struct etr_conf *c);
};

typedef void (*conf_finish_fn)(struct etr_conf *c, struct conf_errors *e);
typedef unsigned (*conf_warn_fn)(const struct etr_conf *c, struct conf_errors *w);

/* What the daemon configures: the parts (NULL-terminated), the checks of
 * conf_finish in their order, and conf_warnings' (both NULL-terminated). */
struct conf_schema {
	const struct conf_part *const *parts;
	const conf_finish_fn *finish;
	const conf_warn_fn *warn;
};

/* The struct k's generic setter writes into: a section's listener, the
 * relay for a CONF_RELAY key, else struct etr_conf. */
void *conf_target(struct conf_ctx *x, const struct conf_key *k);

/* The key of section s named name, or NULL. */
const struct conf_key *conf_section_key(const struct conf_section *s, const char *name);

/* Whether this is the first value of a repeatable key in its layer (the
 * file's top level, one [relay], the command line): then its list starts
 * anew. Marks it: the next call says no. */
bool conf_first(struct conf_ctx *x);

/* Generic setters: a number in [k->min, k->max] (uint32_t); a duration in
 * ms (uint64_t; 0 with CONF_ZERO, at most k->max unless 0); yes or no
 * (bool); a path (char[CONF_PATH_MAX]); bytes with k or M (uint32_t). */
const char *conf_set_u32(struct conf_ctx *x, const struct conf_key *k, const char *v);
const char *conf_set_duration(struct conf_ctx *x, const struct conf_key *k, const char *v);
const char *conf_set_bool(struct conf_ctx *x, const struct conf_key *k, const char *v);
const char *conf_set_path(struct conf_ctx *x, const struct conf_key *k, const char *v);
const char *conf_set_bytes(struct conf_ctx *x, const struct conf_key *k, const char *v);

/* yes, true, on, 1 / no, false, off, 0. 0 or -1. */
int conf_parse_bool(const char *v, bool *out);
/* An IP address alone (no port) into a, port 0. 0 or -1. */
int conf_parse_ip(const char *s, union etr_sockaddr *a);
bool conf_ip_wildcard(const union etr_sockaddr *a);
/* "MIN-MAX" within 1024-65535: NULL, or form (the message for a value
 * that is no MIN-MAX), or why the range is wrong. */
const char *conf_parse_ports(const char *v, uint16_t *lo, uint16_t *hi, const char *form);
/* Whether b has bits set past its prefix: then "did you mean ...?" in buf. */
bool conf_cidr_host_bits(const struct conf_cidr *b, char *buf, size_t n);
/* 1 to CONF_NAME_MAX - 1 letters, digits, '-', '_' or '.'. */
bool conf_valid_name(const char *s);

/* An address's port, host order. */
uint16_t conf_port_of(const union etr_sockaddr *a);
/* Two listeners on one port: the same address, or either a wildcard. */
bool conf_listeners_overlap(const union etr_sockaddr *a, const union etr_sockaddr *b);

/* Add an error line to e. */
void conf_err(struct conf_errors *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The config file's path, "" when none. */
const char *conf_path(const struct etr_conf *c);
/* Where line (of a key that can repeat) is: "FILE:LINE", or "etrelay" for
 * 0, the command line. */
const char *conf_line_where(const struct etr_conf *c, unsigned line, char *buf, size_t n);
/* Where the first of keys a, b (b may be NULL) that is set in r was set:
 * "FILE:LINE", "etrelay: command line", or where for defaults. */
const char *conf_key_origin(const struct etr_conf *c, const struct relay_conf *r, const char *a,
			    const char *b, const char *where, char *buf, size_t n);

/* Checks between kinds (conf_cross.c). conf_finish's steps: the echo-only
 * ports against each other and the relays, and every echo port
 * (c->prbe.ports); every pair of TCP listeners on one port (ops plane, SNI,
 * TURN's tcp-listen and tls-listen), named at the later one. And TURN
 * listener i against the relays, the echo ports, the other TURN listeners
 * and every UDP listener in its relayed ports (where: "FILE:LINE: turn
 * NAME" or "etrelay: turn NAME"). */
void conf_prbe_ports(struct etr_conf *c, struct conf_errors *e);
void conf_tcp_clash(struct etr_conf *c, struct conf_errors *e);
/* A relay's session-ports holding a UDP listener's port (attack13 F5:
 * a session socket cannot bind it, and a client goes unanswered). */
void conf_session_ports_clash(struct etr_conf *c, struct conf_errors *e);
void conf_turn_clash(const struct etr_conf *c, unsigned i, const char *where,
		     struct conf_errors *e);

#endif
