/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hwloc.h>
#include <hwloc/glibc-sched.h>

#include "common/gpulist.h"
#include "common/log.h"
#include "spank/task.h"

static int set_env(spank_t sp, const char *name, int overwrite, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int set_env(spank_t sp, const char *name, int overwrite, const char *fmt, ...)
{
	char value[4096];
	spank_err_t rc;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	rc = spank_setenv(sp, name, value, overwrite);
	if (rc == ESPANK_SUCCESS || (!overwrite && rc == ESPANK_ENV_EXISTS))
		return 0;
	phx_error("cannot set %s for the task: %s", name, spank_strerror(rc));
	return -1;
}

/* The torchrun contract, so an unmodified PyTorch script runs. */
static int set_rank_env(spank_t sp, const struct phx_step *step, unsigned slot,
			unsigned long rank)
{
	const struct phx_rankmap *map = &step->map;
	unsigned long coord[PHX_DIM_COUNT];
	char layout[256], name[32];

	if (set_env(sp, "RANK", 1, "%lu", rank) || set_env(sp, "LOCAL_RANK", 1, "%u", slot) ||
	    set_env(sp, "WORLD_SIZE", 1, "%lu", map->world) ||
	    set_env(sp, "LOCAL_WORLD_SIZE", 1, "%u", map->tasks_per_node) ||
	    set_env(sp, "GROUP_RANK", 1, "%u", map->group_rank) ||
	    set_env(sp, "GROUP_WORLD_SIZE", 1, "%u", map->group_world) ||
	    set_env(sp, "MASTER_ADDR", 1, "%s", map->master) ||
	    /* A port the user chose wins: it is the one knob they may need. */
	    set_env(sp, "MASTER_PORT", 0, "%u", step->master_port))
		return -1;
	phx_layout_coords(&map->layout, rank, coord);
	phx_layout_format(&map->layout, layout, sizeof(layout));
	if (set_env(sp, "PHALANX_LAYOUT", 1, "%s", layout))
		return -1;
	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		char upper[8];
		const char *dim = phx_dim_name((enum phx_dim)d);
		size_t i;

		for (i = 0; dim[i] && i < sizeof(upper) - 1; i++)
			upper[i] = (char)(dim[i] - 'a' + 'A');
		upper[i] = '\0';
		snprintf(name, sizeof(name), "PHALANX_%s_RANK", upper);
		if (set_env(sp, name, 1, "%lu", coord[d]))
			return -1;
		snprintf(name, sizeof(name), "PHALANX_%s_SIZE", upper);
		if (set_env(sp, name, 1, "%lu", map->layout.size[d]))
			return -1;
	}
	return 0;
}

struct binding {
	long gpu;	      /* physical index of the task's GPU, -1 when none */
	char visible[1024];   /* CUDA_VISIBLE_DEVICES as set */
	const struct phx_topo_gpu *tgpu;
	const struct phx_topo_nic *nic;
	char cpus[1024];      /* the CPU list the task was bound to, "" when unchanged */
};

/* CUDA_VISIBLE_DEVICES with the task's own GPU first: device 0 is its GPU. */
static int bind_gpu(spank_t sp, const struct phx_step *step, unsigned slot, struct binding *b)
{
	char visible[1024], gpus[1024];
	struct phx_gpus ids;

	b->gpu = -1;
	if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", visible, sizeof(visible)) != ESPANK_SUCCESS)
		return 0; /* the step has no GPUs */
	/* One GPU per task (--gpus-per-task, --phx-isolate=task): it is the task's. */
	if (!strchr(visible, ','))
		snprintf(b->visible, sizeof(b->visible), "%s", visible);
	else if (phx_cuda_own_first(visible, slot, b->visible, sizeof(b->visible)) < 0) {
		phx_warn("task slot %u has no GPU of its own in CUDA_VISIBLE_DEVICES=%s; "
			 "request one GPU per task (--gpus-per-node=%u)",
			 slot, visible, step->map.tasks_per_node);
		b->visible[0] = '\0';
		return 0;
	}
	if (set_env(sp, "CUDA_VISIBLE_DEVICES", 1, "%s", b->visible))
		return -1;
	/* Slurm's physical indices, for the topology (PCI bus order). */
	if ((spank_getenv(sp, "SLURM_STEP_GPUS", gpus, sizeof(gpus)) == ESPANK_SUCCESS ||
	     spank_getenv(sp, "SLURM_JOB_GPUS", gpus, sizeof(gpus)) == ESPANK_SUCCESS) &&
	    phx_gpus_parse(gpus, &ids, NULL, 0) == 0 && ids.n)
		b->gpu = ids.id[ids.n == 1 ? 0 : slot < ids.n ? slot : 0];
	if (step->topo && b->gpu >= 0 && (size_t)b->gpu < step->topo->ngpus) {
		b->tgpu = &step->topo->gpus[b->gpu];
		if (b->tgpu->nic >= 0)
			b->nic = &step->topo->nics[b->tgpu->nic];
	}
	return 0;
}

/* NUMA-local CPUs of the GPU, never outside what Slurm gave the task. */
static int bind_cpus(spank_t sp, const struct phx_step *step, struct binding *b)
{
	hwloc_bitmap_t allowed, want;
	cpu_set_t mask;
	int rc = 0;

	b->cpus[0] = '\0';
	if (!b->tgpu || !b->tgpu->cpuset || sched_getaffinity(0, sizeof(mask), &mask) < 0)
		return 0;
	allowed = hwloc_bitmap_alloc();
	want = hwloc_bitmap_alloc();
	if (!allowed || !want)
		goto out;
	hwloc_cpuset_from_glibc_sched_affinity(NULL, allowed, &mask, sizeof(mask));
	hwloc_bitmap_and(want, allowed, b->tgpu->cpuset);
	if (hwloc_bitmap_iszero(want) || hwloc_bitmap_isequal(want, allowed))
		goto out;
	hwloc_cpuset_to_glibc_sched_affinity(NULL, want, &mask, sizeof(mask));
	if (sched_setaffinity(0, sizeof(mask), &mask) < 0) {
		phx_warn("cannot bind to the CPUs near GPU %ld: %s", b->gpu, strerror(errno));
		goto out;
	}
	hwloc_bitmap_list_snprintf(b->cpus, sizeof(b->cpus), want);
	/* Tasks sharing a NUMA node share its cores. */
	rc = set_env(sp, "OMP_NUM_THREADS", 0, "%d",
		     hwloc_bitmap_weight(want) > 0 ? hwloc_bitmap_weight(want) : 1);
out:
	hwloc_bitmap_free(allowed);
	hwloc_bitmap_free(want);
	return rc;
}

/* The GPU's paired NIC for NCCL and UCX; a value the user set wins. */
static int bind_nic(spank_t sp, const struct binding *b)
{
	const struct phx_topo_nic *nic = b->nic;
	unsigned port = nic && nic->nports ? nic->ports[0].num : 1;

	if (!nic)
		return 0;
	if (nic->rdma && (set_env(sp, "NCCL_IB_HCA", 0, "=%s:%u", nic->name, port) ||
			  set_env(sp, "UCX_NET_DEVICES", 0, "%s:%u", nic->name, port)))
		return -1;
	if (nic->netdev[0] && set_env(sp, "NCCL_SOCKET_IFNAME", 0, "=%s", nic->netdev))
		return -1;
	return 0;
}

static void explain(const struct phx_step *step, unsigned slot, unsigned long rank,
		    const struct binding *b)
{
	unsigned long coord[PHX_DIM_COUNT];
	char line[2048];
	int n = 0;

	phx_layout_coords(&step->map.layout, rank, coord);
	n += snprintf(line + n, sizeof(line) - (size_t)n, "phalanx: rank %lu/%lu on %s slot %u:",
		      rank, step->map.world, step->node, slot);
	for (int d = 0; d < PHX_DIM_COUNT && n < (int)sizeof(line); d++) {
		if (step->map.layout.size[d] > 1)
			n += snprintf(line + n, sizeof(line) - (size_t)n, " %s=%lu",
				      phx_dim_name((enum phx_dim)d), coord[d]);
	}
	if (n < (int)sizeof(line))
		snprintf(line + n, sizeof(line) - (size_t)n, " gpu=%s nic=%s cpus=%s",
			 b->visible[0] ? b->visible : "-", b->nic ? b->nic->name : "-",
			 b->cpus[0] ? b->cpus : "unchanged");
	/* The task's stderr, so the user sees it in srun's output. */
	fprintf(stderr, "%s\n", line);
	if (rank == 0 && step->plan)
		fprintf(stderr,
			"phalanx: placement %s: cost %llu, Slurm's order %llu, lower bound %llu\n",
			step->plan->strategy, (unsigned long long)step->plan->cost.total,
			(unsigned long long)step->plan->hostname.total,
			(unsigned long long)step->plan->lower_bound);
}

int phx_task_init(spank_t sp, const struct phx_step *step, const struct phx_job_opts *opts)
{
	struct binding b = { 0 };
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
	if (slot < 0 ||
	    (unsigned)slot >= step->map.tasks_per_node) {
		phx_error("task has no slot in the placement of %s", step->node);
		return -1;
	}
	rank = step->map.slot_rank[slot];
	if (set_rank_env(sp, step, (unsigned)slot, rank) || bind_gpu(sp, step, (unsigned)slot, &b) ||
	    bind_cpus(sp, step, &b) || bind_nic(sp, &b))
		return -1;
	if (opts->explain)
		explain(step, (unsigned)slot, rank, &b);
	return 0;
}
