/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside placement: the allocation as the packer, the cost model and the
 * lower bound see it. placement.c packs, placement_cost.c prices a map,
 * placement_bound.c computes what no map can beat.
 */
#ifndef PHX_PLACEMENT_INT_H
#define PHX_PLACEMENT_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "placement/placement.h"
#include "common/saturate.h"

#define PL_NONE UINT32_MAX
/* Levels below the core: node, nvlink, leaf, spine. */
#define PL_SUB_LEVELS (PHX_LEVEL_COUNT - 1)

struct pl_alloc {
	const struct phx_layout *layout;
	unsigned long world;
	unsigned gpn;
	uint64_t traffic[PHX_DIM_COUNT]; /* MiB */
	uint64_t weight[PHX_LEVEL_COUNT]; /* ns per MiB */
	size_t n_nodes; /* allocated nodes, in host-name order */
	/*
	 * Per node, the unit it belongs to at each level below the core:
	 * [0] the node itself, [1] its NVLink domain (the node when it has
	 * none), [2] its leaf, [3] its spine. Units are numbered apart per
	 * level, the same way for every placement.
	 */
	uint32_t (*unit)[PL_SUB_LEVELS];
	uint32_t n_units[PL_SUB_LEVELS];
	bool *slow;
	bool *spare; /* left out: more nodes than the world needs */
};

/*
 * How a packing nests the dimensions, innermost first: factor f takes
 * size[f] values and moves stride[f] global ranks per step. A dimension may
 * be split in two factors ("pp[2]" inside, "pp[4]" outside).
 */
#define PL_MAX_FACTORS (PHX_DIM_COUNT + 1)

/*
 * Where a block goes among the units with room for it. TIGHT: the narrowest
 * home, then the tightest fit. FIRST: the narrowest home, then the first
 * unit. IN_ORDER: above the leaves the first unit with room, so
 * consecutive blocks (pipeline stages) fill one leaf after the other; in a
 * leaf the narrowest home, then the tightest fit.
 */
enum pl_fit {
	PL_FIT_TIGHT = 0,
	PL_FIT_FIRST,
	PL_FIT_IN_ORDER,
};

struct pl_strategy {
	unsigned n;
	enum phx_dim dim[PL_MAX_FACTORS];
	unsigned long size[PL_MAX_FACTORS];
	unsigned long stride[PL_MAX_FACTORS];
	bool split[PL_MAX_FACTORS];
	enum pl_fit fit;
};

struct pl_tree;

/* The switch tree over the nodes that are not spare; 0 or -1 (memory). */
int phx_pl_tree_build(const struct pl_alloc *a, struct pl_tree **out);
void phx_pl_tree_free(struct pl_tree *tree);
/* Packs every rank; rank_node[] gets allocated node indices. */
void phx_pl_pack(struct pl_tree *tree, const struct pl_strategy *s, uint32_t *rank_node,
		 uint16_t *rank_gpu);

/* Swaps whole nodes of a packed map while that lowers its cost; swaps made, or -1 (memory). */
long phx_pl_refine(const struct pl_alloc *a, uint32_t *rank_node);
/* Prices a map (rank_node[r] = allocated node index); 0 or -1 (memory). */
int phx_pl_cost(const struct pl_alloc *a, const uint32_t *rank_node, struct phx_plan_cost *cost);
/* The allocation's GPUs in each unit of a level (placement_links.c); NULL: memory. */
unsigned long *phx_pl_unit_gpus(const struct pl_alloc *a, unsigned level);
/*
 * KiB of one flow of dimension d in the link model: a ring member's to the
 * next, an all-to-all member's to each other, a pipeline hop's each way
 * (placement_links.c).
 */
uint64_t phx_pl_flow_kib(const struct pl_alloc *a, enum phx_dim d);
/*
 * gpu[r] = node * gpn + k: the k-th rank of a node takes its k-th GPU;
 * taken[] (per node, zeroed) counts them.
 */
void phx_pl_gpu_of_ranks(const struct pl_alloc *a, const uint32_t *rank_node, uint32_t *taken,
			 uint32_t *gpu);

/* Where the flows of one step go (placement_links.c). */
struct pl_flow_sink {
	void (*flow)(void *ctx, uint32_t src_gpu, uint32_t dst_gpu, uint64_t kib);
	/* An all-to-all group of members r0 + i * stride, at most 64; NULL: flow by flow. */
	void (*all_to_all)(void *ctx, unsigned long r0, unsigned long stride, unsigned long size,
			   uint64_t kib);
	void *ctx;
};
/* Every flow of one step, with rank r on GPU gpu[r] (node * gpn + k). */
void phx_pl_step_flows(const struct pl_alloc *a, const uint32_t *gpu,
		       const struct pl_flow_sink *sink);
/* The link model's time of one step, ns (placement_links.c); 0 or -1 (memory). */
int phx_pl_step_time(const struct pl_alloc *a, const uint32_t *rank_node, uint64_t *ns);

enum pl_link { PL_LINK_NVLINK, PL_LINK_NIC, PL_LINK_LEAF, PL_LINK_SPINE };
struct pl_links;

/* The link model's busiest link: its time, which it is, how many links take as long. */
struct pl_worst {
	double t; /* ns */
	double sq; /* the sum of every link's time squared (ns^2): how spread the load is */
	double up; /* the busiest leaf or spine uplink's time, ns */
	enum pl_link kind;
	uint32_t where; /* GPU (node * gpn + k), node, leaf or spine unit */
	unsigned tied;
};

int phx_pl_links(const struct pl_alloc *a, const uint32_t *rank_node, struct pl_worst *w);

/*
 * The link model's loads kept for trades of whole nodes: a trade moves the
 * ranks of node xs[k] to ys[k] and back (each keeping its place among the
 * node's GPUs; the nodes hold as many ranks) in rank_node and updates only
 * the flows of those ranks, so the same trade undoes it. NULL: memory.
 */
struct pl_links *phx_pl_links_open(const struct pl_alloc *a, uint32_t *rank_node);
void phx_pl_links_worst(struct pl_links *l, struct pl_worst *w);
void phx_pl_links_trade(struct pl_links *l, const uint32_t *xs, const uint32_t *ys, size_t len);
/* The trade, kept (w its busiest link) if better() says the map is, else undone; kept? */
bool phx_pl_links_trade_if(struct pl_links *l, const uint32_t *xs, const uint32_t *ys, size_t len,
			   bool (*better)(const struct pl_worst *now, const struct pl_worst *was),
			   struct pl_worst *w);
/*
 * An uplink this close to the busiest link's time counts as as busy: the
 * levels' times come out of different sums, and a flow crossing it and a
 * NIC about as busy moves at its share of one, leaving the other idle part
 * of the time.
 */
#define PL_HOT_UPLINK (1 - 1e-3)
/* Is an uplink above node (its leaf's, its spine's) as busy as the busiest link? */
bool phx_pl_links_uplink_busiest(struct pl_links *l, uint32_t node);
void phx_pl_links_close(struct pl_links *l);
/*
 * Trades nodes so that pipeline ends sit under the busiest links, until the
 * step reaches bound_ns (placement_ends.c): trades made, or -1 (memory).
 */
long phx_pl_ends(const struct pl_alloc *a, uint32_t *rank_node, uint64_t bound_ns);
/*
 * Swaps whole nodes that keep the busiest link as short and spread load
 * off the links next in line (placement_spread.c): swaps kept, or -1.
 */
long phx_pl_spread(const struct pl_alloc *a, uint32_t *rank_node);
/* Flows alike: the same links, the same size. */
#define PL_MAX_HOPS 6 /* NIC, leaf and spine uplinks out, and down again */
struct pl_flow_class {
	uint32_t hop[PL_MAX_HOPS]; /* the links it takes: indices of their capacities */
	unsigned n_hops;
	uint32_t count; /* flows */
	double size; /* each moves this much */
	double left, rate; /* phx_pl_fluid_time()'s working state */
};
/*
 * When the last flow ends, starting all at once and sharing each link
 * max-min fairly (size over capacity units): INFINITY if a flow crosses a
 * link of no capacity, < 0 out of memory (placement_share.c).
 */
double phx_pl_fluid_time(const double *capacity, size_t n_links, struct pl_flow_class *cls,
			 size_t n_cls);
/*
 * The shared-link model's time of one step (placement_share.c): the link
 * model's flows sharing every link max-min fairly, each ending on its own;
 * UINT64_MAX if a flow crosses a link of no bandwidth. 0 or -1 (memory).
 */
int phx_pl_shared_time(const struct pl_alloc *a, const uint32_t *rank_node, uint64_t *ns);
/* The cheapest any map onto this allocation can be; 0 or -1 (memory). */
int phx_pl_lower_bound(const struct pl_alloc *a, uint64_t *bound);
/*
 * The link model's lower bound (placement_link_bound.c): no map's step is
 * shorter; units of more than PL_BOUND_RANKS ranks are left out of it.
 */
#define PL_BOUND_RANKS 64ul
int phx_pl_step_bound(const struct pl_alloc *a, uint64_t *ns);
/*
 * least[m], m <= lim: the least KiB any m of the ranks send to the others
 * in one step (ring_pp: counting two pipeline hops out of every part of a
 * pipeline); UINT64_MAX where the layout has fewer ranks.
 */
int phx_pl_least_out(const struct pl_alloc *a, unsigned long lim, bool ring_pp, uint64_t *least);
/*
 * least[m * (lim + 1) + e], e <= m <= lim: the least KiB any m ranks send
 * to the others when e of them are of the first or the last pipeline
 * stage; UINT64_MAX where no m ranks hold e such. The layout has pp >= 2.
 */
int phx_pl_least_out_ends(const struct pl_alloc *a, unsigned long lim, uint64_t *least);

#endif
