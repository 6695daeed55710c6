/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU isolation: a task sees only the GPUs of its job (job mode) or its
 * own (task mode); the others are masked in a private mount namespace.
 */
#ifndef PHX_SPANK_ISOLATE_H
#define PHX_SPANK_ISOLATE_H

#include <slurm/spank.h>

#include "common/conf.h"
#include "spank/options.h"

/*
 * From slurm_spank_task_init_privileged (root, in the forked task). -1
 * fails the task: it never runs unisolated when isolation was asked for.
 */
int phx_isolate_task(spank_t sp, const struct phx_conf *conf, const struct phx_job_opts *opts);

/*
 * From slurm_spank_task_post_fork (slurmstepd, root, the task placed in
 * Slurm's cgroups and waiting to exec): the kernel denies the task the
 * GPUs it may not use (spank/devfilter.h).
 */
int phx_isolate_task_post_fork(spank_t sp, const struct phx_conf *conf,
			       const struct phx_job_opts *opts);

/* slurm_spank_task_exit and slurm_spank_exit: remove the filters' cgroups. */
void phx_isolate_task_exit(spank_t sp);
void phx_isolate_step_end(void);

/*
 * From slurm_spank_task_init, before anything else reads
 * CUDA_VISIBLE_DEVICES: Slurm sets a per-task value (--gpu-bind,
 * --gpus-per-task) only after task_init_privileged, in its own numbering;
 * this renumbers it for the GPUs left visible.
 */
int phx_isolate_task_env(spank_t sp);

/*
 * The step's GPUs on this node as CUDA numbers them in this task, the same
 * list in every task of the node whatever Slurm bound each task to: "" when
 * the step has none. After phx_isolate_task, in job and off modes.
 */
const char *phx_isolate_node_cvd(void);

#endif
