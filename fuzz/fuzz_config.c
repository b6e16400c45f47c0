/* SPDX-License-Identifier: ISC */
/* libFuzzer harness for config.c. Input: the text of a config file, loaded
 * and finished as main does; then the same bytes split on NUL as argv. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf_schema.h"
#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ARGV_MAX 64

static struct etr_conf conf;
static struct conf_errors errs;

/* Errors stay inside their buffer, as one C string of the length kept. */
static void check(const struct etr_conf *c, const struct conf_errors *e)
{
	if (e->len >= sizeof(e->text) || memchr(e->text, '\0', sizeof(e->text)) == NULL)
		abort();
	if (c->nrelays > CONF_RELAYS_MAX || c->ncli > CONF_CLI_MAX)
		abort();
	for (unsigned i = 0; i < c->nrelays; i++)
		if (c->relays[i].nmasters > CONF_MASTERS_MAX ||
		    memchr(c->relays[i].name, '\0', sizeof(c->relays[i].name)) == NULL)
			abort();
}

static void load(const uint8_t *data, size_t size)
{
	/* Exactly the input, unterminated, so a read past len is caught. */
	char *text = malloc(size ? size : 1);

	if (!text)
		abort();
	memcpy(text, data, size);
	memset(&errs, 0, sizeof(errs));
	conf_defaults(&conf, &etr_conf_schema);
	if (conf_load(&conf, text, size, "fuzz.conf", &errs) == 0)
		(void)conf_finish(&conf, &errs);
	check(&conf, &errs);
	free(text);
}

static void args(const uint8_t *data, size_t size)
{
	static char prog[] = "etrelay";
	char *buf = malloc(size + 1), *argv[ARGV_MAX + 2];
	int argc = 0;
	size_t i = 0;

	if (!buf)
		abort();
	memcpy(buf, data, size);
	buf[size] = '\0';
	argv[argc++] = prog;
	while (i <= size && argc <= ARGV_MAX) {
		argv[argc++] = buf + i;
		i += strlen(buf + i) + 1;
	}
	argv[argc] = NULL;
	memset(&errs, 0, sizeof(errs));
	conf_defaults(&conf, &etr_conf_schema);
	/* The values conf_parse_args keeps point into buf: finish first. */
	if (conf_parse_args(&conf, argc, argv, &errs) == 0)
		(void)conf_finish(&conf, &errs);
	check(&conf, &errs);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	load(data, size);
	args(data, size);
	return 0;
}
