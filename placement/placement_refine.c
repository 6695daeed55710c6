/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Refinement of a packed map by node swaps. The packer keeps every block it
 * can whole and splits the rest over the fragments that are left (a
 * domain's last nodes, a leaf's last nodes), and fills units with blocks in
 * nesting order; which block ends up beside which is chance, so pipeline
 * neighbours often land in different domains or leaves. For every pipeline
 * hop that leaves its NVLink domain or leaf, the far node's ranks trade
 * places with those of a node of the near node's domain, then leaf, that
 * also strays (has a pipeline neighbour outside that unit); nodes holding
 * part of a group that the swap would split are not tried. When the far
 * node is part of such a group (an expert-parallel block whole in its
 * domain), the whole block trades places with a block of the same kind in
 * the near node's domain or leaf, node for node, if counting pipeline hops
 * says the trade brings more inside than it takes out. A swap is kept when
 * the modelled cost strictly drops. Prices are exact: pipeline hops are
 * priced again, and every collective group keeps, per level, how many
 * members share its first rank's unit, so a swap updates it in constant
 * time. Tries are bounded per node and made in a fixed order, so the result
 * is as deterministic as the packing and the cost of the plan never rises.
 */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement_int.h"

/* Beyond this many GPUs per node the swap bookkeeping is not worth it. */
#define MAX_GPN 16
/* Tries per node over all passes: bounds the time on any input. */
#define TRIES_PER_NODE 48
#define PASSES 2

/* A rank's pipeline hops: to the stage before it, to the stage after it. */
#define HOP_BACK 1u
#define HOP_ON 2u

struct touch {
	unsigned dim; /* PHX_DIM_PP: a hop from rank base to base + stride */
	unsigned long base;
	uint32_t on[2]; /* collectives: members on the two nodes swapped */
	uint32_t cnt[PL_SUB_LEVELS]; /* collectives: the counts after the swap */
};

/*
 * Per collective group g and level l below the core: how many members
 * share the level-l unit of the group's first rank. The group spans the
 * lowest level where that is all of them; a swap updates it in constant
 * time unless it moves the first rank.
 */
struct counts {
	uint32_t (*cnt)[PL_SUB_LEVELS];
	uint8_t *level; /* what cnt says, kept with it */
	uint32_t *of_rank; /* per rank: its group */
	uint32_t *base; /* per rank: its group's first rank */
	unsigned long n_groups;
};

struct refiner {
	const struct pl_alloc *a;
	uint32_t *rank_node;
	uint32_t *first; /* per node: its ranks are rank_of[first[n] .. first[n+1]) */
	unsigned long *rank_of;
	uint8_t *sides; /* per entry of rank_of: HOP_BACK, HOP_ON, the hops its rank has */
	uint32_t *slot; /* per node: which rank list it holds now */
	uint32_t *members[2]; /* nodes per domain unit, then per leaf */
	uint32_t *start[2];
	unsigned long stride[PHX_DIM_COUNT];
	uint64_t price[PHX_DIM_COUNT][PHX_LEVEL_COUNT]; /* set_prices() */
	struct counts groups[PHX_DIM_COUNT];
	/* Per dimension: a node's ranks touch at most 2 hops or 1 group each. */
	struct touch touched[PHX_DIM_COUNT][4 * MAX_GPN];
	size_t n_touched[PHX_DIM_COUNT];
	uint32_t *tried[2]; /* per node: 1 + the domain, leaf its block was last pulled to */
	/* Nodes whose neighbourhood changed: the next pass looks at them only. */
	uint8_t *dirty, *next;
	unsigned long budget;
	long swaps;
};

static unsigned span(const struct pl_alloc *a, uint32_t n0, uint32_t n1)
{
	unsigned l = PHX_LEVEL_NODE;

	while (l < PL_SUB_LEVELS && a->unit[n0][l] != a->unit[n1][l])
		l++;
	return l;
}

static void count_group(const struct refiner *rf, unsigned d, unsigned long base, uint32_t *cnt)
{
	const struct pl_alloc *a = rf->a;
	unsigned long st = rf->stride[d], size = a->layout->size[d];
	uint32_t n0 = rf->rank_node[base];

	memset(cnt, 0, PL_SUB_LEVELS * sizeof(*cnt));
	for (unsigned long i = 0; i < size; i++) {
		uint32_t n = rf->rank_node[base + i * st];

		for (unsigned l = 0; l < PL_SUB_LEVELS; l++)
			cnt[l] += a->unit[n][l] == a->unit[n0][l];
	}
}

static unsigned level_of(const struct pl_alloc *a, unsigned d, const uint32_t *cnt)
{
	unsigned level = 0;

	while (level < PL_SUB_LEVELS && cnt[level] != a->layout->size[d])
		level++;
	return level;
}

/* What a group of each dimension, or a pipeline hop, costs at each level it spans. */
static void set_prices(struct refiner *rf)
{
	const struct pl_alloc *a = rf->a;

	for (unsigned d = 0; d < PHX_DIM_COUNT; d++) {
		uint64_t per = d == PHX_DIM_PP ? a->traffic[d] : a->traffic[d] * a->layout->size[d];

		for (unsigned l = 0; l < PHX_LEVEL_COUNT; l++)
			rf->price[d][l] = phx_sat_mul(per, a->weight[l]);
	}
}

static uint64_t hop_cost(const struct refiner *rf, unsigned long r)
{
	return rf->price[PHX_DIM_PP]
			[span(rf->a, rf->rank_node[r], rf->rank_node[r + rf->stride[PHX_DIM_PP]])];
}

static struct touch *touch(struct refiner *rf, unsigned dim, unsigned long base)
{
	struct touch *t;

	for (size_t i = 0; i < rf->n_touched[dim]; i++) {
		if (rf->touched[dim][i].base == base)
			return &rf->touched[dim][i];
	}
	t = &rf->touched[dim][rf->n_touched[dim]++];
	memset(t, 0, sizeof(*t));
	t->dim = dim;
	t->base = base;
	return t;
}

/* Every group and hop with a rank on node n (side 0 or 1 of the swap). */
static void touch_node(struct refiner *rf, uint32_t n, int side)
{
	uint32_t s = rf->slot[n];

	for (uint32_t k = rf->first[s]; k < rf->first[s + 1]; k++) {
		unsigned long r = rf->rank_of[k];

		for (unsigned d = 0; d < PHX_DIM_COUNT; d++) {
			if (rf->groups[d].base)
				touch(rf, d, rf->groups[d].base[r])->on[side]++;
		}
		if (rf->sides[k] & HOP_BACK)
			touch(rf, PHX_DIM_PP, r - rf->stride[PHX_DIM_PP]);
		if (rf->sides[k] & HOP_ON)
			touch(rf, PHX_DIM_PP, r);
	}
}

/* The level rank r's dim-d group spans, as its counts say. */
static unsigned group_level(const struct refiner *rf, unsigned d, unsigned long r)
{
	return rf->groups[d].level[rf->groups[d].of_rank[r]];
}

static uint64_t price_before(const struct refiner *rf)
{
	uint64_t sum = 0;

	for (unsigned d = 0; d < PHX_DIM_COUNT; d++) {
		for (size_t i = 0; i < rf->n_touched[d]; i++) {
			const struct touch *t = &rf->touched[d][i];

			if (d == PHX_DIM_PP)
				sum = phx_sat_add(sum, hop_cost(rf, t->base));
			else
				sum = phx_sat_add(sum, rf->price[d][group_level(rf, d, t->base)]);
		}
	}
	return sum;
}

/* A touched group's counts after nodes x and y traded their ranks. */
static void recount(struct refiner *rf, struct touch *t, uint32_t x, uint32_t y)
{
	const struct pl_alloc *a = rf->a;
	uint32_t n0 = rf->rank_node[t->base];
	const uint32_t *old = rf->groups[t->dim].cnt[rf->groups[t->dim].of_rank[t->base]];

	if (n0 == x || n0 == y) {
		count_group(rf, t->dim, t->base, t->cnt);
		return;
	}
	for (unsigned l = 0; l < PL_SUB_LEVELS; l++) {
		uint32_t u = a->unit[n0][l];
		bool in_x = a->unit[x][l] == u, in_y = a->unit[y][l] == u;

		/* on[0] members moved from x to y, on[1] from y to x. */
		t->cnt[l] = old[l] - t->on[0] * in_x - t->on[1] * in_y + t->on[0] * in_y +
			    t->on[1] * in_x;
	}
}

static uint64_t price_after(struct refiner *rf, uint32_t x, uint32_t y)
{
	uint64_t sum = 0;

	for (unsigned d = 0; d < PHX_DIM_COUNT; d++) {
		for (size_t i = 0; i < rf->n_touched[d]; i++) {
			struct touch *t = &rf->touched[d][i];

			if (d == PHX_DIM_PP) {
				sum = phx_sat_add(sum, hop_cost(rf, t->base));
				continue;
			}
			recount(rf, t, x, y);
			sum = phx_sat_add(sum, rf->price[d][level_of(rf->a, d, t->cnt)]);
		}
	}
	return sum;
}

static void exchange(struct refiner *rf, uint32_t x, uint32_t y)
{
	uint32_t s = rf->slot[x];

	rf->slot[x] = rf->slot[y];
	rf->slot[y] = s;
	for (uint32_t k = rf->first[rf->slot[x]]; k < rf->first[rf->slot[x] + 1]; k++)
		rf->rank_node[rf->rank_of[k]] = x;
	for (uint32_t k = rf->first[rf->slot[y]]; k < rf->first[rf->slot[y] + 1]; k++)
		rf->rank_node[rf->rank_of[k]] = y;
}

/* The touched groups' counts after the swap become theirs. */
static void commit(struct refiner *rf)
{
	for (unsigned d = 0; d < PHX_DIM_COUNT; d++) {
		struct counts *g = &rf->groups[d];

		for (size_t i = 0; d != PHX_DIM_PP && i < rf->n_touched[d]; i++) {
			const struct touch *t = &rf->touched[d][i];
			unsigned long id = g->of_rank[t->base];

			memcpy(g->cnt[id], t->cnt, sizeof(t->cnt));
			g->level[id] = (uint8_t)level_of(rf->a, d, t->cnt);
		}
	}
}

/* Trades the ranks of nodes x and y; returns after - before, the cost's change. */
static __int128 apply(struct refiner *rf, uint32_t x, uint32_t y)
{
	uint64_t before, after;

	memset(rf->n_touched, 0, sizeof(rf->n_touched));
	touch_node(rf, x, 0);
	touch_node(rf, y, 1);
	before = price_before(rf);
	exchange(rf, x, y);
	after = price_after(rf, x, y);
	commit(rf);
	return (__int128)after - (__int128)before;
}

/* Node x and the nodes of its ranks' pipeline neighbours need another look. */
static void mark(struct refiner *rf, uint32_t x)
{
	unsigned long st = rf->stride[PHX_DIM_PP];
	uint32_t s = rf->slot[x];

	rf->next[x] = 1;
	for (uint32_t k = rf->first[s]; k < rf->first[s + 1]; k++) {
		unsigned long r = rf->rank_of[k];

		if (rf->sides[k] & HOP_BACK)
			rf->next[rf->rank_node[r - st]] = 1;
		if (rf->sides[k] & HOP_ON)
			rf->next[rf->rank_node[r + st]] = 1;
	}
}

/* Swaps the ranks of nodes x and y when that lowers the cost. */
static bool try_swap(struct refiner *rf, uint32_t x, uint32_t y)
{
	uint64_t before, after;

	if (!rf->budget)
		return false;
	rf->budget--;
	memset(rf->n_touched, 0, sizeof(rf->n_touched));
	touch_node(rf, x, 0);
	touch_node(rf, y, 1);
	before = price_before(rf);
	exchange(rf, x, y);
	after = price_after(rf, x, y);
	if (after >= before) {
		exchange(rf, x, y);
		return false;
	}
	commit(rf);
	rf->swaps++;
	mark(rf, x);
	mark(rf, y);
	return true;
}

/*
 * Swaps blocks: the ranks of xs[i] and ys[i] for every i < k, kept when
 * the cost drops as a whole. One by one, each priced exactly; undone in
 * reverse order otherwise.
 */
static bool try_blocks(struct refiner *rf, const uint32_t *xs, const uint32_t *ys, size_t k)
{
	__int128 delta = 0;

	if (rf->budget < k)
		return false;
	rf->budget -= k;
	for (size_t i = 0; i < k; i++)
		delta += apply(rf, xs[i], ys[i]);
	if (delta < 0) {
		rf->swaps += (long)k;
		for (size_t i = 0; i < k; i++) {
			mark(rf, xs[i]);
			mark(rf, ys[i]);
		}
		return true;
	}
	for (size_t i = k; i-- > 0;)
		apply(rf, xs[i], ys[i]);
	return false;
}

static int count_all(struct refiner *rf)
{
	const struct pl_alloc *a = rf->a;

	for (unsigned d = 0; d < PHX_DIM_COUNT; d++) {
		unsigned long size = a->layout->size[d], st = rf->stride[d];
		struct counts *g = &rf->groups[d];

		if (d == PHX_DIM_PP || size < 2 || !a->traffic[d])
			continue;
		g->n_groups = a->world / size;
		g->cnt = calloc(g->n_groups, sizeof(*g->cnt));
		g->level = calloc(g->n_groups, sizeof(*g->level));
		g->of_rank = calloc(a->world, sizeof(*g->of_rank));
		g->base = calloc(a->world, sizeof(*g->base));
		if (!g->cnt || !g->level || !g->of_rank || !g->base)
			return -1;
		/* Groups numbered in the order of their first ranks. */
		for (unsigned long hi = 0, id = 0; hi < a->world; hi += st * size) {
			for (unsigned long lo = 0; lo < st; lo++, id++) {
				for (unsigned long i = 0; i < size; i++) {
					g->base[hi + lo + i * st] = (uint32_t)(hi + lo);
					g->of_rank[hi + lo + i * st] = (uint32_t)id;
				}
				count_group(rf, d, hi + lo, g->cnt[id]);
				g->level[id] = (uint8_t)level_of(a, d, g->cnt[id]);
			}
		}
	}
	return 0;
}

/*
 * Whether node n holds part of a group that lies whole in a domain, leaf
 * or spine no wider than level, without lying on n alone: moving n's ranks
 * away would split it. Such swaps are not tried.
 */
static bool anchored(const struct refiner *rf, uint32_t n, unsigned level)
{
	const struct pl_alloc *a = rf->a;
	uint32_t s = rf->slot[n];

	for (uint32_t k = rf->first[s]; k < rf->first[s + 1]; k++) {
		for (unsigned d = 0; d < PHX_DIM_COUNT; d++) {
			unsigned l;

			if (d == PHX_DIM_PP || a->layout->size[d] < 2 || !a->traffic[d])
				continue;
			l = group_level(rf, d, rf->rank_of[k]);
			if (l >= 1 && l <= level)
				return true;
		}
	}
	return false;
}

/* Whether a pipeline neighbour of a rank on node n lies beyond n's unit at level. */
static bool strays(const struct refiner *rf, uint32_t n, unsigned level)
{
	const struct pl_alloc *a = rf->a;
	unsigned long st = rf->stride[PHX_DIM_PP];
	uint32_t s = rf->slot[n];

	for (uint32_t k = rf->first[s]; k < rf->first[s + 1]; k++) {
		unsigned long r = rf->rank_of[k];

		if ((rf->sides[k] & HOP_BACK && span(a, n, rf->rank_node[r - st]) > level) ||
		    (rf->sides[k] & HOP_ON && span(a, n, rf->rank_node[r + st]) > level))
			return true;
	}
	return false;
}

/*
 * The nodes holding the collective group of node n's first rank that
 * lies whole in a domain, leaf or spine no wider than level (the
 * narrowest such), in member order; their count, 0 when there is none,
 * the group spans more than MAX_BLOCK nodes, or a node holds two members.
 */
#define MAX_BLOCK 16

static size_t block_of(const struct refiner *rf, uint32_t n, unsigned level, unsigned *dim,
		       uint32_t *nodes)
{
	const struct pl_alloc *a = rf->a;
	unsigned long r = rf->rank_of[rf->first[rf->slot[n]]], st, size, base;
	unsigned best = PL_SUB_LEVELS;

	if (rf->first[rf->slot[n]] == rf->first[rf->slot[n] + 1])
		return 0;
	for (unsigned d = 0; d < PHX_DIM_COUNT; d++) {
		unsigned l;

		if (d == PHX_DIM_PP || a->layout->size[d] < 2 || !a->traffic[d])
			continue;
		l = group_level(rf, d, r);
		if (l >= 1 && l <= level && l < best) {
			best = l;
			*dim = d;
		}
	}
	if (best == PL_SUB_LEVELS)
		return 0;
	st = rf->stride[*dim];
	size = a->layout->size[*dim];
	if (size > MAX_BLOCK)
		return 0;
	base = rf->groups[*dim].base[r];
	for (unsigned long i = 0; i < size; i++) {
		nodes[i] = rf->rank_node[base + i * st];
		for (unsigned long j = 0; j < i; j++) {
			if (nodes[j] == nodes[i])
				return 0;
		}
	}
	return size;
}

/* Whether node c holds the first member of its first rank's dim group. */
static bool leads(const struct refiner *rf, uint32_t c, unsigned dim)
{
	if (rf->first[rf->slot[c]] == rf->first[rf->slot[c] + 1])
		return false;
	return rf->rank_node[rf->groups[dim].base[rf->rank_of[rf->first[rf->slot[c]]]]] == c;
}

static bool shares(const uint32_t *x, const uint32_t *y, size_t k)
{
	for (size_t i = 0; i < k; i++) {
		for (size_t j = 0; j < k; j++) {
			if (x[i] == y[j])
				return true;
		}
	}
	return false;
}

/*
 * Pipeline hops from the ranks of nodes[0 .. k) to ranks in unit u at
 * level, less those to ranks in unit v.
 */
static long hops_gain(const struct refiner *rf, const uint32_t *nodes, size_t k, unsigned level,
		      uint32_t u, uint32_t v)
{
	const struct pl_alloc *a = rf->a;
	unsigned long st = rf->stride[PHX_DIM_PP];
	long gain = 0;

	for (size_t i = 0; i < k; i++) {
		uint32_t s = rf->slot[nodes[i]];

		for (uint32_t j = rf->first[s]; j < rf->first[s + 1]; j++) {
			unsigned long r = rf->rank_of[j];

			if (rf->sides[j] & HOP_BACK) {
				uint32_t w = a->unit[rf->rank_node[r - st]][level];

				gain += (w == u) - (w == v);
			}
			if (rf->sides[j] & HOP_ON) {
				uint32_t w = a->unit[rf->rank_node[r + st]][level];

				gain += (w == u) - (w == v);
			}
		}
	}
	return gain;
}

/*
 * b's ranks belong to a block (a group whole around b): the block trades
 * places with a block of the same kind whose nodes all lie in n's unit at
 * level, so the hop from n stays inside that unit. A pair is tried only
 * when, counting pipeline hops into n's unit and into b's, the trade
 * brings more inside than it takes out.
 */
static bool pull_block(struct refiner *rf, uint32_t n, uint32_t b, unsigned k, unsigned level)
{
	const struct pl_alloc *a = rf->a;
	uint32_t xs[MAX_BLOCK], ys[MAX_BLOCK], u = a->unit[n][level];
	unsigned far = span(a, n, b), dim, dim_c;
	uint32_t ub = a->unit[b][level];
	long gain;
	size_t nb = block_of(rf, b, far - 1, &dim, xs), nc;

	if (!nb || rf->tried[k][xs[0]] == 1 + u)
		return false;
	/* The other nodes of n's block would pull the same block here again. */
	rf->tried[k][xs[0]] = 1 + u;
	gain = hops_gain(rf, xs, nb, level, u, ub);
	for (uint32_t i = rf->start[k][u]; i < rf->start[k][u + 1]; i++) {
		uint32_t c = rf->members[k][i];
		bool inside = true;

		if (c == n || c == b || !leads(rf, c, dim))
			continue;
		nc = block_of(rf, c, far - 1, &dim_c, ys);
		/* Each block is met once, through its first node. */
		if (nc != nb || dim_c != dim || ys[0] != c || shares(xs, ys, nb))
			continue;
		for (size_t j = 0; j < nc && inside; j++)
			inside = a->unit[ys[j]][level] == u && ys[j] != n;
		if (inside && gain > hops_gain(rf, ys, nc, level, u, ub) &&
		    try_blocks(rf, xs, ys, nb))
			return true;
	}
	return false;
}

/*
 * Brings the far end b of a hop from node n next to it: b's ranks trade
 * places with those of a node of n's domain, then of n's leaf; when b's
 * ranks are part of a block, the whole block moves.
 */
static bool pull(struct refiner *rf, uint32_t n, uint32_t b)
{
	const struct pl_alloc *a = rf->a;
	unsigned far = span(a, n, b);

	bool block = anchored(rf, b, far - 1);

	for (unsigned k = 0; k < 2; k++) {
		unsigned level = PHX_LEVEL_NVLINK + k;
		uint32_t u = a->unit[n][level];

		if (far <= level)
			return false;
		if (level == PHX_LEVEL_NVLINK && u >= a->n_units[1] - a->n_nodes)
			continue; /* no domain */
		if (block) {
			if (pull_block(rf, n, b, k, level))
				return true;
			continue;
		}
		for (uint32_t i = rf->start[k][u]; i < rf->start[k][u + 1]; i++) {
			uint32_t c = rf->members[k][i];

			if (c != n && c != b && strays(rf, c, level) && !anchored(rf, c, far - 1) &&
			    try_swap(rf, b, c))
				return true;
		}
	}
	return false;
}

static bool pass(struct refiner *rf)
{
	const struct pl_alloc *a = rf->a;
	unsigned long st = rf->stride[PHX_DIM_PP];
	bool moved = false;

	for (uint32_t n = 0; n < a->n_nodes; n++) {
		uint32_t seen[2 * MAX_GPN];
		size_t n_seen = 0;

		if (!rf->dirty[n])
			continue;
		for (uint32_t k = rf->first[rf->slot[n]]; k < rf->first[rf->slot[n] + 1]; k++) {
			unsigned long r = rf->rank_of[k];
			unsigned long nb[2] = { rf->sides[k] & HOP_BACK ? r - st : r,
						rf->sides[k] & HOP_ON ? r + st : r };

			for (int j = 0; j < 2; j++) {
				uint32_t b = rf->rank_node[nb[j]];
				size_t i = 0;

				if (nb[j] == r || b == n)
					continue;
				/* Each neighbouring node once. */
				while (i < n_seen && seen[i] != b)
					i++;
				if (i < n_seen)
					continue;
				seen[n_seen++] = b;
				if (pull(rf, n, b))
					moved = true;
			}
		}
	}
	return moved;
}

/* Nodes of each domain (k = 0) and leaf (k = 1), in node order. */
static int group_nodes(struct refiner *rf)
{
	const struct pl_alloc *a = rf->a;

	for (unsigned k = 0; k < 2; k++) {
		unsigned level = PHX_LEVEL_NVLINK + k;
		uint32_t n_units = a->n_units[level];
		uint32_t *fill;

		rf->start[k] = calloc(n_units + 2, sizeof(uint32_t));
		rf->members[k] = calloc(a->n_nodes + 1, sizeof(uint32_t));
		fill = calloc(n_units + 1, sizeof(uint32_t));
		if (!rf->start[k] || !rf->members[k] || !fill) {
			free(fill);
			return -1;
		}
		for (size_t i = 0; i < a->n_nodes; i++) {
			if (!a->spare[i])
				rf->start[k][a->unit[i][level] + 1]++;
		}
		for (uint32_t u = 0; u < n_units; u++)
			rf->start[k][u + 1] += rf->start[k][u];
		for (size_t i = 0; i < a->n_nodes; i++) {
			uint32_t u = a->unit[i][level];

			if (!a->spare[i])
				rf->members[k][rf->start[k][u] + fill[u]++] = (uint32_t)i;
		}
		free(fill);
	}
	return 0;
}

static int index_ranks(struct refiner *rf)
{
	const struct pl_alloc *a = rf->a;
	unsigned long st = rf->stride[PHX_DIM_PP], P = a->layout->size[PHX_DIM_PP];
	uint32_t *fill = calloc(a->n_nodes + 1, sizeof(*fill));

	rf->first = calloc(a->n_nodes + 1, sizeof(*rf->first));
	rf->rank_of = calloc(a->world + 1, sizeof(*rf->rank_of));
	rf->sides = calloc(a->world + 1, sizeof(*rf->sides));
	rf->slot = calloc(a->n_nodes + 1, sizeof(*rf->slot));
	if (!fill || !rf->first || !rf->rank_of || !rf->sides || !rf->slot) {
		free(fill);
		return -1;
	}
	for (unsigned long r = 0; r < a->world; r++)
		rf->first[rf->rank_node[r] + 1]++;
	for (size_t i = 0; i < a->n_nodes; i++) {
		rf->first[i + 1] += rf->first[i];
		rf->slot[i] = (uint32_t)i;
	}
	for (unsigned long r = 0; r < a->world; r++) {
		uint32_t k = rf->first[rf->rank_node[r]] + fill[rf->rank_node[r]]++;
		unsigned long c = r / st % P;

		rf->rank_of[k] = r;
		rf->sides[k] = (c > 0 ? HOP_BACK : 0) | (c + 1 < P ? HOP_ON : 0);
	}
	free(fill);
	return 0;
}

long phx_pl_refine(const struct pl_alloc *a, uint32_t *rank_node)
{
	struct refiner rf = { .a = a, .rank_node = rank_node };
	long rc = -1;

	if (a->gpn > MAX_GPN || a->layout->size[PHX_DIM_PP] < 2 || !a->traffic[PHX_DIM_PP])
		return 0;
	for (unsigned d = 0; d < PHX_DIM_COUNT; d++)
		rf.stride[d] = phx_layout_stride(a->layout, (enum phx_dim)d);
	set_prices(&rf);
	rf.budget = (unsigned long)a->n_nodes * TRIES_PER_NODE;
	rf.tried[0] = calloc(a->n_nodes + 1, sizeof(*rf.tried[0]));
	rf.tried[1] = calloc(a->n_nodes + 1, sizeof(*rf.tried[1]));
	if (!rf.tried[0] || !rf.tried[1] || index_ranks(&rf) < 0 || group_nodes(&rf) < 0 ||
	    count_all(&rf) < 0)
		goto out;
	rf.dirty = malloc(a->n_nodes + 1);
	rf.next = calloc(a->n_nodes + 1, 1);
	if (!rf.dirty || !rf.next)
		goto out;
	memset(rf.dirty, 1, a->n_nodes + 1);
	for (int p = 0; p < PASSES && pass(&rf); p++) {
		uint8_t *t = rf.dirty;

		rf.dirty = rf.next;
		rf.next = t;
		memset(rf.next, 0, a->n_nodes + 1);
	}
	rc = rf.swaps;
out:
	free(rf.dirty);
	free(rf.next);
	free(rf.tried[0]);
	free(rf.tried[1]);
	free(rf.first);
	free(rf.rank_of);
	free(rf.sides);
	free(rf.slot);
	for (unsigned k = 0; k < 2; k++) {
		free(rf.members[k]);
		free(rf.start[k]);
	}
	for (unsigned d = 0; d < PHX_DIM_COUNT; d++) {
		free(rf.groups[d].cnt);
		free(rf.groups[d].level);
		free(rf.groups[d].of_rank);
		free(rf.groups[d].base);
	}
	return rc;
}
