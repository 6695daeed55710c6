/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's clocks, in seconds as doubles. */
#include "config.h"

#include <time.h>

#include "checkpoint/ckptd/ckptd_clock.h"

double ckptd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double ckptd_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
