/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What changed in libslurm's API between Slurm 22.05 (Debian 12) and 24.11
 * (Debian 13), in one place. configure tries the API itself, not version
 * numbers, and defines the PHX_SLURM_* macros used here.
 */
#ifndef PHX_COMMON_SLURM_COMPAT_H
#define PHX_COMMON_SLURM_COMPAT_H

#include <stdint.h>

#include <slurm/slurm.h>

/* 23.11: hostlist_t is the struct itself, no longer a pointer to it. */
#if PHX_SLURM_HOSTLIST_T_IS_POINTER
typedef hostlist_t phx_slurm_hostlist_t;
#else
typedef hostlist_t *phx_slurm_hostlist_t;
#endif

/* 23.11: slurm_kill_job_step() takes KILL_* flags as a fourth argument. */
static inline int phx_slurm_kill_job_step(uint32_t job_id, uint32_t step_id, uint16_t sig)
{
#if PHX_SLURM_KILL_JOB_STEP_HAS_FLAGS
	return slurm_kill_job_step(job_id, step_id, sig, 0);
#else
	return slurm_kill_job_step(job_id, step_id, sig);
#endif
}

/*
 * The ranged string ("node[1-4,7]") of hl in malloc'd memory (free() it),
 * NULL when out of memory. 23.11 dropped slurm_hostlist_ranged_string_malloc();
 * slurm_hostlist_ranged_string() into a buffer is in every version.
 */
char *phx_slurm_hostlist_ranged(phx_slurm_hostlist_t hl);

/*
 * 23.11: a process must call slurm_init() before a call that talks to
 * slurmctld, or libslurm dies ("No hash plugins loaded. Was slurm_init()
 * called...?"): it no longer loads its auth plugin on first use. slurmd's
 * job prolog, where the SPANK plugin drains a node, is such a process.
 * slurm_init() is in 22.05 too and loads only what is not loaded yet, so
 * this calls it once per process, harmless where the program did already.
 * Looked up at run time: the plugin does not link libslurm.
 */
void phx_slurm_init(void);

/*
 * 24.11 dropped slurm_get_errno(): the Slurm calls leave their error in
 * errno, which is all slurm_get_errno() ever returned; read errno.
 */

#endif
