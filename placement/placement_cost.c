/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cost model. A collective group (tp, cp, ep, dp) moves traffic[d] MiB
 * per member per step and is as slow as the widest level it spans, so it
 * costs members * traffic * weight[level]; a pipeline is a chain, each pair
 * of neighbouring stages costs traffic[pp] * weight[level of the pair].
 * weight[level] is ns per MiB at that level's bandwidth. Cross-leaf traffic
 * counts what the leaf uplinks carry: a group spread over k > 1 leaves is
 * a ring with k edges between leaves, a pipeline hop between leaves is one.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "placement/placement_int.h"

struct pricing {
	const struct pl_alloc *a;
	const uint32_t *rank_node;
	uint32_t *stamp; /* per leaf: the last group that counted it */
	uint32_t group;
	struct phx_plan_cost *c;
};

/* Widest level between two nodes, starting the search at level from. */
static unsigned span(const struct pl_alloc *a, uint32_t n0, uint32_t n1, unsigned from)
{
	while (from < PL_SUB_LEVELS && a->unit[n0][from] != a->unit[n1][from])
		from++;
	return from;
}

static void price_group(struct pricing *pr, enum phx_dim d, unsigned long r0, unsigned long stride,
			unsigned long size)
{
	const struct pl_alloc *a = pr->a;
	uint32_t n0 = pr->rank_node[r0];
	unsigned level = PHX_LEVEL_NODE;
	uint64_t leaves = 0;

	pr->group++;
	for (unsigned long i = 0; i < size; i++) {
		uint32_t n = pr->rank_node[r0 + i * stride];
		uint32_t leaf = a->unit[n][PHX_LEVEL_LEAF];

		level = span(a, n0, n, level);
		if (pr->stamp[leaf] != pr->group) {
			pr->stamp[leaf] = pr->group;
			leaves++;
		}
	}
	pr->c->groups[d][level]++;
	pr->c->by_dim[d] =
		phx_sat_add(pr->c->by_dim[d], phx_sat_mul(a->traffic[d] * size, a->weight[level]));
	if (leaves > 1)
		pr->c->cross_leaf_mib = phx_sat_add(pr->c->cross_leaf_mib, a->traffic[d] * leaves);
}

static void price_collective(struct pricing *pr, enum phx_dim d)
{
	const struct phx_layout *l = pr->a->layout;
	unsigned long stride = phx_layout_stride(l, d), size = l->size[d];

	for (unsigned long hi = 0; hi < pr->a->world; hi += stride * size) {
		for (unsigned long lo = 0; lo < stride; lo++)
			price_group(pr, d, hi + lo, stride, size);
	}
}

static void price_pipeline(struct pricing *pr)
{
	const struct pl_alloc *a = pr->a;
	unsigned long stride = phx_layout_stride(a->layout, PHX_DIM_PP);
	unsigned long stages = a->layout->size[PHX_DIM_PP];
	uint64_t mib = a->traffic[PHX_DIM_PP];
	struct phx_plan_cost *c = pr->c;

	for (unsigned long hi = 0; hi < a->world; hi += stride * stages) {
		for (unsigned long r = hi; r < hi + (stages - 1) * stride; r++) {
			uint32_t n0 = pr->rank_node[r], n1 = pr->rank_node[r + stride];
			unsigned level = span(a, n0, n1, PHX_LEVEL_NODE);

			c->groups[PHX_DIM_PP][level]++;
			c->by_dim[PHX_DIM_PP] = phx_sat_add(c->by_dim[PHX_DIM_PP],
							    phx_sat_mul(mib, a->weight[level]));
			if (level > PHX_LEVEL_LEAF)
				c->cross_leaf_mib = phx_sat_add(c->cross_leaf_mib, mib);
		}
	}
}

int phx_pl_cost(const struct pl_alloc *a, const uint32_t *rank_node, struct phx_plan_cost *c)
{
	struct pricing pr = { .a = a, .rank_node = rank_node, .c = c };

	memset(c, 0, sizeof(*c));
	pr.stamp = calloc(a->n_units[PHX_LEVEL_LEAF] + 1, sizeof(*pr.stamp));
	if (!pr.stamp)
		return -1;
	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		if (a->layout->size[d] < 2)
			continue;
		if (d == PHX_DIM_PP)
			price_pipeline(&pr);
		else
			price_collective(&pr, (enum phx_dim)d);
	}
	for (int d = 0; d < PHX_DIM_COUNT; d++)
		c->total = phx_sat_add(c->total, c->by_dim[d]);
	free(pr.stamp);
	return 0;
}
