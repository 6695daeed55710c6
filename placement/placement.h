/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Placement: which node and local GPU runs each global rank. A pure
 * function of (fabric, allocated nodes, GPUs per node, slow nodes, layout,
 * traffic): the node list is sorted first, every tie is broken by index,
 * costs are integers, so every node that calls it with the same inputs gets
 * the same map, whatever order the names came in. The cost model, the lower
 * bound and the algorithm are described in phalanx-plan(1).
 */
#ifndef PHX_PLACEMENT_H
#define PHX_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "placement/fabric.h"
#include "placement/layout.h"

struct pl_alloc;

/*
 * Traffic of one training step, MiB per rank for the collective groups
 * (tp, cp, ep, dp) and MiB per pair of neighbouring stages for pp.
 */
struct phx_traffic {
	unsigned long mib[PHX_DIM_COUNT];
};

#define PHX_TRAFFIC_MAX_MIB (1ul << 20) /* 1 TiB */

/* A dense 70B-class model at 8k context; see phalanx-plan(1). */
void phx_traffic_defaults(struct phx_traffic *traffic);
/* "tp=65536,dp=8192": named dimensions override the defaults. 0 or -1. */
int phx_traffic_parse(const char *spec, struct phx_traffic *traffic, char *err, size_t errlen);

struct phx_place_input {
	const struct phx_fabric *fabric; /* NULL: no switches, default bandwidths */
	char *const *nodes; /* the allocation, any order, no repeats */
	size_t n_nodes;
	unsigned gpus_per_node;
	char *const *slow; /* slow or suspect nodes; names not allocated are ignored */
	size_t n_slow;
	const struct phx_layout *layout; /* resolved: world = ranks to place */
	const struct phx_traffic *traffic; /* NULL: the defaults */
	/*
	 * Optional, for benchmarks that judge the planner's choice another
	 * way: called with every candidate map priced (name, rank -> index
	 * in the plan's nodes[]); the map is only valid during the call.
	 */
	void (*on_candidate)(void *ctx, const char *name, const uint32_t *rank_node);
	void *candidate_ctx;
};

struct phx_plan_cost {
	/*
	 * The link model: one step's communication time, ns, as its busiest
	 * link's load over its bandwidth (placement_links.c). Plans are
	 * chosen by it.
	 */
	uint64_t step_ns;
	/* Modelled link time of one step, ns summed over ranks (saturates). */
	uint64_t total;
	uint64_t by_dim[PHX_DIM_COUNT];
	/* MiB per step crossing leaf uplinks: ring edges and pipeline hops. */
	uint64_t cross_leaf_mib;
	/* Groups (pp: neighbour pairs) by the widest level they span. */
	uint64_t groups[PHX_DIM_COUNT][PHX_LEVEL_COUNT];
};

#define PHX_PLAN_NODE_SLOW 0x1u
#define PHX_PLAN_NODE_SPARE 0x2u /* allocated but left out */

struct phx_plan_node {
	char *name;
	const char *leaf, *spine, *domain; /* "" when none; owned by the plan */
	unsigned flags;
	unsigned used_gpus;
};

struct phx_plan {
	struct phx_layout layout;
	unsigned long world;
	unsigned gpus_per_node;
	struct phx_plan_node *nodes; /* the allocation in host-name order */
	size_t n_nodes;
	uint32_t *rank_node; /* per global rank: index in nodes[] */
	uint16_t *rank_gpu; /* per global rank: local GPU */
	struct phx_plan_cost cost; /* this placement */
	struct phx_plan_cost hostname; /* Slurm's block order over host names */
	uint64_t step_bound_ns; /* no placement's step (the link model's) is shorter */
	unsigned long weight[PHX_LEVEL_COUNT]; /* ns per MiB at each level */
	unsigned long bandwidth[PHX_LEVEL_COUNT]; /* MB/s per GPU at each level */
	struct phx_traffic traffic;
	char strategy[96]; /* how the dimensions were nested, e.g. "tp,pp,dp" */
	char **warnings;
	size_t n_warnings;
	char **strings; /* storage behind the node fields */
	size_t n_strings;
	struct pl_alloc *alloc; /* the allocation as the models see it */
};

/*
 * The least group cost any placement onto the plan's allocation can have,
 * ns summed over ranks (phalanx-plan(1), LOWER BOUND): computed on demand,
 * since placing needs only the link model's bound (step_bound_ns).
 * 0 or -1 (out of memory).
 */
int phx_plan_lower_bound(const struct phx_plan *plan, uint64_t *bound);

/*
 * One step's communication time of a map of the plan's ranks (rank ->
 * index in nodes[]), ns: by the link model (its busiest link, what plans
 * are chosen by) and by the shared-link model (the same flows sharing
 * every link max-min fairly, each ending on its own: what a flow-level
 * simulation computes, and never shorter).
 */
struct phx_step_times {
	uint64_t link_ns;
	uint64_t shared_ns;
};

/*
 * 0, or -1 with errno: EINVAL when the map names a node the plan does not
 * have or gives a node more ranks than GPUs, ENOMEM.
 */
int phx_plan_step_times(const struct phx_plan *plan, const uint32_t *rank_node,
			struct phx_step_times *times);

/* Returns 0 with *out set (free with phx_plan_free), or -1 with the reason in err. */
int phx_place(const struct phx_place_input *in, struct phx_plan **out, char *err, size_t errlen);
void phx_plan_free(struct phx_plan *plan);

#endif
