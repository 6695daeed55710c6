/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The environment of a worker (env.c): the agent's, less its PMIx
 * identity, plus the rank's; and where its error file goes. Pure.
 */
#ifndef PHX_LAUNCHER_ENV_H
#define PHX_LAUNCHER_ENV_H

#include <sched.h>
#include <stddef.h>
#include <sys/types.h>

#include "placement/rankmap.h"
#include "placement/topo.h"
#include "placement/torchenv.h"

/* An environment block under construction: "NAME=VALUE" strings, NULL-terminated. */
struct phx_envv {
	char **v;
	size_t n, cap;
};

/* A copy of env without the agent's own PMIx variables. 0 or -1. */
int phx_envv_from(struct phx_envv *e, char *const *env);
int phx_envv_get(void *ctx, const char *name, char *buf, size_t len);
int phx_envv_set(void *ctx, const char *name, const char *value, int overwrite);
const char *phx_envv_value(const struct phx_envv *e, const char *name);
void phx_envv_free(struct phx_envv *e);

/* GPUs in a CUDA_VISIBLE_DEVICES value (NULL, "" and "NoDevFiles": 0). */
unsigned phx_cuda_count(const char *cvd);

/* What every worker of one node and epoch shares. */
struct phx_worker_ctx {
	const struct phx_rankmap *map;
	const struct phx_node_topo *topo; /* NULL: no binding beyond GPUs */
	const char *master_addr;
	unsigned master_port;
	unsigned restart_count, max_restarts;
	const char *run_id;
	const char *run_dir; /* error files go here */
	int hb_fd; /* the heartbeat page */
	pid_t agent_pid;
	const char *node;
	const cpu_set_t *cpus; /* the agent's CPUs, NULL: no CPU binding */
	const struct phx_role_env *role; /* map is this role's */
};

/*
 * A role in a step of its own (driver mode): the job's and the role's epoch
 * when its workers started, and the file the agent keeps at the latest
 * cross-role rendezvous document (phalanx-launch(1), ROLES IN STEPS).
 */
#define PHX_EPOCH_ENV "PHALANX_EPOCH"
#define PHX_ROLE_EPOCH_ENV "PHALANX_ROLE_EPOCH"
#define PHX_RENDEZVOUS_FILE_ENV "PHALANX_RENDEZVOUS_FILE"

/* The error file of a rank in an epoch, into buf. */
void phx_worker_error_file(const struct phx_worker_ctx *c, unsigned long rank, char *buf,
			   size_t len);
/* The full environment of local slot `slot`; b receives the binding. 0 or -1. */
int phx_worker_env(struct phx_envv *env, const struct phx_worker_ctx *c, unsigned slot,
		   struct phx_binding *b);

#endif
