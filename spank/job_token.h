/* SPDX-License-Identifier: Apache-2.0 */
/* PHALANX_JOB_TOKEN, minted as root in task_init_privileged. */
#ifndef PHX_SPANK_JOB_TOKEN_H
#define PHX_SPANK_JOB_TOKEN_H

#include <slurm/spank.h>

#include "common/conf.h"

int phx_job_token_set(spank_t sp, const struct phx_conf *conf);

#endif
