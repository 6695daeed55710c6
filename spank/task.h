/* SPDX-License-Identifier: Apache-2.0 */
/* Per task, as the user, just before exec: the torchrun environment and binding. */
#ifndef PHX_SPANK_TASK_H
#define PHX_SPANK_TASK_H

#include <slurm/spank.h>

#include "spank/options.h"
#include "spank/rootcause.h"
#include "spank/step.h"

/* rootcause names the rank's TORCHELASTIC_ERROR_FILE where the step has a directory for them. */
int phx_task_init(spank_t sp, const struct phx_step *step, const struct phx_job_opts *opts,
		  const char *node_cvd, const struct phx_rootcause *rootcause);

#endif
