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
enum updown { DOWN, UP, DIRS };

/* The two switch levels with uplinks: leaf and spine. */
#define UPLINK_LEVELS 2

/*
 * Inlined where the caller's flags are constants: counting a whole step
 * then takes no call and no journal test per flow.
 */
#define INLINE static inline __attribute__((always_inline))

/* A link's load before the trade being priced. */
struct pl_touch {
	size_t link;
	uint64_t kib;
};

/*
 * Every link's load in one array, in the order busiest() scans them: each
 * GPU's NVLink ports, each node's NIC, then per uplink level each unit's
 * links down and up.
 */
struct pl_links {
	const struct pl_alloc *a;
	uint32_t *gpu; /* per rank: node * gpn + its place among the node's ranks */
	int gpn_shift; /* gpn = 1 << gpn_shift, or -1 */
	uint64_t *load; /* per link, KiB */
	size_t nic0, up0[UPLINK_LEVELS], n_links; /* where each kind of link starts */
	uint32_t *gpus[UPLINK_LEVELS]; /* the allocation's GPUs under each leaf, spine */
	/* For trades (phx_pl_links_trade): */
	uint32_t *rank_node; /* the caller's map */
	unsigned long *by_node, *node_first; /* ranks of node n: by_node[node_first[n] ..] */
	unsigned *node_used;
	bool *moving; /* per rank */
	/*
	 * A trade priced from the links it touched (phx_pl_links_trade_if()):
	 * the busiest link now and its place in the scan, and the loads before.
	 */
	struct pl_worst now;
	size_t now_link;
	bool now_known;
	struct pl_touch *touched;
	size_t n_touched;
	bool *mark; /* per link: in touched[] */
	bool *is_touched; /* mark while a trade is priced, else NULL */
};

static size_t port_link(uint32_t gpu, enum port p)
{
	return (size_t)gpu * PORTS + p;
}

static size_t nic_link(const struct pl_links *l, uint32_t node, enum nic p)
{
	return l->nic0 + (size_t)node * NICS + p;
}

static size_t uplink(const struct pl_links *l, unsigned v, uint32_t unit, enum updown dir)
{
	return l->up0[v] + (size_t)unit * DIRS + dir;
}

/*
 * A GPU's node: a shift where GPUs per node are a power of two, as they
 * are (a division costs more than the rest of a flow).
 */
static inline uint32_t node_of(const struct pl_links *l, uint32_t gpu)
{
	return l->gpn_shift >= 0 ? gpu >> l->gpn_shift : gpu / l->a->gpn;
}

/* kib more on a link; journal: a trade is being priced (is_touched is set). */
INLINE void load_link(struct pl_links *l, size_t link, uint64_t kib, bool journal)
{
	if (journal && !l->is_touched[link]) {
		l->is_touched[link] = true;
		l->touched[l->n_touched++] =
			(struct pl_touch){ .link = link, .kib = l->load[link] };
	}
	l->load[link] += kib;
}

INLINE void flow(struct pl_links *l, uint32_t src, uint32_t dst, uint64_t kib, bool journal)
{
	uint32_t n0 = node_of(l, src), n1 = node_of(l, dst);
	const uint32_t *u0 = l->a->unit[n0], *u1 = l->a->unit[n1];

	if (u0[PHX_LEVEL_NVLINK] == u1[PHX_LEVEL_NVLINK]) {
		load_link(l, port_link(src, NVL_OUT), kib, journal);
		load_link(l, port_link(dst, NVL_IN), kib, journal);
		return;
	}
	load_link(l, nic_link(l, n0, NIC_OUT), kib, journal);
	load_link(l, nic_link(l, n1, NIC_IN), kib, journal);
	for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
		uint32_t from = u0[PHX_LEVEL_LEAF + v], to = u1[PHX_LEVEL_LEAF + v];

		if (from == to)
			break;
		load_link(l, uplink(l, v, from, UP), kib, journal);
		load_link(l, uplink(l, v, to, DOWN), kib, journal);
	}
}

static void add_flow(struct pl_links *l, uint32_t src, uint32_t dst, uint64_t kib)
{
	flow(l, src, dst, kib, l->is_touched != NULL);
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
 * same[i]: how many members share member i's level-lv unit, itself
 * included. Members fall in few units: O(size x units), not O(size^2).
 */
static void count_same(const uint32_t *const *unit, unsigned long size, unsigned lv, uint32_t *same)
{
	uint32_t id[A2A_COUNTED], n[A2A_COUNTED];
	uint8_t at[A2A_COUNTED];
	unsigned k = 0;

	for (unsigned long i = 0; i < size; i++) {
		unsigned j = 0;

		while (j < k && id[j] != unit[i][lv])
			j++;
		if (j == k) {
			id[k] = unit[i][lv];
			n[k++] = 0;
		}
		n[j]++;
		at[i] = (uint8_t)j;
	}
	for (unsigned long i = 0; i < size; i++)
		same[i] = n[at[i]];
}

/*
 * An all-to-all group: every member sends kib to every other, so each link
 * carries kib times the members on its far side. Counting them per unit
 * gives add_flow()'s sums with O(size) link updates, not O(size^2).
 */
INLINE void all_to_all(struct pl_links *l, unsigned long r0, unsigned long stride,
		       unsigned long size, uint64_t kib, bool journal)
{
	const struct pl_alloc *a = l->a;
	const uint32_t *unit[A2A_COUNTED];
	uint32_t gpu[A2A_COUNTED], same[PL_SUB_LEVELS][A2A_COUNTED];
	bool one_unit = true;

	for (unsigned long i = 0; i < size; i++) {
		gpu[i] = l->gpu[r0 + i * stride];
		unit[i] = a->unit[node_of(l, gpu[i])];
		one_unit = one_unit && unit[i][PHX_LEVEL_NVLINK] == unit[0][PHX_LEVEL_NVLINK];
	}
	if (one_unit) {
		for (unsigned long i = 0; i < size; i++) {
			load_link(l, port_link(gpu[i], NVL_OUT), kib * (size - 1), journal);
			load_link(l, port_link(gpu[i], NVL_IN), kib * (size - 1), journal);
		}
		return;
	}
	for (unsigned lv = PHX_LEVEL_NVLINK; lv < PL_SUB_LEVELS; lv++)
		count_same(unit, size, lv, same[lv]);
	for (unsigned long i = 0; i < size; i++) {
		uint32_t g = gpu[i];

		/* Members in its NVLink unit over NVLink, the rest through its NIC. */
		load_link(l, port_link(g, NVL_OUT), kib * (same[PHX_LEVEL_NVLINK][i] - 1), journal);
		load_link(l, port_link(g, NVL_IN), kib * (same[PHX_LEVEL_NVLINK][i] - 1), journal);
		load_link(l, nic_link(l, node_of(l, g), NIC_OUT),
			  kib * (size - same[PHX_LEVEL_NVLINK][i]), journal);
		load_link(l, nic_link(l, node_of(l, g), NIC_IN),
			  kib * (size - same[PHX_LEVEL_NVLINK][i]), journal);
		for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
			uint64_t out = size - same[PHX_LEVEL_LEAF + v][i];

			load_link(l, uplink(l, v, unit[i][PHX_LEVEL_LEAF + v], UP), kib * out,
				  journal);
			load_link(l, uplink(l, v, unit[i][PHX_LEVEL_LEAF + v], DOWN), kib * out,
				  journal);
		}
	}
}

INLINE void add_group(const uint32_t *gpu, const struct pl_flow_sink *sink, enum phx_dim d,
		      unsigned long r0, unsigned long stride, unsigned long size, uint64_t kib)
{
	if (d == PHX_DIM_EP && sink->all_to_all && size <= A2A_COUNTED) {
		sink->all_to_all(sink->ctx, r0, stride, size, kib);
		return;
	}
	for (unsigned long i = 0; i < size; i++) {
		uint32_t src = gpu[r0 + i * stride];

		if (d != PHX_DIM_EP) {
			sink->flow(sink->ctx, src, gpu[r0 + (i + 1 < size ? i + 1 : 0) * stride],
				   kib);
			continue;
		}
		for (unsigned long j = 0; j < size; j++) {
			if (j != i)
				sink->flow(sink->ctx, src, gpu[r0 + j * stride], kib);
		}
	}
}

/* Inlined into add_step(), where the sink is known. */
INLINE void step_flows(const struct pl_alloc *a, const uint32_t *gpu,
		       const struct pl_flow_sink *sink)
{
	const struct phx_layout *lay = a->layout;
	uint64_t half = phx_pl_flow_kib(a, PHX_DIM_PP);

	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		unsigned long stride = phx_layout_stride(lay, (enum phx_dim)d), size = lay->size[d];
		uint64_t kib = phx_pl_flow_kib(a, (enum phx_dim)d);

		if (size < 2 || !a->traffic[d])
			continue;
		for (unsigned long hi = 0; hi < a->world; hi += stride * size) {
			for (unsigned long lo = 0; lo < stride; lo++) {
				if (d != PHX_DIM_PP) {
					add_group(gpu, sink, (enum phx_dim)d, hi + lo, stride, size,
						  kib);
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

void phx_pl_step_flows(const struct pl_alloc *a, const uint32_t *gpu,
		       const struct pl_flow_sink *sink)
{
	step_flows(a, gpu, sink);
}

/* Whole steps are counted before any trade is priced: no journal. */
INLINE void sink_flow(void *ctx, uint32_t src, uint32_t dst, uint64_t kib)
{
	flow(ctx, src, dst, kib, false);
}

INLINE void sink_all_to_all(void *ctx, unsigned long r0, unsigned long stride, unsigned long size,
			    uint64_t kib)
{
	all_to_all(ctx, r0, stride, size, kib, false);
}

static void add_step(struct pl_links *l)
{
	step_flows(l->a, l->gpu,
		   &(struct pl_flow_sink){
			   .flow = sink_flow, .all_to_all = sink_all_to_all, .ctx = l });
}

/* A port's (a NIC's) time with kib on it, ns x 1024: every port (NIC) costs alike. */
static inline double port_time(const struct pl_alloc *a, uint64_t kib)
{
	return (double)kib * (double)a->weight[PHX_LEVEL_NODE];
}

static inline double nic_time(const struct pl_alloc *a, uint64_t kib)
{
	return (double)kib * (double)a->weight[PHX_LEVEL_LEAF] / a->gpn;
}

/* Link k's time with kib on it, ns x 1024. */
static double link_time(const struct pl_links *l, size_t k, uint64_t kib)
{
	const struct pl_alloc *a = l->a;
	unsigned v;

	if (k < l->nic0)
		return port_time(a, kib);
	if (k < l->up0[0])
		return nic_time(a, kib);
	v = k >= l->up0[1];
	return (double)kib * (double)a->weight[PHX_LEVEL_SPINE + v] /
	       (double)l->gpus[v][(k - l->up0[v]) / DIRS];
}

/* Link k's kind and where it is. */
static void name_link(const struct pl_links *l, size_t k, struct pl_worst *w)
{
	if (k < l->nic0) {
		w->kind = PL_LINK_NVLINK;
		w->where = (uint32_t)(k / PORTS);
	} else if (k < l->up0[0]) {
		w->kind = PL_LINK_NIC;
		w->where = (uint32_t)((k - l->nic0) / NICS);
	} else if (k < l->up0[1]) {
		w->kind = PL_LINK_LEAF;
		w->where = (uint32_t)((k - l->up0[0]) / DIRS);
	} else {
		w->kind = PL_LINK_SPINE;
		w->where = (uint32_t)((k - l->up0[1]) / DIRS);
	}
}

/* Scaled from ns x 1024 (a power of two: exact). */
static void to_ns(struct pl_worst *w)
{
	w->t /= 1024; /* KiB x ns per MiB */
	w->sq /= 1024.0 * 1024.0;
	w->up /= 1024;
}

/* The busiest uplink's time, ns x 1024: there are few. */
static double uplinks_top(const struct pl_links *l)
{
	double up = 0;

	for (size_t k = l->up0[0]; k < l->n_links; k++) {
		double t = l->load[k] ? link_time(l, k, l->load[k]) : 0;

		up = t > up ? t : up;
	}
	return up;
}

/* The busiest of the links considered: its time, the first (lowest index), how many. */
struct top {
	double t;
	size_t at;
	unsigned tied;
};

static void consider(struct top *top, double t, size_t k)
{
	/* Times are sums of the same terms: equal ones come out equal. */
	if (t > top->t) {
		*top = (struct top){ .t = t, .at = k, .tied = 1 };
	} else if (t == top->t && t > 0) {
		top->tied++;
		top->at = k < top->at ? k : top->at;
	}
}

/* The busiest link, the first in the scan of those as busy, kept in l->now. */
static void busiest(struct pl_links *l, struct pl_worst *w)
{
	const struct pl_alloc *a = l->a;
	struct top top = { .at = 0 };
	double sq = 0, up = 0;

	/* Ports, then NICs: link_time() without its branches. */
	for (size_t k = 0; k < l->nic0; k++) {
		double t = port_time(a, l->load[k]);

		sq += t * t;
		consider(&top, t, k);
	}
	for (size_t k = l->nic0; k < l->up0[0]; k++) {
		double t = nic_time(a, l->load[k]);

		sq += t * t;
		consider(&top, t, k);
	}
	for (size_t k = l->up0[0]; k < l->n_links; k++) {
		double t;

		if (!l->load[k])
			continue;
		t = link_time(l, k, l->load[k]);
		sq += t * t;
		up = t > up ? t : up;
		consider(&top, t, k);
	}
	*w = (struct pl_worst){ .t = top.t, .sq = sq, .up = up, .tied = top.tied };
	name_link(l, top.at, w);
	to_ns(w);
	l->now = *w;
	l->now_link = top.at;
	l->now_known = true;
}

/*
 * busiest()'s time alone. A time grows with the load and ports (NICs) all
 * cost alike, so the busiest port's time is that of the greatest load:
 * the same number, found by a scan the compiler vectorises.
 */
static double top_time(const struct pl_links *l)
{
	const struct pl_alloc *a = l->a;
	uint64_t port = 0, nic = 0;
	double t, up = uplinks_top(l);

	for (size_t k = 0; k < l->nic0; k++)
		port = l->load[k] > port ? l->load[k] : port;
	for (size_t k = l->nic0; k < l->up0[0]; k++)
		nic = l->load[k] > nic ? l->load[k] : nic;
	t = port_time(a, port) > nic_time(a, nic) ? port_time(a, port) : nic_time(a, nic);
	return up > t ? up : t;
}

static void loads_free(struct pl_links *l)
{
	free(l->gpu);
	free(l->load);
	for (unsigned v = 0; v < UPLINK_LEVELS; v++)
		free(l->gpus[v]);
}

static int loads_init(struct pl_links *l, const struct pl_alloc *a, const uint32_t *rank_node)
{
	uint32_t *taken;

	*l = (struct pl_links){ .a = a, .gpn_shift = -1 };
	if (a->gpn && !(a->gpn & (a->gpn - 1)))
		l->gpn_shift = __builtin_ctz(a->gpn);
	l->nic0 = a->n_nodes * a->gpn * PORTS;
	l->up0[0] = l->nic0 + a->n_nodes * NICS;
	l->up0[1] = l->up0[0] + a->n_units[PHX_LEVEL_LEAF] * DIRS;
	l->n_links = l->up0[1] + a->n_units[PHX_LEVEL_SPINE] * DIRS;
	l->gpu = malloc(a->world * sizeof(*l->gpu));
	l->load = calloc(l->n_links, sizeof(*l->load));
	taken = calloc(a->n_nodes, sizeof(*taken));
	for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
		l->gpus[v] = calloc(a->n_units[PHX_LEVEL_LEAF + v], sizeof(*l->gpus[v]));
		if (!l->gpus[v])
			goto fail;
	}
	if (!l->gpu || !l->load || !taken)
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

/* The flows between rank r and q both ways; q's to r only if q is not moving (it adds its own). */
static void both_ways(struct pl_links *l, unsigned long r, unsigned long q, uint64_t part)
{
	add_flow(l, l->gpu[r], l->gpu[q], part);
	if (!l->moving[q])
		add_flow(l, l->gpu[q], l->gpu[r], part);
}

/*
 * Every flow rank r sends, and every flow it receives from a rank that is
 * not moving, added (sign 1) or taken off (sign -1: unsigned sums wrap back
 * exactly). Ring and pipeline partners are found directly: a trade prices
 * thousands of them.
 */
static void rank_flows(struct pl_links *l, unsigned long r, int sign)
{
	const struct phx_layout *lay = l->a->layout;

	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		unsigned long st = phx_layout_stride(lay, (enum phx_dim)d), size = lay->size[d];
		unsigned long i = r / st % size, base = r - i * st, q;
		uint64_t part = phx_pl_flow_kib(l->a, (enum phx_dim)d);

		if (size < 2 || !l->a->traffic[d])
			continue;
		part = sign > 0 ? part : (uint64_t)0 - part;
		switch (d) {
		case PHX_DIM_EP:
			for (unsigned long j = 0; j < size; j++) {
				if (j != i)
					both_ways(l, r, base + j * st, part);
			}
			break;
		case PHX_DIM_PP:
			if (i > 0)
				both_ways(l, r, base + (i - 1) * st, part);
			if (i + 1 < size)
				both_ways(l, r, base + (i + 1) * st, part);
			break;
		default: /* a ring: r sends to the next, receives from the one before */
			add_flow(l, l->gpu[r], l->gpu[base + (i + 1) % size * st], part);
			q = base + (i + size - 1) % size * st;
			if (!l->moving[q])
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

void phx_pl_links_worst(struct pl_links *l, struct pl_worst *w)
{
	busiest(l, w);
}

static void set_moving(struct pl_links *l, const uint32_t *xs, const uint32_t *ys, size_t len,
		       bool moving)
{
	for (size_t k = 0; k < len; k++) {
		for (int side = 0; side < 2; side++) {
			uint32_t n = side ? ys[k] : xs[k];

			for (unsigned i = 0; i < l->node_used[n]; i++)
				l->moving[l->by_node[l->node_first[n] + i]] = moving;
		}
	}
}

static void trade_flows(struct pl_links *l, const uint32_t *xs, const uint32_t *ys, size_t len,
			int sign)
{
	for (size_t k = 0; k < len; k++) {
		for (unsigned i = 0; i < l->node_used[xs[k]]; i++)
			rank_flows(l, l->by_node[l->node_first[xs[k]] + i], sign);
		for (unsigned i = 0; i < l->node_used[ys[k]]; i++)
			rank_flows(l, l->by_node[l->node_first[ys[k]] + i], sign);
	}
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

static void swap_places(struct pl_links *l, const uint32_t *xs, const uint32_t *ys, size_t len)
{
	for (size_t k = 0; k < len; k++) {
		unsigned long fx = l->node_first[xs[k]], fy = l->node_first[ys[k]];

		move_ranks(l, xs[k], ys[k], fx);
		move_ranks(l, ys[k], xs[k], fy);
		/* Node x's ranks are now listed where y's were, and back. */
		l->node_first[xs[k]] = fy;
		l->node_first[ys[k]] = fx;
	}
}

void phx_pl_links_trade(struct pl_links *l, const uint32_t *xs, const uint32_t *ys, size_t len)
{
	set_moving(l, xs, ys, len, true);
	/* Off with the old places, on with the new. */
	trade_flows(l, xs, ys, len, -1);
	swap_places(l, xs, ys, len);
	trade_flows(l, xs, ys, len, 1);
	set_moving(l, xs, ys, len, false);
	l->now_known = false;
}

/*
 * The busiest link after a trade, from the links it touched: the others
 * kept their loads, and was (the first link at) its time before. False
 * where that cannot tell: the busiest link before got less and no touched
 * link is sure to be the first as busy now. Its sum of squares comes out
 * as a scan's up to rounding.
 */
static bool priced(const struct pl_links *l, size_t was_link, struct pl_worst *now,
		   size_t *now_link)
{
	const struct pl_worst *was = &l->now;
	double top = was->t * 1024, dsq = 0;
	struct top now_top = { .at = l->n_links };
	unsigned left = was->tied;
	bool lost = false;

	for (size_t i = 0; i < l->n_touched; i++) {
		size_t k = l->touched[i].link;
		double t0 = link_time(l, k, l->touched[i].kib), t1 = link_time(l, k, l->load[k]);

		dsq += t1 * t1 - t0 * t0;
		left -= t0 == top && t0 > 0;
		lost = lost || (k == was_link && t1 != top);
		consider(&now_top, t1, k);
	}
	if (top == 0)
		return false;
	if (now_top.t > top) {
		*now_link = now_top.at;
	} else {
		/* Untouched links as busy as before lie at was_link or after it. */
		bool at_top = now_top.t == top;

		if (!lost)
			*now_link = at_top && now_top.at < was_link ? now_top.at : was_link;
		else if (at_top && (now_top.at < was_link || !left))
			*now_link = now_top.at;
		else
			return false;
		now_top.tied = left + (at_top ? now_top.tied : 0);
		now_top.t = top;
	}
	*now = (struct pl_worst){ .t = now_top.t,
				  .sq = was->sq * 1024.0 * 1024.0 + dsq,
				  .up = uplinks_top(l),
				  .tied = now_top.tied };
	name_link(l, *now_link, now);
	to_ns(now);
	return true;
}

static void forget_touched(struct pl_links *l)
{
	for (size_t i = 0; i < l->n_touched; i++)
		l->is_touched[l->touched[i].link] = false;
	l->n_touched = 0;
	l->is_touched = NULL;
}

/* The trade undone from the loads it touched. */
static void undo(struct pl_links *l, const uint32_t *xs, const uint32_t *ys, size_t len)
{
	for (size_t i = 0; i < l->n_touched; i++)
		l->load[l->touched[i].link] = l->touched[i].kib;
	swap_places(l, xs, ys, len);
}

/*
 * A trade touches a few hundred links of thousands: priced from those
 * (priced()), undone from their loads before. Without room for that list,
 * by a scan of every link and the trade made again.
 */
bool phx_pl_links_trade_if(struct pl_links *l, const uint32_t *xs, const uint32_t *ys, size_t len,
			   bool (*better)(const struct pl_worst *now, const struct pl_worst *was),
			   struct pl_worst *w)
{
	struct pl_worst now, was;
	size_t was_link, now_link;

	if (!l->touched) {
		l->touched = malloc(l->n_links * sizeof(*l->touched));
		l->mark = calloc(l->n_links, sizeof(*l->mark));
	}
	if (!l->now_known)
		busiest(l, &was);
	was = l->now;
	was_link = l->now_link;
	l->is_touched = l->touched && l->mark ? l->mark : NULL;
	phx_pl_links_trade(l, xs, ys, len);
	if (!l->is_touched || !priced(l, was_link, &now, &now_link)) {
		busiest(l, &now);
		now_link = l->now_link;
	}
	if (better(&now, w)) {
		*w = now;
		l->now = now;
		l->now_link = now_link;
		l->now_known = true;
		if (l->is_touched)
			forget_touched(l);
		return true;
	}
	if (l->is_touched) {
		undo(l, xs, ys, len);
		forget_touched(l);
	} else {
		phx_pl_links_trade(l, xs, ys, len);
	}
	l->now = was;
	l->now_link = was_link;
	l->now_known = true;
	return false;
}

bool phx_pl_links_uplink_busiest(struct pl_links *l, uint32_t node)
{
	double top;

	if (!l->now_known) {
		struct pl_worst w;

		busiest(l, &w);
	}
	top = l->now.t * 1024;
	for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
		uint32_t u = l->a->unit[node][PHX_LEVEL_LEAF + v];

		for (int dir = 0; dir < DIRS; dir++) {
			size_t k = uplink(l, v, u, (enum updown)dir);

			if (l->load[k] && link_time(l, k, l->load[k]) >= top * PL_HOT_UPLINK)
				return true;
		}
	}
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
	free(l->touched);
	free(l->mark);
	free(l);
}

int phx_pl_step_time(const struct pl_alloc *a, const uint32_t *rank_node, uint64_t *ns)
{
	struct pl_links l;

	if (loads_init(&l, a, rank_node) < 0)
		return -1;
	add_step(&l);
	*ns = (uint64_t)(top_time(&l) / 1024); /* as to_ns() scales busiest()'s */
	loads_free(&l);
	return 0;
}
