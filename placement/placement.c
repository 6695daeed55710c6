/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phx_place(): sorts the allocation, leaves out spare nodes, packs the ranks
 * with every nesting of the dimensions worth trying (placement_pack.c),
 * prices each (placement_cost.c), keeps the best and improves it by
 * swapping nodes (placement_refine.c), moves slow nodes to
 * the least harmful work, and adds the host-name order's cost for
 * comparison; the lower bound (placement_bound.c) is computed on demand.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement.h"
#include "placement/placement_int.h"

#define MAX_GPUS_PER_NODE 1024u
#define MAX_STRATEGIES 1024

static const unsigned long default_traffic[PHX_DIM_COUNT] = {
	[PHX_DIM_TP] = 65536, [PHX_DIM_CP] = 16384, [PHX_DIM_EP] = 32768,
	[PHX_DIM_DP] = 8192,  [PHX_DIM_PP] = 4096,
};

struct candidate {
	struct pl_strategy s; /* n == 0 and hostname: Slurm's block order */
	bool hostname;
	char name[96];
	struct phx_plan_cost cost;
};

struct placer {
	const struct phx_place_input *in;
	const struct phx_fabric *fab;
	struct pl_alloc a;
	size_t *order; /* allocated index -> input index, host-name order */
	struct pl_tree *tree;
	struct candidate *cand;
	size_t n_cand;
	struct phx_plan *plan;
	char *err;
	size_t errlen;
};

/* ---------------------------------------------------------------- traffic */

void phx_traffic_defaults(struct phx_traffic *t)
{
	memcpy(t->mib, default_traffic, sizeof(t->mib));
}

static int traffic_item(const char *item, size_t len, struct phx_traffic *t, unsigned *seen,
			char *err, size_t errlen)
{
	const char *eq = memchr(item, '=', len);
	unsigned long v = 0;
	size_t i;
	int d;

	d = eq ? phx_dim_parse(item, (size_t)(eq - item)) : -1;
	if (d < 0) {
		snprintf(err, errlen,
			 "traffic item '%.*s': write DIM=MIB with DIM one of tp, cp, ep, dp, pp",
			 (int)(len > 40 ? 40 : len), item);
		return -1;
	}
	if (*seen & (1u << d)) {
		snprintf(err, errlen, "traffic for %s is given twice", phx_dim_name(d));
		return -1;
	}
	*seen |= 1u << d;
	for (i = (size_t)(eq - item) + 1; i < len && item[i] >= '0' && item[i] <= '9'; i++) {
		if (v <= PHX_TRAFFIC_MAX_MIB)
			v = v * 10 + (unsigned long)(item[i] - '0');
	}
	if (i == (size_t)(eq - item) + 1 || i < len || v > PHX_TRAFFIC_MAX_MIB) {
		snprintf(err, errlen,
			 "traffic for %s: '%.*s' is not a whole number of MiB from 0 to %lu",
			 phx_dim_name(d),
			 (int)(len - (size_t)(eq - item) - 1 > 40 ? 40
								  : len - (size_t)(eq - item) - 1),
			 eq + 1, PHX_TRAFFIC_MAX_MIB);
		return -1;
	}
	t->mib[d] = v;
	return 0;
}

int phx_traffic_parse(const char *spec, struct phx_traffic *t, char *err, size_t errlen)
{
	unsigned seen = 0;

	phx_traffic_defaults(t);
	if (!spec || !*spec) {
		snprintf(err, errlen,
			 "empty traffic; write e.g. 'tp=65536,dp=8192' (MiB per step)");
		return -1;
	}
	for (;;) {
		const char *comma = strchr(spec, ',');
		size_t len = comma ? (size_t)(comma - spec) : strlen(spec);

		if (traffic_item(spec, len, t, &seen, err, errlen) < 0)
			return -1;
		if (!comma)
			return 0;
		spec = comma + 1;
	}
}

/* ---------------------------------------------------------------- input */

static int fail(struct placer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct placer *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, p->errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static int add_string(struct phx_plan *plan, char *s)
{
	char **grown;

	if (!s)
		return -1;
	grown = realloc(plan->strings, (plan->n_strings + 1) * sizeof(*grown));
	if (!grown) {
		free(s);
		return -1;
	}
	plan->strings = grown;
	plan->strings[plan->n_strings++] = s;
	return 0;
}

static int warn(struct placer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int warn(struct placer *p, const char *fmt, ...)
{
	struct phx_plan *plan = p->plan;
	char msg[512], **grown;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	grown = realloc(plan->warnings, (plan->n_warnings + 1) * sizeof(*grown));
	if (!grown)
		return fail(p, "out of memory");
	plan->warnings = grown;
	if (!(plan->warnings[plan->n_warnings] = strdup(msg)))
		return fail(p, "out of memory");
	plan->n_warnings++;
	return 0;
}

static int check_input(struct placer *p)
{
	const struct phx_place_input *in = p->in;
	const struct phx_layout *l = in->layout;

	if (!l || l->star >= 0 || !l->world)
		return fail(p, "the layout is not resolved against a world size");
	if (in->gpus_per_node < 1 || in->gpus_per_node > MAX_GPUS_PER_NODE)
		return fail(p, "%u GPUs per node is out of range (1 to %u)", in->gpus_per_node,
			    MAX_GPUS_PER_NODE);
	if (in->n_nodes < 1 || in->n_nodes > PHX_FABRIC_MAX_NODES)
		return fail(p, "%zu nodes is out of range (1 to %u)", in->n_nodes,
			    PHX_FABRIC_MAX_NODES);
	if (l->world > (unsigned long)in->n_nodes * in->gpus_per_node)
		return fail(p, "the layout needs %lu GPUs but %zu nodes x %u GPUs give %lu",
			    l->world, in->n_nodes, in->gpus_per_node,
			    (unsigned long)in->n_nodes * in->gpus_per_node);
	for (size_t i = 0; i < in->n_nodes; i++) {
		if (!in->nodes[i] || !in->nodes[i][0])
			return fail(p, "node %zu of the allocation has no name", i);
	}
	return 0;
}

struct named {
	struct phx_hostname_key key;
	size_t index;
};

static int by_name(const void *x, const void *y)
{
	return phx_hostname_key_cmp(&((const struct named *)x)->key,
				    &((const struct named *)y)->key);
}

static const char *name_of(const struct placer *p, size_t i)
{
	return p->in->nodes[p->order[i]];
}

static const char *alloc_name(const void *ctx, size_t i)
{
	return name_of(ctx, i);
}

static long find_alloc(const struct placer *p, const char *name)
{
	return phx_hostname_search(name, p->a.n_nodes, alloc_name, p);
}

/* Host-name order makes the result independent of the input order. */
static int sort_allocation(struct placer *p)
{
	size_t n = p->in->n_nodes;
	struct named *v = calloc(n, sizeof(*v));

	p->order = calloc(n, sizeof(*p->order));
	if (!v || !p->order) {
		free(v);
		return fail(p, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		phx_hostname_key(p->in->nodes[i], &v[i].key);
		v[i].index = i;
	}
	qsort(v, n, sizeof(*v), by_name);
	for (size_t i = 0; i < n; i++)
		p->order[i] = v[i].index;
	free(v);
	for (size_t i = 1; i < n; i++) {
		if (!strcmp(name_of(p, i - 1), name_of(p, i)))
			return fail(p, "node '%.200s' is in the allocation twice", name_of(p, i));
	}
	p->a.n_nodes = n;
	return 0;
}

static int locate_nodes(struct placer *p)
{
	const struct phx_fabric *f = p->fab;
	size_t n = p->a.n_nodes, n_dom = f ? f->n_domains : 0;

	p->a.unit = calloc(n, sizeof(*p->a.unit));
	p->a.slow = calloc(n, sizeof(*p->a.slow));
	p->a.spare = calloc(n, sizeof(*p->a.spare));
	if (!p->a.unit || !p->a.slow || !p->a.spare)
		return fail(p, "out of memory");
	p->a.n_units[0] = (uint32_t)n;
	p->a.n_units[1] = (uint32_t)(n_dom + n);
	p->a.n_units[2] = f ? (uint32_t)f->n_leaves : 1;
	p->a.n_units[3] = f ? (uint32_t)f->n_spines : 1;
	/* Both lists are in host-name order: one merge finds every node. */
	for (size_t i = 0, k = 0; i < n; i++) {
		const struct phx_fabric_node *fn = NULL;
		int c = 1;

		while (f && k < f->n_nodes &&
		       (c = phx_hostname_cmp(f->nodes[k].name, name_of(p, i))) < 0)
			k++;
		if (f && k < f->n_nodes && c == 0)
			fn = &f->nodes[k];

		if (!fn && f && f->has_switches)
			return fail(p,
				    "node '%.200s' is not under any leaf switch of the fabric "
				    "(%s); add it there",
				    name_of(p, i), f->source);
		p->a.unit[i][0] = (uint32_t)i;
		p->a.unit[i][1] =
			fn && fn->domain >= 0 ? (uint32_t)fn->domain : (uint32_t)(n_dom + i);
		p->a.unit[i][2] = fn ? fn->leaf : 0;
		p->a.unit[i][3] = fn ? f->leaf_spine[fn->leaf] : 0;
	}
	return 0;
}

static int mark_slow(struct placer *p)
{
	size_t unknown = 0;

	for (size_t i = 0; i < p->in->n_slow; i++) {
		long k = p->in->slow[i] ? find_alloc(p, p->in->slow[i]) : -1;

		if (k >= 0)
			p->a.slow[k] = true;
		else
			unknown++;
	}
	if (unknown)
		return warn(p, "%zu slow node%s not in the allocation, ignored", unknown,
			    unknown == 1 ? " is" : "s are");
	return 0;
}

struct leaf_count {
	uint32_t leaf;
	size_t nodes;
};

static int by_count(const void *x, const void *y)
{
	const struct leaf_count *a = x, *b = y;

	if (a->nodes != b->nodes)
		return a->nodes < b->nodes ? -1 : 1;
	return a->leaf > b->leaf ? -1 : a->leaf < b->leaf;
}

/*
 * More nodes than the world needs: slow nodes stay out first, then the
 * nodes of the smallest leaves, which are the fragments that split groups.
 */
static int choose_spares(struct placer *p)
{
	size_t n = p->a.n_nodes, need = (p->a.world + p->a.gpn - 1) / p->a.gpn;
	size_t extra = n - need, n_leaves = p->a.n_units[2];
	struct leaf_count *lc;

	for (size_t i = n; i-- > 0 && extra;) {
		if (p->a.slow[i]) {
			p->a.spare[i] = true;
			extra--;
		}
	}
	if (!extra)
		return 0;
	lc = calloc(n_leaves, sizeof(*lc));
	if (!lc)
		return fail(p, "out of memory");
	for (size_t l = 0; l < n_leaves; l++)
		lc[l].leaf = (uint32_t)l;
	for (size_t i = 0; i < n; i++)
		lc[p->a.unit[i][2]].nodes += !p->a.spare[i];
	qsort(lc, n_leaves, sizeof(*lc), by_count);
	for (size_t l = 0; l < n_leaves && extra; l++) {
		for (size_t i = n; i-- > 0 && extra;) {
			if (p->a.unit[i][2] == lc[l].leaf && !p->a.spare[i]) {
				p->a.spare[i] = true;
				extra--;
			}
		}
	}
	free(lc);
	return 0;
}

static void set_weights(struct placer *p)
{
	const unsigned long *bw = p->fab ? p->fab->bandwidth : phx_fabric_default_bandwidth();

	/* ns to move one MiB at bw MB/s, rounded to the nearest ns. */
	for (int l = 0; l < PHX_LEVEL_COUNT; l++) {
		p->a.weight[l] = (1048576000ull + bw[l] / 2) / bw[l];
		p->plan->weight[l] = (unsigned long)p->a.weight[l];
		p->plan->bandwidth[l] = bw[l];
	}
}

/* ---------------------------------------------------------------- strategies */

static void name_strategy(struct candidate *c)
{
	size_t off = 0;

	c->name[0] = '\0';
	for (unsigned f = 0; f < c->s.n && off < sizeof(c->name); f++) {
		if (c->s.split[f])
			off += (size_t)snprintf(c->name + off, sizeof(c->name) - off, "%s%s[%lu]",
						f ? "," : "", phx_dim_name(c->s.dim[f]),
						c->s.size[f]);
		else
			off += (size_t)snprintf(c->name + off, sizeof(c->name) - off, "%s%s",
						f ? "," : "", phx_dim_name(c->s.dim[f]));
	}
	if (!c->s.n)
		snprintf(c->name, sizeof(c->name), "-");
}

static void push_factor(struct pl_strategy *s, enum phx_dim d, unsigned long size,
			unsigned long stride, bool split)
{
	s->dim[s->n] = d;
	s->size[s->n] = size;
	s->stride[s->n] = stride;
	s->split[s->n] = split;
	s->n++;
}

static void add_candidate(struct placer *p, const struct pl_strategy *s, bool hostname)
{
	struct candidate *c;

	if (p->n_cand == MAX_STRATEGIES)
		return;
	c = &p->cand[p->n_cand++];
	memset(c, 0, sizeof(*c));
	c->s = *s;
	c->hostname = hostname;
	if (hostname)
		snprintf(c->name, sizeof(c->name), "host-name order");
	else
		name_strategy(c);
}

static bool next_permutation(unsigned *a, unsigned n)
{
	unsigned i = n - 1, j = n - 1, t;

	if (n < 2)
		return false;
	while (i > 0 && a[i - 1] >= a[i])
		i--;
	if (i == 0)
		return false;
	while (a[j] <= a[i - 1])
		j--;
	t = a[i - 1];
	a[i - 1] = a[j];
	a[j] = t;
	for (j = n - 1; i < j; i++, j--) {
		t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
	return true;
}

/*
 * Nesting a dimension innermost that carries half the traffic or less of a
 * heavier one fitting in a node only spreads the heavier one's groups;
 * such orders never won in any case measured and are not tried.
 */
static bool light_inside(const struct placer *p, unsigned d)
{
	const struct phx_layout *l = p->a.layout;

	for (unsigned e = 0; e < PHX_DIM_COUNT; e++) {
		if (l->size[e] > 1 && l->size[e] <= p->a.gpn &&
		    p->a.traffic[d] * 2 <= p->a.traffic[e] && p->a.traffic[d] < p->a.traffic[e])
			return true;
	}
	return false;
}

/*
 * Every order of the dimensions larger than 1, and for pp x dp the pipeline
 * cut into an inner part that stays with its neighbours and an outer part
 * outside the data-parallel groups: fewer data-parallel groups then meet in
 * each leaf, at the price of some pipeline hops between leaves.
 */
static void add_strategies(struct placer *p)
{
	const struct phx_layout *l = p->a.layout;
	unsigned act[PHX_DIM_COUNT], n = 0, inner[PHX_DIM_COUNT], n_inner = 0;
	unsigned long P = l->size[PHX_DIM_PP];
	struct pl_strategy s = { 0 };

	for (unsigned d = 0; d < PHX_DIM_COUNT; d++) {
		if (l->size[d] > 1)
			act[n++] = d;
		if (l->size[d] > 1 && d != PHX_DIM_DP && d != PHX_DIM_PP)
			inner[n_inner++] = d;
	}
	do {
		if (n && light_inside(p, act[0]))
			continue;
		s.n = 0;
		for (unsigned i = 0; i < n; i++)
			push_factor(&s, act[i], l->size[act[i]], phx_layout_stride(l, act[i]),
				    false);
		add_candidate(p, &s, false);
	} while (next_permutation(act, n));
	if (l->size[PHX_DIM_DP] < 2 || P < 3)
		return;
	do {
		for (unsigned long q = 2; q < P; q++) {
			unsigned long st = phx_layout_stride(l, PHX_DIM_PP);

			if (P % q)
				continue;
			s.n = 0;
			for (unsigned i = 0; i < n_inner; i++)
				push_factor(&s, inner[i], l->size[inner[i]],
					    phx_layout_stride(l, inner[i]), false);
			push_factor(&s, PHX_DIM_PP, q, st, true);
			push_factor(&s, PHX_DIM_DP, l->size[PHX_DIM_DP],
				    phx_layout_stride(l, PHX_DIM_DP), false);
			push_factor(&s, PHX_DIM_PP, P / q, st * q, true);
			add_candidate(p, &s, false);
		}
	} while (n_inner > 1 && next_permutation(inner, n_inner));
}

/* Slurm's block distribution: rank r on the r / gpn-th node in name order. */
static void block_order(const struct pl_alloc *a, bool skip_spares, uint32_t *rank_node,
			uint16_t *rank_gpu)
{
	size_t node = 0;
	unsigned gpu = 0;

	for (unsigned long r = 0; r < a->world; r++) {
		while (skip_spares && a->spare[node])
			node++;
		rank_node[r] = (uint32_t)node;
		rank_gpu[r] = (uint16_t)gpu;
		if (++gpu == a->gpn) {
			gpu = 0;
			node++;
		}
	}
}

static void realize(struct placer *p, const struct candidate *c, uint32_t *rank_node,
		    uint16_t *rank_gpu)
{
	if (c->hostname)
		block_order(&p->a, true, rank_node, rank_gpu);
	else
		phx_pl_pack(p->tree, &c->s, rank_node, rank_gpu);
}

/*
 * The shorter step by the link model first; among equals the lower summed
 * group cost, then the least cross-leaf traffic.
 */
static bool better(const struct phx_plan_cost *c, const struct phx_plan_cost *b)
{
	if (c->step_ns != b->step_ns)
		return c->step_ns < b->step_ns;
	if (c->total != b->total)
		return c->total < b->total;
	return c->cross_leaf_mib < b->cross_leaf_mib;
}

/* The best candidate; among equals the first tried. */
static size_t choose(const struct placer *p)
{
	size_t best = 0;

	for (size_t i = 1; i < p->n_cand; i++) {
		if (better(&p->cand[i].cost, &p->cand[best].cost))
			best = i;
	}
	return best;
}

/*
 * The link model takes a step to be as long as its busiest link; flows
 * held back on one link leave others idle, so maps it rates alike or close
 * can differ by a fifth in the time their flows take sharing the links
 * (placement_share.c, what a flow-level simulation gives). Up to
 * SHARED_RANKS ranks, candidates are compared by that time; the passes
 * after it bring the busiest link down. A flow never moves faster than
 * its busiest link lets it, so candidates are tried in the link model's
 * order until one's busiest link alone takes as long as the shortest
 * shared time found: most often the first is as short as its busiest link
 * and is the only one run.
 */
#define SHARED_RANKS 2048ul

static int by_cost(const void *x, const void *y, void *ctx)
{
	const struct candidate *cand = ctx;
	size_t i = *(const size_t *)x, j = *(const size_t *)y;

	if (better(&cand[i].cost, &cand[j].cost))
		return -1;
	if (better(&cand[j].cost, &cand[i].cost))
		return 1;
	return i < j ? -1 : i > j;
}

/* The candidate whose flows end first when they share links; 0 or -1 (memory). */
static int choose_shared(struct placer *p, size_t *best)
{
	size_t *order = calloc(p->n_cand, sizeof(*order));
	uint64_t least = UINT64_MAX;

	if (!order)
		return fail(p, "out of memory");
	for (size_t i = 0; i < p->n_cand; i++)
		order[i] = i;
	qsort_r(order, p->n_cand, sizeof(*order), by_cost, p->cand);
	for (size_t k = 0; k < p->n_cand && p->cand[order[k]].cost.step_ns < least; k++) {
		uint64_t ns;

		realize(p, &p->cand[order[k]], p->plan->rank_node, p->plan->rank_gpu);
		if (phx_pl_shared_time(&p->a, p->plan->rank_node, &ns) < 0) {
			free(order);
			return fail(p, "out of memory");
		}
		if (ns < least) {
			least = ns;
			*best = order[k];
		}
	}
	free(order);
	return 0;
}

/* A map's group cost and its step by the link model; 0 or -1 (memory). */
static int cost_of_map(struct placer *p, const uint32_t *map, struct phx_plan_cost *cost)
{
	return phx_pl_cost(&p->a, map, cost) < 0 || phx_pl_step_time(&p->a, map, &cost->step_ns) < 0
		       ? -1
		       : 0;
}

static int price(struct placer *p, size_t from)
{
	struct phx_plan *plan = p->plan;

	for (size_t i = from; i < p->n_cand; i++) {
		realize(p, &p->cand[i], plan->rank_node, plan->rank_gpu);
		if (cost_of_map(p, plan->rank_node, &p->cand[i].cost) < 0)
			return fail(p, "out of memory");
		if (p->in->on_candidate)
			p->in->on_candidate(p->in->candidate_ctx, p->cand[i].name, plan->rank_node);
	}
	return 0;
}

/* After changed (< 0: out of memory) moves of the plan's map, its cost and step again. */
static int reprice(struct placer *p, long changed)
{
	if (changed < 0 || (changed && cost_of_map(p, p->plan->rank_node, &p->plan->cost) < 0))
		return fail(p, "out of memory");
	return 0;
}

/*
 * The best VARIANT_BASES nestings are packed again with the other fits:
 * first fit, and stages in order (placement_int.h). The fit changes what
 * shares a leaf or a domain, rarely which nesting is best, and this keeps
 * the search short.
 */
#define VARIANT_BASES 2

static void add_variants(struct placer *p, size_t n_base)
{
	static const struct {
		enum pl_fit fit;
		const char *suffix;
	} fits[] = { { PL_FIT_FIRST, "/first-fit" }, { PL_FIT_IN_ORDER, "/in-order" } };
	bool taken[MAX_STRATEGIES] = { false };

	for (unsigned k = 0; k < VARIANT_BASES; k++) {
		size_t best = n_base;

		for (size_t i = 0; i < n_base; i++) {
			const struct phx_plan_cost *c = &p->cand[i].cost, *b;

			if (taken[i] || p->cand[i].hostname)
				continue;
			b = best < n_base ? &p->cand[best].cost : NULL;
			if (!b || better(c, b))
				best = i;
		}
		if (best == n_base)
			return;
		taken[best] = true;
		for (size_t f = 0; f < sizeof(fits) / sizeof(fits[0]); f++) {
			struct pl_strategy v = p->cand[best].s;
			struct candidate *c;

			if (p->n_cand == MAX_STRATEGIES)
				return;
			v.fit = fits[f].fit;
			add_candidate(p, &v, false);
			c = &p->cand[p->n_cand - 1];
			snprintf(c->name + strlen(c->name), sizeof(c->name) - strlen(c->name), "%s",
				 fits[f].suffix);
		}
	}
}

/*
 * The passes from candidate c: node swaps, pipeline ends to the busiest
 * links, spreading. The map is left in plan->rank_node and rank_gpu, its
 * cost in plan->cost, how it was made in plan->strategy. 0 or -1.
 */
static int improve(struct placer *p, size_t c)
{
	struct phx_plan *plan = p->plan;
	long swaps, trades, spread;

	realize(p, &p->cand[c], plan->rank_node, plan->rank_gpu);
	plan->cost = p->cand[c].cost;
	swaps = phx_pl_refine(&p->a, plan->rank_node);
	if (reprice(p, swaps) < 0)
		return -1;
	/* The swaps lower the group cost; a longer step undoes them. */
	if (swaps && plan->cost.step_ns > p->cand[c].cost.step_ns) {
		realize(p, &p->cand[c], plan->rank_node, plan->rank_gpu);
		plan->cost = p->cand[c].cost;
		swaps = 0;
	}
	trades = phx_pl_ends(&p->a, plan->rank_node, plan->step_bound_ns);
	if (reprice(p, trades) < 0)
		return -1;
	spread = phx_pl_spread(&p->a, plan->rank_node);
	if (reprice(p, spread) < 0)
		return -1;
	snprintf(plan->strategy, sizeof(plan->strategy), "%.72s%s%s%s", p->cand[c].name,
		 swaps ? "+swaps" : "", trades ? "+ends" : "", spread ? "+spread" : "");
	return 0;
}

/*
 * The plan made from alt as well, kept if its flows end first when they
 * share links and its busiest link is no busier; else the plan made from
 * the link model's best, as it was. 0 or -1 (memory).
 */
static int try_alternative(struct placer *p, size_t alt)
{
	struct phx_plan *plan = p->plan;
	uint32_t *node = malloc(plan->world * sizeof(*node));
	uint16_t *gpu = malloc(plan->world * sizeof(*gpu));
	struct phx_plan_cost cost = plan->cost;
	char strategy[sizeof(plan->strategy)];
	uint64_t first, second;
	int rc = -1;

	if (!node || !gpu || phx_pl_shared_time(&p->a, plan->rank_node, &first) < 0) {
		rc = fail(p, "out of memory");
		goto out;
	}
	memcpy(node, plan->rank_node, plan->world * sizeof(*node));
	memcpy(gpu, plan->rank_gpu, plan->world * sizeof(*gpu));
	memcpy(strategy, plan->strategy, sizeof(strategy));
	if (improve(p, alt) < 0)
		goto out;
	if (phx_pl_shared_time(&p->a, plan->rank_node, &second) < 0) {
		rc = fail(p, "out of memory");
		goto out;
	}
	if (second >= first || plan->cost.step_ns > cost.step_ns) {
		memcpy(plan->rank_node, node, plan->world * sizeof(*node));
		memcpy(plan->rank_gpu, gpu, plan->world * sizeof(*gpu));
		memcpy(plan->strategy, strategy, sizeof(strategy));
		plan->cost = cost;
	}
	rc = 0;
out:
	free(node);
	free(gpu);
	return rc;
}

static int search(struct placer *p)
{
	struct phx_plan *plan = p->plan;
	struct pl_strategy none = { 0 };
	size_t best, alt, n_base;

	p->cand = calloc(MAX_STRATEGIES, sizeof(*p->cand));
	if (!p->cand || phx_pl_tree_build(&p->a, &p->tree) < 0)
		return fail(p, "out of memory");
	add_strategies(p);
	add_candidate(p, &none, true);
	n_base = p->n_cand;
	if (price(p, 0) < 0)
		return -1;
	add_variants(p, n_base);
	if (price(p, n_base) < 0)
		return -1;
	alt = best = choose(p);
	if (p->a.world <= SHARED_RANKS && choose_shared(p, &alt) < 0)
		return -1;
	if (phx_pl_step_bound(&p->a, &plan->step_bound_ns) < 0)
		return fail(p, "out of memory");
	if (improve(p, best) < 0)
		return -1;
	return alt == best ? 0 : try_alternative(p, alt);
}

/* ---------------------------------------------------------------- slow nodes */

struct holder {
	uint64_t cls; /* nodes of one class can trade their ranks */
	uint32_t node;
	unsigned used; /* ranks on it */
	unsigned long last; /* its highest rank */
};

/* Nodes of one class can trade all their ranks without changing any cost. */
static uint64_t swap_class(const struct pl_alloc *a, size_t i)
{
	if (a->unit[i][1] < a->n_units[1] - a->n_nodes)
		return a->unit[i][1];
	return (uint64_t)a->n_units[1] + a->unit[i][2];
}

static int by_class(const void *x, const void *y)
{
	const struct holder *a = x, *b = y;

	if (a->cls != b->cls)
		return a->cls < b->cls ? -1 : 1;
	return a->node < b->node ? -1 : a->node > b->node;
}

/* Least harm first: fewest ranks, then the last ranks, then node order. */
static int by_harm(const void *x, const void *y)
{
	const struct holder *a = x, *b = y;

	if (a->used != b->used)
		return a->used < b->used ? -1 : 1;
	if (a->last != b->last)
		return a->last > b->last ? -1 : 1;
	return a->node < b->node ? -1 : a->node > b->node;
}

/* Pairs slow nodes holding harmful work with healthy nodes holding harmless work. */
static void trade_class(const struct pl_alloc *a, struct holder *cls, size_t k, uint32_t *to)
{
	size_t n_slow = 0, i = 0, j = 0;

	for (size_t x = 0; x < k; x++)
		n_slow += a->slow[cls[x].node];
	if (!n_slow || n_slow == k)
		return;
	qsort(cls, k, sizeof(*cls), by_harm);
	/* cls[0 .. n_slow-1] is the harmless work the slow nodes should hold. */
	for (;;) {
		while (i < n_slow && a->slow[cls[i].node])
			i++;
		while (j < k && (j < n_slow || !a->slow[cls[j].node]))
			j++;
		if (i == n_slow || j == k)
			return;
		to[cls[i].node] = cls[j].node;
		to[cls[j].node] = cls[i].node;
		i++;
		j++;
	}
}

/*
 * Slow nodes in use take the least harmful work of their class: unused
 * GPUs first, then the highest ranks. Trading whole nodes inside one NVLink
 * domain, or between domain-less nodes of one leaf, keeps every group at
 * the level it was, so no cost changes.
 */
static int move_slow(struct placer *p)
{
	const struct pl_alloc *a = &p->a;
	uint32_t *rank_node = p->plan->rank_node, *to;
	struct holder *h;
	size_t k = 0;

	h = calloc(a->n_nodes, sizeof(*h));
	to = calloc(a->n_nodes, sizeof(*to));
	if (!h || !to) {
		free(h);
		free(to);
		return fail(p, "out of memory");
	}
	for (size_t i = 0; i < a->n_nodes; i++) {
		to[i] = (uint32_t)i;
		h[i].node = (uint32_t)i;
		h[i].cls = swap_class(a, i);
	}
	for (unsigned long r = 0; r < a->world; r++) {
		h[rank_node[r]].used++;
		h[rank_node[r]].last = r;
	}
	for (size_t i = 0; i < a->n_nodes; i++) {
		if (!a->spare[i])
			h[k++] = h[i];
	}
	qsort(h, k, sizeof(*h), by_class);
	for (size_t i = 0, j; i < k; i = j) {
		for (j = i + 1; j < k && h[j].cls == h[i].cls; j++)
			;
		trade_class(a, h + i, j - i, to);
	}
	for (unsigned long r = 0; r < a->world; r++)
		rank_node[r] = to[rank_node[r]];
	free(h);
	free(to);
	return 0;
}

/* ---------------------------------------------------------------- result */

static int baseline(struct placer *p)
{
	uint32_t *rank_node = calloc(p->a.world, sizeof(*rank_node));
	uint16_t *rank_gpu = calloc(p->a.world, sizeof(*rank_gpu));
	int rc = -1;

	if (rank_node && rank_gpu) {
		block_order(&p->a, false, rank_node, rank_gpu);
		rc = cost_of_map(p, rank_node, &p->plan->hostname);
	}
	free(rank_node);
	free(rank_gpu);
	return rc < 0 ? fail(p, "out of memory") : 0;
}

/* The plan keeps its own copies of the fabric's names. */
static int copy_names(struct placer *p, char *const *src, size_t n, const char ***dst)
{
	*dst = calloc(n + 1, sizeof(**dst));
	if (!*dst || add_string(p->plan, (char *)*dst) < 0)
		return fail(p, "out of memory");
	for (size_t i = 0; i < n; i++) {
		char *copy = strdup(src[i]);

		if (add_string(p->plan, copy) < 0)
			return fail(p, "out of memory");
		(*dst)[i] = copy;
	}
	return 0;
}

static int fill_nodes(struct placer *p)
{
	const struct phx_fabric *f = p->fab;
	struct phx_plan *plan = p->plan;
	const char **leaf = NULL, **spine = NULL, **dom = NULL;

	plan->nodes = calloc(p->a.n_nodes, sizeof(*plan->nodes));
	if (!plan->nodes)
		return fail(p, "out of memory");
	plan->n_nodes = p->a.n_nodes;
	if (f && (copy_names(p, f->leaves, f->n_leaves, &leaf) < 0 ||
		  copy_names(p, f->spines, f->n_spines, &spine) < 0 ||
		  copy_names(p, f->domains, f->n_domains, &dom) < 0))
		return -1;
	for (size_t i = 0; i < p->a.n_nodes; i++) {
		struct phx_plan_node *n = &plan->nodes[i];
		const uint32_t *u = p->a.unit[i];

		if (!(n->name = strdup(name_of(p, i))))
			return fail(p, "out of memory");
		n->leaf = leaf ? leaf[u[2]] : "";
		n->spine = spine ? spine[u[3]] : "";
		n->domain = dom && u[1] < f->n_domains ? dom[u[1]] : "";
		n->flags = (p->a.slow[i] ? PHX_PLAN_NODE_SLOW : 0) |
			   (p->a.spare[i] ? PHX_PLAN_NODE_SPARE : 0);
	}
	for (unsigned long r = 0; r < p->a.world; r++)
		plan->nodes[plan->rank_node[r]].used_gpus++;
	return 0;
}

static int warn_tp(struct placer *p)
{
	unsigned long tp = p->a.layout->size[PHX_DIM_TP], widest = p->a.gpn;
	uint32_t n_dom = p->a.n_units[1] - (uint32_t)p->a.n_nodes;
	unsigned long *gpus;

	if (tp <= p->a.gpn)
		return 0;
	gpus = calloc(n_dom + 1, sizeof(*gpus));
	if (!gpus)
		return fail(p, "out of memory");
	for (size_t i = 0; i < p->a.n_nodes; i++) {
		if (p->a.unit[i][1] < n_dom && !p->a.spare[i] &&
		    (gpus[p->a.unit[i][1]] += p->a.gpn) > widest)
			widest = gpus[p->a.unit[i][1]];
	}
	free(gpus);
	if (tp <= widest)
		return 0;
	if (widest == p->a.gpn)
		return warn(p,
			    "tp=%lu is larger than a node (%u GPUs): tensor-parallel traffic "
			    "crosses the network",
			    tp, p->a.gpn);
	return warn(p,
		    "tp=%lu is larger than a node (%u GPUs) and than any NVLink domain of the "
		    "allocation (%lu GPUs): tensor-parallel traffic crosses the network",
		    tp, p->a.gpn, widest);
}

static int warn_slow(struct placer *p)
{
	char list[256] = "";
	size_t n = 0, used = 0;

	for (size_t i = 0; i < p->a.n_nodes; i++) {
		if (!p->a.slow[i] || p->a.spare[i])
			continue;
		if (n++ < 8 && used < sizeof(list))
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%.40s",
						 used ? "," : "", name_of(p, i));
	}
	if (!n)
		return 0;
	return warn(p,
		    "%zu slow node%s in use for lack of spares (%s%s); they hold the last ranks of "
		    "their switch",
		    n, n == 1 ? "" : "s", list, n > 8 ? ",..." : "");
}

static void free_alloc(struct pl_alloc *a)
{
	free(a->unit);
	free(a->slow);
	free(a->spare);
}

static void free_placer(struct placer *p)
{
	free(p->order);
	free_alloc(&p->a);
	free(p->cand);
	phx_pl_tree_free(p->tree);
}

/* The plan keeps the allocation (its layout points into the plan) to price other maps. */
static int keep_alloc(struct placer *p)
{
	p->plan->alloc = malloc(sizeof(*p->plan->alloc));
	if (!p->plan->alloc)
		return fail(p, "out of memory");
	*p->plan->alloc = p->a;
	p->a.unit = NULL;
	p->a.slow = p->a.spare = NULL;
	return 0;
}

static int setup(struct placer *p)
{
	struct phx_plan *plan = p->plan;

	plan->layout = *p->in->layout;
	plan->world = plan->layout.world;
	plan->gpus_per_node = p->in->gpus_per_node;
	if (p->in->traffic)
		plan->traffic = *p->in->traffic;
	else
		phx_traffic_defaults(&plan->traffic);
	p->a.layout = &plan->layout;
	p->a.world = plan->world;
	p->a.gpn = plan->gpus_per_node;
	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		if (plan->traffic.mib[d] > PHX_TRAFFIC_MAX_MIB)
			return fail(p, "traffic for %s is above %lu MiB", phx_dim_name(d),
				    PHX_TRAFFIC_MAX_MIB);
		p->a.traffic[d] = plan->traffic.mib[d];
	}
	plan->rank_node = calloc(plan->world, sizeof(*plan->rank_node));
	plan->rank_gpu = calloc(plan->world, sizeof(*plan->rank_gpu));
	if (!plan->rank_node || !plan->rank_gpu)
		return fail(p, "out of memory for %lu ranks", plan->world);
	set_weights(p);
	return 0;
}

int phx_place(const struct phx_place_input *in, struct phx_plan **out, char *err, size_t errlen)
{
	struct placer p = { .in = in, .fab = in->fabric, .err = err, .errlen = errlen };

	*out = NULL;
	if (check_input(&p) < 0)
		return -1;
	p.plan = calloc(1, sizeof(*p.plan));
	if (!p.plan)
		return fail(&p, "out of memory");
	if (setup(&p) < 0 || sort_allocation(&p) < 0 || locate_nodes(&p) < 0 || mark_slow(&p) < 0 ||
	    choose_spares(&p) < 0 || search(&p) < 0 || move_slow(&p) < 0 || baseline(&p) < 0 ||
	    fill_nodes(&p) < 0 || warn_tp(&p) < 0 || warn_slow(&p) < 0)
		goto fail;
	if (keep_alloc(&p) < 0)
		goto fail;
	free_placer(&p);
	*out = p.plan;
	return 0;
fail:
	free_placer(&p);
	phx_plan_free(p.plan);
	return -1;
}

void phx_plan_free(struct phx_plan *plan)
{
	if (!plan)
		return;
	for (size_t i = 0; plan->nodes && i < plan->n_nodes; i++)
		free(plan->nodes[i].name);
	for (size_t i = 0; i < plan->n_warnings; i++)
		free(plan->warnings[i]);
	for (size_t i = 0; i < plan->n_strings; i++)
		free(plan->strings[i]);
	free(plan->nodes);
	free(plan->rank_node);
	free(plan->rank_gpu);
	free(plan->warnings);
	free(plan->strings);
	if (plan->alloc)
		free_alloc(plan->alloc);
	free(plan->alloc);
	free(plan);
}

int phx_plan_lower_bound(const struct phx_plan *plan, uint64_t *bound)
{
	return phx_pl_lower_bound(plan->alloc, bound);
}

int phx_plan_step_times(const struct phx_plan *plan, const uint32_t *rank_node,
			struct phx_step_times *times)
{
	unsigned *used = calloc(plan->n_nodes + 1, sizeof(*used));
	int rc = -1;

	if (!used) {
		errno = ENOMEM;
		return -1;
	}
	for (unsigned long r = 0; r < plan->world; r++) {
		if (rank_node[r] >= plan->n_nodes || ++used[rank_node[r]] > plan->gpus_per_node) {
			errno = EINVAL;
			goto out;
		}
	}
	if (phx_pl_step_time(plan->alloc, rank_node, &times->link_ns) < 0 ||
	    phx_pl_shared_time(plan->alloc, rank_node, &times->shared_ns) < 0) {
		errno = ENOMEM;
		goto out;
	}
	rc = 0;
out:
	free(used);
	return rc;
}
