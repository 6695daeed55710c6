/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tests' one pseudo-random generator (xorshift64*): fast, and the same
 * sequence from the same seed on every machine, so a failure reproduces
 * from the seed it prints.
 */
#ifndef PHX_TEST_RNG_H
#define PHX_TEST_RNG_H

#include <stdint.h>

/* Next value; *state must not be 0. */
static inline uint64_t phx_xorshift64s(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return *state * 2685821657736338717ull;
}

#endif
