/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The packer. The ranks form nested blocks: with the strategy tp,pp,dp a
 * block of the first factor is one tensor-parallel group, a block of the
 * first two a whole pipeline, and so on up to the world. A block is placed
 * whole inside the narrowest unit of the switch tree (node, NVLink domain,
 * leaf, spine) that still has room for it, the tightest such unit first;
 * only when no unit below has room is it split into its sub-blocks, which
 * are placed the same way inside the unit that held the whole. This is
 * first-fit-decreasing bin packing with divisible item sizes, done level by
 * level, so fragments of a fragmented allocation are used by the smallest
 * blocks and big blocks stay whole where the allocation allows it. Two
 * other fits (placement_int.h) keep consecutive blocks, such as the stages
 * of a pipeline split over a spine, together in one leaf or domain.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "placement/placement_int.h"

struct pl_unit {
	uint32_t parent;
	uint32_t first; /* children are units first .. first + count - 1 */
	uint32_t count;
	uint32_t rem; /* free GPUs below */
	/* [l] for l below this unit's level: most free GPUs in one level-l unit below */
	uint32_t maxrem[PL_SUB_LEVELS];
	uint32_t n_max[PL_SUB_LEVELS]; /* children that hold maxrem[l] */
	uint32_t node; /* level 0: allocated node index */
	uint32_t cursor; /* children before it are full */
	uint8_t level;
};

struct pl_tree {
	struct pl_unit *tmpl; /* as built: everything free */
	struct pl_unit *u; /* during a packing */
	size_t n;
	unsigned gpn;
	const struct pl_strategy *s;
	unsigned long g[PL_MAX_FACTORS + 1]; /* block size of the first f factors */
	uint32_t *rank_node;
	uint16_t *rank_gpu;
};

struct sort_key {
	uint32_t unit[PL_SUB_LEVELS];
};

static int key_cmp(const void *a, const void *b)
{
	const struct sort_key *x = a, *y = b;

	for (int l = PL_SUB_LEVELS - 1; l >= 0; l--) {
		if (x->unit[l] != y->unit[l])
			return x->unit[l] < y->unit[l] ? -1 : 1;
	}
	return 0;
}

/* Free GPUs of one level-l unit below u: u itself at its own level. */
static uint32_t val(const struct pl_unit *u, unsigned l)
{
	return l == u->level ? u->rem : u->maxrem[l];
}

static void link_units(struct pl_tree *t, const struct sort_key *keys, size_t n_kept,
		       const uint32_t *off)
{
	uint32_t cur[PHX_LEVEL_COUNT] = { 0 }, used[PHX_LEVEL_COUNT] = { 0 };

	t->tmpl[0].level = PHX_LEVEL_CORE;
	t->tmpl[0].parent = PL_NONE;
	for (size_t k = 0; k < n_kept; k++) {
		for (int l = PL_SUB_LEVELS - 1; l >= 0; l--) {
			struct pl_unit *up;
			uint32_t id;

			if (l && k && keys[k].unit[l] == keys[k - 1].unit[l])
				continue;
			id = off[l] + used[l]++;
			up = &t->tmpl[cur[l + 1]];
			if (up->count++ == 0) {
				up->first = id;
				up->cursor = id;
			}
			t->tmpl[id].parent = cur[l + 1];
			t->tmpl[id].level = (uint8_t)l;
			cur[l] = id;
			if (l == 0) {
				t->tmpl[id].node = keys[k].unit[0];
				t->tmpl[id].rem = t->gpn;
			}
		}
	}
}

/* Room and per-level maxima, from the nodes up. */
static void sum_up(struct pl_tree *t, const uint32_t *off)
{
	for (int l = 0; l < PL_SUB_LEVELS; l++) {
		uint32_t end = l ? off[l - 1] : (uint32_t)t->n;

		for (uint32_t i = off[l]; i < end; i++) {
			struct pl_unit *c = &t->tmpl[i], *up = &t->tmpl[c->parent];

			up->rem += c->rem;
			for (int m = 0; m <= l; m++) {
				if (val(c, (unsigned)m) > up->maxrem[m]) {
					up->maxrem[m] = val(c, (unsigned)m);
					up->n_max[m] = 0;
				}
				up->n_max[m] += val(c, (unsigned)m) == up->maxrem[m];
			}
		}
	}
}

int phx_pl_tree_build(const struct pl_alloc *a, struct pl_tree **out)
{
	struct pl_tree *t = calloc(1, sizeof(*t));
	struct sort_key *keys = calloc(a->n_nodes + 1, sizeof(*keys));
	uint32_t count[PL_SUB_LEVELS] = { 0 }, off[PHX_LEVEL_COUNT];
	size_t n_kept = 0;

	if (!t || !keys)
		goto fail;
	for (size_t i = 0; i < a->n_nodes; i++) {
		if (!a->spare[i])
			memcpy(keys[n_kept++].unit, a->unit[i], sizeof(keys[0].unit));
	}
	qsort(keys, n_kept, sizeof(*keys), key_cmp);
	for (size_t k = 0; k < n_kept; k++) {
		for (int l = 0; l < PL_SUB_LEVELS; l++)
			count[l] += !l || !k || keys[k].unit[l] != keys[k - 1].unit[l];
	}
	/* Root first, then spines, leaves, domains and nodes. */
	off[PHX_LEVEL_CORE] = 0;
	for (int l = PL_SUB_LEVELS - 1; l >= 0; l--)
		off[l] = off[l + 1] + (l == PL_SUB_LEVELS - 1 ? 1 : count[l + 1]);
	t->n = off[0] + count[0];
	t->gpn = a->gpn;
	t->tmpl = calloc(t->n, sizeof(*t->tmpl));
	t->u = calloc(t->n, sizeof(*t->u));
	if (!t->tmpl || !t->u)
		goto fail;
	link_units(t, keys, n_kept, off);
	sum_up(t, off);
	free(keys);
	*out = t;
	return 0;
fail:
	free(keys);
	phx_pl_tree_free(t);
	return -1;
}

void phx_pl_tree_free(struct pl_tree *t)
{
	if (!t)
		return;
	free(t->tmpl);
	free(t->u);
	free(t);
}

/*
 * The child to descend into with block j, or PL_NONE to split it here:
 * the narrowest home first, then the tightest fit (PL_FIT_FIRST: none),
 * then index. PL_FIT_IN_ORDER above the leaves: the first child with room.
 */
static uint32_t pick(struct pl_tree *t, uint32_t u, unsigned j)
{
	struct pl_unit *p = &t->u[u];
	unsigned long size = t->g[j];
	uint32_t best = PL_NONE, best_depth = 0, best_rem = 0;

	/* Free room only shrinks: full children stay full. */
	while (p->cursor < p->first + p->count && !t->u[p->cursor].rem)
		p->cursor++;
	for (uint32_t c = p->cursor; c < p->first + p->count; c++) {
		const struct pl_unit *k = &t->u[c];
		uint32_t depth = k->level;

		if (k->rem < size)
			continue;
		if (t->s->fit == PL_FIT_IN_ORDER && p->level > PHX_LEVEL_LEAF)
			return c;
		for (unsigned l = 0; l < k->level; l++) {
			if (k->maxrem[l] >= size) {
				depth = l;
				break;
			}
		}
		if (best == PL_NONE || depth < best_depth ||
		    (depth == best_depth && t->s->fit != PL_FIT_FIRST && k->rem < best_rem)) {
			best = c;
			best_depth = depth;
			best_rem = k->rem;
			if (!depth && k->rem == size)
				break; /* nothing can fit better */
		}
	}
	return best;
}

static void recompute(struct pl_tree *t, struct pl_unit *p, unsigned l)
{
	uint32_t m = 0, n = 0;

	for (uint32_t c = p->first; c < p->first + p->count; c++) {
		if (val(&t->u[c], l) > m) {
			m = val(&t->u[c], l);
			n = 0;
		}
		n += val(&t->u[c], l) == m;
	}
	p->maxrem[l] = m;
	p->n_max[l] = n;
}

/* Takes k GPUs of node unit n; keeps every maximum above it exact. */
static void consume(struct pl_tree *t, uint32_t n, uint32_t k)
{
	uint32_t before[PHX_LEVEL_COUNT], after[PHX_LEVEL_COUNT];
	struct pl_unit *c = &t->u[n];

	before[0] = c->rem;
	c->rem -= k;
	after[0] = c->rem;
	while (c->parent != PL_NONE) {
		struct pl_unit *p = &t->u[c->parent];

		/* A maximum only drops when the last child that held it drops. */
		for (unsigned l = 0; l <= c->level; l++) {
			uint32_t was = p->maxrem[l];

			if (after[l] < before[l] && before[l] == was && !--p->n_max[l])
				recompute(t, p, l);
			before[l] = was;
			after[l] = p->maxrem[l];
		}
		before[p->level] = p->rem;
		p->rem -= k;
		after[p->level] = p->rem;
		c = p;
	}
}

/* Ranks of the block go to the next free GPUs of the node, in block order. */
static void assign(struct pl_tree *t, uint32_t u, unsigned long base, unsigned j)
{
	const struct pl_strategy *s = t->s;
	struct pl_unit *n = &t->u[u];
	unsigned long digit[PL_MAX_FACTORS] = { 0 }, rank = base;
	uint16_t gpu = (uint16_t)(t->gpn - n->rem);

	for (unsigned long i = 0; i < t->g[j]; i++) {
		t->rank_node[rank] = n->node;
		t->rank_gpu[rank] = gpu++;
		for (unsigned f = 0; f < j; f++) {
			if (++digit[f] < s->size[f]) {
				rank += s->stride[f];
				break;
			}
			rank -= (s->size[f] - 1) * s->stride[f];
			digit[f] = 0;
		}
	}
	consume(t, u, (uint32_t)t->g[j]);
}

/* Block j at base goes somewhere below unit u, which has room for it. */
static void place(struct pl_tree *t, uint32_t u, unsigned long base, unsigned j)
{
	for (;;) {
		uint32_t c;

		if (t->u[u].level == PHX_LEVEL_NODE) {
			assign(t, u, base, j);
			return;
		}
		c = pick(t, u, j);
		if (c == PL_NONE)
			break;
		u = c;
	}
	/* j > 0 here: a single rank always fits a child of a unit with room. */
	for (unsigned long i = 0; i < t->s->size[j - 1]; i++)
		place(t, u, base + i * t->s->stride[j - 1], j - 1);
}

void phx_pl_pack(struct pl_tree *t, const struct pl_strategy *s, uint32_t *rank_node,
		 uint16_t *rank_gpu)
{
	memcpy(t->u, t->tmpl, t->n * sizeof(*t->u));
	t->s = s;
	t->rank_node = rank_node;
	t->rank_gpu = rank_gpu;
	t->g[0] = 1;
	for (unsigned f = 0; f < s->n; f++)
		t->g[f + 1] = t->g[f] * s->size[f];
	place(t, 0, 0, s->n);
}
