/* SPDX-License-Identifier: Apache-2.0 */
/* The job prolog: node health checks, once per node and job, as root. */
#ifndef PHX_SPANK_PROLOG_H
#define PHX_SPANK_PROLOG_H

#include <slurm/spank.h>

#include "common/conf.h"

/*
 * Runs the checks of phalanx.yaml's health section. On a failure it logs
 * one line per failed check, sets the node's drain reason to the first
 * one (health.drain_on_failure) and returns -1, so that the prolog fails,
 * Slurm drains the node and requeues the job. 0 when all is well or the
 * checks are off.
 */
int phx_prolog_run(spank_t sp, const struct phx_conf *conf);
/*
 * The configuration did not load (the error is logged): fails the prolog
 * with a drain reason that says so, as Slurm drains the node anyway.
 */
int phx_prolog_bad_config(void);

#endif
