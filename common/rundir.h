/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private scratch directories that do not outlive their owner for long.
 * A node agent keeps its workers' error files and its checkpoint socket
 * in a directory under TMPDIR; an agent that is killed (a node death,
 * Slurm's SIGKILL after KillWait) cannot remove it. So each directory
 * holds a lock file that its owner keeps locked while it lives: the
 * kernel drops the lock with the process, and the next agent of the same
 * user to start or end sweeps every directory of its kind whose lock
 * nobody holds.
 */
#ifndef PHX_RUNDIR_H
#define PHX_RUNDIR_H

#include <stddef.h>

/* The lock file inside every run directory. */
#define PHX_RUNDIR_LOCK ".phalanx.lock"

/*
 * Makes base/prefix.XXXXXX (mode 0700) and locks it for this process:
 * *lock_fd stays open (close-on-exec) until phx_rundir_remove(). The
 * stale directories of this user's with the same prefix in base are
 * swept first. Returns 0, or -errno with out holding the path tried.
 */
int phx_rundir_make(const char *base, const char *prefix, char *out, size_t outlen, int *lock_fd);

/*
 * Removes the files of dir (one level: run directories hold no folders),
 * dir itself, and closes lock_fd; then sweeps dir's stale siblings, so
 * the last agent to end leaves none of a killed one's behind. Safe on a
 * directory not made or gone.
 */
void phx_rundir_remove(const char *dir, int lock_fd);

/*
 * Removes base's directories named prefix.* that belong to this user and
 * whose lock is free (their owner died). Never follows a link; leaves a
 * directory without a lock file alone unless it is older than a day (its
 * owner may be making it now). Returns the number removed.
 */
int phx_rundir_sweep(const char *base, const char *prefix);

#endif
