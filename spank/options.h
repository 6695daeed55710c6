/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin's srun/sbatch/salloc options and their PHX_* environment
 * twins. A flag wins over its twin; both are checked the same way.
 */
#ifndef PHX_SPANK_OPTIONS_H
#define PHX_SPANK_OPTIONS_H

#include <stdbool.h>

#include <slurm/spank.h>

#include "common/conf.h"

struct phx_job_opts {
	char *layout; /* --phx-layout, NULL when not given */
	enum phx_place_mode place;
	enum phx_isolate_mode isolate;
	bool explain;
	bool place_set; /* set by flag or twin, not by site default */
	bool isolate_set;
	bool explain_set;
};

extern struct phx_job_opts phx_opts;

/* Site defaults from phalanx.yaml, before any flag is looked at. */
void phx_opts_defaults(const struct phx_conf *conf);
int phx_opts_register(spank_t sp);
/* Applies PHX_* twins for the options no flag set; -1 on a bad value. */
int phx_opts_apply_env(spank_t sp);
void phx_opts_free(void);

#endif
