/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The link model: how long one step's communication takes, as the time of
 * its busiest link. The step is a set of flows moving at once: tp, cp and
 * dp groups are rings (each member sends its MiB to the next: what ring
 * reduce-scatter plus all-gather moves), ep groups all-to-all (each member
 * sends its MiB split over the others), each pipeline hop half its MiB
 * forward and half back. A flow inside an NVLink unit (node or domain)
 * takes the sender's and the receiver's NVLink ports, at the node
 * bandwidth per GPU; any other flow the two nodes' NICs, which NCCL's
 * channels use all of whichever GPU sends (the leaf bandwidth times the
 * GPUs of the node), and between leaves both leaves' uplinks, between
 * spines both spines' uplinks, at the spine or core bandwidth per GPU the
 * job holds under them (spare nodes too): the share each GPU has of an
 * oversubscribed uplink on a full cluster. No link can carry its load
 * faster, so this is a lower bound on the step's communication time; with
 * flows sharing links fairly it is also close to it
 * (tests/bench/placement_sim checks both with SimGrid), and unlike the
 * per-group cost it sees rings piling onto one uplink.
 */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement_int.h"

enum port { NVL_OUT, NVL_IN, PORTS };
enum nic { NIC_OUT, NIC_IN, NICS };

/* The two switch levels with uplinks: leaf and spine. */
#define UPLINK_LEVELS 2

struct pl_links {
	const struct pl_alloc *a;
	uint32_t *gpu; /* per rank: node * gpn + its place among the node's ranks */
	uint64_t *port[PORTS]; /* per GPU, KiB */
	uint64_t *nic[NICS]; /* per node, KiB */
	uint64_t *up[UPLINK_LEVELS], *down[UPLINK_LEVELS]; /* per leaf, per spine, KiB */
	uint32_t *gpus[UPLINK_LEVELS]; /* the allocation's GPUs under each leaf, spine */
	/* For trades (phx_pl_links_trade): */
	uint32_t *rank_node; /* the caller's map */
	unsigned long *by_node, *node_first; /* ranks of node n: by_node[node_first[n] ..] */
	unsigned *node_used;
	bool *moving; /* per rank */
};

static void add_flow(struct pl_links *l, uint32_t src, uint32_t dst, uint64_t kib)
{
	const uint32_t *u0 = l->a->unit[src / l->a->gpn], *u1 = l->a->unit[dst / l->a->gpn];

	if (u0[PHX_LEVEL_NVLINK] == u1[PHX_LEVEL_NVLINK]) {
		l->port[NVL_OUT][src] += kib;
		l->port[NVL_IN][dst] += kib;
		return;
	}
	l->nic[NIC_OUT][src / l->a->gpn] += kib;
	l->nic[NIC_IN][dst / l->a->gpn] += kib;
	for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
		uint32_t from = u0[PHX_LEVEL_LEAF + v], to = u1[PHX_LEVEL_LEAF + v];

		if (from == to)
			break;
		l->up[v][from] += kib;
		l->down[v][to] += kib;
	}
}

void phx_pl_gpu_of_ranks(const struct pl_alloc *a, const uint32_t *rank_node, uint32_t *taken,
			 uint32_t *gpu)
{
	for (unsigned long r = 0; r < a->world; r++)
		gpu[r] = rank_node[r] * a->gpn + taken[rank_node[r]]++;
}

unsigned long *phx_pl_unit_gpus(const struct pl_alloc *a, unsigned level)
{
	unsigned long *gpus = calloc(a->n_units[level] + 1, sizeof(*gpus));

	for (size_t i = 0; gpus && i < a->n_nodes; i++)
		gpus[a->unit[i][level]] += a->gpn;
	return gpus;
}

uint64_t phx_pl_flow_kib(const struct pl_alloc *a, enum phx_dim d)
{
	uint64_t kib = a->traffic[d] * 1024;
	unsigned long size = a->layout->size[d];

	if (size < 2)
		return 0;
	return d == PHX_DIM_EP ? kib / (size - 1) : d == PHX_DIM_PP ? kib / 2 : kib;
}

/* All-to-all groups up to this size are counted per unit; larger ones flow by flow. */
#define A2A_COUNTED 64

/*
 * An all-to-all group: every member sends kib to every other, so each link
 * carries kib times the members on its far side. Counting them per unit
 * gives add_flow()'s sums with O(size) link updates, not O(size^2).
 */
static void add_all_to_all(struct pl_links *l, unsigned long r0, unsigned long stride,
			   unsigned long size, uint64_t kib)
{
	const struct pl_alloc *a = l->a;
	uint32_t unit[A2A_COUNTED][PL_SUB_LEVELS];
	bool one_unit = true;

	for (unsigned long i = 0; i < size; i++) {
		memcpy(unit[i], a->unit[l->gpu[r0 + i * stride] / a->gpn], sizeof(unit[i]));
		one_unit = one_unit && unit[i][PHX_LEVEL_NVLINK] == unit[0][PHX_LEVEL_NVLINK];
	}
	for (unsigned long i = 0; one_unit && i < size; i++) {
		l->port[NVL_OUT][l->gpu[r0 + i * stride]] += kib * (size - 1);
		l->port[NVL_IN][l->gpu[r0 + i * stride]] += kib * (size - 1);
	}
	for (unsigned long i = 0; !one_unit && i < size; i++) {
		uint32_t g = l->gpu[r0 + i * stride];
		uint64_t same[PL_SUB_LEVELS] = { 0 };

		for (unsigned long j = 0; j < size; j++) {
			for (unsigned lv = PHX_LEVEL_NVLINK; lv < PL_SUB_LEVELS; lv++)
				same[lv] += unit[i][lv] == unit[j][lv];
		}
		/* Members in its NVLink unit over NVLink, the rest through its NIC. */
		l->port[NVL_OUT][g] += kib * (same[PHX_LEVEL_NVLINK] - 1);
		l->port[NVL_IN][g] += kib * (same[PHX_LEVEL_NVLINK] - 1);
		l->nic[NIC_OUT][g / a->gpn] += kib * (size - same[PHX_LEVEL_NVLINK]);
		l->nic[NIC_IN][g / a->gpn] += kib * (size - same[PHX_LEVEL_NVLINK]);
		for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
			uint64_t out = size - same[PHX_LEVEL_LEAF + v];

			l->up[v][unit[i][PHX_LEVEL_LEAF + v]] += kib * out;
			l->down[v][unit[i][PHX_LEVEL_LEAF + v]] += kib * out;
		}
	}
}

static void add_group(const struct pl_alloc *a, const uint32_t *gpu,
		      const struct pl_flow_sink *sink, enum phx_dim d, unsigned long r0,
		      unsigned long stride, unsigned long size)
{
	uint64_t kib = phx_pl_flow_kib(a, d);

	if (d == PHX_DIM_EP && sink->all_to_all && size <= A2A_COUNTED) {
		sink->all_to_all(sink->ctx, r0, stride, size, kib);
		return;
	}
	for (unsigned long i = 0; i < size; i++) {
		uint32_t src = gpu[r0 + i * stride];

		if (d != PHX_DIM_EP) {
			sink->flow(sink->ctx, src, gpu[r0 + (i + 1) % size * stride], kib);
			continue;
		}
		for (unsigned long j = 0; j < size; j++) {
			if (j != i)
				sink->flow(sink->ctx, src, gpu[r0 + j * stride], kib);
		}
	}
}

void phx_pl_step_flows(const struct pl_alloc *a, const uint32_t *gpu,
		       const struct pl_flow_sink *sink)
{
	const struct phx_layout *lay = a->layout;
	uint64_t half = phx_pl_flow_kib(a, PHX_DIM_PP);

	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		unsigned long stride = phx_layout_stride(lay, (enum phx_dim)d), size = lay->size[d];

		if (size < 2 || !a->traffic[d])
			continue;
		for (unsigned long hi = 0; hi < a->world; hi += stride * size) {
			for (unsigned long lo = 0; lo < stride; lo++) {
				if (d != PHX_DIM_PP) {
					add_group(a, gpu, sink, (enum phx_dim)d, hi + lo, stride,
						  size);
					continue;
				}
				for (unsigned long s = 0; s + 1 < size; s++) {
					uint32_t g0 = gpu[hi + lo + s * stride];
					uint32_t g1 = gpu[hi + lo + (s + 1) * stride];

					sink->flow(sink->ctx, g0, g1, half);
					sink->flow(sink->ctx, g1, g0, half);
				}
			}
		}
	}
}

static void sink_flow(void *ctx, uint32_t src, uint32_t dst, uint64_t kib)
{
	add_flow(ctx, src, dst, kib);
}

static void sink_all_to_all(void *ctx, unsigned long r0, unsigned long stride, unsigned long size,
			    uint64_t kib)
{
	add_all_to_all(ctx, r0, stride, size, kib);
}

static void add_step(struct pl_links *l)
{
	phx_pl_step_flows(l->a, l->gpu,
			  &(struct pl_flow_sink){
				  .flow = sink_flow, .all_to_all = sink_all_to_all, .ctx = l });
}

/* A link's time, ns x 1024; the busiest kept in *w with how many share it. */
static void consider(struct pl_worst *w, double t, enum pl_link kind, uint32_t where)
{
	w->sq += t * t;
	/* Times are sums of the same terms: equal ones come out equal. */
	if (t > w->t) {
		*w = (struct pl_worst){
			.t = t, .sq = w->sq, .kind = kind, .where = where, .tied = 1
		};
	} else if (t == w->t && t > 0) {
		w->tied++;
	}
}

static void busiest(const struct pl_links *l, struct pl_worst *w)
{
	const struct pl_alloc *a = l->a;
	size_t gpus = a->n_nodes * a->gpn;

	*w = (struct pl_worst){ 0 };
	for (size_t g = 0; g < gpus; g++) {
		for (int p = 0; p < PORTS; p++)
			consider(w, (double)l->port[p][g] * (double)a->weight[PHX_LEVEL_NODE],
				 PL_LINK_NVLINK, (uint32_t)g);
	}
	for (size_t n = 0; n < a->n_nodes; n++) {
		for (int p = 0; p < NICS; p++)
			consider(w,
				 (double)l->nic[p][n] * (double)a->weight[PHX_LEVEL_LEAF] / a->gpn,
				 PL_LINK_NIC, (uint32_t)n);
	}
	for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
		for (uint32_t u = 0; u < a->n_units[PHX_LEVEL_LEAF + v]; u++) {
			for (int up = 0; up < 2; up++) {
				uint64_t kib = up ? l->up[v][u] : l->down[v][u];

				if (kib)
					consider(w,
						 (double)kib *
							 (double)a->weight[PHX_LEVEL_SPINE + v] /
							 (double)l->gpus[v][u],
						 v ? PL_LINK_SPINE : PL_LINK_LEAF, u);
			}
		}
	}
	w->t /= 1024; /* KiB x ns per MiB */
	w->sq /= 1024.0 * 1024.0;
}

static void loads_free(struct pl_links *l)
{
	free(l->gpu);
	for (int p = 0; p < PORTS; p++)
		free(l->port[p]);
	for (int p = 0; p < NICS; p++)
		free(l->nic[p]);
	for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
		free(l->up[v]);
		free(l->down[v]);
		free(l->gpus[v]);
	}
}

static int loads_init(struct pl_links *l, const struct pl_alloc *a, const uint32_t *rank_node)
{
	size_t gpus = a->n_nodes * a->gpn;
	uint32_t *taken;

	*l = (struct pl_links){ .a = a };
	l->gpu = malloc(a->world * sizeof(*l->gpu));
	taken = calloc(a->n_nodes, sizeof(*taken));
	for (int p = 0; p < PORTS; p++) {
		l->port[p] = calloc(gpus, sizeof(*l->port[p]));
		if (!l->port[p])
			goto fail;
	}
	for (int p = 0; p < NICS; p++) {
		l->nic[p] = calloc(a->n_nodes, sizeof(*l->nic[p]));
		if (!l->nic[p])
			goto fail;
	}
	for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
		size_t n = a->n_units[PHX_LEVEL_LEAF + v];

		l->up[v] = calloc(n, sizeof(*l->up[v]));
		l->down[v] = calloc(n, sizeof(*l->down[v]));
		l->gpus[v] = calloc(n, sizeof(*l->gpus[v]));
		if (!l->up[v] || !l->down[v] || !l->gpus[v])
			goto fail;
	}
	if (!l->gpu || !taken)
		goto fail;
	phx_pl_gpu_of_ranks(a, rank_node, taken, l->gpu);
	/* Every node of the allocation: a map may use spares (host-name order does). */
	for (size_t n = 0; n < a->n_nodes; n++) {
		for (unsigned v = 0; v < UPLINK_LEVELS; v++)
			l->gpus[v][a->unit[n][PHX_LEVEL_LEAF + v]] += a->gpn;
	}
	free(taken);
	return 0;
fail:
	free(taken);
	loads_free(l);
	return -1;
}

int phx_pl_links(const struct pl_alloc *a, const uint32_t *rank_node, struct pl_worst *w)
{
	struct pl_links l;

	if (loads_init(&l, a, rank_node) < 0)
		return -1;
	add_step(&l);
	busiest(&l, w);
	loads_free(&l);
	return 0;
}

/* ---------------------------------------------------------------- trades */

/*
 * Every flow rank r sends, and every flow it receives from a rank that is
 * not moving, added (sign 1) or taken off (sign -1: unsigned sums wrap back
 * exactly).
 */
static void rank_flows(struct pl_links *l, unsigned long r, int sign)
{
	const struct phx_layout *lay = l->a->layout;

	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		unsigned long st = phx_layout_stride(lay, (enum phx_dim)d), size = lay->size[d];
		unsigned long i = r / st % size, base = r - i * st;
		uint64_t part = phx_pl_flow_kib(l->a, (enum phx_dim)d);

		if (size < 2 || !l->a->traffic[d])
			continue;
		part = sign > 0 ? part : (uint64_t)0 - part;
		for (unsigned long j = 0; j < size; j++) {
			unsigned long q = base + j * st;
			bool to, from;

			if (d == PHX_DIM_EP)
				to = from = j != i;
			else if (d == PHX_DIM_PP)
				to = from = j + 1 == i || j == i + 1;
			else
				to = j == (i + 1) % size, from = (j + 1) % size == i;
			if (to)
				add_flow(l, l->gpu[r], l->gpu[q], part);
			if (from && !l->moving[q])
				add_flow(l, l->gpu[q], l->gpu[r], part);
		}
	}
}

struct pl_links *phx_pl_links_open(const struct pl_alloc *a, uint32_t *rank_node)
{
	struct pl_links *l = calloc(1, sizeof(*l));
	unsigned long *fill = NULL;

	if (!l || loads_init(l, a, rank_node) < 0) {
		free(l);
		return NULL;
	}
	add_step(l);
	l->rank_node = rank_node;
	l->by_node = malloc((a->world + 1) * sizeof(*l->by_node));
	l->node_first = calloc(a->n_nodes + 1, sizeof(*l->node_first));
	l->node_used = calloc(a->n_nodes + 1, sizeof(*l->node_used));
	l->moving = calloc(a->world + 1, sizeof(*l->moving));
	fill = calloc(a->n_nodes + 1, sizeof(*fill));
	if (!l->by_node || !l->node_first || !l->node_used || !l->moving || !fill) {
		free(fill);
		phx_pl_links_close(l);
		return NULL;
	}
	for (unsigned long r = 0; r < a->world; r++)
		l->node_used[rank_node[r]]++;
	for (size_t n = 1; n < a->n_nodes; n++)
		l->node_first[n] = l->node_first[n - 1] + l->node_used[n - 1];
	for (unsigned long r = 0; r < a->world; r++)
		l->by_node[l->node_first[rank_node[r]] + fill[rank_node[r]]++] = r;
	free(fill);
	return l;
}

void phx_pl_links_worst(const struct pl_links *l, struct pl_worst *w)
{
	busiest(l, w);
}

/* The ranks of node n (they keep their place among its GPUs) onto node m. */
static void move_ranks(struct pl_links *l, uint32_t n, uint32_t m, unsigned long first)
{
	for (unsigned k = 0; k < l->node_used[n]; k++) {
		unsigned long r = l->by_node[first + k];

		l->rank_node[r] = m;
		l->gpu[r] = m * l->a->gpn + l->gpu[r] % l->a->gpn;
	}
}

void phx_pl_links_trade(struct pl_links *l, const uint32_t *xs, const uint32_t *ys, size_t len)
{
	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = 0; k < len; k++) {
			for (int side = 0; side < 2; side++) {
				uint32_t n = side ? ys[k] : xs[k];

				for (unsigned i = 0; i < l->node_used[n]; i++)
					l->moving[l->by_node[l->node_first[n] + i]] = !pass;
			}
		}
		if (pass)
			break;
		/* Off with the old places, on with the new. */
		for (size_t k = 0; k < len; k++) {
			for (unsigned i = 0; i < l->node_used[xs[k]]; i++)
				rank_flows(l, l->by_node[l->node_first[xs[k]] + i], -1);
			for (unsigned i = 0; i < l->node_used[ys[k]]; i++)
				rank_flows(l, l->by_node[l->node_first[ys[k]] + i], -1);
		}
		for (size_t k = 0; k < len; k++) {
			unsigned long fx = l->node_first[xs[k]], fy = l->node_first[ys[k]];

			move_ranks(l, xs[k], ys[k], fx);
			move_ranks(l, ys[k], xs[k], fy);
			/* Node x's ranks are now listed where y's were, and back. */
			l->node_first[xs[k]] = fy;
			l->node_first[ys[k]] = fx;
		}
		for (size_t k = 0; k < len; k++) {
			for (unsigned i = 0; i < l->node_used[xs[k]]; i++)
				rank_flows(l, l->by_node[l->node_first[xs[k]] + i], 1);
			for (unsigned i = 0; i < l->node_used[ys[k]]; i++)
				rank_flows(l, l->by_node[l->node_first[ys[k]] + i], 1);
		}
	}
}

bool phx_pl_links_trade_if(struct pl_links *l, const uint32_t *xs, const uint32_t *ys, size_t len,
			   bool (*better)(const struct pl_worst *now, const struct pl_worst *was),
			   struct pl_worst *w)
{
	struct pl_worst now;

	phx_pl_links_trade(l, xs, ys, len);
	busiest(l, &now);
	if (better(&now, w)) {
		*w = now;
		return true;
	}
	phx_pl_links_trade(l, xs, ys, len);
	return false;
}

void phx_pl_links_close(struct pl_links *l)
{
	if (!l)
		return;
	loads_free(l);
	free(l->by_node);
	free(l->node_first);
	free(l->node_used);
	free(l->moving);
	free(l);
}

int phx_pl_step_time(const struct pl_alloc *a, const uint32_t *rank_node, uint64_t *ns)
{
	struct pl_worst w;

	if (phx_pl_links(a, rank_node, &w) < 0)
		return -1;
	*ns = (uint64_t)w.t;
	return 0;
}
