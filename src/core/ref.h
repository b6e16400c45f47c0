/* SPDX-License-Identifier: ISC */
/* Refs: an index in the low bits and a generation above it, in 32 bits, so
 * that an event outliving what it named (a late completion for a freed slot)
 * is told from one for the slot's next life: the slot's generation moved on.
 * The one packing every table behind a loop id uses (sessions, TURN
 * allocations and connections, SNI connections) and the loop id itself (a
 * ref under its endpoint's slot). */
#ifndef ETR_REF_H
#define ETR_REF_H

#include <stdbool.h>
#include <stdint.h>

/* A layout's budget, checked where it is declared:
 * REF_FITS(IDX_BITS, GEN_BITS, ENDPOINT_REF_BITS) in a _Static_assert. */
#define REF_FITS(idx_bits, gen_bits, budget)                                                       \
	((idx_bits) > 0 && (gen_bits) > 0 && (idx_bits) + (gen_bits) <= (budget) && (budget) <= 32)

/* The low bits set (bits <= 32). */
static inline uint32_t ref_mask(unsigned bits)
{
	return bits >= 32 ? UINT32_MAX : (1u << bits) - 1;
}

/* idx (its low idx_bits) under gen (its low gen_bits: a generation wraps). */
static inline uint32_t ref_pack(uint32_t idx, unsigned idx_bits, uint32_t gen, unsigned gen_bits)
{
	return (idx & ref_mask(idx_bits)) | (gen & ref_mask(gen_bits)) << idx_bits;
}

/* The index a ref carries. */
static inline uint32_t ref_idx(uint32_t ref, unsigned idx_bits)
{
	return ref & ref_mask(idx_bits);
}

/* The generation a ref carries. */
static inline uint32_t ref_gen(uint32_t ref, unsigned idx_bits, unsigned gen_bits)
{
	return ref >> idx_bits & ref_mask(gen_bits);
}

/* Whether ref was made in the life of a slot now at generation gen: false
 * for a stale ref (until the generation has wrapped back to it). */
static inline bool ref_gen_ok(uint32_t ref, unsigned idx_bits, unsigned gen_bits, uint32_t gen)
{
	return ref_gen(ref, idx_bits, gen_bits) == (gen & ref_mask(gen_bits));
}

#endif
