/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <limits.h>
#include <string.h>

#include "common/clock.h"

uint64_t phx_now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int phx_ms_until(uint64_t deadline_ns)
{
	uint64_t now = phx_now_ns(CLOCK_MONOTONIC);
	uint64_t ms = deadline_ns > now ? (deadline_ns - now) / 1000000 : 0;

	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Up to max decimal fields (1 to 9 digits each) split by sep into f: how many, or -1. */
static int fields(const char *s, char sep, int max, long long *f)
{
	int n = 0;

	for (;;) {
		size_t len = strspn(s, "0123456789");

		if (len < 1 || len > 9 || n == max)
			return -1;
		f[n] = 0;
		for (size_t i = 0; i < len; i++)
			f[n] = f[n] * 10 + (s[i] - '0');
		n++;
		s += len;
		if (!*s)
			return n;
		if (*s++ != sep)
			return -1;
	}
}

long long phx_duration_parse(const char *s)
{
	long long f[3] = { 0, 0, 0 }, days = 0;
	const char *dash = s ? strchr(s, '-') : NULL;
	int n;

	if (!s)
		return -1;
	if (!dash) {
		n = fields(s, ':', 3, f);
		if (n < 1 || (n > 1 && f[n - 1] > 59) || (n == 3 && f[1] > 59))
			return -1;
		return n == 1 ? f[0] : n == 2 ? f[0] * 60 + f[1] : (f[0] * 60 + f[1]) * 60 + f[2];
	}
	/* D-H[:M[:S]]: the days, then hours, minutes and seconds. */
	if (dash == s || dash - s > 9 || strspn(s, "0123456789") != (size_t)(dash - s))
		return -1;
	for (const char *p = s; p < dash; p++)
		days = days * 10 + (*p - '0');
	n = fields(dash + 1, ':', 3, f);
	if (n < 1 || f[0] > 23 || f[1] > 59 || f[2] > 59)
		return -1;
	return ((days * 24 + f[0]) * 60 + f[1]) * 60 + f[2];
}
