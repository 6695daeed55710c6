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
 * Where no middle stage under the busiest link has a trade that helps, a
 * cell there with little traffic to its ring and pipeline neighbours is
 * traded for one of those neighbours from outside (try_far()). The rounds
 * stop at the bound, or when the link model has been evaluated as often as
 * the allocation's size allows (a count, so every node plans the same).
 * Where they stop above the bound, the pipelines are laid out again over
 * the leaves (resequence()), or in tiles per spine (tile()), and the rounds
 * go on from there.
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
	bool *far_tried; /* per cell: no trade for its neighbours helped */
	uint32_t *order; /* nodes of clean cells, by cell then lowest rank */
	uint32_t *cell_at; /* per cell: where its nodes go in order */
	uint32_t *rank_cell; /* per rank: its cell */
	size_t n_order;
	unsigned long *leaf_gpus; /* per leaf unit */
	unsigned long evals, max_evals;
	bool by_spine; /* resequence() keeps each spine's cells */
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

/* The pipeline stage of a cell (or of any rank). */
static unsigned long stage_of(const struct pl_alloc *a, uint64_t cell)
{
	return cell / phx_layout_stride(a->layout, PHX_DIM_PP) % a->layout->size[PHX_DIM_PP];
}

static bool end_stage(const struct pl_alloc *a, uint64_t cell)
{
	unsigned long stage = stage_of(a, cell);

	return stage == 0 || stage + 1 == a->layout->size[PHX_DIM_PP];
}

static bool clean(const struct ends *e, uint32_t n)
{
	return e->cell[n] < MIXED_CELL && !e->dirty[e->cell[n]];
}

/* The nodes of clean cells by cell, then lowest rank: counted per cell, filled in rank order. */
static void order_clean(struct ends *e)
{
	const struct pl_alloc *a = e->a;
	uint32_t *at = e->cell_at;

	memset(at, 0, (a->world + 1) * sizeof(*at));
	for (size_t n = 0; n < a->n_nodes; n++) {
		if (clean(e, (uint32_t)n))
			at[e->cell[n] + 1]++;
	}
	for (unsigned long c = 0; c < a->world; c++)
		at[c + 1] += at[c];
	e->n_order = at[a->world];
	for (unsigned long r = 0; r < a->world; r++) {
		uint32_t n = e->rank_node[r];

		if (e->first[n] == r && clean(e, n))
			e->order[at[e->cell[n]]++] = n;
	}
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
		uint64_t c = e->rank_cell[r];

		if (!e->used[n]++) {
			e->cell[n] = c;
			e->first[n] = r;
		} else if (e->cell[n] != c) {
			e->cell[n] = MIXED_CELL;
		}
	}
	for (unsigned long r = 0; r < a->world; r++) {
		if (e->cell[e->rank_node[r]] == MIXED_CELL)
			e->dirty[e->rank_cell[r]] = true;
	}
	order_clean(e);
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

/* Whether the run at y can take the place of the run at x: same shape, usable, not under w. */
static bool fits(const struct ends *e, const struct pl_worst *w, size_t x, size_t y, size_t len)
{
	const struct pl_alloc *a = e->a;

	if (y + len > e->n_order ||
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
	unsigned long st = phx_layout_stride(a->layout, PHX_DIM_PP), stage = stage_of(a, c);
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
		    !end_stage(a, e->cell[n]) || !fits(e, w, x, y, len))
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

/* Whether a trade of x for y shortens the step below w; kept if so, undone if not. */
static bool trade(struct ends *e, struct pl_worst *w, size_t x, size_t y, size_t len)
{
	e->evals++;
	return phx_pl_links_trade_if(e->links, e->order + x, e->order + y, len, shorter, w);
}

/* 1: a trade of the run at x was kept, 0: none helped. */
static bool try_cell(struct ends *e, struct pl_worst *w, size_t x, size_t len, bool *taken)
{
	memset(taken, 0, e->n_order * sizeof(*taken));
	for (int k = 0; k < PARTNERS && e->evals < e->max_evals; k++) {
		size_t y = partner(e, w, x, len, taken);

		if (y == e->n_order)
			break;
		taken[y] = true;
		if (trade(e, w, x, y, len))
			return true;
	}
	return false;
}

/* Whether the run at x is usable: none of its nodes slow. */
static bool usable(const struct ends *e, size_t x, size_t len)
{
	for (size_t k = 0; k < len; k++) {
		if (e->a->slow[e->order[x + k]])
			return false;
	}
	return true;
}

/* A middle-stage run with a node under the busiest link, not tried yet; n_order if none. */
static size_t pick(const struct ends *e, const struct pl_worst *w, size_t *len)
{
	const struct pl_alloc *a = e->a;

	for (size_t i = 0; i < e->n_order; i++) {
		uint32_t n = e->order[i];
		size_t at;

		if (!under(a, w, n) || e->tried[e->cell[n]] || end_stage(a, e->cell[n]))
			continue;
		run_of(e, i, &at, len);
		if (usable(e, at, *len))
			return at;
	}
	return e->n_order;
}

/*
 * Trades for neighbours. A unit under the busiest link with no middle
 * stage a trade helps may still send more than it must: its cells' ring
 * (data-parallel) and pipeline neighbours sit elsewhere. Trading the cell
 * with the least traffic to neighbours in the unit for a cell outside with
 * the most (Kernighan and Lin's move) keeps twice the difference in.
 */
#define NEIGHBOURS 4

/* Cell c's data-parallel ring and pipeline neighbours, each with the KiB of an edge; how many. */
static unsigned neighbours(const struct pl_alloc *a, uint64_t c, uint64_t *nb, uint64_t *kib)
{
	static const enum phx_dim dims[] = { PHX_DIM_DP, PHX_DIM_PP };
	unsigned n = 0;

	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
		enum phx_dim d = dims[i];
		unsigned long size = a->layout->size[d], st = phx_layout_stride(a->layout, d);
		unsigned long k = c / st % size;
		uint64_t flow = phx_pl_flow_kib(a, d);
		bool ring = d == PHX_DIM_DP;

		if (size < 2 || !flow)
			continue;
		if (k > 0 || ring) {
			nb[n] = k > 0 ? c - st : c + (size - 1) * st;
			kib[n++] = flow;
		}
		if (k + 1 < size || ring) {
			nb[n] = k + 1 < size ? c + st : c - k * st;
			kib[n++] = flow;
		}
	}
	return n;
}

/* KiB cell c exchanges with neighbours under w. */
static uint64_t kib_under(const struct ends *e, const struct pl_worst *w, uint64_t c)
{
	uint64_t nb[NEIGHBOURS], kib[NEIGHBOURS], in = 0;
	unsigned n = neighbours(e->a, c, nb, kib);

	for (unsigned i = 0; i < n; i++)
		in += under(e->a, w, e->rank_node[nb[i]]) ? kib[i] : 0;
	return in;
}

/* The run of order[] (sorted by cell) holding cell c; n_order if none. */
static size_t run_at(const struct ends *e, uint64_t c)
{
	size_t lo = 0, hi = e->n_order;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (e->cell[e->order[mid]] < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < e->n_order && e->cell[e->order[lo]] == c ? lo : e->n_order;
}

/* The run under w with the least traffic to neighbours under w, not tried; n_order if none. */
static size_t pick_far(const struct ends *e, const struct pl_worst *w, size_t *len, uint64_t *in)
{
	size_t best = e->n_order, at, n;

	for (size_t i = 0; i < e->n_order; i++) {
		uint32_t node = e->order[i];
		uint64_t k;

		if ((i && e->cell[e->order[i - 1]] == e->cell[node]) || !under(e->a, w, node) ||
		    e->far_tried[e->cell[node]])
			continue;
		run_of(e, i, &at, &n);
		k = kib_under(e, w, e->cell[node]);
		if (usable(e, at, n) && (best == e->n_order || k < *in)) {
			best = at;
			*len = n;
			*in = k;
		}
	}
	return best;
}

/* Up to PARTNERS runs outside w, neighbours of cells under it, with the most traffic under it. */
static unsigned far_partners(const struct ends *e, const struct pl_worst *w, size_t x, size_t len,
			     uint64_t least, size_t *ys)
{
	uint64_t score[PARTNERS];
	unsigned n = 0;

	for (size_t i = 0; i < e->n_order; i++) {
		uint64_t nb[NEIGHBOURS], kib[NEIGHBOURS];
		uint32_t node = e->order[i];
		unsigned k;

		if ((i && e->cell[e->order[i - 1]] == e->cell[node]) || !under(e->a, w, node))
			continue;
		k = neighbours(e->a, e->cell[node], nb, kib);
		for (unsigned j = 0; j < k; j++) {
			size_t y = run_at(e, nb[j]);
			bool seen = false;
			unsigned at = n;
			uint64_t in;

			if (y == e->n_order || !fits(e, w, x, y, len) || !usable(e, y, len))
				continue;
			in = kib_under(e, w, nb[j]);
			for (unsigned q = 0; q < n; q++)
				seen = seen || ys[q] == y;
			if (in <= least || seen)
				continue;
			/* Into the list, most traffic first; a full list drops its last. */
			while (at > 0 && score[at - 1] < in) {
				if (at < PARTNERS) {
					ys[at] = ys[at - 1];
					score[at] = score[at - 1];
				}
				at--;
			}
			if (at < PARTNERS) {
				ys[at] = y;
				score[at] = in;
				n += n < PARTNERS;
			}
		}
	}
	return n;
}

/* 1: a trade of the run at x for a neighbour of the unit under w was kept, 0: none helped. */
static bool try_far(struct ends *e, struct pl_worst *w, size_t x, size_t len, uint64_t in)
{
	size_t ys[PARTNERS];
	unsigned n = far_partners(e, w, x, len, in, ys);

	for (unsigned k = 0; k < n && e->evals < e->max_evals; k++) {
		if (trade(e, w, x, ys[k], len))
			return true;
	}
	return false;
}

/* A leaf's runs of order[], a cell each: where they start, how many. */
struct frag {
	uint32_t leaf, spine;
	size_t n_runs;
	const size_t *runs;
};

/*
 * Whether leaf f suits the next cell better than leaf g: a leaf of one
 * cell where a pipeline starts or ends (its cell then sends one hop, not
 * two), larger leaves in between, the largest that still ends before the
 * next end (room cells on), else the smallest.
 */
static bool suits_better(const struct frag *f, const struct frag *g, bool at_end,
			 unsigned long room)
{
	bool single = f->n_runs == 1;

	if (single != (g->n_runs == 1))
		return single == at_end;
	if (single || f->n_runs == g->n_runs)
		return false;
	if (g->n_runs > room)
		return f->n_runs < g->n_runs;
	return f->n_runs <= room && f->n_runs > g->n_runs;
}

/*
 * The leaves in the order the cells fill them, each the first that suits
 * best. at_end[j], room[j]: whether cell j is of an end stage; how many
 * cells from j on come before the next one that is.
 */
static void frag_sequence(const struct frag *fr, size_t n, const bool *at_end,
			  const unsigned long *room, bool *used, const struct frag **seq)
{
	size_t cell = 0;

	memset(used, 0, n * sizeof(*used));
	for (size_t k = 0; k < n; k++) {
		size_t pick = n;

		for (size_t i = 0; i < n; i++) {
			if (!used[i] && (pick == n ||
					 suits_better(&fr[i], &fr[pick], at_end[cell], room[cell])))
				pick = i;
		}
		used[pick] = true;
		seq[k] = &fr[pick];
		cell += fr[pick].n_runs;
	}
}

struct reseq {
	size_t *runs; /* run starts in order[]: one cell each */
	size_t *by_leaf; /* the same, by leaf */
	struct frag *fr;
	const struct frag **seq;
	bool *used, *at_end;
	unsigned long *room;
	uint32_t *perm; /* per node */
	uint32_t *map; /* per rank */
};

static uint32_t run_unit(const struct ends *e, size_t run, unsigned level)
{
	return e->a->unit[e->order[run]][level];
}

static int run_by_leaf(const void *x, const void *y, void *ctx)
{
	const struct ends *e = ctx;
	size_t i = *(const size_t *)x, j = *(const size_t *)y;
	uint32_t si = run_unit(e, i, PHX_LEVEL_SPINE), sj = run_unit(e, j, PHX_LEVEL_SPINE);
	uint32_t li = run_unit(e, i, PHX_LEVEL_LEAF), lj = run_unit(e, j, PHX_LEVEL_LEAF);

	if (si != sj)
		return si < sj ? -1 : 1;
	if (li != lj)
		return li < lj ? -1 : 1;
	return i < j ? -1 : i > j;
}

/* The cell of the same replica's first stage. */
static uint64_t replica_of(const struct pl_alloc *a, uint64_t cell)
{
	return cell - stage_of(a, cell) * phx_layout_stride(a->layout, PHX_DIM_PP);
}

/* Cells by replica, then stage (by spine first with by_spine): whole pipelines in turn. */
static int run_by_pipeline(const void *x, const void *y, void *ctx)
{
	const struct ends *e = ctx;
	size_t i = *(const size_t *)x, j = *(const size_t *)y;
	uint32_t si = run_unit(e, i, PHX_LEVEL_SPINE), sj = run_unit(e, j, PHX_LEVEL_SPINE);
	uint64_t c = e->cell[e->order[i]], d = e->cell[e->order[j]];
	uint64_t rc = replica_of(e->a, c), rd = replica_of(e->a, d);

	if (e->by_spine && si != sj)
		return si < sj ? -1 : 1;
	if (rc != rd)
		return rc < rd ? -1 : 1;
	return c < d ? -1 : c > d;
}

/* Runs of order[], one per cell, all alike; their count, or 0 if the cells are not so. */
static size_t collect_runs(const struct ends *e, size_t *runs)
{
	const struct pl_alloc *a = e->a;
	const struct phx_layout *l = a->layout;
	unsigned long cell_ranks = l->size[PHX_DIM_TP] * l->size[PHX_DIM_CP] * l->size[PHX_DIM_EP];
	size_t n = 0, len;

	for (size_t i = 0; i < e->n_order; i++) {
		if (!i || e->cell[e->order[i]] != e->cell[e->order[i - 1]])
			runs[n++] = i;
	}
	if (!n || n != a->world / cell_ranks || e->n_order % n)
		return 0;
	len = e->n_order / n;
	for (size_t k = 0; k < n; k++) {
		for (size_t j = 0; j < len; j++) {
			uint32_t node = e->order[runs[k] + j];

			if (e->cell[node] != e->cell[e->order[runs[k]]] ||
			    e->used[node] != e->used[e->order[runs[0] + j]] || a->slow[node])
				return 0;
		}
	}
	return n;
}

/* Leaves and their runs, by spine: fr[] over by_leaf[]; how many leaves. */
static size_t collect_frags(const struct ends *e, struct reseq *q, size_t n_runs)
{
	size_t n = 0;

	memcpy(q->by_leaf, q->runs, n_runs * sizeof(*q->by_leaf));
	qsort_r(q->by_leaf, n_runs, sizeof(*q->by_leaf), run_by_leaf, (void *)e);
	for (size_t k = 0; k < n_runs; k++) {
		uint32_t leaf = run_unit(e, q->by_leaf[k], PHX_LEVEL_LEAF);

		if (!n || q->fr[n - 1].leaf != leaf)
			q->fr[n++] =
				(struct frag){ leaf, run_unit(e, q->by_leaf[k], PHX_LEVEL_SPINE), 0,
					       &q->by_leaf[k] };
		q->fr[n - 1].n_runs++;
	}
	return n;
}

/* at_end[] and room[] of the cells in runs[] (sorted by pipeline). */
static void mark_ends(const struct ends *e, struct reseq *q, size_t n_runs)
{
	unsigned long st = phx_layout_stride(e->a->layout, PHX_DIM_PP);

	for (size_t j = n_runs; j-- > 0;) {
		uint64_t c = e->cell[e->order[q->runs[j]]];
		bool next = j + 1 < n_runs && e->cell[e->order[q->runs[j + 1]]] == c + st;

		q->at_end[j] = end_stage(e->a, c);
		q->room[j] =
			q->at_end[j] ? 0 : 1 + (next && !q->at_end[j + 1] ? q->room[j + 1] : 0);
	}
}

/* The ranks moved by perm[], kept if the step gets shorter than *was: 1, else 0; -1: memory. */
static int keep_if_shorter(struct ends *e, struct reseq *q, struct pl_worst *was)
{
	const struct pl_alloc *a = e->a;
	struct pl_worst now;

	for (unsigned long r = 0; r < a->world; r++)
		q->map[r] = q->perm[e->rank_node[r]];
	if (phx_pl_links(a, q->map, &now) < 0)
		return -1;
	if (now.t >= was->t)
		return 0;
	*was = now;
	memcpy(e->rank_node, q->map, a->world * sizeof(*q->map));
	return 1;
}

/*
 * The cells, when each sits whole on nodes of its own: in pipeline order in
 * runs[] (run_by_pipeline(), after e->by_spine), by leaf in fr[], with
 * perm[] the identity to fill. Returns how many leaves, 0 when the cells
 * are not so; *n_runs, *len: how many cells, nodes per cell.
 */
static size_t cells_in_order(struct ends *e, struct reseq *q, size_t *n_runs, size_t *len)
{
	size_t n_frags;

	classify(e);
	*n_runs = collect_runs(e, q->runs);
	if (*n_runs < 2)
		return 0;
	*len = e->n_order / *n_runs;
	n_frags = collect_frags(e, q, *n_runs);
	qsort_r(q->runs, *n_runs, sizeof(*q->runs), run_by_pipeline, e);
	for (size_t n = 0; n < e->a->n_nodes; n++)
		q->perm[n] = (uint32_t)n;
	return n_frags;
}

/* Cell j's nodes (of runs[]) onto the len nodes from order[at] on. */
static void move_cell(const struct ends *e, struct reseq *q, size_t j, size_t at, size_t len)
{
	for (size_t i = 0; i < len; i++)
		q->perm[e->order[q->runs[j] + i]] = e->order[at + i];
}

/*
 * The pipelines laid out again, one after the other, over the leaves in
 * frag_sequence()'s order, when every cell sits whole on nodes of its own:
 * trades one at a time cannot get there, since each step of the way leaves
 * some leaf as busy as before. Leaves are taken spine by spine; with
 * by_spine each spine keeps its cells, so what crosses spines stays as it
 * was. Kept if the step gets shorter than *was (the map's busiest link,
 * then the new one's): 1, else 0; -1: memory.
 */
static int resequence(struct ends *e, struct reseq *q, struct pl_worst *was)
{
	size_t n_runs, len, slot = 0, n_frags = cells_in_order(e, q, &n_runs, &len);

	if (!n_frags)
		return 0;
	mark_ends(e, q, n_runs);
	for (size_t f = 0, cell = 0; f < n_frags;) {
		size_t g = f;

		while (g < n_frags && (!e->by_spine || q->fr[g].spine == q->fr[f].spine))
			g++;
		frag_sequence(q->fr + f, g - f, q->at_end + cell, q->room + cell, q->used,
			      q->seq + f);
		for (size_t k = f; k < g; k++)
			cell += q->fr[k].n_runs;
		f = g;
	}
	for (size_t k = 0; k < n_frags; k++) {
		for (size_t j = 0; j < q->seq[k]->n_runs; j++, slot++)
			move_cell(e, q, slot, q->seq[k]->runs[j], len);
	}
	return keep_if_shorter(e, q, was);
}

/* The next cell of queue[] from *at on not yet placed; SIZE_MAX if none. */
static size_t next_free(const bool *placed, const size_t *queue, size_t n, size_t *at)
{
	while (*at < n && placed[queue[*at]])
		(*at)++;
	return *at < n ? queue[*at] : SIZE_MAX;
}

struct tiles {
	size_t *ends, *pairs; /* cells (index in runs[], by pipeline) in the order taken */
	size_t n_ends, n_pairs, at_end, at_pair;
	size_t *slot_cell; /* per slot (index in by_leaf[]): the cell it gets */
	bool *placed; /* per cell */
};

/* Ends to leaves of one cell, pairs of middle stages to larger leaves. */
static void tile_leaf(struct tiles *t, const struct frag *f, size_t k0)
{
	for (size_t i = 0; i < f->n_runs; i++)
		t->slot_cell[k0 + i] = SIZE_MAX;
	if (f->n_runs == 1) {
		size_t j = next_free(t->placed, t->ends, t->n_ends, &t->at_end);

		if (j != SIZE_MAX)
			t->placed[j] = true;
		t->slot_cell[k0] = j;
		return;
	}
	for (size_t i = 0; i + 1 < f->n_runs; i += 2) {
		size_t j = next_free(t->placed, t->pairs, t->n_pairs, &t->at_pair);

		if (j == SIZE_MAX)
			return;
		t->placed[j] = t->placed[j + 1] = true;
		t->slot_cell[k0 + i] = j;
		t->slot_cell[k0 + i + 1] = j + 1;
	}
}

/*
 * Tiles per spine: a leaf of one cell gets a pipeline end (the ends in
 * replica order), a larger leaf pairs of neighbouring middle stages of
 * one replica (the middle stages in bands of two, band by band, each over
 * the replicas in order), and what no pair fills the cells left, in
 * pipeline order. A spine then holds ends and bands of consecutive
 * replicas, so few rings and hops leave it, where whole pipelines in turn
 * put every stage's ring through every spine. Needs every cell of every
 * replica on nodes of its own. Kept if the step gets shorter: 1, else 0;
 * -1: memory.
 */
static int tile(struct ends *e, struct reseq *q, struct pl_worst *was)
{
	const struct pl_alloc *a = e->a;
	unsigned long stages = a->layout->size[PHX_DIM_PP], reps;
	size_t n_runs, n_frags, len, next = 0;
	struct tiles t = { 0 };
	int rc = -1;

	e->by_spine = false;
	n_frags = cells_in_order(e, q, &n_runs, &len);
	if (!n_frags || n_runs % stages)
		return 0;
	reps = n_runs / stages;
	for (size_t j = 0; j < n_runs; j++) {
		if (stage_of(a, e->cell[e->order[q->runs[j]]]) != j % stages)
			return 0; /* not one cell per stage of each replica */
	}
	t.ends = calloc(n_runs, sizeof(*t.ends));
	t.pairs = calloc(n_runs, sizeof(*t.pairs));
	t.slot_cell = calloc(n_runs, sizeof(*t.slot_cell));
	t.placed = calloc(n_runs, sizeof(*t.placed));
	if (!t.ends || !t.pairs || !t.slot_cell || !t.placed)
		goto out;
	for (unsigned long d = 0; d < reps; d++) {
		t.ends[t.n_ends++] = d * stages;
		t.ends[t.n_ends++] = d * stages + stages - 1;
	}
	for (unsigned long st = 1; st + 2 < stages; st += 2) {
		for (unsigned long d = 0; d < reps; d++)
			t.pairs[t.n_pairs++] = d * stages + st;
	}
	for (size_t f = 0; f < n_frags; f++)
		tile_leaf(&t, &q->fr[f], (size_t)(q->fr[f].runs - q->by_leaf));
	for (size_t k = 0; k < n_runs; k++) {
		size_t j = t.slot_cell[k];

		while (j == SIZE_MAX && t.placed[next])
			next++;
		if (j == SIZE_MAX)
			t.placed[j = next] = true;
		move_cell(e, q, j, q->by_leaf[k], len);
	}
	rc = keep_if_shorter(e, q, was);
out:
	free(t.ends);
	free(t.pairs);
	free(t.slot_cell);
	free(t.placed);
	return rc;
}

static int try_resequence(struct ends *e, struct pl_worst *w)
{
	const struct pl_alloc *a = e->a;
	struct reseq q = { 0 };
	size_t n = a->n_nodes + 1;
	int rc = -1;

	q.runs = calloc(n, sizeof(*q.runs));
	q.by_leaf = calloc(n, sizeof(*q.by_leaf));
	q.fr = calloc(n, sizeof(*q.fr));
	q.seq = calloc(n, sizeof(*q.seq));
	q.used = calloc(n, sizeof(*q.used));
	q.at_end = calloc(n, sizeof(*q.at_end));
	q.room = calloc(n, sizeof(*q.room));
	q.perm = calloc(n, sizeof(*q.perm));
	q.map = calloc(a->world, sizeof(*q.map));
	if (q.runs && q.by_leaf && q.fr && q.seq && q.used && q.at_end && q.room && q.perm &&
	    q.map) {
		/* Over all spines in turn, then within each spine. */
		e->by_spine = false;
		rc = resequence(e, &q, w);
		e->by_spine = true;
		rc = rc < 0 ? rc : rc | resequence(e, &q, w);
		rc = rc < 0 ? rc : rc | tile(e, &q, w);
	}
	free(q.runs);
	free(q.by_leaf);
	free(q.fr);
	free(q.seq);
	free(q.used);
	free(q.at_end);
	free(q.room);
	free(q.perm);
	free(q.map);
	return rc;
}

/* Rounds of trades under the busiest link, until none helps there. */
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
		uint64_t in = 0;
		size_t x, len;

		if (moved)
			classify(e);
		if ((x = pick(e, &w, &len)) != e->n_order) {
			moved = try_cell(e, &w, x, len, taken);
			e->tried[e->cell[e->order[x]]] = !moved;
		} else if ((x = pick_far(e, &w, &len, &in)) != e->n_order) {
			moved = try_far(e, &w, x, len, in);
			e->far_tried[e->cell[e->order[x]]] = !moved;
		} else {
			break;
		}
		trades += moved;
	}
	free(taken);
	return trades;
}

/*
 * Trades; then, if the step is still above the bound, the pipelines laid
 * out again and trades from there, with what is left of the budget.
 */
static long all_rounds(struct ends *e, uint64_t bound_ns)
{
	struct pl_worst w;
	long trades, more;
	int moved;

	e->links = phx_pl_links_open(e->a, e->rank_node);
	if (!e->links)
		return -1;
	trades = rounds(e, bound_ns);
	if (trades < 0)
		return -1;
	phx_pl_links_worst(e->links, &w);
	if ((uint64_t)w.t <= bound_ns)
		return trades;
	phx_pl_links_close(e->links);
	e->links = NULL;
	moved = try_resequence(e, &w);
	if (moved <= 0)
		return moved < 0 ? -1 : trades;
	e->links = phx_pl_links_open(e->a, e->rank_node);
	if (!e->links)
		return -1;
	memset(e->tried, 0, e->a->world * sizeof(*e->tried));
	memset(e->far_tried, 0, e->a->world * sizeof(*e->far_tried));
	more = rounds(e, bound_ns);
	return more < 0 ? -1 : trades + moved + more;
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
	e.far_tried = calloc(a->world, sizeof(*e.far_tried));
	e.cell_at = calloc(a->world + 1, sizeof(*e.cell_at));
	e.rank_cell = calloc(a->world, sizeof(*e.rank_cell));
	e.leaf_gpus = phx_pl_unit_gpus(a, PHX_LEVEL_LEAF);
	if (!e.cell || !e.first || !e.used || !e.order || !e.dirty || !e.tried || !e.far_tried ||
	    !e.cell_at || !e.rank_cell || !e.leaf_gpus)
		goto out;
	for (unsigned long r = 0; r < a->world; r++)
		e.rank_cell[r] = (uint32_t)cell_of(a, r);
	trades = all_rounds(&e, bound_ns);
out:
	phx_pl_links_close(e.links);
	free(e.cell);
	free(e.first);
	free(e.used);
	free(e.order);
	free(e.cell_at);
	free(e.rank_cell);
	free(e.dirty);
	free(e.tried);
	free(e.far_tried);
	free(e.leaf_gpus);
	return trades;
}
