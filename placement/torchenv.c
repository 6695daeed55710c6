/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <hwloc.h>
#include <hwloc/glibc-sched.h>

#include "common/gpulist.h"
#include "common/log.h"
#include "placement/torchenv.h"

int phx_envops_setf(const struct phx_envops *ops, const char *name, int overwrite, const char *fmt,
		    ...)
{
	char value[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	return ops->set(ops->ctx, name, value, overwrite);
}

static int set_coords(const struct phx_envops *ops, const struct phx_rankmap *map,
		      unsigned long rank)
{
	unsigned long coord[PHX_DIM_COUNT];
	char layout[256], name[32];

	phx_layout_coords(&map->layout, rank, coord);
	phx_layout_format(&map->layout, layout, sizeof(layout));
	if (phx_envops_setf(ops, "PHALANX_LAYOUT", 1, "%s", layout))
		return -1;
	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		char upper[8];
		const char *dim = phx_dim_name((enum phx_dim)d);
		size_t i;

		for (i = 0; dim[i] && i < sizeof(upper) - 1; i++)
			upper[i] = (char)(dim[i] - 'a' + 'A');
		upper[i] = '\0';
		snprintf(name, sizeof(name), "PHALANX_%s_RANK", upper);
		if (phx_envops_setf(ops, name, 1, "%lu", coord[d]))
			return -1;
		snprintf(name, sizeof(name), "PHALANX_%s_SIZE", upper);
		if (phx_envops_setf(ops, name, 1, "%lu", map->layout.size[d]))
			return -1;
	}
	return 0;
}

int phx_torchenv_rank(const struct phx_envops *ops, const struct phx_rankmap *map, unsigned slot,
		      const char *master, unsigned master_port)
{
	unsigned long rank;

	if (slot >= map->tasks_per_node)
		return -1;
	rank = map->slot_rank[slot];
	/* One role: torchrun's ROLE_* then repeat the global view. */
	if (phx_envops_setf(ops, "RANK", 1, "%lu", rank) ||
	    phx_envops_setf(ops, "LOCAL_RANK", 1, "%u", slot) ||
	    phx_envops_setf(ops, "WORLD_SIZE", 1, "%lu", map->world) ||
	    phx_envops_setf(ops, "LOCAL_WORLD_SIZE", 1, "%u", map->tasks_per_node) ||
	    phx_envops_setf(ops, "GROUP_RANK", 1, "%u", map->group_rank) ||
	    phx_envops_setf(ops, "GROUP_WORLD_SIZE", 1, "%u", map->group_world) ||
	    phx_envops_setf(ops, "ROLE_NAME", 1, "%s", "default") ||
	    phx_envops_setf(ops, "ROLE_RANK", 1, "%lu", rank) ||
	    phx_envops_setf(ops, "ROLE_WORLD_SIZE", 1, "%lu", map->world) ||
	    phx_envops_setf(ops, "MASTER_ADDR", 1, "%s", master ? master : map->master) ||
	    /* A port the user chose wins: it is the one knob they may need. */
	    phx_envops_setf(ops, "MASTER_PORT", 0, "%u", master_port))
		return -1;
	return set_coords(ops, map, rank);
}

int phx_torchenv_role(const struct phx_envops *ops, const struct phx_rankmap *map, unsigned slot,
		      const struct phx_role_env *role)
{
	unsigned long rank;

	if (slot >= map->tasks_per_node)
		return -1;
	rank = map->slot_rank[slot];
	if (phx_envops_setf(ops, "RANK", 1, "%lu", role->rank_offset + rank) ||
	    phx_envops_setf(ops, "WORLD_SIZE", 1, "%lu", role->world) ||
	    phx_envops_setf(ops, "GROUP_RANK", 1, "%u", role->node_offset + map->group_rank) ||
	    phx_envops_setf(ops, "GROUP_WORLD_SIZE", 1, "%u", role->nodes) ||
	    phx_envops_setf(ops, "ROLE_NAME", 1, "%s", role->name) ||
	    phx_envops_setf(ops, "ROLE_RANK", 1, "%lu", rank) ||
	    phx_envops_setf(ops, "ROLE_WORLD_SIZE", 1, "%lu", map->world) ||
	    phx_envops_setf(ops, "PHALANX_ROLE_MASTER_ADDR", 1, "%s", role->master_addr) ||
	    phx_envops_setf(ops, "PHALANX_ROLE_MASTER_PORT", 1, "%u", role->master_port))
		return -1;
	return 0;
}

/*
 * Slurm's physical index of the rank's GPU, for the topology (PCI bus
 * order): entry `slot` of the step's GPUs, or in task isolation the first
 * of the share that isolation gave the slot.
 */
static long slurm_gpu(const struct phx_envops *ops, unsigned slot, unsigned tasks_per_node,
		      bool shared)
{
	struct phx_gpus ids, mine;
	char gpus[1024];

	if ((ops->get(ops->ctx, "SLURM_STEP_GPUS", gpus, sizeof(gpus)) < 0 &&
	     ops->get(ops->ctx, "SLURM_JOB_GPUS", gpus, sizeof(gpus)) < 0) ||
	    phx_gpus_parse(gpus, &ids, NULL, 0) < 0 || !ids.n)
		return -1;
	/* A task Slurm bound to one GPU (--gpus-per-task) has only its own here. */
	if (ids.n == 1)
		return ids.id[0];
	if (shared)
		return slot < ids.n ? (long)ids.id[slot] : -1;
	if (phx_gpus_select(PHX_ISOLATE_TASK, &ids, slot, tasks_per_node, &mine) < 0 || !mine.n)
		return -1;
	return mine.id[0];
}

/* Every rank of the node sees node_cvd in one order: its own GPU is entry LOCAL_RANK. */
static int bind_shared(const struct phx_envops *ops, unsigned slot, unsigned tasks_per_node,
		       const char *node_cvd, struct phx_binding *b)
{
	char own[256];

	snprintf(b->visible, sizeof(b->visible), "%s", node_cvd);
	if (phx_envops_setf(ops, "CUDA_VISIBLE_DEVICES", 1, "%s", b->visible))
		return -1;
	if (phx_cuda_entry(b->visible, slot, own, sizeof(own)) < 0)
		phx_warn("task slot %u has no GPU of its own in CUDA_VISIBLE_DEVICES=%s; "
			 "request one GPU per task (--gpus-per-node=%u)",
			 slot, b->visible, tasks_per_node);
	else
		b->cuda_device = (int)slot;
	return 0;
}

/* The rank sees only its own GPUs (task isolation): the first is its device. */
static void bind_own(const struct phx_envops *ops, struct phx_binding *b)
{
	char own[256];

	if (ops->get(ops->ctx, "CUDA_VISIBLE_DEVICES", b->visible, sizeof(b->visible)) < 0 ||
	    phx_cuda_entry(b->visible, 0, own, sizeof(own)) < 0)
		b->visible[0] = '\0'; /* the step has no GPUs */
	else
		b->cuda_device = 0;
}

int phx_bind_gpu(const struct phx_envops *ops, const struct phx_node_topo *topo, unsigned slot,
		 unsigned tasks_per_node, const char *node_cvd, struct phx_binding *b)
{
	bool shared = node_cvd && node_cvd[0];

	memset(b, 0, sizeof(*b));
	b->gpu = -1;
	b->cuda_device = -1;
	if (shared) {
		if (bind_shared(ops, slot, tasks_per_node, node_cvd, b) < 0)
			return -1;
	} else {
		bind_own(ops, b);
	}
	if (b->cuda_device < 0)
		return 0;
	b->gpu = slurm_gpu(ops, slot, tasks_per_node, shared);
	if (phx_envops_setf(ops, "PHALANX_CUDA_DEVICE", 1, "%d", b->cuda_device))
		return -1;
	if (topo && b->gpu >= 0 && (size_t)b->gpu < topo->ngpus) {
		b->tgpu = &topo->gpus[b->gpu];
		if (b->tgpu->nic >= 0)
			b->nic = &topo->nics[b->tgpu->nic];
	}
	return 0;
}

int phx_bind_cpus(const struct phx_envops *ops, const cpu_set_t *allowed_mask,
		  struct phx_binding *b)
{
	hwloc_bitmap_t allowed, want;
	int rc = 0, weight;

	b->cpus_set = false;
	b->cpus[0] = '\0';
	if (!b->tgpu || !b->tgpu->cpuset)
		return 0;
	allowed = hwloc_bitmap_alloc();
	want = hwloc_bitmap_alloc();
	if (!allowed || !want)
		goto out;
	hwloc_cpuset_from_glibc_sched_affinity(NULL, allowed, allowed_mask, sizeof(*allowed_mask));
	hwloc_bitmap_and(want, allowed, b->tgpu->cpuset);
	if (hwloc_bitmap_iszero(want) || hwloc_bitmap_isequal(want, allowed))
		goto out;
	hwloc_cpuset_to_glibc_sched_affinity(NULL, want, &b->mask, sizeof(b->mask));
	hwloc_bitmap_list_snprintf(b->cpus, sizeof(b->cpus), want);
	b->cpus_set = true;
	/* Tasks sharing a NUMA node share its cores. */
	weight = hwloc_bitmap_weight(want);
	rc = phx_envops_setf(ops, "OMP_NUM_THREADS", 0, "%d", weight > 0 ? weight : 1);
out:
	hwloc_bitmap_free(allowed);
	hwloc_bitmap_free(want);
	return rc;
}

int phx_bind_nic(const struct phx_envops *ops, const struct phx_binding *b)
{
	const struct phx_topo_nic *nic = b->nic;
	unsigned port = nic && nic->nports ? nic->ports[0].num : 1;

	if (!nic)
		return 0;
	if (nic->rdma && (phx_envops_setf(ops, "NCCL_IB_HCA", 0, "=%s:%u", nic->name, port) ||
			  phx_envops_setf(ops, "UCX_NET_DEVICES", 0, "%s:%u", nic->name, port)))
		return -1;
	if (nic->netdev[0] && phx_envops_setf(ops, "NCCL_SOCKET_IFNAME", 0, "=%s", nic->netdev))
		return -1;
	return 0;
}
