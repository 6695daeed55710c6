/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>

#include "placement/layout.h"
#include "common/log.h"
#include "spank/local.h"

int phx_local_check_spec(const struct phx_job_opts *opts)
{
	struct phx_layout layout;
	char err[512];

	if (!opts->layout)
		return 0;
	if (phx_layout_parse(opts->layout, &layout, err, sizeof(err)) < 0) {
		phx_error("--phx-layout=%s: %s", opts->layout, err);
		return -1;
	}
	return 0;
}

int phx_local_check_step(spank_t sp, const struct phx_job_opts *opts)
{
	struct phx_layout layout;
	uint32_t world = 0, nnodes = 0;
	char err[512];

	if (!opts->layout || opts->place == PHX_PLACE_OFF)
		return 0;
	if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &world) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_NNODES, &nnodes) != ESPANK_SUCCESS || !world || !nnodes)
		return 0; /* not known here: the tasks check again */
	if (phx_layout_parse(opts->layout, &layout, err, sizeof(err)) < 0 ||
	    phx_layout_resolve(&layout, world, err, sizeof(err)) < 0) {
		phx_error("--phx-layout=%s does not fit this step of %u tasks: %s", opts->layout,
			  world, err);
		return -1;
	}
	if (world % nnodes) {
		phx_error("--phx-layout needs the same number of tasks on every node, but %u tasks "
			  "on %u nodes do not divide; use --ntasks-per-node",
			  world, nnodes);
		return -1;
	}
	if (opts->isolate == PHX_ISOLATE_TASK && world / nnodes > 1)
		phx_warn("--phx-isolate=task: each task sees only its own GPU, as CUDA device 0 "
			 "(PHALANX_CUDA_DEVICE=0), while LOCAL_RANK counts the tasks of a node: "
			 "torch.cuda.set_device(LOCAL_RANK) fails in all but the first; use "
			 "--phx-isolate=job (the default), or select PHALANX_CUDA_DEVICE");
	if (layout.size[PHX_DIM_TP] > world / nnodes)
		phx_warn(
			"tp=%lu is larger than the %u tasks per node: tensor-parallel traffic will "
			"cross the network; use tp<=%u or more tasks per node",
			layout.size[PHX_DIM_TP], world / nnodes, world / nnodes);
	return 0;
}
