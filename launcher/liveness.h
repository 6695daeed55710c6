/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agents' liveness watch (liveness.c): who beats whom and when a
 * watched agent counts as silent. The agents form a ring by rank; each
 * beats to the PHX_LIVENESS_WATCH agents after it and watches as many
 * before it, so a node's death is seen by that many others, O(nodes)
 * beats in all, and two dead neighbours are still seen. Pure: the clock
 * is the caller's.
 */
#ifndef PHX_LAUNCHER_LIVENESS_H
#define PHX_LAUNCHER_LIVENESS_H

#include <stdbool.h>
#include <stdint.h>

#define PHX_LIVENESS_WATCH 2
/* Beats per silence timeout: a few lost datagrams are no silence. */
#define PHX_LIVENESS_BEATS 6
/*
 * An agent whose workers are starting (exec, imports, CUDA and NCCL set-up,
 * a restore) shares its node's CPUs with them: its beats may come late.
 * It says so in its beats, and is given this many timeouts.
 */
#define PHX_LIVENESS_SETTLE_FACTOR 4

/* What a beat says of its sender. */
enum phx_beat {
	PHX_BEAT_STEADY, /* its workers run */
	PHX_BEAT_SETTLING, /* its workers are starting */
	PHX_BEAT_END, /* it ends on its own: no longer watched */
};

struct phx_liveness {
	unsigned me, size;
	unsigned n; /* agents watched (and beaten to): min(WATCH, size - 1) */
	uint64_t timeout_ns;
	struct {
		unsigned rank;
		uint64_t heard_ns; /* last beat, or the start */
		bool ended; /* said it ends: no longer watched */
		bool settling; /* its last beat said its workers are starting */
		bool reported; /* found silent once: not again */
	} peer[PHX_LIVENESS_WATCH];
};

/*
 * Agent me of size, silent after timeout_ns without a beat; the watched
 * count as settling until they say otherwise.
 */
void phx_liveness_init(struct phx_liveness *l, unsigned me, unsigned size, uint64_t timeout_ns,
		       uint64_t now_ns);
/* The agent rank the i-th beat goes to (i < l->n). */
unsigned phx_liveness_target(const struct phx_liveness *l, unsigned i);
/*
 * A beat from agent rank at now_ns; false when this agent does not watch
 * rank (its beat is not for this agent).
 */
bool phx_liveness_heard(struct phx_liveness *l, unsigned rank, enum phx_beat beat, uint64_t now_ns);
/*
 * The next watched agent silent at now_ns for timeout_ns (settling: for
 * PHX_LIVENESS_SETTLE_FACTOR times that) and not found before (marked
 * found; *silent_ns: how long), or -1.
 */
long phx_liveness_silent(struct phx_liveness *l, uint64_t now_ns, uint64_t *silent_ns);
/* The time between beats. */
uint64_t phx_liveness_interval(const struct phx_liveness *l);

#endif
