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
 *
 * That sharing is fractional: it lets every node save half a hop per rank
 * where, in truth, a node holding one stage of one replica either holds an
 * end stage or a middle one. So a second bound counts ranks by stage: G(m,
 * e), the least m ranks send when e of them are of the first or last stage,
 * taken over how many ranks each stage holds (n_0 ... n_{s-1}): every stage
 * sends at least F without pipelines of its n_t, and between neighbouring
 * stages at least |n_t - n_t+1| hops cross. The job has exactly world/pp
 * ranks per stage, so at time t the units must, between them, be able to
 * hold all ranks of end stages and all of middle ones while each stays
 * under t (ends_time()). The level's bound is the larger of the two.
 */
#include "config.h"

#include <limits.h>
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

/* How a grid counts pipelines: a chain (one hop out of a part), a ring (two), or not at all. */
enum pp_as { PP_CHAIN, PP_RING, PP_NONE };

/* The lines of the layout's dimensions, innermost (smallest stride) first. */
static unsigned collect_lines(const struct pl_alloc *a, enum pp_as pp, struct line *out)
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
		if (s < 2 || (d == PHX_DIM_PP && pp == PP_NONE))
			continue;
		out[n].s = s;
		out[n].all_to_all = d == PHX_DIM_EP;
		/* A pipeline as a ring: a hop each way out of each part. */
		out[n].c = phx_pl_flow_kib(a, d) * (d == PHX_DIM_PP && pp == PP_RING ? 2 : 1);
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
	unsigned long most = 0, reach; /* no layer holds more points than the grid so far */
	uint64_t *cur, *nxt;
	size_t w;

	for (unsigned long q = 0; q <= lim; q++)
		most = prev[q] != NONE ? q : most;
	w = most + 1;
	cur = malloc((lim + 1) * w * sizeof(*cur));
	nxt = malloc((lim + 1) * w * sizeof(*nxt));
	if (!cur || !nxt) {
		free(cur);
		free(nxt);
		return -1;
	}
	/* cur[u * w + p], u <= reach: the least over layers so far holding u points, the last p. */
	memset(cur, 0xff, w * w * sizeof(*cur));
	for (unsigned long p = 0; p <= most; p++)
		cur[p * w + p] = prev[p];
	reach = most;
	for (unsigned long t = 1; t < d->s; t++) {
		uint64_t step = line_out(d, t), *swap = cur;
		unsigned long to = reach + most < lim ? reach + most : lim;

		memset(nxt, 0xff, (to + 1) * w * sizeof(*nxt));
		for (unsigned long u = 0; u <= reach; u++) {
			for (unsigned long p = 0; p <= u && p <= most; p++) {
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
		cur = nxt;
		nxt = swap;
		reach = to;
	}
	for (unsigned long m = 0; m <= lim; m++) {
		next[m] = NONE;
		for (unsigned long p = 0; m <= reach && p <= m && p <= most; p++) {
			if (cur[m * w + p] < next[m])
				next[m] = cur[m * w + p];
		}
	}
	free(cur);
	free(nxt);
	return 0;
}

static int least_over(const struct pl_alloc *a, unsigned long lim, enum pp_as pp, uint64_t *least)
{
	struct line lines[PHX_DIM_COUNT];
	unsigned n = collect_lines(a, pp, lines);
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

int phx_pl_least_out(const struct pl_alloc *a, unsigned long lim, bool ring_pp, uint64_t *least)
{
	return least_over(a, lim, ring_pp ? PP_RING : PP_CHAIN, least);
}

/* x + y, NONE if either is. */
static uint64_t plus(uint64_t x, uint64_t y)
{
	return x == NONE || y == NONE ? NONE : x + y;
}

/*
 * One more stage after cur[u][p] (u ranks so far, p in the last stage):
 * into nxt, or, for the last stage, into least[m][first + q]. The hops
 * between the stages cost hop * |p - q|: for each u, the least over p is a
 * distance transform (near[q]), so a stage costs O(lim^2), not O(lim^3).
 */
static void add_stage(const uint64_t *cur, uint64_t *nxt, uint64_t *least, const uint64_t *in,
		      uint64_t hop, unsigned long lim, unsigned long first, uint64_t *near)
{
	size_t w = lim + 1;

	for (unsigned long u = first; u <= lim; u++) {
		const uint64_t *row = cur + u * w;
		/*
		 * Only near[0 .. lim - u] is read. Past u, near only grows by
		 * hop a step, so the pass back changes nothing from u on.
		 */
		unsigned long top = u > lim - u ? u : lim - u;

		for (unsigned long i = 0; i <= top; i++) {
			uint64_t here = i <= u ? row[i] : NONE,
				 from = i ? plus(near[i - 1], hop) : NONE;

			near[i] = here < from ? here : from;
		}
		for (unsigned long i = u; i-- > 0;) {
			uint64_t from = plus(near[i + 1], hop);

			near[i] = from < near[i] ? from : near[i];
		}
		/* The last stage holds no fewer than the first (see below). */
		for (unsigned long q = nxt ? 0 : first; u + q <= lim; q++) {
			uint64_t *to =
				nxt ? &nxt[(u + q) * w + q] : &least[(u + q) * w + first + q];
			uint64_t x = plus(near[q], in[q]);

			*to = x < *to ? x : *to;
		}
	}
}

/*
 * Stage by stage, for each count of ranks in the first stage: every stage
 * sends at least F without pipelines of what it holds, and |n_t - n_t+1|
 * hops cross between neighbours.
 */
int phx_pl_least_out_ends(const struct pl_alloc *a, unsigned long lim, uint64_t *least)
{
	unsigned long stages = a->layout->size[PHX_DIM_PP];
	uint64_t hop = phx_pl_flow_kib(a, PHX_DIM_PP);
	size_t w = lim + 1;
	uint64_t *in = malloc(w * sizeof(*in));
	uint64_t *cur = malloc(w * w * sizeof(*cur)), *nxt = malloc(w * w * sizeof(*nxt));
	uint64_t *near = malloc(w * sizeof(*near));
	int rc = -1;

	if (!in || !cur || !nxt || !near || stages < 2 || least_over(a, lim, PP_NONE, in) < 0)
		goto out;
	memset(least, 0xff, w * w * sizeof(*least));
	/*
	 * A profile read backwards costs the same and holds as many ranks at
	 * the ends: the first stage may be taken to hold no more than the last.
	 */
	for (unsigned long first = 0; 2 * first <= lim; first++) {
		if (in[first] == NONE)
			continue;
		memset(cur, 0xff, w * w * sizeof(*cur));
		cur[first * w + first] = in[first];
		for (unsigned long t = 1; t + 1 < stages; t++) {
			uint64_t *swap = cur;

			memset(nxt, 0xff, w * w * sizeof(*nxt));
			add_stage(cur, nxt, NULL, in, hop, lim, first, near);
			cur = nxt;
			nxt = swap;
		}
		add_stage(cur, NULL, least, in, hop, lim, first, near);
	}
	rc = 0;
out:
	free(in);
	free(cur);
	free(nxt);
	free(near);
	return rc;
}

/* The tables the bound reads, for units of up to lim ranks. */
struct tables {
	unsigned long lim;
	const uint64_t *alone, *ring; /* [m] */
	const uint64_t *ends; /* [m][e], m <= ends_lim, or NULL without pipelines */
	unsigned long ends_lim; /* no unit of up to lim ranks holds more */
};

/* How many ranks a unit of gpus GPUs may hold: spare GPUs may be anywhere. */
static void unit_span(const struct pl_alloc *a, unsigned long gpus, unsigned long *lo,
		      unsigned long *hi)
{
	uint64_t spare = (uint64_t)a->n_nodes * a->gpn - a->world;

	*lo = gpus > spare ? gpus - (unsigned long)spare : 0;
	*hi = gpus < a->world ? gpus : a->world;
}

/* The least of least[] over the ranks a unit of gpus GPUs may hold; NONE if unknown. */
static uint64_t unit_least(const struct pl_alloc *a, const uint64_t *least, unsigned long lim,
			   unsigned long gpus)
{
	unsigned long lo, hi;
	uint64_t out = NONE;

	unit_span(a, gpus, &lo, &hi);
	if (hi > lim)
		return NONE;
	for (unsigned long m = lo; m <= hi; m++)
		out = least[m] < out ? least[m] : out;
	return out;
}

/* Units of one size: how many, and the end and middle ranks each may hold at a time. */
struct unit_class {
	unsigned long gpus, count;
	unsigned long lo_e, hi_e, lo_k, hi_k;
};

/* Whether a unit of c->gpus GPUs can stay under most KiB with some ranks; their span if so. */
static bool class_fits(const struct pl_alloc *a, const struct tables *tb, struct unit_class *c,
		       double most)
{
	unsigned long lo, hi;
	bool any = false;

	unit_span(a, c->gpus, &lo, &hi);
	if (hi > tb->ends_lim) { /* too large to know: anything it has room for */
		*c = (struct unit_class){ c->gpus, c->count, 0, hi, 0, hi };
		return true;
	}
	c->lo_e = c->lo_k = ULONG_MAX;
	c->hi_e = c->hi_k = 0;
	for (unsigned long m = lo; m <= hi; m++) {
		for (unsigned long e = 0; e <= m; e++) {
			uint64_t g = tb->ends[m * (tb->ends_lim + 1) + e];

			if (g == NONE || (double)g > most)
				continue;
			any = true;
			c->lo_e = e < c->lo_e ? e : c->lo_e;
			c->hi_e = e > c->hi_e ? e : c->hi_e;
			c->lo_k = m - e < c->lo_k ? m - e : c->lo_k;
			c->hi_k = m - e > c->hi_k ? m - e : c->hi_k;
		}
	}
	return any;
}

/*
 * Whether every unit can stay under t (KiB per GPU) while, between them,
 * they hold exactly the job's end-stage and middle-stage ranks.
 */
static bool ends_fit(const struct pl_alloc *a, const struct tables *tb, struct unit_class *cls,
		     size_t n, double t)
{
	unsigned long stage = a->world / a->layout->size[PHX_DIM_PP];
	unsigned long ends = 2 * stage, middle = a->world - ends;
	unsigned long lo_e = 0, hi_e = 0, lo_k = 0, hi_k = 0;

	for (size_t i = 0; i < n; i++) {
		if (!class_fits(a, tb, &cls[i], t * (double)cls[i].gpus))
			return false;
		lo_e += cls[i].count * cls[i].lo_e;
		hi_e += cls[i].count * cls[i].hi_e;
		lo_k += cls[i].count * cls[i].lo_k;
		hi_k += cls[i].count * cls[i].hi_k;
	}
	return lo_e <= ends && ends <= hi_e && lo_k <= middle && middle <= hi_k;
}

static int by_gpus(const void *x, const void *y)
{
	unsigned long i = *(const unsigned long *)x, j = *(const unsigned long *)y;

	return i < j ? -1 : i > j;
}

/*
 * *t: the least time (KiB per GPU) under which the units can hold the
 * stages as they must; 0 or -1 (memory).
 */
static int ends_time(const struct pl_alloc *a, const struct tables *tb, const unsigned long *gpus,
		     size_t n_units, double *t)
{
	unsigned long *sorted = malloc((n_units + 1) * sizeof(*sorted));
	struct unit_class *cls = calloc(n_units + 1, sizeof(*cls));
	double lo = 0, hi = 0;
	size_t n = 0;
	int rc = -1;

	*t = 0;
	if (!sorted || !cls)
		goto out;
	rc = 0;
	memcpy(sorted, gpus, n_units * sizeof(*sorted));
	qsort(sorted, n_units, sizeof(*sorted), by_gpus);
	for (size_t i = 0; i < n_units; i++) {
		if (!sorted[i])
			continue;
		if (!n || cls[n - 1].gpus != sorted[i])
			cls[n++] = (struct unit_class){ .gpus = sorted[i] };
		cls[n - 1].count++;
	}
	/* Under the largest G per GPU, every unit can hold anything it has room for. */
	for (size_t i = 0; i < n; i++) {
		for (unsigned long m = 0; m <= cls[i].gpus && m <= tb->ends_lim; m++) {
			for (unsigned long e = 0; e <= m; e++) {
				uint64_t g = tb->ends[m * (tb->ends_lim + 1) + e];

				if (g != NONE && (double)g / (double)cls[i].gpus > hi)
					hi = (double)g / (double)cls[i].gpus;
			}
		}
	}
	if (!ends_fit(a, tb, cls, n, hi))
		goto out;
	for (int k = 0; k < 64; k++) {
		double mid = (lo + hi) / 2;

		if (ends_fit(a, tb, cls, n, mid))
			hi = mid;
		else
			lo = mid;
	}
	*t = hi;
out:
	free(sorted);
	free(cls);
	return rc;
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

/* The largest time over the units of one level (gpus[] each), their links at weight. */
static int level_bound(const struct pl_alloc *a, unsigned level, uint64_t weight,
		       const struct tables *tb, const unsigned long *gpus, double *worst)
{
	struct unit_out *u = calloc(a->n_units[level] + 1, sizeof(*u));
	unsigned long pp = a->layout->size[PHX_DIM_PP];
	double ends, t, by_stage = 0;
	size_t n = 0;
	int rc = -1;

	if (!u)
		goto out;
	for (uint32_t k = 0; k < a->n_units[level]; k++) {
		uint64_t alone = unit_least(a, tb->alone, tb->lim, gpus[k]);
		uint64_t ring = unit_least(a, tb->ring, tb->lim, gpus[k]);

		/* Units too large to know send at least nothing. */
		if (!gpus[k] || alone == NONE || ring == NONE)
			continue;
		u[n++] = (struct unit_out){ (double)alone, (double)ring, (double)gpus[k] };
	}
	/* Each end of each pipeline saves a hop: half its MiB each way. */
	ends = pp > 1 ? (double)(a->world / pp) * (double)a->traffic[PHX_DIM_PP] * 1024 : 0;
	t = least_time(u, n, ends);
	if (tb->ends && ends_time(a, tb, gpus, a->n_units[level], &by_stage) < 0)
		goto out;
	t = (by_stage > t ? by_stage : t) * (double)weight;
	*worst = t > *worst ? t : *worst;
	rc = 0;
out:
	free(u);
	return rc;
}

/* The most ranks any unit of up to lim ranks may hold: how far the ends table must go. */
static unsigned long ends_reach(const struct pl_alloc *a, unsigned long lim,
				unsigned long *const gpus[PL_SUB_LEVELS])
{
	unsigned long reach = 0, lo, hi;

	for (unsigned level = PHX_LEVEL_NVLINK; level < PL_SUB_LEVELS; level++) {
		for (uint32_t k = 0; k < a->n_units[level]; k++) {
			unit_span(a, gpus[level][k], &lo, &hi);
			if (hi <= lim && hi > reach)
				reach = hi;
		}
	}
	return reach;
}

int phx_pl_step_bound(const struct pl_alloc *a, uint64_t *ns)
{
	unsigned long lim = a->world < PL_BOUND_RANKS ? a->world : PL_BOUND_RANKS;
	uint64_t *alone = malloc((lim + 1) * sizeof(uint64_t));
	uint64_t *ring = malloc((lim + 1) * sizeof(uint64_t));
	uint64_t *ends = NULL;
	unsigned long *gpus[PL_SUB_LEVELS] = { NULL };
	struct tables tb = { lim, alone, ring, NULL, 0 };
	double worst = 0;
	int rc = -1;

	if (!alone || !ring || phx_pl_least_out(a, lim, false, alone) < 0 ||
	    phx_pl_least_out(a, lim, true, ring) < 0)
		goto out;
	for (unsigned level = PHX_LEVEL_NVLINK; level < PL_SUB_LEVELS; level++) {
		gpus[level] = phx_pl_unit_gpus(a, level);
		if (!gpus[level])
			goto out;
	}
	if (a->layout->size[PHX_DIM_PP] > 1) {
		tb.ends_lim = ends_reach(a, lim, gpus);
		ends = malloc((tb.ends_lim + 1) * (tb.ends_lim + 1) * sizeof(*ends));
		if (!ends || phx_pl_least_out_ends(a, tb.ends_lim, ends) < 0)
			goto out;
		tb.ends = ends;
	}
	/* Out of an NVLink unit through its NICs, of a leaf or spine through its uplink. */
	for (unsigned level = PHX_LEVEL_NVLINK; level < PL_SUB_LEVELS; level++) {
		if (level_bound(a, level, a->weight[level + 1], &tb, gpus[level], &worst) < 0)
			goto out;
	}
	*ns = (uint64_t)(worst / 1024); /* KiB x ns per MiB */
	rc = 0;
out:
	for (unsigned level = 0; level < PL_SUB_LEVELS; level++)
		free(gpus[level]);
	free(alone);
	free(ring);
	free(ends);
	return rc;
}
