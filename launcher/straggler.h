/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Straggler detection (straggler.c): every rank's step rate as the agents
 * send it in their round reports, and the ranks slower than their role's
 * median. Pure.
 */
#ifndef PHX_LAUNCHER_STRAGGLER_H
#define PHX_LAUNCHER_STRAGGLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One worker's mean step time over the straggler window. */
struct phx_rate {
	unsigned long rank; /* global */
	unsigned role;
	unsigned agent; /* whose report it came in */
	uint64_t step_ns;
	uint64_t steps; /* in the window */
};

/* Appends "RANK:STEP_US:STEPS" to buf at *off (space separated); 0, or -1 when full. */
int phx_rate_format(const struct phx_rate *r, char *buf, size_t len, size_t *off);
/*
 * The rates of one report (the text at rates_at), appended to out[*n]
 * (at most cap entries in all) with role and agent set. 0, or -1 when the
 * text is not rates, a rank is out of [0, world) or out is full.
 */
int phx_rates_parse(const char *s, unsigned role, unsigned agent, unsigned long world,
		    struct phx_rate *out, size_t cap, size_t *n);
/*
 * Marks in slow[i] each rate whose step time is at least pct percent
 * above the median (the lower one) of its role's rates, when the role has
 * at least two rates (pct 0: none is); median[i] and peers[i] receive that
 * median and the number of rates of the role. Roles are below PHX_ROLE_MAX.
 * The number marked.
 */
size_t phx_straggler_detect(const struct phx_rate *r, size_t n, unsigned pct, uint64_t *median,
			    unsigned *peers, bool *slow);

#endif
