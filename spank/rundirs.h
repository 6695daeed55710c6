/* SPDX-License-Identifier: Apache-2.0 */
/*
 * At the end of a phalanx-launch agent step, the scratch directories of
 * the job's user whose agents are gone (common/rundir.h) are removed on
 * the node. A step that ends with a node failure has its agents killed
 * with SIGKILL, so they cannot clean up; slurmstepd outlives them.
 */
#ifndef PHX_SPANK_RUNDIRS_H
#define PHX_SPANK_RUNDIRS_H

#include <slurm/spank.h>

/* In slurmstepd's exit callback; does nothing for other steps. */
void phx_spank_sweep_rundirs(spank_t sp);

#endif
