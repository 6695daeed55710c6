/* SPDX-License-Identifier: Apache-2.0 */
/* The agents' liveness watch: see liveness.h. */
#include "config.h"

#include "launcher/liveness.h"

void phx_liveness_init(struct phx_liveness *l, unsigned me, unsigned size, uint64_t timeout_ns,
		       uint64_t now_ns)
{
	*l = (struct phx_liveness){ .me = me, .size = size, .timeout_ns = timeout_ns };
	l->n = size > PHX_LIVENESS_WATCH ? PHX_LIVENESS_WATCH : (size ? size - 1 : 0);
	/*
	 * The watched: me-1, me-2, ... around the ring. They settle first:
	 * the agents leave the wire-up's fence together, but a loaded node
	 * schedules some of them later.
	 */
	for (unsigned i = 0; i < l->n; i++) {
		l->peer[i].rank = (me + size - 1 - i) % size;
		l->peer[i].heard_ns = now_ns;
		l->peer[i].settling = true;
	}
}

unsigned phx_liveness_target(const struct phx_liveness *l, unsigned i)
{
	return (l->me + 1 + i) % l->size;
}

bool phx_liveness_heard(struct phx_liveness *l, unsigned rank, enum phx_beat beat, uint64_t now_ns)
{
	for (unsigned i = 0; i < l->n; i++) {
		if (l->peer[i].rank != rank)
			continue;
		/* A time read before another beat's is no news. */
		if (now_ns >= l->peer[i].heard_ns) {
			l->peer[i].heard_ns = now_ns;
			l->peer[i].settling = beat == PHX_BEAT_SETTLING;
		}
		l->peer[i].ended |= beat == PHX_BEAT_END;
		return true;
	}
	return false;
}

long phx_liveness_silent(struct phx_liveness *l, uint64_t now_ns, uint64_t *silent_ns)
{
	for (unsigned i = 0; i < l->n; i++) {
		uint64_t quiet = now_ns > l->peer[i].heard_ns ? now_ns - l->peer[i].heard_ns : 0;
		uint64_t limit =
			l->timeout_ns * (l->peer[i].settling ? PHX_LIVENESS_SETTLE_FACTOR : 1);

		if (l->peer[i].ended || l->peer[i].reported || quiet < limit)
			continue;
		l->peer[i].reported = true;
		*silent_ns = quiet;
		return l->peer[i].rank;
	}
	return -1;
}

uint64_t phx_liveness_interval(const struct phx_liveness *l)
{
	return l->timeout_ns / PHX_LIVENESS_BEATS;
}
