/* SPDX-License-Identifier: ISC */
/* The qport a Quake 3 family game server reads from a client's packets:
 * bytes 4-5 of an in-game packet, the "qport" key of a connect's userinfo.
 * Pure. */
#ifndef ETR_QPORT_H
#define ETR_QPORT_H

#include <stddef.h>
#include <stdint.h>

/* The decoded part of a connect's line the engine reads: its line is at
 * most 1023 bytes (MAX_STRING_CHARS - 1), 8 of them "connect ". */
#define QPORT_CONNECT_TEXT_MAX (1023 - 8)

/* The qport the game server reads from an in-game packet: the 16 bits after
 * the 4-byte sequence, little-endian; 0xffff when the packet is shorter
 * (its reader returns -1 past the end). */
static inline uint16_t qport_of_packet(const uint8_t *p, size_t n)
{
	return n < 6 ? 0xffff : (uint16_t)(p[4] | p[5] << 8);
}

/* The userinfo in the decoded stream of a connect (text, n bytes: what
 * follows "connect " on the engine's line) the way every client sends it:
 * a quoted string closed within the line the engine reads. Returns its
 * length and sets *start; -1 for anything else, which the engines' readers
 * do not all take alike. */
int qport_connect_userinfo(const uint8_t *text, size_t n, size_t *start);

/* The qport the game server reads from a connect's userinfo (n bytes, no
 * quotes): atoi of the first "qport" value, key in any case, 0 when there
 * is none. Returns -1 when that is outside 0..65535, which no in-game packet
 * can carry. */
int qport_of_userinfo(const char *info, size_t n);

#endif
