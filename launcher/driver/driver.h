/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx-launch driver mode: in the batch script, it runs the agents'
 * step with srun, watches it, and relaunches it on the allocation's
 * healthy nodes when it fails for a node reason. driver.c does the
 * processes and libslurm; the decisions are driver_plan.h's.
 */
#ifndef PHX_LAUNCHER_DRIVER_DRIVER_H
#define PHX_LAUNCHER_DRIVER_DRIVER_H

struct phx_launch_opts;
struct phx_conf;
/* Driver mode: the exit code of phalanx-launch. argv: its whole command line. */
int phx_driver_main(struct phx_launch_opts *o, const struct phx_conf *conf, int argc, char **argv);

#endif
