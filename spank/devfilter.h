/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A cgroup-v2 device filter per task: the kernel refuses the task every
 * open of the GPUs it may not use, whatever path it takes to them (a
 * sibling's /proc/PID/root/dev/..., a device node of its own making),
 * which a mount namespace alone cannot.
 */
#ifndef PHX_SPANK_DEVFILTER_H
#define PHX_SPANK_DEVFILTER_H

#include <stddef.h>
#include <sys/types.h>

/* What one task's filter holds until the task and its step have ended. */
struct phx_devfilter {
	char cgroup[4096]; /* a cgroup made for the task, "" when none was made */
	/*
	 * The program array through which ours calls the site's program it
	 * replaced: the kernel empties such an array when no process holds
	 * it any more, so it is held until the step ends. -1: none.
	 */
	int chain_fd;
};

/*
 * Denies process pid and its descendants every access to the n character
 * devices in deny (st_rdev values). Where pid's cgroup holds pid alone
 * (Slurm's task cgroup), the program goes there; else a cgroup "name"
 * is made under it and pid moved into it (made->cgroup). The site's own
 * device programs (Slurm's ConstrainDevices, systemd's DevicePolicy) keep
 * applying: this one is added beside them, or calls theirs for every
 * device it does not deny. Root only. 0, or -1 with why filled.
 */
int phx_devfilter_apply(pid_t pid, const dev_t *deny, unsigned n, const char *name,
			struct phx_devfilter *made, char *why, size_t why_len);

/*
 * After the task's processes have ended: removes the cgroup made for it
 * and lets go of the chain. 0, or -1 with errno (EBUSY: a process of the
 * task is left; the chain is kept for it).
 */
int phx_devfilter_release(struct phx_devfilter *made);

#endif
