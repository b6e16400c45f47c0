/* SPDX-License-Identifier: ISC */
/* The listeners' shapes: what a datagram from a source the relay does not
 * know must look like to be worth a listener's time. The tables the relay's
 * classifiers (q3proto.c, stun.c, the PRBE port) and the XDP program
 * (src/xdp/etrelay.bpf.c) both read: one source of truth, and
 * tests/unit/test_xdp_shape.c feeds the fuzz corpora to both and compares.
 * Includable by BPF C: <linux/types.h> and nothing else. */
#ifndef ETR_SHAPE_H
#define ETR_SHAPE_H

#include <linux/types.h>

/* The listener kinds the XDP program tells apart, one bit each in a port's
 * entry (a game relay with prbe yes carries two), and the label of
 * etrelay_xdp_packets_total{listener}. */
enum shape_kind {
	SHAPE_GAME, /* a game relay: Quake 3 family */
	SHAPE_TURN, /* a TURN listener over UDP */
	SHAPE_PRBE, /* a PRBE echo port (prbe-listen, or a relay's prbe yes) */
	SHAPE_KINDS
};

/* Quake 3: the line reader's and the tokenizer's byte classes
 * (q3proto.c's comment says how the engines read a command): NUL and '\n'
 * end the line; the rest <= ' ' as a signed char is whitespace; '"' and
 * '/' may end a word. */
enum { SHAPE_C_WORD, SHAPE_C_END, SHAPE_C_SPACE, SHAPE_C_QUOTE, SHAPE_C_SLASH };

static const __u8 shape_q3_cls[256] = {
    [0] = SHAPE_C_END,
    [1 ... 9] = SHAPE_C_SPACE,
    ['\n'] = SHAPE_C_END,
    [11 ... ' '] = SHAPE_C_SPACE,
    ['"'] = SHAPE_C_QUOTE,
    ['/'] = SHAPE_C_SLASH,
    [0x80 ... 0xff] = SHAPE_C_SPACE,
};

/* The out-of-band prefix, and the longest line MSG_ReadStringLine returns
 * (MAX_STRING_CHARS - 1): no byte past 4 + SHAPE_Q3_LINE_MAX names a
 * command. */
#define SHAPE_Q3_PREFIX	  4
#define SHAPE_Q3_LINE_MAX 1023

/* A coded connect ("connect" at bytes 4..10, Huffman from byte 12): the
 * bytes its command depends on end before this one. */
#define SHAPE_Q3_CONNECT_BYTES 15

/* The shortest in-game packet worth forwarding from a new source: its
 * sequence (4 bytes) and its qport (2), which the game server reads. */
#define SHAPE_Q3_GAME_MIN 6

/* The commands a game server runs for a client (SV_ConnectionlessPacket):
 * a connectionless packet from a source without a session is worth the
 * relay's time when its command (q3_classify's) is one of these. Lower
 * case; the engines compare without regard to case. */
#define SHAPE_Q3_SERVED	  6
#define SHAPE_Q3_WORD_MAX 12
/* Each padded with NULs to 16 bytes: compared as two 64-bit words. */
static const char shape_q3_served[SHAPE_Q3_SERVED][16] = {
    "getchallenge", "getinfo", "getstatus", "connect", "rcon", "disconnect",
};

/* TURN over UDP (RFC 8489 6, RFC 8656 12): a STUN header (first two bits
 * zero, the magic cookie at bytes 4..7), or ChannelData whose channel
 * number is in the range stun.h accepts (its first byte 0x40..0x7f). */
#define SHAPE_STUN_HDR	  20
#define SHAPE_STUN_COOKIE 0x2112A442u
#define SHAPE_CHANNEL_HDR 4
#define SHAPE_CHANNEL_MIN 0x4000
#define SHAPE_CHANNEL_MAX 0x7FFF

/* A PRBE probe starts with these four bytes (prbe.h's PRBE_MAGIC). */
#define SHAPE_PRBE_MAGIC "PRBE"
#define SHAPE_PRBE_LEN	 4

#endif
