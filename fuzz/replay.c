/* SPDX-License-Identifier: ISC */
/* Runs a libFuzzer harness once on every file of the corpus directories (or
 * files) named on the command line, so any compiler can replay the seeds. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One input, in a buffer of exactly its size so a sanitizer sees overreads. */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long size;
	int rc = -1;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "replay: %s: cannot size\n", path);
		goto out;
	}
	buf = malloc(size ? (size_t)size : 1);
	if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
		fprintf(stderr, "replay: %s: cannot read\n", path);
		goto out;
	}
	LLVMFuzzerTestOneInput(buf, (size_t)size);
	rc = 0;
out:
	free(buf);
	fclose(f);
	return rc;
}

static int replay_path(const char *path, unsigned *count)
{
	struct stat st;
	struct dirent *d;
	DIR *dir;
	int rc = 0;

	if (stat(path, &st) != 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (replay_file(path) != 0)
			return -1;
		(*count)++;
		return 0;
	}
	dir = opendir(path);
	if (!dir) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((d = readdir(dir)) != NULL) {
		char file[4096];

		if (d->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s", path, d->d_name);
		if (replay_path(file, count) != 0)
			rc = -1;
	}
	closedir(dir);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR|FILE...\n", argv[0]);
		return 64;
	}
	for (int i = 1; i < argc; i++)
		if (replay_path(argv[i], &count) != 0)
			return 1;
	/* An empty corpus replays nothing: fail rather than pass. */
	if (count == 0) {
		fprintf(stderr, "replay: no inputs\n");
		return 1;
	}
	printf("replayed %u inputs\n", count);
	return 0;
}
