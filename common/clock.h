/* SPDX-License-Identifier: Apache-2.0 */
/* Clock readings in nanoseconds, one integer that is easy to compare and subtract. */
#ifndef PHX_CLOCK_H
#define PHX_CLOCK_H

#include <stdint.h>
#include <time.h>

/* clock: CLOCK_MONOTONIC for deadlines and durations, CLOCK_REALTIME for wall-clock times. */
uint64_t phx_now_ns(clockid_t clock);

#endif
