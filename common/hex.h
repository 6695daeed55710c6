/* SPDX-License-Identifier: Apache-2.0 */
/* Hex text of bytes: keys, tokens, nonces, MACs, digests, NCCL ids. */
#ifndef PHX_HEX_H
#define PHX_HEX_H

#include <stddef.h>

/* The digits phx_hex_encode writes; also the set a lower-case-only check spans. */
#define PHX_HEX_LOWER "0123456789abcdef"

/* Lower-case hex of in[0..n): 2n characters and a NUL into out. */
void phx_hex_encode(const void *in, size_t n, char *out);

/* The value of a hex digit of either case, or -1 for any other character. */
int phx_hex_digit(char c);

/*
 * Decodes s[0..slen) into the n bytes at out; digits of either case.
 * Returns 0, or -1 when slen is not 2n or a character is not a hex digit
 * (out is then partly written).
 */
int phx_hex_decode(const char *s, size_t slen, void *out, size_t n);

#endif
