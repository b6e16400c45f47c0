/* SPDX-License-Identifier: ISC */
/* JSON string escaping. */
#include "json.h"

void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			/* Player names are not UTF-8: escape every 8-bit byte
			 * as its Latin-1 code point, so the output is valid. */
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}
