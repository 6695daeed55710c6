/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Load spread off the links next in line. Once trades leave the busiest
 * link as short as they can, maps the link model scores alike still
 * differ in how long the step takes: a flow that crosses several busy
 * links moves at its share of the busiest of them, leaving the others idle
 * part of the time. Where the NICs are the bound, that is a flow crossing
 * a NIC and an uplink nearly as busy. Swaps of whole nodes are kept where
 * the busiest link stays as short and the busiest uplink gets less busy,
 * or stays as busy and the sum of the squares of all links' times falls
 * (the simulated step follows them; tests/bench/placement_sim). First
 * each node under an uplink as busy as the busiest link is tried against
 * every other (relieve()), then swaps are drawn from a fixed sequence, so
 * every node plans the same. A swap is priced from the links it touches,
 * but there are fewer on larger allocations, where time is short.
 */
#include "config.h"

#include <stdlib.h>

#include "placement/placement_int.h"

#define SPREAD_RANKS (1ul << 22)
#define SPREAD_MAX 4096ul
#define SPREAD_MIN 512ul /* fewer rarely find one; 16k GPUs get none */

static uint32_t draw(uint64_t *state, size_t n)
{
	*state = *state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)((*state >> 33) % n);
}

/* Nodes that may swap: holding ranks, not slow; their count. */
static size_t movable(const struct pl_alloc *a, const uint32_t *rank_node, unsigned *used,
		      uint32_t *nodes)
{
	size_t n = 0;

	for (unsigned long r = 0; r < a->world; r++)
		used[rank_node[r]]++;
	for (size_t i = 0; i < a->n_nodes; i++) {
		if (used[i] && !a->slow[i])
			nodes[n++] = (uint32_t)i;
	}
	return n;
}

/*
 * A shorter busiest link; else an uplink no longer as busy, or as busy but
 * less; else the load spread more evenly. Sums of squares in another order
 * differ by rounding: only a real fall counts.
 */
static bool spreader(const struct pl_worst *now, const struct pl_worst *was)
{
	if (now->t != was->t)
		return now->t < was->t;
	if (now->up < was->up * (1 - 1e-9) || now->up > was->up * (1 + 1e-9))
		return now->up < was->up;
	return now->sq < was->sq * (1 - 1e-9);
}

/*
 * Swaps off an uplink as busy as the busiest link (NICs, mostly: the
 * bound): a flow crossing both moves at its share of one and leaves the
 * other idle part of the time. Each node under such an uplink is tried
 * against every node of another leaf while the uplink stays that busy.
 * Returns the evaluations made, at most budget.
 */
static unsigned long relieve(const struct pl_alloc *a, struct pl_links *links, const unsigned *used,
			     const uint32_t *nodes, size_t n, unsigned long budget,
			     struct pl_worst *w, long *kept)
{
	unsigned long evals = 0;

	for (size_t i = 0; i < n && evals < budget; i++) {
		uint32_t x = nodes[i];

		for (size_t j = 0; j < n && evals < budget; j++) {
			uint32_t y = nodes[j];

			if (!phx_pl_links_uplink_busiest(links, x))
				break;
			if (used[x] != used[y] ||
			    a->unit[x][PHX_LEVEL_LEAF] == a->unit[y][PHX_LEVEL_LEAF])
				continue;
			evals++;
			*kept += phx_pl_links_trade_if(links, &x, &y, 1, spreader, w);
		}
	}
	return evals;
}

long phx_pl_spread(const struct pl_alloc *a, uint32_t *rank_node)
{
	unsigned long evals = SPREAD_RANKS / a->world;
	uint64_t state = 0x9e3779b97f4a7c15ull;
	struct pl_links *links = NULL;
	unsigned *used = NULL;
	uint32_t *nodes = NULL;
	struct pl_worst w;
	long kept = 0;
	size_t n;

	evals = evals > SPREAD_MAX ? SPREAD_MAX : evals;
	if (evals < SPREAD_MIN)
		return 0;
	used = calloc(a->n_nodes + 1, sizeof(*used));
	nodes = calloc(a->n_nodes + 1, sizeof(*nodes));
	if (!used || !nodes) {
		kept = -1;
		goto out;
	}
	n = movable(a, rank_node, used, nodes);
	if (n < 2)
		goto out;
	links = phx_pl_links_open(a, rank_node);
	if (!links) {
		kept = -1;
		goto out;
	}
	phx_pl_links_worst(links, &w);
	evals -= relieve(a, links, used, nodes, n, evals, &w, &kept);
	for (unsigned long k = 0; k < evals; k++) {
		uint32_t x = nodes[draw(&state, n)], y = nodes[draw(&state, n)];

		if (x == y || used[x] != used[y])
			continue;
		kept += phx_pl_links_trade_if(links, &x, &y, 1, spreader, &w);
	}
out:
	phx_pl_links_close(links);
	free(used);
	free(nodes);
	return kept;
}
