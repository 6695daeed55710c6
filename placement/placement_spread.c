/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Load spread off the links next in line. Once trades leave the busiest
 * link as short as they can, maps the link model scores alike still
 * differ in how long the step takes: a flow that crosses several busy
 * links moves at its share of the busiest of them, leaving the others idle
 * part of the time. Swaps of whole nodes are kept where the busiest link
 * stays as short and the sum of the squares of all links' times falls
 * (the simulated step follows it; tests/bench/placement_sim). The swaps are
 * drawn from a fixed sequence, so every node plans the same, and there are
 * fewer on larger allocations: each costs a scan of the links.
 */
#include "config.h"

#include <stdlib.h>

#include "placement/placement_int.h"

#define SPREAD_RANKS (1ul << 20)
#define SPREAD_MAX 1024ul
#define SPREAD_MIN 128ul /* fewer rarely find one; at 16k GPUs time is short */

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

/* Sums of squares in another order differ by rounding: only a real fall counts. */
static bool spreader(const struct pl_worst *now, const struct pl_worst *was)
{
	return now->t < was->t || (now->t == was->t && now->sq < was->sq * (1 - 1e-9));
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
