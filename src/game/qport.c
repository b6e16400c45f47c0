/* SPDX-License-Identifier: ISC */
/* qport values as the engine reads them (see qport.h). Where the relay and
 * the engine could read a packet differently, the relay refuses to read it:
 * a connect whose qport the relay got wrong could take any player's slot. */
#include "qport.h"

#include <stdbool.h>
#include <strings.h>

int qport_connect_userinfo(const uint8_t *text, size_t n, size_t *start)
{
	size_t i;

	/* The engine stops the line at NUL, '\n' or 1023 bytes; clients send
	 * connect "<userinfo>". */
	if (n > QPORT_CONNECT_TEXT_MAX)
		n = QPORT_CONNECT_TEXT_MAX;
	if (n < 2 || text[0] != '"')
		return -1;
	for (i = 1; i < n && text[i] != '"'; i++)
		if (text[i] == '\0' || text[i] == '\n')
			return -1;
	if (i >= n)
		return -1;
	*start = 1;
	return (int)(i - 1);
}

int qport_of_userinfo(const char *info, size_t n)
{
	size_t i = 0, ks, ke;
	long q = 0;
	bool neg = false;

	/* Info_ValueForKey: "\key\value" pairs, the leading backslash
	 * optional; a value runs to the next backslash; the first key that
	 * matches, ignoring ASCII case. */
	if (i < n && info[i] == '\\')
		i++;
	for (;;) {
		ks = i;
		while (i < n && info[i] != '\\')
			i++;
		if (i >= n)
			return 0; /* "": atoi gives 0 */
		ke = i++;
		if (ke - ks == 5 && strncasecmp(info + ks, "qport", 5) == 0)
			break;
		while (i < n && info[i] != '\\')
			i++;
		if (i >= n)
			return 0;
		i++;
	}
	/* atoi: white space, a sign, digits up to the first other byte. */
	while (i < n && (info[i] == ' ' || (info[i] >= '\t' && info[i] <= '\r')))
		i++;
	if (i < n && (info[i] == '-' || info[i] == '+'))
		neg = info[i++] == '-';
	for (; i < n && info[i] >= '0' && info[i] <= '9'; i++) {
		q = q * 10 + (info[i] - '0');
		if (q > 65535)
			return -1;
	}
	return neg && q > 0 ? -1 : (int)q;
}
