/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One node's view of a placement: which global rank each local task slot
 * runs, the node's rank among the job's nodes, and where rank 0 lives.
 * The SPANK plugin (per task) and the launcher (per node agent) both build
 * it from the same plan, so they agree without talking.
 */
#ifndef PHX_RANKMAP_H
#define PHX_RANKMAP_H

#include <stddef.h>
#include <stdint.h>

#include "common/conf.h"
#include "placement/layout.h"
#include "placement/placement.h"

struct phx_rankmap {
	struct phx_layout layout; /* resolved */
	unsigned long world;
	unsigned tasks_per_node; /* ranks on this node */
	unsigned long *slot_rank; /* [tasks_per_node]: local slot -> global rank */
	unsigned group_rank; /* this node among the job's nodes, by lowest rank */
	unsigned group_world; /* nodes that run ranks */
	char *master; /* node running global rank 0 */
};

/*
 * The rank map of node from a topology-aware plan; the slot of a rank is
 * its local GPU. Returns 0, or -1 with the reason in err (node not in the
 * plan, or left out as a spare).
 */
int phx_rankmap_from_plan(const struct phx_plan *plan, const char *node, struct phx_rankmap *out,
			  char *err, size_t errlen);
/*
 * Slurm's block order: nodes in the given (step) order, tasks_per_node
 * consecutive ranks each, so global rank == SLURM_PROCID.
 */
int phx_rankmap_block(const struct phx_layout *layout, char *const *nodes, size_t n_nodes,
		      unsigned tasks_per_node, const char *node, struct phx_rankmap *out, char *err,
		      size_t errlen);
/*
 * The whole topology-aware path for one node: reads the site's fabric
 * (the 'fabric:' section of phalanx.yaml and Slurm's topology.conf), places
 * the resolved layout over nodes with per_node ranks each and builds node's
 * map. *plan gets the plan (its warnings, --explain); free it with
 * phx_plan_free. Returns 0, or -1 with the reason in err.
 */
int phx_rankmap_place(const struct phx_conf *conf, const struct phx_layout *layout,
		      char *const *nodes, size_t n_nodes, unsigned per_node, const char *node,
		      struct phx_rankmap *map, struct phx_plan **plan, char *err, size_t errlen);
/* The same, placing the slow nodes slow[0..n_slow) off the critical path. */
int phx_rankmap_place_slow(const struct phx_conf *conf, const struct phx_layout *layout,
			   char *const *nodes, size_t n_nodes, unsigned per_node, const char *node,
			   char *const *slow, size_t n_slow, struct phx_rankmap *map,
			   struct phx_plan **plan, char *err, size_t errlen);
void phx_rankmap_free(struct phx_rankmap *map);

/*
 * The rendezvous port of a job step: the same on every node, different for
 * the steps of one job, in [20000, 40000).
 */
unsigned phx_master_port(uint32_t job_id, uint32_t step_id);

#endif
