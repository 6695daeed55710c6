/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "common/clock.h"

uint64_t phx_now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
