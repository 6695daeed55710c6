/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The link model's lower bound: no map's step is shorter. A unit (an
 * NVLink unit, a leaf, a spine) whose GPUs hold n of the job's ranks sends
 * at least F(n) out of it; its links out (the nodes' NICs, the leaf's or
 * the spine's uplink) carry that at their bandwidth per GPU times the
 * unit's GPUs, so the step takes at least F(n) * weight / GPUs. The bound
 * is the largest such time over the units, each at the least n its place
 * in the allocation allows (spare GPUs may be anywhere), with the ends of
 * pipelines shared out as below.
 *
 * F: ranks are the points of the layout's grid, groups its lines. What a
 * set of points sends out is at least the sum over lines of c_d f_d(k), k
 * the set's points on the line: a ring (tp, cp, dp) holding part of a
 * group sends one edge out (f = 1 for 0 < k < s, c = the group's MiB), a
 * pipeline one hop at least (c = half the pipeline's MiB), an all-to-all
 * k (s - k) parts (c = one part). Every f is concave with f(0) = f(s) = 0,
 * so moving each line's points to its start (compression) never raises
 * the sum, and the least is reached by a down-set: nested layers along
 * the outermost dimension, n_0 >= n_1 >= ... points, whose lines along it
 * hold n_{j-1} - n_j lines of j points. Letting each layer be any set of
 * its size keeps a lower bound:
 *   F_k(m) >= min over n_0 >= ... >= n_{s-1}, summing to m, of
 *             sum_t F_{k-1}(n_t) + c_k sum_j (n_{j-1} - n_j) f_k(j),
 * a small dynamic programme. Units of more than PL_BOUND_RANKS ranks are
 * left out: a bound of 0 holds for them, and on a fragmented allocation the
 * small units are the ones whose links run out.
 *
 * Pipelines have two ends: every unit sends at least its F with ends
 * (alone), and at least its F with two hops out of every part of a
 * pipeline (ring) less what ends save it, a hop per end, all units' savings
 * together at most a hop per end of every pipeline. The level's bound is
 * the least time its busiest unit can take under both (least_time()).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "placement/placement_int.h"

#define NONE UINT64_MAX

struct line {
	unsigned long s;
	bool all_to_all;
	uint64_t c; /* KiB: per edge or hop out, or per all-to-all part */
};

static uint64_t line_out(const struct line *d, unsigned long j)
{
	if (!j || j >= d->s)
		return 0;
	return d->all_to_all ? (uint64_t)j * (d->s - j) * d->c : d->c;
}

/*
 * The lines of the layout's dimensions, innermost (smallest stride) first;
 * pp as a ring (two hops out of a part) when ring_pp.
 */
static unsigned collect_lines(const struct pl_alloc *a, bool ring_pp, struct line *out)
{
	enum phx_dim order[PHX_DIM_COUNT];
	unsigned n = 0;

	for (int d = 0; d < PHX_DIM_COUNT; d++)
		order[d] = (enum phx_dim)d;
	for (int i = 1; i < PHX_DIM_COUNT; i++) {
		for (int j = i; j > 0 && phx_layout_stride(a->layout, order[j]) <
						 phx_layout_stride(a->layout, order[j - 1]);
		     j--) {
			enum phx_dim t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	}
	for (int i = 0; i < PHX_DIM_COUNT; i++) {
		enum phx_dim d = order[i];
		unsigned long s = a->layout->size[d];
		if (s < 2)
			continue;
		out[n].s = s;
		out[n].all_to_all = d == PHX_DIM_EP;
		/* A pipeline as a ring: a hop each way out of each part. */
		out[n].c = phx_pl_flow_kib(a, d) * (d == PHX_DIM_PP && ring_pp ? 2 : 1);
		n++;
	}
	return n;
}

/*
 * next[m], m <= lim: F with one more dimension d outside the grid whose F
 * is prev[] (NONE where the grid has fewer points).
 */
static int add_dimension(const struct line *d, const uint64_t *prev, uint64_t *next,
			 unsigned long lim)
{
	size_t w = lim + 1;
	uint64_t *cur = malloc(w * w * sizeof(*cur)), *nxt = malloc(w * w * sizeof(*nxt));

	if (!cur || !nxt) {
		free(cur);
		free(nxt);
		return -1;
	}
	/* cur[u * w + p]: the least over layers so far holding u points, the last p. */
	memset(cur, 0xff, w * w * sizeof(*cur));
	for (unsigned long p = 0; p <= lim; p++)
		cur[p * w + p] = prev[p];
	for (unsigned long t = 1; t < d->s; t++) {
		uint64_t step = line_out(d, t);

		memset(nxt, 0xff, w * w * sizeof(*nxt));
		for (unsigned long u = 0; u <= lim; u++) {
			for (unsigned long p = 0; p <= u; p++) {
				uint64_t v = cur[u * w + p];

				if (v == NONE)
					continue;
				for (unsigned long q = 0; q <= p && u + q <= lim; q++) {
					uint64_t x;

					if (prev[q] == NONE)
						continue;
					x = v + prev[q] + (p - q) * step;
					if (x < nxt[(u + q) * w + q])
						nxt[(u + q) * w + q] = x;
				}
			}
		}
		memcpy(cur, nxt, w * w * sizeof(*cur));
	}
	for (unsigned long m = 0; m <= lim; m++) {
		next[m] = NONE;
		for (unsigned long p = 0; p <= m; p++) {
			if (cur[m * w + p] < next[m])
				next[m] = cur[m * w + p];
		}
	}
	free(cur);
	free(nxt);
	return 0;
}

int phx_pl_least_out(const struct pl_alloc *a, unsigned long lim, bool ring_pp, uint64_t *least)
{
	struct line lines[PHX_DIM_COUNT];
	unsigned n = collect_lines(a, ring_pp, lines);
	uint64_t *next = malloc((lim + 1) * sizeof(*next));

	if (!next)
		return -1;
	/* No dimension: one point, sending nothing. */
	for (unsigned long m = 0; m <= lim; m++)
		least[m] = m <= 1 ? 0 : NONE;
	for (unsigned i = 0; i < n; i++) {
		if (add_dimension(&lines[i], least, next, lim) < 0) {
			free(next);
			return -1;
		}
		memcpy(least, next, (lim + 1) * sizeof(*least));
	}
	free(next);
	return 0;
}

/* The least of least[] over the ranks a unit of gpus GPUs may hold; NONE if unknown. */
static uint64_t unit_least(const struct pl_alloc *a, const uint64_t *least, unsigned long lim,
			   unsigned long gpus)
{
	uint64_t spare = (uint64_t)a->n_nodes * a->gpn - a->world, out = NONE;
	unsigned long lo = gpus > spare ? gpus - (unsigned long)spare : 0;
	unsigned long hi = gpus < a->world ? gpus : a->world;

	if (hi > lim)
		return NONE;
	for (unsigned long m = lo; m <= hi; m++)
		out = least[m] < out ? least[m] : out;
	return out;
}

/* One unit: the least it sends with pipeline ends (alone) and without (ring), its GPUs. */
struct unit_out {
	double alone, ring, gpus;
};

/* Ring traffic units must still send when the busiest takes t: over what the ends can save. */
static double over(const struct unit_out *u, size_t n, double t)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++) {
		double most = t * u[i].gpus; /* what its links carry in t */

		sum += u[i].ring > most ? u[i].ring - most : 0;
	}
	return sum;
}

/*
 * The least time t (KiB per GPU, times the level's weight later) the
 * busiest unit of one level can take. Each unit sends at least its least
 * with pipeline ends (alone), and at least its least without them (ring)
 * less what ends save it; every pipeline has two ends, each saving a hop,
 * so what all units save is at most ends. t must cover every unit alone,
 * and leave no more ring traffic over t than the ends can save.
 */
static double least_time(const struct unit_out *u, size_t n, double ends)
{
	double lo = 0, hi = 0;

	for (size_t i = 0; i < n; i++) {
		lo = u[i].alone / u[i].gpus > lo ? u[i].alone / u[i].gpus : lo;
		hi = u[i].ring / u[i].gpus > hi ? u[i].ring / u[i].gpus : hi;
	}
	if (hi <= lo || over(u, n, lo) <= ends)
		return lo;
	/* over() falls as t grows: halve the interval until it is ns-fine. */
	for (int k = 0; k < 64; k++) {
		double mid = (lo + hi) / 2;

		if (over(u, n, mid) <= ends)
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

/* The largest time over the units of one level, their links at weight. */
static int level_bound(const struct pl_alloc *a, unsigned level, uint64_t weight,
		       const uint64_t *const least[2], unsigned long lim, double *worst)
{
	unsigned long *gpus = phx_pl_unit_gpus(a, level);
	struct unit_out *u = calloc(a->n_units[level] + 1, sizeof(*u));
	unsigned long pp = a->layout->size[PHX_DIM_PP];
	double ends, t;
	size_t n = 0;

	if (!gpus || !u) {
		free(gpus);
		free(u);
		return -1;
	}
	for (uint32_t k = 0; k < a->n_units[level]; k++) {
		uint64_t alone = unit_least(a, least[0], lim, gpus[k]);
		uint64_t ring = unit_least(a, least[1], lim, gpus[k]);

		/* Units too large to know send at least nothing. */
		if (!gpus[k] || alone == NONE || ring == NONE)
			continue;
		u[n++] = (struct unit_out){ (double)alone, (double)ring, (double)gpus[k] };
	}
	/* Each end of each pipeline saves a hop: half its MiB each way. */
	ends = pp > 1 ? (double)(a->world / pp) * (double)a->traffic[PHX_DIM_PP] * 1024 : 0;
	t = least_time(u, n, ends) * (double)weight;
	*worst = t > *worst ? t : *worst;
	free(gpus);
	free(u);
	return 0;
}

int phx_pl_step_bound(const struct pl_alloc *a, uint64_t *ns)
{
	unsigned long lim = a->world < PL_BOUND_RANKS ? a->world : PL_BOUND_RANKS;
	uint64_t *least[2] = { malloc((lim + 1) * sizeof(uint64_t)),
			       malloc((lim + 1) * sizeof(uint64_t)) };
	double worst = 0;
	int rc = -1;

	if (!least[0] || !least[1])
		goto out;
	if (phx_pl_least_out(a, lim, false, least[0]) < 0 ||
	    phx_pl_least_out(a, lim, true, least[1]) < 0)
		goto out;
	/* Out of an NVLink unit through its NICs, of a leaf or spine through its uplink. */
	for (unsigned level = PHX_LEVEL_NVLINK; level < PL_SUB_LEVELS; level++) {
		if (level_bound(a, level, a->weight[level + 1], (const uint64_t *const *)least, lim,
				&worst) < 0)
			goto out;
	}
	*ns = (uint64_t)(worst / 1024); /* KiB x ns per MiB */
	rc = 0;
out:
	free(least[0]);
	free(least[1]);
	return rc;
}
