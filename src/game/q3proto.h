/* SPDX-License-Identifier: ISC */
/* Quake 3 family connectionless packets (ET, RTCW, Q3, DarkPlaces):
 * classify, build, read info strings. Pure, no I/O. */
#ifndef ETR_Q3PROTO_H
#define ETR_Q3PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum q3_cmd {
	Q3_GAME,    /* no 0xffffffff prefix: in-game traffic */
	Q3_UNKNOWN, /* prefixed, command not one we know */
	Q3_GETCHALLENGE,
	Q3_CHALLENGERESPONSE,
	Q3_GETINFO,
	Q3_INFORESPONSE,
	Q3_GETSTATUS,
	Q3_STATUSRESPONSE,
	Q3_CONNECT,
	Q3_CONNECTRESPONSE,
	Q3_HEARTBEAT,
	Q3_RCON,
	Q3_PRINT,
	Q3_DISCONNECT,
	Q3_GETSERVERS,
	Q3_GETSERVERSRESPONSE,
	Q3_CMD_COUNT
};

/* Longest command word we keep for logs. */
#define Q3_WORD_MAX 32

/* Starts with \xff\xff\xff\xff. */
bool q3_is_connectionless(const uint8_t *p, size_t n);

/* What kind of packet this is: the command any supported engine would run
 * for it, read as MSG_ReadStringLine and Cmd_TokenizeString do (see
 * q3proto.c); Q3_UNKNOWN when none of them would run one we know. */
enum q3_cmd q3_classify(const uint8_t *p, size_t n);

/* A command a game server runs for a client (SV_ConnectionlessPacket):
 * getchallenge, getinfo, getstatus, connect, rcon, disconnect (shape.h's
 * shape_q3_served, by name). */
bool q3_served(enum q3_cmd c);

/* The game relay's shape for a datagram from a source without a session:
 * a connectionless packet whose command q3_served, or an in-game packet
 * long enough for its sequence and qport. The XDP program drops the rest
 * (src/xdp/etrelay.bpf.c reads the same tables, shape.h). */
bool q3_shape(const uint8_t *p, size_t n);

/* Lower-case canonical name ("getchallenge"), "game" or "unknown". */
const char *q3_cmd_name(enum q3_cmd c);

/* The command word q3_classify read, in the case it was sent
 * ("getChallenge"), printable characters only,
 * into out (NUL-terminated, at most Q3_WORD_MAX-1 chars). Returns its length;
 * 0 when the packet is not connectionless or has no word. */
size_t q3_word(const uint8_t *p, size_t n, char out[Q3_WORD_MAX]);

/* Build "\xff\xff\xff\xff<text>" into out. Returns bytes written or -1 when
 * it does not fit. */
int q3_build(uint8_t *out, size_t outlen, const char *text);

/* Value of `key` in a "\k\v\k\v" info string of length n, into out.
 * Returns the value's length, or -1 when absent or too long for out. */
int q3_info_value(const char *info, size_t n, const char *key, char *out, size_t outlen);

/* An infoResponse whose \challenge\ equals `challenge`, in the info string
 * after the command's line, where the client reads it. */
bool q3_info_response_matches(const uint8_t *p, size_t n, const char *challenge);

#endif
