/* SPDX-License-Identifier: Apache-2.0 */
/* srun's side: refuse a layout that cannot work before anything starts. */
#ifndef PHX_SPANK_LOCAL_H
#define PHX_SPANK_LOCAL_H

#include <slurm/spank.h>

#include "spank/options.h"

/* In init_post_opt: the spec itself. */
int phx_local_check_spec(const struct phx_job_opts *opts);
/* In local_user_init, once the step's size is known. */
int phx_local_check_step(spank_t sp, const struct phx_job_opts *opts);

#endif
