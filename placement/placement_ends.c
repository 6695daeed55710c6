/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pipeline ends to the busiest links. A rank of a pipeline's first or last
 * stage sends one hop to its neighbouring stage, a middle one two, so a
 * fragment of the allocation (a leaf of one node, a leaf of one block)
 * holding middle stages sends a hop per rank more through its uplink than
 * it has to: the gap phalanx-plan(1)'s lower bound shows. Each round takes
 * the busiest link and, under it, a cell of middle-stage ranks (the ranks
 * of one tp x cp x ep block: one stage of one replica) on nodes of their
 * own, and trades those nodes, in rank order, with the nodes of an
 * end-stage cell of the same shape elsewhere (in the largest leaves first,
 * whose uplinks are shared by the most GPUs). A trade is kept when the
 * link model's step gets shorter, or as long with fewer links that long.
 * The rounds stop at the bound, or when the link model has been evaluated
 * as often as the allocation's size allows (a count, so every node plans
 * the same).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "placement/placement_int.h"

/* Trades tried: each costs a scan of the links, so fewer on larger allocations. */
#define EVAL_RANKS (1ul << 24)
#define EVALS_MAX 1024ul
#define PARTNERS 3 /* end-stage cells tried for one cell */

#define NO_CELL UINT64_MAX
#define MIXED_CELL (UINT64_MAX - 1)

struct ends {
	const struct pl_alloc *a;
	uint32_t *rank_node;
	struct pl_links *links;
	uint64_t *cell; /* per node: the cell of its ranks (its first rank), or NO/MIXED */
	unsigned long *first; /* per node: its lowest rank */
	unsigned *used; /* per node: ranks on it */
	bool *dirty; /* per cell: some of its ranks share a node with another cell's */
	bool *tried; /* per cell: no trade of it helped */
	uint32_t *order; /* nodes of clean cells, by cell then lowest rank */
	size_t n_order;
	unsigned long *leaf_gpus; /* per leaf unit */
	unsigned long evals, max_evals;
};

/* The cell of rank r: r with its tp, cp and ep coordinates set to 0. */
static uint64_t cell_of(const struct pl_alloc *a, unsigned long r)
{
	static const enum phx_dim inner[] = { PHX_DIM_TP, PHX_DIM_CP, PHX_DIM_EP };

	for (size_t i = 0; i < sizeof(inner) / sizeof(inner[0]); i++) {
		unsigned long st = phx_layout_stride(a->layout, inner[i]);

		r -= r / st % a->layout->size[inner[i]] * st;
	}
	return r;
}

static bool end_stage(const struct pl_alloc *a, uint64_t cell)
{
	unsigned long stages = a->layout->size[PHX_DIM_PP];
	unsigned long stage = cell / phx_layout_stride(a->layout, PHX_DIM_PP) % stages;

	return stage == 0 || stage + 1 == stages;
}

static int by_cell(const void *x, const void *y, void *ctx)
{
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
	const struct ends *e = ctx;

	if (e->cell[i] != e->cell[j])
		return e->cell[i] < e->cell[j] ? -1 : 1;
	return e->first[i] < e->first[j] ? -1 : e->first[i] > e->first[j];
}

static void classify(struct ends *e)
{
	const struct pl_alloc *a = e->a;

	for (size_t n = 0; n < a->n_nodes; n++) {
		e->cell[n] = NO_CELL;
		e->used[n] = 0;
	}
	memset(e->dirty, 0, a->world * sizeof(*e->dirty));
	for (unsigned long r = 0; r < a->world; r++) {
		uint32_t n = e->rank_node[r];
		uint64_t c = cell_of(a, r);

		if (!e->used[n]++) {
			e->cell[n] = c;
			e->first[n] = r;
		} else if (e->cell[n] != c) {
			e->cell[n] = MIXED_CELL;
		}
	}
	for (unsigned long r = 0; r < a->world; r++) {
		if (e->cell[e->rank_node[r]] == MIXED_CELL)
			e->dirty[cell_of(a, r)] = true;
	}
	e->n_order = 0;
	for (size_t n = 0; n < a->n_nodes; n++) {
		if (e->cell[n] < MIXED_CELL && !e->dirty[e->cell[n]])
			e->order[e->n_order++] = (uint32_t)n;
	}
	qsort_r(e->order, e->n_order, sizeof(*e->order), by_cell, e);
}

static bool under(const struct pl_alloc *a, const struct pl_worst *w, size_t n)
{
	switch (w->kind) {
	case PL_LINK_NIC:
		return n == w->where;
	case PL_LINK_LEAF:
		return a->unit[n][PHX_LEVEL_LEAF] == w->where;
	case PL_LINK_SPINE:
		return a->unit[n][PHX_LEVEL_SPINE] == w->where;
	default:
		return false;
	}
}

/* The run of order[] holding order[i]'s cell starts at *at and has *len nodes. */
static void run_of(const struct ends *e, size_t i, size_t *at, size_t *len)
{
	size_t j = i;

	while (i > 0 && e->cell[e->order[i - 1]] == e->cell[e->order[j]])
		i--;
	*at = i;
	while (j + 1 < e->n_order && e->cell[e->order[j + 1]] == e->cell[e->order[i]])
		j++;
	*len = j - i + 1;
}

/* Whether the run at y can take the place of the run at x: same shape, usable. */
static bool fits(const struct ends *e, const struct pl_worst *w, size_t x, size_t y, size_t len)
{
	const struct pl_alloc *a = e->a;

	if (y + len > e->n_order || !end_stage(a, e->cell[e->order[y]]) ||
	    (y + len < e->n_order && e->cell[e->order[y + len]] == e->cell[e->order[y]]))
		return false;
	for (size_t k = 0; k < len; k++) {
		uint32_t n = e->order[y + k];

		if (e->cell[n] != e->cell[e->order[y]] || e->used[n] != e->used[e->order[x + k]] ||
		    a->slow[n] || under(a, w, n))
			return false;
	}
	return true;
}

/* Whether node n shares a leaf with a neighbouring stage of cell c. */
static bool near_neighbour(const struct ends *e, uint64_t c, uint32_t n)
{
	const struct pl_alloc *a = e->a;
	unsigned long st = phx_layout_stride(a->layout, PHX_DIM_PP);
	unsigned long stage = c / st % a->layout->size[PHX_DIM_PP];
	uint32_t leaf = a->unit[n][PHX_LEVEL_LEAF];

	return (stage > 0 && a->unit[e->rank_node[c - st]][PHX_LEVEL_LEAF] == leaf) ||
	       (stage + 1 < a->layout->size[PHX_DIM_PP] &&
		a->unit[e->rank_node[c + st]][PHX_LEVEL_LEAF] == leaf);
}

/*
 * The next end-stage run for the run at x: first where x's neighbouring
 * stages are (the hop between them then stays in the leaf), then in the
 * largest leaves; n_order if none.
 */
static size_t partner(const struct ends *e, const struct pl_worst *w, size_t x, size_t len,
		      const bool *taken)
{
	const struct pl_alloc *a = e->a;
	uint64_t c = e->cell[e->order[x]];
	size_t best = e->n_order;
	bool best_near = false;

	for (size_t y = 0; y < e->n_order; y++) {
		uint32_t n = e->order[y];
		bool near;

		if ((y && e->cell[e->order[y - 1]] == e->cell[n]) || taken[y] ||
		    !fits(e, w, x, y, len))
			continue;
		near = near_neighbour(e, c, n);
		if (best == e->n_order || (near && !best_near) ||
		    (near == best_near &&
		     e->leaf_gpus[a->unit[n][PHX_LEVEL_LEAF]] >
			     e->leaf_gpus[a->unit[e->order[best]][PHX_LEVEL_LEAF]])) {
			best = y;
			best_near = near;
		}
	}
	return best;
}

static bool shorter(const struct pl_worst *now, const struct pl_worst *was)
{
	return now->t < was->t || (now->t == was->t && now->tied < was->tied);
}

/* 1: a trade of the run at x was kept, 0: none helped. */
static bool try_cell(struct ends *e, struct pl_worst *w, size_t x, size_t len, bool *taken)
{
	memset(taken, 0, e->n_order * sizeof(*taken));
	for (int k = 0; k < PARTNERS && e->evals < e->max_evals; k++) {
		size_t y = partner(e, w, x, len, taken);
		struct pl_worst now;

		if (y == e->n_order)
			break;
		taken[y] = true;
		phx_pl_links_trade(e->links, e->order + x, e->order + y, len);
		e->evals++;
		phx_pl_links_worst(e->links, &now);
		if (shorter(&now, w)) {
			*w = now;
			return true;
		}
		phx_pl_links_trade(e->links, e->order + x, e->order + y, len);
	}
	return false;
}

/* A middle-stage run with a node under the busiest link, not tried yet; n_order if none. */
static size_t pick(const struct ends *e, const struct pl_worst *w, size_t *len)
{
	const struct pl_alloc *a = e->a;

	for (size_t i = 0; i < e->n_order; i++) {
		uint32_t n = e->order[i];
		size_t at;
		bool usable = true;

		if (!under(a, w, n) || e->tried[e->cell[n]] || end_stage(a, e->cell[n]))
			continue;
		run_of(e, i, &at, len);
		for (size_t k = 0; k < *len; k++)
			usable = usable && !a->slow[e->order[at + k]];
		if (usable)
			return at;
	}
	return e->n_order;
}

static long rounds(struct ends *e, uint64_t bound_ns)
{
	bool *taken = calloc(e->a->n_nodes + 1, sizeof(*taken));
	struct pl_worst w;
	long trades = 0;
	bool moved = true; /* the map changed since classify() */

	if (!taken)
		return -1;
	phx_pl_links_worst(e->links, &w);
	while (e->evals < e->max_evals && (uint64_t)w.t > bound_ns) {
		size_t x, len;

		if (moved)
			classify(e);
		x = pick(e, &w, &len);
		if (x == e->n_order)
			break;
		moved = try_cell(e, &w, x, len, taken);
		if (moved)
			trades++;
		else
			e->tried[e->cell[e->order[x]]] = true;
	}
	free(taken);
	return trades;
}

long phx_pl_ends(const struct pl_alloc *a, uint32_t *rank_node, uint64_t bound_ns)
{
	struct ends e = { .a = a, .rank_node = rank_node };
	long trades = -1;

	if (a->layout->size[PHX_DIM_PP] < 3 || !a->traffic[PHX_DIM_PP])
		return 0; /* every stage an end */
	e.max_evals = EVAL_RANKS / a->world;
	e.max_evals = e.max_evals > EVALS_MAX ? EVALS_MAX : e.max_evals ? e.max_evals : 1;
	e.cell = calloc(a->n_nodes + 1, sizeof(*e.cell));
	e.first = calloc(a->n_nodes + 1, sizeof(*e.first));
	e.used = calloc(a->n_nodes + 1, sizeof(*e.used));
	e.order = calloc(a->n_nodes + 1, sizeof(*e.order));
	e.dirty = calloc(a->world, sizeof(*e.dirty));
	e.tried = calloc(a->world, sizeof(*e.tried));
	e.leaf_gpus = phx_pl_unit_gpus(a, PHX_LEVEL_LEAF);
	if (!e.cell || !e.first || !e.used || !e.order || !e.dirty || !e.tried || !e.leaf_gpus)
		goto out;
	e.links = phx_pl_links_open(a, rank_node);
	if (!e.links)
		goto out;
	trades = rounds(&e, bound_ns);
out:
	phx_pl_links_close(e.links);
	free(e.cell);
	free(e.first);
	free(e.used);
	free(e.order);
	free(e.dirty);
	free(e.tried);
	free(e.leaf_gpus);
	return trades;
}
