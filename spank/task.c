/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "placement/torchenv.h"
#include "spank/task.h"

/* The plugin reads and writes the task's environment through Slurm. */
static int spank_env_get(void *ctx, const char *name, char *buf, size_t len)
{
	return spank_getenv(ctx, name, buf, (int)len) == ESPANK_SUCCESS ? 0 : -1;
}

static int spank_env_set(void *ctx, const char *name, const char *value, int overwrite)
{
	spank_err_t rc = spank_setenv(ctx, name, value, overwrite);

	if (rc == ESPANK_SUCCESS || (!overwrite && rc == ESPANK_ENV_EXISTS))
		return 0;
	phx_error("cannot set %s for the task: %s", name, spank_strerror(rc));
	return -1;
}

/* NUMA-local CPUs of the GPU, never outside what Slurm gave the task. */
static int bind_cpus(const struct phx_envops *ops, struct phx_binding *b)
{
	cpu_set_t allowed;

	if (!b->tgpu || sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
		return 0;
	if (phx_bind_cpus(ops, &allowed, b) < 0)
		return -1;
	if (b->cpus_set && sched_setaffinity(0, sizeof(b->mask), &b->mask) < 0) {
		phx_warn("cannot bind to the CPUs near GPU %ld: %s", b->gpu, strerror(errno));
		b->cpus[0] = '\0';
	}
	return 0;
}

static void explain(const struct phx_step *step, unsigned slot, unsigned long rank,
		    const struct phx_binding *b)
{
	unsigned long coord[PHX_DIM_COUNT];
	char line[2048];
	int n = 0;

	phx_layout_coords(&step->map.layout, rank, coord);
	n += snprintf(line + n, sizeof(line) - (size_t)n,
		      "phalanx: rank %lu/%lu on %s slot %u:", rank, step->map.world, step->node,
		      slot);
	for (int d = 0; d < PHX_DIM_COUNT && n < (int)sizeof(line); d++) {
		if (step->map.layout.size[d] > 1)
			n += snprintf(line + n, sizeof(line) - (size_t)n, " %s=%lu",
				      phx_dim_name((enum phx_dim)d), coord[d]);
	}
	if (n < (int)sizeof(line))
		snprintf(line + n, sizeof(line) - (size_t)n, " cuda=%d of %s nic=%s cpus=%s",
			 b->cuda_device, b->visible[0] ? b->visible : "-",
			 b->nic ? b->nic->name : "-", b->cpus[0] ? b->cpus : "unchanged");
	/* The task's stderr, so the user sees it in srun's output. */
	fprintf(stderr, "%s\n", line);
	if (rank == 0 && step->plan) {
		uint64_t bound = 0;

		/* Only --phx-explain asks for it: placing does not need it. */
		phx_plan_lower_bound(step->plan, &bound);
		fprintf(stderr,
			"phalanx: placement %s: cost %llu, Slurm's order %llu, lower bound %llu\n",
			step->plan->strategy, (unsigned long long)step->plan->cost.total,
			(unsigned long long)step->plan->hostname.total, (unsigned long long)bound);
	}
}

int phx_task_init(spank_t sp, const struct phx_step *step, const struct phx_job_opts *opts,
		  const char *node_cvd, const struct phx_rootcause *rootcause)
{
	char error_file[PATH_MAX];
	struct phx_envops ops = { spank_env_get, spank_env_set, sp };
	struct phx_binding b;
	unsigned long rank;
	int slot;

	if (!step->active)
		return 0;
	if (spank_get_item(sp, S_TASK_ID, &slot) != ESPANK_SUCCESS)
		slot = -1;
	if (step->error[0]) {
		/* Every task fails; one line per node says why. */
		if (slot <= 0)
			phx_error("%s", step->error);
		return -1;
	}
	if (slot < 0 || (unsigned)slot >= step->map.tasks_per_node) {
		phx_error("task has no slot in the placement of %s", step->node);
		return -1;
	}
	rank = step->map.slot_rank[slot];
	/* torchrun's per-rank error file, for @record (phalanx(7)). */
	phx_rootcause_file(rootcause, rank, error_file, sizeof(error_file));
	if (error_file[0] && spank_env_set(sp, "TORCHELASTIC_ERROR_FILE", error_file, 1) < 0)
		return -1;
	if (phx_torchenv_rank(&ops, &step->map, (unsigned)slot, NULL, step->master_port) ||
	    phx_bind_gpu(&ops, step->topo, (unsigned)slot, step->map.tasks_per_node, node_cvd,
			 &b) ||
	    bind_cpus(&ops, &b) || phx_bind_nic(&ops, &b))
		return -1;
	if (opts->explain)
		explain(step, (unsigned)slot, rank, &b);
	return 0;
}
