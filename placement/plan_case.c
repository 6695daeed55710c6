/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The case format phalanx-plan-sim reads (plan_case.h); the simulator and
 * the planner's benchmarks share it, so it is written in one place.
 */
#include "config.h"

#include "placement/plan_case.h"

void phx_plan_case_map(FILE *f, const char *name, const uint32_t *rank_node, unsigned long world,
		       const struct phx_step_times *times)
{
	fprintf(f, "plan %s\n", name);
	for (unsigned long r = 0; r < world; r++)
		fprintf(f, "%u%c", rank_node[r], r + 1 == world ? '\n' : ' ');
	if (times)
		fprintf(f, "model %s %llu %llu\n", name, (unsigned long long)times->link_ns,
			(unsigned long long)times->shared_ns);
}

void phx_plan_case_write(FILE *f, const char *title, const struct phx_plan *plan)
{
	fprintf(f, "case %s\ngpus_per_node %u\nbandwidth", title, plan->gpus_per_node);
	for (int v = 0; v < PHX_LEVEL_COUNT; v++)
		fprintf(f, " %s=%lu", phx_level_name((enum phx_level)v), plan->bandwidth[v]);
	fprintf(f, "\nlayout");
	for (int d = 0; d < PHX_DIM_COUNT; d++)
		fprintf(f, " %s=%lu/%lu/%lu", phx_dim_name((enum phx_dim)d), plan->layout.size[d],
			phx_layout_stride(&plan->layout, (enum phx_dim)d), plan->traffic.mib[d]);
	fprintf(f, "\nnodes %zu\n", plan->n_nodes);
	for (size_t i = 0; i < plan->n_nodes; i++) {
		const struct phx_plan_node *n = &plan->nodes[i];

		fprintf(f, "%s %s %s %s %u\n", n->name, *n->leaf ? n->leaf : "-",
			*n->spine ? n->spine : "-", *n->domain ? n->domain : "-",
			!(n->flags & PHX_PLAN_NODE_SPARE));
	}
}
