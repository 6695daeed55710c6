/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker_env SLOT NPROC PORT: the environment phalanx-launch's agent gives
 * the worker in local slot SLOT of a one-node job of NPROC workers (layout
 * dp=*, rank 0 on 127.0.0.1:PORT), from this process's environment, one
 * NAME=VALUE per line. tests/gpu/set_device.py starts real CUDA workers
 * with it; nothing here knows CUDA.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "launcher/env.h"

extern char **environ;

static int block_map(unsigned nproc, struct phx_rankmap *map)
{
	char *nodes[] = { "localhost" };
	struct phx_layout layout;
	char err[256];

	if (phx_layout_parse("dp=*", &layout, err, sizeof(err)) < 0 ||
	    phx_layout_resolve(&layout, nproc, err, sizeof(err)) < 0 ||
	    phx_rankmap_block(&layout, nodes, 1, nproc, "localhost", map, err, sizeof(err)) < 0) {
		fprintf(stderr, "phalanx: worker_env: %s\n", err);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct phx_rankmap map = { 0 };
	struct phx_worker_ctx ctx = {
		.map = &map,
		.master_addr = "127.0.0.1",
		.run_id = "gpu-check",
		.run_dir = "/tmp",
		.hb_fd = -1,
		.node = "localhost",
	};
	struct phx_binding b;
	struct phx_envv env;
	unsigned slot, nproc;
	int rc = 1;

	if (argc != 4 || (nproc = (unsigned)atoi(argv[2])) < 1 ||
	    (slot = (unsigned)atoi(argv[1])) >= nproc) {
		fprintf(stderr, "usage: worker_env SLOT NPROC PORT (SLOT below NPROC)\n");
		return 2;
	}
	if (block_map(nproc, &map) < 0)
		return 1;
	ctx.master_port = (unsigned)atoi(argv[3]);
	ctx.agent_pid = getpid();
	if (phx_envv_from(&env, environ) < 0)
		goto out;
	if (phx_worker_env(&env, &ctx, slot, &b) < 0) {
		fprintf(stderr, "phalanx: worker_env: cannot make slot %u's environment\n", slot);
		goto free_env;
	}
	for (size_t i = 0; i < env.n; i++)
		puts(env.v[i]);
	rc = 0;
free_env:
	phx_envv_free(&env);
out:
	phx_rankmap_free(&map);
	return rc;
}
