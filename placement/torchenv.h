/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The environment of one rank, the same for a task the SPANK plugin starts
 * and for a worker phalanx-launch starts: the torchrun contract (RANK,
 * LOCAL_RANK, WORLD_SIZE, ..., MASTER_ADDR, MASTER_PORT), the layout
 * coordinates (PHALANX_LAYOUT, PHALANX_<DIM>_RANK/_SIZE) and the binding
 * (the rank's GPU as CUDA device LOCAL_RANK, the CPUs near that GPU,
 * the paired NIC for NCCL and UCX). The caller says where variables are
 * read and written, so the plugin writes through spank_setenv() and the
 * launcher into the worker's own environment block.
 */
#ifndef PHX_TORCHENV_H
#define PHX_TORCHENV_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include "placement/rankmap.h"
#include "placement/topo.h"

struct phx_envops {
	/* The value of name into buf: 0, or -1 when it is not set. */
	int (*get)(void *ctx, const char *name, char *buf, size_t len);
	/* Sets name; with overwrite 0 a value already there stays. 0 or -1. */
	int (*set)(void *ctx, const char *name, const char *value, int overwrite);
	void *ctx;
};

/* printf into the environment; 0 or -1. */
int phx_envops_setf(const struct phx_envops *ops, const char *name, int overwrite, const char *fmt,
		    ...) __attribute__((format(printf, 4, 5)));

/*
 * The torchrun variables and the layout coordinates of the rank in local
 * slot `slot` of map. master is MASTER_ADDR (NULL: map->master); a
 * MASTER_PORT already set wins over master_port, as the user's knob.
 */
int phx_torchenv_rank(const struct phx_envops *ops, const struct phx_rankmap *map, unsigned slot,
		      const char *master, unsigned master_port);

/*
 * One role of an MPMD job, around a map built for the role alone (ranks
 * 0..map->world-1 over the role's nodes): the global view over all roles.
 */
struct phx_role_env {
	const char *name;
	unsigned long rank_offset; /* global rank of the role's rank 0 */
	unsigned long world; /* ranks of all roles */
	unsigned node_offset; /* the role's first node among all nodes */
	unsigned nodes; /* nodes of all roles */
	const char *master_addr; /* the role's own rendezvous, for its own process group */
	unsigned master_port;
};

/*
 * After phx_torchenv_rank() with the role's map: RANK, WORLD_SIZE,
 * GROUP_RANK and GROUP_WORLD_SIZE over all roles, ROLE_NAME, ROLE_RANK and
 * ROLE_WORLD_SIZE within the role, PHALANX_ROLE_MASTER_ADDR/_PORT. The
 * layout coordinates stay the role's.
 */
int phx_torchenv_role(const struct phx_envops *ops, const struct phx_rankmap *map, unsigned slot,
		      const struct phx_role_env *role);

struct phx_binding {
	long gpu; /* Slurm's physical index of the GPU, -1 when none */
	int cuda_device; /* its CUDA device number (LOCAL_RANK or 0), -1 when none */
	char visible[1024]; /* CUDA_VISIBLE_DEVICES of the rank, "" when it has no GPUs */
	const struct phx_topo_gpu *tgpu;
	const struct phx_topo_nic *nic;
	bool cpus_set; /* mask differs from what the process has */
	cpu_set_t mask; /* the CPUs to bind to when cpus_set */
	char cpus[1024]; /* the same as a list, "" when unchanged */
};

/*
 * The rank's GPU, the way frameworks pick it (torch.cuda.set_device(LOCAL_RANK)):
 * with node_cvd (the GPUs every rank of the node sees, in one order) the
 * rank's CUDA_VISIBLE_DEVICES becomes node_cvd and its GPU is entry `slot`
 * (== LOCAL_RANK), so CUDA IPC, P2P and NCCL's intra-node paths work as
 * under torchrun; with node_cvd NULL the rank sees only its own GPUs (task
 * isolation) and its GPU is CUDA device 0. Sets PHALANX_CUDA_DEVICE to
 * that device number, and b's topology entries of the GPU and its NIC
 * (topo may be NULL). Nothing happens when the step has no GPUs.
 */
int phx_bind_gpu(const struct phx_envops *ops, const struct phx_node_topo *topo, unsigned slot,
		 unsigned tasks_per_node, const char *node_cvd, struct phx_binding *b);
/*
 * The CPUs near the GPU within allowed (what Slurm gave), into b->mask,
 * and OMP_NUM_THREADS to match unless set. The caller applies the mask
 * (sched_setaffinity) in the process that runs the rank.
 */
int phx_bind_cpus(const struct phx_envops *ops, const cpu_set_t *allowed, struct phx_binding *b);
/* NCCL_IB_HCA, UCX_NET_DEVICES and NCCL_SOCKET_IFNAME from the paired NIC; set values win. */
int phx_bind_nic(const struct phx_envops *ops, const struct phx_binding *b);

#endif
