/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "common/hex.h"

void phx_hex_encode(const void *in, size_t n, char *out)
{
	static const char digits[] = PHX_HEX_LOWER;
	const unsigned char *p = in;

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

int phx_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int phx_hex_decode(const char *s, size_t slen, void *out, size_t n)
{
	unsigned char *p = out;

	if (slen != 2 * n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int hi = phx_hex_digit(s[2 * i]), lo = phx_hex_digit(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		p[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}
