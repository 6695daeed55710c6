/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx-launch: one agent per node of a step, wired up over PMIx, each
 * starting and watching its node's workers (agent/), and in the batch
 * script the driver that runs those steps (driver/). See phalanx-launch(1)
 * for the user's view. Here: the exit codes, which every part returns.
 */
#ifndef PHX_LAUNCHER_LAUNCH_H
#define PHX_LAUNCHER_LAUNCH_H

/* Exit codes of phalanx-launch; see phalanx-launch(1). */
enum phx_launch_exit {
	PHX_EXIT_OK = 0,
	PHX_EXIT_WORKERS = 1, /* workers failed and no restart was left */
	PHX_EXIT_USAGE = 2, /* bad options or configuration */
	PHX_EXIT_PMIX = 3, /* PMIx wire-up or agreement failed */
	PHX_EXIT_SETUP = 4, /* placement, environment or spawning failed */
	PHX_EXIT_REPEATED = 5, /* driver: the same worker failure K times, a user error */
	PHX_EXIT_NO_NODES = 6, /* driver: too few usable nodes left for a requeue to run */
	/*
	 * Requeue the job (EX_TEMPFAIL; slurm.conf RequeueExit=75): the driver
	 * found too few healthy nodes, or the agents were preempted and their
	 * workers have saved.
	 */
	PHX_EXIT_REQUEUE = 75,
};

#endif
