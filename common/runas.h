/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Work done for a user by a root process (slurmstepd, `phalanx ckpt
 * verify` run by an admin) runs in a child that has become that user, so
 * a path the user controls is opened with the user's rights, never root's.
 */
#ifndef PHX_RUNAS_H
#define PHX_RUNAS_H

#include <stddef.h>
#include <sys/types.h>

/*
 * fn's return is the child's exit status (0-254); out_fd is where it may
 * write what the caller wants back (-1 when the caller wants nothing).
 */
typedef int (*phx_runas_fn)(void *arg, int out_fd);

/*
 * Runs fn(arg, out_fd) in a child with uid, gid and no supplementary
 * groups, killed after timeout_s seconds (0: no limit), so a user's FIFO
 * or slow file cannot hold the caller. What the child writes to out_fd
 * lands NUL-terminated in out (at most outlen - 1 bytes; the rest is
 * dropped); out NULL gives the child no pipe. Returns fn's return, or -1
 * when the child could not start, become the user, or ran out of time.
 */
int phx_run_as(uid_t uid, gid_t gid, unsigned timeout_s, phx_runas_fn fn, void *arg, char *out,
	       size_t outlen);

#endif
