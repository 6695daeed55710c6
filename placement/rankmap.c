/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/fabric.h"
#include "common/log.h"
#include "placement/rankmap.h"

#define PHX_PORT_BASE 20000u
#define PHX_PORT_SPAN 20000u

unsigned phx_master_port(uint32_t job_id, uint32_t step_id)
{
	/* Spread neighbouring job ids apart; steps of a job differ by one. */
	uint64_t mix = (uint64_t)job_id * 2654435761u + step_id;

	return PHX_PORT_BASE + (unsigned)(mix % PHX_PORT_SPAN);
}

void phx_rankmap_free(struct phx_rankmap *map)
{
	if (!map)
		return;
	free(map->slot_rank);
	free(map->master);
	memset(map, 0, sizeof(*map));
}

static int alloc_map(struct phx_rankmap *map, const struct phx_layout *layout, unsigned tpn,
		     const char *master, char *err, size_t errlen)
{
	memset(map, 0, sizeof(*map));
	map->layout = *layout;
	map->world = layout->world;
	map->tasks_per_node = tpn;
	map->slot_rank = calloc(tpn ? tpn : 1, sizeof(*map->slot_rank));
	map->master = strdup(master);
	if (!map->slot_rank || !map->master) {
		snprintf(err, errlen, "out of memory");
		phx_rankmap_free(map);
		return -1;
	}
	return 0;
}

static long plan_node_index(const struct phx_plan *plan, const char *node)
{
	for (size_t i = 0; i < plan->n_nodes; i++) {
		if (!strcmp(plan->nodes[i].name, node))
			return (long)i;
	}
	return -1;
}

/* Lowest global rank on each node, or world when the node runs none. */
static unsigned long *lowest_ranks(const struct phx_plan *plan)
{
	unsigned long *low = malloc(plan->n_nodes * sizeof(*low));

	if (!low)
		return NULL;
	for (size_t i = 0; i < plan->n_nodes; i++)
		low[i] = plan->world;
	for (unsigned long r = plan->world; r-- > 0;)
		low[plan->rank_node[r]] = r;
	return low;
}

int phx_rankmap_from_plan(const struct phx_plan *plan, const char *node, struct phx_rankmap *out,
			  char *err, size_t errlen)
{
	long me = plan_node_index(plan, node);
	unsigned long *low;
	unsigned tpn;

	if (me < 0) {
		snprintf(err, errlen,
			 "node %s is not in the placement; is the step's node list right?", node);
		return -1;
	}
	tpn = plan->nodes[me].used_gpus;
	if (tpn == 0) {
		snprintf(err, errlen,
			 "node %s is left out of the placement (spare or slow); run fewer tasks "
			 "per node or fewer nodes",
			 node);
		return -1;
	}
	if (alloc_map(out, &plan->layout, tpn, plan->nodes[plan->rank_node[0]].name, err, errlen))
		return -1;
	low = lowest_ranks(plan);
	if (!low) {
		snprintf(err, errlen, "out of memory");
		phx_rankmap_free(out);
		return -1;
	}
	/* Slots are the local GPUs 0..tpn-1, each taken once. */
	for (unsigned i = 0; i < tpn; i++)
		out->slot_rank[i] = plan->world;
	for (unsigned long r = 0; r < plan->world; r++) {
		if (plan->rank_node[r] != (uint32_t)me)
			continue;
		if (plan->rank_gpu[r] >= tpn || out->slot_rank[plan->rank_gpu[r]] != plan->world) {
			snprintf(err, errlen, "placement gave node %s GPU %u twice or out of range",
				 node, plan->rank_gpu[r]);
			goto fail;
		}
		out->slot_rank[plan->rank_gpu[r]] = r;
	}
	/* Nodes ordered by their lowest rank give torchrun's GROUP_RANK. */
	for (size_t i = 0; i < plan->n_nodes; i++) {
		if (low[i] == plan->world)
			continue;
		out->group_world++;
		if (low[i] < low[me])
			out->group_rank++;
	}
	free(low);
	return 0;
fail:
	free(low);
	phx_rankmap_free(out);
	return -1;
}

int phx_rankmap_block(const struct phx_layout *layout, char *const *nodes, size_t n_nodes,
		      unsigned tasks_per_node, const char *node, struct phx_rankmap *out, char *err,
		      size_t errlen)
{
	size_t me;

	if (!n_nodes || (unsigned long)n_nodes * tasks_per_node != layout->world) {
		snprintf(err, errlen, "%zu nodes x %u tasks do not make the layout's %lu ranks",
			 n_nodes, tasks_per_node, layout->world);
		return -1;
	}
	for (me = 0; me < n_nodes && strcmp(nodes[me], node); me++)
		;
	if (me == n_nodes) {
		snprintf(err, errlen, "node %s is not in the step's node list", node);
		return -1;
	}
	if (alloc_map(out, layout, tasks_per_node, nodes[0], err, errlen))
		return -1;
	for (unsigned i = 0; i < tasks_per_node; i++)
		out->slot_rank[i] = me * tasks_per_node + i;
	out->group_rank = (unsigned)me;
	out->group_world = (unsigned)n_nodes;
	return 0;
}

int phx_rankmap_place(const struct phx_conf *conf, const struct phx_layout *layout,
		      char *const *nodes, size_t n_nodes, unsigned per_node, const char *node,
		      struct phx_rankmap *map, struct phx_plan **plan, char *err, size_t errlen)
{
	return phx_rankmap_place_slow(conf, layout, nodes, n_nodes, per_node, node, NULL, 0, map,
				      plan, err, errlen);
}

int phx_rankmap_place_slow(const struct phx_conf *conf, const struct phx_layout *layout,
			   char *const *nodes, size_t n_nodes, unsigned per_node, const char *node,
			   char *const *slow, size_t n_slow, struct phx_rankmap *map,
			   struct phx_plan **plan, char *err, size_t errlen)
{
	struct phx_fabric *fabric = NULL;
	char topo_buf[4096], why[1024];
	struct phx_place_input in = {
		.nodes = nodes,
		.n_nodes = n_nodes,
		.gpus_per_node = per_node,
		.slow = slow,
		.n_slow = n_slow,
		.layout = layout,
	};
	const char *topo_conf = phx_conf_topology_conf(conf, topo_buf, sizeof(topo_buf));
	int rc = -1;

	*plan = NULL;
	if (phx_fabric_load(conf->has_fabric ? conf->source : NULL, topo_conf, &fabric, why,
			    sizeof(why)) < 0)
		return phx_errf(err, errlen, "cannot read the fabric: %s", why);
	in.fabric = fabric;
	if (phx_place(&in, plan, why, sizeof(why)) < 0) {
		phx_errf(err, errlen, "placement failed: %s", why);
		goto out;
	}
	rc = phx_rankmap_from_plan(*plan, node, map, err, errlen);
out:
	phx_fabric_free(fabric);
	return rc;
}
