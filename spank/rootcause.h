/* SPDX-License-Identifier: Apache-2.0 */
/*
 * torch's @record root cause on a plain srun, as torchrun reports it:
 * every task of a step with a layout gets a TORCHELASTIC_ERROR_FILE in a
 * private directory of the job's user that slurmstepd makes for the step
 * (common/rundir.h); when a task fails, slurmstepd reads its file as that
 * user and reports the exception with the rank, which srun prints.
 */
#ifndef PHX_SPANK_ROOTCAUSE_H
#define PHX_SPANK_ROOTCAUSE_H

#include <limits.h>
#include <sys/types.h>

#include <slurm/spank.h>

#include "spank/step.h"

struct phx_rootcause {
	char dir[PATH_MAX]; /* empty: no error files for this step */
	int lock_fd;
	dev_t lock_dev; /* the lock file, to tell it from a reused descriptor */
	ino_t lock_ino;
};

/* In user_init, as the job's user: makes the step's directory. Never fails the step. */
void phx_rootcause_prepare(spank_t sp, struct phx_rootcause *rc);

/* The error file of a rank, or "" when the step has none. */
void phx_rootcause_file(const struct phx_rootcause *rc, unsigned long rank, char *buf, size_t len);

/* In task_exit, as root: reports the root cause of a task that failed. */
void phx_rootcause_task_exit(spank_t sp, const struct phx_rootcause *rc,
			     const struct phx_step *step);

/* In slurmstepd's exit: removes the directory, as the job's user. */
void phx_rootcause_remove(spank_t sp, struct phx_rootcause *rc);

#endif
