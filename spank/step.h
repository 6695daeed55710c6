/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What slurmstepd works out once per step, before it forks the tasks: the
 * placement, this node's rank map and its topology. Tasks inherit it.
 */
#ifndef PHX_SPANK_STEP_H
#define PHX_SPANK_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include <slurm/spank.h>

#include "common/conf.h"
#include "placement/placement.h"
#include "placement/rankmap.h"
#include "placement/topo.h"
#include "spank/options.h"

struct phx_step {
	bool active; /* a layout applies to this step */
	char error[1024]; /* why the step can't run; reported by the tasks */
	uint32_t job_id, step_id;
	char node[256];
	unsigned master_port;
	struct phx_rankmap map;
	struct phx_plan *plan; /* topo mode, for --phx-explain */
	struct phx_node_topo *topo; /* NULL when the node could not be read */
};

/*
 * Prepares the step. Never fails the step itself (a failing user_init
 * would drain the node for batch jobs); a problem lands in step->error and
 * phx_task_init() fails the tasks with it.
 */
void phx_step_prepare(spank_t sp, const struct phx_conf *conf, const struct phx_job_opts *opts,
		      struct phx_step *step);
void phx_step_free(struct phx_step *step);
/* The Slurm name of the node this slurmstepd runs on; 0 or -1. */
int phx_step_node_name(spank_t sp, char *buf, size_t len);

/* "8(x4)", "8,8" or "8": the one count every node runs, or 0 when they differ. */
unsigned phx_uniform_tasks_per_node(const char *spec);
#endif
