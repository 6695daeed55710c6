/* SPDX-License-Identifier: Apache-2.0 */
/* Clock readings in nanoseconds, one integer that is easy to compare and subtract. */
#ifndef PHX_CLOCK_H
#define PHX_CLOCK_H

#include <stdint.h>
#include <time.h>

/* clock: CLOCK_MONOTONIC for deadlines and durations, CLOCK_REALTIME for wall-clock times. */
uint64_t phx_now_ns(clockid_t clock);

/* Milliseconds from now to a CLOCK_MONOTONIC deadline, 0 once it passed: a poll() timeout. */
int phx_ms_until(uint64_t deadline_ns);

/*
 * A duration as Slurm writes times, but a bare number is seconds: "90",
 * "10:00" (M:S), "1:30:00" (H:M:S), "2-12" (D-H), "2-12:30" (D-H:M),
 * "1-00:00:00" (D-H:M:S). Minutes and seconds after a colon, and hours
 * after a day, are below 60 (24); every field is at most 9 digits. The
 * seconds, or -1 when s is none of these.
 */
long long phx_duration_parse(const char *s);

#endif
