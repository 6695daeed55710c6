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

#include "launcher/env.h"

static void test_envv_copy_drops_pmix(void **state)
{
	char *env[] = { "PATH=/bin", "PMIX_RANK=3",	     "PMIX_SERVER_URI4=x",
			"HOME=/h",   "PHALANX_AGENT_SLOT=9", "NOEQUALS",
			NULL };
	struct phx_envv e;
	char buf[64];

	assert_int_equal(phx_envv_from(&e, env), 0);
	assert_int_equal(e.n, 2);
	assert_null(e.v[2]);
	assert_string_equal(phx_envv_value(&e, "PATH"), "/bin");
	assert_null(phx_envv_value(&e, "PMIX_RANK"));
	/* An inherited slot would point a worker at the wrong heartbeat. */
	assert_null(phx_envv_value(&e, "PHALANX_AGENT_SLOT"));
	assert_int_equal(phx_envv_get(&e, "HOME", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/h");
	assert_int_equal(phx_envv_get(&e, "HOM", buf, sizeof(buf)), -1);
	phx_envv_free(&e);
}

static void test_envv_set_overwrite(void **state)
{
	char *env[] = { "A=1", NULL };
	struct phx_envv e;

	assert_int_equal(phx_envv_from(&e, env), 0);
	assert_int_equal(phx_envv_set(&e, "A", "2", 0), 0);
	assert_string_equal(phx_envv_value(&e, "A"), "1");
	assert_int_equal(phx_envv_set(&e, "A", "3", 1), 0);
	assert_string_equal(phx_envv_value(&e, "A"), "3");
	for (int i = 0; i < 200; i++) {
		char name[16];

		snprintf(name, sizeof(name), "V%d", i);
		assert_int_equal(phx_envv_set(&e, name, "x=y", 1), 0);
	}
	assert_int_equal(e.n, 201);
	assert_string_equal(phx_envv_value(&e, "V199"), "x=y");
	assert_null(e.v[e.n]);
	phx_envv_free(&e);
}

static void block_map(struct phx_rankmap *map, const char *spec, const char *node)
{
	char *nodes[] = { "node1", "node2", "node3", "node4" };
	struct phx_layout layout;
	char err[256];

	assert_int_equal(phx_layout_parse(spec, &layout, err, sizeof(err)), 0);
	assert_int_equal(phx_layout_resolve(&layout, 8, err, sizeof(err)), 0);
	assert_int_equal(phx_rankmap_block(&layout, nodes, 4, 2, node, map, err, sizeof(err)), 0);
}

static void worker_env(struct phx_envv *e, char **base, const struct phx_worker_ctx *ctx,
		       unsigned slot)
{
	struct phx_binding b;

	assert_int_equal(phx_envv_from(e, base), 0);
	assert_int_equal(phx_worker_env(e, ctx, slot, &b), 0);
}

#define ASSERT_ENV(e, name, value) assert_string_equal(phx_envv_value(e, name) ?: "(unset)", value)

static void test_torchrun_contract(void **state)
{
	char *base[] = { "CUDA_VISIBLE_DEVICES=0,1", "PMIX_RANK=1", "PHALANX_JOB_TOKEN=tok", NULL };
	struct phx_rankmap map;
	struct phx_worker_ctx ctx = {
		.map = &map,
		.master_addr = "10.0.0.1",
		.master_port = 29500,
		.restart_count = 2,
		.max_restarts = 3,
		.run_id = "42.0",
		.run_dir = "/run/x",
		.hb_fd = 7,
		.agent_pid = 1234,
		.node = "node2",
	};
	struct phx_envv e;

	block_map(&map, "tp=2,dp=*", "node2");
	worker_env(&e, base, &ctx, 1);
	ASSERT_ENV(&e, "RANK", "3");
	ASSERT_ENV(&e, "LOCAL_RANK", "1");
	ASSERT_ENV(&e, "WORLD_SIZE", "8");
	ASSERT_ENV(&e, "LOCAL_WORLD_SIZE", "2");
	ASSERT_ENV(&e, "GROUP_RANK", "1");
	ASSERT_ENV(&e, "GROUP_WORLD_SIZE", "4");
	ASSERT_ENV(&e, "ROLE_NAME", "default");
	ASSERT_ENV(&e, "ROLE_RANK", "3");
	ASSERT_ENV(&e, "ROLE_WORLD_SIZE", "8");
	ASSERT_ENV(&e, "MASTER_ADDR", "10.0.0.1");
	ASSERT_ENV(&e, "MASTER_PORT", "29500");
	ASSERT_ENV(&e, "TORCHELASTIC_RESTART_COUNT", "2");
	ASSERT_ENV(&e, "TORCHELASTIC_MAX_RESTARTS", "3");
	ASSERT_ENV(&e, "TORCHELASTIC_RUN_ID", "42.0");
	ASSERT_ENV(&e, "TORCHELASTIC_USE_AGENT_STORE", "False");
	ASSERT_ENV(&e, "TORCHELASTIC_ERROR_FILE", "/run/x/error-rank3-restart2.json");
	ASSERT_ENV(&e, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
	ASSERT_ENV(&e, "OMP_NUM_THREADS", "1");
	/* The node's GPUs in the agent's order: set_device(LOCAL_RANK) picks the worker's. */
	ASSERT_ENV(&e, "CUDA_VISIBLE_DEVICES", "0,1");
	ASSERT_ENV(&e, "PHALANX_CUDA_DEVICE", "1");
	/* Slurm's view as if srun had started this worker as a task of its own. */
	ASSERT_ENV(&e, "SLURM_PROCID", "3");
	ASSERT_ENV(&e, "SLURM_LOCALID", "1");
	ASSERT_ENV(&e, "SLURM_NODEID", "1");
	ASSERT_ENV(&e, "SLURM_NTASKS", "8");
	ASSERT_ENV(&e, "SLURM_STEP_NUM_TASKS", "8");
	ASSERT_ENV(&e, "SLURM_STEP_NUM_NODES", "4");
	ASSERT_ENV(&e, "SLURM_NTASKS_PER_NODE", "2");
	ASSERT_ENV(&e, "SLURM_TASKS_PER_NODE", "2(x4)");
	ASSERT_ENV(&e, "SLURM_GTIDS", "2,3");
	ASSERT_ENV(&e, "PHALANX_AGENT_SHM", "7");
	ASSERT_ENV(&e, "PHALANX_AGENT_SLOT", "1");
	ASSERT_ENV(&e, "PHALANX_AGENT_PID", "1234");
	ASSERT_ENV(&e, "PHALANX_NODE", "node2");
	ASSERT_ENV(&e, "PHALANX_JOB_TOKEN", "tok");
	ASSERT_ENV(&e, "PHALANX_LAYOUT", "tp=2,cp=1,ep=1,dp=4,pp=1,order=tp-cp-ep-dp-pp");
	ASSERT_ENV(&e, "PHALANX_TP_RANK", "1");
	ASSERT_ENV(&e, "PHALANX_DP_RANK", "1");
	ASSERT_ENV(&e, "PHALANX_DP_SIZE", "4");
	assert_null(phx_envv_value(&e, "PMIX_RANK"));
	phx_envv_free(&e);
	phx_rankmap_free(&map);
}

/*
 * The second of two roles: its map counts its own 8 ranks on its 4 nodes;
 * the environment counts all 20 ranks on 6 nodes, the role's ranks from 12.
 */
static void test_role_env(void **state)
{
	char *base[] = { NULL };
	struct phx_rankmap map;
	struct phx_role_env role = { .name = "rollout",
				     .rank_offset = 12,
				     .world = 20,
				     .node_offset = 2,
				     .nodes = 6,
				     .master_addr = "10.0.0.3",
				     .master_port = 31000 };
	struct phx_worker_ctx ctx = {
		.map = &map,
		.master_addr = "10.0.0.1",
		.master_port = 29500,
		.restart_count = 1,
		.max_restarts = 3,
		.run_id = "42.0",
		.run_dir = "/run/x",
		.node = "node3",
		.role = &role,
	};
	struct phx_envv e;

	block_map(&map, "tp=2,dp=*", "node3");
	worker_env(&e, base, &ctx, 1);
	ASSERT_ENV(&e, "RANK", "17");
	ASSERT_ENV(&e, "WORLD_SIZE", "20");
	ASSERT_ENV(&e, "LOCAL_RANK", "1");
	ASSERT_ENV(&e, "LOCAL_WORLD_SIZE", "2");
	ASSERT_ENV(&e, "GROUP_RANK", "4");
	ASSERT_ENV(&e, "GROUP_WORLD_SIZE", "6");
	ASSERT_ENV(&e, "ROLE_NAME", "rollout");
	ASSERT_ENV(&e, "ROLE_RANK", "5");
	ASSERT_ENV(&e, "ROLE_WORLD_SIZE", "8");
	ASSERT_ENV(&e, "MASTER_ADDR", "10.0.0.1");
	ASSERT_ENV(&e, "MASTER_PORT", "29500");
	ASSERT_ENV(&e, "PHALANX_ROLE_MASTER_ADDR", "10.0.0.3");
	ASSERT_ENV(&e, "PHALANX_ROLE_MASTER_PORT", "31000");
	/* Coordinates in the role's layout; error files by global rank. */
	ASSERT_ENV(&e, "PHALANX_TP_RANK", "1");
	ASSERT_ENV(&e, "PHALANX_DP_RANK", "2");
	ASSERT_ENV(&e, "TORCHELASTIC_ERROR_FILE", "/run/x/error-rank17-restart1.json");
	phx_envv_free(&e);
	phx_rankmap_free(&map);
}

/* A user's MASTER_PORT and OMP_NUM_THREADS win; no GPUs, no CUDA_VISIBLE_DEVICES. */
static void test_user_values_win(void **state)
{
	char *base[] = { "MASTER_PORT=1111", "OMP_NUM_THREADS=4", "RANK=99", NULL };
	struct phx_rankmap map;
	struct phx_worker_ctx ctx = {
		.map = &map,
		.master_addr = "node1",
		.master_port = 29500,
		.run_id = "r",
		.run_dir = "/d",
		.hb_fd = 3,
		.node = "node1",
	};
	struct phx_envv e;

	block_map(&map, "dp=*", "node1");
	worker_env(&e, base, &ctx, 0);
	ASSERT_ENV(&e, "MASTER_PORT", "1111");
	ASSERT_ENV(&e, "OMP_NUM_THREADS", "4");
	/* The rank is never the user's. */
	ASSERT_ENV(&e, "RANK", "0");
	ASSERT_ENV(&e, "GROUP_RANK", "0");
	assert_null(phx_envv_value(&e, "CUDA_VISIBLE_DEVICES"));
	phx_envv_free(&e);
	phx_rankmap_free(&map);
}

static void test_slot_out_of_range(void **state)
{
	char *base[] = { NULL };
	struct phx_rankmap map;
	struct phx_worker_ctx ctx = {
		.map = &map, .master_addr = "n", .run_id = "r", .run_dir = "/d", .node = "node1"
	};
	struct phx_binding b;
	struct phx_envv e;

	block_map(&map, "dp=*", "node1");
	assert_int_equal(phx_envv_from(&e, base), 0);
	assert_int_equal(phx_worker_env(&e, &ctx, 2, &b), -1);
	phx_envv_free(&e);
	phx_rankmap_free(&map);
}

static void test_cuda_count(void **state)
{
	assert_int_equal(phx_cuda_count(NULL), 0);
	assert_int_equal(phx_cuda_count(""), 0);
	assert_int_equal(phx_cuda_count("NoDevFiles"), 0);
	assert_int_equal(phx_cuda_count("3"), 1);
	assert_int_equal(phx_cuda_count("0,1,2,3,4,5,6,7"), 8);
	assert_int_equal(phx_cuda_count("GPU-aa,GPU-bb"), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_envv_copy_drops_pmix),
		cmocka_unit_test(test_envv_set_overwrite),
		cmocka_unit_test(test_torchrun_contract),
		cmocka_unit_test(test_role_env),
		cmocka_unit_test(test_user_values_win),
		cmocka_unit_test(test_slot_out_of_range),
		cmocka_unit_test(test_cuda_count),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
