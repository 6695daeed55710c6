/* SPDX-License-Identifier: Apache-2.0 */
/* Per task, as the user, just before exec: the torchrun environment and binding. */
#ifndef PHX_SPANK_TASK_H
#define PHX_SPANK_TASK_H

#include <slurm/spank.h>

#include "spank/options.h"
#include "spank/step.h"

int phx_task_init(spank_t sp, const struct phx_step *step, const struct phx_job_opts *opts);

/*
 * Moves entry `own` of a comma list ("3,5,6,7" or GPU UUIDs) to the front,
 * keeping the others in order. Returns 0, or -1 when own is out of range.
 */
int phx_list_own_first(const char *list, unsigned own, char *out, size_t len);
/* Entry `index` of a comma list as an unsigned number; -1 when missing or not a number. */
long phx_list_number(const char *list, unsigned index);

#endif
