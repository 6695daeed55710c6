/* SPDX-License-Identifier: Apache-2.0 */
/* The environment of a worker: the agent's, less its PMIx identity, plus the rank's. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/proto/heartbeat.h"
#include "placement/torchenv.h"
#include "launcher/env.h"

static int envv_grow(struct phx_envv *e)
{
	size_t cap = e->cap ? e->cap * 2 : 64;
	char **v;

	if (e->n + 2 <= e->cap)
		return 0;
	v = realloc(e->v, cap * sizeof(*v));
	if (!v)
		return -1;
	e->v = v;
	e->cap = cap;
	return 0;
}

static long envv_find(const struct phx_envv *e, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < e->n; i++) {
		if (!strncmp(e->v[i], name, len) && e->v[i][len] == '=')
			return (long)i;
	}
	return -1;
}

/*
 * The agent is the PMIx client of its rank; a worker that saw PMIX_RANK
 * and the server's URI would claim to be the agent.
 */
static int inherited(const char *kv)
{
	return strncmp(kv, "PMIX_", 5) && strncmp(kv, PHX_HB_ENV_SHM "=", sizeof(PHX_HB_ENV_SHM)) &&
	       strncmp(kv, PHX_HB_ENV_SLOT "=", sizeof(PHX_HB_ENV_SLOT));
}

int phx_envv_from(struct phx_envv *e, char *const *env)
{
	memset(e, 0, sizeof(*e));
	if (envv_grow(e))
		return -1;
	e->v[0] = NULL;
	for (size_t i = 0; env && env[i]; i++) {
		if (!strchr(env[i], '=') || !inherited(env[i]))
			continue;
		if (envv_grow(e))
			goto fail;
		e->v[e->n] = strdup(env[i]);
		if (!e->v[e->n])
			goto fail;
		e->v[++e->n] = NULL;
	}
	return 0;
fail:
	phx_envv_free(e);
	return -1;
}

const char *phx_envv_value(const struct phx_envv *e, const char *name)
{
	long i = envv_find(e, name);

	return i < 0 ? NULL : strchr(e->v[i], '=') + 1;
}

int phx_envv_get(void *ctx, const char *name, char *buf, size_t len)
{
	const char *v = phx_envv_value(ctx, name);

	if (!v)
		return -1;
	snprintf(buf, len, "%s", v);
	return 0;
}

int phx_envv_set(void *ctx, const char *name, const char *value, int overwrite)
{
	struct phx_envv *e = ctx;
	long i = envv_find(e, name);
	size_t len = strlen(name) + strlen(value) + 2;
	char *kv;

	if (i >= 0 && !overwrite)
		return 0;
	kv = malloc(len);
	if (!kv)
		return -1;
	snprintf(kv, len, "%s=%s", name, value);
	if (i >= 0) {
		free(e->v[i]);
		e->v[i] = kv;
		return 0;
	}
	if (envv_grow(e)) {
		free(kv);
		return -1;
	}
	e->v[e->n] = kv;
	e->v[++e->n] = NULL;
	return 0;
}

void phx_envv_free(struct phx_envv *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->v[i]);
	free(e->v);
	memset(e, 0, sizeof(*e));
}

unsigned phx_cuda_count(const char *cvd)
{
	unsigned n = 1;

	if (!cvd || !*cvd || !strcmp(cvd, "NoDevFiles"))
		return 0;
	for (; *cvd; cvd++)
		n += *cvd == ',';
	return n;
}

void phx_worker_error_file(const struct phx_worker_ctx *c, unsigned long rank, char *buf,
			   size_t len)
{
	snprintf(buf, len, "%s/error-rank%lu-restart%u.json", c->run_dir, rank, c->restart_count);
}

static int elastic_env(const struct phx_envops *ops, const struct phx_worker_ctx *c,
		       unsigned long rank)
{
	char path[4096];

	phx_worker_error_file(c, rank, path, sizeof(path));
	return phx_envops_setf(ops, "TORCHELASTIC_RESTART_COUNT", 1, "%u", c->restart_count) ||
			       phx_envops_setf(ops, "TORCHELASTIC_MAX_RESTARTS", 1, "%u",
					       c->max_restarts) ||
			       phx_envops_setf(ops, "TORCHELASTIC_RUN_ID", 1, "%s", c->run_id) ||
			       /* There is no agent store: rank 0 hosts the c10d store itself. */
			       phx_envops_setf(ops, "TORCHELASTIC_USE_AGENT_STORE", 1, "False") ||
			       phx_envops_setf(ops, "TORCHELASTIC_ERROR_FILE", 1, "%s", path) ||
			       /* torchrun's defaults, which a user's value overrides. */
			       phx_envops_setf(ops, "TORCH_NCCL_ASYNC_ERROR_HANDLING", 0, "1")
		       ? -1
		       : 0;
}

static int phalanx_env(const struct phx_envops *ops, const struct phx_worker_ctx *c, unsigned slot)
{
	return phx_envops_setf(ops, PHX_HB_ENV_SHM, 1, "%d", c->hb_fd) ||
			       phx_envops_setf(ops, PHX_HB_ENV_SLOT, 1, "%u", slot) ||
			       phx_envops_setf(ops, "PHALANX_AGENT_PID", 1, "%ld",
					       (long)c->agent_pid) ||
			       phx_envops_setf(ops, "PHALANX_NODE", 1, "%s", c->node) ||
			       phx_envops_setf(ops, "PHALANX_RUN_DIR", 1, "%s", c->run_dir)
		       ? -1
		       : 0;
}

/*
 * Slurm's task variables as if srun had started one task per worker, so
 * libraries that take their rank from Slurm (Lightning, submitit, mpi4py
 * style launchers) agree with RANK, LOCAL_RANK and WORLD_SIZE: the agent's
 * own (its node's index as SLURM_PROCID, SLURM_LOCALID=0, one task per
 * node) would make every node's workers one rank.
 */
static int slurm_task_env(const struct phx_envops *ops, const struct phx_worker_ctx *c,
			  unsigned slot)
{
	unsigned long offset = c->role ? c->role->rank_offset : 0;
	unsigned long world = c->role ? c->role->world : c->map->world;
	unsigned node = (c->role ? c->role->node_offset : 0) + c->map->group_rank;
	unsigned nodes = c->role ? c->role->nodes : c->map->group_world;
	unsigned tpn = c->map->tasks_per_node;
	char gtids[4096];
	size_t used = 0;

	gtids[0] = '\0';
	for (unsigned i = 0; i < tpn && used < sizeof(gtids); i++)
		used += (size_t)snprintf(gtids + used, sizeof(gtids) - used, "%s%lu", i ? "," : "",
					 offset + c->map->slot_rank[i]);
	return phx_envops_setf(ops, "SLURM_PROCID", 1, "%lu", offset + c->map->slot_rank[slot]) ||
			       phx_envops_setf(ops, "SLURM_LOCALID", 1, "%u", slot) ||
			       phx_envops_setf(ops, "SLURM_NODEID", 1, "%u", node) ||
			       phx_envops_setf(ops, "SLURM_NTASKS", 1, "%lu", world) ||
			       phx_envops_setf(ops, "SLURM_NPROCS", 1, "%lu", world) ||
			       phx_envops_setf(ops, "SLURM_STEP_NUM_TASKS", 1, "%lu", world) ||
			       phx_envops_setf(ops, "SLURM_STEP_NUM_NODES", 1, "%u", nodes) ||
			       phx_envops_setf(ops, "SLURM_NTASKS_PER_NODE", 1, "%u", tpn) ||
			       phx_envops_setf(ops, "SLURM_TASKS_PER_NODE", 1, "%u(x%u)", tpn,
					       nodes) ||
			       phx_envops_setf(ops, "SLURM_STEP_TASKS_PER_NODE", 1, "%u(x%u)", tpn,
					       nodes) ||
			       phx_envops_setf(ops, "SLURM_GTIDS", 1, "%s", gtids)
		       ? -1
		       : 0;
}

int phx_worker_env(struct phx_envv *env, const struct phx_worker_ctx *c, unsigned slot,
		   struct phx_binding *b)
{
	struct phx_envops ops = { phx_envv_get, phx_envv_set, env };
	unsigned long offset = c->role ? c->role->rank_offset : 0;
	char node_cvd[1024];

	/* The agent's GPUs are the node's: every worker sees them in that order. */
	if (phx_envv_get(env, "CUDA_VISIBLE_DEVICES", node_cvd, sizeof(node_cvd)) < 0)
		node_cvd[0] = '\0';
	if (slot >= c->map->tasks_per_node ||
	    phx_torchenv_rank(&ops, c->map, slot, c->master_addr, c->master_port) ||
	    (c->role && phx_torchenv_role(&ops, c->map, slot, c->role)) ||
	    elastic_env(&ops, c, offset + c->map->slot_rank[slot]) || phalanx_env(&ops, c, slot) ||
	    slurm_task_env(&ops, c, slot) ||
	    phx_bind_gpu(&ops, c->topo, slot, c->map->tasks_per_node, node_cvd, b) ||
	    (c->cpus && phx_bind_cpus(&ops, c->cpus, b)) || phx_bind_nic(&ops, b))
		return -1;
	return phx_envops_setf(&ops, "OMP_NUM_THREADS", 0, "1");
}
