/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unsigned 64-bit arithmetic that sticks at UINT64_MAX instead of
 * wrapping, for sizes and costs computed from outside input.
 */
#ifndef PHX_SATURATE_H
#define PHX_SATURATE_H

#include <stdint.h>

static inline uint64_t phx_sat_add(uint64_t x, uint64_t y)
{
	return x + y < x ? UINT64_MAX : x + y;
}

static inline uint64_t phx_sat_mul(uint64_t x, uint64_t y)
{
	return y && x > UINT64_MAX / y ? UINT64_MAX : x * y;
}

#endif
