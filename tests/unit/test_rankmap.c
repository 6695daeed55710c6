/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "placement/fabric.h"
#include "placement/rankmap.h"

static const char topology[] = "SwitchName=leaf0 Nodes=n[1-4]\n"
			       "SwitchName=leaf1 Nodes=n[5-8]\n"
			       "SwitchName=spine Switches=leaf[0-1]\n";

static struct phx_plan *plan_for(const char *spec, char **nodes, size_t n, unsigned gpn)
{
	struct phx_fabric *fabric;
	struct phx_layout layout;
	struct phx_plan *plan;
	char err[512];
	struct phx_place_input in = {
		.nodes = nodes,
		.n_nodes = n,
		.gpus_per_node = gpn,
		.layout = &layout,
	};

	assert_int_equal(phx_fabric_parse(NULL, NULL, 0, "topology.conf", topology,
					  sizeof(topology) - 1, &fabric, err, sizeof(err)),
			 0);
	assert_int_equal(phx_layout_parse(spec, &layout, err, sizeof(err)), 0);
	assert_int_equal(phx_layout_resolve(&layout, n * gpn, err, sizeof(err)), 0);
	in.fabric = fabric;
	assert_int_equal(phx_place(&in, &plan, err, sizeof(err)), 0);
	phx_fabric_free(fabric);
	return plan;
}

/* Every node's map together covers every rank exactly once. */
static void test_maps_partition_the_world(void **state)
{
	char *nodes[] = { "n7", "n2", "n5", "n1", "n8", "n3" };
	size_t n = sizeof(nodes) / sizeof(nodes[0]);
	struct phx_plan *plan = plan_for("tp=4,pp=3,dp=*", nodes, n, 4);
	unsigned *seen = calloc(plan->world, sizeof(*seen));
	unsigned groups = 0;
	char err[256];

	for (size_t i = 0; i < n; i++) {
		struct phx_rankmap map;

		assert_int_equal(phx_rankmap_from_plan(plan, nodes[i], &map, err, sizeof(err)), 0);
		assert_int_equal(map.tasks_per_node, 4);
		assert_int_equal(map.world, 24);
		assert_int_equal(map.group_world, n);
		assert_true(map.group_rank < n);
		groups |= 1u << map.group_rank;
		for (unsigned s = 0; s < map.tasks_per_node; s++) {
			assert_true(map.slot_rank[s] < plan->world);
			seen[map.slot_rank[s]]++;
			/* The slot is the rank's local GPU in the plan. */
			assert_int_equal(plan->rank_gpu[map.slot_rank[s]], s);
		}
		if (!strcmp(nodes[i], plan->nodes[plan->rank_node[0]].name))
			assert_int_equal(map.group_rank, 0);
		assert_string_equal(map.master, plan->nodes[plan->rank_node[0]].name);
		phx_rankmap_free(&map);
	}
	for (unsigned long r = 0; r < plan->world; r++)
		assert_int_equal(seen[r], 1);
	assert_int_equal(groups, (1u << n) - 1);
	free(seen);
	phx_plan_free(plan);
}

static void test_node_not_in_plan(void **state)
{
	char *nodes[] = { "n1", "n2" };
	struct phx_plan *plan = plan_for("dp=*", nodes, 2, 2);
	struct phx_rankmap map;
	char err[256];

	assert_int_equal(phx_rankmap_from_plan(plan, "n9", &map, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "n9"));
	phx_plan_free(plan);
}

static void test_block_is_slurm_order(void **state)
{
	char *nodes[] = { "b1", "b2", "b3" };
	struct phx_layout layout;
	struct phx_rankmap map;
	char err[256];

	assert_int_equal(phx_layout_parse("tp=2,dp=*", &layout, err, sizeof(err)), 0);
	assert_int_equal(phx_layout_resolve(&layout, 6, err, sizeof(err)), 0);
	assert_int_equal(phx_rankmap_block(&layout, nodes, 3, 2, "b2", &map, err, sizeof(err)), 0);
	assert_int_equal(map.slot_rank[0], 2);
	assert_int_equal(map.slot_rank[1], 3);
	assert_int_equal(map.group_rank, 1);
	assert_int_equal(map.group_world, 3);
	assert_string_equal(map.master, "b1");
	phx_rankmap_free(&map);
	assert_int_equal(phx_rankmap_block(&layout, nodes, 3, 2, "b9", &map, err, sizeof(err)), -1);
	assert_int_equal(phx_rankmap_block(&layout, nodes, 3, 4, "b1", &map, err, sizeof(err)), -1);
}

static void test_master_port(void **state)
{
	unsigned a = phx_master_port(1234, 0), b = phx_master_port(1234, 1);

	assert_int_equal(a, phx_master_port(1234, 0));
	assert_int_not_equal(a, b);
	assert_int_not_equal(a, phx_master_port(1235, 0));
	for (uint32_t j = 0; j < 100000; j += 7) {
		unsigned p = phx_master_port(j, j % 3);

		assert_true(p >= 20000 && p < 40000);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_maps_partition_the_world),
		cmocka_unit_test(test_node_not_in_plan),
		cmocka_unit_test(test_block_is_slurm_order),
		cmocka_unit_test(test_master_port),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
